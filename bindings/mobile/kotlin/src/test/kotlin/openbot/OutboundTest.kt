package openbot

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import uniffi.openbot.*
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.PutHttpTool

/** `connect(..., outbound = ...)`: the allow list of internal addresses in memory mode. */
class OutboundTest {
    private val local = PutHttpTool(inputSchema = OBJECT_SCHEMA, url = "http://127.0.0.1:9/lookup")

    @Test
    fun `in memory an HTTP tool on loopback is refused unless the allow list names loopback`() = runBlocking {
        val plain = connect("memory://")
        val refused = expectError { plain.putTool("local", local) }
        assertTrue(refused is OpenBotException.InvalidInput, refused.toString())
        plain.shutdown()
        plain.close()
        val allowed = connect("memory://", outbound = "loopback")
        assertEquals("local", allowed.putTool("local", local).name)
        allowed.shutdown()
        allowed.close()
    }

    @Test
    fun `an allow list that does not parse is InvalidInput`() = runBlocking {
        val e = expectError { connect("memory://", outbound = "10.0.0.0/99") }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertTrue(e.errorReason().contains("outbound"), e.errorReason())
    }
}
