//! Eviction: before a command runs while the memory in use is over `maxmemory`, keys are
//! removed as `maxmemory-policy` says until it is under again, or `-OOM` answers a command
//! that may grow memory when nothing can be evicted (Redis' behaviour; `noeviction` evicts
//! nothing).
//!
//! ```text
//!  dispatch::execute ──► evict::perform ──► over the limit? ── no ──► Ok
//!                              │ yes
//!                              ▼
//!              one unit per key (unit::run): Engine::evict_one ──► DEL in the journal
//!              (log, replicas), `evicted` event, evicted_keys + 1
//!                              │
//!         under the limit: Ok · nothing evictable: Fail (-OOM for DENYOOM commands)
//!         out of time (maxmemory-eviction-tenacity): Running, the rest in the background
//! ```
//!
//! Which key is the engine's choice (`rill_engine::keyspace::evict`: random positions, the
//! sampling pool); this module decides when, measures, and makes each eviction a write like
//! any other: its own unit through [`crate::unit::run`], so the `DEL` reaches the log and the
//! replicas through the journal, exactly as Redis propagates a `DEL` per evicted key.
//!
//! What counts: `used_memory` (every live heap byte, `alloc.rs`) less what Redis does not
//! count for eviction either — the log's records queued but not yet written (Redis' AOF
//! buffer) or written but not yet fsynced (kept in memory until the fsync, `aof/writer.rs`,
//! about a second's worth under `everysec`), and the replication buffer beyond the backlog's
//! size (what attached replicas still need: the shared ring holds more than
//! `repl-backlog-size` only for them). Counting those would feed back: each eviction's `DEL`
//! grows them, which would make more evictions.
//!
//! A database's key table doubles when it is full, and evictions do not shrink it (a slot
//! freed stays in the table): a growth past the limit would make evictions remove keys until
//! their values paid for the new room — with small values, every key. Redis puts off growing
//! its table while that would pass `maxmemory`; rill's table cannot hold more keys than slots,
//! so before a command whose database's table is full and would grow past the limit, one key
//! of that database is evicted first ([`Engine::evict_one_from`]), and the table keeps its
//! size. The price: near the limit, a database holds at most as many keys as its table has
//! slots, even when the memory the next doubling would take is partly free (Redis' table
//! takes more keys than slots there). Not covered: deletions leave tombstones in the table's
//! index, and an insert that finds no free room left rehashes it, into a table twice the size
//! when it is more than half full — heavy churn near a full table (evictions and inserts, as
//! under `allkeys-lru`) can still grow it, and evictions then pay for the growth.
//!
//! [`Engine::evict_one_from`]: rill_engine::Engine::evict_one_from
//!
//! Not here: a replica ignores `maxmemory` (its primary's `DEL`s keep it a copy) unless
//! `replica-ignore-maxmemory no`; nothing is evicted while loading or while writes are paused
//! (CLIENT PAUSE WRITE/ALL, a failover), as in Redis.

use crate::clock::Tick;
use crate::state::State;
use rill_engine::EvictionPolicy;
use std::sync::Arc;

/// What [`perform`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Under the limit (or eviction does not apply now).
    Ok,
    /// Still over the limit after this pass's time: the background task goes on.
    Running,
    /// Over the limit with nothing left to evict (or `noeviction`).
    Fail,
}

/// The eviction bookkeeping kept in the state.
#[derive(Debug, Default)]
pub struct Eviction {
    /// Whether the memory was over the limit with nothing to evict before the command running
    /// now (Redis' `pre_command_oom_state`): a script's first write is refused by it.
    pub oom_at_command_start: bool,
    /// Wakes the background eviction task (`run.rs`).
    pub wake: Arc<tokio::sync::Notify>,
    /// When the memory last went over the limit and stayed there (for INFO's
    /// `current_eviction_exceeded_time`); `None` while under it.
    pub exceeded_since: Option<Tick>,
}

/// Bytes of `used_memory` not counted against `maxmemory` (INFO `mem_not_counted_for_evict`):
/// the log's records not yet written and those written but not yet fsynced (which the log
/// keeps to write again after a failed fsync), and the replication buffer held beyond
/// `repl-backlog-size` for attached replicas.
pub fn not_counted(st: &State) -> u64 {
    let aof = st.journal.log().map_or(0, |l| st.journal.appended().saturating_sub(l.written()) + l.kept_bytes());
    let replicas = st.replication.with_backlog(|b| b.allocated().saturating_sub(b.capacity()) as u64).unwrap_or(0);
    aof + replicas
}

/// How far over `maxmemory` the counted memory is (0: not over, or no limit).
pub fn over_by(st: &State) -> u64 {
    let max = st.hot.maxmemory;
    if max == 0 {
        return 0;
    }
    let used = crate::alloc::allocated_bytes();
    if used <= max {
        return 0;
    }
    used.saturating_sub(not_counted(st)).saturating_sub(max)
}

/// How long one pass may evict, in µs (`maxmemory-eviction-tenacity`: 0 to 10 a linear
/// 0..500 µs, then 15 % more per step, 100: no limit).
pub fn time_limit_us(tenacity: u32) -> u64 {
    match tenacity {
        0..=10 => 50 * u64::from(tenacity),
        11..=99 => (500.0 * 1.15f64.powi(i32::try_from(tenacity).unwrap_or(99) - 10)) as u64,
        _ => u64::MAX,
    }
}

