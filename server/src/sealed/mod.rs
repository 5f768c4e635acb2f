//! Sealed records and sealed values, encrypted with XChaCha20-Poly1305 under a key ring with
//! key IDs, so keys can rotate. Records (inputs, outputs, outside results, full failure
//! causes) are rows of their own, bound to their record ID; values (the payloads of events,
//! Turn input, notices and requests) are sealed inside their own rows, bound to the row.

mod keyring;

pub use keyring::{KeyRing, KeyRingError, SealError, SealedValue};
