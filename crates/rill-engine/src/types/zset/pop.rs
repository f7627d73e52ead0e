//! Pops and random picks: ZPOPMIN, ZPOPMAX, BZPOPMIN, BZPOPMAX, ZMPOP, BZMPOP, ZRANDMEMBER.
//!
//! Reply shapes, as Redis sends them: ZPOPMIN/MAX a flat member/score array, except with a
//! COUNT in RESP3 (`[member, score]` pairs); BZPOPMIN/MAX `[key, member, score]`; ZMPOP and
//! BZMPOP `[key, [[member, score], ...]]` in both protocols, nil when nothing was popped.
//! A blocking pop parks the client on its keys (woken when one of them holds a sorted set);
//! it is re-run whole when woken, as in Redis. What the log and replicas get is Redis' form: a
//! served BZPOPMIN / BZPOPMAX as `ZPOPMIN|ZPOPMAX key`, ZMPOP / BZMPOP as
//! `ZPOPMIN|ZPOPMAX key <members popped>`.

use super::{after_removal, existing_zset, members_reply, read_zset, score_reply, zset_cmd};
use crate::command::{BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::effect::Effect;
use crate::keyspace::{BlockRequest, WakeOn};
use crate::types::list::parse_timeout;
use crate::types::{arg, is_token, negatable_int_arg, pick};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

const POP_KEYS: &[KeySpec] = &[crate::command::key_at(1, &["RW", "ACCESS", "DELETE"])];

const BLOCKING_KEYS: &[KeySpec] = &[KeySpec {
    flags: &["RW", "ACCESS", "DELETE"],
    begin: BeginSearch::Index(1),
    find: FindKeys::Range { lastkey: -2, keystep: 1, limit: 0 },
    notes: "",
}];

const fn pop_spec(name: &'static str, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity: -2,
        flags: Flags::WRITE.and(Flags::FAST),
        acl: &["@write", "@sortedset", "@fast"],
        key_specs: POP_KEYS,
        since: "5.0.0",
        complexity: "O(log(N)*M): N the size of the sorted set, M the members popped.",
        syntax: "key:key [count:integer]",
        ..zset_cmd(handler)
    }
}

const fn bpop_spec(name: &'static str, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        flags: Flags::WRITE.and(Flags::BLOCKING).and(Flags::FAST),
        last_key: -2,
        acl: &["@write", "@sortedset", "@fast", "@blocking"],
        key_specs: BLOCKING_KEYS,
        since: "5.0.0",
        complexity: "O(log(N)): N the size of the sorted set.",
        syntax: "key:key ... timeout:double",
        ..zset_cmd(handler)
    }
}

/// `ZPOPMIN key [count]`
pub const ZPOPMIN: CommandSpec = CommandSpec {
    summary: "Removes and replies the members with the lowest scores.",
    ..pop_spec("zpopmin", Handler::Engine(zpopmin))
};

/// `ZPOPMAX key [count]`
pub const ZPOPMAX: CommandSpec = CommandSpec {
    summary: "Removes and replies the members with the highest scores.",
    ..pop_spec("zpopmax", Handler::Engine(zpopmax))
};

/// `BZPOPMIN key [key ...] timeout`
pub const BZPOPMIN: CommandSpec = CommandSpec {
    summary: "Pops the lowest-scored member of the first non-empty sorted set, waiting for one if none.",
    ..bpop_spec("bzpopmin", Handler::Engine(bzpopmin))
};

/// `BZPOPMAX key [key ...] timeout`
pub const BZPOPMAX: CommandSpec = CommandSpec {
    summary: "Pops the highest-scored member of the first non-empty sorted set, waiting for one if none.",
    ..bpop_spec("bzpopmax", Handler::Engine(bzpopmax))
};

/// `ZMPOP numkeys key [key ...] MIN | MAX [COUNT count]`
pub const ZMPOP: CommandSpec = CommandSpec {
    name: "zmpop",
    arity: -4,
    flags: Flags::WRITE.and(Flags::MOVABLEKEYS),
    first_key: 0,
    last_key: 0,
    step: 0,
    acl: &["@write", "@sortedset", "@slow"],
    key_specs: &[KeySpec {
        flags: &["RW", "ACCESS", "DELETE"],
        begin: BeginSearch::Index(1),
        find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 },
        notes: "",
    }],
    summary: "Pops members with the lowest or highest scores from the first non-empty sorted set.",
    since: "7.0.0",
    complexity: "O(K) + O(M*log(N)): K keys, M members popped, N the size of the sorted set.",
    syntax: "numkeys:integer key:key ... MIN | MAX [COUNT count:integer]",
    ..zset_cmd(Handler::Engine(zmpop))
};

