//! Hash field expiry (Redis 7.4+, argument forms of Redis 8.4+): HEXPIRE, HPEXPIRE, HEXPIREAT,
//! HPEXPIREAT, HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME, HPERSIST, HGETEX, HSETEX.
//!
//! A field's time lives in the hash ([`crate::keyspace::HashFields`]); lazy and active removal
//! are the keyspace's (`keyspace/expiry.rs`). O(N) in the fields named, plus O(log M) per
//! field given a time (M: the hash's fields with times).
//!
//! Redis behaviours we match on purpose:
//! - Times are absolute Unix ms inside; a relative one is added to the command's time. Past
//!   `2^46 - 1` ms (for a seconds form, before the addition) is ``ERR invalid expire time in
//!   'hexpire' command``; a negative one `ERR invalid expire time, must be >= 0`. A time not
//!   after the command's deletes the field at once (code 2 / the field gone), except on a
//!   replica or while loading, which keep it for their primary's (the log's) HDEL.
//! - A field whose time is *before* the command's time is gone: readers skip it, and a
//!   command that names it removes it (`hexpired`, logged as `HDEL`).
//! - The HEXPIRE family takes `NX | XX | GT | LT` and `FIELDS numfields field...` in any order
//!   (Redis 8.4+; 8.2 insisted on the condition first). A field without a time counts as
//!   infinitely far for GT / LT: GT and XX fail on it, LT and NX pass. Per field:
//!   -2 no such field, 0 condition not met, 1 set, 2 deleted (time already past).
//! - HTTL and kin: -2 no such field (or expired), -1 no time, else the time left (seconds
//!   rounded up) or the time. HPERSIST: -2, -1, or 1 (time removed).
//! - Effects, as Redis propagates them: the HEXPIRE family as `HPEXPIREAT key ms [cond]
//!   FIELDS n <fields set>` (none if no field was set); HGETEX as `HPEXPIREAT` / `HPERSIST`
//!   over its fields; HSETEX as `HSETEX key [FNX | FXX] [PXAT ms | KEEPTTL] FIELDS n ...`;
//!   HGETDEL as itself; fields deleted
//!   because their time had passed as `HDEL`.

use super::{hash_cmd, read_hash, write_hash, Hash};
use crate::command::{key_at, CommandSpec, Flags, Handler, KeySpec};
use crate::effect::Effect;
use crate::types::object::encoding::{hash_before_set, hash_field_timed};
use crate::types::{arg, arity_error, is_token, owned};
use crate::util::{int_arg, parse_i64};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// The latest time a field may be given, in Unix ms (Redis: its expiry buckets' range / 4).
const MAX_TIME_MS: i64 = (1 << 46) - 1;

const WRITE_FAST: Flags = Flags::WRITE.and(Flags::FAST);
const READ_FAST: Flags = Flags::READONLY.and(Flags::FAST);
const RW_UPDATE: &[KeySpec] = &[key_at(1, &["RW", "UPDATE"])];
const RO_ACCESS: &[KeySpec] = &[key_at(1, &["RO", "ACCESS"])];
const EXPIRE_SYNTAX_S: &str =
    "key:key seconds:integer condition@[NX | XX | GT | LT] fields@FIELDS (numfields:integer field ...)";

const fn expire_spec(name: &'static str, syntax: &'static str, summary: &'static str, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity: -6,
        flags: WRITE_FAST,
        acl: &["@write", "@hash", "@fast"],
        key_specs: RW_UPDATE,
        summary,
        since: "7.4.0",
        complexity: "O(N) in the number of fields named.",
        syntax,
        ..hash_cmd(handler)
    }
}

const fn ttl_spec(
    name: &'static str,
    summary: &'static str,
    tips: &'static [&'static str],
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -5,
        flags: READ_FAST,
        acl: &["@read", "@hash", "@fast"],
        tips,
        key_specs: RO_ACCESS,
        summary,
        since: "7.4.0",
        complexity: "O(N) in the number of fields named.",
        syntax: "key:key fields@FIELDS (numfields:integer field ...)",
        ..hash_cmd(handler)
    }
}

