//! Sorted-set commands: ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK here;
//! ranges and counts (ZRANGE and its older forms, ZRANGESTORE, ZCOUNT, ZLEXCOUNT,
//! ZREMRANGEBY*) in [`range`]; pops and random picks (ZPOPMIN/MAX, BZPOPMIN/MAX, ZMPOP,
//! BZMPOP, ZRANDMEMBER) in [`pop`]; set algebra (ZUNION, ZINTER, ZDIFF, their STORE forms,
//! ZINTERCARD) in [`algebra`]; ZSCAN in [`scan`]. The structure is [`set::ZSet`].
//!
//! Redis behaviours we match on purpose:
//! - Scores are read as Redis reads a double (`inf`, `-inf`, exponents; NaN refused) and
//!   written as Redis writes one: a RESP3 double, a bulk string of the same text in RESP2.
//! - `WITHSCORES` replies are a flat member/score array in RESP2 and `[member, score]` pairs in
//!   RESP3.
//! - Removing the last member deletes the key; a write that changed nothing records nothing.
//! - The encoding OBJECT ENCODING reports (`listpack` / `skiplist`) follows Redis' rules with
//!   `zset-max-listpack-entries` / `zset-max-listpack-value` (see `object::encoding`).

pub(crate) mod algebra;
pub(crate) mod pop;
pub(crate) mod range;
pub(crate) mod scan;
pub mod set;

pub use set::ZSet;

use super::object::encoding;
use super::object::meta::ObjectMeta;
use super::{arg, delete_key, is_token, owned};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// A sorted-set command on the key at index 1.
pub(crate) const fn zset_cmd(handler: Handler) -> CommandSpec {
    CommandSpec { first_key: 1, last_key: 1, step: 1, group: "sorted_set", ..CommandSpec::of(handler) }
}

const READ_FAST: Flags = Flags::READONLY.and(Flags::FAST);
const RO_ACCESS: &[crate::command::KeySpec] = &[key_at(1, &["RO", "ACCESS"])];

