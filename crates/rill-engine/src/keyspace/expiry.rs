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
            self.delete_expired(db, key);
        }
        expired
    }

    /// Where `key` is in `db` once lazy expiry at `now_ms` has run: `None` if it is missing
    /// or was removed now because its time passed; with whether its time passed (a key kept
    /// although expired: see `keeps_expired`). One hash of the key.
    pub(crate) fn live_index(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<(usize, bool)> {
        self.observe_clock(now_ms);
        let at = self.db(db).keys.get_index_of(key)?;
        let expired = self.db(db).keys.get_index(at).is_some_and(|(_, e)| e.is_expired(now_ms));
        if expired && !self.keeps_expired(now_ms) {
            self.delete_expired(db, key);
            return None;
        }
        Some((at, expired))
    }

    /// Remove `key`, whose time has passed, as expiry removes it: logged as `DEL`.
    fn delete_expired(&mut self, db: usize, key: &[u8]) {
        self.remove_for(db, key, super::Cause::Expire);
        self.expired_log.push((db, Bytes::copy_from_slice(key)));
        self.watch.touch_gone(db, key);
        self.events.push(db, key, super::KeyEvent::Expired);
        // Clients blocked on the key re-check it, as for any deletion (a group reader
        // learns that its stream is gone).
        self.signal_ready(db, key);
        self.expired_keys += 1;
    }

    /// A writable replica's active expiry: of the keys its own clients gave an expiry time
    /// (the primary's keys are the primary's to expire), remove those whose time has passed,
    /// up to `budget`, and forget those that no longer exist or have no time. Returns how many
    /// were removed. O(keys tracked).
    pub fn expire_replica_written_keys(&mut self, now_ms: i64, budget: usize) -> usize {
        self.observe_clock(now_ms);
        self.events.clear();
        if self.replica_written_expiring.is_empty() || self.loading || now_ms < self.expiry_paused_until {
            return 0;
        }
        let tracked: Vec<(usize, Bytes)> = self.replica_written_expiring.iter().cloned().collect();
        let mut removed = 0;
        for (db, key) in tracked {
            let due = match self.dbs.get(db).and_then(|d| d.keys.get(&key[..])) {
                Some(e) => match e.expire_at_ms() {
                    Some(at) if at <= now_ms => true,
                    Some(_) => continue,
                    None => false,
                },
                None => false,
            };
            if due {
                if removed == budget {
                    break;
                }
                self.delete_expired(db, &key);
                removed += 1;
            }
            self.replica_written_expiring.remove(&(db, key));
        }
        self.expired_keys_active += removed as u64;
        removed
    }

    /// Remove up to `budget` expired keys across all databases, then expired hash fields
    /// within what is left of it. Returns how many keys and fields were removed.
    /// The `expired` events of the pass replace whatever [`Engine::events`] held.
    pub fn active_expire(&mut self, now_ms: i64, budget: usize) -> usize {
        self.observe_clock(now_ms);
        self.events.clear();
        let mut removed = 0;
        for db in 0..self.dbs.len() {
            removed += self.expire_due(db, now_ms, budget.saturating_sub(removed));
        }
        for db in 0..self.dbs.len() {
            removed += self.expire_due_fields_of(db, now_ms, budget.saturating_sub(removed));
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
            let (t, hash) = match self.db(db).expiring.first() {
                Some((t, hash)) if t <= now_ms => (t, hash),
                _ => break,
            };
            // Copied out: the deletion changes the table that holds the name.
            let due = self.db(db).key_of(t, hash).map(Bytes::copy_from_slice);
            if due.is_some_and(|k| self.expire_if_needed(db, &k, now_ms)) {
                removed += 1;
            } else {
                // Index out of step with the keys (cannot happen by the invariant); drop it.
                self.db_mut_for_expiry(db).expiring.remove(t, hash);
            }
        }
        removed
    }

    #[allow(clippy::indexing_slicing)]
    fn db_mut_for_expiry(&mut self, db: usize) -> &mut super::Db {
        &mut self.dbs[db]
    }
}

// ---------------------------------------------------------------------------------------------
// Hash fields (HEXPIRE and kin)
//
// A hash field's time is kept in the hash (`HashFields`); the database indexes each hash with
// expiring fields by its earliest time (`Db::field_expiring`), so the active cycle finds due
// hashes without looking at the others. A removed field is logged as `HDEL key field...`
// (`expired_fields_log`), as Redis propagates it, and fires `hexpired` (`del` when it was the
// last field, which deletes the key).

