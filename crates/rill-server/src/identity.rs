//! The replication identity kept across a restart: which history this server's data belongs
//! to (`repl-id`), how far into it (`repl-offset`), and, for a replica, the database its
//! primary's stream selected last (`repl-stream-db`). Redis keeps the three as aux fields of
//! the RDB files it saves; rill does the same for `SAVE`, `BGSAVE` and the snapshot saved at
//! shutdown, and, since its default is the log, keeps them beside the log too:
//!
//! ```text
//!  appenddirname/
//!    appendonly.aof.manifest.rill
//!    appendonly.aof.<n>.base.rdb
//!    appendonly.aof.<n>.incr.rlog
//!    appendonly.aof.repl.rill      written at a clean shutdown, after the log's last fsync:
//!                                    rill-replication-identity 1
//!                                    repl-id <40 hex>
//!                                    repl-offset <n>
//!                                    repl-stream-db <n>
//!                                    base <file> <bytes>      every file the manifest lists,
//!                                    incr <file> <bytes>      in its order, with its size
//! ```
//!
//! An offset is worth something only if the data loaded is exactly the data at that offset:
//! a wrong partial resync loses data, a needless full one costs time. So the file is believed
//! only when the manifest lists exactly the files it names, each of the size it says (any
//! record appended since, a rewrite, a torn tail cut back, a full sync that restarted the log
//! — each changes that), and it is removed once read, so that it only ever describes a server
//! that stopped cleanly. After a `kill -9` there is none, and the server starts a new history:
//! the log's records cannot rebuild the offset (the stream also carries PINGs, PUBLISH and a
//! replica's relayed bytes, which the log does not hold), and a replica may have received a
//! unit the log never got to write.
//!
//! What a kept identity becomes at start-up is Redis' rule: a replica (`replicaof` set) takes
//! the ID and offset back and asks its primary to continue from there; a primary starts a new
//! ID, keeps the old one as `replid2` up to the offset, and makes its backlog at once at that
//! offset, empty, so that a replica that applied everything up to the offset continues
//! (`+CONTINUE <new id>`), and the deletions of keys found expired after the load reach it.
//! A replica that went further (it got bytes the saved data lacks) asks for more than the old
//! history holds and syncs fully.

use crate::aof::files::{sync_dir, Files, Manifest};
use crate::replication::Replication;
use crate::state::State;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::PathBuf;

/// The aux field of the database the stream selected last.
pub const AUX_STREAM_DB: &str = "repl-stream-db";
/// The aux field of the replication ID.
pub const AUX_ID: &str = "repl-id";
/// The aux field of the offset.
pub const AUX_OFFSET: &str = "repl-offset";
/// The first line of the file beside the log.
const HEADER: &str = "rill-replication-identity 1";
/// The largest file read: a few lines per log file.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// A place in a replication history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The history's 40-character ID.
    pub replid: String,
    /// The last byte of the stream the data includes.
    pub offset: u64,
    /// The database the stream selected last.
    pub stream_db: usize,
}

impl Identity {
    /// What this server keeps now, if anything: as Redis, only a server in a replication
    /// chain (one with a backlog: a primary once a replica attached, any replica), and never
    /// while a snapshot is being loaded (the data is not yet the history's) or while a
    /// replica's stream is inside a transaction (its offset counts commands not applied yet).
    pub fn current(st: &State) -> Option<Identity> {
        let r: &Replication = &st.replication;
        if st.persist.loading || (r.master.is_some() && r.stream_in_transaction) {
            return None;
        }
        let selected = r.with_backlog(|b| b.selected_db())?;
        // A primary whose stream selected nothing yet (a new reader, a restart) will select
        // again before its next command, so 0 is as good as any (Redis does the same).
        let stream_db = if r.master.is_some() { r.stream_db } else { selected.unwrap_or(0) };
        Some(Identity { replid: r.replid.clone(), offset: r.offset(), stream_db })
    }

