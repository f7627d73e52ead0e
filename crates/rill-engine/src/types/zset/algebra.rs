//! Set algebra over sorted sets (and plain sets, whose members score 1): ZUNION, ZINTER,
//! ZDIFF, ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE, ZINTERCARD.
//!
//! As in Redis: the input keys are looked up (and type-checked) before the options are read;
//! each input's scores are multiplied by its WEIGHT (with `AGGREGATE COUNT`, newer than Redis
//! 8.2, each input a member is in counts its weight instead), and a product or a SUM that is NaN
//! (`inf * 0`, `inf + -inf`) counts as 0; the union and intersection take the inputs from the
//! smallest to the largest, so sums add up in that order; ZDIFF keeps the first input's scores.

use super::set::ZSet;
use super::{members_reply, parse_score, store_result, zset_cmd};
use crate::command::{key_at, BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::types::{arg, is_token};
use crate::util::int_arg;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use indexmap::IndexMap;
use rill_resp::Reply;

const fn read_algebra(name: &'static str, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        flags: Flags::READONLY.and(Flags::MOVABLEKEYS),
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["@read", "@sortedset", "@slow"],
        key_specs: &[KeySpec {
            flags: &["RO", "ACCESS"],
            begin: BeginSearch::Index(1),
            find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 },
            notes: "",
        }],
        since: "6.2.0",
        ..zset_cmd(handler)
    }
}

const STORE_KEYS: &[KeySpec] = &[
    key_at(1, &["OW", "UPDATE"]),
    KeySpec {
        flags: &["RO", "ACCESS"],
        begin: BeginSearch::Index(2),
        find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 },
        notes: "",
    },
];

const fn store_algebra(name: &'static str, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity: -4,
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::MOVABLEKEYS),
        acl: &["@write", "@sortedset", "@slow"],
        key_specs: STORE_KEYS,
        ..zset_cmd(handler)
    }
}

const UNION_COMPLEXITY: &str = "O(N)+O(M*log(M)): N the total size of the inputs, M the result's size.";
const INTER_COMPLEXITY: &str = "O(N*K)+O(M*log(M)): N the smallest input, K inputs, M the result's size.";
const DIFF_COMPLEXITY: &str = "O(L + (N-K)log(N)): L the total size of the inputs, K the result's size.";

/// `ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM | MIN | MAX | COUNT] [WITHSCORES]`
pub const ZUNION: CommandSpec = CommandSpec {
    summary: "Replies the union of sorted sets.",
    complexity: UNION_COMPLEXITY,
    syntax: "numkeys:integer key:key ... [WEIGHTS weight:integer ...] [AGGREGATE SUM | MIN | MAX | COUNT] [WITHSCORES]",
    ..read_algebra("zunion", Handler::Engine(zunion))
};

/// `ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM | MIN | MAX | COUNT] [WITHSCORES]`
pub const ZINTER: CommandSpec = CommandSpec {
    summary: "Replies the intersection of sorted sets.",
    complexity: INTER_COMPLEXITY,
    syntax: "numkeys:integer key:key ... [WEIGHTS weight:integer ...] [AGGREGATE SUM | MIN | MAX | COUNT] [WITHSCORES]",
    ..read_algebra("zinter", Handler::Engine(zinter))
};

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`
pub const ZDIFF: CommandSpec = CommandSpec {
    summary: "Replies the members of the first sorted set that are in none of the others.",
    complexity: DIFF_COMPLEXITY,
    syntax: "numkeys:integer key:key ... [WITHSCORES]",
    ..read_algebra("zdiff", Handler::Engine(zdiff))
};

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]`
pub const ZUNIONSTORE: CommandSpec = CommandSpec {
    summary: "Stores the union of sorted sets at a key and replies its size.",
    since: "2.0.0",
    complexity: UNION_COMPLEXITY,
    syntax:
        "destination:key numkeys:integer key:key ... [WEIGHTS weight:integer ...] [AGGREGATE SUM | MIN | MAX | COUNT]",
    ..store_algebra("zunionstore", Handler::Engine(zunionstore))
};

/// `ZINTERSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]`
pub const ZINTERSTORE: CommandSpec = CommandSpec {
    summary: "Stores the intersection of sorted sets at a key and replies its size.",
    since: "2.0.0",
    complexity: INTER_COMPLEXITY,
    syntax:
        "destination:key numkeys:integer key:key ... [WEIGHTS weight:integer ...] [AGGREGATE SUM | MIN | MAX | COUNT]",
    ..store_algebra("zinterstore", Handler::Engine(zinterstore))
};

