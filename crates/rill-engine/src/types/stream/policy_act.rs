//! What group policies do (docs/spec/policies.md §3–§5): end an attempt (hand the entry back,
//! after its backoff, or dead-letter it), and the timer that finds deadlines and delays that
//! have come.
//!
//! ```text
//! Engine.policy_timer: PolicyTimer
//!   by_due: {(due ms, db, key, group)}       the earliest time each policy group needs a look
//!   due_of: {(db, key, group) -> due ms}
//!
//!  a command or an applied effect touches a policy group ─► arm(group's next due) (min)
//!  the server's timer, at the earliest due ─► run_policy_timers(now):
//!      each due group: hand back entries whose ack deadline passed (oldest first, through
//!      the PEL's delivery-time index: O(k log n) for k due, nothing for the rest), move
//!      delays that ended to the hand-back queue, wake the group's readers, re-arm at the
//!      group's next due
//! ```
//!
//! A due time is a hint: a group whose work was done meanwhile (entries acked) is looked at,
//! found with nothing to do and re-armed at its real next due. A key renamed, moved, copied,
//! restored or loaded is armed where it now lives ([`Engine`]'s insertion paths call
//! [`Engine::arm_policies_of`]); a deleted key or group drops out when its time comes.
//!
//! Every action is a group effect (and, for a dead letter, the XADD before it), emitted like a
//! command's, so the log and replicas get it; applying those effects never acts again.

use super::group::GroupEffect;
use super::policy::{default_dead_letter, Policy, Release};
use super::{args, Stream, StreamId};
use crate::{CallCtx, Engine, KeyEvent, Value};
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};

/// Entries one timer run hands back or dead-letters at most (the rest on the next run, at
/// once): one run never stalls clients for long.
pub const TIMER_BUDGET: usize = 1000;

/// When each policy group needs a look (see the module doc).
#[derive(Debug, Default)]
pub struct PolicyTimer {
    by_due: BTreeSet<(i64, usize, Bytes, Bytes)>,
    due_of: HashMap<(usize, Bytes, Bytes), i64>,
    /// Set when the earliest due moved earlier: the server's timer must re-read it.
    moved_earlier: bool,
}

impl PolicyTimer {
    /// Make sure `group` of `key` is looked at no later than `at`.
    fn arm(&mut self, db: usize, key: &Bytes, group: &Bytes, at: i64) {
        let id = (db, key.clone(), group.clone());
        if let Some(&old) = self.due_of.get(&id) {
            if old <= at {
                return;
            }
            self.by_due.remove(&(old, db, key.clone(), group.clone()));
        }
        if self.by_due.first().is_none_or(|(first, ..)| at < *first) {
            self.moved_earlier = true;
        }
        self.due_of.insert(id, at);
        self.by_due.insert((at, db, key.clone(), group.clone()));
    }

    /// Make sure `group` of `key` is looked at on the timer's next run, whatever its time.
    pub(crate) fn arm_now(&mut self, db: usize, key: &Bytes, group: &Bytes) {
        self.arm(db, key, group, i64::MIN);
    }

    /// Take the groups due at `now_ms`.
    fn take_due(&mut self, now_ms: i64) -> Vec<(usize, Bytes, Bytes)> {
        let mut due = Vec::new();
        while let Some((at, ..)) = self.by_due.first() {
            if *at > now_ms {
                break;
            }
            let Some((_, db, key, group)) = self.by_due.pop_first() else { break };
            self.due_of.remove(&(db, key.clone(), group.clone()));
            due.push((db, key, group));
        }
        due
    }
}

/// Whether a client is blocked in XREADGROUP on the stream at `key` of database `db` for
/// `group`, as `consumer` (any consumer: `None`). The server knows its blocked clients; idle
/// expiry (policies spec §8) spares a consumer, or a group, that one is reading for.
pub type BlockedReaders<'a> = &'a dyn Fn(usize, &[u8], &[u8], Option<&[u8]>) -> bool;

/// How long idle expiry that found a blocked reader waits before looking again, at most.
const IDLE_RECHECK_MS: i64 = 1000;

