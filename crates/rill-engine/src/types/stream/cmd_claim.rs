//! XCLAIM and XAUTOCLAIM: take over pending entries from other consumers (spec §3.13, §3.14).
//!
//! ```text
//! XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-ms]
//!        [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
//! XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
//! ```
//!
//! Both create the consumer if needed and set its seen-time even when nothing is claimed.
//! Redis counts a claim as a delivery, so the count goes up by one unless JUSTID (or
//! RETRYCOUNT sets it). Pending entries whose payload was deleted are dropped from the PEL
//! (XAUTOCLAIM reports them). Each change is a [`GroupEffect`]: `Claimed` with the resulting
//! owner, time and count, `Acked` for a dropped ghost. Neither invalidates WATCH (spec §8).

use super::args::{self, is};
use super::group::{bump, GroupEffect};
use super::{id, policy_act, reply, Stream, StreamId};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XCLAIM`.
pub(super) const XCLAIM: CommandSpec = CommandSpec {
    name: "xclaim",
    arity: -6,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Takes pending entries over for a consumer when they have been idle long enough.",
    since: "5.0.0",
    complexity: "O(N log n) for N IDs and a PEL of n entries.",
    syntax: "key:key group consumer min-idle-time id ... [IDLE ms:integer] \
             [TIME unix-time-milliseconds:unix-time] [RETRYCOUNT count:integer] [FORCE] \
             [JUSTID] [LASTID lastid]",
    ..CommandSpec::of(Handler::Engine(xclaim))
};

/// `XAUTOCLAIM`.
pub(super) const XAUTOCLAIM: CommandSpec = CommandSpec {
    name: "xautoclaim",
    arity: -6,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RW", "delete"])],
    group: "stream",
    summary: "Scans a group's pending entries from a cursor and takes over those idle long \
              enough.",
    since: "6.2.0",
    complexity: "O(log n + A log n) for a PEL of n and A ≤ 10 × COUNT entries inspected.",
    syntax: "key:key group consumer min-idle-time start [COUNT count:integer] [JUSTID]",
    ..CommandSpec::of(Handler::Engine(xautoclaim))
};

/// XAUTOCLAIM's default COUNT.
const AUTOCLAIM_COUNT_DEFAULT: u64 = 100;
/// XAUTOCLAIM inspects at most this many PEL entries per COUNT.
const AUTOCLAIM_ATTEMPTS_PER_COUNT: u64 = 10;
/// The largest COUNT XAUTOCLAIM takes: Redis caps it at `LONG_MAX / 16` (16 bytes per ID of
/// its transient array, which is also more than the 10 attempts per COUNT).
const AUTOCLAIM_COUNT_MAX: i64 = i64::MAX / 16;
/// From this COUNT on XAUTOCLAIM refuses to run, as Redis does when it cannot allocate its
/// transient array of 16 bytes per COUNT: 2^43 × 16 bytes is 128 TiB, the whole user address
/// space of x86-64 Linux, so Redis' allocation fails there whatever else the process holds.
/// (Below it Redis' answer depends on the free address space of the moment: measured on one
/// host, the first COUNT refused was between 3 × 2^40 and 6 × 2^40, varying between
/// processes; rill refuses none of those.) rill allocates nothing that size; it only answers
/// the same.
const AUTOCLAIM_COUNT_UNALLOCATABLE: u64 = 1 << 43;
/// Redis' answer to a COUNT from [`AUTOCLAIM_COUNT_UNALLOCATABLE`] on.
const AUTOCLAIM_COUNT_TOO_HIGH: CmdError =
    CmdError::full("ERR Insufficient memory, failed allocating transient memory, COUNT too high.");

/// XCLAIM's options.
#[derive(Debug, Default)]
struct ClaimOptions {
    /// Requested delivery time (IDLE / TIME), before clamping.
    delivery_time_ms: Option<i64>,
    retry_count: Option<u64>,
    force: bool,
    justid: bool,
    last_id: Option<StreamId>,
}

fn xclaim(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let at = |i: usize| args.get(i).map(|b| b.as_ref()).unwrap_or_default();
    let key = args.get(1).ok_or_else(|| CmdError::arity("xclaim"))?;
    let group = args.get(2).ok_or_else(|| CmdError::arity("xclaim"))?;
    let consumer = args.get(3).ok_or_else(|| CmdError::arity("xclaim"))?;
    args::group_stream(engine, ctx, key, group, || args::no_key_or_group(key, group))?;
    let min_idle = parse_i64(at(4)).ok_or(CmdError::full("ERR Invalid min-idle-time argument for XCLAIM"))?.max(0);
    let now = ctx.now_ms;
    let mut ids = Vec::new();
    let mut j = 5;
    while let Some(Ok(id)) = args.get(j).map(|a| args::strict_id(a)) {
        ids.push(id);
        j += 1;
    }
    let mut opts = ClaimOptions::default();
    while let Some(opt) = args.get(j) {
        let more = j + 1 < args.len();
        if is(opt, "FORCE") {
            opts.force = true;
        } else if is(opt, "JUSTID") {
            opts.justid = true;
        } else if is(opt, "IDLE") && more {
            j += 1;
            let ms = parse_i64(at(j)).ok_or(CmdError::full("ERR Invalid IDLE option argument for XCLAIM"))?;
            opts.delivery_time_ms = Some(now.wrapping_sub(ms));
        } else if is(opt, "TIME") && more {
            j += 1;
            opts.delivery_time_ms =
                Some(parse_i64(at(j)).ok_or(CmdError::full("ERR Invalid TIME option argument for XCLAIM"))?);
        } else if is(opt, "RETRYCOUNT") && more {
            j += 1;
            let n = parse_i64(at(j)).ok_or(CmdError::full("ERR Invalid RETRYCOUNT option argument for XCLAIM"))?;
            // A negative RETRYCOUNT reads as "not given", as in Redis.
            opts.retry_count = u64::try_from(n).ok();
        } else if is(opt, "LASTID") && more {
            j += 1;
            opts.last_id = Some(args::strict_id(at(j))?);
        } else {
            return Err(CmdError::owned(format!("ERR Unrecognized XCLAIM option '{}'", args::text(opt))));
        }
        j += 1;
    }
    let delivery_time = match opts.delivery_time_ms {
        Some(t) if (0..=now).contains(&t) => t,
        _ => now,
    };

    let stream = args::group_stream(engine, ctx, key, group, || args::no_key_or_group(key, group))?;
    let mut effects = Vec::new();
    if let Some(last_id) = opts.last_id {
        if let Some(g) = stream.group(group).filter(|g| last_id > g.last_delivered_id) {
            let entries_read = g.entries_read;
            effects.push(stream.apply_group(GroupEffect::LastIdRaised { group: group.clone(), last_id, entries_read }));
        }
    }
    touch_consumer(stream, group, consumer, now, &mut effects);
    // JUSTID replies with IDs; otherwise the entries go straight from the blocks into the reply.
    let mut out = Vec::new();
    let mut entries_out = reply::EntriesBuilder::with_capacity(ids.len());
    // Entries a policy dead-letters instead of delivering again (policies spec §3).
    let mut at_limit = Vec::new();
    let mut caps = policy_act::Caps::of(stream, group, consumer);
    for id in ids {
        let pending = stream
            .group(group)
            .and_then(|g| g.pel().get(id))
            .map(|p| (p.owner.is_some(), p.delivery_count, p.delivery_time_ms));
        if !stream.contains(id) {
            if pending.is_some() {
                effects.push(stream.apply_group(GroupEffect::Acked { group: group.clone(), id }));
            }
            continue;
        }
        // FORCE makes a missing record: unowned, count 1, then claimed below.
        let (owned, count) = match &pending {
            Some((owned, count, _)) => (*owned, *count),
            None if opts.force => (false, 1),
            None => continue,
        };
        if owned && min_idle > 0 {
            let idle = pending.as_ref().map_or(0, |(_, _, time)| now.wrapping_sub(*time));
            if idle < min_idle {
                continue;
            }
        }
        if policy_act::at_limit(stream, group, id) {
            at_limit.push(id);
            continue;
        }
        // A pending cap claims fewer (policies spec §7).
        if let Some(caps) = caps.as_mut() {
            if !caps.admit(stream, group, consumer, id) {
                continue;
            }
        }
        let count = match opts.retry_count {
            Some(n) => n,
            None if opts.justid => count,
            None => bump(count),
        };
        effects.push(stream.apply_group(GroupEffect::Claimed {
            group: group.clone(),
            consumer: consumer.clone(),
            id,
            time_ms: delivery_time,
            count,
            active_ms: now,
        }));
        if opts.justid {
            out.push(reply::id(id));
        } else {
            entries_out.push_stored(stream, id);
        }
    }
    let policy = stream.group(group).is_some_and(|g| g.policy().is_some());
    engine.count_changes(changes(&effects));
    if effects.iter().any(|e| matches!(e, GroupEffect::ConsumerCreated { .. })) {
        engine.record_event(ctx.db, key, KeyEvent::XGroupCreateConsumer);
    }
    ctx.emit_group(key, effects);
    if policy {
        // A claimed entry's ack deadline runs from its claim (policies spec §4).
        engine.arm_policy(ctx.db, key, group);
        policy_act::dead_letter_at_limit(engine, ctx, key, group, &at_limit);
    }
    Ok(if opts.justid { Reply::Array(out) } else { entries_out.finish() })
}

/// What counts as a change for `rdb_changes_since_last_save`: everything but seen-time.
fn changes(effects: &[GroupEffect]) -> u64 {
    effects.iter().filter(|e| !matches!(e, GroupEffect::ConsumerSeen { .. })).count() as u64
}

/// Create the consumer if needed and set its seen-time.
fn touch_consumer(stream: &mut Stream, group: &Bytes, consumer: &Bytes, now: i64, effects: &mut Vec<GroupEffect>) {
    if stream.group(group).and_then(|g| g.consumer(consumer)).is_none() {
        effects.push(stream.apply_group(GroupEffect::ConsumerCreated {
            group: group.clone(),
            consumer: crate::types::owned(consumer),
            time_ms: now,
        }));
    }
    effects.push(stream.apply_group(GroupEffect::ConsumerSeen {
        group: group.clone(),
        consumer: consumer.clone(),
        time_ms: now,
    }));
}

fn xautoclaim(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let at = |i: usize| args.get(i).map(|b| b.as_ref()).unwrap_or_default();
    let min_idle = parse_i64(at(4)).ok_or(CmdError::full("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?.max(0);
    let start = id::parse_interval_start(at(5))?;
    let mut count = AUTOCLAIM_COUNT_DEFAULT;
    let mut justid = false;
    let mut j = 6;
    while let Some(opt) = args.get(j) {
        if is(opt, "COUNT") && j + 1 < args.len() {
            count = parse_i64(at(j + 1))
                .filter(|n| (1..=AUTOCLAIM_COUNT_MAX).contains(n))
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(CmdError::full("ERR COUNT must be > 0"))?;
            j += 1;
        } else if is(opt, "JUSTID") {
            justid = true;
        } else {
            return Err(CmdError::SYNTAX);
        }
        j += 1;
    }
    let key = args.get(1).ok_or_else(|| CmdError::arity("xautoclaim"))?;
    let group = args.get(2).ok_or_else(|| CmdError::arity("xautoclaim"))?;
    let consumer = args.get(3).ok_or_else(|| CmdError::arity("xautoclaim"))?;
    let stream = args::group_stream(engine, ctx, key, group, || args::no_key_or_group(key, group))?;
    // After the key and group checks, before the consumer is created, as in Redis.
    if count >= AUTOCLAIM_COUNT_UNALLOCATABLE {
        return Err(AUTOCLAIM_COUNT_TOO_HIGH);
    }
    let now = ctx.now_ms;
    let mut effects = Vec::new();
    touch_consumer(stream, group, consumer, now, &mut effects);

    // Decide first (reading the PEL in ID order and the entries block by block), then apply:
    // a claim changes only its own record, so later decisions do not depend on earlier ones.
    enum Step {
        Deleted(StreamId),
        Claim(StreamId, u64),
    }
    let mut steps = Vec::new();
    // Without JUSTID the claimed entries go straight from the blocks into the reply.
    let mut entries_out = reply::EntriesBuilder::with_capacity(usize::try_from(count).unwrap_or(usize::MAX));
    let mut last_inspected: Option<StreamId> = None;
    let mut at_limit = Vec::new();
    let mut caps = policy_act::Caps::of(stream, group, consumer);
    if let Some(g) = stream.group(group) {
        let mut entries = stream.lookup();
        let mut attempts = count.saturating_mul(AUTOCLAIM_ATTEMPTS_PER_COUNT);
        let mut slots = count;
        let mut pel = g.pel().range(start, StreamId::MAX);
        while attempts > 0 && slots > 0 {
            attempts -= 1;
            let Some((id, pending)) = pel.next() else {
                last_inspected = None;
                break;
            };
            last_inspected = Some(id);
            if !entries.contains(id) {
                steps.push(Step::Deleted(id));
                slots -= 1;
            } else {
                let idle_enough =
                    pending.owner.is_none() || min_idle == 0 || now.wrapping_sub(pending.delivery_time_ms) >= min_idle;
                if idle_enough && policy_act::at_limit(stream, group, id) {
                    // Dead-lettered below instead of claimed; it takes no slot.
                    at_limit.push(id);
                } else if idle_enough && !caps.as_mut().is_none_or(|c| c.admit(stream, group, consumer, id)) {
                    // A pending cap claims fewer (policies spec §7).
                } else if idle_enough && (justid || entries_out.push_found(&mut entries, id, 0).is_some()) {
                    let count = if justid { pending.delivery_count } else { bump(pending.delivery_count) };
                    steps.push(Step::Claim(id, count));
                    slots -= 1;
                }
            }
            if id.next().is_none() {
                break;
            }
        }
    }
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    for step in steps {
        match step {
            Step::Deleted(id) => {
                effects.push(stream.apply_group(GroupEffect::Acked { group: group.clone(), id }));
                deleted.push(reply::id(id));
            }
            Step::Claim(id, count) => {
                effects.push(stream.apply_group(GroupEffect::Claimed {
                    group: group.clone(),
                    consumer: consumer.clone(),
                    id,
                    time_ms: now,
                    count,
                    active_ms: now,
                }));
                if justid {
                    claimed.push(reply::id(id));
                }
            }
        }
    }
    // The cursor: the PEL entry after the last one inspected, 0-0 at the end.
    let cursor = match last_inspected.and_then(StreamId::next) {
        Some(after) => stream
            .group(group)
            .and_then(|g| g.pel().range(after, StreamId::MAX).next().map(|(id, _)| id))
            .unwrap_or(StreamId::MIN),
        None => StreamId::MIN,
    };
    let policy = stream.group(group).is_some_and(|g| g.policy().is_some());
    engine.count_changes(changes(&effects));
    if effects.iter().any(|e| matches!(e, GroupEffect::ConsumerCreated { .. })) {
        engine.record_event(ctx.db, key, KeyEvent::XGroupCreateConsumer);
    }
    ctx.emit_group(key, effects);
    if policy {
        engine.arm_policy(ctx.db, key, group);
        policy_act::dead_letter_at_limit(engine, ctx, key, group, &at_limit);
    }
    let claimed = if justid { Reply::Array(claimed) } else { entries_out.finish() };
    Ok(Reply::Array(vec![reply::id(cursor), claimed, Reply::Array(deleted)]))
}
