//! Fault injection: the real writer, on a temporary directory, through a file layer that fails
//! the n-th write or fsync. A failed write leaves half its bytes, and they are on disk at once
//! with everything written before them (the kernel's writeback may have put them there before
//! the error); a failed fsync, as Linux may, drops the pages it could not write: they read
//! back as the disk has them, and the next fsync succeeds. The layer keeps each file as it is
//! on disk (its content and size at its last successful fsync or failed write): what a power
//! loss would leave. Every position in a short sequence of records, with a rotation in the
//! middle, is tried, under `always` and `everysec`, and then a disk that dies at each later
//! operation.
//!
//! Only the log's own operations are counted (the writer's, the connections', the fsync
//! thread's), so the n-th is the same one in every run. The preallocation thread's are not
//! (their timing is not the test's), but a dead disk fails them too, and its fsyncs make
//! durable everything written before them, whoever wrote it. An fsync takes its picture of
//! the file between two writes, never in the middle of one. Which of the writer's writes an
//! fsync of the preallocation thread covers still depends on timing, but every outcome is one
//! a disk may produce (data on disk earlier than the writer asked), and the outcome that
//! matters, a failed write's torn bytes on disk, is now the same in every run (it used to
//! take such an fsync landing right after the failed write, about one run in eight).
//!
//! Checked at every step, on what a power loss would leave and on what a process crash would
//! (the files as the page cache has them), by start-up's rules (`load::written_last`,
//! `load::settle_tail`): the log loads, the offset reported safe is there, every write
//! acknowledged under `always` is there, the records are each there once and in order. After
//! a transient fault: writes resume on a fresh file, and a restart (the loader's `rebuild`)
//! finds every record, once.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::check::{Records, Tail};
use super::files::{Files, Manifest};
use super::load;
use super::logfile::{FileLayer, LogFile};
use super::writer::Tuning;
use super::{FsyncPolicy, Log};
use bytes::Bytes;
use rill_engine::effect::{encode_record, Effect};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the disk does wrong.
#[derive(Debug, Clone, Copy, Default)]
struct Plan {
    /// The n-th write (from 1) fails.
    fail_write: Option<u64>,
    /// The n-th fsync (from 1) fails.
    fail_sync: Option<u64>,
    /// From the n-th operation on (writes, fsyncs and truncations counted together),
    /// everything fails: the disk is dead.
    dead_from: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Sync,
    SetLen,
}

#[derive(Default)]
struct Counts {
    writes: u64,
    syncs: u64,
    ops: u64,
    injected: u64,
}

/// One file's state as the fault model sees it.
struct Tracked {
    path: PathBuf,
    /// Lowest offset written since the last successful fsync.
    dirty_from: Mutex<Option<u64>>,
    /// The file as its last successful fsync (or failed write) left it on disk. Held across
    /// an fsync, so that two at once (the writer's and the extender's) update it in order;
    /// taken before `io`.
    on_disk: Mutex<Vec<u8>>,
    /// Held around each change to the file (a write, a truncation, the pages a failed fsync
    /// drops) and while an fsync reads what it makes durable, so that it never sees half a
    /// write.
    io: Mutex<()>,
}

/// Called before every fsync, with the file's path (a test holds a thread at a chosen one).
type SyncHook = Box<dyn FnMut(&Path) + Send>;

struct Disk {
    plan: Plan,
    counts: Mutex<Counts>,
    files: Mutex<Vec<Arc<Tracked>>>,
    before_sync: Mutex<Option<SyncHook>>,
}

impl Disk {
    fn new(plan: Plan) -> Arc<Disk> {
        Arc::new(Disk { plan, counts: Mutex::default(), files: Mutex::default(), before_sync: Mutex::default() })
    }

