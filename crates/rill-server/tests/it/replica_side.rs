//! rill as a replica, over Redis' replication protocol: of a real Redis (8.2.3 and Debian's
//! 7.0.15: the live migration off Redis), and of rill, chained, through a failover. Each time
//! a random workload (streams with groups, claims and PELs; the other types; TTLs; two
//! databases; transactions) runs on the primary, and the replica ends equal key by key.
//!
//! Of a Redis primary, rill is compared with a Redis replica of the same version beside it,
//! not with the primary: Redis itself does not replicate everything a group does (a history
//! re-read's delivery count, a consumer an empty XAUTOCLAIM made), and a replica of Redis can
//! only be asked to hold what Redis' own replica holds.

use crate::replica_link::{assert_equal, assert_equal_but, info_field, text, wait_caught_up, workload};
use rill_testkit::{fuzz_seed, Launch, RawClient, ReferenceServer, Rng, Server, ServerKind, Value};
use std::time::{Duration, Instant};

/// Make `replica` a replica of `primary_port` and wait until it has caught up with `primary`.
fn attach(replica: &mut RawClient, primary: &mut RawClient, primary_port: u16) {
    assert_eq!(replica.cmd(&["REPLICAOF", "127.0.0.1", &primary_port.to_string()]), b"+OK\r\n");
    wait_caught_up(primary, replica);
}