/// The commands of this module.
pub const COMMANDS: &[CommandSpec] = &[
    expire_spec("hexpire", EXPIRE_SYNTAX_S, "Gives hash fields a time to live in seconds.", Handler::Engine(hexpire)),
    expire_spec(
        "hpexpire",
        "key:key milliseconds:integer condition@[NX | XX | GT | LT] fields@FIELDS (numfields:integer field ...)",
        "Gives hash fields a time to live in milliseconds.",
        Handler::Engine(hpexpire),
    ),
    expire_spec(
        "hexpireat",
        "key:key unix-time-seconds:unix-time condition@[NX | XX | GT | LT] fields@FIELDS (numfields:integer field ...)",
        "Gives hash fields an expiry time as a Unix time in seconds.",
        Handler::Engine(hexpireat),
    ),
    expire_spec(
        "hpexpireat",
        "key:key unix-time-milliseconds:unix-time condition@[NX | XX | GT | LT] fields@FIELDS (numfields:integer field ...)",
        "Gives hash fields an expiry time as a Unix time in milliseconds.",
        Handler::Engine(hpexpireat),
    ),
    ttl_spec("httl", "Returns the seconds left to live of hash fields.", &["nondeterministic_output"], Handler::Engine(httl)),
    ttl_spec(
        "hpttl",
        "Returns the milliseconds left to live of hash fields.",
        &["nondeterministic_output"],
        Handler::Engine(hpttl),
    ),
    ttl_spec("hexpiretime", "Returns the expiry times of hash fields, Unix seconds.", &[], Handler::Engine(hexpiretime)),
    ttl_spec(
        "hpexpiretime",
        "Returns the expiry times of hash fields, Unix milliseconds.",
        &[],
        Handler::Engine(hpexpiretime),
    ),
    CommandSpec {
        name: "hpersist",
        arity: -5,
        flags: WRITE_FAST,
        acl: &["@write", "@hash", "@fast"],
        key_specs: RW_UPDATE,
        summary: "Removes the expiry times of hash fields.",
        since: "7.4.0",
        complexity: "O(N) in the number of fields named.",
        syntax: "key:key fields@FIELDS (numfields:integer field ...)",
        ..hash_cmd(Handler::Engine(hpersist))
    },
    CommandSpec {
        name: "hgetex",
        arity: -5,
        flags: WRITE_FAST,
        acl: &["@write", "@hash", "@fast"],
        // The note is part of Redis' COMMAND INFO reply.
        key_specs: &[KeySpec { notes: "RW and UPDATE because it changes the TTL", ..key_at(1, &["RW", "ACCESS", "UPDATE"]) }],
        summary: "Returns the values of hash fields and optionally sets or removes their expiry times.",
        since: "8.0.0",
        complexity: "O(N) in the number of fields named.",
        syntax: "key:key [expiration@(EX seconds:integer | PX milliseconds:integer | EXAT unix-time-seconds:unix-time \
                 | PXAT unix-time-milliseconds:unix-time | PERSIST)] fields@FIELDS (numfields:integer field ...)",
        ..hash_cmd(Handler::Engine(hgetex))
    },
    CommandSpec {
        name: "hsetex",
        arity: -6,
        flags: WRITE_FAST.and(Flags::DENYOOM),
        acl: &["@write", "@hash", "@fast"],
        key_specs: RW_UPDATE,
        summary: "Sets hash fields, optionally only if none or all exist, and optionally their expiry times.",
        since: "8.0.0",
        complexity: "O(N) in the number of fields set.",
        syntax: "key:key [condition@(FNX | FXX)] [expiration@(EX seconds:integer | PX milliseconds:integer \
                 | EXAT unix-time-seconds:unix-time | PXAT unix-time-milliseconds:unix-time | KEEPTTL)] \
                 fields@FIELDS (numfields:integer (field value) ...)",
        ..hash_cmd(Handler::Engine(hsetex))
    },
];

