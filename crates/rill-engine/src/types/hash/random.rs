//! HRANDFIELD: random fields of a hash, optionally with their values.
//!
//! A `HashMap` cannot pick its n-th entry directly, so a call is O(N) in the hash's size (copy
//! the entries' handles, then a partial Fisher–Yates shuffle) plus O(|count|) for the reply.
//!
//! Redis behaviours we match on purpose:
//! - The count is parsed before the key is read: any integer but `i64::MIN`, and with
//!   WITHVALUES not below `-(i64::MAX / 2)` (`ERR value is out of range`: Redis sizes the
//!   reply as twice the count). Anything after the count other than one WITHVALUES is a
//!   syntax error.
//! - Without a count: one field or nil. With one: an array (empty for a missing key or count
//!   0); positive counts give distinct fields, negative ones `|count|` picks that may repeat.
//! - WITHVALUES pairs are `[field, value]` arrays in RESP3 and a flat array in RESP2.

use super::{hash_cmd, read_hash};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::set::random::{choose_front, random_index};
use crate::types::{arg, is_token, negatable_int_arg};
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `HRANDFIELD key [count [WITHVALUES]]`
pub const HRANDFIELD: CommandSpec = CommandSpec {
    name: "hrandfield",
    arity: -2,
    flags: Flags::READONLY,
    acl: &["@read", "@hash", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    summary: "Returns random fields of a hash: distinct for a positive count, repeating for a \
              negative one, optionally with their values.",
    since: "6.2.0",
    complexity: "O(N) in the size of the hash, plus O(|count|).",
    syntax: "key:key [options@(count:integer [WITHVALUES])]",
    ..hash_cmd(Handler::Engine(hrandfield))
};

/// The most negative count WITHVALUES accepts.
const MIN_COUNT_WITH_VALUES: i64 = -(i64::MAX / 2);

fn hrandfield(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let count = args.get(2).map(|raw| negatable_int_arg(raw)).transpose()?;
    let with_values = match args.get(3..).unwrap_or(&[]) {
        [] => false,
        [opt] if is_token(opt, "WITHVALUES") => true,
        _ => return Err(CmdError::SYNTAX),
    };
    if with_values && count.is_some_and(|c| c < MIN_COUNT_WITH_VALUES) {
        return Err(CmdError::full("ERR value is out of range"));
    }
    let Some(hash) = read_hash(engine, ctx, key)? else {
        return Ok(if count.is_some() { Reply::Array(vec![]) } else { Reply::Null });
    };
    let mut entries: Vec<(Bytes, Bytes)> = hash.iter().map(|(f, v)| (f.clone(), v.clone())).collect();
    let Some(count) = count else {
        let i = random_index(engine, entries.len().max(1));
        return Ok(entries.get(i).map_or(Reply::Null, |(f, _)| Reply::Bulk(f.clone())));
    };
    let picked: Vec<(Bytes, Bytes)> = if count >= 0 {
        let n = usize::try_from(count).unwrap_or(usize::MAX).min(entries.len());
        choose_front(engine, &mut entries, n);
        entries.truncate(n);
        entries
    } else {
        // Grows with |count|, not with the hash: checked against the client's reply budget
        // first, with the least bytes a pick can take (one or two bulk strings).
        let per_pick = |(f, v): &(Bytes, Bytes)| f.len() as u64 + 6 + if with_values { v.len() as u64 + 6 } else { 0 };
        let least = entries.iter().map(per_pick).min().unwrap_or(0);
        ctx.reserve_reply(count.unsigned_abs(), least)?;
        let mut out = Vec::new();
        for _ in 0..count.unsigned_abs() {
            let i = random_index(engine, entries.len());
            out.extend(entries.get(i).cloned());
        }
        out
    };
    let out = if !with_values {
        picked.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()
    } else if ctx.resp3 {
        picked.into_iter().map(|(f, v)| Reply::Array(vec![Reply::Bulk(f), Reply::Bulk(v)])).collect()
    } else {
        picked.into_iter().flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)]).collect()
    };
    Ok(Reply::Array(out))
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    #[test]
    fn hrandfield_shapes() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HRANDFIELD", "missing"]), Reply::Null);
        assert_eq!(h.run(&["HRANDFIELD", "missing", "2", "WITHVALUES"]), Reply::Array(vec![]));
        h.run(&["HSET", "h", "a", "1", "b", "2"]);
        assert!(matches!(h.run(&["HRANDFIELD", "h"]), Reply::Bulk(_)));
        assert_eq!(h.run(&["HRANDFIELD", "h", "0", "WITHVALUES"]), Reply::Array(vec![]));
        assert_eq!(sorted_strings(&h.run(&["HRANDFIELD", "h", "5"])), ["a", "b"]);
        assert_eq!(sorted_strings(&h.run(&["HRANDFIELD", "h", "5", "withvalues"])), ["1", "2", "a", "b"]);
        let Reply::Array(picks) = h.run(&["HRANDFIELD", "h", "-5"]) else { panic!("array") };
        assert_eq!(picks.len(), 5);
        // RESP3: pairs.
        let mut ctx = h.ctx();
        ctx.resp3 = true;
        let Reply::Array(pairs) = h.run_ctx(&mut ctx, &["HRANDFIELD", "h", "-3", "WITHVALUES"]) else {
            panic!("array")
        };
        assert_eq!(pairs.len(), 3);
        assert!(pairs.iter().all(|p| matches!(p, Reply::Array(kv) if kv.len() == 2)));
    }

    #[test]
    fn hrandfield_errors() {
        let mut h = Harness::new();
        h.run(&["SET", "str", "v"]);
        let not_int = err("ERR value is not an integer or out of range");
        assert_eq!(h.run(&["HRANDFIELD", "str", "x"]), not_int);
        assert_eq!(h.run(&["HRANDFIELD", "missing", "x", "FOO"]), not_int);
        assert_eq!(h.run(&["HRANDFIELD", "missing", "1", "FOO"]), err("ERR syntax error"));
        assert_eq!(h.run(&["HRANDFIELD", "missing", "1", "WITHVALUES", "x"]), err("ERR syntax error"));
        assert_eq!(
            h.run(&["HRANDFIELD", "missing", "-4611686018427387904", "WITHVALUES"]),
            err("ERR value is out of range")
        );
        assert_eq!(
            h.run(&["HRANDFIELD", "str", "-9223372036854775808"]),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(
            h.run(&["HRANDFIELD", "str", "1"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }
}