#[test]
fn rill_follows_a_redis_primary_and_takes_over_from_it() {
    for which in [ReferenceServer::Redis8, ReferenceServer::Redis7] {
        let Some(binary) = which.require() else { continue };
        let seed = fuzz_seed(0x0050_4E91_CA7E);
        // No wait before a disk-less sync (Redis waits 5 s for more replicas by default). The
        // 8.x primary sends its snapshot end-marked (`$EOF:`, disk-less), the 7.0 one from a
        // file, with its length (`$<len>`): both ways of reading the payload (and of checking
        // its checksum as it arrives) are taken.
        let diskless = if which == ReferenceServer::Redis7 { "no" } else { "yes" };
        let redis = Server::start(
            ServerKind::Redis(which),
            &binary,
            &["--repl-diskless-sync-delay", "0", "--repl-diskless-sync", diskless],
        );
        let mut primary = redis.connect();
        let mut rng = Rng::new(seed);
        let mut ids = Vec::new();
        workload(&mut primary, &mut rng, &mut ids, 300);
        let rill_server = Server::rill();
        let mut rill = rill_server.connect();
        let redis_replica = Server::start(ServerKind::Redis(which), &binary, &[]);
        let mut oracle = redis_replica.connect();
        attach(&mut oracle, &mut primary, redis.port);
        attach(&mut rill, &mut primary, redis.port);
        // Redis 7.0 computes a group's lag differently (rill computes it as 8.x does).
        let unlike: &[&str] = if which == ReferenceServer::Redis7 { &["lag"] } else { &[] };
        assert_equal_but(
            &mut oracle,
            &mut rill,
            &format!("{}: after the full sync (seed {seed})", which.label()),
            unlike,
        );
        workload(&mut primary, &mut rng, &mut ids, 300);
        wait_caught_up(&mut primary, &mut rill);
        wait_caught_up(&mut primary, &mut oracle);
        assert_equal_but(&mut oracle, &mut rill, &format!("{}: after streaming (seed {seed})", which.label()), unlike);
        // A read-only replica refuses writes, with Redis' words (byte for byte Redis' own
        // replica's).
        for cmd in [
            &["SET", "k", "v"][..],
            &["XREADGROUP", "GROUP", "g0", "c0", "STREAMS", "s0", ">"],
            &["MULTI"],
            &["INCR", "n"],
            &["EXEC"],
            &["XREAD", "STREAMS", "s0", "0"],
            &["XPENDING", "s0", "g0"],
            &["REPLICAOF", "127.0.0.1", &redis.port.to_string()],
        ] {
            let ours = rill.cmd(cmd);
            assert_eq!(ours, oracle.cmd(cmd), "{cmd:?} on a replica");
        }
        assert_eq!(rill.cmd(&["SET", "k", "v"]), b"-READONLY You can't write against a read only replica.\r\n");
        assert_eq!(
            text(&rill.cmd_value(&["ROLE"])).split(' ').take(4).collect::<Vec<_>>().join(" "),
            format!("[slave 127.0.0.1 {} connected", redis.port)
        );
        // The move: rill takes over, keeping the data and the primary's history as replid2.
        let old_replid = info_field(&mut primary, "replication", "master_replid").unwrap();
        let offset: i64 = info_field(&mut rill, "replication", "master_repl_offset").unwrap().parse().unwrap();
        assert_eq!(rill.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
        assert_eq!(info_field(&mut rill, "replication", "role").as_deref(), Some("master"));
        assert_eq!(info_field(&mut rill, "replication", "master_replid2"), Some(old_replid));
        assert_eq!(info_field(&mut rill, "replication", "second_repl_offset"), Some((offset + 1).to_string()));
        assert_eq!(rill.cmd(&["SELECT", "0"]), b"+OK\r\n");
        assert_eq!(rill.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    }
}

#[test]
fn a_chain_of_rill_replicas_follows_and_fails_over_partially() {
    let seed = fuzz_seed(0x0000_C4A1_4ED0);
    let a_server = Server::rill();
    let b_server = Server::rill();
    let c_server = Server::rill();
    let (mut a, mut b, mut c) = (a_server.connect(), b_server.connect(), c_server.connect());
    let mut rng = Rng::new(seed);
    let mut ids = Vec::new();
    workload(&mut a, &mut rng, &mut ids, 200);
    attach(&mut b, &mut a, a_server.port);
    // C follows B: B relays A's stream byte for byte, so all three share one history.
    attach(&mut c, &mut b, b_server.port);
    workload(&mut a, &mut rng, &mut ids, 300);
    wait_caught_up(&mut a, &mut b);
    wait_caught_up(&mut b, &mut c);
    assert_equal(&mut a, &mut b, &format!("B after streaming (seed {seed})"));
    assert_equal(&mut a, &mut c, &format!("C, chained, after streaming (seed {seed})"));
    let replid = info_field(&mut a, "replication", "master_replid").unwrap();
    assert_eq!(info_field(&mut c, "replication", "master_replid"), Some(replid.clone()));
    // Failover: B is promoted; C continues from it partially, and so does A once demoted.
    assert_eq!(b.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    workload(&mut b, &mut rng, &mut ids, 100);
    wait_caught_up(&mut b, &mut c);
    assert_equal(&mut b, &mut c, &format!("C after B's promotion (seed {seed})"));
    attach(&mut a, &mut b, b_server.port);
    assert_equal(&mut b, &mut a, &format!("A demoted under B (seed {seed})"));
    // C's first sync was full and C continued partially after the promotion. A continues
    // partially too unless its cron put a PING into its own stream after B left it (A was a
    // primary until it was demoted, so its offset may have passed B's second_repl_offset):
    // then it syncs fully, as a Redis primary would.
    let full: u64 = info_field(&mut b, "stats", "sync_full").unwrap().parse().unwrap();
    let partial: u64 = info_field(&mut b, "stats", "sync_partial_ok").unwrap().parse().unwrap();
    assert!(partial >= 1 && partial + full == 3, "C's syncs and A's: {full} full, {partial} partial");
    // Blocked readers on a replica are served from the replicated writes.
    let mut reader = c_server.connect();
    reader
        .send(b"*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$4\r\n5000\r\n$7\r\nSTREAMS\r\n$5\r\nfresh\r\n$1\r\n$\r\n")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(&mut c, "clients", "blocked_clients").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "the reader did not block");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(b.cmd(&["SELECT", "0"]), b"+OK\r\n");
    b.cmd(&["XADD", "fresh", "7-1", "f", "v"]);
    let got = reader.read_reply().unwrap();
    assert!(String::from_utf8_lossy(&got).contains("7-1"), "{}", String::from_utf8_lossy(&got));
}

#[test]
fn replicaof_in_the_configuration_follows_from_the_start_and_config_reports_it() {
    let a_server = Server::rill();
    let mut a = a_server.connect();
    a.cmd(&["SET", "before", "1"]);
    let port = a_server.port.to_string();
    let b_server = Server::rill_with(&["--replicaof", "127.0.0.1", &port]);
    let mut b = b_server.connect();
    wait_caught_up(&mut a, &mut b);
    assert_eq!(b.cmd(&["GET", "before"]), b"$1\r\n1\r\n");
    assert_eq!(text(&b.cmd_value(&["CONFIG", "GET", "replicaof"])), format!("[replicaof 127.0.0.1 {port}]"));
    // REPLICAOF NO ONE clears it (CONFIG REWRITE then drops the line), REPLICAOF sets it.
    assert_eq!(b.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(text(&b.cmd_value(&["CONFIG", "GET", "replicaof"])), "[replicaof ]");
    assert_eq!(b.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    assert_eq!(text(&b.cmd_value(&["CONFIG", "GET", "replicaof"])), format!("[replicaof 127.0.0.1 {port}]"));
    a.cmd(&["SET", "after", "2"]);
    wait_caught_up(&mut a, &mut b);
    assert_eq!(b.cmd(&["GET", "after"]), b"$1\r\n2\r\n");
}

/// A key whose time has passed on a replica is hidden from its clients until the primary's
/// DEL arrives, as Redis' replica hides it: compared with a Redis replica of the same Redis
/// primary, whose active expiry is off so that no DEL comes.
#[test]
fn a_replica_hides_a_key_whose_time_has_passed_as_redis_does() {
    let Some(binary) = ReferenceServer::Redis8.require() else { return };
    let redis = Server::start(
        ServerKind::Redis(ReferenceServer::Redis8),
        &binary,
        &["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"],
    );
    let mut primary = redis.connect();
    let oracle_server = Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, &[]);
    let rill_server = Server::rill();
    let (mut oracle, mut rill) = (oracle_server.connect(), rill_server.connect());
    attach(&mut oracle, &mut primary, redis.port);
    attach(&mut rill, &mut primary, redis.port);
    assert_eq!(primary.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    primary.cmd(&["SET", "s", "v", "PX", "150"]);
    primary.cmd(&["XADD", "x", "1-1", "f", "v"]);
    primary.cmd(&["PEXPIRE", "x", "150"]);
    primary.cmd(&["SET", "kept", "v"]);
    wait_caught_up(&mut primary, &mut rill);
    wait_caught_up(&mut primary, &mut oracle);
    std::thread::sleep(Duration::from_millis(300));
    for cmd in [
        &["GET", "s"][..],
        &["EXISTS", "s", "x", "kept"],
        &["TTL", "s"],
        &["PTTL", "x"],
        &["TYPE", "x"],
        &["XRANGE", "x", "-", "+"],
        &["XLEN", "x"],
        &["GET", "kept"],
        // KEYS and SCAN skip such keys, DBSIZE still counts them (Redis counts its tables).
        &["KEYS", "*"],
        &["SCAN", "0", "COUNT", "100"],
        &["SCAN", "0", "TYPE", "stream"],
        &["DBSIZE"],
    ] {
        assert_eq!(rill.cmd(cmd), oracle.cmd(cmd), "{cmd:?} on a replica, the key's time passed");
    }
    // The primary's own look deletes it and the DEL reaches both.
    assert_eq!(primary.cmd(&["GET", "s"]), b"$-1\r\n");
    wait_caught_up(&mut primary, &mut rill);
    wait_caught_up(&mut primary, &mut oracle);
    assert_eq!(rill.cmd(&["DBSIZE"]), oracle.cmd(&["DBSIZE"]));
}

/// rill → rill → rill: each replica is sent rill's own record of every unit (`capa rill`), so
/// what Redis' forms cannot carry arrives exactly — a consumer's seen-time (moved by a read
/// that found nothing too, a unit with no Redis form at all) and active-time — through a relay,
/// across a link dropped and continued partially, and from a promoted replica.
#[test]
fn rill_replicas_carry_consumers_times_exactly_through_a_chain_and_a_partial_resync() {
    let (a_server, b_server, c_server) = (Server::rill(), Server::rill(), Server::rill());
    let (mut a, mut b, mut c) = (a_server.connect(), b_server.connect(), c_server.connect());
    attach(&mut b, &mut a, a_server.port);
    attach(&mut c, &mut b, b_server.port);
    let full = |x: &mut RawClient| x.cmd(&["XINFO", "STREAM", "s", "FULL"]);
    let step = |x: &mut RawClient, round: usize| {
        x.cmd(&["XADD", "s", "*", "n", &round.to_string()]);
        x.cmd(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"]);
        std::thread::sleep(Duration::from_millis(3));
        // Nothing new for bob: only his seen-time moves.
        x.cmd(&["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]);
        std::thread::sleep(Duration::from_millis(3));
    };
    a.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    for round in 0..5 {
        step(&mut a, round);
    }
    wait_caught_up(&mut a, &mut b);
    wait_caught_up(&mut b, &mut c);
    let ours = full(&mut a);
    assert!(String::from_utf8_lossy(&ours).contains("bob"), "{}", String::from_utf8_lossy(&ours));
    assert_eq!(String::from_utf8_lossy(&full(&mut b)), String::from_utf8_lossy(&ours), "B");
    assert_eq!(String::from_utf8_lossy(&full(&mut c)), String::from_utf8_lossy(&ours), "C, chained");
    // B's link dropped: it continues partially, and what it missed comes with its records.
    let partial_before: u64 = info_field(&mut a, "stats", "sync_partial_ok").unwrap().parse().unwrap();
    assert_eq!(a.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    for round in 5..10 {
        step(&mut a, round);
    }
    wait_caught_up(&mut a, &mut b);
    wait_caught_up(&mut b, &mut c);
    let partial: u64 = info_field(&mut a, "stats", "sync_partial_ok").unwrap().parse().unwrap();
    assert_eq!(partial, partial_before + 1, "B continued partially");
    let ours = full(&mut a);
    assert_eq!(String::from_utf8_lossy(&full(&mut b)), String::from_utf8_lossy(&ours), "B after the drop");
    assert_eq!(String::from_utf8_lossy(&full(&mut c)), String::from_utf8_lossy(&ours), "C after B's drop");
    // B promoted: C goes on from B's own units.
    assert_eq!(b.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    for round in 10..13 {
        step(&mut b, round);
    }
    wait_caught_up(&mut b, &mut c);
    assert_eq!(String::from_utf8_lossy(&full(&mut c)), String::from_utf8_lossy(&full(&mut b)), "C under B");
}

/// A replica that continues under a new replication ID (`+CONTINUE <new id>`: its primary was
/// promoted, or it moved to a promoted sibling) drops its own replicas, as Redis does, so that
/// they reconnect and learn the new ID: otherwise they would keep the old one and a failover
/// among them could not continue partially.
#[test]
fn a_replica_that_continues_under_a_new_id_tells_its_own_replicas() {
    let servers: Vec<Server> = (0..4).map(|_| Server::rill()).collect();
    let mut c: Vec<RawClient> = servers.iter().map(Server::connect).collect();
    let port = |i: usize| servers[i].port;
    let (a, rest) = c.split_at_mut(1);
    let (b, rest) = rest.split_at_mut(1);
    let (cc, d) = rest.split_at_mut(1);
    let (a, b, cc, d) = (&mut a[0], &mut b[0], &mut cc[0], &mut d[0]);
    // A ─► B ─► C, and A ─► D.
    attach(b, a, port(0));
    attach(cc, b, port(1));
    attach(d, a, port(0));
    a.cmd(&["SET", "k", "1"]);
    wait_caught_up(a, b);
    wait_caught_up(b, cc);
    wait_caught_up(a, d);
    let b_full = info_field(b, "stats", "sync_full");
    // D is promoted; B moves under it and continues partially, under D's new ID.
    assert_eq!(d.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    let new_id = info_field(d, "replication", "master_replid").unwrap();
    attach(b, d, port(3));
    assert_eq!(info_field(d, "stats", "sync_partial_ok").as_deref(), Some("1"), "B continued partially");
    d.cmd(&["SET", "k", "2"]);
    wait_caught_up(d, b);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(cc, "replication", "master_replid").as_deref() != Some(new_id.as_str()) {
        assert!(Instant::now() < deadline, "C still follows the old ID");
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_caught_up(b, cc);
    assert_eq!(cc.cmd(&["GET", "k"]), b"$1\r\n2\r\n");
    assert_eq!(info_field(b, "stats", "sync_full"), b_full, "C continued partially from B");
}

/// Run `steps` on a rill primary with a rill replica attached, then on a Redis 8.2.3 primary
/// with a Redis 8.2.3 replica: what each run reported, rill's first (None: no Redis 8.2.3).
fn rill_then_redis_pairs(
    mut steps: impl FnMut(&Server, &mut RawClient, &mut RawClient) -> Vec<String>,
) -> Option<[Vec<String>; 2]> {
    let binary = ReferenceServer::Redis8.require()?;
    let redis = || Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, &[]);
    let mut run = |primary: Server, replica: Server| {
        let (mut p, mut r) = (primary.connect(), replica.connect());
        attach(&mut r, &mut p, primary.port);
        steps(&primary, &mut p, &mut r)
    };
    let ours = run(Server::rill(), Server::rill());
    Some([ours, run(redis(), redis())])
}

/// Wait until the primary `p` counts one more partial resynchronization than `before`.
fn wait_partial_after(p: &mut RawClient, before: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(p, "stats", "sync_partial_ok").as_deref() == Some(before) {
        assert!(Instant::now() < deadline, "the link did not continue partially");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a replica counts in INFO commandstats for its primary's stream is what a Redis replica
/// of a Redis primary counts: GETSET and SET ... GET arrive as SET (Redis' forms), and a rill
/// replica, which applies rill's records instead of running the forms, still counts the forms'
/// calls (tools such as redis_exporter read them). Compared with Redis 8.2.3 on both sides.
#[test]
fn a_replica_counts_its_primarys_commands_as_redis_does() {
    let seen = rill_then_redis_pairs(|_, p, r| {
        r.cmd(&["CONFIG", "RESETSTAT"]);
        p.cmd(&["SET", "test", "foo"]);
        p.cmd(&["GETSET", "test", "bar"]);
        p.cmd(&["SET", "test", "vaz", "GET"]);
        p.cmd(&["SET", "test", "qaz", "GET", "GET"]);
        p.cmd(&["XADD", "s", "1-1", "f", "v"]);
        p.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
        p.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        p.cmd(&["RPUSH", "l", "a", "b", "c", "d"]);
        p.cmd(&["BLMOVE", "l", "m", "LEFT", "RIGHT", "0"]);
        p.cmd(&["BRPOPLPUSH", "l", "m", "0"]);
        p.cmd(&["BLPOP", "l", "0"]);
        p.cmd(&["EXPIRE", "m", "100"]);
        wait_caught_up(p, r);
        let stats = String::from_utf8_lossy(&r.cmd(&["INFO", "commandstats"])).into_owned();
        let mut calls: Vec<String> = stats
            .lines()
            .filter(|l| l.starts_with("cmdstat_"))
            .filter(|l| {
                !l.starts_with("cmdstat_ping") && !l.starts_with("cmdstat_replconf") && !l.starts_with("cmdstat_info")
            })
            .map(|l| l.split(",usec=").next().unwrap_or(l).to_string())
            .collect();
        calls.sort();
        calls
    });
    let Some([ours, theirs]) = seen else { return };
    assert_eq!(ours, theirs, "rill's replica, then Redis'");
}

/// INFO replication on a replica has Redis 8's fields in Redis' order: the sync attempts
/// (counted as each connection starts: one after REPLICAOF, then after a lost link the current
/// count starts again while the total goes on), `master_link_up_since_seconds` and
/// `master_client_io_thread` while the link is up, `master_link_down_since_seconds` (-1 for a
/// link never up) otherwise, `total_disconnect_time_sec`, and the RDB channel's buffer sizes.
/// Compared with a Redis 8.2.3 replica of a Redis 8.2.3 primary.
#[test]
fn a_replicas_info_counts_its_sync_attempts_and_link_times_as_redis_does() {
    // The field names in order, with the values that do not depend on timing.
    fn picture(r: &mut RawClient) -> Vec<String> {
        let info = String::from_utf8_lossy(&r.cmd(&["INFO", "replication"])).into_owned();
        // `master_client_io_thread` (always 0 here: rill has no I/O threads) came after 8.2.3:
        // the newest Redis prints it where rill does, after `master_link_up_since_seconds`.
        info.lines()
            .filter(|l| l.contains(':') && !l.starts_with("slave0") && !l.starts_with("connected_slaves"))
            .filter(|l| !l.starts_with("master_client_io_thread:"))
            .take_while(|l| !l.starts_with("master_failover_state"))
            .map(|l| {
                let (name, value) = l.split_once(':').unwrap_or((l, ""));
                let kept = ["master_current_sync_attempts", "master_total_sync_attempts", "master_link_status"];
                if kept.contains(&name) || value == "-1" {
                    l.to_string()
                } else {
                    name.to_string()
                }
            })
            .collect()
    }
    let seen = rill_then_redis_pairs(|primary, p, r| {
        let mut out = vec!["up".to_string()];
        out.extend(picture(r));
        // The link dropped from the replica's side: it reconnects at once and continues.
        let before = info_field(p, "stats", "sync_partial_ok").unwrap_or_default();
        r.cmd(&["CLIENT", "KILL", "TYPE", "master"]);
        wait_partial_after(p, &before);
        wait_caught_up(p, r);
        out.push("again".to_string());
        out.extend(picture(r));
        // A primary that is not there: the link goes down, attempts go on.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let nowhere = listener.local_addr().unwrap().port();
        drop(listener);
        assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &nowhere.to_string()]), b"+OK\r\n");
        let deadline = Instant::now() + Duration::from_secs(10);
        let attempts = |r: &mut RawClient| -> u64 {
            info_field(r, "replication", "master_total_sync_attempts").and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        while attempts(r) < 2 {
            assert!(Instant::now() < deadline, "no second attempt");
            std::thread::sleep(Duration::from_millis(50));
        }
        out.push("nowhere".to_string());
        out.extend(picture(r).into_iter().filter(|l| {
            !l.starts_with("master_current_sync_attempts") && !l.starts_with("master_total_sync_attempts")
        }));
        // Following no primary for a while, then the primary again: the disconnection goes on
        // being counted through REPLICAOF NO ONE (Redis counts it server-wide).
        assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
        std::thread::sleep(Duration::from_millis(2100));
        attach(r, p, primary.port);
        let total: u64 = info_field(r, "replication", "total_disconnect_time_sec").unwrap().parse().unwrap();
        out.push(format!("disconnected 2 s or more through NO ONE: {}", total >= 2));
        out
    });
    let Some([ours, theirs]) = seen else { return };
    assert_eq!(ours, theirs, "rill's replica, then Redis'");
}

/// `DEBUG CHANGE-REPL-ID` on a primary starts a new history and forgets the one before, so a
/// replica that reconnects syncs fully (Redis' tests use it to force a full sync); the reply,
/// the IDs INFO shows and the syncs the primary counts are Redis 8.2.3's.
#[test]
fn debug_change_repl_id_makes_the_next_psync_a_full_sync_as_in_redis() {
    let Some(redis) = ReferenceServer::Redis8.require() else { return };
    let mut seen = Vec::new();
    for (kind, binary) in
        [(ServerKind::Rill, rill_testkit::rill_server_binary()), (ServerKind::Redis(ReferenceServer::Redis8), redis)]
    {
        let args = ["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"];
        let (primary, replica) = (Server::start(kind, &binary, &args), Server::start(kind, &binary, &args));
        let (mut p, mut r) = (primary.connect(), replica.connect());
        p.cmd(&["SET", "k", "v"]);
        attach(&mut r, &mut p, primary.port);
        let before = info_field(&mut p, "replication", "master_replid").unwrap();
        let mut out = vec![String::from_utf8_lossy(&p.cmd(&["DEBUG", "CHANGE-REPL-ID"])).into_owned()];
        let after = info_field(&mut p, "replication", "master_replid").unwrap();
        out.push(format!("changed {}", before != after && after.len() == 40));
        for field in ["master_replid2", "second_repl_offset"] {
            out.push(format!("{field}:{}", info_field(&mut p, "replication", field).unwrap()));
        }
        out.push(format!("sync_full:{}", info_field(&mut p, "stats", "sync_full").unwrap()));
        r.cmd(&["CLIENT", "KILL", "TYPE", "master"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_field(&mut p, "stats", "sync_full").as_deref() == Some("1") {
            assert!(Instant::now() < deadline, "{}: no full sync after DEBUG CHANGE-REPL-ID", kind.label());
            std::thread::sleep(Duration::from_millis(50));
        }
        wait_caught_up(&mut p, &mut r);
        out.push(format!("sync_full:{}", info_field(&mut p, "stats", "sync_full").unwrap()));
        out.push(format!("sync_partial_ok:{}", info_field(&mut p, "stats", "sync_partial_ok").unwrap()));
        out.push(format!(
            "follows the new ID {}",
            info_field(&mut r, "replication", "master_replid").unwrap() == after
        ));
        seen.push(out);
    }
    assert_eq!(seen[0], seen[1], "rill, then Redis 8.2.3");
    assert_eq!(seen[0][0], "+OK\r\n");
}

/// A replica's link to its primary is a client of the replica, as in Redis: CLIENT LIST shows
/// it (`flags=M`, its address the primary's), INFO counts it in `connected_clients`, and
/// `CLIENT KILL TYPE master` or by its address drops the link, which continues partially.
/// Compared with a Redis 8.2.3 replica of a Redis 8.2.3 primary.
#[test]
fn a_replicas_link_to_its_primary_is_a_client_it_can_kill_as_in_redis() {
    let seen = rill_then_redis_pairs(|primary, p, r| {
        let list = String::from_utf8_lossy(r.cmd_value(&["CLIENT", "LIST", "TYPE", "master"]).as_bytes().unwrap())
            .into_owned();
        let mut out: Vec<String> = list
            .lines()
            .map(|l| {
                let field = |name: &str| l.split(' ').find_map(|f| f.strip_prefix(name)).unwrap_or("?").to_string();
                let addr = field("addr=").replace(&primary.port.to_string(), "PRIMARY");
                format!("addr={addr} flags={}", field("flags="))
            })
            .collect();
        out.push(format!("connected_clients {:?}", info_field(r, "clients", "connected_clients")));
        let addr = format!("127.0.0.1:{}", primary.port);
        for (how, kill) in
            [("type", ["CLIENT", "KILL", "TYPE", "master"].as_slice()), ("addr", &["CLIENT", "KILL", &addr])]
        {
            let before = info_field(p, "stats", "sync_partial_ok").unwrap();
            out.push(format!("kill by {how}: {:?}", String::from_utf8_lossy(&r.cmd(kill))));
            wait_partial_after(p, &before);
            p.cmd(&["SET", "after", how]);
            wait_caught_up(p, r);
            out.push(format!("after: {:?}", String::from_utf8_lossy(&r.cmd(&["GET", "after"]))));
        }
        out
    });
    let Some([ours, theirs]) = seen else { return };
    assert_eq!(ours, theirs, "rill's replica, then Redis'");
}

/// Read one RESP array command from a replica's connection.
fn read_command(r: &mut impl std::io::BufRead) -> Vec<String> {
    let mut line = String::new();
    let mut next_line = |r: &mut dyn std::io::BufRead| {
        line.clear();
        r.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    };
    let head = next_line(r);
    let n: usize = head.strip_prefix('*').unwrap_or_else(|| panic!("not an array: {head:?}")).parse().unwrap();
    (0..n)
        .map(|_| {
            let len: usize = next_line(r).strip_prefix('$').unwrap().parse().unwrap();
            let mut buf = vec![0; len + 2];
            r.read_exact(&mut buf).unwrap();
            String::from_utf8_lossy(&buf[..len]).into_owned()
        })
        .collect()
}

/// A primary played by the test: it answers the handshake of the replica connecting to it
/// until PSYNC, and returns the connection and PSYNC's arguments.
fn accept_replica(listener: &std::net::TcpListener) -> (std::net::TcpStream, Vec<String>) {
    use std::io::Write;
    let (mut conn, _) = listener.accept().unwrap();
    let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
    loop {
        let cmd = read_command(&mut reader);
        match cmd[0].to_ascii_uppercase().as_str() {
            "PING" => conn.write_all(b"+PONG\r\n").unwrap(),
            "REPLCONF" => conn.write_all(b"+OK\r\n").unwrap(),
            "PSYNC" => return (conn, cmd),
            other => panic!("unexpected {other} in the handshake"),
        }
    }
}

/// A write from the primary that sets an expiry time already past where the replica applies
/// it (a PEXPIREAT or SET PXAT that arrives late) stores the time and keeps the key, hidden, for
/// the primary's DEL, as a Redis replica does: deleting it would leave the replica without a key
/// its primary still has. The same stream, from a primary played by the test, to rill and to a
/// Redis 8.2.3 replica.
#[test]
fn a_replica_keeps_a_key_whose_expiry_arrives_already_past_as_redis_does() {
    use std::io::Write;
    let Some(binary) = ReferenceServer::Redis8.require() else { return };
    let mut seen = Vec::new();
    for kind in ["rill", "redis"] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port().to_string();
        let server = match kind {
            "rill" => Server::rill_with(&["--replicaof", "127.0.0.1", &port]),
            _ => {
                Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, &["--replicaof", "127.0.0.1", &port])
            }
        };
        let (mut conn, _) = accept_replica(&listener);
        let rdb = b"REDIS0011\xff\x00\x00\x00\x00\x00\x00\x00\x00";
        conn.write_all(format!("+FULLRESYNC {} 0\r\n${}\r\n", "b".repeat(40), rdb.len()).as_bytes()).unwrap();
        conn.write_all(rdb).unwrap();
        let mut stream = bytes::BytesMut::new();
        for cmd in [
            &["SELECT", "0"][..],
            &["SET", "a", "1"],
            &["PEXPIREAT", "a", "1"],
            &["SET", "b", "2", "PXAT", "1"],
            &["SET", "c", "3"],
            &["EXPIREAT", "c", "1"],
            &["SET", "kept", "v"],
        ] {
            rill_resp::write_request(&mut stream, &cmd.iter().map(|a| a.as_bytes()).collect::<Vec<_>>());
        }
        conn.write_all(&stream).unwrap();
        let mut client = server.connect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.cmd(&["GET", "kept"]) != b"$1\r\nv\r\n" {
            assert!(Instant::now() < deadline, "{kind} did not apply the stream");
            std::thread::sleep(Duration::from_millis(20));
        }
        let replies: Vec<Vec<u8>> = [
            &["DBSIZE"][..],
            &["EXISTS", "a", "b", "c", "kept"],
            &["GET", "a"],
            &["TTL", "b"],
            &["PEXPIRETIME", "c"],
            &["SCAN", "0", "COUNT", "100"],
        ]
        .iter()
        .map(|cmd| client.cmd(cmd))
        .collect();
        seen.push(replies);
        drop(conn);
    }
    assert_eq!(String::from_utf8_lossy(&seen[0].concat()), String::from_utf8_lossy(&seen[1].concat()));
}

/// A link lost inside the primary's MULTI … EXEC: the replica's offset counts the transaction
/// only once its EXEC ran, so it asks to continue from the MULTI (as a Redis replica does), and
/// the transaction resent whole is applied once.
#[test]
fn a_link_lost_inside_a_transaction_continues_from_its_multi() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let rill_server = Server::rill_with(&["--replicaof", "127.0.0.1", &port]);
    let replid = "a".repeat(40);
    let (mut conn, psync) = accept_replica(&listener);
    assert_eq!(psync[0].to_ascii_uppercase(), "PSYNC");
    // An empty RDB (checksum 0: not checked), then the stream from offset 100.
    let rdb = b"REDIS0011\xff\x00\x00\x00\x00\x00\x00\x00\x00";
    conn.write_all(format!("+FULLRESYNC {replid} 100\r\n${}\r\n", rdb.len()).as_bytes()).unwrap();
    conn.write_all(rdb).unwrap();
    let applied = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";
    let open_transaction = b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n";
    conn.write_all(applied).unwrap();
    conn.write_all(open_transaction).unwrap();
    let mut rill = rill_server.connect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while rill.cmd(&["GET", "a"]) != b"$1\r\n1\r\n" {
        assert!(Instant::now() < deadline, "the replica did not apply the stream");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    drop(conn);
    // It reconnects and asks for the byte after the last one outside a transaction.
    let (mut conn, psync) = accept_replica(&listener);
    let want = 100 + applied.len() + 1;
    assert_eq!(psync[1..], [replid.clone(), want.to_string()], "PSYNC after a cut inside MULTI");
    conn.write_all(format!("+CONTINUE {replid}\r\n").as_bytes()).unwrap();
    conn.write_all(open_transaction).unwrap();
    let rest = b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1\r\n3\r\n*1\r\n$4\r\nEXEC\r\n";
    conn.write_all(rest).unwrap();
    while rill.cmd(&["GET", "c"]) != b"$1\r\n3\r\n" {
        assert!(Instant::now() < deadline, "the resent transaction was not applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(rill.cmd(&["GET", "b"]), b"$1\r\n2\r\n");
    let offset = info_field(&mut rill, "replication", "slave_repl_offset").unwrap();
    assert_eq!(offset, (100 + applied.len() + open_transaction.len() + rest.len()).to_string());
}

/// A replica whose link to its primary is not up refuses PSYNC and SYNC with Redis' error: a
/// replica of it would otherwise follow the history it is about to drop (replication-buffer,
/// where a replica pointed at a replica still loading its snapshot then lost its partial
/// resync with the real primary). The same on Redis 8.2.3.
#[test]
fn a_replica_without_its_primary_refuses_to_serve_a_replica_as_redis_does() {
    let mut seen = Vec::new();
    let mut launches = vec![Launch::rill()];
    launches.extend(Launch::reference(ReferenceServer::Redis8));
    for launch in launches {
        let server = launch.start();
        let mut c = server.connect();
        // Nothing listens there: the link stays down.
        assert_eq!(c.cmd(&["REPLICAOF", "127.0.0.1", &rill_testkit::free_port().to_string()]), b"+OK\r\n");
        let mut replies = Vec::new();
        for cmd in [&["PSYNC", "?", "-1"][..], &["SYNC"]] {
            let mut r = server.connect();
            replies.push(String::from_utf8_lossy(&r.cmd(cmd)).into_owned());
        }
        seen.push(replies);
    }
    assert_eq!(seen[0], ["-NOMASTERLINK Can't SYNC while not connected with my master\r\n"; 2]);
    if let Some(redis) = seen.get(1) {
        assert_eq!(&seen[0], redis);
    }
}

/// A read of the primary's stream can end right after a command's header (`*3\r\n`): that
/// command is not all there, so the replica neither runs part of it nor counts its bytes. It
/// used to take the header alone as a command, count it, then run the rest line by line as
/// inline commands: the write was lost while the offset counted it, and a link lost there
/// asked to continue from inside the command (psync2's "generate load while killing
/// replication links").
#[test]
fn a_command_whose_header_arrives_alone_is_applied_once_whole_and_counted_once() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let rill_server = Server::rill_with(&["--replicaof", "127.0.0.1", &port]);
    let replid = "c".repeat(40);
    let (mut conn, _) = accept_replica(&listener);
    let rdb = b"REDIS0011\xff\x00\x00\x00\x00\x00\x00\x00\x00";
    conn.write_all(format!("+FULLRESYNC {replid} 100\r\n${}\r\n", rdb.len()).as_bytes()).unwrap();
    conn.write_all(rdb).unwrap();
    let applied = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";
    let (head, body) = (&b"*3\r\n"[..], &b"$6\r\nINCRBY\r\n$1\r\nn\r\n$1\r\n5\r\n"[..]);
    conn.write_all(applied).unwrap();
    conn.write_all(head).unwrap();
    conn.flush().unwrap();
    let mut rill = rill_server.connect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while rill.cmd(&["GET", "a"]) != b"$1\r\n1\r\n" {
        assert!(Instant::now() < deadline, "the replica did not apply the stream");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        info_field(&mut rill, "replication", "slave_repl_offset").unwrap(),
        (100 + applied.len()).to_string(),
        "the header alone counted"
    );
    // The rest arrives: the command runs once, whole.
    conn.write_all(body).unwrap();
    while rill.cmd(&["GET", "n"]) != b"$1\r\n5\r\n" {
        assert!(Instant::now() < deadline, "the command cut after its header was not applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    let at = 100 + applied.len() + head.len() + body.len();
    assert_eq!(info_field(&mut rill, "replication", "slave_repl_offset").unwrap(), at.to_string());
    // A link lost right after a header: the replica asks for that command again, from its
    // first byte.
    conn.write_all(head).unwrap();
    conn.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(conn);
    let (mut conn, psync) = accept_replica(&listener);
    assert_eq!(psync[1..], [replid.clone(), (at + 1).to_string()], "PSYNC after a cut after a header");
    conn.write_all(format!("+CONTINUE {replid}\r\n").as_bytes()).unwrap();
    conn.write_all(head).unwrap();
    conn.write_all(body).unwrap();
    while rill.cmd(&["GET", "n"]) != b"$2\r\n10\r\n" {
        assert!(Instant::now() < deadline, "the resent command was not applied once");
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = at + head.len() + body.len();
    assert_eq!(info_field(&mut rill, "replication", "slave_repl_offset").unwrap(), end.to_string());
}

/// After a full sync a replica with the log on writes its log's base (a snapshot of all it
/// loaded, as long as encoding the dataset takes): its readers, and readers it serves from the
/// stream, do not wait for that base (what they read came from the primary, which holds it),
/// as a Redis replica serves reads once it has loaded. A primary's readers do wait for its log
/// (`lose_nothing.rs`).
#[test]
fn a_replica_serves_readers_while_its_log_base_is_written() {
    let primary_server = Server::rill();
    let mut primary = primary_server.connect();
    for i in 0..200 {
        primary.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    // 200 keys at 10 ms each: the replica's base takes two seconds.
    let replica_server = Server::rill_with(&["--appendonly", "yes", "--rdb-key-save-delay", "10000"]);
    let mut replica = replica_server.connect();
    attach(&mut replica, &mut primary, primary_server.port);
    let mut reader = replica_server.connect();
    reader
        .send(b"*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$5\r\n10000\r\n$7\r\nSTREAMS\r\n$5\r\nfresh\r\n$1\r\n$\r\n")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(&mut replica, "clients", "blocked_clients").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "the reader did not block");
        std::thread::sleep(Duration::from_millis(10));
    }
    primary.cmd(&["SET", "fresh-key", "1"]);
    primary.cmd(&["XADD", "fresh", "7-1", "f", "v"]);
    wait_caught_up(&mut primary, &mut replica);
    assert_eq!(replica.cmd(&["GET", "fresh-key"]), b"$1\r\n1\r\n");
    let got = reader.read_reply().unwrap();
    assert!(String::from_utf8_lossy(&got).contains("7-1"), "{}", String::from_utf8_lossy(&got));
    // Both answered while the base was still being written.
    assert_eq!(info_field(&mut replica, "persistence", "aof_rewrite_in_progress").as_deref(), Some("1"));
}

/// A full sync is loaded as it arrives, into a new keyspace while the old one is served (as
/// Redis' `repl-diskless-load swapdb`): a payload cut short, or one whose checksum is wrong,
/// leaves the replica with what it had, still answering from it; a good one replaces it.
#[test]
fn a_full_sync_that_fails_leaves_the_replica_with_what_it_had() {
    use rill_engine::rdb::file::FileWriter;
    use rill_engine::{Entry, Value};
    use std::io::Write;
    // A payload of 2000 keys, big enough to arrive in several chunks.
    let mut w = FileWriter::new(Vec::new(), 12, 1_000).unwrap();
    w.select_db(0, 2000, 0).unwrap();
    for i in 0..2000 {
        let value = Value::Str(bytes::Bytes::from(vec![b'v'; 500]));
        w.key(format!("new{i}").as_bytes(), &Entry::new(value, None)).unwrap();
    }
    let (rdb, _) = w.finish().unwrap();
    let mut bad_crc = rdb.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let rill_server = Server::rill();
    let mut rill = rill_server.connect();
    rill.cmd(&["SET", "old", "1"]);
    assert_eq!(rill.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    let replid = "b".repeat(40);
    let mark = "m".repeat(40);
    let wait_log = |what: &str, times: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while rill_server.log().matches(what).count() < times {
            assert!(Instant::now() < deadline, "no '{what}' in the log:\n{}", rill_server.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Cut short: half the payload, then the link closes.
    let (mut conn, _) = accept_replica(&listener);
    conn.write_all(format!("+FULLRESYNC {replid} 100\r\n$EOF:{mark}\r\n").as_bytes()).unwrap();
    conn.write_all(&rdb[..rdb.len() / 2]).unwrap();
    drop(conn);
    // Logged as Redis logs a short read of the payload (Redis' tests look for it).
    wait_log("Internal error in RDB", 1);
    wait_log("MASTER <-> REPLICA sync started", 2);
    assert_eq!(rill.cmd(&["GET", "old"]), b"$1\r\n1\r\n", "a transfer cut short took the old data");
    assert_eq!(rill.cmd(&["EXISTS", "new0"]), b":0\r\n");
    // The whole payload with a wrong checksum.
    let (mut conn, _) = accept_replica(&listener);
    conn.write_all(format!("+FULLRESYNC {replid} 100\r\n${}\r\n", bad_crc.len()).as_bytes()).unwrap();
    conn.write_all(&bad_crc).unwrap();
    wait_log("Wrong RDB checksum", 1);
    assert_eq!(rill.cmd(&["GET", "old"]), b"$1\r\n1\r\n", "a payload with a bad checksum took the old data");
    assert_eq!(rill.cmd(&["DBSIZE"]), b":1\r\n");
    drop(conn);
    // A good one replaces it.
    let (mut conn, _) = accept_replica(&listener);
    conn.write_all(format!("+FULLRESYNC {replid} 100\r\n$EOF:{mark}\r\n").as_bytes()).unwrap();
    for part in rdb.chunks(7000) {
        conn.write_all(part).unwrap();
    }
    conn.write_all(mark.as_bytes()).unwrap();
    wait_log("MASTER <-> REPLICA sync: Finished with success", 1);
    assert_eq!(rill.cmd(&["DBSIZE"]), b":2000\r\n");
    assert_eq!(rill.cmd(&["EXISTS", "old"]), b":0\r\n");
    assert_eq!(info_field(&mut rill, "replication", "master_replid").as_deref(), Some(replid.as_str()));
}

/// [`rill_then_redis_pairs`] with `args` given to every server (both primaries and both
/// replicas), and the servers handed to `steps` too (primary, replica).
fn rill_then_redis_pairs_with(
    args: &[&str],
    mut steps: impl FnMut(&mut Server, &mut Server, &mut RawClient, &mut RawClient) -> Vec<String>,
) -> Option<[Vec<String>; 2]> {
    let binary = ReferenceServer::Redis8.require()?;
    let redis = || Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, args);
    let mut run = |mut primary: Server, mut replica: Server| {
        let (mut p, mut r) = (primary.connect(), replica.connect());
        attach(&mut r, &mut p, primary.port);
        steps(&mut primary, &mut replica, &mut p, &mut r)
    };
    let ours = run(Server::rill_with(args), Server::rill_with(args));
    Some([ours, run(redis(), redis())])
}

/// Each reply of `cmds` on `client`, as text.
fn replies(client: &mut RawClient, cmds: &[&[&str]]) -> Vec<String> {
    cmds.iter().map(|cmd| format!("{cmd:?} -> {}", String::from_utf8_lossy(&client.cmd(cmd)))).collect()
}

/// How many lines of `log` hold `needle`.
fn log_lines_with(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

/// What a primary expires as it writes (an expiry time already past: EXPIRE 0, PEXPIREAT in
/// the past) is deleted on its replica too — a rill replica applies rill's record
/// of the unit at the primary's time, where that time had passed — and SPOP with a count
/// reaches the replica as Redis propagates it: `SREM`s of at most 1024 members (inside
/// MULTI/EXEC when there are more), `DEL` when it takes the whole set. Compared with a Redis
/// 8.2.3 pair: the replica's keys and its counts of the commands it was sent.
#[test]
fn a_replica_gets_what_its_primary_expired_on_write_and_spop_in_redis_forms() {
    let seen = rill_then_redis_pairs_with(&["--enable-debug-command", "yes"], |_, _, p, r| {
        r.cmd(&["CONFIG", "RESETSTAT"]);
        p.cmd(&["SET", "a", "1"]);
        p.cmd(&["EXPIRE", "a", "0"]);
        p.cmd(&["SET", "b", "2"]);
        p.cmd(&["PEXPIREAT", "b", "1"]);
        p.cmd(&["SET", "kept", "v", "PX", "100000"]);
        let members: Vec<String> = (1..=4000).map(|i| i.to_string()).collect();
        let mut sadd = vec!["SADD", "s"];
        sadd.extend(members.iter().map(String::as_str));
        p.cmd(&sadd);
        for count in ["1023", "1024", "1025"] {
            p.cmd(&["SPOP", "s", count]);
        }
        p.cmd(&["SADD", "t", "x", "y"]);
        p.cmd(&["SPOP", "t", "5"]);
        p.cmd(&["SADD", "u", "x"]);
        p.cmd(&["SPOP", "u"]);
        wait_caught_up(p, r);
        let mut seen = replies(r, &[&["DBSIZE"], &["EXISTS", "a", "b", "t", "u"], &["SCARD", "s"]]);
        // Held or not (a status reply or an error), whatever a lookup says.
        for key in ["a", "b", "t", "u"] {
            let found = r.cmd(&["DEBUG", "OBJECT", key]).first().map_or('?', |b| *b as char);
            seen.push(format!("DEBUG OBJECT {key} -> {found}"));
        }
        seen.push(info_field(r, "keyspace", "db0").unwrap_or_default().split(",avg_ttl").next().unwrap_or("").into());
        let stats = String::from_utf8_lossy(&r.cmd(&["INFO", "commandstats"])).into_owned();
        seen.extend(
            stats
                .lines()
                .filter(|l| {
                    l.starts_with("cmdstat_srem") || l.starts_with("cmdstat_del") || l.starts_with("cmdstat_multi")
                })
                .map(|l| l.split(",usec=").next().unwrap_or(l).to_string()),
        );
        seen.sort();
        seen
    });
    let Some([ours, theirs]) = seen else { return };
    assert_eq!(ours, theirs, "rill's replica, then Redis'");
}

/// A writable replica (`replica-read-only no`) expires the keys its own clients gave a time
/// (actively too: DBSIZE drops to 0), while the primary's keys stay the primary's to expire: a
/// client's write deletes a primary's key whose time has passed and starts afresh (INCR gives
/// 1, no TTL), a read only hides it, and DEBUG OBJECT still finds it (Redis looks it up
/// without the expiry check). Compared with a Redis 8.2.3 pair.
#[test]
fn a_writable_replica_expires_the_keys_its_clients_wrote_as_redis_does() {
    let seen = rill_then_redis_pairs_with(&["--enable-debug-command", "yes"], |_, _, p, r| {
        let mut seen = replies(r, &[&["CONFIG", "SET", "replica-read-only", "no"]]);
        for key in ["own1", "own2", "own3"] {
            seen.extend(replies(r, &[&["SET", key, "1", "PX", "200"]]));
        }
        seen.extend(replies(r, &[&["DBSIZE"]]));
        let deadline = Instant::now() + Duration::from_secs(5);
        while r.cmd(&["DBSIZE"]) != b":0\r\n" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        seen.extend(replies(r, &[&["DBSIZE"]]));
        p.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        p.cmd(&["SET", "key1", "5", "PX", "10"]);
        p.cmd(&["SET", "key2", "5", "PX", "10"]);
        wait_caught_up(p, r);
        std::thread::sleep(Duration::from_millis(50));
        seen.extend(replies(r, &[&["DBSIZE"], &["EXISTS", "key1", "key2"]]));
        // Found (a status reply) or not (an error): the description itself is each server's.
        seen.push(format!(
            "DEBUG OBJECT key2 -> {}",
            r.cmd(&["DEBUG", "OBJECT", "key2"]).first().map_or('?', |b| *b as char)
        ));
        seen.extend(replies(
            r,
            &[&["INCR", "key1"], &["TTL", "key1"], &["GET", "key2"], &["DBSIZE"], &["EXISTS", "key1", "key2"]],
        ));
        seen
    });
    let Some([ours, theirs]) = seen else { return };
    assert_eq!(ours, theirs, "rill's replica, then Redis'");
}

/// A command of the primary's stream that fails on the replica (one DEBUG REPLICATE sends, or
/// one the replica's own writes made fail) is logged as Redis logs it (`== CRITICAL == This
/// replica is sending an error to its master: ...`, naming the command) and counted in INFO
/// `unexpected_error_replies`; `propagation-error-behavior ignore` (the default) goes on.
/// Compared with a Redis 8.2.3 pair; a rill replica gets rill's records, so both of its
/// ways of applying the stream are taken (the DEBUG REPLICATE'd command has no record).
#[test]
fn a_replica_logs_and_counts_the_errors_its_primarys_stream_gets_as_redis_does() {
    let seen = rill_then_redis_pairs_with(&["--enable-debug-command", "yes"], |_, replica, p, r| {
        let mut seen = replies(
            r,
            &[
                &["CONFIG", "SET", "propagation-error-behavior", "ignore"],
                &["CONFIG", "GET", "propagation-error-behavior"],
                &["CONFIG", "GET", "replica-ignore-disk-write-errors"],
            ],
        );
        seen.extend(replies(p, &[&["DEBUG", "REPLICATE", "fake-command-1"], &["SET", "foo", "bar2"]]));
        wait_caught_up(p, r);
        // Counted now: the next error's log line may quote the stream before it (Redis logs
        // its backlog there; rill does not).
        let deadline = Instant::now() + Duration::from_secs(5);
        while log_lines_with(&replica.log(), "== CRITICAL ==") < 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = replica.log();
        for needle in ["== CRITICAL ==", "fake-command-1", "after processing the command '<unknown>'"] {
            seen.push(format!("{needle}: {}", log_lines_with(&log, needle)));
        }
        seen.extend(replies(r, &[&["CONFIG", "SET", "replica-read-only", "no"], &["SET", "number2", "foo"]]));
        seen.extend(replies(p, &[&["INCRBY", "number2", "1"]]));
        wait_caught_up(p, r);
        seen.extend(replies(r, &[&["GET", "number2"], &["GET", "foo"]]));
        seen.push(info_field(r, "stats", "unexpected_error_replies").unwrap_or_default());
        let deadline = Instant::now() + Duration::from_secs(5);
        while log_lines_with(&replica.log(), "== CRITICAL ==") < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = replica.log();
        for needle in ["== CRITICAL ==", "This replica is sending an error to its master: ", "'incrby'"] {
            seen.push(format!("{needle}: {}", log_lines_with(&log, needle)));
        }
        seen
    });
    let Some([ours, theirs]) = seen else { return };
    assert_eq!(ours, theirs, "rill's replica, then Redis'");
}

/// `propagation-error-behavior panic` (and `panic-on-replicas`) ends a read-only replica whose
/// primary's stream fails on it, as Redis panics: the process exits, saying why.
#[test]
fn propagation_error_behavior_panic_ends_a_read_only_replica() {
    for behavior in ["panic", "panic-on-replicas"] {
        let seen = rill_then_redis_pairs_with(&["--enable-debug-command", "yes"], |_, replica, p, r| {
            let mut seen = replies(r, &[&["CONFIG", "SET", "propagation-error-behavior", behavior]]);
            p.cmd(&["DEBUG", "REPLICATE", "fake-command-1"]);
            let status = replica.wait_exit(Duration::from_secs(10));
            seen.push(format!("exited: {}", status.is_some_and(|s| !s.success())));
            let log = replica.log();
            seen.push(format!(
                "says why: {}",
                0 < log_lines_with(
                    &log,
                    "This replica panicked sending an error to its master after processing the command '<unknown>'"
                )
            ));
            seen
        });
        let Some([ours, theirs]) = seen else { return };
        assert_eq!(ours, theirs, "{behavior}: rill's replica, then Redis'");
    }
}

#[test]
fn a_replica_gives_up_a_handshake_its_primary_leaves_silent_for_repl_timeout() {
    // A primary that answers the handshake and then says nothing to the PSYNC (as a Redis
    // stopped by DEBUG SLEEP while the replica waits for its full sync).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let rill = Server::rill();
    let mut replica = rill.connect();
    assert_eq!(replica.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()]), b"+OK\r\n");
    let (socket, _) = listener.accept().unwrap();
    let mut primary = RawClient::from_stream(socket).unwrap();
    loop {
        let Value::Array(words) = primary.read_value().unwrap() else { panic!("not a command") };
        let name = text(words.first().unwrap()).to_ascii_uppercase();
        match name.as_str() {
            "PING" => primary.send(b"+PONG\r\n").unwrap(),
            "PSYNC" => break,
            _ => primary.send(b"+OK\r\n").unwrap(),
        }
    }
    // Set while the replica already waits: it applies to that wait.
    assert_eq!(replica.cmd(&["CONFIG", "SET", "repl-timeout", "1"]), b"+OK\r\n");
    let asked = Instant::now();
    let deadline = asked + Duration::from_secs(10);
    while !rill.log().contains("Timeout connecting to the MASTER...") {
        assert!(Instant::now() < deadline, "no handshake timeout logged:\n{}", rill.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // It gave the link up, and tries again.
    let (_again, _) = listener.accept().unwrap();
    assert!(asked.elapsed() < Duration::from_secs(10));
}

/// Wait until `INFO persistence` says `field:1` on `client`.
fn wait_info_one(client: &mut RawClient, field: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(client, "persistence", field).as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "{field} never became 1");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_replica_loading_another_history_answers_loading_and_one_of_its_own_history_serves_the_old_data() {
    // A slow snapshot (20 ms a key) so that the replica is caught loading it.
    let primary_server = Server::rill_with(&["--rdb-key-save-delay", "20000"]);
    let mut primary = primary_server.connect();
    for i in 0..200 {
        primary.cmd(&["SET", &format!("key:{i}"), "value"]);
    }
    let replica_server = Server::rill();
    let mut replica = replica_server.connect();
    replica.cmd(&["SET", "mykey", "myvalue"]);
    // Another history (the replica's own): -LOADING meanwhile, as Redis' swapdb with a new replid.
    assert_eq!(replica.cmd(&["REPLICAOF", "127.0.0.1", &primary_server.port.to_string()]), b"+OK\r\n");
    wait_info_one(&mut replica, "loading");
    assert_eq!(info_field(&mut replica, "persistence", "async_loading").as_deref(), Some("0"));
    assert_eq!(replica.cmd(&["GET", "mykey"]), b"-LOADING Redis is loading the dataset in memory\r\n");
    assert_eq!(primary.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]), b"+OK\r\n");
    wait_caught_up(&mut primary, &mut replica);
    assert_eq!(info_field(&mut replica, "persistence", "loading").as_deref(), Some("0"));
    assert_eq!(replica.cmd(&["DBSIZE"]), b":200\r\n");
    // The same history again, from a full sync (the backlog moved past the replica): the old
    // data is served meanwhile, and only commands flagged no-async-loading get -LOADING.
    assert_eq!(replica.cmd(&["CONFIG", "SET", "replica-read-only", "no"]), b"+OK\r\n");
    replica.cmd(&["SET", "mykey", "myvalue"]);
    assert_eq!(primary.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "20000"]), b"+OK\r\n");
    primary.cmd(&["MULTI"]);
    primary.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    primary.cmd(&["CONFIG", "SET", "repl-backlog-size", "16384"]);
    let big = "A".repeat(16384);
    for i in 0..4 {
        primary.cmd(&["SET", &format!("big:{i}"), &big]);
    }
    primary.cmd(&["EXEC"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut replica, "persistence", "async_loading").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "no async loading:\n{}", replica_server.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(&mut replica, "persistence", "loading").as_deref(), Some("0"));
    assert_eq!(replica.cmd(&["GET", "mykey"]), b"$7\r\nmyvalue\r\n");
    assert_eq!(replica.cmd(&["REPLICAOF", "NO", "ONE"]), b"-LOADING Redis is loading the dataset in memory\r\n");
    assert_eq!(primary.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]), b"+OK\r\n");
    wait_caught_up(&mut primary, &mut replica);
    assert_eq!(info_field(&mut replica, "persistence", "async_loading").as_deref(), Some("0"));
    assert_eq!(replica.cmd(&["GET", "mykey"]), b"$-1\r\n");
    assert_eq!(replica.cmd(&["DBSIZE"]), b":204\r\n");
}

/// A replica paused with CLIENT PAUSE WRITE goes on reading its primary's stream without
/// applying it: `slave_read_repl_offset` reaches the primary's offset (rill's records of the
/// units, which no offset counts, apart) while `slave_repl_offset` and the data stay where
/// they were; after CLIENT UNPAUSE both catch up. Compared with Redis 8.2.3 on both sides.
#[test]
fn a_paused_replica_reads_its_primarys_stream_without_applying_it_as_redis_does() {
    let seen = rill_then_redis_pairs(|_, p, r| {
        let mut out = Vec::new();
        p.cmd(&["SET", "foo", "bar"]);
        wait_caught_up(p, r);
        let before = info_field(r, "replication", "slave_repl_offset");
        out.push(format!("pause: {:?}", String::from_utf8_lossy(&r.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]))));
        p.cmd(&["SET", "foo2", "bar2"]);
        p.cmd(&["XADD", "s", "1-1", "f", "v"]);
        p.cmd(&["MULTI"]);
        p.cmd(&["INCR", "n"]);
        p.cmd(&["INCR", "n"]);
        p.cmd(&["EXEC"]);
        let target = info_field(p, "replication", "master_repl_offset");
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_field(r, "replication", "slave_read_repl_offset") != target {
            assert!(Instant::now() < deadline, "the paused replica did not read the stream");
            std::thread::sleep(Duration::from_millis(20));
        }
        out.push(format!("applied offset unchanged: {}", info_field(r, "replication", "slave_repl_offset") == before));
        out.push(format!("foo2 while paused: {:?}", String::from_utf8_lossy(&r.cmd(&["GET", "foo2"]))));
        out.push(format!("unpause: {:?}", String::from_utf8_lossy(&r.cmd(&["CLIENT", "UNPAUSE"]))));
        wait_caught_up(p, r);
        out.push(format!("read = applied: {}", {
            let read = info_field(r, "replication", "slave_read_repl_offset");
            read == info_field(r, "replication", "slave_repl_offset") && read == target
        }));
        out.extend(replies(r, &[&["GET", "foo2"], &["GET", "n"], &["XLEN", "s"]]));
        out
    });
    let Some([ours, theirs]) = seen else { return };
    assert_eq!(ours, theirs, "rill's replica, then Redis'");
    assert!(ours.contains(&"applied offset unchanged: true".to_string()), "{ours:#?}");
}

/// A rill replica syncing over an RDB channel (`repl-rdb-channel`, on by default as in Redis
/// 8) from a rill primary and from Redis 8.2.3: the snapshot is made slowly (2 ms a key) while
/// a writer goes on, so the stream written meanwhile arrives on the main channel and waits in
/// the replica's buffer (`replica_full_sync_buffer_peak`) until the snapshot is loaded; then
/// the replica holds what the primary holds, and follows it.
#[test]
fn a_replica_buffers_the_stream_written_while_its_snapshot_arrives_over_an_rdb_channel() {
    let mut kinds = vec![(ServerKind::Rill, rill_testkit::rill_server_binary())];
    if let Some(redis) = ReferenceServer::Redis8.require() {
        kinds.push((ServerKind::Redis(ReferenceServer::Redis8), redis));
    }
    for (kind, binary) in kinds {
        let args = ["--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "2000", "--repl-rdb-channel", "yes"];
        let primary_server = Server::start(kind, &binary, &args);
        let mut primary = primary_server.connect();
        for i in 0..500 {
            assert_eq!(primary.cmd(&["SET", &format!("key:{i}"), "value"]), b"+OK\r\n");
        }
        let replica_server = Server::rill();
        let mut replica = replica_server.connect();
        let port = primary_server.port;
        let writer_server = primary_server.connect();
        let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let still = writing.clone();
        let writer = std::thread::spawn(move || {
            let mut w = writer_server;
            let mut n = 0u64;
            while still.load(std::sync::atomic::Ordering::Relaxed) {
                w.cmd(&["XADD", "events", "*", "n", &n.to_string()]);
                w.cmd(&["SET", &format!("key:{}", n % 500), &n.to_string()]);
                n += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        });
        assert_eq!(replica.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()]), b"+OK\r\n");
        let deadline = Instant::now() + Duration::from_secs(30);
        while info_field(&mut replica, "replication", "master_link_status").as_deref() != Some("up") {
            assert!(Instant::now() < deadline, "{kind:?}: the replica never synced: {}", replica_server.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        // Some more written once it follows the main channel alone.
        std::thread::sleep(Duration::from_millis(200));
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        let written = writer.join().unwrap();
        wait_caught_up(&mut primary, &mut replica);
        assert_equal(&mut primary, &mut replica, &format!("{kind:?}: after a sync over an RDB channel"));
        assert_eq!(replica.cmd(&["SELECT", "0"]), b"+OK\r\n");
        assert_eq!(text(&replica.cmd_value(&["XLEN", "events"])), written.to_string(), "{kind:?}");
        let peak: u64 =
            info_field(&mut replica, "replication", "replica_full_sync_buffer_peak").unwrap().parse().unwrap();
        assert!(peak > 0, "{kind:?}: nothing was buffered: {}", replica_server.log());
        assert_eq!(info_field(&mut replica, "replication", "replica_full_sync_buffer_size").as_deref(), Some("0"));
        let log = replica_server.log();
        assert!(log.contains("Starting to receive RDB and replication stream in parallel"), "{kind:?}: {log}");
        assert!(log.contains("Successfully streamed replication buffer into the db"), "{kind:?}: {log}");
        assert_eq!(info_field(&mut primary, "stats", "sync_full").as_deref(), Some("1"), "{kind:?}");
    }
}
