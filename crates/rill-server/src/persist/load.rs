//! Start-up: load the snapshot and replay the log into the engine, then open the log for
//! appending. Runs on a blocking thread while the server already answers (`-LOADING` for
//! most commands, `loading:1` in INFO); the state lock is taken per chunk of records so INFO
//! stays responsive.

use crate::aof::check::{Records, Tail};
use crate::aof::files::{Files, Manifest};
use crate::aof::load::*;
use crate::aof::{FsyncPolicy, Log};
use crate::clock::now_ms;
use crate::identity::{self, Identity};
use crate::state::{Shared, State};
use rill_engine::effect::ApplyError;
use rill_engine::rdb::file::FileReader;
use rill_engine::rdb::LoadContext;
use rill_engine::Engine;
use std::sync::Arc;
use std::time::Instant;

/// Records replayed per lock hold.
const CHUNK_RECORDS: usize = 20_000;

/// Log a progress line every this many bytes of a large file.
const PROGRESS_BYTES: u64 = 64 << 20;

/// `key-load-delay`: a pause after each key or record (tests of the loading state).
fn load_delay(shared: &Shared) -> std::time::Duration {
    let us = shared.lock().config.get_i64("key-load-delay").max(0);
    std::time::Duration::from_micros(us as u64)
}

/// The context loading a snapshot uses.
pub fn load_context(st: &State, now_ms: i64) -> LoadContext {
    context_for(st.engine.config(), now_ms)
}

/// Load an RDB snapshot file into the engine. Returns the keys skipped as expired (none with
/// [`Expired::Keep`]).
pub fn load_snapshot(
    shared: &Shared,
    path: &std::path::Path,
    expired: Expired,
) -> Result<Vec<(usize, bytes::Bytes)>, String> {
    load_snapshot_kept(shared, path, expired).map(|(skipped, _)| skipped)
}

/// [`load_snapshot`], with the replication identity the file keeps (its `repl-*` aux
/// fields), if it keeps a whole one.
fn load_snapshot_kept(shared: &Shared, path: &std::path::Path, expired: Expired) -> Result<Loaded, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    load_rdb_kept(shared, &bytes, path, expired)
}

/// The keys a snapshot's load skipped as expired, and the replication identity it kept.
type Loaded = (Vec<(usize, bytes::Bytes)>, Option<Identity>);

/// Load RDB `bytes` (a snapshot file's, or one a primary sent; `origin` names them in messages)
/// into the engine, a chunk of keys per lock hold. Returns the keys skipped as expired.
pub fn load_rdb(
    shared: &Shared,
    bytes: &[u8],
    path: &std::path::Path,
    expired: Expired,
) -> Result<Vec<(usize, bytes::Bytes)>, String> {
    load_rdb_kept(shared, bytes, path, expired).map(|(skipped, _)| skipped)
}

/// [`load_rdb`], with the replication identity the snapshot keeps.
fn load_rdb_kept(shared: &Shared, bytes: &[u8], path: &std::path::Path, expired: Expired) -> Result<Loaded, String> {
    let started = Instant::now();
    let load_now = now_ms();
    let (ctx, databases) = {
        let st = shared.lock();
        (load_context(&st, load_now), st.engine.db_count())
    };
    let mut reader = FileReader::new(bytes, ctx, databases).map_err(|e| snapshot_error(path, None, &e))?;
    load_keys(shared, &mut reader, path, Some(bytes.len()), expired, load_now, started)
}

