//! MAXAGE (docs/spec/policies.md §8): a stream's retention by age. Entries whose ID time is
//! older than `now - ms` are trimmed, lazily by XADD and by the policy timer's sweep, each look
//! bounded, every trim an exact `XTRIM key MINID = <id> [DELREF | ACKED]` effect.
//!
//! ```text
//! Stream.max_age: Option<MaxAge { ms, mode }>       the setting (RILL.STREAM SET)
//! Engine.max_age_index: AgeIndex
//!   by_due: {(due ms, db, key)}     when each stream with MAXAGE next needs a look:
//!   due_of: {(db, key) -> due ms}   its oldest entry's ID time + ms + 1
//!
//!  XADD on a stream with MAXAGE whose due has come ─┐
//!  the policy timer at the earliest due ────────────┴─► look(key, budget):
//!      cutoff = (now - ms)-0; ACKED: no further than the first entry some group has not
//!      been delivered yet; no further than the budget-th live entry (whole blocks skipped)
//!      ─► XTRIM key MINID = <bound> with the stream's mode (an exact trim, logged as such)
//!      ─► the stream's next due: its new oldest entry's, at once if the budget ran out,
//!         RECHECK_MS later if ACKED left aged entries a group still references
//! ```
//!
//! A due time is a lower bound, never later than the stream's real one (arming only moves it
//! earlier), except after a look that found aged entries a group still references (ACKED),
//! which comes back [`RECHECK_MS`] later. A stream with nothing due costs nothing; a look is
//! O(log K) to find its bound plus the trim's own cost. A stream renamed, moved, copied or
//! loaded is armed where it now lives (`Engine::store`); a deleted one, or one whose MAXAGE
//! was turned off, drops out when its time comes; the whole index is rebuilt (O(keys)) when
//! loading ends, on promotion, SWAPDB and a full sync, since a log replay or a replica applies
//! appends without looking at it.
//!
//! Only a live primary acts, on its own clock: a log replay or a replica applies the `XTRIM`
//! effects it was sent and trims nothing by itself (XADD's lazy trim does nothing while the
//! engine is loading or a replica, and the sweep does not run there).

use super::args::{self, TrimArgs};
use super::{RefStrategy, Stream, StreamId, TrimGoal};
use crate::effect::EffectBuf;
use crate::{CallCtx, Engine, KeyEvent, Value};
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};

/// Entries one sweep (one policy timer run) looks at at most, over all streams; the rest are
/// due at once and taken by the next run.
pub const SWEEP_BUDGET: u64 = 1000;
/// Entries one XADD's lazy trim looks at at most (the sweep takes the rest, at once).
pub const LAZY_BUDGET: u64 = 1000;
/// How long an ACKED stream whose aged entries are still referenced waits before its next look.
pub const RECHECK_MS: i64 = 1000;

/// A stream's MAXAGE setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxAge {
    /// Entries whose ID time is older than `now - ms` are trimmed (≥ 1).
    pub ms: u64,
    /// What the trims do about consumer-group references (Redis 8.2's modes).
    pub mode: RefStrategy,
}

impl MaxAge {
    /// The first ID that is not aged at `now_ms`: entries below it are. `None` when nothing
    /// can be aged yet (the clock is below `ms`).
    fn cutoff(self, now_ms: i64) -> Option<StreamId> {
        let edge = now_ms.checked_sub(i64::try_from(self.ms).ok()?)?;
        u64::try_from(edge).ok().filter(|e| *e > 0).map(|e| StreamId::new(e, 0))
    }

    /// The first time at which an entry of ID time `id_ms` is aged (`id_ms < now - ms`).
    fn due_for(self, id_ms: u64) -> i64 {
        let at = u128::from(id_ms) + u128::from(self.ms) + 1;
        i64::try_from(at).unwrap_or(i64::MAX)
    }

    /// The mode's token.
    pub fn mode_name(self) -> &'static str {
        mode_name(self.mode)
    }
}

/// `KEEPREF`, `DELREF` or `ACKED`.
pub fn mode_name(mode: RefStrategy) -> &'static str {
    match mode {
        RefStrategy::KeepRef => "KEEPREF",
        RefStrategy::DelRef => "DELREF",
        RefStrategy::Acked => "ACKED",
    }
}

