//! The connection over transports other than a TCP socket, and the busy gate, driven through
//! the library: a server state built in-process, clients served over in-memory duplex pipes
//! (standing in for a TLS stream: no direct delivery) and, to compare, one TCP socket.
//!
//! Replies are compared byte for byte; the BUSY and EXECABORT texts are the ones
//! redis-server 7.0.15 sends while `EVAL "while true do end" 0` runs past `lua-time-limit`.

use rill_server::config::Config;
use rill_server::conn::{self, Peer, Stream, Tcp};
use rill_server::state::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

const BUSY: &[u8] = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const EXECABORT_BUSY: &[u8] = b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
/// How long a reply may take before the test fails.
const REPLY_WITHIN: Duration = Duration::from_secs(10);
/// How long the tests wait to see that no reply comes.
const QUIET_FOR: Duration = Duration::from_millis(300);

/// A server state as `run::run` builds it, loaded (empty), without a log or listeners.
fn server() -> Arc<Shared> {
    let config = Config::from_args(&[]).unwrap();
    let state = rill_server::state::State::new(config);
    Shared::new(state, rill_server::cmd::table(), rill_server::cmd::table(), 0, "0".repeat(40)).into_arc()
}

/// A client served over an in-memory pipe of `buffer` bytes each way; its id and our end.
fn connect(shared: &Arc<Shared>, buffer: usize) -> (u64, DuplexStream) {
    let (ours, theirs) = tokio::io::duplex(buffer);
    let id = shared.next_client_id();
    let peer = Peer { addr: "pipe:0".into(), laddr: "pipe:0".into(), fd: -1 };
    let admitted = conn::admit(&mut shared.lock(), id, peer, true);
    tokio::spawn(conn::serve(shared.clone(), Stream::new(theirs), admitted));
    (id, ours)
}

/// Read exactly `expected.len()` bytes and compare.
async fn expect<S: AsyncReadExt + Unpin>(s: &mut S, expected: &[u8]) {
    let mut got = vec![0u8; expected.len()];
    tokio::time::timeout(REPLY_WITHIN, s.read_exact(&mut got))
        .await
        .unwrap_or_else(|_| panic!("no reply; expected {:?}", String::from_utf8_lossy(expected)))
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(expected));
}

/// Read until `needle` has been seen; everything read.
async fn read_until<S: AsyncReadExt + Unpin>(s: &mut S, needle: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.windows(needle.len()).any(|w| w == needle) {
        let n = tokio::time::timeout(REPLY_WITHIN, s.read(&mut chunk)).await.expect("reply").unwrap();
        assert!(n > 0, "closed before {:?}", String::from_utf8_lossy(needle));
        got.extend_from_slice(&chunk[..n]);
    }
    got
}

/// Nothing arrives for a while.
async fn expect_quiet<S: AsyncReadExt + Unpin>(s: &mut S) {
    let mut b = [0u8; 1];
    let r = tokio::time::timeout(QUIET_FOR, s.read(&mut b)).await;
    assert!(r.is_err(), "expected no reply, got {:?}", r.map(|r| r.map(|_| b[0] as char)));
}

/// Wait until `n` clients are blocked.
async fn until_blocked(shared: &Shared, n: usize) {
    until(&format!("{n} blocked clients"), || shared.lock().blocked.len() == n).await;
}

/// Waits until `done` (which must not hold the state lock when it returns: a panic while it
/// is held aborts the process); panics with `what` if it is not within [`REPLY_WITHIN`].
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + REPLY_WITHIN;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "never {what} within {REPLY_WITHIN:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Served clients whose replies went through their own tasks (read outside any assertion: a
/// panic while the state lock is held aborts the process).
fn handed_to_tasks(shared: &Shared) -> u64 {
    shared.lock().blocked.handed_to_tasks
}

fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut out = bytes::BytesMut::new();
    rill_resp::write_request(&mut out, args);
    out.to_vec()
}