/// The sorted-set commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "zadd",
        arity: -4,
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST),
        acl: &["@write", "@sortedset", "@fast"],
        key_specs: &[key_at(1, &["RW", "UPDATE"])],
        summary: "Adds members with scores to a sorted set, or updates their scores, creating the key.",
        since: "1.2.0",
        complexity: "O(log(N)) for each member added, N the size of the sorted set.",
        syntax: "key:key [NX | XX] [GT | LT] [CH] [INCR] score:double member:string ...",
        ..zset_cmd(Handler::Engine(zadd))
    },
    CommandSpec {
        name: "zincrby",
        arity: 4,
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST),
        acl: &["@write", "@sortedset", "@fast"],
        key_specs: &[key_at(1, &["RW", "ACCESS", "UPDATE"])],
        summary: "Increments a member's score (adding it at the increment if absent); replies the new score.",
        since: "1.2.0",
        complexity: "O(log(N)), N the size of the sorted set.",
        syntax: "key:key increment:integer member:string",
        ..zset_cmd(Handler::Engine(zincrby))
    },
    CommandSpec {
        name: "zrem",
        arity: -3,
        flags: Flags::WRITE.and(Flags::FAST),
        acl: &["@write", "@sortedset", "@fast"],
        key_specs: &[key_at(1, &["RW", "DELETE"])],
        summary: "Removes members from a sorted set and replies how many were there.",
        since: "1.2.0",
        complexity: "O(M*log(N)): M members removed, N the size of the sorted set.",
        syntax: "key:key member:string ...",
        ..zset_cmd(Handler::Engine(zrem))
    },
    CommandSpec {
        name: "zcard",
        arity: 2,
        flags: READ_FAST,
        acl: &["@read", "@sortedset", "@fast"],
        key_specs: &[key_at(1, &["RO"])],
        summary: "Replies the number of members of a sorted set.",
        since: "1.2.0",
        complexity: "O(1)",
        syntax: "key:key",
        ..zset_cmd(Handler::Engine(zcard))
    },
    CommandSpec {
        name: "zscore",
        arity: 3,
        flags: READ_FAST,
        acl: &["@read", "@sortedset", "@fast"],
        key_specs: RO_ACCESS,
        summary: "Replies a member's score, or nil.",
        since: "1.2.0",
        complexity: "O(1)",
        syntax: "key:key member:string",
        ..zset_cmd(Handler::Engine(zscore))
    },
    CommandSpec {
        name: "zmscore",
        arity: -3,
        flags: READ_FAST,
        acl: &["@read", "@sortedset", "@fast"],
        key_specs: RO_ACCESS,
        summary: "Replies the scores of several members (nil for a missing one).",
        since: "6.2.0",
        complexity: "O(N) in the number of members asked for.",
        syntax: "key:key member:string ...",
        ..zset_cmd(Handler::Engine(zmscore))
    },
    CommandSpec {
        name: "zrank",
        arity: -3,
        flags: READ_FAST,
        acl: &["@read", "@sortedset", "@fast"],
        key_specs: RO_ACCESS,
        summary: "Replies a member's rank from the lowest score, optionally with its score.",
        since: "2.0.0",
        complexity: "O(log(N))",
        syntax: "key:key member:string [WITHSCORE]",
        ..zset_cmd(Handler::Engine(zrank))
    },
    CommandSpec {
        name: "zrevrank",
        arity: -3,
        flags: READ_FAST,
        acl: &["@read", "@sortedset", "@fast"],
        key_specs: RO_ACCESS,
        summary: "Replies a member's rank from the highest score, optionally with its score.",
        since: "2.0.0",
        complexity: "O(log(N))",
        syntax: "key:key member:string [WITHSCORE]",
        ..zset_cmd(Handler::Engine(zrevrank))
    },
    range::ZCOUNT,
    range::ZLEXCOUNT,
    range::ZRANGE,
    range::ZRANGESTORE,
    range::ZREVRANGE,
    range::ZRANGEBYSCORE,
    range::ZREVRANGEBYSCORE,
    range::ZRANGEBYLEX,
    range::ZREVRANGEBYLEX,
    range::ZREMRANGEBYRANK,
    range::ZREMRANGEBYSCORE,
    range::ZREMRANGEBYLEX,
    pop::ZPOPMIN,
    pop::ZPOPMAX,
    pop::BZPOPMIN,
    pop::BZPOPMAX,
    pop::ZMPOP,
    pop::BZMPOP,
    pop::ZRANDMEMBER,
    algebra::ZUNION,
    algebra::ZINTER,
    algebra::ZDIFF,
    algebra::ZUNIONSTORE,
    algebra::ZINTERSTORE,
    algebra::ZDIFFSTORE,
    algebra::ZINTERCARD,
    scan::ZSCAN,
];

// ---------------------------------------------------------------------------------------------
// Shared helpers

/// A score argument: a double as Redis reads one, never NaN.
pub(crate) fn parse_score(raw: &[u8]) -> Result<f64, CmdError> {
    crate::util::parse_f64(raw).ok_or(CmdError::NOT_FLOAT)
}

/// The sorted set at `key` for reading (`None` if missing).
pub(crate) fn read_zset<'e>(engine: &'e mut Engine, ctx: &CallCtx, key: &[u8]) -> Result<Option<&'e ZSet>, CmdError> {
    match engine.lookup_read(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(CmdError::WRONGTYPE),
    }
}

/// The sorted set at `key` for writing, with its metadata (`None` if missing).
pub(crate) fn existing_zset<'e>(
    engine: &'e mut Engine,
    ctx: &CallCtx,
    key: &[u8],
) -> Result<Option<(&'e mut ZSet, &'e mut ObjectMeta)>, CmdError> {
    match engine.lookup_mut(ctx.db, key, ctx.now_ms) {
        None => Ok(None),
        Some(crate::Entry { value: Value::ZSet(z), meta, .. }) => Ok(Some((z, meta))),
        Some(_) => Err(CmdError::WRONGTYPE),
    }
}

/// After members were removed: the event, and the key deleted if it is empty now.
pub(crate) fn after_removal(engine: &mut Engine, ctx: &CallCtx, key: &[u8], now_empty: bool, event: KeyEvent) {
    if now_empty {
        engine.record_event(ctx.db, key, event);
        delete_key(engine, ctx.db, key);
    } else {
        engine.modified(ctx.db, key, event);
    }
}

