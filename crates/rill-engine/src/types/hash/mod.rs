//! Hash commands: HSET, HSETNX, HMSET, HGET, HMGET, HGETALL, HDEL, HINCRBY, HINCRBYFLOAT, HLEN,
//! HEXISTS, HKEYS, HVALS, HSTRLEN here; HRANDFIELD in [`random`], HGETDEL in [`getdel`],
//! HSCAN in [`scan`]; field expiry (HEXPIRE, HTTL, HPERSIST, HGETEX, HSETEX and kin) in
//! [`expire`].
//!
//! A hash is a [`crate::keyspace::HashFields`] table (Redis switches between a listpack and a hash table; we
//! always use the table, and track which one Redis would use for OBJECT ENCODING: see
//! `object::encoding`). Per-field operations are O(1); whole-hash replies O(N).
//!
//! Redis behaviours we match on purpose:
//! - HSET/HMSET with a field but no value is an arity error (`wrong number of arguments`).
//! - HGETALL replies a map (RESP3 `%`, flat array in RESP2), HKEYS/HVALS plain arrays, in the
//!   same unspecified order; HMGET on a missing key replies nils, not an error.
//! - The stored value must be a canonical integer for HINCRBY (`ERR hash value is not an
//!   integer`) or a float for HINCRBYFLOAT (`ERR hash value is not a float`); an infinite
//!   increment is `ERR value is NaN or Infinity`, an infinite result `ERR increment would
//!   produce NaN or Infinity`.
//! - Deleting the last field deletes the key.
//! - Fields with an expiry time before the command's are gone: a command naming one (HGET,
//!   HMGET, HEXISTS, HSTRLEN, HINCRBY, HINCRBYFLOAT, HSETNX) removes it first (`hexpired`, and
//!   `del` with the key if it was the last); HGETALL, HKEYS, HVALS skip it. HLEN counts it
//!   until it is removed, HDEL removes (and counts) it, HSET overwrites it (as an update) and
//!   drops its time; HINCRBY and HINCRBYFLOAT keep a live field's time.
//!
//! HINCRBYFLOAT computes in Redis' 80-bit `long double` ([`crate::long_double`]).

pub(crate) mod expire;
mod getdel;
mod random;
mod scan;

use super::object::encoding::{hash_after_set, hash_before_set};
use super::object::ObjectMeta;
use super::{arg, arity_error, delete_key, owned};
use crate::command::{key_at, CommandSpec, Flags, Handler, KeySpec};
use crate::long_double::LongDouble;
use crate::util::{int_arg, parse_i64};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

type Hash = crate::keyspace::HashFields;

const RO_ACCESS: &[KeySpec] = &[key_at(1, &["RO", "ACCESS"])];
const RO: &[KeySpec] = &[key_at(1, &["RO"])];
const RW_ACCESS_UPDATE: &[KeySpec] = &[key_at(1, &["RW", "ACCESS", "UPDATE"])];
const WRITE_DENYOOM_FAST: Flags = Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST);
const READ_FAST: Flags = Flags::READONLY.and(Flags::FAST);

/// A hash command on the key at index 1.
const fn hash_cmd(handler: Handler) -> CommandSpec {
    CommandSpec { first_key: 1, last_key: 1, step: 1, group: "hash", since: "2.0.0", ..CommandSpec::of(handler) }
}

