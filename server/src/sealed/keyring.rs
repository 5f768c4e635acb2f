//! The key ring.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use uuid::Uuid;

use crate::store::SealedBlob;

/// Keys by ID; new records are sealed with the current key, old ones open with theirs.
#[derive(Clone)]
pub struct KeyRing {
    current: std::sync::Arc<str>,
    /// Shared: a ring is cloned into every service that seals, and per request.
    keys: std::sync::Arc<BTreeMap<String, XChaCha20Poly1305>>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field("current", &self.current)
            .field("key_ids", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A key ring that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum KeyRingError {
    /// The text is not `id:base64key[,id:base64key...]` with 32-byte keys.
    #[error("invalid key ring: {0}")]
    Invalid(String),
    /// The key file could not be read or written.
    #[error("key file {path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// A record that cannot be sealed or opened.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The record names a key this ring does not have.
    #[error("sealed record {record} needs key `{key_id}`, which the key ring lacks")]
    UnknownKey {
        /// The record.
        record: Uuid,
        /// The missing key.
        key_id: String,
    },
    /// The ciphertext does not open: damaged, or sealed under another key with the same ID.
    #[error("sealed record {0} does not open")]
    Damaged(Uuid),
    /// Encryption failed.
    #[error("sealing failed")]
    Seal,
    /// A sealed value (see [`KeyRing::seal_at`]) names a key this ring does not have.
    #[error("a sealed value needs key `{0}`, which the key ring lacks")]
    UnknownValueKey(String),
    /// A sealed value does not open: damaged, moved from the place it was sealed for, or
    /// sealed under another key with the same ID.
    #[error("a sealed value does not open")]
    DamagedValue,
}

/// A value sealed for one place (see [`KeyRing::seal_at`]): the key ID, then the 24-byte nonce
/// followed by the ciphertext with its tag, as one column stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedValue {
    /// The ID of the key that sealed it.
    pub key_id: String,
    /// The nonce, then the ciphertext with its tag.
    pub bytes: Vec<u8>,
}

/// The length of an XChaCha20-Poly1305 nonce.
const NONCE_LEN: usize = 24;

impl KeyRing {
    /// Reads `id:base64key[,id:base64key...]`; the first key is the current one.
    pub fn parse(text: &str) -> Result<Self, KeyRingError> {
        let mut keys = BTreeMap::new();
        let mut current = None;
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (id, key) = entry
                .split_once(':')
                .ok_or_else(|| KeyRingError::Invalid("expected id:base64key".into()))?;
            let bytes = BASE64
                .decode(key.trim())
                .map_err(|_| KeyRingError::Invalid(format!("key `{id}` is not base64")))?;
            if bytes.len() != 32 {
                return Err(KeyRingError::Invalid(format!(
                    "key `{id}` must be 32 bytes"
                )));
            }
            let cipher = XChaCha20Poly1305::new_from_slice(&bytes)
                .map_err(|_| KeyRingError::Invalid(format!("key `{id}` is unusable")))?;
            current.get_or_insert_with(|| id.to_string());
            keys.insert(id.to_string(), cipher);
        }
        let current = current.ok_or_else(|| KeyRingError::Invalid("no keys".into()))?;
        Ok(Self {
            current: current.into(),
            keys: std::sync::Arc::new(keys),
        })
    }

    /// A ring of one new random key, and its text form for [`KeyRing::parse`].
    pub fn generate(id: &str) -> (Self, String) {
        let key = XChaCha20Poly1305::generate_key(&mut OsRng);
        let text = format!("{id}:{}", BASE64.encode(key));
        let ring = Self {
            current: id.into(),
            keys: std::sync::Arc::new(BTreeMap::from([(
                id.to_string(),
                XChaCha20Poly1305::new(&key),
            )])),
        };
        (ring, text)
    }