    /// The aux fields of a snapshot, in the order Redis writes them.
    pub fn aux_fields(&self) -> Vec<(String, String)> {
        vec![
            (AUX_STREAM_DB.to_string(), self.stream_db.to_string()),
            (AUX_ID.to_string(), self.replid.clone()),
            (AUX_OFFSET.to_string(), self.offset.to_string()),
        ]
    }

    /// The identity a snapshot's aux fields hold (`aux(name)`: a field's value), if it holds
    /// a whole one: an ID of 40 characters, an offset and a database that are not negative
    /// (Redis writes -1 for "none").
    pub fn from_aux<'a>(aux: impl Fn(&str) -> Option<&'a [u8]>) -> Option<Identity> {
        let text = |name| aux(name).and_then(|v| std::str::from_utf8(v).ok());
        let replid = text(AUX_ID).filter(|id| id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()))?;
        let offset = text(AUX_OFFSET)?.parse::<u64>().ok()?;
        let stream_db = text(AUX_STREAM_DB)?.parse::<usize>().ok()?;
        Some(Identity { replid: replid.to_ascii_lowercase(), offset, stream_db })
    }
}

/// The aux fields for a snapshot taken now (`SAVE`, `BGSAVE`, at shutdown): none when there
/// is no identity to keep.
pub fn snapshot_aux(st: &State) -> Vec<(String, String)> {
    Identity::current(st).map(|id| id.aux_fields()).unwrap_or_default()
}

/// Where the identity is kept beside the log.
pub fn file_path(files: &Files) -> PathBuf {
    files.dir.join(format!("{}.repl.rill", files.name))
}

/// The manifest's files, base first, each with its size on disk now.
fn listed_sizes(files: &Files, m: &Manifest) -> io::Result<Vec<(&'static str, String, u64)>> {
    let base = m.base.iter().map(|f| ("base", f));
    let incrs = m.incrs.iter().map(|f| ("incr", f));
    base.chain(incrs).map(|(kind, f)| Ok((kind, f.clone(), fs::metadata(files.path(f))?.len()))).collect()
}

/// Write the identity file for `id` and the log's files as they are on disk now (temporary
/// file, fsync, rename, fsync the directory).
fn write_file(files: &Files, id: &Identity) -> io::Result<()> {
    let mut text =
        format!("{HEADER}\n{AUX_ID} {}\n{AUX_OFFSET} {}\n{AUX_STREAM_DB} {}\n", id.replid, id.offset, id.stream_db);
    for (kind, name, size) in listed_sizes(files, &files.manifest)? {
        text.push_str(&format!("{kind} {name} {size}\n"));
    }
    let tmp = files.dir.join(format!("temp-{}.repl.rill", files.name));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, file_path(files))?;
    sync_dir(&files.dir)
}

