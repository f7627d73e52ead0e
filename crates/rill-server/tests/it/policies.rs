//! Group policies (docs/spec/policies.md) through a real client (the `redis` crate) and the raw
//! client: a crashed consumer's entries handed back by ACKWAIT to a reader of `>` only, a
//! poison entry dead-lettered after exactly MAXDELIVER attempts with its provenance, BACKOFF
//! and RILL.NACK DELAY, RILL.TOUCH, every bad input with its error (and a rejected SET changing
//! nothing), ORDERBY with four concurrent consumers, and the policies' state (ORDERBY's
//! deferred entries included) across kill -9, a log rewrite and a snapshot.

use rill_testkit::{escape, Proc, RawClient, Server, TempDir, Value};
use std::time::{Duration, Instant};

fn redis_client(server: &Server) -> redis::Connection {
    redis::Client::open(server.url()).unwrap().get_connection().unwrap()
}

/// `RILL.GROUP INFO` as (name, value) pairs, values as text (arrays joined by commas).
fn info(c: &mut RawClient, key: &str, group: &str) -> Vec<(String, String)> {
    let v = c.cmd_value(&["RILL.GROUP", "INFO", key, group]);
    let items = v.as_array().unwrap_or_else(|| panic!("{v:?}")).to_vec();
    items
        .chunks(2)
        .map(|kv| {
            let text = |v: &Value| match v {
                Value::Int(n) => n.to_string(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| if let Value::Int(n) = i { n.to_string() } else { String::new() })
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.as_str().unwrap_or_default().to_string(),
            };
            (text(&kv[0]), text(&kv[1]))
        })
        .collect()
}

fn field(pairs: &[(String, String)], name: &str) -> String {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("no {name} in {pairs:?}"))
}

fn ok(c: &mut RawClient, args: &[&str]) {
    let r = c.cmd(args);
    assert_eq!(r, b"+OK\r\n", "{args:?}: {}", escape(&r));
}

/// A consumer crashes holding 50 entries; a second consumer, blocked on `>` only, gets all
/// of them once their ack deadline passes (woken by the hand-back), each as a second delivery.
#[test]
fn a_crashed_consumers_entries_reach_a_reader_of_new_entries_after_ackwait() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "ACKWAIT", "300"]);
    let mut ids = Vec::new();
    let mut con = redis_client(&server);
    for i in 0..50 {
        let id: String = redis::cmd("XADD").arg("s").arg("*").arg("n").arg(i).query(&mut con).unwrap();
        ids.push(id);
    }
    let read = |con: &mut redis::Connection, consumer: &str, block: Option<u64>| -> Vec<String> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP").arg("g").arg(consumer).arg("COUNT").arg(100);
        if let Some(ms) = block {
            cmd.arg("BLOCK").arg(ms);
        }
        let reply: redis::Value = cmd.arg("STREAMS").arg("s").arg(">").query(con).unwrap();
        let mut got = Vec::new();
        if let redis::Value::Array(streams) = reply {
            for s in streams {
                let redis::Value::Array(kv) = s else { continue };
                let Some(redis::Value::Array(entries)) = kv.get(1) else { continue };
                for e in entries {
                    if let redis::Value::Array(e) = e {
                        if let Some(redis::Value::BulkString(id)) = e.first() {
                            got.push(String::from_utf8_lossy(id).into_owned());
                        }
                    }
                }
            }
        }
        got
    };
    let crashed = read(&mut con, "crashed", None);
    assert_eq!(crashed, ids);
    let delivered_at = Instant::now();
    // Nothing new yet: the rescuer blocks, and is woken by the hand-back.
    let mut rescuer = redis_client(&server);
    let rescued = read(&mut rescuer, "rescuer", Some(5000));
    let waited = delivered_at.elapsed();
    assert_eq!(rescued, ids, "handed back in ID order, all of them");
    assert!(waited >= Duration::from_millis(280), "handed back before the deadline: {waited:?}");
    let pending: redis::Value =
        redis::cmd("XPENDING").arg("s").arg("g").arg("-").arg("+").arg(100).query(&mut con).unwrap();
    let redis::Value::Array(rows) = pending else { panic!("{pending:?}") };
    assert_eq!(rows.len(), 50);
    for row in rows {
        let redis::Value::Array(row) = row else { panic!() };
        assert_eq!(row.get(1), Some(&redis::Value::BulkString(b"rescuer".to_vec())));
        assert_eq!(row.get(3), Some(&redis::Value::Int(2)), "a second delivery");
    }
    let i = info(&mut c, "s", "g");
    assert_eq!(field(&i, "handed-back"), "50");
    assert_eq!(field(&i, "redelivered"), "50");
    assert_eq!(field(&i, "delivered"), "50");
    // The old owner's late XACK still acks (as in Redis and JetStream).
    let acked: i64 = redis::cmd("XACK").arg("s").arg("g").arg(&ids[0]).query(&mut con).unwrap();
    assert_eq!(acked, 1);
    assert_eq!(field(&info(&mut c, "s", "g"), "acked"), "1");
}

