//! CLIENT PAUSE and FAILOVER with real connections and real replicas: a write held by a pause
//! until it ends while reads go on; a failover from a rill primary to its rill replica that
//! loses no acknowledged write and leaves the old primary following the new one partially;
//! its rollback (TIMEOUT, ABORT) and errors, compared with the same steps on two Redis 8.2.3;
//! and a failover between Redis and rill both ways (PSYNC FAILOVER sent to rill, and by it).

use crate::replica_link::{assert_equal, info_field, wait_caught_up};
use rill_testkit::{RawClient, ReferenceServer, Server, ServerKind};
use std::time::{Duration, Instant};

/// Wait until `field` of INFO replication reads `want`.
fn wait_field(client: &mut RawClient, field: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(client, "replication", field).as_deref() != Some(want) {
        assert!(Instant::now() < deadline, "{field} never became {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a reply arrives within `wait` (the client's read timeout is restored after).
pub(crate) fn answers_within(client: &mut RawClient, wait: Duration) -> Option<Vec<u8>> {
    client.set_read_timeout(wait);
    let r = client.read_reply().ok();
    client.set_read_timeout(Duration::from_secs(30));
    r
}

fn stat(client: &mut RawClient, section: &str, field: &str) -> i64 {
    info_field(client, section, field).unwrap().parse().unwrap()
}

#[test]
fn client_pause_write_holds_a_write_until_unpause_while_reads_go_on() {
    let server = Server::rill();
    let mut admin = server.connect();
    let mut writer = server.connect();
    let mut reader = server.connect();
    assert_eq!(admin.cmd(&["XADD", "s", "1-1", "f", "v"]), b"$3\r\n1-1\r\n");
    assert_eq!(admin.cmd(&["SET", "ttl", "v", "PX", "50"]), b"+OK\r\n");
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]), b"+OK\r\n");
    writer.send_command(&[b"XADD", b"s", b"2-1", b"f", b"v"]).unwrap();
    assert_eq!(answers_within(&mut writer, Duration::from_millis(300)), None, "the XADD is held");
    // Reads go on; a key whose time passed is hidden but not deleted (no expiry while paused).
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(reader.cmd(&["XLEN", "s"]), b":1\r\n");
    assert_eq!(reader.cmd(&["GET", "ttl"]), b"$-1\r\n");
    assert_eq!(stat(&mut reader, "stats", "expired_keys"), 0);
    assert_eq!(stat(&mut reader, "clients", "blocked_clients"), 1);
    let list = String::from_utf8(reader.cmd(&["CLIENT", "LIST"])).unwrap();
    assert!(list.lines().any(|l| l.contains(" flags=b ")), "the held client shows flag b: {list}");
    // PUBLISH may replicate: held too; PING is not.
    reader.send_command(&[b"PUBLISH", b"ch", b"m"]).unwrap();
    assert_eq!(answers_within(&mut reader, Duration::from_millis(200)), None, "PUBLISH is held");
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
    // Held, not refused: both run once the pause ends, in the order they came.
    assert_eq!(answers_within(&mut writer, Duration::from_secs(10)).as_deref(), Some(&b"$3\r\n2-1\r\n"[..]));
    assert_eq!(answers_within(&mut reader, Duration::from_secs(10)).as_deref(), Some(&b":0\r\n"[..]));
    assert_eq!(reader.cmd(&["XLEN", "s"]), b":2\r\n");
    assert_eq!(stat(&mut reader, "clients", "blocked_clients"), 0);
    // Expiry resumes: the cron deletes the key.
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(&mut reader, "stats", "expired_keys") != 1 {
        assert!(Instant::now() < deadline, "expiry did not resume");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A pause that ends by itself releases its held clients at its end.
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "200", "WRITE"]), b"+OK\r\n");
    let started = Instant::now();
    assert_eq!(writer.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    assert!(started.elapsed() >= Duration::from_millis(150), "held until the pause's end");
}