/// `BZMPOP timeout numkeys key [key ...] MIN | MAX [COUNT count]`
pub const BZMPOP: CommandSpec = CommandSpec {
    name: "bzmpop",
    arity: -5,
    flags: Flags::WRITE.and(Flags::BLOCKING).and(Flags::MOVABLEKEYS),
    first_key: 0,
    last_key: 0,
    step: 0,
    acl: &["@write", "@sortedset", "@slow", "@blocking"],
    key_specs: &[KeySpec {
        flags: &["RW", "ACCESS", "DELETE"],
        begin: BeginSearch::Index(2),
        find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 },
        notes: "",
    }],
    summary: "ZMPOP, waiting for a member if every sorted set is empty.",
    since: "7.0.0",
    complexity: "O(K) + O(M*log(N)): K keys, M members popped, N the size of the sorted set.",
    syntax: "timeout:double numkeys:integer key:key ... MIN | MAX [COUNT count:integer]",
    ..zset_cmd(Handler::Engine(bzmpop))
};

/// `ZRANDMEMBER key [count [WITHSCORES]]`
pub const ZRANDMEMBER: CommandSpec = CommandSpec {
    name: "zrandmember",
    arity: -2,
    flags: Flags::READONLY,
    acl: &["@read", "@sortedset", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[crate::command::key_at(1, &["RO", "ACCESS"])],
    summary: "Replies random members of a sorted set (repeats allowed with a negative count).",
    since: "6.2.0",
    complexity: "O(N) in the number of members replied.",
    syntax: "key:key [count:integer [WITHSCORES]]",
    ..zset_cmd(Handler::Engine(zrandmember))
};

/// How a pop is recorded for the log and replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    /// As the command itself (ZPOPMIN / ZPOPMAX: they replay as they ran).
    Itself,
    /// As `ZPOPMIN|ZPOPMAX key` (a served BZPOPMIN / BZPOPMAX), as Redis propagates it.
    Pop,
    /// As `ZPOPMIN|ZPOPMAX key n`, n the members popped (ZMPOP, BZMPOP).
    PopCount,
}

/// Pop up to `count` members from the set at `key` (lowest first, or highest with `max`):
/// `None` if the key is missing; another type is an error. Records the event, deletes an
/// emptied key and records the pop as `record` says.
fn pop_from(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    key: &Bytes,
    max: bool,
    count: usize,
    record: Record,
) -> Result<Option<Vec<(Bytes, f64)>>, CmdError> {
    let (popped, now_empty) = match existing_zset(engine, ctx, key)? {
        None => return Ok(None),
        Some((z, _)) => {
            let mut out = Vec::with_capacity(count.min(z.len()));
            while out.len() < count {
                let Some(e) = z.pop(max) else { break };
                out.push((e.member, e.score));
            }
            (out, z.is_empty())
        }
    };
    if !popped.is_empty() {
        after_removal(engine, ctx, key, now_empty, if max { KeyEvent::ZPopMax } else { KeyEvent::ZPopMin });
        let name = Bytes::from_static(if max { b"ZPOPMAX" } else { b"ZPOPMIN" });
        let args = match record {
            Record::Itself => None,
            Record::Pop => Some(vec![name, key.clone()]),
            Record::PopCount => Some(vec![name, key.clone(), Bytes::from(popped.len().to_string())]),
        };
        if let Some(args) = args {
            ctx.emit(Effect::Command { db: ctx.db, args });
        }
    }
    Ok(Some(popped))
}

fn pop_generic(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], max: bool) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let count = match args.get(2..).unwrap_or(&[]) {
        [] => None,
        [raw] => {
            let positive = CmdError::full("ERR value is out of range, must be positive");
            Some(parse_i64(raw).filter(|n| *n >= 0).ok_or(positive)?)
        }
        _ => return Err(CmdError::SYNTAX),
    };
    if count == Some(0) {
        read_zset(engine, ctx, key)?;
        return Ok(Reply::Array(Vec::new()));
    }
    let n = count.map_or(1, |c| usize::try_from(c).unwrap_or(usize::MAX));
    let popped = pop_from(engine, ctx, key, max, n, Record::Itself)?.unwrap_or_default();
    let nested = ctx.resp3 && count.is_some();
    Ok(if nested {
        members_reply(popped, true, true)
    } else {
        Reply::Array(popped.into_iter().flat_map(|(m, s)| [Reply::Bulk(m), score_reply(s)]).collect())
    })
}

