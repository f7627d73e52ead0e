//! Snapshots: compaction of the log (BGREWRITEAOF, automatic by size), SAVE and BGSAVE.
//!
//! A rewrite tells the writer to start a new incremental file at this exact point and takes
//! the state at that point: a copy of the keyspace under the lock, copy-on-write for streams
//! (their blocks and PEL chunks are shared, so the copy costs O(keys + blocks), and a write
//! afterwards duplicates only the block or chunk it changes), for up to `snapshot-copy-max-keys`
//! keys; above that, the files the writer finishes with (old base + old incremental files)
//! describe exactly that state, so a background thread rebuilds it from them in a private
//! engine (nothing copied under the lock, twice the memory, slower). Then it writes the state
//! as an RDB file, fsyncs and renames it, and switches the manifest to `base = the new
//! snapshot, incr = the file started at the rotation`. A crash at any moment
//! leaves a manifest that names a complete set of files: before the switch the old base and
//! every incremental file (old and new) are listed; after it, the new pair.

use crate::aof::files::{sync_dir, Manifest};
use crate::aof::snapshot::library_codes;
pub use crate::aof::snapshot::{ReplicaSnapshot, Snapshot};
use crate::clock::now_ms;
use crate::state::{Shared, State};
use bytes::Bytes;
use rill_engine::rdb::file::version_for;
use rill_engine::Entry;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Persistence status INFO reports (behind the state lock).
#[derive(Debug, Default)]
pub struct Persist {
    /// Keys the last load read, and those of them it dropped as expired
    /// (`rdb_last_load_keys_loaded`, `rdb_last_load_keys_expired`).
    pub last_load_keys_loaded: u64,
    /// See `last_load_keys_loaded`.
    pub last_load_keys_expired: u64,
    /// Loading the dataset: at start-up, or a replica's full sync from a primary whose history
    /// is not the one it follows (Redis' `loading:1`: commands not flagged `loading` get
    /// `-LOADING`).
    pub loading: bool,
    /// A replica's full sync from the history it follows, loaded aside while the old data is
    /// served (Redis' `async_loading:1`: only commands flagged `no-async-loading` get
    /// `-LOADING`).
    pub async_loading: bool,
    /// A log rewrite runs.
    pub rewrite_in_progress: bool,
    /// BGREWRITEAOF was asked while a BGSAVE ran: start when it ends.
    pub rewrite_scheduled: bool,
    /// Outcome of the last rewrite.
    pub last_rewrite_ok: bool,
    /// Duration of the last rewrite, seconds (−1: none yet).
    pub last_rewrite_secs: i64,
    /// Rewrites done.
    pub rewrites: u64,
    /// Size of the log right after the last rewrite (base of the automatic trigger).
    pub rewrite_base_size: u64,
    /// Size of the current base file.
    pub base_file_size: u64,
    /// A BGSAVE runs.
    pub bgsave_in_progress: bool,
    /// Snapshots for replicas being made and sent (INFO `rdb_bgsave_in_progress` counts them,
    /// as Redis counts its fork for a replica; `conn/feed.rs`).
    pub replica_snapshots: usize,
    /// Outcome of the last SAVE / BGSAVE.
    pub last_bgsave_ok: bool,
    /// `engine.dirty()` at the last successful save.
    pub dirty_at_save: u64,
    /// `engine.dirty()` when the running BGSAVE cloned the keyspace.
    pub dirty_at_clone: u64,
    /// Saves done.
    pub saves: u64,
    /// When the last rewrite writing a missing base started (Unix ms; `base_due`).
    pub base_attempt_ms: i64,
}

