use sha2::{Digest, Sha256};

/// The random seed of a run, derived from the code call's identity (e.g. its call key), so
/// a replay of the same call draws the same numbers.
pub fn derive_seed(identity: &str) -> u64 {
    let digest = Sha256::digest(identity.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(bytes)
}

/// The key of call number `index` made by the code call keyed `parent`: stable across
/// replays, distinct per index.
pub fn sub_key(parent: &str, index: u32) -> String {
    format!("{parent}/code/{index}")
}
