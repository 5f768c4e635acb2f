package openbot

import com.google.gson.JsonParser
import java.io.File
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.EnumSource
import uniffi.openbot.*
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.Action
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.CreateToken
import uniffi.openbot.schema.Resource
import uniffi.openbot.schema.Right
import uniffi.openbot.schema.UnknownOutcome

/** The methods of `Client` that are no operation of the API (or an operation's other shape). */
private val HAND_WRITTEN = setOf("createBotJson", "planMode", "setPlanMode", "call", "shutdown", "close")

/** The `operationId`s of schema/openapi.json, read as the suite runs. */
private fun operationIds(): List<String> {
    val path = System.getProperty("openbot.openapi").orEmpty()
    val file = File(path)
    assertTrue(file.isFile, "the suite needs schema/openapi.json: set -Dopenbot.openapi (scripts/test-kotlin does); got `$path`")
    val paths = JsonParser.parseString(file.readText()).asJsonObject["paths"].asJsonObject
    return paths.entrySet().flatMap { (_, methods) ->
        methods.asJsonObject.entrySet().map { (_, op) -> op.asJsonObject["operationId"].asString }
    }
}

/** The public methods Kotlin sees on `Client` (suspend ones included), by name. */
private fun clientMethods(): Set<String> =
    Client::class.java.declaredMethods
        .filter { java.lang.reflect.Modifier.isPublic(it.modifiers) && !it.isSynthetic }
        // Kotlin mangles the JVM name of a function with unsigned parameters (`observe-z13BHRw`).
        .map { it.name.substringBefore('-') }
        .filter { !it.startsWith("uniffi") && !it.startsWith("getUniffi") && it != "destroy" && !it.contains('$') }
        .toSet()

class OperationsTest {
    @Test
    fun `every operation of the schema is a Client method`() {
        val ids = operationIds()
        assertTrue(ids.size > 40, "only ${ids.size} operations read")
        val missing = ids.filter { it !in OPERATION_METHODS }
        assertEquals(emptyList<String>(), missing, "operations with no method in OPERATION_METHODS")
        val methods = clientMethods()
        val absent = ids.map { OPERATION_METHODS.getValue(it) }.filter { it !in methods }
        assertEquals(emptyList<String>(), absent, "methods Client lacks")
    }

    @Test
    fun `every Client method is an operation of the schema`() {
        val ids = operationIds().toSet()
        val stale = OPERATION_METHODS.keys.filter { it !in ids }
        assertEquals(emptyList<String>(), stale, "methods for operations the schema no longer has")
        val extra = clientMethods() - OPERATION_METHODS.values.toSet() - HAND_WRITTEN
        assertEquals(emptySet<String>(), extra, "Client methods that are no operation")
    }

    @Test
    fun `an unknown operation ID is invalid input on the generic call`() = withClient(Mode.MEMORY) { client ->
        val e = expectError { client.call("no_such_operation", null, null) }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertEquals("invalid_input", e.code)
        assertNull(e.category)
        assertNull(e.errorId)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `the generic call answers what the typed method answers`(mode: Mode) = withClient(mode) { client ->
        val bot = client.createBot(BotSpec(name = "Generic", model = scriptedModel("""{"steps":[]}""")))
        val json = client.call("get_bot", """{"id":"${bot.id}"}""", null)
            ?: throw AssertionError("get_bot answered nothing")
        val read = JsonParser.parseString(json).asJsonObject
        assertEquals(bot.id, read["id"].asString)
        assertEquals("Generic", read["spec"].asJsonObject["name"].asString)
    }

    @Test
    fun `in memory an operation only a server has is invalid input that says so`() = withClient(Mode.MEMORY) { client ->
        val e = expectError { client.listTokensFlow().toList() }
        assertEquals("invalid_input", e.code)
        assertTrue(e.errorReason().contains("needs an OpenBot server"), e.errorReason())
    }

    @Test
    fun `a server lists, creates and revokes tokens`() = withClient(Mode.REMOTE) { client ->
        val created = client.createToken(CreateToken(name = "kotlin-ops", rights = listOf(Right(Resource.BOTS, Action.READ))))
        assertTrue(client.listTokensFlow().toList().any { it.id == created.token.id })
        client.revokeToken(created.token.id)
        assertTrue(client.listTokensFlow().toList().single { it.id == created.token.id }.revokedAt != null)
    }

    @Test
    fun `a malformed path parameter is invalid input`() = withClient(Mode.REMOTE) { client ->
        val e = expectError { client.revokeToken("not-an-id") }
        assertEquals("invalid_input", e.code)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `a paged list is a Flow over every page`(mode: Mode) = withClient(mode) { client ->
        // Nothing waits for a decision in a fresh client: the Flow ends after one empty page.
        val all: List<UnknownOutcome> = client.listUnknownOutcomesFlow(limit = 5u).toList()
        assertEquals(emptyList<UnknownOutcome>(), all)
    }

    @Test
    fun `a budget that does not exist cannot be removed`() = withClient(Mode.REMOTE) { client ->
        val missing = "019ad1c8-0000-7000-8000-000000000000"
        val e = expectError { client.deleteBudget("bot", missing) }
        assertEquals("not_found", e.code)
        assertTrue(client.listBudgetsFlow().toList().none { it.targetId == missing })
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `an ID in a record that is no UUID is invalid input`(mode: Mode) = withClient(mode) { client ->
        val e = expectError { client.createChat(uniffi.openbot.schema.CreateChat(botId = "not-an-id")) }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertTrue(e.errorReason().contains("not-an-id"), e.errorReason())
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `JSON text in a record that does not parse is invalid input`(mode: Mode) = withClient(mode) { client ->
        val tool = uniffi.openbot.schema.ToolDefinition("broken", "Broken.", "{not json")
        val e = expectError { client.createBot(BotSpec(name = "Broken", model = scriptedModel("""{"steps":[]}"""), tools = listOf(tool))) }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertTrue(e.errorReason().contains("JSON"), e.errorReason())
    }
}
