//! Start-up: load the snapshot and replay the log into the engine, then open the log for
//! appending. Runs on a blocking thread while the server already answers (`-LOADING` for
//! most commands, `loading:1` in INFO); the state lock is taken per chunk of records so INFO
//! stays responsive.

use super::check::{Records, Tail};
use super::files::{Files, Manifest};
use super::{FsyncPolicy, Log};
use crate::clock::now_ms;
use crate::identity::{self, Identity};
use crate::state::{Shared, State};
use rill_engine::command::CommandTable;
use rill_engine::effect::ApplyError;
use rill_engine::rdb::file::FileReader;
use rill_engine::rdb::{LoadContext, RdbError};
use rill_engine::{Engine, EngineConfig};
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

fn context_for(config: &EngineConfig, now_ms: i64) -> LoadContext {
    LoadContext {
        limits: rill_engine::types::stream::NodeLimits::new(
            config.stream_node_max_entries,
            config.stream_node_max_bytes,
        ),
        idmp_duration_secs: config.stream_idmp_duration_secs,
        idmp_max_size: config.stream_idmp_maxsize,
        now_ms,
        rill_streams: false,
    }
}

/// What loading a snapshot does with a key whose time has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// Skip it, as a Redis primary skips it: the snapshot is the whole dataset (`dbfilename`),
    /// so nothing later can have changed its time. The keys skipped are returned, so that a
    /// snapshot that becomes a log's base gets their deletion logged after it.
    Skip,
    /// Keep it: the snapshot is the base of a log, and records after it may have changed the
    /// key's time (PERSIST, PEXPIRE, RENAME ...) before it was due. Replay must reach the
    /// state the server had, so no decision is taken from the clock while loading; a key that
    /// really expired is deleted by a record of its own, and one still expired after the load
    /// is removed by expiry then (and that deletion logged).
    Keep,
}

/// Why a snapshot could not be loaded, for the start-up error: the file, the offset, the key
/// being read if any, and what was wrong.
fn snapshot_error(path: &std::path::Path, reader: Option<&FileReader<'_>>, e: &RdbError) -> String {
    let path = path.display();
    let offset = reader.map(|r| format!(" at offset {}", r.offset())).unwrap_or_default();
    let key = match reader.and_then(FileReader::failed_key) {
        Some((db, key)) => format!(" (key '{}' of database {db})", String::from_utf8_lossy(key)),
        None => String::new(),
    };
    match e {
        // The file is sound; this server is not configured to hold it.
        RdbError::DatabaseOutOfRange { .. } => format!("{path}: cannot load the snapshot{offset}: {e}"),
        RdbError::UnsupportedType(_) => format!("{path}: cannot load the snapshot{offset}{key}: {e}"),
        _ => format!("{path}: bad snapshot{offset}{key}: {e}"),
    }
}

/// A log record changes database `db` and the server has `databases`.
fn database_out_of_range(path: &std::path::Path, db: usize, databases: usize) -> String {
    format!(
        "{}: cannot replay the log: it changes database {db}, but this server has {databases} databases (0 to {}); start it with `databases {}` or more to load it",
        path.display(),
        databases.saturating_sub(1),
        db.saturating_add(1)
    )
}

/// Put one key read from a snapshot into `engine`, with its expiry.
fn insert_loaded(
    engine: &mut Engine,
    k: rill_engine::rdb::file::LoadedKey,
    path: &std::path::Path,
    now_ms: i64,
    expired: Expired,
    skipped: &mut Vec<(usize, bytes::Bytes)>,
) -> Result<(), String> {
    // The reader already refuses a database the server does not have; the keyspace is not
    // the place to find out.
    if k.db >= engine.db_count() {
        let e = RdbError::DatabaseOutOfRange { db: k.db as u64, databases: engine.db_count() };
        return Err(snapshot_error(path, None, &e));
    }
    let expire = k.entry.expire_at_ms;
    if expired == Expired::Skip && expire.is_some_and(|t| t <= now_ms) {
        skipped.push((k.db, k.key));
        return Ok(());
    }
    engine.insert(k.db, k.key.clone(), k.entry.value);
    if expire.is_some() {
        engine.set_expire(k.db, &k.key, expire);
    }
    Ok(())
}

