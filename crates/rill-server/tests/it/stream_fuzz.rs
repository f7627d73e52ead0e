//! Randomised differential test of the stream and consumer-group commands: proptest generates
//! command sequences over two keys, three groups and three consumers, and each sequence runs
//! against rill and Redis 8.2.3 (from `FLUSHALL`), every reply compared.
//!
//! The sequences use explicit IDs (`ms-seq` or `ms-*` over a small range, so IDs collide, go
//! backwards and hit the same milliseconds), zero min-idle claims, and small nodes on both
//! servers (each sequence starts with `CONFIG SET` of 2..10 entries per node, sometimes with a
//! 40..400-byte cap), so block boundaries are crossed by both of Redis' rules and `~`
//! trimming, which removes whole nodes, has nodes to remove. Replies must be equal as RESP,
//! except for what depends on the clock or on Redis' radix tree, which is blanked before
//! comparing: idle times, delivery times, seen/active/inactive times, XINFO STREAM's
//! `radix-tree-nodes` (its `radix-tree-keys`, the number of nodes, is compared), and the
//! IDMP fields that Redis 8.2 does not have yet.
//!
//! About one command in four is careless (see `plain`): one argument, sometimes two, is
//! replaced by an extreme or malformed value of its kind — a missing key or group; an ID that
//! is `0-0`, ms-only, the largest ID or next to it, one with a huge sequence, one past `u64`,
//! `-`/`+`/`$`/`>` where they are valid and where not, an exclusive bound at an edge, or no
//! ID at all; a number that is 0, negative, near 2^43, 2^59 and 2^63, past `i64`, or not a
//! number — in every ID and numeric position (COUNT, LIMIT, MAXLEN, MINID, `numids`,
//! ENTRIESREAD, ENTRIESADDED, RETRYCOUNT, LASTID, MAXDELETEDID, min-idle-time). Values that
//! would make the outcome depend on the clock are not drawn (see `Slot`). Against 8.2.3 a
//! counter is never set to 2^63 − 1: 8.2.3 wraps it on the next increment, later Redis
//! saturates, as rill does.
//!
//! XGROUP DESTROY is left out against 8.2.3: after it, 8.2.3 still counts the destroyed group
//! when deciding whether an entry is referenced (XTRIM/XDELEX ... ACKED keep an entry only the
//! destroyed group had not read), which later Redis fixed and rill does not reproduce.
//! `RILL_FUZZ_REDIS=/path/to/redis-server` compares with that (newer) server instead, DESTROY
//! included, and idempotent production too: XADD with IDMP / IDMPAUTO and XCFGSET on a third
//! key, whose IDs come from the clock and are compared as tokens (see `Session::tokens`); a
//! swap of that key checks that each server's IIDs, IDMPAUTO's included, still catch retries
//! in the other. The restart test below always includes them. Against a newer Redis a rare
//! run can differ by timing alone: pending entries delivered in one millisecond keep their
//! delivery order, but neither server's DUMP records it (a restored PEL orders them by ID), so
//! after a swap the claim order XREADGROUP ... CLAIM shows depends on whether the deliveries
//! fell in one millisecond on each server. Against 8.2.3 (no CLAIM) claim order is not
//! observable.
//!
//! Now and then a key is swapped between the servers: each one's DUMP is RESTOREd into the
//! other, so each must read the other's serialisation of whatever state was reached.
//!
//! Blocking reads (XREAD, XREADGROUP, with CLAIM against a newer Redis, some over both keys)
//! are parked on side connections; the main connection's writes wake them or not, and CLIENT
//! UNBLOCK at a later point tells whether each was still blocked and releases it; what each
//! side got is compared.
//! Some commands run on another connection while the main one WATCHes every key: whether the
//! main one's EXEC then fails is compared too. Some run in MULTI / EXEC.
//!
//! A second test runs random sequences against rill alone with the log on, compacts the log
//! halfway now and then, kills the server with -9 and restarts it: the state must be the same.
//!
//! A failing sequence is shrunk to a short one and printed with both servers' replies.
//! `RILL_FUZZ_CASES=N` runs N sequences (default 150), `RILL_FUZZ_RESTARTS=N` N restart cases
//! (default 25). Each random test runs with its fixed seed (a regression) and, in CI and
//! `scripts/test`, again with a fresh seed that the run prints (`rill_testkit::fresh_seed`);
//! `RILL_FUZZ_SEED=S` replays S.

use crate::common::{multi_commands, ClientExt, Side};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use rill_testkit::{fresh_seed, fuzz_seed, parse_value, seed_bytes, ReferenceServer, Server, ServerKind, Value};
use std::collections::HashMap;
use std::path::PathBuf;

const KEYS: &[&str] = &["s1", "s2"];
/// The key of the idempotent-production commands (see [`idmp`]): its IDs come from the clock.
const IKEY: &str = "i1";
const GROUPS: &[&str] = &["g1", "g2", "g3"];
const CONSUMERS: &[&str] = &["c1", "c2", "c3"];

fn pick(list: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(list).prop_map(str::to_string)
}

/// An entry ID argument: `ms-seq` over milliseconds 1..=12.
fn id() -> impl Strategy<Value = String> {
    (1u64..=12, 0u64..3).prop_map(|(ms, seq)| format!("{ms}-{seq}"))
}

/// XADD's ID: `ms-seq` mostly, sometimes `ms-*` (never `*`, which reads the clock).
fn add_id() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => id(),
        2 => (1u64..=14).prop_map(|ms| format!("{ms}-*")),
    ]
}

/// An entry's fields and values. Most entries share the fields `f` (so a node's first entry
/// is a template for the next ones), some add or drop one, some repeat a field; values are
/// short strings and numbers in the forms a server may store as integers or must not.
fn fields() -> impl Strategy<Value = Vec<String>> {
    let value = prop_oneof![
        Just("v".to_string()),
        Just(String::new()),
        (-1000i64..1000).prop_map(|n| n.to_string()),
        proptest::sample::select(&["007", "-0", "+1", "1.5", "9223372036854775807", "9223372036854775808"][..],)
            .prop_map(str::to_string),
        "[a-z ]{0,12}",
    ];
    let names = prop_oneof![
        6 => Just(vec!["f"]),
        2 => Just(vec!["f", "g"]),
        1 => Just(vec!["g"]),
        1 => Just(vec!["f", "f"]),
    ];
    names.prop_flat_map(move |names| {
        proptest::collection::vec(value.clone(), names.len())
            .prop_map(move |values| names.iter().zip(values).flat_map(|(n, v)| [n.to_string(), v]).collect())
    })
}

/// A range bound for XRANGE and friends.
fn bound() -> impl Strategy<Value = String> {
    prop_oneof![Just("-".to_string()), Just("+".to_string()), id(), (1u64..=12).prop_map(|ms| ms.to_string())]
}

/// A group start ID.
fn group_id() -> impl Strategy<Value = String> {
    prop_oneof![Just("$".to_string()), Just("0".to_string()), id()]
}

fn ids(max: usize) -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(id(), 1..=max)
}

fn refs() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(pick(&["KEEPREF", "DELREF", "ACKED"]))
}

