//! Webhook signatures: `v1=` and the hex HMAC-SHA256 of `{timestamp}.{body}` under the
//! trigger's signing secret, checked in constant time, with stale timestamps refused.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::store::Millis;

/// The header with the Unix time (seconds) the sender signed at.
pub const TIMESTAMP_HEADER: &str = "x-openbot-timestamp";
/// The header with the signature, `v1=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-openbot-signature";
/// The header with the sender's ID of the delivery; a repeated ID is taken once.
pub const DELIVERY_HEADER: &str = "x-openbot-delivery";
/// How far a signed timestamp may be from the server's time, either way.
pub const TOLERANCE_MS: Millis = 5 * 60 * 1000;
/// The prefix of signing secrets.
pub const SECRET_PREFIX: &str = "whsec_";

/// Why a delivery's signature was refused. The messages say what to fix and never echo the
/// secret or the expected signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A header is missing or malformed.
    #[error("{0}")]
    Malformed(&'static str),
    /// The timestamp is more than five minutes from the server's time.
    #[error("the timestamp is more than five minutes from the server's time")]
    Stale,
    /// The signature does not match.
    #[error("the signature does not match")]
    Mismatch,
}

/// A new signing secret: the prefix and 32 random bytes.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

fn mac(secret: &str, timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The signature header value of `body` signed at `timestamp` (Unix seconds).
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let bytes = mac(secret, timestamp, body).finalize().into_bytes();
    format!("v1={}", crate::hex::encode(&bytes))
}

/// Checks a delivery: the timestamp within [`TOLERANCE_MS`] of `now`, then the signature
/// against the HMAC of `{timestamp}.{body}` in constant time.
pub fn verify(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: Millis,
) -> Result<(), SignatureError> {
    let timestamp = timestamp.ok_or(SignatureError::Malformed(
        "the x-openbot-timestamp header is missing",
    ))?;
    let seconds: i64 = timestamp.parse().map_err(|_| {
        SignatureError::Malformed("x-openbot-timestamp must be Unix time in seconds")
    })?;
    let signed_at = seconds.saturating_mul(1000);
    if (now - signed_at).abs() > TOLERANCE_MS {
        return Err(SignatureError::Stale);
    }
    let signature = signature.ok_or(SignatureError::Malformed(
        "the x-openbot-signature header is missing",
    ))?;
    let given = signature
        .strip_prefix("v1=")
        .and_then(crate::hex::decode)
        .ok_or(SignatureError::Malformed(
            "x-openbot-signature must be `v1=` and a hex HMAC-SHA256",
        ))?;
    mac(secret, timestamp, body)
        .verify_slice(&given)
        .map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_checked_with_its_timestamp() {
        let secret = new_secret();
        let now = 1_800_000_000_000;
        let ts = "1800000000";
        let good = sign(&secret, ts, b"{\"a\":1}");
        assert_eq!(
            verify(&secret, Some(ts), Some(&good), b"{\"a\":1}", now),
            Ok(())
        );
        assert_eq!(
            verify(&secret, Some(ts), Some(&good), b"{\"a\":2}", now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("whsec_other", Some(ts), Some(&good), b"{\"a\":1}", now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(
                &secret,
                Some(ts),
                Some(&good),
                b"{\"a\":1}",
                now + TOLERANCE_MS + 1000
            ),
            Err(SignatureError::Stale)
        );
        assert!(matches!(
            verify(&secret, Some(ts), Some("v1=zz"), b"", now),
            Err(SignatureError::Malformed(_))
        ));
        assert!(matches!(
            verify(&secret, None, Some(&good), b"", now),
            Err(SignatureError::Malformed(_))
        ));
    }
}
