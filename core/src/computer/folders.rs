//! The allowed-folders rule: a Computer's file tools and terminal start folders reach only
//! what lies inside the folders its owner named when starting it, after symbolic links are
//! followed. One rule for this process and the Computer agent.

use std::path::{Component, Path, PathBuf};

use super::ComputerError;

/// The folders a Computer's owner allowed, each resolved once (symbolic links followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedFolders {
    roots: Vec<PathBuf>,
}

impl AllowedFolders {
    /// The rule for these folders. Each must exist and be a folder; at least one is needed.
    /// The first is where relative paths and terminals start.
    pub fn new<P: AsRef<Path>>(
        folders: impl IntoIterator<Item = P>,
    ) -> Result<Self, ComputerError> {
        let mut roots = Vec::new();
        for folder in folders {
            let folder = folder.as_ref();
            let root = folder.canonicalize().map_err(|e| {
                ComputerError::InvalidInput(format!(
                    "the allowed folder `{}` cannot be opened: {}",
                    folder.display(),
                    io_reason(&e)
                ))
            })?;
            if !root.is_dir() {
                return Err(ComputerError::InvalidInput(format!(
                    "the allowed folder `{}` is not a folder",
                    folder.display()
                )));
            }
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
        if roots.is_empty() {
            return Err(ComputerError::InvalidInput(
                "a Computer needs at least one allowed folder".into(),
            ));
        }
        Ok(Self { roots })
    }

    /// The folders, resolved.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The first folder: where relative paths and terminals start.
    pub fn home(&self) -> &Path {
        &self.roots[0]
    }

    fn inside(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
    }

    /// `path` as written by a caller: relative paths start at [`Self::home`]. Parent steps are
    /// refused outright, so a path never leaves a folder by name.
    fn joined(&self, path: &str) -> Result<PathBuf, ComputerError> {
        if path.is_empty() {
            return Err(ComputerError::InvalidInput("the path is empty".into()));
        }
        if path.contains('\0') {
            return Err(ComputerError::InvalidInput(
                "the path holds a NUL byte".into(),
            ));
        }
        let path = Path::new(path);
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(ComputerError::OutsideFolders(path.display().to_string()));
        }
        Ok(if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.home().join(path)
        })
    }

    /// An existing file or folder inside the allowed folders, resolved; a path that leaves
    /// them (by name or through a symbolic link) is `OutsideFolders`.
    pub fn existing(&self, path: &str) -> Result<PathBuf, ComputerError> {
        let joined = self.joined(path)?;
        let resolved = joined
            .canonicalize()
            .map_err(|e| ComputerError::from_io(path, &e))?;
        if !self.inside(&resolved) {
            return Err(ComputerError::OutsideFolders(path.to_string()));
        }
        Ok(resolved)
    }

    /// Where a file may be written: its folder must exist inside the allowed folders
    /// (resolved), and the file itself, if it exists, must resolve inside them too.
    pub fn writable(&self, path: &str) -> Result<PathBuf, ComputerError> {
        let joined = self.joined(path)?;
        let name = joined
            .file_name()
            .ok_or_else(|| ComputerError::InvalidInput(format!("`{path}` names no file")))?
            .to_owned();
        let parent = joined
            .parent()
            .ok_or_else(|| ComputerError::InvalidInput(format!("`{path}` names no file")))?;
        let parent = parent
            .canonicalize()
            .map_err(|e| ComputerError::from_io(path, &e))?;
        if !self.inside(&parent) {
            return Err(ComputerError::OutsideFolders(path.to_string()));
        }
        let target = parent.join(name);
        match target.canonicalize() {
            Ok(resolved) if !self.inside(&resolved) => {
                Err(ComputerError::OutsideFolders(path.to_string()))
            }
            Ok(resolved) if resolved.is_dir() => {
                Err(ComputerError::InvalidInput(format!("`{path}` is a folder")))
            }
            Ok(resolved) => Ok(resolved),
            // A link whose target does not exist would write outside: refuse it.
            Err(_) if target.symlink_metadata().is_ok() => {
                Err(ComputerError::OutsideFolders(path.to_string()))
            }
            Err(_) => Ok(target),
        }
    }

    /// A folder to start a terminal in: `None` is [`Self::home`].
    pub fn folder(&self, path: Option<&str>) -> Result<PathBuf, ComputerError> {
        let Some(path) = path else {
            return Ok(self.home().to_path_buf());
        };
        let resolved = self.existing(path)?;
        if !resolved.is_dir() {
            return Err(ComputerError::InvalidInput(format!(
                "`{path}` is not a folder"
            )));
        }
        Ok(resolved)
    }
}

