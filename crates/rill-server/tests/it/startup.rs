//! Starting and stopping the binary the way redis-server is started and stopped.

use rill_testkit::{escape, ChildGuard, Server, ServerKind, TempDir};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn version_flag_prints_and_exits() {
    let (kind, binary) = Server::subject_binary();
    for flag in ["--version", "-v"] {
        let out = Command::new(&binary).arg(flag).stdin(Stdio::null()).output().unwrap();
        assert!(out.status.success(), "{flag}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        match kind {
            ServerKind::Rill => assert_eq!(
                text,
                format!(
                    "rill-server v={} (Redis protocol {})\n",
                    env!("CARGO_PKG_VERSION"),
                    rill_server::cmd::connection::REDIS_VERSION
                ),
                "{flag}"
            ),
            // RILL_DIFF_SELFTEST=1: Redis 7.0.15 stands in.
            ServerKind::Redis(_) => assert!(text.starts_with("Redis server v=7.0.15 "), "{flag}: {text}"),
        }
    }
}

#[test]
fn config_file_then_overrides() {
    let (kind, binary) = Server::subject_binary();
    let dir = TempDir::new("rill-test-conf");
    let conf = dir.path().join("test.conf");
    // `port 1` must be overridden by --port; `databases 4` must take effect.
    std::fs::write(&conf, "# a comment\nport 1\ndatabases 4\n\nloglevel notice\n").unwrap();
    let server = Server::start_with_config(kind, &binary, Some(&conf), &[]);
    let mut c = server.connect();
    assert_eq!(escape(&c.cmd(&["SELECT", "3"])), escape(b"+OK\r\n"));
    assert_eq!(escape(&c.cmd(&["SELECT", "4"])), escape(b"-ERR DB index is out of range\r\n"));
    assert_eq!(escape(&c.cmd(&["CONFIG", "GET", "databases"])), escape(b"*2\r\n$9\r\ndatabases\r\n$1\r\n4\r\n"));
    let port = server.port.to_string();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "port"]),
        format!("*2\r\n$4\r\nport\r\n${}\r\n{port}\r\n", port.len()).into_bytes()
    );
}

#[test]
fn bad_option_fails_at_start() {
    let (_, binary) = Server::subject_binary();
    let dir = TempDir::new("rill-test-badopt");
    let mut child = ChildGuard::spawn(
        Command::new(&binary)
            .args(["--port", &rill_testkit::free_port().to_string(), "--bind", "127.0.0.1"])
            .args(["--dir", dir.path().to_str().unwrap(), "--no-such-option", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    // Dropping the guard kills it.
    let status = child.wait_exit(Duration::from_secs(10)).expect("server kept running with an unknown option");
    assert!(!status.success(), "unknown option accepted: {status}");
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let mut server = Server::subject();
    let mut c = server.connect();
    assert_eq!(escape(&c.cmd(&["PING"])), escape(b"+PONG\r\n"));
    // Signal only our own child, by pid.
    let status = Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let Some(status) = server.wait_exit(Duration::from_secs(10)) else {
        panic!("still running 10 s after SIGTERM\n{}", server.log());
    };
    // Cleanly: exit status 0, as Redis after a SIGTERM.
    assert!(status.success(), "SIGTERM ended it with {status}\n{}", server.log());
    // The client sees the connection closed.
    let (_, closed) = c.read_until_close(Duration::from_secs(2));
    assert!(closed, "connection still open after shutdown");
}

#[test]
fn log_written_to_a_file_has_no_colour_codes() {
    // Server::start sends stderr to a file, as systemd or a shell redirect would.
    let server = Server::rill();
    let mut c = server.connect();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    let log = server.log();
    assert!(log.contains("ready to accept connections"), "{log}");
    assert!(!log.contains('\u{1b}'), "ANSI escape codes in a log written to a file:\n{log:?}");
}

#[test]
fn start_up_log_has_redis_pid_initialized_and_ready_lines() {
    // Tools that start servers (Redis' own test runner among them) match " PID: <pid>"
    // followed later by "Server initialized", then wait for "Ready to accept".
    let server = Server::rill();
    let mut c = server.connect();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    let log = server.log();
    let pid = log.find(&format!(" PID: {}\n", server.pid())).unwrap_or_else(|| panic!("no PID line\n{log}"));
    let init = log.find("Server initialized").unwrap_or_else(|| panic!("no Server initialized\n{log}"));
    let ready = log.find("Ready to accept connections tcp").unwrap_or_else(|| panic!("no Ready line\n{log}"));
    assert!(pid < init && init < ready, "{log}");
}