/// The hash commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "hset",
        arity: -4,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@hash", "@fast"],
        key_specs: &[key_at(1, &["RW", "UPDATE"])],
        summary: "Sets fields of a hash (creating it) and replies with how many were new.",
        complexity: "O(N) in the number of fields given.",
        syntax: "key:key (field value) ...",
        ..hash_cmd(Handler::Engine(hset))
    },
    CommandSpec {
        name: "hsetnx",
        arity: 4,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@hash", "@fast"],
        key_specs: &[key_at(1, &["RW", "INSERT"])],
        summary: "Sets a hash field only when it does not exist yet.",
        syntax: "key:key field value",
        ..hash_cmd(Handler::Engine(hsetnx))
    },
    CommandSpec {
        name: "hmset",
        arity: -4,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@hash", "@fast"],
        key_specs: &[key_at(1, &["RW", "UPDATE"])],
        summary: "Sets fields of a hash and replies OK (older form of HSET).",
        complexity: "O(N) in the number of fields given.",
        syntax: "key:key (field value) ...",
        ..hash_cmd(Handler::Engine(hmset))
    },
    CommandSpec {
        name: "hget",
        arity: 3,
        flags: READ_FAST,
        acl: &["@read", "@hash", "@fast"],
        key_specs: RO_ACCESS,
        summary: "Returns the value of one hash field, or nil.",
        syntax: "key:key field",
        ..hash_cmd(Handler::Engine(hget))
    },
    CommandSpec {
        name: "hmget",
        arity: -3,
        flags: READ_FAST,
        acl: &["@read", "@hash", "@fast"],
        key_specs: RO_ACCESS,
        summary: "Returns the values of several hash fields, nil for each missing one.",
        complexity: "O(N) in the number of fields asked for.",
        syntax: "key:key field ...",
        ..hash_cmd(Handler::Engine(hmget))
    },
    CommandSpec {
        name: "hgetall",
        arity: 2,
        flags: Flags::READONLY,
        acl: &["@read", "@hash", "@slow"],
        tips: &["nondeterministic_output_order"],
        key_specs: RO_ACCESS,
        summary: "Returns every field and value of a hash.",
        complexity: "O(N) in the size of the hash.",
        syntax: "key:key",
        ..hash_cmd(Handler::Engine(hgetall))
    },
    CommandSpec {
        name: "hdel",
        arity: -3,
        flags: Flags::WRITE.and(Flags::FAST),
        acl: &["@write", "@hash", "@fast"],
        key_specs: &[key_at(1, &["RW", "DELETE"])],
        summary: "Removes fields from a hash and replies with how many existed.",
        complexity: "O(N) in the number of fields given.",
        syntax: "key:key field ...",
        ..hash_cmd(Handler::Engine(hdel))
    },
    CommandSpec {
        name: "hincrby",
        arity: 4,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@hash", "@fast"],
        key_specs: RW_ACCESS_UPDATE,
        summary: "Adds an integer to the integer held in a hash field.",
        syntax: "key:key field increment:integer",
        ..hash_cmd(Handler::Engine(hincrby))
    },
    CommandSpec {
        name: "hincrbyfloat",
        arity: 4,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@hash", "@fast"],
        key_specs: RW_ACCESS_UPDATE,
        summary: "Adds a floating-point number to the number held in a hash field.",
        since: "2.6.0",
        syntax: "key:key field increment:double",
        ..hash_cmd(Handler::Engine(hincrbyfloat))
    },
    CommandSpec {
        name: "hlen",
        arity: 2,
        flags: READ_FAST,
        acl: &["@read", "@hash", "@fast"],
        key_specs: RO,
        summary: "Returns the number of fields in a hash.",
        syntax: "key:key",
        ..hash_cmd(Handler::Engine(hlen))
    },
    CommandSpec {
        name: "hexists",
        arity: 3,
        flags: READ_FAST,
        acl: &["@read", "@hash", "@fast"],
        key_specs: RO,
        summary: "Replies 1 if a hash has the field, else 0.",
        syntax: "key:key field",
        ..hash_cmd(Handler::Engine(hexists))
    },
    CommandSpec {
        name: "hkeys",
        arity: 2,
        flags: Flags::READONLY,
        acl: &["@read", "@hash", "@slow"],
        tips: &["nondeterministic_output_order"],
        key_specs: RO_ACCESS,
        summary: "Returns every field name of a hash.",
        complexity: "O(N) in the size of the hash.",
        syntax: "key:key",
        ..hash_cmd(Handler::Engine(hkeys))
    },
    CommandSpec {
        name: "hvals",
        arity: 2,
        flags: Flags::READONLY,
        acl: &["@read", "@hash", "@slow"],
        tips: &["nondeterministic_output_order"],
        key_specs: RO_ACCESS,
        summary: "Returns every value of a hash.",
        complexity: "O(N) in the size of the hash.",
        syntax: "key:key",
        ..hash_cmd(Handler::Engine(hvals))
    },
    CommandSpec {
        name: "hstrlen",
        arity: 3,
        flags: READ_FAST,
        acl: &["@read", "@hash", "@fast"],
        key_specs: RO,
        summary: "Returns the length in bytes of a hash field's value (0 if missing).",
        since: "3.2.0",
        syntax: "key:key field",
        ..hash_cmd(Handler::Engine(hstrlen))
    },
    random::HRANDFIELD,
    getdel::HGETDEL,
    scan::HSCAN,
];