/// When `group` next needs a look: its oldest owned entry's ack deadline, its first delay's
/// end, or its idle expiry's (CONSUMERIDLE, GROUPIDLE), whichever comes first. O(log n).
fn next_due(stream: &Stream, group: &[u8]) -> Option<i64> {
    let g = stream.group(group)?;
    let p = g.policy()?;
    let deadline = match p.settings.ack_wait_ms {
        0 => None,
        wait => {
            let wait = i64::try_from(wait).unwrap_or(i64::MAX);
            g.pel().owned_by_time().next().map(|(t, _)| t.saturating_add(wait))
        }
    };
    // Consumers whose connections closed (RELEASEONCLOSE): at once.
    let closing = (!p.closing.0.is_empty()).then_some(i64::MIN);
    [deadline, p.next_delay_end(), p.idle_due(), closing].into_iter().flatten().min()
}

impl Engine {
    /// Arm the timer for `group` of the stream at `key` if its policy will need a look
    /// (commands call it after changing a policy group; replay after applying its effects).
    pub fn arm_policy(&mut self, db: usize, key: &Bytes, group: &Bytes) {
        let due = match self.dbs.get(db).and_then(|d| d.keys.get(key)).map(|e| &e.value) {
            Some(Value::Stream(s)) => next_due(s, group),
            _ => None,
        };
        if let Some(at) = due {
            self.policy_timer.arm(db, key, group, at);
        }
    }

    /// Arm every policy group of the stream just stored at `key` (a rename, move, copy,
    /// restore or load put it there) for a look at `at`.
    pub(crate) fn arm_policies_of(&mut self, db: usize, key: &Bytes, groups: Vec<Bytes>, at: i64) {
        for g in groups {
            self.policy_timer.arm(db, key, &g, at);
        }
    }

    /// Arm every policy group of every stream (after a full sync replaced the data, SWAPDB,
    /// a promotion). O(keys).
    pub fn rearm_all_policies(&mut self) {
        self.policy_timer = PolicyTimer::default();
        let mut found = Vec::new();
        for (db, d) in self.dbs.iter().enumerate() {
            for (key, e) in d.keys.iter() {
                if let Value::Stream(s) = &e.value {
                    for name in s.policy_groups() {
                        found.push((db, Bytes::copy_from_slice(key), name));
                    }
                }
            }
        }
        for (db, key, group) in found {
            self.arm_policy(db, &key, &group);
        }
        self.policy_timer.moved_earlier = true;
    }

    /// The earliest time a policy group (or a stream with MAXAGE, `max_age.rs`) needs a look.
    pub fn next_policy_due(&self) -> Option<i64> {
        self.policy_timer.by_due.first().map(|(at, ..)| *at).into_iter().chain(self.next_age_due()).min()
    }

    /// Whether the earliest due moved earlier since the last call (the server's timer then
    /// re-reads [`Engine::next_policy_due`]).
    pub fn take_policy_due_moved(&mut self) -> bool {
        std::mem::take(&mut self.policy_timer.moved_earlier) | self.take_age_due_moved()
    }

    /// The policy timer's work at `now_ms` (see the module doc): returns the effects, to be
    /// recorded as one unit. `recording`: whether effects are wanted (some sink exists).
    /// `blocked`: which readers are blocked (idle expiry spares them).
    pub fn run_policy_timers(
        &mut self,
        now_ms: i64,
        recording: bool,
        blocked: BlockedReaders<'_>,
    ) -> crate::effect::EffectBuf {
        let mut out = crate::effect::EffectBuf::default();
        let mut budget = TIMER_BUDGET;
        for (db, key, group) in self.policy_timer.take_due(now_ms) {
            let mut ctx = CallCtx::new(db, now_ms, 0);
            ctx.recording = recording;
            budget = budget.saturating_sub(self.policy_group_due(&mut ctx, &key, &group, budget));
            if budget > 0 {
                budget = budget.saturating_sub(self.release_closed(&mut ctx, &key, &group, budget));
            }
            if budget > 0 {
                budget = budget.saturating_sub(self.idle_expiry(&mut ctx, &key, &group, blocked, budget));
            }
            self.arm_policy(db, &key, &group);
            if budget == 0 {
                // The rest of this group's work is due now: look again at once.
                self.policy_timer.arm(db, &key, &group, now_ms);
            }
            out.append(&mut ctx.effects);
        }
        out.append(&mut self.run_age_sweep(now_ms, recording));
        out
    }

