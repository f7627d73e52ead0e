//! Tests of the generic key commands.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]
use crate::types::testkit::*;
use rill_resp::Reply;

#[test]
fn del_exists_type_touch() {
    let mut h = Harness::new();
    h.run(&["SET", "a", "1"]);
    h.run(&["RPUSH", "l", "x"]);
    assert_eq!(h.run(&["EXISTS", "a", "a", "nope", "l"]), int(3));
    assert_eq!(h.run(&["TOUCH", "a", "a", "nope"]), int(2));
    assert_eq!(h.run(&["TYPE", "a"]), Reply::simple("string"));
    assert_eq!(h.run(&["TYPE", "l"]), Reply::simple("list"));
    assert_eq!(h.run(&["TYPE", "nope"]), Reply::simple("none"));
    assert_eq!(h.run(&["DEL", "a", "nope", "l", "a"]), int(2));
    assert_eq!(h.run(&["UNLINK", "a"]), int(0));
    assert_eq!(h.run(&["DEL"]), err("ERR wrong number of arguments for 'del' command"));
}

#[test]
fn keys_matches_glob_and_skips_expired() {
    let mut h = Harness::new();
    for k in ["hello", "hallo", "hxllo", "other"] {
        h.run(&["SET", k, "v"]);
    }
    h.run(&["PEXPIRE", "hxllo", "10"]);
    h.now_ms += 10;
    assert_eq!(sorted_strings(&h.run(&["KEYS", "h?llo"])), ["hallo", "hello"]);
    assert_eq!(sorted_strings(&h.run(&["KEYS", "*"])), ["hallo", "hello", "other"]);
}

fn scan_all(h: &mut Harness, extra: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut all = Vec::new();
    loop {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(extra);
        let Reply::Array(parts) = h.run(&args) else { panic!("scan reply") };
        let [Reply::Bulk(next), keys] = parts.as_slice() else { panic!("scan shape") };
        all.extend(sorted_strings(keys));
        cursor = String::from_utf8(next.to_vec()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    all.sort();
    all
}

#[test]
fn scan_full_iteration_returns_every_key() {
    let mut h = Harness::new();
    let mut expected: Vec<String> = (0..500).map(|i| format!("k{i}")).collect();
    for k in &expected {
        h.run(&["SET", k, "v"]);
    }
    h.run(&["SADD", "aset", "m"]);
    expected.push("aset".into());
    expected.sort();
    assert_eq!(scan_all(&mut h, &[]), expected);
    assert_eq!(scan_all(&mut h, &["COUNT", "3"]), expected);
    assert_eq!(scan_all(&mut h, &["COUNT", "1000", "TYPE", "SET"]), ["aset"]);
    assert_eq!(scan_all(&mut h, &["MATCH", "k4??", "COUNT", "7"]).len(), 100);
    assert!(scan_all(&mut h, &["TYPE", "nosuchtype"]).is_empty());
}

#[test]
fn scan_errors() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SCAN", "abc"]), err("ERR invalid cursor"));
    assert_eq!(h.run(&["SCAN", "18446744073709551616"]), err("ERR invalid cursor"));
    assert_eq!(h.run(&["SCAN", "0", "COUNT", "0"]), err("ERR syntax error"));
    assert_eq!(h.run(&["SCAN", "0", "COUNT", "x"]), err("ERR value is not an integer or out of range"));
    assert_eq!(h.run(&["SCAN", "0", "MATCH"]), err("ERR syntax error"));
    assert_eq!(h.run(&["SCAN", "0", "FOO", "bar"]), err("ERR syntax error"));
    // Redis 8: a canonical negative integer is refused; other text goes through strtoull.
    for bad in ["-1", "-5", "5 ", "", " ", "+", "0x10", "-18446744073709551616"] {
        assert_eq!(h.run(&["SCAN", bad]), err("ERR invalid cursor"), "{bad:?}");
    }
    let done = Reply::Array(vec![bulk("0"), Reply::Array(vec![])]);
    for good in ["18446744073709551615", "+0", " 0", "-0", "-00", "\t+0"] {
        assert_eq!(h.run(&["SCAN", good]), done, "{good:?}");
    }
}

#[test]
fn scan_removes_expired_keys_it_meets() {
    let mut h = Harness::new();
    h.run(&["SET", "gone", "v", "PX", "5"]);
    h.now_ms += 5;
    assert!(scan_all(&mut h, &[]).is_empty());
    assert_eq!(h.engine.db(0).len(), 0);
}

#[test]
fn rename_and_renamenx() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RENAME", "nope", "x"]), err("ERR no such key"));
    assert_eq!(h.run(&["RENAMENX", "nope", "x"]), err("ERR no such key"));
    h.run(&["SET", "a", "1", "EX", "100"]);
    // Onto itself: OK / 0, and the key is untouched.
    assert_eq!(h.run(&["RENAME", "a", "a"]), ok());
    assert_eq!(h.run(&["RENAMENX", "a", "a"]), int(0));
    assert_eq!(h.run(&["TTL", "a"]), int(100));
    // RENAME keeps the TTL and replaces the destination (and its TTL-less state).
    h.run(&["RPUSH", "b", "x"]);
    assert_eq!(h.run(&["RENAME", "a", "b"]), ok());
    assert_eq!(h.run(&["GET", "b"]), bulk("1"));
    assert_eq!(h.run(&["TTL", "b"]), int(100));
    assert_eq!(h.run(&["EXISTS", "a"]), int(0));
    h.run(&["SET", "c", "2"]);
    assert_eq!(h.run(&["RENAMENX", "b", "c"]), int(0));
    assert_eq!(h.run(&["RENAMENX", "b", "d"]), int(1));
    assert_eq!(h.run(&["TTL", "d"]), int(100));
}

