//! Ranges over a sorted set: by rank, by score and by member bytes. ZRANGE (with BYSCORE,
//! BYLEX, REV, LIMIT, WITHSCORES), its older forms ZREVRANGE, ZRANGEBYSCORE,
//! ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX, ZRANGESTORE, the counts ZCOUNT and
//! ZLEXCOUNT, and the removals ZREMRANGEBYRANK / BYSCORE / BYLEX.
//!
//! Argument handling follows Redis' order: options first (an unknown word, or LIMIT without
//! two arguments, is a syntax error; LIMIT's numbers are read as they come), then the
//! conflicts (LIMIT with a rank range, WITHSCORES with BYLEX), then the range itself, and only
//! then the key. A reversed score or lex range is given as `max min`.

use super::set::{LexBound, ScoreBound, ZSet};
use super::{after_removal, existing_zset, members_reply, read_zset, store_result, zset_cmd};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::list::clamp_range;
use crate::types::{arg, is_token};
use crate::util::int_arg;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

const RO_ACCESS: &[crate::command::KeySpec] = &[key_at(1, &["RO", "ACCESS"])];
const RW_DELETE: &[crate::command::KeySpec] = &[key_at(1, &["RW", "DELETE"])];

const fn read_range(name: &'static str, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity: -4,
        flags: Flags::READONLY,
        acl: &["@read", "@sortedset", "@slow"],
        key_specs: RO_ACCESS,
        complexity: "O(log(N)+M): N the size of the sorted set, M the members replied.",
        ..zset_cmd(handler)
    }
}

const fn remove_range(name: &'static str, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity: 4,
        flags: Flags::WRITE,
        acl: &["@write", "@sortedset", "@slow"],
        key_specs: RW_DELETE,
        complexity: "O(log(N)+M): N the size of the sorted set, M the members removed.",
        ..zset_cmd(handler)
    }
}

/// `ZCOUNT key min max`
pub const ZCOUNT: CommandSpec = CommandSpec {
    name: "zcount",
    arity: 4,
    flags: Flags::READONLY.and(Flags::FAST),
    acl: &["@read", "@sortedset", "@fast"],
    key_specs: RO_ACCESS,
    summary: "Counts the members with scores in a range.",
    since: "2.0.0",
    complexity: "O(log(N))",
    syntax: "key:key min:double max:double",
    ..zset_cmd(Handler::Engine(zcount))
};

/// `ZLEXCOUNT key min max`
pub const ZLEXCOUNT: CommandSpec = CommandSpec {
    name: "zlexcount",
    arity: 4,
    flags: Flags::READONLY.and(Flags::FAST),
    acl: &["@read", "@sortedset", "@fast"],
    key_specs: RO_ACCESS,
    summary: "Counts the members in a lexicographical range (members of one score).",
    since: "2.8.9",
    complexity: "O(log(N))",
    syntax: "key:key min:string max:string",
    ..zset_cmd(Handler::Engine(zlexcount))
};

/// `ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`
pub const ZRANGE: CommandSpec = CommandSpec {
    summary: "Replies the members in a range of ranks, scores or member bytes.",
    since: "1.2.0",
    syntax: "key:key start:string stop:string [BYSCORE | BYLEX] [REV] [LIMIT offset:integer count:integer] \
             [WITHSCORES]",
    ..read_range("zrange", Handler::Engine(zrange))
};

/// `ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]`
pub const ZRANGESTORE: CommandSpec = CommandSpec {
    name: "zrangestore",
    arity: -5,
    flags: Flags::WRITE.and(Flags::DENYOOM),
    first_key: 1,
    last_key: 2,
    acl: &["@write", "@sortedset", "@slow"],
    key_specs: &[key_at(1, &["OW", "UPDATE"]), key_at(2, &["RO", "ACCESS"])],
    summary: "Stores a range of a sorted set at a key and replies its size.",
    since: "6.2.0",
    complexity: "O(log(N)+M): N the size of the sorted set, M the members stored.",
    syntax: "dst:key src:key min:string max:string [BYSCORE | BYLEX] [REV] [LIMIT offset:integer count:integer]",
    ..zset_cmd(Handler::Engine(zrangestore))
};

/// `ZREVRANGE key start stop [WITHSCORES]`
pub const ZREVRANGE: CommandSpec = CommandSpec {
    summary: "Replies the members in a range of ranks, highest score first.",
    since: "1.2.0",
    syntax: "key:key start:integer stop:integer [WITHSCORES]",
    ..read_range("zrevrange", Handler::Engine(zrevrange))
};

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`
pub const ZRANGEBYSCORE: CommandSpec = CommandSpec {
    summary: "Replies the members with scores in a range, lowest first.",
    since: "1.0.5",
    syntax: "key:key min:double max:double [WITHSCORES] [LIMIT offset:integer count:integer]",
    ..read_range("zrangebyscore", Handler::Engine(zrangebyscore))
};

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`
pub const ZREVRANGEBYSCORE: CommandSpec = CommandSpec {
    summary: "Replies the members with scores in a range, highest first.",
    since: "2.2.0",
    syntax: "key:key max:double min:double [WITHSCORES] [LIMIT offset:integer count:integer]",
    ..read_range("zrevrangebyscore", Handler::Engine(zrevrangebyscore))
};

