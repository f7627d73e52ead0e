//! Generic keyspace commands: DEL, UNLINK, EXISTS, TYPE, KEYS, SCAN, RENAME, RENAMENX, COPY,
//! EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, PERSIST, EXPIRETIME, PEXPIRETIME, TOUCH,
//! RANDOMKEY; the whole-database commands DBSIZE, FLUSHDB, FLUSHALL, SWAPDB are in
//! [`databases`] (SELECT is a connection command, run by the server).
//!
//! Costs in our implementation: single-key commands are O(1) except that deleting or copying a
//! collection is O(M) in its size (UNLINK frees synchronously too: the engine has no thread to
//! hand memory to). KEYS is O(N) in the database. SCAN reads the whole database on each call
//! (see `keyspace::scan`), so it is O(N log COUNT) per call rather than Redis' O(COUNT).
//! RANDOMKEY is O(1) expected, and bounded when most keys have expired (see `randomkey`).
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
//! - EXISTS, TYPE and the TTL family are not accesses (OBJECT IDLETIME goes on counting);
//!   TOUCH is. RENAME and COPY carry the value's encoding state and access time with it.

use super::{arg, delete_key_for, is_token, owned};
use crate::command::{key_at, keys_from, CommandSpec, Flags, Handler};
use crate::glob::glob_match;
use crate::keyspace::Cause;
use crate::util::{int_arg, parse_i64};
use crate::KeyEvent;
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
        ..CommandSpec::of(Handler::Engine(del))
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
        summary: "Deletes keys like DEL, freeing big values in the background.",
        since: "4.0.0",
        complexity: "O(1) per key; O(M) per collection freed in the background.",
        syntax: "key:key ...",
        ..CommandSpec::of(Handler::Engine(unlink))
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
        ..CommandSpec::of(Handler::Engine(exists_untouched))
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
        ..CommandSpec::of(Handler::Engine(type_cmd))
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
        ..CommandSpec::of(Handler::Engine(keys))
    },
    CommandSpec {
        name: "scan",
        arity: -2,
        flags: Flags::READONLY.and(Flags::TOUCHES_ARBITRARY_KEYS),
        acl: &["@keyspace", "@read", "@slow"],
        tips: &["nondeterministic_output", "request_policy:special"],
        summary: "Walks the keyspace a batch at a time with a cursor.",
        since: "2.8.0",
        complexity: "O(N log COUNT) per call, N the number of keys in the database.",
        syntax: "cursor:integer [MATCH pattern:pattern] [COUNT count:integer] [TYPE type]",
        ..CommandSpec::of(Handler::Engine(scan))
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
        ..CommandSpec::of(Handler::Engine(rename))
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
        ..CommandSpec::of(Handler::Engine(renamenx))
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
        summary: "Duplicates a key's value and TTL under another name, possibly in another database.",
        since: "6.2.0",
        complexity: "O(M) in the size of the copied value.",
        syntax: "source:key destination:key [DB destination-db:integer] [REPLACE]",
        ..CommandSpec::of(Handler::Engine(copy))
    },
    CommandSpec {
        name: "move",
        arity: 3,
        flags: Flags::WRITE.and(Flags::FAST),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@write", "@fast"],
        key_specs: &[key_at(1, &["RW", "ACCESS", "UPDATE"])],
        summary: "Moves a key, with its TTL, to another database unless the name is taken there.",
        since: "1.0.0",
        complexity: "O(1).",
        syntax: "key:key db:integer",
        ..CommandSpec::of(Handler::Engine(move_key))
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
        ..CommandSpec::of(Handler::Engine(expire))
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
        ..CommandSpec::of(Handler::Engine(pexpire))
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
        ..CommandSpec::of(Handler::Engine(expireat))
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
        ..CommandSpec::of(Handler::Engine(pexpireat))
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
        ..CommandSpec::of(Handler::Engine(ttl))
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
        ..CommandSpec::of(Handler::Engine(pttl))
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
        ..CommandSpec::of(Handler::Engine(persist))
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
        ..CommandSpec::of(Handler::Engine(expiretime))
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
        ..CommandSpec::of(Handler::Engine(pexpiretime))
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
        summary: "Counts the given keys that exist, as an access (OBJECT IDLETIME restarts).",
        since: "3.2.1",
        complexity: "O(N) in the number of keys given.",
        syntax: "key:key ...",
        ..CommandSpec::of(Handler::Engine(exists))
    },
    CommandSpec {
        name: "randomkey",
        arity: 1,
        flags: Flags::READONLY.and(Flags::TOUCHES_ARBITRARY_KEYS),
        acl: &["@keyspace", "@read", "@slow"],
        tips: &["request_policy:all_shards", "nondeterministic_output"],
        summary: "Returns the name of a key picked at random, or nil in an empty database.",
        complexity: "O(1) expected. When most keys have expired: at most 100 draws, and 20 \
                     deletions of expired keys at O(log N) each.",
        ..CommandSpec::of(Handler::Engine(randomkey))
    },
];

