//! Generic keyspace commands: DEL, UNLINK, EXISTS, TYPE, KEYS, SCAN, RENAME, RENAMENX, COPY,
//! EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, PERSIST, EXPIRETIME, PEXPIRETIME, TOUCH,
//! RANDOMKEY. (DBSIZE, FLUSHDB, FLUSHALL, SWAPDB and SELECT are server commands.)
//!
//! Costs in our implementation: single-key commands are O(1) except that deleting or copying a
//! collection is O(M) in its size (UNLINK frees synchronously too: the engine has no thread to
//! hand memory to). KEYS is O(N) in the database. SCAN reads the whole database on each call
//! (see `keyspace::scan`), so it is O(N log COUNT) per call rather than Redis' O(COUNT).
//! RANDOMKEY is O(N): a `HashMap` cannot pick its n-th entry directly.
//!
//! Redis behaviours we match on purpose:
//! - UNLINK replies exactly as DEL.
//! - EXISTS counts every argument, so a repeated key is counted twice.
//! - RENAME onto itself replies `OK` (RENAMENX `0`) without touching the key, but still fails
//!   with `ERR no such key` when the key is missing. RENAME moves the TTL with the value.
//! - COPY keeps the source's TTL; copying onto itself is `ERR source and destination objects
//!   are the same` even when the key does not exist; a DB outside `0..databases` is
//!   `ERR DB index is out of range`.
//! - EXPIRE and friends: options are checked before the time (an unknown option wins over a
//!   bad integer); a time that overflows milliseconds is `ERR invalid expire time in '<cmd>'
//!   command`; GT treats "no TTL" as infinite (never greater), LT likewise (always less); a time
//!   already past deletes the key and replies 1.
//! - TTL and EXPIRETIME round milliseconds to the nearest second.
//! - SCAN: the cursor is read as Redis 8 reads it (see `parse_cursor`): `SCAN -1` is
//!   `ERR invalid cursor` (Redis 7.0 let it wrap around), as is anything that is not an
//!   unsigned 64-bit integer; COUNT < 1 is a syntax
//!   error; an unknown TYPE name matches nothing (Redis 8 keeps that for compatibility); COUNT
//!   bounds the keys examined, not returned.
//! - KEYS skips expired keys without deleting them; SCAN deletes the expired keys it meets.

use super::{arg, delete_key, is_token, owned};
use crate::command::{key_at, keys_from, CommandSpec, Flags, Handler};
use crate::glob::glob_match;
use crate::util::{int_arg, parse_i64};
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

const RW_UPDATE: &[&str] = &["RW", "UPDATE"];
const RO_ACCESS: &[&str] = &["RO", "ACCESS"];

