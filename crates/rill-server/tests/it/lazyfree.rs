//! Freeing in the background (Redis' lazyfree): which deletions hand a value or a database to
//! the lazyfree thread, counted in `lazyfreed_objects` as Redis counts them, step by step
//! against Redis 8.2.3; a flush's caller gets its reply once the keys are freed, the server
//! serving everyone else meanwhile, and requests pipelined behind it answer in order.

use crate::replica_link::info_field;
use rill_testkit::{escape, RawClient, ReferenceServer, Server};
use std::time::{Duration, Instant};

/// `lazyfreed_objects` once nothing is pending.
fn lazyfreed(c: &mut RawClient) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(c, "memory", "lazyfree_pending_objects").as_deref() != Some("0") {
        assert!(Instant::now() < deadline, "lazyfree never finished");
        std::thread::sleep(Duration::from_millis(5));
    }
    info_field(c, "memory", "lazyfreed_objects").expect("lazyfreed_objects").parse().expect("a count")
}

/// `key` made afresh as a set of the members m0..m{n-1} (a listpack up to
/// `set-max-listpack-entries`, a hash table above).
fn sadd(c: &mut RawClient, key: &str, n: usize) {
    c.cmd(&["DEL", key]);
    let members: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    let mut cmd = vec!["SADD", key];
    cmd.extend(members.iter().map(String::as_str));
    c.cmd(&cmd);
}

/// One step of the script: set up with `before`, then run `cmd`.
type Step = (&'static str, fn(&mut RawClient), &'static [&'static str]);

const STEPS: &[Step] = &[
    ("a big set, DEL (lazyfree-lazy-user-del no): freed in place", |c| sadd(c, "big", 1000), &["DEL", "big"]),
    ("a big set, UNLINK: in the background", |c| sadd(c, "big", 1000), &["UNLINK", "big"]),
    ("a small set (listpack), UNLINK: in place", |c| sadd(c, "small", 10), &["UNLINK", "small"]),
    (
        "a hash-table set of 64 (its effort at the threshold), UNLINK: in place",
        |c| {
            c.cmd(&["CONFIG", "SET", "set-max-listpack-entries", "16"]);
            sadd(c, "s64", 64);
        },
        &["UNLINK", "s64"],
    ),
    ("a hash-table set of 65, UNLINK: in the background", |c| sadd(c, "s65", 65), &["UNLINK", "s65"]),
    (
        "an intset of 500, UNLINK: in place",
        |c| {
            c.cmd(&["DEL", "ints"]);
            for i in 0..500 {
                c.cmd(&["SADD", "ints", &i.to_string()]);
            }
        },
        &["UNLINK", "ints"],
    ),
    ("a big set overwritten by SET, server-del no: in place", |c| sadd(c, "big", 1000), &["SET", "big", "x"]),
    (
        "lazyfree-lazy-server-del yes",
        |c| {
            c.cmd(&["CONFIG", "SET", "lazyfree-lazy-server-del", "yes"]);
            sadd(c, "big", 1000);
        },
        &["SET", "big", "x"],
    ),
    (
        "RENAME over a big set",
        |c| {
            sadd(c, "big", 1000);
            c.cmd(&["SET", "src", "v"]);
        },
        &["RENAME", "src", "big"],
    ),
    (
        "COPY REPLACE over a big set",
        |c| {
            sadd(c, "big", 1000);
            c.cmd(&["SET", "src", "v"]);
        },
        &["COPY", "src", "big", "REPLACE"],
    ),
    (
        "the set algebra's STORE over a big set",
        |c| {
            sadd(c, "big", 1000);
            sadd(c, "small", 3);
        },
        &["SUNIONSTORE", "big", "small"],
    ),
    (
        "DEL with lazyfree-lazy-user-del yes",
        |c| {
            c.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"]);
            sadd(c, "big", 1000);
        },
        &["DEL", "big", "small", "missing"],
    ),
    (
        "a big hash and a big sorted set, UNLINK",
        |c| {
            for i in 0..300 {
                let (f, s) = (format!("f{i}"), i.to_string());
                c.cmd(&["HSET", "h", &f, "v"]);
                c.cmd(&["ZADD", "z", &s, &f]);
            }
        },
        &["UNLINK", "h", "z"],
    ),
    (
        "a list of 2000 elements (quicklist nodes under the threshold), UNLINK",
        |c| {
            for i in 0..2000 {
                c.cmd(&["RPUSH", "l", &i.to_string()]);
            }
        },
        &["UNLINK", "l"],
    ),
    (
        "a list of 100 elements of 8 KB (a quicklist node each), UNLINK",
        |c| {
            let big = "x".repeat(8192);
            for _ in 0..100 {
                c.cmd(&["RPUSH", "l", &big]);
            }
        },
        &["UNLINK", "l"],
    ),
    (
        "a stream of many nodes with a group, UNLINK",
        |c| {
            c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "5"]);
            for i in 0..1000 {
                c.cmd(&["XADD", "st", "*", "f", &i.to_string()]);
            }
            c.cmd(&["XGROUP", "CREATE", "st", "g", "0"]);
            c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "st", ">"]);
        },
        &["UNLINK", "st"],
    ),
    (
        "a one-entry stream, UNLINK",
        |c| {
            c.cmd(&["XADD", "st", "*", "f", "v"]);
        },
        &["UNLINK", "st"],
    ),
    (
        "FLUSHALL ASYNC: every key counts",
        |c| {
            for i in 0..50 {
                c.cmd(&["SET", &format!("k{i}"), "v"]);
            }
            c.cmd(&["SELECT", "1"]);
            c.cmd(&["SET", "other-db", "v"]);
            c.cmd(&["SELECT", "0"]);
        },
        &["FLUSHALL", "ASYNC"],
    ),
    (
        "FLUSHDB without a mode: in the background, answered once freed",
        |c| {
            for i in 0..20 {
                c.cmd(&["SET", &format!("k{i}"), "v"]);
            }
        },
        &["FLUSHDB"],
    ),
    (
        "FLUSHALL SYNC: the same",
        |c| {
            c.cmd(&["SET", "a", "1"]);
            c.cmd(&["SET", "b", "1"]);
        },
        &["FLUSHALL", "SYNC"],
    ),
    (
        "FLUSHALL inside MULTI: in place",
        |c| {
            c.cmd(&["SET", "a", "1"]);
            c.cmd(&["MULTI"]);
            c.cmd(&["FLUSHALL"]);
        },
        &["EXEC"],
    ),
    (
        "FLUSHALL in a script: in place",
        |c| {
            c.cmd(&["SET", "a", "1"]);
        },
        &["EVAL", "return redis.call('FLUSHALL')", "0"],
    ),
    (
        "expiry of a big set with lazyfree-lazy-expire yes",
        |c| {
            c.cmd(&["CONFIG", "SET", "lazyfree-lazy-expire", "yes"]);
            sadd(c, "big", 1000);
            c.cmd(&["PEXPIRE", "big", "1"]);
            std::thread::sleep(Duration::from_millis(20));
        },
        &["EXISTS", "big"],
    ),
];

