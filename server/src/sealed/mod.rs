//! Sealed records: inputs, outside results and full failure causes, encrypted with
//! XChaCha20-Poly1305 under a key ring with key IDs, so keys can rotate.

mod keyring;

pub use keyring::{KeyRing, KeyRingError, SealError};
