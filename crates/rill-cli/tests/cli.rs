//! The `rill` binary end to end: the demos (embedded rill-server and Debian's redis-server,
//! their own keys, `--json`) and the operator commands' text and `--json` output against both
//! servers, with dead letters of both provenance styles and of two sources in one stream.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use rill_testkit::{redis_cli, RawClient, ReferenceServer, Server};
use std::process::{Command, Stdio};

/// Debian's redis-server 7.0.15.
fn redis() -> Server {
    Server::reference(ReferenceServer::Redis7)
        .expect("the CLI's tests need Debian's redis-server: run scripts/install-deps.sh")
}

fn rill(args: &[&str]) -> (bool, String, String) {
    rill_env(args, &[])
}

/// `rill args...` with only the given server variables set (RILL_URL, REDIS_URL).
fn rill_env(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rill"));
    cmd.args(args).stdin(Stdio::null()).env_remove("RILL_URL").env_remove("REDIS_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `rill --url <server> args...`, which must succeed; its stdout.
fn rill_ok(server: &Server, args: &[&str]) -> String {
    let url = server.url();
    let mut all = vec!["--url", url.as_str()];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = rill(&all);
    assert!(ok, "rill {args:?} failed: {stderr}\n{stdout}");
    stdout
}

/// `rill --url <server> args...`, which must fail; its stderr.
fn rill_err(server: &Server, args: &[&str]) -> String {
    let url = server.url();
    let mut all = vec!["--url", url.as_str()];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = rill(&all);
    assert!(!ok, "rill {args:?} succeeded: {stdout}");
    stderr
}

/// Sends every command, then reads every reply; panics on an error reply.
fn pipeline(server: &Server, commands: &[Vec<String>]) {
    let mut client = RawClient::connect(server.port);
    for c in commands {
        let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
        client.send_command(&args).unwrap();
    }
    for c in commands {
        let reply = client.read_reply().unwrap();
        assert!(!reply.starts_with(b"-"), "{c:?}: {}", String::from_utf8_lossy(&reply));
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

fn assert_ticker_story(stdout: &str) {
    for line in [
        "== 1. market simulator (seed 42): 50 ticks for 10 symbols -> rill-demo:{ticks}",
        "9 ticks have seq 3 (poison)",
        "pod-crash read 50 ticks ... and crashed",
        "rill-demo:{ticks} / pricing: 50 pending",
        "pod-crash  50",
        "pod-rescue: handled 41, reclaimed",
        "dead-lettered 9",
        "rill-demo:{ticks} / pricing: 0 pending",
        "dead letters in rill-demo:{ticks}:dlq (rill dlq list 'rill-demo:{ticks}'): 9",
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

/// The demos' keys are their own (`rill-demo:` prefix), and a demo refuses to run over an
/// existing one unless given --force.
#[test]
fn demos_keep_to_their_own_keys() {
    let server = Server::rill();
    let port = server.port;
    // The user's data, under the names the demos used to DEL.
    for key in ["{ticks}", "{ticks}:dlq", "{orders}", "{orders}:dlq"] {
        redis_cli(port, &["XADD", key, "1-0", "mine", "1"]).unwrap();
    }
    redis_cli(port, &["SADD", "{orders}:fulfilled", "order-1"]).unwrap();
    redis_cli(port, &["SET", "rill-demo:{ticks}:dlq", "not a stream"]).unwrap();

    let err = rill_err(&server, &["demo", "ticker"]);
    assert!(err.contains("rill-demo:{ticks}:dlq already exists on this server"), "{err}");
    assert!(err.contains("nothing was changed. Pass --force"), "{err}");
    assert_eq!(redis_cli(port, &["GET", "rill-demo:{ticks}:dlq"]).unwrap().trim(), "not a stream");
    assert_eq!(redis_cli(port, &["EXISTS", "rill-demo:{ticks}"]).unwrap().trim(), "0");

    assert_ticker_story(&rill_ok(&server, &["demo", "ticker", "--force"]));
    // A second run finds the first run's keys.
    let err = rill_err(&server, &["demo", "ticker"]);
    assert!(err.contains("rill-demo:{ticks}, rill-demo:{ticks}:dlq already exist on this server"), "{err}");
    assert_orders_story(&rill_ok(&server, &["demo", "orders"]));

    for key in ["{ticks}", "{ticks}:dlq", "{orders}", "{orders}:dlq"] {
        assert_eq!(redis_cli(port, &["XLEN", key]).unwrap().trim(), "1", "{key}");
    }
    assert_eq!(redis_cli(port, &["SCARD", "{orders}:fulfilled"]).unwrap().trim(), "1");
}

fn assert_orders_story(stdout: &str) {
    for line in [
        "w2 CRASHED",
        "w2 restarts under the same name",
        "w3 CRASHED",
        "w4 started",
        "fulfilled orders: 299 of 299",
        "order=order-0042 sku=POISON",
        // Every run is counted, the crashed ones too.
        "   w2      CRASHED  ",
        "   w3      CRASHED  ",
        "   all 5 runs: handled 29",
        "MAXLEN ~ 150 left 200 entries, not 150: approximate trimming removes whole nodes only, up to 100 \
         entries each (stream-node-max-entries), and stops before a node whose removal would leave fewer than 150",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // The poison order's dead letter says why, in one of two ways: a worker's handler failed
    // it the 4th time, or a crash took a delivery while the handler ran (the count passed the
    // limit with the handler never finishing), which the crash's timing decides.
    let reasons = [
        "delivery limit 4 reached; last error: sku POISON is not in the catalogue",
        "over the limit of 4 (the handler never finished)",
    ];
    assert!(reasons.iter().any(|r| stdout.contains(r)), "no dead-letter reason of {reasons:?} in:\n{stdout}");
}

/// The numbers that follow `"key":` in a JSON document, in order.
fn json_numbers(json: &str, key: &str) -> Vec<u64> {
    let pattern = format!("\"{key}\":");
    json.match_indices(&pattern)
        .map(|(at, _)| {
            let rest = &json[at + pattern.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap_or_else(|_| panic!("{key} is not a number in {json}"))
        })
        .collect()
}

/// `--json` holds for the demos too: stdout is one JSON document, the run's summary figures.
#[test]
fn demos_print_one_json_document() {
    let (ok, stdout, stderr) = rill(&["--json", "demo", "ticker"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let json = stdout.trim();
    assert!(json.starts_with(r#"{"demo":"ticker","seed":42,"stream":"rill-demo:{ticks}","group":"pricing""#), "{json}");
    for part in [
        r#""ticks":50,"poison_ticks":9,"delivery_limit":3,"crashed_consumer_read":50,"pending_after_crash":50,"#,
        r#""handled":41,"#,
        r#""dead_lettered":9},"pending_at_end":0,"dead_letters":9}"#,
    ] {
        assert!(json.contains(part), "missing {part} in {json}");
    }

    let (ok, stdout, stderr) = rill(&["--json", "demo", "orders", "--seed", "7"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let json = stdout.trim();
    assert!(json.starts_with(r#"{"demo":"orders","seed":7,"#) && json.ends_with('}'), "{json}");
    for part in [
        r#""maxlen_approx":150,"node_max_entries":100,"lengths_after_waves":[100,200,200],"#,
        r#"{"name":"w2","crashed":true,"#,
        r#"{"name":"w3","crashed":true,"#,
        r#""fulfilled":299,"dead_letters":1,"#,
    ] {
        assert!(json.contains(part), "missing {part} in {json}");
    }
    assert_eq!(json.matches(r#""crashed":"#).count(), 5, "{json}");
    // Five runs then the total; a crashed run may miss the count of an ack it never saw
    // answered (at most its concurrency, 2, per crash).
    let handled = json_numbers(json, "handled");
    assert_eq!(handled.len(), 6, "{json}");
    assert_eq!(handled[..5].iter().sum::<u64>(), handled[5], "{json}");
    assert!((295..=299).contains(&handled[5]), "{json}");
    assert!(handled[1] + handled[2] > 0, "the crashed runs handled nothing? {json}");
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
    assert!(text.contains("{s}:dlq: 1 entries"), "{text}");
    assert!(text.contains("9-0  {s}     7-0"), "{text}");
    let json = run(&["--json", "dlq", "show", "{s}", "9-0"]);
    assert_eq!(
        json.trim(),
        r#"{"id":"9-0","provenance":"rill","source_stream":"{s}","source_id":"7-0","group":"g","consumer":"c1","deliveries":5,"reason":"boom","first_delivery_ms":null,"last_delivery_ms":null,"fields":{"n":"7","note":"two words"}}"#
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
    assert_eq!(json.trim(), r#"{"dlq":"{s}:dlq","deleted":1,"left_other_streams":{},"left_unrecognised":0}"#);
}

#[test]
fn operator_commands_against_redis() {
    operator_commands(redis());
}

#[test]
fn operator_commands_against_rill() {
    operator_commands(Server::rill());
}

/// Dead letters written the way a popular blog post's Node worker writes them (the fields, then
/// `deadLetteredFrom: <stream>/<id>`) are listed, shown, replayed and purged like rill's own.
fn posts_style_dead_letters(server: Server) {
    let posts_letter = |id: &str, n: &str, from: &str| {
        strings(&["XADD", "{p}:dlq", id, "n", n, "poison", "1", "deadLetteredFrom", from])
    };
    pipeline(
        &server,
        &[
            strings(&["XADD", "{p}:dlq", "1-0", "note", "not a dead letter"]),
            posts_letter("2-0", "3", "{p}/1712-3"),
            posts_letter("3-0", "13", "{p}/1712-13"),
        ],
    );

    let text = rill_ok(&server, &["dlq", "list", "{p}"]);
    assert!(text.contains("{p}:dlq: 3 entries"), "{text}");
    assert!(text.contains("2-0  {p}     1712-3     -           -       n=3 poison=1"), "{text}");
    assert!(text.contains("3-0  {p}     1712-13    -           -       n=13 poison=1"), "{text}");
    assert!(
        text.contains("1 entries with neither rill-* provenance fields nor deadLetteredFrom, not shown: 1-0"),
        "{text}"
    );
    let json = rill_ok(&server, &["--json", "dlq", "show", "{p}", "2-0"]);
    assert_eq!(
        json.trim(),
        r#"{"id":"2-0","provenance":"deadLetteredFrom","source_stream":"{p}","source_id":"1712-3","group":null,"consumer":null,"deliveries":null,"reason":null,"first_delivery_ms":null,"last_delivery_ms":null,"fields":{"n":"3","poison":"1"}}"#
    );
    let text = rill_ok(&server, &["dlq", "show", "{p}", "3-0"]);
    assert!(text.contains("from      {p} 1712-13"), "{text}");

    let text = rill_ok(&server, &["dlq", "replay", "{p}", "2-0"]);
    assert!(text.contains("2-0 -> {p} "), "{text}");
    let replayed = redis_cli(server.port, &["XRANGE", "{p}", "-", "+"]).unwrap();
    assert_eq!(replayed.lines().skip(1).collect::<Vec<_>>(), ["n", "3", "poison", "1"], "{replayed}");

    let json = rill_ok(&server, &["--json", "dlq", "purge", "{p}", "--all"]);
    assert!(json.starts_with(r#"{"dlq":"{p}:dlq","deleted":1"#), "{json}");
    assert_eq!(redis_cli(server.port, &["XRANGE", "{p}:dlq", "-", "+"]).unwrap().lines().next(), Some("1-0"));
}

#[test]
fn posts_style_dead_letters_against_redis() {
    posts_style_dead_letters(redis());
}

#[test]
fn posts_style_dead_letters_against_rill() {
    posts_style_dead_letters(Server::rill());
}

/// A dead letter as a rill server's MAXDELIVER policy writes it: rill's six provenance fields
/// and the first and last delivery times (docs/spec/policies.md §3).
#[test]
fn server_made_dead_letters_are_read() {
    let server = Server::rill();
    redis_cli(
        server.port,
        &[
            "XADD",
            "{o}:dlq",
            "9-0",
            "sku",
            "a",
            "rill-source-stream",
            "{o}",
            "rill-source-id",
            "5-0",
            "rill-group",
            "g",
            "rill-consumer",
            "c",
            "rill-deliveries",
            "4",
            "rill-reason",
            "maxdeliver",
            "rill-first-delivery-ms",
            "1000",
            "rill-last-delivery-ms",
            "2500",
        ],
    )
    .unwrap();
    let json = rill_ok(&server, &["--json", "dlq", "show", "{o}", "9-0"]);
    assert_eq!(
        json.trim(),
        r#"{"id":"9-0","provenance":"rill","source_stream":"{o}","source_id":"5-0","group":"g","consumer":"c","deliveries":4,"reason":"maxdeliver","first_delivery_ms":1000,"last_delivery_ms":2500,"fields":{"sku":"a"}}"#
    );
    let text = rill_ok(&server, &["dlq", "replay", "{o}"]);
    assert!(text.contains("replayed 1 of 1 dead letters of {o}"), "{text}");
    let replayed = redis_cli(server.port, &["XRANGE", "{o}", "-", "+"]).unwrap();
    assert_eq!(replayed.lines().skip(1).collect::<Vec<_>>(), ["sku", "a"], "{replayed}");
}

/// `purge --all` pages through the whole dead-letter stream: a page of 500 entries with fewer
/// than 500 dead letters in it is not the last page.
#[test]
fn purge_all_reads_past_a_page_with_other_entries() {
    let server = Server::rill();
    let mut commands = vec![strings(&["XADD", "{q}:dlq", "1-0", "note", "not a dead letter"])];
    for i in 0..600 {
        let from = format!("{{q}}/5-{i}");
        commands.push(strings(&["XADD", "{q}:dlq", &format!("2-{i}"), "n", &i.to_string(), "deadLetteredFrom", &from]));
    }
    pipeline(&server, &commands);
    let text = rill_ok(&server, &["dlq", "purge", "{q}", "--all"]);
    assert!(text.contains("deleted 600 dead letters from {q}:dlq"), "{text}");
    assert_eq!(redis_cli(server.port, &["XLEN", "{q}:dlq"]).unwrap().trim(), "1");
}

/// The untagged `t` and the tagged `{t}` share the default dead-letter stream `{t}:dlq`. A
/// letter is replayed only to the stream its provenance names, and only when that is the stream
/// asked for: `rill dlq replay t` must not write `{t}`'s letters into `{t}`.
fn shared_default_dead_letter_stream(server: Server) {
    let rill_letter = |id: &str, value: &str, source: &str| {
        strings(&[
            "XADD",
            "{t}:dlq",
            id,
            "a",
            value,
            "rill-source-stream",
            source,
            "rill-source-id",
            "5-0",
            "rill-group",
            "g",
            "rill-consumer",
            "c",
            "rill-deliveries",
            "3",
            "rill-reason",
            "boom",
        ])
    };
    pipeline(
        &server,
        &[
            rill_letter("1-0", "of-tagged", "{t}"),
            strings(&["XADD", "{t}:dlq", "2-0", "a", "of-untagged", "deadLetteredFrom", "t/6-0"]),
            rill_letter("3-0", "of-untagged-too", "t"),
        ],
    );
    let port = server.port;
    let untouched = || {
        assert_eq!(redis_cli(port, &["XLEN", "{t}:dlq"]).unwrap().trim(), "3");
        assert_eq!(redis_cli(port, &["EXISTS", "t", "{t}"]).unwrap().trim(), "0");
    };

    let err = rill_err(&server, &["dlq", "replay", "t", "1-0"]);
    assert!(
        err.contains("1 of the named dead letters in {t}:dlq came from another stream than t; nothing was replayed"),
        "{err}"
    );
    assert!(err.contains("1-0 came from {t}: rill dlq replay '{t}' 1-0"), "{err}");
    assert!(err.contains("{t}:dlq is the default dead-letter stream of both t and {t}"), "{err}");
    untouched();
    // Refused as a whole: the letter of t named first is not replayed either.
    rill_err(&server, &["dlq", "replay", "t", "2-0", "1-0"]);
    untouched();
    let err = rill_err(&server, &["dlq", "purge", "t", "1-0"]);
    assert!(err.contains("nothing was purged") && err.contains("rill dlq purge '{t}' 1-0"), "{err}");
    untouched();

    let text = rill_ok(&server, &["dlq", "list", "t"]);
    assert!(text.contains("1-0  {t}     5-0"), "{text}");
    assert!(text.contains("1 of these came from {t}, not t: replay and purge of t leave them alone"), "{text}");
    let text = rill_ok(&server, &["dlq", "show", "t", "1-0"]);
    assert!(text.contains("note      not from t; replay it with: rill dlq replay '{t}' 1-0"), "{text}");

    let text = rill_ok(&server, &["dlq", "replay", "t"]);
    assert!(text.contains("replayed 2 of 2 dead letters of t"), "{text}");
    assert!(text.contains("left 1 dead letters of {t} in {t}:dlq (not t's): rill dlq replay '{t}'"), "{text}");
    let replayed = redis_cli(port, &["XRANGE", "t", "-", "+"]).unwrap();
    assert!(replayed.contains("of-untagged\n") && replayed.contains("of-untagged-too"), "{replayed}");
    assert_eq!(redis_cli(port, &["EXISTS", "{t}"]).unwrap().trim(), "0");

    let json = rill_ok(&server, &["--json", "dlq", "purge", "t", "--all"]);
    assert_eq!(json.trim(), r#"{"dlq":"{t}:dlq","deleted":0,"left_other_streams":{"{t}":1},"left_unrecognised":0}"#);
    let text = rill_ok(&server, &["dlq", "replay", "{t}"]);
    assert!(text.contains("1-0 -> {t} "), "{text}");
    assert_eq!(redis_cli(port, &["XLEN", "{t}"]).unwrap().trim(), "1");
    assert_eq!(redis_cli(port, &["XLEN", "{t}:dlq"]).unwrap().trim(), "0");
}

#[test]
fn shared_default_dead_letter_stream_against_redis() {
    shared_default_dead_letter_stream(redis());
}

#[test]
fn shared_default_dead_letter_stream_against_rill() {
    shared_default_dead_letter_stream(Server::rill());
}

/// `rill policy get|set|unset|info` on rill, in text and `--json`; on Redis they refuse.
#[test]
fn policy_commands() {
    let server = Server::rill();
    redis_cli(server.port, &["XGROUP", "CREATE", "{p}", "g", "0", "MKSTREAM"]).unwrap();

    let out =
        rill_ok(&server, &["policy", "set", "{p}", "g", "MAXDELIVER", "5", "ACKWAIT", "30000", "BACKOFF", "100,1000"]);
    assert!(out.starts_with("{p} / g: policy\n"), "{out}");
    for row in ["maxdeliver", "ackwait", "100,1000", "{p}:dlq"] {
        assert!(out.contains(row), "missing {row:?} in:\n{out}");
    }
    let get = redis_cli(server.port, &["RILL.GROUP", "GET", "{p}", "g"]).unwrap();
    assert!(get.contains("30000"), "the server holds the policy: {get}");

    let json = rill_ok(&server, &["--json", "policy", "get", "{p}", "g"]);
    assert!(
        json.starts_with(
            r#"{"stream":"{p}","group":"g","policy":{"maxdeliver":5,"deadletter":"{p}:dlq","ackwait":30000,"backoff":[100,1000],"#
        ),
        "{json}"
    );
    let json = rill_ok(&server, &["--json", "policy", "unset", "{p}", "g", "BACKOFF", "ACKWAIT"]);
    assert!(json.contains(r#""ackwait":0,"backoff":[],"#), "{json}");
    let json = rill_ok(&server, &["--json", "policy", "info", "{p}", "g"]);
    assert!(json.contains(r#""maxdeliver":5,"#) && json.contains(r#""dead-lettered":0,"#), "{json}");
    let text = rill_ok(&server, &["policy", "info", "{p}", "g"]);
    assert!(text.contains("handed-back"), "{text}");

    // The server checks the pairs; nothing changes on a bad one.
    let err = rill_err(&server, &["policy", "set", "{p}", "g", "MAXDELIVER", "2", "ACKWAIT", "soon"]);
    assert!(err.contains("ACKWAIT"), "{err}");
    assert!(rill_ok(&server, &["--json", "policy", "get", "{p}", "g"]).contains(r#""maxdeliver":5,"#));
    let err = rill_err(&server, &["policy", "get", "{p}", "nogroup"]);
    assert!(err.contains("NOGROUP"), "{err}");

    let redis = redis();
    redis_cli(redis.port, &["XGROUP", "CREATE", "{p}", "g", "0", "MKSTREAM"]).unwrap();
    for args in [&["policy", "get", "{p}", "g"][..], &["policy", "set", "{p}", "g", "MAXDELIVER", "5"]] {
        let err = rill_err(&redis, args);
        assert!(err.contains("this server has no group policies"), "{err}");
    }
}

/// `rill demo ticker --server-policies`: the server hands back the crashed pod's ticks and
/// dead-letters the poison ones; the demo's consumer only reads `>`, acks and nacks.
#[test]
fn demo_ticker_with_server_policies() {
    let (ok, stdout, stderr) = rill(&["demo", "ticker", "--server-policies"]);
    assert!(ok, "{stdout}\n{stderr}");
    for line in [
        "RILL.GROUP SET rill-demo:{ticks} pricing MAXDELIVER 3 ACKWAIT 1000",
        "pod-crash read 50 ticks ... and crashed",
        "rill-demo:{ticks} / pricing: 50 pending",
        "pod-rescue: handled 41; sent ",
        " RILL.NACKs, 0 XAUTOCLAIM, 0 XCLAIM, 0 dead-letter XADDs",
        "rill-demo:{ticks} / pricing: 0 pending",
        "written by the server (rill dlq list 'rill-demo:{ticks}'): 9",
        "no XAUTOCLAIM sweep and no client-side dead-lettering ran",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert_eq!(stdout.matches("the server dead-letters it").count(), 9, "{stdout}");
    assert!(stdout.matches("maxdeliver").count() >= 9, "the letters' reason: {stdout}");

    let (ok, stdout, stderr) = rill(&["--json", "demo", "ticker", "--server-policies"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    for part in
        [r#""server_policies":true"#, r#""xautoclaim":0,"client_dead_letters":0}"#, r#""server_dead_lettered":9,"#]
    {
        assert!(stdout.contains(part), "missing {part} in {stdout}");
    }
    assert!(stdout.trim_end().ends_with(r#""pending_at_end":0,"dead_letters":9}"#), "{stdout}");

    let redis = redis();
    let err = rill_err(&redis, &["demo", "ticker", "--server-policies"]);
    assert!(err.contains("needs a rill server (RILL.GROUP)"), "{err}");
    assert_eq!(redis_cli(redis.port, &["EXISTS", "rill-demo:{ticks}"]).unwrap().trim(), "0");
}

/// The server comes from `--url`, else `RILL_URL`, else `REDIS_URL`; a failed connection names
/// the address it tried.
#[test]
fn the_server_comes_from_url_or_the_environment_and_failures_name_it() {
    let server = Server::rill();
    RawClient::connect(server.port).cmd(&["XGROUP", "CREATE", "envs", "g", "$", "MKSTREAM"]);
    let url = server.url();
    for var in ["RILL_URL", "REDIS_URL"] {
        let (ok, stdout, stderr) = rill_env(&["groups", "envs"], &[(var, &url)]);
        assert!(ok, "{var}: {stderr}");
        assert!(stdout.contains('g'), "{var}: {stdout}");
    }
    // RILL_URL wins over REDIS_URL, --url over both.
    let dead = "redis://127.0.0.1:1";
    let (ok, _, stderr) = rill_env(&["groups", "envs"], &[("RILL_URL", dead), ("REDIS_URL", &url)]);
    assert!(!ok);
    assert!(stderr.contains("could not connect to redis://127.0.0.1:1"), "{stderr}");
    assert!(stderr.contains("--url or RILL_URL"), "{stderr}");
    let (ok, _, stderr) = rill_env(&["--url", &url, "groups", "envs"], &[("RILL_URL", dead)]);
    assert!(ok, "{stderr}");
}

/// `rill top` reads RILL.METRICS: every stream and group with its lag, pending and oldest
/// pending, across databases and more streams than one page; two refreshes give rates; on
/// Redis it says it needs rill.
#[test]
fn top_shows_every_stream_and_group() {
    let server = Server::rill();
    setup(&server);
    let mut cmds = Vec::new();
    for i in 0..600 {
        cmds.push(strings(&["XADD", &format!("many:{i:03}"), "*", "f", "v"]));
    }
    pipeline(&server, &cmds);
    let mut c = RawClient::connect(server.port);
    c.cmd(&["SELECT", "3"]);
    c.cmd(&["XADD", "other", "1-0", "a", "b"]);
    c.cmd(&["XADD", "other", "2-0", "a", "b"]);
    c.cmd(&["XGROUP", "CREATE", "other", "late", "0"]);

    let text = rill_ok(&server, &["top", "--count", "2", "--interval", "0.2"]);
    let screens: Vec<&str> = text.split("rill top  ").filter(|s| !s.is_empty()).collect();
    assert_eq!(screens.len(), 2, "{text}");
    let second = screens[1];
    assert!(second.contains("primary") && second.contains("603 streams"), "{second}");
    let row = second.lines().find(|l| l.starts_with("{s} ")).unwrap_or_else(|| panic!("{second}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // stream length in/s group lag lag-age pending oldest out/s dead
    assert_eq!(&cells[..5], ["{s}", "3", "0.0", "g", "0"], "{row}");
    assert_eq!(cells[6], "3", "{row}");
    let row = second.lines().find(|l| l.starts_with("3:other ")).unwrap_or_else(|| panic!("{second}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[..5], ["3:other", "2", "0.0", "late", "2"], "{row}");
    assert!(second.contains("many:599"), "{second}");

    let json = rill_ok(&server, &["--json", "top", "--count", "1"]);
    assert_eq!(json.lines().count(), 1, "{json}");
    assert!(
        json.contains(
            r#""stream":"{s}","length":3,"entries_added":3,"groups":[{"group":"g","lag":0,"lag_ms":0,"pending":3,"#
        ),
        "{json}"
    );
    assert!(
        json.contains(r#""db":3,"stream":"other","length":2,"entries_added":2,"groups":[{"group":"late","lag":2,"#),
        "{json}"
    );
    assert_eq!(json.matches(r#""stream":"many:"#).count(), 600);

    let err = rill_err(&redis(), &["top", "--count", "1"]);
    assert!(err.contains("`rill top` needs a rill server"), "{err}");
    let err = rill_err(&server, &["top", "--interval", "0"]);
    assert!(err.contains("--interval must be a positive number"), "{err}");
}