/// Trimming arguments: MAXLEN or MINID, exact or `~` (with or without LIMIT), and a reference
/// policy. Against 8.2.3 (`newer` false) `~` goes only with KEEPREF: 8.2.3 predates the fix
/// of `~` with DELREF/ACKED (spec §6.1).
fn trim(newer: bool) -> impl Strategy<Value = Vec<String>> {
    (any::<bool>(), 0u64..8, 0..3, proptest::option::of(0u64..6), refs()).prop_map(
        move |(maxlen, n, op, limit, policy)| {
            let mut a = if maxlen { words(&["MAXLEN"]) } else { words(&["MINID"]) };
            match op {
                1 => a.push("=".into()),
                2 => a.push("~".into()),
                _ => {}
            }
            a.push(if maxlen { n.to_string() } else { (n * 2).to_string() });
            if op == 2 {
                if let Some(l) = limit {
                    a.extend(words(&["LIMIT", &l.to_string()]));
                }
                if newer || policy.as_deref() == Some("KEEPREF") {
                    a.extend(policy);
                }
            } else {
                a.extend(policy);
            }
            a
        },
    )
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// One step of a sequence: mostly a [`plain`] command, sometimes a pseudo-command (see
/// [`SWAP`], [`BLOCK`], [`WATCHED`]).
fn command(newer: bool) -> impl Strategy<Value = Vec<String>> {
    // A blocking read parked on a side connection, and its end (see `BLOCK`).
    let block = (0..2u8, pick(GROUPS), pick(CONSUMERS), pick(KEYS), proptest::option::of(1u64..3), 0..8).prop_map(
        move |(i, g, c, k, count, kind)| {
            let mut a = words(&[BLOCK, &i.to_string()]);
            let count = count.map(|n| words(&["COUNT", &n.to_string()])).unwrap_or_default();
            // The largest ID now and then: XREAD waits for an entry after it (there is none),
            // XREADGROUP takes it for `>`.
            let max = "18446744073709551615-18446744073709551615";
            if kind == 0 || kind == 4 || kind == 6 {
                a.extend(words(&["XREAD"]));
                a.extend(count);
                // Both keys now and then: woken by one, the whole command runs again.
                if kind == 4 {
                    a.extend(words(&["BLOCK", "0", "STREAMS", "s1", "s2", "$", "$"]));
                } else {
                    let id = if kind == 6 { max } else { "$" };
                    a.extend(words(&["BLOCK", "0", "STREAMS", &k, id]));
                }
            } else {
                a.extend(words(&["XREADGROUP", "GROUP", &g, &c]));
                a.extend(count);
                // A min-idle no pending entry reaches during a test (except released ones, whose
                // delivery time is 0): the claim timer never fires, so only the writes that
                // signal the key wake the reader, at the same point on both servers. (With a
                // small min-idle the re-check follows each server's millisecond ticks.)
                if kind == 2 && newer {
                    a.extend(words(&["CLAIM", "100000000"]));
                }
                // Both keys now and then: parked until either gets an entry (or loses the
                // group), then the whole command runs again over both.
                if kind == 5 {
                    a.extend(words(&["BLOCK", "0", "STREAMS", "s1", "s2", ">", ">"]));
                } else {
                    let id = if kind == 7 { max } else { ">" };
                    a.extend(words(&["BLOCK", "0", "STREAMS", &k, id]));
                }
            }
            a
        },
    );
    let await_ = (0..2u8).prop_map(|i| words(&[AWAIT, &i.to_string()]));
    // Each server's DUMP of a key restored into the other (see `swap`).
    let swap = pick(if newer { &["s1", "s2", IKEY] } else { KEYS }).prop_map(|k| words(&[SWAP, &k]));
    // A command run by another client while every key is watched (see `WATCHED`).
    let watched = plain(newer).prop_map(|cmd| {
        let mut a = words(&[WATCHED]);
        a.extend(cmd);
        a
    });
    // A transaction of a few commands (see `MULTI`).
    let multi = proptest::collection::vec(plain(newer), 1..4).prop_map(|cmds| {
        let mut a = words(&[MULTI]);
        for cmd in cmds {
            a.push(cmd.len().to_string());
            a.extend(cmd);
        }
        a
    });
    prop_oneof![
        50 => plain(newer),
        1 => swap,
        2 => block,
        1 => await_,
        2 => watched,
        2 => multi,
    ]
}

/// One command, as its arguments: a [`well_formed`] one, now and then with one argument
/// replaced by an extreme or malformed value of its kind (see [`careless`]).
fn plain(newer: bool) -> impl Strategy<Value = Vec<String>> {
    // Sometimes a second one: a missing group and a malformed ID, say.
    let replace = || proptest::option::weighted(0.25, (any::<Index>(), any::<Index>()));
    (well_formed(newer), replace(), replace()).prop_map(move |(mut cmd, first, second)| {
        // Commands on IKEY are left alone: their IDs come from the clock.
        if cmd.iter().any(|a| a == IKEY) {
            return cmd;
        }
        let slots = slots(&cmd);
        for (slot, value) in first.into_iter().chain(first.and(second)) {
            careless(&mut cmd, &slots, slot, value, newer);
        }
        cmd
    })
}

/// What an argument [`careless`] may replace is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Key,
    Group,
    /// An entry ID, a range bound, a group start or a MINID.
    Id,
    /// Any other number: COUNT, LIMIT, MAXLEN, `numids`, ENTRIESREAD.
    Number,
    /// A counter's new value, XSETID's ENTRIESADDED or XCLAIM's RETRYCOUNT: a number, but
    /// against 8.2.3 not 2^63 − 1, which 8.2.3's next XADD or delivery wraps to −2^63 (later
    /// Redis, like rill, stays at 2^63 − 1).
    Counter,
    /// A min-idle-time: replaced only by values that mean 0, more than any idle time a test
    /// sees, or nothing (an error), so what is claimed never depends on the clock.
    MinIdle,
    /// XCLAIM's IDLE or TIME: replaced only by values that are errors (a valid one would put
    /// the delivery time at the clock, see `plain`'s XCLAIM).
    Invalid,
}

/// Keys no sequence creates (unless a replaced XADD or MKSTREAM does).
const WILD_KEYS: &[&str] = &["s9"];
/// Groups no sequence creates.
const WILD_GROUPS: &[&str] = &["g9"];
/// Extreme and malformed IDs: `0-0` and ms-only forms, the largest ID and its neighbours, a
/// huge sequence, one past `u64`, the special IDs (valid in some positions only), exclusive
/// bounds at the edges, incomplete IDs (`ms-*`) and things that are not IDs. (Never a plain
/// `*`, which reads the clock; no 13-digit milliseconds, which `Session::tokens` would take
/// for the clock's.)
const WILD_IDS: &[&str] = &[
    "0-0",
    "0",
    "0-1",
    "5",
    "13-0",
    "18446744073709551615-18446744073709551615",
    "18446744073709551615-18446744073709551614",
    "18446744073709551615",
    "18446744073709551615-0",
    "18446744073709551614-18446744073709551615",
    "5-18446744073709551615",
    "0-18446744073709551615",
    "18446744073709551616",
    "18446744073709551616-0",
    "1-18446744073709551616",
    "-",
    "+",
    "$",
    ">",
    "(0-0",
    "(5-0",
    "(18446744073709551615-18446744073709551615",
    "(18446744073709551615",
    "(-",
    "(+",
    "-1",
    "-1-0",
    "1--1",
    "1-",
    "-0",
    "1-0-0",
    "01-0",
    "+1-0",
    "1-x",
    "1.5",
    "0-*",
    "5-*",
    "18446744073709551615-*",
    "x",
    "",
];
/// Extreme and malformed numbers: 0, ±1, the `i64` edges and one past them, `u64::MAX`, COUNT
/// near 2^59 (XAUTOCLAIM's limit, `LONG_MAX / 16`) and 2^63, 2^43 (from which Redis cannot
/// allocate XAUTOCLAIM's array), 2^32, and non-numbers. (Nothing in 2^41..2^43, where
/// whether Redis' XAUTOCLAIM allocation succeeds depends on its address space.)
const WILD_NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "-2",
    "2147483648",
    "4294967296",
    "8796093022208",
    "576460752303423487",
    "576460752303423488",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "007",
    "+1",
    "-0",
    "1.5",
    "1e3",
    "0x10",
    "x",
    "",
];
/// [`WILD_NUMBERS`] without 2^63 − 1 (see [`Slot::Counter`]).
const WILD_COUNTERS_8_2: &[&str] = &["0", "1", "-1", "4294967296", "576460752303423488", "9223372036854775808", "x"];
/// Min-idle values whose result does not depend on the clock (see [`Slot::MinIdle`]).
const WILD_MIN_IDLE: &[&str] =
    &["0", "-1", "-9223372036854775808", "9223372036854775807", "9223372036854775808", "1.5", "x", ""];
/// Values that are errors wherever a number goes.
const WILD_INVALID: &[&str] = &["9223372036854775808", "1.5", "x", ""];

/// Replace the argument of `cmd` in one of its `slots` (picked by `slot`) by a wild value of
/// that slot's kind (picked by `value`). `newer`: see [`Slot::Counter`].
fn careless(cmd: &mut [String], slots: &[(usize, Slot)], slot: Index, value: Index, newer: bool) {
    if slots.is_empty() {
        return;
    }
    let (at, kind) = slots[slot.index(slots.len())];
    let pool = match kind {
        Slot::Key => WILD_KEYS,
        Slot::Group => WILD_GROUPS,
        Slot::Id => WILD_IDS,
        Slot::Number => WILD_NUMBERS,
        Slot::Counter if newer => WILD_NUMBERS,
        Slot::Counter => WILD_COUNTERS_8_2,
        Slot::MinIdle => WILD_MIN_IDLE,
        Slot::Invalid => WILD_INVALID,
    };
    cmd[at] = pool[value.index(pool.len())].to_string();
}

