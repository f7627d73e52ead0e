//! Writing the log, and group commit.
//!
//! Connections frame records into a shared queue while they hold the state lock (so the log
//! order is the execution order) and learn the log offset their records end at.
//!
//! * `always`: one thread takes everything queued, writes it with one `write` and covers it
//!   with one `fdatasync`; records queued while that runs wait for the next round, so one
//!   fsync acknowledges every write that arrived during the previous one. It then publishes
//!   the offset now safe ([`Durable`]) and connections whose records end at or before it send
//!   their replies.
//! * `everysec` / `no`: a connection writes the queue itself before replying (whoever comes
//!   first writes everyone's records, in order), so no thread hand-off sits between a command
//!   and its reply; the thread only fsyncs and writes what no connection is waiting for
//!   (expiry sweeps).
//!
//! Under `everysec` a second thread fsyncs once a second. If an fsync has been running for more
//! than 2 s the writer holds further writes until it finishes (as Redis does), which delays
//! replies instead of letting unsynced data pile up.
//!
//! Under `always` a third thread keeps zeros written and synced ahead of the end of the file
//! (`prealloc.rs`), so the fsync of a round flushes the new records and not the file's size
//! too. The writer tracks the log's logical end: sizes, offsets and rotations count records
//! only, and a finished file is cut to its last record.
//!
//! All file operations go through [`LogFile`] (the fault-injection tests wrap it).
//!
//! # After a failed write or fsync
//!
//! On Linux a failed `fsync` may have dropped the dirty pages it could not write (marking them
//! clean), and a retried `fsync` then succeeds with a hole behind it; a failed `write` may have
//! left part of its bytes. So the rule is: **a file that saw a failed write or fsync is never
//! trusted past the length it had at its last successful fsync (`synced_len`), and never
//! written again.** The writer keeps, in memory, the records it wrote to the current file past
//! `synced_len` (their buffers, not copies: one round under `always`, about a second of writes
//! under `everysec`, bounded by the 2 s stall rule above), and on a failure:
//!
//! 1. [`Log::failed`] is set: write commands get `-MISCONF`, connections waiting for records
//!    not yet safe are closed without a reply, so nothing is acknowledged that is not on disk.
//! 2. The writer thread recovers: it cuts the suspect file back to `synced_len` and fsyncs it
//!    (from then on it holds exactly the records before the kept ones, all of them on disk);
//!    creates a fresh incremental file (header written, synced, directory synced) and lists
//!    it in the manifest right after the suspect one (an atomic replace); writes the kept
//!    records, then everything queued, into it; and fsyncs it. Only then does the offset known
//!    on disk advance, and the failure clear. If any step fails, it tries again after a
//!    second, from step 2 on yet another fresh file (a fresh file that got nothing on disk is
//!    replaced in the manifest instead of kept, so a disk that keeps failing adds no files).
//!
//! The offset acknowledged never moves over a range that was not fsynced on a file written
//! without failure since. The crash points, and what start-up finds (the manifest lists the
//! files in replay order):
//!
//! * Before the cut is synced: the suspect file is the last one holding records, holding its
//!   synced records, then whatever survived of the rest (the kept records, maybe torn, maybe
//!   with a hole). A rotation prepared meanwhile may be listed after it, still empty (the
//!   rotation waits behind the recovery): start-up takes the last file holding data for the
//!   one written last, whose tail may be torn (`load::written_last`). Everything
//!   acknowledged under `always` is in the synced part; whole records after it were never
//!   acknowledged, so replaying them is allowed (as after a crash mid-fsync); a torn tail is
//!   cut back, and a hole followed by data stops start-up as corruption (repair with
//!   `--check-log --fix`, which cuts at the hole: what it drops was not acknowledged).
//! * After the cut, before the manifest names the fresh file: the suspect file is exactly its
//!   synced records; the fresh file is not listed and is removed at start-up.
//! * After the manifest names it: the suspect file, cut, then the fresh file with a prefix of
//!   the kept and queued records (a torn last one is cut back). Nothing is replayed twice:
//!   the kept records left the suspect file before the fresh one was listed.
//! * After its fsync: both files whole, every record once.
//!
//! A rotation (a rewrite starting) is handled by the writer the same way: before it switches
//! files it cuts the old one to its logical end and fsyncs it, so a rewrite, which rebuilds its
//! snapshot from the files before the rotation point, reads only files that are final and on
//! disk, and a failure there is recovered like any other (the fresh file goes before the
//! rotation's file in the manifest, as its records do in the log). That fsync delays the
//! writes queued behind the rotation by one fsync, once per rewrite.
//!
//! What each policy then promises:
//!
//! * `always`: no acknowledged write is lost, whatever fails; a write whose record was being
//!   fsynced when it failed gets no reply and may or may not be in the log.
//! * `everysec`: writes acknowledged before a failed fsync are rewritten from memory into the
//!   fresh file, so they survive it; only a crash or power loss before that recovery finishes
//!   can take them (the same second or two a power loss takes under `everysec` anyway).
//! * `no`: nothing is known to be on disk, so the writer keeps no copy: what the OS accepted
//!   counts as written. A failed write still switches to a fresh file (after cutting the torn
//!   record off and fsyncing the old one), so nothing is ever appended after a failed write;
//!   what the OS may have lost of earlier writes stays lost, as `no` allows.
//!
//! At start-up the file appended to is fsynced first: what the loader read may have been only
//! in the page cache.

