//! SLOWLOG and LATENCY with real entries, on rill and on Redis 8.2.3 with the same steps: what
//! each entry holds (the arguments as the client sent them, secrets redacted, long ones cut,
//! EXEC left out, a blocked command logged once it is served), the client's address and name,
//! the latency monitor's `command` event, INFO latencystats and LATENCY HISTOGRAM. The replies
//! that hold no clock reading or address are byte-compared in `tests/diff/slowlog.redis`.

use rill_testkit::{Launch, RawClient, ReferenceServer, Server, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn text(v: &Value) -> String {
    match v.as_bytes() {
        Some(b) => String::from_utf8_lossy(b).into_owned(),
        None => panic!("expected a string, got {v}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("expected an integer, got {other}"),
    }
}

fn array(v: &Value) -> &[Value] {
    v.as_array().unwrap_or_else(|| panic!("expected an array, got {v}"))
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// One entry as both servers must agree on it: the arguments and the client's name; the rest
/// (ID order, time, duration, address) is checked here against what it must be.
fn entries(c: &mut RawClient, addr: &str, label: &str) -> Vec<(Vec<String>, String)> {
    let got = c.cmd_value(&["SLOWLOG", "GET", "-1"]);
    let mut last_id = i64::MAX;
    let mut out = Vec::new();
    for e in array(&got) {
        let f = array(e);
        assert_eq!(f.len(), 6, "{label}: an entry has six fields: {e}");
        let id = int(&f[0]);
        assert!(id < last_id, "{label}: newest first by ID: {got}");
        last_id = id;
        let t = int(&f[1]);
        assert!((t - now_secs()).abs() <= 5, "{label}: the entry's Unix time {t}");
        assert!(int(&f[2]) >= 0, "{label}: a duration");
        let argv: Vec<String> = array(&f[3]).iter().map(text).collect();
        let (peer, name) = (text(&f[4]), text(&f[5]));
        // The blocked client's entry is its own connection's; every other is `c`'s.
        if argv.first().is_some_and(|a| a.eq_ignore_ascii_case("blpop")) {
            assert_ne!(peer, addr, "{label}: BLPOP is the waiter's");
        } else {
            assert_eq!(peer, addr, "{label}: the client's address");
        }
        out.push((argv, name));
    }
    out.reverse();
    out
}

fn scenario(server: &Server, label: &str) -> Vec<(Vec<String>, String)> {
    let mut c = RawClient::connect(server.port);
    let info = text(&c.cmd_value(&["CLIENT", "INFO"]));
    let addr = info.split(' ').find_map(|w| w.strip_prefix("addr=")).unwrap_or_default().to_string();
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "128"]);
    c.cmd(&["CLIENT", "SETNAME", "probe"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["SET", "k", "v"]);
    // Secrets: whatever the outcome, never in the log.
    c.cmd(&["AUTH", "nosuchpassword"]);
    c.cmd(&["AUTH", "someone", "nosuchpassword"]);
    c.cmd(&["HELLO", "2", "AUTH", "someone", "nosuchpassword", "SETNAME", "probe"]);
    c.cmd(&["CONFIG", "SET", "masterauth", "s3cret", "maxmemory-policy", "noeviction"]);
    c.cmd(&["CONFIG", "SET", "masterauth", ""]);
    // A transaction: its commands, not EXEC.
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", "n"]);
    c.cmd(&["DEBUG", "SLEEP", "0"]);
    c.cmd(&["EXEC"]);
    // Too many arguments, too long an argument.
    let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let mut sadd = vec!["SADD", "set"];
    sadd.extend(many.iter().map(String::as_str));
    c.cmd(&sadd);
    let long = "x".repeat(200);
    c.cmd(&["SET", "long", &long]);
    // A blocked command: logged when served, as sent.
    let mut waiter = RawClient::connect(server.port);
    waiter.send_command(&[b"BLPOP", b"q", b"0"]).unwrap_or_else(|e| panic!("{label}: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info = text(&c.cmd_value(&["INFO", "clients"]));
        if info.lines().any(|l| l == "blocked_clients:1") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{label}: BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    let before = entries(&mut c, &addr, label);
    assert!(!before.iter().any(|(a, _)| a[0].eq_ignore_ascii_case("blpop")), "{label}: BLPOP not logged while parked");
    c.cmd(&["RPUSH", "q", "x"]);
    waiter.read_reply().unwrap_or_else(|e| panic!("{label}: {e}"));
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    let all = entries(&mut c, &addr, label);
    assert_eq!(int(&c.cmd_value(&["SLOWLOG", "LEN"])), all.len() as i64);
    all
}

/// `newest`: the server has the slow log's INFO fields (Redis 8.4+, rill; not 8.2.3).
fn latency(server: &Server, label: &str, newest: bool) {
    let mut c = RawClient::connect(server.port);
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "20"]);
    c.cmd(&["LATENCY", "RESET"]);
    c.cmd(&["DEBUG", "SLEEP", "0.05"]);
    let latest = c.cmd_value(&["LATENCY", "LATEST"]);
    let events = array(&latest);
    assert_eq!(events.len(), 1, "{label}: {latest}");
    let e = array(&events[0]);
    assert_eq!(text(&e[0]), "command", "{label}");
    assert!((int(&e[1]) - now_secs()).abs() <= 5, "{label}: {latest}");
    assert!(int(&e[2]) >= 50 && int(&e[3]) >= int(&e[2]), "{label}: {latest}");
    let history = c.cmd_value(&["LATENCY", "HISTORY", "command"]);
    assert_eq!(array(&history).len(), 1, "{label}: {history}");
    let graph = text(&c.cmd_value(&["LATENCY", "GRAPH", "command"]));
    assert!(graph.starts_with("command - high "), "{label}: {graph}");
    assert!(!text(&c.cmd_value(&["LATENCY", "DOCTOR"])).is_empty());
    // Below the threshold: nothing more.
    c.cmd(&["DEBUG", "SLEEP", "0"]);
    assert_eq!(array(&c.cmd_value(&["LATENCY", "HISTORY", "command"])).len(), 1, "{label}");
    assert_eq!(int(&c.cmd_value(&["LATENCY", "RESET"])), 1, "{label}");
    assert_eq!(array(&c.cmd_value(&["LATENCY", "LATEST"])).len(), 0, "{label}");
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "0"]);

    // Per-command durations.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    for _ in 0..5 {
        c.cmd(&["SET", "a", "b"]);
    }
    c.cmd(&["CLIENT", "ID"]);
    let h = c.cmd_value(&["LATENCY", "HISTOGRAM", "set", "client", "nosuch"]);
    let flat = array(&h);
    let names: Vec<String> = flat.iter().step_by(2).map(text).collect();
    assert_eq!(names, ["set", "client|id"], "{label}: {h}");
    let set = array(&flat[1]);
    assert_eq!((text(&set[0]), int(&set[1]), text(&set[2])), ("calls".into(), 5, "histogram_usec".into()), "{label}");
    let steps = array(&set[3]);
    // Cumulative: the last step counts every call; steps at 1, 2, 4, 8, 16, 33, 66, ... µs.
    assert_eq!(int(steps.last().unwrap_or_else(|| panic!("{label}: no steps"))), 5, "{label}: {h}");
    for pair in steps.chunks(2) {
        let us = int(&pair[0]);
        assert!([1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113].contains(&us) || us > 2113, "{label}: step {us}");
    }
    let info = text(&c.cmd_value(&["INFO", "latencystats"]));
    let line = info
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .unwrap_or_else(|| panic!("{label}: {info}"));
    let fields: Vec<&str> = line.split_once(':').map_or(vec![], |(_, v)| v.split(',').collect());
    assert_eq!(fields.iter().map(|f| f.split('=').next().unwrap_or("")).collect::<Vec<_>>(), ["p50", "p99", "p99.9"]);
    for f in fields {
        let value = f.split('=').nth(1).unwrap_or_default();
        let v: f64 = value.parse().unwrap_or(-1.0);
        assert!(v > 0.0 && value.split('.').nth(1).is_some_and(|d| d.len() == 3), "{label}: {line}");
    }
    c.cmd(&["CONFIG", "SET", "latency-tracking-info-percentiles", "0 100"]);
    let info = text(&c.cmd_value(&["INFO", "latencystats"]));
    assert!(
        info.lines().any(|l| l.starts_with("latency_percentiles_usec_set:p0=") && l.contains(",p100=")),
        "{label}: {info}"
    );
    c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]);
    let info = text(&c.cmd_value(&["INFO", "latencystats"]));
    assert_eq!(info.trim_end(), "# Latencystats", "{label}: tracking off");
    c.cmd(&["CONFIG", "SET", "latency-tracking", "yes"]);
    // INFO stats and commandstats count what the slow log took.
    if !newest {
        return;
    }
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "20000"]);
    c.cmd(&["DEBUG", "SLEEP", "0.03"]);
    c.cmd(&["GET", "a"]);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    let info = text(&c.cmd_value(&["INFO", "everything"]));
    let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).map(str::to_string);
    assert_eq!(field("slowlog_commands_count:").as_deref(), Some("1"), "{label}");
    let max: f64 = field("slowlog_commands_time_ms_max:").and_then(|v| v.parse().ok()).unwrap_or(0.0);
    assert!(max >= 30.0, "{label}: {max}");
    let debug = field("cmdstat_debug:").unwrap_or_default();
    assert!(debug.contains(",slowlog_count=1,slowlog_time_ms_sum="), "{label}: {debug}");
    let get = field("cmdstat_get:").unwrap_or_default();
    assert!(!get.contains("slowlog"), "{label}: {get}");
}

