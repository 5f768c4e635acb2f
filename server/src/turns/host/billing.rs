//! Billing in the durable host: a model request's reservation commits with its `sending`
//! (refused, with nothing written, when it would overspend a budget or the credits), its
//! settlement with its answer (also a late answer after a takeover), and the release of a
//! hold that no answer settled with the Turn's end.

use std::sync::{Arc, PoisonError};

use openbot_core::model::Pricing;
use openbot_core::turn::{CallKey, CallSlot, HostError, RequestEstimate};
use openbot_schema::{EventKind, TurnOutcome, Usage};
use uuid::Uuid;

use super::DurableHost;
use crate::billing::{CallBilling, Refusal, Release, Reservation, Settlement, cost_of};
use crate::store::{CallPhase, Commit, TxWrite, TxWrites, call_key_name};
use crate::turns::faults::labels;

/// What every model call of a Turn bills: its organization, Bots, Chat, member and model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BillingContext {
    /// The organization whose budgets and credits the Turn spends.
    pub(crate) organization: Uuid,
    /// The Bot whose Turn it is.
    pub(crate) bot: Uuid,
    /// The Bot of the Chat its tree works for.
    pub(crate) budget_bot: Uuid,
    /// The Chat its tree works for.
    pub(crate) chat: Option<Uuid>,
    /// The member whose work it is.
    pub(crate) member: Option<Uuid>,
    /// The model spec.
    pub(crate) model: String,
    /// The catalog's price of the model.
    pub(crate) catalog: Option<Pricing>,
}

impl DurableHost {
    fn call_billing(&self, billing: &BillingContext, key: CallKey) -> CallBilling {
        CallBilling {
            execution: self.id,
            call_key: call_key_name(&key),
            generation: self.generation,
            organization: billing.organization,
            bot: billing.bot,
            budget_bot: billing.budget_bot,
            chat: billing.chat,
            member: billing.member,
            model: billing.model.clone(),
            catalog: billing.catalog,
        }
    }

    /// Marks a model request `sending` with its reservation in one commit; without billing,
    /// as any other send.
    pub(super) async fn send_model(
        &self,
        key: CallKey,
        events: Vec<EventKind>,
        estimate: RequestEstimate,
    ) -> Result<(), HostError> {
        let Some(billing) = &self.billing.context else {
            return self.send(key, events, TxWrites::default()).await;
        };
        // Results held for this commit are settled in it before the reservation's rows.
        let release_earlier = self.hold_may_remain(&self.held_results()).await?;
        let reservation = Arc::new(Reservation::new(
            self.call_billing(billing, key),
            estimate,
            release_earlier,
        ));
        let write: Arc<dyn TxWrite> = Arc::clone(&reservation) as Arc<dyn TxWrite>;
        match self.send(key, events, TxWrites(vec![write])).await {
            Ok(()) => {
                if release_earlier {
                    self.billing
                        .earlier_request_open
                        .store(false, std::sync::atomic::Ordering::SeqCst);
                }
                *self
                    .billing
                    .reserved
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(OpenHold {
                    key,
                    price: reservation.price(),
                    record_price: reservation.record_price(),
                });
                Ok(())
            }
            Err(HostError::Storage(cause)) => match reservation.refusal() {
                Some(refusal) => {
                    // The refused commit wrote nothing: this failure is no storage failure.
                    let _ = self.take_failure();
                    let outcome = match refusal {
                        Refusal::Budget { scope, .. } => {
                            tracing::info!(
                                scope = scope.as_str(),
                                "a reservation would overspend a budget; the Turn ends"
                            );
                            TurnOutcome::MaxCost
                        }
                        Refusal::Credits { .. } => {
                            tracing::info!(
                                "the organization's credits do not cover the reservation; the Turn ends"
                            );
                            TurnOutcome::CreditsExhausted
                        }
                    };
                    Err(HostError::Declined(outcome))
                }
                None => Err(HostError::Storage(cause)),
            },
            Err(other) => Err(other),
        }
    }

