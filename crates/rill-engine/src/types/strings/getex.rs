//! GETEX: read a string and change its expiry in the same step. O(1).
//!
//! Redis behaviours we match on purpose:
//! - The options are checked for syntax first (EX/PX/EXAT/PXAT/PERSIST exclude each other, but
//!   one may repeat), then the key is looked up, and only then is the time parsed: so
//!   `GETEX missing EX abc` replies nil and `GETEX <list> EX abc` WRONGTYPE.
//! - Times follow SET's rules (`ERR invalid expire time in 'getex' command`); an absolute time
//!   already past deletes the key after replying its value.
//! - Without an option GETEX is a plain read; PERSIST on a key without a TTL is not a write.

use super::{read_str, set_expire_time};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::{arg, delete_key, is_token};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `GETEX key [EX s | PX ms | EXAT unix-s | PXAT unix-ms | PERSIST]`
pub const GETEX: CommandSpec = CommandSpec {
    name: "getex",
    arity: -2,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@string", "@fast"],
    key_specs: &[key_at(1, &["RW", "ACCESS", "UPDATE"])],
    group: "string",
    summary: "Returns the string at a key and optionally sets or removes its expiry.",
    since: "6.2.0",
    syntax: "key:key [expiration@(EX seconds:integer | PX milliseconds:integer | \
             EXAT unix-time-seconds:unix-time | PXAT unix-time-milliseconds:unix-time | \
             PERSIST)]",
    ..CommandSpec::of(Handler::Engine(getex))
};

/// The expiry change GETEX asks for, before its time is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpiryChange<'a> {
    Keep,
    Persist,
    /// A time: the raw number, whether it is in seconds, whether it is absolute.
    Set {
        raw: &'a [u8],
        seconds: bool,
        absolute: bool,
    },
}

/// The option syntax only (the number is parsed after the key lookup, see the module doc).
fn parse_options(args: &[Bytes]) -> Result<ExpiryChange<'_>, CmdError> {
    const TIMED: [(&str, bool, bool); 4] =
        [("EX", true, false), ("PX", false, false), ("EXAT", true, true), ("PXAT", false, true)];
    let mut change = ExpiryChange::Keep;
    let mut i = 2;
    while let Some(opt) = args.get(i) {
        let timed = TIMED.iter().find(|(t, _, _)| is_token(opt, t));
        match (timed, args.get(i + 1)) {
            (Some(&(_, seconds, absolute)), Some(raw)) => {
                // The same option may repeat (the last wins); a different one is an error.
                let same = |s: bool, a: bool| seconds == s && absolute == a;
                match change {
                    ExpiryChange::Keep => {}
                    ExpiryChange::Set { seconds: s, absolute: a, .. } if same(s, a) => {}
                    _ => return Err(CmdError::SYNTAX),
                }
                change = ExpiryChange::Set { raw, seconds, absolute };
                i += 2;
            }
            _ if is_token(opt, "PERSIST") && matches!(change, ExpiryChange::Keep | ExpiryChange::Persist) => {
                change = ExpiryChange::Persist;
                i += 1;
            }
            _ => return Err(CmdError::SYNTAX),
        }
    }
    Ok(change)
}

fn getex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let change = parse_options(args)?;
    let Some(value) = read_str(engine, ctx, key)? else {
        return Ok(Reply::Null);
    };
    match change {
        ExpiryChange::Keep => {}
        ExpiryChange::Persist => {
            let had_ttl = engine.lookup(ctx.db, key, ctx.now_ms).is_some_and(|e| e.expire_at_ms().is_some());
            if had_ttl {
                engine.set_expire(ctx.db, key, None);
                engine.modified(ctx.db, key, KeyEvent::Persist);
            }
        }
        ExpiryChange::Set { raw, seconds, absolute } => {
            let at = set_expire_time("getex", raw, seconds, absolute, ctx.now_ms)?;
            if engine.expired_on_write(at, ctx.now_ms) {
                delete_key(engine, ctx.db, key);
            } else {
                engine.set_expire(ctx.db, key, Some(at));
                engine.modified(ctx.db, key, KeyEvent::Expire);
            }
        }
    }
    Ok(Reply::Bulk(value))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    #[test]
    fn getex_changes_ttl() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "v"]);
        assert_eq!(h.run(&["GETEX", "k"]), bulk("v"));
        assert_eq!(h.run(&["TTL", "k"]), int(-1));
        assert_eq!(h.run(&["GETEX", "k", "EX", "10", "EX", "100"]), bulk("v"));
        assert_eq!(h.run(&["TTL", "k"]), int(100));
        assert_eq!(h.run(&["GETEX", "k", "PERSIST", "PERSIST"]), bulk("v"));
        assert_eq!(h.run(&["TTL", "k"]), int(-1));
        let pxat = (h.now_ms + 5000).to_string();
        assert_eq!(h.run(&["GETEX", "k", "PXAT", &pxat]), bulk("v"));
        assert_eq!(h.run(&["PTTL", "k"]), int(5000));
        assert_eq!(h.run(&["GETEX", "k", "PXAT", "1"]), bulk("v"));
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
    }

    #[test]
    fn getex_error_order() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "v"]);
        h.run(&["RPUSH", "l", "a"]);
        let invalid = err("ERR invalid expire time in 'getex' command");
        assert_eq!(h.run(&["GETEX", "k", "EX", "0"]), invalid);
        assert_eq!(h.run(&["GETEX", "k", "EXAT", "9223372036854775807"]), invalid);
        assert_eq!(h.run(&["GETEX", "k", "PX", "9223372036854775807"]), invalid);
        assert_eq!(h.run(&["GETEX", "k", "EX", "10", "PX", "10"]), err("ERR syntax error"));
        assert_eq!(h.run(&["GETEX", "k", "EX", "10", "PERSIST"]), err("ERR syntax error"));
        assert_eq!(h.run(&["GETEX", "k", "EX"]), err("ERR syntax error"));
        assert_eq!(h.run(&["GETEX", "missing", "FOO"]), err("ERR syntax error"));
        // The time is parsed after the lookup.
        assert_eq!(h.run(&["GETEX", "missing", "EX", "x"]), Reply::Null);
        assert_eq!(
            h.run(&["GETEX", "l", "EX", "x"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
        assert_eq!(h.run(&["GETEX", "k", "EX", "x"]), err("ERR value is not an integer or out of range"));
        assert_eq!(h.run(&["TTL", "k"]), int(-1));
    }
}