impl Engine {
    /// Remove the fields among `fields` of the hash at `key` whose time is before `now_ms`
    /// (lazy field expiry), logging and counting them; no event, and the key stays even if
    /// emptied: the caller fires `hexpired` and deletes an emptied key as its command does.
    /// Returns the removed fields, in the order given. Nothing is removed where expired keys
    /// are kept (a replica, loading, paused expiry): readers skip such fields instead.
    pub(crate) fn expire_fields_lazily<'a>(
        &mut self,
        db: usize,
        key: &[u8],
        fields: impl IntoIterator<Item = &'a [u8]>,
        now_ms: i64,
    ) -> Vec<Bytes> {
        if self.keeps_expired(now_ms) || self.allow_access_expired {
            return Vec::new();
        }
        let removed = match self.db_mut(db).keys.get_mut(key).map(|e| &mut e.value) {
            Some(super::Value::Hash(h)) if h.min_ttl().is_some_and(|t| t < now_ms) => {
                let mut removed = Vec::new();
                for f in fields {
                    if h.is_expired(f, now_ms) && h.swap_remove(f).is_some() {
                        removed.push(Bytes::copy_from_slice(f));
                    }
                }
                removed
            }
            _ => return Vec::new(),
        };
        if !removed.is_empty() {
            self.fields_removed(db, key, &removed, false);
        }
        removed
    }

    /// Remove `fields` (already taken out of the hash at `key`) from the books: the log, the
    /// counters, WATCH.
    pub(crate) fn fields_removed(&mut self, db: usize, key: &[u8], fields: &[Bytes], active: bool) {
        let n = fields.len() as u64;
        self.expired_subkeys += n;
        if active {
            self.expired_subkeys_active += n;
        }
        self.watch.touch(db, key);
        self.expired_fields_log.push((db, Bytes::copy_from_slice(key), fields.to_vec()));
    }

    /// Remove every field of the hash at `key` whose time is before `now_ms` (at most
    /// `limit`), firing `hexpired` for them, and `del` with the key when none is left. Returns
    /// how many were removed and whether the key went. Not where expired keys are kept.
    pub(crate) fn expire_due_fields(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: i64,
        limit: usize,
        active: bool,
    ) -> (usize, bool) {
        if self.keeps_expired(now_ms) || (self.allow_access_expired && !active) {
            return (0, false);
        }
        let (removed, empty) = match self.db_mut(db).keys.get_mut(key).map(|e| &mut e.value) {
            Some(super::Value::Hash(h)) => {
                let due = h.due(now_ms, limit);
                for f in &due {
                    h.swap_remove(f);
                }
                (due, h.is_empty())
            }
            _ => (Vec::new(), false),
        };
        if !removed.is_empty() {
            self.fields_removed(db, key, &removed, active);
            self.events.push(db, key, super::KeyEvent::HExpired);
            self.attach_subkeys(removed.iter().map(|f| &f[..]));
            if empty {
                self.events.push(db, key, super::KeyEvent::Del);
                self.remove(db, key);
                self.signal_ready(db, key);
            }
        }
        self.db_mut(db).sync_field_expiry(key);
        (removed.len(), empty)
    }

    /// Active field expiry for database `db`: remove up to `budget` due fields, the hashes
    /// with the earliest times first. Returns how many fields were removed. O(log n) per hash
    /// plus O(log m) per field.
    pub(crate) fn expire_due_fields_of(&mut self, db: usize, now_ms: i64, budget: usize) -> usize {
        if self.keeps_expired(now_ms) {
            return 0;
        }
        let mut removed = 0;
        while removed < budget {
            let key = match self.db(db).field_expiring.first() {
                Some((t, k)) if *t < now_ms => k.clone(),
                _ => break,
            };
            if self.expire_if_needed(db, &key, now_ms) {
                // The whole key's time passed too: it went, with its registration.
                continue;
            }
            let before = self.db(db).field_deadline.get(&key).copied();
            let (n, _) = self.expire_due_fields(db, &key, now_ms, budget - removed, true);
            removed += n;
            if n == 0 && self.db(db).field_deadline.get(&key).copied() == before {
                // Out of step (cannot happen: `expire_due_fields` re-registers the key);
                // drop the entry rather than spin.
                let d = self.db_mut_for_expiry(db);
                if let Some(t) = d.field_deadline.remove(&key) {
                    d.field_expiring.remove(&(t, key));
                }
            }
        }
        removed
    }

    /// Re-register the hash at `key` in the field-expiry index after its fields' times
    /// changed (HEXPIRE and kin).
    pub(crate) fn sync_field_expiry(&mut self, db: usize, key: &[u8]) {
        self.db_mut(db).sync_field_expiry(key);
    }
}