/// Clone the keyspace (call under the lock; O(keys) plus the size of non-shared values).
pub fn take(st: &State) -> Snapshot {
    let mut dbs = Vec::new();
    for (i, db) in st.engine.dbs().iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let keys: Vec<(Bytes, Entry)> = db.iter().map(|(k, e)| (Bytes::copy_from_slice(k), e.clone())).collect();
        dbs.push((i, keys, db.expires_len() as u64));
    }
    let version = version_for(dbs.iter().flat_map(|(_, keys, _)| keys.iter().map(|(_, e)| &e.value)));
    Snapshot {
        dbs,
        libraries: library_codes(&st.engine),
        now_ms: now_ms(),
        version,
        aux: Vec::new(),
        key_delay: Duration::from_micros(u64::try_from(st.config.get_i64("rdb-key-save-delay")).unwrap_or(0)),
        rill_streams: false,
        compress: compresses(st),
    }
}

/// Whether snapshots compress their strings (`rdbcompression`).
fn compresses(st: &State) -> bool {
    st.config.get("rdbcompression") == "yes"
}

/// [`take`], with the replication identity at that moment (what `SAVE` and `BGSAVE` write).
fn take_with_identity(st: &State) -> Snapshot {
    Snapshot { aux: crate::identity::snapshot_aux(st), ..take(st) }
}

/// Write `snap` to `path` (through a temporary file in the same directory, fsynced, renamed).
/// Returns the file size.
pub fn write(snap: &Snapshot, path: &Path) -> std::io::Result<u64> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!("temp-{}-{}.rdb", std::process::id(), now_ms()));
    let result = (|| {
        let file = File::create(&tmp)?;
        let (out, size) = snap.write_to(BufWriter::with_capacity(1 << 20, file))?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        sync_dir(dir)?;
        Ok(size)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// SAVE: write `dbfilename` now, holding the lock.
pub fn save(st: &mut State) -> std::io::Result<()> {
    let snap = take_with_identity(st);
    let path = PathBuf::from(st.config.get("dbfilename"));
    match write(&snap, &path) {
        Ok(_) => {
            st.persist.last_bgsave_ok = true;
            st.persist.dirty_at_save = st.engine.dirty();
            st.persist.saves += 1;
            st.last_save_unix = now_ms() / 1000;
            Ok(())
        }
        Err(e) => {
            st.persist.last_bgsave_ok = false;
            tracing::warn!("Failed opening the temp RDB file or writing it: {e}");
            Err(e)
        }
    }
}

/// BGSAVE: clone now, write in the background. Errors if a save or rewrite is running.
pub fn bgsave(shared: &Arc<Shared>, st: &mut State) -> Result<(), &'static str> {
    if st.persist.bgsave_in_progress {
        return Err("ERR Background save already in progress");
    }
    if st.persist.rewrite_in_progress {
        return Err("ERR Background append only file rewriting in progress");
    }
    let snap = take_with_identity(st);
    st.persist.bgsave_in_progress = true;
    st.persist.dirty_at_clone = st.engine.dirty();
    let path = PathBuf::from(st.config.get("dbfilename"));
    let shared = shared.clone();
    std::thread::spawn(move || {
        background_priority();
        let r = write(&snap, &path);
        let mut st = shared.lock();
        st.persist.bgsave_in_progress = false;
        match r {
            Ok(_) => {
                tracing::info!("Background saving terminated with success");
                st.persist.last_bgsave_ok = true;
                st.persist.dirty_at_save = st.persist.dirty_at_clone;
                st.persist.saves += 1;
                st.last_save_unix = now_ms() / 1000;
            }
            Err(e) => {
                tracing::warn!("Background saving error: {e}");
                st.persist.last_bgsave_ok = false;
            }
        }
        if std::mem::take(&mut st.persist.rewrite_scheduled) {
            let _ = start(&shared, &mut st);
        }
    });
    Ok(())
}

/// Start a log rewrite (BGREWRITEAOF, automatic trigger, or turning the log on).
pub fn start(shared: &Arc<Shared>, st: &mut State) -> Result<(), &'static str> {
    start_with(shared, st, None)
}

