//! The `rill` binary end to end: the demos (embedded rill-server and Debian's redis-server) and
//! the operator commands' text and `--json` output against both servers.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use rill_testkit::{redis_cli, ReferenceServer, Server};
use std::process::{Command, Stdio};

/// Debian's redis-server 7.0.15.
fn redis() -> Server {
    Server::reference(ReferenceServer::Redis7)
        .expect("the CLI's tests need Debian's redis-server: run scripts/install-deps.sh")
}

fn rill(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rill")).args(args).stdin(Stdio::null()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_ticker_story(stdout: &str) {
    for line in [
        "== 1. market simulator (seed 42): 50 ticks for 10 symbols -> {ticks}",
        "9 ticks have seq 3 (poison)",
        "pod-crash read 50 ticks ... and crashed",
        "{ticks} / pricing: 50 pending",
        "pod-crash  50",
        "pod-rescue: handled 41, reclaimed",
        "dead-lettered 9",
        "{ticks} / pricing: 0 pending",
        "dead letters in {ticks}:dlq (rill dlq list {ticks}): 9",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert_eq!(stdout.matches("delivery limit 3 reached").count(), 9, "{stdout}");
}

#[test]
fn demo_ticker_with_its_own_rill_server() {
    let (ok, stdout, stderr) = rill(&["demo", "ticker"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("# started "), "{stdout}");
    assert_ticker_story(&stdout);
}

#[test]
fn demo_ticker_against_redis() {
    let server = redis();
    let (ok, stdout, stderr) = rill(&["--url", &server.url(), "demo", "ticker"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(!stdout.contains("# started "));
    assert_ticker_story(&stdout);
}

fn assert_orders_story(stdout: &str) {
    for line in [
        "w2 CRASHED",
        "w2 restarts under the same name",
        "w3 CRASHED",
        "w4 started",
        "fulfilled orders: 299 of 299",
        "delivery limit 4 reached; last error: sku POISON is not in the catalogue",
        "order=order-0042 sku=POISON",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
}

#[test]
fn demo_orders_with_its_own_rill_server() {
    let (ok, stdout, stderr) = rill(&["demo", "orders"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert_orders_story(&stdout);
}

#[test]
fn demo_orders_against_redis() {
    let server = redis();
    let (ok, stdout, stderr) = rill(&["--url", &server.url(), "demo", "orders"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert_orders_story(&stdout);
}

/// Three entries pending for consumer c1, one dead letter written the way rill-worker does.
fn setup(server: &Server) {
    let p = server.port;
    for i in 0..3 {
        redis_cli(p, &["XADD", "{s}", &format!("{}-0", i + 1), "n", &i.to_string()]).unwrap();
    }
    redis_cli(p, &["XGROUP", "CREATE", "{s}", "g", "0"]).unwrap();
    redis_cli(p, &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{s}", ">"]).unwrap();
    redis_cli(
        p,
        &[
            "XADD",
            "{s}:dlq",
            "9-0",
            "n",
            "7",
            "note",
            "two words",
            "rill-source-stream",
            "{s}",
            "rill-source-id",
            "7-0",
            "rill-group",
            "g",
            "rill-consumer",
            "c1",
            "rill-deliveries",
            "5",
            "rill-reason",
            "boom",
        ],
    )
    .unwrap();
}

fn operator_commands(server: Server) {
    setup(&server);
    let url = server.url();
    let run = |args: &[&str]| {
        let mut all = vec!["--url", url.as_str()];
        all.extend_from_slice(args);
        let (ok, stdout, stderr) = rill(&all);
        assert!(ok, "rill {args:?} failed: {stderr}");
        stdout
    };

    let text = run(&["pending", "{s}", "g"]);
    assert!(text.contains("{s} / g: 3 pending (1-0 .. 3-0)"), "{text}");
    assert!(text.contains("c1        3"), "{text}");
    let json = run(&["--json", "pending", "{s}", "g"]);
    assert!(json.starts_with(r#"{"stream":"{s}","group":"g","pending":3,"smallest":"1-0","largest":"3-0""#), "{json}");
    assert!(json.contains(r#""consumer":"c1""#) && json.contains(r#""deliveries":1"#), "{json}");

    let text = run(&["groups", "{s}"]);
    assert!(text.contains("{s}: 3 entries, 1 groups"), "{text}");
    let json = run(&["--json", "groups", "{s}"]);
    assert!(json.contains(r#""name":"g","consumers":1,"pending":3,"lag":0,"last_delivered_id":"3-0""#), "{json}");

    let text = run(&["dlq", "list", "{s}"]);
    assert!(text.contains("{s}:dlq: 1 dead letters"), "{text}");
    assert!(text.contains("9-0  7-0"), "{text}");
    let json = run(&["--json", "dlq", "show", "{s}", "9-0"]);
    assert_eq!(
        json.trim(),
        r#"{"id":"9-0","source_stream":"{s}","source_id":"7-0","group":"g","consumer":"c1","deliveries":5,"reason":"boom","fields":{"n":"7","note":"two words"}}"#
    );

    let json = run(&["--json", "tail", "{s}", "--group", "g", "--history", "2", "--limit", "2"]);
    let lines: Vec<&str> = json.lines().collect();
    assert_eq!(lines.len(), 2, "{json}");
    assert!(
        lines[0].starts_with(
            r#"{"id":"2-0","fields":{"n":"1"},"group":{"state":"pending","consumer":"c1","deliveries":1}}"#
        ),
        "{json}"
    );

    let text = run(&["dlq", "replay", "{s}"]);
    assert!(text.contains("replayed 1 of 1 dead letters"), "{text}");
    assert_eq!(redis_cli(server.port, &["XLEN", "{s}:dlq"]).unwrap().trim(), "0");
    let last = redis_cli(server.port, &["XREVRANGE", "{s}", "+", "-", "COUNT", "1"]).unwrap();
    assert!(last.contains("two words"), "{last}");

    redis_cli(
        server.port,
        &[
            "XADD",
            "{s}:dlq",
            "10-0",
            "x",
            "1",
            "rill-source-stream",
            "{s}",
            "rill-source-id",
            "8-0",
            "rill-group",
            "g",
            "rill-consumer",
            "c1",
            "rill-deliveries",
            "1",
            "rill-reason",
            "r",
        ],
    )
    .unwrap();
    let json = run(&["--json", "dlq", "purge", "{s}", "--all"]);
    assert_eq!(json.trim(), r#"{"dlq":"{s}:dlq","deleted":1}"#);
}

#[test]
fn operator_commands_against_redis() {
    operator_commands(redis());
}

#[test]
fn operator_commands_against_rill() {
    operator_commands(Server::rill());
}