/// `ZDIFFSTORE destination numkeys key [key ...]`
pub const ZDIFFSTORE: CommandSpec = CommandSpec {
    summary: "Stores the difference of sorted sets at a key and replies its size.",
    since: "6.2.0",
    complexity: DIFF_COMPLEXITY,
    syntax: "destination:key numkeys:integer key:key ...",
    ..store_algebra("zdiffstore", Handler::Engine(zdiffstore))
};

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`
pub const ZINTERCARD: CommandSpec = CommandSpec {
    summary: "Counts the members of the intersection of sorted sets, optionally stopping at a limit.",
    since: "7.0.0",
    complexity: "O(N*K): N the smallest input, K inputs.",
    syntax: "numkeys:integer key:key ... [LIMIT limit:integer]",
    ..read_algebra("zintercard", Handler::Engine(zintercard))
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
    /// Each input a member is in adds that input's weight (newer Redis than 8.2).
    Count,
}

/// One input: its members with their (unweighted) scores, and its weight.
struct Input {
    members: Vec<(Bytes, f64)>,
    weight: f64,
}

fn weighted(score: f64, weight: f64, how: Aggregate) -> f64 {
    if how == Aggregate::Count {
        return weight;
    }
    let s = score * weight;
    if s.is_nan() {
        0.0
    } else {
        s
    }
}

fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum | Aggregate::Count => {
            *target += value;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if value < *target {
                *target = value;
            }
        }
        Aggregate::Max => {
            if value > *target {
                *target = value;
            }
        }
    }
}

/// What a command asked for.
struct Request {
    inputs: Vec<Input>,
    aggregate: Aggregate,
    with_scores: bool,
    limit: u64,
}

/// Read `numkeys` and the keys from `at`, then the options (see the module doc for the order).
fn parse(
    engine: &mut Engine,
    ctx: &CallCtx,
    args: &[Bytes],
    at: usize,
    op: Op,
    store: bool,
    card_only: bool,
) -> Result<Request, CmdError> {
    let numkeys = int_arg(arg(args, at)?)?;
    if numkeys < 1 {
        let name = String::from_utf8_lossy(arg(args, 0)?).to_ascii_lowercase();
        return Err(CmdError::owned(format!("ERR at least 1 input key is needed for '{name}' command")));
    }
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > args.len().saturating_sub(at + 1) {
        return Err(CmdError::SYNTAX);
    }
    let keys = args.get(at + 1..at + 1 + numkeys).unwrap_or(&[]);
    let mut inputs = Vec::with_capacity(keys.len());
    for key in keys {
        let members = match engine.lookup_read(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
            None => Vec::new(),
            Some(Value::ZSet(z)) => z.iter().map(|e| (e.member.clone(), e.score)).collect(),
            Some(Value::Set(s)) => s.iter().map(|m| (Bytes::copy_from_slice(m), 1.0)).collect(),
            Some(_) => return Err(CmdError::WRONGTYPE),
        };
        inputs.push(Input { members, weight: 1.0 });
    }
    let mut req = Request { inputs, aggregate: Aggregate::Sum, with_scores: false, limit: 0 };
    let mut j = at + 1 + numkeys;
    while let Some(a) = args.get(j) {
        let remaining = args.len() - j;
        if op != Op::Diff && !card_only && remaining > numkeys && is_token(a, "weights") {
            for (i, input) in req.inputs.iter_mut().enumerate() {
                input.weight = parse_score(arg(args, j + 1 + i)?)
                    .map_err(|_| CmdError::full("ERR weight value is not a float"))?;
            }
            j += 1 + numkeys;
        } else if op != Op::Diff && !card_only && remaining >= 2 && is_token(a, "aggregate") {
            let how = arg(args, j + 1)?;
            req.aggregate = match () {
                _ if is_token(how, "sum") => Aggregate::Sum,
                _ if is_token(how, "min") => Aggregate::Min,
                _ if is_token(how, "max") => Aggregate::Max,
                _ if is_token(how, "count") => Aggregate::Count,
                _ => return Err(CmdError::SYNTAX),
            };
            j += 2;
        } else if !store && !card_only && is_token(a, "withscores") {
            req.with_scores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is_token(a, "limit") {
            let n = int_arg(arg(args, j + 1)?).map_err(|_| CmdError::full("ERR LIMIT can't be negative"))?;
            req.limit = u64::try_from(n).map_err(|_| CmdError::full("ERR LIMIT can't be negative"))?;
            j += 2;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    Ok(req)
}

/// The result of `op` over the request's inputs; for ZINTERCARD only its size (up to the
/// limit) is wanted, and `card_only` stops early.
fn compute(mut req: Request, op: Op, card_only: bool) -> (ZSet, u64) {
    let mut out = ZSet::new();
    if op != Op::Diff {
        req.inputs.sort_by_key(|i| i.members.len());
    }
    let indexes: Vec<IndexMap<Bytes, f64>> =
        req.inputs.iter().map(|i| i.members.iter().map(|(m, s)| (m.clone(), *s)).collect()).collect();
    let mut count = 0u64;
    match op {
        Op::Inter => {
            let Some(first) = req.inputs.first() else { return (out, 0) };
            'members: for (member, score) in &first.members {
                let mut total = weighted(*score, first.weight, req.aggregate);
                for (input, index) in req.inputs.iter().zip(&indexes).skip(1) {
                    let Some(&s) = index.get(member) else { continue 'members };
                    aggregate(&mut total, weighted(s, input.weight, req.aggregate), req.aggregate);
                }
                count += 1;
                if card_only {
                    if req.limit != 0 && count >= req.limit {
                        break;
                    }
                } else {
                    out.insert(member.clone(), total);
                }
            }
        }
        Op::Union => {
            let mut acc: IndexMap<Bytes, f64> = IndexMap::new();
            for input in &req.inputs {
                for (member, score) in &input.members {
                    let value = weighted(*score, input.weight, req.aggregate);
                    match acc.get_mut(member) {
                        Some(total) => aggregate(total, value, req.aggregate),
                        None => {
                            acc.insert(member.clone(), value);
                        }
                    }
                }
            }
            for (m, s) in acc {
                out.insert(m, s);
            }
        }
        Op::Diff => {
            let Some(first) = req.inputs.first() else { return (out, 0) };
            for (member, score) in &first.members {
                if !indexes.iter().skip(1).any(|index| index.contains_key(member)) {
                    out.insert(member.clone(), *score);
                }
            }
        }
    }
    (out, count)
}

fn read_generic(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], op: Op) -> Result<Reply, CmdError> {
    let req = parse(engine, ctx, args, 1, op, false, false)?;
    let with_scores = req.with_scores;
    let (out, _) = compute(req, op, false);
    let items = out.iter().map(|e| (e.member.clone(), e.score)).collect();
    Ok(members_reply(items, with_scores, ctx.resp3))
}

fn store_generic(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], op: Op) -> Result<Reply, CmdError> {
    let dest = arg(args, 1)?;
    let req = parse(engine, ctx, args, 2, op, true, false)?;
    let (out, _) = compute(req, op, false);
    let event = match op {
        Op::Union => KeyEvent::ZUnionStore,
        Op::Inter => KeyEvent::ZInterStore,
        Op::Diff => KeyEvent::ZDiffStore,
    };
    store_result(engine, ctx, dest, out, event)
}

fn zunion(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    read_generic(engine, ctx, args, Op::Union)
}

fn zinter(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    read_generic(engine, ctx, args, Op::Inter)
}

fn zdiff(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    read_generic(engine, ctx, args, Op::Diff)
}

fn zunionstore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    store_generic(engine, ctx, args, Op::Union)
}

fn zinterstore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    store_generic(engine, ctx, args, Op::Inter)
}

fn zdiffstore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    store_generic(engine, ctx, args, Op::Diff)
}

fn zintercard(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let req = parse(engine, ctx, args, 1, Op::Inter, false, true)?;
    let (_, count) = compute(req, Op::Inter, true);
    Ok(Reply::Integer(i64::try_from(count).unwrap_or(i64::MAX)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::Harness;
    use rill_resp::Reply;

    #[test]
    fn union_inter_diff_with_weights_and_sets() {
        let mut h = Harness::new();
        h.run(&["ZADD", "a", "1", "x", "2", "y"]);
        h.run(&["ZADD", "b", "10", "y", "20", "z"]);
        h.run(&["SADD", "s", "y"]);
        assert_eq!(
            h.run(&["ZINTER", "3", "a", "b", "s", "WEIGHTS", "1", "2", "3", "WITHSCORES"]),
            Reply::Array(vec![Reply::Bulk("y".into()), Reply::Double(25.0)])
        );
        assert_eq!(h.run(&["ZUNIONSTORE", "u", "2", "a", "b", "AGGREGATE", "MAX"]), Reply::Integer(3));
        assert_eq!(h.run(&["ZSCORE", "u", "y"]), Reply::Double(10.0));
        assert_eq!(h.run(&["ZDIFF", "2", "a", "b"]), Reply::Array(vec![Reply::Bulk("x".into())]));
        assert_eq!(h.run(&["ZINTERCARD", "2", "a", "b", "LIMIT", "0"]), Reply::Integer(1));
        assert_eq!(
            h.run(&["ZUNION", "0", "a"]),
            Reply::Error("ERR at least 1 input key is needed for 'zunion' command".into())
        );
        h.run(&["ZADD", "inf", "inf", "y"]);
        h.run(&["ZADD", "ninf", "-inf", "y"]);
        assert_eq!(h.run(&["ZUNIONSTORE", "n", "2", "inf", "ninf"]), Reply::Integer(1));
        assert_eq!(h.run(&["ZSCORE", "n", "y"]), Reply::Double(0.0));
    }
}