    /// Marks `key` sending with its events and `writes`, after the guards. A retry-safe tool's
    /// call was saved as `sending` with the answer that asked for it: nothing more to write.
    pub(super) async fn send(
        &self,
        key: CallKey,
        events: Vec<EventKind>,
        writes: TxWrites,
    ) -> Result<(), HostError> {
        self.check_guards(key).await?;
        let saved = matches!(key.slot, CallSlot::Tool(_) | CallSlot::Code { .. })
            && events.is_empty()
            && writes.0.is_empty()
            && self
                .saved_row(key.step, key.slot)
                .await?
                .is_some_and(|row| row.key == key && row.phase == CallPhase::Sending);
        if saved {
            return Ok(());
        }
        let call = self.calls().write(key, CallPhase::Sending, None, None);
        // A model request also marks its step's input as taken: `take_steering` wrote
        // nothing when no input waited.
        let (input_step, label) = match key.slot {
            CallSlot::Model => (Some(key.step), labels::MODEL_SENDING),
            CallSlot::Tool(_) | CallSlot::Code { .. } => (None, labels::TOOL_SENDING),
        };
        self.commit(
            Commit {
                calls: vec![call],
                events,
                input_step,
                writes,
                ..Commit::default()
            },
            &[label],
            None,
        )
        .await
    }

    /// The settlement of a model call's result, to commit with it (nothing without billing
    /// or for a tool call).
    pub(super) fn settlement(&self, key: CallKey, usage: Option<Usage>) -> TxWrites {
        match &self.billing.context {
            Some(billing) if key.slot == CallSlot::Model => TxWrites::one(Settlement {
                call: self.call_billing(billing, key),
                usage,
                record_price: self
                    .billing
                    .reserved
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .filter(|held| held.key == key)
                    .and_then(|held| held.record_price),
            }),
            _ => TxWrites::default(),
        }
    }

    /// `usage` with its cost at the price saved with `key`'s reservation, for the
    /// execution's totals; as reported when this owner reserved no price for it.
    pub(super) fn priced(&self, key: CallKey, usage: Option<Usage>) -> Option<Usage> {
        let usage = usage?;
        let held = *self
            .billing
            .reserved
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match held {
            Some(OpenHold {
                key: held_key,
                price: Some(price),
                ..
            }) if held_key == key => Some(Usage {
                cost_micros: Some(cost_of(Some(price), &usage).max(0) as u64),
                ..usage
            }),
            _ => Some(usage),
        }
    }

    /// Forgets the hold of `key` once its result was saved.
    pub(super) fn settled(&self, key: CallKey) {
        let mut held = self
            .billing
            .reserved
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if held.is_some_and(|held| held.key == key) {
            *held = None;
        }
    }

    /// The release of the holds no result settled, to commit with the Turn's end: this
    /// owner's, and an older owner's that this one never replaced (a Turn that ends at a limit
    /// before its next request). Nothing without billing, or when no hold can remain once
    /// the calls `settling` (held for the end's commit) are settled.
    pub(super) async fn release_holds(&self, settling: &[CallKey]) -> Result<TxWrites, HostError> {
        if self.billing.context.is_none() || !self.hold_may_remain(settling).await? {
            return Ok(TxWrites::default());
        }
        Ok(TxWrites::one(Release { execution: self.id }))
    }

    /// Whether the execution may still hold a reservation no result settled. A hold is
    /// written with its request's `sending` and settled with its result, so it can remain
    /// only for a request sent without a saved result: one of an earlier phase (the call log
    /// shows it), or this owner's last one, unless its result is among `settling` (held for
    /// the commit this answer is for). Every reservation releases the earlier holds.
    async fn hold_may_remain(&self, settling: &[CallKey]) -> Result<bool, HostError> {
        if self.earlier_request_open().await? {
            return Ok(true);
        }
        let own = *self
            .billing
            .reserved
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(own.is_some_and(|held| !settling.contains(&held.key)))
    }
}

/// The host's part for billing: what its model calls bill, the hold this owner reserved,
/// and whether an earlier owner's request may have left one.
#[derive(Default)]
pub(super) struct Billing {
    /// What the Turn's model calls bill (reservations and settlements), if it is billed.
    pub(super) context: Option<BillingContext>,
    /// The model call this owner reserved and whose result is not saved yet, with the price
    /// saved with it.
    pub(super) reserved: std::sync::Mutex<Option<OpenHold>>,
    /// The call log read for this phase shows a model request sent without a saved result
    /// (its hold may remain) that no reservation of this owner released yet.
    pub(super) earlier_request_open: std::sync::atomic::AtomicBool,
}

/// The model call this owner reserved and whose result is not saved yet.
#[derive(Debug, Clone, Copy)]
pub(super) struct OpenHold {
    key: CallKey,
    /// The price in force when it was reserved.
    price: Option<Pricing>,
    /// The price saved with its usage record, when this owner wrote that record.
    record_price: Option<Option<Pricing>>,
}
