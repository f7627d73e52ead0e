//! Consumer-group command tests: each group command through the command table, the two user
//! flows of the consumer-groups issue, blocking re-runs, and replay of the effect records.
//! Expected replies were compared with redis-server 8.2.3 (and the 2026 unstable tree's test
//! suite for XNACK and CLAIM).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::cmd_tests::{info_field, show, Harness};
use super::group::{GroupEffect, EFFECT_LOG};
use crate::Value;
use bytes::Bytes;

fn h() -> Harness {
    EFFECT_LOG.with(|l| l.borrow_mut().clear());
    Harness::new()
}

/// A harness with stream `s` holding entries 1-0 .. n-0 (`f` = `v<i>`) and group `g` at 0.
fn with_entries(n: u64) -> Harness {
    let mut h = h();
    for i in 1..=n {
        h.run(&format!("XADD s {i}-0 f v{i}"));
    }
    assert_eq!(h.run("XGROUP CREATE s g 0 MKSTREAM"), "+OK");
    h
}

fn check_invariants(h: &Harness, key: &str) {
    assert!(h.stream(key).validate_groups(), "group invariants of {key}");
    assert!(h.stream(key).validate(), "stream invariants of {key}");
}

const NOGROUP_READ: &str = "-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option";

// ---------------------------------------------------------------------------------------------
// XGROUP
// ---------------------------------------------------------------------------------------------