/// A poison entry: MAXDELIVER 3, each attempt ends in XNACK FAIL; the third failure moves it
/// to the dead-letter stream (waking its blocked reader) with its fields and provenance, and
/// it leaves the PEL; the other entry is untouched.
#[test]
fn a_poison_entry_is_dead_lettered_after_exactly_maxdeliver_attempts() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "orders", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "orders", "g", "MAXDELIVER", "3"]);
    c.cmd(&["XADD", "orders", "1-1", "sku", "A", "qty", "2"]);
    c.cmd(&["XADD", "orders", "2-1", "sku", "B"]);
    // A reader of the dead-letter stream, blocked before anything is there.
    let mut dlq_reader = server.connect();
    dlq_reader.send_command(&[b"XREAD", b"BLOCK", b"10000", b"STREAMS", b"{orders}:dlq", b"$"]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    for attempt in 1..=3 {
        let r = c.cmd(&["XREADGROUP", "GROUP", "g", "w", "COUNT", "1", "STREAMS", "orders", ">"]);
        assert!(escape(&r).contains("1-1"), "attempt {attempt}: {}", escape(&r));
        assert_eq!(c.cmd(&["XLEN", "{orders}:dlq"]), b":0\r\n", "not before the last attempt");
        assert_eq!(c.cmd(&["XNACK", "orders", "g", "FAIL", "IDS", "1", "1-1"]), b":1\r\n");
    }
    let woke = escape(&dlq_reader.read_reply().unwrap());
    assert!(woke.contains("rill-reason"), "{woke}");
    let entries = c.cmd_value(&["XRANGE", "{orders}:dlq", "-", "+"]);
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 1);
    let fields: Vec<String> =
        entries[0].as_array().unwrap()[1].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert_eq!(&fields[..4], ["sku", "A", "qty", "2"], "the original fields first, in order");
    let prov: Vec<(&str, &str)> = fields[4..].chunks(2).map(|kv| (kv[0].as_str(), kv[1].as_str())).collect();
    let names: Vec<&str> = prov.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        names,
        [
            "rill-source-stream",
            "rill-source-id",
            "rill-group",
            "rill-consumer",
            "rill-deliveries",
            "rill-reason",
            "rill-first-delivery-ms",
            "rill-last-delivery-ms"
        ]
    );
    assert_eq!(
        &prov[..6],
        [
            ("rill-source-stream", "orders"),
            ("rill-source-id", "1-1"),
            ("rill-group", "g"),
            ("rill-consumer", "w"),
            ("rill-deliveries", "3"),
            ("rill-reason", "maxdeliver")
        ]
    );
    // Out of the PEL; the source entry stays in the stream.
    assert_eq!(c.cmd(&["XPENDING", "orders", "g", "-", "+", "10"]), b"*0\r\n");
    assert_eq!(c.cmd(&["XLEN", "orders"]), b":2\r\n");
    let i = info(&mut c, "orders", "g");
    assert_eq!((field(&i, "dead-lettered").as_str(), field(&i, "nacked").as_str()), ("1", "2"));
    // The next `>` read goes on with the other entry.
    let r = c.cmd(&["XREADGROUP", "GROUP", "g", "w", "COUNT", "5", "STREAMS", "orders", ">"]);
    assert!(escape(&r).contains("2-1") && !escape(&r).contains("1-1"), "{}", escape(&r));
    // XNACK FATAL dead-letters at once, reason fatal; a DLQ of another type fails the move,
    // which leaves the entry pending and counts the failure.
    ok(&mut c, &["SET", "taken", "x"]);
    let e = c.cmd(&["RILL.GROUP", "SET", "orders", "g", "DEADLETTER", "taken"]);
    assert!(escape(&e).starts_with("-ERR DEADLETTER names a key"), "{}", escape(&e));
    assert_eq!(c.cmd(&["XNACK", "orders", "g", "FATAL", "IDS", "1", "2-1"]), b":1\r\n");
    let last = escape(&c.cmd(&["XREVRANGE", "{orders}:dlq", "+", "-", "COUNT", "1"]));
    assert!(last.contains("fatal") && last.contains("2-1"), "{last}");
}

/// BACKOFF delays a failed entry; RILL.NACK DELAY overrides the schedule; DELAY 0 is at once;
/// a blocked `>` reader is woken when the delay ends.
#[test]
fn backoff_and_nack_delay_hold_an_entry_back_for_their_time() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "BACKOFF", "400,800"]);
    c.cmd(&["XADD", "s", "1-1", "f", "v"]);
    let read = |c: &mut RawClient, block: &str| {
        let args = ["XREADGROUP", "GROUP", "g", "w", "BLOCK", block, "STREAMS", "s", ">"];
        escape(&c.cmd(&args))
    };
    let first = read(&mut c, "100");
    assert!(first.contains("1-1"), "{first}");
    let failed_at = Instant::now();
    assert_eq!(c.cmd(&["RILL.NACK", "s", "g", "IDS", "1", "1-1"]), b":1\r\n");
    // Waiting out its first backoff value: not served to a non-blocking read.
    let none = c.cmd(&["XREADGROUP", "GROUP", "g", "w", "STREAMS", "s", ">"]);
    assert_eq!(none, b"*-1\r\n", "{}", escape(&none));
    assert_eq!(field(&info(&mut c, "s", "g"), "delayed"), "1");
    let r = read(&mut c, "5000");
    let waited = failed_at.elapsed();
    assert!(r.contains("1-1"), "{r}");
    assert!(waited >= Duration::from_millis(380), "served after {waited:?}");
    // An explicit delay overrides the schedule; DELAY 0 hands it back at once.
    assert_eq!(c.cmd(&["RILL.NACK", "s", "g", "DELAY", "0", "IDS", "1", "1-1"]), b":1\r\n");
    assert!(read(&mut c, "100").contains("1-1"));
    let failed_at = Instant::now();
    assert_eq!(c.cmd(&["RILL.NACK", "s", "g", "DELAY", "150", "IDS", "1", "1-1"]), b":1\r\n");
    assert!(read(&mut c, "5000").contains("1-1"));
    let waited = failed_at.elapsed();
    assert!(waited >= Duration::from_millis(140) && waited < Duration::from_millis(700), "{waited:?}");
}

/// RILL.TOUCH restarts the deadline of entries the consumer owns, without a delivery; ids it
/// does not own are not counted.
#[test]
fn touch_keeps_an_entry_from_being_handed_back() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "ACKWAIT", "400"]);
    c.cmd(&["XADD", "s", "1-1", "f", "v"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"]);
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(c.cmd(&["RILL.TOUCH", "s", "g", "alice", "IDS", "2", "1-1", "9-9"]), b":1\r\n");
    }
    assert_eq!(c.cmd(&["RILL.TOUCH", "s", "g", "bob", "IDS", "1", "1-1"]), b":0\r\n");
    let p = c.cmd_value(&["XPENDING", "s", "g", "-", "+", "10"]);
    let row = p.as_array().unwrap()[0].as_array().unwrap().to_vec();
    assert_eq!((row[1].as_str(), &row[3]), (Some("alice"), &Value::Int(1)), "still alice's, one delivery: {p:?}");
    std::thread::sleep(Duration::from_millis(600));
    let p = escape(&c.cmd(&["XPENDING", "s", "g", "-", "+", "10"]));
    assert!(!p.contains("alice"), "handed back once not touched: {p}");
}