    /// One group's due work; returns the entries acted on.
    fn policy_group_due(&mut self, ctx: &mut CallCtx, key: &Bytes, group: &Bytes, budget: usize) -> usize {
        let now = ctx.now_ms;
        let Some(Value::Stream(stream)) =
            self.dbs.get_mut(ctx.db).and_then(|d| d.keys.get_mut(key)).map(|e| &mut e.value)
        else {
            return 0;
        };
        let Some(g) = stream.group(group) else { return 0 };
        let Some(p) = g.policy() else { return 0 };
        let expired: Vec<StreamId> = match p.settings.ack_wait_ms {
            0 => Vec::new(),
            wait => {
                let wait = i64::try_from(wait).unwrap_or(i64::MAX);
                g.pel()
                    .owned_by_time()
                    .take_while(|(t, _)| t.saturating_add(wait) <= now)
                    .take(budget)
                    .map(|(_, id)| id)
                    .collect()
            }
        };
        let promoted = stream.groups.get_mut(group).and_then(|g| g.policy_mut()).map_or(0, |p| p.promote_due(now));
        let acted = expired.len();
        for id in expired {
            end_attempt(self, ctx, key, group, id, Ending::Failed(Release::Deadline, None), None);
        }
        if acted + promoted > 0 {
            self.signal_ready(ctx.db, key);
        }
        acted
    }
}

