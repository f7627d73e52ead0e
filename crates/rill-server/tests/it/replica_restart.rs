//! The replication identity across a restart (`identity.rs`): a rill primary shut
//! down cleanly (SHUTDOWN) and started again on its directory continues its history, so its
//! rill (or Redis) replica continues with `+CONTINUE` instead of loading a snapshot again; a
//! replica stopped cleanly (SIGTERM) continues from its primary the same way, in the database
//! the stream selected last; a primary killed with `kill -9` starts a new history and its
//! replica syncs fully; a snapshot (`appendonly no`) keeps the identity in its `repl-*` aux
//! fields, and a Redis replica's `dump.rdb`, which has them, loads into rill with its history.

use crate::replica_link::{assert_equal, info_field, wait_caught_up, workload};
use rill_testkit::{fuzz_seed, Proc, RawClient, ReferenceServer, Rng, TempDir};
use std::time::Duration;

/// SHUTDOWN, and wait for the process to exit cleanly.
fn shut_down(mut p: Proc) {
    let _ = p.client().request(&[b"SHUTDOWN"]);
    let status = p.wait_exit(Duration::from_secs(20)).unwrap_or_else(|| panic!("no exit after SHUTDOWN:\n{}", p.log()));
    assert!(status.success(), "SHUTDOWN exit: {status}\n{}", p.log());
}

