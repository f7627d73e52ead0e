//! Random members: SPOP and SRANDMEMBER.
//!
//! A `HashSet` cannot pick its n-th member directly, so each call is O(N) in the set's size
//! (one walk to copy the members' handles, then a partial Fisher–Yates shuffle), plus
//! O(count) for the reply. The engine's generator is seeded and never logged (see
//! [`Engine::random_u64`]).
//!
//! Redis behaviours we match on purpose:
//! - SPOP's count must be a non-negative integer (`ERR value is out of range, must be
//!   positive`); with a count the reply is a set (RESP3 `~`), empty for a missing key or count
//!   0; a count at least the size pops everything and deletes the key.
//! - SRANDMEMBER's count is any integer but `i64::MIN`; positive gives distinct members (all
//!   of them when the count is at least the size), negative gives `|count|` picks that may
//!   repeat; the reply is an array even in RESP3. Count 0 on a key of another type is still
//!   WRONGTYPE.
//! - A third argument is a syntax error for both.

use super::{read_set, set_cmd};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::{arg, delete_key, negatable_int_arg};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `SPOP key [count]`
pub const SPOP: CommandSpec = CommandSpec {
    name: "spop",
    arity: -2,
    flags: Flags::WRITE.and(Flags::FAST),
    acl: &["@write", "@set", "@fast"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RW", "ACCESS", "DELETE"])],
    summary: "Removes and returns a random member of a set, or `count` distinct ones.",
    complexity: "O(N) in the size of the set.",
    syntax: "key:key [count:integer]",
    ..set_cmd(Handler::Engine(spop))
};

/// `SRANDMEMBER key [count]`
pub const SRANDMEMBER: CommandSpec = CommandSpec {
    name: "srandmember",
    arity: -2,
    flags: Flags::READONLY,
    acl: &["@read", "@set", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    summary: "Returns random members of a set: distinct for a positive count, repeating for a \
              negative one.",
    complexity: "O(N) in the size of the set, plus O(|count|).",
    syntax: "key:key [count:integer]",
    ..set_cmd(Handler::Engine(srandmember))
};

/// Copies of the handles of the set's members (a refcount each) and how many to draw.
fn members_of(engine: &mut Engine, ctx: &CallCtx, key: &[u8]) -> Result<Option<Vec<Bytes>>, CmdError> {
    Ok(read_set(engine, ctx, key)?.map(|s| s.iter().cloned().collect()))
}

/// Move `n` randomly chosen elements to the front of `items` (partial Fisher–Yates).
pub(crate) fn choose_front<T>(engine: &mut Engine, items: &mut [T], n: usize) {
    let len = items.len();
    for i in 0..n.min(len) {
        let pick = i + (engine.random_u64() % (len - i) as u64) as usize;
        items.swap(i, pick);
    }
}

/// A uniformly random index below `len` (which must be positive).
pub(crate) fn random_index(engine: &mut Engine, len: usize) -> usize {
    (engine.random_u64() % len as u64) as usize
}

fn spop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    if args.len() > 3 {
        return Err(CmdError::SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(raw) => Some(
            parse_i64(raw)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(CmdError::full("ERR value is out of range, must be positive"))?,
        ),
    };
    let Some(mut members) = members_of(engine, ctx, key)? else {
        return Ok(if count.is_some() { Reply::Set(vec![]) } else { Reply::Null });
    };
    let n = count.unwrap_or(1).min(members.len());
    if n == 0 {
        return Ok(Reply::Set(vec![]));
    }
    choose_front(engine, &mut members, n);
    members.truncate(n);
    let cfg = engine.config.object;
    let now_empty = match engine.lookup_mut(ctx.db, key, ctx.now_ms) {
        Some(crate::Entry { value: Value::Set(set), meta, .. }) => {
            crate::types::object::encoding::set_resolve(meta, set, &cfg);
            for m in &members {
                set.remove(m);
            }
            // Popping all but a fifth or less, Redis rebuilds the set from what is left.
            if count.is_some() && set.len().saturating_mul(5) <= n {
                crate::types::object::encoding::set_rebuilt_after_pop(meta, set, &cfg);
            }
            set.is_empty()
        }
        _ => true,
    };
    if now_empty {
        delete_key(engine, ctx.db, key);
    } else {
        engine.modified(ctx.db, key);
    }
    // Logged as the removal of the members picked: the pick is random.
    let mut effect = Vec::with_capacity(members.len() + 2);
    effect.push(Bytes::from_static(b"SREM"));
    effect.push(key.clone());
    effect.extend(members.iter().cloned());
    ctx.emit(crate::effect::Effect::Command { db: ctx.db, args: effect });
    Ok(match count {
        None => members.pop().map_or(Reply::Null, Reply::Bulk),
        Some(_) => Reply::Set(members.into_iter().map(Reply::Bulk).collect()),
    })
}

fn srandmember(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    if args.len() > 3 {
        return Err(CmdError::SYNTAX);
    }
    let count = args.get(2).map(|raw| negatable_int_arg(raw)).transpose()?;
    let Some(mut members) = members_of(engine, ctx, key)? else {
        return Ok(if count.is_some() { Reply::Array(vec![]) } else { Reply::Null });
    };
    let Some(count) = count else {
        let i = random_index(engine, members.len().max(1));
        return Ok(members.get(i).cloned().map_or(Reply::Null, Reply::Bulk));
    };
    if count >= 0 {
        let n = usize::try_from(count).unwrap_or(usize::MAX).min(members.len());
        choose_front(engine, &mut members, n);
        members.truncate(n);
        return Ok(Reply::Array(members.into_iter().map(Reply::Bulk).collect()));
    }
    // Picks with repetition: the reply grows with |count|, not with the set, so it is
    // checked against the client's reply budget before anything is built (`$<len>\r\n` and
    // `\r\n` around the shortest member is the least a pick can take).
    let shortest = members.iter().map(|m| m.len() as u64).min().unwrap_or(0);
    ctx.reserve_reply(count.unsigned_abs(), shortest + 6)?;
    let mut out = Vec::new();
    for _ in 0..count.unsigned_abs() {
        let i = random_index(engine, members.len());
        out.extend(members.get(i).cloned().map(Reply::Bulk));
    }
    Ok(Reply::Array(out))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    fn len(r: &Reply) -> usize {
        match r {
            Reply::Array(v) | Reply::Set(v) => v.len(),
            _ => panic!("not a collection: {r:?}"),
        }
    }

    #[test]
    fn spop_shapes_and_deletion() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SPOP", "missing"]), Reply::Null);
        assert_eq!(h.run(&["SPOP", "missing", "3"]), Reply::Set(vec![]));
        h.run(&["SADD", "s", "a", "b", "c", "d"]);
        assert_eq!(h.run(&["SPOP", "s", "0"]), Reply::Set(vec![]));
        assert!(matches!(h.run(&["SPOP", "s"]), Reply::Bulk(_)));
        let two = h.run(&["SPOP", "s", "2"]);
        assert!(matches!(two, Reply::Set(_)));
        assert_eq!(sorted_strings(&two).len(), 2);
        assert_eq!(h.run(&["SCARD", "s"]), int(1));
        assert_eq!(len(&h.run(&["SPOP", "s", "10"])), 1);
        assert_eq!(h.run(&["EXISTS", "s"]), int(0));
        let positive = err("ERR value is out of range, must be positive");
        assert_eq!(h.run(&["SPOP", "s", "-1"]), positive);
        assert_eq!(h.run(&["SPOP", "s", "x"]), positive);
        assert_eq!(h.run(&["SPOP", "s", "1", "2"]), err("ERR syntax error"));
    }

    #[test]
    fn srandmember_counts() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SRANDMEMBER", "missing"]), Reply::Null);
        assert_eq!(h.run(&["SRANDMEMBER", "missing", "-3"]), Reply::Array(vec![]));
        h.run(&["SADD", "s", "a", "b", "c"]);
        assert!(matches!(h.run(&["SRANDMEMBER", "s"]), Reply::Bulk(_)));
        assert_eq!(h.run(&["SRANDMEMBER", "s", "0"]), Reply::Array(vec![]));
        let two = h.run(&["SRANDMEMBER", "s", "2"]);
        let mut names = sorted_strings(&two);
        names.dedup();
        assert_eq!(names.len(), 2);
        assert_eq!(sorted_strings(&h.run(&["SRANDMEMBER", "s", "10"])), ["a", "b", "c"]);
        assert_eq!(len(&h.run(&["SRANDMEMBER", "s", "-7"])), 7);
        assert_eq!(h.run(&["SCARD", "s"]), int(3));
        assert_eq!(
            h.run(&["SRANDMEMBER", "s", "-9223372036854775808"]),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(h.run(&["SRANDMEMBER", "s", "x"]), err("ERR value is not an integer or out of range"));
        assert_eq!(h.run(&["SRANDMEMBER", "s", "1", "2"]), err("ERR syntax error"));
        h.run(&["SET", "str", "v"]);
        assert_eq!(
            h.run(&["SRANDMEMBER", "str", "0"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }
}
