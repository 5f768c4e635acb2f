// Flat calls in the shape the Kotlin SDK had before every operation was generated: each is one
// line over the generated method that takes the operation's body record.

package uniffi.openbot

import uniffi.openbot.schema.ApprovalRequest
import uniffi.openbot.schema.BotId
import uniffi.openbot.schema.Chat
import uniffi.openbot.schema.CreateChat
import uniffi.openbot.schema.DecideApproval
import uniffi.openbot.schema.DecideOutcome
import uniffi.openbot.schema.Decision
import uniffi.openbot.schema.OutcomeDecision
import uniffi.openbot.schema.OutcomeDecisionRecord

/** Creates a Chat with a Bot: `createChat(CreateChat(botId))`. */
suspend fun Client.createChat(botId: BotId): Chat = createChat(CreateChat(botId))

/** Decides a pending approval request: `decideApproval(id, DecideApproval(decision, reason))`. */
suspend fun Client.decideApproval(id: String, decision: Decision, reason: String? = null): ApprovalRequest =
    decideApproval(id, DecideApproval(decision, reason))

/**
 * Decides the call an execution waits for in `OUTCOME_UNKNOWN`:
 * `decideOutcome(executionId, DecideOutcome(call, decision, result, reason))`.
 */
suspend fun Client.decideOutcome(
    executionId: String,
    call: String,
    decision: OutcomeDecision,
    result: String? = null,
    reason: String? = null,
): OutcomeDecisionRecord = decideOutcome(executionId, DecideOutcome(call, decision, result, reason))