/// CLIENT PAUSE WRITE holds a script that may write (EVAL without a shebang, a shebang
/// without `no-writes`, and a transaction queuing one) and lets read-only ones run (EVAL_RO,
/// `#!lua flags=no-writes`, a transaction of those), as Redis' unit/pause.
#[test]
fn client_pause_write_holds_scripts_that_may_write() {
    let server = Server::rill();
    let mut admin = server.connect();
    let mut held = [server.connect(), server.connect(), server.connect()];
    let mut free = server.connect();
    // Queued before the pause (queuing one is held too, as in Redis).
    assert_eq!(held[2].cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(held[2].cmd(&["EVAL", "#!lua\nreturn 1", "0"]), b"+QUEUED\r\n");
    assert_eq!(free.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(free.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 4", "0"]), b"+QUEUED\r\n");
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]), b"+OK\r\n");
    held[0].send_command(&[b"EVAL", b"return 1", b"0"]).unwrap();
    held[1].send_command(&[b"EVAL", b"#!lua\nreturn 1", b"0"]).unwrap();
    held[2].send_command(&[b"EXEC"]).unwrap();
    for c in &mut held {
        assert_eq!(answers_within(c, Duration::from_millis(200)), None, "a script that may write is held");
    }
    assert_eq!(free.cmd(&["EXEC"]), b"*1\r\n:4\r\n");
    assert_eq!(free.cmd(&["EVAL_RO", "return 2", "0"]), b":2\r\n");
    assert_eq!(free.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 3", "0"]), b":3\r\n");
    assert_eq!(stat(&mut admin, "clients", "blocked_clients"), 3);
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
    let want: [&[u8]; 3] = [b":1\r\n", b":1\r\n", b"*1\r\n:1\r\n"];
    for (c, want) in held.iter_mut().zip(want) {
        assert_eq!(answers_within(c, Duration::from_secs(10)).as_deref(), Some(want));
    }
}

#[test]
fn failover_hands_a_rill_primary_to_its_rill_replica_losing_nothing() {
    let a_server = Server::rill();
    let b_server = Server::rill();
    let (mut a, mut b) = (a_server.connect(), b_server.connect());
    assert_eq!(b.cmd(&["REPLICAOF", "127.0.0.1", &a_server.port.to_string()]), b"+OK\r\n");
    for i in 0..100 {
        assert_eq!(a.cmd(&["RPUSH", "l", &i.to_string()]), format!(":{}\r\n", i + 1).into_bytes());
    }
    wait_caught_up(&mut a, &mut b);
    // A writer keeps writing through the failover: every write acknowledged must reach B.
    let port = a_server.port;
    let writer = std::thread::spawn(move || {
        let mut w = RawClient::connect(port);
        let mut acked = Vec::new();
        for i in 100.. {
            let r = w.cmd(&["RPUSH", "l", &i.to_string()]);
            if r.starts_with(b":") {
                acked.push(i);
            } else {
                assert_eq!(r, b"-READONLY You can't write against a read only replica.\r\n");
                return acked;
            }
        }
        unreachable!()
    });
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(a.cmd(&["FAILOVER", "TO", "127.0.0.1", &b_server.port.to_string()]), b"+OK\r\n");
    let acked = writer.join().unwrap();
    assert!(!acked.is_empty());
    wait_field(&mut a, "master_failover_state", "no-failover");
    assert_eq!(info_field(&mut a, "replication", "role").as_deref(), Some("slave"));
    assert_eq!(info_field(&mut b, "replication", "role").as_deref(), Some("master"));
    wait_caught_up(&mut b, &mut a);
    let held: Vec<i64> = match b.cmd_value(&["LRANGE", "l", "0", "-1"]) {
        rill_testkit::Value::Array(items) => {
            items.iter().map(|v| crate::replica_link::text(v).parse().unwrap()).collect()
        }
        other => panic!("{other:?}"),
    };
    for i in &acked {
        assert!(held.contains(i), "acknowledged write {i} lost");
    }
    // The old primary continued from the new one partially: no full sync anywhere since.
    assert_eq!(stat(&mut b, "stats", "sync_partial_ok"), 1);
    assert_eq!(stat(&mut b, "stats", "sync_full"), 0);
    assert_eq!(stat(&mut a, "stats", "sync_full"), 1, "only B's first sync");
    assert_eq!(b.cmd(&["RPUSH", "l", "after"]), format!(":{}\r\n", held.len() + 1).into_bytes());
    wait_caught_up(&mut b, &mut a);
    assert_equal(&mut b, &mut a, "after the failover");
    // REPLICAOF on the new replica and writes there behave as for any replica.
    assert_eq!(a.cmd(&["SET", "k", "v"]), b"-READONLY You can't write against a read only replica.\r\n");
}

/// Run `args` on `c` and keep the reply.
fn step(out: &mut Vec<(String, Vec<u8>)>, c: &mut RawClient, args: &[&str]) {
    let r = c.cmd(args);
    out.push((args.join(" "), r));
}

/// The rollback steps and the errors seen with a replica attached; the replies, for comparing
/// rill's with Redis'.
fn rollback_steps(kind: ServerKind, binary: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let primary = Server::start(kind, binary, &["--repl-diskless-sync-delay", "0"]);
    let replica = Server::start(kind, binary, &[]);
    let (mut a, mut b) = (primary.connect(), replica.connect());
    let mut out = Vec::new();
    step(&mut out, &mut b, &["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
    step(&mut out, &mut a, &["SET", "k", "1"]);
    wait_caught_up(&mut a, &mut b);
    let b_port = replica.port.to_string();
    step(&mut out, &mut a, &["FAILOVER", "TO", "127.0.0.1", "1"]);
    step(&mut out, &mut a, &["FAILOVER", "FORCE"]);
    step(&mut out, &mut a, &["FAILOVER", "TO", "127.0.0.1", &b_port, "FORCE"]);
    step(&mut out, &mut a, &["FAILOVER", "FORCE", "TIMEOUT", "100"]);
    step(&mut out, &mut b, &["FAILOVER"]);
    step(&mut out, &mut b, &["PSYNC", "0123456789012345678901234567890123456789", "1", "FAILOVER"]);
    // The replica's own pause holds its primary's stream: it cannot catch up.
    step(&mut out, &mut b, &["CLIENT", "PAUSE", "100000", "WRITE"]);
    step(&mut out, &mut a, &["INCR", "k"]);
    step(&mut out, &mut a, &["FAILOVER", "TIMEOUT", "500"]);
    out.push(("state".into(), info_field(&mut a, "replication", "master_failover_state").unwrap().into_bytes()));
    step(&mut out, &mut a, &["FAILOVER"]);
    step(&mut out, &mut a, &["REPLICAOF", "NO", "ONE"]);
    // Writes are held meanwhile; the timeout gives up and lets them run.
    let started = Instant::now();
    step(&mut out, &mut a, &["INCR", "k"]);
    out.push(("held".into(), vec![u8::from(started.elapsed() >= Duration::from_millis(300))]));
    out.push(("state".into(), info_field(&mut a, "replication", "master_failover_state").unwrap().into_bytes()));
    out.push(("role".into(), info_field(&mut a, "replication", "role").unwrap().into_bytes()));
    // ABORT ends a failover that waits.
    step(&mut out, &mut a, &["FAILOVER"]);
    out.push(("state".into(), info_field(&mut a, "replication", "master_failover_state").unwrap().into_bytes()));
    step(&mut out, &mut a, &["FAILOVER", "ABORT"]);
    step(&mut out, &mut a, &["FAILOVER", "ABORT"]);
    step(&mut out, &mut a, &["INCR", "k"]);
    out.push(("role".into(), info_field(&mut a, "replication", "role").unwrap().into_bytes()));
    step(&mut out, &mut b, &["CLIENT", "UNPAUSE"]);
    wait_caught_up(&mut a, &mut b);
    step(&mut out, &mut b, &["GET", "k"]);
    // The ports differ from run to run.
    let (pa, pb) = (primary.port.to_string(), replica.port.to_string());
    out.into_iter().map(|(s, r)| (s.replace(&pa, "A").replace(&pb, "B"), r)).collect()
}

#[test]
fn failover_timeout_and_abort_roll_back_as_in_redis() {
    let (kind, binary) = Server::subject_binary();
    let ours = rollback_steps(kind, &binary);
    let show = |steps: &[(String, Vec<u8>)]| -> Vec<String> {
        steps.iter().map(|(s, r)| format!("{s} -> {}", String::from_utf8_lossy(r).trim_end())).collect()
    };
    let ours = show(&ours);
    assert!(ours.contains(&"GET k -> $1\r\n4".to_string()), "{ours:#?}");
    let Some(redis) = ReferenceServer::Redis8.require() else { return };
    let theirs = show(&rollback_steps(ServerKind::Redis(ReferenceServer::Redis8), &redis));
    assert_eq!(ours, theirs);
}

#[test]
fn failover_between_redis_and_rill_both_ways() {
    let Some(redis) = ReferenceServer::Redis8.require() else { return };
    for redis_first in [true, false] {
        let redis_server =
            Server::start(ServerKind::Redis(ReferenceServer::Redis8), &redis, &["--repl-diskless-sync-delay", "0"]);
        let rill_server = Server::rill();
        let (primary_server, replica_server) =
            if redis_first { (&redis_server, &rill_server) } else { (&rill_server, &redis_server) };
        let (mut p, mut r) = (primary_server.connect(), replica_server.connect());
        let what = if redis_first { "Redis -> rill" } else { "rill -> Redis" };
        for i in 0..50 {
            p.cmd(&["XADD", "s", "*", "i", &i.to_string()]);
            p.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &primary_server.port.to_string()]), b"+OK\r\n");
        wait_caught_up(&mut p, &mut r);
        p.cmd(&["SET", "last", "before"]);
        assert_eq!(p.cmd(&["FAILOVER"]), b"+OK\r\n", "{what}");
        wait_field(&mut p, "role", "slave");
        wait_field(&mut p, "master_failover_state", "no-failover");
        assert_eq!(info_field(&mut r, "replication", "role").as_deref(), Some("master"), "{what}");
        assert_eq!(stat(&mut r, "stats", "sync_partial_ok"), 1, "{what}: the old primary continued partially");
        assert_eq!(r.cmd(&["SET", "last", "after"]), b"+OK\r\n");
        wait_caught_up(&mut r, &mut p);
        assert_eq!(p.cmd(&["GET", "last"]), b"$5\r\nafter\r\n", "{what}");
        assert_equal(&mut r, &mut p, what);
    }
}

/// FAILOVER asks the replicas for their offsets at once (`REPLCONF GETACK *`) instead of
/// waiting for their next periodic ACK: the write pause of a handover lasts milliseconds, not
/// up to a second (Redis waits for the periodic ACK). A replica played by the test sees the
/// GETACK before it has acknowledged anything since it loaded the snapshot.
#[test]
fn failover_asks_the_replicas_for_their_offsets_at_once() {
    let server = Server::rill();
    let mut c = server.connect();
    let mut replica = crate::shutdown::TestReplica::attach(server.port);
    replica.drain(Duration::from_millis(200));
    assert!(!replica.holds("GETACK"), "no GETACK before the failover");
    assert_eq!(c.cmd(&["FAILOVER"]), b"+OK\r\n");
    replica.read_until("GETACK");
    assert_eq!(c.cmd(&["FAILOVER", "ABORT"]), b"+OK\r\n");
}
