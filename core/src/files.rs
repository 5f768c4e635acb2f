//! File rules both hosts keep: the server (bytes in its object store) and the in-memory Client
//! (bytes in memory) check an upload and describe a file with these, so a file has the same
//! limits and the same description in both modes.

use openbot_schema::{FileId, StoredFile};
use sha2::{Digest, Sha256};

/// The largest file stored: 20 MiB.
pub const MAX_FILE_BYTES: usize = 20 * 1024 * 1024;

/// Why an upload is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileRuleError {
    /// The name or media type cannot be used (`invalid_input`).
    #[error("{0}")]
    Invalid(String),
    /// More than [`MAX_FILE_BYTES`] (`payload_too_large`).
    #[error("a file has at most {MAX_FILE_BYTES} bytes")]
    TooLarge,
}

/// A file name: 1-255 characters, no slash, backslash or control character.
pub fn check_file_name(name: &str) -> Result<(), FileRuleError> {
    let valid = (1..=255).contains(&name.chars().count())
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control);
    if valid {
        Ok(())
    } else {
        Err(FileRuleError::Invalid(
            "a file name has 1-255 characters and no slash or control character".into(),
        ))
    }
}

/// A media type such as `text/plain`: `type/subtype`, printable ASCII, at most 255 bytes.
pub fn check_media_type(media_type: &str) -> Result<(), FileRuleError> {
    let valid = media_type.len() <= 255
        && media_type.split_once('/').is_some_and(|(kind, sub)| {
            !kind.is_empty()
                && !sub.is_empty()
                && media_type
                    .bytes()
                    .all(|b| b.is_ascii_graphic() || b == b' ')
        });
    if valid {
        Ok(())
    } else {
        Err(FileRuleError::Invalid(format!(
            "`{}` is not a media type such as text/plain",
            media_type.chars().take(80).collect::<String>()
        )))
    }
}

/// Checks an upload: its name, its media type and its size.
pub fn check_upload(name: &str, media_type: &str, size: usize) -> Result<(), FileRuleError> {
    check_file_name(name)?;
    check_media_type(media_type)?;
    if size > MAX_FILE_BYTES {
        return Err(FileRuleError::TooLarge);
    }
    Ok(())
}

/// The SHA-256 of `bytes`, lower-case hex, as a file's description gives it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The description of a new file of `bytes`, stored now under a new ID.
pub fn new_file(name: &str, media_type: &str, bytes: &[u8]) -> StoredFile {
    StoredFile {
        id: FileId::new(),
        name: name.to_string(),
        media_type: media_type.to_string(),
        size: bytes.len() as u64,
        sha256: sha256_hex(bytes),
        created_at: chrono::Utc::now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_media_types_are_checked() {
        assert!(check_file_name("notes.txt").is_ok());
        for bad in ["", "a/b", "a\\b", "a\nb"] {
            assert!(check_file_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_file_name(&"x".repeat(256)).is_err());
        assert!(check_media_type("text/plain; charset=utf-8").is_ok());
        for bad in ["text", "/plain", "text/", "tëxt/plain"] {
            assert!(check_media_type(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_file_over_the_limit_is_too_large() {
        assert_eq!(
            check_upload("a", "text/plain", MAX_FILE_BYTES + 1),
            Err(FileRuleError::TooLarge)
        );
        assert!(check_upload("a", "text/plain", MAX_FILE_BYTES).is_ok());
    }

    #[test]
    fn the_digest_is_sha256_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