use super::files::Files;
use super::logfile::{FileLayer, LogFile, Plain};
use super::prealloc::{Prealloc, PREALLOC_CHUNK_BYTES};
use super::FsyncPolicy;
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long an everysec fsync may run before writes wait for it.
const FSYNC_STALL: Duration = Duration::from_secs(2);
/// Pause between attempts to recover from a failed write or fsync.
const RETRY: Duration = Duration::from_secs(1);
/// Pause between the attempts to write and fsync the log at shutdown.
const SHUTDOWN_RETRY: Duration = Duration::from_millis(100);

/// What the writer has made safe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Durable {
    /// Every record ending at or before this log offset is safe (per the fsync policy).
    pub offset: u64,
    /// The last write or fsync failed: records past `offset` may never be safe.
    pub failed: bool,
}

/// Counters and status INFO persistence reports.
#[derive(Debug, Default, Clone)]
pub struct LogStatus {
    /// The last write / fsync error, if the last attempt failed.
    pub last_error: Option<String>,
    /// Writes delayed by a stuck fsync (`aof_delayed_fsync`).
    pub delayed_fsync: u64,
    /// Bytes of log in the current incremental file: its logical end, not counting
    /// preallocated space.
    pub incr_size: u64,
    /// Number of the current incremental file.
    pub incr_seq: u64,
}

/// How long the log's fsyncs took (`/metrics`: `rill_effect_log_fsync_duration_seconds`):
/// behind a lock of its own, taken only to count one and to read them, never while another
/// of the log's locks is waited for.
#[derive(Debug, Default, Clone)]
pub struct FsyncTimes {
    /// Their durations.
    pub histogram: crate::latency::Histogram,
    /// Their total, µs.
    pub micros: u64,
    /// The fsyncs under `always` that took a millisecond or more, as (Unix seconds, ms), for
    /// the latency monitor's `aof-fsync-always` event (the cron takes them; at most
    /// [`FsyncTimes::SLOW_KEPT`] wait).
    pub slow_always: std::collections::VecDeque<(i64, u64)>,
}

impl FsyncTimes {
    /// Slow fsyncs kept for the cron at most (the latency monitor's history is as long).
    pub const SLOW_KEPT: usize = 160;

    /// Count an fsync that took from `started` to now; `always`: one a write waited for
    /// under `appendfsync always`.
    fn count(&mut self, started: std::time::Instant, always: bool) {
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.histogram.record_micros(us);
        self.micros += us;
        if always && us >= 1000 {
            if self.slow_always.len() == Self::SLOW_KEPT {
                self.slow_always.pop_front();
            }
            self.slow_always.push_back((crate::clock::now_ms().div_euclid(1000), us / 1000));
        }
    }
}

/// The writer's timings (the fault tests shorten them).
#[derive(Debug, Clone, Copy)]
pub(super) struct Tuning {
    /// Pause between attempts to recover.
    pub retry: Duration,
    /// Pause between the attempts to finish the log at shutdown.
    pub shutdown_retry: Duration,
    /// How often the everysec fsync runs; `None`: no fsync thread (the tests call
    /// [`Log::background_fsync`] themselves).
    pub fsync_every: Option<Duration>,
    /// Zeros preallocated per extension under `always`.
    pub prealloc_chunk: u64,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            retry: RETRY,
            shutdown_retry: SHUTDOWN_RETRY,
            fsync_every: Some(Duration::from_secs(1)),
            prealloc_chunk: PREALLOC_CHUNK_BYTES,
        }
    }
}

/// An incremental file created and listed in the manifest for a rotation
/// ([`Log::prepare_rotation`]), not yet written.
pub struct NewFile {
    seq: u64,
    name: String,
    file: Arc<dyn LogFile>,
}

impl std::fmt::Debug for NewFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewFile").field("name", &self.name).finish_non_exhaustive()
    }
}

enum Seg {
    Data(Vec<u8>),
    /// Switch to this file after everything before.
    Rotate(NewFile),
}

#[derive(Default)]
struct Queue {
    segs: VecDeque<Seg>,
    end: u64,
    stop: bool,
}

/// The file being appended to (behind its own lock: the writer thread and connections take
/// turns writing the queue).
struct Sink {
    file: Arc<dyn LogFile>,
    /// Its name in the manifest.
    name: String,
    /// Its sequence number.
    seq: u64,
    /// The logical end of the log in `file` (the file may be longer: preallocated zeros).
    file_len: u64,
    /// How much of `file` is known on disk: its length at the last successful fsync.
    synced_len: u64,
    /// The records written to `file` past `synced_len`, in order, exactly covering
    /// `synced_len..file_len`: what a recovery writes again into a fresh file. Always empty
    /// under `no`.
    kept: VecDeque<Vec<u8>>,
    /// `file` was started by a recovery (not a rotation): nothing but the writer refers to it.
    from_recovery: bool,
    /// Log offset handed to the OS.
    written: u64,
    /// Log offset known on disk (`written` minus the kept bytes).
    synced: u64,
}