// ---------------------------------------------------------------------------------------------
// Parsing

/// `ERR invalid expire time in '<name>' command`.
fn bad_time(name: &str) -> CmdError {
    CmdError::owned(format!("ERR invalid expire time in '{name}' command"))
}

/// An expiry time argument in `unit_ms` units, relative to `base_ms` (0: absolute), as an
/// absolute Unix ms time within Redis' range.
fn parse_time(raw: &[u8], unit_ms: i64, base_ms: i64, name: &str) -> Result<i64, CmdError> {
    let mut val = int_arg(raw)?;
    if val < 0 {
        return Err(CmdError::full("ERR invalid expire time, must be >= 0"));
    }
    if unit_ms != 1 {
        if val > MAX_TIME_MS / unit_ms {
            return Err(bad_time(name));
        }
        val *= unit_ms;
    }
    if val > MAX_TIME_MS.saturating_sub(base_ms) {
        return Err(bad_time(name));
    }
    Ok(val + base_ms)
}

fn unknown_argument(a: &[u8]) -> CmdError {
    CmdError::owned(format!("ERR unknown argument: {}", String::from_utf8_lossy(a)))
}

/// HEXPIRE's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cond {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

impl Cond {
    fn token(self) -> Option<&'static str> {
        match self {
            Cond::Always => None,
            Cond::Nx => Some("NX"),
            Cond::Xx => Some("XX"),
            Cond::Gt => Some("GT"),
            Cond::Lt => Some("LT"),
        }
    }
}

/// `key time [cond] FIELDS n field...` in any order after the time.
struct ExpireArgs<'a> {
    at_ms: i64,
    cond: Cond,
    fields: &'a [Bytes],
}

fn parse_expire<'a>(args: &'a [Bytes], unit_ms: i64, base_ms: i64, name: &str) -> Result<ExpireArgs<'a>, CmdError> {
    let at_ms = parse_time(arg(args, 2)?, unit_ms, base_ms, name)?;
    let mut fields: Option<&[Bytes]> = None;
    let mut conds = Vec::new();
    let mut i = 3;
    while let Some(a) = args.get(i) {
        if is_token(a, "FIELDS") {
            if fields.is_some() {
                return Err(CmdError::full("ERR FIELDS keyword specified multiple times"));
            }
            if i + 2 >= args.len() {
                return Err(CmdError::full("ERR FIELDS requires at least numfields and one field argument"));
            }
            let n = parse_i64(arg(args, i + 1)?)
                .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(CmdError::full("ERR Parameter `numFields` should be greater than 0"))?;
            let first = i + 2;
            let named =
                args.get(first..first.saturating_add(n)).ok_or(CmdError::full("ERR wrong number of arguments"))?;
            fields = Some(named);
            i = first + n;
            continue;
        }
        let cond = [("NX", Cond::Nx), ("XX", Cond::Xx), ("GT", Cond::Gt), ("LT", Cond::Lt)]
            .into_iter()
            .find(|(t, _)| is_token(a, t))
            .map(|(_, c)| c)
            .ok_or_else(|| unknown_argument(a))?;
        conds.push(cond);
        i += 1;
    }
    let fields = fields.ok_or(CmdError::full("ERR missing FIELDS argument"))?;
    conds.sort_by_key(|c| *c as u8);
    conds.dedup();
    if conds.len() > 1 {
        return Err(CmdError::full("ERR Multiple condition flags specified"));
    }
    Ok(ExpireArgs { at_ms, cond: conds.first().copied().unwrap_or(Cond::Always), fields })
}

