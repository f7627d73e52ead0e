//! String commands: GET, SET, SETNX, SETEX, PSETEX, GETSET, GETDEL, MGET, MSET, MSETNX, INCR,
//! INCRBY, DECR, DECRBY, INCRBYFLOAT, APPEND, STRLEN, GETRANGE, SETRANGE; GETEX in [`getex`], LCS in
//! [`lcs`]; the bitmap commands (SETBIT, BITCOUNT, BITFIELD, ...) in [`bits`], a family of their
//! own.
//!
//! Strings are `Bytes`; integers are kept as their decimal text, as Redis does, and parsed on
//! each INCR (O(1): at most 20 digits). Costs: O(1) per key, except GETRANGE (O(len) of the
//! slice copied), APPEND (amortized O(len(value)) while no reply still shares the old string,
//! else O(new length)) and SETRANGE (O(new length) when it must copy).
//!
//! Redis behaviours we match on purpose:
//! - SET options: NX/XX exclude each other; EX/PX/EXAT/PXAT/KEEPTTL exclude each other but one
//!   may repeat (the last value wins); NX and GET may be combined (7.0). Every option is parsed
//!   before the time is read, so `SET k v EX abc FOO` is a syntax error. A time ≤ 0 or one that
//!   overflows milliseconds is `ERR invalid expire time in 'set' command`. An EXAT/PXAT time
//!   already past stores nothing and deletes an existing key (reply `OK`), as the newest Redis.
//! - IFEQ / IFNE / IFDEQ / IFDNE (8.4): see [`cond`].
//! - SET … GET on a non-string is WRONGTYPE even with NX; plain SET overwrites any type.
//! - INCR & co. keep the key's TTL; the stored text must be a canonical integer (no spaces, no
//!   `+`, no leading zeros). DECRBY of -9223372036854775808 is `ERR decrement would overflow`.
//! - MSET/MSETNX with an odd number of arguments is an arity error; MSETNX sets nothing if any
//!   key exists. MGET answers nil for a key of another type instead of WRONGTYPE.
//! - GETRANGE clamps as Redis 7 does (`GETRANGE k -100 -50` on a short string returns its first
//!   byte), answers an empty string for a missing key.
//! - SETRANGE/APPEND refuse results over 512 MiB (Redis' default `proto-max-bulk-len`; the
//!   engine does not see that setting); SETRANGE with an empty value creates nothing.
//!
//! INCRBYFLOAT reads, adds and writes in the 80-bit `long double` Redis uses on x86-64
//! ([`crate::long_double`]): 0.1 + 0.2 is `0.3`, `0x10` is 16, 1e308 + 1e308 is an integer.

pub mod bits;
mod cond;
mod getex;
mod lcs;

use super::object::meta::Form;
use super::{arg, arity_error, delete_key, is_token, owned};
use crate::command::{key_at, keys_from, CommandSpec, Flags, Handler, KeySpec};
use crate::long_double::LongDouble;
use crate::util::{int_arg, parse_i64};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// The largest string SETRANGE and APPEND may build: Redis' default `proto-max-bulk-len`.
pub const MAX_STRING_BYTES: usize = 512 * 1024 * 1024;

const RW_ACCESS_UPDATE: &[KeySpec] = &[key_at(1, &["RW", "ACCESS", "UPDATE"])];
const RO_ACCESS: &[KeySpec] = &[key_at(1, &["RO", "ACCESS"])];
const OW_UPDATE: &[KeySpec] = &[key_at(1, &["OW", "UPDATE"])];
const WRITE_DENYOOM: Flags = Flags::WRITE.and(Flags::DENYOOM);
const WRITE_DENYOOM_FAST: Flags = WRITE_DENYOOM.and(Flags::FAST);
const READ_FAST: Flags = Flags::READONLY.and(Flags::FAST);

/// A string command on one key at index 1 (the common shape).
const fn one_key(handler: Handler) -> CommandSpec {
    CommandSpec { first_key: 1, last_key: 1, step: 1, group: "string", ..CommandSpec::of(handler) }
}

