package openbot

import kotlinx.coroutines.flow.toList
import java.io.File
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import uniffi.openbot.*
import uniffi.openbot.schema.ApprovalState
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.Decision
import uniffi.openbot.schema.EventKind
import uniffi.openbot.schema.ExecutionState
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.OutcomeDecision
import uniffi.openbot.schema.TurnOutcome
import uniffi.openbot.connect
import uniffi.openbot.textInput

/** The examples of docs/sdk-kotlin.md, as written there. */
class ExamplesTest {
    @Test
    fun `the quick start prints the reply`() = runBlocking {
        val script = File.createTempFile("hello", ".json")
        script.deleteOnExit()
        script.writeText("""{"steps": [{"deltas": ["Hello", ", ", "world!"]}]}""")

        val client = connect("memory://")
        val bot = client.createBotHandle(BotSpec(name = "Greeter", model = "scripted:${script.absolutePath}",
                                                 instructions = "Greet people."))
        val chat = bot.createChat()
        val turn = chat.send("Hi")
        val end = turn.wait()
        assertEquals("COMPLETED: Hello, world!", "${end.outcome}: ${end.text}")
        assertEquals(2, chat.history().size)
        client.shutdown()
    }

    @Test
    fun `the flat calls read the same reply`() = runBlocking {
        val script = File.createTempFile("hello", ".json")
        script.deleteOnExit()
        script.writeText("""{"steps": [{"deltas": ["Hello", ", ", "world!"]}]}""")
        val client = connect("memory://")

        val bot = client.createBot(BotSpec(name = "Greeter", model = "scripted:${script.absolutePath}"))
        val chat = client.createChat(bot.id)                 // createChat(CreateChat(bot.id))
        val receipt = client.send(chat.id, textInput("Hi"))
        var reply = ""
        var outcome: TurnOutcome? = null
        client.observe(receipt.executionId).use { events ->
            while (true) {
                val event = events.next() ?: break
                when (val kind = event.kind) {
                    is EventKind.TextDelta -> reply += kind.text
                    is EventKind.TurnEnded -> outcome = kind.outcome
                    else -> {}
                }
            }
        }
        assertEquals("Hello, world!", reply)
        assertEquals(TurnOutcome.COMPLETED, outcome)
        client.shutdown()
    }

    @Test
    fun `deciding what is pending runs in memory too`() = runBlocking {
        val client = connect("memory://")
        val printed = mutableListOf<String>()
        for (request in client.listApprovalsFlow(ApprovalState.PENDING).toList()) {      // in memory: none
            printed += "${request.call.name} ${request.call.arguments} until ${request.expiresAt}"
            client.decideApproval(request.id, Decision.DENY, "not without a ticket")
        }
        assertEquals(emptyList<String>(), printed)
        client.shutdown()
    }

    @Test
    fun `working through unknown outcomes runs in memory too`() = runBlocking {
        val client = connect("memory://")
        val printed = mutableListOf<String>()
        var cursor: String? = null
        do {
            val page = client.listUnknownOutcomes(20u, cursor)                 // in memory: empty
            for (waiting in page.items) {
                printed += "${waiting.executionId} ${waiting.call} ${waiting.toolCall.name} ${waiting.toolCall.arguments}"
                client.decideOutcome(waiting.executionId, waiting.call, OutcomeDecision.NOT_APPLIED)
            }
            cursor = page.nextCursor
        } while (cursor != null)
        assertEquals(emptyList<String>(), printed)
        client.shutdown()
    }

    @Test
    fun `an approved call runs once in its child`() = runBlocking {
        Server.start()
        val client = connect(Server.url, Server.token)
        Endpoint().use { endpoint ->
            val (botId, tool) = client.payingBot(endpoint)
            val chat = client.createChat(botId)
            val printed = mutableListOf<String>()

            val receipt = client.send(chat.id, textInput("Pay 5"))
            var childId: String? = null
            client.observe(receipt.executionId).use { events ->
                while (true) {
                    val event = events.next() ?: break
                    when (val kind = event.kind) {
                        is EventKind.ApprovalRequested -> printed += "asks: ${kind.call.name} ${kind.call.arguments}"
                        is EventKind.ChildStarted -> childId = kind.childId       // kind.kind == "tool_job"
                        else -> {}
                    }
                }
            }
            val request = client.listApprovalsFlow(ApprovalState.PENDING).toList().single { it.call.name == tool }
            client.decideApproval(request.id, Decision.APPROVE, "invoice 42")
            var ended: ExecutionState? = null
            client.observe(childId!!).use { events ->
                while (true) {
                    val kind = events.next()?.kind ?: break
                    if (kind is EventKind.JobEnded) ended = kind.state   // COMPLETED: paid once
                }
            }

            assertEquals(listOf("asks: $tool {\"amount\":5}"), printed)
            assertEquals(ExecutionState.COMPLETED, ended)
            assertEquals(1, endpoint.calls.size)
            assertTrue(client.listApprovalsFlow(ApprovalState.PENDING).toList().none { it.call.name == tool })
        }
        client.shutdown()
    }

    @Test
    fun `one handler branches on the code`() = runBlocking {
        val client = connect("memory://")
        val logged = try {
            client.getChat("019ad1c8-0000-7000-8000-000000000000")
            "found"
        } catch (e: OpenBotException.Conflict) {
            "conflict"
        } catch (e: OpenBotException) {
            "OpenBot failed: ${e.errorCode()} ${e.errorReason()}"
        }
        assertEquals("OpenBot failed: not_found chat 019ad1c8-0000-7000-8000-000000000000 was not found", logged)
        client.shutdown()
    }
}