/// `FIELDS numfields field...` right after the key, for HTTL, HPERSIST and kin (and HGETDEL).
pub(super) fn parse_fixed_fields(args: &[Bytes]) -> Result<&[Bytes], CmdError> {
    if !is_token(arg(args, 2)?, "FIELDS") {
        return Err(CmdError::full("ERR Mandatory argument FIELDS is missing or not at the right position"));
    }
    let numfields = parse_i64(arg(args, 3)?)
        .filter(|n| *n > 0)
        .ok_or(CmdError::full("ERR Number of fields must be a positive integer"))?;
    let fields = args.get(4..).unwrap_or(&[]);
    if usize::try_from(numfields).ok() != Some(fields.len()) {
        return Err(CmdError::full("ERR The `numfields` parameter must match the number of arguments"));
    }
    Ok(fields)
}

/// The expiry option of HGETEX / HSETEX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// None given: HGETEX leaves times alone, HSETEX drops the times of the fields it sets.
    Unchanged,
    /// EX / PX / EXAT / PXAT, as an absolute time, and whether it was given as PXAT.
    At(i64, bool),
    /// HGETEX PERSIST.
    Persist,
    /// HSETEX KEEPTTL.
    KeepTtl,
}

/// HSETEX's FNX / FXX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exist {
    Any,
    None,
    All,
}

/// The arguments of HGETEX (`set: false`) or HSETEX (`set: true`), in any order.
struct ExArgs<'a> {
    expiry: Expiry,
    exist: Exist,
    /// HGETEX: the fields; HSETEX: field, value, field, value...
    items: &'a [Bytes],
}

fn parse_ex<'a>(args: &'a [Bytes], now_ms: i64, set: bool, name: &str) -> Result<ExArgs<'a>, CmdError> {
    let per_field = if set { 2 } else { 1 };
    let mut out = ExArgs { expiry: Expiry::Unchanged, exist: Exist::Any, items: &[] };
    let mut seen_fields = false;
    let mut seen_exist = false;
    let only_one = if set {
        CmdError::full("ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified")
    } else {
        CmdError::full("ERR Only one of EX, PX, EXAT, PXAT or PERSIST arguments can be specified")
    };
    let mut i = 2;
    while let Some(a) = args.get(i) {
        if is_token(a, "FIELDS") {
            if seen_fields {
                return Err(CmdError::full("ERR FIELDS keyword specified multiple times"));
            }
            let raw = args.get(i + 1).ok_or_else(|| arity_error(args))?;
            let n = parse_i64(raw)
                .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(CmdError::full("ERR invalid number of fields"))?;
            let first = i + 2;
            let end = first.saturating_add(n.saturating_mul(per_field));
            out.items = args.get(first..end).ok_or(CmdError::full("ERR wrong number of arguments"))?;
            seen_fields = true;
            i = end;
            continue;
        }
        let timed = [("EX", 1000, true), ("PX", 1, true), ("EXAT", 1000, false), ("PXAT", 1, false)]
            .into_iter()
            .find(|(t, _, _)| is_token(a, t));
        if let Some((token, unit, relative)) = timed {
            if out.expiry != Expiry::Unchanged {
                return Err(only_one);
            }
            let raw = args.get(i + 1).ok_or(CmdError::full("ERR missing expire time"))?;
            let at = parse_time(raw, unit, if relative { now_ms } else { 0 }, name)?;
            out.expiry = Expiry::At(at, token == "PXAT");
            i += 2;
        } else if !set && is_token(a, "PERSIST") {
            if out.expiry != Expiry::Unchanged {
                return Err(only_one);
            }
            out.expiry = Expiry::Persist;
            i += 1;
        } else if set && is_token(a, "KEEPTTL") {
            if out.expiry != Expiry::Unchanged {
                return Err(only_one);
            }
            out.expiry = Expiry::KeepTtl;
            i += 1;
        } else if set && (is_token(a, "FXX") || is_token(a, "FNX")) {
            if seen_exist {
                return Err(CmdError::full("ERR Only one of FXX or FNX arguments can be specified"));
            }
            seen_exist = true;
            out.exist = if is_token(a, "FXX") { Exist::All } else { Exist::None };
            i += 1;
        } else {
            return Err(unknown_argument(a));
        }
    }
    if !seen_fields {
        return Err(CmdError::full("ERR missing FIELDS argument"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Setting times

/// What setting a field's time did (Redis' per-field codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetTime {
    NoField = -2,
    NotMet = 0,
    Set = 1,
    Deleted = 2,
}

/// Whether a time set at `now_ms` deletes the field at once: the time is not after the
/// command's, and this server deletes (not a replica, not loading the log).
fn deletes_now(engine: &Engine, at_ms: i64, now_ms: i64) -> bool {
    engine.expired_on_write(at_ms, now_ms) && !engine.loading
}

/// Give `field` the time `at_ms` under `cond` (`None`: persist it).
fn set_time(hash: &mut Hash, field: &[u8], at_ms: Option<i64>, cond: Cond, delete_now: bool) -> SetTime {
    if !hash.contains_key(field) {
        return SetTime::NoField;
    }
    let prev = hash.ttl(field);
    let Some(at) = at_ms else {
        if prev.is_none() {
            return SetTime::NotMet;
        }
        hash.set_ttl(field, None);
        return SetTime::Set;
    };
    match prev {
        None if matches!(cond, Cond::Xx | Cond::Gt) => return SetTime::NotMet,
        Some(p) if cond == Cond::Nx || (cond == Cond::Gt && p >= at) || (cond == Cond::Lt && p <= at) => {
            return SetTime::NotMet
        }
        Some(p) if p == at => return SetTime::Set,
        _ => {}
    }
    if delete_now {
        hash.swap_remove(field);
        return SetTime::Deleted;
    }
    hash.set_ttl(field, Some(at));
    SetTime::Set
}

/// The hash at `key` for a write that must find it, with its metadata; `None` when missing.
fn existing_hash<'e>(
    engine: &'e mut Engine,
    ctx: &CallCtx,
    key: &[u8],
) -> Result<Option<(&'e mut Hash, &'e mut crate::types::object::ObjectMeta)>, CmdError> {
    match engine.lookup_mut(ctx.db, key, ctx.now_ms) {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::Hash(h) => Ok(Some((h, &mut e.meta))),
            _ => Err(CmdError::WRONGTYPE),
        },
    }
}

