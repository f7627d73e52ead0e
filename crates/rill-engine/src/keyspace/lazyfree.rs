//! Freeing in the background, as Redis' lazyfree: a deletion that would spend long freeing a
//! value (a big collection, a stream of many nodes) leaves the value as [`Garbage`] instead,
//! which the server hands to a thread of its own after the unit (`rill-server`'s
//! `lazyfree.rs`); the engine itself never frees on another thread (it has none).
//!
//! Which deletions may do so is Redis' rule: UNLINK, FLUSHDB/FLUSHALL ASYNC always; DEL, the
//! flushes without a mode, expiry, eviction and the server's own deletions (an overwritten
//! value, a key deleted because a time already passed) when their `lazyfree-lazy-*` setting
//! is on. A value goes to the thread only when freeing it costs more than
//! [`LAZYFREE_THRESHOLD`] allocations by Redis' estimate ([`free_effort`]); a flushed
//! database always goes, whole. What went counts in INFO's `lazyfree_pending_objects` and
//! `lazyfreed_objects` (one per value, one per key of a flushed database, as Redis counts).

use super::{Db, Engine, Entry, Value};
use crate::types::object::encoding;

/// Freeing a value above this many allocations goes to the background (Redis' threshold).
pub const LAZYFREE_THRESHOLD: usize = 64;

/// The `lazyfree-lazy-*` settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LazyFree {
    /// `lazyfree-lazy-user-del`: DEL frees as UNLINK.
    pub user_del: bool,
    /// `lazyfree-lazy-server-del`: the server's own deletions and overwrites.
    pub server_del: bool,
    /// `lazyfree-lazy-expire`: keys whose time passed.
    pub expire: bool,
    /// `lazyfree-lazy-eviction`: evicted keys.
    pub eviction: bool,
    /// `lazyfree-lazy-user-flush`: FLUSHDB, FLUSHALL (and FUNCTION FLUSH) without a mode.
    pub user_flush: bool,
}

/// Why a value leaves the keyspace: which setting decides whether it may be freed lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// UNLINK.
    Unlink,
    /// DEL.
    UserDel,
    /// The server's own deletion or an overwrite.
    Server,
    /// Expiry.
    Expire,
    /// Eviction.
    Eviction,
}

/// Something left to free on the server's background thread.
#[derive(Debug)]
pub struct Garbage {
    objects: u64,
    /// The command's caller waits until it is freed (a flush without ASYNC: see
    /// [`Engine::flush_waits`]).
    waited: bool,
    _what: Dropped,
}

#[derive(Debug)]
#[allow(dead_code)] // held only to be dropped
enum Dropped {
    Value(Value),
    Keys(Db),
}

impl Garbage {
    /// How many objects freeing it frees, as Redis counts them: 1 for a value, the number of
    /// keys for a database.
    pub fn objects(&self) -> u64 {
        self.objects
    }

    /// Whether the command's caller waits until it is freed before its reply.
    pub fn waited(&self) -> bool {
        self.waited
    }
}

/// Redis' estimate of the allocations freeing `entry` takes: 1 for a string or a compact
/// collection, the nodes of a quicklist, the elements of a hash table or skiplist; for a
/// stream its radix tree's nodes plus, per group, one and the first group's PEL.
pub(crate) fn free_effort(key: &[u8], entry: &Entry, cfg: &crate::types::object::ObjectConfig) -> usize {
    match &entry.value {
        Value::Str(_) => 1,
        Value::List(_) => encoding::debug_fields(key, entry, cfg).1.map_or(1, |(nodes, _, _)| nodes),
        Value::Set(s) => compact_or(key, entry, cfg, s.len()),
        Value::Hash(h) => compact_or(key, entry, cfg, h.len()),
        Value::ZSet(z) => compact_or(key, entry, cfg, z.len()),
        Value::Stream(s) => {
            // XINFO's `radix-tree-nodes` estimate of the tree's nodes.
            let blocks = s.block_count();
            let nodes = 1 + 2 * blocks - blocks.min(1);
            let groups = s.groups();
            let pel = groups.values().next().map_or(0, |g| g.pel().len() as usize);
            nodes.saturating_add(groups.len().saturating_mul(1 + pel))
        }
    }
}

