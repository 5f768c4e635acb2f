//! Token secrets: shown once, stored only as a hash.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use sha2::{Digest, Sha256};

/// The prefix of every API token, so that leaked tokens are easy to recognise.
pub const TOKEN_PREFIX: &str = "obt_";

/// A new token secret: the prefix and 32 random bytes.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// The hash a secret is stored and looked up by.
pub fn secret_hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_unique_prefixed_and_hashed_stably() {
        let a = new_secret();
        let b = new_secret();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() > 40);
        assert_eq!(secret_hash(&a), secret_hash(&a));
        assert_ne!(secret_hash(&a), secret_hash(&b));
    }
}