/// Where `cmd` (as [`well_formed`] makes them) has keys, groups, IDs and numbers.
fn slots(cmd: &[String]) -> Vec<(usize, Slot)> {
    let up = upper_all(cmd);
    let word = |i: usize| up.get(i).map(String::as_str).unwrap_or_default();
    let mut out = Vec::new();
    let n = cmd.len();
    // The value after an option keyword, from `from` on (before `to`).
    let options = |out: &mut Vec<(usize, Slot)>, from: usize, to: usize| {
        let mut i = from;
        while i + 1 < to {
            let slot = match word(i) {
                "COUNT" | "LIMIT" | "ENTRIESREAD" => Slot::Number,
                "ENTRIESADDED" | "RETRYCOUNT" => Slot::Counter,
                "LASTID" | "MAXDELETEDID" => Slot::Id,
                "IDLE" | "TIME" => Slot::Invalid,
                "CLAIM" => Slot::MinIdle,
                "MAXLEN" | "MINID" => {
                    let kind = if word(i) == "MAXLEN" { Slot::Number } else { Slot::Id };
                    if matches!(word(i + 1), "=" | "~") {
                        i += 1;
                    }
                    out.push((i + 1, kind));
                    i += 2;
                    continue;
                }
                _ => {
                    i += 1;
                    continue;
                }
            };
            out.push((i + 1, slot));
            i += 2;
        }
    };
    // `IDS numids id ...` from `from` on.
    let ids_block = |out: &mut Vec<(usize, Slot)>, from: usize| {
        if let Some(at) = (from..n).find(|&i| word(i) == "IDS") {
            let numids: usize = cmd[at + 1].parse().unwrap();
            out.push((at + 1, Slot::Number));
            out.extend((at + 2..at + 2 + numids).map(|i| (i, Slot::Id)));
        }
    };
    match word(0) {
        "XADD" => {
            out.push((1, Slot::Key));
            // Options, then the ID, then the fields (not replaced: values, not arguments).
            let mut i = 2;
            while i < n {
                match word(i) {
                    "NOMKSTREAM" | "KEEPREF" | "DELREF" | "ACKED" => i += 1,
                    "MAXLEN" | "MINID" | "LIMIT" => {
                        options(&mut out, i, i + 3);
                        i += if matches!(word(i + 1), "=" | "~") { 3 } else { 2 };
                    }
                    _ => break,
                }
            }
            out.push((i, Slot::Id));
        }
        "XTRIM" => {
            out.push((1, Slot::Key));
            options(&mut out, 2, n);
        }
        "XDEL" => {
            out.push((1, Slot::Key));
            out.extend((2..n).map(|i| (i, Slot::Id)));
        }
        "XDELEX" => {
            out.push((1, Slot::Key));
            ids_block(&mut out, 2);
        }
        "XACKDEL" | "XNACK" => {
            out.extend([(1, Slot::Key), (2, Slot::Group)]);
            ids_block(&mut out, 3);
            options(&mut out, 3, n);
        }
        "XACK" => {
            out.extend([(1, Slot::Key), (2, Slot::Group)]);
            out.extend((3..n).map(|i| (i, Slot::Id)));
        }
        "XPENDING" => {
            out.extend([(1, Slot::Key), (2, Slot::Group)]);
            let at = if word(3) == "IDLE" {
                out.push((4, Slot::MinIdle));
                5
            } else {
                3
            };
            if n > at + 2 {
                out.extend([(at, Slot::Id), (at + 1, Slot::Id), (at + 2, Slot::Number)]);
            }
        }
        "XCLAIM" => {
            out.extend([(1, Slot::Key), (2, Slot::Group), (4, Slot::MinIdle)]);
            let options_at = (5..n).find(|&i| up[i].starts_with(|c: char| c.is_ascii_uppercase())).unwrap_or(n);
            out.extend((5..options_at).map(|i| (i, Slot::Id)));
            options(&mut out, options_at, n);
        }
        "XAUTOCLAIM" => {
            out.extend([(1, Slot::Key), (2, Slot::Group), (4, Slot::MinIdle), (5, Slot::Id)]);
            options(&mut out, 6, n);
        }
        "XRANGE" | "XREVRANGE" => {
            out.extend([(1, Slot::Key), (2, Slot::Id), (3, Slot::Id)]);
            options(&mut out, 4, n);
        }
        "XREAD" | "XREADGROUP" => {
            if word(0) == "XREADGROUP" {
                out.push((2, Slot::Group));
            }
            let streams = (1..n).find(|&i| word(i) == "STREAMS").unwrap_or(n);
            options(&mut out, 1, streams);
            let keys = n.saturating_sub(streams + 1) / 2;
            out.extend((streams + 1..streams + 1 + keys).map(|i| (i, Slot::Key)));
            out.extend((streams + 1 + keys..n).map(|i| (i, Slot::Id)));
        }
        "XSETID" => {
            out.extend([(1, Slot::Key), (2, Slot::Id)]);
            options(&mut out, 3, n);
        }
        "XGROUP" => {
            out.extend([(2, Slot::Key), (3, Slot::Group)]);
            if matches!(word(1), "CREATE" | "SETID") {
                out.push((4, Slot::Id));
                options(&mut out, 5, n);
            }
        }
        "XINFO" => {
            out.push((2, Slot::Key));
            if word(1) == "CONSUMERS" {
                out.push((3, Slot::Group));
            }
            options(&mut out, 3, n);
        }
        "XLEN" => out.push((1, Slot::Key)),
        _ => {}
    }
    out.retain(|&(i, _)| i < n);
    out
}