/// `ZRANGEBYLEX key min max [LIMIT offset count]`
pub const ZRANGEBYLEX: CommandSpec = CommandSpec {
    summary: "Replies the members in a lexicographical range (members of one score).",
    since: "2.8.9",
    syntax: "key:key min:string max:string [LIMIT offset:integer count:integer]",
    ..read_range("zrangebylex", Handler::Engine(zrangebylex))
};

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`
pub const ZREVRANGEBYLEX: CommandSpec = CommandSpec {
    summary: "Replies the members in a lexicographical range, highest first.",
    since: "2.8.9",
    syntax: "key:key max:string min:string [LIMIT offset:integer count:integer]",
    ..read_range("zrevrangebylex", Handler::Engine(zrevrangebylex))
};

/// `ZREMRANGEBYRANK key start stop`
pub const ZREMRANGEBYRANK: CommandSpec = CommandSpec {
    summary: "Removes the members in a range of ranks; replies how many.",
    since: "2.0.0",
    syntax: "key:key start:integer stop:integer",
    ..remove_range("zremrangebyrank", Handler::Engine(zremrangebyrank))
};

/// `ZREMRANGEBYSCORE key min max`
pub const ZREMRANGEBYSCORE: CommandSpec = CommandSpec {
    summary: "Removes the members with scores in a range; replies how many.",
    since: "1.2.0",
    syntax: "key:key min:double max:double",
    ..remove_range("zremrangebyscore", Handler::Engine(zremrangebyscore))
};

/// `ZREMRANGEBYLEX key min max`
pub const ZREMRANGEBYLEX: CommandSpec = CommandSpec {
    summary: "Removes the members in a lexicographical range; replies how many.",
    since: "2.8.9",
    syntax: "key:key min:string max:string",
    ..remove_range("zremrangebylex", Handler::Engine(zremrangebylex))
};

const NOT_FLOAT_RANGE: CmdError = CmdError::full("ERR min or max is not a float");
const NOT_LEX_RANGE: CmdError = CmdError::full("ERR min or max not valid string range item");

/// A score bound: `(x` is exclusive; `x` is read as a double (`inf`, `-inf` included).
/// A score bound: `(x` is exclusive. The number is read as Redis reads it there: a decimal
/// double (`inf`, `-inf` included, no blanks around it, no hexadecimal), and an empty one is 0 (so `(` alone means
/// "above 0" and an empty argument "from 0").
pub(crate) fn parse_score_bound(raw: &[u8]) -> Result<ScoreBound, CmdError> {
    let (exclusive, text) = match raw.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, raw),
    };
    // Unlike a score argument, a bound is never read as hexadecimal.
    let hex = text.windows(2).any(|w| w.eq_ignore_ascii_case(b"0x"));
    let value = match () {
        _ if text.is_empty() => Some(0.0),
        _ if hex => None,
        _ => crate::util::parse_f64(text),
    };
    Ok(ScoreBound { value: value.ok_or(NOT_FLOAT_RANGE)?, exclusive })
}

/// A lex bound: `-`, `+`, `[member` or `(member`.
pub(crate) fn parse_lex_bound(raw: &[u8]) -> Result<LexBound, CmdError> {
    match raw.split_first() {
        Some((b'-', [])) => Ok(LexBound::Min),
        Some((b'+', [])) => Ok(LexBound::Max),
        Some((b'[', rest)) => Ok(LexBound::Member { value: Bytes::copy_from_slice(rest), exclusive: false }),
        Some((b'(', rest)) => Ok(LexBound::Member { value: Bytes::copy_from_slice(rest), exclusive: true }),
        _ => Err(NOT_LEX_RANGE),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rank,
    Score,
    Lex,
}

/// A parsed range request (everything but the key).
#[derive(Debug)]
enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

struct Request {
    range: Range,
    rev: bool,
    with_scores: bool,
    offset: i64,
    /// -1: no limit.
    limit: i64,
}

/// Parse a range request whose key is at `key_at` (the bounds follow it). `preset` is the
/// kind and direction an older command fixes (the ZRANGE keywords are then syntax errors).
fn parse_request(
    args: &[Bytes],
    key_at: usize,
    preset: Option<(Kind, bool)>,
    store: bool,
) -> Result<Request, CmdError> {
    let (mut kind, mut rev) = match preset {
        Some((k, r)) => (Some(k), Some(r)),
        None => (None, None),
    };
    let mut with_scores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = key_at + 3;
    while let Some(a) = args.get(j) {
        let left = args.len() - j - 1;
        if !store && is_token(a, "withscores") {
            with_scores = true;
        } else if is_token(a, "limit") && left >= 2 {
            offset = int_arg(arg(args, j + 1)?)?;
            limit = int_arg(arg(args, j + 2)?)?;
            j += 2;
        } else if rev.is_none() && is_token(a, "rev") {
            rev = Some(true);
        } else if kind.is_none() && is_token(a, "bylex") {
            kind = Some(Kind::Lex);
        } else if kind.is_none() && is_token(a, "byscore") {
            kind = Some(Kind::Score);
        } else {
            return Err(CmdError::SYNTAX);
        }
        j += 1;
    }
    let kind = kind.unwrap_or(Kind::Rank);
    let rev = rev.unwrap_or(false);
    if limit != -1 && kind == Kind::Rank {
        return Err(CmdError::full(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if with_scores && kind == Kind::Lex {
        return Err(CmdError::full("ERR syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut lo, mut hi) = (arg(args, key_at + 1)?, arg(args, key_at + 2)?);
    if rev && kind != Kind::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let range = match kind {
        Kind::Rank => Range::Rank(int_arg(lo)?, int_arg(hi)?),
        Kind::Score => Range::Score(
            parse_score_bound(lo).map_err(|_| NOT_FLOAT_RANGE)?,
            parse_score_bound(hi).map_err(|_| NOT_FLOAT_RANGE)?,
        ),
        Kind::Lex => Range::Lex(parse_lex_bound(lo)?, parse_lex_bound(hi)?),
    };
    Ok(Request { range, rev, with_scores, offset, limit })
}

/// The members a request selects, in reply order.
fn select(z: &ZSet, req: &Request) -> Vec<(Bytes, f64)> {
    let take = |it: &mut dyn Iterator<Item = &super::set::Scored>| -> Vec<(Bytes, f64)> {
        if req.offset < 0 || (req.offset > 0 && req.offset as u64 >= z.len() as u64) {
            return Vec::new();
        }
        let it = it.skip(req.offset as usize).map(|e| (e.member.clone(), e.score));
        match usize::try_from(req.limit) {
            Ok(n) => it.take(n).collect(),
            Err(_) => it.collect(),
        }
    };
    match &req.range {
        Range::Rank(start, stop) => {
            let Some((s, e)) = clamp_range(*start, *stop, z.len()) else { return Vec::new() };
            let n = e - s + 1;
            if req.rev {
                z.iter().rev().skip(s).take(n).map(|e| (e.member.clone(), e.score)).collect()
            } else {
                z.iter().skip(s).take(n).map(|e| (e.member.clone(), e.score)).collect()
            }
        }
        Range::Score(min, max) => {
            if req.rev {
                take(&mut z.score_range(*min, *max).rev())
            } else {
                take(&mut z.score_range(*min, *max))
            }
        }
        Range::Lex(min, max) => take(&mut z.lex_range(min, max, req.rev)),
    }
}

fn run_range(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    args: &[Bytes],
    preset: Option<(Kind, bool)>,
) -> Result<Reply, CmdError> {
    let req = parse_request(args, 1, preset, false)?;
    let Some(z) = read_zset(engine, ctx, arg(args, 1)?)? else { return Ok(Reply::Array(Vec::new())) };
    Ok(members_reply(select(z, &req), req.with_scores, ctx.resp3))
}

fn zrange(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    run_range(engine, ctx, args, None)
}

fn zrevrange(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    run_range(engine, ctx, args, Some((Kind::Rank, true)))
}

fn zrangebyscore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    run_range(engine, ctx, args, Some((Kind::Score, false)))
}

fn zrevrangebyscore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    run_range(engine, ctx, args, Some((Kind::Score, true)))
}

fn zrangebylex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    run_range(engine, ctx, args, Some((Kind::Lex, false)))
}

fn zrevrangebylex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    run_range(engine, ctx, args, Some((Kind::Lex, true)))
}

fn zrangestore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let dest = arg(args, 1)?;
    let req = parse_request(args, 2, None, true)?;
    let mut out = ZSet::new();
    if let Some(z) = read_zset(engine, ctx, arg(args, 2)?)? {
        for (m, s) in select(z, &req) {
            out.insert(m, s);
        }
    }
    store_result(engine, ctx, dest, out, KeyEvent::ZRangeStore)
}

fn zcount(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let min = parse_score_bound(arg(args, 2)?)?;
    let max = parse_score_bound(arg(args, 3)?)?;
    let z = read_zset(engine, ctx, arg(args, 1)?)?;
    Ok(Reply::Integer(z.map_or(0, |z| z.score_range(min, max).count() as i64)))
}

fn zlexcount(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let min = parse_lex_bound(arg(args, 2)?)?;
    let max = parse_lex_bound(arg(args, 3)?)?;
    let z = read_zset(engine, ctx, arg(args, 1)?)?;
    Ok(Reply::Integer(z.map_or(0, |z| z.lex_range(&min, &max, false).count() as i64)))
}

/// Remove the members `pick` selects from the set at `key`; reply how many.
fn remove_selected(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    key: &[u8],
    event: KeyEvent,
    pick: impl FnOnce(&ZSet) -> Vec<Bytes>,
) -> Result<Reply, CmdError> {
    let (removed, now_empty) = match existing_zset(engine, ctx, key)? {
        None => return Ok(Reply::Integer(0)),
        Some((z, _)) => {
            let members = pick(z);
            for m in &members {
                z.remove(m);
            }
            (members.len(), z.is_empty())
        }
    };
    if removed > 0 {
        after_removal(engine, ctx, key, now_empty, event);
    }
    Ok(Reply::Integer(removed as i64))
}

fn zremrangebyrank(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let start = int_arg(arg(args, 2)?)?;
    let stop = int_arg(arg(args, 3)?)?;
    remove_selected(engine, ctx, arg(args, 1)?, KeyEvent::ZRemRangeByRank, |z| {
        match clamp_range(start, stop, z.len()) {
            Some((s, e)) => z.iter().skip(s).take(e - s + 1).map(|e| e.member.clone()).collect(),
            None => Vec::new(),
        }
    })
}

fn zremrangebyscore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let min = parse_score_bound(arg(args, 2)?)?;
    let max = parse_score_bound(arg(args, 3)?)?;
    remove_selected(engine, ctx, arg(args, 1)?, KeyEvent::ZRemRangeByScore, |z| {
        z.score_range(min, max).map(|e| e.member.clone()).collect()
    })
}

fn zremrangebylex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let min = parse_lex_bound(arg(args, 2)?)?;
    let max = parse_lex_bound(arg(args, 3)?)?;
    remove_selected(engine, ctx, arg(args, 1)?, KeyEvent::ZRemRangeByLex, |z| {
        z.lex_range(&min, &max, false).map(|e| e.member.clone()).collect()
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::Harness;
    use rill_resp::Reply;

    fn bulks(items: &[&str]) -> Reply {
        Reply::Array(items.iter().map(|s| Reply::Bulk(s.to_string().into())).collect())
    }

    #[test]
    fn ranges_by_rank_score_and_lex() {
        let mut h = Harness::new();
        h.run(&["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"]);
        assert_eq!(h.run(&["ZRANGE", "z", "1", "-2"]), bulks(&["b", "c"]));
        assert_eq!(h.run(&["ZRANGE", "z", "0", "0", "REV"]), bulks(&["d"]));
        assert_eq!(h.run(&["ZRANGE", "z", "(1", "3", "BYSCORE"]), bulks(&["b", "c"]));
        assert_eq!(h.run(&["ZRANGE", "z", "3", "(1", "BYSCORE", "REV", "LIMIT", "1", "5"]), bulks(&["b"]));
        assert_eq!(h.run(&["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"]), bulks(&[]));
        assert_eq!(h.run(&["ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "0", "2"]), bulks(&["d", "c"]));
        h.run(&["ZADD", "l", "0", "a", "0", "b", "0", "c"]);
        assert_eq!(h.run(&["ZRANGEBYLEX", "l", "(a", "+"]), bulks(&["b", "c"]));
        assert_eq!(h.run(&["ZREVRANGEBYLEX", "l", "[b", "-"]), bulks(&["b", "a"]));
        assert_eq!(h.run(&["ZLEXCOUNT", "l", "-", "+"]), Reply::Integer(3));
        assert_eq!(h.run(&["ZCOUNT", "z", "(1", "(4"]), Reply::Integer(2));
        assert!(matches!(h.run(&["ZRANGE", "z", "0", "1", "LIMIT", "0", "1"]), Reply::Error(_)));
        assert!(matches!(h.run(&["ZRANGE", "l", "-", "+", "BYLEX", "WITHSCORES"]), Reply::Error(_)));
        assert!(matches!(h.run(&["ZCOUNT", "z", "x", "1"]), Reply::Error(_)));
        assert_eq!(h.run(&["ZRANGESTORE", "d", "z", "0", "1"]), Reply::Integer(2));
        assert_eq!(h.run(&["ZREMRANGEBYSCORE", "z", "2", "3"]), Reply::Integer(2));
        assert_eq!(h.run(&["ZREMRANGEBYRANK", "z", "0", "-1"]), Reply::Integer(2));
        assert_eq!(h.run(&["EXISTS", "z"]), Reply::Integer(0));
    }
}