/// The function libraries a snapshot holds, in place of the engine's (a snapshot without
/// any leaves none, as in Redis).
fn load_libraries(engine: &mut Engine, reader: &mut FileReader<'_>, path: &std::path::Path) -> Result<(), String> {
    let codes = reader.take_functions();
    if codes.is_empty() && engine.libraries().is_empty() {
        return Ok(());
    }
    engine
        .libraries_mut()
        .replace_with(codes)
        .map_err(|e| format!("{}: bad snapshot: a function library: {e}", path.display()))
}

/// Rebuild, in a private engine, the state the log files `base` + `incrs` describe (a
/// compaction reads the files the writer has finished with, so it needs no lock and no copy
/// of the live keyspace). Any damage in them fails the rebuild.
pub fn rebuild(
    base: Option<&std::path::Path>,
    incrs: &[std::path::PathBuf],
    config: EngineConfig,
    table: &CommandTable,
) -> Result<Engine, String> {
    let mut engine = Engine::new(config);
    engine.set_loading(true);
    if let Some(path) = base {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let ctx_now = now_ms();
        let ctx = context_for(engine.config(), ctx_now);
        let mut reader = FileReader::new(&bytes, ctx, engine.db_count()).map_err(|e| snapshot_error(path, None, &e))?;
        loop {
            match reader.next_key() {
                Ok(Some(k)) => insert_loaded(&mut engine, k, path, ctx_now, Expired::Keep, &mut Vec::new())?,
                Ok(None) => {
                    load_libraries(&mut engine, &mut reader, path)?;
                    break;
                }
                Err(e) => return Err(snapshot_error(path, Some(&reader), &e)),
            }
        }
    }
    for path in incrs {
        let bytes =
            bytes::Bytes::from(std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?);
        let mut records = Records::new(bytes);
        while let Some((_, time, effects)) = records.next_record() {
            for e in effects {
                // Effects that failed when first replayed fail the same way here; a database
                // the engine lacks fails the rebuild, as it failed the replay.
                if let Err(ApplyError::DbOutOfRange(db)) = engine.apply_effect(table, time, e) {
                    return Err(database_out_of_range(path, db, engine.db_count()));
                }
            }
        }
        match records.tail {
            // Finished files have their padding cut off before this runs; it would end them
            // cleanly anyway.
            Some(Tail::Clean | Tail::Padded { .. }) | None => {}
            Some(other) => return Err(format!("{}: {other:?}", path.display())),
        }
    }
    engine.set_loading(false);
    Ok(engine)
}