// ---------------------------------------------------------------------------------------------
// DEL / UNLINK / EXISTS / TOUCH / TYPE

fn del(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    delete_keys(engine, ctx, args, Cause::UserDel)
}

/// UNLINK: DEL whose big values are freed in the background (`keyspace/lazyfree.rs`).
fn unlink(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    delete_keys(engine, ctx, args, Cause::Unlink)
}

fn delete_keys(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], cause: Cause) -> Result<Reply, CmdError> {
    let mut removed = 0;
    for key in args.iter().skip(1) {
        // An expired key is removed by the lookup and does not count.
        if engine.lookup(ctx.db, key, ctx.now_ms).is_some() && delete_key_for(engine, ctx.db, key, cause) {
            removed += 1;
        }
    }
    Ok(Reply::Integer(removed))
}

/// TOUCH: every argument counted, repeats included; each is an access.
fn exists(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let mut n = 0;
    for key in args.iter().skip(1) {
        if engine.lookup_read(ctx.db, key, ctx.now_ms).is_some() {
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

/// EXISTS: as TOUCH, but not an access (Redis looks the keys up without touching them).
fn exists_untouched(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let mut n = 0;
    for key in args.iter().skip(1) {
        if engine.peek_read(ctx.db, key, ctx.now_ms).is_some() {
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

fn type_cmd(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    // Not an access, as in Redis.
    let name = engine.peek(ctx.db, key, ctx.now_ms).map_or("none", |e| e.value.type_name());
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
        .map(|(k, _)| Reply::Bulk(Bytes::copy_from_slice(k)))
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
            // `*` is no filter at all (it would not match an empty key name; see glob).
            req.pattern = (value.as_ref() != b"*").then_some(value);
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
pub(crate) fn parse_cursor(b: &[u8]) -> Option<u64> {
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
    let now = ctx.now_ms;
    let wanted = |key: &[u8], type_name: &str| {
        req.type_name.is_none_or(|t| t.eq_ignore_ascii_case(type_name.as_bytes()))
            && req.pattern.is_none_or(|p| glob_match(p, key, false))
    };
    // A live key is read where it lies: not an access (Redis' SCAN leaves OBJECT IDLETIME and
    // the LRU/LFU clocks alone), not a lookup. A key whose time passed is looked up after the
    // walk, which deletes it (a write WATCH sees) or says whether it is still shown (a
    // replica's, a paused expiry's: hidden). Keys are copied for the reply, so the stored ones
    // are not turned into shared buffers (which costs each key an allocation for good).
    let mut out: Vec<(Bytes, bool)> = Vec::new();
    let next = engine.db(ctx.db).scan_entries(req.cursor, req.count, |key, entry| {
        if entry.is_expired(now) {
            out.push((Bytes::copy_from_slice(key), true));
        } else if wanted(key, entry.value.type_name()) {
            out.push((Bytes::copy_from_slice(key), false));
        }
    });
    let mut keys = Vec::with_capacity(out.len());
    for (key, expired) in out {
        if expired {
            match engine.lookup(ctx.db, &key, now) {
                Some(entry) if wanted(&key, entry.value.type_name()) => {}
                _ => continue,
            }
        }
        keys.push(Reply::Bulk(key));
    }
    Ok(Reply::Array(vec![Reply::Bulk(Bytes::from(next.to_string())), Reply::Array(keys)]))
}

/// How many keys RANDOMKEY draws by position before it stops looking there.
const RANDOMKEY_DRAWS: usize = 100;
/// How many expired keys one RANDOMKEY call deletes at most. A deletion costs several times a
/// draw (the expiry index, the table's swaps, a DEL in the log), so a fifth of the draws keeps
/// a call's worst case a few tens of microseconds; active expiry removes the rest.
const RANDOMKEY_DELETIONS: usize = 20;

/// RANDOMKEY: a key drawn uniformly at random among the live ones, or nil.
///
/// Redis, on a primary, draws until it finds a live key, deleting each expired key it draws:
/// right after many keys expired together (200 000 set with `PX 1`) one call does as many
/// draws and deletions as there are expired keys, all under the lock. A call here is bounded:
///
/// 1. Whether any live key exists is known in O(log n) from the expiry index
///    ([`crate::Db::has_live_key`]). If none does, the call deletes at most
///    `RANDOMKEY_DELETIONS` expired keys, the soonest due first, and answers nil at once. (A
///    small database of expired keys is emptied, as Redis would empty it.) Where expired keys
///    are kept (a replica, expiry paused), it answers one of them, drawn by position, as
///    Redis does after its tries.
/// 2. Otherwise it draws up to `RANDOMKEY_DRAWS` positions, O(1) each, and answers the first
///    live key drawn (so the answer is uniform over the live keys). The first
///    `RANDOMKEY_DELETIONS` expired keys drawn are deleted, as Redis deletes them; later ones
///    are skipped and left to active expiry.
/// 3. If every draw found an expired key (live keys are then a few percent of the database
///    at most, a state active expiry soon ends), it answers without searching further: a key
///    without an expiry drawn from their run of positions if there is one, else a live key
///    with an expiry drawn by time ([`crate::Db::live_expiring_key`]). Both O(log n), and the
///    answer is still a live key, though no longer exactly uniform.
///
/// Each deletion is logged as DEL, as any lazy expiry. Draws are not accesses (Redis does not
/// touch the key it returns).
fn randomkey(engine: &mut Engine, ctx: &mut CallCtx, _args: &[Bytes]) -> Result<Reply, CmdError> {
    let (db, now) = (ctx.db, ctx.now_ms);
    if !engine.db(db).has_live_key(now) {
        if engine.keeps_expired(now) && !engine.db(db).is_empty() {
            // Every key has an expiry and its time has passed, but none may be deleted now
            // (a replica, expiry paused by CLIENT PAUSE WRITE): Redis then answers a key that
            // may have expired rather than search forever, and so does rill.
            let len = engine.db(db).len();
            let at = crate::types::pick::position(engine, len);
            engine.random_reads += 1;
            return Ok(engine.db(db).key_at(at).map_or(Reply::Null, |(k, _)| Reply::Bulk(Bytes::copy_from_slice(k))));
        }
        engine.expire_due(db, now, RANDOMKEY_DELETIONS);
        return Ok(Reply::Null);
    }
    let mut deletions = RANDOMKEY_DELETIONS;
    for _ in 0..RANDOMKEY_DRAWS {
        let len = engine.db(db).len();
        let at = crate::types::pick::position(engine, len);
        engine.random_reads += 1;
        let Some((key, entry)) = engine.db(db).key_at(at) else { break };
        if !entry.is_expired(now) {
            return Ok(Reply::Bulk(Bytes::copy_from_slice(key)));
        }
        if deletions > 0 {
            deletions -= 1;
            let key = Bytes::copy_from_slice(key);
            engine.expire_if_needed(db, &key, now);
        }
    }
    let draw = engine.random_u64();
    engine.random_reads += 1;
    let d = engine.db(db);
    let persistent = d.persistent_len();
    let key = if persistent > 0 {
        let at = d.len() - persistent + (draw % persistent as u64) as usize;
        d.key_at(at).map(|(k, _)| k)
    } else {
        d.live_expiring_key(now, draw)
    };
    Ok(key.map_or(Reply::Null, |k| Reply::Bulk(Bytes::copy_from_slice(k))))
}

// ---------------------------------------------------------------------------------------------
// RENAME / RENAMENX / COPY / MOVE

fn rename(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    rename_generic(engine, ctx, args, false)
}

fn renamenx(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    rename_generic(engine, ctx, args, true)
}

fn rename_generic(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], nx: bool) -> Result<Reply, CmdError> {
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
    // The source is gone: clients blocked on it re-check it (a group reader then gets its
    // NOGROUP error at once, as from Redis, instead of waiting out its timeout).
    engine.signal_ready(db, src);
    let old_type = engine.remove_replaced(db, dst);
    let dst = owned(dst);
    let new_type = entry.value.type_name();
    // Events as Redis fires them: `new` for the destination (stored here), the pair, then
    // `overwritten` (`type_changed`) if a key was there.
    insert_moved(engine, db, src, &dst, entry);
    engine.modified(db, src, KeyEvent::RenameFrom);
    engine.modified(db, &dst, KeyEvent::RenameTo);
    engine.record_overwrite(db, &dst, old_type, new_type);
    engine.policy_readers_renamed(db, src, &dst);
    engine.signal_ready(db, &dst);
    Ok(if nx { Reply::Integer(1) } else { Reply::ok() })
}

/// Store a value moved or copied from `src` under `dst`, with its expiry and its metadata
/// (Redis keeps the object, so its encoding and access time go with it; a string that no
/// longer fits an `embstr` with the new name becomes `raw`).
fn insert_moved(engine: &mut Engine, db: usize, src: &[u8], dst: &Bytes, mut entry: crate::Entry) {
    let expiry = entry.expire_at_ms();
    let has_expiry = expiry.is_some();
    crate::types::object::encoding::string_moved(&mut entry, src.len(), has_expiry, dst.len(), has_expiry);
    let meta = std::mem::take(&mut entry.meta);
    engine.insert(db, dst.clone(), entry.value);
    if let Some(e) = engine.entry_mut(db, dst) {
        // The metadata already accounts for the expiry: set it before the expiry.
        e.meta = meta;
    }
    if has_expiry {
        engine.set_expire(db, dst, expiry);
    }
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
            dest_db = parse_i64(v).filter(|n| i32::try_from(*n).is_ok()).ok_or(CmdError::NOT_INTEGER)?;
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
    let mut old_type = None;
    if engine.lookup(req.dest_db, dst, ctx.now_ms).is_some() {
        if !req.replace {
            return Ok(Reply::Integer(0));
        }
        old_type = engine.remove_replaced(req.dest_db, dst);
    }
    let dst = owned(dst);
    let new_type = entry.value.type_name();
    insert_moved(engine, req.dest_db, src, &dst, entry);
    engine.modified(req.dest_db, &dst, KeyEvent::CopyTo);
    engine.record_overwrite(req.dest_db, &dst, old_type, new_type);
    engine.signal_ready(req.dest_db, &dst);
    Ok(Reply::Integer(1))
}

/// `MOVE key db`: 1 when moved; 0 when the key is missing or the name is taken in `db`.
/// The key keeps its TTL, metadata and (a hash) its fields' times; `move_from` fires in the
/// source database, `move_to` in the destination.
fn move_key(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    // Redis reads the index as a C int.
    let dest = parse_i64(arg(args, 2)?).filter(|n| i32::try_from(*n).is_ok()).ok_or(CmdError::NOT_INTEGER)?;
    let dest = usize::try_from(dest)
        .ok()
        .filter(|d| *d < engine.dbs.len())
        .ok_or(CmdError::full("ERR DB index is out of range"))?;
    if dest == ctx.db {
        return Err(CmdError::full("ERR source and destination objects are the same"));
    }
    if engine.lookup(ctx.db, key, ctx.now_ms).is_none() || engine.lookup(dest, key, ctx.now_ms).is_some() {
        return Ok(Reply::Integer(0));
    }
    let Some(entry) = engine.remove(ctx.db, key) else { return Ok(Reply::Integer(0)) };
    engine.signal_ready(ctx.db, key);
    let name = owned(key);
    insert_moved(engine, dest, key, &name, entry);
    engine.modified(ctx.db, key, KeyEvent::MoveFrom);
    engine.modified(dest, key, KeyEvent::MoveTo);
    engine.signal_ready(dest, key);
    Ok(Reply::Integer(1))
}

// ---------------------------------------------------------------------------------------------
// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT

pub mod databases;
mod expire;
use expire::{expire, expireat, expiretime, persist, pexpire, pexpireat, pexpiretime, pttl, ttl};

#[cfg(test)]
mod tests;
