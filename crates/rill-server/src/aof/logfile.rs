//! The file operations the writer, the fsync thread and the extender use on a log file, behind
//! a trait: production goes straight to [`std::fs::File`] (one indirect call per operation, no
//! allocation); the fault-injection tests wrap files to fail the n-th write or fsync and to
//! drop, as Linux may, the pages a failed fsync did not write.

use std::fs::File;
use std::io;
use std::sync::Arc;

/// A log file being written.
// A file has a length, not an emptiness: `is_empty` would never be asked.
#[allow(clippy::len_without_is_empty)]
pub trait LogFile: Send + Sync {
    /// Write all of `bytes` at offset `pos`. A failure may leave part of them written.
    fn write_at(&self, bytes: &[u8], pos: u64) -> io::Result<()>;
    /// `fdatasync`: on success, everything written before is on disk, and so is the size.
    fn sync_data(&self) -> io::Result<()>;
    /// Truncate or extend to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's length.
    fn len(&self) -> io::Result<u64>;
}

impl LogFile for File {
    #[cfg(unix)]
    fn write_at(&self, bytes: &[u8], pos: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, bytes, pos)
    }

    /// This moves the file's position; only the writer writes there (preallocation is off
    /// elsewhere than unix, see `prealloc.rs`).
    #[cfg(not(unix))]
    fn write_at(&self, bytes: &[u8], pos: u64) -> io::Result<()> {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = self;
        f.seek(SeekFrom::Start(pos))?;
        f.write_all(bytes)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

/// Turns each log file the writer opens or creates into the [`LogFile`] it writes through.
pub trait FileLayer: Send + Sync {
    /// Wrap `file`, found at `path`.
    fn wrap(&self, file: File, path: &std::path::Path) -> Arc<dyn LogFile>;
}

/// Production: the file itself.
#[derive(Debug, Default, Clone, Copy)]
pub struct Plain;

impl FileLayer for Plain {
    fn wrap(&self, file: File, _: &std::path::Path) -> Arc<dyn LogFile> {
        Arc::new(file)
    }
}
