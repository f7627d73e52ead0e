//! `rill top`: a live view of a rill server's streams and groups — length, input rate, lag
//! (entries and age), pending, oldest pending, delivery rate, dead letters — read with
//! `RILL.METRICS`, the snapshot `/metrics` renders, so the three views never disagree.
//!
//! Rates are the growth between two refreshes: entries added per second (`in/s`) and, per
//! group, entries delivered per second (`out/s`: what was added minus what the lag grew).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redis::Value;
use rill_worker::reply::{map_get, map_pairs};
use rill_worker::Connection;

use crate::output::{human_ms, Json, Table};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// One stream as read.
#[derive(Debug, Clone)]
pub struct StreamView {
    pub db: i64,
    pub name: String,
    pub length: i64,
    pub added: i64,
    pub groups: Vec<GroupView>,
}

/// One group as read.
#[derive(Debug, Clone)]
pub struct GroupView {
    pub name: String,
    pub lag: Option<i64>,
    pub lag_ms: i64,
    pub pending: i64,
    pub oldest_pending_ms: Option<i64>,
    pub consumers: i64,
    pub dead_lettered: Option<i64>,
}

/// A whole reading.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    pub clients: i64,
    pub ops_per_sec: i64,
    pub used_memory: i64,
    pub role: String,
    pub streams: Vec<StreamView>,
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        _ => String::new(),
    }
}

fn list(v: Option<&Value>) -> &[Value] {
    match v {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}

/// Read everything: the server's figures, then the streams page by page.
pub async fn read(conn: &mut Connection) -> Result<Snapshot> {
    let server: Value = match redis::cmd("RILL.METRICS").arg("SERVER").query_async(conn).await {
        Ok(v) => v,
        Err(e) if e.to_string().contains("unknown command") => {
            return Err(
                "`rill top` needs a rill server: this one has no RILL.METRICS (Redis and Valkey have none)".into()
            )
        }
        Err(e) => return Err(e.into()),
    };
    let s = map_pairs(&server);
    let mut snap = Snapshot {
        at: Instant::now(),
        clients: int(map_get(&s, "connected-clients")).unwrap_or(0),
        ops_per_sec: int(map_get(&s, "ops-per-sec")).unwrap_or(0),
        used_memory: int(map_get(&s, "used-memory")).unwrap_or(0),
        role: text(map_get(&s, "role")),
        streams: Vec::new(),
    };
    let mut cursor = "0".to_owned();
    loop {
        let page: Value =
            redis::cmd("RILL.METRICS").arg("STREAMS").arg(&cursor).arg("COUNT").arg(512).query_async(conn).await?;
        let [next, rows] = list(Some(&page)) else { return Err("RILL.METRICS STREAMS: unexpected reply".into()) };
        for row in list(Some(rows)) {
            let r = map_pairs(row);
            let groups = list(map_get(&r, "groups"))
                .iter()
                .map(|g| {
                    let g = map_pairs(g);
                    let counters = map_get(&g, "counters").map(map_pairs).unwrap_or_default();
                    GroupView {
                        name: text(map_get(&g, "name")),
                        lag: int(map_get(&g, "lag")),
                        lag_ms: int(map_get(&g, "lag-ms")).unwrap_or(0),
                        pending: int(map_get(&g, "pending")).unwrap_or(0),
                        oldest_pending_ms: int(map_get(&g, "oldest-pending-idle-ms")),
                        consumers: int(map_get(&g, "consumers")).unwrap_or(0),
                        dead_lettered: int(map_get(&counters, "dead-lettered")),
                    }
                })
                .collect();
            snap.streams.push(StreamView {
                db: int(map_get(&r, "db")).unwrap_or(0),
                name: text(map_get(&r, "stream")),
                length: int(map_get(&r, "length")).unwrap_or(0),
                added: int(map_get(&r, "entries-added")).unwrap_or(0),
                groups,
            });
        }
        cursor = text(Some(next));
        if cursor == "0" || cursor.is_empty() {
            break;
        }
    }
    snap.streams.sort_by(|a, b| (a.db, &a.name).cmp(&(b.db, &b.name)));
    Ok(snap)
}

/// Per-second growth of `now` over `before` across `secs`.
fn rate(now: i64, before: Option<i64>, secs: f64) -> Option<f64> {
    let before = before?;
    (secs > 0.0).then(|| (now - before).max(0) as f64 / secs)
}

fn rate_text(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| if r >= 100.0 { format!("{r:.0}") } else { format!("{r:.1}") })
}

fn bytes_text(n: i64) -> String {
    let n = n as f64;
    if n >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}G", n / (1024.0 * 1024.0 * 1024.0))
    } else if n >= 1024.0 * 1024.0 {
        format!("{:.2}M", n / (1024.0 * 1024.0))
    } else {
        format!("{:.0}K", n / 1024.0)
    }
}

