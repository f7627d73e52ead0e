//! `SSCAN key cursor [MATCH pattern] [COUNT count]`: iterate over a set's members with a
//! cursor. The walk, the options and the Redis behaviours matched are in
//! [`crate::types::collection_scan`]. An `intset` or `listpack` set comes back whole with
//! cursor 0; a `hashtable` one is walked by member position, O(N log COUNT) per call.

use super::set_cmd;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::glob::glob_match;
use crate::types::arg;
use crate::types::collection_scan::{cursor_arg, parse_options, reply, step};
use crate::types::object::encoding;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`
pub const SSCAN: CommandSpec = CommandSpec {
    name: "sscan",
    arity: -3,
    flags: Flags::READONLY,
    acl: &["@read", "@set", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    summary: "Iterates over the members of a set with a cursor.",
    since: "2.8.0",
    complexity: "O(N log COUNT) per call for a hashtable set (N its size), O(N) for a small one \
                 returned whole.",
    syntax: "key:key cursor:integer [MATCH pattern:pattern] [COUNT count:integer]",
    ..set_cmd(Handler::Engine(sscan))
};

fn sscan(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let cursor = cursor_arg(args)?;
    let options = parse_options(args, false);
    let cfg = engine.config.object;
    let Some(entry) = engine.lookup_read(ctx.db, key, ctx.now_ms) else { return Ok(reply(0, vec![])) };
    let Value::Set(set) = &entry.value else { return Err(CmdError::WRONGTYPE) };
    let options = options?;
    let (next, members): (u64, Vec<&[u8]>) = if encoding::name(key, entry, &cfg) == "hashtable" {
        step(|| set.iter(), |m| *m, set.len(), cursor, options.count)
    } else {
        (0, set.iter().collect())
    };
    let out = members
        .into_iter()
        .filter(|m| options.pattern.is_none_or(|p| glob_match(p, m, false)))
        .map(|m| Reply::Bulk(Bytes::copy_from_slice(m)))
        .collect();
    Ok(reply(next, out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;
    use std::collections::HashSet;

    /// The cursor and the members of one SSCAN reply.
    fn parts(reply: Reply) -> (u64, Vec<String>) {
        let Reply::Array(mut parts) = reply else { panic!("{reply:?}") };
        let Some(Reply::Array(members)) = parts.pop() else { panic!() };
        let Some(Reply::Bulk(cursor)) = parts.pop() else { panic!() };
        let members = members
            .into_iter()
            .map(|m| match m {
                Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        (std::str::from_utf8(&cursor).unwrap().parse().unwrap(), members)
    }

    #[test]
    fn small_sets_come_back_whole_with_cursor_zero() {
        let mut h = Harness::new();
        h.run(&["SADD", "ints", "3", "1", "2"]);
        h.run(&["SADD", "words", "a", "b", "ab"]);
        assert_eq!(h.run(&["OBJECT", "ENCODING", "ints"]), bulk("intset"));
        let (cursor, mut members) = parts(h.run(&["SSCAN", "ints", "12345", "COUNT", "1"]));
        members.sort();
        assert_eq!((cursor, members), (0, vec!["1".into(), "2".into(), "3".into()]));
        let (cursor, mut members) = parts(h.run(&["SSCAN", "words", "0", "MATCH", "a*"]));
        members.sort();
        assert_eq!((cursor, members), (0, vec!["a".into(), "ab".into()]));
        assert_eq!(parts(h.run(&["SSCAN", "nope", "0"])), (0, vec![]));
    }

    #[test]
    fn errors_in_redis_order() {
        let mut h = Harness::new();
        h.run(&["SET", "s", "v"]);
        h.run(&["SADD", "set", "a"]);
        let syntax = err("ERR syntax error");
        assert_eq!(h.run(&["SSCAN", "set", "x"]), err("ERR invalid cursor"));
        assert_eq!(h.run(&["SSCAN", "s", "-1"]), err("ERR invalid cursor"));
        assert_eq!(h.run(&["SSCAN", "s", "0", "COUNT", "0"]), err(WRONGTYPE));
        // A missing key does not look at the options.
        assert_eq!(parts(h.run(&["SSCAN", "nope", "0", "BOGUS"])), (0, vec![]));
        assert_eq!(h.run(&["SSCAN", "set", "0", "COUNT", "0"]), syntax);
        assert_eq!(h.run(&["SSCAN", "set", "0", "COUNT", "x"]), err("ERR value is not an integer or out of range"));
        assert_eq!(h.run(&["SSCAN", "set", "0", "COUNT"]), syntax);
        assert_eq!(h.run(&["SSCAN", "set", "0", "MATCH"]), syntax);
        assert_eq!(h.run(&["SSCAN", "set", "0", "TYPE", "set"]), syntax);
        assert_eq!(h.run(&["SSCAN", "set", "0", "NOVALUES"]), err("ERR NOVALUES option can only be used in HSCAN"));
        assert_eq!(h.run(&["SSCAN", "set", "0", "COUNT", "0", "NOVALUES"]), syntax);
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

    /// SCAN's guarantee on a big set changed between calls: every member present for the
    /// whole iteration is returned; removed and added members may or may not be.
    #[test]
    fn members_present_throughout_are_returned() {
        let mut h = Harness::new();
        let members: Vec<String> = (0..2000).map(|i| format!("m{i}")).collect();
        for chunk in members.chunks(100) {
            let mut cmd = vec!["SADD", "big"];
            cmd.extend(chunk.iter().map(String::as_str));
            h.run(&cmd);
        }
        assert_eq!(h.run(&["OBJECT", "ENCODING", "big"]), bulk("hashtable"));
        let mut seen = HashSet::new();
        let (mut cursor, mut calls) = (0u64, 0);
        loop {
            let (next, got) = parts(h.run(&["SSCAN", "big", &cursor.to_string(), "COUNT", "7"]));
            seen.extend(got);
            calls += 1;
            // Between calls: remove a member of the second half, add new ones (the table
            // grows and its order changes).
            if calls < 100 {
                let gone = format!("m{}", 1000 + calls);
                h.run(&["SREM", "big", &gone]);
                for j in 0..20 {
                    h.run(&["SADD", "big", &format!("new{calls}:{j}")]);
                }
            }
            assert!(calls < 10_000, "the scan does not end");
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for i in (0..=1000).chain(1100..2000) {
            assert!(seen.contains(&format!("m{i}")), "m{i} missed");
        }
        assert!(calls > 100, "COUNT ignored: {calls} calls");
    }

    #[test]
    fn match_filters_a_walk() {
        let mut h = Harness::new();
        for i in 0..600 {
            h.run(&["SADD", "big", &format!("{}{i}", if i % 3 == 0 { "x" } else { "y" })]);
        }
        let mut seen = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, got) = parts(h.run(&["SSCAN", "big", &cursor.to_string(), "MATCH", "x*", "COUNT", "50"]));
            seen.extend(got);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        seen.sort();
        let mut want: Vec<String> = (0..600).filter(|i| i % 3 == 0).map(|i| format!("x{i}")).collect();
        want.sort();
        assert_eq!(seen, want);
    }
}
