//! Client-side caching across time and connections: what `tests/diff/tracking.redis` cannot
//! script against Redis — a redirection to a client that left, the table kept to
//! `tracking-table-max-keys` by the cron, keys the cron expires, and the tracking state a client
//! leaves behind (RESET, disconnect) as INFO counts it. The messages' bytes and the option
//! errors are compared with Redis there; redis-py's own client-side cache runs against rill in
//! `tests/clients/python_clients.py`.

use super::client_limits::eventually;
use rill_testkit::resp::Value;
use rill_testkit::{RawClient, Server};
use std::collections::BTreeSet;
use std::time::Duration;

fn text(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply).into_owned()
}

/// An INFO field (clients and stats sections).
fn info(c: &mut RawClient, name: &str) -> String {
    let all = text(&c.cmd(&["INFO", "everything"]));
    all.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or("").trim().to_string()
}

fn resp3(server: &Server) -> RawClient {
    let mut c = server.connect();
    c.cmd(&["HELLO", "3"]);
    c
}

/// The key of an `invalidate` push carrying one key.
fn invalidated_key(v: Value) -> String {
    match v {
        Value::Push(items) => match items.as_slice() {
            [Value::Bulk(kind), Value::Array(keys)] if kind == b"invalidate" => match keys.as_slice() {
                [Value::Bulk(k)] => text(k),
                other => panic!("not one key: {other:?}"),
            },
            other => panic!("not an invalidation: {other:?}"),
        },
        other => panic!("not a push: {other:?}"),
    }
}

fn flags(c: &mut RawClient, id: &str) -> String {
    let line = text(c.cmd_value(&["CLIENT", "LIST", "ID", id]).as_bytes().unwrap());
    line.split(' ').find_map(|f| f.strip_prefix("flags=")).unwrap_or("").to_string()
}

#[test]
fn a_redirection_to_a_client_that_left_is_flagged_and_told_in_resp3() {
    let server = Server::subject();
    let mut sink = server.connect();
    let sink_id = text(&sink.cmd(&["CLIENT", "ID"]));
    let sink_id = sink_id.trim_start_matches(':').trim().to_string();
    let mut reader = resp3(&server);
    let reader_id = match reader.cmd_value(&["CLIENT", "ID"]) {
        Value::Int(n) => n.to_string(),
        other => panic!("{other:?}"),
    };
    let mut writer = server.connect();
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &sink_id]), b"+OK\r\n");
    writer.cmd(&["SET", "k", "1"]);
    reader.cmd(&["GET", "k"]);
    assert_eq!(flags(&mut writer, &reader_id), "t");
    assert_eq!(sink.cmd(&["QUIT"]), b"+OK\r\n");
    assert!(eventually(Duration::from_secs(10), || writer
        .cmd_value(&["CLIENT", "LIST", "ID", &sink_id])
        .as_bytes()
        .is_some_and(|b| b.is_empty())));
    writer.cmd(&["SET", "k", "2"]);
    let broken = reader.read_value().unwrap();
    assert_eq!(
        broken,
        Value::Push(vec![Value::Bulk(b"tracking-redir-broken".to_vec()), Value::Int(sink_id.parse().unwrap())])
    );
    assert_eq!(flags(&mut writer, &reader_id), "tR");
    let tracking = text(&reader.cmd(&["CLIENT", "TRACKINGINFO"]));
    assert!(tracking.contains("broken_redirect"), "{tracking}");
    // Tracking on again clears the mark.
    reader.cmd(&["CLIENT", "TRACKING", "on"]);
    assert_eq!(flags(&mut writer, &reader_id), "t");
    assert!(text(&writer.cmd(&["CLIENT", "LIST", "ID", &reader_id])).contains(" redir=0 "));
}

#[test]
fn the_cron_keeps_the_table_to_tracking_table_max_keys_telling_each_dropped_keys_reader() {
    let server = Server::subject();
    let mut reader = resp3(&server);
    let mut admin = server.connect();
    reader.cmd(&["CLIENT", "TRACKING", "on"]);
    let keys: Vec<String> = (0..300).map(|i| format!("key:{i}")).collect();
    for chunk in keys.chunks(50) {
        let mut args = vec!["MGET"];
        args.extend(chunk.iter().map(String::as_str));
        reader.cmd(&args);
    }
    assert_eq!(info(&mut admin, "tracking_total_keys"), "300");
    assert_eq!(info(&mut admin, "tracking_total_items"), "300");
    assert_eq!(info(&mut admin, "tracking_clients"), "1");
    admin.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "10"]);
    // Dropped by the cron, 100 at first and more each round still over: no command needed.
    let mut dropped = BTreeSet::new();
    for _ in 0..290 {
        assert!(dropped.insert(invalidated_key(reader.read_value().unwrap())), "a key told twice");
    }
    assert_eq!(info(&mut admin, "tracking_total_keys"), "10");
    assert_eq!(info(&mut admin, "tracking_total_items"), "10");
    // The ten left are still tracked: a write to one tells the reader, and only of it.
    let kept = keys.iter().find(|k| !dropped.contains(*k)).unwrap();
    admin.cmd(&["SET", kept, "x"]);
    assert_eq!(invalidated_key(reader.read_value().unwrap()), *kept);
    assert_eq!(info(&mut admin, "tracking_total_keys"), "9");
    admin.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1000000"]);
}

#[test]
fn keys_the_cron_expires_are_invalidated_and_bcast_prefixes_are_counted() {
    let server = Server::subject();
    let mut reader = resp3(&server);
    let mut admin = server.connect();
    reader.cmd(&["CLIENT", "TRACKING", "on"]);
    admin.cmd(&["SET", "short", "v", "PX", "100"]);
    assert_eq!(reader.cmd(&["GET", "short"]), b"$1\r\nv\r\n");
    // Nobody reads it again: the cron's sweep deletes it, and the reader is told.
    assert_eq!(invalidated_key(reader.read_value().unwrap()), "short");

    let mut bcast = resp3(&server);
    bcast.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:", "PREFIX", "q:"]);
    assert_eq!(info(&mut admin, "tracking_total_prefixes"), "2");
    assert_eq!(info(&mut admin, "tracking_clients"), "2");
    admin.cmd(&["SET", "p:1", "x", "PX", "100"]);
    let first = bcast.read_value().unwrap();
    let expired = bcast.read_value().unwrap();
    let want = Value::Push(vec![Value::Bulk(b"invalidate".to_vec()), Value::Array(vec![Value::Bulk(b"p:1".to_vec())])]);
    assert_eq!((first, expired), (want.clone(), want), "written, then expired");

    // RESET and a disconnect end tracking; the prefixes go with their last client.
    assert_eq!(bcast.cmd(&["RESET"]), b"+RESET\r\n");
    assert_eq!(info(&mut admin, "tracking_total_prefixes"), "0");
    drop(reader);
    assert!(eventually(Duration::from_secs(10), || info(&mut admin, "tracking_clients") == "0"));
}
