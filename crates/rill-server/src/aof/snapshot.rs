//! A point-in-time copy of the keyspace, and its writing as an RDB file: a log's base, a
//! save, a replica's full sync. Taking one from the server state is `crate::persist`'s; the
//! snapshot itself holds data only.

use crate::clock::now_ms;
use bytes::Bytes;
use rill_engine::rdb::file::{version_for, FileWriter};
use rill_engine::Entry;
use std::time::Duration;

/// One database of a snapshot: its index, its keys, how many have a TTL.
pub(crate) type DbCopy = (usize, Vec<(Bytes, Entry)>, u64);

/// A point-in-time copy of the keyspace.
#[derive(Debug)]
pub struct Snapshot {
    pub(crate) dbs: Vec<DbCopy>,
    /// The function libraries' code (written before the databases, as Redis does).
    pub(crate) libraries: Vec<Bytes>,
    pub(crate) now_ms: i64,
    pub(crate) version: u16,
    /// Aux fields after the standard ones: the replication identity of a `SAVE` / `BGSAVE`
    /// (`identity.rs`); none in a log's base, as Redis writes none in its AOF base.
    pub(crate) aux: Vec<(String, String)>,
    /// `rdb-key-save-delay`: a pause after each key written (tests of a slow snapshot).
    pub(crate) key_delay: Duration,
    /// Streams in rill's own type: for a rill replica ([`Snapshot::for_rill_replica`]).
    pub(crate) rill_streams: bool,
    /// Strings over 20 bytes LZF-compressed where that pays (`rdbcompression yes`).
    pub(crate) compress: bool,
}

impl Snapshot {
    /// Move the data of a private engine into a snapshot (no copy); `compress` as
    /// `rdbcompression`.
    pub fn from_engine(mut engine: rill_engine::Engine, compress: bool) -> Snapshot {
        let mut dbs = Vec::new();
        for (i, keys) in engine.drain_dbs().into_iter().enumerate() {
            if keys.is_empty() {
                continue;
            }
            let expires = keys.iter().filter(|(_, e)| e.expire_at_ms().is_some()).count() as u64;
            dbs.push((i, keys, expires));
        }
        let version = version_for(dbs.iter().flat_map(|(_, keys, _)| keys.iter().map(|(_, e)| &e.value)));
        let libraries = library_codes(&engine);
        Snapshot {
            dbs,
            libraries,
            now_ms: now_ms(),
            version,
            aux: Vec::new(),
            key_delay: Duration::ZERO,
            rill_streams: false,
            compress,
        }
    }
}

impl Snapshot {
    /// The same snapshot for a rill replica (one that said `REPLCONF capa rill`): its streams
    /// go in rill's own type, each block as it is in memory, which the replica takes as it
    /// comes (a Redis replica, `redis-cli --rdb` or a file gets Redis' types).
    pub fn for_rill_replica(self) -> Snapshot {
        Snapshot { rill_streams: true, ..self }
    }

    /// Write the snapshot as an RDB file to `out`; returns `out` and the bytes written.
    pub fn write_to<W: std::io::Write>(&self, out: W) -> std::io::Result<(W, u64)> {
        let mut w = FileWriter::with_aux(out, self.version, self.now_ms, &self.aux)?;
        if self.rill_streams {
            w.rill_streams();
        }
        if self.compress {
            w.compress_strings();
        }
        for code in &self.libraries {
            w.function(code)?;
        }
        for (db, keys, expires) in &self.dbs {
            w.select_db(*db, keys.len() as u64, *expires)?;
            for (k, e) in keys {
                w.key(k, e)?;
                if !self.key_delay.is_zero() {
                    std::thread::sleep(self.key_delay);
                }
            }
        }
        w.finish()
    }
}

/// The code of every function library (shared, not copied).
pub(crate) fn library_codes(engine: &rill_engine::Engine) -> Vec<Bytes> {
    engine.libraries().iter().map(|l| l.code.clone()).collect()
}

/// What a replica's full sync sends: the state at the moment of its `PSYNC`, as RDB bytes.
#[derive(Debug)]
pub enum ReplicaSnapshot {
    /// The keyspace copied under the lock (no log, or the log cannot serve it now).
    Copy(Snapshot),
    /// Being rebuilt from the log files in the background: nothing copied under the lock.
    Building(tokio::sync::oneshot::Receiver<Result<Vec<u8>, String>>),
}