/// Where a rewrite's snapshot comes from.
enum Source {
    /// A copy made under the lock at the rotation point, when the log was just turned on (the
    /// data exists only in memory): the new file is prepared under the lock too.
    Copy(Snapshot),
    /// A copy made by the thread at the rotation point, under the lock, once it has prepared
    /// the new file without it (creating the file and rewriting the manifest fsync: a few
    /// milliseconds the clients need not wait): whenever the keyspace has at most
    /// `snapshot-copy-max-keys` keys (the copy shares streams' blocks and PEL chunks).
    CopyAtRotation,
    /// The files the writer finishes with at the rotation point describe exactly the state at
    /// that point: a background thread rebuilds it from them in a private engine, so the
    /// live keyspace is neither locked nor copied. Which files those are is read from the
    /// manifest after the rotation: a recovery from a failed write may have added one.
    Files { config: rill_engine::EngineConfig, compress: bool },
}

/// Start a log rewrite; with `save_to`, also write the new snapshot there (BGSAVE with the
/// log on).
pub fn start_with(shared: &Arc<Shared>, st: &mut State, save_to: Option<PathBuf>) -> Result<(), &'static str> {
    let Some(log) = st.journal.log().cloned() else {
        return Err("ERR Background append only file rewriting needs appendonly yes");
    };
    if st.persist.rewrite_in_progress {
        return Err("ERR Background append only file rewriting already in progress");
    }
    let started = Instant::now();
    let (seq, provisional) = {
        let mut files = log.files.lock().unwrap_or_else(|p| p.into_inner());
        // Reserved now: the writer's recovery may create a file before the thread does.
        (files.next_seq(), files.provisional)
    };
    let source = if provisional {
        // The copy must be exactly the state at the rotation point: both happen under the
        // lock (the new file is prepared here too; this path runs once, when the log is
        // turned on). Streams are copied copy-on-write, so this costs O(keys + blocks)
        // rather than the data's size, and the rewrite holds no second engine.
        let file = log.prepare_rotation(seq).map_err(|_| "ERR cannot create the new AOF file")?;
        log.rotate(file);
        Source::Copy(take(st))
    } else if copy_is_cheap(st) {
        Source::CopyAtRotation
    } else {
        // Any point will do: the thread prepares the new file, then rotates.
        Source::Files { config: st.engine.config().clone(), compress: compresses(st) }
    };
    st.persist.rewrite_in_progress = true;
    if provisional {
        st.persist.base_attempt_ms = now_ms();
    }
    if save_to.is_some() {
        st.persist.bgsave_in_progress = true;
        st.persist.dirty_at_clone = st.engine.dirty();
    }
    let paused = started.elapsed();
    if paused > Duration::from_millis(5) {
        tracing::info!("Rewrite: keyspace copied in {} ms", paused.as_millis());
    }
    let shared = shared.clone();
    std::thread::spawn(move || {
        background_priority();
        let r = run(&shared, &log, source, seq);
        let saved = match (&r, &save_to) {
            (Ok((_, _, base_path)), Some(dest)) => Some(copy_file(base_path, dest)),
            _ => None,
        };
        let mut st = shared.lock();
        st.persist.rewrite_in_progress = false;
        st.persist.last_rewrite_secs = started.elapsed().as_secs() as i64;
        match r {
            Ok((base, total, _)) => {
                tracing::info!("Background AOF rewrite finished successfully");
                st.persist.last_rewrite_ok = true;
                st.persist.rewrites += 1;
                st.persist.base_file_size = base;
                st.persist.rewrite_base_size = total;
            }
            Err(e) => {
                tracing::warn!("Background AOF rewrite failed: {e}");
                st.persist.last_rewrite_ok = false;
                if !log.base.ready() && matches!(st.journal.log(), Some(l) if Arc::ptr_eq(l, &log)) {
                    // The base of a log just turned on: writes wait for it, and are refused
                    // until the cron's next attempt succeeds.
                    log.base.set(crate::aof::base::Base::Failed(e));
                }
            }
        }
        if save_to.is_some() {
            st.persist.bgsave_in_progress = false;
            match saved {
                Some(Ok(())) => {
                    tracing::info!("Background saving terminated with success");
                    st.persist.last_bgsave_ok = true;
                    st.persist.dirty_at_save = st.persist.dirty_at_clone;
                    st.persist.saves += 1;
                    st.last_save_unix = now_ms() / 1000;
                }
                Some(Err(e)) => {
                    tracing::warn!("Background saving error: {e}");
                    st.persist.last_bgsave_ok = false;
                }
                None => st.persist.last_bgsave_ok = false,
            }
        }
    });
    Ok(())
}