#[test]
fn copy_within_and_across_databases() {
    let mut h = Harness::new();
    h.run(&["HSET", "src", "f", "v"]);
    h.run(&["PEXPIRE", "src", "5000"]);
    assert_eq!(h.run(&["COPY", "src", "dst"]), int(1));
    assert_eq!(h.run(&["PTTL", "dst"]), int(5000));
    assert_eq!(h.run(&["COPY", "src", "dst"]), int(0));
    assert_eq!(h.run(&["COPY", "src", "dst", "REPLACE"]), int(1));
    assert_eq!(h.run(&["COPY", "src", "src"]), err("ERR source and destination objects are the same"));
    assert_eq!(h.run(&["COPY", "nope", "nope"]), err("ERR source and destination objects are the same"));
    assert_eq!(h.run(&["COPY", "src", "src", "DB", "3"]), int(1));
    assert_eq!(h.run(&["COPY", "nope", "x"]), int(0));
    assert_eq!(h.run(&["COPY", "src", "x", "DB", "16"]), err("ERR DB index is out of range"));
    assert_eq!(h.run(&["COPY", "src", "x", "DB", "-1"]), err("ERR DB index is out of range"));
    assert_eq!(h.run(&["COPY", "src", "x", "DB", "z"]), err("ERR value is not an integer or out of range"));
    assert_eq!(h.run(&["COPY", "src", "x", "DB"]), err("ERR syntax error"));
    assert_eq!(h.run(&["COPY", "src", "x", "FOO"]), err("ERR syntax error"));
    h.db = 3;
    assert_eq!(h.run(&["HGET", "src", "f"]), bulk("v"));
    assert_eq!(h.run(&["PTTL", "src"]), int(5000));
    // The copy is independent of the original.
    h.run(&["HSET", "src", "g", "w"]);
    h.db = 0;
    assert_eq!(h.run(&["HLEN", "src"]), int(1));
}