/// Load a snapshot as it arrives into a new engine of this server's configuration, while the
/// server goes on serving its own: `source` gives the bytes in chunks (`None`: the end), the
/// whole payload `total` bytes long if that is known. Keys are read as soon as their bytes are
/// there (a replica's full sync overlaps loading with the transfer). The checksum is computed
/// over the chunks as they pass and checked against the one after the end marker; a payload
/// that does not end right after it fails the load. The caller swaps the engine's data in
/// (`Engine::replace_all`) — or, on failure, keeps serving what it had.
pub fn load_rdb_streaming(
    shared: &Shared,
    source: impl FnMut() -> Option<Vec<u8>>,
    total: Option<usize>,
    path: &std::path::Path,
) -> Result<Engine, String> {
    let started = Instant::now();
    let load_now = now_ms();
    let (ctx, mut engine) = {
        let st = shared.lock();
        // Only a rill primary sends rill's stream type, and only to a rill replica.
        (LoadContext { rill_streams: true, ..load_context(&st, load_now) }, Engine::new(st.engine.config().clone()))
    };
    engine.set_loading(true);
    // The checksum of everything but the last 8 bytes seen (which may be the stored checksum).
    let check = std::cell::RefCell::new((0u64, Vec::<u8>::new(), 0usize));
    let mut source = source;
    let counted = || {
        let chunk = source()?;
        let mut c = check.borrow_mut();
        let (crc, tail, seen) = &mut *c;
        *seen += chunk.len();
        // Everything but the last 8 bytes seen is settled: the bytes held back from before,
        // then this chunk but its own last 8 (the chunk is not copied).
        let keep = chunk.len().min(8);
        let (body, last) = chunk.split_at(chunk.len() - keep);
        if !body.is_empty() {
            *crc = rill_engine::rdb::crc64::crc64(*crc, tail);
            tail.clear();
            *crc = rill_engine::rdb::crc64::crc64(*crc, body);
        }
        tail.extend_from_slice(last);
        let settled = tail.len().saturating_sub(8);
        *crc = rill_engine::rdb::crc64::crc64(*crc, tail.get(..settled).unwrap_or_default());
        tail.drain(..settled);
        Some(chunk)
    };
    let mut reader =
        FileReader::streaming(counted, total, ctx, engine.db_count()).map_err(|e| snapshot_error(path, None, &e))?;
    let mut n: u64 = 0;
    let mut skipped = Vec::new();
    // `key-load-delay`, looked at again after each key it delays (and every 1024 keys
    // without one): a CONFIG SET meanwhile applies to the load under way, as in Redis.
    let mut delay = load_delay(shared);
    loop {
        match reader.next_key() {
            Ok(Some(k)) => {
                insert_loaded(&mut engine, k, path, load_now, Expired::Keep, &mut skipped)?;
                n += 1;
                if !delay.is_zero() {
                    std::thread::sleep(delay);
                    delay = load_delay(shared);
                } else if n.is_multiple_of(1024) {
                    delay = load_delay(shared);
                }
            }
            Ok(None) => {
                load_libraries(&mut engine, &mut reader, path)?;
                break;
            }
            Err(e) => return Err(snapshot_error(path, Some(&reader), &e)),
        }
    }
    let end = reader.offset();
    drop(reader);
    let (crc, tail, seen) = check.into_inner();
    if seen != end + 8 || tail.len() != 8 {
        return Err(format!(
            "Bad file format reading {}: {} bytes after the end marker where the checksum's 8 belong",
            path.display(),
            seen.saturating_sub(end)
        ));
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&tail);
    let stored = u64::from_le_bytes(stored);
    if stored != 0 && stored != crc {
        return Err(format!("Wrong RDB checksum reading {}", path.display()));
    }
    engine.set_loading(false);
    tracing::info!("Loaded {n} keys from {} in {:.3} s", path.display(), started.elapsed().as_secs_f64());
    tracing::info!("Done loading RDB, keys loaded: {n}, keys expired: 0.");
    Ok(engine)
}

/// The keys of `reader` into the keyspace, in batches under the lock.
fn load_keys(
    shared: &Shared,
    reader: &mut FileReader<'_>,
    path: &std::path::Path,
    total: Option<usize>,
    expired: Expired,
    load_now: i64,
    started: Instant,
) -> Result<Loaded, String> {
    let mut n: u64 = 0;
    let mut skipped = Vec::new();
    let mut next_progress = PROGRESS_BYTES;
    let delay = load_delay(shared);
    let mut batch = Vec::new();
    loop {
        // Keys are decoded without the lock (a stream of millions of entries takes seconds to
        // decode, and the clients asking meanwhile get -LOADING instead of waiting for the
        // lock, spinning); the lock is held to insert them.
        let mut end = false;
        for _ in 0..if delay.is_zero() { 1000 } else { 1 } {
            match reader.next_key() {
                Ok(Some(k)) => batch.push(k),
                Ok(None) => {
                    end = true;
                    break;
                }
                Err(e) => return Err(snapshot_error(path, Some(reader), &e)),
            }
        }
        let mut st = shared.lock();
        for k in batch.drain(..) {
            insert_loaded(&mut st.engine, k, path, load_now, expired, &mut skipped)?;
            n += 1;
        }
        if end {
            load_libraries(&mut st.engine, reader, path)?;
            tracing::info!("Loaded {n} keys from {} in {:.3} s", path.display(), started.elapsed().as_secs_f64());
            return Ok((skipped, Identity::from_aux(|name| reader.aux(name))));
        }
        drop(st);
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        if reader.offset() as u64 >= next_progress {
            match total {
                Some(total) => {
                    tracing::info!("Loading {}: {} MB of {} MB", path.display(), reader.offset() >> 20, total >> 20)
                }
                None => tracing::info!("Loading {}: {} MB", path.display(), reader.offset() >> 20),
            }
            next_progress += PROGRESS_BYTES;
        }
    }
}