impl Engine {
    /// Idle expiry of `group` at `ctx.now_ms` (policies spec §8): a group inactive for
    /// GROUPIDLE is destroyed (`rill-group-expired`); each consumer inactive for CONSUMERIDLE
    /// has its entries handed back as failed attempts (dead-lettered at MAXDELIVER) and is
    /// removed. A consumer (or, for GROUPIDLE, any consumer) blocked in a read is spared, and
    /// looked at again a little later. Returns the entries and consumers acted on, at most
    /// `budget` entries (the rest on the next run).
    fn idle_expiry(
        &mut self,
        ctx: &mut CallCtx,
        key: &Bytes,
        group: &Bytes,
        blocked: BlockedReaders<'_>,
        budget: usize,
    ) -> usize {
        let now = ctx.now_ms;
        let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let Some(Value::Stream(stream)) = self.dbs.get(ctx.db).and_then(|d| d.keys.get(key)).map(|e| &e.value) else {
            return 0;
        };
        let Some(p) = stream.group(group).and_then(|g| g.policy()) else { return 0 };
        if p.idle_recheck.0 > now {
            return 0;
        }
        let (consumer_idle, group_idle) = (p.settings.consumer_idle_ms, p.settings.group_idle_ms);
        let group_expired = group_idle > 0 && p.group_active_ms.saturating_add(ms(group_idle)) <= now;
        let idle_consumers: Vec<Bytes> = match consumer_idle {
            0 => Vec::new(),
            idle => p
                .least_active()
                .take_while(|(t, _)| t.saturating_add(ms(idle)) <= now)
                .map(|(_, c)| c.clone())
                .collect(),
        };
        let mut recheck = None;
        if group_expired {
            if !blocked(ctx.db, key, group, None) {
                let Ok(Some(stream)) = args::write_stream(self, ctx, key) else { return 0 };
                let effect = stream.apply_group(GroupEffect::GroupDestroyed { group: group.clone() });
                ctx.emit_group(key, [effect]);
                self.count_changes(1);
                self.record_event(ctx.db, key, KeyEvent::RillGroupExpired);
                // Its blocked readers (none, or they would have spared it) and WATCHers.
                self.signal_ready(ctx.db, key);
                return 1;
            }
            recheck = Some(ms(group_idle).min(IDLE_RECHECK_MS));
        }
        let mut acted = 0;
        for consumer in idle_consumers {
            if blocked(ctx.db, key, group, Some(&consumer)) {
                recheck = Some(ms(consumer_idle).min(IDLE_RECHECK_MS));
                continue;
            }
            let room = budget.saturating_sub(acted);
            let owned: Vec<StreamId> = match self.dbs.get(ctx.db).and_then(|d| d.keys.get(key)).map(|e| &e.value) {
                Some(Value::Stream(s)) => s
                    .group(group)
                    .and_then(|g| {
                        Some(g.pending_ids(g.consumer(&consumer)?, std::ops::Bound::Unbounded).take(room + 1).collect())
                    })
                    .unwrap_or_default(),
                _ => break,
            };
            let more = owned.len() > room;
            for id in owned.into_iter().take(room) {
                end_attempt(self, ctx, key, group, id, Ending::Failed(Release::Deadline, None), None);
                acted += 1;
            }
            if more {
                // The rest next run (the caller looks again at once); the consumer stays idle.
                return acted.max(budget);
            }
            let Ok(Some(stream)) = args::write_stream(self, ctx, key) else { break };
            let effect = stream.apply_group(GroupEffect::ConsumerExpired { group: group.clone(), consumer });
            ctx.emit_group(key, [effect]);
            self.count_changes(1);
            self.record_event(ctx.db, key, KeyEvent::XGroupDelConsumer);
            acted += 1;
        }
        if let Some(wait) = recheck {
            if let Ok(Some(stream)) = args::write_stream(self, ctx, key) {
                if let Some(p) = stream.groups.get_mut(group).and_then(|g| g.policy_mut()) {
                    p.idle_recheck.0 = now.saturating_add(wait);
                }
            }
        }
        if acted > 0 {
            self.signal_ready(ctx.db, key);
        }
        acted
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It failed: hand the entry back (after this delay if given, else the BACKOFF schedule),
    /// or dead-letter it if it has had MAXDELIVER deliveries.
    Failed(Release, Option<u64>),
    /// XNACK FATAL: dead-letter it at once.
    Fatal,
    /// A claim found it at its MAXDELIVER limit: dead-letter it instead of delivering it.
    AtLimit,
}

/// End the attempt on pending entry `id` of `group` (a group with a policy): hand it back or
/// dead-letter it, emitting the effects. `count`: its delivery count from now on (XNACK's
/// modes change it), else unchanged. Returns false if `id` is not pending.
pub fn end_attempt(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    key: &Bytes,
    group: &Bytes,
    id: StreamId,
    how: Ending,
    count: Option<u64>,
) -> bool {
    let Ok(Some(stream)) = args::write_stream(engine, ctx, key) else { return false };
    let Some(g) = stream.group(group) else { return false };
    let (Some(p), Some(pending)) = (g.policy(), g.pel().get(id)) else { return false };
    let count = count.unwrap_or(pending.delivery_count);
    let max = p.settings.max_deliver;
    let backoff = p.backoff_for(count);
    let reason = match how {
        Ending::Fatal => Some("fatal"),
        Ending::AtLimit => Some("maxdeliver"),
        Ending::Failed(..) if max > 0 && count >= max => Some("maxdeliver"),
        Ending::Failed(..) => None,
    };
    if let Some(reason) = reason {
        if dead_letter(engine, ctx, key, group, id, reason) {
            return true;
        }
        let Ok(Some(stream)) = args::write_stream(engine, ctx, key) else { return false };
        let effect = stream.apply_group(GroupEffect::HandedBack {
            group: group.clone(),
            id,
            count,
            ready_at_ms: 0,
            why: Release::DeadLetterFailed,
        });
        ctx.emit_group(key, [effect]);
        engine.count_changes(1);
        return true;
    }
    let Ending::Failed(why, delay) = how else { return false };
    let delay = delay.unwrap_or(backoff);
    let Ok(Some(stream)) = args::write_stream(engine, ctx, key) else { return false };
    let ready_at_ms = match delay {
        0 => 0,
        d => ctx.now_ms.saturating_add(i64::try_from(d).unwrap_or(i64::MAX)),
    };
    let effect = stream.apply_group(GroupEffect::HandedBack { group: group.clone(), id, count, ready_at_ms, why });
    ctx.emit_group(key, [effect]);
    engine.count_changes(1);
    true
}

/// Move pending entry `id` to the group's dead-letter stream: XADD there (the original fields,
/// then the provenance fields, unless the entry carries them already: a dead letter of a dead
/// letter keeps its first origin), then the entry leaves the PEL. Returns false, changing
/// nothing, if the XADD cannot be done (the key holds another type). An entry whose payload
/// is gone (XDEL) leaves the PEL as by XACK: there is nothing to move.
fn dead_letter(engine: &mut Engine, ctx: &mut CallCtx, key: &Bytes, group: &Bytes, id: StreamId, reason: &str) -> bool {
    let Ok(Some(stream)) = args::write_stream(engine, ctx, key) else { return false };
    let Some(g) = stream.group(group) else { return false };
    let Some(p) = g.policy() else { return false };
    let Some(pending) = g.pel().get(id) else { return false };
    let dlq = p.settings.dead_letter.clone().unwrap_or_else(|| default_dead_letter(key));
    let Some((_, fields)) = stream.get(id) else {
        let effect = stream.apply_group(GroupEffect::Acked { group: group.clone(), id });
        ctx.emit_group(key, [effect]);
        engine.count_changes(1);
        return true;
    };
    let mut text = [0u8; super::reply::ID_MAX_TEXT_BYTES];
    let num = |n: i64| Bytes::from(n.to_string());
    let mut xadd = Vec::with_capacity(3 + fields.len() * 2 + 16);
    xadd.extend([Bytes::from_static(b"XADD"), dlq.clone(), Bytes::from_static(b"*")]);
    let has_provenance = fields.iter().any(|(f, _)| f.as_ref() == b"rill-source-stream");
    for (f, v) in fields {
        xadd.push(f);
        xadd.push(v);
    }
    if !has_provenance {
        let owner = pending.owner.cloned().unwrap_or_default();
        let count = i64::try_from(pending.delivery_count).unwrap_or(i64::MAX);
        let last = pending.delivery_time_ms;
        let first = p.first_delivery(id).unwrap_or(last);
        let pairs: [(&'static [u8], Bytes); 8] = [
            (b"rill-source-stream", key.clone()),
            (b"rill-source-id", Bytes::copy_from_slice(super::reply::id_text(id, &mut text))),
            (b"rill-group", group.clone()),
            (b"rill-consumer", owner),
            (b"rill-deliveries", num(count)),
            (b"rill-reason", Bytes::copy_from_slice(reason.as_bytes())),
            (b"rill-first-delivery-ms", num(first)),
            (b"rill-last-delivery-ms", num(last)),
        ];
        for (f, v) in pairs {
            xadd.push(Bytes::from_static(f));
            xadd.push(v);
        }
    }
    if super::cmd_add::xadd(engine, ctx, &xadd).is_err() {
        return false;
    }
    let Ok(Some(stream)) = args::write_stream(engine, ctx, key) else { return true };
    let effect = stream.apply_group(GroupEffect::DeadLettered { group: group.clone(), id });
    ctx.emit_group(key, [effect]);
    engine.count_changes(1);
    engine.record_event(ctx.db, key, KeyEvent::RillDeadLetter);
    true
}

/// Whether a claim of `id` in `group` must dead-letter it instead (policies spec §3): the
/// group's MAXDELIVER is set and the entry has been delivered that many times.
pub fn at_limit(stream: &Stream, group: &[u8], id: StreamId) -> bool {
    let Some(g) = stream.group(group) else { return false };
    let Some(p) = g.policy() else { return false };
    let max = p.settings.max_deliver;
    max > 0 && g.pel().get(id).is_some_and(|e| e.delivery_count >= max)
}

/// Dead-letter each of `ids` (claims found them at their limit), then wake the group's
/// readers and re-arm its timer. Returns how many went.
pub fn dead_letter_at_limit(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    key: &Bytes,
    group: &Bytes,
    ids: &[StreamId],
) -> u64 {
    let mut n = 0;
    for &id in ids {
        if end_attempt(engine, ctx, key, group, id, Ending::AtLimit, None) {
            n += 1;
        }
    }
    if n > 0 {
        engine.signal_ready(ctx.db, key);
        engine.arm_policy(ctx.db, key, group);
    }
    n
}

/// What a group's pending caps still admit (policies spec §7), for a claim by one consumer.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    group_room: Option<u64>,
    consumer_room: Option<u64>,
}

/// After entries left `group`'s PEL (XACK, XACKDEL, XGROUP DELCONSUMER): wake blocked `>`
/// readers if that may have made room under a pending cap (§7) or freed a key whose entries
/// ORDERBY deferred (§6).
pub fn wake_readers_if_freed(engine: &mut Engine, ctx: &CallCtx, key: &Bytes, group: &[u8]) {
    let freed = match engine.peek(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        Some(Value::Stream(s)) => s.group(group).and_then(|g| g.policy()).is_some_and(Policy::frees_readers),
        _ => false,
    };
    if freed {
        engine.signal_ready(ctx.db, key);
    }
}

impl Caps {
    /// The caps of `group` for `consumer`; `None` when the group has no cap.
    pub fn of(stream: &Stream, group: &[u8], consumer: &[u8]) -> Option<Caps> {
        let g = stream.group(group)?;
        let p = g.policy().filter(|p| p.has_caps())?;
        let s = &p.settings;
        let group_owned = g.pel().len() - g.pel().nacked_count();
        let consumer_owned = g.consumer(consumer).map_or(0, |c| g.pending_count(c));
        let room = |max: u64, owned: u64| (max > 0).then(|| max.saturating_sub(owned));
        Some(Caps {
            group_room: room(s.max_ack_pending, group_owned),
            consumer_room: room(s.max_ack_pending_consumer, consumer_owned),
        })
    }

