package openbot

import kotlinx.coroutines.flow.toList
import com.google.gson.JsonParser
import com.sun.net.httpserver.HttpServer
import java.net.InetSocketAddress
import java.util.Collections
import java.util.concurrent.atomic.AtomicInteger
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import uniffi.openbot.*
import uniffi.openbot.schema.ApprovalState
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.CreateApprovalRule
import uniffi.openbot.schema.PutHttpTool
import uniffi.openbot.schema.RuleAction
import uniffi.openbot.Client
import uniffi.openbot.schema.Decision
import uniffi.openbot.schema.Event
import uniffi.openbot.schema.EventKind
import uniffi.openbot.schema.ExecutionKind
import uniffi.openbot.schema.ExecutionState
import uniffi.openbot.schema.Message
import uniffi.openbot.schema.ContentPart
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.ToolDefinition
import uniffi.openbot.textInput

private const val UNKNOWN = "019ad1c8-0000-7000-8000-000000000000"

/** A local HTTP endpoint standing for a write to the world: it records the body of every call. */
internal class Endpoint : AutoCloseable {
    val calls: MutableList<String> = Collections.synchronizedList(mutableListOf())
    private val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0).apply {
        createContext("/pay") { exchange ->
            calls += exchange.requestBody.readAllBytes().decodeToString()
            val answer = "paid".toByteArray()
            exchange.sendResponseHeaders(200, answer.size.toLong())
            exchange.responseBody.use { it.write(answer) }
        }
        start()
    }
    val url = "http://127.0.0.1:${server.address.port}/pay"

    override fun close() = server.stop(0)
}

private val tools = AtomicInteger()

/**
 * Registers the endpoint as an HTTP tool under a fresh name with an `ask` rule, and creates a
 * Bot whose model calls it once and then answers. Returns the Bot's ID and the tool's name.
 */
internal suspend fun Client.payingBot(endpoint: Endpoint): Pair<String, String> {
    val tool = "pay_kt_${tools.incrementAndGet()}"
    putTool(tool, PutHttpTool(description = "Pays an amount.", inputSchema = OBJECT_SCHEMA, url = endpoint.url))
    createRule(CreateApprovalRule(tool = tool, action = RuleAction.ASK))
    val model = scriptedModel(
        """{"steps":[{"tool_calls":[{"id":"call_1","name":"$tool","arguments":{"amount":5}}]},{"text":"I asked for approval."}]}""",
    )
    val bot = createBot(BotSpec(name = "Payer", model = model, tools = listOf(ToolDefinition(tool, "Pays an amount.", OBJECT_SCHEMA))))
    return bot.id to tool
}

/** What a Turn that asked for approval showed on its stream. */
private class Asked(
    val chatId: String,
    val events: List<Event>,
    val requested: EventKind.ApprovalRequested,
    val child: EventKind.ChildStarted,
)

/** Sends input to a new Chat of the Bot and reads the Turn's events to its end. */
private suspend fun Client.askForPayment(botId: String): Asked {
    val chat = createChat(botId)
    val events = allEvents(send(chat.id, textInput("Pay 5")).executionId)
    val types = events.map { it.eventType }
    val requested = events.firstNotNullOfOrNull { it.kind as? EventKind.ApprovalRequested }
    val child = events.firstNotNullOfOrNull { it.kind as? EventKind.ChildStarted }
    assertNotNull(requested, "no approval_requested event in $types")
    assertNotNull(child, "no child_started event in $types")
    return Asked(chat.id, events, requested!!, child!!)
}

private suspend fun Client.pending(tool: String) =
    listApprovalsFlow(ApprovalState.PENDING).toList().filter { it.call.name == tool }

class ApprovalsTest {
    @Test
    fun `in memory listApprovals is empty`() = withClient(Mode.MEMORY) { client ->
        assertEquals(emptyList<Any>(), client.listApprovalsFlow().toList())
        assertEquals(emptyList<Any>(), client.listApprovalsFlow(ApprovalState.PENDING).toList())
    }

    @Test
    fun `in memory deciding an unknown request is not found`() = withClient(Mode.MEMORY) { client ->
        val e = expectError { client.decideApproval(UNKNOWN, Decision.APPROVE) }
        assertTrue(e is OpenBotException.NotFound, e.toString())
        assertEquals("not_found", e.code)
    }