/// The string commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "get",
        arity: 2,
        flags: READ_FAST,
        acl: &["@read", "@string", "@fast"],
        key_specs: RO_ACCESS,
        summary: "Returns the string stored at a key, or nil.",
        syntax: "key:key",
        ..one_key(Handler::Engine(get))
    },
    CommandSpec {
        name: "set",
        arity: -3,
        flags: WRITE_DENYOOM,
        acl: &["@write", "@string", "@slow"],
        key_specs: &[KeySpec {
            notes: "RW and ACCESS due to the optional `GET` argument",
            ..key_at(1, &["RW", "ACCESS", "UPDATE", "VARIABLE_FLAGS"])
        }],
        key_flags: Some(set_key_flags),
        summary: "Stores a string at a key, optionally only if absent/present or if the current \
                  value (or its digest) equals/differs, with an expiry, or returning the previous \
                  value.",
        syntax: "key:key value [condition@(NX | XX | IFEQ ifeq-value | IFNE ifne-value | \
                 IFDEQ ifdeq-digest | IFDNE ifdne-digest)] [GET] [expiration@(EX seconds:integer | \
                 PX milliseconds:integer | EXAT unix-time-seconds:unix-time | \
                 PXAT unix-time-milliseconds:unix-time | KEEPTTL)]",
        complexity: "O(1), plus O(M) to free a replaced collection.",
        ..one_key(Handler::Engine(set))
    },
    CommandSpec {
        name: "setnx",
        arity: 3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@string", "@fast"],
        key_specs: &[key_at(1, &["OW", "INSERT"])],
        summary: "Stores a string only when the key does not exist; replies 1 if it did so.",
        syntax: "key:key value",
        ..one_key(Handler::Engine(setnx))
    },
    CommandSpec {
        name: "setex",
        arity: 4,
        flags: WRITE_DENYOOM,
        acl: &["@write", "@string", "@slow"],
        key_specs: OW_UPDATE,
        summary: "Stores a string that expires after a number of seconds.",
        since: "2.0.0",
        syntax: "key:key seconds:integer value",
        ..one_key(Handler::Engine(setex))
    },
    CommandSpec {
        name: "psetex",
        arity: 4,
        flags: WRITE_DENYOOM,
        acl: &["@write", "@string", "@slow"],
        key_specs: OW_UPDATE,
        summary: "Stores a string that expires after a number of milliseconds.",
        since: "2.6.0",
        syntax: "key:key milliseconds:integer value",
        ..one_key(Handler::Engine(psetex))
    },
    CommandSpec {
        name: "getset",
        arity: 3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@string", "@fast"],
        key_specs: RW_ACCESS_UPDATE,
        summary: "Stores a string and returns the one it replaced (nil if none).",
        syntax: "key:key value",
        ..one_key(Handler::Engine(getset))
    },
    CommandSpec {
        name: "getdel",
        arity: 2,
        flags: Flags::WRITE.and(Flags::FAST),
        acl: &["@write", "@string", "@fast"],
        key_specs: &[key_at(1, &["RW", "ACCESS", "DELETE"])],
        summary: "Returns a string and deletes its key.",
        since: "6.2.0",
        syntax: "key:key",
        ..one_key(Handler::Engine(getdel))
    },
    getex::GETEX,
    lcs::LCS,
    CommandSpec {
        name: "mget",
        arity: -2,
        flags: READ_FAST,
        last_key: -1,
        acl: &["@read", "@string", "@fast"],
        tips: &["request_policy:multi_shard"],
        key_specs: &[keys_from(1, 1, &["RO", "ACCESS"])],
        summary: "Returns the strings of several keys, nil where a key is missing or not a string.",
        complexity: "O(N) in the number of keys.",
        syntax: "key:key ...",
        ..one_key(Handler::Engine(mget))
    },
    CommandSpec {
        name: "mset",
        arity: -3,
        flags: WRITE_DENYOOM,
        last_key: -1,
        step: 2,
        acl: &["@write", "@string", "@slow"],
        tips: &["request_policy:multi_shard", "response_policy:all_succeeded"],
        key_specs: &[keys_from(1, 2, &["OW", "UPDATE"])],
        summary: "Stores several strings at once.",
        since: "1.0.1",
        complexity: "O(N) in the number of keys.",
        syntax: "(key:key value) ...",
        ..one_key(Handler::Engine(mset))
    },
    CommandSpec {
        name: "msetnx",
        arity: -3,
        flags: WRITE_DENYOOM,
        last_key: -1,
        step: 2,
        acl: &["@write", "@string", "@slow"],
        tips: &["request_policy:multi_shard", "response_policy:agg_min"],
        key_specs: &[keys_from(1, 2, &["OW", "INSERT"])],
        summary: "Stores several strings only if none of the keys exists; replies 1 if it did.",
        since: "1.0.1",
        complexity: "O(N) in the number of keys.",
        syntax: "(key:key value) ...",
        ..one_key(Handler::Engine(msetnx))
    },
    CommandSpec {
        name: "incr",
        arity: 2,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@string", "@fast"],
        key_specs: RW_ACCESS_UPDATE,
        summary: "Adds one to the integer stored at a key (missing counts as 0).",
        syntax: "key:key",
        ..one_key(Handler::Engine(incr))
    },
    CommandSpec {
        name: "incrby",
        arity: 3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@string", "@fast"],
        key_specs: RW_ACCESS_UPDATE,
        summary: "Adds an integer to the integer stored at a key.",
        syntax: "key:key increment:integer",
        ..one_key(Handler::Engine(incrby))
    },
    CommandSpec {
        name: "decr",
        arity: 2,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@string", "@fast"],
        key_specs: RW_ACCESS_UPDATE,
        summary: "Subtracts one from the integer stored at a key.",
        syntax: "key:key",
        ..one_key(Handler::Engine(decr))
    },
    CommandSpec {
        name: "decrby",
        arity: 3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@string", "@fast"],
        key_specs: RW_ACCESS_UPDATE,
        summary: "Subtracts an integer from the integer stored at a key.",
        syntax: "key:key decrement:integer",
        ..one_key(Handler::Engine(decrby))
    },
    CommandSpec {
        name: "incrbyfloat",
        arity: 3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@string", "@fast"],
        key_specs: RW_ACCESS_UPDATE,
        summary: "Adds a floating-point number to the number stored at a key.",
        since: "2.6.0",
        syntax: "key:key increment:double",
        ..one_key(Handler::Engine(incrbyfloat))
    },
    CommandSpec {
        name: "append",
        arity: 3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@string", "@fast"],
        key_specs: &[key_at(1, &["RW", "INSERT"])],
        summary: "Adds bytes to the end of a string (creating it) and replies with the new length.",
        since: "2.0.0",
        complexity: "Amortized O(M) in the appended length; O(N+M) when the old string is shared.",
        syntax: "key:key value",
        ..one_key(Handler::Engine(append))
    },
    CommandSpec {
        name: "strlen",
        arity: 2,
        flags: READ_FAST,
        acl: &["@read", "@string", "@fast"],
        key_specs: &[key_at(1, &["RO"])],
        summary: "Returns the length in bytes of the string at a key (0 if missing).",
        since: "2.2.0",
        syntax: "key:key",
        ..one_key(Handler::Engine(strlen))
    },
    CommandSpec {
        name: "getrange",
        arity: 4,
        flags: Flags::READONLY,
        acl: &["@read", "@string", "@slow"],
        key_specs: RO_ACCESS,
        summary: "Returns the bytes of a string between two inclusive offsets (negative from the end).",
        since: "2.4.0",
        complexity: "O(N) in the length returned.",
        syntax: "key:key start:integer end:integer",
        ..one_key(Handler::Engine(getrange))
    },
    CommandSpec {
        name: "substr",
        arity: 4,
        flags: Flags::READONLY,
        acl: &["@read", "@string", "@slow"],
        key_specs: RO_ACCESS,
        summary: "GETRANGE under its old name.",
        since: "1.0.0",
        complexity: "O(N) in the length returned.",
        syntax: "key:key start:integer end:integer",
        ..one_key(Handler::Engine(getrange))
    },
    cond::DIGEST,
    cond::DELEX,
    cond::MSETEX,
    CommandSpec {
        name: "setrange",
        arity: 4,
        flags: WRITE_DENYOOM,
        acl: &["@write", "@string", "@slow"],
        key_specs: &[key_at(1, &["RW", "UPDATE"])],
        summary: "Overwrites part of a string at an offset, zero-padding as needed.",
        since: "2.2.0",
        complexity: "O(M) in the value written; O(N) when the string must grow or is shared.",
        syntax: "key:key offset:integer value",
        ..one_key(Handler::Engine(setrange))
    },
];

