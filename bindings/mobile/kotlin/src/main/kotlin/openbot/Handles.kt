// The hand-written part of the Kotlin SDK: handles that read well (a Bot, its Chats, a Turn),
// events as a Flow, and the error fields on the base exception. Everything here is a thin layer
// over the generated `Client` methods; it adds no call of its own.

package uniffi.openbot

import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow
import uniffi.openbot.schema.Bot
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.BotId
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.BotUpdate
import uniffi.openbot.schema.Chat
import uniffi.openbot.schema.ChatEntry
import uniffi.openbot.schema.ChatId
import uniffi.openbot.schema.CreateChat
import uniffi.openbot.schema.ErrorCategory
import uniffi.openbot.schema.Event
import uniffi.openbot.schema.EventKind
import uniffi.openbot.schema.Execution
import uniffi.openbot.schema.ExecutionId
import uniffi.openbot.schema.SendInput
import uniffi.openbot.schema.SendReceipt
import uniffi.openbot.schema.TurnOutcome
import uniffi.openbot.schema.Usage

/** The stable code of any OpenBot error, e.g. `not_found`. */
val OpenBotException.code: String get() = errorCode()

/** For faults: the safe category, e.g. `model_provider`. */
val OpenBotException.category: String? get() = errorCategory()

/** For faults: the ID of the sealed failure record. */
val OpenBotException.errorId: String? get() = errorId()

/** The whole event as JSON, as the HTTP API sends it. */
val Event.json: String get() = eventJson(this)

/** The wire name of the event's kind, e.g. `text_delta`, `turn_ended`. */
val Event.eventType: String get() = eventType(this)

/** Creates a Bot and returns its handle (`createBot` returns the record alone). */
suspend fun Client.createBotHandle(spec: BotSpec): BotHandle = BotHandle(this, createBot(spec))

/** The handle of an existing Bot. */
suspend fun Client.botHandle(id: BotId): BotHandle = BotHandle(this, getBot(id))

/** The handle of an existing Chat. */
suspend fun Client.chatHandle(id: ChatId): ChatHandle = ChatHandle(this, getChat(id))

/** A Bot on its client: `createChat()` starts a conversation with it. */
class BotHandle(val client: Client, val bot: Bot) {
    /** Its ID. */
    val id: BotId get() = bot.id

    /** Creates a Chat with this Bot. */
    suspend fun createChat(): ChatHandle = ChatHandle(client, client.createChat(CreateChat(bot.id)))

    /** Changes the Bot; the handle returned holds the new revision. */
    suspend fun update(update: BotUpdate): BotHandle = BotHandle(client, client.updateBot(bot.id, update))

    /** Deletes the Bot (it must have no Chats left). */
    suspend fun delete() = client.deleteBot(bot.id)
}

/** A Chat on its client: `send` starts (or queues) a Turn. */
class ChatHandle(val client: Client, val chat: Chat) {
    /** Its ID. */
    val id: ChatId get() = chat.id

    /** Sends text and returns the Turn that takes it. */
    suspend fun send(text: String, commandKey: String? = null): Turn = send(textInput(text, commandKey))

    /** Sends input and returns the Turn that takes it. */
    suspend fun send(input: SendInput): Turn = Turn(client, client.send(chat.id, input))

    /** Sends input that joins the running Turn (or starts one). */
    suspend fun steer(text: String): Turn = Turn(client, client.steer(chat.id, textInput(text, null)))

    /** The Chat's messages, oldest first. */
    suspend fun history(): List<ChatEntry> = client.historyFlow(chat.id).toList()

    /** Stops the running Turn; queued input stays queued. */
    suspend fun stop() = client.stop(chat.id)

    /** Deletes the Chat once its Turns ended. */
    suspend fun delete() = client.deleteChat(chat.id)
}

/** How a Turn ended: its outcome (none when it failed), the text of its last model step. */
data class TurnEnd(
    /** The Turn's execution. */
    val executionId: ExecutionId,
    /** Why it ended; `null` when the execution failed (see `failure`). */
    val outcome: TurnOutcome?,
    /** The text the model answered in its last step (its last attempt). */
    val text: String,
    /** What the Turn used; `null` when it failed. */
    val usage: Usage?,
    /** The failure's category and error ID, when it failed. */
    val failure: EventKind.Failed?,
) {
    /** The failure's category, when it failed. */
    val failureCategory: ErrorCategory? get() = failure?.category
}

/** One Turn: its events as a Flow, `wait()` for its end. */
class Turn(val client: Client, val receipt: SendReceipt) {
    /** The Turn's execution. */
    val executionId: ExecutionId get() = receipt.executionId

    /**
     * The Turn's events after sequence `after`, to its last one. Each collection observes anew;
     * stopping the collection stops observing only, the Turn goes on.
     */
    fun events(after: ULong = 0UL): Flow<Event> = flow {
        client.observe(executionId, after).use { stream ->
            try {
                while (true) emit(stream.next() ?: break)
            } finally {
                stream.shutdown()
            }
        }
    }

    /** Waits for the Turn's end and returns it with the text of its last model step. */
    suspend fun wait(): TurnEnd {
        var step = 0u to 0u
        val text = StringBuilder()
        var end: TurnEnd? = null
        events().collect { event ->
            when (val kind = event.kind) {
                is EventKind.ModelStepStarted -> {
                    step = kind.step to kind.attempt
                    text.setLength(0)
                }
                is EventKind.TextDelta -> if ((kind.step to kind.attempt) == step) text.append(kind.text)
                is EventKind.TurnEnded -> end = TurnEnd(executionId, kind.outcome, text.toString(), kind.usage, null)
                is EventKind.Failed -> end = TurnEnd(executionId, null, text.toString(), null, kind)
                else -> {}
            }
        }
        return end ?: throw IllegalStateException("the events of $executionId ended without the Turn's end")
    }

    /** Asks the Turn to stop; returns its execution's state. */
    suspend fun cancel(): Execution = client.cancelExecution(executionId)

    /** The Turn's execution now. */
    suspend fun execution(): Execution = client.getExecution(executionId)
}