// ---------------------------------------------------------------------------------------------
// Typed access

/// The hash at `key` for reading; `None` when missing, WRONGTYPE for another type.
fn read_hash<'e>(engine: &'e mut Engine, ctx: &CallCtx, key: &[u8]) -> Result<Option<&'e Hash>, CmdError> {
    match engine.lookup_read(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(CmdError::WRONGTYPE),
    }
}

/// WRONGTYPE if `key` holds another type (not an access, nothing removed): checked before
/// lazy field expiry touches the key.
fn check_hash(engine: &Engine, ctx: &CallCtx, key: &[u8]) -> Result<(), CmdError> {
    match engine.db(ctx.db).get_raw(key) {
        Some(e) if !matches!(e.value, Value::Hash(_)) && !e.is_expired(ctx.now_ms) => Err(CmdError::WRONGTYPE),
        _ => Ok(()),
    }
}

/// The hash at `key` for writing, created empty when missing, with its metadata; WRONGTYPE
/// (and nothing created) for another type. The caller must leave it non-empty or delete it.
fn write_hash<'e>(
    engine: &'e mut Engine,
    ctx: &CallCtx,
    key: &Bytes,
) -> Result<(&'e mut Hash, &'e mut ObjectMeta), CmdError> {
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::Hash(Default::default()));
    match &mut entry.value {
        Value::Hash(h) => Ok((h, &mut entry.meta)),
        _ => Err(CmdError::WRONGTYPE),
    }
}

/// Lazy field expiry before a command reads or writes `fields` of the hash at `key`: the
/// expired ones are removed, with `hexpired`, and the key with `del` if none is left.
/// WRONGTYPE (nothing touched) for a live key of another type. One look at the key when no
/// field of the hash is due (the common case); a key whose own time has passed is left to
/// the command's lookup.
fn lazy_expire<'a>(
    engine: &mut Engine,
    ctx: &CallCtx,
    key: &[u8],
    fields: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), CmdError> {
    let (db, now) = (ctx.db, ctx.now_ms);
    match engine.db(db).get_raw(key) {
        Some(e) if e.is_expired(now) => return Ok(()),
        Some(e) => match &e.value {
            Value::Hash(h) if h.min_ttl().is_some_and(|t| t < now) => {}
            Value::Hash(_) => return Ok(()),
            _ => return Err(CmdError::WRONGTYPE),
        },
        None => return Ok(()),
    }
    let removed = engine.expire_fields_lazily(db, key, fields, now);
    if removed.is_empty() {
        return Ok(());
    }
    engine.record_event(db, key, KeyEvent::HExpired);
    engine.attach_subkeys(removed.iter().map(|f| &f[..]));
    engine.sync_field_expiry(db, key);
    let empty = matches!(engine.db(db).get_raw(key).map(|e| &e.value), Some(Value::Hash(h)) if h.is_empty());
    if empty {
        engine.remove(db, key);
        engine.record_event(db, key, KeyEvent::Del);
        engine.signal_ready(db, key);
    }
    Ok(())
}

/// The (field, value) pairs after the key; a field without a value is an arity error.
fn field_pairs(args: &[Bytes]) -> Result<Vec<(&Bytes, &Bytes)>, CmdError> {
    let rest = args.get(2..).unwrap_or(&[]);
    if rest.is_empty() || rest.len() % 2 != 0 {
        return Err(arity_error(args));
    }
    Ok(rest.chunks_exact(2).filter_map(|c| Some((c.first()?, c.get(1)?))).collect())
}

// ---------------------------------------------------------------------------------------------
// Writes

/// Set the pairs; returns how many fields were new.
fn set_fields(engine: &mut Engine, ctx: &CallCtx, args: &[Bytes]) -> Result<i64, CmdError> {
    let key = arg(args, 1)?;
    let pairs = field_pairs(args)?;
    let cfg = engine.config.object;
    let (hash, meta) = write_hash(engine, ctx, key)?;
    hash_before_set(meta, hash, &pairs, &cfg);
    let mut added = 0;
    for (field, value) in pairs {
        if hash.set(field, owned(value)) {
            added += 1;
        }
    }
    hash_after_set(meta, hash, 0, 0, &cfg);
    engine.modified(ctx.db, key, KeyEvent::HSet);
    engine.attach_subkeys(args.iter().skip(2).step_by(2).map(|f| &f[..]));
    Ok(added)
}