/// One well-formed command, as its arguments. `newer`: the reference is newer than 8.2.3, so
/// XGROUP DESTROY (see the module doc), XNACK and XREADGROUP CLAIM are included.
fn well_formed(newer: bool) -> impl Strategy<Value = Vec<String>> {
    let xadd = (pick(KEYS), any::<bool>(), proptest::option::of(trim(newer)), add_id(), fields()).prop_map(
        |(k, nomk, trim, id, fields)| {
            let mut a = words(&["XADD", &k]);
            if nomk {
                a.push("NOMKSTREAM".into());
            }
            a.extend(trim.unwrap_or_default());
            a.push(id);
            a.extend(fields);
            a
        },
    );
    let xdel = (pick(KEYS), ids(3)).prop_map(|(k, ids)| {
        let mut a = words(&["XDEL", &k]);
        a.extend(ids);
        a
    });
    let xtrim = (pick(KEYS), trim(newer)).prop_map(|(k, trim)| {
        let mut a = words(&["XTRIM", &k]);
        a.extend(trim);
        a
    });
    let xdelex = (pick(KEYS), refs(), ids(3)).prop_map(|(k, policy, ids)| {
        let mut a = words(&["XDELEX", &k]);
        a.extend(policy);
        a.extend(words(&["IDS", &ids.len().to_string()]));
        a.extend(ids);
        a
    });
    let xackdel = (pick(KEYS), pick(GROUPS), refs(), ids(3)).prop_map(|(k, g, policy, ids)| {
        let mut a = words(&["XACKDEL", &k, &g]);
        a.extend(policy);
        a.extend(words(&["IDS", &ids.len().to_string()]));
        a.extend(ids);
        a
    });
    let create = (pick(KEYS), pick(GROUPS), group_id(), any::<bool>(), proptest::option::of(0u64..8)).prop_map(
        |(k, g, id, mk, read)| {
            let mut a = words(&["XGROUP", "CREATE", &k, &g, &id]);
            if mk {
                a.push("MKSTREAM".into());
            }
            if let Some(n) = read {
                a.extend(words(&["ENTRIESREAD", &n.to_string()]));
            }
            a
        },
    );
    let setid = (pick(KEYS), pick(GROUPS), group_id(), proptest::option::of(0u64..8)).prop_map(|(k, g, id, read)| {
        let mut a = words(&["XGROUP", "SETID", &k, &g, &id]);
        if let Some(n) = read {
            a.extend(words(&["ENTRIESREAD", &n.to_string()]));
        }
        a
    });
    let first = if newer { 0 } else { 1 };
    let group_admin = (pick(KEYS), pick(GROUPS), pick(CONSUMERS), first..3).prop_map(|(k, g, c, op)| match op {
        0 => words(&["XGROUP", "DESTROY", &k, &g]),
        1 => words(&["XGROUP", "CREATECONSUMER", &k, &g, &c]),
        _ => words(&["XGROUP", "DELCONSUMER", &k, &g, &c]),
    });
    let read_id = prop_oneof![4 => Just(">".to_string()), 1 => Just("0".to_string()), 1 => id()];
    let readgroup = (
        pick(GROUPS),
        pick(CONSUMERS),
        proptest::option::of(1u64..4),
        any::<bool>(),
        pick(KEYS),
        read_id,
        proptest::option::of((pick(KEYS), prop_oneof![Just(">".to_string()), Just("0".to_string())])),
        any::<bool>(),
    )
        .prop_map(move |(g, c, count, noack, k, id, second, claim)| {
            let mut a = words(&["XREADGROUP", "GROUP", &g, &c]);
            if let Some(n) = count {
                a.extend(words(&["COUNT", &n.to_string()]));
            }
            if claim && newer {
                a.extend(words(&["CLAIM", "0"]));
            }
            if noack && id == ">" {
                a.push("NOACK".into());
            }
            a.push("STREAMS".into());
            match second {
                Some((k2, id2)) if k2 != k => a.extend([k, k2, id, id2]),
                _ => a.extend([k, id]),
            }
            a
        });
    let mode = pick(&["SILENT", "FAIL", "FATAL"]);
    let xnack = (pick(KEYS), pick(GROUPS), mode, ids(3), proptest::option::of(0u64..4), any::<bool>()).prop_map(
        move |(k, g, mode, ids, retry, force)| {
            if !newer {
                // Redis 8.2 has no XNACK.
                return words(&["XPENDING", &k, &g]);
            }
            let mut a = words(&["XNACK", &k, &g, &mode, "IDS", &ids.len().to_string()]);
            a.extend(ids);
            if let Some(n) = retry {
                a.extend(words(&["RETRYCOUNT", &n.to_string()]));
            }
            if force {
                a.push("FORCE".into());
            }
            a
        },
    );
    let xack = (pick(KEYS), pick(GROUPS), ids(3)).prop_map(|(k, g, ids)| {
        let mut a = words(&["XACK", &k, &g]);
        a.extend(ids);
        a
    });
    let range = proptest::option::of((bound(), bound(), 1u64..6));
    // IDLE only as 0 or more than any idle time: which entries are idle enough for a smaller one
    // would depend on the clock.
    let idle = proptest::option::of(pick(&["0", "9223372036854775807"]));
    let pending = (pick(KEYS), pick(GROUPS), range, proptest::option::of(pick(CONSUMERS)), idle).prop_map(
        |(k, g, range, c, idle)| {
            let mut a = words(&["XPENDING", &k, &g]);
            if let Some((start, end, n)) = range {
                if let Some(idle) = idle {
                    a.extend(words(&["IDLE", &idle]));
                }
                a.extend([start, end, n.to_string()]);
                a.extend(c);
            }
            a
        },
    );
    let xclaim = (
        (pick(KEYS), pick(GROUPS), pick(CONSUMERS), ids(3)),
        (any::<bool>(), any::<bool>(), proptest::option::of(0u64..5), proptest::option::of(id())),
        any::<bool>(),
    )
        .prop_map(|((k, g, c, ids), (justid, force, retry, lastid), idle)| {
            let mut a = words(&["XCLAIM", &k, &g, &c, "0"]);
            a.extend(ids);
            // Far enough back to come before everything else in the claim order whatever the
            // two servers' clocks read (a few ms back would land among other deliveries at a
            // place that depends on where each server's millisecond boundaries fell).
            if idle {
                a.extend(words(&["IDLE", "1000000"]));
            }
            if let Some(id) = lastid {
                a.extend(words(&["LASTID", &id]));
            }
            if justid {
                a.push("JUSTID".into());
            }
            if force {
                a.push("FORCE".into());
            }
            if let Some(n) = retry {
                a.extend(words(&["RETRYCOUNT", &n.to_string()]));
            }
            a
        });
    let count = proptest::option::of(1u64..4);
    let autoclaim = (pick(KEYS), pick(GROUPS), pick(CONSUMERS), bound(), count, any::<bool>()).prop_map(
        |(k, g, c, start, count, justid)| {
            let start = if start == "+" { "0".to_string() } else { start };
            let mut a = words(&["XAUTOCLAIM", &k, &g, &c, "0", &start]);
            if let Some(n) = count {
                a.extend(words(&["COUNT", &n.to_string()]));
            }
            if justid {
                a.push("JUSTID".into());
            }
            a
        },
    );
    let reads =
        (pick(KEYS), bound(), bound(), proptest::option::of(0u64..4), 0..7).prop_map(|(k, start, end, count, op)| {
            let mut a = match op {
                0 => words(&["XRANGE", &k, &start, &end]),
                1 => words(&["XREVRANGE", &k, &end, &start]),
                2 => return words(&["XLEN", &k]),
                3 => {
                    // `+`: the last entry (7.4+).
                    let after = if start == "-" { "0" } else { &start };
                    words(&["XREAD", "STREAMS", &k, after])
                }
                4 => return words(&["XINFO", "GROUPS", &k]),
                5 => return words(&["XINFO", "STREAM", &k]),
                _ => words(&["XINFO", "STREAM", &k, "FULL"]),
            };
            if let Some(n) = count {
                if op == 3 {
                    a.splice(1..1, words(&["COUNT", &n.to_string()]));
                } else {
                    a.extend(words(&["COUNT", &n.to_string()]));
                }
            }
            a
        });
    let consumers = (pick(KEYS), pick(GROUPS)).prop_map(|(k, g)| words(&["XINFO", "CONSUMERS", &k, &g]));
    let setid_stream = (pick(KEYS), id(), proptest::option::of((0u64..20, id()))).prop_map(|(k, id, extra)| {
        let mut a = words(&["XSETID", &k, &id]);
        if let Some((added, maxdel)) = extra {
            a.extend(words(&["ENTRIESADDED", &added.to_string(), "MAXDELETEDID", &maxdel]));
        }
        a
    });
    let other = pick(KEYS).prop_flat_map(|k| {
        prop_oneof![Just(words(&["DEL", &k])), Just(words(&["SET", &k, "x"])), Just(words(&["TYPE", &k])),]
    });
    let base = prop_oneof![
        10 => xadd,
        2 => xdel,
        2 => xtrim,
        2 => xdelex,
        2 => xackdel,
        1 => create,
        2 => setid,
        1 => group_admin,
        8 => readgroup,
        4 => xack,
        3 => xnack,
        3 => pending,
        3 => xclaim,
        3 => autoclaim,
        4 => reads,
        1 => consumers,
        1 => setid_stream,
        1 => other,
    ];
    // Redis 8.2 has no IDMP.
    if newer {
        prop_oneof![53 => base, 12 => idmp()].boxed()
    } else {
        base.boxed()
    }
}

