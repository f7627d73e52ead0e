//! The log's replay rules, without the server state: rebuilding an engine from log files
//! (compaction, DEBUG LOADAOF), loading a snapshot's keys into an engine, and which damage at
//! a file's end is a torn write to cut back and which is corruption (`written_last`,
//! `settle_tail`). Loading into the running server is `crate::persist::load`'s.

use super::check::{Records, Tail};
use super::files::Files;
use crate::clock::now_ms;
use rill_engine::command::CommandTable;
use rill_engine::effect::ApplyError;
use rill_engine::rdb::file::FileReader;
use rill_engine::rdb::{LoadContext, RdbError};
use rill_engine::{Engine, EngineConfig};

pub(crate) fn context_for(config: &EngineConfig, now_ms: i64) -> LoadContext {
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
pub(crate) fn snapshot_error(path: &std::path::Path, reader: Option<&FileReader<'_>>, e: &RdbError) -> String {
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
pub(crate) fn database_out_of_range(path: &std::path::Path, db: usize, databases: usize) -> String {
    format!(
        "{}: cannot replay the log: it changes database {db}, but this server has {databases} databases (0 to {}); start it with `databases {}` or more to load it",
        path.display(),
        databases.saturating_sub(1),
        db.saturating_add(1)
    )
}

/// Put one key read from a snapshot into `engine`, with its expiry.
pub(crate) fn insert_loaded(
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
    let expire = k.entry.expire_at_ms();
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
pub(crate) fn load_libraries(
    engine: &mut Engine,
    reader: &mut FileReader<'_>,
    path: &std::path::Path,
) -> Result<(), String> {
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
pub(crate) fn written_last(
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
pub(crate) fn holds_data(file: impl std::io::Read) -> std::io::Result<bool> {
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

/// What start-up does about the way a log file ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TailAction {
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
pub(crate) fn settle_tail(
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
pub(crate) fn cut_back(path: &std::path::Path, at: u64) -> std::io::Result<()> {
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