fn hset(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    set_fields(engine, ctx, args).map(Reply::Integer)
}

fn hmset(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    set_fields(engine, ctx, args).map(|_| Reply::ok())
}

fn hsetnx(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, field, value) = (arg(args, 1)?, arg(args, 2)?, arg(args, 3)?);
    lazy_expire(engine, ctx, key, [&field[..]])?;
    let now = engine.field_now(ctx.now_ms);
    if read_hash(engine, ctx, key)?.is_some_and(|h| h.get_live(field, now).is_some()) {
        return Ok(Reply::Integer(0));
    }
    let cfg = engine.config.object;
    let (hash, meta) = write_hash(engine, ctx, key)?;
    hash_before_set(meta, hash, &[(field, value)], &cfg);
    hash.set(field, owned(value));
    hash_after_set(meta, hash, 0, 0, &cfg);
    engine.modified(ctx.db, key, KeyEvent::HSet);
    engine.attach_subkeys([&field[..]]);
    Ok(Reply::Integer(1))
}

fn hdel(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let (removed, now_empty, timed) = match engine.lookup_mut(ctx.db, key, ctx.now_ms).map(|e| &mut e.value) {
        None => return Ok(Reply::Integer(0)),
        Some(Value::Hash(h)) => {
            let timed = h.ttl_count() > 0;
            let removed: Vec<&Bytes> = args.iter().skip(2).filter(|f| h.swap_remove(&f[..]).is_some()).collect();
            (removed, h.is_empty(), timed)
        }
        Some(_) => return Err(CmdError::WRONGTYPE),
    };
    if timed && !now_empty {
        engine.sync_field_expiry(ctx.db, key);
    }
    if now_empty {
        engine.record_event(ctx.db, key, KeyEvent::HDel);
        engine.attach_subkeys(removed.iter().map(|f| &f[..]));
        delete_key(engine, ctx.db, key);
    } else if !removed.is_empty() {
        engine.modified(ctx.db, key, KeyEvent::HDel);
        engine.attach_subkeys(removed.iter().map(|f| &f[..]));
    }
    Ok(Reply::Integer(removed.len() as i64))
}

fn hincrby(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, field) = (arg(args, 1)?, arg(args, 2)?);
    let incr = int_arg(arg(args, 3)?)?;
    lazy_expire(engine, ctx, key, [&field[..]])?;
    let now = engine.field_now(ctx.now_ms);
    let current = match read_hash(engine, ctx, key)?.and_then(|h| h.get_live(field, now)) {
        None => 0,
        Some(v) => parse_i64(v).ok_or(CmdError::full("ERR hash value is not an integer"))?,
    };
    let new = current.checked_add(incr).ok_or(CmdError::full("ERR increment or decrement would overflow"))?;
    let cfg = engine.config.object;
    let (hash, meta) = write_hash(engine, ctx, key)?;
    let value = Bytes::from(new.to_string());
    hash_after_set(meta, hash, field.len(), value.len(), &cfg);
    hash.insert_keep_ttl(owned(field), value);
    hash_after_set(meta, hash, 0, 0, &cfg);
    engine.modified(ctx.db, key, KeyEvent::HIncrBy);
    engine.attach_subkeys([&field[..]]);
    Ok(Reply::Integer(new))
}

fn hincrbyfloat(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, field) = (arg(args, 1)?, arg(args, 2)?);
    let incr = LongDouble::parse(arg(args, 3)?).ok_or(CmdError::NOT_FLOAT)?;
    if !incr.is_finite() {
        return Err(CmdError::full("ERR value is NaN or Infinity"));
    }
    lazy_expire(engine, ctx, key, [&field[..]])?;
    let now = engine.field_now(ctx.now_ms);
    let current = match read_hash(engine, ctx, key)?.and_then(|h| h.get_live(field, now)) {
        None => LongDouble::ZERO,
        Some(v) => LongDouble::parse(v).ok_or(CmdError::full("ERR hash value is not a float"))?,
    };
    let new = current.checked_add(incr).ok_or(CmdError::full("ERR increment would produce NaN or Infinity"))?;
    let text = new.to_text();
    let cfg = engine.config.object;
    let (hash, meta) = write_hash(engine, ctx, key)?;
    hash_after_set(meta, hash, field.len(), text.len(), &cfg);
    hash.insert_keep_ttl(owned(field), text.clone());
    hash_after_set(meta, hash, 0, 0, &cfg);
    engine.modified(ctx.db, key, KeyEvent::HIncrByFloat);
    engine.attach_subkeys([&field[..]]);
    Ok(Reply::Bulk(text))
}

