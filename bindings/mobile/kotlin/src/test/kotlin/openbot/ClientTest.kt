package openbot

import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.EnumSource
import uniffi.openbot.*
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.BotUpdate
import uniffi.openbot.Client
import uniffi.openbot.schema.ContentPart
import uniffi.openbot.schema.ErrorCategory
import uniffi.openbot.schema.EventKind
import uniffi.openbot.schema.ExecutionState
import uniffi.openbot.HostTool
import uniffi.openbot.schema.Limits
import uniffi.openbot.schema.Message
import uniffi.openbot.ToolCallContext
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.SendDisposition
import uniffi.openbot.schema.ToolDefinition
import uniffi.openbot.schema.ToolResult
import uniffi.openbot.schema.TurnOutcome
import uniffi.openbot.connect
import uniffi.openbot.isTerminal
import uniffi.openbot.textInput

private const val ADD_SCHEMA =
    """{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}"""

/** A script that answers each request with `text`, slowly: 20 deltas, 100 ms apart. */
private fun slowScript(): String {
    val deltas = (1..20).joinToString(",") { "\"part $it \"" }
    return """{"steps":[{"deltas":[$deltas],"delay_ms":100}],"repeat":true}"""
}

private suspend fun Client.bot(script: String, tools: List<ToolDefinition> = emptyList()) =
    createBot(BotSpec(name = "Test", model = scriptedModel(script), tools = tools))

private suspend fun Client.waitForState(executionId: String, state: ExecutionState) {
    while (getExecution(executionId).state != state) delay(20)
}