// ------------------------------------------------------------------------------------------------
// A transport without direct delivery
// ------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_carries_pipelines_big_arguments_and_replies_bigger_than_its_buffer() {
    let shared = server();
    // A 1 KiB pipe: every big write waits for the reader, as on a full socket.
    let (_, mut c) = connect(&shared, 1024);
    c.write_all(b"PING\r\n*1\r\n$4\r\nPING\r\n").await.unwrap();
    expect(&mut c, b"+PONG\r\n+PONG\r\n").await;
    // 200 KB: the query buffer takes the big-argument path, the reply outgrows the pipe.
    let value = vec![b'v'; 200_000];
    let mut req = cmd(&[b"SET", b"big", &value]);
    req.extend(cmd(&[b"GET", b"big"]));
    req.extend(cmd(&[b"STRLEN", b"big"]));
    let writer = tokio::spawn({
        let (mut r, mut w) = tokio::io::split(c);
        async move {
            w.write_all(&req).await.unwrap();
            let mut expected = b"+OK\r\n$200000\r\n".to_vec();
            expected.extend_from_slice(&value);
            expected.extend_from_slice(b"\r\n:200000\r\n");
            expect(&mut r, &expected).await;
            r.unsplit(w)
        }
    });
    let mut c = writer.await.unwrap();
    c.write_all(b"QUIT\r\n").await.unwrap();
    expect(&mut c, b"+OK\r\n").await;
    let mut rest = Vec::new();
    tokio::time::timeout(REPLY_WITHIN, c.read_to_end(&mut rest)).await.unwrap().unwrap();
    assert!(rest.is_empty(), "closed after QUIT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_blocked_over_a_stream_gets_its_reply_through_its_own_task() {
    let shared = server();
    let (_, mut reader) = connect(&shared, 64 * 1024);
    let (_, mut writer) = connect(&shared, 64 * 1024);
    reader.write_all(&cmd(&[b"BLPOP", b"q", b"0"])).await.unwrap();
    until_blocked(&shared, 1).await;
    writer.write_all(&cmd(&[b"RPUSH", b"q", b"x"])).await.unwrap();
    expect(&mut writer, b":1\r\n").await;
    expect(&mut reader, b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n").await;
    assert_eq!(handed_to_tasks(&shared), 1, "no direct write into a stream");

    reader.write_all(&cmd(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"])).await.unwrap();
    until_blocked(&shared, 1).await;
    writer.write_all(&cmd(&[b"XADD", b"s", b"1-1", b"f", b"v"])).await.unwrap();
    expect(&mut writer, b"$3\r\n1-1\r\n").await;
    expect(&mut reader, b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n").await;
    assert_eq!(handed_to_tasks(&shared), 2);
    // The reader goes on as usual afterwards.
    reader.write_all(b"PING\r\n").await.unwrap();
    expect(&mut reader, b"+PONG\r\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_blocked_over_tcp_gets_its_reply_written_straight_into_its_socket() {
    let shared = server();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut reader = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    let (socket, peer) = listener.accept().await.unwrap();
    let peer = Peer { addr: peer.to_string(), laddr: String::new(), fd: -1 };
    let admitted = conn::admit(&mut shared.lock(), shared.next_client_id(), peer, true);
    tokio::spawn(conn::serve(shared.clone(), Tcp::new(socket), admitted));
    let (_, mut writer) = connect(&shared, 64 * 1024);

    reader.write_all(&cmd(&[b"BLPOP", b"q", b"0"])).await.unwrap();
    until_blocked(&shared, 1).await;
    writer.write_all(&cmd(&[b"RPUSH", b"q", b"x"])).await.unwrap();
    expect(&mut writer, b":1\r\n").await;
    expect(&mut reader, b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n").await;
    assert_eq!(handed_to_tasks(&shared), 0, "written by the pushing connection");
    reader.write_all(b"PING\r\n").await.unwrap();
    expect(&mut reader, b"+PONG\r\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_kill_ends_a_write_stuck_on_a_stream_nobody_reads() {
    let shared = server();
    let (id, mut stuck) = connect(&shared, 1024);
    let (_, mut admin) = connect(&shared, 64 * 1024);
    let value = vec![b'v'; 100_000];
    stuck.write_all(&cmd(&[b"SET", b"k", &value])).await.unwrap();
    expect(&mut stuck, b"+OK\r\n").await;
    // The reply does not fit the pipe and nobody reads it: the write must be stuck before
    // the kill, or this tests an ordinary kill.
    stuck.write_all(&cmd(&[b"GET", b"k"])).await.unwrap();
    let pending = || shared.lock().clients.get(&id).map_or(0, |c| c.mem.out_pending.load(Ordering::Relaxed));
    until("the GET reply stuck in the pipe", || pending() > 0).await;
    admin.write_all(&cmd(&[b"CLIENT", b"KILL", b"ID", id.to_string().as_bytes()])).await.unwrap();
    expect(&mut admin, b":1\r\n").await;
    until("the killed client's task gone", || !shared.lock().clients.contains_key(&id)).await;
}

// ------------------------------------------------------------------------------------------------
// The busy gate
// ------------------------------------------------------------------------------------------------

/// Hold the state lock on another thread (as a running script would) until the returned
/// sender is dropped.
fn hold_the_lock(shared: &Arc<Shared>) -> std::sync::mpsc::Sender<()> {
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (held, is_held) = std::sync::mpsc::channel();
    let shared = shared.clone();
    std::thread::spawn(move || {
        let _st = shared.lock();
        held.send(()).unwrap();
        let _ = released.recv();
    });
    is_held.recv().unwrap();
    release
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_gate_is_closed_commands_are_refused_busy_without_the_lock() {
    let shared = server();
    let (_, mut c) = connect(&shared, 64 * 1024);
    c.write_all(b"SET k v\r\n").await.unwrap();
    expect(&mut c, b"+OK\r\n").await;

    let script = hold_the_lock(&shared);
    let closed = shared.busy.close();
    // Were the connection to take the lock, these would hang until the timeout.
    c.write_all(b"GET k\r\nPING\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n").await.unwrap();
    expect(&mut c, &[BUSY, BUSY, BUSY].concat()).await;
    // MULTI is answered at once (as Redis runs it between a script's slices); what is queued
    // meanwhile is refused, which dooms the transaction.
    c.write_all(b"MULTI\r\nGET k\r\n").await.unwrap();
    expect(&mut c, &[&b"+OK\r\n"[..], BUSY].concat()).await;
    // DISCARD is allow-busy: it waits for the lock, and so does what follows it.
    c.write_all(b"DISCARD\r\nGET k\r\n").await.unwrap();
    expect_quiet(&mut c).await;
    drop(closed);
    drop(script);
    expect(&mut c, b"+OK\r\n$1\r\nv\r\n").await;

    c.write_all(b"INFO errorstats\r\n").await.unwrap();
    let info = String::from_utf8(read_until(&mut c, b"\r\n\r\n").await).unwrap();
    assert!(info.contains("errorstat_BUSY:count=4\r\n"), "{info}");
    c.write_all(b"INFO commandstats\r\n").await.unwrap();
    let info = String::from_utf8(read_until(&mut c, b"\r\n\r\n").await).unwrap();
    for (name, rejected) in [("get", 2), ("ping", 1), ("incr", 1)] {
        let line = info.lines().find(|l| l.starts_with(&format!("cmdstat_{name}:"))).unwrap_or_default();
        assert!(line.contains(&format!("rejected_calls={rejected}")), "{name}: {info}");
    }
    let line = info.lines().find(|l| l.starts_with("cmdstat_multi:")).unwrap_or_default();
    assert!(line.contains("calls=1,"), "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_inside_multi_dooms_the_transaction_and_exec_discards_it() {
    let shared = server();
    let (id, mut c) = connect(&shared, 64 * 1024);
    c.write_all(b"WATCH w\r\nMULTI\r\nSET a 1\r\n").await.unwrap();
    expect(&mut c, b"+OK\r\n+OK\r\n+QUEUED\r\n").await;

    let script = hold_the_lock(&shared);
    let closed = shared.busy.close();
    c.write_all(b"SET k v\r\nEXEC\r\n").await.unwrap();
    expect(&mut c, &[BUSY, EXECABORT_BUSY].concat()).await;
    drop(closed);
    drop(script);
    // The transaction is gone (neither SET ran), and with it the watched key.
    c.write_all(b"EXEC\r\nMGET a k\r\n").await.unwrap();
    expect(&mut c, b"-ERR EXEC without MULTI\r\n*2\r\n$-1\r\n$-1\r\n").await;
    let watched = shared.lock().engine.watched_by(id);
    assert_eq!(watched, 0, "EXEC's refusal unwatched the keys");
    c.write_all(b"INFO errorstats\r\n").await.unwrap();
    let info = String::from_utf8(read_until(&mut c, b"\r\n\r\n").await).unwrap();
    assert!(info.contains("errorstat_BUSY:count=1\r\n"), "{info}");
    assert!(info.contains("errorstat_EXECABORT:count=1\r\n"), "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_gate_cannot_decide_waits_for_it_and_then_runs_as_usual() {
    let shared = server();
    let (_, mut c) = connect(&shared, 64 * 1024);
    // One round trip first: the connection's task has then taken the lock for its first
    // batch and is waiting for input, not about to lock the state the "script" holds.
    c.write_all(b"PING\r\n").await.unwrap();
    expect(&mut c, b"+PONG\r\n").await;
    let script = hold_the_lock(&shared);
    let closed = shared.busy.close();
    // Refused; then an unknown command (Redis' check for it comes before BUSY and needs no
    // script to finish, but rill's dispatch answers it): it and the GET after it wait.
    c.write_all(b"GET k\r\nNOPE\r\nGET k\r\n").await.unwrap();
    expect(&mut c, BUSY).await;
    expect_quiet(&mut c).await;
    drop(closed);
    drop(script);
    expect(&mut c, b"-ERR unknown command 'NOPE', with args beginning with: \r\n$-1\r\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_while_the_gate_is_closed_is_removed_when_it_opens() {
    let shared = server();
    let (id, mut c) = connect(&shared, 64 * 1024);
    // One round trip first: the connection's task has then taken the lock for its first
    // batch and is waiting for input, not about to lock the state the "script" holds.
    c.write_all(b"PING\r\n").await.unwrap();
    expect(&mut c, b"+PONG\r\n").await;
    let script = hold_the_lock(&shared);
    let closed = shared.busy.close();
    c.write_all(b"GET k\r\n").await.unwrap();
    expect(&mut c, BUSY).await;
    drop(c);
    tokio::time::sleep(QUIET_FOR).await;
    drop(closed);
    drop(script);
    for _ in 0..1000 {
        let (gone, busy) = {
            let st = shared.lock();
            (!st.clients.contains_key(&id), st.stats.errors_by_code.get("BUSY").copied())
        };
        if gone {
            assert_eq!(busy, Some(1), "its refusal was counted on the way out");
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the client record is still there");
}