/// Replay one log file. `last`: the file written last (see [`written_last`]), whose torn
/// tail may be cut back. Returns the number of records and the file's length after any cut.
fn replay_file(shared: &Shared, files: &Files, name: &str, last: bool) -> Result<(u64, u64), String> {
    let path = files.path(name);
    let bytes = bytes::Bytes::from(std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?);
    let started = Instant::now();
    let mut records = Records::new(bytes.clone());
    let mut n: u64 = 0;
    let mut errors: u64 = 0;
    let mut next_progress = PROGRESS_BYTES;
    let delay = load_delay(shared);
    loop {
        let mut st = shared.lock();
        let mut done = true;
        for _ in 0..if delay.is_zero() { CHUNK_RECORDS } else { 1 } {
            let Some((_, time, effects)) = records.next_record() else { break };
            for e in effects {
                match st.engine.apply_effect(&shared.log_table, time, e) {
                    Ok(()) => {}
                    // Not an effect that failed when it first ran: the log comes from a server
                    // with more databases, and skipping would drop that database's writes.
                    Err(ApplyError::DbOutOfRange(db)) => {
                        return Err(database_out_of_range(&path, db, st.engine.db_count()));
                    }
                    Err(msg) => {
                        errors += 1;
                        if errors <= 10 {
                            tracing::warn!("{}: replaying record {n}: {msg}", path.display());
                        }
                    }
                }
            }
            n += 1;
            done = false;
        }
        drop(st);
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        if records.offset() >= next_progress {
            tracing::info!("Loading {}: {} MB of {} MB", path.display(), records.offset() >> 20, bytes.len() >> 20);
            next_progress += PROGRESS_BYTES;
        }
        if done || records.tail.is_some() {
            break;
        }
    }
    let load_truncated = shared.lock().config.get("aof-load-truncated") == "yes";
    let action = settle_tail(&path, &bytes, records.tail.as_ref().unwrap_or(&Tail::Clean), last, load_truncated)?;
    match action {
        TailAction::Keep => {}
        TailAction::DropPadding { at, padding } => {
            tracing::info!(
                "{}: {padding} bytes of preallocated space after the last record (offset {at}) cut off",
                path.display()
            );
        }
        TailAction::CutTorn { at, torn, padding } => {
            let padding = if padding > 0 { format!(", then {padding} bytes of zero padding") } else { String::new() };
            tracing::warn!(
                "!!! Warning: short read while loading the AOF file {}!!! The last record (at offset {at}, {torn} bytes{padding}) was torn by a crash; the file is cut back to the last whole record",
                path.display(),
            );
        }
    }
    let len = match action {
        TailAction::Keep => bytes.len() as u64,
        TailAction::DropPadding { at, .. } | TailAction::CutTorn { at, .. } => {
            cut_back(&path, at).map_err(|e| format!("cannot cut {} back to offset {at}: {e}", path.display()))?;
            at.max(crate::aof::LOG_MAGIC.len() as u64)
        }
    };
    if errors > 0 {
        tracing::warn!("{}: {errors} effects could not be replayed", path.display());
    }
    tracing::info!("Replayed {n} records from {} in {:.3} s", path.display(), started.elapsed().as_secs_f64());
    Ok((n, len))
}

/// What start-up found.
#[derive(Debug)]
pub struct Opened {
    /// The log, when `appendonly yes`.
    pub log: Option<Arc<Log>>,
    /// Keys of a `dump.rdb` taken as the log's first base that were skipped as expired: their
    /// deletion must be the log's first record, or a replay of the base would bring them back.
    /// With the log off, the keys `dbfilename` held that had expired: their deletions reach the
    /// replication stream of a primary that kept its identity (a replica continuing from the
    /// snapshot still has them).
    pub skipped_expired: Vec<(usize, bytes::Bytes)>,
    /// The replication identity kept with the data, when it describes exactly the data loaded
    /// (`identity.rs`).
    pub kept: Option<Identity>,
}

