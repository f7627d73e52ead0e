//! The append-only effect log (rill's AOF): what every write *did* ([`rill_engine::effect`]),
//! framed and checksummed, written by one thread with group commit, compacted in the
//! background, replayed on start.
//!
//! # Files
//!
//! Inside `dir/appenddirname/` (names from `appendfilename`, default `appendonly.aof`):
//!
//! ```text
//! appendonly.aof.manifest.rill     which files make up the log, in order (replaced atomically)
//! appendonly.aof.<n>.base.rdb      a snapshot (an RDB file), at most one
//! appendonly.aof.<n>.incr.rlog     effect records since that snapshot, one or more
//! ```
//!
//! The manifest is text: a `rill-manifest 1` line, then `base <file>` (optional) and one
//! `incr <file>` line per log file in replay order. That order is not always the order of the
//! numbers: after a failed write or fsync the writer continues in a fresh file listed right
//! after the one that failed, which may come before a file a rewrite prepared (`writer.rs`).
//!
//! # Log file
//!
//! ```text
//! +----------+------------------------------------------+---------------------------+
//! | RILLLOG1 | record | record | ...             record | 0 0 0 0 ... 0 (padding)   |
//! +----------+------------------------------------------+---------------------------+
//!                                                       ^ logical end               ^ file length
//! record := +------------+------------+------------------------------------------+
//!           | len: u32le | crc: u32le | body: len bytes (rill_engine::effect)     |
//!           +------------+------------+------------------------------------------+
//!           crc = CRC-32 (IEEE) of body; len >= MIN_RECORD_BODY, never 0
//! ```
//!
//! One record per command, per EXEC (a transaction is all or nothing in the log too), per
//! blocked client served, per active-expiry sweep.
//!
//! **Padding.** Under `appendfsync always` the file being written keeps zero bytes, written
//! and synced ahead of time, after its last record (see `prealloc.rs`): the log ends at the
//! first record position holding a zero length word with only zero bytes from there to the
//! end of the file. Since a body always starts with its time stamp, no record has length 0,
//! so that rule is unambiguous. The padding is cut off whenever a file is finished (a
//! rotation, a clean shutdown) and at start-up before appending, so only the file written
//! last by a server that did not shut down cleanly has any.
//!
//! **Damage.** A record cut short or failing its checksum with nothing but zeros (or the
//! end of the file) after it is a torn write (the process or machine died mid-write) and is
//! cut back on load when `aof-load-truncated yes`, if it is in the file written last: the
//! last one holding data, which a rewrite's new file, listed before the writer switches to
//! it, may follow (`load::written_last`). Elsewhere it is corruption, and so is a bad record
//! with any non-zero byte after it, a zero length word included: start-up stops, naming the
//! offset (`rill-server --check-log FILE [--fix]` reports and repairs).

pub mod check;
#[cfg(test)]
mod faults;
pub mod files;
pub mod load;
pub mod logfile;
mod prealloc;
pub mod rewrite;
mod writer;

pub use writer::Log;

use rill_engine::effect::{encode_record_buf, EffectBuf};
use std::sync::Arc;

/// The log file magic.
pub const LOG_MAGIC: &[u8; 8] = b"RILLLOG1";
/// Bytes before a record body: length and checksum.
pub const RECORD_HEADER: usize = 8;
/// The largest record body accepted on load (a bigger length field is corruption).
pub const MAX_RECORD: usize = 1 << 31;
/// The smallest record body: its time stamp (i64) and effect count (a varint, at least one
/// byte). A zero length word is therefore never a record: it marks padding.
pub const MIN_RECORD_BODY: usize = 8 + 1;

/// `appendfsync`: when a write reaches the disk, and what a crash can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// A reply is sent only after the fsync that covers its record; writes that arrive while
    /// an fsync runs share the next one (group commit). A process crash or a power loss
    /// loses no acknowledged write. The file being written is kept preallocated (zeros
    /// written and synced ahead of its end), so an fsync flushes the new records only and
    /// not the file's size as well.
    Always,
    /// Records are written to the OS before replies go out and fsynced once a second in the
    /// background. A process crash loses no acknowledged write; a power loss loses about the
    /// last second (up to two if the disk stalls, after which writes are delayed). The file
    /// simply grows (as under `no`): preallocation would save one inode write a second, and
    /// after a power loss, records written into preallocated space may be on disk without
    /// earlier ones (the file size no longer orders them), which start-up reports as
    /// corruption.
    EverySec,
    /// Records are written to the OS before replies go out; the OS decides when they reach
    /// the disk. A process crash loses nothing acknowledged; a power loss loses what the OS
    /// had not flushed yet (typically up to 30 s on Linux).
    No,
}

impl FsyncPolicy {
    /// From the `appendfsync` value.
    pub fn parse(s: &str) -> FsyncPolicy {
        match s {
            "always" => FsyncPolicy::Always,
            "no" => FsyncPolicy::No,
            _ => FsyncPolicy::EverySec,
        }
    }
}

/// Frame one record around `body` into `out` (the writer frames in place; tests build files).
#[cfg(test)]
pub fn frame(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
}