/// Every bad input gets its error, and a rejected SET changes nothing.
#[test]
fn bad_policy_input_is_refused_and_changes_nothing() {
    let server = Server::rill();
    let mut c = server.connect();
    let err = |c: &mut RawClient, args: &[&str]| {
        let r = c.cmd(args);
        assert!(r.starts_with(b"-"), "{args:?}: {}", escape(&r));
        String::from_utf8_lossy(&r).trim_end().to_string()
    };
    assert_eq!(err(&mut c, &["RILL.GROUP", "GET", "nokey", "g"]), "-NOGROUP No such key 'nokey' or consumer group 'g'");
    ok(&mut c, &["SET", "str", "x"]);
    assert!(err(&mut c, &["RILL.GROUP", "SET", "str", "g", "MAXDELIVER", "1"]).starts_with("-WRONGTYPE"));
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    assert_eq!(
        err(&mut c, &["RILL.GROUP", "SET", "s", "nog", "MAXDELIVER", "1"]),
        "-NOGROUP No such key 's' or consumer group 'nog'"
    );
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "MAXDELIVER", "4", "ACKWAIT", "1000"]);
    let before = info(&mut c, "s", "g");
    for (args, want) in [
        (vec!["MAXDELIVER", "-1"], "-ERR MAXDELIVER must be 0 (off) or a positive integer"),
        (vec!["ACKWAIT", "soon"], "-ERR ACKWAIT must be 0 (off) or a positive integer (milliseconds)"),
        (
            vec!["BACKOFF", "10,,20"],
            "-ERR BACKOFF must be 1 to 32 comma-separated non-negative integers (milliseconds)",
        ),
        (vec!["DEADLETTER", "s"], "-ERR DEADLETTER may not name the stream itself"),
        (vec!["DEADLETTER", "str"], "-ERR DEADLETTER names a key that holds a value other than a stream"),
        (vec!["CONSUMERIDLE", "999"], "-ERR CONSUMERIDLE must be 0 (off) or at least 1000 (milliseconds)"),
        (vec!["GROUPIDLE", "-5"], "-ERR GROUPIDLE must be 0 (off) or at least 1000 (milliseconds)"),
        (vec!["NOSUCH", "1"], "-ERR syntax error"),
        (vec!["MAXDELIVER"], "-ERR syntax error"),
    ] {
        // A good pair first: all-or-nothing means it is not applied either.
        let mut full = vec!["RILL.GROUP", "SET", "s", "g", "MAXDELIVER", "9"];
        full.extend(args);
        assert_eq!(err(&mut c, &full), want, "{full:?}");
    }
    let too_many = vec!["1"; 33].join(",");
    assert!(err(&mut c, &["RILL.GROUP", "SET", "s", "g", "BACKOFF", &too_many]).starts_with("-ERR BACKOFF"));
    assert_eq!(info(&mut c, "s", "g"), before, "nothing changed");
    assert_eq!(
        err(&mut c, &["RILL.GROUP", "SET", "s", "g"]),
        "-ERR wrong number of arguments for 'rill.group|set' command"
    );
    assert!(err(&mut c, &["RILL.GROUP", "NOPE"]).starts_with("-ERR unknown subcommand 'NOPE'"));
    assert_eq!(err(&mut c, &["RILL.NACK", "s", "g", "IDS", "0", "1-1"]), "-ERR numids must be a positive integer");
    assert_eq!(err(&mut c, &["RILL.NACK", "s", "g", "IDS", "2", "1-1"]), "-ERR number of IDs doesn't match numids");
    assert_eq!(
        err(&mut c, &["RILL.NACK", "s", "g", "DELAY", "-5", "IDS", "1", "1-1"]),
        "-ERR DELAY must be 0 (off) or a positive integer (milliseconds)"
    );
    assert_eq!(
        err(&mut c, &["RILL.NACK", "s", "g", "IDS", "1", "bad"]),
        "-ERR Invalid stream ID specified as stream command argument"
    );
    ok(&mut c, &["XGROUP", "CREATE", "s", "plain", "$"]);
    assert_eq!(
        err(&mut c, &["RILL.NACK", "s", "plain", "DELAY", "10", "IDS", "1", "1-1"]),
        "-ERR DELAY needs a group with a policy (RILL.GROUP SET)"
    );
    assert!(err(&mut c, &["RILL.TOUCH", "s", "g", "c", "IDS"]).contains("wrong number of arguments"));
    // UNSET returns options to their defaults; a group without a policy reads as defaults.
    ok(&mut c, &["RILL.GROUP", "UNSET", "s", "g", "MAXDELIVER", "ackwait"]);
    let after = info(&mut c, "s", "g");
    assert_eq!((field(&after, "maxdeliver").as_str(), field(&after, "ackwait").as_str()), ("0", "0"));
    assert_eq!(field(&info(&mut c, "s", "plain"), "deadletter"), "{s}:dlq");
    // The command table documents them.
    let docs = escape(&c.cmd(&["COMMAND", "DOCS", "rill.group"]));
    assert!(docs.contains("rill.group|set") && docs.contains("policy"), "{docs}");
    assert!(escape(&c.cmd(&["COMMAND", "INFO", "rill.nack"])).contains("rill.nack"));
}