/// Rebuild, in a private engine, the state the log in `dirname` (files named after
/// `fname`) holds now: its manifest's base and every incremental file (DEBUG LOADAOF; the
/// caller has had the writer hand every record to the OS first).
pub fn rebuild_from_dir(
    dirname: &str,
    fname: &str,
    config: EngineConfig,
    table: &CommandTable,
) -> Result<Engine, String> {
    let mut files = Files::new(dirname, fname);
    let manifest = files
        .read_manifest()
        .map_err(|e| format!("{}: {e}", files.manifest_path().display()))?
        .ok_or_else(|| format!("no manifest in {dirname}"))?;
    let base = manifest.base.as_deref().map(|b| files.path(b));
    let incrs: Vec<std::path::PathBuf> = manifest.incrs.iter().map(|i| files.path(i)).collect();
    rebuild(base.as_deref(), &incrs, config, table)
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
    loop {
        let mut st = shared.lock();
        for _ in 0..if delay.is_zero() { 1000 } else { 1 } {
            match reader.next_key() {
                Ok(Some(k)) => {
                    insert_loaded(&mut st.engine, k, path, load_now, expired, &mut skipped)?;
                    n += 1;
                }
                Ok(None) => {
                    load_libraries(&mut st.engine, reader, path)?;
                    tracing::info!(
                        "Loaded {n} keys from {} in {:.3} s",
                        path.display(),
                        started.elapsed().as_secs_f64()
                    );
                    return Ok((skipped, Identity::from_aux(|name| reader.aux(name))));
                }
                Err(e) => return Err(snapshot_error(path, Some(reader), &e)),
            }
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

/// Of a manifest's `count` incremental files, the index of the one being written when the
/// server stopped: the last one holding any data past its magic (`has_data(i)`, see
/// [`holds_data`]). Its last record may be torn (so may the files' after it, which hold
/// none), and it is not always the last file listed: a rewrite lists its new file before the
/// writer switches to it (`Log::prepare_rotation`), so a crash or power loss in between
/// leaves a torn tail in the file before; so does a disk failing mid-write, as the writer
/// then cannot cut the torn record off and the rotation waits behind its recovery. Before
/// the writer switches away from a file, it cuts and fsyncs it, and it writes only the files
/// after it from then on; so in a file followed by one holding data, a bad last record is
/// corruption, not a torn write. (A finished file followed only by files without a record
/// yet cannot be told from the one being written: its last record is treated as the newest
/// file's is.) With no data anywhere: the last file.
pub(super) fn written_last(
    count: usize,
    mut has_data: impl FnMut(usize) -> Result<bool, String>,
) -> Result<usize, String> {
    for i in (0..count).rev() {
        if has_data(i)? {
            return Ok(i);
        }
    }
    Ok(count.saturating_sub(1))
}

/// Whether a log file, read from `file`, holds anything past its magic but zeros: a record,
/// whole or torn, or data after a hole. Reads up to the first such byte: at once for a file
/// with records, through the padding for one without (at most about one and a half
/// preallocation chunks).
pub(super) fn holds_data(file: impl std::io::Read) -> std::io::Result<bool> {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::with_capacity(64 << 10, file);
    (&mut reader).take(super::LOG_MAGIC.len() as u64).read_to_end(&mut Vec::new())?;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        if buf.iter().any(|&b| b != 0) {
            return Ok(true);
        }
        let n = buf.len();
        reader.consume(n);
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
            at.max(super::LOG_MAGIC.len() as u64)
        }
    };
    if errors > 0 {
        tracing::warn!("{}: {errors} effects could not be replayed", path.display());
    }
    tracing::info!("Replayed {n} records from {} in {:.3} s", path.display(), started.elapsed().as_secs_f64());
    Ok((n, len))
}

/// What start-up does about the way a log file ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TailAction {
    /// Nothing: the file ends after its last record.
    Keep,
    /// Cut off the zero padding after offset `at` (`padding` bytes): the clean end of a file
    /// the server was writing when it stopped without shutting down.
    DropPadding { at: u64, padding: u64 },
    /// Cut back to `at`, dropping a record torn by a crash (`torn` bytes of it were written)
    /// and any `padding` after it, with a warning.
    CutTorn { at: u64, torn: u64, padding: u64 },
}

/// Decide about the end of log file `path` (its contents `bytes`, read up to `tail`): padding
/// is cut off; a torn record is cut back if `last` (the file written last, [`written_last`])
/// and `load_truncated` (`aof-load-truncated yes`), refused otherwise; corruption is refused.
pub(super) fn settle_tail(
    path: &std::path::Path,
    bytes: &[u8],
    tail: &Tail,
    last: bool,
    load_truncated: bool,
) -> Result<TailAction, String> {
    match *tail {
        Tail::Clean => Ok(TailAction::Keep),
        Tail::Padded { at, padding } => Ok(TailAction::DropPadding { at, padding }),
        Tail::Truncated { at } => {
            if !last || !load_truncated {
                return Err(format!(
                    "{} ends with a truncated record at offset {at}. Run rill-server --check-log {} --fix (or set aof-load-truncated yes for the file written last)",
                    path.display(),
                    path.display()
                ));
            }
            // What the crash left of the record, and the padding after it.
            let after = bytes.get(at as usize..).unwrap_or_default();
            let torn = after.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1) as u64;
            Ok(TailAction::CutTorn { at, torn, padding: after.len() as u64 - torn })
        }
        Tail::Corrupt { at, ref reason } => Err(format!(
            "Bad file format reading the append only file {}: {reason} at offset {at}. Make a backup of the file, then run rill-server --check-log {} --fix",
            path.display(),
            path.display()
        )),
    }
}