/// After a command that may have emptied the hash at `key`: delete it (`del`) if so.
fn delete_if_empty(engine: &mut Engine, db: usize, key: &[u8]) -> bool {
    let empty = matches!(engine.db(db).get_raw(key).map(|e| &e.value), Some(Value::Hash(h)) if h.is_empty());
    if empty {
        engine.remove(db, key);
        engine.record_event(db, key, KeyEvent::Del);
        engine.signal_ready(db, key);
    }
    empty
}

fn fields_arg(fields: &[Bytes]) -> impl Iterator<Item = Bytes> + '_ {
    [Bytes::from_static(b"FIELDS"), Bytes::from(fields.len().to_string())].into_iter().chain(fields.iter().cloned())
}

fn expire_generic(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    args: &[Bytes],
    unit_ms: i64,
    relative: bool,
    name: &str,
) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let (db, now) = (ctx.db, ctx.now_ms);
    let exists = existing_hash(engine, ctx, key)?.is_some();
    let parsed = parse_expire(args, unit_ms, if relative { now } else { 0 }, name)?;
    if !exists {
        return Ok(Reply::Array(parsed.fields.iter().map(|_| Reply::Integer(SetTime::NoField as i64)).collect()));
    }
    let delete_now = deletes_now(engine, parsed.at_ms, now);
    let cfg = engine.config.object;
    let Some((hash, meta)) = existing_hash(engine, ctx, key)? else { return Err(CmdError::WRONGTYPE) };
    let mut codes = Vec::with_capacity(parsed.fields.len());
    let (mut updated, mut deleted) = (Vec::new(), Vec::new());
    for f in parsed.fields {
        let code = set_time(hash, f, Some(parsed.at_ms), parsed.cond, delete_now);
        match code {
            SetTime::Set => updated.push(f.clone()),
            SetTime::Deleted => deleted.push(f.clone()),
            _ => {}
        }
        codes.push(Reply::Integer(code as i64));
    }
    if !updated.is_empty() {
        hash_field_timed(meta, hash, &cfg);
    }
    if !deleted.is_empty() {
        engine.fields_removed(db, key, &deleted, false);
        engine.modified(db, key, KeyEvent::HDel);
        engine.attach_subkeys(deleted.iter().map(|f| &f[..]));
    }
    if !updated.is_empty() {
        engine.modified(db, key, KeyEvent::HExpire);
        engine.attach_subkeys(updated.iter().map(|f| &f[..]));
    }
    engine.sync_field_expiry(db, key);
    delete_if_empty(engine, db, key);
    // Logged as the absolute form over the fields it set; the deletions are logged as HDEL.
    ctx.explicit();
    if !updated.is_empty() {
        let mut out = vec![Bytes::from_static(b"HPEXPIREAT"), key.clone(), Bytes::from(parsed.at_ms.to_string())];
        out.extend(parsed.cond.token().map(|t| Bytes::from_static(t.as_bytes())));
        out.extend(fields_arg(&updated));
        ctx.emit(Effect::command(db, out));
    }
    Ok(Reply::Array(codes))
}

