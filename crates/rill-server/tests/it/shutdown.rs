//! A primary's shutdown that waits for its replicas (docs/REPLICATION.md, "Shutting down"):
//! SHUTDOWN and SIGTERM pause writes until every replica acknowledged the whole stream or
//! `shutdown-timeout` passes; NOW does not wait; ABORT cancels. The replica is played by the
//! test (it reads the stream and acknowledges only when told), so it lags exactly when the
//! test wants; the abort scenario runs step by step on Redis 8.2.3 too and the replies are
//! compared byte for byte.

use crate::failover::answers_within;
use crate::replica_link::info_field;
use rill_testkit::{escape, Launch, RawClient, ReferenceServer, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

/// The port the test's replica announces (INFO, the primary's log lines).
const REPLICA_PORT: &str = "7777";

/// A replica played by the test: it does the handshake, takes the snapshot, then reads the
/// stream into `stream` and sends `REPLCONF ACK` only when told.
pub(crate) struct TestReplica {
    sock: TcpStream,
    /// The primary's offset at the snapshot.
    start: u64,
    /// The stream received since the snapshot.
    stream: Vec<u8>,
    /// The offset last acknowledged.
    acked: u64,
}

impl TestReplica {
    pub(crate) fn attach(port: u16) -> TestReplica {
        let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut pending = Vec::new();
        for cmd in [&["REPLCONF", "listening-port", REPLICA_PORT][..], &["REPLCONF", "capa", "psync2"]] {
            sock.write_all(&command(cmd)).unwrap();
            assert_eq!(read_line(&mut sock, &mut pending), "+OK");
        }
        sock.write_all(&command(&["PSYNC", "?", "-1"])).unwrap();
        let full = read_line(&mut sock, &mut pending);
        let start: u64 = full
            .strip_prefix("+FULLRESYNC ")
            .and_then(|rest| rest.split(' ').nth(1))
            .and_then(|o| o.parse().ok())
            .unwrap_or_else(|| panic!("not a full sync: {full}"));
        // Keep-alive newlines while the snapshot is made, then `$<len>` and the snapshot.
        let len: usize = loop {
            let line = read_line(&mut sock, &mut pending);
            if let Some(n) = line.strip_prefix('$') {
                break n.parse().unwrap();
            }
            assert!(line.is_empty(), "unexpected before the snapshot: {line}");
        };
        while pending.len() < len {
            fill(&mut sock, &mut pending);
        }
        let stream = pending.split_off(len);
        let mut r = TestReplica { sock, start, stream, acked: 0 };
        r.ack();
        r
    }

    /// The offset of everything received.
    fn offset(&self) -> u64 {
        self.start + self.stream.len() as u64
    }

    /// Acknowledge everything received.
    fn ack(&mut self) {
        self.acked = self.offset();
        let offset = self.acked.to_string();
        self.sock.write_all(&command(&["REPLCONF", "ACK", &offset])).unwrap();
    }

    /// Read the stream until it holds `needle`.
    pub(crate) fn read_until(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.holds(needle) {
            assert!(Instant::now() < deadline, "the stream never brought {needle}: {}", escape(&self.stream));
            fill(&mut self.sock, &mut self.stream);
        }
    }

    /// Read whatever arrives within `quiet`.
    pub(crate) fn drain(&mut self, quiet: Duration) {
        self.sock.set_read_timeout(Some(quiet)).unwrap();
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = self.sock.read(&mut chunk) {
            self.stream.extend_from_slice(&chunk[..n]);
        }
        self.sock.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    }

    /// The commands of the stream received so far, each as its words joined by spaces (the
    /// name upper-cased), keep-alive PINGs left out.
    pub(crate) fn commands(&self) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.stream).into_owned();
        let mut lines = text.split("\r\n");
        let mut out = Vec::new();
        while let Some(head) = lines.next() {
            let Some(n) = head.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) else { continue };
            let mut words: Vec<String> = (0..n).filter_map(|_| lines.nth(1).map(str::to_string)).collect();
            if let Some(name) = words.first_mut() {
                *name = name.to_ascii_uppercase();
            }
            if words != ["PING"] {
                out.push(words.join(" "));
            }
        }
        out
    }

    pub(crate) fn holds(&self, needle: &str) -> bool {
        self.stream.windows(needle.len()).any(|w| w == needle.as_bytes())
    }
}