    /// Reads the ring from `path`, creating it with a new key (readable by the owner only)
    /// when the file does not exist.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyRingError> {
        let file_error = |source| KeyRingError::File {
            path: path.display().to_string(),
            source,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let (ring, text) = Self::generate("k1");
                write_private(path, &text).map_err(file_error)?;
                Ok(ring)
            }
            Err(err) => Err(file_error(err)),
        }
    }

    /// The ID of the key new records are sealed with.
    pub fn current_key_id(&self) -> &str {
        &self.current
    }

    /// Seals `plaintext` as record `id`. The record ID is bound to the ciphertext, so a sealed
    /// value cannot be moved to another record.
    pub fn seal(&self, id: Uuid, plaintext: &[u8]) -> Result<SealedBlob, SealError> {
        let cipher = self.keys.get(&*self.current).ok_or(SealError::Seal)?;
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ciphertext = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: id.as_bytes(),
                },
            )
            .map_err(|_| SealError::Seal)?;
        Ok(SealedBlob {
            id,
            key_id: self.current.to_string(),
            nonce: nonce.to_vec(),
            ciphertext,
        })
    }

    /// Seals `plaintext` under the current key for the place named by `place` (for a row
    /// value: its table and row key). The place is bound to the ciphertext, so the value opens
    /// only with the same `place` and cannot be moved to another row.
    pub fn seal_at(&self, place: &[u8], plaintext: &[u8]) -> Result<SealedValue, SealError> {
        let cipher = self.keys.get(&*self.current).ok_or(SealError::Seal)?;
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ciphertext = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: place,
                },
            )
            .map_err(|_| SealError::Seal)?;
        let mut bytes = Vec::with_capacity(NONCE_LEN + ciphertext.len());
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&ciphertext);
        Ok(SealedValue {
            key_id: self.current.to_string(),
            bytes,
        })
    }

    /// Opens a value sealed by [`KeyRing::seal_at`] for the same `place`, with the key it
    /// names (old keys stay in the ring after a rotation, so old values still open).
    pub fn open_at(&self, place: &[u8], value: &SealedValue) -> Result<Vec<u8>, SealError> {
        let cipher = self
            .keys
            .get(&value.key_id)
            .ok_or_else(|| SealError::UnknownValueKey(value.key_id.clone()))?;
        if value.bytes.len() < NONCE_LEN {
            return Err(SealError::DamagedValue);
        }
        let (nonce, ciphertext) = value.bytes.split_at(NONCE_LEN);
        cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: place,
                },
            )
            .map_err(|_| SealError::DamagedValue)
    }

    /// Opens a sealed record.
    pub fn open(&self, blob: &SealedBlob) -> Result<Vec<u8>, SealError> {
        let cipher = self
            .keys
            .get(&blob.key_id)
            .ok_or_else(|| SealError::UnknownKey {
                record: blob.id,
                key_id: blob.key_id.clone(),
            })?;
        if blob.nonce.len() != NONCE_LEN {
            return Err(SealError::Damaged(blob.id));
        }
        cipher
            .decrypt(
                XNonce::from_slice(&blob.nonce),
                Payload {
                    msg: &blob.ciphertext,
                    aad: blob.id.as_bytes(),
                },
            )
            .map_err(|_| SealError::Damaged(blob.id))
    }
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_record_opens_and_hides_its_plaintext() {
        let (ring, _) = KeyRing::generate("k1");
        let id = Uuid::now_v7();
        let blob = ring.seal(id, b"the secret cause").unwrap();
        assert!(!blob.ciphertext.windows(6).any(|w| w == b"secret"));
        assert_eq!(ring.open(&blob).unwrap(), b"the secret cause");
    }

    #[test]
    fn a_record_moved_to_another_id_does_not_open() {
        let (ring, _) = KeyRing::generate("k1");
        let mut blob = ring.seal(Uuid::now_v7(), b"x").unwrap();
        blob.id = Uuid::now_v7();
        assert!(matches!(ring.open(&blob), Err(SealError::Damaged(_))));
    }

    #[test]
    fn old_keys_still_open_after_rotation() {
        let (old, old_text) = KeyRing::generate("k1");
        let blob = old.seal(Uuid::now_v7(), b"before").unwrap();
        let (_, new_text) = KeyRing::generate("k2");
        let rotated = KeyRing::parse(&format!("{new_text},{old_text}")).unwrap();
        assert_eq!(rotated.current_key_id(), "k2");
        assert_eq!(rotated.open(&blob).unwrap(), b"before");
        assert_eq!(rotated.seal(Uuid::now_v7(), b"after").unwrap().key_id, "k2");
    }

    #[test]
    fn a_value_sealed_for_one_place_opens_only_there() {
        let (ring, _) = KeyRing::generate("k1");
        let value = ring.seal_at(b"event/1", b"the secret text").unwrap();
        assert!(!value.bytes.windows(6).any(|w| w == b"secret"));
        assert_eq!(
            ring.open_at(b"event/1", &value).unwrap(),
            b"the secret text"
        );
        assert!(matches!(
            ring.open_at(b"event/2", &value),
            Err(SealError::DamagedValue)
        ));
    }

    #[test]
    fn a_value_sealed_under_an_old_key_opens_after_rotation() {
        let (old, old_text) = KeyRing::generate("k1");
        let value = old.seal_at(b"row", b"before").unwrap();
        let (_, new_text) = KeyRing::generate("k2");
        let rotated = KeyRing::parse(&format!("{new_text},{old_text}")).unwrap();
        assert_eq!(rotated.open_at(b"row", &value).unwrap(), b"before");
        assert_eq!(rotated.seal_at(b"row", b"after").unwrap().key_id, "k2");
        let (other, _) = KeyRing::generate("k3");
        assert!(matches!(
            other.open_at(b"row", &value),
            Err(SealError::UnknownValueKey(_))
        ));
    }

    #[test]
    fn a_bad_key_ring_is_refused() {
        assert!(KeyRing::parse("").is_err());
        assert!(KeyRing::parse("k1:bm90IDMyIGJ5dGVz").is_err());
        assert!(KeyRing::parse("no-colon").is_err());
    }
}