fn hexpire(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    expire_generic(engine, ctx, args, 1000, true, "hexpire")
}

fn hpexpire(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    expire_generic(engine, ctx, args, 1, true, "hpexpire")
}

fn hexpireat(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    expire_generic(engine, ctx, args, 1000, false, "hexpireat")
}

fn hpexpireat(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    expire_generic(engine, ctx, args, 1, false, "hpexpireat")
}

// ---------------------------------------------------------------------------------------------
// Reading times

/// HTTL and kin: per field -2 (none, or expired), -1 (no time), else the time in `unit_ms`
/// units, left (`relative`) or absolute; seconds are rounded up.
fn ttl_generic(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    args: &[Bytes],
    unit_ms: i64,
    relative: bool,
) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let now = ctx.now_ms;
    let hash = read_hash(engine, ctx, key)?;
    let fields = parse_fixed_fields(args)?;
    let base = if relative { now } else { 0 };
    let code = |f: &Bytes| -> i64 {
        let Some(h) = hash else { return -2 };
        if !h.contains_key(&f[..]) {
            return -2;
        }
        match h.ttl(f) {
            None => -1,
            Some(t) if t < now => -2,
            Some(t) if unit_ms == 1000 => (t + 999 - base) / 1000,
            Some(t) => t - base,
        }
    };
    Ok(Reply::Array(fields.iter().map(|f| Reply::Integer(code(f))).collect()))
}

fn httl(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, 1000, true)
}

fn hpttl(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, 1, true)
}

fn hexpiretime(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, 1000, false)
}

fn hpexpiretime(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, 1, false)
}

fn hpersist(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let (db, now) = (ctx.db, ctx.now_ms);
    let exists = existing_hash(engine, ctx, key)?.is_some();
    let fields = parse_fixed_fields(args)?;
    let fnow = engine.field_now(now);
    let Some((hash, _)) = existing_hash(engine, ctx, key)?.filter(|_| exists) else {
        return Ok(Reply::Array(fields.iter().map(|_| Reply::Integer(-2)).collect()));
    };
    let mut persisted = Vec::new();
    let codes = fields
        .iter()
        .map(|f| {
            let code = match hash.ttl(f) {
                _ if !hash.contains_key(&f[..]) => -2,
                None => -1,
                Some(t) if t < fnow => -2,
                Some(_) => {
                    hash.set_ttl(f, None);
                    persisted.push(&f[..]);
                    1
                }
            };
            Reply::Integer(code)
        })
        .collect();
    if !persisted.is_empty() {
        engine.modified(db, key, KeyEvent::HPersist);
        engine.attach_subkeys(persisted);
        // The index keeps the hash under its old time, as Redis' does (INFO `subexpiry`
        // still counts it): the expiry cycle drops it when that time comes.
    }
    Ok(Reply::Array(codes))
}