/// A policy's settings, counters and delays come back after kill -9 (from the log), after a
/// log rewrite (from its base snapshot) and from an RDB snapshot alone.
#[test]
fn policies_survive_kill_9_a_rewrite_and_a_snapshot() {
    let dir = TempDir::new("policies-restart");
    let start = || Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let server = start();
    let mut c = server.client();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(
        &mut c,
        &[
            "RILL.GROUP",
            "SET",
            "s",
            "g",
            "ACKWAIT",
            "600000",
            "BACKOFF",
            "600000",
            "MAXDELIVER",
            "5",
            "DEADLETTER",
            "dead",
        ],
    );
    for id in ["1-1", "2-1", "3-1"] {
        c.cmd(&["XADD", "s", id, "f", "v"]);
    }
    c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"]);
    c.cmd(&["XACK", "s", "g", "3-1"]);
    assert_eq!(c.cmd(&["RILL.NACK", "s", "g", "IDS", "1", "1-1"]), b":1\r\n");
    // A second group orders by `f`: one entry in flight, two deferred behind it.
    ok(&mut c, &["XGROUP", "CREATE", "s", "g2", "0"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g2", "ORDERBY", "f"]);
    let first = c.cmd(&["XREADGROUP", "GROUP", "g2", "bob", "COUNT", "10", "STREAMS", "s", ">"]);
    assert!(escape(&first).contains("1-1") && !escape(&first).contains("2-1"), "{}", escape(&first));
    let state = |c: &mut RawClient| {
        let mut i = info(c, "s", "g");
        i.retain(|(k, _)| k != "oldest-pending-ms");
        let mut i2 = info(c, "s", "g2");
        i2.retain(|(k, _)| k != "oldest-pending-ms");
        i.extend(i2);
        // Each pending entry without its idle time (which goes on counting).
        let p = c.cmd_value(&["XPENDING", "s", "g", "-", "+", "10"]);
        let rows: Vec<String> = p
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let r = r.as_array().unwrap();
                format!("{:?} {:?} {:?}", r[0], r[1], r[3])
            })
            .collect();
        (i, rows)
    };
    let before = state(&mut c);
    assert_eq!(field(&before.0, "delayed"), "1");
    assert_eq!(field(&info(&mut c, "s", "g2"), "deferred"), "2");
    server.kill9();
    let server = start();
    let mut c = server.client();
    assert_eq!(state(&mut c), before, "after kill -9 (log replay)");
    ok(&mut c, &["SET", "x", "1"]);
    c.cmd(&["BGREWRITEAOF"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let busy = |c: &mut RawClient| {
        let p = String::from_utf8_lossy(&c.cmd(&["INFO", "persistence"])).into_owned();
        p.contains("aof_rewrite_in_progress:1") || p.contains("aof_rewrite_scheduled:1")
    };
    while busy(&mut c) {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    server.kill9();
    let server = start();
    let mut c = server.client();
    assert_eq!(state(&mut c), before, "after a rewrite (base snapshot)");
    ok(&mut c, &["SAVE"]);
    server.kill9();
    std::fs::remove_dir_all(dir.path().join("appendonlydir")).unwrap();
    let server = Proc::start(dir.path(), &[]);
    let mut c = server.client();
    assert_eq!(state(&mut c), before, "from the RDB snapshot alone");
    // The deferred entries come next, in order, once the key's entry in flight is acked.
    assert_eq!(c.cmd(&["XACK", "s", "g2", "1-1"]), b":1\r\n");
    let next = c.cmd(&["XREADGROUP", "GROUP", "g2", "bob", "COUNT", "10", "STREAMS", "s", ">"]);
    assert!(escape(&next).contains("2-1") && !escape(&next).contains("3-1"), "{}", escape(&next));
}

/// A rill replica gets the policy and every action as its primary's records and never acts
/// itself (its counters equal the primary's); promoted mid-policy, it enforces the deadline of
/// an entry its old primary delivered. A full sync carries the policy in the snapshot.
#[test]
fn a_rill_replica_holds_the_policy_without_acting_and_enforces_it_once_promoted() {
    use crate::replica_link::wait_caught_up;
    let (p_server, r_server, late_server) = (Server::rill(), Server::rill(), Server::rill());
    let (mut p, mut r, mut late) = (p_server.connect(), r_server.connect(), late_server.connect());
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &p_server.port.to_string()]), b"+OK\r\n");
    ok(&mut p, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut p, &["RILL.GROUP", "SET", "s", "g", "ACKWAIT", "300", "MAXDELIVER", "2"]);
    p.cmd(&["XADD", "s", "1-1", "f", "v"]);
    p.cmd(&["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
    // Handed back by the primary's timer, then dead-lettered at the second deadline.
    std::thread::sleep(Duration::from_millis(450));
    p.cmd(&["XREADGROUP", "GROUP", "g", "b", "STREAMS", "s", ">"]);
    std::thread::sleep(Duration::from_millis(450));
    let settle = |p: &mut RawClient| {
        let mut i = info(p, "s", "g");
        i.retain(|(k, _)| k != "oldest-pending-ms");
        i
    };
    let ours = settle(&mut p);
    assert_eq!((field(&ours, "handed-back").as_str(), field(&ours, "dead-lettered").as_str()), ("1", "1"));
    wait_caught_up(&mut p, &mut r);
    assert_eq!(settle(&mut r), ours, "the replica holds the primary's state");
    assert_eq!(r.cmd(&["XLEN", "{s}:dlq"]), b":1\r\n");
    // A replica attached now gets it all through a full sync's snapshot.
    assert_eq!(late.cmd(&["REPLICAOF", "127.0.0.1", &p_server.port.to_string()]), b"+OK\r\n");
    wait_caught_up(&mut p, &mut late);
    assert_eq!(settle(&mut late), ours, "through a full sync");
    // A delivery on the primary, then the replica is promoted before its deadline: the
    // replica did not hand it back while a replica, and does once it is the primary.
    p.cmd(&["XADD", "s", "2-1", "f", "v"]);
    p.cmd(&["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
    wait_caught_up(&mut p, &mut r);
    drop(p_server);
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let i = info(&mut r, "s", "g");
        if field(&i, "handed-back") == "2" {
            break;
        }
        assert!(Instant::now() < deadline, "the promoted replica never handed 2-1 back: {i:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An entry claimed explicitly (XCLAIM, XAUTOCLAIM) on a group with ACKWAIT gets a deadline
/// from its claim, like a delivery: a claimer that dies loses it back to the group.
#[test]
fn claimed_entries_have_ack_deadlines_too() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    c.cmd(&["XADD", "s", "1-1", "f", "v"]);
    c.cmd(&["XADD", "s", "2-1", "f", "v"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
    // Released before the policy exists: they are the hand-back queue once it does.
    assert_eq!(c.cmd(&["XNACK", "s", "g", "FAIL", "IDS", "2", "1-1", "2-1"]), b":2\r\n");
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "ACKWAIT", "300"]);
    assert_eq!(field(&info(&mut c, "s", "g"), "handed-back-queue"), "2");
    let claimed = escape(&c.cmd(&["XCLAIM", "s", "g", "b", "0", "1-1", "JUSTID"]));
    assert!(claimed.contains("1-1"), "{claimed}");
    let auto = escape(&c.cmd(&["XAUTOCLAIM", "s", "g", "b", "0", "2-1", "JUSTID"]));
    assert!(auto.contains("2-1"), "{auto}");
    assert_eq!(field(&info(&mut c, "s", "g"), "handed-back-queue"), "0");
    let deadline = Instant::now() + Duration::from_secs(5);
    while field(&info(&mut c, "s", "g"), "handed-back") != "2" {
        assert!(Instant::now() < deadline, "claimed entries never handed back");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = escape(&c.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]));
    assert!(r.contains("1-1") && r.contains("2-1"), "{r}");
}

/// A claim (XCLAIM, XAUTOCLAIM, XREADGROUP ... CLAIM) of an entry that has had MAXDELIVER
/// deliveries dead-letters it instead of delivering it again.
#[test]
fn a_claim_of_an_entry_at_its_limit_dead_letters_it() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "MAXDELIVER", "2"]);
    for id in ["1-1", "2-1", "3-1"] {
        c.cmd(&["XADD", "s", id, "f", "v"]);
    }
    c.cmd(&["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
    // A second delivery of each, by claim: the limit is reached, not passed.
    let second = escape(&c.cmd(&["XCLAIM", "s", "g", "b", "0", "1-1", "2-1", "3-1"]));
    assert!(second.contains("1-1") && second.contains("3-1"), "{second}");
    // The third would pass it: each claim form dead-letters instead.
    assert_eq!(c.cmd(&["XCLAIM", "s", "g", "c", "0", "1-1", "JUSTID"]), b"*0\r\n");
    let auto = escape(&c.cmd(&["XAUTOCLAIM", "s", "g", "c", "0", "2-1", "COUNT", "1", "JUSTID"]));
    assert!(!auto.contains("$3\\r\\n2-1"), "{auto}");
    let read = escape(&c.cmd(&["XREADGROUP", "GROUP", "g", "c", "CLAIM", "0", "STREAMS", "s", ">"]));
    assert!(!read.contains("3-1"), "{read}");
    assert_eq!(c.cmd(&["XPENDING", "s", "g", "-", "+", "10"]), b"*0\r\n");
    let dlq = escape(&c.cmd(&["XRANGE", "{s}:dlq", "-", "+"]));
    for id in ["1-1", "2-1", "3-1"] {
        assert!(dlq.contains(&format!("rill-source-id\\r\\n$3\\r\\n{id}")), "{id} in {dlq}");
    }
    assert_eq!(field(&info(&mut c, "s", "g"), "dead-lettered"), "3");
}

/// MAXACKPENDING / MAXACKPENDINGCONSUMER: a read takes only what fits under the caps; at a cap
/// it gets Redis' answer for nothing new (nil, or it blocks, woken by an XACK that frees room);
/// claims claim fewer; INFO counts the reads held back.
#[test]
fn pending_caps_stall_reads_and_claims_and_resume_on_ack() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "MAXACKPENDING", "3", "MAXACKPENDINGCONSUMER", "2"]);
    for i in 1..=6 {
        c.cmd(&["XADD", "s", &format!("{i}-1"), "f", "v"]);
    }
    let ids = |r: &[u8]| -> Vec<String> {
        let text = escape(r);
        (1..=6)
            .map(|i| format!("{i}-1"))
            .filter(|id| text.contains(&format!("${}\\r\\n{id}\\r\\n", id.len())))
            .collect()
    };
    let read =
        |c: &mut RawClient, who: &str| c.cmd(&["XREADGROUP", "GROUP", "g", who, "COUNT", "10", "STREAMS", "s", ">"]);
    assert_eq!(ids(&read(&mut c, "a")), ["1-1", "2-1"], "the consumer cap");
    assert_eq!(read(&mut c, "a"), b"*-1\r\n", "a is at its cap");
    assert_eq!(ids(&read(&mut c, "b")), ["3-1"], "the group cap");
    assert_eq!(read(&mut c, "b"), b"*-1\r\n", "the group is at its cap");
    // A claim that would pass a cap claims fewer: b may take one of a's (the group's count
    // stays), not a released one.
    assert_eq!(c.cmd(&["XNACK", "s", "g", "FAIL", "IDS", "1", "2-1"]), b":1\r\n");
    assert_eq!(ids(&read(&mut c, "c")), ["2-1"], "a hand-back fits the room it freed");
    let claimed = c.cmd(&["XCLAIM", "s", "g", "b", "0", "1-1", "JUSTID"]);
    assert!(escape(&claimed).contains("1-1"), "{}", escape(&claimed));
    assert_eq!(c.cmd(&["XCLAIM", "s", "g", "b", "0", "2-1", "JUSTID"]), b"*0\r\n", "b is at its own cap");
    // A blocked reader at the cap is woken by an XACK that frees room.
    let mut blocked = server.connect();
    blocked.send_command(&[b"XREADGROUP", b"GROUP", b"g", b"d", b"BLOCK", b"5000", b"STREAMS", b"s", b">"]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd(&["XACK", "s", "g", "1-1"]), b":1\r\n");
    let woke = blocked.read_reply().unwrap();
    assert_eq!(ids(&woke), ["4-1"], "{}", escape(&woke));
    let held: u64 = field(&info(&mut c, "s", "g"), "reads-held-back").parse().unwrap();
    assert!(held >= 3, "held back {held}");
    assert_eq!(field(&info(&mut c, "s", "g"), "maxackpending"), "3");
}

