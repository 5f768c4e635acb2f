package openbot

import com.google.gson.JsonParser
import java.nio.file.Files
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import uniffi.openbot.*
import uniffi.openbot.schema.AppAuthKind
import uniffi.openbot.schema.AppTransport
import uniffi.openbot.schema.ApprovePairing
import uniffi.openbot.schema.NewApp
import uniffi.openbot.schema.NewAppConnection
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.ClaimPairing
import uniffi.openbot.schema.GrantComputer
import uniffi.openbot.schema.StartPairing
import uniffi.openbot.schema.ContentPart
import uniffi.openbot.schema.EventKind
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.ToolDefinition

/** `connect("memory://", computerFolders = ...)`: this machine as a Computer (docs/computers.md). */
class ComputerTest {
    private fun named(names: List<String>) = names.map { ToolDefinition(it, "", OBJECT_SCHEMA) }

    /** A machine paired by [client], its agent (`openbot computer run`) started on [folder] and linked. */
    private suspend fun linkedMachine(
        client: Client, folder: java.io.File, name: String, shared: Boolean, vararg more: String,
    ): Pair<uniffi.openbot.schema.Computer, Process> {
        val pairing = client.startPairing(StartPairing(name = name))
        val computer = client.approvePairing(ApprovePairing(code = pairing.code, shared = shared))
        val claim = client.claimPairing(pairing.id, ClaimPairing(secret = pairing.secret))
        val saved = folder.resolve("computer.json")
        saved.writeText("""{"server":"${Server.url}","computer_id":"${computer.id}","credential":"${claim.credential}"}""")
        val agent = ProcessBuilder(
            listOf(System.getProperty("openbot.server"), "computer", "run", "--json",
                "--credential-file", saved.path, "--folder", folder.path) + more,
        ).redirectErrorStream(false).start()
        val lines = agent.inputStream.bufferedReader()
        while (true) {
            val line = lines.readLine() ?: error("the agent ended before it linked")
            if (line.contains("\"linked\"")) break
        }
        return computer to agent
    }

    @Test
    fun `a Bot in memory writes a file and reads it back through a terminal`() = runBlocking<Unit> {
        val folder = Files.createTempDirectory("openbot-kotlin-computer-").toFile()
        val client = connect("memory://", computerFolders = listOf(folder.path))
        val script = """{"steps":[
            {"tool_calls":[{"id":"w","name":"computer_file_write","arguments":{"path":"note.txt","content":"from kotlin\n"}}]},
            {"tool_calls":[{"id":"s","name":"computer_terminal_start","arguments":{"command":"cat note.txt"}}]},
            {"tool_calls":[{"id":"r","name":"computer_terminal_read","arguments":{"session_id":"t1","wait_ms":5000}}]},
            {"text":"done"}]}"""
        val bot = client.createBot(BotSpec(name = "Operator", model = scriptedModel(script), tools = named(computerTools())))
        val chat = client.createChat(bot.id)
        val receipt = client.send(chat.id, textInput("go", null))
        val results = client.allEvents(receipt.executionId).mapNotNull { (it.kind as? EventKind.ToolResultSaved)?.result }
        assertEquals(listOf(false, false, false), results.map { it.isError })
        assertEquals("from kotlin\n", folder.resolve("note.txt").readText())
        val read = JsonParser.parseString((results[2].output.single() as ContentPart.Text).text).asJsonObject
        val text = read.getAsJsonArray("chunks").joinToString("") { it.asJsonObject.get("text").asString }
        assertTrue(text.contains("from kotlin"), text)
        client.shutdown()
        client.close()
        folder.deleteRecursively()
    }

    @Test
    fun `a missing folder is InvalidInput and a server refuses a Computer`() = runBlocking {
        val missing = expectError { connect("memory://", computerFolders = listOf("/no/such/openbot/folder")) }
        assertTrue(missing is OpenBotException.InvalidInput, missing.toString())
        val remote = expectError { connect("http://127.0.0.1:9", computerFolders = listOf("/tmp")) }
        assertTrue(remote is OpenBotException.InvalidInput, remote.toString())
    }