/// Cut log file `path` back to `at` bytes, synced; a file torn before the end of its magic
/// gets its magic again.
fn cut_back(path: &std::path::Path, at: u64) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    if at < super::LOG_MAGIC.len() as u64 {
        use std::io::Write;
        f.set_len(0)?;
        (&f).write_all(super::LOG_MAGIC)?;
    } else {
        f.set_len(at)?;
    }
    f.sync_all()
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
                    (f, seq, super::LOG_MAGIC.len() as u64)
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
            (f, 1, super::LOG_MAGIC.len() as u64)
        }
    };
    files.remove_unlisted();
    // Once loaded, the kept identity describes a server that is running again: a crash from
    // now on must not find it.
    identity::remove_file(&files);
    let log = Log::start(files, file, seq, len, policy).map_err(|e| format!("cannot start the AOF writer: {e}"))?;
    Ok(Opened { log: Some(log), skipped_expired, kept })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::aof::test_log;
    use std::path::Path;

    /// Read `bytes` as start-up does and decide about its end.
    fn settle(bytes: &[u8], last: bool, load_truncated: bool) -> Result<TailAction, String> {
        let mut records = Records::new(bytes::Bytes::copy_from_slice(bytes));
        while records.next_record().is_some() {}
        settle_tail(
            Path::new("appendonly.aof.1.incr.rlog"),
            bytes,
            records.tail.as_ref().unwrap(),
            last,
            load_truncated,
        )
    }

    #[test]
    fn records_then_padding_load_whole_and_lose_only_the_padding() {
        let (f, ends) = test_log(5);
        let padded = [f.clone(), vec![0; 8 << 20]].concat();
        let want = TailAction::DropPadding { at: ends[4] as u64, padding: 8 << 20 };
        // Not a torn tail: no warning, and aof-load-truncated no does not refuse it.
        assert_eq!(settle(&padded, true, true), Ok(want));
        assert_eq!(settle(&padded, true, false), Ok(want));
        assert_eq!(settle(&f, true, false), Ok(TailAction::Keep));
    }

    #[test]
    fn a_torn_record_before_padding_follows_aof_load_truncated() {
        let (f, ends) = test_log(5);
        // The last record's last byte never written: zeros from there to the end. (Its key
        // ends the record: "k4", so the byte before is not zero.)
        let mut torn = [f.clone(), vec![0; 4096]].concat();
        let cut = ends[4] - 1;
        torn[cut..].fill(0);
        let want = TailAction::CutTorn {
            at: ends[3] as u64,
            torn: (cut - ends[3]) as u64,
            padding: (torn.len() - cut) as u64,
        };
        assert_eq!(settle(&torn, true, true), Ok(want));
        let err = settle(&torn, true, false).unwrap_err();
        assert!(err.contains(&format!("truncated record at offset {}", ends[3])), "{err}");
        // Only the newest file may be cut back.
        assert!(settle(&torn, false, true).is_err());
    }

    #[test]
    fn a_corrupt_record_before_a_valid_one_and_padding_stops_start_up() {
        let (f, ends) = test_log(5);
        let mut bad = [f.clone(), vec![0; 4096]].concat();
        bad[ends[1] + 10] ^= 0x55;
        for load_truncated in [true, false] {
            let err = settle(&bad, true, load_truncated).unwrap_err();
            assert!(err.contains("Bad file format") && err.contains(&format!("at offset {}", ends[1])), "{err}");
        }
    }

    #[test]
    fn a_zero_length_word_then_data_stops_start_up() {
        let (f, ends) = test_log(5);
        let bad = [f.clone(), vec![0; 64], b"junk".to_vec(), vec![0; 64]].concat();
        let err = settle(&bad, true, true).unwrap_err();
        assert!(err.contains("zero record length") && err.contains(&format!("at offset {}", ends[4])), "{err}");
    }

    /// A rewrite's new file, listed before the writer switched to it, and a torn tail before
    /// it (a crash, or a failed write the writer could not cut off): the torn file is the
    /// one written last, and is cut back like the newest file. Once the file after it holds
    /// anything, its tail is final and the same damage stops start-up.
    #[test]
    fn the_file_written_last_is_the_last_one_holding_data_not_the_last_listed() {
        let (f, ends) = test_log(3);
        let mut torn = f.clone();
        torn.truncate(ends[2] - 3);
        torn.resize(torn.len() + 4096, 0);
        let empty = crate::aof::LOG_MAGIC.to_vec();
        let padded = [empty.clone(), vec![0; 4096]].concat();
        let newest =
            |files: &[&Vec<u8>]| written_last(files.len(), |i| Ok(holds_data(&files[i][..]).unwrap())).unwrap();
        assert_eq!(newest(&[&f, &torn, &empty, &padded]), 1);
        let want = TailAction::CutTorn { at: ends[1] as u64, torn: (ends[2] - 3 - ends[1]) as u64, padding: 4096 };
        assert_eq!(settle(&torn, true, true), Ok(want));
        // The files after it load as they are.
        assert_eq!(settle(&empty, true, true), Ok(TailAction::Keep));
        assert_eq!(settle(&padded, true, true), Ok(TailAction::DropPadding { at: 8, padding: 4096 }));
        // A file after it with a record, or data after a hole: the torn one was finished.
        let hole = [padded.clone(), vec![1]].concat();
        assert_eq!(newest(&[&torn, &empty, &f]), 2);
        assert_eq!(newest(&[&torn, &hole, &empty]), 1);
        assert!(settle(&torn, false, true).unwrap_err().contains("truncated record at offset"));
        // No data anywhere: the last file.
        assert_eq!(newest(&[&empty, &padded]), 1);
        assert_eq!(newest(&[]), 0);
    }

    /// Read in chunks, past the magic only.
    #[test]
    fn a_file_holds_data_when_a_byte_past_its_magic_is_not_zero() {
        let dir = std::env::temp_dir().join(format!("rill-load-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("appendonly.aof.2.incr.rlog");
        let (f, _) = test_log(1);
        let magic = crate::aof::LOG_MAGIC.to_vec();
        let mut late = [magic.clone(), vec![0; 200_000]].concat();
        late[150_000] = 7;
        let cases: [(Vec<u8>, bool); 6] = [
            (magic[..4].to_vec(), false),
            (magic.clone(), false),
            ([magic.clone(), vec![0; 200_000]].concat(), false),
            (late, true),
            (f, true),
            ([magic.clone(), vec![0; 65_530], vec![1]].concat(), true),
        ];
        for (bytes, want) in cases {
            std::fs::write(&path, &bytes).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            assert_eq!(holds_data(file).unwrap(), want, "{} bytes", bytes.len());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cutting_back_leaves_the_records_and_restores_a_torn_magic() {
        let dir = std::env::temp_dir().join(format!("rill-load-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("appendonly.aof.1.incr.rlog");
        let (f, ends) = test_log(3);
        std::fs::write(&path, [f.clone(), vec![0; 1 << 20]].concat()).unwrap();
        cut_back(&path, ends[2] as u64).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), f);
        std::fs::write(&path, b"RILL").unwrap();
        cut_back(&path, 0).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), crate::aof::LOG_MAGIC);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