/// ORDERBY with four consumers reading `>` at once (the `redis` crate, one thread each): two
/// entries of one key are never held by two consumers at once, and each key's entries are
/// acknowledged in stream order, through RILL.NACK redeliveries too; every entry is handled.
#[test]
fn orderby_keeps_one_entry_per_key_in_flight_and_each_keys_order() {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    const ENTRIES: usize = 400;
    const SYMBOLS: usize = 6;
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "ticks", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "ticks", "g", "ORDERBY", "sym", "ACKWAIT", "30000"]);
    let mut con = redis_client(&server);
    // A skewed mix: symbol 0 is a third of the ticks; a few ticks carry no symbol (unordered).
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for n in 0..ENTRIES {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let sym = if rng.is_multiple_of(3) { 0 } else { (rng >> 8) as usize % SYMBOLS };
        let mut cmd = redis::cmd("XADD");
        cmd.arg("ticks").arg("*").arg("n").arg(n);
        if n % 50 != 7 {
            cmd.arg("sym").arg(format!("s{sym}"));
        }
        let _: String = cmd.query(&mut con).unwrap();
    }
    // sym -> consumer holding one of its entries; sym -> n values in ack order.
    let holding: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let acked: Arc<Mutex<HashMap<String, Vec<usize>>>> = Arc::default();
    let handled = Arc::new(Mutex::new(0usize));
    let mut workers = Vec::new();
    for w in 0..4 {
        let (holding, acked, handled) = (holding.clone(), acked.clone(), handled.clone());
        let mut con = redis_client(&server);
        workers.push(std::thread::spawn(move || {
            let me = format!("w{w}");
            let mut seed = 7 + w as u64;
            let deadline = Instant::now() + Duration::from_secs(60);
            while *handled.lock().unwrap() < ENTRIES && Instant::now() < deadline {
                let reply: redis::Value = redis::cmd("XREADGROUP")
                    .arg("GROUP")
                    .arg("g")
                    .arg(&me)
                    .arg("COUNT")
                    .arg(4)
                    .arg("BLOCK")
                    .arg(50)
                    .arg("STREAMS")
                    .arg("ticks")
                    .arg(">")
                    .query(&mut con)
                    .unwrap();
                let mut batch: Vec<(String, usize, Option<String>)> = Vec::new();
                if let redis::Value::Array(streams) = reply {
                    for s in streams {
                        let redis::Value::Array(kv) = s else { continue };
                        let Some(redis::Value::Array(entries)) = kv.get(1) else { continue };
                        for e in entries {
                            let redis::Value::Array(e) = e else { continue };
                            let (Some(redis::Value::BulkString(id)), Some(redis::Value::Array(fields))) =
                                (e.first(), e.get(1))
                            else {
                                continue;
                            };
                            let text = |v: &redis::Value| match v {
                                redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                                other => panic!("{other:?}"),
                            };
                            let pairs: Vec<String> = fields.iter().map(text).collect();
                            let get = |name: &str| pairs.chunks(2).find(|p| p[0] == name).map(|p| p[1].clone());
                            batch.push((
                                text(&redis::Value::BulkString(id.clone())),
                                get("n").unwrap().parse().unwrap(),
                                get("sym"),
                            ));
                        }
                    }
                }
                for (_, n, sym) in &batch {
                    if let Some(sym) = sym {
                        let mut h = holding.lock().unwrap();
                        assert!(
                            h.insert(sym.clone(), me.clone()).is_none(),
                            "{sym} in flight twice (entry {n}): {h:?}"
                        );
                    }
                }
                for (id, n, sym) in batch {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    std::thread::sleep(Duration::from_micros(seed % 2000));
                    if let Some(sym) = &sym {
                        holding.lock().unwrap().remove(sym);
                    }
                    if seed.is_multiple_of(10) {
                        // A failed attempt: handed back, and delivered again before the key's next.
                        let _: i64 = redis::cmd("RILL.NACK")
                            .arg("ticks")
                            .arg("g")
                            .arg("IDS")
                            .arg(1)
                            .arg(&id)
                            .query(&mut con)
                            .unwrap();
                        continue;
                    }
                    // Recorded before the XACK: the key's next entry can go out once it is in.
                    acked.lock().unwrap().entry(sym.unwrap_or_default()).or_default().push(n);
                    let n_acked: i64 = redis::cmd("XACK").arg("ticks").arg("g").arg(&id).query(&mut con).unwrap();
                    assert_eq!(n_acked, 1, "{id}");
                    *handled.lock().unwrap() += 1;
                }
            }
        }));
    }
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(*handled.lock().unwrap(), ENTRIES, "every entry handled once");
    let acked = acked.lock().unwrap();
    for (sym, ns) in acked.iter().filter(|(sym, _)| !sym.is_empty()) {
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "{sym} out of stream order: {ns:?}");
    }
    let i = info(&mut c, "ticks", "g");
    assert_eq!(field(&i, "pending"), "0");
    assert_eq!(field(&i, "deferred"), "0");
    assert_eq!(field(&i, "orderby"), "sym");
    let lag = c.cmd_value(&["XINFO", "GROUPS", "ticks"]);
    assert!(format!("{lag:?}").contains("Int(0)"), "{lag:?}");
}

