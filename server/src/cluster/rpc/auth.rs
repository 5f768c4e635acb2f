//! How nodes prove themselves to each other: every request and every answer is signed with the
//! cluster key (HMAC-SHA256), over what it says and a fresh nonce, and a receiver refuses a
//! request whose time is off by more than [`WINDOW`] or whose nonce it saw before. A member
//! knows no cluster key, so it can neither make a request a node accepts nor replay one it
//! captured; a caller accepts only an answer signed for its own request's nonce.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// How far a request's time may be from the receiver's clock, either way.
pub const WINDOW: Duration = Duration::from_secs(30);

/// The headers of a signed request or answer.
pub mod header {
    /// The calling node's name.
    pub const NODE: &str = "x-openbot-node";
    /// When the request was signed (ms since the epoch).
    pub const TIME: &str = "x-openbot-time";
    /// A fresh random value (32 hex digits) per request.
    pub const NONCE: &str = "x-openbot-nonce";
    /// The time (ms since the epoch) after which the caller no longer waits.
    pub const DEADLINE: &str = "x-openbot-deadline";
    /// The request's ID, the same on every try of one call.
    pub const REQUEST_ID: &str = "x-openbot-request-id";
    /// The signature (hex).
    pub const SIGNATURE: &str = "x-openbot-signature";
}

/// The cluster key every node of a deployment shares (`OPENBOT_CLUSTER_KEY`, base64 of at
/// least 32 random bytes). Its bytes are never printed.
#[derive(Clone)]
pub struct ClusterKey(Vec<u8>);

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

/// A cluster key that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterKeyError {
    /// Not base64.
    #[error("OPENBOT_CLUSTER_KEY is not base64")]
    NotBase64,
    /// Too short to be safe.
    #[error("OPENBOT_CLUSTER_KEY has {0} bytes; it needs at least 32 random bytes")]
    TooShort(usize),
}

impl ClusterKey {
    /// Reads a key from its base64 text.
    pub fn from_base64(text: &str) -> Result<Self, ClusterKeyError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| ClusterKeyError::NotBase64)?;
        if bytes.len() < 32 {
            return Err(ClusterKeyError::TooShort(bytes.len()));
        }
        Ok(Self(bytes))
    }

    /// A new random key, as base64 text (what `openbot admin cluster-key` prints).
    pub fn generate() -> String {
        use chacha20poly1305::aead::OsRng;
        use chacha20poly1305::aead::rand_core::RngCore as _;
        let mut bytes = [0u8; 32];
        OsRng.fill_bytes(&mut bytes);
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn mac(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        // Any key length is valid for HMAC; the error cannot happen.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        for part in parts {
            // Length-prefixed, so no two different lists of parts sign the same bytes.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    /// The signature of `parts`, as hex.
    pub fn sign(&self, parts: &[&[u8]]) -> String {
        crate::hex::encode(&self.mac(parts).finalize().into_bytes())
    }

    /// Whether `signature` (hex) signs `parts`, compared in constant time.
    pub fn verify(&self, parts: &[&[u8]], signature: &str) -> bool {
        match crate::hex::decode(signature) {
            Some(bytes) => self.mac(parts).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }
}

/// The SHA-256 of a body, which a signature covers instead of the body itself.
pub fn digest(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// What a request's signature covers, besides its body's digest.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The HTTP method.
    pub method: &'a str,
    /// The path (`/rpc/v1/{operation}`).
    pub path: &'a str,
    /// The calling node.
    pub node: &'a str,
    /// When it was signed (ms since the epoch, as sent).
    pub time: &'a str,
    /// Its nonce.
    pub nonce: &'a str,
    /// Its deadline (ms since the epoch, as sent).
    pub deadline: &'a str,
    /// Its request ID.
    pub request_id: &'a str,
}

impl<'a> RequestHead<'a> {
    /// The signed parts: the head's fields and the body's digest.
    pub fn parts(&self, body_digest: &'a [u8; 32]) -> [&'a [u8]; 9] {
        [
            b"openbot-rpc-request-v1",
            self.method.as_bytes(),
            self.path.as_bytes(),
            self.node.as_bytes(),
            self.time.as_bytes(),
            self.nonce.as_bytes(),
            self.deadline.as_bytes(),
            self.request_id.as_bytes(),
            body_digest,
        ]
    }
}

/// What an answer's signature covers: the request's nonce, so an answer cannot be replayed to
/// another request.
pub fn answer_parts<'a>(
    nonce: &'a str,
    status: &'a str,
    node: &'a str,
    body_digest: &'a [u8; 32],
) -> [&'a [u8]; 5] {
    [
        b"openbot-rpc-answer-v1",
        nonce.as_bytes(),
        status.as_bytes(),
        node.as_bytes(),
        body_digest,
    ]
}

/// A fresh nonce: 16 random bytes as 32 hex digits.
pub fn nonce() -> String {
    use chacha20poly1305::aead::OsRng;
    use chacha20poly1305::aead::rand_core::RngCore as _;
    let mut bytes = [0u8; 16];
    OsRng.fill_bytes(&mut bytes);
    crate::hex::encode(&bytes)
}

/// The nonces a receiver saw within the last two windows: a request whose nonce is here is a
/// replay. Older ones are dropped, since a request that old is refused by its time anyway.
#[derive(Debug, Default)]
pub struct SeenNonces(Mutex<HashMap<String, i64>>);

impl SeenNonces {
    /// Records `nonce` seen at `now_ms`; `false` when it was seen before (a replay).
    pub fn first_time(&self, nonce: &str, now_ms: i64) -> bool {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let keep_from = now_ms - 2 * WINDOW.as_millis() as i64;
        if seen.len() > 1024 {
            seen.retain(|_, at| *at >= keep_from);
        }
        match seen.get(nonce) {
            Some(at) if *at >= keep_from => false,
            _ => {
                seen.insert(nonce.to_string(), now_ms);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ClusterKey {
        ClusterKey::from_base64(&ClusterKey::generate()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_signature_verifies_with_its_key_only_and_for_its_parts_only() {
        let (one, other) = (key(), key());
        let signature = one.sign(&[b"a", b"bc"]);
        assert!(one.verify(&[b"a", b"bc"], &signature));
        assert!(!other.verify(&[b"a", b"bc"], &signature));
        assert!(
            !one.verify(&[b"ab", b"c"], &signature),
            "parts are length-prefixed"
        );
        assert!(!one.verify(&[b"a", b"bc"], "zz"));
    }

    #[test]
    fn a_key_shorter_than_32_bytes_or_not_base64_is_refused() {
        assert_eq!(
            ClusterKey::from_base64("AAAA").err(),
            Some(ClusterKeyError::TooShort(3))
        );
        assert_eq!(
            ClusterKey::from_base64("not base64!").err(),
            Some(ClusterKeyError::NotBase64)
        );
    }

    #[test]
    fn a_nonce_is_accepted_once_within_the_window() {
        let seen = SeenNonces::default();
        assert!(seen.first_time("n1", 1_000_000));
        assert!(!seen.first_time("n1", 1_000_500));
        assert!(seen.first_time("n2", 1_000_500));
    }
}
