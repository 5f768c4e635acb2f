package openbot

import com.google.gson.JsonParser
import com.sun.net.httpserver.HttpServer
import java.io.File
import java.net.InetSocketAddress
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.nio.file.Files
import java.util.Collections
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import uniffi.openbot.*
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.EventKind
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.OutcomeDecision
import uniffi.openbot.schema.ToolDefinition
import uniffi.openbot.connect
import uniffi.openbot.textInput

private const val SOME_ID = "019ad1c8-0000-7000-8000-000000000000"

/**
 * A local endpoint standing for a payment service: it records the idempotency key of every call
 * and never answers the first one, as an answer lost on the way back.
 */
private class LosingEndpoint : AutoCloseable {
    val keys: MutableList<String> = Collections.synchronizedList(mutableListOf())
    private val released = CountDownLatch(1)
    private val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0).apply {
        executor = Executors.newCachedThreadPool()
        createContext("/pay") { exchange ->
            exchange.requestBody.readAllBytes()
            keys += exchange.requestHeaders.getFirst("Idempotency-Key").orEmpty()
            if (keys.size == 1) {
                released.await(60, TimeUnit.SECONDS)
                return@createContext
            }
            val answer = "paid".toByteArray()
            exchange.sendResponseHeaders(200, answer.size.toLong())
            exchange.responseBody.use { it.write(answer) }
        }
        start()
    }
    val url = "http://127.0.0.1:${server.address.port}/pay"

    override fun close() {
        released.countDown()
        server.stop(0)
    }
}

/** An `openbot serve` on a data folder of its own, killed and started again by the test. */
private class Node : AutoCloseable {
    private val bin = System.getProperty("openbot.server").orEmpty()
    private val data: File = Files.createTempDirectory("openbot-kotlin-outcomes-").toFile()
    private var process: Process? = null
    private var starts = 0
    var token = ""
        private set
    lateinit var url: String
        private set

    init {
        require(bin.isNotEmpty() && File(bin).canExecute()) { "set -Dopenbot.server=/path/to/openbot" }
        val migrate = ProcessBuilder(bin, "migrate", "--data-dir", data.path).redirectErrorStream(true).start()
        check(migrate.waitFor(60, TimeUnit.SECONDS) && migrate.exitValue() == 0) { "openbot migrate failed" }
        start()
    }

    private fun start() {
        starts += 1
        val stdout = File(data, "stdout-$starts")
        val stderr = File(data, "stderr-$starts")
        val serve = ProcessBuilder(bin, "serve", "--data-dir", data.path, "--bind", "127.0.0.1:0", "--lease-ms", "1000", "--scripted-dir", System.getProperty("java.io.tmpdir"))
            .redirectOutput(stdout)
            .redirectError(stderr)
            .start()
        process = serve
        val listening = Regex("listening on (http://[0-9.:]+)")
        val deadline = System.currentTimeMillis() + 30_000
        while (System.currentTimeMillis() < deadline) {
            val match = listening.find(stderr.readText())
            // Only the first start prints the admin token.
            val lines = stdout.readLines()
            if (match != null && (token.isNotEmpty() || (lines.isNotEmpty() && lines[0].isNotBlank()))) {
                url = match.groupValues[1]
                if (token.isEmpty()) token = lines[0].trim()
                return
            }
            check(serve.isAlive) { "openbot serve exited: " + stderr.readText() }
            Thread.sleep(50)
        }
        error("openbot serve did not start in 30 s: " + stderr.readText())
    }

    /** SIGKILL: the node dies at once, releasing nothing. */
    fun kill() {
        process?.let {
            it.destroyForcibly()
            it.waitFor(10, TimeUnit.SECONDS)
        }
        process = null
    }

    fun restart() {
        kill()
        start()
    }