// ---------------------------------------------------------------------------------------------
// Typed access

/// What a key holds, from a string command's point of view.
enum StrSlot {
    Missing,
    Str(Bytes),
    OtherType,
}

/// Look `key` up for a string read (lazy expiry and hit/miss counts included). Cloning
/// `Bytes` is a refcount.
fn str_slot(engine: &mut Engine, ctx: &CallCtx, key: &[u8]) -> StrSlot {
    match engine.lookup_read(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => StrSlot::Missing,
        Some(Value::Str(b)) => StrSlot::Str(b.clone()),
        Some(_) => StrSlot::OtherType,
    }
}

/// The string at `key`, `None` when missing, WRONGTYPE for another type.
fn read_str(engine: &mut Engine, ctx: &CallCtx, key: &[u8]) -> Result<Option<Bytes>, CmdError> {
    match str_slot(engine, ctx, key) {
        StrSlot::Missing => Ok(None),
        StrSlot::Str(b) => Ok(Some(b)),
        StrSlot::OtherType => Err(CmdError::WRONGTYPE),
    }
}

/// Replace the value at `key` with a string, keeping its TTL, and record the write.
fn store_keep_ttl(engine: &mut Engine, ctx: &CallCtx, key: &[u8], value: Bytes, event: KeyEvent) {
    engine.insert_keep_ttl_ref(ctx.db, key, Value::Str(value));
    engine.modified(ctx.db, key, event);
}

// ---------------------------------------------------------------------------------------------
// GET / SET and relatives

fn get(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    Ok(read_str(engine, ctx, arg(args, 1)?)?.map_or(Reply::Null, Reply::Bulk))
}

/// When a SET applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetCondition {
    Always,
    /// NX
    IfMissing,
    /// XX
    IfExists,
}

/// Which timed expiry option a SET carries (KEEPTTL is a separate flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpiryOption {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// An IFEQ / IFNE / IFDEQ / IFDNE condition of SET (Redis 8.4): compare the current string, or
/// its [`cond::digest`], with the given value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compare {
    /// IFEQ: the value equals.
    Eq,
    /// IFNE: the value differs (a missing key passes).
    Ne,
    /// IFDEQ: the digest equals (hex, any case).
    DigestEq,
    /// IFDNE: the digest differs (a missing key passes).
    DigestNe,
}

impl Compare {
    /// The option word, if `opt` is one.
    pub(super) fn parse(opt: &[u8]) -> Option<Compare> {
        [("IFEQ", Compare::Eq), ("IFNE", Compare::Ne), ("IFDEQ", Compare::DigestEq), ("IFDNE", Compare::DigestNe)]
            .into_iter()
            .find(|(t, _)| is_token(opt, t))
            .map(|(_, c)| c)
    }

    /// Whether a key that does not exist fails the condition (IFEQ, IFDEQ).
    fn needs_key(self) -> bool {
        matches!(self, Compare::Eq | Compare::DigestEq)
    }

    /// Whether the string `current` passes against `target`; a malformed digest is an error.
    pub(super) fn holds(self, current: &[u8], target: &[u8]) -> Result<bool, CmdError> {
        Ok(match self {
            Compare::Eq => current == target,
            Compare::Ne => current != target,
            Compare::DigestEq | Compare::DigestNe => {
                let equal = cond::digest(current).as_bytes().eq_ignore_ascii_case(cond::checked_digest(target)?);
                equal == (self == Compare::DigestEq)
            }
        })
    }
}

/// A parsed SET request.
#[derive(Debug)]
struct SetRequest {
    condition: SetCondition,
    /// IFEQ / IFNE / IFDEQ / IFDNE and the value or digest to compare with.
    compare: Option<(Compare, Bytes)>,
    get: bool,
    keep_ttl: bool,
    /// Absolute expiry in Unix ms.
    expire_at_ms: Option<i64>,
}