class ClientTest {
    @Test
    fun `an unknown scheme is invalid input`() = runBlocking {
        val e = expectError { connect("ftp://example", null, emptyList()) }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertEquals("invalid_input", e.code)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a created Bot reads back with its spec`(mode: Mode) = withClient(mode) { client ->
        val spec = BotSpec(
            name = "Reader",
            model = scriptedModel("""{"steps":[]}"""),
            instructions = "Read.",
            tools = listOf(ToolDefinition("add", "Adds.", ADD_SCHEMA)),
            limits = Limits(maxSteps = 3u),
        )
        val bot = client.createBot(spec)
        assertEquals("Reader", bot.spec.name)
        assertEquals(3u, bot.spec.limits.maxSteps)
        assertEquals("add", bot.spec.tools.single().name)
        assertEquals(
            com.google.gson.JsonParser.parseString(ADD_SCHEMA),
            com.google.gson.JsonParser.parseString(bot.spec.tools.single().inputSchema),
        )
        assertEquals(bot, client.getBot(bot.id))
        assertTrue(client.listBotsFlow().toList().any { it.id == bot.id })
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a deleted Bot is not found`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[]}""")
        client.deleteBot(bot.id)
        val e = expectError { client.getBot(bot.id) }
        assertTrue(e is OpenBotException.NotFound, e.toString())
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `an update with a stale revision is a conflict`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[]}""")
        val updated = client.updateBot(bot.id, BotUpdate(revision = bot.revision, name = "Renamed"))
        assertEquals("Renamed", updated.spec.name)
        assertNotEquals(bot.revision, updated.revision)
        val e = expectError { client.updateBot(bot.id, BotUpdate(revision = bot.revision, name = "Again")) }
        assertEquals("conflict", e.code)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a sent message streams its reply and lands in history`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[{"deltas":["Hello",", ","world!"]}]}""")
        val chat = client.createChat(bot.id)
        assertEquals(chat, client.getChat(chat.id))
        val receipt = client.send(chat.id, textInput("Hi", null))
        assertEquals(SendDisposition.STARTED, receipt.disposition)
        val events = client.allEvents(receipt.executionId)
        assertEquals((1..events.size).map { it.toULong() }, events.map { it.sequence })
        val text = events.mapNotNull { (it.kind as? EventKind.TextDelta)?.text }.joinToString("")
        assertEquals("Hello, world!", text)
        val end = events.last().kind as EventKind.TurnEnded
        assertEquals(TurnOutcome.COMPLETED, end.outcome)
        assertEquals("turn_ended", events.last().eventType)
        assertTrue(events.last().json.contains("\"outcome\":\"completed\""), events.last().json)
        val execution = client.getExecution(receipt.executionId)
        assertEquals(ExecutionState.COMPLETED, execution.state)
        assertTrue(isTerminal(execution.state))
        assertEquals(chat.id, execution.chatId)
        val history = client.historyFlow(chat.id).toList()
        assertEquals(2, history.size)
        assertEquals(listOf(ContentPart.Text("Hi")), (history[0].message as Message.User).content)
        assertEquals("Hello, world!", ((history[1].message as Message.Assistant).content.single() as ContentPart.Text).text)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a retry with the same command key gets the same receipt`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[{"text":"once"}],"repeat":true}""")
        val chat = client.createChat(bot.id)
        val first = client.send(chat.id, textInput("Hi", "key-1"))
        val again = client.send(chat.id, textInput("Hi", "key-1"))
        assertEquals(first, again)
        val e = expectError { client.send(chat.id, textInput("Other", "key-1")) }
        assertTrue(e is OpenBotException.Conflict, e.toString())
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a Kotlin tool answers the model's call`(mode: Mode) {
        val add = SumTool("add")
        withClient(mode, listOf(add)) { client ->
            val script = """{"steps":[{"tool_calls":[{"id":"c1","name":"add","arguments":{"a":20,"b":22}}]},{"text":"42"}]}"""
            val bot = client.bot(script, listOf(ToolDefinition("add", "Adds.", ADD_SCHEMA)))
            val chat = client.createChat(bot.id)
            val receipt = client.send(chat.id, textInput("20 + 22?", null))
            val events = client.allEvents(receipt.executionId)
            val result = events.firstNotNullOf { (it.kind as? EventKind.ToolResultSaved)?.result }
            assertFalse(result.isError)
            assertEquals(listOf(ContentPart.Text("42")), result.output)
            val context = synchronized(add.contexts) { add.contexts.single() }
            assertEquals(receipt.executionId, context.executionId)
            assertEquals("c1", context.callId)
            assertEquals(1u, context.step)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a Kotlin tool's exception reaches the model with its message`(mode: Mode) =
        withClient(mode, listOf(FailTool("explode"))) { client ->
            val script = """{"steps":[{"tool_calls":[{"id":"c1","name":"explode","arguments":{}}]},{"text":"It failed."}]}"""
            val bot = client.bot(script, listOf(ToolDefinition("explode", "Fails.", OBJECT_SCHEMA)))
            val chat = client.createChat(bot.id)
            val receipt = client.send(chat.id, textInput("Go", null))
            val events = client.allEvents(receipt.executionId)
            val result = events.firstNotNullOf { (it.kind as? EventKind.ToolResultSaved)?.result }
            assertTrue(result.isError)
            assertEquals(listOf(ContentPart.Text("tool failed on purpose")), result.output)
            assertEquals(TurnOutcome.COMPLETED, (events.last().kind as EventKind.TurnEnded).outcome)
        }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a Kotlin tool can call its own client`(mode: Mode) {
        val own = object : HostTool {
            lateinit var client: Client
            override fun name() = "bot_name"
            override suspend fun call(argumentsJson: String, context: ToolCallContext): String {
                val chatId = client.getExecution(context.executionId).chatId!!
                return client.getBot(client.getChat(chatId).botId).spec.name
            }
        }
        withClient(mode, listOf(own)) { client ->
            own.client = client
            val script = """{"steps":[{"tool_calls":[{"id":"c1","name":"bot_name","arguments":{}}]},{"text":"ok"}]}"""
            val bot = client.bot(script, listOf(ToolDefinition("bot_name", "Names the Bot.", OBJECT_SCHEMA)))
            val chat = client.createChat(bot.id)
            val receipt = client.send(chat.id, textInput("Who are you?", null))
            val result = client.allEvents(receipt.executionId)
                .firstNotNullOf { (it.kind as? EventKind.ToolResultSaved)?.result }
            assertEquals(listOf(ContentPart.Text("Test")), result.output)
            assertFalse(result.isError)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `cancelling the Turn cancels a running Kotlin tool's coroutine`(mode: Mode) {
        val started = CompletableDeferred<Unit>()
        val cancelled = CompletableDeferred<Unit>()
        val waiter = object : HostTool {
            override fun name() = "wait"
            override suspend fun call(argumentsJson: String, context: ToolCallContext): String {
                started.complete(Unit)
                try {
                    awaitCancellation()
                } finally {
                    cancelled.complete(Unit)
                }
            }
        }
        withClient(mode, listOf(waiter)) { client ->
            val script = """{"steps":[{"tool_calls":[{"id":"c1","name":"wait","arguments":{}}]},{"text":"never"}]}"""
            val bot = client.bot(script, listOf(ToolDefinition("wait", "Waits.", OBJECT_SCHEMA)))
            val chat = client.createChat(bot.id)
            val receipt = client.send(chat.id, textInput("Wait", null))
            started.await()
            client.cancelExecution(receipt.executionId)
            cancelled.await()
            val events = client.allEvents(receipt.executionId)
            assertEquals(TurnOutcome.CANCELLED, (events.last().kind as EventKind.TurnEnded).outcome)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a tool with no handler waits for a delivered result`(mode: Mode) = withClient(mode) { client ->
        val script = """{"steps":[{"tool_calls":[{"id":"c1","name":"lookup","arguments":{}}]},{"text":"done"}]}"""
        val bot = client.bot(script, listOf(ToolDefinition("lookup", "Looks up.", OBJECT_SCHEMA)))
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("Look", null))
        client.waitForState(receipt.executionId, ExecutionState.WAITING)
        val call = client.allEventsUntil(receipt.executionId) { it.kind is EventKind.ToolCallAsked }
            .let { (it.last().kind as EventKind.ToolCallAsked).call }
        assertEquals("lookup", call.name)
        client.deliverToolResult(receipt.executionId, ToolResult(call.id, call.name, listOf(ContentPart.Text("found")), false))
        val events = client.allEvents(receipt.executionId)
        assertEquals(TurnOutcome.COMPLETED, (events.last().kind as EventKind.TurnEnded).outcome)
        val e = expectError {
            client.deliverToolResult(receipt.executionId, ToolResult(call.id, call.name, listOf(ContentPart.Text("again")), false))
        }
        assertEquals("conflict", e.code)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `cancelling an execution ends its Turn as cancelled`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot(slowScript())
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("Talk", null))
        client.waitForState(receipt.executionId, ExecutionState.RUNNING)
        val state = client.cancelExecution(receipt.executionId).state
        assertTrue(state == ExecutionState.CANCELLING || state == ExecutionState.CANCELLED, state.toString())
        val events = client.allEvents(receipt.executionId)
        assertEquals(TurnOutcome.CANCELLED, (events.last().kind as EventKind.TurnEnded).outcome)
        assertEquals(ExecutionState.CANCELLED, client.getExecution(receipt.executionId).state)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `stop ends the running Turn and the queued input runs next`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot(slowScript())
        val chat = client.createChat(bot.id)
        val first = client.send(chat.id, textInput("one", null))
        client.waitForState(first.executionId, ExecutionState.RUNNING)
        val second = client.send(chat.id, textInput("two", null))
        assertEquals(SendDisposition.QUEUED, second.disposition)
        client.stop(chat.id)
        assertEquals(TurnOutcome.CANCELLED, (client.allEvents(first.executionId).last().kind as EventKind.TurnEnded).outcome)
        client.waitForState(second.executionId, ExecutionState.RUNNING)
        client.cancelExecution(second.executionId)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `steering joins the running Turn`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[{"deltas":["a","b","c","d","e"],"delay_ms":100},{"text":"steered"}]}""")
        val chat = client.createChat(bot.id)
        val first = client.send(chat.id, textInput("start", null))
        client.waitForState(first.executionId, ExecutionState.RUNNING)
        val steer = client.steer(chat.id, textInput("and this", null))
        assertEquals(SendDisposition.STEERED, steer.disposition)
        assertEquals(first.executionId, steer.executionId)
        val events = client.allEvents(first.executionId)
        val steered = events.firstNotNullOf { it.kind as? EventKind.InputSteered }
        assertEquals(listOf(ContentPart.Text("and this")), steered.input)
        assertEquals(TurnOutcome.COMPLETED, (events.last().kind as EventKind.TurnEnded).outcome)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `deleting a Chat cancels its Turn and removes it`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot(slowScript())
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("Talk", null))
        client.waitForState(receipt.executionId, ExecutionState.RUNNING)
        client.deleteChat(chat.id)
        assertTrue(isTerminal(client.getExecution(receipt.executionId).state))
        val e = expectError { client.getChat(chat.id) }
        assertEquals("not_found", e.code)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `observing after a cursor resumes at the next event`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[{"deltas":["a","b","c"]}]}""")
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("Hi", null))
        val all = client.allEvents(receipt.executionId)
        val rest = client.observe(receipt.executionId, 2UL).use { it.drain() }
        assertEquals(all.drop(2).map { it.sequence }, rest.map { it.sequence })
        assertEquals(all.drop(2).map { it.json }, rest.map { it.json })
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a next() cancelled by a timeout loses no event`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[{"deltas":["a","b","c","d","e","f"],"delay_ms":30}]}""")
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("Hi", null))
        val seen = mutableListOf<ULong>()
        var timeouts = 0
        client.observe(receipt.executionId, 0UL).use { stream ->
            while (true) {
                val event = withTimeoutOrNull(5) { stream.next() }
                if (event == null) {
                    // Either a timeout or the end: a plain next() tells which.
                    timeouts++
                    val after = stream.next() ?: break
                    seen += after.sequence
                } else {
                    seen += event.sequence
                }
            }
        }
        assertTrue(timeouts > 0, "no next() timed out; the test proved nothing")
        assertEquals((1..seen.size).map { it.toULong() }, seen)
        assertEquals(client.getExecution(receipt.executionId).lastSequence, seen.last())
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `shutting an event stream down ends it and cancels nothing`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[{"deltas":["a","b","c","d"],"delay_ms":50}]}""")
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("Hi", null))
        val stream = client.observe(receipt.executionId, 0UL)
        assertEquals(1UL, stream.next()?.sequence)
        stream.shutdown()
        assertNull(stream.next())
        stream.close()
        val events = client.allEvents(receipt.executionId)
        assertEquals(TurnOutcome.COMPLETED, (events.last().kind as EventKind.TurnEnded).outcome)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a failed Turn ends with a category and an error ID`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot("""{"steps":[{"error":"unauthorized"}]}""")
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("Hi", null))
        val last = client.allEvents(receipt.executionId).last()
        val failed = last.kind as? EventKind.Failed ?: throw AssertionError("not a failure: ${last.json}")
        assertEquals("failed", last.eventType)
        assertEquals(ErrorCategory.MODEL_PROVIDER, failed.category)
        assertTrue(failed.errorId.matches(Regex("[0-9a-f-]{36}")), failed.errorId)
        assertEquals(ExecutionState.FAILED, client.getExecution(receipt.executionId).state)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `errors carry the stable code`(mode: Mode) = withClient(mode) { client ->
        val missing = "019ad1c8-0000-7000-8000-000000000000"
        val notFound = expectError { client.getChat(missing) }
        assertTrue(notFound is OpenBotException.NotFound, notFound.toString())
        assertEquals("not_found", notFound.code)
        assertEquals("not_found", (notFound as OpenBotException.NotFound).code)
        assertTrue(notFound.message!!.contains("code=not_found"), notFound.message)
        val badId = expectError { client.getChat("not-an-id") }
        assertEquals("invalid_input", badId.code)
        val badSpec = expectError { client.createBotJson("""{"name": "", "model": "scripted:x.json"}""") }
        assertEquals("invalid_input", badSpec.code)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a shut down client fails later calls with closed`(mode: Mode) = runBlocking {
        val client = open(mode)
        client.shutdown()
        val e = expectError { client.listBotsFlow().toList() }
        assertTrue(e is OpenBotException.Closed, e.toString())
        client.close()
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a tool whose name() throws fails connect with invalid input`(mode: Mode) = runBlocking {
        val broken = object : HostTool {
            override fun name(): String = throw IllegalStateException("no name today")
            override suspend fun call(argumentsJson: String, context: ToolCallContext) = ""
        }
        val e = expectError { open(mode, listOf(broken)) }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertTrue(e.errorReason().contains("no name today"), e.errorReason())
    }

    @Test
    fun `a server that is down is unavailable`() = runBlocking {
        // A port that was free a moment ago: nothing listens there.
        val port = java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()).use { it.localPort }
        val client = connect("http://127.0.0.1:$port", "token", emptyList())
        try {
            val e = expectError { client.listBotsFlow().toList() }
            assertTrue(e is OpenBotException.Unavailable, e.toString())
        } finally {
            client.close()
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a call cancelled by its coroutine leaves the client working`(mode: Mode) = withClient(mode) { client ->
        val bot = client.bot(slowScript())
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("Talk", null))
        val stream = client.observe(receipt.executionId, 0UL)
        val timedOut = withTimeoutOrNull(1) { stream.drain() }
        assertNull(timedOut)
        stream.close()
        assertEquals(chat, client.getChat(chat.id))
        client.cancelExecution(receipt.executionId)
    }

    @Test
    fun `a client of several nodes goes on at the next when one is down`() = runBlocking {
        Server.start()
        val port = java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()).use { it.localPort }
        val client = connect("http://127.0.0.1:$port,${Server.url}", Server.token, emptyList())
        try {
            val bot = client.bot("""{"steps":[{"text":"from the next node"}]}""")
            val chat = client.createChat(bot.id)
            val first = client.send(chat.id, textInput("Hi", "several-kotlin"))
            val again = client.send(chat.id, textInput("Hi", "several-kotlin"))
            assertEquals(first.executionId, again.executionId)
            val events = withTimeout(WAIT_MS) { client.allEvents(first.executionId) }
            assertEquals(TurnOutcome.COMPLETED, (events.last().kind as EventKind.TurnEnded).outcome)
        } finally {
            client.shutdown()
            client.close()
        }
    }

    @Test
    fun `a server list with an empty entry is invalid input`() = runBlocking {
        val e = expectError { connect("http://127.0.0.1:9,", "token", emptyList()) }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
    }

    @Test
    fun `a client that comes back can deliver a tool result`() = runBlocking {
        Server.start()
        val script = """{"steps":[{"tool_calls":[{"id":"c1","name":"lookup","arguments":{}}]},{"text":"done"}]}"""
        val first = connect(Server.url, Server.token, emptyList())
        val bot = first.bot(script, listOf(ToolDefinition("lookup", "Looks up.", OBJECT_SCHEMA)))
        val chat = first.createChat(bot.id)
        val receipt = first.send(chat.id, textInput("Look", null))
        withTimeout(WAIT_MS) { first.waitForState(receipt.executionId, ExecutionState.WAITING) }
        first.shutdown()
        first.close()

        val again = connect(Server.url, Server.token, emptyList())
        try {
            withTimeout(WAIT_MS) {
                again.deliverToolResult(receipt.executionId, ToolResult("c1", "lookup", listOf(ContentPart.Text("found")), false))
                val events = again.allEvents(receipt.executionId)
                assertEquals(TurnOutcome.COMPLETED, (events.last().kind as EventKind.TurnEnded).outcome)
            }
        } finally {
            again.shutdown()
            again.close()
        }
    }

    @Test
    fun `a wrong token is unauthorized`() = runBlocking {
        Server.start()
        val client = connect(Server.url, "not-a-token", emptyList())
        try {
            val e = expectError { client.listBotsFlow().toList() }
            assertEquals("unauthorized", e.code)
        } finally {
            client.close()
        }
    }
}

/** Events from the first up to and including the first that matches `until`. */
private suspend fun Client.allEventsUntil(executionId: String, until: (uniffi.openbot.schema.Event) -> Boolean) =
    observe(executionId, 0UL).use { stream ->
        val events = mutableListOf<uniffi.openbot.schema.Event>()
        while (true) {
            val event = stream.next() ?: break
            events += event
            if (until(event)) break
        }
        events
    }
