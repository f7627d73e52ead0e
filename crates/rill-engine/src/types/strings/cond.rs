//! Redis 8.4's compare-and-set family: DIGEST, DELEX and MSETEX (SET's IFEQ / IFNE / IFDEQ /
//! IFDNE live with SET in the parent module and use [`digest`] from here).
//!
//! - DIGEST answers the XXH3-64 hash of a string as 16 lower-case hex digits (leading zeros
//!   kept); a digest given to IFDEQ/IFDNE is compared without regard to case and must be exactly
//!   16 characters (`ERR must be exactly 16 hexadecimal characters`), checked only when a
//!   string is there to compare with. Integers are hashed as their decimal text, which is how
//!   rill stores them.
//! - DELEX without a condition is DEL of one key. With one, a missing key answers 0 before the
//!   condition is even read, another type is `ERR Key should be of string type if conditions
//!   are specified`, an unknown condition `ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or
//!   IFDNE`; any other argument count is an arity error.
//! - MSETEX numkeys k v ... [NX | XX] [EX | PX | EXAT | PXAT t | KEEPTTL]: numkeys in
//!   1..=2^31-1 (`ERR invalid numkeys value`), enough pairs (`ERR wrong number of key-value
//!   pairs`), options after the pairs in any order. NX (XX) sets nothing and answers 0 if any
//!   key exists (is missing); otherwise every key is set, each getting the expiry (or keeping
//!   its own with KEEPTTL, or losing it), and the answer is 1. Events per key: `expire` then
//!   `set`, in Redis' order.
//!
//! Costs: DIGEST and the digest conditions O(N) in the string's length; IFEQ/IFNE O(N) in the
//! shorter of the two; MSETEX O(K) in its keys.

use super::{set_expire_time, Compare, StrSlot};
use crate::command::{key_at, BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::types::{arg, arity_error, delete_key, is_token, owned};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine, KeyEvent, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// Length of a digest in hex digits.
const DIGEST_HEX: usize = 16;

/// `DIGEST key`.
pub(super) const DIGEST: CommandSpec = CommandSpec {
    name: "digest",
    arity: 2,
    flags: Flags::READONLY.and(Flags::FAST),
    acl: &["@read", "@string", "@fast"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    summary: "Returns the XXH3-64 digest of a string as 16 hex digits, or nil.",
    since: "8.4.0",
    complexity: "O(N) in the length of the string.",
    syntax: "key:key",
    ..super::one_key(Handler::Engine(digest_cmd))
};

/// `DELEX key [IFEQ v | IFNE v | IFDEQ d | IFDNE d]`.
pub(super) const DELEX: CommandSpec = CommandSpec {
    name: "delex",
    arity: -2,
    flags: Flags::WRITE.and(Flags::FAST),
    acl: &["@write", "@string", "@fast"],
    key_specs: &[key_at(1, &["RW", "DELETE", "VARIABLE_FLAGS"])],
    key_flags: Some(delex_key_flags),
    summary: "Deletes a key, or only a string whose value (or digest) equals/differs from one given.",
    since: "8.4.0",
    complexity: "O(1) with no condition or IFEQ/IFNE; O(N) in the string's length for IFDEQ/IFDNE.",
    syntax: "key:key [condition@(IFEQ ifeq-value | IFNE ifne-value | IFDEQ ifdeq-digest | \
             IFDNE ifdne-digest)]",
    ..super::one_key(Handler::Engine(delex))
};

/// Whether `word` names one of the conditions (IFEQ, IFNE, IFDEQ, IFDNE), in any case.
pub(super) fn is_condition(word: &[u8]) -> bool {
    [&b"ifeq"[..], b"ifne", b"ifdeq", b"ifdne"].iter().any(|c| word.eq_ignore_ascii_case(c))
}

/// DELEX's key flags for a call: it removes the key (`RM delete`), or reads it first when a
/// condition compares it (`RW delete`).
fn delex_key_flags(args: &[Bytes]) -> &'static [&'static str] {
    if args.get(2..).unwrap_or(&[]).iter().any(|a| is_condition(a)) {
        &["RW", "DELETE"]
    } else {
        &["RM", "DELETE"]
    }
}

/// `MSETEX numkeys key value ... [NX | XX] [EX s | PX ms | EXAT t | PXAT t | KEEPTTL]`.
pub(super) const MSETEX: CommandSpec = CommandSpec {
    name: "msetex",
    arity: -4,
    flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::MOVABLEKEYS),
    first_key: 0,
    last_key: 0,
    step: 0,
    acl: &["@write", "@string", "@slow"],
    tips: &["request_policy:multi_shard", "response_policy:all_succeeded"],
    key_specs: &[KeySpec {
        flags: &["OW", "UPDATE"],
        begin: BeginSearch::Index(1),
        find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 2 },
        notes: "",
    }],
    summary: "Stores several strings with one shared expiry, optionally only if none / all exist.",
    since: "8.4.0",
    complexity: "O(N) in the number of keys.",
    syntax: "numkeys:integer data@(key:key value) ... [condition@(NX | XX)] \
             [expiration@(EX seconds:integer | PX milliseconds:integer | \
             EXAT unix-time-seconds:unix-time | PXAT unix-time-milliseconds:unix-time | KEEPTTL)]",
    ..super::one_key(Handler::Engine(msetex))
};

