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
//! `incr <file>` line per log file in replay order. Each file is named as below, with a number
//! from 1 to 2^63 − 1, and listed once; start-up refuses any other line. That order is not always the order of the
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
//!           crc = CRC-32 (IEEE) of body; MIN_RECORD_BODY_BYTES <= len <= 2 GiB
//!         | +------------+------------+------------+-------------------------------+
//!           | 0xFFFFFFFF | crc: u32le | len: u64le | body: len bytes                |
//!           +------------+------------+------------+-------------------------------+
//!           the long form, for a body over 2 GiB (written only then; read at any length)
//! ```
//!
//! A short length word above 2 GiB is corruption, and rills before the long form refuse it
//! as such: a log holding a record that big cannot be read by them (nor, before, written
//! correctly: its length was cut to 32 bits).
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

pub mod base;
pub mod check;
#[cfg(test)]
mod faults;
pub mod files;
pub mod load;
pub mod logfile;
mod prealloc;
mod sink;
pub mod snapshot;
mod writer;

pub use writer::Log;

/// The log file magic.
pub const LOG_MAGIC: &[u8; 8] = b"RILLLOG1";
/// Bytes before a record body: length and checksum.
pub const RECORD_HEADER_BYTES: usize = 2 * std::mem::size_of::<u32>();
/// The largest record body of the short form (a bigger short length is corruption); a bigger
/// body takes the long form.
pub const MAX_RECORD_BODY_BYTES: usize = 2 << 30; // 2 GiB
/// The length word of a record in the long form: a u64 length follows the checksum.
pub const LONG_RECORD: u32 = u32::MAX;
/// Bytes of the long form's length, after the checksum.
pub const LONG_RECORD_LEN_BYTES: usize = std::mem::size_of::<u64>();
/// The smallest record body: its time stamp (i64) and effect count (a varint, at least one
/// byte). A zero length word is therefore never a record: it marks padding.
pub const MIN_RECORD_BODY_BYTES: usize = std::mem::size_of::<i64>() + 1;

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
