//! The rows billing writes inside a Turn's step commits: the reservation with the model
//! request's `sending`, the settlement with its answer, the release of a hold with the
//! Turn's end. Each is a [`TxWrite`]: it commits or rolls back with the step.

use std::sync::{Mutex, PoisonError};

use openbot_core::model::Pricing;
use openbot_core::turn::RequestEstimate;
use openbot_schema::{BudgetScope, ExecutionId, Usage};
use uuid::Uuid;

/// Who a model call bills: its billing identity (execution and call key) and what it is
/// counted against.
#[derive(Debug, Clone, PartialEq)]
pub struct CallBilling {
    /// The execution that sends the call.
    pub execution: ExecutionId,
    /// The call's key in its stored form (`step/model/attempt`).
    pub call_key: String,
    /// The owner's generation.
    pub generation: i64,
    /// The organization whose budgets and credits it spends.
    pub organization: Uuid,
    /// The Bot whose Turn sends it.
    pub bot: Uuid,
    /// The Bot of the Chat its tree works for (its Bot budget).
    pub budget_bot: Uuid,
    /// The Chat its tree works for, if any.
    pub chat: Option<Uuid>,
    /// The member whose work it is.
    pub member: Option<Uuid>,
    /// The model spec.
    pub model: String,
    /// The catalog's price of the model, used when the organization has no override.
    pub catalog: Option<Pricing>,
}

/// Why a reservation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A budget would be overspent.
    Budget {
        /// Its scope.
        scope: BudgetScope,
        /// Its cap.
        max_micros: i64,
        /// Spent and held in the scope before this call.
        used_micros: i64,
        /// The call's estimate.
        estimate_micros: i64,
    },
    /// The organization's credits would not cover the estimate.
    Credits {
        /// Balance minus holds before this call.
        available_micros: i64,
        /// The call's estimate.
        estimate_micros: i64,
    },
}

/// The reservation of one model request, written with its `sending`: releases the
/// execution's earlier holds (when one may remain), reads the price in force, locks the
/// budgets above the call and the credit account (when there are any), and inserts the hold,
/// or refuses the whole transaction (see [`Reservation::refusal`]).
#[derive(Debug)]
pub struct Reservation {
    /// The call.
    pub call: CallBilling,
    /// Its estimate.
    pub estimate: RequestEstimate,
    /// Whether a hold of an earlier request may remain (an attempt that ended without a
    /// result, or an older owner's): it is released first. The caller answers from the call
    /// log, which shows every request whose hold no result settled as not done.
    pub release_earlier: bool,
    outcome: Mutex<Option<Result<Reserved, Refusal>>>,
}

/// What a reservation wrote.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reserved {
    price: Option<Pricing>,
    wrote_record: bool,
}

impl Reservation {
    /// A reservation for `call` of `estimate`; `release_earlier` says whether an earlier
    /// hold may remain.
    pub fn new(call: CallBilling, estimate: RequestEstimate, release_earlier: bool) -> Self {
        Self {
            call,
            estimate,
            release_earlier,
            outcome: Mutex::new(None),
        }
    }

    /// Why the reservation refused its transaction, if it did.
    pub fn refusal(&self) -> Option<Refusal> {
        match &*self.outcome.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(Err(refusal)) => Some(refusal.clone()),
            _ => None,
        }
    }

    /// The price saved with the hold (`None`: the model has no price), once it was written.
    pub fn price(&self) -> Option<Pricing> {
        match &*self.outcome.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(Ok(reserved)) => reserved.price,
            _ => None,
        }
    }

    /// The price of the call's usage record when this reservation wrote that record (not
    /// when a record of the same call was there already): what its settlement charges at.
    pub fn record_price(&self) -> Option<Option<Pricing>> {
        match &*self.outcome.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(Ok(reserved)) if reserved.wrote_record => Some(reserved.price),
            _ => None,
        }
    }

    pub(super) fn set_written(&self, price: Option<Pricing>, wrote_record: bool) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(Ok(Reserved {
            price,
            wrote_record,
        }));
    }

    pub(super) fn set_refused(&self, refusal: Refusal) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(Err(refusal));
    }
}

/// The settlement of a model call, written with its result: confirmed usage priced at the
/// call's saved price and charged once (a call already settled is left alone), or, for a
/// result without usage, unknown usage that keeps its estimate and charges nothing.
#[derive(Debug)]
pub struct Settlement {
    /// The call.
    pub call: CallBilling,
    /// The confirmed usage, if the result had any.
    pub usage: Option<Usage>,
    /// The price saved with the call's record, when the settling owner wrote that record
    /// itself ([`Reservation::record_price`]): the record is then settled without reading
    /// it first. `None`: read the record's own price.
    pub record_price: Option<Option<Pricing>>,
}

/// Releases the holds an execution still has (its Turn ended with a call that has no result).
#[derive(Debug)]
pub struct Release {
    /// The execution.
    pub execution: ExecutionId,
}

/// What `usage` costs at `price`; without a price, what the model itself reported (a
/// scripted model's), else 0.
pub fn cost_of(price: Option<Pricing>, usage: &Usage) -> i64 {
    let cost = match price {
        Some(price) => price.cost_micros(usage),
        None => usage.cost_micros.unwrap_or(0),
    };
    i64::try_from(cost).unwrap_or(i64::MAX)
}

/// What a request estimated at `estimate` would cost at `price` (0 without a price).
pub fn estimate_of(price: Option<Pricing>, estimate: RequestEstimate) -> i64 {
    let usage = Usage {
        input_tokens: estimate.input_tokens,
        output_tokens: estimate.output_tokens,
        ..Usage::default()
    };
    price.map_or(0, |price| {
        i64::try_from(price.cost_micros(&usage)).unwrap_or(i64::MAX)
    })
}