/// Lower the calling thread's scheduling priority (nice 10; per thread on Linux): a thread
/// that writes a snapshot (rewrite, BGSAVE, a replica's full sync) yields the CPU to the event
/// loop whenever both want it, so clients wait less behind it; with a core to itself it runs
/// as fast. Call it on a thread of its own: an unprivileged process cannot raise it back.
pub fn background_priority() {
    #[cfg(unix)]
    if let Err(e) = rustix::process::setpriority_process(None, BACKGROUND_NICE) {
        tracing::debug!("could not lower a snapshot thread's priority: {e}");
    }
}

/// The nice value of the threads that write snapshots.
#[cfg(unix)]
const BACKGROUND_NICE: i32 = 10;

/// Whether a snapshot of the keyspace is a copy made under the lock (copy-on-write for
/// streams, O(keys)) rather than a rebuild from the log files: up to `snapshot-copy-max-keys`
/// keys (rill's own directive, default a million: about 50 ms of copying at most).
fn copy_is_cheap(st: &State) -> bool {
    let keys: usize = st.engine.dbs().iter().map(|db| db.len()).sum();
    i64::try_from(keys).is_ok_and(|k| k <= st.config.get_i64("snapshot-copy-max-keys"))
}

/// The snapshot for a replica's full sync, of the state at this exact point (call under the
/// lock, in the same critical section that reads the stream's offset).
///
/// Usually the keyspace is copied here: a stream's blocks and its PEL's chunks are shared
/// copy-on-write (`Arc`), so copying a stream costs O(blocks + PEL / 256) pointer copies, not
/// its size (1M entries with 500k pending: about a millisecond), and a write after the copy
/// duplicates only the block or chunk it changes. Strings are shared as well; hashes, lists
/// and sets are copied whole. The cost is O(keys), so above `snapshot-copy-max-keys` keys, when the
/// log is on and stable, the writer starts a new file instead, so the files before it
/// describe exactly this state, and a background thread rebuilds it from them in a private
/// engine (the same machinery as compaction; the manifest just lists one more file until the
/// next rewrite): slower and twice the memory, but the clients are paused only for the new
/// file's creation. While it is built, INFO says a save is in progress and a BGREWRITEAOF
/// waits for it.
pub fn replica_snapshot(shared: &Arc<Shared>, st: &mut State) -> ReplicaSnapshot {
    // `repl-rdb-compat 7.0`: RDB 10, streams in Redis 7.0's type (`FileWriter::key`).
    let rdb_7_0 = st.config.get("repl-rdb-compat") == "7.0";
    let for_replica = move |snap: Snapshot| {
        if rdb_7_0 {
            Snapshot { version: rill_engine::rdb::VERSION_REDIS_7_0, ..snap }
        } else {
            snap
        }
    };
    let copy = |st: &State| {
        let started = std::time::Instant::now();
        let snap = for_replica(take(st));
        tracing::info!("Snapshot for a replica: keyspace copied in {} us", started.elapsed().as_micros());
        ReplicaSnapshot::Copy(snap)
    };
    if copy_is_cheap(st) {
        return copy(st);
    }
    let busy = st.persist.rewrite_in_progress || st.persist.bgsave_in_progress || st.persist.loading;
    let Some(log) = st.journal.log().cloned().filter(|l| !busy && l.base.ready() && !l.failed()) else {
        return copy(st);
    };
    let seq = {
        let mut files = log.files.lock().unwrap_or_else(|p| p.into_inner());
        if files.provisional {
            drop(files);
            return copy(st);
        }
        files.next_seq()
    };
    let file = match log.prepare_rotation(seq) {
        Ok(f) => f,
        Err(_) => return copy(st),
    };
    log.rotate(file);
    tracing::info!("Snapshot for a replica: rebuilding it from the log files in the background");
    st.persist.bgsave_in_progress = true;
    let config = st.engine.config().clone();
    let compress = compresses(st);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let shared = shared.clone();
    std::thread::spawn(move || {
        background_priority();
        let built = rebuild_before(&shared, &log, seq, config, compress)
            .map(for_replica)
            .and_then(|snap| snap.write_to(Vec::new()).map(|(bytes, _)| bytes).map_err(|e| e.to_string()));
        let mut st = shared.lock();
        st.persist.bgsave_in_progress = false;
        if std::mem::take(&mut st.persist.rewrite_scheduled) {
            let _ = start(&shared, &mut st);
        }
        drop(st);
        let _ = tx.send(built);
    });
    ReplicaSnapshot::Building(rx)
}

