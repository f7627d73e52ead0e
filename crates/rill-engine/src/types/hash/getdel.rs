//! HGETDEL (Redis 8.0): return the values of some fields and delete them. O(N) in the fields
//! named.
//!
//! Redis behaviours we match on purpose:
//! - A key of another type is refused first (WRONGTYPE); then the argument shape is checked,
//!   missing key or not: `FIELDS` must come right after the key
//!   (`ERR Mandatory argument FIELDS is missing or not at the right position`), `numfields`
//!   must be a positive integer (`ERR Number of fields must be a positive integer`) equal to
//!   the number of fields that follow (``ERR The `numfields` parameter must match the number
//!   of arguments``).
//! - One reply per field named: its value, or nil when absent (a field named twice is nil the
//!   second time). A missing key gives all nils.
//! - Deleting the last field deletes the key.
//! - A named field whose expiry time has passed is removed as expired (`hexpired`, logged as
//!   `HDEL`) and replies nil.

use super::{hash_cmd, read_hash};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::arg;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `HGETDEL key FIELDS numfields field [field ...]`
pub const HGETDEL: CommandSpec = CommandSpec {
    name: "hgetdel",
    arity: -5,
    flags: Flags::WRITE.and(Flags::FAST),
    acl: &["@write", "@hash", "@fast"],
    key_specs: &[key_at(1, &["RW", "ACCESS", "DELETE"])],
    summary: "Returns the values of hash fields and deletes those fields.",
    since: "8.0.0",
    complexity: "O(N) in the number of fields named.",
    syntax: "key:key fields@ FIELDS (numfields:integer field ...)",
    ..hash_cmd(Handler::Engine(hgetdel))
};

fn hgetdel(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let missing = read_hash(engine, ctx, key)?.is_none();
    let fields = super::expire::parse_fixed_fields(args)?;
    if missing {
        return Ok(Reply::Array(fields.iter().map(|_| Reply::Null).collect()));
    }
    // Fields whose time has passed are removed as expired first (`hexpired`), then count as
    // missing.
    let expired = engine.expire_fields_lazily(ctx.db, key, fields.iter().map(|f| &f[..]), ctx.now_ms);
    let now = engine.field_now(ctx.now_ms);
    let Some(Value::Hash(hash)) = engine.lookup_mut(ctx.db, key, ctx.now_ms).map(|e| &mut e.value) else {
        return Err(CmdError::WRONGTYPE);
    };
    let values: Vec<Option<Bytes>> =
        fields.iter().map(|f| if hash.is_expired(f, now) { None } else { hash.swap_remove(&f[..]) }).collect();
    let now_empty = hash.is_empty();
    let deleted = fields.iter().zip(&values).filter(|(_, v)| v.is_some()).map(|(f, _)| &f[..]);
    if !expired.is_empty() {
        engine.record_event(ctx.db, key, KeyEvent::HExpired);
        engine.attach_subkeys(expired.iter().map(|f| &f[..]));
    }
    let any_deleted = values.iter().any(Option::is_some);
    if any_deleted {
        engine.modified(ctx.db, key, KeyEvent::HDel);
        engine.attach_subkeys(deleted);
    }
    if now_empty {
        engine.remove(ctx.db, key);
        engine.record_event(ctx.db, key, KeyEvent::Del);
        engine.signal_ready(ctx.db, key);
    } else {
        engine.sync_field_expiry(ctx.db, key);
    }
    Ok(Reply::Array(values.into_iter().map(|v| v.map_or(Reply::Null, Reply::Bulk)).collect()))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    #[test]
    fn hgetdel_returns_and_deletes() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["HGETDEL", "missing", "FIELDS", "2", "a", "b"]),
            Reply::Array(vec![Reply::Null, Reply::Null])
        );
        h.run(&["HSET", "h", "a", "1", "b", "2"]);
        assert_eq!(h.run(&["HGETDEL", "h", "fields", "2", "a", "a"]), Reply::Array(vec![bulk("1"), Reply::Null]));
        assert_eq!(h.run(&["HLEN", "h"]), int(1));
        assert_eq!(h.run(&["HGETDEL", "h", "FIELDS", "1", "b"]), Reply::Array(vec![bulk("2")]));
        assert_eq!(h.run(&["EXISTS", "h"]), int(0));
    }

    #[test]
    fn hgetdel_errors() {
        let mut h = Harness::new();
        h.run(&["SET", "str", "v"]);
        let positive = err("ERR Number of fields must be a positive integer");
        let mismatch = err("ERR The `numfields` parameter must match the number of arguments");
        assert_eq!(h.run(&["HGETDEL", "missing", "FIELDS", "0", "a"]), positive);
        assert_eq!(h.run(&["HGETDEL", "missing", "FIELDS", "+1", "a"]), positive);
        assert_eq!(h.run(&["HGETDEL", "missing", "FIELDS", "2", "a"]), mismatch);
        assert_eq!(h.run(&["HGETDEL", "missing", "FIELDS", "9223372036854775807", "a"]), mismatch);
        assert_eq!(
            h.run(&["HGETDEL", "missing", "FOO", "1", "a"]),
            err("ERR Mandatory argument FIELDS is missing or not at the right position")
        );
        // A key of another type is refused before the arguments are looked at, as Redis does.
        let wrongtype = err("WRONGTYPE Operation against a key holding the wrong kind of value");
        assert_eq!(h.run(&["HGETDEL", "str", "FIELDS", "1", "a"]), wrongtype);
        assert_eq!(h.run(&["HGETDEL", "str", "FIELDS", "2", "a"]), wrongtype);
        assert_eq!(h.run(&["HGETDEL", "str", "FOO", "1", "a"]), wrongtype);
        assert_eq!(
            h.run(&["HGETDEL", "str", "FIELDS", "0"]),
            err("ERR wrong number of arguments for 'hgetdel' command")
        );
    }
}
