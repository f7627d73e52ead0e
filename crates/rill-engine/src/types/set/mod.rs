//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD here; SINTER, SUNION,
//! SDIFF, their STORE forms, SINTERCARD and SMOVE in [`algebra`]; SPOP and SRANDMEMBER in
//! [`random`]; SSCAN in [`scan`].
//!
//! A set is a [`crate::keyspace::SetMembers`] table (Redis also has intset and listpack encodings; we do not). Member
//! operations are O(1) each, SMEMBERS is O(N).
//!
//! Redis behaviours we match on purpose:
//! - SMEMBERS replies a RESP3 set (`~`), an array in RESP2; a missing key is an empty set.
//! - SISMEMBER/SMISMEMBER reply integers 1/0, not RESP3 booleans.
//! - SADD/SREM record a write only when they changed something; removing the last member
//!   deletes the key.

pub(crate) mod algebra;
pub(crate) mod random;
mod scan;

use super::object::encoding;
use super::{arg, delete_key, owned};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

type Set = crate::keyspace::SetMembers;

/// A set command on the key at index 1.
const fn set_cmd(handler: Handler) -> CommandSpec {
    CommandSpec { first_key: 1, last_key: 1, step: 1, group: "set", ..CommandSpec::of(handler) }
}

/// The set commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "sadd",
        arity: -3,
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST),
        acl: &["@write", "@set", "@fast"],
        key_specs: &[key_at(1, &["RW", "INSERT"])],
        summary: "Adds members to a set (creating it) and replies with how many were new.",
        complexity: "O(N) in the number of members given.",
        syntax: "key:key member ...",
        ..set_cmd(Handler::Engine(sadd))
    },
    CommandSpec {
        name: "srem",
        arity: -3,
        flags: Flags::WRITE.and(Flags::FAST),
        acl: &["@write", "@set", "@fast"],
        key_specs: &[key_at(1, &["RW", "DELETE"])],
        summary: "Removes members from a set and replies with how many were there.",
        complexity: "O(N) in the number of members given.",
        syntax: "key:key member ...",
        ..set_cmd(Handler::Engine(srem))
    },
    CommandSpec {
        name: "smembers",
        arity: 2,
        flags: Flags::READONLY,
        acl: &["@read", "@set", "@slow"],
        tips: &["nondeterministic_output_order"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Returns every member of a set.",
        complexity: "O(N) in the size of the set.",
        syntax: "key:key",
        ..set_cmd(Handler::Engine(smembers))
    },
    CommandSpec {
        name: "sismember",
        arity: 3,
        flags: Flags::READONLY.and(Flags::FAST),
        acl: &["@read", "@set", "@fast"],
        key_specs: &[key_at(1, &["RO"])],
        summary: "Replies 1 if a value is a member of the set, else 0.",
        syntax: "key:key member",
        ..set_cmd(Handler::Engine(sismember))
    },
    CommandSpec {
        name: "smismember",
        arity: -3,
        flags: Flags::READONLY.and(Flags::FAST),
        acl: &["@read", "@set", "@fast"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Tells for each value whether it is a member of the set (1 or 0).",
        since: "6.2.0",
        complexity: "O(N) in the number of values given.",
        syntax: "key:key member ...",
        ..set_cmd(Handler::Engine(smismember))
    },
    CommandSpec {
        name: "scard",
        arity: 2,
        flags: Flags::READONLY.and(Flags::FAST),
        acl: &["@read", "@set", "@fast"],
        key_specs: &[key_at(1, &["RO"])],
        summary: "Returns the number of members of a set (0 if missing).",
        syntax: "key:key",
        ..set_cmd(Handler::Engine(scard))
    },
    algebra::SINTER,
    algebra::SINTERSTORE,
    algebra::SUNION,
    algebra::SUNIONSTORE,
    algebra::SDIFF,
    algebra::SDIFFSTORE,
    algebra::SINTERCARD,
    algebra::SDIFFCARD,
    algebra::SUNIONCARD,
    algebra::SMOVE,
    random::SPOP,
    random::SRANDMEMBER,
    scan::SSCAN,
];

/// The set at `key` for reading; `None` when missing, WRONGTYPE for another type.
fn read_set<'e>(engine: &'e mut Engine, ctx: &CallCtx, key: &[u8]) -> Result<Option<&'e Set>, CmdError> {
    match engine.lookup_read(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WRONGTYPE),
    }
}