/// Remove the identity file, if there is one.
pub fn remove_file(files: &Files) {
    let path = file_path(files);
    match fs::remove_file(&path) {
        Ok(()) => {
            let _ = sync_dir(&files.dir);
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!("cannot remove {}: {e}", path.display()),
    }
}

/// The identity kept beside the log whose manifest is `m`, if there is one and the log is
/// still exactly as it was when it was kept (see the module doc). Read before the log is
/// replayed (replay may cut a torn tail).
pub fn read_file(files: &Files, m: &Manifest) -> Option<Identity> {
    use std::io::Read;
    let path = file_path(files);
    let mut text = String::new();
    let file = File::open(&path).ok()?;
    if file.take(MAX_FILE_BYTES).read_to_string(&mut text).is_err() {
        tracing::warn!("{}: unreadable, a new replication history starts", path.display());
        return None;
    }
    let kept = parse_file(&text);
    let now = listed_sizes(files, m).ok();
    match (kept, now) {
        (Some((id, listed)), Some(now)) if listed == now => Some(id),
        _ => {
            tracing::info!(
                "{}: the log changed after the replication ID and offset were kept (not a clean shutdown?): a new replication history starts",
                path.display()
            );
            None
        }
    }
}

/// The identity and the file list of the identity file's text.
#[allow(clippy::type_complexity)]
fn parse_file(text: &str) -> Option<(Identity, Vec<(&'static str, String, u64)>)> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let mut field = |name: &str| lines.next()?.strip_prefix(name)?.strip_prefix(' ').map(str::to_string);
    let (replid, offset, stream_db) = (field(AUX_ID)?, field(AUX_OFFSET)?, field(AUX_STREAM_DB)?);
    let aux = |name: &str| match name {
        AUX_ID => Some(replid.as_bytes()),
        AUX_OFFSET => Some(offset.as_bytes()),
        AUX_STREAM_DB => Some(stream_db.as_bytes()),
        _ => None,
    };
    let id = Identity::from_aux(aux)?;
    let mut listed = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let mut words = line.split(' ');
        let kind = match words.next()? {
            "base" => "base",
            "incr" => "incr",
            _ => return None,
        };
        let name = words.next()?.to_string();
        let size = words.next()?.parse().ok()?;
        if words.next().is_some() {
            return None;
        }
        listed.push((kind, name, size));
    }
    Some((id, listed))
}

/// At a clean shutdown, after the log's last fsync and the final snapshot: keep the identity
/// beside the log, when the log holds everything committed (nothing queued that was not
/// written and fsynced, no failure, a base of its own). Otherwise remove any file kept
/// before, so that a stale one is never believed. Called under the state lock: no unit can
/// commit meanwhile.
pub fn keep_at_shutdown(st: &State) {
    let Some(log) = st.journal.log() else { return };
    // Under the files lock: a rewrite finishing now cannot switch the manifest between the
    // sizes read and the file written (if it switches after, the file no longer matches).
    let files = log.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let whole = !files.provisional && !log.failed() && log.synced() >= log.end_offset();
    match Identity::current(st).filter(|_| whole) {
        Some(id) => {
            if let Err(e) = write_file(&files, &id) {
                tracing::warn!("cannot keep the replication ID and offset beside the log: {e}");
                remove_file(&files);
            } else {
                tracing::info!("Replication ID {} and offset {} kept beside the log", id.replid, id.offset);
            }
        }
        None => remove_file(&files),
    }
}

/// At start-up, after the data is loaded and before anything runs: take back `kept`, as a
/// replica (`replicaof` set: the history it followed, to continue with its primary) or as a
/// primary (a new ID continuing the kept one as `replid2`, the backlog made at the offset).
pub fn restore(st: &mut State, kept: Identity) {
    if kept.stream_db >= st.engine.db_count() {
        tracing::warn!("the kept replication stream database {} does not exist here: a new history", kept.stream_db);
        return;
    }
    let mut primary = st.config.get("replicaof").split_ascii_whitespace();
    let replica = primary.next().is_some() && primary.next().is_some_and(|p| p.parse::<u16>().is_ok());
    let offset_i64 = i64::try_from(kept.offset).unwrap_or(i64::MAX);
    let r = &mut st.replication;
    r.base_offset = kept.offset;
    if replica {
        tracing::info!(
            "Kept replication ID {} and offset {}: a partial resynchronization with the primary will be tried",
            kept.replid,
            kept.offset
        );
        r.replid = kept.replid;
        r.stream_db = kept.stream_db;
    } else {
        tracing::info!(
            "Kept replication ID {} and offset {}: the new history {} continues it",
            kept.replid,
            kept.offset,
            r.replid
        );
        r.replid2 = kept.replid;
        r.second_offset = offset_i64.saturating_add(1);
        let size = usize::try_from(st.config.get_i64("repl-backlog-size")).unwrap_or(1 << 20);
        let st = &mut *st;
        st.replication.start_backlog(&mut st.journal, size);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn id() -> Identity {
        Identity { replid: "0123456789abcdef0123456789abcdef01234567".into(), offset: 9_876, stream_db: 3 }
    }

    #[test]
    fn aux_fields_round_trip_and_incomplete_ones_are_no_identity() {
        let fields = id().aux_fields();
        let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["repl-stream-db", "repl-id", "repl-offset"]);
        fn get(fields: &[(String, String)]) -> Option<Identity> {
            Identity::from_aux(|n| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_bytes()))
        }
        assert_eq!(get(&fields), Some(id()));
        for (drop, bad) in [("repl-id", None), ("repl-offset", Some("-1")), ("repl-stream-db", Some("-1"))] {
            let mut f = fields.clone();
            match bad {
                None => f.retain(|(k, _)| k != drop),
                Some(v) => f.iter_mut().filter(|(k, _)| k == drop).for_each(|(_, x)| *x = v.to_string()),
            }
            assert_eq!(get(&f), None, "{drop} {bad:?}");
        }
        let mut short = fields.clone();
        short[1].1 = "abc".into();
        assert_eq!(get(&short), None);
    }

    /// Only a server in a replication chain keeps an identity, never while loading, and a
    /// replica not while its primary's stream is inside a transaction.
    #[test]
    fn what_a_server_keeps_depends_on_its_place_in_the_chain() {
        let mut st = State::new(crate::config::Config::default());
        assert_eq!(Identity::current(&st), None, "no backlog: in no chain");
        let size = 1 << 20;
        let st2 = &mut st;
        st2.replication.start_backlog(&mut st2.journal, size);
        let replid = st.replication.replid.clone();
        assert_eq!(Identity::current(&st), Some(Identity { replid: replid.clone(), offset: 0, stream_db: 0 }));
        st.persist.loading = true;
        assert_eq!(Identity::current(&st), None, "loading");
        st.persist.loading = false;
        st.replication.master = Some(crate::replication::MasterLink {
            state: crate::replication::LinkStatus::Connected,
            ..crate::replication::MasterLink::new("127.0.0.1".into(), 1)
        });
        st.replication.stream_db = 5;
        assert_eq!(Identity::current(&st).map(|id| id.stream_db), Some(5));
        st.replication.stream_in_transaction = true;
        assert_eq!(Identity::current(&st), None, "inside the primary's MULTI");
    }

    #[test]
    fn the_file_is_believed_only_while_the_log_is_as_it_was() {
        let dir = std::env::temp_dir().join(format!("rill-identity-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut files = Files::new(dir.to_str().unwrap(), "appendonly.aof");
        let m = Manifest { base: Some(files.base_name(2)), incrs: vec![files.incr_name(3)] };
        fs::write(files.path(&files.base_name(2)), b"REDIS0012").unwrap();
        fs::write(files.path(&files.incr_name(3)), b"RILLLOG1 records").unwrap();
        files.manifest = m.clone();
        write_file(&files, &id()).unwrap();
        assert_eq!(read_file(&files, &m), Some(id()));
        // A record appended after: the offset no longer describes the data.
        fs::write(files.path(&files.incr_name(3)), b"RILLLOG1 records and one more").unwrap();
        assert_eq!(read_file(&files, &m), None);
        fs::write(files.path(&files.incr_name(3)), b"RILLLOG1 records").unwrap();
        assert_eq!(read_file(&files, &m), Some(id()));
        // Another list of files (a rewrite, a new log).
        let other = Manifest { base: None, incrs: vec![files.incr_name(3)] };
        assert_eq!(read_file(&files, &other), None);
        remove_file(&files);
        assert_eq!(read_file(&files, &m), None);
        // A damaged file is no identity.
        fs::write(file_path(&files), "rill-replication-identity 1\nrepl-id x\n").unwrap();
        assert_eq!(read_file(&files, &m), None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
