#![allow(clippy::unwrap_used)]

use crate::types::testkit::*;
use rill_resp::Reply;

fn ints(v: &[i64]) -> Reply {
    Reply::Array(v.iter().map(|n| int(*n)).collect())
}

fn nils_and(values: &[Option<&str>]) -> Reply {
    Reply::Array(values.iter().map(|v| v.map_or(Reply::Null, bulk)).collect())
}

#[test]
fn hexpire_codes_conditions_and_ttls() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(h.run(&["HEXPIRE", "h", "100", "FIELDS", "2", "a", "zz"]), ints(&[1, -2]));
    assert_eq!(h.run(&["HTTL", "h", "FIELDS", "3", "a", "b", "zz"]), ints(&[100, -1, -2]));
    assert_eq!(h.run(&["HPTTL", "h", "FIELDS", "1", "a"]), ints(&[100_000]));
    let at = h.now_ms + 100_000;
    assert_eq!(h.run(&["HPEXPIRETIME", "h", "FIELDS", "1", "a"]), ints(&[at]));
    assert_eq!(h.run(&["HEXPIRETIME", "h", "FIELDS", "1", "a"]), ints(&[at.div_euclid(1000)]));
    // NX / XX / GT / LT; no time counts as infinitely far.
    assert_eq!(h.run(&["HEXPIRE", "h", "50", "NX", "FIELDS", "2", "a", "b"]), ints(&[0, 1]));
    assert_eq!(h.run(&["HEXPIRE", "h", "50", "XX", "FIELDS", "2", "a", "c"]), ints(&[1, 0]));
    assert_eq!(h.run(&["HEXPIRE", "h", "40", "GT", "FIELDS", "2", "a", "c"]), ints(&[0, 0]));
    assert_eq!(h.run(&["HEXPIRE", "h", "40", "LT", "FIELDS", "2", "a", "c"]), ints(&[1, 1]));
    // Conditions may follow FIELDS (Redis 8.4+).
    assert_eq!(h.run(&["HEXPIRE", "h", "60", "FIELDS", "1", "a", "GT"]), ints(&[1]));
    assert_eq!(h.run(&["OBJECT", "ENCODING", "h"]), bulk("listpackex"));
    // A time already past deletes; the last field takes the key.
    assert_eq!(h.run(&["HPEXPIREAT", "h", "1", "FIELDS", "2", "a", "b"]), ints(&[2, 2]));
    assert_eq!(h.run(&["HEXPIRE", "h", "0", "FIELDS", "1", "c"]), ints(&[2]));
    assert_eq!(h.run(&["EXISTS", "h"]), int(0));
    assert_eq!(h.run(&["HEXPIRE", "h", "10", "FIELDS", "1", "a"]), ints(&[-2]));
}