/// Idempotent production on [`IKEY`] (Redis 8.6+): XADD with IDMP or IDMPAUTO (and without),
/// always with `*` (IDMP takes no other ID), so the IDs come from each server's clock and are
/// compared as tokens (see [`Session::tokens`]); XCFGSET with valid and invalid settings (a
/// duration long enough that no IID expires during a test); and reads, trims and group reads of
/// the key. Contents repeat often (two producers, four IIDs, [`fields`]), so duplicates, which
/// IDMPAUTO finds by content, are common; a small IDMP-MAXSIZE makes evictions common too.
fn idmp() -> impl Strategy<Value = Vec<String>> {
    let pid = prop_oneof![8 => pick(&["p1", "p2"]), 1 => Just(String::new())];
    let iid = prop_oneof![8 => pick(&["a", "b", "c", "d"]), 1 => Just(String::new())];
    let mode = prop_oneof![
        1 => Just(None),
        3 => (pid.clone(), iid).prop_map(|(p, i)| Some(vec!["IDMP".to_string(), p, i])),
        3 => pid.prop_map(|p| Some(vec!["IDMPAUTO".to_string(), p])),
    ];
    let add_id = prop_oneof![12 => Just("*".to_string()), 1 => Just("5-*".to_string()), 1 => id()];
    let xadd = (any::<bool>(), mode, proptest::option::of(0u64..4), add_id, fields()).prop_map(
        |(nomk, mode, maxlen, id, fields)| {
            let mut a = words(&["XADD", IKEY]);
            if nomk {
                a.push("NOMKSTREAM".into());
            }
            a.extend(mode.unwrap_or_default());
            if let Some(n) = maxlen {
                a.extend(words(&["MAXLEN", &n.to_string()]));
            }
            a.push(id);
            a.extend(fields);
            a
        },
    );
    let duration = pick(&["100", "200", "86400", "0", "86401", "x"]);
    let size = pick(&["1", "2", "3", "100", "0", "10001"]);
    let option = prop_oneof![
        duration.prop_map(|d| vec!["IDMP-DURATION".to_string(), d]),
        size.prop_map(|n| vec!["IDMP-MAXSIZE".to_string(), n]),
        Just(vec!["IDMP-MAXSIZE".to_string()]),
    ];
    let cfgset = proptest::collection::vec(option, 0..3).prop_map(|opts| {
        let mut a = words(&["XCFGSET", IKEY]);
        a.extend(opts.into_iter().flatten());
        a
    });
    let other = (0..9, pick(GROUPS), pick(CONSUMERS), 1u64..4).prop_map(|(op, g, c, n)| {
        let n = n.to_string();
        match op {
            0 => words(&["XINFO", "STREAM", IKEY]),
            1 => words(&["XINFO", "STREAM", IKEY, "FULL"]),
            2 => words(&["XRANGE", IKEY, "-", "+"]),
            3 => words(&["XTRIM", IKEY, "MAXLEN", &n]),
            4 => words(&["XGROUP", "CREATE", IKEY, &g, "0", "MKSTREAM"]),
            5 => words(&["XREADGROUP", "GROUP", &g, &c, "COUNT", &n, "STREAMS", IKEY, ">"]),
            6 => words(&["XAUTOCLAIM", IKEY, &g, &c, "0", "0-0", "COUNT", &n]),
            7 => words(&["XPENDING", IKEY, &g, "-", "+", "10"]),
            // Not DEL: a stream made again in the same millisecond reuses an ID string of the
            // deleted one on one server and maybe not on the other, which tokens cannot tell
            // from a real difference.
            _ => words(&["XREVRANGE", IKEY, "+", "-", "COUNT", &n]),
        }
    });
    prop_oneof![
        6 => xadd,
        2 => cfgset,
        4 => other,
    ]
}

/// The pseudo-command of [`swap`].
const SWAP: &str = "@swap";
/// `@block i CMD...`: send the blocking CMD on side connection `i` (0 or 1) of both servers
/// (nothing if one is already parked there); [`AWAIT`] `i`, or the end of the sequence, ends
/// it with CLIENT UNBLOCK and compares what each side got.
const BLOCK: &str = "@block";
/// `@await i`: see [`BLOCK`].
const AWAIT: &str = "@await";
/// `@multi n1 CMD1... n2 CMD2...`: the commands (of n1, n2 ... arguments) in MULTI / EXEC on
/// the main connection; every reply, EXEC's included, is compared.
const MULTI: &str = "@multi";
/// `@watched CMD...`: WATCH every key on the main connection, run CMD on another connection,
/// then MULTI / PING / EXEC on the main one: EXEC's reply (nil if CMD touched a watched key)
/// and CMD's are compared, so each command invalidates WATCH exactly when Redis' does.
const WATCHED: &str = "@watched";

/// DUMP `key` on both servers, then RESTORE (REPLACE) each payload into the other server: rill
/// must read Redis' serialisation of every state the sequences reach, and Redis rill's. The
/// results (RESTORE's reply, or DUMP's nil for a missing key) are compared as for any command,
/// and every later command runs on the swapped values.
fn swap(rill: &mut rill_testkit::RawClient, redis: &mut rill_testkit::RawClient, key: &str) -> (Value, Value) {
    let (from_rill, from_redis) = (rill.cmd_value(&["DUMP", key]), redis.cmd_value(&["DUMP", key]));
    let into_redis = redis.restore_dump(key, &from_rill);
    let refused = |v: &Value| matches!(v, Value::Error(_));
    if refused(&into_redis) && refused(&redis.restore_dump(key, &from_redis)) {
        // Redis cannot load its own DUMP of this state either (newer Redis refuses an
        // entries-read above entries-added, which its commands produce): no swap, nothing
        // changed on either side.
        return (Value::Nil, Value::Nil);
    }
    (rill.restore_dump(key, &from_redis), into_redis)
}

/// A start that gives the random commands something to work on: a few entries in each key and
/// one to three groups on each, created at `0`, `$` or an ID; with `newer`, also a few XADDs
/// with IDMP or IDMPAUTO to [`IKEY`] (some of them duplicates).
fn prelude(newer: bool) -> impl Strategy<Value = Vec<Vec<String>>> {
    let key = |k: &'static str| {
        (0u64..8, proptest::collection::vec(group_id(), 1..=3)).prop_map(move |(n, starts)| {
            let mut cmds: Vec<Vec<String>> =
                (1..=n).map(|ms| words(&["XADD", k, &format!("{ms}-0"), "f", &ms.to_string()])).collect();
            for (g, start) in GROUPS.iter().zip(starts) {
                cmds.push(words(&["XGROUP", "CREATE", k, g, &start, "MKSTREAM"]));
            }
            cmds
        })
    };
    let producer =
        (pick(&["p1", "p2"]), pick(&["a", "b"]), any::<bool>(), pick(&["1", "2"])).prop_map(|(p, iid, auto, v)| {
            let mode = if auto { words(&["IDMPAUTO", &p]) } else { words(&["IDMP", &p, &iid]) };
            let mut a = words(&["XADD", IKEY]);
            a.extend(mode);
            a.extend(words(&["*", "f", &v]));
            a
        });
    let idmp = proptest::collection::vec(producer, 0..if newer { 6 } else { 1 });
    // Node sizes: mostly a few entries, sometimes Redis' default 100 with a byte cap small
    // enough that the byte rule (the listpack's size as Redis measures it) closes nodes.
    let nodes = prop_oneof![
        3 => (2u64..=10).prop_map(|n| (n, 4096u64)),
        1 => (prop_oneof![Just(0u64), Just(100u64), 2u64..=10], 40u64..400).prop_map(|(n, b)| (n, b)),
    ];
    (nodes, key("s1"), key("s2"), idmp).prop_map(|((entries, bytes), b, c, d)| {
        let mut a = vec![
            words(&["CONFIG", "SET", "stream-node-max-entries", &entries.to_string()]),
            words(&["CONFIG", "SET", "stream-node-max-bytes", &bytes.to_string()]),
        ];
        a.extend(b);
        a.extend(c);
        a.extend(d);
        a
    })
}

/// Blank what depends on the clock or on the node layout (see the module doc).
fn normalise(cmd: &[String], v: Value, newer: bool) -> Value {
    let upper: Vec<String> = cmd.iter().take(2).map(|s| s.to_ascii_uppercase()).collect();
    match (upper[0].as_str(), upper.get(1).map(String::as_str)) {
        // Extended XPENDING rows: [id, consumer, idle, deliveries].
        ("XPENDING", _) if cmd.len() > 3 => match v {
            Value::Array(rows) => Value::Array(
                rows.into_iter()
                    .map(|row| match row {
                        Value::Array(mut r) if r.len() == 4 => {
                            r[2] = Value::Int(0);
                            Value::Array(r)
                        }
                        other => other,
                    })
                    .collect(),
            ),
            other => other,
        },
        ("XINFO", Some("CONSUMERS")) => each(v, |c| blank_times(c, &["idle", "inactive"])),
        // With CLAIM, entries are [id, fields, idle, deliveries].
        ("XREADGROUP", _) if upper_all(cmd).iter().any(|a| a == "CLAIM") => claim_idle(v),
        ("XINFO", Some("STREAM")) => {
            let idmp: &[&str] = if newer {
                &[]
            } else {
                &["idmp-duration", "idmp-maxsize", "pids-tracked", "iids-tracked", "iids-added", "iids-duplicates"]
            };
            full_times(drop_fields(drop_fields(v, &["radix-tree-nodes"]), idmp))
        }
        _ => v,
    }
}