impl SetRequest {
    /// A request with only a condition and a GET flag (SETNX, GETSET, SETEX's relatives).
    fn plain(condition: SetCondition, get: bool, expire_at_ms: Option<i64>) -> SetRequest {
        SetRequest { condition, compare: None, get, keep_ttl: false, expire_at_ms }
    }
}

fn parse_set(args: &[Bytes], now_ms: i64) -> Result<SetRequest, CmdError> {
    let mut condition = SetCondition::Always;
    let mut compare: Option<(Compare, Bytes)> = None;
    let mut get = false;
    let mut expiry: Option<(ExpiryOption, &Bytes)> = None;
    let mut keep_ttl = false;
    let mut i = 3;
    while let Some(opt) = args.get(i) {
        let timed = [("EX", ExpiryOption::Ex), ("PX", ExpiryOption::Px)]
            .into_iter()
            .chain([("EXAT", ExpiryOption::ExAt), ("PXAT", ExpiryOption::PxAt)])
            .find(|(t, _)| is_token(opt, t))
            .map(|(_, kind)| kind);
        // An expiry option conflicts with a different one given earlier, never with itself.
        let other_expiry = |kind: ExpiryOption| keep_ttl || expiry.is_some_and(|(k, _)| k != kind);
        // As Redis: NX and XX only check each other, while a comparison refuses NX, XX and a
        // different comparison given before it (so `IFEQ v NX` parses, `NX IFEQ v` does not).
        if is_token(opt, "NX") && condition != SetCondition::IfExists {
            condition = SetCondition::IfMissing;
        } else if is_token(opt, "XX") && condition != SetCondition::IfMissing {
            condition = SetCondition::IfExists;
        } else if is_token(opt, "GET") {
            get = true;
        } else if is_token(opt, "KEEPTTL") && expiry.is_none() {
            keep_ttl = true;
        } else if let (Some(kind), Some(value)) = (timed, args.get(i + 1)) {
            if other_expiry(kind) {
                return Err(CmdError::SYNTAX);
            }
            expiry = Some((kind, value));
            i += 1;
        } else if let (Some(kind), Some(value)) = (Compare::parse(opt), args.get(i + 1)) {
            if condition != SetCondition::Always || compare.as_ref().is_some_and(|(k, _)| *k != kind) {
                return Err(CmdError::SYNTAX);
            }
            compare = Some((kind, value.clone()));
            i += 1;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    let expire_at_ms = match expiry {
        None => None,
        Some((kind, raw)) => {
            let seconds = matches!(kind, ExpiryOption::Ex | ExpiryOption::ExAt);
            let absolute = matches!(kind, ExpiryOption::ExAt | ExpiryOption::PxAt);
            Some(set_expire_time("set", raw, seconds, absolute, now_ms)?)
        }
    };
    Ok(SetRequest { condition, compare, get, keep_ttl, expire_at_ms })
}

/// The absolute expiry of SET/SETEX/PSETEX: the number must be positive and its milliseconds
/// must fit in an i64 (after adding the current time for a relative one).
fn set_expire_time(name: &str, raw: &[u8], seconds: bool, absolute: bool, now_ms: i64) -> Result<i64, CmdError> {
    let v = int_arg(raw)?;
    let invalid = || CmdError::owned(format!("ERR invalid expire time in '{name}' command"));
    if v <= 0 {
        return Err(invalid());
    }
    let ms = if seconds { v.checked_mul(1000).ok_or_else(invalid)? } else { v };
    if absolute {
        Ok(ms)
    } else {
        ms.checked_add(now_ms).ok_or_else(invalid)
    }
}

/// Apply a parsed SET; the reply is `OK`/nil, or with GET the old value.
fn set_apply(
    engine: &mut Engine,
    ctx: &CallCtx,
    key: &[u8],
    value: &[u8],
    req: &SetRequest,
) -> Result<Reply, CmdError> {
    // The old value is only copied out when GET asks for it.
    let (exists, old) = match engine.lookup(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => (false, Reply::Null),
        Some(Value::Str(b)) if req.get => (true, Reply::Bulk(b.clone())),
        Some(Value::Str(_)) => (true, Reply::Null),
        Some(_) if req.get => return Err(CmdError::WRONGTYPE),
        Some(_) => (true, Reply::Null),
    };
    let mut skip = match req.condition {
        SetCondition::Always => false,
        SetCondition::IfMissing => exists,
        SetCondition::IfExists => !exists,
    };
    if let Some((kind, target)) = &req.compare {
        if !exists {
            skip |= kind.needs_key();
        } else if !skip {
            // Compared only once NX/XX passed; another type is WRONGTYPE (with GET it was
            // refused above already).
            let Some(Value::Str(current)) = engine.lookup(ctx.db, key, ctx.now_ms).map(|e| &e.value) else {
                return Err(CmdError::WRONGTYPE);
            };
            skip = !kind.holds(current, target)?;
        }
    }
    if skip {
        return Ok(if req.get { old } else { Reply::Null });
    }
    if req.expire_at_ms.is_some_and(|at| engine.expired_on_write(at, ctx.now_ms)) {
        // An absolute time already past: as the newest Redis, nothing is stored, an existing
        // key is deleted (`del`), and the key counts as expired (Redis 8.2 stored it and let a
        // lookup expire it: `set`, `expire`, later `expired`).
        if exists {
            delete_key(engine, ctx.db, key);
        }
        engine.expired_keys += 1;
        return Ok(if req.get { old } else { Reply::ok() });
    }
    engine.set_key(ctx.db, key, Value::Str(owned(value)), req.keep_ttl);
    engine.modified(ctx.db, key, KeyEvent::Set);
    if let Some(at) = req.expire_at_ms {
        engine.set_expire(ctx.db, key, Some(at));
        engine.record_event(ctx.db, key, KeyEvent::Expire);
    }
    Ok(if req.get { old } else { Reply::ok() })
}

fn set(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, value) = (arg(args, 1)?, arg(args, 2)?);
    let req = parse_set(args, ctx.now_ms)?;
    set_apply(engine, ctx, key, value, &req)
}

fn setnx(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, value) = (arg(args, 1)?, arg(args, 2)?);
    let req = SetRequest::plain(SetCondition::IfMissing, false, None);
    let r = set_apply(engine, ctx, key, value, &req)?;
    Ok(Reply::Integer(i64::from(r == Reply::ok())))
}