// ---------------------------------------------------------------------------------------------
// HGETEX / HSETEX

fn hgetex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let (db, now) = (ctx.db, ctx.now_ms);
    let exists = existing_hash(engine, ctx, key)?.is_some();
    let parsed = parse_ex(args, now, false, "hgetex")?;
    let fields = parsed.items;
    // Never logged as itself: what it changed is logged as HDEL / HPEXPIREAT / HPERSIST.
    ctx.explicit();
    if !exists {
        return Ok(Reply::Array(fields.iter().map(|_| Reply::Null).collect()));
    }
    let expired = engine.expire_fields_lazily(db, key, fields.iter().map(|f| &f[..]), now);
    let delete_now = matches!(parsed.expiry, Expiry::At(at, _) if deletes_now(engine, at, now));
    let fnow = engine.field_now(now);
    let cfg = engine.config.object;
    let Some((hash, meta)) = existing_hash(engine, ctx, key)? else { return Err(CmdError::WRONGTYPE) };
    let (mut updated, mut deleted) = (Vec::new(), Vec::new());
    let mut values = Vec::with_capacity(fields.len());
    for f in fields {
        let value = hash.get_live(f, fnow).map(Bytes::copy_from_slice);
        if value.is_some() {
            let code = match parsed.expiry {
                Expiry::At(at, _) => set_time(hash, f, Some(at), Cond::Always, delete_now),
                Expiry::Persist => set_time(hash, f, None, Cond::Always, false),
                _ => SetTime::NotMet,
            };
            match code {
                SetTime::Set => updated.push(f.clone()),
                SetTime::Deleted => deleted.push(f.clone()),
                _ => {}
            }
        }
        values.push(value.map_or(Reply::Null, Reply::Bulk));
    }
    if matches!(parsed.expiry, Expiry::At(..)) && !updated.is_empty() {
        hash_field_timed(meta, hash, &cfg);
    }
    if !expired.is_empty() {
        engine.record_event(db, key, KeyEvent::HExpired);
        engine.attach_subkeys(expired.iter().map(|f| &f[..]));
    }
    if !deleted.is_empty() {
        engine.fields_removed(db, key, &deleted, false);
    }
    if !updated.is_empty() {
        let (event, mut out) = match parsed.expiry {
            Expiry::At(at, _) => {
                (KeyEvent::HExpire, vec![Bytes::from_static(b"HPEXPIREAT"), key.clone(), Bytes::from(at.to_string())])
            }
            _ => (KeyEvent::HPersist, vec![Bytes::from_static(b"HPERSIST"), key.clone()]),
        };
        engine.modified(db, key, event);
        engine.attach_subkeys(updated.iter().map(|f| &f[..]));
        out.extend(fields_arg(fields));
        ctx.emit(Effect::command(db, out));
    } else if !deleted.is_empty() {
        engine.modified(db, key, KeyEvent::HDel);
        engine.attach_subkeys(deleted.iter().map(|f| &f[..]));
    } else if !expired.is_empty() {
        engine.watch.touch(db, key);
    }
    if parsed.expiry != Expiry::Persist {
        engine.sync_field_expiry(db, key);
    }
    delete_if_empty(engine, db, key);
    Ok(Reply::Array(values))
}