/// XINFO STREAM FULL without its clock readings: delivery times in the groups' and consumers'
/// pending rows, and consumers' seen-time and active-time; also the groups' `nacked-count`,
/// which Redis 8.2 does not have. (The short form has none of these fields.)
fn full_times(v: Value) -> Value {
    let blank_row = |at: usize| {
        move |rows: Value| match rows {
            Value::Array(rows) => Value::Array(
                rows.into_iter()
                    .map(|row| match row {
                        Value::Array(mut r) if r.len() > at => {
                            r[at] = Value::Int(0);
                            Value::Array(r)
                        }
                        other => other,
                    })
                    .collect(),
            ),
            other => other,
        }
    };
    let consumer = move |c: Value| with_field(blank_times(c, &["seen-time", "active-time"]), "pending", blank_row(1));
    let group = move |g: Value| {
        // `nacked-count` comes with XNACK (after 8.2).
        let g = with_field(drop_fields(g, &["nacked-count"]), "pending", blank_row(2));
        with_field(g, "consumers", move |cs| each(cs, consumer))
    };
    with_field(v, "groups", move |gs| match gs {
        Value::Array(_) => each(gs, group),
        other => other,
    })
}

/// `f` applied to each element of an array.
fn each(v: Value, f: impl Fn(Value) -> Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.into_iter().map(f).collect()),
        other => other,
    }
}

/// A RESP2 flat key/value array or a RESP3 map with `f` applied to the value of `field`.
fn with_field(v: Value, field: &str, f: impl Fn(Value) -> Value) -> Value {
    let named = |k: &Value| k.as_bytes() == Some(field.as_bytes());
    match v {
        Value::Array(items) if items.len() % 2 == 0 => {
            let mut out = Vec::with_capacity(items.len());
            let mut it = items.into_iter();
            while let (Some(k), Some(val)) = (it.next(), it.next()) {
                let val = if named(&k) { f(val) } else { val };
                out.push(k);
                out.push(val);
            }
            Value::Array(out)
        }
        Value::Map(pairs) => {
            let pairs = pairs.into_iter().map(|(k, val)| if named(&k) { (k, f(val)) } else { (k, val) });
            Value::Map(pairs.collect())
        }
        other => other,
    }
}

fn upper_all(cmd: &[String]) -> Vec<String> {
    cmd.iter().map(|s| s.to_ascii_uppercase()).collect()
}

/// Every 4-element entry (`[id, fields, idle, deliveries]`) inside `v` with its idle time blanked.
fn claim_idle(v: Value) -> Value {
    match v {
        Value::Array(mut items)
            if items.len() == 4
                && matches!(items[0], Value::Bulk(_))
                && matches!(items[1], Value::Array(_) | Value::Nil) =>
        {
            items[2] = Value::Int(0);
            Value::Array(items)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(claim_idle).collect()),
        Value::Map(pairs) => Value::Map(pairs.into_iter().map(|(k, v)| (k, claim_idle(v))).collect()),
        other => other,
    }
}

/// A map with the clock readings in `fields` set to 0, except -1 ("never"), which is kept.
fn blank_times(v: Value, fields: &[&str]) -> Value {
    fields.iter().fold(v, |v, f| with_field(v, f, |t| if t == Value::Int(-1) { t } else { Value::Int(0) }))
}

/// A RESP2 flat key/value array or a RESP3 map without `fields`.
fn drop_fields(v: Value, fields: &[&str]) -> Value {
    let named = |k: &Value| k.as_bytes().is_some_and(|b| fields.iter().any(|f| f.as_bytes() == b));
    match v {
        Value::Array(items) if items.len() % 2 == 0 => {
            let mut out = Vec::new();
            let mut it = items.into_iter();
            while let (Some(k), Some(val)) = (it.next(), it.next()) {
                if !named(&k) {
                    out.push(k);
                    out.push(val);
                }
            }
            Value::Array(out)
        }
        Value::Map(pairs) => Value::Map(pairs.into_iter().filter(|(k, _)| !named(k)).collect()),
        other => other,
    }
}

/// The fixed seed of both random tests: the same cases on every run.
const FIXED_SEED: u64 = 0x5eed_0001;

#[test]
fn random_stream_and_group_sequences_match_redis() {
    match_redis(fuzz_seed(FIXED_SEED));
}

#[test]
fn random_stream_and_group_sequences_match_redis_fresh_seed() {
    if let Some(seed) = fresh_seed() {
        match_redis(seed);
    }
}

