package openbot

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import uniffi.openbot.*
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.ExecutionState
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.textInput

/** Pausing and plan mode: refused and off in memory; on a server, set, read back, paused and resumed. */
class PauseTest {
    @Test
    fun `in memory pausing is invalid input and plan mode is off`() = withClient(Mode.MEMORY) { client ->
        val bot = client.createBot(BotSpec(name = "Local", model = scriptedModel("""{"steps":[{"text":"ok"}]}""")))
        val chat = client.createChat(bot.id)
        assertFalse(client.planMode(chat.id))
        val refused = expectError { client.setPlanMode(chat.id, true) }
        assertTrue(refused is OpenBotException.InvalidInput, refused.toString())
        val turn = client.send(chat.id, textInput("Hi")).executionId
        client.allEvents(turn)
        val e = expectError { client.pauseExecution(turn) }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertEquals("invalid_input", e.code)
        assertTrue(expectError { client.resumeExecution(turn) } is OpenBotException.InvalidInput)
    }

    @Test
    fun `plan mode is set on a Chat, read back and turned off`() = withClient(Mode.REMOTE) { client ->
        val bot = client.createBot(BotSpec(name = "Planner", model = scriptedModel("""{"steps":[{"text":"ok"}]}""")))
        val chat = client.createChat(bot.id)
        assertFalse(client.planMode(chat.id))
        assertTrue(client.setPlanMode(chat.id, true))
        assertTrue(client.planMode(chat.id))
        assertFalse(client.setPlanMode(chat.id, false))
        assertFalse(client.planMode(chat.id))
    }

    @Test
    fun `a paused Turn resumes and completes`() = withClient(Mode.REMOTE) { client ->
        val model = scriptedModel("""{"steps":[{"text":"ok","delay_ms":300}]}""")
        val bot = client.createBot(BotSpec(name = "Pausable", model = model))
        val turn = client.send(client.createChat(bot.id).id, textInput("Hi")).executionId
        assertEquals(turn, client.pauseExecution(turn).id)
        assertEquals(turn, client.resumeExecution(turn).id)
        client.allEvents(turn)
        assertEquals(ExecutionState.COMPLETED, client.getExecution(turn).state)
    }
}
