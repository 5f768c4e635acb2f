//! The saved login: one server and its token, readable by this user only.

use std::path::PathBuf;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// A saved login.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profile {
    /// The server's URL.
    pub server: String,
    /// The API token.
    pub token: String,
}

impl Profile {
    /// Where the login is kept: [`config_dir`], file `login.json`.
    pub fn path() -> anyhow::Result<PathBuf> {
        Ok(config_dir()?.join("login.json"))
    }

    /// The saved login, if any.
    pub fn load() -> anyhow::Result<Option<Self>> {
        let path = Self::path()?;
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{} is not a saved login; run `openbot login` again",
                    path.display()
                )
            })?)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Saves the login, readable and writable by this user only.
    pub fn save(&self) -> anyhow::Result<PathBuf> {
        let path = Self::path()?;
        write_private(&path, &serde_json::to_string_pretty(self)?)?;
        Ok(path)
    }
}

/// The CLI's folder: `$OPENBOT_CONFIG_DIR`, else `$XDG_CONFIG_HOME/openbot`, else
/// `~/.config/openbot`.
pub fn config_dir() -> anyhow::Result<PathBuf> {
    Ok(match std::env::var_os("OPENBOT_CONFIG_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("XDG_CONFIG_HOME") {
            Some(dir) => PathBuf::from(dir).join("openbot"),
            None => PathBuf::from(
                std::env::var_os("HOME").context("HOME is not set: set OPENBOT_CONFIG_DIR")?,
            )
            .join(".config/openbot"),
        },
    })
}

/// Writes `text` to `path` (creating its folder), readable and writable by this user only:
/// what it holds is a credential.
pub fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(text.as_bytes())?;
    Ok(())
}