fn sadd(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let cfg = engine.config.object;
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::Set(Default::default()));
    let Value::Set(set) = &mut entry.value else { return Err(CmdError::WRONGTYPE) };
    let meta = &mut entry.meta;
    let members = args.get(2..).unwrap_or(&[]);
    // The encoding Redis picks from the first member and the number given (see
    // `object::encoding`); a new set is the empty one just inserted.
    match members.first() {
        Some(first) if set.is_empty() => encoding::set_created(meta, first, members.len(), &cfg),
        _ => encoding::set_before_add(meta, set, members.len(), &cfg),
    }
    let mut added = 0;
    for m in members {
        if set.insert(owned(m)) {
            added += 1;
            encoding::set_added(meta, set, m, &cfg);
        }
    }
    if added > 0 {
        engine.modified(ctx.db, key, KeyEvent::SAdd);
    }
    Ok(Reply::Integer(added as i64))
}

fn srem(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let (removed, now_empty) = match engine.lookup_mut(ctx.db, key, ctx.now_ms).map(|e| &mut e.value) {
        None => return Ok(Reply::Integer(0)),
        Some(Value::Set(set)) => {
            let removed = args.iter().skip(2).filter(|m| set.swap_remove(&m[..])).count();
            (removed, set.is_empty())
        }
        Some(_) => return Err(CmdError::WRONGTYPE),
    };
    if now_empty {
        engine.record_event(ctx.db, key, KeyEvent::SRem);
        delete_key(engine, ctx.db, key);
    } else if removed > 0 {
        engine.modified(ctx.db, key, KeyEvent::SRem);
    }
    Ok(Reply::Integer(removed as i64))
}

fn smembers(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let set = read_set(engine, ctx, arg(args, 1)?)?;
    Ok(Reply::Set(set.into_iter().flatten().map(|m| Reply::Bulk(Bytes::copy_from_slice(m))).collect()))
}

fn sismember(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, member) = (arg(args, 1)?, arg(args, 2)?);
    let found = read_set(engine, ctx, key)?.is_some_and(|s| s.contains(&member[..]));
    Ok(Reply::Integer(i64::from(found)))
}

fn smismember(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let set = read_set(engine, ctx, arg(args, 1)?)?;
    let out = args.iter().skip(2).map(|m| Reply::Integer(i64::from(set.is_some_and(|s| s.contains(&m[..]))))).collect();
    Ok(Reply::Array(out))
}

fn scard(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let len = read_set(engine, ctx, arg(args, 1)?)?.map_or(0, Set::len);
    Ok(Reply::Integer(len as i64))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    #[test]
    fn members() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SADD", "s", "a", "b", "a"]), int(2));
        assert_eq!(h.run(&["SADD", "s", "a"]), int(0));
        assert_eq!(h.run(&["SCARD", "s"]), int(2));
        assert_eq!(h.run(&["SISMEMBER", "s", "a"]), int(1));
        assert_eq!(h.run(&["SISMEMBER", "s", "z"]), int(0));
        assert_eq!(h.run(&["SMISMEMBER", "s", "a", "z"]), Reply::Array(vec![int(1), int(0)]));
        assert_eq!(h.run(&["SMISMEMBER", "nope", "a"]), Reply::Array(vec![int(0)]));
        let r = h.run(&["SMEMBERS", "s"]);
        assert!(matches!(r, Reply::Set(_)));
        assert_eq!(sorted_strings(&r), ["a", "b"]);
        assert_eq!(h.run(&["SMEMBERS", "nope"]), Reply::Set(vec![]));
        assert_eq!(h.run(&["SREM", "s", "a", "z"]), int(1));
        assert_eq!(h.run(&["SREM", "s", "b"]), int(1));
        assert_eq!(h.run(&["EXISTS", "s"]), int(0));
        assert_eq!(h.run(&["SREM", "s", "b"]), int(0));
        assert_eq!(h.run(&["SCARD", "s"]), int(0));
    }

    #[test]
    fn no_op_sadd_is_not_a_write() {
        let mut h = Harness::new();
        h.run(&["SADD", "s", "a"]);
        h.engine.watch.watch(h.client_id, 0, "s".into(), false);
        h.run(&["SADD", "s", "a"]);
        h.run(&["SREM", "s", "zz"]);
        assert!(!h.engine.watch.is_dirty(h.client_id));
        h.run(&["SADD", "s", "b"]);
        assert!(h.engine.watch.is_dirty(h.client_id));
    }

    #[test]
    fn wrongtype() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "v"]);
        let wt = err("WRONGTYPE Operation against a key holding the wrong kind of value");
        for cmd in [
            &["SADD", "k", "m"][..],
            &["SREM", "k", "m"],
            &["SMEMBERS", "k"],
            &["SISMEMBER", "k", "m"],
            &["SMISMEMBER", "k", "m"],
            &["SCARD", "k"],
        ] {
            assert_eq!(h.run(cmd), wt, "{cmd:?}");
        }
    }
}