    /// Whether a claim of `id` by `consumer` fits under the caps; if it does, the room it
    /// takes is counted. A claim adds to the group's owned entries when `id` is released or
    /// not pending, and to the consumer's when another consumer (or nobody) owns it.
    pub fn admit(&mut self, stream: &Stream, group: &[u8], consumer: &[u8], id: StreamId) -> bool {
        let owner = stream.group(group).and_then(|g| g.pel().get(id)).map(|e| e.owner.cloned());
        let adds_group = !matches!(owner, Some(Some(_)));
        let adds_consumer = !matches!(&owner, Some(Some(o)) if o.as_ref() == consumer);
        let fits = |room: Option<u64>, adds: bool| !adds || room.is_none_or(|r| r > 0);
        if !fits(self.group_room, adds_group) || !fits(self.consumer_room, adds_consumer) {
            return false;
        }
        let take = |room: &mut Option<u64>, adds: bool| {
            if let Some(r) = room.as_mut().filter(|_| adds) {
                *r -= 1;
            }
        };
        take(&mut self.group_room, adds_group);
        take(&mut self.consumer_room, adds_consumer);
        true
    }

    /// How many entries a `>` read may take at most (each adds to both counts).
    pub fn read_room(&self) -> u64 {
        self.group_room.unwrap_or(u64::MAX).min(self.consumer_room.unwrap_or(u64::MAX))
    }
}

impl Stream {
    /// The names of the groups that have a policy.
    pub fn policy_groups(&self) -> Vec<Bytes> {
        self.groups.iter().filter(|(_, g)| g.policy().is_some()).map(|(n, _)| n.clone()).collect()
    }

