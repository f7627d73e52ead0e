//! `HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]`: iterate over a hash's fields
//! (and values, unless NOVALUES) with a cursor. The walk, the options and the Redis behaviours
//! matched are in [`crate::types::collection_scan`]. A `listpack` hash comes back whole with
//! cursor 0; a `hashtable` one is walked by field position, O(N log COUNT) per call. MATCH
//! applies to the field; the reply is a flat array `field value ...` in RESP3 too. A field
//! whose expiry time has passed is skipped (not removed).

use super::hash_cmd;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::glob::glob_match;
use crate::types::arg;
use crate::types::collection_scan::{cursor_arg, parse_options, reply, step};
use crate::types::object::encoding;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]`
pub const HSCAN: CommandSpec = CommandSpec {
    name: "hscan",
    arity: -3,
    flags: Flags::READONLY,
    acl: &["@read", "@hash", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    summary: "Iterates over the fields (and values) of a hash with a cursor.",
    since: "2.8.0",
    complexity: "O(N log COUNT) per call for a hashtable hash (N its size), O(N) for a small one \
                 returned whole.",
    syntax: "key:key cursor:integer [MATCH pattern:pattern] [COUNT count:integer] [NOVALUES]",
    ..hash_cmd(Handler::Engine(hscan))
};

/// A field and its value.
type Pair<'a> = (&'a [u8], &'a [u8]);

fn hscan(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let cursor = cursor_arg(args)?;
    let options = parse_options(args, true);
    let cfg = engine.config.object;
    let fnow = engine.field_now(ctx.now_ms);
    let Some(entry) = engine.lookup_read(ctx.db, key, ctx.now_ms) else { return Ok(reply(0, vec![])) };
    let Value::Hash(hash) = &entry.value else { return Err(CmdError::WRONGTYPE) };
    let options = options?;
    let (next, pairs): (u64, Vec<Pair>) = if encoding::name(key, entry, &cfg) == "hashtable" {
        step(|| hash.iter(), |(f, _)| *f, hash.len(), cursor, options.count)
    } else {
        (0, hash.iter().collect())
    };
    let per_pair = if options.no_values { 1 } else { 2 };
    let mut out = Vec::with_capacity(pairs.len() * per_pair);
    for (field, value) in pairs {
        if options.pattern.is_some_and(|p| !glob_match(p, field, false)) || hash.is_expired(field, fnow) {
            continue;
        }
        out.push(Reply::Bulk(Bytes::copy_from_slice(field)));
        if !options.no_values {
            out.push(Reply::Bulk(Bytes::copy_from_slice(value)));
        }
    }
    Ok(reply(next, out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;
    use std::collections::HashMap;

    /// The cursor and the elements of one HSCAN reply.
    fn parts(reply: Reply) -> (u64, Vec<String>) {
        let Reply::Array(mut parts) = reply else { panic!("{reply:?}") };
        let Some(Reply::Array(elements)) = parts.pop() else { panic!() };
        let Some(Reply::Bulk(cursor)) = parts.pop() else { panic!() };
        let elements = elements
            .into_iter()
            .map(|m| match m {
                Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        (std::str::from_utf8(&cursor).unwrap().parse().unwrap(), elements)
    }

    #[test]
    fn small_hashes_come_back_whole_with_cursor_zero() {
        let mut h = Harness::new();
        h.run(&["HSET", "h", "a", "1", "b", "2", "ab", "3"]);
        assert_eq!(h.run(&["OBJECT", "ENCODING", "h"]), bulk("listpack"));
        assert_eq!(parts(h.run(&["HSCAN", "h", "99", "COUNT", "1"])).0, 0);
        let (cursor, got) = parts(h.run(&["HSCAN", "h", "0", "MATCH", "a*"]));
        let mut pairs: Vec<_> = got.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
        pairs.sort();
        assert_eq!((cursor, pairs), (0, vec![("a".into(), "1".into()), ("ab".into(), "3".into())]));
        let (_, mut fields) = parts(h.run(&["HSCAN", "h", "0", "NOVALUES"]));
        fields.sort();
        assert_eq!(fields, ["a", "ab", "b"]);
        assert_eq!(parts(h.run(&["HSCAN", "nope", "0", "NOVALUES"])), (0, vec![]));
    }

    #[test]
    fn errors_in_redis_order() {
        let mut h = Harness::new();
        h.run(&["SADD", "set", "a"]);
        h.run(&["HSET", "h", "f", "v"]);
        assert_eq!(h.run(&["HSCAN", "h", "1.5"]), err("ERR invalid cursor"));
        assert_eq!(h.run(&["HSCAN", "set", "0", "BOGUS"]), err(WRONGTYPE));
        assert_eq!(h.run(&["HSCAN", "h", "0", "COUNT", "0"]), err("ERR syntax error"));
        assert_eq!(h.run(&["HSCAN", "h", "0", "NOVALUES", "x"]), err("ERR syntax error"));
        assert_eq!(h.run(&["HSCAN", "h", "0", "MATCH", "*", "NOVALUES"]), Reply::Array(vec![bulk("0"), bulks(&["f"])]));
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

    /// SCAN's guarantee on a big hash changed between calls, values included.
    #[test]
    fn fields_present_throughout_are_returned_with_their_values() {
        let mut h = Harness::new();
        for i in 0..1500 {
            h.run(&["HSET", "big", &format!("f{i}"), &format!("v{i}")]);
        }
        assert_eq!(h.run(&["OBJECT", "ENCODING", "big"]), bulk("hashtable"));
        let mut seen = HashMap::new();
        let (mut cursor, mut calls) = (0u64, 0);
        loop {
            let (next, got) = parts(h.run(&["HSCAN", "big", &cursor.to_string(), "COUNT", "5"]));
            for pair in got.chunks(2) {
                seen.insert(pair[0].clone(), pair[1].clone());
            }
            calls += 1;
            if calls < 150 {
                h.run(&["HDEL", "big", &format!("f{}", 1000 + calls)]);
                for j in 0..10 {
                    h.run(&["HSET", "big", &format!("n{calls}:{j}"), "x"]);
                }
            }
            assert!(calls < 10_000, "the scan does not end");
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for i in (0..=1000).chain(1150..1500) {
            assert_eq!(seen.get(&format!("f{i}")), Some(&format!("v{i}")), "f{i}");
        }
        // NOVALUES walks the same way, fields only.
        let (_, fields) = parts(h.run(&["HSCAN", "big", "0", "COUNT", "100000", "NOVALUES"]));
        assert_eq!(fields.len(), 1500 - 149 + 1490);
    }
}