    @Test
    fun `a paired machine granted to a Bot runs its command and a member reads it`() = runBlocking<Unit> {
        Server.start()
        val client = connect(Server.url, Server.token, emptyList())
        val folder = Files.createTempDirectory("openbot-kotlin-machine-").toFile()
        val (computer, agent) = linkedMachine(client, folder, "kotlin-box", shared = false)
        try {
            val script = """{"steps":[
                {"tool_calls":[{"id":"s","name":"computer_terminal_start","arguments":{"command":"echo from-the-machine"}}]},
                {"text":"started"}]}"""
            // On a server the Bot names the Computer tools; the grant routes them to the machine.
            val tools = computerTools().map { ToolDefinition(it, "A Computer tool.", OBJECT_SCHEMA) }
            val bot = client.createBot(BotSpec(name = "Operator", model = scriptedModel(script), tools = tools))
            val grant = client.grantComputer(computer.id, bot.id, GrantComputer(ask = false))
            assertEquals(false, grant.ask)
            val chat = client.createChat(bot.id)
            val receipt = client.send(chat.id, textInput("go", null))
            val result = client.allEvents(receipt.executionId).firstNotNullOf { (it.kind as? EventKind.ToolResultSaved)?.result }
            assertEquals(false, result.isError, result.toString())
            val started = JsonParser.parseString((result.output.single() as ContentPart.Text).text).asJsonObject
            val session = started.get("id").asString
            var cursor = 0uL
            var text = ""
            for (i in 0 until 20) {
                val out = client.terminalOutput(computer.id, session, cursor, 2000uL)
                cursor = out.nextCursor
                text += out.chunks.joinToString("") { it.text }
                if (out.exited) break
            }
            assertTrue(text.contains("from-the-machine"), text)
            client.revokeComputer(computer.id, bot.id)
            val again = expectError { client.revokeComputer(computer.id, bot.id) }
            assertTrue(again is OpenBotException.NotFound, again.toString())
        } finally {
            agent.destroyForcibly()
            client.close()
            folder.deleteRecursively()
        }
    }

    @Test
    fun `a Connector a paired machine publishes is an App whose tool a Bot calls`() = runBlocking<Unit> {
        val mcp = System.getenv("OPENBOT_MCP_DIR") ?: "${System.getProperty("user.home")}/.cache/openbot/mcp"
        val python = java.io.File(mcp, "venv/bin/python")
        assertTrue(python.exists(), "the MCP test servers are not installed in $mcp: run scripts/mcp-install")
        val fixture = java.io.File(System.getProperty("user.dir"))
            .resolve("../../../server/tests/support/mcp_fixture.py").canonicalFile
        assertTrue(fixture.exists(), fixture.path)
        Server.start()
        val client = connect(Server.url, Server.token, emptyList())
        val folder = Files.createTempDirectory("openbot-kotlin-connector-").toFile()
        val log = folder.resolve("fixture.log")
        val (computer, agent) = linkedMachine(client, folder, "kotlin-connector", shared = true,
            "--connector", "notes=${python.path} ${fixture.path} --log ${log.path} --delay 0")
        try {
            val app = client.registerApp(NewApp(name = "notes",
                transport = AppTransport.Connector(computerId = computer.id, connector = "notes")))
            val connection = client.openAppConnection(app.id, NewAppConnection(auth = AppAuthKind.NONE))
            val found = client.discoverAppTools(app.id, connection.id)
            assertTrue(found.tools.any { it.name == "write_note" }, found.toString())
            val script = """{"steps":[
                {"tool_calls":[{"id":"n","name":"notes__write_note","arguments":{"text":"milk"}}]},
                {"text":"noted"}]}"""
            val tools = listOf(ToolDefinition("notes__write_note", "-", OBJECT_SCHEMA))
            val bot = client.createBot(BotSpec(name = "Noter", model = scriptedModel(script), tools = tools))
            val chat = client.createChat(bot.id)
            val receipt = client.send(chat.id, textInput("go", null))
            val result = client.allEvents(receipt.executionId).firstNotNullOf { (it.kind as? EventKind.ToolResultSaved)?.result }
            assertEquals(false, result.isError, result.toString())
            assertEquals("write_note: milk", (result.output.single() as ContentPart.Text).text)
            assertEquals(1, log.readLines().count { it.startsWith("call write_note") })
        } finally {
            agent.destroyForcibly()
            client.close()
            folder.deleteRecursively()
        }
    }
}