/// Each step's reply and `lazyfreed_objects` after it.
fn run(server: &Server) -> Vec<(String, u64)> {
    let mut c = server.connect();
    c.cmd(&["CONFIG", "RESETSTAT"]);
    STEPS
        .iter()
        .map(|(_, before, cmd)| {
            before(&mut c);
            let reply = escape(&c.cmd(cmd));
            (reply, lazyfreed(&mut c))
        })
        .collect()
}

#[test]
fn what_is_freed_in_the_background_is_counted_as_redis_counts_it() {
    let rill = Server::rill();
    let ours = run(&rill);
    let want = [0, 1, 1, 1, 2, 2, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10, 10, 62, 82, 84, 84, 84, 85];
    let got: Vec<u64> = ours.iter().map(|(_, n)| *n).collect();
    assert_eq!(got, want, "{ours:?}");
    let Some(redis) = Server::reference(ReferenceServer::Redis8) else { return };
    let theirs = run(&redis);
    for (((what, _, cmd), a), b) in STEPS.iter().zip(&ours).zip(&theirs) {
        assert_eq!(a, b, "{what}: {cmd:?}: rill vs Redis 8.2.3");
    }
}

/// A flush without ASYNC answers once its keys are freed, and what was pipelined behind it
/// answers after it, in order; another client is served while the keys are being freed.
#[test]
fn a_flush_answers_after_its_keys_are_freed_and_pipelined_requests_follow() {
    let server = Server::rill_with(&["--enable-debug-command", "yes"]);
    let mut c = server.connect();
    c.cmd(&["DEBUG", "POPULATE", "200000"]);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.send(b"FLUSHALL\r\nPING\r\nFLUSHALL\r\nFLUSHDB\r\nDBSIZE\r\n").unwrap();
    let mut other = server.connect();
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n", "another client is served");
    for want in [&b"+OK\r\n"[..], b"+PONG\r\n", b"+OK\r\n", b"+OK\r\n", b":0\r\n"] {
        assert_eq!(escape(&c.read_reply().unwrap()), escape(want));
    }
    // Counted before the reply: the keys were freed by then.
    assert_eq!(info_field(&mut other, "memory", "lazyfreed_objects").as_deref(), Some("200000"));
    // A client that closes while its flush is being freed: the keys are freed all the same.
    c.cmd(&["DEBUG", "POPULATE", "100000"]);
    c.send(b"FLUSHALL\r\n").unwrap();
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(20);
    while lazyfreed(&mut other) != 300_000 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(other.cmd(&["DBSIZE"]), b":0\r\n");
}