    /// The policies of this stream's groups as a record body of group effects (`PolicySet`
    /// then `PolicyRestored` per group): what a snapshot keeps beside Redis' stream type, in
    /// an aux field before the key (`rdb::file`). `None` when no group has a policy.
    pub fn policy_record(&self) -> Option<Vec<u8>> {
        let mut effects = Vec::new();
        for (name, g) in &self.groups {
            let Some(p) = g.policy() else { continue };
            let group = |effect| crate::effect::Effect::Group { db: 0, key: Bytes::new(), effect };
            effects.push(group(GroupEffect::PolicySet {
                group: name.clone(),
                settings: p.settings.clone(),
                time_ms: 0,
            }));
            effects.push(group(GroupEffect::PolicyRestored { group: name.clone(), state: p.state() }));
        }
        if effects.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        crate::effect::encode_record(&mut out, 0, &effects);
        Some(out)
    }

    /// Take back [`Stream::policy_record`]'s policies (a snapshot's load). Effects naming a
    /// group the stream lacks change nothing; a body that does not decode, or holds anything
    /// but policy effects, is an error.
    pub fn restore_policies(&mut self, body: &[u8]) -> Result<(), &'static str> {
        let (_, effects) =
            crate::effect::decode_record(body).map_err(|_| "a rill-policy field that does not decode")?;
        for e in effects {
            match e {
                crate::effect::Effect::Group {
                    effect: effect @ (GroupEffect::PolicySet { .. } | GroupEffect::PolicyRestored { .. }),
                    ..
                } => self.apply_group_effect(&effect),
                _ => return Err("a rill-policy field with effects other than policies"),
            }
        }
        if !self.validate_groups() {
            return Err("a rill-policy field that does not fit the stream's groups");
        }
        Ok(())
    }
}