fn setex_generic(
    engine: &mut Engine,
    ctx: &CallCtx,
    args: &[Bytes],
    name: &str,
    seconds: bool,
) -> Result<Reply, CmdError> {
    let (key, value) = (arg(args, 1)?, arg(args, 3)?);
    let at = set_expire_time(name, arg(args, 2)?, seconds, false, ctx.now_ms)?;
    let req = SetRequest::plain(SetCondition::Always, false, Some(at));
    set_apply(engine, ctx, key, value, &req)
}

fn setex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    setex_generic(engine, ctx, args, "setex", true)
}

fn psetex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    setex_generic(engine, ctx, args, "psetex", false)
}

fn getset(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, value) = (arg(args, 1)?, arg(args, 2)?);
    let req = SetRequest::plain(SetCondition::Always, true, None);
    set_apply(engine, ctx, key, value, &req)
}

fn getdel(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    match read_str(engine, ctx, key)? {
        None => Ok(Reply::Null),
        Some(b) => {
            delete_key(engine, ctx.db, key);
            Ok(Reply::Bulk(b))
        }
    }
}

fn mget(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let out = args
        .iter()
        .skip(1)
        .map(|key| match str_slot(engine, ctx, key) {
            StrSlot::Str(b) => Reply::Bulk(b),
            _ => Reply::Null,
        })
        .collect();
    Ok(Reply::Array(out))
}

/// The (key, value) pairs of MSET/MSETNX; an odd count is an arity error.
fn pairs(args: &[Bytes]) -> Result<Vec<(&Bytes, &Bytes)>, CmdError> {
    let rest = args.get(1..).unwrap_or(&[]);
    if rest.is_empty() || rest.len() % 2 != 0 {
        return Err(arity_error(args));
    }
    Ok(rest.chunks_exact(2).filter_map(|c| Some((c.first()?, c.get(1)?))).collect())
}

fn mset(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    for (key, value) in pairs(args)? {
        // As Redis' write lookup: an expired key is removed (and logged) before the overwrite.
        engine.expire_if_needed(ctx.db, key, ctx.now_ms);
        engine.set_key(ctx.db, key, Value::Str(owned(value)), false);
        engine.modified(ctx.db, key, KeyEvent::Set);
    }
    Ok(Reply::ok())
}

fn msetnx(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let pairs = pairs(args)?;
    for (key, _) in &pairs {
        if engine.lookup(ctx.db, key, ctx.now_ms).is_some() {
            return Ok(Reply::Integer(0));
        }
    }
    for (key, value) in pairs {
        engine.insert_copy(ctx.db, key, Value::Str(owned(value)));
        engine.modified(ctx.db, key, KeyEvent::Set);
    }
    Ok(Reply::Integer(1))
}

// ---------------------------------------------------------------------------------------------
// INCR family

fn incr_by(engine: &mut Engine, ctx: &CallCtx, key: &[u8], delta: i64) -> Result<Reply, CmdError> {
    let current = match engine.lookup_read(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => 0,
        Some(Value::Str(b)) => parse_i64(b).ok_or(CmdError::NOT_INTEGER)?,
        Some(_) => return Err(CmdError::WRONGTYPE),
    };
    let new = current.checked_add(delta).ok_or(CmdError::full("ERR increment or decrement would overflow"))?;
    store_keep_ttl(
        engine,
        ctx,
        key,
        Bytes::copy_from_slice(itoa::Buffer::new().format(new).as_bytes()),
        KeyEvent::IncrBy,
    );
    Ok(Reply::Integer(new))
}

fn incr(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    incr_by(engine, ctx, arg(args, 1)?, 1)
}

fn decr(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    incr_by(engine, ctx, arg(args, 1)?, -1)
}

fn incrby(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let delta = int_arg(arg(args, 2)?)?;
    incr_by(engine, ctx, arg(args, 1)?, delta)
}

fn decrby(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let decrement = int_arg(arg(args, 2)?)?;
    let delta = decrement.checked_neg().ok_or(CmdError::full("ERR decrement would overflow"))?;
    incr_by(engine, ctx, arg(args, 1)?, delta)
}

fn incrbyfloat(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    // The key (its type, then its value) before the increment, as Redis.
    let current = match read_str(engine, ctx, key)? {
        None => LongDouble::ZERO,
        Some(b) => LongDouble::parse(&b).ok_or(CmdError::NOT_FLOAT)?,
    };
    let incr = LongDouble::parse(arg(args, 2)?).ok_or(CmdError::NOT_FLOAT)?;
    let new = current.checked_add(incr).ok_or(CmdError::full("ERR increment would produce NaN or Infinity"))?;
    let text = new.to_text();
    store_keep_ttl(engine, ctx, key, text.clone(), KeyEvent::IncrByFloat);
    // Redis builds the result as a plain string: `embstr` or `raw`, never `int`.
    if let Some(e) = engine.entry_mut(ctx.db, key) {
        e.meta.form = Form::StrPlain;
    }
    Ok(Reply::Bulk(text))
}