#[test]
fn hexpire_errors() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1"]);
    let cases: &[(&[&str], &str)] = &[
        (&["HEXPIRE", "h", "-1", "FIELDS", "1", "a"], "ERR invalid expire time, must be >= 0"),
        (&["HEXPIRE", "h", "x", "FIELDS", "1", "a"], "ERR value is not an integer or out of range"),
        (&["HEXPIRE", "h", "281474976710", "FIELDS", "1", "a"], "ERR invalid expire time in 'hexpire' command"),
        (&["HPEXPIREAT", "h", "70368744177664", "FIELDS", "1", "a"], "ERR invalid expire time in 'hpexpireat' command"),
        (&["HPEXPIRE", "h", "1000", "NX", "FIELDS", "0", "a"], "ERR Parameter `numFields` should be greater than 0"),
        (&["HPEXPIRE", "h", "1000", "NX", "FIELDS", "4", "a", "b"], "ERR wrong number of arguments"),
        (&["HPEXPIRE", "h", "1000", "NX", "FIELDS", "1", "a", "b"], "ERR unknown argument: b"),
        (&["HPEXPIRE", "h", "1000", "NX", "XX", "FIELDS", "1", "a"], "ERR Multiple condition flags specified"),
        (
            &["HPEXPIRE", "h", "1000", "FIELDS", "1", "a", "FIELDS", "1", "a"],
            "ERR FIELDS keyword specified multiple times",
        ),
        (&["HPEXPIRE", "h", "1000", "NX", "GT", "FIELDX"], "ERR unknown argument: FIELDX"),
        (
            &["HPEXPIRE", "h", "1000", "NX", "XX", "FIELDS"],
            "ERR FIELDS requires at least numfields and one field argument",
        ),
        (&["HTTL", "h", "FIELDS", "2", "a"], "ERR The `numfields` parameter must match the number of arguments"),
        (&["HTTL", "h", "FIELDS", "0", "a"], "ERR Number of fields must be a positive integer"),
        (&["HTTL", "h", "FIELDX", "1", "a"], "ERR Mandatory argument FIELDS is missing or not at the right position"),
        (&["HPERSIST", "h", "FIELDS", "2", "a"], "ERR The `numfields` parameter must match the number of arguments"),
        (&["HGETEX", "h", "FIELDS", "0", "a"], "ERR invalid number of fields"),
        (&["HGETEX", "h", "FIELDS", "2", "a"], "ERR wrong number of arguments"),
        (
            &["HGETEX", "h", "EX", "1", "PX", "1", "FIELDS", "1", "a"],
            "ERR Only one of EX, PX, EXAT, PXAT or PERSIST arguments can be specified",
        ),
        (&["HGETEX", "h", "KEEPTTL", "FIELDS", "1", "a"], "ERR unknown argument: KEEPTTL"),
        (&["HGETEX", "h", "FIELDS", "1", "a", "EX"], "ERR missing expire time"),
        (
            &["HSETEX", "h", "FXX", "FNX", "FIELDS", "1", "a", "b"],
            "ERR Only one of FXX or FNX arguments can be specified",
        ),
        (
            &["HSETEX", "h", "EX", "1", "KEEPTTL", "FIELDS", "1", "a", "b"],
            "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified",
        ),
        (&["HSETEX", "h", "FIELDS", "2", "a", "b", "c"], "ERR wrong number of arguments"),
        (
            &["HSETEX", "h", "PX", "70368744177664", "FIELDS", "1", "a", "b"],
            "ERR invalid expire time in 'hsetex' command",
        ),
        (&["HSETEX", "h", "EX", "10", "FOO", "1", "a", "b"], "ERR unknown argument: FOO"),
    ];
    for (cmd, want) in cases {
        assert_eq!(h.run(cmd), err(want), "{cmd:?}");
    }
    h.run(&["SET", "s", "v"]);
    for cmd in [
        &["HEXPIRE", "s", "10", "FIELDS", "1", "a"][..],
        &["HTTL", "s", "FIELDS", "1", "a"],
        &["HPERSIST", "s", "FIELDS", "1", "a"],
        &["HGETEX", "s", "FIELDS", "1", "a"],
        &["HSETEX", "s", "FIELDS", "1", "a", "b"],
    ] {
        assert_eq!(h.run(cmd), err("WRONGTYPE Operation against a key holding the wrong kind of value"), "{cmd:?}");
    }
    assert_eq!(h.run(&["HTTL", "h", "FIELDS", "1", "a"]), ints(&[-1]));
}

#[test]
fn expired_fields_are_invisible_and_removed_lazily() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    h.run(&["HPEXPIRE", "h", "100", "FIELDS", "2", "a", "b"]);
    h.now_ms += 101;
    // HLEN counts fields not yet removed, as Redis does; the whole-hash readers skip them.
    assert_eq!(h.run(&["HLEN", "h"]), int(3));
    assert_eq!(h.run(&["HGETALL", "h"]), Reply::Map(vec![(bulk("c"), bulk("3"))]));
    assert_eq!(h.run(&["HKEYS", "h"]), bulks(&["c"]));
    assert_eq!(h.run(&["HTTL", "h", "FIELDS", "1", "a"]), ints(&[-2]));
    assert_eq!(h.run(&["HGET", "h", "a"]), Reply::Null);
    assert_eq!(events(&h), ["hexpired:h"]);
    assert_eq!(h.run(&["HLEN", "h"]), int(2));
    let fields = h.engine.take_expired_fields();
    assert_eq!(fields, vec![(0, "h".into(), vec!["a".into()])]);
    assert_eq!(h.run(&["HMGET", "h", "b", "c"]), nils_and(&[None, Some("3")]));
    assert_eq!(h.run(&["HLEN", "h"]), int(1));
    assert_eq!(h.engine.stats().expired_subkeys, 2);
    // The last field going takes the key with it.
    h.run(&["HPEXPIRE", "h", "10", "FIELDS", "1", "c"]);
    h.now_ms += 11;
    assert_eq!(h.run(&["HEXISTS", "h", "c"]), int(0));
    assert_eq!(events(&h), ["hexpired:h", "del:h"]);
    assert_eq!(h.run(&["EXISTS", "h"]), int(0));
}