/// When each stream with MAXAGE next needs a look (see the module doc).
#[derive(Debug, Default)]
pub struct AgeIndex {
    by_due: BTreeSet<(i64, usize, Bytes)>,
    due_of: HashMap<(usize, Bytes), i64>,
    /// Set when the earliest due moved earlier: the server's timer must re-read it.
    moved_earlier: bool,
}

impl AgeIndex {
    /// Make sure the stream at `key` is looked at no later than `at`.
    fn arm(&mut self, db: usize, key: &Bytes, at: i64) {
        if self.due_of.get(&(db, key.clone())).is_some_and(|old| *old <= at) {
            return;
        }
        self.set(db, key, Some(at));
    }

    /// The stream at `key` is next looked at `at` (`None`: not at all until armed again).
    fn set(&mut self, db: usize, key: &Bytes, at: Option<i64>) {
        if let Some(old) = self.due_of.remove(&(db, key.clone())) {
            self.by_due.remove(&(old, db, key.clone()));
        }
        let Some(at) = at else { return };
        if self.by_due.first().is_none_or(|(first, ..)| at < *first) {
            self.moved_earlier = true;
        }
        self.due_of.insert((db, key.clone()), at);
        self.by_due.insert((at, db, key.clone()));
    }

    /// When the stream at `key` is next looked at.
    fn due(&self, db: usize, key: &Bytes) -> Option<i64> {
        self.due_of.get(&(db, key.clone())).copied()
    }

    /// Take the stream due first, if it is due at `now_ms`.
    fn pop_due(&mut self, now_ms: i64) -> Option<(usize, Bytes)> {
        if self.by_due.first().is_none_or(|(at, ..)| *at > now_ms) {
            return None;
        }
        let (_, db, key) = self.by_due.pop_first()?;
        self.due_of.remove(&(db, key.clone()));
        Some((db, key))
    }

    /// How many streams the index holds (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.due_of.len()
    }
}

impl Stream {
    /// The MAXAGE setting, if any.
    pub fn max_age(&self) -> Option<MaxAge> {
        self.max_age
    }

    /// Set or clear the MAXAGE setting (RILL.STREAM SET, its replay, a snapshot's load).
    pub fn set_max_age(&mut self, max_age: Option<MaxAge>) {
        self.max_age = max_age;
    }

    /// When this stream's oldest entry is aged; `None` without MAXAGE or entries. O(1).
    fn age_due(&self) -> Option<i64> {
        let ma = self.max_age.filter(|_| !self.is_empty())?;
        Some(ma.due_for(self.first_id().ms))
    }

    /// The stream settings a snapshot keeps beside Redis' stream type, in the aux field
    /// `rill-stream` before the key (`rdb::file`): RILL.STREAM SET's arguments after the key,
    /// `MAXAGE <ms> <mode>`. `None` when nothing is set.
    pub fn settings_aux(&self) -> Option<Vec<u8>> {
        let ma = self.max_age?;
        Some(format!("MAXAGE {} {}", ma.ms, ma.mode_name()).into_bytes())
    }

    /// Take back [`Stream::settings_aux`]'s settings (a snapshot's load).
    pub fn restore_settings(&mut self, text: &[u8]) -> Result<(), &'static str> {
        let words: Vec<Bytes> = text.split(|b| *b == b' ').map(Bytes::copy_from_slice).collect();
        let max_age = parse_setting(&words).map_err(|_| "a rill-stream field that does not parse")?;
        self.max_age = max_age;
        Ok(())
    }
}

/// `MAXAGE ms [KEEPREF | DELREF | ACKED]` (RILL.STREAM SET's arguments after the key, or a
/// snapshot's `rill-stream` field): the setting, `None` for `MAXAGE 0` (off).
pub(super) fn parse_setting(words: &[Bytes]) -> Result<Option<MaxAge>, crate::CmdError> {
    let (Some(name), Some(value)) = (words.first(), words.get(1)) else { return Err(crate::CmdError::SYNTAX) };
    if !args::is(name, "MAXAGE") {
        return Err(crate::CmdError::SYNTAX);
    }
    let ms = crate::util::parse_i64(value)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or(crate::CmdError::full("ERR MAXAGE must be 0 (off) or a positive integer (milliseconds)"))?;
    let mode = match words.get(2..).unwrap_or_default() {
        [] => RefStrategy::KeepRef,
        [mode] => args::ref_strategy(mode).ok_or(crate::CmdError::SYNTAX)?,
        _ => return Err(crate::CmdError::SYNTAX),
    };
    Ok((ms > 0).then_some(MaxAge { ms, mode }))
}

