//! How a blocked reader's reply reaches it when a write serves it. The connection whose XADD
//! serves parked readers writes their replies straight to their sockets (before its own), or
//! hands them to the readers' tasks when that is not safe: an fsync must come first
//! (`appendfsync always`), the reader still had replies waiting to be written when it parked,
//! CLIENT REPLY is not ON, or the socket does not take the whole reply. Each case here is
//! checked under the three log settings, and where Redis behaves the same the same sequence
//! runs against Redis 7.0.15.

use crate::common::wait_blocked;
use rill_testkit::{encode_command, escape, parse_value, RawClient, ReferenceServer, Server, ServerKind, Value};
use std::time::Duration;

/// The log settings a delivery may take a different path under.
const POLICIES: [&[&str]; 3] = [
    &["--appendonly", "no"],
    &["--appendonly", "yes", "--appendfsync", "everysec"],
    &["--appendonly", "yes", "--appendfsync", "always"],
];

/// rill under each log setting, then (if installed) Redis 7.0.15 without a log.
fn servers() -> Vec<Server> {
    let mut all: Vec<Server> = POLICIES.iter().map(|p| Server::rill_with(p)).collect();
    if let Some(bin) = ReferenceServer::Redis7.require() {
        all.push(Server::start(ServerKind::Redis(ReferenceServer::Redis7), &bin, &[]));
    }
    all
}

/// The entries `(id, fields)` of an XREADGROUP reply `[[key, [[id, fields], ...]]]` (RESP2).
fn entries(reply: &[u8]) -> Vec<(String, Value)> {
    let Value::Array(streams) = parse_value(reply).unwrap() else { panic!("not an array: {}", escape(reply)) };
    let mut out = Vec::new();
    for s in streams {
        let Value::Array(kv) = s else { panic!() };
        let Value::Array(entries) = &kv[1] else { panic!() };
        for e in entries {
            let Value::Array(e) = e else { panic!() };
            let Value::Bulk(id) = &e[0] else { panic!() };
            out.push((String::from_utf8(id.clone()).unwrap(), e[1].clone()));
        }
    }
    out
}

/// The entry IDs of an XREADGROUP reply.
fn ids(reply: &[u8]) -> Vec<String> {
    entries(reply).into_iter().map(|(id, _)| id).collect()
}

/// A connection to `server` after creating group `g` on a new stream `s`.
fn admin_with_group(server: &Server) -> RawClient {
    let mut admin = server.connect();
    assert_eq!(admin.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]), b"+OK\r\n");
    admin
}

/// Send (without waiting for a reply) a read of new entries of `s` as `consumer` of `g`
/// that blocks until there is one.
fn send_blocking_read(reader: &mut RawClient, consumer: &str) {
    reader
        .send_command(&[b"XREADGROUP", b"GROUP", b"g", consumer.as_bytes(), b"BLOCK", b"0", b"STREAMS", b"s", b">"])
        .unwrap();
}