#[test]
fn active_expiry_uses_the_index() {
    let mut h = Harness::new();
    for i in 0..10 {
        let key = format!("h{i}");
        h.run(&["HSET", &key, "a", "1", "b", "2"]);
        h.run(&["HPEXPIRE", &key, &(100 * (i + 1)).to_string(), "FIELDS", "1", "a"]);
    }
    h.run(&["HSET", "plain", "a", "1"]);
    assert_eq!(h.engine.db(0).subexpiry_len(), 10);
    let now = h.now_ms + 350;
    assert_eq!(h.engine.active_expire(now, 100), 3);
    assert_eq!(h.engine.db(0).subexpiry_len(), 7);
    assert_eq!(h.engine.take_expired_fields().len(), 3);
    assert_eq!(h.engine.stats().expired_subkeys_active, 3);
    // Budget respected; the rest next time.
    assert_eq!(h.engine.active_expire(h.now_ms + 10_000, 4), 4);
    assert_eq!(h.engine.active_expire(h.now_ms + 10_000, 100), 3);
    assert_eq!(h.engine.db(0).subexpiry_len(), 0);
    h.now_ms += 10_000;
    assert_eq!(h.run(&["HLEN", "h9"]), int(1));
    // A hash whose fields all expire goes, with `hexpired` then `del`.
    h.run(&["HPEXPIRE", "h9", "1", "FIELDS", "1", "b"]);
    assert_eq!(h.engine.active_expire(h.now_ms + 5, 100), 1);
    let got: Vec<String> = events(&h);
    assert_eq!(got, ["hexpired:h9", "del:h9"]);
    assert_eq!(h.run(&["EXISTS", "h9"]), int(0));
}

#[test]
fn index_follows_deletes_renames_and_overwrites() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1", "b", "2"]);
    h.run(&["HEXPIRE", "h", "100", "FIELDS", "1", "a"]);
    h.run(&["RENAME", "h", "g"]);
    assert_eq!(h.run(&["HTTL", "g", "FIELDS", "1", "a"]), ints(&[100]));
    assert_eq!(h.engine.db(0).subexpiry_len(), 1);
    h.run(&["COPY", "g", "c"]);
    assert_eq!(h.engine.db(0).subexpiry_len(), 2);
    h.run(&["SET", "c", "x"]);
    assert_eq!(h.engine.db(0).subexpiry_len(), 1);
    assert_eq!(h.run(&["MOVE", "g", "0"]), err("ERR source and destination objects are the same"));
    assert_eq!(h.run(&["MOVE", "g", "16"]), err("ERR DB index is out of range"));
    assert_eq!(h.run(&["MOVE", "g", "x"]), err("ERR value is not an integer or out of range"));
    assert_eq!(h.run(&["MOVE", "g", "1"]), int(1));
    assert_eq!(events(&h), ["new:g", "move_from:g", "move_to:g"]);
    assert_eq!(h.run(&["MOVE", "g", "1"]), int(0));
    assert_eq!(h.engine.db(0).subexpiry_len(), 0);
    assert_eq!(h.engine.db(1).subexpiry_len(), 1);
    // SWAPDB takes the index with the keys.
    h.run(&["SWAPDB", "0", "1"]);
    assert_eq!(h.engine.db(0).subexpiry_len(), 1);
    assert_eq!(h.engine.db(1).subexpiry_len(), 0);
    h.run(&["SWAPDB", "0", "1"]);
    assert_eq!(h.engine.db(0).subexpiry_len(), 0);
    assert_eq!(h.engine.db(1).subexpiry_len(), 1);
    h.db = 1;
    assert_eq!(h.run(&["HPERSIST", "g", "FIELDS", "2", "a", "b"]), ints(&[1, -1]));
    // As in Redis, the hash stays counted until the expiry cycle reaches its old time.
    assert_eq!(h.engine.db(1).subexpiry_len(), 1);
    assert_eq!(h.engine.active_expire(h.now_ms + 200_000, 10), 0);
    assert_eq!(h.engine.db(1).subexpiry_len(), 0);
    h.run(&["HEXPIRE", "g", "100", "FIELDS", "1", "b"]);
    h.run(&["DEL", "g"]);
    assert_eq!(h.engine.db(1).subexpiry_len(), 0);
}