fn expected() -> Vec<(Vec<String>, String)> {
    let own = |words: &[&str]| (words.iter().map(|w| w.to_string()).collect::<Vec<_>>(), "probe".to_string());
    let mut sadd: Vec<String> = ["SADD", "set"].iter().map(|s| s.to_string()).collect();
    sadd.extend((0..29).map(|i| i.to_string()));
    sadd.push("... (11 more arguments)".into());
    let long = format!("{}... (72 more bytes)", "x".repeat(128));
    vec![
        own(&["SLOWLOG", "RESET"]),
        own(&["SET", "k", "v"]),
        own(&["AUTH", "(redacted)"]),
        own(&["AUTH", "(redacted)", "(redacted)"]),
        own(&["HELLO", "2", "AUTH", "(redacted)", "(redacted)", "SETNAME", "probe"]),
        own(&["CONFIG", "SET", "masterauth", "(redacted)", "maxmemory-policy", "noeviction"]),
        own(&["CONFIG", "SET", "masterauth", "(redacted)"]),
        own(&["MULTI"]),
        own(&["INCR", "n"]),
        own(&["DEBUG", "SLEEP", "0"]),
        (sadd, "probe".into()),
        own(&["SET", "long", &long]),
        own(&["INFO", "clients"]),
        own(&["SLOWLOG", "GET", "-1"]),
        own(&["RPUSH", "q", "x"]),
        (vec!["BLPOP".into(), "q".into(), "0".into()], String::new()),
        // The CONFIG SET that turned the log off is not in it: the threshold is read after a
        // command ran.
    ]
}

