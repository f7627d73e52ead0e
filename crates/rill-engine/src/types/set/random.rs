//! Random members: SPOP and SRANDMEMBER.
//!
//! A set is a numbered table, so a member is picked by drawing a position and reading the
//! member there (`types::pick`): O(1) per member picked, whatever the size of the set, plus
//! O(1) per member SPOP removes (the last member moves into the hole). The engine's generator
//! is seeded and never logged (see [`Engine::random_u64`]); SPOP logs the members it took.
//!
//! Redis behaviours we match on purpose:
//! - SPOP's count must be a non-negative integer (`ERR value is out of range, must be
//!   positive`); with a count the reply is a set (RESP3 `~`), empty for a missing key or count
//!   0; a count at least the size pops everything and deletes the key.
//! - SRANDMEMBER's count is any integer but `i64::MIN`; positive gives distinct members (all
//!   of them when the count is at least the size), negative gives `|count|` picks that may
//!   repeat; the reply is an array even in RESP3. Count 0 on a key of another type is still
//!   WRONGTYPE.
//! - A third argument is a syntax error for both.

use super::{read_set, set_cmd};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::pick;
use crate::types::{arg, delete_key, negatable_int_arg};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `SPOP key [count]`
pub const SPOP: CommandSpec = CommandSpec {
    name: "spop",
    arity: -2,
    flags: Flags::WRITE.and(Flags::FAST),
    acl: &["@write", "@set", "@fast"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RW", "ACCESS", "DELETE"])],
    summary: "Removes and returns a random member of a set, or `count` distinct ones.",
    complexity: "O(1), or O(count) with a count.",
    syntax: "key:key [count:integer]",
    ..set_cmd(Handler::Engine(spop))
};

/// `SRANDMEMBER key [count]`
pub const SRANDMEMBER: CommandSpec = CommandSpec {
    name: "srandmember",
    arity: -2,
    flags: Flags::READONLY,
    acl: &["@read", "@set", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    summary: "Returns random members of a set: distinct for a positive count, repeating for a \
              negative one.",
    complexity: "O(1), or O(|count|) with a count (a positive count is capped at the set's size).",
    syntax: "key:key [count:integer]",
    ..set_cmd(Handler::Engine(srandmember))
};

/// The number of members of the set at `key` (`None`: no key); the command's lookup.
fn set_len(engine: &mut Engine, ctx: &CallCtx, key: &[u8]) -> Result<Option<usize>, CmdError> {
    Ok(read_set(engine, ctx, key)?.map(|s| s.len()))
}

/// The most members one `SREM` of SPOP's record removes, as Redis propagates SPOP with a
/// count (a bigger count makes several, which go inside `MULTI`/`EXEC` as any unit of more
/// than one command).
const SPOP_SREM_BATCH: usize = 1024;

fn spop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    if args.len() > 3 {
        return Err(CmdError::SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(raw) => Some(
            parse_i64(raw)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(CmdError::full("ERR value is out of range, must be positive"))?,
        ),
    };
    let Some(len) = set_len(engine, ctx, key)? else {
        return Ok(if count.is_some() { Reply::Set(vec![]) } else { Reply::Null });
    };
    let n = count.unwrap_or(1).min(len);
    if n == 0 {
        return Ok(Reply::Set(vec![]));
    }
    let positions = pick::distinct_positions(engine, len, n);
    let mut members = pick::set_members_at(engine, ctx.db, key, &positions);
    let cfg = engine.config.object;
    let now_empty = match engine.lookup_mut(ctx.db, key, ctx.now_ms) {
        Some(crate::Entry { value: Value::Set(set), meta, .. }) => {
            crate::types::object::encoding::set_resolve(meta, set, &cfg);
            for m in &members {
                set.swap_remove(m);
            }
            // Popping all but a fifth or less, Redis rebuilds the set from what is left.
            if count.is_some() && set.len().saturating_mul(5) <= n {
                crate::types::object::encoding::set_rebuilt_after_pop(meta, set, &cfg);
            }
            set.is_empty()
        }
        _ => true,
    };
    if now_empty {
        engine.record_event(ctx.db, key, KeyEvent::SPop);
        delete_key(engine, ctx.db, key);
    } else {
        engine.modified(ctx.db, key, KeyEvent::SPop);
    }
    // Logged as what it did, in Redis' forms: a count that takes the whole set as `DEL key`,
    // otherwise the removal of the members picked (the pick is random), in `SREM`s of at most
    // SPOP_SREM_BATCH members each.
    if count.is_some() && n == len {
        let effect = vec![Bytes::from_static(b"DEL"), key.clone()];
        ctx.emit(crate::effect::Effect::Command { db: ctx.db, args: effect });
    } else {
        for batch in members.chunks(SPOP_SREM_BATCH) {
            let mut effect = Vec::with_capacity(batch.len() + 2);
            effect.push(Bytes::from_static(b"SREM"));
            effect.push(key.clone());
            effect.extend(batch.iter().cloned());
            ctx.emit(crate::effect::Effect::Command { db: ctx.db, args: effect });
        }
    }
    Ok(match count {
        None => members.pop().map_or(Reply::Null, Reply::Bulk),
        Some(_) => Reply::Set(members.into_iter().map(Reply::Bulk).collect()),
    })
}

fn srandmember(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    if args.len() > 3 {
        return Err(CmdError::SYNTAX);
    }
    let count = args.get(2).map(|raw| negatable_int_arg(raw)).transpose()?;
    let Some(len) = set_len(engine, ctx, key)? else {
        return Ok(if count.is_some() { Reply::Array(vec![]) } else { Reply::Null });
    };
    let Some(count) = count else {
        let at = pick::position(engine, len);
        let member = pick::set_members_at(engine, ctx.db, key, &[at]).pop();
        return Ok(member.map_or(Reply::Null, Reply::Bulk));
    };
    if count >= 0 {
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        let positions = pick::distinct_positions(engine, len, n);
        let members = pick::set_members_at(engine, ctx.db, key, &positions);
        return Ok(Reply::Array(members.into_iter().map(Reply::Bulk).collect()));
    }
    // Picks with repetition: the reply grows with |count|, not with the set, so it is
    // checked against the client's reply budget before anything is drawn (`$0\r\n\r\n`, an
    // empty member, is the least a pick can take), and again with the members picked.
    let picks = count.unsigned_abs();
    ctx.reserve_reply(picks, 6)?;
    let positions = pick::positions_with_repeats(engine, len, picks);
    let members = pick::set_members_at(engine, ctx.db, key, &positions);
    let bytes = members.iter().map(|m| m.len() as u64 + 6 + CallCtx::REPLY_ELEMENT_BYTES).sum();
    ctx.check_reply_bytes(bytes)?;
    Ok(Reply::Array(members.into_iter().map(Reply::Bulk).collect()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    fn len(r: &Reply) -> usize {
        match r {
            Reply::Array(v) | Reply::Set(v) => v.len(),
            _ => panic!("not a collection: {r:?}"),
        }
    }

    use crate::types::pick::tests::{chi_square, CHI_SQUARE_9_DOF_P001};

    /// A set `s` of members `0..n`.
    fn numbers(h: &mut Harness, key: &str, n: usize) {
        let names: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        for chunk in names.chunks(1000) {
            let mut args = vec!["SADD", key];
            args.extend(chunk.iter().map(String::as_str));
            h.run(&args);
        }
    }

    fn index(r: &Reply) -> usize {
        match r {
            Reply::Bulk(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
            _ => panic!("not a member: {r:?}"),
        }
    }

    fn members(r: &Reply) -> Vec<usize> {
        match r {
            Reply::Array(v) | Reply::Set(v) => v.iter().map(index).collect(),
            _ => panic!("not a collection: {r:?}"),
        }
    }

    #[test]
    fn picks_read_one_member_each_whatever_the_size() {
        // Issue 26: a pick on a 100k-member set read (copied) every member.
        let mut h = Harness::new();
        numbers(&mut h, "big", 100_000);
        for (cmd, reads) in [
            (&["SRANDMEMBER", "big"][..], 1),
            (&["SRANDMEMBER", "big", "5"], 5),
            (&["SRANDMEMBER", "big", "-7"], 7),
            (&["SPOP", "big"], 1),
            (&["SPOP", "big", "3"], 3),
        ] {
            let before = h.engine.random_reads;
            h.run(cmd);
            assert_eq!(h.engine.random_reads - before, reads, "{cmd:?}");
        }
        assert_eq!(h.run(&["SCARD", "big"]), int(100_000 - 4));
    }

    #[test]
    fn picks_are_uniform() {
        let mut h = Harness::new();
        numbers(&mut h, "s", 10);
        let mut one = [0u64; 10];
        let mut repeats = [0u64; 10];
        let mut distinct = [0u64; 10];
        let mut popped = [0u64; 10];
        for _ in 0..10_000 {
            one[index(&h.run(&["SRANDMEMBER", "s"]))] += 1;
            for m in members(&h.run(&["SRANDMEMBER", "s", "-2"])) {
                repeats[m] += 1;
            }
            let three = members(&h.run(&["SRANDMEMBER", "s", "3"]));
            assert_eq!(three.iter().collect::<std::collections::HashSet<_>>().len(), 3, "{three:?}");
            for m in three {
                distinct[m] += 1;
            }
        }
        // Apart: a pop and its re-add move members between positions.
        for _ in 0..10_000 {
            let m = index(&h.run(&["SPOP", "s"]));
            popped[m] += 1;
            h.run(&["SADD", "s", &m.to_string()]);
        }
        for (what, counts) in [("one", one), ("repeats", repeats), ("distinct", distinct), ("spop", popped)] {
            let chi = chi_square(&counts);
            assert!(chi < CHI_SQUARE_9_DOF_P001, "{what}: {counts:?} chi² {chi}");
        }
    }

    #[test]
    fn spop_with_a_count_takes_distinct_members_and_logs_them() {
        let mut h = Harness::new();
        numbers(&mut h, "s", 50);
        let mut ctx = h.ctx();
        ctx.recording = true;
        let popped = members(&h.run_ctx(&mut ctx, &["SPOP", "s", "20"]));
        let unique: std::collections::HashSet<usize> = popped.iter().copied().collect();
        assert_eq!(unique.len(), 20);
        assert_eq!(h.run(&["SCARD", "s"]), int(30));
        for m in &unique {
            assert_eq!(h.run(&["SISMEMBER", "s", &m.to_string()]), int(0));
        }
        // The record is SREM of exactly those members.
        let effects = ctx.effects.decode().unwrap();
        let [crate::effect::Effect::Command { args, .. }] = effects.as_slice() else { panic!("{effects:?}") };
        assert_eq!(&args[..2], &[bytes::Bytes::from("SREM"), bytes::Bytes::from("s")]);
        let logged: std::collections::HashSet<usize> =
            args[2..].iter().map(|a| std::str::from_utf8(a).unwrap().parse().unwrap()).collect();
        assert_eq!(logged, unique);
        // Popping at least the rest takes everything and deletes the key: logged as DEL, as
        // Redis propagates it.
        let mut ctx = h.ctx();
        ctx.recording = true;
        assert_eq!(members(&h.run_ctx(&mut ctx, &["SPOP", "s", "30"])).len(), 30);
        assert_eq!(h.run(&["EXISTS", "s"]), int(0));
        let effects = ctx.effects.decode().unwrap();
        let [crate::effect::Effect::Command { args, .. }] = effects.as_slice() else { panic!("{effects:?}") };
        assert_eq!(args, &[bytes::Bytes::from("DEL"), bytes::Bytes::from("s")]);
    }

    #[test]
    fn spop_with_a_big_count_logs_srems_of_at_most_1024_members() {
        let mut h = Harness::new();
        numbers(&mut h, "s", 4000);
        for (count, batches) in [(1023, vec![1023]), (1024, vec![1024]), (1025, vec![1024, 1])] {
            let mut ctx = h.ctx();
            ctx.recording = true;
            assert_eq!(members(&h.run_ctx(&mut ctx, &["SPOP", "s", &count.to_string()])).len(), count);
            let effects = ctx.effects.decode().unwrap();
            let sizes: Vec<usize> = effects
                .iter()
                .map(|e| match e {
                    crate::effect::Effect::Command { args, .. } => {
                        assert_eq!(&args[..2], &[bytes::Bytes::from("SREM"), bytes::Bytes::from("s")]);
                        args.len() - 2
                    }
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(sizes, batches);
        }
        assert_eq!(h.run(&["SCARD", "s"]), int(928));
    }

    #[test]
    fn repeated_picks_of_long_members_are_held_to_the_reply_budget() {
        // Counted with the members' real lengths once picked (the set is not scanned for its
        // shortest member first).
        let mut h = Harness::new();
        let long = "x".repeat(1000);
        h.run(&["SADD", "s", &long, &format!("{long}y")]);
        let mut ctx = h.ctx();
        ctx.reply_budget_bytes = 100_000;
        assert_eq!(len(&h.run_ctx(&mut ctx, &["SRANDMEMBER", "s", "-50"])), 50);
        assert!(!ctx.reply_too_big);
        let refused = h.run_ctx(&mut ctx, &["SRANDMEMBER", "s", "-200"]);
        assert_eq!(refused, err("ERR reply exceeds the client output buffer limit"));
        assert!(ctx.reply_too_big);
    }

    #[test]
    fn spop_shapes_and_deletion() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SPOP", "missing"]), Reply::Null);
        assert_eq!(h.run(&["SPOP", "missing", "3"]), Reply::Set(vec![]));
        h.run(&["SADD", "s", "a", "b", "c", "d"]);
        assert_eq!(h.run(&["SPOP", "s", "0"]), Reply::Set(vec![]));
        assert!(matches!(h.run(&["SPOP", "s"]), Reply::Bulk(_)));
        let two = h.run(&["SPOP", "s", "2"]);
        assert!(matches!(two, Reply::Set(_)));
        assert_eq!(sorted_strings(&two).len(), 2);
        assert_eq!(h.run(&["SCARD", "s"]), int(1));
        assert_eq!(len(&h.run(&["SPOP", "s", "10"])), 1);
        assert_eq!(h.run(&["EXISTS", "s"]), int(0));
        let positive = err("ERR value is out of range, must be positive");
        assert_eq!(h.run(&["SPOP", "s", "-1"]), positive);
        assert_eq!(h.run(&["SPOP", "s", "x"]), positive);
        assert_eq!(h.run(&["SPOP", "s", "1", "2"]), err("ERR syntax error"));
    }

    #[test]
    fn srandmember_counts() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SRANDMEMBER", "missing"]), Reply::Null);
        assert_eq!(h.run(&["SRANDMEMBER", "missing", "-3"]), Reply::Array(vec![]));
        h.run(&["SADD", "s", "a", "b", "c"]);
        assert!(matches!(h.run(&["SRANDMEMBER", "s"]), Reply::Bulk(_)));
        assert_eq!(h.run(&["SRANDMEMBER", "s", "0"]), Reply::Array(vec![]));
        let two = h.run(&["SRANDMEMBER", "s", "2"]);
        let mut names = sorted_strings(&two);
        names.dedup();
        assert_eq!(names.len(), 2);
        assert_eq!(sorted_strings(&h.run(&["SRANDMEMBER", "s", "10"])), ["a", "b", "c"]);
        assert_eq!(len(&h.run(&["SRANDMEMBER", "s", "-7"])), 7);
        assert_eq!(h.run(&["SCARD", "s"]), int(3));
        assert_eq!(
            h.run(&["SRANDMEMBER", "s", "-9223372036854775808"]),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(h.run(&["SRANDMEMBER", "s", "x"]), err("ERR value is not an integer or out of range"));
        assert_eq!(h.run(&["SRANDMEMBER", "s", "1", "2"]), err("ERR syntax error"));
        h.run(&["SET", "str", "v"]);
        assert_eq!(
            h.run(&["SRANDMEMBER", "str", "0"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }
}