/// The generic keyspace commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "del",
        arity: -2,
        flags: Flags::WRITE,
        first_key: 1,
        last_key: -1,
        step: 1,
        acl: &["@keyspace", "@write", "@slow"],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[keys_from(1, 1, &["RM", "DELETE"])],
        summary: "Deletes keys and replies with how many existed.",
        complexity: "O(N) in the number of keys, plus O(M) per collection in its size.",
        syntax: "key:key ...",
        handler: Handler::Engine(del),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unlink",
        arity: -2,
        flags: Flags::WRITE.and(Flags::FAST),
        first_key: 1,
        last_key: -1,
        step: 1,
        acl: &["@keyspace", "@write", "@fast"],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[keys_from(1, 1, &["RM", "DELETE"])],
        summary: "Deletes keys like DEL; kept for clients that free memory in the background.",
        since: "4.0.0",
        complexity: "O(N) in the number of keys, plus O(M) per collection (freed synchronously).",
        syntax: "key:key ...",
        handler: Handler::Engine(del),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exists",
        arity: -2,
        flags: Flags::READONLY.and(Flags::FAST),
        first_key: 1,
        last_key: -1,
        step: 1,
        acl: &["@keyspace", "@read", "@fast"],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[keys_from(1, 1, &["RO"])],
        summary: "Counts how many of the given keys exist, repeats included.",
        complexity: "O(N) in the number of keys given.",
        syntax: "key:key ...",
        handler: Handler::Engine(exists),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "type",
        arity: 2,
        flags: Flags::READONLY.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@read", "@fast"],
        key_specs: &[key_at(1, &["RO"])],
        summary: "Names the type of the value stored at a key, or none.",
        syntax: "key:key",
        handler: Handler::Engine(type_cmd),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "keys",
        arity: 2,
        flags: Flags::READONLY,
        acl: &["@keyspace", "@read", "@slow", "@dangerous"],
        tips: &["request_policy:all_shards", "nondeterministic_output_order"],
        summary: "Lists every key matching a glob pattern.",
        complexity: "O(N) in the number of keys in the database.",
        syntax: "pattern:pattern",
        handler: Handler::Engine(keys),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "scan",
        arity: -2,
        flags: Flags::READONLY,
        acl: &["@keyspace", "@read", "@slow"],
        tips: &["nondeterministic_output", "request_policy:special"],
        summary: "Walks the keyspace a batch at a time with a cursor.",
        since: "2.8.0",
        complexity: "O(N log COUNT) per call, N the number of keys in the database.",
        syntax: "cursor:integer [MATCH pattern:pattern] [COUNT count:integer] [TYPE type]",
        handler: Handler::Engine(scan),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rename",
        arity: 3,
        flags: Flags::WRITE,
        first_key: 1,
        last_key: 2,
        step: 1,
        acl: &["@keyspace", "@write", "@slow"],
        key_specs: &[key_at(1, &["RW", "ACCESS", "DELETE"]), key_at(2, &["OW", "UPDATE"])],
        summary: "Moves a key's value and TTL to a new name, replacing what was there.",
        complexity: "O(1), plus O(M) to free a replaced collection.",
        syntax: "key:key newkey:key",
        handler: Handler::Engine(rename),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "renamenx",
        arity: 3,
        flags: Flags::WRITE.and(Flags::FAST),
        first_key: 1,
        last_key: 2,
        step: 1,
        acl: &["@keyspace", "@write", "@fast"],
        key_specs: &[key_at(1, &["RW", "ACCESS", "DELETE"]), key_at(2, &["OW", "INSERT"])],
        summary: "Moves a key to a new name only when the new name is free.",
        syntax: "key:key newkey:key",
        handler: Handler::Engine(renamenx),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "copy",
        arity: -3,
        flags: Flags::WRITE.and(Flags::DENYOOM),
        first_key: 1,
        last_key: 2,
        step: 1,
        acl: &["@keyspace", "@write", "@slow"],
        key_specs: &[key_at(1, RO_ACCESS), key_at(2, &["OW", "UPDATE"])],
        summary:
            "Duplicates a key's value and TTL under another name, possibly in another database.",
        since: "6.2.0",
        complexity: "O(M) in the size of the copied value.",
        syntax: "source:key destination:key [DB destination-db:integer] [REPLACE]",
        handler: Handler::Engine(copy),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "expire",
        arity: -3,
        flags: Flags::WRITE.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@write", "@fast"],
        key_specs: &[key_at(1, RW_UPDATE)],
        summary: "Sets a key to expire after a number of seconds.",
        complexity: "O(log N) to update the expiry index.",
        syntax: "key:key seconds:integer [NX | XX | GT | LT]",
        handler: Handler::Engine(expire),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pexpire",
        arity: -3,
        flags: Flags::WRITE.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@write", "@fast"],
        key_specs: &[key_at(1, RW_UPDATE)],
        summary: "Sets a key to expire after a number of milliseconds.",
        since: "2.6.0",
        complexity: "O(log N) to update the expiry index.",
        syntax: "key:key milliseconds:integer [NX | XX | GT | LT]",
        handler: Handler::Engine(pexpire),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "expireat",
        arity: -3,
        flags: Flags::WRITE.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@write", "@fast"],
        key_specs: &[key_at(1, RW_UPDATE)],
        summary: "Sets a key to expire at a Unix time in seconds.",
        since: "1.2.0",
        complexity: "O(log N) to update the expiry index.",
        syntax: "key:key unix-time-seconds:unix-time [NX | XX | GT | LT]",
        handler: Handler::Engine(expireat),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pexpireat",
        arity: -3,
        flags: Flags::WRITE.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@write", "@fast"],
        key_specs: &[key_at(1, RW_UPDATE)],
        summary: "Sets a key to expire at a Unix time in milliseconds.",
        since: "2.6.0",
        complexity: "O(log N) to update the expiry index.",
        syntax: "key:key unix-time-milliseconds:unix-time [NX | XX | GT | LT]",
        handler: Handler::Engine(pexpireat),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "ttl",
        arity: 2,
        flags: Flags::READONLY.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@read", "@fast"],
        tips: &["nondeterministic_output"],
        key_specs: &[key_at(1, RO_ACCESS)],
        summary: "Tells how many seconds a key has left to live (-1 none, -2 no key).",
        syntax: "key:key",
        handler: Handler::Engine(ttl),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pttl",
        arity: 2,
        flags: Flags::READONLY.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@read", "@fast"],
        tips: &["nondeterministic_output"],
        key_specs: &[key_at(1, RO_ACCESS)],
        summary: "Tells how many milliseconds a key has left to live (-1 none, -2 no key).",
        since: "2.6.0",
        syntax: "key:key",
        handler: Handler::Engine(pttl),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "persist",
        arity: 2,
        flags: Flags::WRITE.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@write", "@fast"],
        key_specs: &[key_at(1, RW_UPDATE)],
        summary: "Removes a key's expiry so it lives until deleted.",
        since: "2.2.0",
        complexity: "O(log N) to update the expiry index.",
        syntax: "key:key",
        handler: Handler::Engine(persist),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "expiretime",
        arity: 2,
        flags: Flags::READONLY.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@read", "@fast"],
        key_specs: &[key_at(1, RO_ACCESS)],
        summary: "Tells the Unix time in seconds at which a key expires (-1 none, -2 no key).",
        since: "7.0.0",
        syntax: "key:key",
        handler: Handler::Engine(expiretime),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pexpiretime",
        arity: 2,
        flags: Flags::READONLY.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@read", "@fast"],
        key_specs: &[key_at(1, RO_ACCESS)],
        summary: "Tells the Unix time in milliseconds at which a key expires (-1 none, -2 no key).",
        since: "7.0.0",
        syntax: "key:key",
        handler: Handler::Engine(pexpiretime),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "touch",
        arity: -2,
        flags: Flags::READONLY.and(Flags::FAST),
        first_key: 1,
        last_key: -1,
        step: 1,
        acl: &["@keyspace", "@read", "@fast"],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        key_specs: &[keys_from(1, 1, &["RO"])],
        summary: "Counts the given keys that exist, as an access (rill keeps no access times).",
        since: "3.2.1",
        complexity: "O(N) in the number of keys given.",
        syntax: "key:key ...",
        handler: Handler::Engine(exists),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "randomkey",
        arity: 1,
        flags: Flags::READONLY,
        acl: &["@keyspace", "@read", "@slow"],
        tips: &["request_policy:all_shards", "nondeterministic_output"],
        summary: "Returns the name of a key picked at random, or nil in an empty database.",
        complexity: "O(N) in the number of keys in the database.",
        handler: Handler::Engine(randomkey),
        ..CommandSpec::DEFAULT
    },
];