#[test]
fn expire_options_and_errors() {
    let mut h = Harness::new();
    h.run(&["SET", "k", "v"]);
    // No TTL counts as infinite: GT never applies, LT always does.
    assert_eq!(h.run(&["EXPIRE", "k", "100", "GT"]), int(0));
    assert_eq!(h.run(&["TTL", "k"]), int(-1));
    assert_eq!(h.run(&["EXPIRE", "k", "100", "XX"]), int(0));
    assert_eq!(h.run(&["EXPIRE", "k", "100", "LT"]), int(1));
    assert_eq!(h.run(&["EXPIRE", "k", "50", "NX"]), int(0));
    assert_eq!(h.run(&["EXPIRE", "k", "200", "LT"]), int(0));
    assert_eq!(h.run(&["EXPIRE", "k", "200", "GT"]), int(1));
    assert_eq!(h.run(&["EXPIRE", "k", "200", "gt", "xx"]), int(0));
    assert_eq!(h.run(&["TTL", "k"]), int(200));
    assert_eq!(h.run(&["EXPIRE", "nope", "10"]), int(0));
    let nx = "ERR NX and XX, GT or LT options at the same time are not compatible";
    assert_eq!(h.run(&["EXPIRE", "k", "10", "NX", "XX"]), err(nx));
    assert_eq!(h.run(&["EXPIRE", "k", "10", "NX", "GT"]), err(nx));
    assert_eq!(
        h.run(&["EXPIRE", "k", "10", "GT", "LT"]),
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(h.run(&["EXPIRE", "k", "10", "foo"]), err("ERR Unsupported option foo"));
    // Options are checked before the number.
    assert_eq!(h.run(&["EXPIRE", "k", "abc", "foo"]), err("ERR Unsupported option foo"));
    assert_eq!(h.run(&["EXPIRE", "k", "abc"]), err("ERR value is not an integer or out of range"));
    for (cmd, n) in [
        ("EXPIRE", "9223372036854775"),
        ("PEXPIRE", "9223372036854775807"),
        ("EXPIREAT", "9223372036854775807"),
        ("EXPIRE", "-9223372036854775808"),
    ] {
        let msg = format!("ERR invalid expire time in '{}' command", cmd.to_lowercase());
        assert_eq!(h.run(&[cmd, "k", n]), err(&msg));
    }
    assert_eq!(h.run(&["PEXPIREAT", "k", "9223372036854775807"]), int(1));
    assert_eq!(h.run(&["EXISTS", "k"]), int(1));
}

#[test]
fn expire_in_the_past_deletes() {
    let mut h = Harness::new();
    for cmd in [["EXPIRE", "k", "0"], ["PEXPIRE", "k", "-5"], ["EXPIREAT", "k", "1"], ["PEXPIREAT", "k", "1"]] {
        h.run(&["SET", "k", "v"]);
        assert_eq!(h.run(&cmd), int(1), "{cmd:?}");
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
    }
    // A condition that fails keeps the key even with a past time.
    h.run(&["SET", "k", "v", "EX", "100"]);
    assert_eq!(h.run(&["EXPIRE", "k", "-1", "NX"]), int(0));
    assert_eq!(h.run(&["EXISTS", "k"]), int(1));
}

#[test]
fn ttl_rounding_and_expiretime() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["TTL", "nope"]), int(-2));
    assert_eq!(h.run(&["PTTL", "nope"]), int(-2));
    assert_eq!(h.run(&["EXPIRETIME", "nope"]), int(-2));
    h.run(&["SET", "k", "v"]);
    assert_eq!(h.run(&["TTL", "k"]), int(-1));
    assert_eq!(h.run(&["PEXPIRETIME", "k"]), int(-1));
    for (ms, secs) in [("1499", 1), ("1500", 2), ("499", 0), ("500", 1), ("100000", 100)] {
        h.run(&["PEXPIRE", "k", ms]);
        assert_eq!(h.run(&["TTL", "k"]), int(secs), "{ms}");
        assert_eq!(h.run(&["PTTL", "k"]), int(ms.parse().unwrap()));
    }
    h.run(&["PEXPIREAT", "k", "2000000000500"]);
    assert_eq!(h.run(&["EXPIRETIME", "k"]), int(2000000001));
    assert_eq!(h.run(&["PEXPIRETIME", "k"]), int(2000000000500));
    assert_eq!(h.run(&["PERSIST", "k"]), int(1));
    assert_eq!(h.run(&["PERSIST", "k"]), int(0));
    assert_eq!(h.run(&["PERSIST", "nope"]), int(0));
    assert_eq!(h.run(&["TTL", "k"]), int(-1));
}

#[test]
fn randomkey_skips_expired_and_empties() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["RANDOMKEY"]), Reply::Null);
    h.run(&["SET", "live", "v"]);
    for i in 0..20 {
        h.run(&["SET", &format!("dead{i}"), "v", "PX", "1"]);
    }
    h.now_ms += 1;
    for _ in 0..5 {
        assert_eq!(h.run(&["RANDOMKEY"]), bulk("live"));
    }
    h.run(&["DEL", "live"]);
    assert_eq!(h.run(&["RANDOMKEY"]), Reply::Null);
}

#[test]
fn watch_sees_writes_and_lazy_expiry() {
    let mut h = Harness::new();
    let me = h.client_id;
    h.run(&["SET", "w", "v", "PX", "100"]);
    h.engine.watch.watch(me, 0, "w".into(), false);
    assert!(!h.engine.watch.is_dirty(me));
    // Reads do not touch.
    h.run(&["GET", "w"]);
    h.run(&["TTL", "w"]);
    assert!(!h.engine.watch.is_dirty(me));
    // Lazy expiry does.
    h.now_ms += 100;
    assert_eq!(h.run(&["GET", "w"]), Reply::Null);
    assert!(h.engine.watch.is_dirty(me));

    for write in [
        &["EXPIRE", "w", "10"][..],
        &["PERSIST", "w"],
        &["DEL", "w"],
        &["RENAME", "other", "w"],
        &["RENAME", "w", "other"],
        &["COPY", "other", "w", "REPLACE"],
        &["APPEND", "w", "x"],
        &["INCR", "n"],
    ] {
        h.engine.watch.unwatch_all(me);
        h.run(&["SET", "w", "1", "EX", "100"]);
        h.run(&["SET", "other", "1"]);
        h.run(&["SET", "n", "1"]);
        let key = if write[0] == "INCR" { "n" } else { "w" };
        h.engine.watch.watch(me, 0, key.into(), false);
        h.run(write);
        assert!(h.engine.watch.is_dirty(me), "{write:?}");
    }
    // A write to another key, or to the same name in another DB, does not.
    h.engine.watch.unwatch_all(me);
    h.engine.watch.watch(me, 0, "w".into(), false);
    h.run(&["SET", "x", "1"]);
    h.db = 1;
    h.run(&["SET", "w", "1"]);
    assert!(!h.engine.watch.is_dirty(me));
}