fn match_redis(seed: u64) {
    // A newer Redis to compare with instead of 8.2.3 (see the module doc).
    let newer = std::env::var("RILL_FUZZ_REDIS").ok().filter(|p| !p.is_empty());
    let redis = match &newer {
        Some(path) => PathBuf::from(path),
        None => match ReferenceServer::Redis8.require() {
            Some(path) => path,
            None => return,
        },
    };
    let redis = Server::start(ServerKind::Redis(ReferenceServer::Redis8), &redis, &[]);
    let rill = Server::rill();
    // The runner takes a `Fn`: the connections sit in a RefCell. Index 0: RESP2, 1: RESP3
    // (on the main connections; side connections speak RESP2).
    let sessions = std::cell::RefCell::new([
        Session::open(&rill, &redis, false, newer.is_some()),
        Session::open(&rill, &redis, true, newer.is_some()),
    ]);
    let cases = std::env::var("RILL_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(150);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed)));
    let strategy =
        (any::<bool>(), prelude(newer.is_some()), proptest::collection::vec(command(newer.is_some()), 1..40));
    let result = runner.run(&strategy, |(resp3, prelude, random)| {
        let mut all = sessions.borrow_mut();
        let cmds: Vec<Vec<String>> = prelude.into_iter().chain(random).collect();
        let diff = run_both(&mut all[usize::from(resp3)], &cmds, resp3);
        prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
        Ok(())
    });
    if let Err(e) = result {
        panic!("rill and Redis 8.2.3 differ (seed {seed}): {e}");
    }
}

/// Connections to both servers: rill's, then Redis'.
type Pair = [rill_testkit::RawClient; 2];

/// The connections one sequence runs on: the main pair, two side pairs, and another pair for
/// [`WATCHED`].
struct Session {
    main: Pair,
    sides: [Side; 2],
    other: Pair,
    /// Per server, the IDs it took from its clock, each with its token (see [`Session::tokens`]).
    clock_ids: [HashMap<Vec<u8>, usize>; 2],
    /// The reference is newer than 8.2.3 (it has IDMP; see [`plain`]).
    newer: bool,
}

impl Session {
    fn open(rill: &Server, redis: &Server, resp3: bool, newer: bool) -> Session {
        let pair = || [rill.connect(), redis.connect()];
        let mut main = pair();
        for c in main.iter_mut() {
            c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
            if resp3 {
                c.cmd(&["HELLO", "3"]);
            }
        }
        let side = || Side::open(rill, redis);
        Session { main, sides: [side(), side()], other: pair(), clock_ids: Default::default(), newer }
    }

    /// Server `k`'s reply with every ID taken from the clock (`*` on [`IKEY`]; its millisecond
    /// part has 13 digits) replaced by `T<n>`, its rank among such IDs in order of first
    /// appearance in that server's replies. The two servers' clocks give different IDs, but
    /// if they behave alike the same entries appear at the same places in both, so the tokens
    /// agree. After a swap each server holds the other's IDs, so the tables start afresh.
    fn tokens(&mut self, k: usize, v: Value) -> Value {
        let table = &mut self.clock_ids[k];
        let mut token = |b: &[u8]| -> Option<String> {
            let (ms, seq) = std::str::from_utf8(b).ok()?.split_once('-')?;
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
            // Exactly 13 digits: the clock's (not, say, the largest ID's 20).
            if ms.len() != 13 || !digits(ms) || !digits(seq) {
                return None;
            }
            let next = table.len();
            Some(format!("T{}", *table.entry(b.to_vec()).or_insert(next)))
        };
        fn walk(v: Value, token: &mut dyn FnMut(&[u8]) -> Option<String>) -> Value {
            match v {
                Value::Bulk(b) => token(&b).map_or(Value::Bulk(b), |t| Value::Bulk(t.into_bytes())),
                Value::Simple(s) => token(s.as_bytes()).map_or(Value::Simple(s), Value::Simple),
                Value::Array(items) => Value::Array(items.into_iter().map(|v| walk(v, token)).collect()),
                Value::Set(items) => Value::Set(items.into_iter().map(|v| walk(v, token)).collect()),
                Value::Push(items) => Value::Push(items.into_iter().map(|v| walk(v, token)).collect()),
                Value::Map(pairs) => {
                    Value::Map(pairs.into_iter().map(|(a, b)| (walk(a, token), walk(b, token))).collect())
                }
                other => other,
            }
        }
        walk(v, &mut token)
    }
}

/// End the command parked on side `i` (see [`Side::unpark`]) and compare what each server's
/// side got; the first difference, described, if any.
fn unpark(s: &mut Session, i: usize) -> Option<String> {
    let (cmd, unblock, got) = s.sides[i].unpark(&mut s.main)?;
    let mut seen: Vec<Value> = Vec::new();
    for (k, v) in got.into_iter().enumerate() {
        let v = normalise(&cmd, v, s.newer);
        seen.push(s.tokens(k, v));
    }
    let what = format!("side {i}: {}", cmd.join(" "));
    if unblock[0] != unblock[1] {
        let (a, b) = (&unblock[0], &unblock[1]);
        return Some(format!("{what}: still blocked?\n  rill:  {a}\n  redis: {b}"));
    }
    (seen[0] != seen[1]).then(|| format!("{what}\n  rill:  {}\n  redis: {}", seen[0], seen[1]))
}

/// See [`MULTI`]; the first difference, described, if any.
fn transaction(s: &mut Session, rest: &[String]) -> Option<String> {
    let cmds = multi_commands(rest);
    let mut got: Vec<Vec<Value>> = vec![Vec::new(), Vec::new()];
    for (k, replies) in got.iter_mut().enumerate() {
        s.main[k].cmd(&["MULTI"]);
        for cmd in &cmds {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            replies.push(parse_value(&s.main[k].request(&args).unwrap()).unwrap());
        }
        // EXEC's replies one by one, each blanked as its command's own reply would be.
        let exec = match parse_value(&s.main[k].cmd(&["EXEC"])).unwrap() {
            Value::Array(items) if items.len() == cmds.len() => {
                Value::Array(items.into_iter().zip(&cmds).map(|(v, cmd)| normalise(cmd, v, s.newer)).collect())
            }
            other => other,
        };
        replies.push(s.tokens(k, exec));
    }
    let (a, b) = (&got[0], &got[1]);
    let show = |v: &Vec<Value>| v.iter().map(Value::to_string).collect::<Vec<_>>().join(", ");
    (a != b).then(|| format!("\n  rill:  {}\n  redis: {}", show(a), show(b)))
}

/// See [`WATCHED`]; the first difference, described, if any.
fn watched(s: &mut Session, cmd: &[String]) -> Option<String> {
    let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
    let mut got: Vec<(Value, Value)> = Vec::new();
    for k in 0..2 {
        let mut watch = vec!["WATCH"];
        watch.extend(KEYS);
        watch.push(IKEY);
        s.main[k].cmd(&watch);
        let reply = normalise(cmd, parse_value(&s.other[k].request(&args).unwrap()).unwrap(), s.newer);
        let reply = s.tokens(k, reply);
        s.main[k].cmd(&["MULTI"]);
        s.main[k].cmd(&["PING"]);
        let exec = parse_value(&s.main[k].cmd(&["EXEC"])).unwrap();
        got.push((reply, exec));
    }
    let (a, b) = (&got[0], &got[1]);
    (a != b).then(|| format!("reply, EXEC after it\n  rill:  {}, {}\n  redis: {}, {}", a.0, a.1, b.0, b.1))
}

/// Run `cmds` on both servers (from an empty keyspace), comparing replies; the first
/// difference, described, if any.
fn run_both(s: &mut Session, cmds: &[Vec<String>], resp3: bool) -> Option<String> {
    for c in s.main.iter_mut() {
        c.cmd(&["FLUSHALL"]);
    }
    s.clock_ids = Default::default();
    let proto = if resp3 { "RESP3" } else { "RESP2" };
    for cmd in cmds {
        let side = || cmd.get(1).and_then(|i| i.parse::<usize>().ok()).unwrap_or(0) % 2;
        let (ra, rb) = match cmd[0].as_str() {
            SWAP => {
                let [a, b] = &mut s.main;
                let replies = swap(a, b, &cmd[1]);
                s.clock_ids = Default::default();
                replies
            }
            BLOCK => {
                s.sides[side()].park(&mut s.main, cmd[2..].to_vec());
                continue;
            }
            AWAIT => match unpark(s, side()) {
                Some(diff) => return Some(diff),
                None => continue,
            },
            MULTI => match transaction(s, &cmd[1..]) {
                Some(diff) => return Some(format!("{} ({proto}): {diff}", cmd.join(" "))),
                None => continue,
            },
            WATCHED => match watched(s, &cmd[1..]) {
                Some(diff) => return Some(format!("{} ({proto}): {diff}", cmd.join(" "))),
                None => continue,
            },
            _ => {
                let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
                let [a, b] = &mut s.main;
                let ra = normalise(cmd, parse_value(&a.request(&args).unwrap()).unwrap(), s.newer);
                let rb = normalise(cmd, parse_value(&b.request(&args).unwrap()).unwrap(), s.newer);
                (s.tokens(0, ra), s.tokens(1, rb))
            }
        };
        if ra != rb {
            return Some(format!("{} ({proto})\n  rill:  {ra}\n  redis: {rb}", cmd.join(" ")));
        }
    }
    (0..2).find_map(|i| unpark(s, i))
}

/// Sequences the random test once found differences in (fixed since), kept as plain cases.
#[test]
fn sequences_that_once_differed_match_redis() {
    let Some(redis) = Server::reference(ReferenceServer::Redis8) else { return };
    let rill = Server::rill();
    let mut session = Session::open(&rill, &redis, false, false);
    let cases: &[&[&str]] = &[
        // Node boundaries: the byte rule measures the node as Redis' listpack (here 3 entries
        // fit in 40 bytes, with a longer value only 2), and counts deleted entries.
        &[
            "CONFIG SET stream-node-max-entries 0",
            "CONFIG SET stream-node-max-bytes 40",
            "XADD s 1-0 f 1",
            "XADD s 2-0 f 2",
            "XADD s 3-0 f 3",
            "XADD s 4-0 f 4",
            "XADD s 5-0 f longer-value",
            "XADD s 6-0 f 6",
            "XDEL s 6-0",
            "XADD s 7-0 f 7",
            "XINFO STREAM s",
            "XTRIM s MAXLEN ~ 1",
            "XINFO STREAM s",
            "CONFIG SET stream-node-max-entries 4",
            "CONFIG SET stream-node-max-bytes 4096",
        ],
        // An exact MINID trim that marks the live rest of a node whose newest entry was
        // deleted leaves a node of deleted entries: Redis keeps it, appends go into it, and a
        // `~` trim removes it with them.
        &[
            "XADD s 1-0 f v",
            "XADD s 2-0 f v",
            "XADD s 3-0 f v",
            "XDEL s 3-0",
            "XTRIM s MINID 3",
            "XINFO STREAM s FULL",
            "XADD s 4-0 f v",
            "XADD s 5-0 f v",
            "XINFO STREAM s",
            "XTRIM s MAXLEN ~ 1",
            "XINFO STREAM s",
        ],
        // An ENTRIESREAD ahead of entries-added: lag goes negative.
        &[
            "XADD s 1-0 f 1",
            "XADD s 2-0 f 2",
            "XGROUP CREATE s g $",
            "XGROUP SETID s g 1-0 ENTRIESREAD 2",
            "XREADGROUP GROUP g c STREAMS s >",
            "XINFO GROUPS s",
            "@swap s",
            "XINFO GROUPS s",
        ],
        // Redis' DUMP of a node whose entries are all deleted (an exact trim leaves it).
        &[
            "XADD s 1-0 f 1",
            "XADD s 2-0 f 2",
            "XADD s 3-0 f 3",
            "XADD s 4-0 f 4",
            "XGROUP CREATE s g $",
            "XDELEX s IDS 1 4-0",
            "XTRIM s MINID 4",
            "@swap s",
            "XINFO STREAM s",
            "XADD s 5-0 f 5",
            "XRANGE s - +",
        ],
        // A careless client's arguments (issue 16): a COUNT Redis cannot allocate XAUTOCLAIM's
        // array for, history from the largest ID (which Redis takes for `>`), and a malformed ID
        // to XACKDEL on a missing group.
        &[
            "XADD s 1-0 f 1",
            "XGROUP CREATE s g 0",
            "XAUTOCLAIM s g c 0 0 COUNT 576460752303423487",
            "XAUTOCLAIM s g c 0 0 COUNT 8796093022208",
            "XREADGROUP GROUP g c STREAMS s 18446744073709551615-18446744073709551615",
            "XREADGROUP GROUP g c STREAMS s 18446744073709551615-18446744073709551615",
            "XACKDEL s nope IDS 2 1-0 x",
            "XINFO GROUPS s",
        ],
    ];
    for case in cases {
        let cmds: Vec<Vec<String>> = case.iter().map(|line| line.split(' ').map(str::to_string).collect()).collect();
        if let Some(diff) = run_both(&mut session, &cmds, false) {
            panic!("{diff}");
        }
    }
}

/// What a client can observe of the stream keys, to compare before and after a restart: each
/// key's type and XINFO STREAM FULL (every entry, group, pending record with its delivery time
/// and count, and consumer with its seen and active times, all exact, and the number of nodes,
/// which snapshots and replay keep), XINFO GROUPS, and each group's XINFO CONSUMERS
/// (idle times, which move with the clock, blanked).
fn picture(c: &mut rill_testkit::RawClient) -> crate::common::Picture {
    let mut out = Vec::new();
    let mut ask = |c: &mut rill_testkit::RawClient, cmd: Vec<String>| {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let v = parse_value(&c.cmd(&args)).unwrap();
        let v = match cmd[1].as_str() {
            "CONSUMERS" => normalise(&cmd, v, true),
            // A snapshot keeps the node layout (`radix-tree-keys`); the rax's inner node count
            // is Redis' own structure, which rill only estimates.
            "STREAM" => drop_fields(v, &["radix-tree-nodes"]),
            _ => v,
        };
        out.push((cmd.join(" "), v.clone()));
        v
    };
    for key in KEYS.iter().chain([&IKEY]) {
        ask(c, words(&["TYPE", key]));
        ask(c, words(&["XINFO", "STREAM", key, "FULL", "COUNT", "0"]));
        if let Value::Array(groups) = ask(c, words(&["XINFO", "GROUPS", key])) {
            for g in groups {
                if let Some(name) = g.get("name").and_then(Value::as_bytes) {
                    let name = String::from_utf8_lossy(name).into_owned();
                    ask(c, words(&["XINFO", "CONSUMERS", key, &name]));
                }
            }
        }
    }
    out
}

/// Random sequences against rill with the log on (`appendfsync always`), sometimes compacted
/// halfway: after `kill -9` and a restart in the same directory the state is what it was.
#[test]
fn random_sequences_survive_kill9_and_compaction() {
    survive_kill9(fuzz_seed(FIXED_SEED));
}

#[test]
fn random_sequences_survive_kill9_and_compaction_fresh_seed() {
    if let Some(seed) = fresh_seed() {
        survive_kill9(seed);
    }
}

fn survive_kill9(seed: u64) {
    let dir = rill_testkit::TempDir::new("rill-fuzz-restart");
    let args = ["--appendonly", "yes", "--appendfsync", "always", "--stream-node-max-entries", "4"];
    let proc = std::cell::RefCell::new(Some(rill_testkit::Proc::start(dir.path(), &args)));
    let cases = std::env::var("RILL_FUZZ_RESTARTS").ok().and_then(|v| v.parse().ok()).unwrap_or(25);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed)));
    let strategy = (
        prelude(true),
        proptest::collection::vec((command(true), proptest::bool::weighted(0.1)), 1..40),
        any::<Option<u8>>(),
    );
    let result = runner.run(&strategy, |(prelude, random, rewrite_at)| {
        let mut slot = proc.borrow_mut();
        let p = slot.take().unwrap();
        let mut c = p.client();
        c.cmd(&["FLUSHALL"]);
        let rewrite_at = rewrite_at.map(|n| usize::from(n) % (prelude.len() + random.len()));
        // Now and then a pause, so times recorded by different commands differ.
        let steps = prelude.iter().map(|cmd| (cmd, false)).chain(random.iter().map(|(cmd, p)| (cmd, *p)));
        for (i, (cmd, pause)) in steps.enumerate() {
            // Of the pseudo-commands only WATCHED's and MULTI's commands matter here: writes.
            let run: Vec<&[String]> = match cmd[0].as_str() {
                WATCHED => vec![&cmd[1..]],
                MULTI => multi_commands(&cmd[1..]),
                _ if cmd[0].starts_with('@') => Vec::new(),
                // The prelude's node sizes: a restart replays the log under the start-up
                // configuration (as Redis does), so the layout compared after it is the one
                // these would change.
                "CONFIG" => Vec::new(),
                _ => vec![&cmd[..]],
            };
            // A transaction is logged as one unit: run it as one here too.
            c.run_all(&run, cmd[0] == MULTI);
            if pause {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            if Some(i) == rewrite_at {
                c.rewrite_log();
            }
        }
        let (p, diff) = crate::common::kill9_and_compare(p, &mut c, dir.path(), &args, picture);
        *slot = Some(p);
        prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
        Ok(())
    });
    if let Err(e) = result {
        panic!("state changed across a restart (seed {seed}): {e}");
    }
}