fn hsetex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let (db, now) = (ctx.db, ctx.now_ms);
    let parsed = parse_ex(args, now, true, "hsetex")?;
    let pairs: Vec<(&Bytes, &Bytes)> =
        parsed.items.chunks_exact(2).filter_map(|c| Some((c.first()?, c.get(1)?))).collect();
    let exists = existing_hash(engine, ctx, key)?.is_some();
    ctx.explicit();
    if !exists && parsed.exist == Exist::All {
        return Ok(Reply::Integer(0));
    }
    // FNX / FXX: the fields are looked up in order (removing expired ones) until the answer
    // is known.
    let mut expired = Vec::new();
    let mut condition_met = true;
    if exists && parsed.exist != Exist::Any {
        let mut found = 0;
        for (f, _) in &pairs {
            expired.extend(engine.expire_fields_lazily(db, key, [&f[..]], now));
            let present = matches!(engine.db(db).get_raw(key).map(|e| &e.value),
                Some(Value::Hash(h)) if h.get_live(f, engine.field_now(now)).is_some());
            found += usize::from(present);
            if (parsed.exist == Exist::All && !present) || (parsed.exist == Exist::None && present) {
                break;
            }
        }
        condition_met = match parsed.exist {
            Exist::All => found == pairs.len(),
            Exist::None => found == 0,
            Exist::Any => true,
        };
    }
    if !condition_met {
        if !expired.is_empty() {
            engine.modified(db, key, KeyEvent::HExpired);
            engine.attach_subkeys(expired.iter().map(|f| &f[..]));
            delete_if_empty(engine, db, key);
        }
        return Ok(Reply::Integer(0));
    }
    let delete_now = matches!(parsed.expiry, Expiry::At(at, _) if deletes_now(engine, at, now));
    let cfg = engine.config.object;
    let (hash, meta) = write_hash(engine, ctx, key)?;
    hash_before_set(meta, hash, &pairs, &cfg);
    let (mut updated, mut deleted) = (Vec::new(), Vec::new());
    for (f, v) in &pairs {
        match parsed.expiry {
            Expiry::At(..) | Expiry::KeepTtl => hash.insert_keep_ttl(owned(f), owned(v)),
            _ => hash.insert(owned(f), owned(v)),
        };
        if let Expiry::At(at, _) = parsed.expiry {
            match set_time(hash, f, Some(at), Cond::Always, delete_now) {
                SetTime::Set => updated.push((*f).clone()),
                SetTime::Deleted => deleted.push((*f).clone()),
                _ => {}
            }
        }
    }
    crate::types::object::encoding::hash_after_set(meta, hash, 0, 0, &cfg);
    if !updated.is_empty() {
        hash_field_timed(meta, hash, &cfg);
    }
    if !expired.is_empty() {
        engine.record_event(db, key, KeyEvent::HExpired);
        engine.attach_subkeys(expired.iter().map(|f| &f[..]));
    }
    engine.modified(db, key, KeyEvent::HSet);
    engine.attach_subkeys(pairs.iter().map(|(f, _)| &f[..]));
    if !deleted.is_empty() {
        engine.fields_removed(db, key, &deleted, false);
        engine.record_event(db, key, KeyEvent::HDel);
        engine.attach_subkeys(deleted.iter().map(|f| &f[..]));
    } else if !updated.is_empty() {
        engine.record_event(db, key, KeyEvent::HExpire);
        engine.attach_subkeys(updated.iter().map(|f| &f[..]));
    }
    engine.sync_field_expiry(db, key);
    delete_if_empty(engine, db, key);
    if deleted.is_empty() {
        let mut out = vec![Bytes::from_static(b"HSETEX"), key.clone()];
        match parsed.exist {
            Exist::None => out.push(Bytes::from_static(b"FNX")),
            Exist::All => out.push(Bytes::from_static(b"FXX")),
            Exist::Any => {}
        }
        match parsed.expiry {
            Expiry::At(at, _) => out.extend([Bytes::from_static(b"PXAT"), Bytes::from(at.to_string())]),
            Expiry::KeepTtl => out.push(Bytes::from_static(b"KEEPTTL")),
            _ => {}
        }
        out.extend([Bytes::from_static(b"FIELDS"), Bytes::from(pairs.len().to_string())]);
        out.extend(parsed.items.iter().cloned());
        ctx.emit(Effect::command(db, out));
    }
    Ok(Reply::Integer(1))
}

#[cfg(test)]
mod tests;
