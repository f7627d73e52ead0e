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
//! A failed write or fsync (disk full, I/O error) is retried every second after cutting the
//! file back to its last whole record; meanwhile [`Log::failed`] is set (write commands get
//! `-MISCONF`) and connections waiting for the failed records are closed without a reply, so
//! nothing is acknowledged that is not on disk.

use super::files::Files;
use super::prealloc::Prealloc;
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
/// Pause between retries of a failed write or fsync.
const RETRY: Duration = Duration::from_secs(1);

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

enum Seg {
    Data(Vec<u8>),
    /// Switch to incremental file `seq` (created and listed in the manifest beforehand) after
    /// everything before.
    Rotate(u64, Arc<File>),
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
    file: Arc<File>,
    /// The logical end of the log in `file` (the file may be longer: preallocated zeros).
    file_len: u64,
    written: u64,
}

/// The running log (shared by connections, the writer, the fsync and rewrite threads).
pub struct Log {
    q: Mutex<Queue>,
    cv: Condvar,
    writer_idle: AtomicBool,
    sink: Mutex<Sink>,
    durable: watch::Sender<Durable>,
    failed: AtomicBool,
    policy: AtomicU8,
    /// The log directory and manifest (the writer rotates, the rewrite switches the base).
    pub files: Mutex<Files>,
    /// Status for INFO.
    pub status: Mutex<LogStatus>,
    /// Highest incremental file number the writer has switched to.
    rotated: (Mutex<u64>, Condvar),
    unsynced: AtomicBool,
    /// When the running everysec fsync started (ms since `epoch`), 0 when none runs.
    fsync_started_ms: AtomicU64,
    epoch: Instant,
    written: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Files switched away from by a rotation, with their logical length, not yet cut to it
    /// and fsynced.
    retired: Mutex<Vec<(Arc<File>, u64)>>,
    /// The preallocated space of the current file (`always`).
    prealloc: Prealloc,
    /// `always`: connections waiting for an offset, woken only once it is safe (or the log
    /// fails), so an fsync round wakes exactly the connections it acknowledges.
    waiters: Mutex<Waiters>,
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

impl Log {
    /// Start writing to `file` (incremental file `seq`, open for writing, not in append
    /// mode, holding `file_len` bytes of log and no padding), with the writer, fsync and
    /// preallocation threads.
    pub fn start(files: Files, file: File, seq: u64, file_len: u64, policy: FsyncPolicy) -> io::Result<Arc<Log>> {
        let (durable, _) = watch::channel(Durable::default());
        let file = Arc::new(file);
        let log = Arc::new(Log {
            q: Mutex::new(Queue::default()),
            cv: Condvar::new(),
            writer_idle: AtomicBool::new(false),
            prealloc: Prealloc::new(file.clone(), file_len),
            sink: Mutex::new(Sink { file, file_len, written: 0 }),
            durable,
            failed: AtomicBool::new(false),
            policy: AtomicU8::new(policy_code(policy)),
            files: Mutex::new(files),
            status: Mutex::new(LogStatus { incr_size: file_len, incr_seq: seq, ..LogStatus::default() }),
            rotated: (Mutex::new(seq), Condvar::new()),
            unsynced: AtomicBool::new(false),
            fsync_started_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            written: AtomicU64::new(0),
            threads: Mutex::new(Vec::new()),
            retired: Mutex::new(Vec::new()),
            waiters: Mutex::new(Waiters::default()),
        });
        let w = log.clone();
        let writer = std::thread::Builder::new().name("rill-aof-writer".into()).spawn(move || w.writer_loop())?;
        let s = log.clone();
        let syncer = std::thread::Builder::new().name("rill-aof-fsync".into()).spawn(move || s.fsync_loop())?;
        let e = log.clone();
        let extender = std::thread::Builder::new().name("rill-aof-prealloc".into()).spawn(move || e.prealloc.run())?;
        lock(&log.threads).extend([writer, syncer, extender]);
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
        v.extend_from_slice(&[0u8; super::RECORD_HEADER]);
        encode(v);
        let body = v.get(start + super::RECORD_HEADER..).unwrap_or_default();
        let mut header = [0u8; super::RECORD_HEADER];
        header[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        header[4..].copy_from_slice(&crc32fast::hash(body).to_le_bytes());
        if let Some(h) = v.get_mut(start..start + super::RECORD_HEADER) {
            h.copy_from_slice(&header);
        }
        // A zero length word marks padding (see the format in `aof`): no record is empty.
        debug_assert!(v.len() - start - super::RECORD_HEADER >= super::MIN_RECORD_BODY, "log record body too short");
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
    /// that the switch itself costs the writer nothing but a handle swap. Runs outside every
    /// lock the write path takes.
    pub fn prepare_rotation(&self, seq: u64) -> io::Result<Arc<File>> {
        let mut files = lock(&self.files);
        let f = files.create_incr(seq)?;
        let mut m = files.manifest.clone();
        let name = files.incr_name(seq);
        if !m.incrs.contains(&name) {
            m.incrs.push(name);
        }
        files.write_manifest(m)?;
        Ok(Arc::new(f))
    }

    /// Switch to `file` (incremental file `seq`, from [`Log::prepare_rotation`]) after
    /// everything queued so far (a rewrite starts).
    pub fn rotate(&self, seq: u64, file: Arc<File>) {
        lock(&self.q).segs.push_back(Seg::Rotate(seq, file));
        self.cv.notify_one();
    }

    /// Finish the files the writer has switched away from: cut each to its logical end (a
    /// finished file holds no padding) and fsync it. Runs outside the writer's locks.
    pub fn finish_retired(&self) -> io::Result<()> {
        for (file, len) in std::mem::take(&mut *lock(&self.retired)) {
            if file.metadata()?.len() > len {
                file.set_len(len)?;
            }
            file.sync_data()?;
        }
        Ok(())
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

    /// Bytes handed to the OS so far (log offset).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
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
        self.wait_for_stuck_fsync();
        match self.drain(&mut sink) {
            Ok(()) => sink.written >= offset,
            Err(e) => {
                self.set_failed(&e, "writing to");
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
        let first = !self.failed.swap(true, Ordering::Relaxed);
        // strerror's text, as Redis reports it (without Rust's " (os error N)").
        let text = e.to_string();
        let text = match text.rfind(" (os error ") {
            Some(i) => text.get(..i).unwrap_or(&text).to_string(),
            None => text,
        };
        lock(&self.status).last_error = Some(text);
        if first {
            tracing::warn!("Error {what} the AOF file: {e}; refusing writes until it succeeds again");
        }
        let offset = self.durable.borrow().offset;
        self.durable.send_replace(Durable { offset, failed: true });
        self.release_waiters();
    }

    fn clear_failed(&self) {
        if self.failed.swap(false, Ordering::Relaxed) {
            tracing::warn!("AOF write error is solved, writes are accepted again");
        }
        lock(&self.status).last_error = None;
    }

    /// Write everything queued, in order (rotations included). On a failed write the file is
    /// cut back to its last whole record and the unwritten segments go back to the queue.
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
                let result = match &seg {
                    Seg::Data(bytes) => self.write_once(sink, bytes),
                    Seg::Rotate(seq, file) => {
                        self.rotate_now(sink, *seq, file.clone());
                        Ok(())
                    }
                };
                if let Err(e) = result {
                    segs.push_front(seg);
                    let mut q = lock(&self.q);
                    segs.extend(q.segs.drain(..));
                    q.segs = segs;
                    return Err(e);
                }
            }
        }
    }

    fn write_once(&self, sink: &mut Sink, bytes: &[u8]) -> io::Result<()> {
        let keep_preallocated = self.policy() == FsyncPolicy::Always;
        match self.prealloc.write(&sink.file, bytes, sink.file_len, keep_preallocated) {
            Ok(()) => {
                sink.file_len += bytes.len() as u64;
                sink.written += bytes.len() as u64;
                self.written.store(sink.written, Ordering::Relaxed);
                self.unsynced.store(true, Ordering::Relaxed);
                lock(&self.status).incr_size = sink.file_len;
                Ok(())
            }
            Err(e) => {
                // Cut back to the last whole record so a retry or a restart sees no torn
                // record in the middle of the file.
                if let Err(t) = self.prealloc.cut_back(sink.file_len) {
                    tracing::warn!("cannot truncate the AOF file after a failed write: {t}");
                }
                Err(e)
            }
        }
    }

    fn rotate_now(&self, sink: &mut Sink, seq: u64, file: Arc<File>) {
        let old = std::mem::replace(&mut sink.file, file.clone());
        lock(&self.retired).push((old, sink.file_len));
        sink.file_len = super::LOG_MAGIC.len() as u64;
        self.prealloc.switch(file, sink.file_len);
        {
            let mut status = lock(&self.status);
            status.incr_size = sink.file_len;
            status.incr_seq = seq;
        }
        let (m, cv) = &self.rotated;
        *lock(m) = seq;
        cv.notify_all();
    }

    fn writer_loop(self: Arc<Self>) {
        loop {
            {
                let mut q = lock(&self.q);
                // Under `always` a failed fsync is retried even with nothing new queued, and
                // records written but not yet covered by an fsync (written through by
                // connections under `everysec`/`no` before CONFIG SET appendfsync always)
                // get one: replies waiting for them are released by it.
                let always = || self.policy() == FsyncPolicy::Always;
                let retry = || self.failed() && always();
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
                if q.segs.is_empty() && q.stop {
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
            let before = sink.written;
            self.wait_for_stuck_fsync();
            if let Err(e) = self.drain(&mut sink) {
                self.set_failed(&e, "writing to");
                drop(sink);
                std::thread::sleep(RETRY);
                continue;
            }
            if self.policy() == FsyncPolicy::Always {
                if let Err(e) = sink.file.sync_data() {
                    self.set_failed(&e, "fsyncing");
                    drop(sink);
                    std::thread::sleep(RETRY);
                    continue;
                }
                self.unsynced.store(false, Ordering::Relaxed);
                if self.failed() {
                    self.clear_failed();
                }
            } else if self.failed() && sink.written != before {
                self.clear_failed();
            }
            self.durable.send_replace(Durable { offset: sink.written, failed: false });
            self.release_waiters();
        }
        let mut sink = lock(&self.sink);
        if let Err(e) = self.drain(&mut sink) {
            tracing::warn!("could not write the AOF file at shutdown: {e}");
        }
        // Cut the padding off before the last fsync, which then makes the size durable too.
        if let Err(e) = self.prealloc.close(sink.file_len) {
            tracing::warn!("could not cut the preallocated space off the AOF file at shutdown: {e}");
        }
        if let Err(e) = self.finish_retired() {
            tracing::warn!("could not finish the previous AOF file at shutdown: {e}");
        }
        for _ in 0..3 {
            if sink.file.sync_data().is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let (m, cv) = &self.rotated;
        *lock(m) = u64::MAX;
        cv.notify_all();
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

    fn fsync_loop(self: Arc<Self>) {
        let mut last = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            if lock(&self.q).stop {
                return;
            }
            if self.policy() != FsyncPolicy::EverySec || last.elapsed() < Duration::from_secs(1) {
                continue;
            }
            last = Instant::now();
            if !self.unsynced.swap(false, Ordering::Relaxed) {
                continue;
            }
            let file = lock(&self.sink).file.clone();
            self.fsync_started_ms.store(self.now_ms(), Ordering::Relaxed);
            let r = file.sync_data();
            self.fsync_started_ms.store(0, Ordering::Relaxed);
            match r {
                Ok(()) => {
                    if self.failed() {
                        self.clear_failed();
                    }
                }
                Err(e) => {
                    self.unsynced.store(true, Ordering::Relaxed);
                    self.set_failed(&e, "fsyncing");
                }
            }
        }
    }
}
