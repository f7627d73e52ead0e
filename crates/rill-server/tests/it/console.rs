//! The console's actions are writes like any client's: they go through dispatch, the unit
//! runner and the journal, so each reaches the log (it survives kill -9 with `appendfsync
//! always`), a replica (the replica holds the same result) and MONITOR. The browser-level
//! test is tests/clients/console_browser.py; this one speaks HTTP itself.

use rill_testkit::{free_port, Proc, RawClient, TempDir};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One HTTP/1.1 request; (status, headers and body as text).
fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out)
}

fn token(page: &str) -> String {
    let at = page.find("name=\"token\" value=\"").expect("a form with the token") + 20;
    page[at..at + 32].to_owned()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn console_actions_are_logged_replicated_and_monitored() {
    let dir = TempDir::new("console-primary");
    let http_port = free_port();
    let hp = http_port.to_string();
    let primary = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always", "--metrics-port", &hp]);
    let port = primary.port.to_string();
    let replica_dir = TempDir::new("console-replica");
    let replica = Proc::start(replica_dir.path(), &["--replicaof", "127.0.0.1", &port]);

    let mut c = primary.client();
    for i in 1..=3 {
        c.cmd(&["XADD", "orders", &format!("{i}-0"), "n", &i.to_string()]);
    }
    c.cmd(&["XGROUP", "CREATE", "orders", "billing", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "billing", "crashed", "STREAMS", "orders", ">"]);
    let letter = [
        "XADD",
        "{orders}:dlq",
        "9-0",
        "n",
        "bad",
        "rill-source-stream",
        "orders",
        "rill-source-id",
        "7-0",
        "rill-group",
        "billing",
        "rill-consumer",
        "crashed",
        "rill-deliveries",
        "5",
        "rill-reason",
        "boom",
    ];
    c.cmd(&letter);

    let mut monitor = primary.client();
    assert_eq!(monitor.cmd(&["MONITOR"]), b"+OK\r\n");

    let (status, page) = http(http_port, "GET", "/group?db=0&key=orders&group=billing", "");
    assert_eq!(status, 200, "{page}");
    let tok = token(&page);
    let (status, resp) = http(
        http_port,
        "POST",
        "/action",
        &format!("token={tok}&back=%2F&db=0&key=orders&group=billing&op=ack&id=1-0&id=2-0"),
    );
    assert_eq!(status, 303, "{resp}");
    assert!(resp.contains("Acknowledged%202%20of%202"), "{resp}");
    let (status, resp) =
        http(http_port, "POST", "/action", &format!("token={tok}&db=0&key=%257Borders%257D%253Adlq&op=replay&id=9-0"));
    assert_eq!(status, 303, "{resp}");
    assert!(resp.contains("Replayed%201%20of%201"), "{resp}");

    // MONITOR shows the console's commands as it shows a client's.
    let mut seen = String::new();
    monitor.set_read_timeout(Duration::from_secs(5));
    while !(seen.contains("\"XACK\" \"orders\" \"billing\" \"1-0\" \"2-0\"")
        && seen.contains("\"XDEL\" \"{orders}:dlq\" \"9-0\""))
    {
        let line = monitor.read_reply().unwrap();
        seen.push_str(&String::from_utf8_lossy(&line));
    }
    assert!(seen.contains("\"XADD\" \"orders\" \"*\" \"n\" \"bad\""), "{seen}");

    let picture = |c: &mut RawClient| {
        (
            c.cmd(&["XPENDING", "orders", "billing"]),
            c.cmd(&["XLEN", "orders"]),
            c.cmd(&["XLEN", "{orders}:dlq"]),
            c.cmd(&["XREVRANGE", "orders", "+", "-", "COUNT", "1"]).windows(3).any(|w| w == b"bad"),
        )
    };
    let want = picture(&mut c);
    assert_eq!(want.0, b"*4\r\n:1\r\n$3\r\n3-0\r\n$3\r\n3-0\r\n*1\r\n*2\r\n$7\r\ncrashed\r\n$1\r\n1\r\n");
    assert_eq!((want.1.as_slice(), want.2.as_slice(), want.3), (&b":4\r\n"[..], &b":0\r\n"[..], true));

    // The replica holds the same.
    let mut r = replica.client();
    wait_until("the replica to apply the console's writes", || picture(&mut r) == want);

    // kill -9 and restart: every action was in the log before its reply.
    let primary_port = primary.port;
    drop(monitor);
    drop(c);
    primary.kill9();
    let primary = Proc::start_on(dir.path(), primary_port, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = primary.client();
    assert_eq!(picture(&mut c), want);
    drop(replica);
}