/// The running log (shared by connections, the writer, the fsync and rewrite threads).
pub struct Log {
    q: Mutex<Queue>,
    cv: Condvar,
    writer_idle: AtomicBool,
    sink: Mutex<Sink>,
    durable: watch::Sender<Durable>,
    failed: AtomicBool,
    /// The current file saw a failed write or fsync (cleared when the writer switches files).
    /// A failed fsync reports its error once, to whichever caller it returns to: another
    /// fsync of the same file that succeeds afterwards proves nothing about that error.
    tainted: AtomicBool,
    /// Held around every fsync of the current file and every switch of file, so that an
    /// fsync's result is seen before the next one runs, and the background fsync never runs
    /// on a file the writer has switched away from.
    fsync_lock: Mutex<()>,
    /// Bumped at every switch of file.
    generation: AtomicU64,
    policy: AtomicU8,
    /// The log directory and manifest (the writer rotates and recovers, the rewrite switches
    /// the base).
    pub files: Mutex<Files>,
    /// Status for INFO.
    pub status: Mutex<LogStatus>,
    /// How long its fsyncs took.
    pub fsync_times: Mutex<FsyncTimes>,
    /// Highest incremental file number the writer has rotated to (recoveries do not count).
    rotated: (Mutex<u64>, Condvar),
    unsynced: AtomicBool,
    /// Bytes the kept records (written, not yet fsynced) hold: not counted against
    /// `maxmemory` (`evict.rs`), as Redis leaves its AOF buffer out.
    kept_bytes: AtomicU64,
    /// When the running everysec fsync started (ms since `epoch`), 0 when none runs.
    fsync_started_ms: AtomicU64,
    epoch: Instant,
    written: AtomicU64,
    synced: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The preallocated space of the current file (`always`).
    prealloc: Prealloc,
    /// `always`: connections waiting for an offset, woken only once it is safe (or the log
    /// fails), so an fsync round wakes exactly the connections it acknowledges.
    waiters: Mutex<Waiters>,
    layer: Box<dyn FileLayer>,
    tuning: Tuning,
    /// Whether the manifest names a base for this log yet (`base.rs`).
    pub base: super::base::BaseGate,
    /// Turned off (CONFIG SET appendonly no): a rewrite still running for it must not switch
    /// the manifest, which may belong to a newer log by then. Set under the `files` lock.
    retired: AtomicBool,
}

/// Fill in the header of the record whose header space starts at `start` of `v` and whose
/// body follows it to the end of `v`: the short form up to `short_max` bytes of body (the
/// format's 2 GiB; tests pass less), the long form above (`aof` draws both).
pub(super) fn frame_in_place(v: &mut Vec<u8>, start: usize, short_max: usize) {
    let body = v.get(start + super::RECORD_HEADER_BYTES..).unwrap_or_default();
    let (len, crc) = (body.len(), crc32fast::hash(body));
    // A zero length word marks padding (see the format in `aof`): no record is empty.
    debug_assert!(len >= super::MIN_RECORD_BODY_BYTES, "log record body too short");
    let mut header = [0u8; super::RECORD_HEADER_BYTES];
    header[4..].copy_from_slice(&crc.to_le_bytes());
    if len <= short_max {
        header[..4].copy_from_slice(&(len as u32).to_le_bytes());
    } else {
        // The long form (one EXEC of several huge values, say): its length follows the
        // checksum as a u64. The body moves by 8 bytes, once, for a record this rare.
        header[..4].copy_from_slice(&super::LONG_RECORD.to_le_bytes());
        let at = start + super::RECORD_HEADER_BYTES;
        v.splice(at..at, (len as u64).to_le_bytes());
    }
    if let Some(h) = v.get_mut(start..start + super::RECORD_HEADER_BYTES) {
        h.copy_from_slice(&header);
    }
}

/// Waiting connections by (offset, registration number).
#[derive(Default)]
struct Waiters {
    next: u64,
    by_offset: std::collections::BTreeMap<(u64, u64), tokio::sync::oneshot::Sender<bool>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").field("durable", &*self.durable.borrow()).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn policy_code(p: FsyncPolicy) -> u8 {
    match p {
        FsyncPolicy::Always => 0,
        FsyncPolicy::EverySec => 1,
        FsyncPolicy::No => 2,
    }
}

const MAGIC_LEN: u64 = super::LOG_MAGIC.len() as u64;

impl Log {
    /// Start writing to `file` (incremental file `seq`, open for writing, not in append
    /// mode, holding `file_len` bytes of log and no padding), with the writer, fsync and
    /// preallocation threads.
    pub fn start(files: Files, file: File, seq: u64, file_len: u64, policy: FsyncPolicy) -> io::Result<Arc<Log>> {
        Log::start_with(files, file, seq, file_len, policy, Box::new(Plain), Tuning::default())
    }

