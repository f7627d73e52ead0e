//! MAXAGE (`RILL.STREAM SET key MAXAGE ms`, docs/spec/policies.md §8) through a real client and
//! real processes: the background sweep trims a stream nobody writes to, XADD trims what aged
//! in the same command, bad input is refused, the setting and its trims survive kill -9 (log
//! replay), a log rewrite and an RDB snapshot (and the restarted server goes on enforcing it),
//! a rill replica gets the setting and the trims and never trims by itself, and a Redis replica
//! gets the trims and nothing for the setting.

use crate::replica_link::{info_field, wait_caught_up};
use rill_testkit::{escape, Proc, RawClient, ReferenceServer, Server, ServerKind, TempDir, Value};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn redis_client(server: &Server) -> redis::Connection {
    redis::Client::open(server.url()).unwrap().get_connection().unwrap()
}

fn ok(c: &mut RawClient, args: &[&str]) {
    let r = c.cmd(args);
    assert_eq!(r, b"+OK\r\n", "{args:?}: {}", escape(&r));
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn xlen(c: &mut RawClient, key: &str) -> i64 {
    match c.cmd_value(&["XLEN", key]) {
        Value::Int(n) => n,
        other => panic!("XLEN {key}: {other:?}"),
    }
}

/// Wait until `key` holds `len` entries (10 s at most).
fn wait_len(c: &mut RawClient, key: &str, len: i64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = xlen(c, key);
        if n == len {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {key} still holds {n} entries, not {len}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `RILL.STREAM GET key` as text.
fn setting(c: &mut RawClient, key: &str) -> String {
    escape(&c.cmd(&["RILL.STREAM", "GET", key]))
}

/// With no write at all, the sweep trims entries once they are older than MAXAGE, and not
/// before; an XADD trims what aged in the same command (a transaction shows no sweep could
/// have run in between); a stream without MAXAGE keeps everything, as in Redis.
#[test]
fn the_sweep_trims_without_writes_and_xadd_trims_in_the_same_command() {
    let server = Server::rill();
    let mut con = redis_client(&server);
    let mut c = server.connect();
    let start = Instant::now();
    for i in 0..100 {
        let _: String = redis::cmd("XADD").arg("s").arg("*").arg("n").arg(i).query(&mut con).unwrap();
        let _: String = redis::cmd("XADD").arg("plain").arg("*").arg("n").arg(i).query(&mut con).unwrap();
    }
    let set: String = redis::cmd("RILL.STREAM").arg("SET").arg("s").arg("MAXAGE").arg(1000).query(&mut con).unwrap();
    assert_eq!(set, "OK");
    let got: redis::Value = redis::cmd("RILL.STREAM").arg("GET").arg("s").query(&mut con).unwrap();
    assert_eq!(format!("{got:?}"), format!("{:?}", redis_map(1000, "KEEPREF")));
    if start.elapsed() < Duration::from_millis(900) {
        let n: i64 = redis::cmd("XLEN").arg("s").query(&mut con).unwrap();
        assert_eq!(n, 100, "nothing has aged yet");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: i64 = redis::cmd("XLEN").arg("s").query(&mut con).unwrap();
        if n < 100 {
            assert!(start.elapsed() >= Duration::from_millis(1000), "trimmed before the entries aged");
        }
        if n == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the sweep never trimmed s: {n} entries left");
        std::thread::sleep(Duration::from_millis(20));
    }
    let plain: i64 = redis::cmd("XLEN").arg("plain").query(&mut con).unwrap();
    assert_eq!(plain, 100, "a stream without MAXAGE keeps its entries");
    // A trim, not a deletion: max-deleted-entry-id stays 0-0.
    let info = escape(&c.cmd(&["XINFO", "STREAM", "s"]));
    assert!(
        info.contains("entries-added\\r\\n:100") && info.contains("max-deleted-entry-id\\r\\n$3\\r\\n0-0"),
        "{info}"
    );

    // An entry aged by its client-chosen ID, then MAXAGE and an XADD in one transaction: the
    // XADD trimmed it (the sweep cannot run inside EXEC).
    assert!(c.cmd(&["XADD", "x", "5-0", "f", "v"]).starts_with(b"$"));
    ok(&mut c, &["MULTI"]);
    for cmd in [&["RILL.STREAM", "SET", "x", "MAXAGE", "60000"][..], &["XADD", "x", "*", "f", "v"], &["XLEN", "x"]] {
        assert_eq!(c.cmd(cmd), b"+QUEUED\r\n");
    }
    let exec = c.cmd_value(&["EXEC"]);
    let replies = exec.as_array().unwrap();
    assert_eq!(replies[2], Value::Int(1), "the XADD trimmed 5-0: {exec:?}");
    // An entry whose chosen ID is older than MAXAGE is trimmed by the XADD that adds it.
    ok(&mut c, &["MULTI"]);
    c.cmd(&["XADD", "y", "1-1", "f", "v"]);
    c.cmd(&["RILL.STREAM", "SET", "y", "MAXAGE", "60000"]);
    c.cmd(&["XADD", "y", "2-1", "f", "v"]);
    c.cmd(&["XLEN", "y"]);
    let exec = c.cmd_value(&["EXEC"]);
    assert_eq!(exec.as_array().unwrap()[3], Value::Int(0), "{exec:?}");
}

/// RILL.STREAM GET's reply as the `redis` crate reads a RESP2 map (a flat array).
fn redis_map(ms: i64, mode: &str) -> redis::Value {
    redis::Value::Array(vec![
        redis::Value::BulkString(b"maxage".to_vec()),
        redis::Value::Int(ms),
        redis::Value::BulkString(b"refmode".to_vec()),
        redis::Value::BulkString(mode.as_bytes().to_vec()),
    ])
}

#[test]
fn bad_input_is_refused_in_redis_style() {
    let server = Server::rill();
    let mut c = server.connect();
    let err = |c: &mut RawClient, args: &[&str]| {
        let r = c.cmd(args);
        assert!(r.starts_with(b"-"), "{args:?}: {}", escape(&r));
        String::from_utf8_lossy(&r).trim_end().to_string()
    };
    let maxage = "-ERR MAXAGE must be 0 (off) or a positive integer (milliseconds)";
    assert_eq!(err(&mut c, &["RILL.STREAM", "SET", "nokey", "MAXAGE", "10"]), "-ERR no such key");
    assert_eq!(err(&mut c, &["RILL.STREAM", "GET", "nokey"]), "-ERR no such key");
    assert_eq!(c.cmd(&["EXISTS", "nokey"]), b":0\r\n", "SET does not create the stream");
    ok(&mut c, &["SET", "str", "x"]);
    assert!(err(&mut c, &["RILL.STREAM", "SET", "str", "MAXAGE", "10"]).starts_with("-WRONGTYPE"));
    assert!(err(&mut c, &["RILL.STREAM", "GET", "str"]).starts_with("-WRONGTYPE"));
    c.cmd(&["XADD", "s", "*", "f", "v"]);
    ok(&mut c, &["RILL.STREAM", "SET", "s", "MAXAGE", "600000", "ACKED"]);
    for (args, want) in [
        (&["MAXAGE", "-5"][..], maxage),
        (&["MAXAGE", "ten"], maxage),
        (&["MAXAGE", "10", "NOPE"], "-ERR syntax error"),
        (&["MAXAGE", "10", "KEEPREF", "ACKED"], "-ERR syntax error"),
        (&["MAXLEN", "10"], "-ERR syntax error"),
    ] {
        let mut full = vec!["RILL.STREAM", "SET", "s"];
        full.extend(args);
        assert_eq!(err(&mut c, &full), want, "{full:?}");
    }
    assert_eq!(
        err(&mut c, &["RILL.STREAM", "SET", "s", "MAXAGE"]),
        "-ERR wrong number of arguments for 'rill.stream|set' command"
    );
    assert_eq!(err(&mut c, &["RILL.STREAM", "GET"]), "-ERR wrong number of arguments for 'rill.stream|get' command");
    assert!(err(&mut c, &["RILL.STREAM", "NOPE"]).starts_with("-ERR unknown subcommand 'NOPE'"));
    assert_eq!(setting(&mut c, "s"), escape(b"*4\r\n$6\r\nmaxage\r\n:600000\r\n$7\r\nrefmode\r\n$5\r\nACKED\r\n"));
    ok(&mut c, &["RILL.STREAM", "SET", "s", "MAXAGE", "0"]);
    assert_eq!(setting(&mut c, "s"), escape(b"*4\r\n$6\r\nmaxage\r\n:0\r\n$7\r\nrefmode\r\n$7\r\nKEEPREF\r\n"));
    let help = escape(&c.cmd(&["RILL.STREAM", "HELP"]));
    assert!(help.contains("MAXAGE") && help.contains("ACKED"), "{help}");
    let docs = escape(&c.cmd(&["COMMAND", "DOCS", "rill.stream"]));
    assert!(docs.contains("rill.stream|set") && docs.contains("MAXAGE"), "{docs}");
    // RESP3: a map.
    c.cmd(&["HELLO", "3"]);
    assert!(c.cmd(&["RILL.STREAM", "GET", "s"]).starts_with(b"%2\r\n"));
}

/// The setting and its trims come back after kill -9 (log replay), a log rewrite (its base
/// snapshot) and from an RDB snapshot alone; each time the restarted server goes on trimming
/// by itself.
#[test]
fn maxage_survives_kill_9_a_rewrite_and_a_snapshot() {
    let dir = TempDir::new("max-age-restart");
    let start = || Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let server = start();
    let mut c = server.client();
    for _ in 0..10 {
        c.cmd(&["XADD", "s", "*", "f", "v"]);
    }
    ok(&mut c, &["RILL.STREAM", "SET", "s", "MAXAGE", "86400000", "ACKED"]);
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    // A stream trimmed by the sweep before the crash: its trim is in the log.
    for id in ["1-1", "2-1", "3-1"] {
        c.cmd(&["XADD", "old", id, "f", "v"]);
    }
    ok(&mut c, &["RILL.STREAM", "SET", "old", "MAXAGE", "1000", "DELREF"]);
    wait_len(&mut c, "old", 0, "before the crash");
    let state = |c: &mut RawClient| -> Vec<String> {
        ["s", "old"].iter().flat_map(|k| [setting(c, k), escape(&c.cmd(&["XINFO", "STREAM", k, "FULL"]))]).collect()
    };
    let before = state(&mut c);
    assert!(before[0].contains("86400000") && before[2].contains("DELREF"), "{before:?}");
    // A stream whose entry ages a moment after the crash: the restarted server trims it.
    // MAXAGE is set while the stream is empty, so only the (replayed) append makes it due.
    let future = |c: &mut RawClient, key: &str| {
        ok(c, &["XGROUP", "CREATE", key, "g", "$", "MKSTREAM"]);
        ok(c, &["RILL.STREAM", "SET", key, "MAXAGE", "500"]);
        let id = format!("{}-0", now_ms() + 2500);
        c.cmd(&["XADD", key, &id, "f", "v"]);
        assert_eq!(xlen(c, key), 1);
    };
    future(&mut c, "f1");
    server.kill9();
    let server = start();
    let mut c = server.client();
    assert_eq!(state(&mut c), before, "after kill -9 (log replay)");
    wait_len(&mut c, "f1", 0, "the restarted server's sweep");

    future(&mut c, "f2");
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
    wait_len(&mut c, "f2", 0, "the server restarted from the rewritten log");

    future(&mut c, "f3");
    ok(&mut c, &["SAVE"]);
    server.kill9();
    std::fs::remove_dir_all(dir.path().join("appendonlydir")).unwrap();
    let server = Proc::start(dir.path(), &[]);
    let mut c = server.client();
    assert_eq!(state(&mut c), before, "from the RDB snapshot alone");
    assert!(setting(&mut c, "f3").contains("500"));
    wait_len(&mut c, "f3", 0, "the server started from the snapshot");
}

/// A rill replica gets the setting and the primary's trims and never trims by itself (while
/// the primary may not act, its copy keeps every aged entry); a Redis replica gets the trims
/// as XTRIM and nothing for the setting (no error on its side), and loads the snapshot
/// carrying the setting's aux field.
#[test]
fn replicas_get_the_trims_and_never_trim_by_themselves() {
    let primary = Server::rill_with(&["--repl-rdb-compat", "7.0"]);
    let replica = Server::rill();
    let (mut p, mut r) = (primary.connect(), replica.connect());
    let port = primary.port.to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    for _ in 0..20 {
        p.cmd(&["XADD", "s", "*", "f", "v"]);
    }
    ok(&mut p, &["RILL.STREAM", "SET", "s", "MAXAGE", "300"]);
    // The setting has no Redis form, so it moves no offset: a write after it does.
    ok(&mut p, &["SET", "marker", "1"]);
    wait_caught_up(&mut p, &mut r);
    assert_eq!(setting(&mut r, "s"), setting(&mut p, "s"), "the setting reached the replica");
    // The primary may not write for a while: nothing is trimmed anywhere, aged or not.
    ok(&mut p, &["CLIENT", "PAUSE", "1500", "WRITE"]);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(xlen(&mut r, "s"), 20, "the replica trimmed by itself");
    assert_eq!(xlen(&mut p, "s"), 20, "the primary trimmed while paused");
    ok(&mut p, &["CLIENT", "UNPAUSE"]);
    wait_len(&mut p, "s", 0, "the primary's sweep");
    wait_caught_up(&mut p, &mut r);
    assert_eq!(xlen(&mut r, "s"), 0, "the primary's trim reached the replica");
    assert_eq!(escape(&r.cmd(&["XINFO", "STREAM", "s"])), escape(&p.cmd(&["XINFO", "STREAM", "s"])));

    // A Redis 7.0 replica: a full sync whose snapshot carries `rill-stream`, then the stream.
    let Some(binary) = ReferenceServer::Redis7.require() else { return };
    for _ in 0..5 {
        p.cmd(&["XADD", "s", "*", "f", "v"]);
    }
    let redis =
        Server::start(ServerKind::Redis(ReferenceServer::Redis7), &binary, &["--replicaof", "127.0.0.1", &port]);
    let mut rr = redis.connect();
    wait_caught_up(&mut p, &mut rr);
    assert_eq!(xlen(&mut rr, "s"), xlen(&mut p, "s"), "the full sync");
    ok(&mut p, &["RILL.STREAM", "SET", "s", "MAXAGE", "200"]);
    wait_len(&mut p, "s", 0, "the primary's sweep");
    wait_caught_up(&mut p, &mut rr);
    assert_eq!(xlen(&mut rr, "s"), 0, "the trim reached the Redis replica");
    let stats = String::from_utf8_lossy(&rr.cmd(&["INFO", "commandstats"])).into_owned();
    assert!(stats.contains("cmdstat_xtrim:"), "{stats}");
    assert!(!stats.to_lowercase().contains("rill"), "{stats}");
    let errors = String::from_utf8_lossy(&rr.cmd(&["INFO", "errorstats"])).into_owned();
    assert!(!errors.contains("errorstat_"), "the Redis replica refused something: {errors}");
    assert_eq!(info_field(&mut rr, "replication", "master_link_status").as_deref(), Some("up"));
}
