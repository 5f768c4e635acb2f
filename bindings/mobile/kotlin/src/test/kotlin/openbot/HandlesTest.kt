package openbot

import kotlinx.coroutines.flow.take
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.EnumSource
import uniffi.openbot.*
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.BotUpdate
import uniffi.openbot.schema.ErrorCategory
import uniffi.openbot.schema.EventKind
import uniffi.openbot.schema.Message
import uniffi.openbot.schema.TurnOutcome

class HandlesTest {
    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a Bot handle creates a Chat whose Turn waits for its end with the reply`(mode: Mode) = withClient(mode) { client ->
        val bot = client.createBotHandle(BotSpec(name = "Handles", model = scriptedModel("""{"steps":[{"deltas":["Hel","lo"]}]}""")))
        val chat = bot.createChat()
        assertEquals(bot.id, chat.chat.botId)
        val turn = chat.send("Hi")
        val end = turn.wait()
        assertEquals(TurnOutcome.COMPLETED, end.outcome)
        assertEquals("Hello", end.text)
        assertEquals(turn.executionId, end.executionId)
        assertNull(end.failure)
        val history = chat.history()
        assertEquals(2, history.size)
        assertTrue(history[0].message is Message.User)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a Turn's events are a Flow from the first to the end`(mode: Mode) = withClient(mode) { client ->
        val bot = client.createBotHandle(BotSpec(name = "Flow", model = scriptedModel("""{"steps":[{"deltas":["a","b"]}]}""")))
        val turn = bot.createChat().send("Hi")
        val events = turn.events().toList()
        assertEquals((1..events.size).map { it.toULong() }, events.map { it.sequence })
        assertEquals("turn_started", events.first().eventType)
        assertTrue(events.last().kind is EventKind.TurnEnded, events.last().json)
        // A second collection observes anew; a collector that stops early stops observing only.
        assertEquals(events.take(2).map { it.sequence }, turn.events().take(2).toList().map { it.sequence })
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `wait gives the text of the last model step only`(mode: Mode) {
        val add = SumTool("add")
        withClient(mode, listOf(add)) { client ->
            val script = """{"steps":[{"text":"Let me add.","tool_calls":[{"id":"c1","name":"add","arguments":{"a":1,"b":2}}]},{"text":"3"}]}"""
            val tool = uniffi.openbot.schema.ToolDefinition("add", "Adds.", OBJECT_SCHEMA)
            val bot = client.createBotHandle(BotSpec(name = "Steps", model = scriptedModel(script), tools = listOf(tool)))
            val end = bot.createChat().send("1 + 2?").wait()
            assertEquals(TurnOutcome.COMPLETED, end.outcome)
            assertEquals("3", end.text)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a failed Turn's end carries the failure and no outcome`(mode: Mode) = withClient(mode) { client ->
        val bot = client.createBotHandle(BotSpec(name = "Fails", model = scriptedModel("""{"steps":[{"error":"unauthorized"}]}""")))
        val end = bot.createChat().send("Hi").wait()
        assertNull(end.outcome)
        assertEquals(ErrorCategory.MODEL_PROVIDER, end.failureCategory)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a Bot handle updates and deletes its Bot`(mode: Mode) = withClient(mode) { client ->
        val bot = client.createBotHandle(BotSpec(name = "Old", model = scriptedModel("""{"steps":[]}""")))
        val renamed = bot.update(BotUpdate(name = "New"))
        assertEquals("New", client.botHandle(bot.id).bot.spec.name)
        renamed.delete()
        assertEquals("not_found", expectError { client.getBot(bot.id) }.code)
    }

    @Test
    fun `a paged Flow asks page after page until no cursor is left`() = runBlocking {
        val pages = mapOf(null to (listOf(1, 2) to "b"), "b" to (listOf(3) to "c"), "c" to (emptyList<Int>() to null))
        val asked = mutableListOf<String?>()
        val flow = pagedFlow({ cursor: String? -> asked += cursor; pages.getValue(cursor) }, { it.first }, { it.second })
        assertEquals(listOf(1, 2, 3), flow.toList())
        assertEquals(listOf(null, "b", "c"), asked)
        asked.clear()
        // A collector that wants two items never asks for the second page.
        assertEquals(listOf(1, 2), flow.take(2).toList())
        assertEquals(listOf<String?>(null), asked)
    }
}