/// A score as a reply: a RESP3 double, a bulk string in RESP2.
pub(crate) fn score_reply(score: f64) -> Reply {
    Reply::Double(score)
}

/// Members, with their scores if `with_scores`: a flat array in RESP2 and plain member lists,
/// `[member, score]` pairs in RESP3.
pub(crate) fn members_reply(items: Vec<(Bytes, f64)>, with_scores: bool, resp3: bool) -> Reply {
    if !with_scores {
        return Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect());
    }
    if resp3 {
        Reply::Array(items.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), score_reply(s)])).collect())
    } else {
        Reply::Array(items.into_iter().flat_map(|(m, s)| [Reply::Bulk(m), score_reply(s)]).collect())
    }
}

/// Store `zset` at `dest` for a *STORE command (replacing whatever was there, deleting `dest`
/// when the result is empty) and reply its size. The result is encoded as Redis encodes a
/// sorted set built in one go.
pub(crate) fn store_result(
    engine: &mut Engine,
    ctx: &CallCtx,
    dest: &Bytes,
    mut zset: ZSet,
    event: KeyEvent,
) -> Result<Reply, CmdError> {
    if encoding::zset_built_as_listpack(&zset, &engine.config.object) {
        zset.positive_zeros();
    }
    let len = zset.len();
    // A write lookup first: an old destination whose time passed goes as expired.
    engine.lookup_mut(ctx.db, dest, ctx.now_ms);
    if len == 0 {
        delete_key(engine, ctx.db, dest);
        return Ok(Reply::Integer(0));
    }
    engine.set_key(ctx.db, dest, Value::ZSet(zset), false);
    engine.modified(ctx.db, dest, event);
    Ok(Reply::Integer(len as i64))
}

// ---------------------------------------------------------------------------------------------
// ZADD, ZINCRBY

/// ZADD's options.
#[derive(Debug, Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What one ZADD pair did.
enum Added {
    /// A new member.
    New(f64),
    /// An existing member's score changed.
    Updated(f64),
    /// An existing member kept its score (an increment of 0, or the same score).
    Same(f64),
    /// Nothing: refused by NX / XX / GT / LT.
    Skipped,
}

/// Apply one pair under `flags` (Redis' `zsetAdd`). An increment that would make NaN is the
/// only error. `listpack`: the set is a listpack once this is done, which stores -0 as 0 (the
/// reply still says the score computed, -0 included, as Redis' does).
fn add_one(z: &mut ZSet, member: &Bytes, score: f64, flags: AddFlags, listpack: bool) -> Result<Added, CmdError> {
    let stored = |s: f64| if listpack && s == 0.0 { 0.0 } else { s };
    match z.score(member) {
        Some(current) => {
            if flags.nx {
                return Ok(Added::Skipped);
            }
            let new = if flags.incr { current + score } else { score };
            if new.is_nan() {
                return Err(CmdError::full("ERR resulting score is not a number (NaN)"));
            }
            if (flags.lt && new >= current) || (flags.gt && new <= current) {
                return Ok(Added::Skipped);
            }
            if new == current {
                return Ok(Added::Same(new));
            }
            z.insert(member.clone(), stored(new));
            Ok(Added::Updated(new))
        }
        None => {
            if flags.xx {
                return Ok(Added::Skipped);
            }
            z.insert(owned(member), stored(score));
            Ok(Added::New(score))
        }
    }
}