/// The XXH3-64 digest of `value` as 16 lower-case hex digits.
pub(super) fn digest(value: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(value))
}

/// A digest argument, refused unless it is exactly 16 characters long (its digits are not
/// checked: a non-hex one simply never matches).
pub(super) fn checked_digest(raw: &[u8]) -> Result<&[u8], CmdError> {
    if raw.len() == DIGEST_HEX {
        Ok(raw)
    } else {
        Err(CmdError::full("ERR must be exactly 16 hexadecimal characters"))
    }
}

fn digest_cmd(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    Ok(match super::str_slot(engine, ctx, arg(args, 1)?) {
        StrSlot::Missing => Reply::Null,
        StrSlot::Str(s) => Reply::Bulk(Bytes::from(digest(&s))),
        StrSlot::OtherType => return Err(CmdError::WRONGTYPE),
    })
}

fn delex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    if args.len() == 2 {
        // DEL of one key: an expired one is removed by the lookup and does not count.
        let deleted = engine.lookup(ctx.db, key, ctx.now_ms).is_some() && delete_key(engine, ctx.db, key);
        return Ok(Reply::Integer(i64::from(deleted)));
    }
    if args.len() != 4 {
        return Err(arity_error(args));
    }
    let current = match super::str_slot(engine, ctx, key) {
        StrSlot::Missing => return Ok(Reply::Integer(0)),
        StrSlot::Str(s) => s,
        StrSlot::OtherType => {
            return Err(CmdError::full("ERR Key should be of string type if conditions are specified"))
        }
    };
    let Some(kind) = Compare::parse(arg(args, 2)?) else {
        return Err(CmdError::full("ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE"));
    };
    let deleted = kind.holds(&current, arg(args, 3)?)? && delete_key(engine, ctx.db, key);
    Ok(Reply::Integer(i64::from(deleted)))
}