/// Whether eviction applies now: not while loading, not on a replica that ignores
/// `maxmemory`, not while writes (and so expiry and eviction) are paused.
fn may_evict(st: &State, now_ms: i64) -> bool {
    if st.persist.loading {
        return false;
    }
    if st.replication.master.is_some() && st.hot.replica_ignore_maxmemory {
        return false;
    }
    !st.pause.actions(now_ms).any(crate::pause::Actions::EXPIRE)
}

/// Bring the memory under `maxmemory` by evicting keys, as the policy says, for at most the
/// tenacity's time. Called before each command (dispatch) and by the background task.
pub fn perform(st: &mut State, now_ms: i64) -> Outcome {
    if st.hot.maxmemory > 0 && !may_evict(st, now_ms) {
        // Not now (loading, a replica, paused): as if under the limit, the time over it
        // left as it is.
        return Outcome::Ok;
    }
    let outcome = if over_by(st) == 0 {
        Outcome::Ok
    } else if st.hot.eviction == EvictionPolicy::NoEviction {
        Outcome::Fail
    } else {
        evict_until_under(st, now_ms)
    };
    track_exceeded(st, outcome);
    outcome
}

fn evict_until_under(st: &mut State, now_ms: i64) -> Outcome {
    let (policy, samples) = (st.hot.eviction, st.hot.maxmemory_samples);
    let limit_us = time_limit_us(st.hot.eviction_tenacity);
    let started = Tick::now();
    let mut evicted: u64 = 0;
    let outcome = loop {
        // Each evicted key is a unit of its own: a `DEL` logged and replicated, its event
        // published, clients blocked on it served, as Redis propagates each eviction.
        let done = crate::unit::run(st, now_ms, |st| {
            st.engine.clear_events();
            let key = st.engine.evict_one(policy, samples, now_ms);
            if let Some((db, key)) = &key {
                st.journal.push_deletion(*db, key, st.hot.lazy.eviction);
            }
            crate::notify::publish_events(st, now_ms);
            key.is_some()
        });
        if !done {
            break Outcome::Fail;
        }
        evicted += 1;
        if over_by(st) == 0 {
            break Outcome::Ok;
        }
        if evicted.is_multiple_of(16) && Tick::now().micros_since(started) > limit_us {
            // Enough for this command: the background task goes on.
            st.eviction.wake.notify_one();
            break Outcome::Running;
        }
    };
    let ms = Tick::now().micros_since(started) / 1000;
    let threshold = st.hot.latency_threshold_ms;
    st.latency.sample_if_needed(threshold, "eviction-cycle", ms, now_ms.div_euclid(1000));
    outcome
}

/// INFO's `total_eviction_exceeded_time` / `current_eviction_exceeded_time`: how long the
/// memory stayed over the limit.
fn track_exceeded(st: &mut State, outcome: Outcome) {
    match (outcome, st.eviction.exceeded_since) {
        (Outcome::Ok, Some(since)) => {
            st.stats.eviction_exceeded_us += Tick::now().micros_since(since);
            st.eviction.exceeded_since = None;
        }
        (Outcome::Running | Outcome::Fail, None) => st.eviction.exceeded_since = Some(Tick::now()),
        _ => {}
    }
}

/// Milliseconds the memory has been over the limit in the current stretch (0: it is not).
pub fn current_exceeded_ms(st: &State) -> u64 {
    st.eviction.exceeded_since.map_or(0, |since| Tick::now().micros_since(since) / 1000)
}

/// Before a command in database `db`: evict as needed, and say whether the memory stays over
/// the limit with nothing to evict (a command that may grow memory is then refused with
/// `-OOM`). Remembered for the scripts the command may run.
pub fn before_command(st: &mut State, db: usize, now_ms: i64) -> bool {
    // Without a limit this only ends a stretch over it (maxmemory just set to 0).
    let oom = perform(st, now_ms) == Outcome::Fail;
    if !oom && st.hot.maxmemory > 0 {
        keep_table_size(st, db, now_ms);
    }
    st.eviction.oom_at_command_start = oom;
    oom
}

/// `db`'s key table is full and growing it would pass the limit: evict one of its keys (a
/// unit of its own, as any eviction), so that a new key takes a freed slot. When the policy
/// finds nothing to evict in `db` (a `volatile-*` policy, no key with an expiry there), the
/// command runs and the table may grow past the limit: refusing it while the memory is under
/// the limit would answer `-OOM` where Redis accepts the write (the limit then refuses what
/// follows, as under `noeviction`).
fn keep_table_size(st: &mut State, db: usize, now_ms: i64) {
    let policy = st.hot.eviction;
    let growth = st.engine.table_growth_bytes(db);
    if growth == 0 || policy == EvictionPolicy::NoEviction || !may_evict(st, now_ms) {
        return;
    }
    let used = crate::alloc::allocated_bytes().saturating_sub(not_counted(st));
    if used.saturating_add(growth) <= st.hot.maxmemory {
        return;
    }
    let samples = st.hot.maxmemory_samples;
    crate::unit::run(st, now_ms, |st| {
        st.engine.clear_events();
        if let Some((db, key)) = st.engine.evict_one_from(db, policy, samples, now_ms) {
            st.journal.push_deletion(db, &key, st.hot.lazy.eviction);
        }
        crate::notify::publish_events(st, now_ms);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenacity_maps_to_redis_time_limits() {
        assert_eq!(time_limit_us(0), 0);
        assert_eq!(time_limit_us(10), 500);
        assert_eq!(time_limit_us(11), 575);
        assert!(time_limit_us(99) > 100_000_000);
        assert_eq!(time_limit_us(100), u64::MAX);
    }
}