    /// [`Log::start`] through `layer`, with `tuning`.
    pub(super) fn start_with(
        files: Files,
        file: File,
        seq: u64,
        file_len: u64,
        policy: FsyncPolicy,
        layer: Box<dyn FileLayer>,
        tuning: Tuning,
    ) -> io::Result<Arc<Log>> {
        // What start-up read may have been in the page cache only: the file is trusted up to
        // here once this succeeds.
        file.sync_data()?;
        let name = files.incr_name(seq);
        let file = layer.wrap(file, &files.path(&name));
        let (durable, _) = watch::channel(Durable::default());
        let log = Arc::new(Log {
            q: Mutex::new(Queue::default()),
            cv: Condvar::new(),
            writer_idle: AtomicBool::new(false),
            prealloc: Prealloc::new(file.clone(), file_len, tuning.prealloc_chunk),
            sink: Mutex::new(Sink {
                file,
                name,
                seq,
                file_len,
                synced_len: file_len,
                kept: VecDeque::new(),
                from_recovery: false,
                written: 0,
                synced: 0,
            }),
            durable,
            failed: AtomicBool::new(false),
            tainted: AtomicBool::new(false),
            fsync_lock: Mutex::new(()),
            generation: AtomicU64::new(0),
            policy: AtomicU8::new(policy_code(policy)),
            files: Mutex::new(files),
            status: Mutex::new(LogStatus { incr_size: file_len, incr_seq: seq, ..LogStatus::default() }),
            fsync_times: Mutex::default(),
            rotated: (Mutex::new(seq), Condvar::new()),
            unsynced: AtomicBool::new(false),
            kept_bytes: AtomicU64::new(0),
            fsync_started_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            threads: Mutex::new(Vec::new()),
            waiters: Mutex::new(Waiters::default()),
            layer,
            tuning,
            base: super::base::BaseGate::default(),
            retired: AtomicBool::new(false),
        });
        let w = log.clone();
        let writer = std::thread::Builder::new().name("rill-aof-writer".into()).spawn(move || w.writer_loop())?;
        let e = log.clone();
        let extender = std::thread::Builder::new().name("rill-aof-prealloc".into()).spawn(move || e.prealloc.run())?;
        lock(&log.threads).extend([writer, extender]);
        if let Some(every) = tuning.fsync_every {
            let s = log.clone();
            let syncer =
                std::thread::Builder::new().name("rill-aof-fsync".into()).spawn(move || s.fsync_loop(every))?;
            lock(&log.threads).push(syncer);
        }
        if policy == FsyncPolicy::Always {
            log.prealloc.request();
        }
        Ok(log)
    }

    /// The fsync policy in force.
    pub fn policy(&self) -> FsyncPolicy {
        match self.policy.load(Ordering::Relaxed) {
            0 => FsyncPolicy::Always,
            1 => FsyncPolicy::EverySec,
            _ => FsyncPolicy::No,
        }
    }

    /// CONFIG SET appendfsync.
    pub fn set_policy(&self, p: FsyncPolicy) {
        self.policy.store(policy_code(p), Ordering::Relaxed);
        self.cv.notify_one();
    }