/// `ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member ...` (GEOADD runs it too).
pub(crate) fn zadd(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let mut flags = AddFlags::default();
    let mut i = 2;
    while let Some(a) = args.get(i) {
        match () {
            _ if is_token(a, "nx") => flags.nx = true,
            _ if is_token(a, "xx") => flags.xx = true,
            _ if is_token(a, "gt") => flags.gt = true,
            _ if is_token(a, "lt") => flags.lt = true,
            _ if is_token(a, "ch") => flags.ch = true,
            _ if is_token(a, "incr") => flags.incr = true,
            _ => break,
        }
        i += 1;
    }
    let rest = args.get(i..).unwrap_or(&[]);
    if rest.is_empty() || rest.len() % 2 != 0 {
        return Err(CmdError::SYNTAX);
    }
    if flags.nx && flags.xx {
        return Err(CmdError::full("ERR XX and NX options at the same time are not compatible"));
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        return Err(CmdError::full("ERR GT, LT, and/or NX options at the same time are not compatible"));
    }
    if flags.incr && rest.len() > 2 {
        return Err(CmdError::full("ERR INCR option supports a single increment-element pair"));
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks_exact(2) {
        if let [score, member] = pair {
            pairs.push((parse_score(score)?, member));
        }
    }
    let cfg = engine.config.object;
    let exists = match engine.lookup_mut(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => false,
        Some(Value::ZSet(_)) => true,
        Some(_) => return Err(CmdError::WRONGTYPE),
    };
    if !exists && flags.xx {
        return Ok(if flags.incr { Reply::Null } else { Reply::Integer(0) });
    }
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::ZSet(Default::default()));
    let Value::ZSet(z) = &mut entry.value else { return Err(CmdError::WRONGTYPE) };
    let meta = &mut entry.meta;
    if exists {
        encoding::zset_before_add(meta, z, pairs.len(), &cfg);
    } else {
        let first_len = pairs.first().map_or(0, |(_, m)| m.len());
        encoding::zset_created(meta, pairs.len(), first_len, &cfg);
    }
    let (mut added, mut updated) = (0i64, 0i64);
    let mut last: Option<f64> = None;
    let mut failure = None;
    for (score, member) in pairs {
        let listpack = encoding::zset_listpack_after(meta, z, member.len(), z.score(member).is_none(), &cfg);
        match add_one(z, member, score, flags, listpack) {
            Ok(Added::New(s)) => {
                added += 1;
                encoding::zset_added(meta, z, member.len(), &cfg);
                last = Some(s);
            }
            Ok(Added::Updated(s)) => {
                updated += 1;
                last = Some(s);
            }
            Ok(Added::Same(s)) => last = Some(s),
            Ok(Added::Skipped) => last = None,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let now_empty = z.is_empty();
    if now_empty {
        // Only a new key can be empty here (XX/NX refused every pair): it was never there.
        engine.remove(ctx.db, key);
    } else if added + updated > 0 {
        engine.modified(ctx.db, key, if flags.incr { KeyEvent::ZIncr } else { KeyEvent::ZAdd });
        if added > 0 {
            engine.signal_ready(ctx.db, key);
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(if flags.incr {
        last.map_or(Reply::Null, score_reply)
    } else {
        Reply::Integer(if flags.ch { added + updated } else { added })
    })
}

fn zincrby(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, incr, member) = (arg(args, 1)?, arg(args, 2)?, arg(args, 3)?);
    let incr = parse_score(incr)?;
    let cfg = engine.config.object;
    if let Some(Value::ZSet(_)) | None = engine.lookup_mut(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
    } else {
        return Err(CmdError::WRONGTYPE);
    }
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::ZSet(Default::default()));
    let Value::ZSet(z) = &mut entry.value else { return Err(CmdError::WRONGTYPE) };
    let meta = &mut entry.meta;
    if z.is_empty() {
        encoding::zset_created(meta, 1, member.len(), &cfg);
    }
    let flags = AddFlags { incr: true, ..AddFlags::default() };
    let listpack = encoding::zset_listpack_after(meta, z, member.len(), z.score(member).is_none(), &cfg);
    let outcome = add_one(z, member, incr, flags, listpack);
    let now_empty = z.is_empty();
    let score = match outcome {
        Ok(Added::New(s)) => {
            encoding::zset_added(meta, z, member.len(), &cfg);
            engine.modified(ctx.db, key, KeyEvent::ZIncr);
            engine.signal_ready(ctx.db, key);
            s
        }
        Ok(Added::Updated(s)) => {
            engine.modified(ctx.db, key, KeyEvent::ZIncr);
            s
        }
        Ok(Added::Same(s)) => s,
        Ok(Added::Skipped) => return Ok(Reply::Null),
        Err(e) => {
            if now_empty {
                engine.remove(ctx.db, key);
            }
            return Err(e);
        }
    };
    Ok(score_reply(score))
}

// ---------------------------------------------------------------------------------------------
// ZREM and the reads

fn zrem(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let (removed, now_empty) = match existing_zset(engine, ctx, key)? {
        None => return Ok(Reply::Integer(0)),
        Some((z, _)) => {
            let removed = args.iter().skip(2).filter(|m| z.remove(m).is_some()).count();
            (removed, z.is_empty())
        }
    };
    if removed > 0 {
        after_removal(engine, ctx, key, now_empty, KeyEvent::ZRem);
    }
    Ok(Reply::Integer(removed as i64))
}

fn zcard(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let z = read_zset(engine, ctx, arg(args, 1)?)?;
    Ok(Reply::Integer(z.map_or(0, |z| z.len() as i64)))
}

fn zscore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let member = arg(args, 2)?;
    let z = read_zset(engine, ctx, arg(args, 1)?)?;
    Ok(z.and_then(|z| z.score(member)).map_or(Reply::Null, score_reply))
}

fn zmscore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let z = read_zset(engine, ctx, arg(args, 1)?)?;
    let members = args.get(2..).unwrap_or(&[]);
    Ok(Reply::Array(members.iter().map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Null, score_reply)).collect()))
}