fn bulk(reply: &[u8]) -> String {
    match parse_value(reply).unwrap() {
        Value::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

#[test]
fn one_xadd_serves_every_blocked_group_and_each_reader_goes_on() {
    for server in servers() {
        let label = server.label();
        let mut admin = server.connect();
        let groups = ["g0", "g1", "g2", "g3", "g4"];
        for g in groups {
            assert_eq!(admin.cmd(&["XGROUP", "CREATE", "s", g, "$", "MKSTREAM"]), b"+OK\r\n");
        }
        let mut readers: Vec<RawClient> = groups.iter().map(|_| server.connect()).collect();
        for (r, g) in readers.iter_mut().zip(groups) {
            r.send_command(&[
                b"XREADGROUP",
                b"GROUP",
                g.as_bytes(),
                b"c",
                b"COUNT",
                b"10",
                b"BLOCK",
                b"0",
                b"STREAMS",
                b"s",
                b">",
            ])
            .unwrap();
        }
        wait_blocked(&mut admin, groups.len());
        let id = bulk(&admin.cmd(&["XADD", "s", "*", "f", "v"]));
        for (r, g) in readers.iter_mut().zip(groups) {
            assert_eq!(ids(&r.read_reply().unwrap()), std::slice::from_ref(&id), "{label} {g}");
            // The connection goes on as usual after a delivered reply.
            assert_eq!(r.cmd(&["XACK", "s", g, &id]), b":1\r\n", "{label} {g}");
            assert_eq!(r.cmd(&["PING"]), b"+PONG\r\n", "{label} {g}");
        }
        assert_eq!(admin.cmd(&["XPENDING", "s", "g0"]), b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n", "{label}");
        wait_blocked(&mut admin, 0);
    }
}

#[test]
fn replies_pipelined_before_a_blocking_read_come_first() {
    for server in servers() {
        let label = server.label();
        let mut admin = admin_with_group(&server);
        let mut reader = server.connect();
        // One write: three replies are due before the read blocks.
        let mut batch = Vec::new();
        batch.extend(encode_command(&[b"PING"]));
        batch.extend(encode_command(&[b"ECHO", b"before"]));
        batch.extend(encode_command(&[b"XADD", b"other", b"*", b"a", b"1"]));
        batch.extend(encode_command(&[b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK", b"0", b"STREAMS", b"s", b">"]));
        batch.extend(encode_command(&[b"ECHO", b"after"]));
        reader.send(&batch).unwrap();
        assert_eq!(reader.read_reply().unwrap(), b"+PONG\r\n", "{label}");
        assert_eq!(reader.read_reply().unwrap(), b"$6\r\nbefore\r\n", "{label}");
        assert!(reader.read_reply().unwrap().starts_with(b"$"), "{label}");
        wait_blocked(&mut admin, 1);
        let id = bulk(&admin.cmd(&["XADD", "s", "*", "f", "v"]));
        assert_eq!(ids(&reader.read_reply().unwrap()), [id], "{label}");
        // The request that arrived while the client was blocked runs after the reply.
        assert_eq!(reader.read_reply().unwrap(), b"$5\r\nafter\r\n", "{label}");
    }
}

#[test]
fn a_blocked_read_under_client_reply_skip_or_off_sends_nothing() {
    for server in servers() {
        let label = server.label();
        let mut admin = admin_with_group(&server);
        let mut reader = server.connect();
        reader.send_command(&[b"CLIENT", b"REPLY", b"SKIP"]).unwrap();
        send_blocking_read(&mut reader, "c");
        wait_blocked(&mut admin, 1);
        let first = bulk(&admin.cmd(&["XADD", "s", "*", "f", "1"]));
        wait_blocked(&mut admin, 0);
        // The skipped reply never arrives: the next thing read is PING's.
        assert_eq!(reader.cmd(&["PING"]), b"+PONG\r\n", "{label}");

        reader.send_command(&[b"CLIENT", b"REPLY", b"OFF"]).unwrap();
        send_blocking_read(&mut reader, "c");
        wait_blocked(&mut admin, 1);
        let second = bulk(&admin.cmd(&["XADD", "s", "*", "f", "2"]));
        wait_blocked(&mut admin, 0);
        assert_eq!(reader.cmd(&["CLIENT", "REPLY", "ON"]), b"+OK\r\n", "{label}");
        // Both reads were served, silently: the entries are pending for the reader.
        let pending = admin.cmd(&["XPENDING", "s", "g", "-", "+", "10"]);
        let text = String::from_utf8_lossy(&pending);
        assert!(text.contains(&first) && text.contains(&second), "{label}: {text}");
    }
}

#[test]
fn a_reply_bigger_than_the_socket_takes_arrives_whole() {
    // 64 MiB: more than a loopback connection buffers (a 4 MiB send buffer and at most a
    // 32 MiB receive buffer here), so the serving connection's write stops part-way and the
    // reader's own task writes the rest.
    let value = vec![b'x'; 64 << 20];
    for server in servers() {
        let label = server.label();
        let mut admin = admin_with_group(&server);
        let mut reader = server.connect();
        reader.set_read_timeout(Duration::from_secs(30));
        send_blocking_read(&mut reader, "c");
        wait_blocked(&mut admin, 1);
        let before = net_output(&mut admin);
        let id = bulk(&admin.request(&[b"XADD", b"s", b"*", b"big", &value]).unwrap());
        // Nothing read yet: the reply sits partly in the socket, partly with the server.
        let reply = reader.read_reply().unwrap();
        assert!(reply.len() > value.len(), "{label}");
        let fields = Value::Array(vec![Value::Bulk(b"big".to_vec()), Value::Bulk(value.clone())]);
        assert!(entries(&reply) == [(id, fields)], "{label}: the entry differs");
        assert_eq!(reader.cmd(&["PING"]), b"+PONG\r\n", "{label}");
        // The server counts the bytes it wrote to the reader.
        assert!(net_output(&mut admin) - before >= reply.len() as u64, "{label}");
    }
}

#[test]
fn a_reader_that_disconnects_while_blocked_costs_the_writer_nothing() {
    for server in servers() {
        let label = server.label();
        let mut admin = admin_with_group(&server);
        let mut gone = server.connect();
        send_blocking_read(&mut gone, "gone");
        let mut stays = server.connect();
        send_blocking_read(&mut stays, "stays");
        wait_blocked(&mut admin, 2);
        drop(gone);
        // Whether or not the server noticed the close yet, the XADD is answered and the
        // remaining reader gets an entry.
        let _ = bulk(&admin.cmd(&["XADD", "s", "*", "f", "1"]));
        let _ = bulk(&admin.cmd(&["XADD", "s", "*", "f", "2"]));
        assert_eq!(ids(&stays.read_reply().unwrap()).len(), 1, "{label}");
        assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n", "{label}");
    }
}

fn net_output(admin: &mut RawClient) -> u64 {
    let info = String::from_utf8(admin.cmd(&["INFO", "stats"])).unwrap();
    info.lines().find_map(|l| l.strip_prefix("total_net_output_bytes:")).unwrap().trim().parse().unwrap()
}
