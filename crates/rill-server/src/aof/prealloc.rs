//! Preallocation of the incremental file being written under `appendfsync always`.
//!
//! An `fdatasync` after a write that grew the file must also write the inode (its new size),
//! a second I/O that waits for the first. On this project's ext4 test machine, a 40 KB write
//! plus `fdatasync` takes 210–255 µs when it appends and 142–157 µs when it overwrites space
//! that was already written and synced. `fallocate` does not help (202 µs): its extents are
//! "unwritten", and converting them on the first write is a metadata change again. So a
//! thread, the extender, keeps real zeros written and synced ahead of the log's logical end.
//! The writer writes over them, and its `fdatasync` flushes data pages only.
//!
//! ```text
//! | RILLLOG1 | records ...... | 0 0 0 ... 0 (synced) | 0 0 ... 0 (not yet synced) |
//!                             ^ logical end          ^ synced_end                 ^ len
//!                               (the writer's)                  (the file's length)
//! ```
//!
//! * Below `synced_end`, the file holds records or zeros that are on disk, and the file size
//!   on disk covers them. The writer writes there without taking a lock.
//! * At or past `synced_end`, the writer takes the region lock, the same lock under which
//!   the extender writes its zeros, so the two never write the same bytes. The writer may
//!   write past `len` (a burst that outran the extender): that is correct, only as slow as a
//!   growing file. It never waits for an extension to finish.
//! * The extender only writes at `len`, which is never below the writer's end.
//! * A rotation, a cut-back after a failed write, or dropping the padding starts a new
//!   generation. An extension step that was synced meanwhile is then not published.
//!
//! Under `always`, only the round being written is unsynced. A process crash (`kill -9`)
//! leaves the file exactly as written: records, maybe one cut short, then zeros. A power
//! loss in the middle of a round's `fdatasync` may leave later pages of that round on disk
//! without earlier ones, because the file size no longer orders them. Start-up then reports
//! corruption at the first record that is missing, and `--check-log --fix` cuts the file back
//! to it. What that drops was never acknowledged.
//!
//! Under `everysec` and `no`, the file simply grows (see [`super::FsyncPolicy`]). Padding
//! left from a switch away from `always` is cut off at the next write. Finished files are
//! cut to their logical end (by the writer, at a rotation and at shutdown), and
//! start-up cuts any file's padding before appending, so padding only exists in the file
//! being written, or after a crash in the file written last (which a rewrite's new file,
//! listed but not switched to yet, may follow).

use super::logfile::LogFile;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Zeros added ahead of the log's end per extension (the fault tests use less). At the rates of pipelined XADD under
/// `always` (some tens of MB/s of records), 8 MiB lasts a few hundred milliseconds, while
/// writing and syncing it takes about 10 ms. A crash leaves at most about 1.5 chunks of
/// padding, which start-up reads through in milliseconds, and the file being written
/// occupies at most that much extra disk space.
pub(super) const PREALLOC_CHUNK_BYTES: u64 = 8 << 20;
/// Zeros written, then synced, per extension step. The writer's `fdatasync` flushes every
/// dirty page of the file, so a group commit that runs while a step is in flight writes
/// that step's zeros too. Measured with 40 KB rounds: with 1 MiB steps, such a round costs
/// about 1 ms more (6.3–7.0k rounds/s); a whole 8 MiB chunk at once stalled one round by
/// 20–25 ms (4.2k rounds/s); with no preallocation, 3.8–4.2k rounds/s. A step is one `write`
/// call. The page cache then holds the zeros in large folios, and an overwrite of a few
/// bytes marks a whole folio dirty, so `write_bytes` in /proc/PID/io counts far more than is
/// written (2–3 GB for 87 MB of log). ext4 writes back only the dirty blocks, though: the
/// device writes per round are unchanged, and a round costs the same CPU as with page-sized
/// zero writes, which cost the extender 3.5 times the CPU (1.1 against 0.3 ms per MiB).
const PREALLOC_STEP_BYTES: u64 = 1 << 20;
/// How long the extender waits after a failed extension (disk full, I/O error) before it
/// takes requests again. Meanwhile, the writer writes past the preallocated space.
const PREALLOC_RETRY: Duration = Duration::from_secs(1);
/// Whether the file is preallocated at all. Elsewhere than unix, writes at an offset go
/// through the file's shared position, which the writer and the extender cannot share.
const PREALLOCATE: bool = cfg!(unix);

