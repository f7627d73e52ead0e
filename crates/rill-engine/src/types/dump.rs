//! DUMP and RESTORE: a key's value as Redis' serialized payload, and back. The byte format is
//! the [`crate::rdb`] codec's; this file is argument parsing, TTL handling and the keyspace
//! writes.
//!
//! Redis behaviours we match on purpose:
//! - RESTORE checks, in this order: options (an unknown one is a syntax error; IDLETIME and FREQ
//!   exclude each other, the second one counting as unknown), an existing key without REPLACE
//!   (`BUSYKEY`), the TTL, the payload's version and checksum, then its contents.
//! - TTL 0 means no expiry; otherwise it is relative ms unless ABSTTL. A TTL already in the
//!   past replies `OK` without creating the key (with REPLACE the old key is still deleted).
//! - IDLETIME sets the key's idle time (OBJECT IDLETIME) unless the `maxmemory-policy` is an LFU
//!   one; FREQ sets its access counter (OBJECT FREQ) only under an LFU policy. Otherwise each
//!   is validated and ignored, as in Redis.

use super::{arg, is_token, owned};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::rdb::{self, LoadContext, RdbError};
use crate::types::stream::NodeLimits;
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// DUMP and RESTORE.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "dump",
        arity: 2,
        flags: Flags::READONLY,
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@read", "@slow"],
        tips: &["nondeterministic_output"],
        key_specs: &[key_at(1, &["RO", "ACCESS"])],
        summary: "Returns the value of a key in Redis' serialized format.",
        since: "2.6.0",
        complexity: "O(M) in the size of the value.",
        syntax: "key:key",
        ..CommandSpec::of(Handler::Engine(dump))
    },
    CommandSpec {
        name: "restore",
        arity: -4,
        flags: Flags::WRITE.and(Flags::DENYOOM),
        first_key: 1,
        last_key: 1,
        step: 1,
        acl: &["@keyspace", "@write", "@slow", "@dangerous"],
        key_specs: &[key_at(1, &["OW", "UPDATE"])],
        summary: "Creates a key from a serialized value produced by DUMP.",
        since: "2.6.0",
        complexity: "O(M) in the size of the payload; a stream rebuilds each of its nodes, O(M log K).",
        syntax: "key:key ttl:integer serialized-value [REPLACE] [ABSTTL] \
                 [IDLETIME seconds:integer] [FREQ frequency:integer]",
        ..CommandSpec::of(Handler::Engine(restore))
    },
];

/// `BUSYKEY Target key name already exists.`
const BUSYKEY: CmdError = CmdError::full("BUSYKEY Target key name already exists.");
/// `ERR Invalid TTL value, must be >= 0`
const BAD_TTL: CmdError = CmdError::full("ERR Invalid TTL value, must be >= 0");
/// `ERR DUMP payload version or checksum are wrong`
const BAD_FOOTER: CmdError = CmdError::full("ERR DUMP payload version or checksum are wrong");
/// `ERR Bad data format`
const BAD_DATA: CmdError = CmdError::full("ERR Bad data format");

/// The one mapping from codec errors to the wire.
fn rdb_error(e: &RdbError) -> CmdError {
    match e {
        RdbError::VersionOrChecksum => BAD_FOOTER,
        RdbError::Truncated
        | RdbError::Corrupt(_)
        | RdbError::UnsupportedType(_)
        | RdbError::DatabaseOutOfRange { .. } => BAD_DATA,
    }
}

fn node_limits(engine: &Engine) -> NodeLimits {
    NodeLimits::new(engine.config.stream_node_max_entries, engine.config.stream_node_max_bytes)
}

/// DUMP key — O(M) in the size of the value.
fn dump(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    match engine.lookup_read(ctx.db, key, ctx.now_ms) {
        None => Ok(Reply::Null),
        Some(entry) => Ok(Reply::Bulk(Bytes::from(rdb::dump(&entry.value, ctx.now_ms)))),
    }
}

/// What MIGRATE sends for `key` of `db`: the time it has left in ms (0: none; at least 1, as
/// Redis sends it) and its DUMP payload. `None` when it is missing or expired. A read lookup:
/// counted in `keyspace_hits` / `keyspace_misses`, as MIGRATE's lookup is in Redis.
pub fn migrate_payload(engine: &mut Engine, db: usize, key: &[u8], now_ms: i64) -> Option<(i64, Vec<u8>)> {
    let entry = engine.lookup_read(db, key, now_ms)?;
    let ttl = match entry.expire_at_ms() {
        Some(at) if at < now_ms => return None,
        Some(at) => (at - now_ms).max(1),
        None => 0,
    };
    Some((ttl, rdb::dump(&entry.value, now_ms)))
}

