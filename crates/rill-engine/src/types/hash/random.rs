//! HRANDFIELD: random fields of a hash, optionally with their values.
//!
//! A hash is a numbered table, so a field is picked by drawing a position and reading the
//! field there (`types::pick`): O(1) per field picked, whatever the size of the hash.
//!
//! Redis behaviours we match on purpose:
//! - The count is parsed before the key is read: any integer but `i64::MIN`, and with
//!   WITHVALUES not below `-(i64::MAX / 2)` (`ERR value is out of range`: Redis sizes the
//!   reply as twice the count). Anything after the count other than one WITHVALUES is a
//!   syntax error.
//! - Without a count: one field or nil. With one: an array (empty for a missing key or count
//!   0); positive counts give distinct fields, negative ones `|count|` picks that may repeat.
//! - WITHVALUES pairs are `[field, value]` arrays in RESP3 and a flat array in RESP2.
//! - Fields whose expiry time has passed are removed first (`hexpired`, `del` if none is
//!   left), so a pick never returns one.

use super::{hash_cmd, read_hash};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::pick;
use crate::types::{arg, is_token, negatable_int_arg};
use crate::{CallCtx, CmdError, Engine, Value};
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
    complexity: "O(1), or O(|count|) with a count (a positive count is capped at the hash's size).",
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
    // Fields whose time has passed go first (all of them, as Redis does before a pick).
    super::check_hash(engine, ctx, key)?;
    engine.expire_if_needed(ctx.db, key, ctx.now_ms);
    if engine
        .db(ctx.db)
        .get_raw(key)
        .is_some_and(|e| matches!(&e.value, Value::Hash(h) if h.min_ttl().is_some_and(|t| t < ctx.now_ms)))
    {
        engine.expire_due_fields(ctx.db, key, ctx.now_ms, usize::MAX, false);
    }
    let Some(len) = read_hash(engine, ctx, key)?.map(|h| h.len()) else {
        return Ok(if count.is_some() { Reply::Array(vec![]) } else { Reply::Null });
    };
    let Some(count) = count else {
        let at = pick::position(engine, len);
        let field = pick::hash_entries_at(engine, ctx.db, key, &[at]).pop();
        return Ok(field.map_or(Reply::Null, |(f, _)| Reply::Bulk(f)));
    };
    let picked: Vec<(Bytes, Bytes)> = if count >= 0 {
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        let positions = pick::distinct_positions(engine, len, n);
        pick::hash_entries_at(engine, ctx.db, key, &positions)
    } else {
        // Grows with |count|, not with the hash: checked against the client's reply budget
        // before anything is drawn, with the least bytes a pick can take (one or two empty
        // bulk strings), and again with the fields picked.
        let picks = count.unsigned_abs();
        let replies_per_pick = if with_values { 2 } else { 1 };
        ctx.reserve_reply(picks, 6 * replies_per_pick)?;
        let positions = pick::positions_with_repeats(engine, len, picks);
        let picked = pick::hash_entries_at(engine, ctx.db, key, &positions);
        let bytes = picked
            .iter()
            .map(|(f, v)| f.len() as u64 + 6 + if with_values { v.len() as u64 + 6 } else { 0 })
            .map(|wire| wire + CallCtx::REPLY_ELEMENT_BYTES)
            .sum();
        ctx.check_reply_bytes(bytes)?;
        picked
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
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    use crate::types::pick::tests::{chi_square, CHI_SQUARE_9_DOF_P001};

    /// A hash `key` of fields `0..n`, each valued `v<field>`.
    fn numbers(h: &mut Harness, key: &str, n: usize) {
        let pairs: Vec<String> = (0..n).flat_map(|i| [i.to_string(), format!("v{i}")]).collect();
        for chunk in pairs.chunks(2000) {
            let mut args = vec!["HSET", key];
            args.extend(chunk.iter().map(String::as_str));
            h.run(&args);
        }
    }

    fn index(r: &Reply) -> usize {
        match r {
            Reply::Bulk(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
            _ => panic!("not a field: {r:?}"),
        }
    }

    #[test]
    fn picks_read_one_field_each_whatever_the_size() {
        // Issue 26: 300 HRANDFIELD on a 400k-field hash stalled the server for seconds.
        let mut h = Harness::new();
        numbers(&mut h, "big", 100_000);
        for (cmd, reads) in [
            (&["HRANDFIELD", "big"][..], 1),
            (&["HRANDFIELD", "big", "5"], 5),
            (&["HRANDFIELD", "big", "5", "WITHVALUES"], 5),
            (&["HRANDFIELD", "big", "-9", "WITHVALUES"], 9),
        ] {
            let before = h.engine.random_reads;
            h.run(cmd);
            assert_eq!(h.engine.random_reads - before, reads, "{cmd:?}");
        }
    }

    #[test]
    fn picks_are_uniform_and_keep_their_values() {
        let mut h = Harness::new();
        numbers(&mut h, "h", 10);
        let mut one = [0u64; 10];
        let mut repeats = [0u64; 10];
        let mut distinct = [0u64; 10];
        for _ in 0..10_000 {
            one[index(&h.run(&["HRANDFIELD", "h"]))] += 1;
            let Reply::Array(flat) = h.run(&["HRANDFIELD", "h", "-2", "WITHVALUES"]) else { panic!("array") };
            for pair in flat.chunks(2) {
                let f = index(&pair[0]);
                assert_eq!(pair[1], Reply::bulk(format!("v{f}")));
                repeats[f] += 1;
            }
            let Reply::Array(three) = h.run(&["HRANDFIELD", "h", "3"]) else { panic!("array") };
            let three: Vec<usize> = three.iter().map(index).collect();
            assert_eq!(three.iter().collect::<std::collections::HashSet<_>>().len(), 3, "{three:?}");
            for f in three {
                distinct[f] += 1;
            }
        }
        for (what, counts) in [("one", one), ("repeats", repeats), ("distinct", distinct)] {
            let chi = chi_square(&counts);
            assert!(chi < CHI_SQUARE_9_DOF_P001, "{what}: {counts:?} chi² {chi}");
        }
    }

    #[test]
    fn repeated_picks_are_held_to_the_reply_budget_with_their_values() {
        let mut h = Harness::new();
        h.run(&["HSET", "h", "f", &"v".repeat(1000)]);
        let mut ctx = h.ctx();
        ctx.reply_budget_bytes = 100_000;
        let Reply::Array(ok) = h.run_ctx(&mut ctx, &["HRANDFIELD", "h", "-200"]) else { panic!("array") };
        assert_eq!(ok.len(), 200, "fields alone fit");
        let refused = h.run_ctx(&mut ctx, &["HRANDFIELD", "h", "-200", "WITHVALUES"]);
        assert_eq!(refused, err("ERR reply exceeds the client output buffer limit"));
        assert!(ctx.reply_too_big);
    }

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
