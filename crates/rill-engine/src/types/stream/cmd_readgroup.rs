//! XREADGROUP: read as a consumer of a group — new entries (`>`), the consumer's own pending
//! history (an explicit ID), or with CLAIM idle pending entries first (spec §3.5, §7).
//!
//! ```text
//! XREADGROUP GROUP group consumer [COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize]
//!            [BLOCK milliseconds] [CLAIM min-idle-time] [NOACK]
//!            STREAMS key [key ...] id [id ...]
//! ```
//!
//! Every key, group and ID is validated before anything changes. Then, per stream in argument
//! order: the consumer is created if needed and its seen-time set (even if the command then
//! blocks), and the stream is served. Each delivery is a [`GroupEffect`] — `Delivered` for a
//! new entry, `Redelivered` for a history re-read, `Claimed` for CLAIM — which is what a log
//! or replica replays (Redis propagates each delivery as an explicit XCLAIM for the same
//! reason: the reader's clock and the group's position must not be recomputed).
//!
//! Blocking works as for XREAD ([`CallCtx::block`]); the re-run re-validates everything, so a
//! deleted key or destroyed group yields NOGROUP and a type change WRONGTYPE, and a reader
//! that lost the race to another consumer of the group simply blocks again. A blocked `CLAIM`
//! reader also asks to be re-run when its oldest pending entry becomes idle enough
//! ([`BlockRequest::wake_at_ms`]); the server must honour that for such readers to wake
//! without a signal.