    fun api(method: String, path: String, body: String) {
        val request = HttpRequest.newBuilder(URI.create(url + path))
            .header("Authorization", "Bearer $token")
            .header("Content-Type", "application/json")
            .method(method, HttpRequest.BodyPublishers.ofString(body))
            .build()
        val response = HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString())
        check(response.statusCode() in 200..299) { "$method $path answered ${response.statusCode()}: ${response.body()}" }
    }

    override fun close() {
        kill()
        data.deleteRecursively()
    }
}

/** Unknown outcomes: none in memory (deciding is refused); on a server, a lost write decided. */
class OutcomesTest {
    @Test
    fun `in memory nothing waits for a decision`() = withClient(Mode.MEMORY) { client ->
        val page = client.listUnknownOutcomes()
        assertEquals(emptyList<Any>(), page.items)
        assertNull(page.nextCursor)
        assertEquals(emptyList<Any>(), client.listUnknownOutcomes(10u).items)
    }

    @Test
    fun `in memory deciding is invalid input`() = withClient(Mode.MEMORY) { client ->
        val e = expectError { client.decideOutcome(SOME_ID, "1/tool:0/1", OutcomeDecision.GIVE_UP) }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertTrue(e.errorReason().contains("only a server has unknown outcomes"), e.errorReason())
        val bad = expectError { client.decideOutcome("not-an-id", "1/tool:0/1", OutcomeDecision.NOT_APPLIED) }
        assertTrue(bad is OpenBotException.InvalidInput, bad.toString())
    }

    @Test
    fun `a lost write is listed after a restart and an applied decision never sends it again`() = runBlocking<Unit> {
        withTimeout(90_000) {
            LosingEndpoint().use { endpoint ->
                Node().use { node ->
                    node.api("PUT", "/v1/tools/pay", """{"description":"Pays.","input_schema":{"type":"object"},"url":"${endpoint.url}"}""")
                    val model = scriptedModel(
                        """{"steps":[{"tool_calls":[{"name":"pay","arguments":{"amount":5}}]},{"text":"Paid."}]}""",
                    )
                    val first = connect(node.url, node.token, emptyList())
                    val turn = try {
                        val bot = first.createBot(BotSpec(name = "Payer", model = model, tools = listOf(ToolDefinition("pay", "Pays.", OBJECT_SCHEMA))))
                        val chat = first.createChat(bot.id)
                        first.send(chat.id, textInput("Pay 5")).executionId
                    } finally {
                        first.shutdown()
                        first.close()
                    }
                    while (endpoint.keys.isEmpty()) delay(50)
                    node.restart()

                    val client = connect(node.url, node.token, emptyList())
                    try {
                        var page = client.listUnknownOutcomes(10u)
                        while (page.items.isEmpty()) {
                            delay(100)
                            page = client.listUnknownOutcomes(10u)
                        }
                        assertNull(page.nextCursor)
                        val waiting = page.items.single()
                        assertEquals(turn, waiting.executionId)
                        assertEquals("1/tool:0/1", waiting.call)
                        assertEquals("pay", waiting.toolCall.name)
                        assertEquals(JsonParser.parseString("""{"amount":5}"""), JsonParser.parseString(waiting.toolCall.arguments))
                        assertEquals(endpoint.keys.first(), waiting.idempotencyKey)

                        val record = client.decideOutcome(turn, waiting.call, OutcomeDecision.APPLIED, "paid by hand")
                        assertEquals(OutcomeDecision.APPLIED, record.decision)
                        assertNotNull(record.tokenId)
                        assertTrue(client.allEvents(turn).last().kind is EventKind.TurnEnded)
                        assertEquals(1, endpoint.keys.size, "the write was not sent again")
                        val again = expectError { client.decideOutcome(turn, waiting.call, OutcomeDecision.NOT_APPLIED) }
                        assertTrue(again is OpenBotException.Conflict, again.toString())
                    } finally {
                        client.shutdown()
                        client.close()
                    }
                }
            }
        }
    }
}
