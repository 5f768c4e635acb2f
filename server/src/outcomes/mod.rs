//! Unknown outcomes: the way out of `outcome_unknown`.
//!
//! An outside write without a safe retry rule whose result was lost is never sent again on its
//! own: its execution waits in `outcome_unknown` (see `PhaseError::OutcomeUnknown`). A person
//! checks the outside system and decides: `applied` (with the result, which becomes the call's
//! saved result), `not_applied` (the call is sent again as a new attempt) or `give_up` (the
//! execution ends `failed`, sending nothing). A decision needs the `outcomes` write right and
//! an execution the caller may see; it is written with its audit entry in one transaction
//! (`CallStore::decide_unknown`), and a second decision for the same call is refused.

mod service;

pub use service::{MAX_RESULT, OutcomeError, Outcomes};
