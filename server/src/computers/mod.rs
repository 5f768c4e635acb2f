//! Computers: machines paired with the server (docs/computers.md). A machine starts a pairing
//! (`openbot computer pair`), a member approves its code, and the machine claims its own
//! credential, revocable and never a member's token. This machine as a Computer, its terminal
//! sessions and file tools, are `openbot_core::computer`.
//!
//! - `store`: the rows and the [`ComputerStore`] trait; `sql`: its one body for both databases;
//! - `service`: [`Computers`], the use cases, each checking its caller first.

mod service;
mod sql;
mod store;

pub use service::{CREDENTIAL_PREFIX, Computers, MAX_OPEN_PAIRINGS, PAIRING_MS};
pub use store::{Approval, ComputerRow, ComputerStore, NewPairing, PairingRow};

/// Registers the Computer store with the capabilities' features, where the HTTP routes and
/// the CLI find it ([`store`]).
pub fn register(
    features: crate::features::Features,
    store: std::sync::Arc<dyn ComputerStore>,
) -> crate::features::Features {
    features.with(store)
}

/// The Computer store, as [`register`] left it.
pub fn store(features: &crate::features::Features) -> Option<&std::sync::Arc<dyn ComputerStore>> {
    features.get::<std::sync::Arc<dyn ComputerStore>>()
}