/// Copy a finished snapshot to `dest` (temporary file, fsync, rename).
fn copy_file(src: &Path, dest: &Path) -> std::io::Result<()> {
    let dir = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!("temp-{}-{}.rdb", std::process::id(), now_ms()));
    std::fs::copy(src, &tmp)?;
    File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dest)?;
    sync_dir(dir)
}

/// The state just before incremental file `seq`, rebuilt in a private engine from the files
/// before it (once the writer has switched to `seq`, they are final and on disk: it cut and
/// fsynced each before switching away from it).
fn rebuild_before(
    shared: &Shared,
    log: &crate::aof::Log,
    seq: u64,
    config: rill_engine::EngineConfig,
    compress: bool,
) -> Result<Snapshot, String> {
    if !log.wait_rotated(seq, Duration::from_secs(60)) {
        return Err("the writer did not start the new log file".into());
    }
    let (base, incrs) = {
        let files = log.files.lock().unwrap_or_else(|p| p.into_inner());
        let first_new = files.incr_name(seq);
        let base = files.manifest.base.as_ref().map(|f| files.path(f));
        let incrs: Vec<PathBuf> =
            files.manifest.incrs.iter().take_while(|f| **f != first_new).map(|f| files.path(f)).collect();
        (base, incrs)
    };
    let engine = crate::aof::load::rebuild(base.as_deref(), &incrs, config, &shared.log_table)?;
    Ok(Snapshot::from_engine(engine, compress))
}

/// The background part: wait for the rotation, build the snapshot, write it as the new base,
/// switch the manifest. Returns the base size, the log's total size and the base's path.
fn run(shared: &Shared, log: &crate::aof::Log, source: Source, seq: u64) -> Result<(u64, u64, PathBuf), String> {
    if matches!(source, Source::Files { .. }) {
        // Everything appended before this point goes to the old files, everything after to
        // the new one.
        let file = log.prepare_rotation(seq).map_err(|e| format!("cannot create the new AOF file: {e}"))?;
        log.rotate(file);
    }
    // Once the writer has switched, the files before the new one are final and on disk: it
    // cut and fsynced each before switching away from it.
    let snap = match source {
        Source::Copy(snap) => {
            if !log.wait_rotated(seq, Duration::from_secs(60)) {
                return Err("the writer did not start the new log file".into());
            }
            snap
        }
        Source::CopyAtRotation => {
            let file = log.prepare_rotation(seq).map_err(|e| format!("cannot create the new AOF file: {e}"))?;
            let snap = {
                let st = shared.lock();
                let started = Instant::now();
                log.rotate(file);
                let snap = take(&st);
                let paused = started.elapsed();
                if paused > Duration::from_millis(5) {
                    tracing::info!("Rewrite: keyspace copied in {} ms", paused.as_millis());
                }
                snap
            };
            if !log.wait_rotated(seq, Duration::from_secs(60)) {
                return Err("the writer did not start the new log file".into());
            }
            snap
        }
        Source::Files { config, compress } => rebuild_before(shared, log, seq, config, compress)?,
    };
    let (base_name, base_path) = {
        let files = log.files.lock().unwrap_or_else(|p| p.into_inner());
        let name = files.base_name(seq);
        (name.clone(), files.path(&name))
    };
    let size = write(&snap, &base_path).map_err(|e| format!("writing {}: {e}", base_path.display()))?;
    let mut files = log.files.lock().unwrap_or_else(|p| p.into_inner());
    if log.retired(&files) {
        // The log was turned off meanwhile: the manifest is no longer this log's to switch.
        let _ = std::fs::remove_file(&base_path);
        return Err("the log was turned off during the rewrite".into());
    }
    let first_new = files.incr_name(seq);
    let incrs: Vec<String> = files.manifest.incrs.iter().skip_while(|f| **f != first_new).cloned().collect();
    if incrs.is_empty() {
        let _ = std::fs::remove_file(&base_path);
        return Err("the new log file is missing from the manifest".into());
    }
    let had_no_base = files.provisional;
    files.provisional = false;
    files
        .write_manifest(Manifest { base: Some(base_name), incrs })
        .map_err(|e| format!("writing the manifest: {e}"))?;
    files.remove_unlisted();
    if had_no_base {
        // The replies held since the log was turned on may go out now (`base.rs`).
        log.base.set(crate::aof::base::Base::Ready);
    }
    Ok((size, log.total_size(&files), base_path))
}