// ---------------------------------------------------------------------------------------------
// Reads

fn hget(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, field) = (arg(args, 1)?, arg(args, 2)?);
    lazy_expire(engine, ctx, key, [&field[..]])?;
    let now = engine.field_now(ctx.now_ms);
    let value = read_hash(engine, ctx, key)?.and_then(|h| h.get_live(field, now)).map(Bytes::copy_from_slice);
    Ok(value.map_or(Reply::Null, Reply::Bulk))
}

fn hmget(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    lazy_expire(engine, ctx, key, args.iter().skip(2).map(|f| &f[..]))?;
    let now = engine.field_now(ctx.now_ms);
    let hash = read_hash(engine, ctx, key)?;
    let out = args
        .iter()
        .skip(2)
        .map(|f| hash.and_then(|h| h.get_live(f, now)).map_or(Reply::Null, |v| Reply::Bulk(Bytes::copy_from_slice(v))))
        .collect();
    Ok(Reply::Array(out))
}

fn hgetall(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let now = engine.field_now(ctx.now_ms);
    let hash = read_hash(engine, ctx, arg(args, 1)?)?;
    let out = hash
        .into_iter()
        .flat_map(|h| h.iter_live(now))
        .map(|(f, v)| (Reply::Bulk(Bytes::copy_from_slice(f)), Reply::Bulk(Bytes::copy_from_slice(v))))
        .collect();
    Ok(Reply::Map(out))
}

fn hkeys(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let now = engine.field_now(ctx.now_ms);
    let hash = read_hash(engine, ctx, arg(args, 1)?)?;
    Ok(Reply::Array(
        hash.into_iter().flat_map(|h| h.iter_live(now)).map(|(f, _)| Reply::Bulk(Bytes::copy_from_slice(f))).collect(),
    ))
}

fn hvals(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let now = engine.field_now(ctx.now_ms);
    let hash = read_hash(engine, ctx, arg(args, 1)?)?;
    Ok(Reply::Array(
        hash.into_iter().flat_map(|h| h.iter_live(now)).map(|(_, v)| Reply::Bulk(Bytes::copy_from_slice(v))).collect(),
    ))
}

fn hlen(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let len = read_hash(engine, ctx, arg(args, 1)?)?.map_or(0, |h| h.len());
    Ok(Reply::Integer(len as i64))
}

fn hexists(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, field) = (arg(args, 1)?, arg(args, 2)?);
    lazy_expire(engine, ctx, key, [&field[..]])?;
    let now = engine.field_now(ctx.now_ms);
    let found = read_hash(engine, ctx, key)?.is_some_and(|h| h.get_live(field, now).is_some());
    Ok(Reply::Integer(i64::from(found)))
}