type Key = (i64, String, String);

/// The counters rates are computed from: per stream its additions, per group what it was
/// delivered (added minus lag).
fn counters(s: &Snapshot) -> HashMap<Key, i64> {
    let mut out = HashMap::new();
    for st in &s.streams {
        out.insert((st.db, st.name.clone(), String::new()), st.added);
        for g in &st.groups {
            if let Some(lag) = g.lag {
                out.insert((st.db, st.name.clone(), g.name.clone()), st.added - lag);
            }
        }
    }
    out
}

/// The screen: a header, then one row per group (a stream without groups gets one row).
pub fn render(url: &str, now: &Snapshot, before: Option<&Snapshot>) -> String {
    let secs = before.map_or(0.0, |b| now.at.duration_since(b.at).as_secs_f64());
    let old = before.map(counters).unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "rill top  {url}  {}  {} clients  {} ops/s  {} used  {} streams",
        now.role,
        now.clients,
        now.ops_per_sec,
        bytes_text(now.used_memory),
        now.streams.len()
    );
    out.push('\n');
    let mut t =
        Table::new(["stream", "length", "in/s", "group", "lag", "lag age", "pending", "oldest", "out/s", "dead"]);
    for s in &now.streams {
        let name = if s.db == 0 { s.name.clone() } else { format!("{}:{}", s.db, s.name) };
        let stream_in = rate_text(rate(s.added, old.get(&(s.db, s.name.clone(), String::new())).copied(), secs));
        if s.groups.is_empty() {
            t.row(vec![
                name,
                s.length.to_string(),
                stream_in,
                "-".into(),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
            ]);
            continue;
        }
        for (i, g) in s.groups.iter().enumerate() {
            let delivered = g.lag.map(|lag| s.added - lag);
            let out_rate =
                delivered.and_then(|d| rate(d, old.get(&(s.db, s.name.clone(), g.name.clone())).copied(), secs));
            let first = i == 0;
            t.row(vec![
                if first { name.clone() } else { String::new() },
                if first { s.length.to_string() } else { String::new() },
                if first { stream_in.clone() } else { String::new() },
                g.name.clone(),
                g.lag.map_or_else(|| "?".to_owned(), |l| l.to_string()),
                if g.lag_ms > 0 { human_ms(g.lag_ms) } else { "-".to_owned() },
                g.pending.to_string(),
                g.oldest_pending_ms.map_or_else(|| "-".to_owned(), human_ms),
                rate_text(out_rate),
                g.dead_lettered.map_or_else(|| "-".to_owned(), |d| d.to_string()),
            ]);
        }
    }
    out.push_str(&t.render());
    out
}

fn json(now: &Snapshot) -> String {
    Json::obj([
        ("clients", Json::Int(now.clients)),
        ("ops_per_sec", Json::Int(now.ops_per_sec)),
        ("used_memory", Json::Int(now.used_memory)),
        (
            "streams",
            Json::Array(
                now.streams
                    .iter()
                    .map(|s| {
                        Json::obj([
                            ("db", Json::Int(s.db)),
                            ("stream", Json::str(&s.name)),
                            ("length", Json::Int(s.length)),
                            ("entries_added", Json::Int(s.added)),
                            (
                                "groups",
                                Json::Array(
                                    s.groups
                                        .iter()
                                        .map(|g| {
                                            Json::obj([
                                                ("group", Json::str(&g.name)),
                                                ("lag", Json::opt_int(g.lag)),
                                                ("lag_ms", Json::Int(g.lag_ms)),
                                                ("pending", Json::Int(g.pending)),
                                                ("oldest_pending_ms", Json::opt_int(g.oldest_pending_ms)),
                                                ("consumers", Json::Int(g.consumers)),
                                                ("dead_lettered", Json::opt_int(g.dead_lettered)),
                                            ])
                                        })
                                        .collect(),
                                ),
                            ),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
    .render()
}

/// Refresh every `interval` until interrupted, or `count` times. `--json` prints one
/// document per refresh; otherwise the screen is redrawn (printed one after the other when
/// the output is not a terminal).
pub async fn run(
    conn: &mut Connection,
    url: &str,
    interval: Duration,
    count: Option<usize>,
    as_json: bool,
) -> Result<()> {
    use std::io::IsTerminal as _;
    let redraw = !as_json && std::io::stdout().is_terminal();
    let mut before: Option<Snapshot> = None;
    let mut shown = 0usize;
    loop {
        let now = read(conn).await?;
        if as_json {
            println!("{}", json(&now));
        } else {
            let screen = render(url, &now, before.as_ref());
            if redraw {
                print!("\x1b[H\x1b[2J{screen}");
            } else {
                println!("{screen}");
            }
        }
        shown += 1;
        if count.is_some_and(|c| shown >= c) {
            return Ok(());
        }
        before = Some(now);
        tokio::time::sleep(interval).await;
    }
}
