//! Large values sent to clients that do not read: the reply references the stored value
//! instead of copying it (issue 26, item 4: eight clients sending `GET` of a 512 MB string and
//! never reading held one copy each, 4.6 GB, and stalled every other client while the copies
//! were made), and what a client pins that way counts against its output limits as a copy
//! would, so `client-output-buffer-limit` closes it where Redis closes it. A value changed
//! while a reply still references it does not change that reply.
//!
//! The readers set a small `SO_RCVBUF` before connecting, so the server's socket fills after a
//! few MiB (the kernel's send buffer) and the rest of the reply stays in the server. Memory is
//! the server's RSS from /proc/PID/status.

use crate::client_limits::{client_line, eventually, field, info, rss_mb, text};
use rill_testkit::{encode_command, RawClient, ReferenceServer, Server, ServerKind};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The large value: big enough that a copy per reader shows in RSS, small enough for CI.
const VALUE_BYTES: usize = 64 << 20;
/// Readers of the large value on rill (the probe used 6 to 8).
const READERS: usize = 8;
/// Readers on the reference server, which copies the value for each.
const REFERENCE_READERS: usize = 2;
/// A reader's receive buffer (the kernel doubles it and keeps a floor).
const READER_RCVBUF_BYTES: usize = 4096;

/// The server's send buffer may take this much of a reply before it stops taking more: twice
/// the largest send buffer the kernel grows to (`tcp_wmem`), or 8 MiB if unknown.
fn socket_slack_bytes() -> u64 {
    let wmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").unwrap_or_default();
    wmem.split_whitespace().nth(2).and_then(|m| m.parse::<u64>().ok()).map_or(8 << 20, |m| 2 * m)
}

/// A connection with a small receive buffer (set before connecting, so the window is small
/// from the handshake on).
fn small_window_client(port: u16) -> TcpStream {
    use rustix::net::{connect, socket, sockopt, AddressFamily, SocketType};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    sockopt::set_socket_recv_buffer_size(&fd, READER_RCVBUF_BYTES).unwrap();
    connect(&fd, &SocketAddr::from(([127, 0, 0, 1], port))).unwrap();
    TcpStream::from(fd)
}

/// `n` small-window clients that each send `requests` (one write) and never read.
fn readers(server: &Server, n: usize, requests: &[u8]) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut c = small_window_client(server.port);
            c.write_all(requests).unwrap();
            c
        })
        .collect()
}

/// `SETRANGE key len-1 x`: a string of `len` bytes, zeros and a final `x`, as the probe made.
fn store_value(c: &mut RawClient, key: &str, len: usize) {
    let reply = c.cmd(&["SETRANGE", key, &(len - 1).to_string(), "x"]);
    assert_eq!(text(&reply), format!(":{len}\r\n"));
}

/// The CLIENT LIST line of the client connected from `addr`, if listed.
fn line_of(admin: &mut RawClient, addr: SocketAddr) -> Option<String> {
    let list = text(&admin.cmd(&["CLIENT", "LIST"]));
    let needle = format!(" addr={addr} ");
    list.lines().find(|l| l.contains(&needle)).map(str::to_string)
}

/// Wait until every reader has its reply of `value_bytes` pending and its socket full (the
/// same pending bytes in two looks 100 ms apart: a line taken between the command and the
/// first write shows the reply not yet started); their CLIENT LIST lines.
fn wait_pending(admin: &mut RawClient, readers: &[TcpStream], value_bytes: u64) -> Vec<String> {
    let floor = value_bytes.saturating_sub(socket_slack_bytes());
    let pending_of = |l: &str| field(l, "obl") + field(l, "omem");
    readers
        .iter()
        .map(|r| {
            let addr = r.local_addr().unwrap();
            let mut last: Option<String> = None;
            let pending = eventually(Duration::from_secs(30), || {
                let before = last.as_deref().map(pending_of);
                std::thread::sleep(Duration::from_millis(100));
                last = line_of(admin, addr);
                let now = last.as_deref().map(pending_of);
                now.is_some_and(|p| p >= floor) && now == before
            });
            assert!(pending, "reader {addr} never had its reply pending: {last:?}");
            last.unwrap_or_default()
        })
        .collect()
}