fn hstrlen(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, field) = (arg(args, 1)?, arg(args, 2)?);
    lazy_expire(engine, ctx, key, [&field[..]])?;
    let now = engine.field_now(ctx.now_ms);
    let len = read_hash(engine, ctx, key)?.and_then(|h| h.get_live(field, now)).map_or(0, <[u8]>::len);
    Ok(Reply::Integer(len as i64))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

    #[test]
    fn set_get_and_arity() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HSET", "h", "a"]), err("ERR wrong number of arguments for 'hset' command"));
        assert_eq!(h.run(&["HSET", "h", "a", "1", "b"]), err("ERR wrong number of arguments for 'hset' command"));
        assert_eq!(h.run(&["HMSET", "h", "a", "1", "b"]), err("ERR wrong number of arguments for 'hmset' command"));
        assert_eq!(h.run(&["EXISTS", "h"]), int(0));
        assert_eq!(h.run(&["HSET", "h", "a", "1", "b", "2", "a", "3"]), int(2));
        assert_eq!(h.run(&["HGET", "h", "a"]), bulk("3"));
        assert_eq!(h.run(&["HMSET", "h", "c", "x"]), ok());
        assert_eq!(h.run(&["HSETNX", "h", "a", "9"]), int(0));
        assert_eq!(h.run(&["HSETNX", "h", "d", "9"]), int(1));
        assert_eq!(h.run(&["HLEN", "h"]), int(4));
        assert_eq!(h.run(&["HEXISTS", "h", "d"]), int(1));
        assert_eq!(h.run(&["HEXISTS", "h", "z"]), int(0));
        assert_eq!(h.run(&["HSTRLEN", "h", "c"]), int(1));
        assert_eq!(h.run(&["HSTRLEN", "h", "z"]), int(0));
        assert_eq!(h.run(&["HSTRLEN", "nope", "z"]), int(0));
        assert_eq!(h.run(&["HMGET", "h", "a", "z"]), Reply::Array(vec![bulk("3"), Reply::Null]));
        assert_eq!(h.run(&["HMGET", "nope", "a", "b"]), Reply::Array(vec![Reply::Null, Reply::Null]));
        assert_eq!(sorted_strings(&h.run(&["HKEYS", "h"])), ["a", "b", "c", "d"]);
        assert_eq!(sorted_strings(&h.run(&["HVALS", "h"])), ["2", "3", "9", "x"]);
        let Reply::Map(pairs) = h.run(&["HGETALL", "h"]) else { panic!("map") };
        assert_eq!(pairs.len(), 4);
        assert!(pairs.contains(&(bulk("c"), bulk("x"))));
        assert_eq!(h.run(&["HGETALL", "nope"]), Reply::Map(vec![]));
        assert_eq!(h.run(&["HGET", "nope", "a"]), Reply::Null);
    }

    #[test]
    fn hdel_deletes_emptied_hash() {
        let mut h = Harness::new();
        h.run(&["HSET", "h", "a", "1", "b", "2"]);
        assert_eq!(h.run(&["HDEL", "h", "a", "z"]), int(1));
        assert_eq!(h.run(&["HDEL", "nope", "a"]), int(0));
        h.engine.watch.watch(h.client_id, 0, "h".into(), false);
        assert_eq!(h.run(&["HDEL", "h", "z"]), int(0));
        assert!(!h.engine.watch.is_dirty(h.client_id));
        assert_eq!(h.run(&["HDEL", "h", "b", "b"]), int(1));
        assert!(h.engine.watch.is_dirty(h.client_id));
        assert_eq!(h.run(&["EXISTS", "h"]), int(0));
    }

    #[test]
    fn hincrby_and_hincrbyfloat() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HINCRBY", "h", "n", "5"]), int(5));
        assert_eq!(
            h.run(&["HINCRBY", "h", "n", "9223372036854775807"]),
            err("ERR increment or decrement would overflow")
        );
        assert_eq!(h.run(&["HINCRBY", "h", "n", "x"]), err("ERR value is not an integer or out of range"));
        h.run(&["HSET", "h", "s", "xx", "sp", " 1"]);
        assert_eq!(h.run(&["HINCRBY", "h", "s", "1"]), err("ERR hash value is not an integer"));
        assert_eq!(h.run(&["HINCRBY", "h", "sp", "1"]), err("ERR hash value is not an integer"));
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "s", "1"]), err("ERR hash value is not a float"));
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "n", "1.5"]), bulk("6.5"));
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "m", "inf"]), err("ERR value is NaN or Infinity"));
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "m", "abc"]), err("ERR value is not a valid float"));
        assert_eq!(h.run(&["HEXISTS", "h", "m"]), int(0));
        // Failed increments on a missing key create nothing.
        assert_eq!(h.run(&["HINCRBYFLOAT", "new", "m", "abc"]), err("ERR value is not a valid float"));
        assert_eq!(h.run(&["EXISTS", "new"]), int(0));
    }

    #[test]
    fn wrongtype_everywhere() {
        let mut h = Harness::new();
        h.run(&["SET", "s", "v"]);
        for cmd in [
            &["HSET", "s", "f", "v"][..],
            &["HSETNX", "s", "f", "v"],
            &["HMSET", "s", "f", "v"],
            &["HGET", "s", "f"],
            &["HMGET", "s", "f"],
            &["HGETALL", "s"],
            &["HDEL", "s", "f"],
            &["HINCRBY", "s", "f", "1"],
            &["HINCRBYFLOAT", "s", "f", "1"],
            &["HLEN", "s"],
            &["HEXISTS", "s", "f"],
            &["HKEYS", "s"],
            &["HVALS", "s"],
            &["HSTRLEN", "s", "f"],
        ] {
            assert_eq!(h.run(cmd), err(WRONGTYPE), "{cmd:?}");
        }
        assert_eq!(h.run(&["GET", "s"]), bulk("v"));
    }
}
