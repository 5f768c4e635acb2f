//! Where a memory's sealed parts live: each is sealed for its memory's ID, so a database writer
//! cannot move one memory's content into another row, and changing tags or status (other
//! columns) never touches the ciphertext.

use uuid::Uuid;

use openbot_core::memories::TermDigest;

use super::store::SealedContent;
use crate::sealed::{KeyRing, SealError, SealedValue};

fn content_place(id: Uuid) -> Vec<u8> {
    let mut out = b"openbot:memories\0".to_vec();
    out.extend_from_slice(id.as_bytes());
    out
}

fn digest_place(id: Uuid) -> Vec<u8> {
    let mut out = b"openbot:memory_digests\0".to_vec();
    out.extend_from_slice(id.as_bytes());
    out
}

fn embedding_place(id: Uuid) -> Vec<u8> {
    let mut out = b"openbot:memory_embeddings\0".to_vec();
    out.extend_from_slice(id.as_bytes());
    out
}

/// Seals a memory's content, and beside it the digest ranking reads instead of it.
pub(crate) fn seal_content(
    keys: &KeyRing,
    id: Uuid,
    content: &str,
) -> Result<SealedContent, SealError> {
    let digest =
        serde_json::to_vec(&TermDigest::of(content)).map_err(|_| SealError::DamagedValue)?;
    Ok(SealedContent {
        content: keys.seal_at(&content_place(id), content.as_bytes())?,
        digest: keys.seal_at(&digest_place(id), &digest)?,
    })
}

/// Opens a memory's content digest.
pub(crate) fn open_digest(
    keys: &KeyRing,
    id: Uuid,
    value: &SealedValue,
) -> Result<TermDigest, SealError> {
    let bytes = keys.open_at(&digest_place(id), value)?;
    serde_json::from_slice(&bytes).map_err(|_| SealError::DamagedValue)
}

/// Opens a memory's content.
pub(crate) fn open_content(
    keys: &KeyRing,
    id: Uuid,
    value: &SealedValue,
) -> Result<String, SealError> {
    let bytes = keys.open_at(&content_place(id), value)?;
    String::from_utf8(bytes).map_err(|_| SealError::DamagedValue)
}

/// Seals an embedding (little-endian f32s).
pub(crate) fn seal_embedding(
    keys: &KeyRing,
    id: Uuid,
    vector: &[f32],
) -> Result<SealedValue, SealError> {
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    keys.seal_at(&embedding_place(id), &bytes)
}

/// Opens an embedding.
pub(crate) fn open_embedding(
    keys: &KeyRing,
    id: Uuid,
    value: &SealedValue,
) -> Result<Vec<f32>, SealError> {
    let bytes = keys.open_at(&embedding_place(id), value)?;
    if bytes.len() % 4 != 0 {
        return Err(SealError::DamagedValue);
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}
