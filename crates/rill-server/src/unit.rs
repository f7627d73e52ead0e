//! The one way to run a unit of work: whoever causes a write — a request (one command, one
//! EXEC), the cron (an expiry sweep), start-up (the deletions of keys found expired), and next
//! a replica applying its primary's stream, a script, a policy timer — runs it through
//! [`run`], so that every write is recorded, reaches every sink through the journal, and wakes
//! the clients blocked on what it changed, in the same order and in one critical section.
//!
//! ```text
//!  run(work) ─► work(&mut State)            engine calls; State::record_command adds a
//!                                           command's record to the journal's open unit
//!            ─► close: expiry deletions ──► Journal::commit ──► every sink (log, backlog)
//!            ─► wake: blocking::serve_ready  each client served is a unit of its own (one
//!                                            record, committed as it is served)
//!            ─► free: what deletions set aside ──► the lazyfree thread (`lazyfree.rs`)
//! ```
//!
//! The log offset a reply must wait for is read from the journal afterwards
//! (`Journal::appended`): the unit's own record and those of the clients it woke.

use crate::state::State;

/// Run `work` as one unit at time `now_ms` (the time its record carries): apply, record,
/// commit to every sink, wake blocked readers. Returns what `work` returned.
pub fn run<R>(st: &mut State, now_ms: i64, work: impl FnOnce(&mut State) -> R) -> R {
    // Timed only when clients are blocked (the clock costs the common unit more than its
    // bookkeeping); a client the work itself blocks is served at the unit's time.
    let started = (!st.blocked.is_empty()).then(std::time::Instant::now);
    let done = work(st);
    close(st, now_ms);
    // The clients woken are served at the time the work ended, not when it began (a long
    // EXEC: a key whose time passed meanwhile is expired for them, as in Redis).
    let took = started.map_or(0, |s| i64::try_from(s.elapsed().as_millis()).unwrap_or(i64::MAX));
    crate::blocking::serve_ready(st, now_ms.saturating_add(took));
    // Client-side caching: what no command's client caused (an expiry sweep, an eviction, a
    // replica's stream), then the BCAST prefixes' keys of the whole unit.
    crate::tracking::invalidate(st, None, now_ms);
    crate::tracking::broadcast(st, now_ms);
    // A group policy's deadline earlier than the timer's sleep: wake it to re-read.
    if st.engine.take_policy_due_moved() {
        st.policy_wake.notify_one();
    }
    // What deletions set aside goes to the lazyfree thread, off the lock; a flush's caller
    // may wait for it (`dispatch::execute` reads `free_wait`).
    let garbage = st.engine.take_garbage();
    if !garbage.is_empty() {
        if let Some(rx) = st.lazyfree.free_garbage(garbage) {
            st.free_wait = Some(rx);
        }
    }
    done
}

/// Close the open unit: add the deletions of keys the work found expired, and hand the unit
/// to every sink. Returns the log offset it ends at.
fn close(st: &mut State, now_ms: i64) -> u64 {
    st.collect_effects(&mut rill_engine::effect::EffectBuf::default());
    st.commit_effects(now_ms)
}