/// Where one bounded walk from the oldest entry stops: the smaller of `bound` and the ID of
/// the `budget + 1`-th live entry; how many live entries lie below it; whether the budget cut
/// it. Whole blocks are counted by their live count: O(blocks passed + B).
fn walk_bound(stream: &Stream, bound: StreamId, budget: u64) -> (StreamId, u64, bool) {
    let mut n = 0u64;
    for (&first, block) in &stream.blocks {
        if first >= bound {
            break;
        }
        let live = block.live_count();
        if block.last_id() < bound && n.saturating_add(live) <= budget {
            n += live;
            continue;
        }
        for p in block.positions(first).unwrap_or_default() {
            if p.deleted {
                continue;
            }
            if p.id >= bound {
                return (bound, n, false);
            }
            if n == budget {
                return (p.id, n, true);
            }
            n += 1;
        }
    }
    (bound, n, false)
}

/// The first live entry at or after `from`. O(log K + B).
fn first_live_from(stream: &Stream, from: StreamId) -> Option<StreamId> {
    let start = stream.blocks.range(..=from).next_back().map_or(from, |(k, _)| *k);
    // Blocks holding only deleted entries (kept where Redis keeps such nodes) are passed over.
    for (&first, block) in stream.blocks.range(start..) {
        if let Some(p) = block.positions(first)?.into_iter().find(|p| !p.deleted && p.id >= from) {
            return Some(p.id);
        }
    }
    None
}

/// What one look at a stream did.
#[derive(Debug, Clone, Copy)]
struct Look {
    /// Live entries the trim walked over (removed, or kept as referenced).
    examined: u64,
    /// Entries removed.
    removed: u64,
    /// When the stream next needs a look.
    next: Option<i64>,
}

/// Trim the aged entries of the stream at `key` with its MAXAGE, looking at `budget` entries
/// at most, emitting the exact trim into `ctx`. `None` when there is no such stream or it has
/// no MAXAGE (it then leaves the index). Records no keyspace event (the caller does).
fn look(engine: &mut Engine, ctx: &mut CallCtx, key: &Bytes, budget: u64) -> Option<Look> {
    let now = ctx.now_ms;
    // Not an access; a key whose time has passed is deleted (and logged) first.
    engine.peek(ctx.db, key, now)?;
    let limits = args::node_limits(engine);
    let Some(Value::Stream(stream)) =
        engine.dbs.get_mut(ctx.db).and_then(|d| d.keys.get_mut(key)).map(|e| &mut e.value)
    else {
        return None;
    };
    let ma = stream.max_age?;
    let Some(cutoff) = ma.cutoff(now) else {
        return Some(Look { examined: 0, removed: 0, next: stream.age_due() });
    };
    let mut bound = cutoff;
    if ma.mode == RefStrategy::Acked {
        // Entries after a group's last delivered one are referenced by it: the walk need not
        // go past the first of them.
        if let Some(after) = stream.groups.values().map(|g| g.last_delivered_id).min().and_then(StreamId::next) {
            bound = bound.min(after);
        }
    }
    let (bound, examined, cut) = walk_bound(stream, bound, budget);
    let removed = match examined {
        0 => 0,
        _ => {
            let trim = TrimArgs { goal: TrimGoal::MinId(bound), approx: false, limit: None };
            args::apply_trim(stream, trim, ma.mode, limits, ctx, key)
        }
    };
    let recheck = now.saturating_add(RECHECK_MS);
    let next = if cut {
        // The budget ran out: the rest at once, unless nothing in the window could go (ACKED,
        // every entry referenced).
        Some(if removed > 0 { now } else { recheck })
    } else {
        match stream.age_due() {
            Some(due) if due <= now => {
                // Aged entries a group still references (ACKED): look again later, or when
                // the next younger entry ages, whichever comes first.
                let younger = first_live_from(stream, cutoff).map_or(recheck, |id| ma.due_for(id.ms));
                Some(younger.min(recheck))
            }
            due => due,
        }
    };
    Some(Look { examined: examined.max(1), removed, next })
}

