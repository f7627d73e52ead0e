//! `ZSCAN key cursor [MATCH pattern] [COUNT count]`: iterate over a sorted set's members and
//! scores with a cursor. The walk, the options and the Redis behaviours matched are in
//! [`crate::types::collection_scan`]. A `listpack` sorted set comes back whole, in order, with
//! cursor 0; a `skiplist` one is walked by member position, O(N log COUNT) per call. Scores
//! are bulk strings in both protocols, as Redis sends them.

use super::zset_cmd;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::glob::glob_match;
use crate::types::arg;
use crate::types::collection_scan::{cursor_arg, parse_options, reply, step};
use crate::types::object::encoding;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`
pub const ZSCAN: CommandSpec = CommandSpec {
    name: "zscan",
    arity: -3,
    flags: Flags::READONLY,
    acl: &["@read", "@sortedset", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    summary: "Iterates over the members and scores of a sorted set with a cursor.",
    since: "2.8.0",
    complexity: "O(N log COUNT) per call for a skiplist set (N its size), O(N) for a small one \
                 returned whole.",
    syntax: "key:key cursor:integer [MATCH pattern:pattern] [COUNT count:integer]",
    ..zset_cmd(Handler::Engine(zscan))
};

fn zscan(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let cursor = cursor_arg(args)?;
    let options = parse_options(args, false);
    let cfg = engine.config.object;
    let Some(entry) = engine.lookup_read(ctx.db, key, ctx.now_ms) else { return Ok(reply(0, vec![])) };
    let Value::ZSet(z) = &entry.value else { return Err(CmdError::WRONGTYPE) };
    let options = options?;
    let (next, pairs): (u64, Vec<(&Bytes, f64)>) = if encoding::name(key, entry, &cfg) == "skiplist" {
        step(|| z.members(), |(m, _)| m.as_ref(), z.len(), cursor, options.count)
    } else {
        (0, z.iter().map(|e| (&e.member, e.score)).collect())
    };
    let mut out = Vec::with_capacity(pairs.len() * 2);
    for (member, score) in pairs {
        if options.pattern.is_some_and(|p| !glob_match(p, member, false)) {
            continue;
        }
        out.push(Reply::Bulk(member.clone()));
        out.push(Reply::Bulk(Bytes::from(rill_resp::double_text(score))));
    }
    Ok(reply(next, out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;
    use std::collections::HashSet;

    #[test]
    fn small_sets_whole_big_ones_walked_to_the_end() {
        let mut h = Harness::new();
        h.run(&["ZADD", "small", "2", "b", "1", "a"]);
        assert_eq!(
            h.run(&["ZSCAN", "small", "0"]),
            Reply::Array(vec![bulk("0"), Reply::Array(vec![bulk("a"), bulk("1"), bulk("b"), bulk("2")])])
        );
        let mut args = vec!["ZADD".to_string(), "big".to_string()];
        for i in 0..500 {
            args.extend([i.to_string(), format!("m{i}")]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        h.run(&args);
        let mut seen = HashSet::new();
        let mut cursor = "0".to_string();
        loop {
            let Reply::Array(mut parts) = h.run(&["ZSCAN", "big", &cursor, "COUNT", "7"]) else { panic!() };
            let Some(Reply::Array(items)) = parts.pop() else { panic!() };
            for pair in items.chunks(2) {
                let Reply::Bulk(m) = &pair[0] else { panic!() };
                seen.insert(m.clone());
            }
            let Some(Reply::Bulk(next)) = parts.pop() else { panic!() };
            cursor = String::from_utf8(next.to_vec()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 500);
        assert!(matches!(h.run(&["ZSCAN", "big", "0", "NOVALUES"]), Reply::Error(_)));
    }
}