fn zpopmin(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    pop_generic(engine, ctx, args, false)
}

fn zpopmax(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    pop_generic(engine, ctx, args, true)
}

/// Park the client on `keys` until one holds a sorted set (or the deadline passes).
fn block_on(ctx: &mut CallCtx, keys: &[Bytes], deadline: Option<i64>) {
    if !ctx.no_block {
        ctx.block = Some(BlockRequest {
            keys: keys.to_vec(),
            wakes_on: WakeOn::ZSet,
            deadline_ms: ctx.deadline_override.unwrap_or(deadline),
            timeout_reply: Reply::NullArray,
            rerun_args: None,
            wake_at_ms: None,
        });
    }
}

/// The first of `keys` holding a non-empty sorted set (a key of another type before it is
/// WRONGTYPE, as Redis checks each in turn).
fn first_nonempty<'k>(engine: &mut Engine, ctx: &CallCtx, keys: &'k [Bytes]) -> Result<Option<&'k Bytes>, CmdError> {
    for key in keys {
        match engine.lookup_mut(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
            None => continue,
            Some(Value::ZSet(z)) if z.is_empty() => continue,
            Some(Value::ZSet(_)) => return Ok(Some(key)),
            Some(_) => return Err(CmdError::WRONGTYPE),
        }
    }
    Ok(None)
}

fn bpop_generic(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], max: bool) -> Result<Reply, CmdError> {
    let keys = args.get(1..args.len().saturating_sub(1)).unwrap_or(&[]);
    let deadline = parse_timeout(arg(args, args.len().saturating_sub(1).max(2))?, ctx.now_ms)?;
    if let Some(key) = first_nonempty(engine, ctx, keys)? {
        let popped = pop_from(engine, ctx, key, max, 1, Record::Pop)?.unwrap_or_default();
        if let Some((m, s)) = popped.into_iter().next() {
            return Ok(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(m), score_reply(s)]));
        }
    }
    block_on(ctx, keys, deadline);
    Ok(Reply::NullArray)
}

fn bzpopmin(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    bpop_generic(engine, ctx, args, false)
}

fn bzpopmax(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    bpop_generic(engine, ctx, args, true)
}

/// A positive integer argument, or Redis' `msg` error (also for a non-integer).
fn positive(raw: &[u8], msg: &'static str) -> Result<usize, CmdError> {
    parse_i64(raw).filter(|n| *n > 0).and_then(|n| usize::try_from(n).ok()).ok_or(CmdError::full(msg))
}

/// ZMPOP / BZMPOP after the timeout: `numkeys key ... MIN|MAX [COUNT n]` from `at`.
fn parse_mpop(args: &[Bytes], at: usize) -> Result<(&[Bytes], bool, usize), CmdError> {
    let numkeys = positive(arg(args, at)?, "ERR numkeys should be greater than 0")?;
    let where_at = at.saturating_add(numkeys).saturating_add(1);
    let Some(side) = args.get(where_at) else { return Err(CmdError::SYNTAX) };
    let max = match () {
        _ if is_token(side, "min") => false,
        _ if is_token(side, "max") => true,
        _ => return Err(CmdError::SYNTAX),
    };
    let mut count = None;
    let mut j = where_at + 1;
    while let Some(opt) = args.get(j) {
        if count.is_none() && is_token(opt, "count") && j + 1 < args.len() {
            count = Some(positive(arg(args, j + 1)?, "ERR count should be greater than 0")?);
            j += 2;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    let keys = args.get(at + 1..where_at).unwrap_or(&[]);
    Ok((keys, max, count.unwrap_or(1)))
}

fn mpop_reply(key: &Bytes, popped: Vec<(Bytes, f64)>) -> Reply {
    let pairs = popped.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), score_reply(s)])).collect();
    Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Array(pairs)])
}

fn zmpop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (keys, max, count) = parse_mpop(args, 1)?;
    let Some(key) = first_nonempty(engine, ctx, keys)? else { return Ok(Reply::NullArray) };
    let popped = pop_from(engine, ctx, key, max, count, Record::PopCount)?.unwrap_or_default();
    Ok(mpop_reply(key, popped))
}

fn bzmpop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let timeout = arg(args, 1)?;
    let (keys, max, count) = parse_mpop(args, 2)?;
    let deadline = parse_timeout(timeout, ctx.now_ms)?;
    if let Some(key) = first_nonempty(engine, ctx, keys)? {
        let popped = pop_from(engine, ctx, key, max, count, Record::PopCount)?.unwrap_or_default();
        return Ok(mpop_reply(key, popped));
    }
    block_on(ctx, keys, deadline);
    Ok(Reply::NullArray)
}