    @Test
    fun `a request ID that is not a UUID is invalid input`() = withClient(Mode.MEMORY) { client ->
        val e = expectError { client.decideApproval("not-an-id", Decision.DENY, "no") }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertTrue(e.errorReason().contains("not-an-id"), e.errorReason())
    }

    @Test
    fun `an approved call runs once in a child tool job that ends with JobEnded`() = withClient(Mode.REMOTE) { client ->
        Endpoint().use { endpoint ->
            val (botId, tool) = client.payingBot(endpoint)
            val asked = client.askForPayment(botId)
            assertTrue(asked.events.last().kind is EventKind.TurnEnded, "the Turn ends while approval waits")
            assertEquals(tool, asked.requested.call.name)
            assertEquals(JsonParser.parseString("""{"amount":5}"""), JsonParser.parseString(asked.requested.call.arguments))
            assertEquals(asked.requested.call.id, asked.child.callId)
            assertEquals("tool_job", asked.child.kind)
            assertEquals(emptyList<String>(), endpoint.calls.toList(), "nothing runs before the decision")

            val request = client.pending(tool).single()
            assertEquals(asked.requested.requestId, request.id)
            assertEquals(ApprovalState.PENDING, request.state)
            assertEquals(asked.child.childId, request.executionId)
            assertEquals(botId, request.botId)
            assertEquals(asked.chatId, request.chatId)

            val decided = client.decideApproval(request.id, Decision.APPROVE, "fine")
            assertEquals(ApprovalState.APPROVED, decided.state)
            assertEquals("fine", decided.reason)
            assertNotNull(decided.decidedAt)

            val jobEvents = client.allEvents(asked.child.childId)
            assertEquals("job_ended", jobEvents.last().eventType)
            assertEquals(EventKind.JobEnded(ExecutionState.COMPLETED), jobEvents.last().kind)
            val job = client.getExecution(asked.child.childId)
            assertEquals(ExecutionKind.TOOL_JOB, job.kind)
            assertEquals(ExecutionState.COMPLETED, job.state)
            assertEquals(1, endpoint.calls.size, "the approved call ran exactly once")
            assertEquals(JsonParser.parseString("""{"amount":5}"""), JsonParser.parseString(endpoint.calls.single()))
            assertEquals(emptyList<Any>(), client.pending(tool))
        }
    }

    @Test
    fun `an approved call's result reaches the Chat as a notice from its child`() = withClient(Mode.REMOTE) { client ->
        Endpoint().use { endpoint ->
            val (botId, tool) = client.payingBot(endpoint)
            val asked = client.askForPayment(botId)
            client.decideApproval(asked.requested.requestId, Decision.APPROVE)
            client.allEvents(asked.child.childId)
            val notices = client.historyFlow(asked.chatId).toList()
                .filter { it.executionId == asked.child.childId }
                .map { entry ->
                    val content = (entry.message as Message.User).content
                    content.joinToString("") { (it as? ContentPart.Text)?.text ?: "" }
                }
            assertTrue(notices.any { "`$tool`" in it && "finished" in it && "paid" in it }, notices.toString())
        }
    }

    @Test
    fun `a denied call never reaches its endpoint and its child job ends cancelled`() = withClient(Mode.REMOTE) { client ->
        Endpoint().use { endpoint ->
            val (botId, _) = client.payingBot(endpoint)
            val asked = client.askForPayment(botId)
            val decided = client.decideApproval(asked.requested.requestId, Decision.DENY, "too much")
            assertEquals(ApprovalState.DENIED, decided.state)
            assertEquals("too much", decided.reason)
            val jobEvents = client.allEvents(asked.child.childId)
            assertEquals(EventKind.JobEnded(ExecutionState.CANCELLED), jobEvents.last().kind)
            assertEquals(ExecutionState.CANCELLED, client.getExecution(asked.child.childId).state)
            assertEquals(emptyList<String>(), endpoint.calls.toList(), "a denied call never runs")
        }
    }

    @Test
    fun `deciding a request twice is a conflict`() = withClient(Mode.REMOTE) { client ->
        Endpoint().use { endpoint ->
            val (botId, _) = client.payingBot(endpoint)
            val requestId = client.askForPayment(botId).requested.requestId
            client.decideApproval(requestId, Decision.DENY)
            val e = expectError { client.decideApproval(requestId, Decision.APPROVE) }
            assertTrue(e is OpenBotException.Conflict, e.toString())
            assertEquals(emptyList<String>(), endpoint.calls.toList())
        }
    }
}
