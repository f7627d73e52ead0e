//! Lazy and active expiry.
//!
//! Lazy: every lookup first removes its key if the key's time has passed.
//! Active: [`Engine::active_expire`] pops due keys from each database's time-ordered index,
//! bounded by a budget so one call never stalls clients for long. Cost: O(log n) per key.

use super::Engine;
use bytes::Bytes;

impl Engine {
    /// Remove `key` if it has expired at `now_ms`. Returns true when it was removed.
    pub fn expire_if_needed(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        self.observe_clock(now_ms);
        if self.keeps_expired(now_ms) {
            return false;
        }
        let expired = match self.db(db).keys.get(key) {
            Some(e) => e.is_expired(now_ms),
            None => false,
        };
        if expired {
            self.remove(db, key);
            self.expired_log.push((db, Bytes::copy_from_slice(key)));
            self.watch.touch(db, key);
            self.events.push(db, key, super::KeyEvent::Expired);
            // Clients blocked on the key re-check it, as for any deletion (a group reader
            // learns that its stream is gone).
            self.signal_ready(db, key);
            self.expired_keys += 1;
        }
        expired
    }

    /// Remove up to `budget` expired keys across all databases. Returns how many were removed.
    /// The `expired` events of the pass replace whatever [`Engine::events`] held.
    pub fn active_expire(&mut self, now_ms: i64, budget: usize) -> usize {
        self.observe_clock(now_ms);
        self.events.clear();
        let mut removed = 0;
        for db in 0..self.dbs.len() {
            removed += self.expire_due(db, now_ms, budget - removed);
        }
        self.expired_keys_active += removed as u64;
        removed
    }

    /// Remove up to `budget` expired keys of database `db`, the soonest due first (each
    /// recorded as lazy expiry records it). Returns how many were removed. O(log n) per key.
    pub(crate) fn expire_due(&mut self, db: usize, now_ms: i64, budget: usize) -> usize {
        if self.keeps_expired(now_ms) {
            return 0;
        }
        let mut removed = 0;
        while removed < budget {
            let due = match self.db(db).expiring.first() {
                Some((t, k)) if *t <= now_ms => k.clone(),
                _ => break,
            };
            if self.expire_if_needed(db, &due, now_ms) {
                removed += 1;
            } else {
                // Index out of step with the key (cannot happen by the invariant); drop it.
                let first = self.db(db).expiring.first().cloned();
                if let Some(f) = first {
                    self.db_mut_for_expiry(db).expiring.remove(&f);
                }
            }
        }
        removed
    }

    #[allow(clippy::indexing_slicing)]
    fn db_mut_for_expiry(&mut self, db: usize) -> &mut super::Db {
        &mut self.dbs[db]
    }
}