/// 1 for a collection Redis keeps compact, else its element count.
fn compact_or(key: &[u8], entry: &Entry, cfg: &crate::types::object::ObjectConfig, len: usize) -> usize {
    match encoding::name(key, entry, cfg) {
        "hashtable" | "skiplist" => len,
        _ => 1,
    }
}

impl Engine {
    /// The `lazyfree-lazy-*` settings in force.
    pub fn set_lazy_free(&mut self, lazy: LazyFree) {
        self.lazy = lazy;
    }

    /// What deletions left to free in the background since the last call (the server sends
    /// it to its thread after each unit).
    pub fn take_garbage(&mut self) -> Vec<Garbage> {
        if self.garbage.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut self.garbage)
    }

    /// Whether values leaving for `cause` may be freed in the background.
    fn lazy_for(&self, cause: Cause) -> bool {
        if self.loading {
            return false;
        }
        match cause {
            Cause::Unlink => true,
            Cause::UserDel => self.lazy.user_del,
            Cause::Server => self.lazy.server_del,
            Cause::Expire => self.lazy.expire,
            Cause::Eviction => self.lazy.eviction,
        }
    }

    /// Free `entry`, removed from `key` for `cause`: here, or on the background thread when
    /// the cause allows it and freeing it is costly.
    pub(crate) fn dispose(&mut self, key: &[u8], entry: Entry, cause: Cause) {
        if self.lazy_for(cause) && free_effort(key, &entry, &self.config.object) > LAZYFREE_THRESHOLD {
            self.garbage.push(Garbage { objects: 1, waited: false, _what: Dropped::Value(entry.value) });
        }
    }

    /// Free a value replaced under `key` (an overwrite: the server's deletion).
    pub(crate) fn dispose_value(&mut self, key: &[u8], value: Value) {
        if !self.lazy.server_del || self.loading || matches!(value, Value::Str(_)) {
            return;
        }
        self.dispose(key, Entry::new(value, None), Cause::Server);
    }

    /// Free a flushed database: on the background thread when `lazy` and it has keys; with
    /// its caller waiting for that when `waited`.
    pub(crate) fn dispose_db(&mut self, db: Db, lazy: bool, waited: bool) {
        if lazy && !db.is_empty() && !self.loading {
            self.garbage.push(Garbage { objects: db.len() as u64, waited, _what: Dropped::Keys(db) });
        }
    }

    /// How a flush frees its keys, from its mode (`Some(true)`: ASYNC, `Some(false)`: SYNC,
    /// `None`: none given) and its caller: `(lazy, waited)`. As Redis 8: ASYNC, or no mode with
    /// `lazyfree-lazy-user-flush`, frees in the background and answers at once; otherwise a
    /// client's flush frees in the background too but answers once that is done (the server
    /// serves everyone else meanwhile), except inside MULTI or a script or from a primary's
    /// stream, where it frees in place.
    pub(crate) fn flush_waits(&self, ctx: &super::CallCtx, mode: Option<bool>) -> (bool, bool) {
        match mode {
            Some(true) => (true, false),
            None if self.lazy.user_flush => (true, false),
            _ if ctx.no_block || self.applying_stream || self.applying_record => (false, false),
            _ => (true, true),
        }
    }

    /// Remove `key` (expired or not) as the server's own deletion (the destination of RENAME,
    /// COPY REPLACE): its type's name, if there was one.
    pub(crate) fn remove_replaced(&mut self, db: usize, key: &[u8]) -> Option<&'static str> {
        let entry = self.remove(db, key)?;
        let name = entry.value.type_name();
        self.dispose(key, entry, Cause::Server);
        Some(name)
    }

    /// Remove `key` (expired or not) and free its value as `cause` says. Returns whether a
    /// key was there.
    pub(crate) fn remove_for(&mut self, db: usize, key: &[u8], cause: Cause) -> bool {
        match self.remove(db, key) {
            Some(entry) => {
                self.dispose(key, entry, cause);
                true
            }
            None => false,
        }
    }
}