    /// Mark the log turned off; `files` is the guard of its `files` lock, so that a rewrite
    /// checking [`Log::retired`] under that lock sees it before it switches the manifest.
    pub fn retire(&self, _files: &MutexGuard<'_, Files>) {
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Whether the log was turned off (see [`Log::retire`]).
    pub fn retired(&self, _files: &MutexGuard<'_, Files>) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Whether the last write or fsync failed (write commands are refused then).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Queue one framed record whose body `encode` writes; returns the log offset it ends at.
    pub fn append_with(&self, encode: impl FnOnce(&mut Vec<u8>)) -> u64 {
        let mut q = lock(&self.q);
        if !matches!(q.segs.back(), Some(Seg::Data(_))) {
            q.segs.push_back(Seg::Data(Vec::with_capacity(16 * 1024)));
        }
        let end = q.end;
        let Some(Seg::Data(v)) = q.segs.back_mut() else { return end };
        let start = v.len();
        v.extend_from_slice(&[0u8; super::RECORD_HEADER_BYTES]);
        encode(v);
        frame_in_place(v, start, super::MAX_RECORD_BODY_BYTES);
        let framed = (v.len() - start) as u64;
        q.end += framed;
        let end = q.end;
        drop(q);
        // Only `always` hands records to the thread; a busy writer finds them on its next
        // round without being woken, and an idle one is woken once (by whoever clears the
        // flag first), not once per record.
        if self.policy() == FsyncPolicy::Always && self.writer_idle.swap(false, Ordering::Relaxed) {
            self.cv.notify_one();
        }
        end
    }

    /// Create incremental file `seq` and list it in the manifest (after the current ones), so
    /// that the switch itself costs the writer little more than a handle swap. Runs outside
    /// every lock the write path takes.
    pub fn prepare_rotation(&self, seq: u64) -> io::Result<NewFile> {
        let mut files = lock(&self.files);
        let f = files.create_incr(seq)?;
        let mut m = files.manifest.clone();
        let name = files.incr_name(seq);
        if !m.incrs.contains(&name) {
            m.incrs.push(name.clone());
        }
        files.write_manifest(m)?;
        let file = self.layer.wrap(f, &files.path(&name));
        Ok(NewFile { seq, name, file })
    }

    /// Switch to `file` (from [`Log::prepare_rotation`]) after everything queued so far (a
    /// rewrite starts).
    pub fn rotate(&self, file: NewFile) {
        lock(&self.q).segs.push_back(Seg::Rotate(file));
        self.cv.notify_one();
    }

    /// Total size of the log files `files` lists (the manifest), the current incremental
    /// file counted to its logical end: what INFO and the automatic rewrite call the log's
    /// size.
    pub fn total_size(&self, files: &Files) -> u64 {
        let (seq, len) = {
            let s = lock(&self.status);
            (s.incr_seq, s.incr_size)
        };
        files.total_size(&files.incr_name(seq), len)
    }

    /// Wait until the writer has switched to incremental file `seq` (or `timeout` passes).
    /// The files before it in the manifest are final and on disk then.
    pub fn wait_rotated(&self, seq: u64, timeout: Duration) -> bool {
        let (m, cv) = &self.rotated;
        let g = lock(m);
        let (g, _) = cv.wait_timeout_while(g, timeout, |cur| *cur < seq).unwrap_or_else(|p| p.into_inner());
        *g >= seq
    }

    /// `always`: a receiver told `true` once every record up to `offset` is fsynced, `false`
    /// if the log fails first.
    pub fn wait_durable(&self, offset: u64) -> tokio::sync::oneshot::Receiver<bool> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut w = lock(&self.waiters);
        // Checked under the waiters lock, which the writer takes after publishing: either the
        // offset is already safe here, or the writer's next release sees this waiter.
        let d = *self.durable.borrow();
        if d.offset >= offset || d.failed {
            let _ = tx.send(d.offset >= offset);
            return rx;
        }
        let n = w.next;
        w.next += 1;
        w.by_offset.insert((offset, n), tx);
        rx
    }

    /// Wake the waiters the durable state answers: those now safe with `true`, all with
    /// `false` when the log failed.
    fn release_waiters(&self) {
        let d = *self.durable.borrow();
        let mut w = lock(&self.waiters);
        if d.failed {
            for (_, tx) in std::mem::take(&mut w.by_offset) {
                let _ = tx.send(false);
            }
            return;
        }
        let later = w.by_offset.split_off(&(d.offset.saturating_add(1), 0));
        for (_, tx) in std::mem::replace(&mut w.by_offset, later) {
            let _ = tx.send(true);
        }
    }

    /// Publish `offset` as safe, and answer the waiters.
    fn publish(&self, offset: u64) {
        self.durable.send_replace(Durable { offset, failed: self.failed() });
        self.release_waiters();
    }

    /// The durable state now.
    pub fn durable(&self) -> Durable {
        *self.durable.borrow()
    }

    /// The offset up to which records are safe per the policy: fsynced under `always`,
    /// handed to the OS otherwise.
    pub fn safe_offset(&self) -> u64 {
        if self.policy() == FsyncPolicy::Always {
            self.durable.borrow().offset
        } else {
            self.written.load(Ordering::Relaxed)
        }
    }

    /// The log offset after the last record appended (queued or written).
    pub fn end_offset(&self) -> u64 {
        lock(&self.q).end
    }

    /// Memory the log holds for records written but not yet fsynced (kept for a recovery).
    pub fn kept_bytes(&self) -> u64 {
        self.kept_bytes.load(Ordering::Relaxed)
    }

    /// Bytes handed to the OS so far (log offset).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// The log offset known on disk: covered by a successful fsync of a file without a
    /// failure (under `no`, what the OS accepted: nothing is fsynced).
    pub fn synced(&self) -> u64 {
        self.synced.load(Ordering::Relaxed)
    }

    /// Wait until the writer has done everything queued and waits for more, or the log has
    /// failed; false if `timeout` passes first. The fault tests use it so that a rotation
    /// queued on its own is always a round of its own, and the n-th operation is the same one
    /// in every run.
    #[cfg(test)]
    pub(super) fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            {
                // Under the queue lock: the writer sets `writer_idle` under it before it waits,
                // and clears it under it when it takes work.
                let q = lock(&self.q);
                if self.failed() || (q.segs.is_empty() && self.writer_idle.load(Ordering::Relaxed)) {
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Run `f` while nothing writes, fsyncs, switches or publishes (a test's look at the
    /// files and the offsets).
    #[cfg(test)]
    pub(super) fn paused<R>(&self, f: impl FnOnce() -> R) -> R {
        let _sink = lock(&self.sink);
        f()
    }

    /// `everysec` / `no`: make sure every record up to `offset` is written to the OS, writing
    /// the queue now if nobody has. False if a write failed (the reply must not go out).
    pub fn write_through(&self, offset: u64) -> bool {
        if self.written.load(Ordering::Relaxed) >= offset {
            return true;
        }
        if self.failed() {
            return false;
        }
        let mut sink = lock(&self.sink);
        if sink.written >= offset {
            return true;
        }
        if self.failed() {
            // Failed while this waited for the lock: the file is suspect from now on.
            return false;
        }
        self.wait_for_stuck_fsync();
        match self.drain(&mut sink) {
            Ok(()) => sink.written >= offset,
            Err(e) => {
                self.set_failed(&e, "writing to");
                self.cv.notify_one();
                false
            }
        }
    }

    /// Write and fsync everything queued, then stop the threads (shutdown).
    pub fn shutdown(&self) {
        lock(&self.q).stop = true;
        self.cv.notify_all();
        let threads: Vec<JoinHandle<()>> = lock(&self.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
            // The writer, joined first, closes the preallocation, which ends the extender;
            // should the writer have died instead, the extender must not wait forever.
            self.prealloc.stop();
        }
    }

    fn set_failed(&self, e: &io::Error, what: &str) {
        self.tainted.store(true, Ordering::Relaxed);
        let first = !self.failed.swap(true, Ordering::Relaxed);
        // strerror's text, as Redis reports it (without Rust's " (os error N)").
        let text = e.to_string();
        let text = match text.rfind(" (os error ") {
            Some(i) => text.get(..i).unwrap_or(&text).to_string(),
            None => text,
        };
        lock(&self.status).last_error = Some(text);
        if first {
            tracing::warn!(
                "Error {what} the AOF file: {e}; refusing writes until the log is rewritten into a new file"
            );
        }
        let offset = self.durable.borrow().offset;
        self.durable.send_replace(Durable { offset, failed: true });
        self.release_waiters();
    }

    fn clear_failed(&self) {
        if self.failed.swap(false, Ordering::Relaxed) {
            tracing::warn!("AOF write error is solved (the log continues in a new file), writes are accepted again");
        }
        lock(&self.status).last_error = None;
    }

    /// The error a fsync that succeeded on a tainted file reports instead.
    fn taint_error(&self) -> io::Error {
        let text = lock(&self.status).last_error.clone().unwrap_or_else(|| "an earlier fsync failed".into());
        io::Error::other(text)
    }

    /// Write everything queued, in order (rotations included). On a failure the unwritten
    /// segments go back to the queue.
    fn drain(&self, sink: &mut Sink) -> io::Result<()> {
        loop {
            let mut segs: VecDeque<Seg> = {
                let mut q = lock(&self.q);
                if q.segs.is_empty() {
                    return Ok(());
                }
                std::mem::take(&mut q.segs)
            };
            while let Some(seg) = segs.pop_front() {
                let result = match seg {
                    Seg::Data(bytes) => self.write_once(sink, bytes),
                    Seg::Rotate(file) => self.rotate_now(sink, file),
                };
                if let Err((e, seg)) = result {
                    segs.push_front(seg);
                    let mut q = lock(&self.q);
                    segs.extend(q.segs.drain(..));
                    q.segs = segs;
                    return Err(e);
                }
            }
        }
    }

    fn write_once(&self, sink: &mut Sink, bytes: Vec<u8>) -> Result<(), (io::Error, Seg)> {
        let policy = self.policy();
        let keep_preallocated = policy == FsyncPolicy::Always;
        match self.prealloc.write(&*sink.file, &bytes, sink.file_len, keep_preallocated) {
            Ok(()) => {
                let n = bytes.len() as u64;
                sink.file_len += n;
                sink.written += n;
                self.written.store(sink.written, Ordering::Relaxed);
                self.unsynced.store(true, Ordering::Relaxed);
                lock(&self.status).incr_size = sink.file_len;
                if policy == FsyncPolicy::No {
                    // `no` keeps no copy: what the OS accepted counts as written.
                    sink.kept.clear();
                    self.kept_bytes.store(0, Ordering::Relaxed);
                    sink.synced_len = sink.file_len;
                    sink.synced = sink.written;
                    self.synced.store(sink.synced, Ordering::Relaxed);
                } else {
                    // A round's buffer starts with room for many records; one that holds few
                    // keeps only what it holds until the fsync (a second of single writes
                    // would otherwise hold 16 KiB each).
                    let mut bytes = bytes;
                    if bytes.capacity() > 2 * bytes.len() {
                        bytes.shrink_to_fit();
                    }
                    self.kept_bytes.fetch_add(bytes.capacity() as u64, Ordering::Relaxed);
                    sink.kept.push_back(bytes);
                }
                Ok(())
            }
            Err(e) => {
                // Cut back to the last whole record so a restart before the recovery sees no
                // torn record in the middle of the file.
                if let Err(t) = self.prealloc.cut_back(sink.file_len) {
                    tracing::warn!("cannot truncate the AOF file after a failed write: {t}");
                }
                Err((e, Seg::Data(bytes)))
            }
        }
    }

    /// fsync the current file. Fails if it failed before (`tainted`), even if this one
    /// succeeds.
    fn sync_current(&self, sink: &Sink) -> io::Result<()> {
        let _g = lock(&self.fsync_lock);
        let started = std::time::Instant::now();
        sink.file.sync_data()?;
        lock(&self.fsync_times).count(started, self.policy() == FsyncPolicy::Always);
        if self.tainted.load(Ordering::Relaxed) {
            return Err(self.taint_error());
        }
        Ok(())
    }

    /// The first `upto` bytes of the current file are on disk: drop the kept records they
    /// cover.
    fn synced_up_to(&self, sink: &mut Sink, upto: u64) {
        while let Some(front) = sink.kept.front() {
            let n = front.len() as u64;
            if sink.synced_len + n > upto {
                break;
            }
            sink.synced_len += n;
            sink.synced += n;
            if let Some(b) = sink.kept.pop_front() {
                self.kept_bytes.fetch_sub(b.capacity() as u64, Ordering::Relaxed);
            }
        }
        self.synced.store(sink.synced, Ordering::Relaxed);
    }

    /// Make `file` the current one (the caller holds `fsync_lock`).
    fn switch_to(&self, sink: &mut Sink, file: Arc<dyn LogFile>, name: String, seq: u64, from_recovery: bool) {
        debug_assert!(sink.kept.is_empty() || from_recovery, "a rotation leaves no unsynced records behind");
        sink.file = file.clone();
        sink.name = name;
        sink.seq = seq;
        sink.file_len = MAGIC_LEN;
        sink.synced_len = MAGIC_LEN;
        sink.from_recovery = from_recovery;
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.tainted.store(false, Ordering::Relaxed);
        self.prealloc.switch(file, MAGIC_LEN);
        let mut status = lock(&self.status);
        status.incr_size = MAGIC_LEN;
        status.incr_seq = seq;
    }

    /// A rotation: finish the current file (cut to its logical end, fsynced: its records are
    /// on disk before any record after the rotation is acknowledged, and the rewrite reads it
    /// back), then switch.
    fn rotate_now(&self, sink: &mut Sink, file: NewFile) -> Result<(), (io::Error, Seg)> {
        let _g = lock(&self.fsync_lock);
        let finished = self.prealloc.cut_back(sink.file_len).and_then(|()| sink.file.sync_data());
        let finished = match finished {
            Ok(()) if self.tainted.load(Ordering::Relaxed) => Err(self.taint_error()),
            r => r,
        };
        if let Err(e) = finished {
            return Err((e, Seg::Rotate(file)));
        }
        self.synced_up_to(sink, sink.file_len);
        let seq = file.seq;
        self.switch_to(sink, file.file, file.name, seq, false);
        let (m, cv) = &self.rotated;
        *lock(m) = seq;
        cv.notify_all();
        Ok(())
    }

    /// After a failed write or fsync, make the log whole again in a fresh file (the rule is
    /// in the module doc): cut the suspect file back to what is on disk, list a fresh file
    /// after it, write the kept records and the queue into it, fsync it, and only then
    /// publish and clear the failure.
    fn recover(&self, sink: &mut Sink) -> io::Result<()> {
        {
            let _g = lock(&self.fsync_lock);
            // A file a recovery started that has nothing on disk but its header is replaced
            // in the manifest rather than cut and kept.
            let replace = sink.from_recovery && sink.synced_len == MAGIC_LEN;
            if !replace {
                self.prealloc.cut_back(sink.synced_len)?;
                sink.file.sync_data()?;
                sink.file_len = sink.synced_len;
                lock(&self.status).incr_size = sink.file_len;
            }
            let fresh = self.fresh_file(&sink.name, replace)?;
            self.switch_to(sink, fresh.file, fresh.name, fresh.seq, true);
        }
        let keep_preallocated = self.policy() == FsyncPolicy::Always;
        let Sink { file, kept, file_len, .. } = &mut *sink;
        for bytes in kept.iter() {
            self.prealloc.write(&**file, bytes, *file_len, keep_preallocated)?;
            *file_len += bytes.len() as u64;
        }
        lock(&self.status).incr_size = sink.file_len;
        self.drain(sink)?;
        // The background fsync skips a failed log, so this is the only fsync of the file.
        self.sync_current(sink)?;
        self.unsynced.store(false, Ordering::Relaxed);
        self.synced_up_to(sink, sink.file_len);
        // The durable state first, the flag then: once `failed()` reads false, write commands
        // are accepted, and one that then waits for its record must not find the log still
        // failed (it would be refused, its connection closed, and its record written anyway).
        let offset = if self.policy() == FsyncPolicy::Always { sink.synced } else { sink.written };
        self.durable.send_replace(Durable { offset, failed: false });
        self.release_waiters();
        self.clear_failed();
        Ok(())
    }

    /// Create a fresh incremental file and list it in the manifest right after `current`
    /// (or in its place, with `replace`, removing `current`).
    fn fresh_file(&self, current: &str, replace: bool) -> io::Result<NewFile> {
        let mut files = lock(&self.files);
        let seq = files.next_seq();
        let name = files.incr_name(seq);
        let path = files.path(&name);
        let f = match files.create_incr(seq) {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        let mut m = files.manifest.clone();
        match m.incrs.iter().position(|f| f == current) {
            Some(i) if replace => {
                if let Some(slot) = m.incrs.get_mut(i) {
                    slot.clone_from(&name);
                }
            }
            Some(i) => m.incrs.insert(i + 1, name.clone()),
            None => m.incrs.push(name.clone()),
        }
        // On failure the new file stays: the manifest on disk may name it already (renamed,
        // directory not synced). Unlisted, start-up or the next rewrite removes it.
        files.write_manifest(m)?;
        if replace {
            let _ = std::fs::remove_file(files.path(current));
        }
        tracing::warn!("AOF: continuing the log in the new file {name}, after {current}");
        Ok(NewFile { seq, file: self.layer.wrap(f, &path), name })
    }

    fn writer_loop(self: Arc<Self>) {
        loop {
            {
                let mut q = lock(&self.q);
                // A failed log is recovered even with nothing new queued. Under `always`,
                // records written but not yet covered by an fsync (written through by
                // connections under `everysec`/`no` before CONFIG SET appendfsync always)
                // get one: replies waiting for them are released by it.
                let always = || self.policy() == FsyncPolicy::Always;
                let retry = || self.failed();
                let behind = || always() && self.durable.borrow().offset < self.written.load(Ordering::Relaxed);
                while q.segs.is_empty() && !q.stop && !retry() && !behind() {
                    self.writer_idle.store(true, Ordering::Relaxed);
                    q = self
                        .cv
                        .wait_timeout(q, Duration::from_millis(20))
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0);
                }
                self.writer_idle.store(false, Ordering::Relaxed);
                if q.stop {
                    break;
                }
            }
            if self.policy() == FsyncPolicy::Always {
                // Give the CPU back once before the round: connections in the middle of a
                // batch (woken with us, or running on this core) finish it first, and the
                // round's one fdatasync covers their records too — as Redis fsyncs once per
                // event-loop turn. Rounds get bigger and fewer; each costs ~50 us of CPU,
                // which at one round per few records is what made `always` CPU-bound. With
                // nobody else runnable here this returns at once (no added latency).
                std::thread::yield_now();
            }
            let mut sink = lock(&self.sink);
            if self.failed() {
                if let Err(e) = self.recover(&mut sink) {
                    self.set_failed(&e, "recovering");
                    drop(sink);
                    std::thread::sleep(self.tuning.retry);
                }
                continue;
            }
            self.wait_for_stuck_fsync();
            if let Err(e) = self.drain(&mut sink) {
                self.set_failed(&e, "writing to");
                continue;
            }
            if self.policy() == FsyncPolicy::Always {
                if let Err(e) = self.sync_current(&sink) {
                    self.set_failed(&e, "fsyncing");
                    continue;
                }
                self.unsynced.store(false, Ordering::Relaxed);
                let end = sink.file_len;
                self.synced_up_to(&mut sink, end);
                self.publish(sink.synced);
            } else {
                self.publish(sink.written);
            }
        }
        let mut sink = lock(&self.sink);
        for attempt in 0..3 {
            match self.finish_at_shutdown(&mut sink) {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!("could not write and fsync the AOF file at shutdown: {e}");
                    self.set_failed(&e, "writing to");
                    if attempt < 2 {
                        std::thread::sleep(self.tuning.shutdown_retry);
                    }
                }
            }
        }
        let (m, cv) = &self.rotated;
        *lock(m) = u64::MAX;
        cv.notify_all();
    }

    /// Shutdown: recover if needed, write everything queued, cut the padding off (the last
    /// fsync then makes the size durable too), fsync.
    fn finish_at_shutdown(&self, sink: &mut Sink) -> io::Result<()> {
        if self.failed() {
            self.recover(sink)?;
        }
        self.drain(sink)?;
        self.prealloc.close(sink.file_len)?;
        self.sync_current(sink)?;
        self.synced_up_to(sink, sink.file_len);
        self.publish(sink.synced);
        Ok(())
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Under everysec, hold writes while an fsync has been stuck for more than 2 s.
    fn wait_for_stuck_fsync(&self) {
        let mut counted = false;
        loop {
            let started = self.fsync_started_ms.load(Ordering::Relaxed);
            if started == 0 || self.now_ms().saturating_sub(started) <= FSYNC_STALL.as_millis() as u64 {
                return;
            }
            if !counted {
                lock(&self.status).delayed_fsync += 1;
                counted = true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn fsync_loop(self: Arc<Self>, every: Duration) {
        let mut last = Instant::now();
        let poll = every.min(Duration::from_millis(50));
        loop {
            std::thread::sleep(poll);
            if lock(&self.q).stop {
                return;
            }
            if self.policy() != FsyncPolicy::EverySec || last.elapsed() < every {
                continue;
            }
            last = Instant::now();
            self.background_fsync();
        }
    }

    /// The everysec fsync: fsync the current file outside the writer's locks, then drop the
    /// kept records it covered. A failure fails the log (the writer recovers). Skipped while
    /// the log is failed: the recovery fsyncs the fresh file itself.
    pub(super) fn background_fsync(&self) {
        if self.failed() || !self.unsynced.swap(false, Ordering::Relaxed) {
            return;
        }
        let (file, generation, upto) = {
            let s = lock(&self.sink);
            (s.file.clone(), self.generation.load(Ordering::Relaxed), s.file_len)
        };
        {
            let _g = lock(&self.fsync_lock);
            if self.generation.load(Ordering::Relaxed) != generation || self.failed() {
                // The writer switched files meanwhile (after fsyncing the old one itself) or
                // is recovering: the new file's records are for the next run.
                self.unsynced.store(true, Ordering::Relaxed);
                return;
            }
            self.fsync_started_ms.store(self.now_ms(), Ordering::Relaxed);
            let started = std::time::Instant::now();
            let r = file.sync_data();
            self.fsync_started_ms.store(0, Ordering::Relaxed);
            if r.is_ok() {
                lock(&self.fsync_times).count(started, false);
            }
            if let Err(e) = r {
                self.unsynced.store(true, Ordering::Relaxed);
                self.set_failed(&e, "fsyncing");
                self.cv.notify_one();
                return;
            }
        }
        let mut s = lock(&self.sink);
        if self.generation.load(Ordering::Relaxed) == generation {
            self.synced_up_to(&mut s, upto);
        }
    }
}