/// ORDERBY's edges through the raw client: entries of a busy key are deferred while others
/// flow, `deferred` counts them and XINFO's lag keeps them, a blocked reader is woken when the
/// key's entry is acked, a deleted deferred entry is skipped, and unsetting ORDERBY serves the
/// deferred ones first.
#[test]
fn orderby_defers_busy_keys_wakes_blocked_readers_and_unsets_cleanly() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "ORDERBY", "k"]);
    for (id, k) in [("1-1", "a"), ("2-1", "a"), ("3-1", "b"), ("4-1", "a"), ("5-1", "c")] {
        c.cmd(&["XADD", "s", id, "k", k]);
    }
    let ids = |r: &[u8]| -> Vec<String> {
        let text = escape(r);
        (1..=9)
            .map(|i| format!("{i}-1"))
            .filter(|id| text.contains(&format!("${}\\r\\n{id}\\r\\n", id.len())))
            .collect()
    };
    let read =
        |c: &mut RawClient, who: &str| c.cmd(&["XREADGROUP", "GROUP", "g", who, "COUNT", "10", "STREAMS", "s", ">"]);
    assert_eq!(ids(&read(&mut c, "x")), ["1-1", "3-1", "5-1"], "a's later entries wait");
    assert_eq!(field(&info(&mut c, "s", "g"), "deferred"), "2");
    let groups = escape(&c.cmd(&["XINFO", "GROUPS", "s"]));
    assert!(groups.contains("$3\\r\\nlag\\r\\n:2\\r\\n"), "deferred entries are not delivered yet: {groups}");
    assert_eq!(read(&mut c, "y"), b"*-1\r\n", "nothing free");
    // A reader blocked on `>` is woken by the ack that frees key a.
    let mut blocked = server.connect();
    blocked.send_command(&[b"XREADGROUP", b"GROUP", b"g", b"y", b"BLOCK", b"5000", b"STREAMS", b"s", b">"]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd(&["XACK", "s", "g", "1-1"]), b":1\r\n");
    assert_eq!(ids(&blocked.read_reply().unwrap()), ["2-1"]);
    // 4-1 is deleted while it waits: it is skipped, and a's next entry flows.
    assert_eq!(c.cmd(&["XDEL", "s", "4-1"]), b":1\r\n");
    c.cmd(&["XADD", "s", "6-1", "k", "a"]);
    assert_eq!(c.cmd(&["XACK", "s", "g", "2-1"]), b":1\r\n");
    assert_eq!(ids(&read(&mut c, "y")), ["6-1"]);
    // Unset with entries deferred: they are served first, unordered, then new entries.
    c.cmd(&["XADD", "s", "7-1", "k", "a"]);
    c.cmd(&["XADD", "s", "8-1", "k", "a"]);
    assert!(read(&mut c, "y") == b"*-1\r\n");
    assert_eq!(field(&info(&mut c, "s", "g"), "deferred"), "2");
    ok(&mut c, &["RILL.GROUP", "UNSET", "s", "g", "ORDERBY"]);
    c.cmd(&["XADD", "s", "9-1", "k", "a"]);
    assert_eq!(ids(&read(&mut c, "z")), ["7-1", "8-1", "9-1"]);
    assert_eq!(field(&info(&mut c, "s", "g"), "deferred"), "0");
    assert_eq!(field(&info(&mut c, "s", "g"), "orderby"), "");
}