// ---------------------------------------------------------------------------------------------
// DEL / UNLINK / EXISTS / TOUCH / TYPE

fn del(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let mut removed = 0;
    for key in args.iter().skip(1) {
        // An expired key is removed by the lookup and does not count.
        if engine.lookup(ctx.db, key, ctx.now_ms).is_some() && delete_key(engine, ctx.db, key) {
            removed += 1;
        }
    }
    Ok(Reply::Integer(removed))
}

/// EXISTS and TOUCH: every argument counted, repeats included.
fn exists(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let mut n = 0;
    for key in args.iter().skip(1) {
        if engine.lookup_read(ctx.db, key, ctx.now_ms).is_some() {
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

fn type_cmd(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let name = engine.lookup(ctx.db, key, ctx.now_ms).map_or("none", |e| e.value.type_name());
    Ok(Reply::simple(name))
}

// ---------------------------------------------------------------------------------------------
// KEYS / SCAN / RANDOMKEY

fn keys(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let pattern = arg(args, 1)?;
    let all = pattern.as_ref() == b"*";
    let out = engine
        .db(ctx.db)
        .iter()
        .filter(|(k, e)| !e.is_expired(ctx.now_ms) && (all || glob_match(pattern, k, false)))
        .map(|(k, _)| Reply::Bulk(k.clone()))
        .collect();
    Ok(Reply::Array(out))
}

/// A parsed SCAN request.
struct ScanRequest<'a> {
    cursor: u64,
    pattern: Option<&'a [u8]>,
    count: usize,
    type_name: Option<&'a [u8]>,
}

const SCAN_DEFAULT_COUNT: usize = 10;

fn parse_scan(args: &[Bytes]) -> Result<ScanRequest<'_>, CmdError> {
    let cursor = parse_cursor(arg(args, 1)?).ok_or(CmdError::full("ERR invalid cursor"))?;
    let mut req = ScanRequest { cursor, pattern: None, count: SCAN_DEFAULT_COUNT, type_name: None };
    let mut i = 2;
    while let Some(opt) = args.get(i) {
        let value = args.get(i + 1).ok_or(CmdError::SYNTAX)?;
        if is_token(opt, "MATCH") {
            req.pattern = Some(value);
        } else if is_token(opt, "COUNT") {
            let n = int_arg(value)?;
            if n < 1 {
                return Err(CmdError::SYNTAX);
            }
            req.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is_token(opt, "TYPE") {
            req.type_name = Some(value);
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 2;
    }
    Ok(req)
}

/// A cursor as Redis 8 reads it: text that is a canonical signed integer must not be
/// negative; anything else is read by C's `strtoull` (leading whitespace, an optional sign
/// where `-` wraps around, decimal digits, nothing after, no overflow). So `-1` is refused
/// while ` -1` and `-0` are accepted, as in Redis.
fn parse_cursor(b: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64(b) {
        return u64::try_from(v).ok();
    }
    // C's isspace: space, \t, \n, \v, \f, \r.
    let start = b.iter().position(|c| !matches!(c, b' ' | b'\t'..=b'\r'))?;
    let rest = b.get(start..)?;
    let (negative, digits) = match rest.split_first() {
        Some((b'-', d)) => (true, d),
        Some((b'+', d)) => (false, d),
        _ => (false, rest),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if negative { v.wrapping_neg() } else { v })
}

fn scan(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let req = parse_scan(args)?;
    let (next, batch) = engine.db(ctx.db).scan(req.cursor, req.count);
    let mut out = Vec::with_capacity(batch.len());
    for key in batch {
        // As Redis, SCAN removes the expired keys it meets (a write WATCH sees).
        let Some(entry) = engine.lookup(ctx.db, &key, ctx.now_ms) else { continue };
        if let Some(t) = req.type_name {
            if !t.eq_ignore_ascii_case(entry.value.type_name().as_bytes()) {
                continue;
            }
        }
        if let Some(p) = req.pattern {
            if !glob_match(p, &key, false) {
                continue;
            }
        }
        out.push(Reply::Bulk(key));
    }
    Ok(Reply::Array(vec![Reply::Bulk(Bytes::from(next.to_string())), Reply::Array(out)]))
}

fn randomkey(engine: &mut Engine, ctx: &mut CallCtx, _args: &[Bytes]) -> Result<Reply, CmdError> {
    // Each round either returns a live key or removes an expired one, so this ends.
    loop {
        let len = engine.db(ctx.db).len();
        if len == 0 {
            return Ok(Reply::Null);
        }
        let pick = (engine.random_u64() % len as u64) as usize;
        let Some(key) = engine.db(ctx.db).iter().nth(pick).map(|(k, _)| k.clone()) else {
            return Ok(Reply::Null);
        };
        if engine.lookup(ctx.db, &key, ctx.now_ms).is_some() {
            return Ok(Reply::Bulk(key));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RENAME / RENAMENX / COPY

fn rename(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    rename_generic(engine, ctx, args, false)
}

fn renamenx(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    rename_generic(engine, ctx, args, true)
}

fn rename_generic(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    args: &[Bytes],
    nx: bool,
) -> Result<Reply, CmdError> {
    let (src, dst) = (arg(args, 1)?, arg(args, 2)?);
    let (db, now) = (ctx.db, ctx.now_ms);
    if engine.lookup(db, src, now).is_none() {
        return Err(CmdError::NO_SUCH_KEY);
    }
    if src == dst {
        // Same name: nothing moves and nothing is signalled.
        return Ok(if nx { Reply::Integer(0) } else { Reply::ok() });
    }
    if nx && engine.lookup(db, dst, now).is_some() {
        return Ok(Reply::Integer(0));
    }
    let Some(entry) = engine.remove(db, src) else { return Err(CmdError::NO_SUCH_KEY) };
    engine.modified(db, src);
    engine.remove(db, dst);
    let dst = owned(dst);
    engine.insert(db, dst.clone(), entry.value);
    engine.set_expire(db, &dst, entry.expire_at_ms);
    engine.modified(db, &dst);
    engine.signal_ready(db, &dst);
    Ok(if nx { Reply::Integer(1) } else { Reply::ok() })
}

/// A parsed COPY request.
struct CopyRequest {
    dest_db: usize,
    replace: bool,
}

fn parse_copy(engine: &Engine, ctx: &CallCtx, args: &[Bytes]) -> Result<CopyRequest, CmdError> {
    let mut dest_db: i64 = ctx.db as i64;
    let mut replace = false;
    let mut i = 3;
    while let Some(opt) = args.get(i) {
        if is_token(opt, "REPLACE") {
            replace = true;
            i += 1;
        } else if is_token(opt, "DB") {
            let v = args.get(i + 1).ok_or(CmdError::SYNTAX)?;
            // Redis reads the index as a C int.
            dest_db =
                parse_i64(v).filter(|n| i32::try_from(*n).is_ok()).ok_or(CmdError::NOT_INTEGER)?;
            i += 2;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    let dest_db = usize::try_from(dest_db)
        .ok()
        .filter(|d| *d < engine.dbs.len())
        .ok_or(CmdError::full("ERR DB index is out of range"))?;
    Ok(CopyRequest { dest_db, replace })
}

fn copy(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (src, dst) = (arg(args, 1)?, arg(args, 2)?);
    let req = parse_copy(engine, ctx, args)?;
    if src == dst && req.dest_db == ctx.db {
        return Err(CmdError::full("ERR source and destination objects are the same"));
    }
    let Some(entry) = engine.lookup(ctx.db, src, ctx.now_ms).cloned() else {
        return Ok(Reply::Integer(0));
    };
    if engine.lookup(req.dest_db, dst, ctx.now_ms).is_some() {
        if !req.replace {
            return Ok(Reply::Integer(0));
        }
        engine.remove(req.dest_db, dst);
    }
    let dst = owned(dst);
    engine.insert(req.dest_db, dst.clone(), entry.value);
    engine.set_expire(req.dest_db, &dst, entry.expire_at_ms);
    engine.modified(req.dest_db, &dst);
    engine.signal_ready(req.dest_db, &dst);
    Ok(Reply::Integer(1))
}

// ---------------------------------------------------------------------------------------------
// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT

/// The condition an EXPIRE-family option puts on the current TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpireCondition {
    Always,
    /// NX: only when the key has no TTL.
    NoTtl,
    /// XX: only when the key has a TTL.
    HasTtl,
    /// GT: only when the new time is later (no TTL counts as infinite).
    Later,
    /// LT: only when the new time is earlier (no TTL counts as infinite).
    Earlier,
}

/// How an EXPIRE-family command reads its time argument.
#[derive(Debug, Clone, Copy)]
struct ExpireForm {
    /// The canonical command name, for the overflow error.
    name: &'static str,
    /// Seconds (true) or milliseconds.
    seconds: bool,
    /// A Unix time (true) or a time to live.
    absolute: bool,
}

fn parse_expire_condition(opts: &[Bytes]) -> Result<ExpireCondition, CmdError> {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in opts {
        if is_token(opt, "NX") {
            nx = true;
        } else if is_token(opt, "XX") {
            xx = true;
        } else if is_token(opt, "GT") {
            gt = true;
        } else if is_token(opt, "LT") {
            lt = true;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::full(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::full("ERR GT and LT options at the same time are not compatible"));
    }
    Ok(match (nx, xx, gt, lt) {
        (true, ..) => ExpireCondition::NoTtl,
        (_, _, true, _) => ExpireCondition::Later,
        (_, _, _, true) => ExpireCondition::Earlier,
        (_, true, ..) => ExpireCondition::HasTtl,
        _ => ExpireCondition::Always,
    })
}

/// The absolute expiry time in ms, with Redis' overflow checks.
fn expire_time_ms(form: ExpireForm, raw: i64, now_ms: i64) -> Result<i64, CmdError> {
    let invalid = || CmdError::owned(format!("ERR invalid expire time in '{}' command", form.name));
    let mut when = raw;
    if form.seconds {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    if !form.absolute {
        when = when.checked_add(now_ms).ok_or_else(invalid)?;
    }
    Ok(when)
}

fn expire_generic(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    args: &[Bytes],
    form: ExpireForm,
) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let condition = parse_expire_condition(args.get(3..).unwrap_or(&[]))?;
    let when = expire_time_ms(form, int_arg(arg(args, 2)?)?, ctx.now_ms)?;
    let Some(entry) = engine.lookup(ctx.db, key, ctx.now_ms) else { return Ok(Reply::Integer(0)) };
    let current = entry.expire_at_ms;
    let allowed = match condition {
        ExpireCondition::Always => true,
        ExpireCondition::NoTtl => current.is_none(),
        ExpireCondition::HasTtl => current.is_some(),
        ExpireCondition::Later => current.is_some_and(|c| when > c),
        ExpireCondition::Earlier => match current {
            None => true,
            Some(c) => when < c,
        },
    };
    if !allowed {
        return Ok(Reply::Integer(0));
    }
    if when <= ctx.now_ms {
        delete_key(engine, ctx.db, key);
    } else {
        engine.set_expire(ctx.db, key, Some(when));
        engine.modified(ctx.db, key);
    }
    Ok(Reply::Integer(1))
}

fn expire(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let form = ExpireForm { name: "expire", seconds: true, absolute: false };
    expire_generic(engine, ctx, args, form)
}

fn pexpire(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let form = ExpireForm { name: "pexpire", seconds: false, absolute: false };
    expire_generic(engine, ctx, args, form)
}

fn expireat(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let form = ExpireForm { name: "expireat", seconds: true, absolute: true };
    expire_generic(engine, ctx, args, form)
}

fn pexpireat(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let form = ExpireForm { name: "pexpireat", seconds: false, absolute: true };
    expire_generic(engine, ctx, args, form)
}

// ---------------------------------------------------------------------------------------------
// TTL / PTTL / EXPIRETIME / PEXPIRETIME / PERSIST

/// Shared by the four TTL readers: `absolute` reports the Unix time instead of the time left;
/// `millis` reports ms instead of seconds rounded to the nearest one.
fn ttl_generic(
    engine: &mut Engine,
    ctx: &CallCtx,
    args: &[Bytes],
    absolute: bool,
    millis: bool,
) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let Some(entry) = engine.lookup_read(ctx.db, key, ctx.now_ms) else {
        return Ok(Reply::Integer(-2));
    };
    let Some(at) = entry.expire_at_ms else { return Ok(Reply::Integer(-1)) };
    let ms = if absolute { at } else { at.saturating_sub(ctx.now_ms).max(0) };
    Ok(Reply::Integer(if millis { ms } else { ms.saturating_add(500) / 1000 }))
}

fn ttl(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, false, false)
}

fn pttl(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, false, true)
}

fn expiretime(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, true, false)
}

fn pexpiretime(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, true, true)
}

fn persist(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let has_ttl = engine.lookup(ctx.db, key, ctx.now_ms).is_some_and(|e| e.expire_at_ms.is_some());
    if !has_ttl {
        return Ok(Reply::Integer(0));
    }
    engine.set_expire(ctx.db, key, None);
    engine.modified(ctx.db, key);
    Ok(Reply::Integer(1))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    #[test]
    fn del_exists_type_touch() {
        let mut h = Harness::new();
        h.run(&["SET", "a", "1"]);
        h.run(&["RPUSH", "l", "x"]);
        assert_eq!(h.run(&["EXISTS", "a", "a", "nope", "l"]), int(3));
        assert_eq!(h.run(&["TOUCH", "a", "a", "nope"]), int(2));
        assert_eq!(h.run(&["TYPE", "a"]), Reply::simple("string"));
        assert_eq!(h.run(&["TYPE", "l"]), Reply::simple("list"));
        assert_eq!(h.run(&["TYPE", "nope"]), Reply::simple("none"));
        assert_eq!(h.run(&["DEL", "a", "nope", "l", "a"]), int(2));
        assert_eq!(h.run(&["UNLINK", "a"]), int(0));
        assert_eq!(h.run(&["DEL"]), err("ERR wrong number of arguments for 'del' command"));
    }

    #[test]
    fn keys_matches_glob_and_skips_expired() {
        let mut h = Harness::new();
        for k in ["hello", "hallo", "hxllo", "other"] {
            h.run(&["SET", k, "v"]);
        }
        h.run(&["PEXPIRE", "hxllo", "10"]);
        h.now_ms += 10;
        assert_eq!(sorted_strings(&h.run(&["KEYS", "h?llo"])), ["hallo", "hello"]);
        assert_eq!(sorted_strings(&h.run(&["KEYS", "*"])), ["hallo", "hello", "other"]);
    }

    fn scan_all(h: &mut Harness, extra: &[&str]) -> Vec<String> {
        let mut cursor = "0".to_string();
        let mut all = Vec::new();
        loop {
            let mut args = vec!["SCAN", cursor.as_str()];
            args.extend_from_slice(extra);
            let Reply::Array(parts) = h.run(&args) else { panic!("scan reply") };
            let [Reply::Bulk(next), keys] = parts.as_slice() else { panic!("scan shape") };
            all.extend(sorted_strings(keys));
            cursor = String::from_utf8(next.to_vec()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        all.sort();
        all
    }

    #[test]
    fn scan_full_iteration_returns_every_key() {
        let mut h = Harness::new();
        let mut expected: Vec<String> = (0..500).map(|i| format!("k{i}")).collect();
        for k in &expected {
            h.run(&["SET", k, "v"]);
        }
        h.run(&["SADD", "aset", "m"]);
        expected.push("aset".into());
        expected.sort();
        assert_eq!(scan_all(&mut h, &[]), expected);
        assert_eq!(scan_all(&mut h, &["COUNT", "3"]), expected);
        assert_eq!(scan_all(&mut h, &["COUNT", "1000", "TYPE", "SET"]), ["aset"]);
        assert_eq!(scan_all(&mut h, &["MATCH", "k4??", "COUNT", "7"]).len(), 100);
        assert!(scan_all(&mut h, &["TYPE", "nosuchtype"]).is_empty());
    }

    #[test]
    fn scan_errors() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SCAN", "abc"]), err("ERR invalid cursor"));
        assert_eq!(h.run(&["SCAN", "18446744073709551616"]), err("ERR invalid cursor"));
        assert_eq!(h.run(&["SCAN", "0", "COUNT", "0"]), err("ERR syntax error"));
        assert_eq!(
            h.run(&["SCAN", "0", "COUNT", "x"]),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(h.run(&["SCAN", "0", "MATCH"]), err("ERR syntax error"));
        assert_eq!(h.run(&["SCAN", "0", "FOO", "bar"]), err("ERR syntax error"));
        // Redis 8: a canonical negative integer is refused; other text goes through strtoull.
        for bad in ["-1", "-5", "5 ", "", " ", "+", "0x10", "-18446744073709551616"] {
            assert_eq!(h.run(&["SCAN", bad]), err("ERR invalid cursor"), "{bad:?}");
        }
        let done = Reply::Array(vec![bulk("0"), Reply::Array(vec![])]);
        for good in ["18446744073709551615", "+0", " 0", "-0", "-00", "\t+0"] {
            assert_eq!(h.run(&["SCAN", good]), done, "{good:?}");
        }
    }

    #[test]
    fn scan_removes_expired_keys_it_meets() {
        let mut h = Harness::new();
        h.run(&["SET", "gone", "v", "PX", "5"]);
        h.now_ms += 5;
        assert!(scan_all(&mut h, &[]).is_empty());
        assert_eq!(h.engine.db(0).len(), 0);
    }

    #[test]
    fn rename_and_renamenx() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["RENAME", "nope", "x"]), err("ERR no such key"));
        assert_eq!(h.run(&["RENAMENX", "nope", "x"]), err("ERR no such key"));
        h.run(&["SET", "a", "1", "EX", "100"]);
        // Onto itself: OK / 0, and the key is untouched.
        assert_eq!(h.run(&["RENAME", "a", "a"]), ok());
        assert_eq!(h.run(&["RENAMENX", "a", "a"]), int(0));
        assert_eq!(h.run(&["TTL", "a"]), int(100));
        // RENAME keeps the TTL and replaces the destination (and its TTL-less state).
        h.run(&["RPUSH", "b", "x"]);
        assert_eq!(h.run(&["RENAME", "a", "b"]), ok());
        assert_eq!(h.run(&["GET", "b"]), bulk("1"));
        assert_eq!(h.run(&["TTL", "b"]), int(100));
        assert_eq!(h.run(&["EXISTS", "a"]), int(0));
        h.run(&["SET", "c", "2"]);
        assert_eq!(h.run(&["RENAMENX", "b", "c"]), int(0));
        assert_eq!(h.run(&["RENAMENX", "b", "d"]), int(1));
        assert_eq!(h.run(&["TTL", "d"]), int(100));
    }

    #[test]
    fn copy_within_and_across_databases() {
        let mut h = Harness::new();
        h.run(&["HSET", "src", "f", "v"]);
        h.run(&["PEXPIRE", "src", "5000"]);
        assert_eq!(h.run(&["COPY", "src", "dst"]), int(1));
        assert_eq!(h.run(&["PTTL", "dst"]), int(5000));
        assert_eq!(h.run(&["COPY", "src", "dst"]), int(0));
        assert_eq!(h.run(&["COPY", "src", "dst", "REPLACE"]), int(1));
        assert_eq!(
            h.run(&["COPY", "src", "src"]),
            err("ERR source and destination objects are the same")
        );
        assert_eq!(
            h.run(&["COPY", "nope", "nope"]),
            err("ERR source and destination objects are the same")
        );
        assert_eq!(h.run(&["COPY", "src", "src", "DB", "3"]), int(1));
        assert_eq!(h.run(&["COPY", "nope", "x"]), int(0));
        assert_eq!(h.run(&["COPY", "src", "x", "DB", "16"]), err("ERR DB index is out of range"));
        assert_eq!(h.run(&["COPY", "src", "x", "DB", "-1"]), err("ERR DB index is out of range"));
        assert_eq!(
            h.run(&["COPY", "src", "x", "DB", "z"]),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(h.run(&["COPY", "src", "x", "DB"]), err("ERR syntax error"));
        assert_eq!(h.run(&["COPY", "src", "x", "FOO"]), err("ERR syntax error"));
        h.db = 3;
        assert_eq!(h.run(&["HGET", "src", "f"]), bulk("v"));
        assert_eq!(h.run(&["PTTL", "src"]), int(5000));
        // The copy is independent of the original.
        h.run(&["HSET", "src", "g", "w"]);
        h.db = 0;
        assert_eq!(h.run(&["HLEN", "src"]), int(1));
    }

    #[test]
    fn expire_options_and_errors() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "v"]);
        // No TTL counts as infinite: GT never applies, LT always does.
        assert_eq!(h.run(&["EXPIRE", "k", "100", "GT"]), int(0));
        assert_eq!(h.run(&["TTL", "k"]), int(-1));
        assert_eq!(h.run(&["EXPIRE", "k", "100", "XX"]), int(0));
        assert_eq!(h.run(&["EXPIRE", "k", "100", "LT"]), int(1));
        assert_eq!(h.run(&["EXPIRE", "k", "50", "NX"]), int(0));
        assert_eq!(h.run(&["EXPIRE", "k", "200", "LT"]), int(0));
        assert_eq!(h.run(&["EXPIRE", "k", "200", "GT"]), int(1));
        assert_eq!(h.run(&["EXPIRE", "k", "200", "gt", "xx"]), int(0));
        assert_eq!(h.run(&["TTL", "k"]), int(200));
        assert_eq!(h.run(&["EXPIRE", "nope", "10"]), int(0));
        let nx = "ERR NX and XX, GT or LT options at the same time are not compatible";
        assert_eq!(h.run(&["EXPIRE", "k", "10", "NX", "XX"]), err(nx));
        assert_eq!(h.run(&["EXPIRE", "k", "10", "NX", "GT"]), err(nx));
        assert_eq!(
            h.run(&["EXPIRE", "k", "10", "GT", "LT"]),
            err("ERR GT and LT options at the same time are not compatible")
        );
        assert_eq!(h.run(&["EXPIRE", "k", "10", "foo"]), err("ERR Unsupported option foo"));
        // Options are checked before the number.
        assert_eq!(h.run(&["EXPIRE", "k", "abc", "foo"]), err("ERR Unsupported option foo"));
        assert_eq!(
            h.run(&["EXPIRE", "k", "abc"]),
            err("ERR value is not an integer or out of range")
        );
        for (cmd, n) in [
            ("EXPIRE", "9223372036854775"),
            ("PEXPIRE", "9223372036854775807"),
            ("EXPIREAT", "9223372036854775807"),
            ("EXPIRE", "-9223372036854775808"),
        ] {
            let msg = format!("ERR invalid expire time in '{}' command", cmd.to_lowercase());
            assert_eq!(h.run(&[cmd, "k", n]), err(&msg));
        }
        assert_eq!(h.run(&["PEXPIREAT", "k", "9223372036854775807"]), int(1));
        assert_eq!(h.run(&["EXISTS", "k"]), int(1));
    }

    #[test]
    fn expire_in_the_past_deletes() {
        let mut h = Harness::new();
        for cmd in [
            ["EXPIRE", "k", "0"],
            ["PEXPIRE", "k", "-5"],
            ["EXPIREAT", "k", "1"],
            ["PEXPIREAT", "k", "1"],
        ] {
            h.run(&["SET", "k", "v"]);
            assert_eq!(h.run(&cmd), int(1), "{cmd:?}");
            assert_eq!(h.run(&["EXISTS", "k"]), int(0));
        }
        // A condition that fails keeps the key even with a past time.
        h.run(&["SET", "k", "v", "EX", "100"]);
        assert_eq!(h.run(&["EXPIRE", "k", "-1", "NX"]), int(0));
        assert_eq!(h.run(&["EXISTS", "k"]), int(1));
    }

    #[test]
    fn ttl_rounding_and_expiretime() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["TTL", "nope"]), int(-2));
        assert_eq!(h.run(&["PTTL", "nope"]), int(-2));
        assert_eq!(h.run(&["EXPIRETIME", "nope"]), int(-2));
        h.run(&["SET", "k", "v"]);
        assert_eq!(h.run(&["TTL", "k"]), int(-1));
        assert_eq!(h.run(&["PEXPIRETIME", "k"]), int(-1));
        for (ms, secs) in [("1499", 1), ("1500", 2), ("499", 0), ("500", 1), ("100000", 100)] {
            h.run(&["PEXPIRE", "k", ms]);
            assert_eq!(h.run(&["TTL", "k"]), int(secs), "{ms}");
            assert_eq!(h.run(&["PTTL", "k"]), int(ms.parse().unwrap()));
        }
        h.run(&["PEXPIREAT", "k", "2000000000500"]);
        assert_eq!(h.run(&["EXPIRETIME", "k"]), int(2000000001));
        assert_eq!(h.run(&["PEXPIRETIME", "k"]), int(2000000000500));
        assert_eq!(h.run(&["PERSIST", "k"]), int(1));
        assert_eq!(h.run(&["PERSIST", "k"]), int(0));
        assert_eq!(h.run(&["PERSIST", "nope"]), int(0));
        assert_eq!(h.run(&["TTL", "k"]), int(-1));
    }

    #[test]
    fn randomkey_skips_expired_and_empties() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["RANDOMKEY"]), Reply::Null);
        h.run(&["SET", "live", "v"]);
        for i in 0..20 {
            h.run(&["SET", &format!("dead{i}"), "v", "PX", "1"]);
        }
        h.now_ms += 1;
        for _ in 0..5 {
            assert_eq!(h.run(&["RANDOMKEY"]), bulk("live"));
        }
        h.run(&["DEL", "live"]);
        assert_eq!(h.run(&["RANDOMKEY"]), Reply::Null);
    }

    #[test]
    fn watch_sees_writes_and_lazy_expiry() {
        let mut h = Harness::new();
        let me = h.client_id;
        h.run(&["SET", "w", "v", "PX", "100"]);
        h.engine.watch.watch(me, 0, "w".into(), false);
        assert!(!h.engine.watch.is_dirty(me));
        // Reads do not touch.
        h.run(&["GET", "w"]);
        h.run(&["TTL", "w"]);
        assert!(!h.engine.watch.is_dirty(me));
        // Lazy expiry does.
        h.now_ms += 100;
        assert_eq!(h.run(&["GET", "w"]), Reply::Null);
        assert!(h.engine.watch.is_dirty(me));

        for write in [
            &["EXPIRE", "w", "10"][..],
            &["PERSIST", "w"],
            &["DEL", "w"],
            &["RENAME", "other", "w"],
            &["RENAME", "w", "other"],
            &["COPY", "other", "w", "REPLACE"],
            &["APPEND", "w", "x"],
            &["INCR", "n"],
        ] {
            h.engine.watch.unwatch_all(me);
            h.run(&["SET", "w", "1", "EX", "100"]);
            h.run(&["SET", "other", "1"]);
            h.run(&["SET", "n", "1"]);
            let key = if write[0] == "INCR" { "n" } else { "w" };
            h.engine.watch.watch(me, 0, key.into(), false);
            h.run(write);
            assert!(h.engine.watch.is_dirty(me), "{write:?}");
        }
        // A write to another key, or to the same name in another DB, does not.
        h.engine.watch.unwatch_all(me);
        h.engine.watch.watch(me, 0, "w".into(), false);
        h.run(&["SET", "x", "1"]);
        h.db = 1;
        h.run(&["SET", "w", "1"]);
        assert!(!h.engine.watch.is_dirty(me));
    }
}