#[test]
fn xgroup_create_and_errors() {
    let mut h = h();
    assert_eq!(
        h.run("XGROUP CREATE s g $"),
        "-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want \
         to use the MKSTREAM option to create an empty stream automatically."
    );
    assert_eq!(h.run("XGROUP CREATE s g $ MKSTREAM"), "+OK");
    assert_eq!(h.run("XGROUP CREATE s g $"), "-BUSYGROUP Consumer Group name already exists");
    assert_eq!(h.run("XGROUP CREATE s g2 - "), "-ERR Invalid stream ID specified as stream command argument");
    assert_eq!(h.run("XGROUP CREATE s g2 0 ENTRIESREAD -2"), "-ERR value for ENTRIESREAD must be positive or -1");
    assert_eq!(h.run("XGROUP CREATE s g2 0 ENTRIESREAD x"), "-ERR value is not an integer or out of range");
    assert_eq!(
        h.run("XGROUP CREATE s g2 0 FOO"),
        "-ERR unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."
    );
    assert_eq!(h.run("XGROUP CREATE s"), "-ERR wrong number of arguments for 'xgroup|create' command");
    h.run("XADD s 5-0 a b");
    // ENTRIESREAD is clamped to entries-added.
    assert_eq!(h.run("XGROUP CREATE s g3 0 ENTRIESREAD 100"), "+OK");
    assert_eq!(h.stream("s").group(b"g3").and_then(|g| g.entries_read), Some(1));
    h.run("SET str x");
    assert_eq!(
        h.run("XGROUP CREATE str g $ MKSTREAM"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(h.run("XINFO GROUPS s").matches("name=").count(), 2);
}

#[test]
fn xgroup_setid_destroy_consumers() {
    let mut h = with_entries(3);
    assert_eq!(h.run("XGROUP SETID s nope 0"), "-NOGROUP No such consumer group 'nope' for key name 's'");
    assert_eq!(h.run("XGROUP SETID s g $ ENTRIESREAD 3"), "+OK");
    assert!(info_field(&mut h, "XINFO STREAM s FULL", "groups").contains("last-delivered-id=3-0"));
    assert_eq!(h.run("XGROUP SETID s g - "), "+OK");
    assert_eq!(
        h.run("XGROUP SETID s g 0 ENTRIESREAD"),
        "-ERR unknown subcommand or wrong number of arguments for 'SETID'. Try XGROUP HELP."
    );
    assert_eq!(h.run("XGROUP CREATECONSUMER s g alice"), ":1");
    assert_eq!(h.run("XGROUP CREATECONSUMER s g alice"), ":0");
    h.run("XREADGROUP GROUP g bob COUNT 2 STREAMS s >");
    assert_eq!(h.run("XGROUP DELCONSUMER s g bob"), ":2");
    assert_eq!(h.run("XGROUP DELCONSUMER s g bob"), ":0");
    assert_eq!(h.run("XPENDING s g"), "[:0 nil nil nil*]");
    assert_eq!(h.run("XGROUP DESTROY s g"), ":1");
    assert_eq!(h.run("XGROUP DESTROY s g"), ":0");
    assert!(h.run("XGROUP DESTROY nokey g").starts_with("-ERR The XGROUP subcommand requires"));
    assert!(h.run("XGROUP HELP").starts_with("[+XGROUP <subcommand>"));
    check_invariants(&h, "s");
}

// ---------------------------------------------------------------------------------------------
// XREADGROUP
// ---------------------------------------------------------------------------------------------

#[test]
fn xreadgroup_new_history_noack() {
    let mut h = with_entries(3);
    assert_eq!(h.run("XREADGROUP GROUP g alice COUNT 2 STREAMS s >"), "[[s [[1-0 [f v1]] [2-0 [f v2]]]]]");
    assert_eq!(h.run("XREADGROUP GROUP g alice NOACK STREAMS s >"), "[[s [[3-0 [f v3]]]]]");
    assert_eq!(h.run("XREADGROUP GROUP g alice STREAMS s >"), "nil*");
    // History: only the consumer's own pending entries, after the given ID; counts go up.
    assert_eq!(h.run("XREADGROUP GROUP g alice STREAMS s 0"), "[[s [[1-0 [f v1]] [2-0 [f v2]]]]]");
    assert_eq!(h.run("XREADGROUP GROUP g alice STREAMS s 1"), "[[s [[2-0 [f v2]]]]]");
    assert_eq!(h.run("XREADGROUP GROUP g bob STREAMS s 0"), "[[s []]]");
    assert_eq!(h.run("XPENDING s g - + 10"), "[[1-0 alice :0 :2] [2-0 alice :0 :3]]");
    // A deleted payload shows as [id nil] and keeps its count.
    h.run("XDEL s 1-0");
    assert_eq!(h.run("XREADGROUP GROUP g alice STREAMS s 0"), "[[s [[1-0 nil*] [2-0 [f v2]]]]]");
    assert_eq!(h.run("XPENDING s g - + 10"), "[[1-0 alice :0 :2] [2-0 alice :0 :4]]");
    check_invariants(&h, "s");
}

#[test]
fn xreadgroup_errors() {
    let mut h = with_entries(1);
    assert!(h.run("XREADGROUP GROUP g alice STREAMS s $").contains("The $ ID is meaningless"));
    assert!(h.run("XREADGROUP GROUP g alice STREAMS s +").contains("The + ID is meaningless"));
    assert_eq!(
        h.run("XREADGROUP GROUP nope alice STREAMS s >"),
        "-NOGROUP No such key 's' or consumer group 'nope' in XREADGROUP with GROUP option"
    );
    assert_eq!(h.run("XREADGROUP COUNT 1 STREAMS s > x y"), "-ERR Missing GROUP option for XREADGROUP");
    assert_eq!(
        h.run("XREADGROUP GROUP g alice STREAMS s t >"),
        "-ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."
    );
    assert_eq!(
        h.run("XREADGROUP GROUP g alice CLAIM x STREAMS s >"),
        "-ERR min-idle-time is not an integer or out of range"
    );
    assert_eq!(h.run("XREADGROUP GROUP g alice CLAIM -1 STREAMS s >"), "-ERR min-idle-time must be a positive integer");
    h.run("SET str x");
    assert_eq!(
        h.run("XREADGROUP GROUP g alice STREAMS str >"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // Validation of every key happens before anything changes: no consumer was created.
    assert!(h.run("XREADGROUP GROUP g carol STREAMS s nokey > >").starts_with("-NOGROUP"));
    assert_eq!(h.run("XINFO CONSUMERS s g"), "[]");
}

#[test]
fn xreadgroup_setid_backwards_reowns_with_count_one() {
    let mut h = with_entries(2);
    h.run("XREADGROUP GROUP g alice STREAMS s >");
    h.run("XREADGROUP GROUP g alice STREAMS s 0");
    h.run("XGROUP SETID s g 0");
    assert_eq!(h.run("XREADGROUP GROUP g bob COUNT 1 STREAMS s >"), "[[s [[1-0 [f v1]]]]]");
    assert_eq!(h.run("XPENDING s g - + 10"), "[[1-0 bob :0 :1] [2-0 alice :0 :2]]");
    check_invariants(&h, "s");
}

#[test]
fn xreadgroup_blocks_and_reruns() {
    let mut h = with_entries(0);
    assert_eq!(h.run("XREADGROUP GROUP g alice BLOCK 100 STREAMS s >"), "nil*");
    let req = h.blocked.clone().expect("blocked");
    assert_eq!(req.keys, vec![Bytes::from("s")]);
    assert_eq!(req.deadline_ms, Some(h.now_ms + 100));
    assert_eq!(req.wake_at_ms, None);
    // The consumer exists although the command blocked.
    assert!(h.run("XINFO CONSUMERS s g").contains("name=alice"));
    // Two readers of one group race for one entry: the second blocks again, same deadline.
    h.run("XADD s 1-0 f v");
    h.deadline_override = Some(req.deadline_ms);
    assert_eq!(h.run("XREADGROUP GROUP g alice BLOCK 100 STREAMS s >"), "[[s [[1-0 [f v]]]]]");
    assert!(h.blocked.is_none());
    assert_eq!(h.run("XREADGROUP GROUP g bob BLOCK 100 STREAMS s >"), "nil*");
    assert_eq!(h.blocked.as_ref().and_then(|b| b.deadline_ms), req.deadline_ms);
    // Destroyed group, deleted key, type change: the re-run fails.
    h.run("XGROUP DESTROY s g");
    assert_eq!(h.run("XREADGROUP GROUP g bob BLOCK 100 STREAMS s >"), NOGROUP_READ);
    h.run("XGROUP CREATE s g $");
    h.run("DEL s");
    assert_eq!(h.run("XREADGROUP GROUP g bob BLOCK 100 STREAMS s >"), NOGROUP_READ);
    h.engine.insert(0, Bytes::from("s"), Value::Str(Bytes::from("x")));
    assert!(h.run("XREADGROUP GROUP g bob BLOCK 100 STREAMS s >").starts_with("-WRONGTYPE"));
    // Inside MULTI nothing blocks.
    h.deadline_override = None;
    let mut h2 = with_entries(0);
    h2.no_block = true;
    assert_eq!(h2.run("XREADGROUP GROUP g alice BLOCK 0 STREAMS s >"), "nil*");
    assert!(h2.blocked.is_none());
}

#[test]
fn xgroup_destroy_signals_blocked_readers() {
    let mut h = with_entries(0);
    h.engine.blocking_keys.insert((0, Bytes::from("s")), 1);
    h.run("XGROUP DESTROY s g");
    assert_eq!(h.engine.take_ready_keys(), vec![(0, Bytes::from("s"))]);
    // SETID does not signal.
    h.run("XGROUP CREATE s g 0");
    h.run("XGROUP SETID s g 0");
    assert!(h.engine.take_ready_keys().is_empty());
}

#[test]
fn group_bookkeeping_does_not_touch_watch() {
    let mut h = with_entries(2);
    h.engine.watch.watch(7, 0, Bytes::from("s"), false);
    for cmd in [
        "XREADGROUP GROUP g alice STREAMS s >",
        "XACK s g 1-0",
        "XCLAIM s g bob 0 2-0",
        "XAUTOCLAIM s g bob 0 0",
        "XNACK s g FAIL IDS 1 2-0",
        "XGROUP SETID s g 0",
        "XGROUP CREATECONSUMER s g carol",
        "XGROUP DELCONSUMER s g carol",
        "XGROUP DESTROY s g",
    ] {
        h.run(cmd);
        assert!(!h.engine.watch.is_dirty(7), "{cmd} invalidated WATCH");
    }
    h.run("XADD s 3-0 f v");
    assert!(h.engine.watch.is_dirty(7));
}

#[test]
fn xreadgroup_claim_serves_nack_zone_then_idle_then_new() {
    let mut h = with_entries(4);
    h.run("XREADGROUP GROUP g alice COUNT 3 STREAMS s >");
    h.now_ms += 50;
    h.run("XNACK s g FAIL IDS 1 2-0");
    h.now_ms += 100;
    // 2-0 (NACK zone, idle = now), then 1-0 and 3-0 (idle 150), then the new 4-0.
    let now = h.now_ms;
    assert_eq!(
        h.run("XREADGROUP GROUP g bob CLAIM 100 STREAMS s >"),
        format!("[[s [[2-0 [f v2] :{now} :1] [1-0 [f v1] :150 :1] [3-0 [f v3] :150 :1] [4-0 [f v4] :0 :0]]]]")
    );
    assert_eq!(h.run("XPENDING s g - + 10"), "[[1-0 bob :0 :2] [2-0 bob :0 :2] [3-0 bob :0 :2] [4-0 bob :0 :1]]");
    // Nothing idle enough and nothing new: not served.
    assert_eq!(h.run("XREADGROUP GROUP g carol CLAIM 100 STREAMS s >"), "nil*");
    // Blocking asks to be woken when the oldest entry becomes claimable.
    h.run("XREADGROUP GROUP g carol BLOCK 0 CLAIM 100 STREAMS s >");
    assert_eq!(h.blocked.as_ref().and_then(|b| b.wake_at_ms), Some(h.now_ms + 100));
    // COUNT covers claimed and new together. Bob's four entries share one delivery time:
    // they are claimed in the order bob got them (2-0 first), not by ID.
    h.now_ms += 200;
    h.run("XADD s 5-0 f v5");
    assert_eq!(h.run("XREADGROUP GROUP g carol COUNT 1 CLAIM 100 STREAMS s >"), "[[s [[2-0 [f v2] :200 :2]]]]");
    assert_eq!(
        h.run("XREADGROUP GROUP g carol COUNT 4 CLAIM 100 STREAMS s >"),
        "[[s [[1-0 [f v1] :200 :2] [3-0 [f v3] :200 :2] [4-0 [f v4] :200 :1] [5-0 [f v5] :0 :0]]]]"
    );
    check_invariants(&h, "s");
}

#[test]
fn claim_readers_with_nothing_pending_recheck_at_most_every_100_ms() {
    let mut h = with_entries(2);
    h.run("XGROUP SETID s g $");
    // Nothing pending: re-checked after min-idle, but no sooner than 100 ms, at a whole
    // multiple of 100 ms (so many readers' re-checks fall together).
    h.now_ms = 1_000_030;
    h.run("XREADGROUP GROUP g a BLOCK 0 CLAIM 10 STREAMS s >");
    assert_eq!(h.blocked.take().and_then(|b| b.wake_at_ms), Some(1_000_200));
    h.run("XREADGROUP GROUP g a BLOCK 0 CLAIM 500 STREAMS s >");
    assert_eq!(h.blocked.take().and_then(|b| b.wake_at_ms), Some(1_000_600));
    h.now_ms = 1_000_100;
    h.run("XREADGROUP GROUP g a BLOCK 0 CLAIM 0 STREAMS s >");
    assert_eq!(h.blocked.take().and_then(|b| b.wake_at_ms), Some(1_000_200));
    check_invariants(&h, "s");
}

// ---------------------------------------------------------------------------------------------
// XACK / XACKDEL
// ---------------------------------------------------------------------------------------------

#[test]
fn xack_and_xackdel() {
    let mut h = with_entries(4);
    assert_eq!(h.run("XACK nokey g x"), ":0");
    assert_eq!(h.run("XACK s nope x"), ":0");
    h.run("XREADGROUP GROUP g alice STREAMS s >");
    assert_eq!(h.run("XACK s g 1-0 x"), "-ERR Invalid stream ID specified as stream command argument");
    assert_eq!(h.run("XACK s g 1-0 1-0 9-0"), ":1");
    h.run("XGROUP CREATE s other 0");
    h.run("XREADGROUP GROUP other bob STREAMS s >");
    // ACKED keeps an entry another group still holds.
    assert_eq!(h.run("XACKDEL s g ACKED IDS 2 2-0 1-0"), "[:2 :-1]");
    assert_eq!(h.run("XLEN s"), ":4");
    // DELREF drops the other group's reference too.
    assert_eq!(h.run("XACKDEL s g DELREF IDS 1 3-0"), "[:1]");
    assert_eq!(h.run("XPENDING s other - + 10 bob"), "[[1-0 bob :0 :1] [2-0 bob :0 :1] [4-0 bob :0 :1]]");
    // KEEPREF deletes but leaves the other group's reference.
    assert_eq!(h.run("XACKDEL s g IDS 1 4-0"), "[:1]");
    assert_eq!(h.run("XLEN s"), ":2");
    assert_eq!(h.run("XACKDEL s nope IDS 2 1-0 2-0"), "[:-1 :-1]");
    assert_eq!(h.run("XACKDEL s g IDS 0 1-0"), "-ERR Number of IDs must be a positive integer");
    check_invariants(&h, "s");
}

// ---------------------------------------------------------------------------------------------
// XPENDING
// ---------------------------------------------------------------------------------------------

#[test]
fn xpending_summary_and_extended() {
    let mut h = with_entries(4);
    assert_eq!(h.run("XPENDING s g"), "[:0 nil nil nil*]");
    h.run("XREADGROUP GROUP g bob COUNT 1 STREAMS s >");
    h.now_ms += 10;
    h.run("XREADGROUP GROUP g alice COUNT 2 STREAMS s >");
    h.run("XNACK s g SILENT IDS 1 3-0");
    assert_eq!(h.run("XPENDING s g"), "[:3 1-0 3-0 [[alice 1] [bob 1]]]");
    assert_eq!(h.run("XPENDING s g - + 10"), "[[1-0 bob :10 :1] [2-0 alice :0 :1] [3-0  :-1 :0]]");
    assert_eq!(h.run("XPENDING s g IDLE 5 - + 10"), "[[1-0 bob :10 :1] [3-0  :-1 :0]]");
    assert_eq!(h.run("XPENDING s g (1-0 + 10 alice"), "[[2-0 alice :0 :1]]");
    assert_eq!(h.run("XPENDING s g - + 10 nobody"), "[]");
    assert_eq!(h.run("XPENDING s g - + 0"), "[]");
    assert_eq!(h.run("XPENDING s g - +"), "-ERR syntax error");
    assert_eq!(h.run("XPENDING s g IDLE 5 - +"), "-ERR syntax error");
    assert_eq!(h.run("XPENDING s nope"), "-NOGROUP No such key 's' or consumer group 'nope'");
    h.run("XACK s g 1-0 2-0");
    assert_eq!(h.run("XPENDING s g"), "[:1 3-0 3-0 []]");
}

// ---------------------------------------------------------------------------------------------
// XCLAIM / XAUTOCLAIM
// ---------------------------------------------------------------------------------------------

#[test]
fn xclaim_options() {
    let mut h = with_entries(4);
    h.run("XREADGROUP GROUP g alice COUNT 3 STREAMS s >");
    h.now_ms += 100;
    assert_eq!(h.run("XCLAIM s g bob 200 1-0"), "[]");
    assert_eq!(h.run("XCLAIM s g bob 50 1-0"), "[[1-0 [f v1]]]");
    assert_eq!(h.run("XCLAIM s g bob 0 2-0 JUSTID IDLE 30"), "[2-0]");
    assert_eq!(h.run("XCLAIM s g bob 0 3-0 RETRYCOUNT 7 TIME 999999 LASTID 9-0"), "[[3-0 [f v3]]]");
    assert_eq!(h.run("XPENDING s g - + 10"), "[[1-0 bob :0 :2] [2-0 bob :30 :1] [3-0 bob :101 :7]]");
    assert!(info_field(&mut h, "XINFO STREAM s FULL", "groups").contains("last-delivered-id=9-0"));
    // FORCE creates the pending entry; count 1 then +1.
    assert_eq!(h.run("XCLAIM s g carol 0 4-0 FORCE"), "[[4-0 [f v4]]]");
    assert_eq!(h.run("XPENDING s g 4-0 4-0 1"), "[[4-0 carol :0 :2]]");
    // A deleted payload purges the pending entry silently.
    h.run("XDEL s 1-0");
    assert_eq!(h.run("XCLAIM s g carol 0 1-0"), "[]");
    assert_eq!(h.run("XPENDING s g"), "[:3 2-0 4-0 [[bob 2] [carol 1]]]");
    assert_eq!(h.run("XCLAIM s g bob x 1-0"), "-ERR Invalid min-idle-time argument for XCLAIM");
    assert_eq!(h.run("XCLAIM s g bob 0 1-0 BOGUS"), "-ERR Unrecognized XCLAIM option 'BOGUS'");
    assert_eq!(h.run("XCLAIM s g bob 0 1-0 IDLE x"), "-ERR Invalid IDLE option argument for XCLAIM");
    assert_eq!(h.run("XCLAIM s nope bob 0 1-0"), "-NOGROUP No such key 's' or consumer group 'nope'");
    check_invariants(&h, "s");
}

#[test]
fn xautoclaim_cursor_and_deleted() {
    let mut h = with_entries(5);
    h.run("XREADGROUP GROUP g alice STREAMS s >");
    h.run("XDEL s 2-0");
    h.now_ms += 100;
    assert_eq!(h.run("XAUTOCLAIM s g bob 50 0 COUNT 2"), "[3-0 [[1-0 [f v1]]] [2-0]]");
    assert_eq!(h.run("XAUTOCLAIM s g bob 50 3-0 COUNT 2 JUSTID"), "[5-0 [3-0 4-0] []]");
    assert_eq!(h.run("XAUTOCLAIM s g bob 50 5-0"), "[0-0 [[5-0 [f v5]]] []]");
    assert_eq!(h.run("XPENDING s g - + 10"), "[[1-0 bob :0 :2] [3-0 bob :0 :1] [4-0 bob :0 :1] [5-0 bob :0 :2]]");
    assert_eq!(h.run("XAUTOCLAIM s g bob 50 0 COUNT 0"), "-ERR COUNT must be > 0");
    assert_eq!(h.run("XAUTOCLAIM s g bob 50 0 BOGUS"), "-ERR syntax error");
    assert_eq!(h.run("XAUTOCLAIM s g bob x 0"), "-ERR Invalid min-idle-time argument for XAUTOCLAIM");
    check_invariants(&h, "s");
}

// ---------------------------------------------------------------------------------------------
// XNACK
// ---------------------------------------------------------------------------------------------

#[test]
fn xnack_modes() {
    let mut h = with_entries(4);
    h.run("XREADGROUP GROUP g alice STREAMS s >");
    h.run("XREADGROUP GROUP g alice STREAMS s 0");
    assert_eq!(h.run("XNACK s g SILENT IDS 1 1-0"), ":1");
    assert_eq!(h.run("XNACK s g FAIL IDS 2 2-0 2-0"), ":2");
    assert_eq!(h.run("XNACK s g FATAL IDS 1 3-0"), ":1");
    assert_eq!(h.run("XNACK s g FAIL IDS 1 4-0 RETRYCOUNT 9"), ":1");
    assert_eq!(
        h.run("XPENDING s g - + 10"),
        "[[1-0  :-1 :1] [2-0  :-1 :2] [3-0  :-1 :9223372036854775807] [4-0  :-1 :9]]"
    );
    assert!(h.run("XINFO CONSUMERS s g").contains("pending=:0"));
    // History never shows released entries.
    assert_eq!(h.run("XREADGROUP GROUP g alice STREAMS s 0"), "[[s []]]");
    h.run("XADD s 5-0 f v5");
    assert_eq!(h.run("XNACK s g FAIL IDS 1 5-0"), ":0");
    assert_eq!(h.run("XNACK s g FATAL IDS 2 5-0 9-0 FORCE"), ":1");
    assert!(info_field(&mut h, "XINFO STREAM s FULL", "groups").contains("nacked-count=:5"));
    assert_eq!(h.run("XNACK s g MAYBE IDS 1 1-0"), "-ERR mode must be SILENT, FAIL, or FATAL");
    assert_eq!(h.run("XNACK s g FAIL IDS 0 1-0"), "-ERR numids must be a positive integer");
    assert_eq!(h.run("XNACK s g FAIL IDS 3 1-0"), "-ERR number of IDs doesn't match numids");
    assert_eq!(h.run("XNACK s g FAIL RETRYCOUNT -1 IDS 1 1-0"), "-ERR Invalid RETRYCOUNT value, must be >= 0");
    assert_eq!(h.run("XNACK s g FAIL IDS 1 1-0 BOGUS"), "-ERR Unrecognized XNACK option 'BOGUS'");
    assert_eq!(h.run("XNACK s g FAIL FORCE RETRYCOUNT 1"), "-ERR syntax error, expected IDS keyword");
    assert_eq!(h.run("XNACK s nope FAIL IDS 1 1-0"), "-NOGROUP No such key 's' or consumer group 'nope'");
    check_invariants(&h, "s");
}

// ---------------------------------------------------------------------------------------------
// XINFO
// ---------------------------------------------------------------------------------------------

#[test]
fn xinfo_groups_consumers_full() {
    let mut h = with_entries(3);
    assert_eq!(
        h.run("XINFO GROUPS s"),
        "[{name=g consumers=:0 pending=:0 last-delivered-id=0-0 entries-read=nil lag=:3}]"
    );
    h.run("XREADGROUP GROUP g alice COUNT 1 STREAMS s >");
    h.now_ms += 7;
    h.run("XGROUP CREATECONSUMER s g bob");
    h.now_ms += 3;
    assert_eq!(
        h.run("XINFO GROUPS s"),
        "[{name=g consumers=:2 pending=:1 last-delivered-id=1-0 entries-read=:1 lag=:2}]"
    );
    assert_eq!(
        h.run("XINFO CONSUMERS s g"),
        "[{name=alice pending=:1 idle=:10 inactive=:10} {name=bob pending=:0 idle=:3 inactive=:-1}]"
    );
    let t = h.now_ms - 10;
    assert_eq!(
        info_field(&mut h, "XINFO STREAM s FULL", "groups"),
        format!(
            "[{{name=g last-delivered-id=1-0 entries-read=:1 lag=:2 pel-count=:1 nacked-count=:0 \
             pending=[[1-0 alice :{t} :1]] consumers=[{{name=alice seen-time=:{t} active-time=:{t} \
             pel-count=:1 pending=[[1-0 :{t} :1]]}} {{name=bob seen-time=:{} active-time=:-1 \
             pel-count=:0 pending=[]}}]}}]",
            t + 7
        )
    );
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "groups"), ":1");
    assert_eq!(h.run("XINFO CONSUMERS s nope"), "-NOGROUP No such consumer group 'nope' for key name 's'");
    assert_eq!(h.run("XINFO GROUPS nokey"), "-ERR no such key");
}

#[test]
fn lag_and_entries_read_follow_spec_rules() {
    let mut h = with_entries(5);
    h.run("XREADGROUP GROUP g a COUNT 2 STREAMS s >");
    assert!(info_field(&mut h, "XINFO STREAM s FULL", "groups").contains("entries-read=:2 lag=:3"));
    // A deletion after the group's position makes lag unknown until the group passes it.
    h.run("XDEL s 4-0");
    assert!(h.run("XINFO GROUPS s").contains("lag=nil"));
    h.run("XREADGROUP GROUP g a STREAMS s >");
    assert!(h.run("XINFO GROUPS s").contains("entries-read=:5 lag=:0"));
    // Trimming before the group's position keeps the counter valid.
    h.run("XTRIM s MAXLEN 1");
    assert!(h.run("XINFO GROUPS s").contains("lag=:0"));
}

// ---------------------------------------------------------------------------------------------
// Group-aware trimming and deletion
// ---------------------------------------------------------------------------------------------

#[test]
fn trimming_with_acked_and_delref() {
    let mut h = with_entries(6);
    h.run("XREADGROUP GROUP g a COUNT 4 STREAMS s >");
    h.run("XACK s g 1-0 3-0");
    // ACKED removes only 1-0 and 3-0 (2-0, 4-0 pending; 5-0, 6-0 unread).
    assert_eq!(h.run("XTRIM s MAXLEN 0 ACKED"), ":2");
    assert_eq!(h.run("XRANGE s - + COUNT 1"), "[[2-0 [f v2]]]");
    // DELREF removes the entries and their PEL references.
    assert_eq!(h.run("XTRIM s MINID 5 DELREF"), ":2");
    assert_eq!(h.run("XPENDING s g"), "[:0 nil nil nil*]");
    // XADD with ACKED: nothing past last-delivered-id goes.
    assert!(h.run("XADD s MAXLEN 0 ACKED 7-0 f v7").starts_with("7-0"));
    assert_eq!(h.run("XLEN s"), ":3");
    // XDELEX ACKED / DELREF.
    h.run("XREADGROUP GROUP g a COUNT 1 STREAMS s >");
    assert_eq!(h.run("XDELEX s ACKED IDS 3 5-0 6-0 99-0"), "[:2 :2 :2]");
    assert_eq!(h.run("XDELEX s DELREF IDS 1 5-0"), "[:1]");
    assert_eq!(h.run("XPENDING s g"), "[:0 nil nil nil*]");
    check_invariants(&h, "s");
}

// ---------------------------------------------------------------------------------------------
// The user flows
// ---------------------------------------------------------------------------------------------

/// A consumer reads 50 entries and dies; 150 ms later another reclaims all 50, moves the
/// poison ones to a dead-letter stream with their provenance, and acks everything.
#[test]
fn flow_reclaim_after_crash_with_dead_letters() {
    let mut h = h();
    for i in 1..=50 {
        let body = if i % 10 == 0 { "poison" } else { "ok" };
        h.run(&format!("XADD jobs {i}-0 body {body}"));
    }
    h.run("XGROUP CREATE jobs g 0");
    let read = h.run("XREADGROUP GROUP g c1 COUNT 50 STREAMS jobs >");
    assert_eq!(read.matches("body").count(), 50);
    h.now_ms += 150;
    let args =
        "XAUTOCLAIM jobs g c2 100 0-0 COUNT 50".split(' ').map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
    let reply = h.call(args);
    let rill_resp::Reply::Array(parts) = reply else { panic!("not an array") };
    assert_eq!(show(&parts[0]), "0-0");
    // The entries come pre-encoded; read them back as a tree.
    let claimed = super::reply::tree(&parts[1]);
    let rill_resp::Reply::Array(claimed) = &claimed else { panic!() };
    assert_eq!(claimed.len(), 50);
    assert_eq!(h.run("XPENDING jobs g - + 100 c2").matches(" :2]").count(), 50);
    assert_eq!(h.run("XPENDING jobs g"), "[:50 1-0 50-0 [[c2 50]]]");
    for entry in claimed {
        let text = show(entry);
        let id = text.trim_start_matches('[').split(' ').next().unwrap_or_default().to_string();
        if text.contains("poison") {
            assert!(h.run(&format!("XADD dead * body poison deadLetteredFrom {id}")).contains('-'));
        }
        assert_eq!(h.run(&format!("XACK jobs g {id}")), ":1");
    }
    assert_eq!(h.run("XLEN dead"), ":5");
    assert!(h.run("XRANGE dead - + COUNT 1").contains("deadLetteredFrom 10-0"));
    assert_eq!(h.run("XPENDING jobs g"), "[:0 nil nil nil*]");
    check_invariants(&h, "jobs");
}

/// A worker restarts under the same name: it drains its own history with ID 0, then switches
/// to `>` for new work.
#[test]
fn flow_restart_drains_history_then_new() {
    let mut h = with_entries(5);
    h.run("XREADGROUP GROUP g w1 COUNT 3 STREAMS s >");
    h.run("XACK s g 1-0");
    // Restart: history first, in pages of 1, each page after the last ID seen.
    assert_eq!(h.run("XREADGROUP GROUP g w1 COUNT 1 STREAMS s 0"), "[[s [[2-0 [f v2]]]]]");
    h.run("XACK s g 2-0");
    assert_eq!(h.run("XREADGROUP GROUP g w1 COUNT 1 STREAMS s 2-0"), "[[s [[3-0 [f v3]]]]]");
    h.run("XACK s g 3-0");
    assert_eq!(h.run("XREADGROUP GROUP g w1 COUNT 1 STREAMS s 0"), "[[s []]]");
    assert_eq!(h.run("XREADGROUP GROUP g w1 STREAMS s >"), "[[s [[4-0 [f v4]] [5-0 [f v5]]]]]");
    assert_eq!(h.run("XPENDING s g"), "[:2 4-0 5-0 [[w1 2]]]");
}

// ---------------------------------------------------------------------------------------------
// Effects replay
// ---------------------------------------------------------------------------------------------

/// Replaying the effect records of a command sequence onto the stream without its groups
/// rebuilds exactly the same group state, with no clock involved.
#[test]
fn effects_replay_to_the_same_state() {
    let mut h = with_entries(8);
    h.run("XGROUP CREATE s other $");
    h.run("XREADGROUP GROUP g a COUNT 3 STREAMS s >");
    h.now_ms += 40;
    h.run("XREADGROUP GROUP g b NOACK COUNT 1 STREAMS s >");
    h.run("XREADGROUP GROUP g b STREAMS s >");
    h.run("XACK s g 1-0");
    h.now_ms += 100;
    h.run("XCLAIM s g c 50 2-0 RETRYCOUNT 5");
    h.run("XNACK s g FAIL IDS 1 3-0");
    h.run("XAUTOCLAIM s g d 10 0 COUNT 2");
    h.run("XREADGROUP GROUP g a STREAMS s 0");
    h.run("XREADGROUP GROUP g e CLAIM 0 COUNT 2 STREAMS s >");
    h.run("XGROUP DELCONSUMER s g b");
    h.run("XGROUP SETID s other 3-0 ENTRIESREAD 3");
    h.run("XACKDEL s g DELREF IDS 1 6-0");
    let log = EFFECT_LOG.with(|l| l.borrow().clone());
    assert!(log.iter().any(|e| matches!(e, GroupEffect::Nacked { .. })));
    let live = h.stream("s");
    let mut replica = live.without_groups();
    for effect in &log {
        replica.apply_group_effect(effect);
    }
    assert_eq!(replica.groups(), live.groups());
    assert!(replica.validate_groups());
}

// ---------------------------------------------------------------------------------------------
// RILL.READGROUP
// ---------------------------------------------------------------------------------------------

/// RILL.READGROUP reads as XREADGROUP does (same deliveries, same PEL) and gives every entry
/// CLAIM's two trailing figures: the time since its last delivery and its deliveries before
/// this one — 0 and 0 for a new entry, the real figures for a handed-back one and for a
/// history re-read.
#[test]
fn rill_readgroup_gives_each_entry_its_idle_time_and_earlier_deliveries() {
    let mut h = with_entries(4);
    assert_eq!(h.run("RILL.GROUP SET s g MAXDELIVER 5"), "+OK");
    assert_eq!(h.run("RILL.READGROUP GROUP g a COUNT 2 STREAMS s >"), "[[s [[1-0 [f v1] :0 :0] [2-0 [f v2] :0 :0]]]]");
    h.now_ms += 70;
    assert_eq!(h.run("RILL.NACK s g IDS 1 1-0"), ":1");
    h.now_ms += 30;
    // The handed-back entry first (served first to `>` reads on a group with a policy), then
    // new ones. A NACK clears the delivery time, so its idle time is "now", as XREADGROUP
    // CLAIM shows an XNACKed entry.
    let now = h.now_ms;
    assert_eq!(
        h.run("RILL.READGROUP GROUP g b COUNT 2 STREAMS s >"),
        format!("[[s [[1-0 [f v1] :{now} :1] [3-0 [f v3] :0 :0]]]]")
    );
    // History: a's own pending entry, delivered 100 ms ago, once.
    assert_eq!(h.run("RILL.READGROUP GROUP g a STREAMS s 0"), "[[s [[2-0 [f v2] :100 :1]]]]");
    assert_eq!(h.run("XPENDING s g - + 10"), "[[1-0 b :0 :2] [2-0 a :0 :2] [3-0 b :0 :1]]");
    // XREADGROUP's own replies are unchanged.
    assert_eq!(h.run("XREADGROUP GROUP g c STREAMS s >"), "[[s [[4-0 [f v4]]]]]");
    assert_eq!(h.run("RILL.READGROUP GROUP g c STREAMS s >"), "nil*");
    // Errors are XREADGROUP's.
    assert_eq!(h.run("RILL.READGROUP GROUP nope c STREAMS s >"), NOGROUP_READ.replace("'g'", "'nope'"));
    check_invariants(&h, "s");
}
