//! A network partition: the primary and its client in one network namespace, the replica in
//! another, joined by a veth pair the test then takes down (`protected_mode::Namespaces`:
//! 10.231.0.1 and 10.231.0.2, inside namespaces of the test's own). With `min-replicas-to-write
//! 1` and `min-replicas-max-lag 2`, the cut-off primary must stop accepting writes within about
//! the lag; what its client had acknowledged there is reported, and which of it survived once
//! the replica is promoted: writes acknowledged with `WAIT 1` before the cut all survive, the
//! ones acknowledged by the isolated primary alone do not.

use crate::protected_mode::{ip, namespaces, Namespaces};
use rill_testkit::{ChildGuard, TempDir};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PRIMARY_IP: &str = "10.231.0.1";
const REPLICA_IP: &str = "10.231.0.2";
const PORT: &str = "6379";

/// `redis-cli` run inside namespace `ns` against its local server: the reply as text.
fn cli(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "redis-cli", "-h", "127.0.0.1", "-p", PORT])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// rill-server inside `ns`, killed by pid on drop (`ip netns exec` execs it).
fn start(ns: &str, bind_ip: &str, dir: &TempDir, extra: &[&str]) -> ChildGuard {
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let bin = rill_testkit::rill_server_binary();
    let bind = format!("{bind_ip} 127.0.0.1");
    ChildGuard::spawn(
        Command::new("ip")
            .args(["netns", "exec", ns, bin.to_str().unwrap(), "--port", PORT, "--bind", &bind])
            .args(["--dir", dir.path().to_str().unwrap(), "--save", "", "--appendonly", "no"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    )
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_primary_cut_off_from_its_replica_stops_accepting_writes_within_the_lag() {
    let Some(ns) = namespaces() else { return };
    let Namespaces { server, client, .. } = &ns;
    let (primary_dir, replica_dir) = (TempDir::new("rill-partition-p"), TempDir::new("rill-partition-r"));
    // The replica connects from the other namespace: not loopback.
    let _primary = start(server, PRIMARY_IP, &primary_dir, &["--protected-mode", "no"]);
    wait_until("the primary", Duration::from_secs(10), || cli(server, &["PING"]) == "PONG");
    let _replica = start(client, REPLICA_IP, &replica_dir, &["--replicaof", PRIMARY_IP, PORT]);
    wait_until("the replica's link", Duration::from_secs(20), || {
        cli(client, &["INFO", "replication"]).contains("master_link_status:up")
    });
    assert_eq!(cli(server, &["CONFIG", "SET", "min-replicas-to-write", "1", "min-replicas-max-lag", "2"]), "OK");
    // Before the cut: every write acknowledged by the replica too.
    for i in 0..10 {
        assert_eq!(cli(server, &["SET", &format!("before:{i}"), "v"]), "OK");
        assert_eq!(cli(server, &["WAIT", "1", "2000"]), "1", "before the cut, write {i}");
    }
    ip(&["-n", server, "link", "set", "rill0", "down"]).unwrap();
    let cut = Instant::now();
    let mut acknowledged_alone = Vec::new();
    let refused_after = loop {
        let key = format!("during:{}", acknowledged_alone.len());
        match cli(server, &["SET", &key, "v"]).as_str() {
            "OK" => acknowledged_alone.push(key),
            "NOREPLICAS Not enough good replicas to write." => break cut.elapsed(),
            other => panic!("a write during the partition got {other:?}"),
        }
        assert!(cut.elapsed() < Duration::from_secs(10), "the isolated primary kept accepting writes");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The last ACK came at most a second before the cut; the lag is 2 s, counted in whole
    // seconds as Redis counts it.
    assert!(refused_after < Duration::from_secs(4), "writes refused only after {refused_after:?}");
    // Reads are still served there.
    assert_eq!(cli(server, &["GET", "before:0"]), "v");
    // The replica is promoted on its side of the cut.
    assert_eq!(cli(client, &["REPLICAOF", "NO", "ONE"]), "OK");
    let survived_before = (0..10).filter(|i| cli(client, &["EXISTS", &format!("before:{i}")]) == "1").count();
    let survived_alone = acknowledged_alone.iter().filter(|k| cli(client, &["EXISTS", k]) == "1").count();
    eprintln!(
        "partition: writes refused {:.1} s after the cut; {} writes acknowledged by the isolated primary alone \
         meanwhile, {} of them on the promoted replica; {} of 10 acknowledged with WAIT 1 before the cut survived",
        refused_after.as_secs_f64(),
        acknowledged_alone.len(),
        survived_alone,
        survived_before
    );
    assert_eq!(survived_before, 10, "a write acknowledged with WAIT 1 was lost");
    assert_eq!(survived_alone, 0, "a write made during the partition crossed it");
}
