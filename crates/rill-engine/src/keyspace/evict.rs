//! Eviction (`maxmemory-policy`): which key to remove when the server is over `maxmemory`.
//!
//! The server decides *when* (it measures memory, counts time, runs each eviction as a unit of
//! its own and logs it as a `DEL`); the engine decides *which* key, without scanning the
//! keyspace:
//!
//! - the random policies draw one key at a random position of a database (the whole table for
//!   `allkeys-random`, the run of keys with an expiry for `volatile-random`: see [`super::Db`]),
//!   visiting the databases in turn;
//! - the LRU, LFU and TTL policies sample `maxmemory-samples` keys of every database at random
//!   positions and keep the best candidates seen across calls in a pool of 16, ordered by
//!   score (idle seconds; 255 minus the decayed LFU counter; how soon the key expires). The
//!   best candidate that still exists is evicted; one that is gone (a ghost) is dropped and
//!   the next is tried, as Redis' approximated LRU does.
//!
//! ```text
//!   sample N keys per database ──► pool (ascending score, ≤ 16) ──► best still present ──► remove
//!   O(N · databases) per eviction, never O(keys)
//! ```
//!
//! An evicted key is removed as any deletion is (WATCH broken, blocked readers signalled) and
//! records the `evicted` keyspace event; the server logs and replicates it.

use super::{splitmix, Engine, KeyEvent};
use bytes::Bytes;

/// `maxmemory-policy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EvictionPolicy {
    /// Never evict: commands that may grow memory get `-OOM` over the limit.
    #[default]
    NoEviction,
    /// Least recently used among keys with an expiry.
    VolatileLru,
    /// Least recently used among all keys.
    AllkeysLru,
    /// Least frequently used among keys with an expiry.
    VolatileLfu,
    /// Least frequently used among all keys.
    AllkeysLfu,
    /// Any key with an expiry.
    VolatileRandom,
    /// Any key.
    AllkeysRandom,
    /// The key with an expiry that expires soonest.
    VolatileTtl,
}

impl EvictionPolicy {
    /// The policy a `maxmemory-policy` value names.
    pub fn parse(name: &str) -> Option<EvictionPolicy> {
        Some(match name {
            "noeviction" => EvictionPolicy::NoEviction,
            "volatile-lru" => EvictionPolicy::VolatileLru,
            "allkeys-lru" => EvictionPolicy::AllkeysLru,
            "volatile-lfu" => EvictionPolicy::VolatileLfu,
            "allkeys-lfu" => EvictionPolicy::AllkeysLfu,
            "volatile-random" => EvictionPolicy::VolatileRandom,
            "allkeys-random" => EvictionPolicy::AllkeysRandom,
            "volatile-ttl" => EvictionPolicy::VolatileTtl,
            _ => return None,
        })
    }

    /// Whether every key may be evicted (`allkeys-*`), not only keys with an expiry.
    pub fn all_keys(self) -> bool {
        matches!(self, EvictionPolicy::AllkeysLru | EvictionPolicy::AllkeysLfu | EvictionPolicy::AllkeysRandom)
    }

    /// Whether the policy picks by score through the pool (LRU, LFU, TTL) rather than at random.
    fn pooled(self) -> bool {
        !matches!(self, EvictionPolicy::NoEviction | EvictionPolicy::VolatileRandom | EvictionPolicy::AllkeysRandom)
    }
}

/// How many candidates the pool keeps (Redis' pool size).
pub const POOL_SIZE: usize = 16;

/// How good a victim `entry` is under `policy` (higher: better): its idle seconds (LRU), 255
/// less its decayed LFU counter (LFU), how soon it expires (TTL).
fn score(entry: &crate::Entry, policy: EvictionPolicy, now_ms: i64, loaded_s: u32, decay: u32) -> u64 {
    match policy {
        EvictionPolicy::VolatileLfu | EvictionPolicy::AllkeysLfu => {
            255 - u64::from(entry.meta.lfu_decayed(now_ms, decay))
        }
        // The sooner it expires, the better (expiry times are positive).
        EvictionPolicy::VolatileTtl => u64::MAX - u64::try_from(entry.expire_at_ms().unwrap_or(i64::MAX)).unwrap_or(0),
        _ => entry.meta.idle_seconds(now_ms, loaded_s),
    }
}