/// An I/O failure in words that name no more than its kind.
pub(super) fn io_reason(err: &std::io::Error) -> &'static str {
    match err.kind() {
        std::io::ErrorKind::NotFound => "it does not exist",
        std::io::ErrorKind::PermissionDenied => "permission denied",
        std::io::ErrorKind::InvalidData => "it is not text",
        _ => "an I/O error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> (tempfile::TempDir, AllowedFolders) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "no").unwrap();
        std::fs::write(dir.path().join("work/a.txt"), "yes").unwrap();
        let rule = AllowedFolders::new([dir.path().join("work")]).unwrap();
        (dir, rule)
    }

    #[test]
    fn a_relative_path_starts_in_the_first_folder() {
        let (_dir, rule) = rule();
        let path = rule.existing("a.txt").unwrap();
        assert_eq!(path, rule.home().join("a.txt"));
    }

    #[test]
    fn a_parent_step_is_refused_by_name() {
        let (_dir, rule) = rule();
        let err = rule.existing("../secret.txt").unwrap_err();
        assert!(matches!(err, ComputerError::OutsideFolders(_)), "{err:?}");
        let err = rule.writable("../secret.txt").unwrap_err();
        assert!(matches!(err, ComputerError::OutsideFolders(_)), "{err:?}");
    }

    #[test]
    fn an_absolute_path_outside_the_folders_is_refused() {
        let (dir, rule) = rule();
        let outside = dir.path().join("secret.txt");
        let err = rule.existing(outside.to_str().unwrap()).unwrap_err();
        assert!(matches!(err, ComputerError::OutsideFolders(_)), "{err:?}");
    }

    #[test]
    fn a_symbolic_link_out_of_the_folders_is_refused_for_reads_and_writes() {
        let (dir, rule) = rule();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), rule.home().join("link"))
            .unwrap();
        std::os::unix::fs::symlink(dir.path(), rule.home().join("up")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("new.txt"), rule.home().join("dangling"))
            .unwrap();
        for path in ["link", "up/secret.txt"] {
            let err = rule.existing(path).unwrap_err();
            assert!(
                matches!(err, ComputerError::OutsideFolders(_)),
                "{path}: {err:?}"
            );
        }
        for path in ["link", "up/new.txt", "dangling"] {
            let err = rule.writable(path).unwrap_err();
            assert!(
                matches!(err, ComputerError::OutsideFolders(_)),
                "{path}: {err:?}"
            );
        }
    }

    #[test]
    fn a_new_file_in_an_allowed_folder_may_be_written() {
        let (_dir, rule) = rule();
        assert_eq!(rule.writable("b.txt").unwrap(), rule.home().join("b.txt"));
    }

    #[test]
    fn a_missing_or_empty_folder_list_is_invalid_input() {
        let err = AllowedFolders::new(Vec::<PathBuf>::new()).unwrap_err();
        assert!(matches!(err, ComputerError::InvalidInput(_)), "{err:?}");
        let err = AllowedFolders::new(["/no/such/folder/here"]).unwrap_err();
        assert!(matches!(err, ComputerError::InvalidInput(_)), "{err:?}");
    }
}