/// Start the rewrite that writes the base of a log just turned on; if it cannot start, the
/// gate says so (writes get -MISCONF) and the cron tries again a second later.
pub fn start_base(shared: &Arc<Shared>, st: &mut State) -> Result<(), &'static str> {
    let r = start(shared, st);
    if let (Err(e), Some(log)) = (r, st.journal.log()) {
        log.base.set(crate::aof::base::Base::Failed(e.trim_start_matches("ERR ").to_string()));
        st.persist.base_attempt_ms = now_ms();
    }
    r
}

/// Whether the log lacks its base and no rewrite is writing it (turned on while a rewrite of
/// the previous log was finishing, or the last attempt failed): the cron starts one, at most
/// once a second after a failure.
pub fn base_due(st: &State, now_ms: i64) -> bool {
    let Some(log) = st.journal.log() else { return false };
    if st.persist.rewrite_in_progress || st.persist.bgsave_in_progress || st.persist.loading {
        return false;
    }
    match log.base.get() {
        crate::aof::base::Base::Ready => false,
        crate::aof::base::Base::Pending => true,
        crate::aof::base::Base::Failed(_) => now_ms - st.persist.base_attempt_ms >= 1000,
    }
}

/// The automatic trigger: the log grew by `auto-aof-rewrite-percentage` over its size after
/// the last rewrite, and is at least `auto-aof-rewrite-min-size`.
pub fn should_auto_rewrite(st: &State) -> bool {
    let Some(log) = st.journal.log() else { return false };
    if st.persist.rewrite_in_progress || st.persist.bgsave_in_progress || st.persist.loading {
        return false;
    }
    let pct = st.config.get_i64("auto-aof-rewrite-percentage");
    if pct <= 0 {
        return false;
    }
    let size = st.persist.base_file_size + log.status.lock().map(|s| s.incr_size).unwrap_or(0);
    let min = st.config.get_i64("auto-aof-rewrite-min-size").max(0) as u64;
    let base = st.persist.rewrite_base_size.max(1);
    size >= min && size.saturating_sub(base) * 100 / base >= pct as u64
}

/// `save` points: whether one is due (`secs` elapsed since the last save and `changes` writes).
pub fn save_due(st: &State, now_secs: i64) -> bool {
    if st.persist.bgsave_in_progress || st.persist.rewrite_in_progress || st.persist.loading {
        return false;
    }
    let changes = st.engine.dirty().saturating_sub(st.persist.dirty_at_save);
    let elapsed = now_secs - st.last_save_unix;
    let points: Vec<i64> = st.config.get("save").split_whitespace().filter_map(|t| t.parse().ok()).collect();
    points.chunks_exact(2).any(|p| matches!(p, [s, c] if changes >= *c as u64 && changes > 0 && elapsed >= *s))
}
