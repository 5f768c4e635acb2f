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
/// execution's earlier holds, reads the price in force, locks the budgets above the call and
/// the credit account, and inserts the hold, or refuses the whole transaction (see
/// [`Reservation::refusal`]).
#[derive(Debug)]
pub struct Reservation {
    /// The call.
    pub call: CallBilling,
    /// Its estimate.
    pub estimate: RequestEstimate,
    outcome: Mutex<Option<Result<Option<Pricing>, Refusal>>>,
}

impl Reservation {
    /// A reservation for `call` of `estimate`.
    pub fn new(call: CallBilling, estimate: RequestEstimate) -> Self {
        Self {
            call,
            estimate,
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
            Some(Ok(price)) => *price,
            _ => None,
        }
    }

    pub(super) fn set_outcome(&self, outcome: Result<Option<Pricing>, Refusal>) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
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