// ---------------------------------------------------------------------------------------------
// APPEND / STRLEN / GETRANGE / SETRANGE

fn too_big() -> CmdError {
    CmdError::full("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
}

/// Take the string out of `b` as a Vec, reusing its buffer when nothing else shares it. A reply
/// still being written shares it (the connection's output references large values instead of
/// copying them): then the string is copied, and the reply keeps the bytes it was given.
fn take_vec(b: &mut Bytes) -> Vec<u8> {
    Vec::from(std::mem::take(b))
}

fn append(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, value) = (arg(args, 1)?, arg(args, 2)?);
    // Only the length is kept: a clone of the old value held across the append would make it
    // look shared to `take_vec`, which would copy the whole string every time instead of
    // extending it in place.
    let old_len = read_str(engine, ctx, key)?.map(|old| old.len());
    if old_len.unwrap_or(0).saturating_add(value.len()) > MAX_STRING_BYTES {
        return Err(too_big());
    }
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::Str(Bytes::new()));
    if old_len.is_some() {
        // Redis appends to a private `raw` copy; a new key is stored like SET's value.
        entry.meta.form = Form::StrRaw;
    }
    let Value::Str(b) = &mut entry.value else { return Err(CmdError::WRONGTYPE) };
    let mut v = take_vec(b);
    v.extend_from_slice(value);
    let len = v.len();
    *b = Bytes::from(v);
    engine.modified(ctx.db, key, KeyEvent::Append);
    Ok(Reply::Integer(len as i64))
}

fn strlen(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let len = read_str(engine, ctx, arg(args, 1)?)?.map_or(0, |b| b.len());
    Ok(Reply::Integer(len as i64))
}

fn getrange(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let start = int_arg(arg(args, 2)?)?;
    let end = int_arg(arg(args, 3)?)?;
    let Some(s) = read_str(engine, ctx, key)? else { return Ok(Reply::Bulk(Bytes::new())) };
    Ok(Reply::Bulk(byte_range(&s, start, end)))
}

/// Redis 7's GETRANGE clamping (kept in Redis 8: a stricter version was reverted).
fn byte_range(s: &Bytes, start: i64, end: i64) -> Bytes {
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Bytes::new();
    }
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if len == 0 || start > end {
        return Bytes::new();
    }
    s.slice(start as usize..=end as usize)
}

fn setrange(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, value) = (arg(args, 1)?, arg(args, 3)?);
    let offset = int_arg(arg(args, 2)?)?;
    let offset = usize::try_from(offset).map_err(|_| CmdError::full("ERR offset is out of range"))?;
    let old_len = match read_str(engine, ctx, key)? {
        None if value.is_empty() => return Ok(Reply::Integer(0)),
        None => 0,
        Some(b) if value.is_empty() => return Ok(Reply::Integer(b.len() as i64)),
        Some(b) => b.len(),
    };
    let new_end = offset.checked_add(value.len()).filter(|n| *n <= MAX_STRING_BYTES).ok_or_else(too_big)?;
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::Str(Bytes::new()));
    // Redis writes into a `raw` string, new or not.
    entry.meta.form = Form::StrRaw;
    let Value::Str(b) = &mut entry.value else { return Err(CmdError::WRONGTYPE) };
    let mut v = take_vec(b);
    if v.len() < new_end {
        v.resize(new_end, 0);
    }
    if let Some(dst) = v.get_mut(offset..new_end) {
        dst.copy_from_slice(value);
    }
    let len = v.len().max(old_len);
    *b = Bytes::from(v);
    engine.modified(ctx.db, key, KeyEvent::SetRange);
    Ok(Reply::Integer(len as i64))
}

