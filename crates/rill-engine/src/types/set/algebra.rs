//! Set algebra: SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD; and SMOVE.
//!
//! Costs: SINTER and SINTERCARD walk the smallest set and probe the others, O(N·M) for N the
//! smallest size and M the number of sets; SUNION and SDIFF are O(total members); STOREs add
//! the cost of freeing the destination's old value. SMOVE is O(1).
//!
//! Redis behaviours we match on purpose:
//! - Every key is type-checked before any result is computed: `SINTER missing <string>` is
//!   WRONGTYPE even though the missing key alone decides the answer.
//! - A missing key is an empty set. The plain forms reply a set (RESP3 `~`).
//! - A STORE overwrites a destination of any type and drops its TTL; an empty result deletes
//!   the destination instead of storing an empty set.
//! - SINTERCARD: `numkeys` must be a positive integer (`ERR numkeys should be greater than 0`)
//!   not above the arguments left; `LIMIT` must not be negative, 0 means no limit, and counting
//!   stops once the limit is reached.
//! - SMOVE: a missing source replies 0 whatever the destination holds; a source that is also the
//!   destination only reports membership; a member not in the source changes nothing.

use super::{read_set, set_cmd, Set};
use crate::command::{key_at, keys_from, BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::types::object::encoding;
use crate::types::{arg, delete_key, is_token};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

const READ_ALGEBRA_KEYS: &[KeySpec] = &[keys_from(1, 1, &["RO", "ACCESS"])];
const STORE_ALGEBRA_KEYS: &[KeySpec] = &[key_at(1, &["OW", "UPDATE"]), keys_from(2, 1, &["RO", "ACCESS"])];

/// A read-only algebra command over every key from index 1.
const fn read_algebra(handler: Handler) -> CommandSpec {
    CommandSpec {
        arity: -2,
        flags: Flags::READONLY,
        last_key: -1,
        acl: &["@read", "@set", "@slow"],
        tips: &["nondeterministic_output_order"],
        key_specs: READ_ALGEBRA_KEYS,
        syntax: "key:key ...",
        ..set_cmd(handler)
    }
}

/// A STORE form: the destination at 1, the sources after it.
const fn store_algebra(handler: Handler) -> CommandSpec {
    CommandSpec {
        arity: -3,
        flags: Flags::WRITE.and(Flags::DENYOOM),
        last_key: -1,
        acl: &["@write", "@set", "@slow"],
        key_specs: STORE_ALGEBRA_KEYS,
        syntax: "destination:key key:key ...",
        ..set_cmd(handler)
    }
}

/// `SINTER key [key ...]`
pub const SINTER: CommandSpec = CommandSpec {
    name: "sinter",
    summary: "Returns the members present in every one of the given sets.",
    complexity: "O(N*M): N the smallest set's size, M the number of sets.",
    ..read_algebra(Handler::Engine(sinter))
};

/// `SUNION key [key ...]`
pub const SUNION: CommandSpec = CommandSpec {
    name: "sunion",
    summary: "Returns the members present in any of the given sets.",
    complexity: "O(N) in the total number of members.",
    ..read_algebra(Handler::Engine(sunion))
};

/// `SDIFF key [key ...]`
pub const SDIFF: CommandSpec = CommandSpec {
    name: "sdiff",
    summary: "Returns the members of the first set that are in none of the others.",
    complexity: "O(N) in the total number of members.",
    ..read_algebra(Handler::Engine(sdiff))
};

/// `SINTERSTORE destination key [key ...]`
pub const SINTERSTORE: CommandSpec = CommandSpec {
    name: "sinterstore",
    summary: "Stores the intersection of sets at a key and replies with its size.",
    complexity: "O(N*M): N the smallest set's size, M the number of sets.",
    ..store_algebra(Handler::Engine(sinterstore))
};

/// `SUNIONSTORE destination key [key ...]`
pub const SUNIONSTORE: CommandSpec = CommandSpec {
    name: "sunionstore",
    summary: "Stores the union of sets at a key and replies with its size.",
    complexity: "O(N) in the total number of members.",
    ..store_algebra(Handler::Engine(sunionstore))
};

/// `SDIFFSTORE destination key [key ...]`
pub const SDIFFSTORE: CommandSpec = CommandSpec {
    name: "sdiffstore",
    summary: "Stores the difference of the first set and the others at a key; replies its size.",
    complexity: "O(N) in the total number of members.",
    ..store_algebra(Handler::Engine(sdiffstore))
};

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`
pub const SINTERCARD: CommandSpec = CommandSpec {
    name: "sintercard",
    arity: -3,
    flags: Flags::READONLY.and(Flags::MOVABLEKEYS),
    first_key: 0,
    last_key: 0,
    step: 0,
    acl: &["@read", "@set", "@slow"],
    key_specs: &[KeySpec {
        flags: &["RO", "ACCESS"],
        begin: BeginSearch::Index(1),
        find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 },
        notes: "",
    }],
    summary: "Counts the members of the intersection of sets, optionally stopping at a limit.",
    since: "7.0.0",
    complexity: "O(N*M): N the smallest set's size, M the number of sets.",
    syntax: "numkeys:integer key:key ... [LIMIT limit:integer]",
    ..set_cmd(Handler::Engine(sintercard))
};

/// `SDIFFCARD numkeys key [key ...] [LIMIT limit]`
pub const SDIFFCARD: CommandSpec = CommandSpec {
    name: "sdiffcard",
    summary: "Counts the members of the first set that are in none of the others, optionally stopping at a limit.",
    since: "8.8.0",
    complexity: "O(N): N the total size of the sets.",
    syntax: "numkeys:integer key:key ... [LIMIT limit:integer]",
    handler: Handler::Engine(sdiffcard),
    ..SINTERCARD
};

/// `SUNIONCARD numkeys key [key ...] [APPROX] [LIMIT limit]`
pub const SUNIONCARD: CommandSpec = CommandSpec {
    name: "sunioncard",
    summary: "Counts the members of the union of sets, optionally stopping at a limit.",
    since: "8.8.0",
    complexity: "O(N): N the total size of the sets.",
    syntax: "numkeys:integer key:key ... [APPROX] [LIMIT limit:integer]",
    handler: Handler::Engine(sunioncard),
    ..SINTERCARD
};

/// `SMOVE source destination member`
pub const SMOVE: CommandSpec = CommandSpec {
    name: "smove",
    arity: 4,
    flags: Flags::WRITE.and(Flags::FAST),
    last_key: 2,
    acl: &["@write", "@set", "@fast"],
    key_specs: &[key_at(1, &["RW", "ACCESS", "DELETE"]), key_at(2, &["RW", "INSERT"])],
    summary: "Moves a member from one set to another.",
    syntax: "source:key destination:key member",
    ..set_cmd(Handler::Engine(smove))
};

// ---------------------------------------------------------------------------------------------
// Computing

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Inter,
    Union,
    Diff,
}

/// Expire and type-check every key; afterwards the live sets can be borrowed together.
fn check_sets(engine: &mut Engine, ctx: &CallCtx, keys: &[Bytes]) -> Result<(), CmdError> {
    for key in keys {
        read_set(engine, ctx, key)?;
    }
    Ok(())
}

/// The sets at `keys` (`None` for a missing key), after [`check_sets`].
fn borrow_sets<'e>(engine: &'e Engine, ctx: &CallCtx, keys: &[Bytes]) -> Vec<Option<&'e Set>> {
    let db = engine.db(ctx.db);
    keys.iter()
        .map(|k| match db.get_raw(k).map(|e| &e.value) {
            Some(Value::Set(s)) => Some(s),
            _ => None,
        })
        .collect()
}

/// The result of `op` over the sets at `keys`, every key type-checked first.
fn compute(engine: &mut Engine, ctx: &CallCtx, op: SetOp, keys: &[Bytes]) -> Result<Vec<Bytes>, CmdError> {
    check_sets(engine, ctx, keys)?;
    let sets = borrow_sets(engine, ctx, keys);
    Ok(match op {
        SetOp::Inter => {
            let Some(mut present) = sets.into_iter().collect::<Option<Vec<&Set>>>() else {
                return Ok(vec![]);
            };
            present.sort_by_key(|s| s.len());
            let Some((smallest, others)) = present.split_first() else {
                return Ok(vec![]);
            };
            smallest.iter().filter(|m| others.iter().all(|s| s.contains(m))).map(Bytes::copy_from_slice).collect()
        }
        SetOp::Union => {
            let mut out: indexmap::IndexSet<&[u8], crate::keyspace::FastHash> = indexmap::IndexSet::default();
            for s in sets.iter().flatten() {
                out.extend(s.iter());
            }
            out.into_iter().map(Bytes::copy_from_slice).collect()
        }
        SetOp::Diff => {
            let mut sets = sets.into_iter();
            let Some(Some(first)) = sets.next() else {
                return Ok(vec![]);
            };
            let others: Vec<&Set> = sets.flatten().collect();
            first.iter().filter(|m| !others.iter().any(|s| s.contains(m))).map(Bytes::copy_from_slice).collect()
        }
    })
}

fn read_op(engine: &mut Engine, ctx: &CallCtx, args: &[Bytes], op: SetOp) -> Result<Reply, CmdError> {
    let members = compute(engine, ctx, op, args.get(1..).unwrap_or(&[]))?;
    Ok(Reply::Set(members.into_iter().map(Reply::Bulk).collect()))
}

fn store_op(engine: &mut Engine, ctx: &CallCtx, args: &[Bytes], op: SetOp) -> Result<Reply, CmdError> {
    let destination = arg(args, 1)?;
    let keys = args.get(2..).unwrap_or(&[]);
    let members = compute(engine, ctx, op, keys)?;
    let len = members.len();
    if members.is_empty() {
        delete_key(engine, ctx.db, destination);
        return Ok(Reply::Integer(0));
    }
    let cfg = engine.config.object;
    let mut meta = crate::types::object::ObjectMeta::default();
    let from_first = op == SetOp::Diff && diff_builds_from_first(engine, ctx, keys, &mut meta, &cfg);
    let set: Set = members.into_iter().collect();
    if !from_first {
        encoding::set_built(&mut meta, &set, &cfg);
    }
    engine.set_key(ctx.db, destination, Value::Set(set), false);
    if let Some(e) = engine.entry_mut(ctx.db, destination) {
        e.meta.form = meta.form;
    }
    let event = match op {
        SetOp::Inter => KeyEvent::SInterStore,
        SetOp::Union => KeyEvent::SUnionStore,
        SetOp::Diff => KeyEvent::SDiffStore,
    };
    engine.modified(ctx.db, destination, event);
    Ok(Reply::Integer(len as i64))
}

/// SDIFFSTORE: the first set, when Redis would compute the difference by adding all of it and
/// then removing the other sets' members (its second algorithm, chosen when the first set
/// times the number of sets, halved, exceeds the total size) — the result's encoding is then
/// the one the first set's members build, which this sets in `meta`. False when Redis adds
/// only the result's members.
fn diff_builds_from_first(
    engine: &Engine,
    ctx: &CallCtx,
    keys: &[Bytes],
    meta: &mut crate::types::object::ObjectMeta,
    cfg: &crate::types::object::ObjectConfig,
) -> bool {
    let sets = borrow_sets(engine, ctx, keys);
    let Some(first) = sets.first().copied().flatten() else { return false };
    let present = sets.iter().flatten().count();
    let total: usize = sets.iter().flatten().map(|s| s.len()).sum();
    if first.len().saturating_mul(present) / 2 <= total {
        return false;
    }
    encoding::set_built_from(meta, first.len(), first.iter(), cfg);
    true
}

fn sinter(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    read_op(engine, ctx, args, SetOp::Inter)
}

fn sunion(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    read_op(engine, ctx, args, SetOp::Union)
}

fn sdiff(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    read_op(engine, ctx, args, SetOp::Diff)
}

fn sinterstore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    store_op(engine, ctx, args, SetOp::Inter)
}

fn sunionstore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    store_op(engine, ctx, args, SetOp::Union)
}

fn sdiffstore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    store_op(engine, ctx, args, SetOp::Diff)
}

// ---------------------------------------------------------------------------------------------
// SINTERCARD

/// A parsed SINTERCARD / SDIFFCARD / SUNIONCARD: the keys and the limit (`usize::MAX` for
/// none). `approx`: SUNIONCARD's APPROX flag is accepted (and ignored: the exact count is
/// always within the estimate's error margin).
fn parse_card(args: &[Bytes], approx: bool) -> Result<(&[Bytes], usize), CmdError> {
    let numkeys =
        parse_i64(arg(args, 1)?).filter(|n| *n > 0).ok_or(CmdError::full("ERR numkeys should be greater than 0"))?;
    let rest = args.get(2..).unwrap_or(&[]);
    let numkeys = usize::try_from(numkeys)
        .ok()
        .filter(|n| *n <= rest.len())
        .ok_or(CmdError::full("ERR Number of keys can't be greater than number of args"))?;
    let (keys, options) = rest.split_at(numkeys);
    let mut limit = usize::MAX;
    let mut i = 0;
    while let Some(opt) = options.get(i) {
        if approx && is_token(opt, "APPROX") {
            i += 1;
            continue;
        }
        match options.get(i + 1) {
            Some(value) if is_token(opt, "LIMIT") => {
                let n = parse_i64(value)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or(CmdError::full("ERR LIMIT can't be negative"))?;
                limit = match n {
                    0 => usize::MAX,
                    n => usize::try_from(n).unwrap_or(usize::MAX),
                };
            }
            _ => return Err(CmdError::SYNTAX),
        }
        i += 2;
    }
    Ok((keys, limit))
}

/// `SDIFFCARD numkeys key [key ...] [LIMIT limit]` (newer than Redis 8.2): the size of the
/// first set minus the others, counting stops at the limit.
fn sdiffcard(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (keys, limit) = parse_card(args, false)?;
    check_sets(engine, ctx, keys)?;
    let sets = borrow_sets(engine, ctx, keys);
    let Some((Some(first), others)) = sets.split_first() else { return Ok(Reply::Integer(0)) };
    let count = first.iter().filter(|m| !others.iter().flatten().any(|s| s.contains(m))).take(limit).count();
    Ok(Reply::Integer(count as i64))
}

/// `SUNIONCARD numkeys key [key ...] [APPROX] [LIMIT limit]` (newer than Redis 8.2): the size
/// of the union, counting stops at the limit. Always exact, APPROX or not.
fn sunioncard(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (keys, limit) = parse_card(args, true)?;
    check_sets(engine, ctx, keys)?;
    let sets: Vec<&Set> = borrow_sets(engine, ctx, keys).into_iter().flatten().collect();
    let mut count = 0usize;
    for (i, set) in sets.iter().enumerate() {
        let earlier = sets.get(..i).unwrap_or_default();
        for m in set.iter() {
            if count >= limit {
                return Ok(Reply::Integer(count as i64));
            }
            if !earlier.iter().any(|s| s.contains(m)) {
                count += 1;
            }
        }
    }
    Ok(Reply::Integer(count.min(limit) as i64))
}

fn sintercard(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (keys, limit) = parse_card(args, false)?;
    check_sets(engine, ctx, keys)?;
    let Some(mut sets) = borrow_sets(engine, ctx, keys).into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(Reply::Integer(0));
    };
    sets.sort_by_key(|s| s.len());
    let Some((smallest, others)) = sets.split_first() else {
        return Ok(Reply::Integer(0));
    };
    let count = smallest.iter().filter(|m| others.iter().all(|s| s.contains(m))).take(limit).count();
    Ok(Reply::Integer(count as i64))
}

// ---------------------------------------------------------------------------------------------
// SMOVE

fn smove(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (source, destination, member) = (arg(args, 1)?, arg(args, 2)?, arg(args, 3)?);
    let Some(src) = read_set(engine, ctx, source)? else {
        return Ok(Reply::Integer(0));
    };
    let present = src.contains(member);
    read_set(engine, ctx, destination)?;
    if source == destination || !present {
        return Ok(Reply::Integer(i64::from(present)));
    }
    let now_empty = match engine.lookup_mut(ctx.db, source, ctx.now_ms).map(|e| &mut e.value) {
        Some(Value::Set(s)) => {
            s.swap_remove(&member[..]);
            s.is_empty()
        }
        _ => false,
    };
    if now_empty {
        engine.record_event(ctx.db, source, KeyEvent::SRem);
        delete_key(engine, ctx.db, source);
    } else {
        engine.modified(ctx.db, source, KeyEvent::SRem);
    }
    let cfg = engine.config.object;
    let entry = engine.lookup_or_insert(ctx.db, destination, ctx.now_ms, || Value::Set(Default::default()));
    let mut added = false;
    if let Value::Set(dst) = &mut entry.value {
        if dst.is_empty() {
            encoding::set_created(&mut entry.meta, member, 1, &cfg);
        } else {
            encoding::set_resolve(&mut entry.meta, dst, &cfg);
        }
        added = dst.insert(crate::types::owned(member));
        if added {
            encoding::set_added(&mut entry.meta, dst, member, &cfg);
        }
    }
    // A destination that already held the member is unchanged: not signalled (its WATCH
    // holds), as in Redis.
    if added {
        engine.modified(ctx.db, destination, KeyEvent::SAdd);
    }
    Ok(Reply::Integer(1))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

    fn sorted(h: &mut Harness, cmd: &[&str]) -> Vec<String> {
        let r = h.run(cmd);
        assert!(matches!(r, Reply::Set(_)), "{cmd:?}: {r:?}");
        sorted_strings(&r)
    }

    #[test]
    fn inter_union_diff() {
        let mut h = Harness::new();
        h.run(&["SADD", "s", "a", "b", "c"]);
        h.run(&["SADD", "t", "c", "d"]);
        assert_eq!(sorted(&mut h, &["SINTER", "s", "t"]), ["c"]);
        assert_eq!(sorted(&mut h, &["SUNION", "s", "t", "missing"]), ["a", "b", "c", "d"]);
        assert_eq!(sorted(&mut h, &["SDIFF", "s", "t", "missing"]), ["a", "b"]);
        assert!(sorted(&mut h, &["SINTER", "s", "missing"]).is_empty());
        assert!(sorted(&mut h, &["SDIFF", "missing", "s"]).is_empty());
        h.run(&["SET", "str", "v"]);
        assert_eq!(h.run(&["SINTER", "missing", "str"]), err(WRONGTYPE));
        assert_eq!(h.run(&["SUNION", "s", "str"]), err(WRONGTYPE));
        assert_eq!(h.run(&["SDIFF", "str", "s"]), err(WRONGTYPE));
    }

    #[test]
    fn stores_overwrite_or_delete() {
        let mut h = Harness::new();
        h.run(&["SADD", "s", "a", "b", "c"]);
        h.run(&["SADD", "t", "c", "d"]);
        h.run(&["SET", "dst", "v", "EX", "100"]);
        assert_eq!(h.run(&["SINTERSTORE", "dst", "s", "t"]), int(1));
        assert_eq!(h.run(&["TYPE", "dst"]), Reply::Simple("set".into()));
        assert_eq!(h.run(&["TTL", "dst"]), int(-1));
        assert_eq!(h.run(&["SUNIONSTORE", "dst", "s", "t"]), int(4));
        assert_eq!(h.run(&["SDIFFSTORE", "dst", "s", "t"]), int(2));
        assert_eq!(sorted(&mut h, &["SMEMBERS", "dst"]), ["a", "b"]);
        assert_eq!(h.run(&["SDIFFSTORE", "dst", "s", "s"]), int(0));
        assert_eq!(h.run(&["EXISTS", "dst"]), int(0));
        // The destination may be a source.
        assert_eq!(h.run(&["SUNIONSTORE", "s", "s", "t"]), int(4));
        h.run(&["SET", "str", "v"]);
        assert_eq!(h.run(&["SINTERSTORE", "dst", "s", "str"]), err(WRONGTYPE));
    }

    #[test]
    fn sdiffcard_and_sunioncard_count_with_limits() {
        let mut h = Harness::new();
        h.run(&["SADD", "a", "1", "2", "3", "4", "5"]);
        h.run(&["SADD", "b", "4", "5", "6"]);
        h.run(&["SET", "str", "x"]);
        assert_eq!(h.run(&["SDIFFCARD", "2", "a", "b"]), Reply::Integer(3));
        assert_eq!(h.run(&["SDIFFCARD", "2", "a", "b", "LIMIT", "2"]), Reply::Integer(2));
        assert_eq!(h.run(&["SDIFFCARD", "2", "a", "a"]), Reply::Integer(0));
        assert_eq!(h.run(&["SDIFFCARD", "2", "nokey", "a"]), Reply::Integer(0));
        assert_eq!(h.run(&["SDIFFCARD", "2", "a", "nokey"]), Reply::Integer(5));
        assert_eq!(h.run(&["SUNIONCARD", "2", "a", "b"]), Reply::Integer(6));
        assert_eq!(h.run(&["SUNIONCARD", "2", "a", "b", "APPROX", "LIMIT", "4"]), Reply::Integer(4));
        assert_eq!(h.run(&["SUNIONCARD", "3", "a", "b", "nokey", "LIMIT", "0"]), Reply::Integer(6));
        assert_eq!(h.run(&["SUNIONCARD", "2", "a", "str"]), Reply::Error(WRONGTYPE.into()));
        assert_eq!(h.run(&["SDIFFCARD", "1", "a", "APPROX"]), Reply::Error("ERR syntax error".into()));
        assert_eq!(h.run(&["SUNIONCARD", "1", "a", "LIMIT", "-1"]), Reply::Error("ERR LIMIT can't be negative".into()));
        assert_eq!(
            h.run(&["SDIFFCARD", "3", "a", "b"]),
            Reply::Error("ERR Number of keys can't be greater than number of args".into())
        );
    }

    #[test]
    fn sintercard_limits_and_errors() {
        let mut h = Harness::new();
        h.run(&["SADD", "s", "a", "b", "c"]);
        h.run(&["SADD", "t", "a", "b", "d"]);
        assert_eq!(h.run(&["SINTERCARD", "2", "s", "t"]), int(2));
        assert_eq!(h.run(&["SINTERCARD", "2", "s", "t", "LIMIT", "1"]), int(1));
        assert_eq!(h.run(&["SINTERCARD", "2", "s", "t", "LIMIT", "0"]), int(2));
        assert_eq!(h.run(&["SINTERCARD", "1", "s"]), int(3));
        assert_eq!(h.run(&["SINTERCARD", "2", "s", "missing"]), int(0));
        let numkeys = err("ERR numkeys should be greater than 0");
        assert_eq!(h.run(&["SINTERCARD", "0", "s"]), numkeys);
        assert_eq!(h.run(&["SINTERCARD", "x", "s"]), numkeys);
        assert_eq!(
            h.run(&["SINTERCARD", "3", "s", "t"]),
            err("ERR Number of keys can't be greater than number of args")
        );
        assert_eq!(h.run(&["SINTERCARD", "2", "s", "t", "LIMIT", "-1"]), err("ERR LIMIT can't be negative"));
        assert_eq!(h.run(&["SINTERCARD", "2", "s", "t", "LIMIT"]), err("ERR syntax error"));
        assert_eq!(h.run(&["SINTERCARD", "1", "s", "t"]), err("ERR syntax error"));
        h.run(&["SET", "str", "v"]);
        assert_eq!(h.run(&["SINTERCARD", "2", "missing", "str"]), err(WRONGTYPE));
    }

    #[test]
    fn smove_cases() {
        let mut h = Harness::new();
        h.run(&["SADD", "s", "a", "b"]);
        h.run(&["SET", "str", "v"]);
        assert_eq!(h.run(&["SMOVE", "s", "t", "a"]), int(1));
        assert_eq!(h.run(&["SMOVE", "s", "t", "zz"]), int(0));
        assert_eq!(h.run(&["SMOVE", "s", "s", "b"]), int(1));
        assert_eq!(h.run(&["SMOVE", "s", "s", "zz"]), int(0));
        assert_eq!(h.run(&["SMOVE", "missing", "str", "a"]), int(0));
        assert_eq!(h.run(&["SMOVE", "s", "str", "b"]), err(WRONGTYPE));
        assert_eq!(h.run(&["SMOVE", "str", "s", "b"]), err(WRONGTYPE));
        assert_eq!(h.run(&["SMOVE", "s", "t", "b"]), int(1));
        assert_eq!(h.run(&["EXISTS", "s"]), int(0));
        assert_eq!(sorted(&mut h, &["SMEMBERS", "t"]), ["a", "b"]);
    }
}