/// `n` keys `prefix0..` that have expired by `h.now_ms + 1` (set with PX 1).
fn expired_keys(h: &mut Harness, prefix: &str, n: usize) {
    for i in 0..n {
        h.run(&["SET", &format!("{prefix}{i}"), "v", "PX", "1"]);
    }
}

#[test]
fn randomkey_is_uniform_over_live_keys() {
    let mut h = Harness::new();
    for i in 0..5 {
        h.run(&["SET", &format!("k{i}"), "v"]);
        h.run(&["SET", &format!("k{}", i + 5), "v", "EX", "1000000"]);
    }
    // A key expires before every call, so calls keep drawing expired keys (about half their
    // draws, once as many expire as RANDOMKEY deletes): the answer must stay uniform.
    let mut counts = [0u64; 10];
    for n in 0..20_000 {
        h.run(&["SET", &format!("dead{n}"), "v", "PX", "1"]);
        h.now_ms += 1;
        let Reply::Bulk(k) = h.run(&["RANDOMKEY"]) else { panic!("a key") };
        let i: usize = std::str::from_utf8(&k[1..]).unwrap().parse().expect("a live key");
        counts[i] += 1;
    }
    let chi = crate::types::pick::tests::chi_square(&counts);
    assert!(chi < crate::types::pick::tests::CHI_SQUARE_9_DOF_P001, "{counts:?} chi² {chi}");
    // The expired keys it drew went, each logged as DEL (as lazy expiry logs them).
    let deleted = h.engine.stats().expired_keys;
    assert!(deleted > 10_000, "{deleted}");
    assert_eq!(h.engine.take_expired().len() as u64, deleted);
    assert_eq!(h.run(&["DBSIZE"]), int(10 + 20_000 - deleted as i64));
}

#[test]
fn randomkey_among_many_expired_keys_is_bounded() {
    // The probe of issue 26: most keys expired together. One call must not walk or delete
    // them one by one: at most 100 draws and 20 deletions, plus one fallback read.
    let mut h = Harness::new();
    expired_keys(&mut h, "dead", 50_000);
    h.run(&["SET", "forever", "v"]);
    h.now_ms += 1;
    let reads = h.engine.random_reads;
    assert_eq!(h.run(&["RANDOMKEY"]), bulk("forever"));
    assert!(h.engine.random_reads - reads <= 101, "{} reads", h.engine.random_reads - reads);
    let deleted = h.engine.stats().expired_keys;
    assert!(deleted <= 20, "{deleted} expired keys deleted by one call");
    assert_eq!(h.engine.take_expired().len() as u64, deleted);
    // Only live keys with an expiry: found by time.
    h.run(&["SET", "later", "v", "EX", "100"]);
    h.run(&["DEL", "forever"]);
    assert_eq!(h.run(&["RANDOMKEY"]), bulk("later"));
    assert!(h.engine.stats().expired_keys <= 40);
}

#[test]
fn randomkey_on_expired_keys_only_answers_nil_at_once() {
    let mut h = Harness::new();
    expired_keys(&mut h, "dead", 50_000);
    h.now_ms += 1;
    let reads = h.engine.random_reads;
    assert_eq!(h.run(&["RANDOMKEY"]), Reply::Null);
    assert_eq!(h.engine.random_reads, reads, "no draws: nothing live to find");
    // It deletes a bounded number of them, the soonest due first.
    assert_eq!(h.engine.stats().expired_keys, 20);
    assert_eq!(h.run(&["DBSIZE"]), int(50_000 - 20));
    // A small database of expired keys is emptied, as Redis empties it.
    h.db = 1;
    expired_keys(&mut h, "d", 5);
    h.now_ms += 1;
    assert_eq!(h.run(&["RANDOMKEY"]), Reply::Null);
    assert_eq!(h.run(&["DBSIZE"]), int(0));
}