#[test]
fn hset_drops_hincrby_keeps_a_time() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1", "b", "2"]);
    h.run(&["HEXPIRE", "h", "100", "FIELDS", "2", "a", "b"]);
    assert_eq!(h.run(&["HINCRBY", "h", "a", "5"]), int(6));
    assert_eq!(h.run(&["HTTL", "h", "FIELDS", "1", "a"]), ints(&[100]));
    assert_eq!(h.run(&["HSET", "h", "b", "3"]), int(0));
    assert_eq!(h.run(&["HTTL", "h", "FIELDS", "1", "b"]), ints(&[-1]));
    // An expired field counts as missing for HINCRBY and HSETNX.
    h.run(&["HPEXPIRE", "h", "1", "FIELDS", "1", "a"]);
    h.now_ms += 2;
    assert_eq!(h.run(&["HINCRBY", "h", "a", "5"]), int(5));
    assert_eq!(h.run(&["HTTL", "h", "FIELDS", "1", "a"]), ints(&[-1]));
    h.run(&["HPEXPIRE", "h", "1", "FIELDS", "1", "b"]);
    h.now_ms += 2;
    assert_eq!(h.run(&["HSETNX", "h", "b", "9"]), int(1));
    assert_eq!(h.run(&["HGET", "h", "b"]), bulk("9"));
}

#[test]
fn hgetex_and_hsetex() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["HGETEX", "none", "EX", "10", "FIELDS", "2", "a", "b"]), nils_and(&[None, None]));
    assert_eq!(h.run(&["HSETEX", "h", "FXX", "EX", "10", "FIELDS", "1", "a", "1"]), int(0));
    assert_eq!(h.run(&["EXISTS", "h"]), int(0));
    assert_eq!(h.run(&["HSETEX", "h", "FNX", "EX", "10", "FIELDS", "2", "a", "1", "b", "2"]), int(1));
    assert_eq!(events(&h), ["new:h", "hset:h", "hexpire:h"]);
    assert_eq!(h.run(&["OBJECT", "ENCODING", "h"]), bulk("listpackex"));
    assert_eq!(h.run(&["HSETEX", "h", "FNX", "FIELDS", "1", "a", "1"]), int(0));
    assert_eq!(h.run(&["HSETEX", "h", "KEEPTTL", "FIELDS", "1", "a", "x"]), int(1));
    assert_eq!(h.run(&["HTTL", "h", "FIELDS", "1", "a"]), ints(&[10]));
    assert_eq!(h.run(&["HSETEX", "h", "FIELDS", "1", "a", "y"]), int(1));
    assert_eq!(h.run(&["HTTL", "h", "FIELDS", "2", "a", "b"]), ints(&[-1, 10]));
    assert_eq!(
        h.run(&["HGETEX", "h", "PX", "500", "FIELDS", "3", "a", "b", "zz"]),
        nils_and(&[Some("y"), Some("2"), None])
    );
    assert_eq!(events(&h), ["hexpire:h"]);
    assert_eq!(h.run(&["HPTTL", "h", "FIELDS", "2", "a", "b"]), ints(&[500, 500]));
    assert_eq!(h.run(&["HGETEX", "h", "PERSIST", "FIELDS", "1", "a"]), nils_and(&[Some("y")]));
    assert_eq!(events(&h), ["hpersist:h"]);
    assert_eq!(h.run(&["HGETEX", "h", "EX", "0", "FIELDS", "1", "a"]), nils_and(&[Some("y")]));
    assert_eq!(events(&h), ["hdel:h"]);
    h.now_ms += 501;
    assert_eq!(h.run(&["HGETEX", "h", "FIELDS", "1", "b"]), nils_and(&[None]));
    assert_eq!(events(&h), ["hexpired:h", "del:h"]);
    // A time already past: set, then deleted.
    assert_eq!(h.run(&["HSETEX", "k", "PXAT", "1", "FIELDS", "1", "a", "1"]), int(1));
    assert_eq!(events(&h), ["new:k", "hset:k", "hdel:k", "del:k"]);
}