/// One candidate: higher `score` is a better victim.
#[derive(Debug, Clone)]
struct Candidate {
    score: u64,
    db: usize,
    key: Bytes,
}

/// The eviction state the engine keeps between calls.
#[derive(Debug)]
pub(crate) struct EvictState {
    /// The best candidates seen, ascending by score (the best last).
    pool: Vec<Candidate>,
    /// The database the random policies look at next.
    next_db: usize,
    /// A pseudo-random sequence of its own, so that evictions do not shift RANDOMKEY's.
    rng: u64,
}

impl Default for EvictState {
    fn default() -> Self {
        EvictState { pool: Vec::with_capacity(POOL_SIZE), next_db: 0, rng: 0x0E71_C7ED_4EE5 }
    }
}

impl EvictState {
    /// Put a candidate in its place, as Redis fills its pool: while there is room every sample
    /// goes in; once full, a sample better than the worst candidate pushes the worst out, and a
    /// sample no better than every candidate is dropped. A key already in the pool is not
    /// added twice.
    fn offer(&mut self, candidate: Candidate) {
        if self.pool.iter().any(|c| c.db == candidate.db && c.key == candidate.key) {
            return;
        }
        let at = self.pool.iter().position(|c| c.score >= candidate.score).unwrap_or(self.pool.len());
        if self.pool.len() < POOL_SIZE {
            self.pool.insert(at, candidate);
        } else if at > 0 {
            self.pool.remove(0);
            self.pool.insert(at - 1, candidate);
        }
    }
}

impl Engine {
    /// Evict one key as `policy` picks it, sampling `samples` keys per database for the pooled
    /// policies, at `now_ms`. Returns the key removed, or `None` when nothing may be evicted
    /// (no key, or no key with an expiry for a `volatile-*` policy; always under
    /// `noeviction`).
    pub fn evict_one(&mut self, policy: EvictionPolicy, samples: usize, now_ms: i64) -> Option<(usize, Bytes)> {
        self.observe_clock(now_ms);
        let picked = if policy.pooled() {
            self.pick_pooled(policy, samples.max(1), now_ms)
        } else if policy == EvictionPolicy::NoEviction {
            None
        } else {
            self.pick_random(policy.all_keys())
        }?;
        self.evicted(picked.0, &picked.1);
        Some(picked)
    }