/// Whether the server closed `c` (it may have sent something first).
fn closed(c: &mut TcpStream) -> bool {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        match c.read(&mut chunk) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

fn get(key: &str) -> Vec<u8> {
    encode_command(&[b"GET", key.as_bytes()])
}

fn redis8(extra: &[&str]) -> Option<Server> {
    let path = ReferenceServer::Redis8.require()?;
    Some(Server::start(ServerKind::Redis(ReferenceServer::Redis8), &path, extra))
}

/// What rill and Redis report alike of a client with one large reply stuck in the server:
/// its static buffer went out first, the rest is one list of about the value's size.
fn assert_stuck_reply_fields(label: &str, line: &str, value_bytes: u64) {
    let omem = field(line, "omem");
    assert_eq!((field(line, "obl"), field(line, "oll")), (0, 1), "{label}: {line}");
    assert!(omem <= value_bytes + (64 << 10), "{label}: omem above the value: {line}");
    assert!(field(line, "tot-mem") >= omem, "{label}: tot-mem below omem: {line}");
    assert!(line.contains(" events=rw ") && line.contains(" cmd=get "), "{label}: {line}");
}

#[test]
fn clients_that_do_not_read_a_large_value_share_the_stored_copy() {
    let server = Server::rill();
    let mut admin = server.connect();
    store_value(&mut admin, "big", VALUE_BYTES);
    let before = rss_mb(server.pid());
    let stuck = readers(&server, READERS, &get("big"));
    let lines = wait_pending(&mut admin, &stuck, VALUE_BYTES as u64);
    // One copy per reader would be READERS * 64 MiB more.
    let grown = rss_mb(server.pid()).saturating_sub(before);
    assert!(grown < (VALUE_BYTES >> 20) as u64 / 2, "RSS grew by {grown} MB for {READERS} readers");
    let started = Instant::now();
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    assert!(started.elapsed() < Duration::from_secs(2), "PING took {:?}", started.elapsed());
    for line in &lines {
        assert_stuck_reply_fields("rill", line, VALUE_BYTES as u64);
    }
    // Redis reports the same shape (it copies the value into each client's reply list).
    let Some(redis) = redis8(&[]) else {
        return;
    };
    let mut admin = redis.connect();
    store_value(&mut admin, "big", VALUE_BYTES);
    let stuck = readers(&redis, REFERENCE_READERS, &get("big"));
    for line in wait_pending(&mut admin, &stuck, VALUE_BYTES as u64) {
        assert_stuck_reply_fields(redis.label(), &line, VALUE_BYTES as u64);
    }
}

#[test]
fn a_large_value_over_the_output_limit_closes_its_readers_like_redis() {
    let limit = ["--client-output-buffer-limit", "normal 32mb 0 0"];
    let servers: Vec<Server> = std::iter::once(Server::rill_with(&limit)).chain(redis8(&limit)).collect();
    for server in &servers {
        let mut admin = server.connect();
        store_value(&mut admin, "big", VALUE_BYTES);
        for mut reader in readers(server, REFERENCE_READERS, &get("big")) {
            assert!(closed(&mut reader), "{}: a reader over its limit stays open", server.label());
        }
        let closes = REFERENCE_READERS.to_string();
        assert_eq!(info(&mut admin, "client_output_buffer_limit_disconnections"), closes, "{}", server.label());
        assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn referenced_replies_count_toward_the_output_limit_like_redis() {
    // One reply of the value fits the limit; two do not. The second GET adds no memory on
    // rill (the same value, referenced twice), but what the client pins is what counts.
    let limit = ["--client-output-buffer-limit", "normal 96mb 0 0"];
    let servers: Vec<Server> = std::iter::once(Server::rill_with(&limit)).chain(redis8(&limit)).collect();
    for server in &servers {
        let label = server.label();
        let mut admin = server.connect();
        store_value(&mut admin, "big", VALUE_BYTES);
        let one = readers(server, 1, &get("big"));
        let lines = wait_pending(&mut admin, &one, VALUE_BYTES as u64);
        assert_stuck_reply_fields(label, &lines[0], VALUE_BYTES as u64);
        // Both GETs in one write, so both run before anything is written (Redis reads on
        // while output is pending; rill stops reading a client whose output is stuck).
        let mut two = readers(server, 1, &get("big").repeat(2));
        assert!(closed(&mut two[0]), "{label}: a client pinning two replies of the value stays open");
        assert_eq!(info(&mut admin, "client_output_buffer_limit_disconnections"), "1", "{label}");
        let addr = one[0].local_addr().unwrap();
        assert!(line_of(&mut admin, addr).is_some(), "{label}: the client pinning one reply was closed");
    }
}

/// Read exactly `n` bytes.
fn read_n(c: &mut TcpStream, n: usize) -> Vec<u8> {
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = vec![0u8; n];
    c.read_exact(&mut buf).unwrap();
    buf
}

/// `$<len>\r\n<payload>\r\n`
fn bulk(payload: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
    out
}

#[test]
fn a_value_changed_while_replies_reference_it_leaves_those_replies_as_they_were() {
    // APPEND and SETRANGE write into a private copy when the value is shared (the engine's
    // copy-on-write, `take_vec`): the replies already queued send the bytes they were given.
    const LEN: usize = 16 << 20;
    let server = Server::rill();
    let mut admin = server.connect();
    let original = vec![b'a'; LEN];
    assert_eq!(admin.request(&[b"SET", b"v", &original]).unwrap(), b"+OK\r\n");
    let mut first = readers(&server, 1, &get("v"));
    wait_pending(&mut admin, &first, LEN as u64);
    assert_eq!(admin.cmd(&["SETRANGE", "v", "0", "bbbb"]), format!(":{LEN}\r\n").as_bytes());
    assert_eq!(admin.cmd(&["APPEND", "v", "cc"]), format!(":{}\r\n", LEN + 2).as_bytes());
    let mut second = readers(&server, 1, &get("v"));
    wait_pending(&mut admin, &second, LEN as u64);
    assert_eq!(admin.cmd(&["APPEND", "v", "dd"]), format!(":{}\r\n", LEN + 4).as_bytes());
    assert_eq!(admin.cmd(&["SETRANGE", "v", "1", "ee"]), format!(":{}\r\n", LEN + 4).as_bytes());
    assert_eq!(admin.cmd(&["DEL", "v"]), b":1\r\n");

    let expected_first = bulk(&original);
    assert!(read_n(&mut first[0], expected_first.len()) == expected_first, "the first reply changed");
    let mut changed = original;
    changed[..4].copy_from_slice(b"bbbb");
    changed.extend_from_slice(b"cc");
    let expected_second = bulk(&changed);
    assert!(read_n(&mut second[0], expected_second.len()) == expected_second, "the second reply changed");
}

#[test]
fn a_large_element_served_to_a_blocked_client_arrives_whole() {
    // A parked BLPOP is served by the pushing connection, which writes the reply straight
    // into the parked client's socket (`blocking.rs`, direct delivery) with the element
    // referenced; what the socket does not take goes through the client's own task.
    let server = Server::rill();
    let mut admin = server.connect();
    let mut waiter = server.connect();
    waiter.send_command(&[b"BLPOP", b"list", b"0"]).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || text(&admin.cmd(&["INFO", "clients"])).contains("blocked_clients:1"))
    );
    let element: Vec<u8> = (0..8 << 20).map(|i: u32| b'a' + (i % 26) as u8).collect();
    assert_eq!(admin.request(&[b"RPUSH", b"list", &element]).unwrap(), b":1\r\n");
    let mut expected = b"*2\r\n".to_vec();
    expected.extend_from_slice(&bulk(b"list"));
    expected.extend_from_slice(&bulk(&element));
    assert!(waiter.read_exact(expected.len()).unwrap() == expected, "the served reply differs");
    assert_eq!(waiter.cmd(&["PING"]), b"+PONG\r\n");
    // The reply went out; nothing of it is pending.
    let id: u64 = text(&waiter.cmd(&["CLIENT", "ID"]))[1..].trim().parse().unwrap();
    let line = client_line(&mut admin, id).unwrap();
    assert_eq!((field(&line, "obl"), field(&line, "omem")), (0, 0), "{line}");
}