fn rank_generic(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], rev: bool) -> Result<Reply, CmdError> {
    let (key, member) = (arg(args, 1)?, arg(args, 2)?);
    let with_score = match args.get(3..).unwrap_or(&[]) {
        [] => false,
        [w] if is_token(w, "withscore") => true,
        [_] => return Err(CmdError::SYNTAX),
        _ => return Err(super::arity_error(args)),
    };
    let z = read_zset(engine, ctx, key)?;
    let found = z.and_then(|z| Some((z.rank(member, rev)?, z.score(member)?)));
    Ok(match (found, with_score) {
        (None, false) => Reply::Null,
        (None, true) => Reply::NullArray,
        (Some((rank, _)), false) => Reply::Integer(rank as i64),
        (Some((rank, score)), true) => Reply::Array(vec![Reply::Integer(rank as i64), score_reply(score)]),
    })
}

fn zrank(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    rank_generic(engine, ctx, args, false)
}

fn zrevrank(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    rank_generic(engine, ctx, args, true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::Harness;
    use rill_resp::Reply;

    #[test]
    fn zadd_options_and_replies() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["ZADD", "z", "1", "a", "2", "b"]), Reply::Integer(2));
        assert_eq!(h.run(&["ZADD", "z", "XX", "CH", "5", "a", "3", "c"]), Reply::Integer(1));
        assert_eq!(h.run(&["ZADD", "z", "GT", "CH", "1", "a", "9", "b"]), Reply::Integer(1));
        assert_eq!(h.run(&["ZADD", "z", "INCR", "1.5", "a"]), Reply::Double(6.5));
        assert_eq!(h.run(&["ZADD", "z", "NX", "INCR", "1", "a"]), Reply::Null);
        assert_eq!(h.run(&["ZADD", "nokey", "XX", "1", "a"]), Reply::Integer(0));
        assert_eq!(h.run(&["EXISTS", "nokey"]), Reply::Integer(0));
        assert!(matches!(h.run(&["ZADD", "z", "NX", "XX", "1", "a"]), Reply::Error(_)));
        assert!(matches!(h.run(&["ZADD", "z", "1"]), Reply::Error(_)));
        assert!(matches!(h.run(&["ZADD", "z", "nan", "a"]), Reply::Error(_)));
        h.run(&["ZADD", "inf", "inf", "x"]);
        let e = h.run(&["ZINCRBY", "inf", "-inf", "x"]);
        assert_eq!(e, Reply::Error("ERR resulting score is not a number (NaN)".into()));
    }

    #[test]
    fn ranks_and_scores() {
        let mut h = Harness::new();
        h.run(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
        assert_eq!(h.run(&["ZRANK", "z", "b"]), Reply::Integer(1));
        assert_eq!(
            h.run(&["ZREVRANK", "z", "b", "WITHSCORE"]),
            Reply::Array(vec![Reply::Integer(1), Reply::Double(2.0)])
        );
        assert_eq!(h.run(&["ZRANK", "z", "x", "WITHSCORE"]), Reply::NullArray);
        assert_eq!(h.run(&["ZREM", "z", "a", "b", "c", "d"]), Reply::Integer(3));
        assert_eq!(h.run(&["EXISTS", "z"]), Reply::Integer(0));
    }
}
