package openbot

import kotlinx.coroutines.flow.toList
import com.google.gson.JsonArray
import com.google.gson.JsonObject
import com.google.gson.JsonParser
import java.io.File
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import uniffi.openbot.*
import uniffi.openbot.Client
import uniffi.openbot.schema.ContentPart
import uniffi.openbot.schema.Event
import uniffi.openbot.schema.EventKind
import uniffi.openbot.HostTool
import uniffi.openbot.textInput

/** Runs every shared scenario of tests/scenarios in both modes (see the README there). */
class ScenarioTest {
    @TestFactory
    fun scenarios(): List<DynamicTest> {
        val dir = File(System.getProperty("openbot.scenarios").orEmpty())
        val files = dir.listFiles { f -> f.name.endsWith(".json") }?.sortedBy { it.name }.orEmpty()
        assertTrue(files.isNotEmpty(), "no scenarios in ${dir.absolutePath}")
        return files.flatMap { file ->
            Mode.entries.map { mode ->
                DynamicTest.dynamicTest("${file.nameWithoutExtension} (${mode.name.lowercase()})") {
                    run(JsonParser.parseString(file.readText()).asJsonObject, mode)
                }
            }
        }
    }

    private fun run(scenario: JsonObject, mode: Mode) = runBlocking {
        val tools = scenario.obj("tools").entrySet().map { (name, behaviour) ->
            when (behaviour.asString) {
                "sum" -> SumTool(name)
                "fail" -> FailTool(name)
                else -> error("unknown tool behaviour ${behaviour.asString}")
            } as HostTool
        }
        val client = open(mode, tools)
        try {
            withTimeout(WAIT_MS) { play(client, scenario) }
        } finally {
            client.shutdown()
            client.close()
        }
    }

    private suspend fun play(client: Client, scenario: JsonObject) {
        val spec = scenario.obj("bot").deepCopy()
        spec.addProperty("model", scriptedModel(scenario.obj("script").toString()))
        val bot = client.createBotJson(spec.toString())
        val chat = client.createChat(bot.id)
        for ((index, turn) in scenario.array("turns").map { it.asJsonObject }.withIndex()) {
            val receipt = client.send(chat.id, textInput(turn["send"].asString, null))
            val events = client.allEvents(receipt.executionId)
            check(turn.obj("expect"), events, "turn ${index + 1}")
        }
        scenario["history"]?.let { assertEquals(it.asInt, client.historyFlow(chat.id).toList().size, "history") }
        for (expected in scenario.array("errors").map { it.asJsonObject }) {
            val op = expected["op"].asString
            val e = expectError {
                when (op) {
                    "get_chat" -> client.getChat(expected["id"].asString)
                    "get_bot" -> client.getBot(expected["id"].asString)
                    "get_execution" -> client.getExecution(expected["id"].asString)
                    "create_bot" -> client.createBotJson(expected["spec"].toString())
                    else -> error("unknown op $op")
                }
            }
            assertEquals(expected["code"].asString, e.code, "$op: $e")
        }
    }

    private fun check(expect: JsonObject, events: List<Event>, turn: String) {
        expect["outcome"]?.let { outcome ->
            val end = events.lastOrNull()?.kind as? EventKind.TurnEnded
                ?: throw AssertionError("$turn: the last event is not turn_ended: ${events.lastOrNull()?.json}")
            assertEquals(outcome.asString, end.outcome.name.lowercase(), "$turn: outcome")
        }
        expect["events"]?.let { types ->
            val seen = events.map { it.eventType }
                .filterIndexed { i, type -> !(type == "text_delta" && i > 0 && events[i - 1].eventType == "text_delta") }
            assertEquals(types.asJsonArray.map { it.asString }, seen, "$turn: events")
        }
        expect["reply"]?.let { reply ->
            val lastStep = events.mapNotNull { (it.kind as? EventKind.ModelStepStarted)?.step }.lastOrNull()
            val text = events.mapNotNull { it.kind as? EventKind.TextDelta }
                .filter { it.step == lastStep }
                .joinToString("") { it.text }
            assertEquals(reply.asString, text, "$turn: reply")
        }
        expect["tool_results"]?.let { expected ->
            val results = events.mapNotNull { (it.kind as? EventKind.ToolResultSaved)?.result }
            assertEquals(expected.asJsonArray.size(), results.size, "$turn: tool results")
            for ((want, got) in expected.asJsonArray.map { it.asJsonObject }.zip(results)) {
                assertEquals(want["name"].asString, got.name, "$turn: tool result name")
                assertEquals(want["is_error"].asBoolean, got.isError, "$turn: tool result is_error")
                want["text"]?.let { text ->
                    val output = got.output.filterIsInstance<ContentPart.Text>().joinToString("") { it.text }
                    assertEquals(text.asString, output, "$turn: tool result text")
                }
            }
        }
    }
}

private fun JsonObject.obj(name: String): JsonObject = get(name)?.asJsonObject ?: JsonObject()

private fun JsonObject.array(name: String): JsonArray = get(name)?.asJsonArray ?: JsonArray()