/// The file being written, and how far it extends.
struct Region {
    file: Arc<dyn LogFile>,
    /// The file's length: every byte below it was written, by the writer or the extender.
    len: u64,
    /// Bumped whenever `file` changes or `len` shrinks.
    generation: u64,
    /// The file is finished: nothing extends it any more, and the extender exits.
    closed: bool,
}

/// The preallocated space of the file being written, shared by the writer and the extender.
pub(super) struct Prealloc {
    region: Mutex<Region>,
    /// Wakes the extender (a request, or `closed`).
    cv: Condvar,
    /// In the current file, every byte below this is on disk (records or zeros) and
    /// covered by the file size on disk.
    synced_end: AtomicU64,
    /// An extension was asked and has not finished yet.
    wanted: AtomicBool,
    /// Zeros added per extension.
    chunk: u64,
    /// The writer asks for an extension when less than this is left ahead of it. Half a
    /// chunk leaves the extender about a hundred times the time it needs.
    low_water: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Prealloc {
    /// Preallocation for `file`, which holds `len` bytes of log and no padding, `chunk`
    /// bytes of zeros at a time.
    pub(super) fn new(file: Arc<dyn LogFile>, len: u64, chunk: u64) -> Prealloc {
        Prealloc {
            region: Mutex::new(Region { file, len, generation: 0, closed: false }),
            cv: Condvar::new(),
            synced_end: AtomicU64::new(len),
            wanted: AtomicBool::new(false),
            chunk,
            low_water: chunk / 2,
        }
    }

    /// The writer: write `bytes` at `pos`, the logical end of the log in `file` (the
    /// current file). `keep` (under `always`): keep preallocated space ahead, and ask for
    /// more when it runs low. Otherwise, cut off any padding first, so the file just grows.
    /// After an error, the caller cuts the file back ([`Prealloc::cut_back`]).
    pub(super) fn write(&self, file: &dyn LogFile, bytes: &[u8], pos: u64, keep: bool) -> io::Result<()> {
        let end = pos + bytes.len() as u64;
        if keep && end <= self.synced_end.load(Ordering::Acquire) {
            // The common case under `always`: no lock, no size change.
            file.write_at(bytes, pos)?;
        } else {
            let mut r = lock(&self.region);
            if !keep && r.len > pos {
                file.set_len(pos)?;
                r.len = pos;
                r.generation += 1;
                self.synced_end.fetch_min(pos, Ordering::AcqRel);
            }
            file.write_at(bytes, pos)?;
            r.len = r.len.max(end);
        }
        if keep && PREALLOCATE && self.synced_end.load(Ordering::Acquire).saturating_sub(end) < self.low_water {
            self.request();
        }
        Ok(())
    }

    /// Ask the extender for one more chunk (unless a request is pending).
    pub(super) fn request(&self) {
        if PREALLOCATE && !self.wanted.swap(true, Ordering::AcqRel) {
            // Under the lock, so that the extender, which checks `wanted` under it before
            // waiting, cannot miss the wake-up.
            let _r = lock(&self.region);
            self.cv.notify_one();
        }
    }

    /// Cut the current file back to `len`, padding included: after a failed write (to its
    /// last whole record, so a restart finds no torn record), in a recovery (to what is known
    /// on disk), at a rotation (to its logical end). Nothing extends it again until the
    /// writer asks.
    pub(super) fn cut_back(&self, len: u64) -> io::Result<()> {
        let mut r = lock(&self.region);
        r.len = len;
        r.generation += 1;
        self.synced_end.fetch_min(len, Ordering::AcqRel);
        r.file.set_len(len)
    }

    /// A rotation: `file`, holding `len` bytes and no padding, is the current file now. The
    /// previous one is finished by whoever takes it from the writer.
    pub(super) fn switch(&self, file: Arc<dyn LogFile>, len: u64) {
        let mut r = lock(&self.region);
        r.file = file;
        r.len = len;
        r.generation += 1;
        self.synced_end.store(len, Ordering::Release);
    }

    /// Shutdown: stop extending, and cut the current file to `len`, its logical end (the
    /// caller syncs it). The extender exits.
    pub(super) fn close(&self, len: u64) -> io::Result<()> {
        let mut r = lock(&self.region);
        r.closed = true;
        r.generation += 1;
        self.cv.notify_all();
        if r.file.len()? > len {
            r.file.set_len(len)?;
        }
        r.len = len;
        Ok(())
    }

    /// Stop extending (without cutting anything), so the extender exits. For a shutdown
    /// whose writer could not [`Prealloc::close`] the file.
    pub(super) fn stop(&self) {
        lock(&self.region).closed = true;
        self.cv.notify_all();
    }

    /// The extender thread: on each request, write and sync one more chunk of zeros past
    /// the end of the current file, one step at a time, publishing each step as it is
    /// synced. Returns once the log is closed.
    pub(super) fn run(&self) {
        // Allocated at the first request: a log that never runs under `always` needs none.
        let mut zeros = Vec::new();
        let mut failing = false;
        loop {
            let (target, generation) = {
                let mut r = lock(&self.region);
                while !self.wanted.load(Ordering::Acquire) && !r.closed {
                    r = self.cv.wait(r).unwrap_or_else(|p| p.into_inner());
                }
                if r.closed {
                    return;
                }
                (r.len + self.chunk, r.generation)
            };
            if zeros.is_empty() {
                zeros = vec![0u8; PREALLOC_STEP_BYTES.min(self.chunk) as usize];
            }
            let result = self.extend_to(target, generation, &zeros);
            self.wanted.store(false, Ordering::Release);
            match result {
                Ok(()) => failing = false,
                Err(e) => {
                    if !failing {
                        tracing::warn!("Cannot preallocate space for the AOF file: {e}; appending without it (slower fsyncs) until it works again");
                    }
                    failing = true;
                    let r = lock(&self.region);
                    let _ = self.cv.wait_timeout_while(r, PREALLOC_RETRY, |r| !r.closed);
                }
            }
        }
    }

    /// Extend the current file with zeros up to `target` bytes, as long as it is in
    /// `generation` (the one the request was taken in). Stops early, without an error, if the
    /// file is finished, switched or cut meanwhile: the writer then asks again for the file it
    /// writes, and a file finished at a rotation gets no padding after its cut.
    fn extend_to(&self, target: u64, generation: u64, zeros: &[u8]) -> io::Result<()> {
        loop {
            let (file, step_generation, step_end) = {
                let mut r = lock(&self.region);
                if r.closed || r.generation != generation {
                    return Ok(());
                }
                let at = r.len;
                if at >= target {
                    return Ok(());
                }
                let n = (target - at).min(PREALLOC_STEP_BYTES);
                let step = zeros.get(..n as usize).unwrap_or(zeros);
                if let Err(e) = r.file.write_at(step, at) {
                    // Leave no partial step behind: the space past `len` stays the writer's.
                    let _ = r.file.set_len(at);
                    return Err(e);
                }
                r.len = at + step.len() as u64;
                (r.file.clone(), r.generation, r.len)
            };
            // Outside the lock: the writer may write (past `synced_end`) meanwhile.
            file.sync_data()?;
            let r = lock(&self.region);
            if r.generation == step_generation {
                self.synced_end.fetch_max(step_end, Ordering::AcqRel);
            }
        }
    }
}