#[test]
fn slowlog_entries_as_redis_logs_them() {
    let rill = Launch::rill().args(&["--enable-debug-command", "yes"]).start();
    let got = scenario(&rill, "rill");
    // INFO clients was polled until BLPOP blocked: once or more.
    let mut want = expected();
    let polls = got.iter().filter(|(a, _)| a == &["INFO", "clients"]).count();
    assert!(polls >= 1, "{got:?}");
    let at = want.iter().position(|(a, _)| a == &["INFO", "clients"]).unwrap_or(0);
    for _ in 1..polls {
        want.insert(at, want[at].clone());
    }
    assert_eq!(got, want);
    if let Some(redis) = Launch::reference(ReferenceServer::Redis8) {
        let redis = redis.args(&["--enable-debug-command", "yes"]).start();
        let theirs = scenario(&redis, "redis 8.2.3");
        let polls = theirs.iter().filter(|(a, _)| a == &["INFO", "clients"]).count();
        let mut want = expected();
        for _ in 1..polls {
            want.insert(at, want[at].clone());
        }
        assert_eq!(theirs, want, "the expectation, checked on Redis 8.2.3");
    }
}

#[test]
fn latency_monitor_and_histograms() {
    latency(&Launch::rill().args(&["--enable-debug-command", "yes"]).start(), "rill", true);
    if let Some(redis) = Launch::reference(ReferenceServer::Redis8) {
        latency(&redis.args(&["--enable-debug-command", "yes"]).start(), "redis 8.2.3", false);
    }
}

#[test]
fn slowlog_trims_to_max_len_and_keeps_ids() {
    let rill = Server::rill();
    let mut c = RawClient::connect(rill.port);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "10"]);
    for _ in 0..100 {
        c.cmd(&["PING"]);
    }
    assert_eq!(int(&c.cmd_value(&["SLOWLOG", "LEN"])), 10);
    assert_eq!(array(&c.cmd_value(&["SLOWLOG", "GET"])).len(), 10);
    assert_eq!(array(&c.cmd_value(&["SLOWLOG", "GET", "5"])).len(), 5);
    let first = int(&array(&array(&c.cmd_value(&["SLOWLOG", "GET", "1"]))[0])[0]);
    c.cmd(&["SLOWLOG", "RESET"]);
    // The RESET itself is the first entry after it, with the next ID.
    let after = int(&array(&array(&c.cmd_value(&["SLOWLOG", "GET", "1"]))[0])[0]);
    assert!(after > first, "IDs keep counting across RESET: {first} then {after}");
    // A smaller max length takes effect at the next entry.
    c.cmd(&["CONFIG", "SET", "slowlog-max-len", "1"]);
    c.cmd(&["PING"]);
    assert_eq!(int(&c.cmd_value(&["SLOWLOG", "LEN"])), 1);
}
