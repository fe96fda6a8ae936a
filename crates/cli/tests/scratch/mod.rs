//! Scratch directories for the CLI's tests: under the system's temporary directory, named
//! by the test binary's prefix, the process and the test, and removed with what they hold
//! when dropped (also when the test fails), so a run leaves nothing behind.

use std::path::{Path, PathBuf};

/// A scratch path, emptied when made (and not created: a test may hand it to
/// `--output-dir`); removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(prefix: &str, name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }

    /// The same, with the directory created.
    pub fn made(prefix: &str, name: &str) -> Scratch {
        let scratch = Scratch::new(prefix, name);
        let _ = std::fs::create_dir_all(&scratch.0);
        scratch
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A file in a scratch directory of its own, which lives as long as it.
pub struct ScratchFile {
    path: PathBuf,
    _dir: Scratch,
}

impl ScratchFile {
    /// Writes `bytes` as `file` in a new scratch directory.
    pub fn write(prefix: &str, name: &str, file: &str, bytes: &[u8]) -> ScratchFile {
        let dir = Scratch::made(prefix, name);
        let path = dir.join(file);
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("cannot write {path:?}: {e}"));
        ScratchFile { path, _dir: dir }
    }
}

impl std::ops::Deref for ScratchFile {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for ScratchFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}