/// SIGTERM (to this test's own child, by pid), and wait for the process to exit cleanly.
fn terminate(mut p: Proc) {
    let status = std::process::Command::new("kill").args(["-TERM", &p.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let status = p.wait_exit(Duration::from_secs(20)).unwrap_or_else(|| panic!("no exit after SIGTERM:\n{}", p.log()));
    assert!(status.success(), "SIGTERM exit: {status}\n{}", p.log());
}

fn field(c: &mut RawClient, section: &str, name: &str) -> String {
    info_field(c, section, name).unwrap_or_else(|| panic!("no {name} in INFO {section}"))
}

/// `sync_full` and `sync_partial_ok` of a primary.
fn syncs(c: &mut RawClient) -> (String, String) {
    (field(c, "stats", "sync_full"), field(c, "stats", "sync_partial_ok"))
}

/// After the primary restarted: wait until the replica has synced with it again (fully or
/// partially), then until it caught up. The offsets alone may already match before the
/// replica noticed its link went down (nothing was written since), and it has not resynced.
fn wait_resynced(p: &mut RawClient, r: &mut RawClient) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (full, partial) = syncs(p);
        if full != "0" || partial != "0" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the replica never synced with the restarted primary");
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_caught_up(p, r);
}

/// A primary with its log on, and a replica of it with its log on, caught up after a workload.
fn pair(seed: u64) -> (TempDir, TempDir, Proc, Proc, Rng, Vec<String>) {
    let (pdir, rdir) = (TempDir::new("rill-restart-primary"), TempDir::new("rill-restart-replica"));
    let primary = Proc::start(pdir.path(), &["--appendonly", "yes"]);
    let port = primary.port.to_string();
    let replica = Proc::start(rdir.path(), &["--appendonly", "yes", "--replicaof", "127.0.0.1", &port]);
    let mut rng = Rng::new(seed);
    let mut ids = Vec::new();
    let (mut p, mut r) = (primary.client(), replica.client());
    workload(&mut p, &mut rng, &mut ids, 300);
    wait_resynced(&mut p, &mut r);
    assert_eq!(syncs(&mut p), ("1".into(), "0".into()));
    (pdir, rdir, primary, replica, rng, ids)
}

#[test]
fn a_primary_restarted_cleanly_continues_its_history_and_one_killed_starts_a_new_one() {
    let (pdir, _rdir, primary, replica, mut rng, mut ids) = pair(fuzz_seed(0x1D_E471));
    let port = primary.port;
    let mut p = primary.client();
    let (replid, offset) =
        (field(&mut p, "replication", "master_replid"), field(&mut p, "replication", "master_repl_offset"));
    let offset: u64 = offset.parse().unwrap();
    drop(p);
    shut_down(primary);
    assert!(pdir.path().join("appendonlydir/appendonly.aof.repl.rill").exists(), "no identity kept at shutdown");

    // Redis' rule: a new ID that continues the kept one (replid2) from the kept offset.
    let primary = Proc::start_on(pdir.path(), port, &["--appendonly", "yes"]);
    assert!(
        !pdir.path().join("appendonlydir/appendonly.aof.repl.rill").exists(),
        "the kept identity outlived its load"
    );
    let (mut p, mut r) = (primary.client(), replica.client());
    assert_eq!(field(&mut p, "replication", "master_replid2"), replid);
    // The shutdown may have asked the replica for an ACK first (`REPLCONF GETACK *`, 37 bytes
    // of the stream) if it had not acknowledged everything yet, as Redis does.
    let second: u64 = field(&mut p, "replication", "second_repl_offset").parse().unwrap();
    assert!(second == offset + 1 || second == offset + 1 + 37, "second_repl_offset {second}, offset was {offset}");
    assert_ne!(field(&mut p, "replication", "master_replid"), replid);
    assert!(field(&mut p, "replication", "master_repl_offset").parse::<u64>().unwrap() >= offset);
    wait_resynced(&mut p, &mut r);
    assert_eq!(syncs(&mut p), ("0".into(), "1".into()), "the replica did not continue partially");
    // The replica follows the new ID (psync2: `+CONTINUE <new id>`).
    assert_eq!(field(&mut r, "replication", "master_replid"), field(&mut p, "replication", "master_replid"));
    workload(&mut p, &mut rng, &mut ids, 300);
    wait_caught_up(&mut p, &mut r);
    assert_equal(&mut p, &mut r, "after the primary's clean restart");

    // kill -9: the identity file went at the last start, and the log moved on since: a new
    // history, and the replica loads a snapshot.
    drop(p);
    primary.kill9();
    let primary = Proc::start_on(pdir.path(), port, &["--appendonly", "yes"]);
    let mut p = primary.client();
    assert_eq!(field(&mut p, "replication", "master_replid2"), "0".repeat(40));
    assert_eq!(field(&mut p, "replication", "second_repl_offset"), "-1");
    wait_resynced(&mut p, &mut r);
    assert_eq!(syncs(&mut p), ("1".into(), "0".into()), "after kill -9 the replica must sync fully");
    workload(&mut p, &mut rng, &mut ids, 100);
    wait_caught_up(&mut p, &mut r);
    assert_equal(&mut p, &mut r, "after the primary's kill -9");
}

#[test]
fn a_replica_restarted_cleanly_continues_from_its_primary_in_the_database_selected_last() {
    let (_pdir, rdir, primary, replica, mut rng, mut ids) = pair(fuzz_seed(0x1D_E472));
    let mut p = primary.client();
    // The stream's last SELECT is database 1, and the writes after the restart are sent
    // without another: the replica must apply them there.
    assert_eq!(p.cmd(&["SELECT", "1"]), b"+OK\r\n");
    p.cmd(&["SET", "before-restart", "1"]);
    wait_caught_up(&mut p, &mut replica.client());
    let replica_port = replica.port;
    terminate(replica);
    p.cmd(&["SET", "while-down", "2"]);
    p.cmd(&["RPUSH", "while-down-list", "a", "b"]);
    let port = primary.port.to_string();
    let replica =
        Proc::start_on(rdir.path(), replica_port, &["--appendonly", "yes", "--replicaof", "127.0.0.1", &port]);
    let mut r = replica.client();
    wait_resynced(&mut p, &mut r);
    assert_eq!(syncs(&mut p), ("1".into(), "1".into()), "the restarted replica did not continue partially");
    assert_eq!(r.cmd(&["SELECT", "1"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["GET", "while-down"]), b"$1\r\n2\r\n");
    assert_eq!(r.cmd(&["SELECT", "0"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["EXISTS", "while-down"]), b":0\r\n");
    workload(&mut p, &mut rng, &mut ids, 200);
    wait_caught_up(&mut p, &mut r);
    assert_equal(&mut p, &mut r, "after the replica's clean restart");
}

/// With the log off, the identity is in the snapshot saved at shutdown (`repl-*` aux fields).
#[test]
fn a_primary_without_its_log_keeps_its_history_in_the_snapshot_saved_at_shutdown() {
    let (pdir, rdir) = (TempDir::new("rill-restart-primary"), TempDir::new("rill-restart-replica"));
    let primary = Proc::start(pdir.path(), &["--appendonly", "no"]);
    let port = primary.port;
    let replica = Proc::start(rdir.path(), &["--appendonly", "no", "--replicaof", "127.0.0.1", &port.to_string()]);
    let (mut p, mut r) = (primary.client(), replica.client());
    let mut rng = Rng::new(fuzz_seed(0x1D_E473));
    let mut ids = Vec::new();
    workload(&mut p, &mut rng, &mut ids, 200);
    // A key that expires while the primary is down: its deletion must reach the replica.
    p.cmd(&["SELECT", "0"]);
    p.cmd(&["SET", "short-lived", "v", "PX", "300"]);
    wait_caught_up(&mut p, &mut r);
    let replid = field(&mut p, "replication", "master_replid");
    let _ = p.request(&[b"SHUTDOWN", b"SAVE"]);
    drop(p);
    let mut primary = primary;
    assert!(primary.wait_exit(Duration::from_secs(20)).is_some_and(|s| s.success()), "{}", primary.log());
    std::thread::sleep(Duration::from_millis(400));
    let primary = Proc::start_on(pdir.path(), port, &["--appendonly", "no"]);
    let mut p = primary.client();
    assert_eq!(field(&mut p, "replication", "master_replid2"), replid);
    wait_resynced(&mut p, &mut r);
    assert_eq!(syncs(&mut p), ("0".into(), "1".into()), "the replica did not continue partially");
    r.cmd(&["SELECT", "0"]);
    assert_eq!(r.cmd(&["EXISTS", "short-lived"]), b":0\r\n", "the expired key's deletion did not reach the replica");
    assert_equal(&mut p, &mut r, "after the primary's restart from its snapshot");
}

/// A Redis 8.2.3 replica's `dump.rdb` carries `repl-stream-db`, `repl-id` and `repl-offset`:
/// rill loads it (as `dbfilename`, and as its log's first base) and takes the history back.
#[test]
fn a_redis_replicas_dump_loads_into_rill_with_its_history() {
    let Some(redis) = rill_testkit::Server::reference(ReferenceServer::Redis8) else { return };
    let pdir = TempDir::new("rill-restart-primary");
    let primary = Proc::start(pdir.path(), &["--appendonly", "yes"]);
    let mut p = primary.client();
    let mut rng = Rng::new(fuzz_seed(0x1D_E474));
    let mut ids = Vec::new();
    workload(&mut p, &mut rng, &mut ids, 200);
    let mut rc = redis.connect();
    assert_eq!(rc.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]), b"+OK\r\n");
    // Nothing written after the sync: the replica's offset is where it synced, or past the
    // first PINGs (offset 0 too continues, `PSYNC <id> 1`).
    wait_caught_up(&mut p, &mut rc);
    let (replid, offset) =
        (field(&mut p, "replication", "master_replid"), field(&mut p, "replication", "master_repl_offset"));
    assert_eq!(rc.cmd(&["SAVE"]), b"+OK\r\n");
    let dump = std::fs::read(redis.dir().join("dump.rdb")).unwrap();
    for window in [b"repl-id".as_slice(), b"repl-offset", b"repl-stream-db"] {
        assert!(dump.windows(window.len()).any(|w| w == window), "Redis wrote no {}", String::from_utf8_lossy(window));
    }
    for log in ["no", "yes"] {
        let dir = TempDir::new("rill-restart-from-redis");
        std::fs::write(dir.path().join("dump.rdb"), &dump).unwrap();
        // As a replica of the same primary: the history continues.
        let port = primary.port.to_string();
        let (full, partial) = syncs(&mut p);
        let rill = Proc::start(dir.path(), &["--appendonly", log, "--replicaof", "127.0.0.1", &port]);
        let mut c = rill.client();
        wait_caught_up(&mut p, &mut c);
        assert_eq!(
            syncs(&mut p),
            (full, (partial.parse::<u64>().unwrap() + 1).to_string()),
            "appendonly {log}: {}",
            rill.log()
        );
        assert_eq!(field(&mut c, "replication", "master_replid"), replid, "appendonly {log}");
        assert!(field(&mut c, "replication", "slave_repl_offset").parse::<u64>().unwrap() >= offset.parse().unwrap());
        assert_equal(&mut p, &mut c, &format!("rill from a Redis replica's dump, appendonly {log}"));
    }
}

/// A real Redis 8.2.3 replica of a rill primary restarted cleanly continues too: it asks with
/// the old ID, which rill keeps as `replid2`, and follows the new one (`+CONTINUE <id>`).
#[test]
fn a_redis_replica_continues_after_the_rill_primary_restarts() {
    let Some(redis) = rill_testkit::Server::reference(ReferenceServer::Redis8) else { return };
    let pdir = TempDir::new("rill-restart-primary");
    let primary = Proc::start(pdir.path(), &["--appendonly", "yes"]);
    let port = primary.port;
    let mut rc = redis.connect();
    assert_eq!(rc.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()]), b"+OK\r\n");
    let mut p = primary.client();
    let mut rng = Rng::new(fuzz_seed(0x1D_E475));
    let mut ids = Vec::new();
    workload(&mut p, &mut rng, &mut ids, 300);
    wait_caught_up(&mut p, &mut rc);
    drop(p);
    shut_down(primary);
    let primary = Proc::start_on(pdir.path(), port, &["--appendonly", "yes"]);
    let mut p = primary.client();
    wait_resynced(&mut p, &mut rc);
    assert_eq!(
        syncs(&mut p),
        ("0".into(), "1".into()),
        "the Redis replica did not continue partially: {}\nREDIS {}",
        primary.log(),
        redis.log()
    );
    assert_eq!(field(&mut rc, "replication", "master_replid"), field(&mut p, "replication", "master_replid"));
    workload(&mut p, &mut rng, &mut ids, 300);
    wait_caught_up(&mut p, &mut rc);
    assert_equal(&mut p, &mut rc, "a Redis replica after the rill primary's clean restart");
}
