//! MONITOR on rill and on Redis 8.2.3 with the same steps: the lines a monitor gets (the time
//! and the client's port aside) must be the same — commands as sent, the database, secrets
//! redacted, admin commands left out, a transaction's commands before its EXEC, a blocked
//! command once — and a monitor that never reads is closed at its output limit.

use rill_testkit::{Launch, RawClient, ReferenceServer, Server};
use std::time::{Duration, Instant};

/// Read monitor lines until `until` appears in one (included); each line with its time and
/// the client's address replaced.
fn read_lines(m: &mut RawClient, until: &str, label: &str) -> Vec<String> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "{label}: no {until:?} after {out:?}");
        let raw = m.read_reply().unwrap_or_else(|e| panic!("{label}: {e} after {out:?}"));
        let line = String::from_utf8_lossy(&raw).into_owned();
        // +<secs>.<micros> [<db> <ip>:<port>] args
        let rest = line.strip_prefix('+').unwrap_or_else(|| panic!("{label}: not a status line: {line:?}"));
        let (time, rest) = rest.split_once(' ').unwrap_or_default();
        let (secs, micros) = time.split_once('.').unwrap_or_default();
        assert!(secs.len() >= 10 && micros.len() == 6, "{label}: time {time:?}");
        let (client, args) = rest.split_once("] ").unwrap_or_default();
        let (db, peer) = client.trim_start_matches('[').split_once(' ').unwrap_or_default();
        assert!(peer.starts_with("127.0.0.1:"), "{label}: {line:?}");
        let line = format!("[{db}] {}", args.trim_end());
        let done = line.to_lowercase().contains(until);
        out.push(line);
        if done {
            return out;
        }
    }
}

fn scenario(server: &Server, label: &str) -> Vec<String> {
    let mut m = RawClient::connect(server.port);
    assert_eq!(m.cmd(&["MONITOR"]), b"+OK\r\n", "{label}");
    let mut c = RawClient::connect(server.port);
    c.cmd(&["SET", "foo", "bar baz"]);
    c.cmd(&["GET", "foo"]);
    c.call(&[&b"SET"[..], b"bin", b"a\"b\\c\r\n\x00\xff"]).unwrap_or_else(|e| panic!("{label}: {e}"));
    c.cmd(&["SELECT", "2"]);
    c.cmd(&["INCR", "n"]);
    c.cmd(&["SELECT", "0"]);
    // Secrets, and commands that are never shown (admin) or never run (refused).
    c.cmd(&["AUTH", "not-real"]);
    c.cmd(&["AUTH", "someone", "not-real"]);
    c.cmd(&["HELLO", "2", "AUTH", "someone", "not-real"]);
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    c.cmd(&["CLIENT", "LIST"]);
    c.cmd(&["NOSUCHCOMMAND", "x"]);
    c.cmd(&["GET"]);
    c.cmd(&["PING"]);
    // Transactions: the queued commands as EXEC runs them, then EXEC.
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "t", "1"]);
    c.cmd(&["EXEC"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["NOSUCH"]);
    c.cmd(&["EXEC"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["MONITOR"]);
    assert!(
        String::from_utf8_lossy(&c.cmd(&["EXEC"])).contains("MONITOR isn't allowed for DENY BLOCKING client"),
        "{label}"
    );
    // A blocked command: once.
    let mut waiter = RawClient::connect(server.port);
    waiter.send_command(&[b"BLPOP", b"list", b"0"]).unwrap_or_else(|e| panic!("{label}: {e}"));
    let mut lines = read_lines(&mut m, "\"blpop\"", label);
    c.cmd(&["LPUSH", "list", "1"]);
    waiter.read_reply().unwrap_or_else(|e| panic!("{label}: {e}"));
    c.cmd(&["LPUSH", "list", "2"]);
    c.cmd(&["ECHO", "end"]);
    lines.extend(read_lines(&mut m, "\"echo\" \"end\"", label));
    // CLIENT LIST shows the monitor as such (flag O), as a normal client.
    let list = String::from_utf8_lossy(&c.cmd(&["CLIENT", "LIST", "TYPE", "normal"])).into_owned();
    assert!(list.contains(" flags=O ") && list.contains("cmd=monitor"), "{label}: {list}");
    // RESET ends monitoring: the monitor's own RESET is shown to nobody, later commands neither.
    assert_eq!(m.cmd(&["RESET"]), b"+RESET\r\n", "{label}");
    c.cmd(&["SET", "after", "reset"]);
    assert_eq!(m.cmd(&["PING"]), b"+PONG\r\n", "{label}: no monitor line queued after RESET");
    lines
}

#[test]
fn monitor_lines_as_redis_shows_them() {
    let want = [
        "[0] \"set\" \"foo\" \"bar baz\"",
        "[0] \"get\" \"foo\"",
        "[0] \"SET\" \"bin\" \"a\\\"b\\\\c\\r\\n\\x00\\xff\"",
        "[2] \"select\" \"2\"",
        "[2] \"incr\" \"n\"",
        "[0] \"select\" \"0\"",
        "[0] \"auth\" \"(redacted)\"",
        "[0] \"auth\" \"(redacted)\" \"(redacted)\"",
        "[0] \"hello\" \"2\" \"AUTH\" \"(redacted)\" \"(redacted)\"",
        "[0] \"ping\"",
        "[0] \"multi\"",
        "[0] \"set\" \"t\" \"1\"",
        "[0] \"exec\"",
        "[0] \"multi\"",
        "[0] \"exec\"",
        "[0] \"multi\"",
        "[0] \"exec\"",
        "[0] \"BLPOP\" \"list\" \"0\"",
        "[0] \"lpush\" \"list\" \"1\"",
        "[0] \"lpush\" \"list\" \"2\"",
        "[0] \"echo\" \"end\"",
    ];
    // The lines show the arguments as sent (this test sends upper case); compared without case
    // here, exactly between the two servers below.
    let rill = Launch::rill().start();
    let got = scenario(&rill, "rill");
    let norm = |v: &[String]| v.iter().map(|l| l.to_lowercase()).collect::<Vec<_>>();
    assert_eq!(norm(&got), norm(&want.map(String::from)));
    if let Some(redis) = Launch::reference(ReferenceServer::Redis8) {
        let redis = redis.start();
        assert_eq!(scenario(&redis, "redis 8.2.3"), got, "rill and Redis 8.2.3 show the same lines");
    }
}

/// A monitor that never reads holds the server's output for it; past its class's limit (a
/// monitor is a normal client) it is closed and everyone else goes on.
#[test]
fn a_monitor_that_never_reads_is_closed_at_its_limit() {
    let rill = Server::rill_with(&["--client-output-buffer-limit", "normal 256kb 0 0"]);
    let mut m = RawClient::connect(rill.port);
    assert_eq!(m.cmd(&["MONITOR"]), b"+OK\r\n");
    let mut c = RawClient::connect(rill.port);
    let value = "v".repeat(1000);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        c.cmd(&["SET", "k", &value]);
        let info = String::from_utf8_lossy(&c.cmd(&["INFO", "stats"])).into_owned();
        if info.contains("client_output_buffer_limit_disconnections:1") {
            break;
        }
        assert!(Instant::now() < deadline, "the monitor was never closed");
    }
    assert_eq!(c.cmd(&["GET", "k"]).len(), value.len() + 9, "the others are served");
    let clients = String::from_utf8_lossy(&c.cmd(&["CLIENT", "LIST"])).into_owned();
    assert!(!clients.contains("flags=O"), "{clients}");
}
