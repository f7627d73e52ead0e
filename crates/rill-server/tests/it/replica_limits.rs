//! A replica's share of the primary's memory (`replication/backlog.rs`): the backlog holds
//! what an attached replica has not been sent yet — while its snapshot is made and sent too —
//! up to `client-output-buffer-limit replica`, as Redis' shared replication buffer does. So a
//! full sync under writes succeeds with a backlog smaller than the writes made meanwhile, and
//! a replica that stops reading is dropped at its limit instead of holding memory forever.

use crate::replica_link::{assert_equal, info_field, wait_caught_up};
use rill_testkit::Server;
use std::io::Write;
use std::time::{Duration, Instant};

/// The primary's snapshot takes about a second (`rdb-key-save-delay`), its backlog holds
/// 16 KiB, and 200 KiB are written meanwhile: the replica still gets the stream from where
/// its snapshot ends, with one full sync.
#[test]
fn a_full_sync_under_writes_outlasts_a_small_backlog() {
    let primary_server = Server::rill_with(&["--repl-backlog-size", "16kb", "--rdb-key-save-delay", "5000"]);
    let mut primary = primary_server.connect();
    for i in 0..200 {
        primary.cmd(&["XADD", &format!("s{i}"), "*", "f", "v"]);
    }
    let replica_server = Server::rill();
    let mut replica = replica_server.connect();
    assert_eq!(replica.cmd(&["REPLICAOF", "127.0.0.1", &primary_server.port.to_string()]), b"+OK\r\n");
    let mut writer = primary_server.connect();
    let value = "x".repeat(1000);
    let started = Instant::now();
    let mut written = 0;
    while info_field(&mut replica, "replication", "master_link_status").as_deref() != Some("up") {
        assert!(started.elapsed() < Duration::from_secs(20), "the replica never finished its sync");
        writer.cmd(&["XADD", "s0", "*", "big", &value]);
        written += 1;
    }
    assert!(written > 200, "only {written} writes went into the sync: it proves nothing");
    wait_caught_up(&mut primary, &mut replica);
    assert_equal(&mut primary, &mut replica, "after a full sync under writes");
    assert_eq!(info_field(&mut primary, "stats", "sync_full").as_deref(), Some("1"));
    assert_eq!(info_field(&mut primary, "stats", "client_output_buffer_limit_disconnections").as_deref(), Some("0"));
}

/// A "replica" that asks for the stream and never reads it: past its hard limit (256 KiB
/// here) it is dropped and counted, and what was held for it is let go; a real replica
/// attached beside it goes on.
#[test]
fn a_replica_that_does_not_read_is_dropped_at_its_output_limit() {
    let primary_server = Server::rill_with(&["--client-output-buffer-limit", "replica 256kb 0 0"]);
    let mut primary = primary_server.connect();
    let replica_server = Server::rill();
    let mut replica = replica_server.connect();
    assert_eq!(replica.cmd(&["REPLICAOF", "127.0.0.1", &primary_server.port.to_string()]), b"+OK\r\n");
    wait_caught_up(&mut primary, &mut replica);
    let mut stuck = std::net::TcpStream::connect(("127.0.0.1", primary_server.port)).unwrap();
    stuck.write_all(b"*3\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n").unwrap();
    let mut ok = [0u8; 5];
    std::io::Read::read_exact(&mut stuck, &mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    // From here on it reads nothing.
    stuck.write_all(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(&mut primary, "replication", "connected_slaves").as_deref() != Some("2") {
        assert!(Instant::now() < deadline, "the second replica did not attach");
        std::thread::sleep(Duration::from_millis(10));
    }
    let value = "y".repeat(10_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut written = 0;
    while info_field(&mut primary, "stats", "client_output_buffer_limit_disconnections").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "the replica that does not read was never dropped ({written} writes)");
        for _ in 0..50 {
            primary.cmd(&["XADD", "big", "*", "v", &value]);
            written += 1;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(&mut primary, "replication", "connected_slaves").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "the dropped replica is still listed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(primary_server.log().contains("overcoming of output buffer limits"), "{}", primary_server.log());
    wait_caught_up(&mut primary, &mut replica);
    assert_equal(&mut primary, &mut replica, "the replica that reads, after the other was dropped");
    let histlen: u64 = info_field(&mut primary, "replication", "repl_backlog_histlen").unwrap().parse().unwrap();
    assert!(histlen <= 1 << 20, "held beyond the backlog after the drop: {histlen}");
    drop(stuck);
}