/// XADD's lazy trim, after its append to the stream at `key` (which has MAXAGE): when the
/// stream's due time has come, trim what aged (at most [`LAZY_BUDGET`] entries looked at) and
/// re-arm it. Never while loading or on a replica: their trims arrive as effects. Returns
/// whether entries were removed.
pub(super) fn trim_on_add(engine: &mut Engine, ctx: &mut CallCtx, key: &Bytes) -> bool {
    if engine.loading || engine.replica {
        return false;
    }
    if engine.max_age_index.due(ctx.db, key).is_some_and(|due| due > ctx.now_ms) {
        return false;
    }
    let Some(l) = look(engine, ctx, key, LAZY_BUDGET) else { return false };
    engine.max_age_index.set(ctx.db, key, l.next);
    l.removed > 0
}

impl Engine {
    /// Arm the MAXAGE index for the stream at `key` (RILL.STREAM SET and its replay).
    pub fn arm_max_age(&mut self, db: usize, key: &Bytes) {
        let due = match self.dbs.get(db).and_then(|d| d.keys.get(key)).map(|e| &e.value) {
            Some(Value::Stream(s)) => s.age_due(),
            _ => None,
        };
        if let Some(at) = due {
            self.max_age_index.arm(db, key, at);
        }
    }

    /// Arm the MAXAGE index for `stream`, about to be stored at `key` (a rename, move, copy,
    /// restore or load puts it there). O(1) for a stream without MAXAGE.
    pub(crate) fn arm_max_age_of(&mut self, db: usize, key: &[u8], stream: &Stream) {
        if let Some(at) = stream.age_due() {
            self.max_age_index.arm(db, &Bytes::copy_from_slice(key), at);
        }
    }

    /// Rebuild the MAXAGE index from every stream (loading ended, a promotion, SWAPDB, a full
    /// sync: appends were applied without it). O(keys).
    pub fn rearm_all_max_ages(&mut self) {
        self.max_age_index = AgeIndex::default();
        let mut found = Vec::new();
        for (db, d) in self.dbs.iter().enumerate() {
            for (key, e) in d.keys.iter() {
                if let Value::Stream(s) = &e.value {
                    if let Some(at) = s.age_due() {
                        found.push((db, Bytes::copy_from_slice(key), at));
                    }
                }
            }
        }
        for (db, key, at) in found {
            self.max_age_index.arm(db, &key, at);
        }
        self.max_age_index.moved_earlier = true;
    }

    /// The earliest time a stream with MAXAGE needs a look.
    pub fn next_age_due(&self) -> Option<i64> {
        self.max_age_index.by_due.first().map(|(at, ..)| *at)
    }

    /// Whether the earliest MAXAGE due moved earlier since the last call.
    pub fn take_age_due_moved(&mut self) -> bool {
        std::mem::take(&mut self.max_age_index.moved_earlier)
    }

    /// The MAXAGE sweep at `now_ms` (part of the policy timer's run): trims the aged entries
    /// of the streams that are due, looking at [`SWEEP_BUDGET`] entries at most; a stream the
    /// budget cut short is due again at once. Returns the effects (exact `XTRIM`s), to be
    /// recorded as one unit. Does nothing while loading or on a replica.
    pub fn run_age_sweep(&mut self, now_ms: i64, recording: bool) -> EffectBuf {
        let mut out = EffectBuf::default();
        if self.loading || self.replica {
            return out;
        }
        let mut budget = SWEEP_BUDGET;
        while budget > 0 {
            let Some((db, key)) = self.max_age_index.pop_due(now_ms) else { break };
            let mut ctx = CallCtx::new(db, now_ms, 0);
            ctx.recording = recording;
            if let Some(l) = look(self, &mut ctx, &key, budget) {
                budget = budget.saturating_sub(l.examined);
                self.max_age_index.set(db, &key, l.next);
                if l.removed > 0 {
                    self.modified(db, &key, KeyEvent::XTrim);
                }
            }
            out.append(&mut ctx.effects);
        }
        out
    }
}