    /// Count an operation; whether it fails. The extender's zero writes and syncs are not
    /// counted (their timing is not the test's), but a dead disk fails them too.
    fn fails(&self, op: Op) -> bool {
        let extender = std::thread::current().name() == Some("rill-aof-prealloc");
        let mut c = self.counts.lock().unwrap();
        if !extender {
            c.ops += 1;
            match op {
                Op::Write => c.writes += 1,
                Op::Sync => c.syncs += 1,
                Op::SetLen => {}
            }
        }
        let dead = self.plan.dead_from.is_some_and(|d| c.ops >= d);
        let once = !extender
            && match op {
                Op::Write => self.plan.fail_write == Some(c.writes),
                Op::Sync => self.plan.fail_sync == Some(c.syncs),
                Op::SetLen => false,
            };
        if dead || once {
            c.injected += 1;
        }
        dead || once
    }

    fn injected(&self) -> u64 {
        self.counts.lock().unwrap().injected
    }

    fn ops(&self) -> u64 {
        self.counts.lock().unwrap().ops
    }

    /// What a power loss would leave of the file at `path`, if it is one the layer wraps.
    fn on_disk(&self, path: &Path) -> Option<Vec<u8>> {
        let files = self.files.lock().unwrap();
        files.iter().find(|t| t.path == path).map(|t| t.on_disk.lock().unwrap().clone())
    }
}

struct Layer(Arc<Disk>);

impl FileLayer for Layer {
    fn wrap(&self, file: File, path: &Path) -> Arc<dyn LogFile> {
        // Files are synced before the writer gets them.
        let on_disk = Mutex::new(std::fs::read(path).unwrap());
        let tracked =
            Arc::new(Tracked { path: path.to_path_buf(), dirty_from: Mutex::new(None), on_disk, io: Mutex::new(()) });
        self.0.files.lock().unwrap().push(tracked.clone());
        Arc::new(FaultFile { inner: file, disk: self.0.clone(), tracked })
    }
}

struct FaultFile {
    inner: File,
    disk: Arc<Disk>,
    tracked: Arc<Tracked>,
}

fn eio() -> std::io::Error {
    std::io::Error::from_raw_os_error(5)
}

impl FaultFile {
    fn dirty(&self, from: u64) {
        let mut d = self.tracked.dirty_from.lock().unwrap();
        *d = Some(d.map_or(from, |d| d.min(from)));
    }
}

impl LogFile for FaultFile {
    fn write_at(&self, bytes: &[u8], pos: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        if !self.disk.fails(Op::Write) {
            let _io = self.tracked.io.lock().unwrap();
            self.inner.write_all_at(bytes, pos)?;
            self.dirty(pos);
            return Ok(());
        }
        // Half of it written, and the file on disk as the page cache has it, those bytes
        // included: writeback ran before the error.
        let mut disk = self.tracked.on_disk.lock().unwrap();
        let _io = self.tracked.io.lock().unwrap();
        let half = &bytes[..bytes.len() / 2];
        if !half.is_empty() {
            self.inner.write_all_at(half, pos)?;
            self.dirty(pos);
        }
        *disk = std::fs::read(&self.tracked.path)?;
        Err(eio())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        if let Some(hook) = self.disk.before_sync.lock().unwrap().as_mut() {
            hook(&self.tracked.path);
        }
        let mut disk = self.tracked.on_disk.lock().unwrap();
        if self.disk.fails(Op::Sync) {
            // The pages it could not write are clean now, and read back as the disk has them
            // (zeros past its end on disk).
            let _io = self.tracked.io.lock().unwrap();
            if let Some(from) = self.tracked.dirty_from.lock().unwrap().take() {
                use std::os::unix::fs::FileExt;
                let len = self.inner.metadata()?.len();
                let old: Vec<u8> = (from..len).map(|o| disk.get(o as usize).copied().unwrap_or(0)).collect();
                self.inner.write_all_at(&old, from)?;
            }
            return Err(eio());
        }
        // What an fsync makes durable is what was written before it started.
        let before = {
            let _io = self.tracked.io.lock().unwrap();
            *self.tracked.dirty_from.lock().unwrap() = None;
            std::fs::read(&self.tracked.path)?
        };
        self.inner.sync_data()?;
        *disk = before;
        Ok(())
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        if self.disk.fails(Op::SetLen) {
            return Err(eio());
        }
        let _io = self.tracked.io.lock().unwrap();
        self.inner.set_len(len)?;
        let mut d = self.tracked.dirty_from.lock().unwrap();
        *d = d.map(|d| d.min(len));
        Ok(())
    }