/// The members (and scores) at these hash-index positions of the set at `key`.
fn entries_at(engine: &mut Engine, ctx: &CallCtx, key: &[u8], positions: &[usize]) -> Vec<(Bytes, f64)> {
    let picked = match engine.db(ctx.db).get_raw(key).map(|e| &e.value) {
        Some(Value::ZSet(z)) => positions.iter().filter_map(|&i| z.get_index(i)).map(|(m, s)| (m.clone(), s)).collect(),
        _ => Vec::new(),
    };
    engine.random_reads += positions.len() as u64;
    picked
}

/// The smallest count WITHSCORES accepts (Redis doubles it for the reply length).
const MIN_COUNT_WITH_SCORES: i64 = -(i64::MAX / 2);

fn zrandmember(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let count = args.get(2).map(|raw| negatable_int_arg(raw)).transpose()?;
    let with_scores = match args.get(3..).unwrap_or(&[]) {
        [] => false,
        [opt] if is_token(opt, "withscores") => true,
        _ => return Err(CmdError::SYNTAX),
    };
    if with_scores && count.is_some_and(|c| !(MIN_COUNT_WITH_SCORES..=-MIN_COUNT_WITH_SCORES).contains(&c)) {
        return Err(CmdError::full("ERR value is out of range"));
    }
    let Some(len) = read_zset(engine, ctx, key)?.map(|z| z.len()) else {
        return Ok(if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Null });
    };
    let Some(count) = count else {
        let at = pick::position(engine, len);
        let picked = entries_at(engine, ctx, key, &[at]);
        return Ok(picked.into_iter().next().map_or(Reply::Null, |(m, _)| Reply::Bulk(m)));
    };
    let picked = if count >= 0 {
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        let positions = pick::distinct_positions(engine, len, n);
        entries_at(engine, ctx, key, &positions)
    } else {
        // Grows with |count|, not with the set: checked against the client's reply budget
        // before anything is drawn, then with the members picked.
        let picks = count.unsigned_abs();
        ctx.reserve_reply(picks, if with_scores { 12 } else { 6 })?;
        let positions = pick::positions_with_repeats(engine, len, picks);
        let picked = entries_at(engine, ctx, key, &positions);
        let bytes = picked
            .iter()
            .map(|(m, _)| m.len() as u64 + 6 + if with_scores { 30 } else { 0 } + CallCtx::REPLY_ELEMENT_BYTES)
            .sum();
        ctx.check_reply_bytes(bytes)?;
        picked
    };
    Ok(members_reply(picked, with_scores, ctx.resp3))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::Harness;
    use rill_resp::Reply;

    #[test]
    fn pops_in_both_protocols() {
        let mut h = Harness::new();
        h.run(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
        assert_eq!(h.run(&["ZPOPMIN", "z"]), Reply::Array(vec![Reply::Bulk("a".into()), Reply::Double(1.0)]));
        assert_eq!(
            h.run(&["ZMPOP", "2", "nokey", "z", "MAX", "COUNT", "5"]),
            Reply::Array(vec![
                Reply::Bulk("z".into()),
                Reply::Array(vec![
                    Reply::Array(vec![Reply::Bulk("c".into()), Reply::Double(3.0)]),
                    Reply::Array(vec![Reply::Bulk("b".into()), Reply::Double(2.0)]),
                ]),
            ])
        );
        assert_eq!(h.run(&["EXISTS", "z"]), Reply::Integer(0));
        assert_eq!(h.run(&["ZMPOP", "1", "z", "MIN"]), Reply::NullArray);
        assert_eq!(h.run(&["ZMPOP", "0", "z", "MIN"]), Reply::Error("ERR numkeys should be greater than 0".into()));
        assert_eq!(h.run(&["ZPOPMAX", "z", "-1"]), Reply::Error("ERR value is out of range, must be positive".into()));
    }

    #[test]
    fn random_members_are_members() {
        let mut h = Harness::new();
        h.run(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
        let Reply::Array(items) = h.run(&["ZRANDMEMBER", "z", "-10"]) else { panic!() };
        assert_eq!(items.len(), 10);
        let Reply::Array(items) = h.run(&["ZRANDMEMBER", "z", "10", "WITHSCORES"]) else { panic!() };
        assert_eq!(items.len(), 6);
    }
}
