//! [`TempDir`]: a fresh directory under the system's temporary directory, removed on drop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A temporary directory removed (with everything in it) on drop, also when a test panics.
///
/// Named `PREFIX-PID-N`, so concurrent tests of one process and other processes never share
/// one; a leftover of an earlier process that had the same pid is emptied first. (std only:
/// `tempfile` would bring fastrand, getrandom and once_cell into every test binary for this.)
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates the directory; panics if it cannot.
    pub fn new(prefix: &str) -> TempDir {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_is_new_and_removed_on_drop() {
        let a = TempDir::new("rill-testkit-self");
        let b = TempDir::new("rill-testkit-self");
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("f"), b"x").expect("write into the directory");
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists(), "{} left behind", path.display());
        assert!(b.path().is_dir());
    }
}