/// MSETEX's options after the pairs.
#[derive(Debug, Default)]
struct MsetexOptions {
    nx: bool,
    xx: bool,
    keep_ttl: bool,
    /// The expiry option (its word, upper-cased) and its value.
    expiry: Option<(&'static str, Bytes)>,
}

fn parse_msetex_options(opts: &[Bytes]) -> Result<MsetexOptions, CmdError> {
    let mut o = MsetexOptions::default();
    let mut i = 0;
    while let Some(opt) = opts.get(i) {
        let timed = ["EX", "PX", "EXAT", "PXAT"].into_iter().find(|t| is_token(opt, t));
        if is_token(opt, "NX") && !o.xx {
            o.nx = true;
        } else if is_token(opt, "XX") && !o.nx {
            o.xx = true;
        } else if is_token(opt, "KEEPTTL") && o.expiry.is_none() {
            o.keep_ttl = true;
        } else if let (Some(word), Some(value)) = (timed, opts.get(i + 1)) {
            // A different expiry option (or KEEPTTL) given before conflicts; the same one repeats.
            if o.keep_ttl || o.expiry.as_ref().is_some_and(|(w, _)| *w != word) {
                return Err(CmdError::SYNTAX);
            }
            o.expiry = Some((word, value.clone()));
            i += 1;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    Ok(o)
}

fn msetex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let count = parse_i64(arg(args, 1)?)
        .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
        .ok_or(CmdError::full("ERR invalid numkeys value"))?;
    let pairs_end = usize::try_from(count).ok().and_then(|n| n.checked_mul(2)).and_then(|n| n.checked_add(2));
    let Some(pairs_end) = pairs_end.filter(|end| *end <= args.len()) else {
        return Err(CmdError::full("ERR wrong number of key-value pairs"));
    };
    let opts = parse_msetex_options(args.get(pairs_end..).unwrap_or_default())?;
    let expire_at_ms = match &opts.expiry {
        None => None,
        Some((word, raw)) => {
            let seconds = matches!(*word, "EX" | "EXAT");
            let absolute = matches!(*word, "EXAT" | "PXAT");
            Some(set_expire_time("msetex", raw, seconds, absolute, ctx.now_ms)?)
        }
    };
    let pairs: Vec<(&Bytes, &Bytes)> = args
        .get(2..pairs_end)
        .unwrap_or_default()
        .chunks_exact(2)
        .filter_map(|c| Some((c.first()?, c.get(1)?)))
        .collect();
    if opts.nx || opts.xx {
        for (key, _) in &pairs {
            // A write lookup: an expired key is removed (and logged) here.
            let exists = engine.lookup(ctx.db, key, ctx.now_ms).is_some();
            if exists == opts.nx {
                return Ok(Reply::Integer(0));
            }
        }
    }
    for (key, value) in pairs {
        engine.expire_if_needed(ctx.db, key, ctx.now_ms);
        engine.set_key(ctx.db, key, Value::Str(owned(value)), opts.keep_ttl);
        if let Some(at) = expire_at_ms {
            // A time already past is stored as it is (Redis does not check it here): the next
            // lookup or the active cycle expires the key.
            engine.set_expire(ctx.db, key, Some(at));
            engine.modified(ctx.db, key, KeyEvent::Expire);
            engine.record_event(ctx.db, key, KeyEvent::Set);
        } else {
            engine.modified(ctx.db, key, KeyEvent::Set);
        }
    }
    Ok(Reply::Integer(1))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const BAD_DIGEST: &str = "ERR must be exactly 16 hexadecimal characters";

    #[test]
    fn digest_is_xxh3_in_sixteen_hex_digits() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["DIGEST", "k"]), Reply::Null);
        h.run(&["SET", "k", ""]);
        // XXH3-64 of the empty input.
        assert_eq!(h.run(&["DIGEST", "k"]), bulk("2d06800538d394c2"));
        h.run(&["SET", "k", "1"]);
        let one = h.run(&["DIGEST", "k"]);
        h.run(&["SET", "j", "1"]);
        assert_eq!(h.run(&["DIGEST", "j"]), one);
        h.run(&["RPUSH", "l", "a"]);
        assert_eq!(h.run(&["DIGEST", "l"]), err(WRONGTYPE));
        assert_eq!(h.run(&["DIGEST"]), err("ERR wrong number of arguments for 'digest' command"));
    }

    fn digest_of(h: &mut Harness, key: &str) -> String {
        match h.run(&["DIGEST", key]) {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn set_compares_value_or_digest() {
        let mut h = Harness::new();
        // IFEQ / IFDEQ need the key; IFNE / IFDNE set a missing one.
        assert_eq!(h.run(&["SET", "k", "v", "IFEQ", "x"]), Reply::Null);
        assert_eq!(h.run(&["SET", "k", "v", "IFDEQ", "short"]), Reply::Null);
        assert_eq!(h.run(&["SET", "k", "v", "IFNE", "x"]), ok());
        assert_eq!(h.run(&["SET", "k", "w", "IFEQ", "x"]), Reply::Null);
        assert_eq!(h.run(&["SET", "k", "w", "IFEQ", "v", "GET"]), bulk("v"));
        assert_eq!(h.run(&["SET", "k", "x", "IFNE", "w"]), Reply::Null);
        let d = digest_of(&mut h, "k");
        assert_eq!(h.run(&["SET", "k", "y", "IFDNE", &d]), Reply::Null);
        assert_eq!(h.run(&["SET", "k", "y", "IFDEQ", &d.to_uppercase(), "PX", "5000"]), ok());
        assert_eq!(h.run(&["PTTL", "k"]), int(5000));
        assert_eq!(h.run(&["SET", "k", "z", "IFDEQ", &d[1..]]), err(BAD_DIGEST));
        assert_eq!(h.run(&["SET", "k", "z", "IFDNE", ""]), err(BAD_DIGEST));
        // Another type: WRONGTYPE once the key exists.
        h.run(&["RPUSH", "l", "a"]);
        assert_eq!(h.run(&["SET", "l", "v", "IFEQ", "a"]), err(WRONGTYPE));
        assert_eq!(h.run(&["SET", "l", "v", "IFNE", "a"]), err(WRONGTYPE));
        // Parsing: one comparison, refused after NX/XX; NX/XX after one parse.
        assert_eq!(h.run(&["SET", "k", "v", "NX", "IFEQ", "a"]), err("ERR syntax error"));
        assert_eq!(h.run(&["SET", "k", "v", "IFEQ", "a", "IFNE", "b"]), err("ERR syntax error"));
        assert_eq!(h.run(&["SET", "k", "v", "IFEQ"]), err("ERR syntax error"));
        assert_eq!(h.run(&["SET", "k", "v", "IFEQ", "y", "XX"]), ok());
        assert_eq!(h.run(&["SET", "k", "w", "ifeq", "x", "ifeq", "v"]), ok());
        assert_eq!(h.run(&["GET", "k"]), bulk("w"));
    }

    #[test]
    fn delex_conditions() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["DELEX", "k"]), int(0));
        assert_eq!(h.run(&["DELEX", "k", "BOGUS", "x"]), int(0));
        assert_eq!(h.run(&["DELEX", "k", "IFEQ"]), err("ERR wrong number of arguments for 'delex' command"));
        h.run(&["SET", "k", "v"]);
        assert_eq!(h.run(&["DELEX", "k", "BOGUS", "x"]), err("ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE"));
        assert_eq!(h.run(&["DELEX", "k", "IFEQ", "x"]), int(0));
        assert_eq!(h.run(&["DELEX", "k", "IFNE", "v"]), int(0));
        assert_eq!(h.run(&["DELEX", "k", "IFDEQ", "x"]), err(BAD_DIGEST));
        let d = digest_of(&mut h, "k");
        assert_eq!(h.run(&["DELEX", "k", "IFDNE", &d]), int(0));
        assert_eq!(h.run(&["DELEX", "k", "ifdeq", &d]), int(1));
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
        h.run(&["SET", "k", "v"]);
        assert_eq!(h.run(&["DELEX", "k", "IFEQ", "v"]), int(1));
        h.run(&["RPUSH", "l", "a"]);
        assert_eq!(
            h.run(&["DELEX", "l", "IFEQ", "a"]),
            err("ERR Key should be of string type if conditions are specified")
        );
        assert_eq!(h.run(&["DELEX", "l"]), int(1));
    }

    #[test]
    fn msetex_options_and_conditions() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["MSETEX", "x", "k", "v"]), err("ERR invalid numkeys value"));
        assert_eq!(h.run(&["MSETEX", "0", "k", "v"]), err("ERR invalid numkeys value"));
        assert_eq!(h.run(&["MSETEX", "2147483648", "k", "v"]), err("ERR invalid numkeys value"));
        assert_eq!(h.run(&["MSETEX", "2147483647", "k", "v"]), err("ERR wrong number of key-value pairs"));
        assert_eq!(h.run(&["MSETEX", "2", "a", "1", "b"]), err("ERR wrong number of key-value pairs"));
        for bad in [
            &["MSETEX", "1", "a", "1", "FOO"][..],
            &["MSETEX", "1", "a", "1", "NX", "XX"],
            &["MSETEX", "1", "a", "1", "EX", "1", "PX", "1"],
            &["MSETEX", "1", "a", "1", "KEEPTTL", "EX", "1"],
            &["MSETEX", "1", "a", "1", "EX"],
            &["MSETEX", "1", "a", "1", "GET"],
        ] {
            assert_eq!(h.run(bad), err("ERR syntax error"), "{bad:?}");
        }
        assert_eq!(h.run(&["MSETEX", "1", "a", "1", "EX", "0"]), err("ERR invalid expire time in 'msetex' command"));
        assert_eq!(h.run(&["MSETEX", "2", "a", "1", "b", "2", "EX", "10", "NX"]), int(1));
        assert_eq!(h.run(&["TTL", "b"]), int(10));
        assert_eq!(h.run(&["MSETEX", "2", "a", "3", "c", "4", "NX"]), int(0));
        assert_eq!(h.run(&["MSETEX", "2", "a", "3", "c", "4", "XX"]), int(0));
        assert_eq!(h.run(&["EXISTS", "c"]), int(0));
        assert_eq!(h.run(&["MSETEX", "1", "a", "5", "KEEPTTL", "XX"]), int(1));
        assert_eq!(h.run(&["TTL", "a"]), int(10));
        // No expiry option: the keys lose theirs, as MSET.
        assert_eq!(h.run(&["MSETEX", "1", "a", "6"]), int(1));
        assert_eq!(h.run(&["TTL", "a"]), int(-1));
        assert_eq!(h.run(&["MGET", "a", "b"]), Reply::Array(vec![bulk("6"), bulk("2")]));
        // A past absolute time: stored, gone at the next lookup.
        assert_eq!(h.run(&["MSETEX", "1", "a", "7", "PXAT", "1"]), int(1));
        assert_eq!(h.run(&["EXISTS", "a"]), int(0));
    }

    #[test]
    fn substr_is_getrange() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "abcde"]);
        assert_eq!(h.run(&["SUBSTR", "k", "0", "3"]), bulk("abcd"));
        assert_eq!(h.run(&["SUBSTR", "k", "-4", "-1"]), bulk("bcde"));
        assert_eq!(h.run(&["SUBSTR", "k", "-1", "-3"]), bulk(""));
        assert_eq!(h.run(&["SUBSTR", "nokey", "0", "1"]), bulk(""));
    }
}