/// rill → rill replication of the stream fuzz's well-formed commands, newer ones included
/// (XNACK, XADD IDMP/IDMPAUTO, XDELEX/XACKDEL, XCFGSET, CLAIM, DESTROY): a rill replica attached
/// to a rill primary over Redis' protocol, sent rill's own record of each unit (`capa rill`),
/// ends each case equal to its primary, key by key, exactly — XINFO STREAM FULL (PELs with
/// owners, delivery times and counts, NACK counts, the consumers' seen- and active-times) and
/// the short form (IDMP state included; the radix-tree counts depend on how the node was
/// built).
#[test]
fn a_rill_replica_equals_its_primary_after_the_stream_fuzz() {
    let seed = fuzz_seed(FIXED_SEED ^ 0x0005_EB11_CA7E);
    // Nodes of another size on the replica: what travels must not depend on the layout.
    let primary = Server::rill_with(&["--stream-node-max-entries", "4"]);
    let replica = Server::rill_with(&["--stream-node-max-entries", "3"]);
    let (mut p, mut r) = (primary.connect(), replica.connect());
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]), b"+OK\r\n");
    crate::replica_link::wait_caught_up(&mut p, &mut r);
    let cases = std::env::var("RILL_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed)));
    let strategy = (prelude(true), proptest::collection::vec(well_formed(true), 1..40));
    let clients = std::cell::RefCell::new((p, r));
    // Every field but the radix-tree counts: what Redis' forms cannot carry (a consumer's
    // seen-time, a cursor's entries-read given past what the stream added) included.
    let picture = |c: &mut rill_testkit::RawClient, key: &str| {
        let full =
            drop_fields(c.cmd_value(&["XINFO", "STREAM", key, "FULL"]), &["radix-tree-keys", "radix-tree-nodes"]);
        let short = drop_fields(c.cmd_value(&["XINFO", "STREAM", key]), &["radix-tree-keys", "radix-tree-nodes"]);
        (crate::replica_link::text(&full), crate::replica_link::text(&short))
    };
    let result = runner.run(&strategy, |(prelude, random)| {
        let (p, r) = &mut *clients.borrow_mut();
        p.cmd(&["FLUSHALL"]);
        for cmd in prelude.iter().chain(random.iter()) {
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            p.cmd_value(&args);
        }
        crate::replica_link::wait_caught_up(p, r);
        for key in KEYS.iter().copied().chain([IKEY]) {
            let (ours, theirs) = (picture(p, key), picture(r, key));
            prop_assert_eq!(ours, theirs, "{} differs on the replica after {:?}", key, random);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("a rill replica differs from its primary (seed {seed}): {e}");
    }
}
