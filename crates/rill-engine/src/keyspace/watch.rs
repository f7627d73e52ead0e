//! WATCH bookkeeping: which clients watch which keys, and which clients' transactions are
//! already doomed because a watched key was touched (Redis' CLIENT_DIRTY_CAS). Every touch
//! also feeds client-side caching ([`TrackingFeed`]): the server's tracking table hears of
//! each key written and each flush from here, as Redis' `signalModifiedKey` serves both.

use bytes::Bytes;
use std::collections::{HashMap, HashSet};

/// What client-side caching must hear of (the server's `tracking.rs` takes it after each
/// call): names only, since tracking is not per database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touch {
    /// `key` was written or deleted; `by_server` when no client did it (an expiry), so that
    /// no client's NOLOOP hides it.
    Key {
        /// The key's name.
        key: Bytes,
        /// Deleted by expiry, not by a command.
        by_server: bool,
    },
    /// A database (or all) was emptied: every cached key is invalid.
    Flush,
}

/// The touches recorded since the server last took them; recorded only while some client
/// tracks (`on`), and not key by key inside a flush (`held`).
#[derive(Debug, Default)]
pub struct TrackingFeed {
    on: bool,
    held: bool,
    touches: Vec<Touch>,
}

impl TrackingFeed {
    fn key(&mut self, key: &[u8], by_server: bool) {
        if self.on && !self.held {
            self.touches.push(Touch::Key { key: Bytes::copy_from_slice(key), by_server });
        }
    }
}

/// Watched keys per client and per key, and the set of clients whose EXEC must fail.
#[derive(Debug, Default)]
pub struct WatchedKeys {
    /// Client-side caching's feed.
    pub(crate) tracking: TrackingFeed,
    by_key: HashMap<(usize, Bytes), Vec<u64>>,
    /// Per client: the keys it watches, and whether each was already expired when watched
    /// (an expired-at-WATCH key expiring later does not abort, as in Redis).
    by_client: HashMap<u64, Vec<(usize, Bytes, bool)>>,
    dirty: HashSet<u64>,
}

impl WatchedKeys {
    /// Client `client` starts watching `key` in `db`. `expired_now` says whether the key is
    /// logically expired at WATCH time.
    pub fn watch(&mut self, client: u64, db: usize, key: Bytes, expired_now: bool) {
        let list = self.by_client.entry(client).or_default();
        if list.iter().any(|(d, k, _)| *d == db && *k == key) {
            return;
        }
        list.push((db, key.clone(), expired_now));
        self.by_key.entry((db, key)).or_default().push(client);
    }

    /// Drop every watch of `client` and its dirty mark (EXEC, DISCARD, UNWATCH, RESET, close).
    pub fn unwatch_all(&mut self, client: u64) {
        self.dirty.remove(&client);
        if let Some(keys) = self.by_client.remove(&client) {
            for (db, key, _) in keys {
                let probe = (db, key);
                if let Some(v) = self.by_key.get_mut(&probe) {
                    v.retain(|c| *c != client);
                    if v.is_empty() {
                        self.by_key.remove(&probe);
                    }
                }
            }
        }
    }

    /// A write touched `key`: every client watching it will fail its EXEC.
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        self.tracking.key(key, false);
        if self.by_key.is_empty() {
            return;
        }
        if let Some(clients) = self.by_key.get(&(db, Bytes::copy_from_slice(key))) {
            self.dirty.extend(clients.iter().copied());
        }
    }

    /// `key` in `db` was deleted because it had expired, or emptied with its database
    /// (FLUSHDB): a watcher that found it already expired at WATCH sees no change (nothing is
    /// there, as then; its mark is dropped, as a deleted key is not an expired one); any
    /// other watcher's EXEC fails.
    pub fn touch_gone(&mut self, db: usize, key: &[u8]) {
        self.tracking.key(key, true);
        self.touch_each(db, key, |expired_then| match expired_then {
            true => (false, false),
            false => (false, true),
        });
    }

    /// SWAPDB put another database's `key` where `db`'s was: `existed` says whether `db`
    /// held it, `now` whether the database swapped in holds it and whether it is expired
    /// there. No logical change for a watcher that saw it expired and now sees nothing or an
    /// expired key, or that saw nothing and now sees an expired key (then it is marked as
    /// expired at WATCH); any other watcher's EXEC fails.
    pub fn touch_swapped(&mut self, db: usize, key: &[u8], existed: bool, now: Option<bool>) {
        if !existed && now.is_none() {
            return;
        }
        self.touch_each(db, key, |expired_then| match (expired_then, now) {
            (true, None) => (false, false),
            (true, Some(true)) => (true, false),
            (false, Some(true)) if !existed => (true, false),
            (mark, _) => (mark, true),
        });
    }

    /// For each watcher of `key` in `db`: `decide(expired at WATCH)` gives the new mark and
    /// whether its transaction is doomed.
    fn touch_each(&mut self, db: usize, key: &[u8], decide: impl Fn(bool) -> (bool, bool)) {
        if self.by_key.is_empty() {
            return;
        }
        let Some(clients) = self.by_key.get(&(db, Bytes::copy_from_slice(key))) else { return };
        for client in clients {
            let Some(entry) = self
                .by_client
                .get_mut(client)
                .and_then(|keys| keys.iter_mut().find(|(d, k, _)| *d == db && k.as_ref() == key))
            else {
                continue;
            };
            let (mark, doomed) = decide(entry.2);
            entry.2 = mark;
            if doomed {
                self.dirty.insert(*client);
            }
        }
    }

    /// The keys of `db` someone watches.
    pub fn keys_in(&self, db: usize) -> Vec<Bytes> {
        self.by_key.keys().filter(|(d, _)| *d == db).map(|(_, k)| k.clone()).collect()
    }

    /// Client-side caching is on (some client tracks) or off: touches are recorded only then.
    pub fn set_tracking(&mut self, on: bool) {
        self.tracking.on = on;
        if !on {
            self.tracking.touches.clear();
        }
    }

    /// Hold (or resume) key-by-key recording: a flush is one [`Touch::Flush`].
    pub(crate) fn hold_tracking(&mut self, held: bool) {
        self.tracking.held = held;
    }

    /// Record a flush for client-side caching.
    pub(crate) fn tracking_flush(&mut self) {
        if self.tracking.on {
            self.tracking.touches.push(Touch::Flush);
        }
    }

    /// Take the touches recorded since the last call, in order.
    pub fn take_tracking(&mut self, into: &mut Vec<Touch>) {
        into.append(&mut self.tracking.touches);
    }

    /// Whether touches wait to be taken.
    pub fn has_tracking(&self) -> bool {
        !self.tracking.touches.is_empty()
    }

    /// Mark a client's transaction as doomed.
    pub fn mark_dirty(&mut self, client: u64) {
        self.dirty.insert(client);
    }

    /// Whether `client`'s EXEC must fail because of a touched key.
    pub fn is_dirty(&self, client: u64) -> bool {
        self.dirty.contains(&client)
    }

    /// The keys `client` watches: (db, key, expired when watched).
    pub fn keys_of(&self, client: u64) -> &[(usize, Bytes, bool)] {
        self.by_client.get(&client).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Number of keys with at least one watcher (INFO `watching_clients` style figures).
    pub fn watched_key_count(&self) -> usize {
        self.by_key.len()
    }

    /// Number of clients watching at least one key.
    pub fn watching_clients(&self) -> usize {
        self.by_client.len()
    }
}