/// SET reads the old value only with GET (what ACL's `%R~` / `%W~` rules check).
/// SET's key flags for a call: it overwrites the key (`OW update`) unless GET reads the old
/// value (`RW access update`) or a condition compares it (`RW update`).
fn set_key_flags(args: &[Bytes]) -> &'static [&'static str] {
    let after = args.get(3..).unwrap_or(&[]);
    if after.iter().any(|a| a.eq_ignore_ascii_case(b"get")) {
        &["RW", "ACCESS", "UPDATE"]
    } else if after.iter().any(|a| cond::is_condition(a)) {
        &["RW", "UPDATE"]
    } else {
        &["OW", "UPDATE"]
    }
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    #[test]
    fn set_option_conflicts_are_syntax_errors() {
        let mut h = Harness::new();
        for bad in [
            &["SET", "k", "v", "NX", "XX"][..],
            &["SET", "k", "v", "XX", "NX"],
            &["SET", "k", "v", "EX", "10", "PX", "10"],
            &["SET", "k", "v", "EX", "10", "KEEPTTL"],
            &["SET", "k", "v", "KEEPTTL", "PXAT", "10"],
            &["SET", "k", "v", "EX"],
            &["SET", "k", "v", "FOO"],
            &["SET", "k", "v", "EX", "abc", "FOO"],
        ] {
            assert_eq!(h.run(bad), err("ERR syntax error"), "{bad:?}");
        }
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
        // The same option twice is fine; the last time wins.
        assert_eq!(h.run(&["SET", "k", "v", "EX", "10", "ex", "20"]), ok());
        assert_eq!(h.run(&["TTL", "k"]), int(20));
        assert_eq!(h.run(&["SET", "k", "v", "NX", "NX"]), Reply::Null);
        assert_eq!(h.run(&["SET", "k", "w", "GET", "GET"]), bulk("v"));
    }

    #[test]
    fn set_expire_errors() {
        let mut h = Harness::new();
        let invalid = err("ERR invalid expire time in 'set' command");
        for (opt, n) in [
            ("EX", "0"),
            ("EX", "-1"),
            ("PX", "0"),
            ("EXAT", "0"),
            ("EX", "9223372036854775"),
            ("PX", "9223372036854775807"),
        ] {
            assert_eq!(h.run(&["SET", "k", "v", opt, n]), invalid, "{opt} {n}");
        }
        assert_eq!(h.run(&["SET", "k", "v", "EX", "abc"]), err("ERR value is not an integer or out of range"));
        assert_eq!(h.run(&["SET", "k", "v", "EXAT", "9223372036854775"]), ok());
        assert_eq!(h.run(&["SETEX", "k", "0", "v"]), err("ERR invalid expire time in 'setex' command"));
        assert_eq!(h.run(&["PSETEX", "k", "-5", "v"]), err("ERR invalid expire time in 'psetex' command"));
        assert_eq!(h.run(&["SETEX", "k", "x", "v"]), err("ERR value is not an integer or out of range"));
        // An absolute time in the past stores and deletes at once.
        assert_eq!(h.run(&["SET", "k", "v", "PXAT", "1"]), ok());
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
    }

    #[test]
    fn set_conditions_get_and_ttl() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SET", "k", "v", "XX"]), Reply::Null);
        assert_eq!(h.run(&["SET", "k", "v", "XX", "GET"]), Reply::Null);
        assert_eq!(h.run(&["SET", "k", "v", "NX", "GET"]), Reply::Null);
        assert_eq!(h.run(&["SET", "k", "w", "NX", "GET"]), bulk("v"));
        assert_eq!(h.run(&["GET", "k"]), bulk("v"));
        assert_eq!(h.run(&["SET", "k", "w", "XX", "EX", "100"]), ok());
        assert_eq!(h.run(&["SET", "k", "x", "KEEPTTL"]), ok());
        assert_eq!(h.run(&["TTL", "k"]), int(100));
        assert_eq!(h.run(&["SET", "k", "y"]), ok());
        assert_eq!(h.run(&["TTL", "k"]), int(-1));
        // SET overwrites other types, but SET ... GET refuses them.
        h.run(&["RPUSH", "l", "a"]);
        assert_eq!(h.run(&["SET", "l", "v", "GET"]), err(WRONGTYPE));
        assert_eq!(h.run(&["SET", "l", "v", "NX", "GET"]), err(WRONGTYPE));
        assert_eq!(h.run(&["SET", "l", "v"]), ok());
        assert_eq!(h.run(&["GET", "l"]), bulk("v"));
        assert_eq!(h.run(&["SETNX", "l", "z"]), int(0));
        assert_eq!(h.run(&["SETNX", "m", "z"]), int(1));
        assert_eq!(h.run(&["GETSET", "m", "q"]), bulk("z"));
        assert_eq!(h.run(&["GETSET", "new", "q"]), Reply::Null);
        assert_eq!(h.run(&["SETEX", "e", "10", "v"]), ok());
        assert_eq!(h.run(&["PTTL", "e"]), int(10_000));
        assert_eq!(h.run(&["GETDEL", "e"]), bulk("v"));
        assert_eq!(h.run(&["GETDEL", "e"]), Reply::Null);
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

    #[test]
    fn mget_mset_msetnx() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["MSET", "a", "1", "b"]), err("ERR wrong number of arguments for 'mset' command"));
        assert_eq!(h.run(&["MSETNX", "a", "1", "b"]), err("ERR wrong number of arguments for 'msetnx' command"));
        assert_eq!(h.run(&["MSET", "a", "1", "a", "2"]), ok());
        h.run(&["SADD", "s", "m"]);
        assert_eq!(h.run(&["MGET", "a", "nope", "s"]), Reply::Array(vec![bulk("2"), Reply::Null, Reply::Null]));
        assert_eq!(h.run(&["MSETNX", "x", "1", "a", "3"]), int(0));
        assert_eq!(h.run(&["EXISTS", "x"]), int(0));
        assert_eq!(h.run(&["MSETNX", "x", "1", "y", "2"]), int(1));
        assert_eq!(h.run(&["MGET", "x", "y"]), bulks(&["1", "2"]));
    }

    #[test]
    fn incr_overflow_and_errors() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["INCR", "n"]), int(1));
        assert_eq!(h.run(&["INCRBY", "n", "-5"]), int(-4));
        assert_eq!(h.run(&["DECR", "n"]), int(-5));
        assert_eq!(h.run(&["DECRBY", "n", "5"]), int(-10));
        h.run(&["SET", "max", "9223372036854775807"]);
        let overflow = err("ERR increment or decrement would overflow");
        assert_eq!(h.run(&["INCR", "max"]), overflow);
        assert_eq!(h.run(&["DECRBY", "max", "-1"]), overflow);
        h.run(&["SET", "min", "-9223372036854775808"]);
        assert_eq!(h.run(&["DECR", "min"]), overflow);
        assert_eq!(h.run(&["DECRBY", "x", "-9223372036854775808"]), err("ERR decrement would overflow"));
        assert_eq!(h.run(&["DECRBY", "x", "9223372036854775808"]), err("ERR value is not an integer or out of range"));
        for v in ["abc", " 1", "01", "+1", "99999999999999999999"] {
            h.run(&["SET", "s", v]);
            assert_eq!(h.run(&["INCR", "s"]), err("ERR value is not an integer or out of range"), "{v}");
        }
        h.run(&["RPUSH", "l", "a"]);
        assert_eq!(h.run(&["INCR", "l"]), err(WRONGTYPE));
        // INCR keeps the TTL.
        h.run(&["SET", "t", "1", "EX", "100"]);
        h.run(&["INCR", "t"]);
        assert_eq!(h.run(&["TTL", "t"]), int(100));
    }

    #[test]
    fn incrbyfloat_formatting_and_errors() {
        let mut h = Harness::new();
        h.run(&["SET", "f", "3.0"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "f", "1.5"]), bulk("4.5"));
        assert_eq!(h.run(&["INCRBYFLOAT", "f", "0.1"]), bulk("4.6"));
        assert_eq!(h.run(&["INCRBYFLOAT", "g", "1.2e3"]), bulk("1200"));
        assert_eq!(h.run(&["INCRBYFLOAT", "z", "-0"]), bulk("0"));
        assert_eq!(h.run(&["INCRBYFLOAT", "h", "10.50000"]), bulk("10.5"));
        assert_eq!(h.run(&["GET", "h"]), bulk("10.5"));
        assert_eq!(h.run(&["INCRBYFLOAT", "f", "abc"]), err("ERR value is not a valid float"));
        assert_eq!(h.run(&["INCRBYFLOAT", "f", "inf"]), err("ERR increment would produce NaN or Infinity"));
        h.run(&["SET", "s", "1.0 "]);
        assert_eq!(h.run(&["INCRBYFLOAT", "s", "1"]), err("ERR value is not a valid float"));
    }

    /// Where the string stored at `key` starts in memory.
    fn stored_at(h: &mut Harness, key: &str) -> *const u8 {
        match h.engine.peek(h.db, key.as_bytes(), h.now_ms).map(|e| &e.value) {
            Some(crate::Value::Str(b)) => b.as_ptr(),
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn append_and_setrange_write_in_place_unless_a_reply_holds_the_value() {
        let mut h = Harness::new();
        let start = "x".repeat(1000);
        h.run(&["SET", "s", &start]);
        // The first APPEND outgrows the exact-sized buffer SET stored; the next ones fit.
        assert_eq!(h.run(&["APPEND", "s", "y"]), int(1001));
        let at = stored_at(&mut h, "s");
        assert_eq!(h.run(&["APPEND", "s", "z"]), int(1002));
        assert_eq!(h.run(&["SETRANGE", "s", "0", "a"]), int(1002));
        assert_eq!(stored_at(&mut h, "s"), at, "APPEND and SETRANGE copied a string nothing else holds");
        // A reply still being written holds the value: the writes go to a copy, and the
        // reply keeps the bytes it was given.
        let Reply::Bulk(held) = h.run(&["GET", "s"]) else { panic!("GET") };
        assert_eq!(h.run(&["APPEND", "s", "w"]), int(1003));
        assert_eq!(h.run(&["SETRANGE", "s", "1", "b"]), int(1003));
        assert_eq!(held, format!("a{}yz", &start[1..]));
        assert_ne!(stored_at(&mut h, "s"), held.as_ptr());
        assert_eq!(h.run(&["GETRANGE", "s", "0", "1"]), bulk("ab"));
    }

    #[test]
    fn append_strlen_getrange_setrange() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["APPEND", "s", "Hello"]), int(5));
        assert_eq!(h.run(&["APPEND", "s", " World"]), int(11));
        assert_eq!(h.run(&["STRLEN", "s"]), int(11));
        assert_eq!(h.run(&["STRLEN", "nope"]), int(0));
        for (a, b, want) in [
            ("0", "-1", "Hello World"),
            ("-3", "-1", "rld"),
            ("5", "3", ""),
            ("-100", "-50", "H"),
            ("100", "200", ""),
            ("0", "100", "Hello World"),
            ("-1", "-5", ""),
            ("3", "-100", ""),
        ] {
            assert_eq!(h.run(&["GETRANGE", "s", a, b]), bulk(want), "{a} {b}");
        }
        assert_eq!(h.run(&["GETRANGE", "nope", "0", "-1"]), bulk(""));
        assert_eq!(h.run(&["GETRANGE", "s", "a", "1"]), err("ERR value is not an integer or out of range"));
        assert_eq!(h.run(&["SETRANGE", "s", "0", "J"]), int(11));
        assert_eq!(h.run(&["GET", "s"]), bulk("Jello World"));
        assert_eq!(h.run(&["SETRANGE", "s", "-1", "x"]), err("ERR offset is out of range"));
        assert_eq!(
            h.run(&["SETRANGE", "s", "536870912", "x"]),
            err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
        );
        assert_eq!(h.run(&["SETRANGE", "s", "536870912", ""]), int(11));
        assert_eq!(h.run(&["SETRANGE", "n", "5", ""]), int(0));
        assert_eq!(h.run(&["EXISTS", "n"]), int(0));
        assert_eq!(h.run(&["SETRANGE", "n", "3", "ab"]), int(5));
        assert_eq!(h.run(&["GET", "n"]), Reply::bulk(b"\0\0\0ab"));
        h.run(&["RPUSH", "l", "a"]);
        assert_eq!(h.run(&["APPEND", "l", "x"]), err(WRONGTYPE));
        assert_eq!(h.run(&["STRLEN", "l"]), err(WRONGTYPE));
        assert_eq!(h.run(&["GET", "l"]), err(WRONGTYPE));
    }
}