/// CONSUMERIDLE through real clients: a consumer that crashed holding entries (no read, ack or
/// claim since) is removed and its entries handed back — to a consumer blocked on `>` the
/// whole time, which is itself spared although it has been silent longer than CONSUMERIDLE.
/// Nothing is lost: every entry ends acked by the survivor.
#[test]
fn consumeridle_removes_a_silent_consumer_and_spares_a_blocked_one() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "CONSUMERIDLE", "1000"]);
    let mut con = redis_client(&server);
    let mut ids = Vec::new();
    for i in 0..20 {
        let id: String = redis::cmd("XADD").arg("s").arg("*").arg("n").arg(i).query(&mut con).unwrap();
        ids.push(id);
    }
    let entries = |reply: redis::Value| -> Vec<String> {
        let mut got = Vec::new();
        if let redis::Value::Array(streams) = reply {
            for s in streams {
                let redis::Value::Array(kv) = s else { continue };
                let Some(redis::Value::Array(list)) = kv.get(1) else { continue };
                for e in list {
                    if let redis::Value::Array(e) = e {
                        if let Some(redis::Value::BulkString(id)) = e.first() {
                            got.push(String::from_utf8_lossy(id).into_owned());
                        }
                    }
                }
            }
        }
        got
    };
    let crashed: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("crashed")
        .arg("COUNT")
        .arg(100)
        .arg("STREAMS")
        .arg("s")
        .arg(">")
        .query(&mut con)
        .unwrap();
    assert_eq!(entries(crashed), ids);
    let started = Instant::now();
    // The survivor blocks on `>` with nothing new: it waits past CONSUMERIDLE, spared, and is
    // woken by the crashed consumer's entries.
    let mut survivor = redis_client(&server);
    let got: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("survivor")
        .arg("COUNT")
        .arg(100)
        .arg("BLOCK")
        .arg(10_000)
        .arg("STREAMS")
        .arg("s")
        .arg(">")
        .query(&mut survivor)
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(entries(got), ids, "every entry of the removed consumer, in ID order");
    assert!(waited >= Duration::from_millis(900), "expired early: {waited:?}");
    let consumers = escape(&c.cmd(&["XINFO", "CONSUMERS", "s", "g"]));
    assert!(!consumers.contains("crashed") && consumers.contains("survivor"), "{consumers}");
    let i = info(&mut c, "s", "g");
    assert_eq!(field(&i, "consumers-expired"), "1");
    assert_eq!(field(&i, "handed-back"), "20");
    assert_eq!(field(&i, "consumeridle"), "1000");
    let mut ack = redis::cmd("XACK");
    ack.arg("s").arg("g");
    for id in &ids {
        ack.arg(id);
    }
    let acked: i64 = ack.query(&mut survivor).unwrap();
    assert_eq!(acked, 20);
    // An active consumer is never removed: the survivor keeps acking and reading.
    std::thread::sleep(Duration::from_millis(600));
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("survivor")
        .arg("STREAMS")
        .arg("s")
        .arg(">")
        .query(&mut survivor)
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert!(escape(&c.cmd(&["XINFO", "CONSUMERS", "s", "g"])).contains("survivor"));
    // A consumer blocked on `>` longer than CONSUMERIDLE, holding an entry it is still
    // handling, keeps it while it waits.
    let mut waiter = server.connect();
    let held = c.cmd(&["XADD", "s", "*", "n", "held"]);
    let held = String::from_utf8_lossy(&held[held.iter().position(|b| *b == b'\n').unwrap() + 1..]).trim().to_string();
    waiter.cmd(&["XREADGROUP", "GROUP", "g", "waiter", "STREAMS", "s", ">"]);
    waiter
        .send_command(&[b"XREADGROUP", b"GROUP", b"g", b"waiter", b"BLOCK", b"5000", b"STREAMS", b"s", b">"])
        .unwrap();
    std::thread::sleep(Duration::from_millis(1600));
    let pending = escape(&c.cmd(&["XPENDING", "s", "g", "-", "+", "10"]));
    assert!(pending.contains(&held) && pending.contains("waiter"), "a blocked reader lost its entry: {pending}");
    c.cmd(&["XADD", "s", "*", "n", "late"]);
    assert!(escape(&waiter.read_reply().unwrap()).contains("late"));
    // Bad values.
    let r = c.cmd(&["RILL.GROUP", "SET", "s", "g", "CONSUMERIDLE", "999"]);
    assert_eq!(escape(&r), "-ERR CONSUMERIDLE must be 0 (off) or at least 1000 (milliseconds)\\r\\n");
}

/// GROUPIDLE: an inactive group is destroyed (its PEL with it); one with a reader blocked on it
/// is kept while the reader waits.
#[test]
fn groupidle_destroys_an_inactive_group_and_keeps_a_read_one() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "idle", "$", "MKSTREAM"]);
    c.cmd(&["XADD", "s", "1-1", "f", "v"]);
    // Nothing new for `read`: its reader blocks.
    ok(&mut c, &["XGROUP", "CREATE", "s", "read", "$"]);
    c.cmd(&["XGROUP", "SETID", "s", "idle", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "idle", "a", "STREAMS", "s", ">"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "idle", "GROUPIDLE", "1000"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "read", "GROUPIDLE", "1000"]);
    let mut blocked = server.connect();
    blocked.send_command(&[b"XREADGROUP", b"GROUP", b"read", b"b", b"BLOCK", b"2500", b"STREAMS", b"s", b">"]).unwrap();
    std::thread::sleep(Duration::from_millis(1600));
    let groups = escape(&c.cmd(&["XINFO", "GROUPS", "s"]));
    assert!(!groups.contains("idle") && groups.contains("read"), "{groups}");
    assert_eq!(blocked.read_reply().unwrap(), b"*-1\r\n", "the reader timed out, untouched");
    // Its reader gone, the group is looked at again within a second and destroyed.
    let deadline = Instant::now() + Duration::from_secs(5);
    while escape(&c.cmd(&["XINFO", "GROUPS", "s"])).contains("read") {
        assert!(Instant::now() < deadline, "the read group outlived GROUPIDLE with no reader");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(c.cmd(&["XLEN", "s"]), b":1\r\n", "the stream stays");
}

