//! redis_exporter (Debian's `prometheus-redis-exporter`, the exporter Redis users run) pointed at
//! rill and at Redis 8.2.3 holding the same data, with `--check-streams`: every metric it
//! exports for Redis it must export for rill, and its stream, group and consumer series must be
//! the same with the same values — it reads them from XINFO STREAM, GROUPS and CONSUMERS, so
//! this checks their fields and order as a real tool reads them.

use rill_testkit::{free_port, ChildGuard, Launch, RawClient, ReferenceServer, Server};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXPORTER: &str = "/usr/bin/prometheus-redis-exporter";

/// Metrics the exporter derives from what rill does not have, each with why.
const NOT_FROM_RILL: &[(&str, &str)] = &[
    ("redis_config_io_threads", "CONFIG GET io-threads: rill has no I/O threads setting"),
    ("redis_module_info", "rill loads no modules (Redis 8 reports its built-in ones)"),
];

/// Metric name prefixes the exporter derives from INFO sections rill does not have yet.
const NOT_YET: &[(&str, &str)] =
    &[("_distrib_", "INFO keysizes (Redis 8's per-type key size histograms): needs sizes kept per key in the engine")];

fn workload(c: &mut RawClient) {
    for i in 1..=6 {
        c.cmd(&["XADD", "orders", &format!("{i}-0"), "n", &i.to_string()]);
    }
    c.cmd(&["XGROUP", "CREATE", "orders", "billing", "0"]);
    c.cmd(&["XGROUP", "CREATE", "orders", "audit", "$"]);
    c.cmd(&["XGROUP", "CREATE", "orders", "search", "0", "ENTRIESREAD", "0"]);
    // A consumer that crashed holding three entries; another that took one over.
    c.cmd(&["XREADGROUP", "GROUP", "billing", "crashed", "COUNT", "3", "STREAMS", "orders", ">"]);
    c.cmd(&["XCLAIM", "orders", "billing", "rescuer", "0", "2-0"]);
    c.cmd(&["XACK", "orders", "billing", "2-0"]);
    c.cmd(&["XREADGROUP", "GROUP", "search", "s1", "STREAMS", "orders", ">"]);
    // Dead letters, as a worker moves them by hand.
    c.cmd(&["XADD", "orders:dead", "1-1", "id", "1-0", "reason", "poison"]);
    c.cmd(&["XACK", "orders", "billing", "1-0"]);
    c.cmd(&["XDEL", "orders", "6-0"]);
    c.cmd(&["SET", "plain", "x"]);
    c.cmd(&["HSET", "h", "f", "v"]);
    c.cmd(&["INCR", "plain"]);
}

fn http_get(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// The exporter's series: name{labels} → value.
fn scrape(server_port: u16) -> BTreeMap<String, f64> {
    let port = free_port();
    let mut exporter = ChildGuard::spawn(
        Command::new(EXPORTER)
            .args(["-redis.addr", &format!("redis://127.0.0.1:{server_port}")])
            .args(["-check-streams", "db0=*", "-web.listen-address", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        if let Some(b) = http_get(port).filter(|b| b.contains("redis_up")) {
            break b;
        }
        assert!(exporter.is_running(), "the exporter exited");
        assert!(Instant::now() < deadline, "the exporter never answered");
        std::thread::sleep(Duration::from_millis(50));
    };
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn name(series: &str) -> &str {
    series.split('{').next().unwrap_or(series)
}

#[test]
fn redis_exporter_reads_rill_as_it_reads_redis() {
    if !Path::new(EXPORTER).exists() {
        rill_testkit::skip("prometheus-redis-exporter is not installed (scripts/install-deps.sh installs it)");
        return;
    }
    let Some(redis) = Launch::reference(ReferenceServer::Redis8) else { return };
    let redis = redis.start();
    let rill = Server::rill();
    for s in [&rill, &redis] {
        workload(&mut RawClient::connect(s.port));
    }
    let ours = scrape(rill.port);
    let theirs = scrape(redis.port);
    assert_eq!(ours.get("redis_up"), Some(&1.0), "the exporter could not read rill");

    // Every metric it exports for Redis, it exports for rill.
    let names = |m: &BTreeMap<String, f64>| m.keys().map(|k| name(k).to_string()).collect::<BTreeSet<_>>();
    let missing: Vec<String> = names(&theirs)
        .difference(&names(&ours))
        .filter(|n| !NOT_FROM_RILL.iter().any(|(x, _)| x == n))
        .filter(|n| !NOT_YET.iter().any(|(x, _)| n.contains(x)))
        .cloned()
        .collect();
    assert!(missing.is_empty(), "exported for Redis, not for rill: {missing:?}");

    // The streams' series: the same, with the same values (times and radix-tree sizes aside).
    let streams = |m: &BTreeMap<String, f64>| -> BTreeMap<String, f64> {
        m.iter()
            .filter(|(k, _)| k.starts_with("redis_stream"))
            .filter(|(k, _)| !k.contains("idle_seconds") && !k.contains("radix_tree"))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    let (a, b) = (streams(&ours), streams(&theirs));
    assert!(b.len() >= 15, "too few stream series to compare: {b:?}");
    assert_eq!(a, b, "stream series of rill (left) and Redis 8.2.3 (right)");
    // The consumers' idle times are there, and fresh.
    for (k, v) in ours.iter().filter(|(k, _)| k.contains("consumer_idle_seconds")) {
        assert!((0.0..60.0).contains(v), "{k} {v}");
    }
    // Keys and errors as INFO keyspace / errorstats give them.
    for series in ["redis_db_keys{db=\"db0\"}", "redis_connected_clients"] {
        assert!(ours.contains_key(series), "{series}");
    }
    assert_eq!(ours.get("redis_db_keys{db=\"db0\"}"), theirs.get("redis_db_keys{db=\"db0\"}"));
}
