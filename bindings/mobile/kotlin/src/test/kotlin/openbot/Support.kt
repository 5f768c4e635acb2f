package openbot

import java.io.File
import java.nio.file.Files
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import uniffi.openbot.*
import uniffi.openbot.Client
import uniffi.openbot.schema.Event
import uniffi.openbot.EventStream
import uniffi.openbot.HostTool
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.ToolCallContext
import uniffi.openbot.connect

/** The two modes every test runs in. */
enum class Mode { MEMORY, REMOTE }

/** How long one test may wait for a Turn. */
const val WAIT_MS = 30_000L

/** One `openbot serve` for the whole test run, on a fresh SQLite data folder. */
object Server {
    private var process: Process? = null
    private var dataDir: File? = null

    lateinit var url: String
        private set
    lateinit var token: String
        private set

    @Synchronized
    fun start() {
        if (process != null) return
        val bin = System.getProperty("openbot.server").orEmpty()
        require(bin.isNotEmpty() && File(bin).canExecute()) {
            "the remote tests need the server: set -Dopenbot.server=/path/to/openbot (scripts/test-kotlin does)"
        }
        val data = Files.createTempDirectory("openbot-kotlin-").toFile()
        dataDir = data
        val migrate = ProcessBuilder(bin, "migrate", "--data-dir", data.path)
            .redirectErrorStream(true)
            .redirectOutput(File(data, "migrate.log"))
            .start()
        check(migrate.waitFor(60, TimeUnit.SECONDS) && migrate.exitValue() == 0) {
            "openbot migrate failed: " + File(data, "migrate.log").readText()
        }
        val stdout = File(data, "stdout")
        val stderr = File(data, "stderr")
        val serve = ProcessBuilder(bin, "serve", "--data-dir", data.path, "--bind", "127.0.0.1:0", "--scripted-dir", System.getProperty("java.io.tmpdir"))
            .redirectOutput(stdout)
            .redirectError(stderr)
            .start()
        process = serve
        Runtime.getRuntime().addShutdownHook(Thread { stop() })
        val listening = Regex("listening on (http://[0-9.:]+)")
        val deadline = System.currentTimeMillis() + 30_000
        while (System.currentTimeMillis() < deadline) {
            val match = listening.find(stderr.readText())
            val lines = stdout.readLines()
            if (match != null && lines.isNotEmpty() && lines[0].isNotBlank()) {
                url = match.groupValues[1]
                token = lines[0].trim()
                return
            }
            check(serve.isAlive) { "openbot serve exited: " + stderr.readText() }
            Thread.sleep(50)
        }
        error("openbot serve did not start in 30 s: " + stderr.readText())
    }

    @Synchronized
    fun stop() {
        process?.let {
            it.destroy()
            if (!it.waitFor(10, TimeUnit.SECONDS)) it.destroyForcibly()
        }
        process = null
        dataDir?.deleteRecursively()
        dataDir = null
    }
}

/** A client in `mode`, with `tools` running in this process. */
suspend fun open(mode: Mode, tools: List<HostTool> = emptyList()): Client = when (mode) {
    Mode.MEMORY -> connect("memory://", null, tools)
    Mode.REMOTE -> {
        Server.start()
        connect(Server.url, Server.token, tools)
    }
}

/** Runs `body` with a client in `mode` and shuts the client down after it. */
fun withClient(mode: Mode, tools: List<HostTool> = emptyList(), body: suspend (Client) -> Unit) =
    runBlocking {
        val client = open(mode, tools)
        try {
            withTimeout(WAIT_MS) { body(client) }
        } finally {
            client.shutdown()
            client.close()
        }
    }

/** Writes a scripted model's file and returns the model spec that reads it. */
fun scriptedModel(scriptJson: String): String {
    val file = Files.createTempFile("openbot-script-", ".json").toFile()
    file.deleteOnExit()
    file.writeText(scriptJson)
    return "scripted:" + file.absolutePath
}

/** Every event of a stream up to its end. */
suspend fun EventStream.drain(): List<Event> {
    val events = mutableListOf<Event>()
    while (true) {
        events += next() ?: break
    }
    return events
}

/** All events of an execution from the first, to its end. */
suspend fun Client.allEvents(executionId: String): List<Event> =
    observe(executionId, 0UL).use { it.drain() }

/** The `sum` tool of the scenarios: `{"a": int, "b": int}` -> the decimal text of a + b. */
class SumTool(private val name: String) : HostTool {
    val contexts = mutableListOf<ToolCallContext>()

    override fun name() = name

    override suspend fun call(argumentsJson: String, context: ToolCallContext): String {
        synchronized(contexts) { contexts += context }
        val args = com.google.gson.JsonParser.parseString(argumentsJson).asJsonObject
        return (args["a"].asLong + args["b"].asLong).toString()
    }
}

/** The `fail` tool of the scenarios: throws `tool failed on purpose`. */
class FailTool(private val name: String) : HostTool {
    override fun name() = name

    override suspend fun call(argumentsJson: String, context: ToolCallContext): String =
        throw IllegalStateException("tool failed on purpose")
}

/** A tool input schema that takes any object. */
const val OBJECT_SCHEMA = """{"type":"object"}"""

/** Runs `block` and returns the OpenBot error it must throw. */
suspend fun expectError(block: suspend () -> Unit): OpenBotException {
    try {
        block()
    } catch (e: OpenBotException) {
        return e
    }
    throw AssertionError("expected an OpenBotException, but the call succeeded")
}