/// A log file of `n` records (`SET k<i>` at time `i`) and the offset each record ends at.
#[cfg(test)]
pub fn test_log(n: usize) -> (Vec<u8>, Vec<usize>) {
    use rill_engine::effect::{encode_record, Effect};
    let mut out = LOG_MAGIC.to_vec();
    let mut ends = Vec::new();
    for i in 0..n {
        let mut body = Vec::new();
        let e = Effect::Command {
            db: 0,
            args: vec![bytes::Bytes::from_static(b"SET"), bytes::Bytes::from(format!("k{i}"))],
        };
        encode_record(&mut body, i as i64, &[e]);
        frame(&mut out, &body);
        ends.push(out.len());
    }
    (out, ends)
}

/// The part of the log that lives behind the state lock: effects of the command running now,
/// and the handle of the writer.
#[derive(Debug, Default)]
pub struct Aof {
    /// The running log; `None` with `appendonly no`.
    pub log: Option<Arc<Log>>,
    /// Effects of the current unit (a command, an EXEC, a served client), encoded, not yet
    /// framed.
    pending: EffectBuf,
    /// An empty buffer, with the capacity earlier commands grew, for the next command's
    /// explicit effects: lent out by [`Aof::lend_buf`], so that emitting an effect does not
    /// allocate.
    spare: EffectBuf,
    /// Log offset after the last record appended.
    pub appended: u64,
}

impl Aof {
    /// An empty effect buffer for a command to write into (give it back with
    /// [`Aof::return_buf`]).
    pub fn lend_buf(&mut self) -> EffectBuf {
        std::mem::take(&mut self.spare)
    }

    /// Take back a buffer from [`Aof::lend_buf`] (emptied here).
    pub fn return_buf(&mut self, mut buf: EffectBuf) {
        buf.clear();
        self.spare = buf;
    }

    /// Whether effects are being recorded.
    pub fn recording(&self) -> bool {
        self.log.is_some()
    }

    /// Add a command's explicit effects to the current unit.
    pub fn push(&mut self, effects: &mut EffectBuf) {
        if self.log.is_some() && !effects.is_empty() {
            if self.pending.is_empty() {
                // The common case, one command per unit: take its buffer instead of copying
                // it (the caller keeps the emptied one, with its capacity).
                std::mem::swap(&mut self.pending, effects);
                effects.clear();
            } else {
                self.pending.append(effects);
            }
        }
    }

    /// Add a command logged as itself.
    pub fn push_command(&mut self, db: usize, args: &[bytes::Bytes]) {
        if self.log.is_some() {
            self.pending.command(db, args.iter().map(|a| &a[..]));
        }
    }

    /// Add the deletion of an expired key.
    pub fn push_del(&mut self, db: usize, key: &[u8]) {
        if self.log.is_some() {
            self.pending.del(db, key);
        }
    }

    /// Close the current unit: frame its effects as one record (time `now_ms`) and hand it to
    /// the writer. Returns the log offset the unit ends at (what a reply must wait for).
    pub fn commit(&mut self, now_ms: i64) -> u64 {
        let Some(log) = &self.log else {
            self.pending.clear();
            return self.appended;
        };
        if self.pending.is_empty() {
            return self.appended;
        }
        let pending = &self.pending;
        self.appended = log.append_with(|out| encode_record_buf(out, now_ms, pending));
        self.pending.clear();
        self.appended
    }
}

/// CONFIG SET appendonly: turning the log on starts a new log file and a rewrite that
/// snapshots the current data as its base; turning it off writes out and closes the log.
pub fn set_appendonly(
    shared: &Arc<crate::state::Shared>,
    st: &mut crate::state::State,
    on: bool,
) -> Result<(), String> {
    match (&st.aof.log, on) {
        (Some(_), true) | (None, false) => Ok(()),
        (Some(log), false) => {
            let log = log.clone();
            st.aof.log = None;
            log.shutdown();
            Ok(())
        }
        (None, true) => {
            let mut files = files::Files::new(st.config.get("appenddirname"), st.config.get("appendfilename"));
            std::fs::create_dir_all(&files.dir).map_err(|e| e.to_string())?;
            let _ = files.read_manifest();
            let seq = files.last_seq() + 1;
            // Whatever an earlier log said is stale now; until the rewrite below writes the
            // base, the manifest on disk lists nothing.
            files.write_manifest(files::Manifest::default()).map_err(|e| e.to_string())?;
            files.remove_unlisted();
            files.provisional = true;
            let file = files.create_incr(seq).map_err(|e| e.to_string())?;
            files
                .write_manifest(files::Manifest { base: None, incrs: vec![files.incr_name(seq)] })
                .map_err(|e| e.to_string())?;
            let policy = FsyncPolicy::parse(st.config.get("appendfsync"));
            let log = Log::start(files, file, seq, LOG_MAGIC.len() as u64, policy).map_err(|e| e.to_string())?;
            st.aof.log = Some(log);
            st.persist.base_file_size = 0;
            st.persist.rewrite_base_size = 0;
            rewrite::start(shared, st).map_err(str::to_string)
        }
    }
}
