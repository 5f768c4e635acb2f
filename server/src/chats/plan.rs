//! Plan mode's own row in a decision's transaction: an approved plan is the one way out of
//! plan mode for the Bot, so the decision and the switch commit together or not at all.

use uuid::Uuid;

use crate::store::tx_write;

/// Switches plan mode off for the Chat of an approved plan request.
#[derive(Debug)]
pub(crate) struct PlanApproved {
    /// The plan's request.
    pub(crate) request: Uuid,
}

tx_write!(PlanApproved, |this, tx| {
    // The request row was closed earlier in this transaction: only an approval switches.
    sqlx::query(
        "UPDATE chats SET plan_mode = FALSE WHERE id = \
         (SELECT chat_id FROM requests WHERE id = $1 AND state = 'approved')",
    )
    .bind(this.request)
    .execute(&mut **tx)
    .await?;
    Ok(())
});

/// Offers `propose_plan` to a Turn of a Chat in plan mode.
pub struct PlanOffer;

impl super::TurnOffer for PlanOffer {
    fn offer(
        &self,
        _bot: &crate::bots::BotRow,
        chat: &super::ChatRow,
    ) -> Option<crate::turns::SavedTool> {
        chat.plan_mode.then(crate::turns::propose_plan_tool)
    }
}