/// Load everything and open the log (with `appendonly yes`) or load `dbfilename` (without).
pub fn open(shared: &Shared) -> Result<Opened, String> {
    let (aof_on, dirname, fname, dbfile, policy) = {
        let st = shared.lock();
        (
            st.config.get("appendonly") == "yes",
            st.config.get("appenddirname").to_string(),
            st.config.get("appendfilename").to_string(),
            st.config.get("dbfilename").to_string(),
            FsyncPolicy::parse(st.config.get("appendfsync")),
        )
    };
    if !aof_on {
        let path = std::path::PathBuf::from(&dbfile);
        if path.exists() {
            let (skipped_expired, kept) = load_snapshot_kept(shared, &path, Expired::Skip)?;
            return Ok(Opened { log: None, skipped_expired, kept });
        }
        return Ok(Opened { log: None, skipped_expired: Vec::new(), kept: None });
    }
    let mut skipped_expired = Vec::new();
    let mut kept = None;
    let mut files = Files::new(&dirname, &fname);
    std::fs::create_dir_all(&files.dir).map_err(|e| format!("cannot create {}: {e}", files.dir.display()))?;
    let manifest = files.read_manifest().map_err(|e| format!("{}: {e}", files.manifest_path().display()))?;
    let (file, seq, len) = match manifest {
        Some(m) if !m.incrs.is_empty() || m.base.is_some() => {
            // Read before the replay, which may cut a torn tail: the files as they were found.
            kept = identity::read_file(&files, &m);
            if let Some(base) = &m.base {
                load_snapshot(shared, &files.path(base), Expired::Keep)?;
            }
            let written_last = written_last(m.incrs.len(), |i| {
                let path = files.path(m.incrs.get(i).map_or("", String::as_str));
                std::fs::File::open(&path)
                    .and_then(holds_data)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))
            })?;
            let mut last_len = 0;
            for (i, name) in m.incrs.iter().enumerate() {
                let (_, len) = replay_file(shared, &files, name, i >= written_last)?;
                last_len = len;
            }
            match m.incrs.last() {
                Some(last) => {
                    let f = files.open_incr(last).map_err(|e| format!("cannot open {last}: {e}"))?;
                    (f, files.seq_of(last), last_len)
                }
                None => {
                    let seq = files.last_seq() + 1;
                    let f = files.create_incr(seq).map_err(|e| e.to_string())?;
                    let mut m2 = m.clone();
                    m2.incrs.push(files.incr_name(seq));
                    files.write_manifest(m2).map_err(|e| e.to_string())?;
                    (f, seq, crate::aof::LOG_MAGIC.len() as u64)
                }
            }
        }
        _ => {
            // First start with the log on: a dump.rdb there becomes the log's base (a copy:
            // both are RDB files).
            let path = std::path::PathBuf::from(&dbfile);
            let mut base = None;
            if path.exists() {
                // Expired keys are skipped (as Redis loads a dump), and the copy below holds
                // them: the caller logs their deletion first thing.
                // Its identity is the log's: the log starts from exactly that data.
                (skipped_expired, kept) = load_snapshot_kept(shared, &path, Expired::Skip)?;
                let name = files.base_name(1);
                let copy = std::fs::copy(&path, files.path(&name))
                    .and_then(|_| std::fs::File::open(files.path(&name))?.sync_all());
                copy.map_err(|e| format!("cannot copy {dbfile} into the AOF directory: {e}"))?;
                base = Some(name);
            }
            let f = files.create_incr(1).map_err(|e| format!("cannot create the AOF file: {e}"))?;
            files.write_manifest(Manifest { base, incrs: vec![files.incr_name(1)] }).map_err(|e| e.to_string())?;
            (f, 1, crate::aof::LOG_MAGIC.len() as u64)
        }
    };
    files.remove_unlisted();
    // Once loaded, the kept identity describes a server that is running again: a crash from
    // now on must not find it.
    identity::remove_file(&files);
    let log = Log::start(files, file, seq, len, policy).map_err(|e| format!("cannot start the AOF writer: {e}"))?;
    Ok(Opened { log: Some(log), skipped_expired, kept })
}
