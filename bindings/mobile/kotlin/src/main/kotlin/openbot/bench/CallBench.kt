// The cost of one call through the Kotlin binding, next to a raw JNA call measured in the same
// run. Prints figures; asserts nothing. Run by scripts/bench-kotlin.
package openbot.bench

import com.sun.jna.Memory
import com.sun.jna.Native
import kotlinx.coroutines.runBlocking
import uniffi.openbot.*
import uniffi.openbot.schema.ExecutionState
import uniffi.openbot.connect
import uniffi.openbot.isTerminal
import uniffi.openbot.ping

/** The baseline: libc's getpid through JNA's direct mapping, the mechanism uniffi's Kotlin uses. */
object LibC {
    init {
        Native.register("c")
    }

    @JvmStatic external fun getpid(): Int
}

private inline fun perCallNs(calls: Int, body: () -> Unit): Double {
    val start = System.nanoTime()
    repeat(calls) { body() }
    return (System.nanoTime() - start).toDouble() / calls
}

private fun median(values: List<Double>) = values.sorted()[values.size / 2]

fun main() {
    // Each binding call allocates JNA structures that JNA's cleaner thread frees later, so the
    // counts stay small enough for the cleaner to keep up.
    val calls = 20_000
    val rounds = 7
    var sink = 0L
    // Warm-up: let the JIT compile both paths.
    repeat(3) {
        perCallNs(calls) { sink += LibC.getpid() }
        perCallNs(calls) { ping() }
        perCallNs(calls) { if (isTerminal(ExecutionState.COMPLETED)) sink++ }
    }
    val raw = median(List(rounds) { perCallNs(calls) { sink += LibC.getpid() } })
    val noop = median(List(rounds) { perCallNs(calls) { ping() } })
    // What every binding call allocates first: the call status, a JNA structure (native memory
    // that JNA's cleaner thread frees later).
    val alloc = median(List(rounds) { perCallNs(calls) { sink += Memory(32).size() } })
    val sync = median(List(rounds) { perCallNs(calls) { if (isTerminal(ExecutionState.COMPLETED)) sink++ } })

    val asyncCalls = 5_000
    val async = runBlocking {
        val client = connect("memory://", null, emptyList())
        repeat(asyncCalls / 4) { client.listBots() }
        val figures = List(rounds) {
            val start = System.nanoTime()
            repeat(asyncCalls) { client.listBots() }
            (System.nanoTime() - start).toDouble() / asyncCalls
        }
        client.shutdown()
        client.close()
        median(figures)
    }

    println("raw JNA call (libc getpid), baseline:       %8.0f ns/call".format(raw))
    println("JNA Memory(32) allocation alone:            %8.0f ns".format(alloc))
    println("no-op call through the binding (ping()):    %8.0f ns/call  (%.1fx the baseline)".format(noop, noop / raw))
    println("sync call with an enum (isTerminal()):      %8.0f ns/call  (%.1fx the baseline)".format(sync, sync / raw))
    println("suspend call, memory:// listBots() (empty): %8.0f ns/call  (%.1fx the baseline)".format(async, async / raw))
    if (sink == 42L) println()
}