    fn len(&self) -> std::io::Result<u64> {
        Ok(self.inner.metadata()?.len())
    }
}

const NAME: &str = "appendonly.aof";

fn temp_dir() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir =
        std::env::temp_dir().join(format!("rill-faults-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Record `i`: `SET k<i> v` at time `i`.
fn encode(out: &mut Vec<u8>, i: usize) {
    let e = Effect::Command {
        db: 0,
        args: vec![Bytes::from_static(b"SET"), Bytes::from(format!("k{i}")), Bytes::from_static(b"v")],
    };
    encode_record(out, i as i64, &[e]);
}

/// The records (their numbers) start-up would replay from `dir`, in order; with `disk`, as a
/// power loss would leave the files.
fn replayed(dir: &Path, disk: Option<&Disk>) -> Result<Vec<i64>, String> {
    let mut files = Files::new(dir.to_str().unwrap(), NAME);
    let m = files.read_manifest().map_err(|e| e.to_string())?.ok_or("no manifest")?;
    let mut contents = Vec::new();
    for name in &m.incrs {
        let path = files.path(name);
        contents.push(match disk.and_then(|d| d.on_disk(&path)) {
            Some(b) => b,
            None => std::fs::read(&path).map_err(|e| format!("{name}: {e}"))?,
        });
    }
    // Start-up's rules: the file written last may end with a torn record (cut back with
    // `aof-load-truncated yes`, the default); any other damage stops it.
    let written_last =
        load::written_last(contents.len(), |i| load::holds_data(&contents[i][..]).map_err(|e| e.to_string()))?;
    let mut out = Vec::new();
    for (i, (name, bytes)) in m.incrs.iter().zip(contents).enumerate() {
        let mut records = Records::new(Bytes::from(bytes.clone()));
        while let Some((_, time, _)) = records.next_record() {
            out.push(time);
        }
        let tail = records.tail.unwrap_or(Tail::Clean);
        load::settle_tail(&files.path(name), &bytes, &tail, i >= written_last, true)
            .map_err(|e| format!("{name}: {tail:?}: {e}"))?;
    }
    Ok(out)
}

/// Start-up's own reading of `dir` (the rewrite's `rebuild`): the keys it finds.
fn rebuilt_keys(dir: &Path) -> Vec<usize> {
    let mut files = Files::new(dir.to_str().unwrap(), NAME);
    let m = files.read_manifest().unwrap().unwrap();
    let paths: Vec<PathBuf> = m.incrs.iter().map(|f| files.path(f)).collect();
    let mut families = rill_engine::types::families();
    families.push(crate::cmd::specs::COMMANDS);
    let table = rill_engine::command::CommandTable::new(&families);
    let mut engine = super::load::rebuild(None, &paths, rill_engine::EngineConfig::default(), &table).unwrap();
    let now = crate::clock::now_ms();
    (0..64).filter(|i| engine.lookup(0, format!("k{i}").as_bytes(), now).is_some()).collect()
}

/// Records written per run; the rotation comes after record `ROTATE_AFTER`.
const RECORDS: usize = 8;
const ROTATE_AFTER: usize = 3;

struct Outcome {
    log: Arc<Log>,
    dir: PathBuf,
    disk: Arc<Disk>,
    /// Per record: the log offset it ends at.
    ends: Vec<u64>,
    /// Per record: acknowledged (under `always` told durable, otherwise written through).
    acked: Vec<bool>,
}

/// Check what a power loss now would leave: a prefix of the records, each once, holding
/// every record below the offset reported safe and, under `always`, every one acknowledged;
/// and that a process crash (the files as the page cache has them) does too.
fn check_power_loss(
    log: &Log,
    dir: &Path,
    disk: &Disk,
    policy: FsyncPolicy,
    (ends, acked): (&[u64], &[bool]),
    what: &str,
) {
    log.paused(|| {
        let reported = match policy {
            FsyncPolicy::Always => log.durable().offset,
            _ => log.synced(),
        };
        let got = replayed(dir, Some(disk))
            .unwrap_or_else(|e| panic!("{what}: a power loss leaves a log start-up refuses: {e}"));
        let prefix: Vec<i64> = (0..got.len() as i64).collect();
        assert_eq!(got, prefix, "{what}: records lost in the middle, repeated or out of order");
        let safe = ends.iter().take_while(|&&e| e <= reported).count();
        assert!(
            got.len() >= safe,
            "{what}: offset {reported} reported safe (record {safe}) but a power loss keeps {got:?}"
        );
        if policy == FsyncPolicy::Always {
            for (i, a) in acked.iter().enumerate() {
                assert!(!a || i < got.len(), "{what}: record {i} acknowledged but a power loss keeps {got:?}");
            }
        }
        // A process crash loads as well, and keeps at least as much.
        let got = replayed(dir, None).unwrap_or_else(|e| panic!("{what}: a crash leaves a log start-up refuses: {e}"));
        let prefix: Vec<i64> = (0..got.len() as i64).collect();
        assert_eq!(got, prefix, "{what}: after a crash, records lost in the middle, repeated or out of order");
        assert!(got.len() >= safe, "{what}: offset {reported} reported safe but a crash keeps {got:?}");
        if policy == FsyncPolicy::Always {
            assert!(acked.iter().enumerate().all(|(i, a)| !a || i < got.len()), "{what}: a crash keeps {got:?}");
        }
    });
}

/// A log in `dir` (file 1 and its manifest), writing through `disk`, with fast retries and no
/// everysec thread.
fn start_log(dir: &Path, disk: &Arc<Disk>, policy: FsyncPolicy, prealloc_chunk: u64) -> Arc<Log> {
    let mut files = Files::new(dir.to_str().unwrap(), NAME);
    let f = files.create_incr(1).unwrap();
    files.write_manifest(Manifest { base: None, incrs: vec![files.incr_name(1)] }).unwrap();
    let tuning = Tuning {
        retry: Duration::from_millis(2),
        shutdown_retry: Duration::from_millis(2),
        fsync_every: None,
        prealloc_chunk,
    };
    Log::start_with(files, f, 1, 8, policy, Box::new(Layer(disk.clone())), tuning).unwrap()
}

/// Write `RECORDS` records one at a time, waiting for each to be acknowledged (or refused),
/// with a rotation after `ROTATE_AFTER`, checking after each step.
fn run(policy: FsyncPolicy, plan: Plan, prealloc_chunk: u64, what: &str) -> Outcome {
    let dir = temp_dir();
    let disk = Disk::new(plan);
    let log = start_log(&dir, &disk, policy, prealloc_chunk);
    let mut ends = Vec::new();
    let mut acked = Vec::new();
    let mut last_reported = 0;
    for i in 0..RECORDS {
        let end = log.append_with(|out| encode(out, i));
        ends.push(end);
        let ok = match policy {
            FsyncPolicy::Always => log.wait_durable(end).blocking_recv().unwrap_or(false),
            _ => {
                let ok = log.write_through(end);
                if i % 2 == 1 {
                    log.background_fsync();
                }
                ok
            }
        };
        acked.push(ok);
        if i + 1 == ROTATE_AFTER {
            let seq = log.files.lock().unwrap().next_seq();
            let file = log.prepare_rotation(seq).unwrap();
            log.rotate(file);
            // A round of its own (under `always`: the old file's fsync, then the new one's),
            // not shared with the next record depending on timing: the fault-free count of
            // fsyncs, which the tests loop over, is then the same in every run.
            assert!(log.wait_idle(Duration::from_secs(10)), "{what}: the rotation did not happen");
        }
        let reported = if policy == FsyncPolicy::Always { log.durable().offset } else { log.synced() };
        assert!(reported >= last_reported, "{what}: the safe offset went back");
        last_reported = reported;
        check_power_loss(&log, &dir, &disk, policy, (&ends, &acked), &format!("{what}, after record {i}"));
    }
    Outcome { log, dir, disk, ends, acked }
}

/// Wait until the writer has recovered and every record is on disk.
fn settle(o: &Outcome, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while o.log.failed() || o.log.synced() < o.log.written() {
        if o.log.policy() != FsyncPolicy::Always {
            o.log.background_fsync();
        }
        assert!(Instant::now() < deadline, "{what}: the log did not recover");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// One transient fault: checks (a)–(d).
fn transient(policy: FsyncPolicy, plan: Plan, prealloc_chunk: u64, what: &str) -> bool {
    let o = run(policy, plan, prealloc_chunk, what);
    settle(&o, what);
    let faulted = o.disk.injected() > 0;
    // Writes resume, on a fresh file, acknowledged only once on disk there.
    let seq_before = o.log.status.lock().unwrap().incr_seq;
    let mut ends: Vec<u64> = Vec::new();
    for i in RECORDS..RECORDS + 2 {
        let end = o.log.append_with(|out| encode(out, i));
        ends.push(end);
        let ok = match policy {
            FsyncPolicy::Always => o.log.wait_durable(end).blocking_recv().unwrap_or(false),
            _ => o.log.write_through(end),
        };
        assert!(ok, "{what}: record {i} refused after the recovery");
    }
    if faulted {
        // Besides the first file and the rotation's, a recovery's fresh one.
        let files = o.log.files.lock().unwrap();
        assert!(files.manifest.incrs.len() >= 3, "{what}: no fresh file after the fault: {:?}", files.manifest);
        assert!(seq_before >= 2, "{what}");
    }
    settle(&o, what);
    let all: Vec<i64> = (0..(RECORDS + 2) as i64).collect();
    // Every record once, the acknowledged ones and the others: whatever was queued or kept
    // when the fault hit was written again after it.
    assert_eq!(replayed(&o.dir, Some(&o.disk)).unwrap(), all, "{what}: after the recovery");
    // A restart: no clean shutdown (the threads keep running), start-up's reading of the
    // directory as it is.
    assert_eq!(rebuilt_keys(&o.dir), (0..RECORDS + 2).collect::<Vec<_>>(), "{what}: after a restart");
    o.log.shutdown();
    assert_eq!(replayed(&o.dir, None).unwrap(), all, "{what}: after the shutdown");
    let _ = std::fs::remove_dir_all(&o.dir);
    faulted
}

fn policies() -> [FsyncPolicy; 2] {
    [FsyncPolicy::Always, FsyncPolicy::EverySec]
}

/// Operations of a fault-free run, to know how far to loop. The same in every run (checked
/// on a few): the n-th write or fsync must be the same one in the runs that fail it.
fn fault_free_ops(policy: FsyncPolicy) -> (u64, u64, u64) {
    let counts: Vec<(u64, u64, u64)> = (0..3)
        .map(|_| {
            let o = run(policy, Plan::default(), 64 << 10, "fault-free");
            settle(&o, "fault-free");
            let c = o.disk.counts.lock().unwrap();
            let counts = (c.writes, c.syncs, c.ops);
            drop(c);
            o.log.shutdown();
            let _ = std::fs::remove_dir_all(&o.dir);
            counts
        })
        .collect();
    assert!(counts.windows(2).all(|w| w[0] == w[1]), "{policy:?}: fault-free runs differ: {counts:?}");
    counts[0]
}

#[test]
fn a_failed_write_at_any_position_loses_nothing_acknowledged_and_continues_in_a_fresh_file() {
    for policy in policies() {
        let (writes, _, _) = fault_free_ops(policy);
        assert!(writes >= RECORDS as u64);
        for n in 1..=writes {
            let plan = Plan { fail_write: Some(n), ..Plan::default() };
            assert!(transient(policy, plan, 64 << 10, &format!("{policy:?}, write {n} fails")), "{policy:?}: {n}");
        }
    }
}

#[test]
fn a_failed_fsync_at_any_position_loses_nothing_acknowledged_and_continues_in_a_fresh_file() {
    for policy in policies() {
        let (_, syncs, _) = fault_free_ops(policy);
        assert!(syncs >= 3);
        for n in 1..=syncs {
            let plan = Plan { fail_sync: Some(n), ..Plan::default() };
            assert!(transient(policy, plan, 64 << 10, &format!("{policy:?}, fsync {n} fails")), "{policy:?}: {n}");
        }
    }
}

/// Preallocation off (a chunk too small to matter): the file grows with each write.
#[test]
fn faults_without_preallocated_space_behave_the_same() {
    for n in 1..=6 {
        for (plan, what) in [
            (Plan { fail_sync: Some(n), ..Plan::default() }, format!("fsync {n}")),
            (Plan { fail_write: Some(n), ..Plan::default() }, format!("write {n}")),
        ] {
            // A run the fault never reached would pass without testing anything.
            assert!(transient(FsyncPolicy::Always, plan, 0, &what), "{what} fails: no fault was injected");
        }
    }
}

/// A fault, then the disk dies at each later operation: every crash point of the recovery.
/// What a power loss or a process crash then leaves must load, with every record reported
/// safe. The rotation after record `ROTATE_AFTER` is prepared (its file listed in the
/// manifest) whether or not the writer has recovered, as a rewrite does: with the disk dead
/// from the first write, say, that write's torn bytes are on disk, nothing can cut them off,
/// and an empty file is listed after them, so start-up must take the torn file for the one
/// written last (`load::written_last`), not the last one listed.
#[test]
fn a_disk_dying_at_any_point_of_the_recovery_leaves_a_log_that_loads_with_everything_acknowledged() {
    for policy in policies() {
        for fault in [Plan { fail_sync: Some(2), ..Plan::default() }, Plan { fail_write: Some(3), ..Plan::default() }] {
            // Every operation of the run and of its shutdown, until the disk outlives them all
            // (the count after the fault depends a little on timing: how the test's next
            // records meet the recovery).
            for dead in 1.. {
                assert!(dead < 1000, "{policy:?}, {fault:?}: a run that never ends");
                let plan = Plan { dead_from: Some(dead), ..fault };
                let what = format!("{policy:?}, {fault:?}, dead from operation {dead}");
                let o = run(policy, plan, 64 << 10, &what);
                // The planned fault fires unless the disk died first; either way, something
                // failed.
                assert!(o.disk.injected() > 0, "{what}: no fault was injected");
                // The writer keeps trying on the dead disk; a crash now, or after the
                // shutdown's attempts, must leave a log that loads.
                std::thread::sleep(Duration::from_millis(5));
                check_power_loss(&o.log, &o.dir, &o.disk, policy, (&o.ends, &o.acked), &what);
                o.log.shutdown();
                let what = format!("{what}, shut down");
                check_power_loss(&o.log, &o.dir, &o.disk, policy, (&o.ends, &o.acked), &what);
                let _ = std::fs::remove_dir_all(&o.dir);
                if o.disk.ops() < dead {
                    break;
                }
            }
        }
    }
}

/// As soon as `failed()` reads false again (write commands are accepted from then on), the
/// durable state is no longer failed either: a write accepted at that moment is acknowledged
/// once on disk, not refused as if the log were still failing (its connection would be
/// closed, and its record written anyway). The writer is held at the last step of its
/// recovery (the fresh file's fsync) while the test takes `status`, which the writer's
/// `clear_failed` needs right after lowering the flag: the write then comes in exactly
/// between the flag going down and whatever the writer does next.
#[test]
fn a_write_accepted_as_soon_as_the_recovery_ends_is_acknowledged() {
    use std::sync::mpsc;
    let dir = temp_dir();
    // Record 0's fsync fails; the recovery writes it again into file 2 and fsyncs that.
    let disk = Disk::new(Plan { fail_sync: Some(1), ..Plan::default() });
    let (reached, reached_rx) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let fresh = dir.join(format!("{NAME}.2.incr.rlog"));
    let mut held = false;
    *disk.before_sync.lock().unwrap() = Some(Box::new(move |path: &Path| {
        if !held && path == fresh && std::thread::current().name() == Some("rill-aof-writer") {
            held = true;
            reached.send(()).unwrap();
            go_rx.recv().unwrap();
        }
    }));
    let log = start_log(&dir, &disk, FsyncPolicy::Always, 64 << 10);
    let first = log.append_with(|out| encode(out, 0));
    assert!(!log.wait_durable(first).blocking_recv().unwrap(), "record 0's fsync failed");
    reached_rx.recv_timeout(Duration::from_secs(10)).expect("the recovery fsyncs the fresh file");
    let status = log.status.lock().unwrap();
    go.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.failed() {
        assert!(Instant::now() < deadline, "the recovery did not end");
        std::thread::sleep(Duration::from_millis(1));
    }
    let end = log.append_with(|out| encode(out, 1));
    let mut ack = log.wait_durable(end);
    let early = ack.try_recv();
    drop(status);
    assert!(early != Ok(false), "record 1, written once the log had recovered, was refused");
    assert!(early == Ok(true) || ack.blocking_recv() == Ok(true), "record 1 not acknowledged");
    assert_eq!(replayed(&dir, Some(&disk)).unwrap(), vec![0, 1]);
    log.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Records written in the same round as a rotation, before it, are fsynced (in the file they
/// went to) before they are acknowledged, and before the rewrite reads that file.
#[test]
fn records_just_before_a_rotation_are_on_disk_when_acknowledged() {
    let dir = temp_dir();
    let disk = Disk::new(Plan::default());
    let log = start_log(&dir, &disk, FsyncPolicy::Always, 64 << 10);
    let (mut ends, mut acked) = (Vec::new(), Vec::new());
    for i in 0..3 {
        // The writer is held back so that the record and the rotation are one round.
        let (end, seq) = log.paused(|| {
            let end = log.append_with(|out| encode(out, i));
            let seq = log.files.lock().unwrap().next_seq();
            log.rotate(log.prepare_rotation(seq).unwrap());
            (end, seq)
        });
        ends.push(end);
        acked.push(log.wait_durable(end).blocking_recv().unwrap());
        assert!(acked[i] && log.wait_rotated(seq, Duration::from_secs(10)));
        check_power_loss(&log, &dir, &disk, FsyncPolicy::Always, (&ends, &acked), &format!("record {i}"));
    }
    log.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// An fsync a write waited for under `always` that took a millisecond or more is kept for the
/// latency monitor's `aof-fsync-always` event, with its duration; a fast one is not.
#[test]
fn slow_fsyncs_under_always_are_kept_for_the_latency_monitor() {
    let dir = temp_dir();
    let disk = Disk::new(Plan::default());
    let slow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slow_hook = slow.clone();
    *disk.before_sync.lock().unwrap() = Some(Box::new(move |_: &Path| {
        if slow_hook.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(15));
        }
    }));
    let log = start_log(&dir, &disk, FsyncPolicy::Always, 64 << 10);
    let end = log.append_with(|out| encode(out, 0));
    assert!(log.wait_durable(end).blocking_recv().unwrap());
    // A real fsync on a loaded machine may itself take a millisecond: then it is kept, and
    // rightly; what must never be kept is one under a millisecond.
    let before: Vec<(i64, u64)> = log.fsync_times.lock().unwrap().slow_always.drain(..).collect();
    assert!(before.iter().all(|&(_, ms)| ms >= 1), "a fast fsync was kept: {before:?}");
    slow.store(true, std::sync::atomic::Ordering::Relaxed);
    let end = log.append_with(|out| encode(out, 1));
    assert!(log.wait_durable(end).blocking_recv().unwrap());
    let kept: Vec<(i64, u64)> = log.fsync_times.lock().unwrap().slow_always.iter().copied().collect();
    assert!(!kept.is_empty() && kept.iter().all(|&(_, ms)| ms >= 15), "{kept:?}");
    log.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