use super::args::{self, is};
use super::cmd_read::{
    Budget, MAXCOUNT_BELOW_COUNT, MAXCOUNT_NOT_POSITIVE, MAXSIZE_NOT_POSITIVE, TIMEOUT_NOT_INTEGER,
    TIMEOUT_OUT_OF_RANGE,
};
use super::group::{bump, GroupEffect};
use super::policy::Policy;
use super::{cmd_range, policy_act, reply, Stream, StreamId};
use crate::command::{BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{BlockRequest, CallCtx, CmdError, Engine, WakeOn};
use bytes::Bytes;
use rill_resp::Reply;
use std::ops::Bound::Excluded;

/// How often a blocked `XREADGROUP ... CLAIM` with nothing pending re-checks at most (Redis
/// re-checks on its event loop, which turns every 100 ms when the server is idle).
const CLAIM_RECHECK_MS: i64 = 100;

/// `XREADGROUP`.
pub(super) const XREADGROUP: CommandSpec = CommandSpec {
    name: "xreadgroup",
    arity: -7,
    flags: Flags::WRITE.and(Flags::BLOCKING).and(Flags::MOVABLEKEYS).and(Flags::READS_AS_CONSUMER),
    first_key: 0,
    last_key: 0,
    step: 0,
    acl: &["@write", "@stream", "@slow", "@blocking"],
    key_specs: &[KeySpec {
        flags: &["RO", "access"],
        begin: BeginSearch::Keyword { keyword: "STREAMS", startfrom: 4 },
        find: FindKeys::Range { lastkey: -1, keystep: 1, limit: 2 },
        notes: "",
    }],
    group: "stream",
    summary: "Reads entries as a consumer of a group: new ones, its own pending ones, or idle \
              pending ones of the group, waiting for new ones if asked to.",
    since: "5.0.0",
    complexity: "O(log n + M log n) per stream, M the entries returned and n the PEL size; \
                 O(1) to block.",
    syntax: "GROUP (group consumer) [COUNT count:integer] [MAXCOUNT maxcount:integer] \
             [MAXSIZE maxsize:integer] [BLOCK milliseconds:integer] \
             [CLAIM min-idle-time:integer] [NOACK] STREAMS (key:key ... id ...)",
    ..CommandSpec::of(Handler::Engine(xreadgroup))
};

/// `RILL.READGROUP`: XREADGROUP whose every entry carries its delivery figures, as XREADGROUP
/// CLAIM's entries do — `[id, fields, idle-ms, deliveries]`, the time since the entry's last
/// delivery and how many deliveries it had before this one (0 and 0 for a new entry). A worker
/// on a group with a policy (MAXDELIVER, ACKWAIT, BACKOFF) then learns each entry's attempt
/// without an XPENDING per batch. Same syntax, errors, blocking and effects as XREADGROUP.
pub(super) const RILL_READGROUP: CommandSpec = CommandSpec {
    name: "rill.readgroup",
    summary: "Reads entries as a consumer of a group, as XREADGROUP does, each entry with its idle time \
              and its deliveries before this one.",
    since: "0.1.0",
    handler: Handler::Engine(rill_readgroup),
    ..XREADGROUP
};

/// A validated XREADGROUP, before the keys are looked at.
#[derive(Debug, Clone)]
struct Request {
    group: Bytes,
    consumer: Bytes,
    /// Per-stream cap; 0 = none.
    count: u64,
    max_count: Option<u64>,
    max_size: Option<u64>,
    block_ms: Option<i64>,
    /// `CLAIM min-idle-time`.
    claim: Option<u64>,
    noack: bool,
    /// Every entry with its idle time and earlier deliveries (`RILL.READGROUP`).
    counts: bool,
    streams_at: usize,
    streams: usize,
}

/// What one listed stream asks for.
#[derive(Debug, Clone, Copy)]
enum ReadKind {
    /// `>`: entries never delivered to the group.
    New,
    /// The consumer's own pending entries after this ID.
    History(StreamId),
}

fn parse(args: &[Bytes]) -> Result<Request, CmdError> {
    let argc = args.len();
    let mut req = Request {
        group: Bytes::new(),
        consumer: Bytes::new(),
        count: 0,
        max_count: None,
        max_size: None,
        block_ms: None,
        claim: None,
        noack: false,
        counts: false,
        streams_at: 0,
        streams: 0,
    };
    let mut group_given = false;
    let mut i = 1;
    while i < argc {
        let more = argc - 1 - i;
        let Some(opt) = args.get(i) else { break };
        let value = args.get(i + 1).map(|b| b.as_ref()).unwrap_or_default();
        if is(opt, "CLAIM") && more >= 1 {
            let n = parse_i64(value).ok_or(CmdError::full("ERR min-idle-time is not an integer or out of range"))?;
            let n = u64::try_from(n).map_err(|_| CmdError::full("ERR min-idle-time must be a positive integer"))?;
            req.claim = Some(n);
            i += 1;
        } else if is(opt, "BLOCK") && more >= 1 {
            let ms = parse_i64(value).ok_or(TIMEOUT_NOT_INTEGER)?;
            if ms < 0 {
                return Err(CmdError::TIMEOUT_NEGATIVE);
            }
            req.block_ms = Some(ms);
            i += 1;
        } else if is(opt, "COUNT") && more >= 1 {
            let n = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
            req.count = u64::try_from(n).unwrap_or(0);
            i += 1;
        } else if is(opt, "MAXCOUNT") && more >= 1 {
            let n = parse_i64(value).ok_or(MAXCOUNT_NOT_POSITIVE)?;
            req.max_count = Some(u64::try_from(n).ok().filter(|n| *n > 0).ok_or(MAXCOUNT_NOT_POSITIVE)?);
            i += 1;
        } else if is(opt, "MAXSIZE") && more >= 1 {
            let n = parse_i64(value).ok_or(MAXSIZE_NOT_POSITIVE)?;
            req.max_size = Some(u64::try_from(n).ok().filter(|n| *n > 0).ok_or(MAXSIZE_NOT_POSITIVE)?);
            i += 1;
        } else if is(opt, "STREAMS") && more >= 1 {
            let rest = argc - (i + 1);
            if !rest.is_multiple_of(2) {
                return Err(CmdError::full(
                    "ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified.",
                ));
            }
            req.streams_at = i + 1;
            req.streams = rest / 2;
            break;
        } else if is(opt, "GROUP") && more >= 2 {
            req.group = args.get(i + 1).cloned().unwrap_or_default();
            req.consumer = args.get(i + 2).cloned().unwrap_or_default();
            group_given = true;
            i += 2;
        } else if is(opt, "NOACK") {
            req.noack = true;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    if req.streams_at == 0 {
        return Err(CmdError::SYNTAX);
    }
    if !group_given {
        return Err(CmdError::full("ERR Missing GROUP option for XREADGROUP"));
    }
    if let Some(max) = req.max_count {
        if req.count != 0 && max < req.count {
            return Err(MAXCOUNT_BELOW_COUNT);
        }
    }
    Ok(req)
}

fn meaningless(symbol: &str) -> CmdError {
    CmdError::owned(format!(
        "ERR The {symbol} ID is meaningless in the context of XREADGROUP: you want to read the \
         history of this consumer by specifying a proper ID, or use the > ID to get new \
         messages. The {symbol} ID would just return an empty result set."
    ))
}

fn xreadgroup(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    read(engine, ctx, args, false)
}

fn rill_readgroup(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    read(engine, ctx, args, true)
}

/// XREADGROUP, or RILL.READGROUP (`counts`).
fn read(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], counts: bool) -> Result<Reply, CmdError> {
    let req = Request { counts, ..parse(args)? };
    let deadline = match req.block_ms {
        Some(ms) if ms > 0 => Some(ctx.now_ms.checked_add(ms).ok_or(TIMEOUT_OUT_OF_RANGE)?),
        _ => None,
    };
    let keys = args.get(req.streams_at..req.streams_at + req.streams).unwrap_or_default();
    let id_args = args.get(req.streams_at + req.streams..).unwrap_or_default();

    // Validate every key, group and ID before changing anything.
    let mut kinds = Vec::with_capacity(req.streams);
    for (key, id_arg) in keys.iter().zip(id_args) {
        let stream = args::read_stream(engine, ctx, key)?;
        if stream.and_then(|s| s.group(&req.group)).is_none() {
            return Err(CmdError::owned(format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                args::text(key),
                args::text(&req.group)
            )));
        }
        kinds.push(match id_arg.as_ref() {
            b"$" => return Err(meaningless("$")),
            b"+" => return Err(meaningless("+")),
            b">" => ReadKind::New,
            // Redis stands for `>` with the largest ID, so that ID given explicitly is `>`
            // too: it reads (and blocks for) new entries, never history.
            other => match args::strict_id(other)? {
                StreamId::MAX => ReadKind::New,
                id => ReadKind::History(id),
            },
        });
    }

    let mut budget = Budget::new(req.max_count, req.max_size);
    let mut claim = req.claim;
    let mut served: Vec<(Bytes, Reply)> = Vec::new();
    let mut effects = Vec::new();
    // Entries a CLAIM found at a policy's MAXDELIVER: dead-lettered, not delivered.
    let mut at_limit = Vec::new();
    // An ORDERBY read stopped after deferring its most entries, with more to look at.
    let mut more = false;
    // Every change is logged as the group effects below, never as this request.
    ctx.explicit();
    for (key, kind) in keys.iter().zip(kinds) {
        let Some(stream) = args::write_stream(engine, ctx, key)? else { continue };
        let before = effects.len();
        if stream.group(&req.group).and_then(|g| g.consumer(&req.consumer)).is_none() {
            effects.push(stream.apply_group(GroupEffect::ConsumerCreated {
                group: req.group.clone(),
                consumer: crate::types::owned(&req.consumer),
                time_ms: ctx.now_ms,
            }));
        }
        effects.push(stream.apply_group(GroupEffect::ConsumerSeen {
            group: req.group.clone(),
            consumer: req.consumer.clone(),
            time_ms: ctx.now_ms,
        }));
        match kind {
            ReadKind::History(after) => {
                // Redis drops CLAIM for the rest of the command once it serves history.
                claim = None;
                let entries = history(stream, &req, after, ctx.now_ms, &mut budget, &mut effects);
                served.push((key.clone(), Reply::Array(entries)));
            }
            ReadKind::New => {
                // A pending cap limits what a `>` read takes (policies spec §7); at the cap the
                // read gets what Redis answers when nothing is new.
                let caps = policy_act::Caps::of(stream, &req.group, &req.consumer);
                let capped;
                let req = match caps.map(|c| c.read_room()) {
                    None => &req,
                    Some(room) => {
                        if room == 0 {
                            if let Some(p) = stream.groups.get_mut(&req.group).and_then(|g| g.policy_mut()) {
                                p.held_back.0 += 1;
                            }
                        }
                        capped =
                            Request { count: if req.count == 0 { room } else { req.count.min(room) }, ..req.clone() };
                        &capped
                    }
                };
                let entries = match claim {
                    _ if req.count == 0 && caps.is_some() => None,
                    None => new_entries(stream, req, ctx.now_ms, &mut budget, &mut effects, &mut more),
                    Some(min_idle) => {
                        claim_and_new(stream, req, min_idle, ctx.now_ms, &mut budget, &mut effects, &mut at_limit)
                    }
                };
                if let Some(entries) = entries {
                    served.push((key.clone(), entries));
                }
            }
        }
        let policy = stream.group(&req.group).and_then(|g| g.policy()).map(|p| p.settings.release_on_close);
        // Redis counts one change per stream that delivered or claimed something (history
        // re-reads are too minor to count), plus a consumer creation.
        let this_stream = effects.get(before..).unwrap_or_default();
        let created = this_stream.iter().any(|e| matches!(e, GroupEffect::ConsumerCreated { .. }));
        let delivered =
            this_stream.iter().any(|e| matches!(e, GroupEffect::Delivered { .. } | GroupEffect::Claimed { .. }));
        engine.count_changes(u64::from(created) + u64::from(delivered));
        if created {
            engine.record_event(ctx.db, key, KeyEvent::XGroupCreateConsumer);
        }
        ctx.emit_group(key, effects.drain(before..));
        if let Some(release_on_close) = policy {
            if release_on_close {
                engine.note_policy_reader(ctx.client_id, ctx.db, key, &req.group, &req.consumer);
            }
            engine.arm_policy(ctx.db, key, &req.group);
            policy_act::dead_letter_at_limit(engine, ctx, key, &req.group, &at_limit);
        }
        at_limit.clear();
    }

    if !served.is_empty() {
        return Ok(render(served, ctx.resp3));
    }
    if req.block_ms.is_none() || ctx.no_block {
        return Ok(Reply::NullArray);
    }
    let mut block_keys: Vec<Bytes> = Vec::with_capacity(keys.len());
    for key in keys {
        if !block_keys.contains(key) {
            block_keys.push(key.clone());
        }
    }
    // With CLAIM, ask to be re-run when the oldest pending entry (of any listed stream) will
    // be idle enough. If nothing is pending, re-check after min-idle from now (Redis' claim
    // timer: an entry delivered meanwhile may be claimable by then, and nothing signals it),
    // but no sooner than `CLAIM_RECHECK_MS`, so a small min-idle does not make the server
    // re-run the client every millisecond.
    let claim_wake_at_ms = claim.map(|min_idle| {
        let oldest = keys
            .iter()
            .filter_map(|key| {
                let stream = args::read_stream(engine, ctx, key).ok()??;
                let g = stream.group(&req.group)?;
                g.pel().claim_order().find(|(id, _)| stream.contains(*id)).map(|(_, p)| p.delivery_time_ms)
            })
            .min();
        let min_idle = i64::try_from(min_idle).unwrap_or(i64::MAX);
        match oldest {
            Some(t) => t.saturating_add(min_idle),
            // Rounded up to a whole re-check period, so the re-checks of many such readers
            // fall together (one wake-up of the server, not one each).
            None => {
                let at = ctx.now_ms.saturating_add(min_idle.max(CLAIM_RECHECK_MS));
                at.saturating_add(CLAIM_RECHECK_MS - 1) / CLAIM_RECHECK_MS * CLAIM_RECHECK_MS
            }
        }
    });
    // A read that stopped at its deferral limit is re-run at once for the rest.
    let wake_at_ms = if more { Some(ctx.now_ms) } else { claim_wake_at_ms };
    ctx.block = Some(BlockRequest {
        keys: block_keys,
        wakes_on: WakeOn::AnyChange,
        deadline_ms: ctx.deadline_override.unwrap_or(deadline),
        timeout_reply: Reply::NullArray,
        rerun_args: None,
        wake_at_ms,
    });
    Ok(Reply::NullArray)
}

/// The consumer's own pending entries after `after`, each re-delivered (count + 1, time now)
/// if its payload still exists, else reported as `[id, nil]` untouched.
fn history(
    stream: &mut Stream,
    req: &Request,
    after: StreamId,
    now_ms: i64,
    budget: &mut Budget,
    effects: &mut Vec<GroupEffect>,
) -> Vec<Reply> {
    let ids: Vec<StreamId> = stream
        .group(&req.group)
        .and_then(|g| {
            let take = if req.count == 0 { usize::MAX } else { req.count as usize };
            Some(g.pending_ids(g.consumer(&req.consumer)?, Excluded(after)).take(take).collect())
        })
        .unwrap_or_default();
    // Entries are encoded straight from the blocks into one buffer, then handed out as slices
    // of it; an entry whose payload is gone is `[id, nil]` (protocol-dependent, so a tree).
    enum Part {
        Entry(usize, usize),
        Gone(StreamId),
    }
    let mut writer = reply::EntryWriter::default();
    let mut buf = Vec::new();
    let mut parts = Vec::with_capacity(ids.len());
    let extra = if req.counts { 2 } else { 0 };
    for id in ids {
        let start = buf.len();
        if stream.write_entry(id, extra, &mut writer, &mut buf) {
            let before =
                stream.group(&req.group).and_then(|g| g.pel().get(id)).map(|e| (e.delivery_time_ms, e.delivery_count));
            if req.counts {
                let (time_ms, n) = before.unwrap_or((now_ms, 0));
                reply::put_int(&mut buf, now_ms.wrapping_sub(time_ms).max(0));
                reply::put_int(&mut buf, i64::try_from(n).unwrap_or(i64::MAX));
            }
            if !budget.take(|| (buf.len() - start) as u64) {
                buf.truncate(start);
                break;
            }
            let count = before.map_or(1, |(_, n)| bump(n));
            effects.push(stream.apply_group(GroupEffect::Redelivered {
                group: req.group.clone(),
                consumer: req.consumer.clone(),
                id,
                time_ms: now_ms,
                count,
            }));
            parts.push(Part::Entry(start, buf.len()));
        } else {
            if !budget.take(|| reply::entry_wire_bytes(&(id, Vec::new()))) {
                break;
            }
            parts.push(Part::Gone(id));
        }
    }
    let buf = Bytes::from(buf);
    parts
        .into_iter()
        .map(|part| match part {
            Part::Entry(start, end) => Reply::Raw(buf.slice(start..end)),
            Part::Gone(id) => Reply::Array(vec![reply::id(id), Reply::NullArray]),
        })
        .collect()
}

/// A `>` read without CLAIM (the usual one): new entries go straight from the
/// blocks into a pre-encoded reply (see [`cmd_range::forward`]), then each is delivered.
/// `None` if there is nothing new.
fn new_entries(
    stream: &mut Stream,
    req: &Request,
    now_ms: i64,
    budget: &mut Budget,
    effects: &mut Vec<GroupEffect>,
    more: &mut bool,
) -> Option<Reply> {
    let last_delivered = stream.group(&req.group)?.last_delivered_id;
    let count = if req.count == 0 { usize::MAX } else { usize::try_from(req.count).unwrap_or(usize::MAX) };
    let mut out = reply::EntriesBuilder::with_capacity(count);
    let extra = if req.counts { 2 } else { 0 };
    // A group with a policy serves its hand-back queue first (policies spec §4).
    handed_back(stream, req, now_ms, count, budget, &mut out, effects);
    let policy = stream.group(&req.group).and_then(|g| g.policy());
    if !req.noack && policy.is_some_and(Policy::orders) {
        let by_key = policy.is_some_and(|p| p.settings.order_by.is_some());
        *more = ordered(stream, req, now_ms, count, extra, budget, &mut out, effects);
        if by_key {
            return (out.len() > 0).then(|| out.finish());
        }
    }
    let served = out.len();
    // No entry can be above the last generated ID.
    let Some(start) = last_delivered.next().filter(|_| stream.last_generated_id() > last_delivered) else {
        return (served > 0).then(|| out.finish());
    };
    let mut ids: Vec<StreamId> = Vec::with_capacity(count.min(16));
    if req.counts {
        // Each new entry with idle time 0 and no earlier delivery, as CLAIM's new entries.
        let room = |n: usize| n < count;
        ids = new_after_claims(stream, req, &room, budget, &mut out);
    } else {
        cmd_range::forward(stream, start, StreamId::MAX, count, &mut out, |id, size| {
            let ok = budget.take(|| size as u64);
            if ok {
                ids.push(id);
            }
            ok
        });
        // An entry that failed to decode was admitted but not added.
        ids.truncate(out.len() - served);
    }
    if out.len() == 0 {
        return None;
    }
    for id in ids {
        let Some(g) = stream.group(&req.group) else { break };
        let entries_read = stream.entries_read_after(g, id);
        effects.push(stream.apply_group(GroupEffect::Delivered {
            group: req.group.clone(),
            consumer: req.consumer.clone(),
            id,
            time_ms: now_ms,
            entries_read,
            noack: req.noack,
        }));
    }
    Some(out.finish())
}

/// The hand-back queue of a group with a policy, first in a `>` read (policies spec §4): its
/// entries in ID order, while `count` and `budget` allow, each claimed by the reader (a
/// delivery counted). An entry whose payload is gone leaves the PEL (as XAUTOCLAIM drops it)
/// and takes no place in the reply, so the queue is walked until `count` entries are served:
/// a new entry is never served while a handed-back one waits. A NOACK read takes nothing from
/// the queue (it would leave nothing to redeliver).
fn handed_back(
    stream: &mut Stream,
    req: &Request,
    now_ms: i64,
    count: usize,
    budget: &mut Budget,
    out: &mut reply::EntriesBuilder,
    effects: &mut Vec<GroupEffect>,
) {
    if req.noack {
        return;
    }
    let Some(p) = stream.groups.get_mut(&req.group).and_then(|g| g.policy_mut()) else { return };
    p.promote_due(now_ms);
    let mut picks: Vec<(StreamId, u64)> = Vec::new();
    let mut gone = Vec::new();
    let extra = if req.counts { 2 } else { 0 };
    if let Some(g) = stream.group(&req.group) {
        let mut lookup = stream.lookup();
        for id in g.policy().into_iter().flat_map(|p| p.ready()) {
            if out.len() >= count {
                break;
            }
            let Some(size) = out.push_found(&mut lookup, id, extra) else {
                gone.push(id);
                continue;
            };
            let (time_ms, n) = g.pel().get(id).map_or((now_ms, 0), |e| (e.delivery_time_ms, e.delivery_count));
            // MAXSIZE counts the two trailing integers as 6 bytes, as for CLAIM's new entries.
            if !budget.take(|| (size + 3 * extra) as u64) {
                out.pop(size);
                break;
            }
            if req.counts {
                out.int(now_ms.wrapping_sub(time_ms).max(0));
                out.int(i64::try_from(n).unwrap_or(i64::MAX));
            }
            picks.push((id, n));
        }
    }
    for id in gone {
        effects.push(stream.apply_group(GroupEffect::Acked { group: req.group.clone(), id }));
    }
    for (id, n) in picks {
        effects.push(stream.apply_group(GroupEffect::Claimed {
            group: req.group.clone(),
            consumer: req.consumer.clone(),
            id,
            time_ms: now_ms,
            count: bump(n),
            active_ms: now_ms,
        }));
    }
}

/// The most entries one `>` read defers (ORDERBY): a read that meets this many entries of busy
/// keys stops there, and a blocking reader is re-run at once for the rest, so one hot key
/// cannot make a single read walk the whole stream.
const DEFER_MAX: usize = 10_000;

/// ORDERBY's part of a `>` read (policies spec §6), after the hand-back queue: first the
/// deferred entries whose key is free, in ID order, then new entries, where an entry whose key
/// has an entry in flight, waiting, or served by this read is deferred (the cursor passes it)
/// instead of served. Entries without the field are served as usual. Each entry gets `extra`
/// trailing integers 0 (XREADGROUP CLAIM's idle time and count of a new entry). Returns whether
/// it stopped at [`DEFER_MAX`] with entries left to look at.
#[allow(clippy::too_many_arguments)]
fn ordered(
    stream: &mut Stream,
    req: &Request,
    now_ms: i64,
    count: usize,
    extra: usize,
    budget: &mut Budget,
    out: &mut reply::EntriesBuilder,
    effects: &mut Vec<GroupEffect>,
) -> bool {
    // The size MAXSIZE counts for an entry with its trailing integers.
    let counted = |size: usize| (size + 3 * extra) as u64;
    let mut after = None;
    while out.len() < count {
        let order = stream.group(&req.group).and_then(|g| g.policy()).map(|p| &p.order);
        let Some(id) = order.and_then(|o| o.next_unblocked(after)) else { break };
        after = Some(id);
        let pushed = out.push_found(&mut stream.lookup(), id, extra);
        let Some(size) = pushed else {
            effects.push(stream.apply_group(GroupEffect::DeferredDropped { group: req.group.clone(), id }));
            continue;
        };
        if !budget.take(|| counted(size)) {
            out.pop(size);
            return false;
        }
        for _ in 0..extra {
            out.int(0);
        }
        let entries_read = stream.group(&req.group).and_then(|g| g.entries_read).map(|n| n.saturating_add(1));
        effects.push(stream.apply_group(GroupEffect::Delivered {
            group: req.group.clone(),
            consumer: req.consumer.clone(),
            id,
            time_ms: now_ms,
            entries_read,
            noack: false,
        }));
    }
    let Some(g) = stream.group(&req.group) else { return false };
    let (Some(p), last_delivered) = (g.policy(), g.last_delivered_id) else { return false };
    let Some(field) = p.settings.order_by.as_ref() else { return false };
    let Some(start) = last_delivered.next().filter(|_| stream.last_generated_id() > last_delivered) else {
        return false;
    };
    // Each new entry: `Some(key)` = deferred behind `key`, `None` = served.
    let mut plan: Vec<(StreamId, Option<Bytes>)> = Vec::new();
    let mut taken: std::collections::HashSet<Bytes> = std::collections::HashSet::new();
    let mut deferred = 0;
    let mut more = false;
    let mut lookup = stream.lookup();
    for (id, fields) in stream.range(start, StreamId::MAX, false) {
        if out.len() >= count {
            break;
        }
        if deferred >= DEFER_MAX {
            more = true;
            break;
        }
        if p.order.is_waiting(id) {
            continue;
        }
        let key = fields.into_iter().find(|(f, _)| f == field).map(|(_, v)| v);
        match key {
            Some(k) if p.order.blocked(&k) || taken.contains(&k) => {
                plan.push((id, Some(k)));
                deferred += 1;
            }
            key => {
                let Some(size) = out.push_found(&mut lookup, id, extra) else { continue };
                if !budget.take(|| counted(size)) {
                    out.pop(size);
                    break;
                }
                for _ in 0..extra {
                    out.int(0);
                }
                plan.push((id, None));
                taken.extend(key);
            }
        }
    }
    for (id, key) in plan {
        let effect = match key {
            Some(key) => GroupEffect::Deferred { group: req.group.clone(), id, key },
            None => {
                let Some(g) = stream.group(&req.group) else { break };
                GroupEffect::Delivered {
                    group: req.group.clone(),
                    consumer: req.consumer.clone(),
                    id,
                    time_ms: now_ms,
                    entries_read: stream.entries_read_after(g, id),
                    noack: false,
                }
            }
        };
        effects.push(stream.apply_group(effect));
    }
    more
}

/// A `>` read with CLAIM: pending entries idle for `min_idle` ms first, then new entries, all
/// 4-element, COUNT over both together. The entries go straight from the blocks into a
/// pre-encoded reply; `None` if there are none. Entries a policy must dead-letter instead of
/// delivering again go to `at_limit`.
#[allow(clippy::too_many_arguments)]
fn claim_and_new(
    stream: &mut Stream,
    req: &Request,
    min_idle: u64,
    now_ms: i64,
    budget: &mut Budget,
    effects: &mut Vec<GroupEffect>,
    at_limit: &mut Vec<StreamId>,
) -> Option<Reply> {
    let room = |n: usize| req.count == 0 || (n as u64) < req.count;
    let count = if req.count == 0 { usize::MAX } else { usize::try_from(req.count).unwrap_or(usize::MAX) };
    let mut out = reply::EntriesBuilder::with_capacity(count);
    // (ID, delivery count before this claim) of each entry added.
    let mut picks: Vec<(StreamId, u64)> = Vec::new();
    if let Some(g) = stream.group(&req.group) {
        let mut entries = stream.lookup();
        for (id, pending) in g.pel().claim_order() {
            let idle = now_ms.wrapping_sub(pending.delivery_time_ms);
            // Redis compares unsigned: a delivery time in the future counts as idle.
            if (idle as u64) < min_idle || !room(picks.len()) {
                break;
            }
            if policy_act::at_limit(stream, &req.group, id) {
                at_limit.push(id);
                continue;
            }
            // Entries whose payload is gone are skipped and left pending.
            let Some(size) = out.push_found(&mut entries, id, 2) else { continue };
            // MAXSIZE counts the entry as a 2-element one plus 20 bytes.
            if !budget.take(|| size as u64 + 20) {
                out.pop(size);
                break;
            }
            out.int(idle);
            out.int(i64::try_from(pending.delivery_count).unwrap_or(i64::MAX));
            picks.push((id, pending.delivery_count));
        }
    }
    for (id, count) in picks {
        effects.push(stream.apply_group(GroupEffect::Claimed {
            group: req.group.clone(),
            consumer: req.consumer.clone(),
            id,
            time_ms: now_ms,
            count: bump(count),
            active_ms: now_ms,
        }));
    }
    // ORDERBY decides which new entries (and deferred ones) a `>` read gets, with CLAIM too.
    if !req.noack && stream.group(&req.group).and_then(|g| g.policy()).is_some_and(|p| p.settings.order_by.is_some()) {
        ordered(stream, req, now_ms, count, 2, budget, &mut out, effects);
        return (out.len() > 0).then(|| out.finish());
    }
    let fresh = new_after_claims(stream, req, &room, budget, &mut out);
    for id in fresh {
        let Some(g) = stream.group(&req.group) else { break };
        let entries_read = stream.entries_read_after(g, id);
        effects.push(stream.apply_group(GroupEffect::Delivered {
            group: req.group.clone(),
            consumer: req.consumer.clone(),
            id,
            time_ms: now_ms,
            entries_read,
            noack: req.noack,
        }));
    }
    (out.len() > 0).then(|| out.finish())
}

/// The new entries [`claim_and_new`] adds after its claims, while `room` and `budget` allow:
/// 4-element (idle 0, count 0). Returns their IDs.
fn new_after_claims(
    stream: &Stream,
    req: &Request,
    room: &impl Fn(usize) -> bool,
    budget: &mut Budget,
    out: &mut reply::EntriesBuilder,
) -> Vec<StreamId> {
    let mut ids = Vec::new();
    let Some(last_delivered) = stream.group(&req.group).map(|g| g.last_delivered_id) else {
        return ids;
    };
    if stream.last_live_id().is_none_or(|last| last <= last_delivered) {
        return ids;
    }
    let Some(start) = last_delivered.next() else { return ids };
    // The block holding `start` is the last one keyed at or before it.
    let seek = stream.blocks.range(..=start).next_back().map_or(start, |(k, _)| *k);
    for (&first, block) in stream.blocks.range(seek..) {
        if block.last_id() < start {
            continue;
        }
        let Some(mut cursor) = block.cursor_from(first, start) else { continue };
        while let Some(p) = cursor.next_entry() {
            if p.deleted || p.id < start {
                continue;
            }
            if !room(out.len()) {
                return ids;
            }
            let Some(size) = out.push_extra(&cursor, &p, 2) else { return ids };
            // MAXSIZE counts the two trailing integers as 6 bytes.
            if !budget.take(|| (size + 6) as u64) {
                out.pop(size);
                return ids;
            }
            out.int(0);
            out.int(0);
            ids.push(p.id);
        }
    }
    ids
}

/// RESP3: a map key → entries. RESP2: an array of `[key, entries]` pairs.
fn render(served: Vec<(Bytes, Reply)>, resp3: bool) -> Reply {
    if resp3 {
        Reply::Map(served.into_iter().map(|(k, e)| (Reply::Bulk(k), e)).collect())
    } else {
        Reply::Array(served.into_iter().map(|(k, e)| Reply::Array(vec![Reply::Bulk(k), e])).collect())
    }
}
