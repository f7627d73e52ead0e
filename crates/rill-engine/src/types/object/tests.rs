//! OBJECT and MEMORY through the command table. The expected encodings are Redis 8.2.3's for
//! the same commands (measured against the real server; tests/diff/object.redis compares the
//! common cases byte for byte).

use crate::types::testkit::*;
use crate::Value;
use bytes::Bytes;
use rill_resp::Reply;

fn enc(h: &mut Harness, key: &str) -> Reply {
    h.run(&["OBJECT", "ENCODING", key])
}

fn x(n: usize) -> String {
    "x".repeat(n)
}

#[test]
fn missing_keys_arity_and_refcount() {
    let mut h = Harness::new();
    for sub in ["ENCODING", "REFCOUNT", "IDLETIME"] {
        assert_eq!(h.run(&["OBJECT", sub, "nope"]), Reply::Null, "{sub}");
    }
    assert_eq!(h.run(&["OBJECT", "FREQ", "nope"]), Reply::Null);
    assert_eq!(h.run(&["MEMORY", "USAGE", "nope"]), Reply::Null);
    assert_eq!(h.run(&["OBJECT", "ENCODING"]), err("ERR wrong number of arguments for 'object|encoding' command"));
    assert_eq!(
        h.run(&["OBJECT", "ENCODING", "a", "b"]),
        err("ERR wrong number of arguments for 'object|encoding' command")
    );
    h.run(&["SET", "n", "5"]);
    // rill shares no values, small integers included (Redis 8 neither).
    assert_eq!(h.run(&["OBJECT", "REFCOUNT", "n"]), int(1));
    let Reply::Array(lines) = h.run(&["OBJECT", "HELP"]) else { panic!("help") };
    assert!(lines.len() > 4);
    let Reply::Array(lines) = h.run(&["MEMORY", "HELP"]) else { panic!("help") };
    assert!(lines.len() > 4);
    assert_eq!(h.run(&["MEMORY", "PURGE"]), ok());
    assert_eq!(h.run(&["MEMORY", "MALLOC-STATS"]), bulk("Stats not supported for the current allocator"));
}

#[test]
fn string_encodings() {
    let mut h = Harness::new();
    for (value, want) in [
        ("123", "int"),
        ("-9223372036854775808", "int"),
        ("9223372036854775808", "embstr"),
        ("0123", "embstr"),
        (" 1", "embstr"),
        ("", "embstr"),
        ("1.5", "embstr"),
    ] {
        h.run(&["SET", "k", value]);
        assert_eq!(enc(&mut h, "k"), bulk(want), "{value:?}");
    }
    // Redis 8.2 embeds the key with the value: key + value <= 41 bytes, 33 with an expiry.
    h.run(&["SET", "k", &x(40)]);
    assert_eq!(enc(&mut h, "k"), bulk("embstr"));
    h.run(&["SET", "k", &x(41)]);
    assert_eq!(enc(&mut h, "k"), bulk("raw"));
    h.run(&["SET", "kk", &x(40)]);
    assert_eq!(enc(&mut h, "kk"), bulk("raw"));
    h.run(&["SET", "k", &x(32), "EX", "100"]);
    assert_eq!(enc(&mut h, "k"), bulk("embstr"));
    h.run(&["SET", "k", &x(33), "EX", "100"]);
    assert_eq!(enc(&mut h, "k"), bulk("raw"));
    // Gaining an expiry reallocates: an embstr that no longer fits is raw, for good.
    h.run(&["SET", "k", &x(35)]);
    assert_eq!(enc(&mut h, "k"), bulk("embstr"));
    h.run(&["EXPIRE", "k", "100"]);
    assert_eq!(enc(&mut h, "k"), bulk("raw"));
    h.run(&["PERSIST", "k"]);
    assert_eq!(enc(&mut h, "k"), bulk("raw"));
    // So does a longer name; a shorter one does not bring the embstr back.
    let long = "k".repeat(20);
    h.run(&["SET", "r", &x(30)]);
    h.run(&["RENAME", "r", &long]);
    assert_eq!(enc(&mut h, &long), bulk("raw"));
    h.run(&["RENAME", &long, "r"]);
    assert_eq!(enc(&mut h, "r"), bulk("raw"));
    h.run(&["SET", "c", &x(30)]);
    h.run(&["COPY", "c", &long, "REPLACE"]);
    assert_eq!(enc(&mut h, &long), bulk("raw"));
    assert_eq!(enc(&mut h, "c"), bulk("embstr"));
    // APPEND to an existing key and SETRANGE write into a raw string; APPEND to a new key
    // stores like SET.
    h.run(&["APPEND", "a", "123"]);
    assert_eq!(enc(&mut h, "a"), bulk("int"));
    h.run(&["APPEND", "a", "4"]);
    assert_eq!(enc(&mut h, "a"), bulk("raw"));
    h.run(&["SETRANGE", "s", "0", "ab"]);
    assert_eq!(enc(&mut h, "s"), bulk("raw"));
    h.run(&["SET", "s", "abc"]);
    h.run(&["SETRANGE", "s", "1", ""]);
    assert_eq!(enc(&mut h, "s"), bulk("embstr"));
    // INCRBYFLOAT never makes an int; INCR always does.
    h.run(&["SET", "f", "1.5"]);
    assert_eq!(h.run(&["INCRBYFLOAT", "f", "1.5"]), bulk("3"));
    assert_eq!(enc(&mut h, "f"), bulk("embstr"));
    h.run(&["INCR", "f"]);
    assert_eq!(enc(&mut h, "f"), bulk("int"));
    h.run(&["APPEND", "f", "0"]);
    h.run(&["INCR", "f"]);
    assert_eq!(enc(&mut h, "f"), bulk("int"));
}