/// RELEASEONCLOSE: a worker process (redis-cli) reads 20 entries as `crashed` and is killed
/// with SIGKILL; its kernel closes the socket, and a consumer blocked on `>` gets all 20 at
/// once — long before the group's ACKWAIT of 60 s — each as a second delivery, counted in
/// `released-on-close`. A consumer with a second live connection keeps its entries when one
/// of them closes; without the option a close changes nothing.
#[test]
fn a_killed_readers_entries_are_handed_back_when_its_connection_closes() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "ACKWAIT", "60000", "RELEASEONCLOSE", "1"]);
    for i in 0..20 {
        c.cmd(&["XADD", "s", "*", "n", &i.to_string()]);
    }
    // A real process reads as `crashed` and is killed while holding the entries.
    let mut cli = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-cli");
    let mut stdin = cli.stdin.take().unwrap();
    writeln!(stdin, "XREADGROUP GROUP g crashed COUNT 100 STREAMS s >").unwrap();
    writeln!(stdin, "PING").unwrap();
    let mut out = BufReader::new(cli.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.ends_with("PONG\n") {}
    let owned = c.cmd_value(&["XPENDING", "s", "g", "-", "+", "100", "crashed"]);
    assert_eq!(owned.as_array().map(|a| a.len()), Some(20), "{owned:?}");
    // A rescuer blocks on `>`; the kill wakes it with the 20 entries.
    let port = server.port;
    let rescuer = std::thread::spawn(move || {
        let mut r = rill_testkit::RawClient::connect(port);
        let t = Instant::now();
        let v = r.cmd_value(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "rescuer",
            "COUNT",
            "100",
            "BLOCK",
            "10000",
            "STREAMS",
            "s",
            ">",
        ]);
        // The rescuer's connection stays open (its close would hand them back again).
        (v, t.elapsed(), r)
    });
    std::thread::sleep(Duration::from_millis(200));
    let killed_at = Instant::now();
    cli.kill().unwrap();
    cli.wait().unwrap();
    let (v, _, _rescuer) = rescuer.join().unwrap();
    let after_kill = killed_at.elapsed();
    let entries = v.as_array().and_then(|s| s.first()).and_then(|s| s.as_array()).and_then(|kv| kv.get(1)).cloned();
    assert_eq!(entries.as_ref().and_then(|e| e.as_array()).map(|e| e.len()), Some(20), "{v:?}");
    assert!(after_kill < Duration::from_secs(5), "handed back on the close, not at ACKWAIT: {after_kill:?}");
    let rows = c.cmd_value(&["XPENDING", "s", "g", "-", "+", "100"]);
    for row in rows.as_array().unwrap() {
        let row = row.as_array().unwrap();
        assert_eq!(row[1].as_str(), Some("rescuer"));
        assert_eq!(row[3], Value::Int(2), "a second delivery");
    }
    let i = info(&mut c, "s", "g");
    assert_eq!(field(&i, "released-on-close"), "20");
    assert_eq!(field(&i, "handed-back"), "0");
    assert_eq!(field(&i, "releaseonclose"), "1");

    // Two connections read as `twice`; one closes: its entries stay.
    c.cmd(&["XADD", "s", "*", "n", "x"]);
    let mut a = server.connect();
    let mut b = server.connect();
    a.cmd(&["XREADGROUP", "GROUP", "g", "twice", "STREAMS", "s", ">"]);
    b.cmd(&["XREADGROUP", "GROUP", "g", "twice", "STREAMS", "s", "0"]);
    drop(a);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd_value(&["XPENDING", "s", "g", "-", "+", "10", "twice"]).as_array().map(|a| a.len()), Some(1));
    drop(b);
    let t = Instant::now();
    while field(&info(&mut c, "s", "g"), "released-on-close") != "21" {
        assert!(t.elapsed() < Duration::from_secs(5), "the last close released it");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Without the option a close changes nothing.
    ok(&mut c, &["RILL.GROUP", "UNSET", "s", "g", "RELEASEONCLOSE"]);
    let mut d = server.connect();
    d.cmd(&["XREADGROUP", "GROUP", "g", "kept", "STREAMS", "s", ">"]);
    assert_eq!(c.cmd_value(&["XPENDING", "s", "g", "-", "+", "10", "kept"]).as_array().map(|a| a.len()), Some(1));
    drop(d);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd_value(&["XPENDING", "s", "g", "-", "+", "10", "kept"]).as_array().map(|a| a.len()), Some(1));
    assert_eq!(field(&info(&mut c, "s", "g"), "released-on-close"), "21");
}

/// RILL.READGROUP over the wire: a blocked reader woken by an XADD gets the entry with CLAIM's
/// two trailing figures (0 and 0: new), an entry handed back by ACKWAIT comes to the next `>`
/// read with its idle time and its earlier delivery, in RESP2 and RESP3; XREADGROUP's replies
/// stay Redis' 2-element entries. A consumer parked in RILL.READGROUP counts as reading for
/// CONSUMERIDLE, as one parked in XREADGROUP does.
#[test]
fn rill_readgroup_gives_each_entry_its_delivery_figures() {
    let server = Server::rill();
    let mut c = server.connect();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    ok(&mut c, &["RILL.GROUP", "SET", "s", "g", "ACKWAIT", "300", "CONSUMERIDLE", "1000"]);
    let mut reader = server.connect();
    reader
        .send_command(&[b"RILL.READGROUP", b"GROUP", b"g", b"alice", b"BLOCK", b"0", b"STREAMS", b"s", b">"])
        .unwrap();
    // Parked longer than CONSUMERIDLE: spared, since it is reading.
    std::thread::sleep(Duration::from_millis(1400));
    assert!(escape(&c.cmd(&["XINFO", "CONSUMERS", "s", "g"])).contains("alice"), "a parked reader is spared");
    c.cmd(&["XADD", "s", "1-1", "f", "v"]);
    assert_eq!(
        escape(&reader.read_reply().unwrap()),
        escape(b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n:0\r\n:0\r\n")
    );
    // Not acked: handed back after ACKWAIT, then read again with its figures.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut bob = server.connect();
    bob.cmd(&["HELLO", "3"]);
    let read = loop {
        let read = bob.cmd_value(&["RILL.READGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]);
        if read != Value::Nil {
            break read;
        }
        assert!(Instant::now() < deadline, "never handed back");
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = format!("{read:?}");
    let Value::Map(streams) = &read else { panic!("RESP3 read is a map: {text}") };
    let entries = streams[0].1.as_array().unwrap();
    let entry = entries[0].as_array().unwrap();
    assert_eq!(entry.len(), 4, "{text}");
    assert_eq!(entry[0].as_str(), Some("1-1"), "{text}");
    let Value::Int(idle) = entry[2] else { panic!("{text}") };
    // A hand-back clears the delivery time, as XNACK does: the idle time is what XREADGROUP
    // CLAIM shows of such an entry.
    assert!(idle >= 300, "idle since its delivery: {text}");
    assert_eq!(entry[3], Value::Int(1), "delivered once before: {text}");
    // XREADGROUP keeps Redis' entries.
    c.cmd(&["XADD", "s", "2-1", "f", "w"]);
    assert_eq!(
        escape(&c.cmd(&["XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">"])),
        escape(b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nf\r\n$1\r\nw\r\n")
    );
}