#[test]
fn effects_are_absolute_and_deletions_hdel() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    let mut ctx = h.ctx();
    ctx.recording = true;
    h.run_ctx(&mut ctx, &["HEXPIRE", "h", "10", "NX", "FIELDS", "3", "a", "zz", "b"]);
    assert!(ctx.explicit);
    let effects = ctx.effects.decode().unwrap();
    let at = (h.now_ms + 10_000).to_string();
    let want: Vec<&[u8]> = vec![b"HPEXPIREAT", b"h", at.as_bytes(), b"NX", b"FIELDS", b"2", b"a", b"b"];
    assert_eq!(
        effects,
        vec![crate::effect::Effect::command(0, want.into_iter().map(bytes::Bytes::copy_from_slice).collect())]
    );
    let mut ctx = h.ctx();
    ctx.recording = true;
    h.run_ctx(&mut ctx, &["HEXPIRE", "h", "0", "FIELDS", "1", "c"]);
    assert!(ctx.explicit);
    assert!(ctx.effects.decode().unwrap().is_empty());
    assert_eq!(h.engine.take_expired_fields(), vec![(0, "h".into(), vec!["c".into()])]);
}

#[test]
fn dump_restore_keeps_field_times() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1", "b", "2"]);
    h.run(&["HPEXPIREAT", "h", "1800000000000", "FIELDS", "1", "a"]);
    let Reply::Bulk(payload) = h.run(&["DUMP", "h"]) else { panic!("dump") };
    assert_eq!(payload.first(), Some(&24));
    h.run_bytes(&[b"RESTORE", b"g", b"0", &payload]);
    assert_eq!(h.run(&["HPEXPIRETIME", "g", "FIELDS", "2", "a", "b"]), ints(&[1_800_000_000_000, -1]));
    assert_eq!(h.engine.db(0).subexpiry_len(), 2);
}

#[test]
fn a_replica_hides_expired_fields_but_keeps_them() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1", "b", "2"]);
    h.run(&["HPEXPIRE", "h", "10", "FIELDS", "1", "a"]);
    h.engine.set_replica(true);
    h.now_ms += 11;
    assert_eq!(h.run(&["HGET", "h", "a"]), Reply::Null);
    assert_eq!(h.run(&["HEXISTS", "h", "a"]), int(0));
    assert_eq!(h.run(&["HGETALL", "h"]), Reply::Map(vec![(bulk("b"), bulk("2"))]));
    assert_eq!(h.engine.active_expire(h.now_ms, 100), 0);
    // Still there, for the primary's HDEL.
    assert_eq!(h.run(&["HLEN", "h"]), int(2));
    assert!(h.engine.take_expired_fields().is_empty());
    // A time already past is kept too.
    assert_eq!(h.run(&["HPEXPIREAT", "h", "1", "FIELDS", "1", "b"]), ints(&[1]));
    assert_eq!(h.run(&["HLEN", "h"]), int(2));
}

#[test]
fn allow_access_expired_shows_expired_fields() {
    let mut h = Harness::new();
    h.run(&["HSET", "h", "a", "1", "b", "2"]);
    h.run(&["HPEXPIRE", "h", "10", "FIELDS", "1", "a"]);
    h.now_ms += 11;
    h.engine.set_allow_access_expired(true);
    assert_eq!(h.run(&["HGET", "h", "a"]), bulk("1"));
    assert_eq!(h.run(&["HMGET", "h", "a", "b"]), nils_and(&[Some("1"), Some("2")]));
    assert_eq!(h.run(&["HINCRBY", "h", "a", "1"]), int(2));
    let Reply::Array(picks) = h.run(&["HRANDFIELD", "h", "-6"]) else { panic!("array") };
    assert_eq!(picks.len(), 6);
    assert_eq!(h.run(&["HLEN", "h"]), int(2));
    h.engine.set_allow_access_expired(false);
    assert_eq!(h.run(&["HGET", "h", "a"]), Reply::Null);
    assert_eq!(h.run(&["HLEN", "h"]), int(1));
}