#[test]
fn hash_conversions_are_one_way() {
    let mut h = Harness::new();
    let mut args = vec!["HSET".to_string(), "h".into()];
    for i in 0..512 {
        args.push(format!("f{i}"));
        args.push("v".into());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    h.run(&refs);
    assert_eq!(enc(&mut h, "h"), bulk("listpack"));
    h.run(&["HSET", "h", "f512", "v"]);
    assert_eq!(enc(&mut h, "h"), bulk("hashtable"));
    h.run(&["HDEL", "h", "f512", "f1", "f2"]);
    assert_eq!(enc(&mut h, "h"), bulk("hashtable"));
    // More pairs than the limit converts even when they repeat one field (Redis 7.2+).
    let mut dup = vec!["HSET", "d"];
    for _ in 0..513 {
        dup.extend(["f", "v"]);
    }
    assert_eq!(h.run(&dup), int(1));
    assert_eq!(enc(&mut h, "d"), bulk("hashtable"));
    // A value over 64 bytes, also when HINCRBYFLOAT produces it.
    h.run(&["HSET", "v", "a", &x(64)]);
    assert_eq!(enc(&mut h, "v"), bulk("listpack"));
    h.run(&["HSET", "v", "b", &x(65)]);
    assert_eq!(enc(&mut h, "v"), bulk("hashtable"));
    h.run(&["HSET", "n", "a", "1"]);
    h.run(&["HINCRBYFLOAT", "n", "a", "1e70"]);
    assert_eq!(enc(&mut h, "n"), bulk("hashtable"));
    // HSETNX on an existing field changes nothing.
    h.run(&["HSET", "nx", "a", "1"]);
    h.run(&["HSETNX", "nx", "a", &x(65)]);
    assert_eq!(enc(&mut h, "nx"), bulk("listpack"));
    // A lowered limit applies at the next write that checks it.
    h.run(&["HSET", "c", "a", "1"]);
    h.engine.config.object.hash_max_listpack_entries = 0;
    assert_eq!(enc(&mut h, "c"), bulk("listpack"));
    h.run(&["HSET", "c", "a", "2"]);
    assert_eq!(enc(&mut h, "c"), bulk("hashtable"));
    // The encoding moves with the value.
    h.run(&["RENAME", "h", "h2"]);
    assert_eq!(enc(&mut h, "h2"), bulk("hashtable"));
}

fn numbers(from: usize, to: usize) -> Vec<String> {
    (from..=to).map(|i| i.to_string()).collect()
}

fn run_with(h: &mut Harness, head: &[&str], rest: &[String]) -> Reply {
    let mut args: Vec<&str> = head.to_vec();
    args.extend(rest.iter().map(String::as_str));
    h.run(&args)
}

#[test]
fn set_conversions() {
    let mut h = Harness::new();
    h.run(&["SADD", "s", "1", "2", "3"]);
    assert_eq!(enc(&mut h, "s"), bulk("intset"));
    h.run(&["SADD", "s", "a"]);
    assert_eq!(enc(&mut h, "s"), bulk("listpack"));
    h.run(&["SREM", "s", "a"]);
    assert_eq!(enc(&mut h, "s"), bulk("listpack"));
    run_with(&mut h, &["SADD", "big"], &numbers(1, 200));
    assert_eq!(enc(&mut h, "big"), bulk("intset"));
    h.run(&["SADD", "big", "a"]);
    assert_eq!(enc(&mut h, "big"), bulk("hashtable"));
    run_with(&mut h, &["SADD", "i"], &numbers(1, 513));
    assert_eq!(enc(&mut h, "i"), bulk("hashtable"));
    // SPOP leaving a fifth or less rebuilds a hashtable set's rest as a listpack.
    h.run(&["SPOP", "i", "500"]);
    assert_eq!(h.run(&["SCARD", "i"]), int(13));
    assert_eq!(enc(&mut h, "i"), bulk("listpack"));
    run_with(&mut h, &["SADD", "m"], &(0..200).map(|i| format!("m{i}")).collect::<Vec<_>>());
    h.run(&["SPOP", "m", "150"]);
    assert_eq!(enc(&mut h, "m"), bulk("hashtable"));
    // Duplicates count toward the size hint of a new set.
    run_with(&mut h, &["SADD", "dup"], &vec!["a".to_string(); 130]);
    assert_eq!(enc(&mut h, "dup"), bulk("hashtable"));
    h.run(&["SADD", "long", &x(65)]);
    assert_eq!(enc(&mut h, "long"), bulk("hashtable"));
    // STOREs build their result fresh.
    run_with(&mut h, &["SADD", "d1", "a"], &numbers(1, 200));
    h.run(&["SADD", "d2", "a"]);
    h.run(&["SINTERSTORE", "d3", "d1", "d2"]);
    assert_eq!(enc(&mut h, "d3"), bulk("listpack"));
    h.run(&["SDIFFSTORE", "d4", "d1", "d2"]);
    assert_eq!(enc(&mut h, "d4"), bulk("intset"));
    // SDIFFSTORE that adds the whole first set, then removes: the first set's members decide.
    h.run(&["SADD", "f0", "a", "1", "2", "3", "4", "5", "6", "7", "8", "9"]);
    h.run(&["SADD", "e1", "zz"]);
    h.run(&["SADD", "e2", "yy"]);
    h.run(&["SDIFFSTORE", "d5", "f0", "d2", "e1", "e2"]);
    assert_eq!(enc(&mut h, "d5"), bulk("listpack"));
    h.run(&["SDIFFSTORE", "d6", "f0", "d2"]);
    assert_eq!(enc(&mut h, "d6"), bulk("intset"));
    h.run(&["SMOVE", "d1", "nd", "a"]);
    assert_eq!(enc(&mut h, "nd"), bulk("listpack"));
    h.run(&["SMOVE", "d1", "nd2", "5"]);
    assert_eq!(enc(&mut h, "nd2"), bulk("intset"));
}

#[test]
fn list_conversions_follow_the_node_layout() {
    let mut h = Harness::new();
    let e = x(100);
    let mut push = vec!["RPUSH", "l"];
    push.extend(std::iter::repeat_n(e.as_str(), 79));
    h.run(&push);
    assert_eq!(enc(&mut h, "l"), bulk("listpack"));
    h.run(&["RPUSH", "l", &e]);
    assert_eq!(enc(&mut h, "l"), bulk("quicklist"));
    // Back to a listpack only with one node of at most 4 KiB: 39 such elements.
    h.run(&["RPOP", "l", "40"]);
    assert_eq!(enc(&mut h, "l"), bulk("quicklist"));
    h.run(&["RPOP", "l"]);
    assert_eq!(h.run(&["LLEN", "l"]), int(39));
    assert_eq!(enc(&mut h, "l"), bulk("listpack"));
    // LTRIM and LREM shrink too; a large element (plain node) keeps the quicklist.
    h.run(&["RPUSH", "l", &x(9000)]);
    assert_eq!(enc(&mut h, "l"), bulk("quicklist"));
    h.run(&["LREM", "l", "0", &x(9000)]);
    assert_eq!(enc(&mut h, "l"), bulk("listpack"));
    // A count fill: nodes of 3 entries, back to a listpack at one entry.
    h.engine.config.object.list_max_listpack_size = 3;
    h.run(&["RPUSH", "c", "a", "b", "c", "d"]);
    assert_eq!(enc(&mut h, "c"), bulk("quicklist"));
    h.run(&["RPOP", "c", "2"]);
    assert_eq!(enc(&mut h, "c"), bulk("quicklist"));
    h.run(&["LTRIM", "c", "1", "1"]);
    assert_eq!(enc(&mut h, "c"), bulk("listpack"));
    // LSET out of range still makes room first, as Redis does.
    h.run(&["RPUSH", "s", "a", "b", "c"]);
    assert_eq!(enc(&mut h, "s"), bulk("listpack"));
    assert_eq!(h.run(&["LSET", "s", "5", "x"]), err("ERR index out of range"));
    assert_eq!(enc(&mut h, "s"), bulk("quicklist"));
    // LINSERT before a missing pivot converts too.
    h.engine.config.object.list_max_listpack_size = -2;
    h.run(&["RPUSH", "i", "a"]);
    assert_eq!(h.run(&["LINSERT", "i", "BEFORE", "zz", &x(9000)]), int(-1));
    assert_eq!(enc(&mut h, "i"), bulk("quicklist"));
}

#[test]
fn loaded_values_are_classified_by_content() {
    let mut h = Harness::new();
    let big: crate::keyspace::HashFields =
        (0..600).map(|i| (Bytes::from(format!("f{i}")), Bytes::from_static(b"v"))).collect();
    h.engine.insert(0, Bytes::from_static(b"h"), Value::Hash(big));
    assert_eq!(enc(&mut h, "h"), bulk("hashtable"));
    let ints: crate::keyspace::SetMembers = (0..10).map(|i| Bytes::from(i.to_string())).collect();
    h.engine.insert(0, Bytes::from_static(b"s"), Value::Set(ints));
    assert_eq!(enc(&mut h, "s"), bulk("intset"));
    // A RESTOREd hash that fits is a listpack, whatever the original was.
    h.run(&["HSET", "t", "a", &x(65)]);
    h.run(&["HDEL", "t", "a"]);
    h.run(&["HSET", "t", "b", "1"]);
    let Reply::Bulk(payload) = h.run(&["DUMP", "t"]) else { panic!("dump") };
    h.run_bytes(&[b"RESTORE", b"t2", b"0", &payload]);
    assert_eq!(enc(&mut h, "t2"), bulk("listpack"));
}

#[test]
fn idle_time_counts_accesses_only() {
    let mut h = Harness::new();
    h.run(&["SET", "k", "v"]);
    h.now_ms += 5_000;
    // TYPE, EXISTS, TTL, OBJECT and MEMORY USAGE are not accesses.
    for cmd in [
        &["TYPE", "k"][..],
        &["EXISTS", "k"],
        &["TTL", "k"],
        &["PTTL", "k"],
        &["OBJECT", "ENCODING", "k"],
        &["MEMORY", "USAGE", "k"],
    ] {
        h.run(cmd);
    }
    assert_eq!(h.run(&["OBJECT", "IDLETIME", "k"]), int(5));
    h.run(&["GET", "k"]);
    assert_eq!(h.run(&["OBJECT", "IDLETIME", "k"]), int(0));
    h.now_ms += 3_000;
    h.run(&["TOUCH", "k"]);
    assert_eq!(h.run(&["OBJECT", "IDLETIME", "k"]), int(0));
    h.now_ms += 2_000;
    h.run(&["SET", "k", "w"]);
    assert_eq!(h.run(&["OBJECT", "IDLETIME", "k"]), int(0));
    // MSET stamps its keys with the command's time too.
    h.now_ms += 60_000;
    h.run(&["MSET", "m", "1"]);
    assert_eq!(h.run(&["OBJECT", "IDLETIME", "m"]), int(0));
    // RESTORE IDLETIME sets it under an LRU (or no-eviction) policy.
    let Reply::Bulk(payload) = h.run(&["DUMP", "k"]) else { panic!("dump") };
    h.run_bytes(&[b"RESTORE", b"r", b"0", &payload, b"IDLETIME", b"1000"]);
    assert_eq!(h.run(&["OBJECT", "IDLETIME", "r"]), int(1000));
    assert_eq!(
        h.run(&["OBJECT", "FREQ", "r"]),
        err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.")
    );
}

#[test]
fn lfu_counter_under_an_lfu_policy() {
    let mut h = Harness::new();
    h.engine.config.object.lfu = true;
    h.run(&["SET", "a", "1"]);
    assert_eq!(h.run(&["OBJECT", "FREQ", "a"]), int(5));
    h.run(&["GET", "a"]);
    // From the initial value every access counts.
    assert_eq!(h.run(&["OBJECT", "FREQ", "a"]), int(6));
    // A new value starts again at 5.
    h.run(&["HSET", "hh", "f", "1"]);
    assert_eq!(h.run(&["OBJECT", "FREQ", "hh"]), int(5));
    assert_eq!(
        h.run(&["OBJECT", "IDLETIME", "a"]),
        err("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching \
             between policies at runtime LRU and LFU data will take some time to adjust.")
    );
    // The counter decays by one per minute.
    h.now_ms += 2 * 60_000;
    assert_eq!(h.run(&["OBJECT", "FREQ", "a"]), int(4));
    let Reply::Bulk(payload) = h.run(&["DUMP", "a"]) else { panic!("dump") };
    h.run_bytes(&[b"RESTORE", b"r", b"0", &payload, b"FREQ", b"100"]);
    assert_eq!(h.run(&["OBJECT", "FREQ", "r"]), int(100));
}

#[test]
fn memory_usage_is_an_estimate_that_grows() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["MEMORY", "USAGE", "k", "SAMPLES", "-1"]), err("ERR syntax error"));
    assert_eq!(h.run(&["MEMORY", "USAGE", "k", "SAMPLES", "x"]), err("ERR value is not an integer or out of range"));
    assert_eq!(h.run(&["MEMORY", "USAGE", "k", "SAMPLES"]), err("ERR syntax error"));
    assert_eq!(h.run(&["MEMORY", "USAGE", "k", "FOO", "1"]), err("ERR syntax error"));
    let usage = |h: &mut Harness, args: &[&str]| match h.run(args) {
        Reply::Integer(n) => n,
        other => panic!("{other:?}"),
    };
    h.run(&["SET", "k", "v"]);
    let small = usage(&mut h, &["MEMORY", "USAGE", "k"]);
    h.run(&["SET", "k", &x(1000)]);
    let big = usage(&mut h, &["MEMORY", "USAGE", "k"]);
    assert_eq!(big - small, 999);
    h.run(&["EXPIRE", "k", "100"]);
    assert!(usage(&mut h, &["MEMORY", "USAGE", "k"]) > big);
    for i in 0..100 {
        h.run(&["RPUSH", "l", &x(i)]);
        h.run(&["HSET", "h", &format!("f{i}"), &x(i)]);
        h.run(&["SADD", "s", &x(i)]);
        h.run(&["XADD", "x", "*", "f", &x(i)]);
    }
    for key in ["l", "h", "s", "x"] {
        let all = usage(&mut h, &["MEMORY", "USAGE", key, "SAMPLES", "0"]);
        let sampled = usage(&mut h, &["MEMORY", "USAGE", key]);
        assert!(all > 100 * 50, "{key}: {all}");
        assert!(sampled > 0, "{key}");
    }
    // Sampling the first elements of a list scales them to the whole list.
    let all = usage(&mut h, &["MEMORY", "USAGE", "l", "SAMPLES", "0"]);
    let five = usage(&mut h, &["MEMORY", "USAGE", "l", "SAMPLES", "5"]);
    assert!(five < all);
}