fn command(args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    rill_testkit::encode_command(&args)
}

fn fill(sock: &mut TcpStream, buf: &mut Vec<u8>) {
    let mut chunk = [0u8; 64 * 1024];
    let n = sock.read(&mut chunk).unwrap();
    assert!(n > 0, "the primary closed the replica's link");
    buf.extend_from_slice(&chunk[..n]);
}

/// One `\r\n`- or `\n`-terminated line from `pending` (filled from `sock`), without its end.
fn read_line(sock: &mut TcpStream, pending: &mut Vec<u8>) -> String {
    loop {
        if let Some(i) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=i).collect();
            return String::from_utf8_lossy(&line).trim_end_matches(['\r', '\n']).to_string();
        }
        fill(sock, pending);
    }
}

/// Wait until INFO server shows the wait for the replicas; returns what it says is left.
fn wait_shutdown_in_progress(c: &mut RawClient) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(ms) = info_field(c, "server", "shutdown_in_milliseconds") {
            return ms.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no shutdown_in_milliseconds in INFO server");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait until INFO `blocked_clients` reads `n`.
fn wait_blocked(c: &mut RawClient, n: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(c, "clients", "blocked_clients").as_deref() != Some(n) {
        assert!(Instant::now() < deadline, "blocked_clients never became {n}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_log(server: &Server, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().contains(line) {
        assert!(Instant::now() < deadline, "never logged {line:?}:\n{}", server.log());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sigterm(server: &Server) {
    // Our own child only, by pid.
    let status = Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
}

/// A client of `server` and the test's replica attached to it, which has read and acknowledged
/// one write and everything before it.
fn caught_up(server: &Server) -> (RawClient, TestReplica) {
    let mut c = server.connect();
    let mut replica = TestReplica::attach(server.port);
    assert_eq!(c.cmd(&["SET", "k", "first"]), b"+OK\r\n");
    replica.read_until("first");
    replica.drain(Duration::from_millis(100));
    replica.ack();
    (c, replica)
}

/// A rill primary with the test's replica caught up, then one write the replica reads but does
/// not acknowledge.
fn lagging(extra: &[&str]) -> (Server, RawClient, TestReplica) {
    let server = Server::rill_with(extra);
    let (mut c, mut replica) = caught_up(&server);
    assert_eq!(c.cmd(&["SET", "k", "last"]), b"+OK\r\n");
    replica.read_until("last");
    (server, c, replica)
}

#[test]
fn shutdown_waits_until_the_lagging_replica_acknowledges_the_last_write() {
    let (mut server, mut c, mut replica) = lagging(&["--shutdown-timeout", "60"]);
    let mut caller = server.connect();
    caller.send_command(&[b"SHUTDOWN"]).unwrap();
    let left = wait_shutdown_in_progress(&mut c);
    assert!(left > 50_000 && left <= 60_000, "shutdown_in_milliseconds:{left}");
    wait_log(&server, "Waiting for replicas before shutting down.");
    // Writes are held (and never acknowledged: the process ends first); reads are served.
    let mut writer = server.connect();
    writer.send_command(&[b"SET", b"k", b"during"]).unwrap();
    assert_eq!(answers_within(&mut writer, Duration::from_millis(300)), None, "a write ran during the wait");
    assert_eq!(c.cmd(&["GET", "k"]), b"$4\r\nlast\r\n");
    wait_blocked(&mut c, "2"); // the caller and the writer
    assert!(server.is_running(), "exited before the replica acknowledged");
    // The replica was asked for an ACK; it answers with everything it has.
    replica.read_until("GETACK");
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.is_running(), "exited before the replica acknowledged");
    replica.ack();
    let status = server.wait_exit(Duration::from_secs(10)).expect("still running after the replica caught up");
    assert!(status.success(), "{status}");
    let (caller_got, closed) = caller.read_until_close(Duration::from_secs(2));
    assert!(closed && caller_got.is_empty(), "SHUTDOWN's caller got {}", escape(&caller_got));
    let (writer_got, closed) = writer.read_until_close(Duration::from_secs(2));
    assert!(closed && writer_got.is_empty(), "the held write was answered: {}", escape(&writer_got));
    replica.drain(Duration::from_millis(200));
    assert!(replica.holds("last") && !replica.holds("during"), "{}", escape(&replica.stream));
    let log = server.log();
    assert!(log.contains("1 of 1 replicas are in sync when shutting down."), "{log}");
    assert!(!log.contains("Lagging replica"), "{log}");
}

#[test]
fn sigterm_waits_for_the_replica_the_same_way() {
    let (mut server, mut c, mut replica) = lagging(&["--shutdown-timeout", "60"]);
    sigterm(&server);
    wait_shutdown_in_progress(&mut c);
    wait_log(&server, "Received SIGTERM scheduling shutdown...");
    wait_log(&server, "Waiting for replicas before shutting down.");
    let mut writer = server.connect();
    writer.send_command(&[b"INCR", b"n"]).unwrap();
    assert_eq!(answers_within(&mut writer, Duration::from_millis(300)), None, "a write ran during the wait");
    assert!(server.is_running());
    replica.read_until("GETACK");
    replica.ack();
    let status = server.wait_exit(Duration::from_secs(10)).expect("still running after the replica caught up");
    assert!(status.success(), "{status}");
    assert!(server.log().contains("1 of 1 replicas are in sync when shutting down."), "{}", server.log());
}

#[test]
fn the_wait_ends_at_shutdown_timeout_with_a_warning_for_the_lagging_replica() {
    // No keep-alive PING between the offset read here and the SHUTDOWN.
    let (mut server, mut c, replica) = lagging(&["--shutdown-timeout", "1", "--repl-ping-replica-period", "3600"]);
    let lag = info_field(&mut c, "replication", "master_repl_offset").unwrap().parse::<u64>().unwrap();
    let began = Instant::now();
    c.send_command(&[b"SHUTDOWN"]).unwrap();
    let status = server.wait_exit(Duration::from_secs(10)).expect("still running after shutdown-timeout");
    assert!(status.success(), "{status}");
    let took = began.elapsed();
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "exited after {took:?}");
    let log = server.log();
    // Behind by the last SET and the GETACK the shutdown sent.
    let getack = command(&["REPLCONF", "GETACK", "*"]).len() as u64;
    let behind = lag + getack - replica.acked;
    let expected = format!("Lagging replica 127.0.0.1:{REPLICA_PORT} reported offset {behind} behind master, lag=");
    assert!(log.contains(&expected), "{expected}\n{log}");
    assert!(log.contains("0 of 1 replicas are in sync when shutting down."), "{log}");
}

#[test]
fn shutdown_now_and_a_zero_timeout_do_not_wait() {
    for (how, extra) in [("SHUTDOWN NOW", "10"), ("shutdown-timeout 0", "0")] {
        let (mut server, mut c, _replica) = lagging(&["--shutdown-timeout", extra]);
        let began = Instant::now();
        if extra == "0" {
            c.send_command(&[b"SHUTDOWN"]).unwrap();
        } else {
            c.send_command(&[b"SHUTDOWN", b"NOW"]).unwrap();
        }
        let status = server.wait_exit(Duration::from_secs(5)).unwrap_or_else(|| panic!("{how}: still running"));
        assert!(status.success(), "{how}: {status}");
        assert!(began.elapsed() < Duration::from_secs(2), "{how}: took {:?}", began.elapsed());
        let log = server.log();
        assert!(!log.contains("Waiting for replicas"), "{how}: {log}");
        assert!(log.contains("0 of 1 replicas are in sync when shutting down."), "{how}: {log}");
    }
}

/// The abort scenario, the same on rill and on Redis: what each client received at each step.
/// `then_ping`: a caller whose SHUTDOWN was aborted sends PING (Redis 8.2.3 does not reset
/// such a client and fails an assertion on its next command; newer Redis serves it, as rill).
fn abort_scenario(server: &mut Server, then_ping: bool) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let (mut c, mut replica) = caught_up(server);
    // Caught up (Redis takes the ACK on its next event): no wait, nothing to abort.
    out.push(("ABORT with no shutdown".into(), c.cmd(&["SHUTDOWN", "ABORT"])));
    for bad in [&["SHUTDOWN", "ABORT", "NOW"][..], &["SHUTDOWN", "NOSAVE", "SAVE"], &["SHUTDOWN", "FOO"]] {
        out.push((bad.join(" "), c.cmd(bad)));
    }
    out.push(("ABORT ABORT".into(), c.cmd(&["SHUTDOWN", "ABORT", "ABORT"])));
    assert_eq!(c.cmd(&["INCR", "n"]), b":1\r\n");
    replica.read_until("INCR");
    let mut callers = [server.connect(), server.connect()];
    for caller in &mut callers {
        caller.send_command(&[b"SHUTDOWN"]).unwrap();
    }
    wait_shutdown_in_progress(&mut c);
    wait_blocked(&mut c, "2"); // the two callers
    let mut writer = server.connect();
    writer.send_command(&[b"INCR", b"n"]).unwrap();
    out.push((
        "a write during the wait".into(),
        answers_within(&mut writer, Duration::from_millis(300)).unwrap_or_default(),
    ));
    out.push(("a read during the wait".into(), c.cmd(&["GET", "n"])));
    out.push(("SHUTDOWN ABORT".into(), c.cmd(&["SHUTDOWN", "ABORT"])));
    for (i, caller) in callers.iter_mut().enumerate() {
        out.push((format!("SHUTDOWN caller {i}"), answers_within(caller, Duration::from_secs(5)).unwrap_or_default()));
        if then_ping {
            out.push((format!("SHUTDOWN caller {i} then"), caller.cmd(&["PING"])));
        }
    }
    out.push(("the held write".into(), answers_within(&mut writer, Duration::from_secs(5)).unwrap_or_default()));
    out.push((
        "INFO after".into(),
        info_field(&mut c, "server", "shutdown_in_milliseconds").unwrap_or_default().into(),
    ));
    out.push(("ABORT again".into(), c.cmd(&["SHUTDOWN", "ABORT"])));
    assert!(server.is_running(), "{} exited after ABORT", server.label());
    wait_log(server, "Shutdown manually aborted.");
    // A SIGTERM's shutdown is aborted the same way.
    sigterm(server);
    wait_shutdown_in_progress(&mut c);
    out.push(("ABORT of SIGTERM's".into(), c.cmd(&["SHUTDOWN", "ABORT"])));
    out.push(("a write after".into(), c.cmd(&["INCR", "n"])));
    assert!(server.is_running(), "{} exited after ABORT", server.label());
    drop(replica);
    out
}

#[test]
fn shutdown_abort_resumes_writes_and_fails_the_callers_as_redis() {
    let mut rill = Server::rill_with(&["--shutdown-timeout", "60"]);
    let got = abort_scenario(&mut rill, true);
    let expect: Vec<(&str, &[u8])> = vec![
        ("ABORT with no shutdown", b"-ERR No shutdown in progress.\r\n"),
        ("SHUTDOWN ABORT NOW", b"-ERR syntax error\r\n"),
        ("SHUTDOWN NOSAVE SAVE", b"-ERR syntax error\r\n"),
        ("SHUTDOWN FOO", b"-ERR syntax error\r\n"),
        ("ABORT ABORT", b"-ERR No shutdown in progress.\r\n"),
        ("a write during the wait", b""),
        ("a read during the wait", b"$1\r\n1\r\n"),
        ("SHUTDOWN ABORT", b"+OK\r\n"),
        ("SHUTDOWN caller 0", b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"),
        ("SHUTDOWN caller 0 then", b"+PONG\r\n"),
        ("SHUTDOWN caller 1", b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"),
        ("SHUTDOWN caller 1 then", b"+PONG\r\n"),
        ("the held write", b":2\r\n"),
        ("INFO after", b""),
        ("ABORT again", b"-ERR No shutdown in progress.\r\n"),
        ("ABORT of SIGTERM's", b"+OK\r\n"),
        ("a write after", b":3\r\n"),
    ];
    let pretty = |v: &[(String, Vec<u8>)]| v.iter().map(|(s, r)| format!("{s}: {}", escape(r))).collect::<Vec<_>>();
    let want: Vec<(String, Vec<u8>)> = expect.iter().map(|(s, r)| (s.to_string(), r.to_vec())).collect();
    assert_eq!(pretty(&got), pretty(&want), "rill");
    let Some(launch) = Launch::reference(ReferenceServer::Redis8) else { return };
    let mut redis = launch.args(&["--shutdown-timeout", "60"]).start();
    let theirs = abort_scenario(&mut redis, false);
    let got: Vec<_> = got.into_iter().filter(|(step, _)| !step.ends_with(" then")).collect();
    assert_eq!(pretty(&got), pretty(&theirs), "rill and {}", redis.label());
}

/// A final save that fails (dump.rdb is a directory) cancels the shutdown with Redis' error and
/// the server goes on; with FORCE it exits anyway. Compared with Redis 8.2.3.
#[test]
fn a_failed_final_save_cancels_the_shutdown_unless_forced() {
    let mut servers = vec![Server::rill()];
    servers.extend(Launch::reference(ReferenceServer::Redis8).map(|l| l.start()));
    let mut answers = Vec::new();
    for server in &mut servers {
        std::fs::create_dir(server.dir().join("dump.rdb")).unwrap();
        let mut c = server.connect();
        assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
        let refused = c.cmd(&["SHUTDOWN", "SAVE"]);
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{} went on", server.label());
        assert!(server.is_running(), "{} exited", server.label());
        assert!(server.log().contains("Error trying to save the DB, can't exit."), "{}", server.log());
        c.send_command(&[b"SHUTDOWN", b"SAVE", b"FORCE"]).unwrap();
        let status = server.wait_exit(Duration::from_secs(10)).expect("still running after SHUTDOWN SAVE FORCE");
        assert!(status.success(), "{status}");
        assert!(server.log().contains("Error trying to save the DB. Exit anyway."), "{}", server.log());
        answers.push(refused);
    }
    assert_eq!(escape(&answers[0]), escape(b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"));
    if let Some(redis) = answers.get(1) {
        assert_eq!(escape(&answers[0]), escape(redis), "rill and redis 8.2.3");
    }
}

/// `shutdown-on-sigterm` gives a signal's shutdown SHUTDOWN's flags, as in Redis: `now` does
/// not wait for a lagging replica, and `nosave` writes no snapshot though save points are set
/// (the default waits, and saves).
#[test]
fn shutdown_on_sigterm_gives_the_signal_shutdowns_flags() {
    let (mut server, _c, _replica) =
        lagging(&["--shutdown-timeout", "60", "--save", "3600 1", "--shutdown-on-sigterm", "now nosave"]);
    sigterm(&server);
    let status = server.wait_exit(Duration::from_secs(5)).expect("SIGTERM with `now` did not exit at once");
    assert!(status.success(), "{status}");
    let log = server.log();
    assert!(!log.contains("Waiting for replicas"), "{log}");
    assert!(!log.contains("Saving the final RDB snapshot"), "nosave: {log}");
    // The default: the same signal waits for the replica.
    let (server, mut c, _replica) = lagging(&["--shutdown-timeout", "60"]);
    sigterm(&server);
    wait_shutdown_in_progress(&mut c);
}