    /// Evict one key of database `db` as `policy` picks it (the best of `samples` keys of
    /// `db` drawn at random, without the pool): to keep `db`'s full table from growing past
    /// `maxmemory` (see [`Engine::table_growth_bytes`]). `None` when `db` has nothing the
    /// policy may evict.
    pub fn evict_one_from(
        &mut self,
        db: usize,
        policy: EvictionPolicy,
        samples: usize,
        now_ms: i64,
    ) -> Option<(usize, Bytes)> {
        self.observe_clock(now_ms);
        if policy == EvictionPolicy::NoEviction || db >= self.dbs.len() {
            return None;
        }
        let n = self.evictable(db, policy.all_keys());
        if n == 0 {
            return None;
        }
        let draws = if policy.pooled() { samples.clamp(1, n) } else { 1 };
        let (loaded_s, decay) = (self.first_clock_s(), self.config.object.lfu_decay_time);
        let mut best: Option<(u64, usize)> = None;
        for _ in 0..draws {
            let at = (splitmix(&mut self.evict.rng) % n as u64) as usize;
            self.random_reads += 1;
            let Some((_, entry)) = self.db(db).key_at(at) else { continue };
            let score = score(entry, policy, now_ms, loaded_s, decay);
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, at));
            }
        }
        let key = Bytes::copy_from_slice(self.db(db).key_at(best?.1)?.0);
        self.evicted(db, &key);
        Some((db, key))
    }

    /// Remove an evicted key: as any deletion (WATCH, blocked readers), with its event.
    fn evicted(&mut self, db: usize, key: &Bytes) {
        self.remove_for(db, key, super::Cause::Eviction);
        self.watch.touch(db, key);
        self.events.push(db, key, KeyEvent::Evicted);
        // Clients blocked on the key re-check it, as for any deletion.
        self.signal_ready(db, key);
        self.evicted_keys += 1;
    }

    /// The bytes `db`'s key table would add if one more key were added now: its size when it
    /// is full (it doubles), else 0. The server evicts a key of `db` before a command rather
    /// than let the table grow past `maxmemory`, as Redis puts off growing its table then: a
    /// table grown is not shrunk by evictions, and its new room, counted against the limit,
    /// would make evictions remove keys until their values paid for it.
    pub fn table_growth_bytes(&self, db: usize) -> u64 {
        let Some(d) = self.dbs.get(db) else { return 0 };
        if d.keys.capacity() == 0 || d.keys.len() < d.keys.capacity() {
            return 0;
        }
        d.keys.growth_bytes() as u64
    }

    /// Keys evicted since start or the last CONFIG RESETSTAT (`evicted_keys`).
    pub fn evicted_keys(&self) -> u64 {
        self.evicted_keys
    }

    /// How many keys `policy` may choose from in `db`.
    fn evictable(&self, db: usize, all_keys: bool) -> usize {
        let d = self.db(db);
        if all_keys {
            d.len()
        } else {
            d.expires_len()
        }
    }

    /// The random policies: one key at a random position of the next database that has one.
    fn pick_random(&mut self, all_keys: bool) -> Option<(usize, Bytes)> {
        let dbs = self.dbs.len();
        for _ in 0..dbs {
            self.evict.next_db = (self.evict.next_db + 1) % dbs;
            let db = self.evict.next_db;
            let n = self.evictable(db, all_keys);
            if n == 0 {
                continue;
            }
            // Keys with an expiry hold positions 0..expires_len() (see `Db`).
            let at = (splitmix(&mut self.evict.rng) % n as u64) as usize;
            self.random_reads += 1;
            if let Some((key, _)) = self.db(db).key_at(at) {
                return Some((db, Bytes::copy_from_slice(key)));
            }
        }
        None
    }

    /// The pooled policies: sample every database into the pool, then take the best candidate
    /// that still exists (and, for a `volatile-*` policy, still has an expiry).
    fn pick_pooled(&mut self, policy: EvictionPolicy, samples: usize, now_ms: i64) -> Option<(usize, Bytes)> {
        let all_keys = policy.all_keys();
        loop {
            let mut total = 0;
            for db in 0..self.dbs.len() {
                let n = self.evictable(db, all_keys);
                if n == 0 {
                    continue;
                }
                total += n;
                self.sample_into_pool(db, n, policy, samples, now_ms);
            }
            if total == 0 {
                return None;
            }
            while let Some(best) = self.evict.pool.pop() {
                let present =
                    self.db(best.db).get_raw(&best.key).is_some_and(|e| all_keys || e.expire_at_ms().is_some());
                if present {
                    return Some((best.db, best.key));
                }
            }
            // Every candidate was a ghost: sample again (the keys exist, so this finds one).
        }
    }

    /// Offer `samples` keys of `db` (all of them when it has no more, else at random positions
    /// among its `n` evictable ones) to the pool.
    fn sample_into_pool(&mut self, db: usize, n: usize, policy: EvictionPolicy, samples: usize, now_ms: i64) {
        let (loaded_s, decay) = (self.first_clock_s(), self.config.object.lfu_decay_time);
        let every = n <= samples;
        for i in 0..samples.min(n) {
            let at = if every { i } else { (splitmix(&mut self.evict.rng) % n as u64) as usize };
            self.random_reads += 1;
            let Some((key, entry)) = self.db(db).key_at(at) else { continue };
            let score = score(entry, policy, now_ms, loaded_s, decay);
            let candidate = Candidate { score, db, key: Bytes::copy_from_slice(key) };
            self.evict.offer(candidate);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::{EngineConfig, Value};

    const T0: i64 = 1_700_000_000_000;

    fn engine() -> Engine {
        Engine::new(EngineConfig { databases: 2, ..EngineConfig::default() })
    }

    fn put(e: &mut Engine, db: usize, key: &str, ttl_ms: Option<i64>, now_ms: i64) {
        let k = Bytes::copy_from_slice(key.as_bytes());
        e.observe_clock(now_ms);
        e.insert(db, k.clone(), Value::Str(Bytes::from_static(b"v")));
        if let Some(t) = ttl_ms {
            e.set_expire(db, &k, Some(now_ms + t));
        }
    }

    #[test]
    fn policies_parse_and_classify() {
        for (name, all) in [
            ("allkeys-lru", true),
            ("allkeys-lfu", true),
            ("allkeys-random", true),
            ("volatile-lru", false),
            ("volatile-lfu", false),
            ("volatile-random", false),
            ("volatile-ttl", false),
            ("noeviction", false),
        ] {
            assert_eq!(EvictionPolicy::parse(name).map(EvictionPolicy::all_keys), Some(all), "{name}");
        }
        assert_eq!(EvictionPolicy::parse("allkeys-lrm"), None);
    }

    #[test]
    fn noeviction_and_volatile_without_expiries_evict_nothing() {
        let mut e = engine();
        put(&mut e, 0, "a", None, T0);
        assert_eq!(e.evict_one(EvictionPolicy::NoEviction, 5, T0), None);
        for p in [EvictionPolicy::VolatileLru, EvictionPolicy::VolatileRandom, EvictionPolicy::VolatileTtl] {
            assert_eq!(e.evict_one(p, 5, T0), None, "{p:?}");
        }
        assert_eq!(e.evicted_keys(), 0);
        assert_eq!(e.evict_one(EvictionPolicy::AllkeysRandom, 5, T0), Some((0, Bytes::from_static(b"a"))));
        assert_eq!(e.evicted_keys(), 1);
        assert_eq!(e.total_keys(), 0);
        assert_eq!(e.evict_one(EvictionPolicy::AllkeysLru, 5, T0), None);
    }

    #[test]
    fn volatile_policies_take_only_keys_with_an_expiry_in_every_database() {
        for p in [EvictionPolicy::VolatileLru, EvictionPolicy::VolatileLfu, EvictionPolicy::VolatileRandom] {
            let mut e = engine();
            for i in 0..50 {
                put(&mut e, i % 2, &format!("p{i}"), None, T0);
                put(&mut e, i % 2, &format!("v{i}"), Some(100_000), T0);
            }
            let mut seen_db = [false; 2];
            for _ in 0..50 {
                let (db, key) = e.evict_one(p, 5, T0).unwrap();
                assert!(key.starts_with(b"v"), "{p:?} evicted {key:?}");
                seen_db[db] = true;
            }
            assert_eq!(e.evict_one(p, 5, T0), None, "{p:?}");
            assert_eq!(e.total_keys(), 50);
            assert_eq!(seen_db, [true, true]);
        }
    }

    #[test]
    fn volatile_ttl_takes_the_soonest_expiry_first() {
        let mut e = engine();
        // Few keys: every one is sampled, so the order is exact.
        for (i, ttl) in [(0, 5_000), (1, 1_000), (2, 9_000), (3, 3_000)] {
            put(&mut e, 0, &format!("k{i}"), Some(ttl), T0);
        }
        put(&mut e, 0, "persistent", None, T0);
        let order: Vec<Bytes> =
            std::iter::from_fn(|| e.evict_one(EvictionPolicy::VolatileTtl, 5, T0).map(|(_, k)| k)).collect();
        assert_eq!(order, ["k1", "k3", "k0", "k2"].map(|k| Bytes::copy_from_slice(k.as_bytes())));
    }

    #[test]
    fn lru_prefers_keys_idle_longest() {
        let mut e = engine();
        for i in 0..1000 {
            put(&mut e, 0, &format!("k{i}"), None, T0);
        }
        // Half the keys are read 100 s later; the other half stay idle.
        let later = T0 + 100_000;
        for i in (0..1000).step_by(2) {
            e.lookup(0, format!("k{i}").as_bytes(), later);
        }
        let mut idle_evicted = 0;
        for _ in 0..250 {
            let (_, k) = e.evict_one(EvictionPolicy::AllkeysLru, 5, later).unwrap();
            let n: usize = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
            idle_evicted += n % 2;
        }
        // Random picks would take about half from each; the pool takes nearly only idle ones.
        assert!(idle_evicted > 240, "{idle_evicted} of 250 evicted keys were the idle ones");
    }

    #[test]
    fn lfu_prefers_keys_used_least() {
        let mut e = engine();
        e.reconfigure(|c| c.object.lfu = true);
        for i in 0..500 {
            put(&mut e, 0, &format!("k{i}"), None, T0);
        }
        for i in (0..500).step_by(2) {
            for _ in 0..20 {
                e.lookup(0, format!("k{i}").as_bytes(), T0);
            }
        }
        let mut rare_evicted = 0;
        for _ in 0..100 {
            let (_, k) = e.evict_one(EvictionPolicy::AllkeysLfu, 5, T0).unwrap();
            let n: usize = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
            rare_evicted += n % 2;
        }
        assert!(rare_evicted > 95, "{rare_evicted} of 100 evicted keys were the rarely used ones");
    }

    #[test]
    fn eviction_records_the_evicted_event_and_breaks_watch() {
        let mut e = engine();
        put(&mut e, 0, "k", Some(10_000), T0);
        e.watch_key(7, 0, Bytes::from_static(b"k"), T0);
        e.clear_events();
        assert!(e.evict_one(EvictionPolicy::VolatileLru, 5, T0).is_some());
        assert!(e.watch_broken(7, T0));
        let events: Vec<_> = e.events().map(|ev| ev.event).collect();
        assert_eq!(events, vec![KeyEvent::Evicted]);
        e.reset_stats();
        assert_eq!(e.evicted_keys(), 0);
    }

    #[test]
    fn a_full_table_says_what_it_would_grow_by_and_evicts_in_its_database() {
        let mut e = engine();
        assert_eq!(e.table_growth_bytes(0), 0);
        let mut i = 0;
        while e.table_growth_bytes(0) == 0 {
            put(&mut e, 0, &format!("k{i}"), None, T0);
            i += 1;
        }
        let full = e.db(0).len();
        assert!(e.table_growth_bytes(0) >= (full * std::mem::size_of::<crate::Entry>()) as u64);
        put(&mut e, 1, "other", None, T0);
        let (db, _) = e.evict_one_from(0, EvictionPolicy::AllkeysLru, 5, T0).unwrap();
        assert_eq!((db, e.db(0).len(), e.db(1).len()), (0, full - 1, 1));
        assert_eq!(e.table_growth_bytes(0), 0, "a slot is free again");
        assert_eq!(e.evict_one_from(0, EvictionPolicy::VolatileTtl, 5, T0), None, "no key with an expiry in db 0");
        assert_eq!(e.evict_one_from(2, EvictionPolicy::AllkeysRandom, 5, T0), None);
    }

    #[test]
    fn the_pool_keeps_the_best_sixteen() {
        let mut s = EvictState::default();
        for score in [5u64, 1, 9, 3, 7, 2, 8, 4, 6, 0, 15, 11, 13, 10, 12, 14, 20, 16, 1] {
            s.offer(Candidate { score, db: 0, key: Bytes::from(score.to_string()) });
        }
        let scores: Vec<u64> = s.pool.iter().map(|c| c.score).collect();
        // 0 and 1 were pushed out by 20 and 16; the late 1 is no better than any: dropped.
        assert_eq!(scores, vec![2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20]);
    }
}