/// MIGRATE moved `key` of `db` away (its target said OK, and no COPY): deleted as DEL deletes,
/// with its `del` event. False if it was not there.
pub fn migrated_away(engine: &mut Engine, db: usize, key: &[u8]) -> bool {
    super::delete_key(engine, db, key)
}

/// RESTORE's options.
#[derive(Debug, Default)]
struct RestoreOptions {
    replace: bool,
    absttl: bool,
    idletime: Option<i64>,
    freq: Option<u8>,
}

fn parse_options(args: &[Bytes]) -> Result<RestoreOptions, CmdError> {
    let mut opts = RestoreOptions::default();
    let mut i = 4;
    while let Some(opt) = args.get(i) {
        let value = args.get(i + 1);
        if is_token(opt, "REPLACE") {
            opts.replace = true;
        } else if is_token(opt, "ABSTTL") {
            opts.absttl = true;
        } else if is_token(opt, "IDLETIME") && value.is_some() && opts.freq.is_none() {
            let v = value.and_then(|v| parse_i64(v)).ok_or(CmdError::NOT_INTEGER)?;
            if v < 0 {
                return Err(CmdError::full("ERR Invalid IDLETIME value, must be >= 0"));
            }
            opts.idletime = Some(v);
            i += 1;
        } else if is_token(opt, "FREQ") && value.is_some() && opts.idletime.is_none() {
            let v = value.and_then(|v| parse_i64(v)).ok_or(CmdError::NOT_INTEGER)?;
            let v = u8::try_from(v).map_err(|_| CmdError::full("ERR Invalid FREQ value, must be >= 0 and <= 255"))?;
            opts.freq = Some(v);
            i += 1;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    Ok(opts)
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f] — O(M) in the
/// payload size (a stream rebuilds each of its nodes).
fn restore(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let opts = parse_options(args)?;
    let old_type = engine.lookup_mut(ctx.db, key, ctx.now_ms).map(|e| e.value.type_name());
    let exists = old_type.is_some();
    if exists && !opts.replace {
        return Err(BUSYKEY);
    }
    let ttl = parse_i64(arg(args, 2)?).ok_or(CmdError::NOT_INTEGER)?;
    if ttl < 0 {
        return Err(BAD_TTL);
    }
    let load = LoadContext {
        limits: node_limits(engine),
        idmp_duration_secs: engine.config.stream_idmp_duration_secs,
        idmp_max_size: engine.config.stream_idmp_maxsize,
        now_ms: ctx.now_ms,
        // A RESTORE payload comes from a client: Redis' types only.
        rill_streams: false,
    };
    let value = rdb::restore(arg(args, 3)?, &load).map_err(|e| rdb_error(&e))?;
    let expire_at = match ttl {
        0 => None,
        t if opts.absttl => Some(t),
        t => Some(t.saturating_add(ctx.now_ms)),
    };
    if matches!(expire_at, Some(t) if engine.expired_on_write(t, ctx.now_ms)) {
        // Already expired: Redis replies OK, creates nothing, and still deletes what REPLACE
        // would have replaced.
        if exists {
            super::delete_key(engine, ctx.db, key);
        }
        engine.expired_keys += 1;
        return Ok(Reply::ok());
    }
    let key = owned(key);
    let lfu = engine.config.object.lfu;
    if exists {
        // Redis deletes the old key and adds the restored one: `new` (the insert below, an
        // overwrite here, records none), then `restore`.
        engine.record_event(ctx.db, &key, KeyEvent::New);
    }
    let new_type = value.type_name();
    engine.insert(ctx.db, key.clone(), value);
    if let Some(e) = engine.entry_mut(ctx.db, &key) {
        match (opts.idletime, opts.freq) {
            (Some(idle), _) if !lfu => e.meta.set_idle(ctx.now_ms, idle),
            (_, Some(freq)) if lfu => e.meta.set_freq(ctx.now_ms, freq),
            _ => {}
        }
    }
    engine.set_expire(ctx.db, &key, expire_at);
    engine.modified(ctx.db, &key, KeyEvent::Restore);
    // REPLACE of a key that was there: `overwritten` (`type_changed`) after `restore`.
    engine.record_overwrite(ctx.db, &key, old_type, new_type);
    engine.signal_ready(ctx.db, &key);
    Ok(Reply::ok())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests;
