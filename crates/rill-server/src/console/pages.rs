//! The console's pages (see `mod.rs` for the routes). Figures come from the metrics snapshot
//! (`metrics.rs`); a group's pending entries, a stream's newest entries, its dead letters and
//! a group's policy from the commands a client would send (`client.rs`).

use super::client::{self, Client};
use super::history::Series;
use super::html::{chart, dur, enc, esc, esc_b, form_head, rate, size, table};
use super::{dlq, Params, Site};
use crate::metrics::{Snapshot, StreamRow};
use bytes::Bytes;
use rill_resp::Reply;
use std::fmt::Write as _;

/// A page's title and body.
pub type PageResult = Result<(String, String), String>;

/// Streams per page of the overview.
const STREAMS_PER_PAGE: usize = 200;
/// Entries per page of the PEL and dead-letter views.
const ENTRIES_PER_PAGE: usize = 100;

fn now_secs() -> f64 {
    crate::clock::now_ms() as f64 / 1000.0
}

fn stream_href(db: usize, key: &[u8]) -> String {
    format!("/stream?db={db}&key={}", enc(key))
}

fn group_href(db: usize, key: &[u8], group: &[u8]) -> String {
    format!("/group?db={db}&key={}&group={}", enc(key), enc(group))
}

fn dlq_href(db: usize, key: &[u8]) -> String {
    format!("/dlq?db={db}&key={}", enc(key))
}

fn shown_key(db: usize, key: &[u8]) -> String {
    if db == 0 {
        esc_b(key)
    } else {
        format!("<span class=\"muted\">{db}:</span>{}", esc_b(key))
    }
}

fn last_rate(site: &Site, s: &Series) -> Option<f64> {
    let h = site.history.lock().ok()?;
    let pts = h.points(s);
    let (t, v) = *pts.last()?;
    (now_secs() - t < 3.0 * super::history::INTERVAL.as_secs_f64()).then_some(v)
}

fn figures(items: &[(&str, String)]) -> String {
    let mut out = String::from("<dl class=\"figures\">");
    for (k, v) in items {
        let _ = write!(out, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(v));
    }
    out.push_str("</dl>");
    out
}

/// `/`: the server and every stream with its groups, 200 streams a page.
pub fn overview(site: &Site, p: &Params, snap: &Snapshot) -> PageResult {
    let f = &snap.server;
    let page: usize = p.text("page").parse().unwrap_or(0);
    let keys: u64 = f.keys.iter().map(|k| k.1).sum();
    let ops = last_rate(site, &Series::Ops).map_or_else(|| "-".to_owned(), |r| format!("{r:.0}"));
    let mut body = String::from("<h1>Streams</h1>");
    body.push_str(&figures(&[
        ("role", if f.replica { "replica".into() } else { "primary".into() }),
        ("clients", f.clients.to_string()),
        ("commands/s", ops),
        ("memory", size(f.used_memory)),
        ("keys", keys.to_string()),
        ("streams", snap.streams.len().to_string()),
        ("log", if f.log_enabled { size(f.log_bytes) } else { "off".into() }),
        ("replicas", f.replicas.len().to_string()),
    ]));
    let ops_points = site.history.lock().map(|h| h.points(&Series::Ops)).unwrap_or_default();
    let ops = vec![("commands".to_owned(), ops_points)];
    let _ = write!(
        body,
        "<div class=\"charts\">{}</div>",
        chart("Commands per second", "chart-ops", &ops, now_secs(), "/s")
    );
    let mut streams: Vec<&StreamRow> = snap.streams.iter().collect();
    streams.sort_by(|a, b| (a.db, &a.key).cmp(&(b.db, &b.key)));
    let pages = streams.len().div_ceil(STREAMS_PER_PAGE).max(1);
    let mut rows = Vec::new();
    for s in streams.iter().skip(page * STREAMS_PER_PAGE).take(STREAMS_PER_PAGE) {
        let m = &s.m;
        let name = format!("<a href=\"{}\">{}</a>", esc(&stream_href(s.db, &s.key)), shown_key(s.db, &s.key));
        let dead = if s.key.ends_with(b":dlq") {
            format!(" <a href=\"{}\" class=\"dlq\">dead letters</a>", esc(&dlq_href(s.db, &s.key)))
        } else {
            String::new()
        };
        let stream_cells = vec![
            format!("{name}{dead}"),
            m.length.to_string(),
            rate(last_rate(site, &Series::In(s.db, s.key.clone()))),
            size(m.memory_bytes),
        ];
        if m.groups.is_empty() {
            let mut r = stream_cells;
            r.extend([
                "<span class=\"muted\">no groups</span>".to_owned(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
            rows.push(r);
            continue;
        }
        for (i, g) in m.groups.iter().enumerate() {
            let mut r = if i == 0 { stream_cells.clone() } else { vec![String::new(); 4] };
            r.extend([
                format!("<a href=\"{}\">{}</a>", esc(&group_href(s.db, &s.key, &g.name)), esc_b(&g.name)),
                g.lag.map_or_else(|| "?".to_owned(), |l| l.to_string()),
                if g.lag_ms > 0 { dur(g.lag_ms) } else { "-".to_owned() },
                g.pending.to_string(),
                g.oldest_pending_idle_ms.map_or_else(|| "-".to_owned(), dur),
                g.consumers.to_string(),
                g.counters.map_or_else(|| "-".to_owned(), |c| c.dead_lettered.to_string()),
            ]);
            rows.push(r);
        }
    }
    body.push_str(&table(
        "streams",
        &[
            "stream",
            "length",
            "in",
            "memory",
            "group",
            "lag",
            "lag age",
            "pending",
            "oldest pending",
            "consumers",
            "dead-lettered",
        ],
        &rows,
    ));
    if pages > 1 {
        let _ = write!(body, "<p class=\"pager\">page {} of {pages}", page + 1);
        if page > 0 {
            let _ = write!(body, " <a href=\"/?page={}\">previous</a>", page - 1);
        }
        if page + 1 < pages {
            let _ = write!(body, " <a href=\"/?page={}\">next</a>", page + 1);
        }
        body.push_str("</p>");
    }
    Ok(("Streams".to_owned(), body))
}

fn key_param(p: &Params) -> Result<(usize, Vec<u8>), String> {
    let key = p.get("key").filter(|k| !k.is_empty()).ok_or("No stream named (key=...).")?;
    Ok((p.db(), key.to_vec()))
}

fn row_of(site: &Site, db: usize, key: &[u8]) -> Result<StreamRow, String> {
    let st = site.shared.lock();
    crate::metrics::stream_row(&st, db, key, crate::clock::now_ms())
        .ok_or_else(|| format!("No stream {} in database {db}.", String::from_utf8_lossy(key)))
}

/// A map reply's (name, value) pairs as text.
fn pairs(r: &Reply) -> Vec<(String, Reply)> {
    match r {
        Reply::Map(m) => m.iter().map(|(k, v)| (client::text(k).unwrap_or_default(), v.clone())).collect(),
        _ => Vec::new(),
    }
}

fn reply_text(r: &Reply) -> String {
    match r {
        Reply::Integer(n) => n.to_string(),
        Reply::Array(v) => v.iter().map(reply_text).collect::<Vec<_>>().join(","),
        other => client::text(other).unwrap_or_default(),
    }
}

/// The policy's options that differ from the defaults, as "name value" text.
fn policy_summary(info: &[(String, Reply)], dlq_default: &[u8]) -> String {
    let mut parts = Vec::new();
    for (k, v) in info.iter().take(10) {
        let t = reply_text(v);
        let default = match k.as_str() {
            "deadletter" => t.as_bytes() == dlq_default,
            "backoff" | "orderby" => t.is_empty(),
            _ => t == "0",
        };
        if !default {
            parts.push(format!("{} {}", k.to_ascii_uppercase(), t));
        }
    }
    parts.join(" · ")
}

fn entry_fields(fields: &[(Bytes, Bytes)]) -> String {
    let mut out = String::from("<ul class=\"fields\">");
    for (f, v) in fields {
        let _ = write!(out, "<li><code>{}</code> = <code>{}</code></li>", esc_b(f), esc_b(v));
    }
    out.push_str("</ul>");
    out
}

/// `/stream`: one stream's figures, charts, groups (with policies), dead-letter streams and
/// newest entries.
pub fn stream(site: &Site, p: &Params) -> PageResult {
    let (db, key) = key_param(p)?;
    let row = row_of(site, db, &key)?;
    let m = &row.m;
    let shared = &site.shared;
    let dlq_default = rill_engine::types::stream::policy::default_dead_letter(&key);
    let mut dlqs: Vec<Bytes> = vec![dlq_default.clone()];
    if key.ends_with(b":dlq") {
        dlqs.push(Bytes::copy_from_slice(&key));
    }
    let (newest, policies) = {
        let mut st = shared.lock();
        let mut c = Client::new(shared, db);
        let newest = c.run(shared, &mut st, &[b"XREVRANGE", &key, b"+", b"-", b"COUNT", b"10"]);
        let mut policies = Vec::new();
        for g in &m.groups {
            if g.counters.is_some() {
                let info = pairs(&c.run(shared, &mut st, &[b"RILL.GROUP", b"INFO", &key, &g.name]));
                if let Some((_, Reply::Bulk(d))) = info.iter().find(|(k, _)| k == "deadletter") {
                    if !dlqs.contains(d) {
                        dlqs.push(d.clone());
                    }
                }
                policies.push((g.name.clone(), policy_summary(&info, &dlq_default)));
            }
        }
        // The dead-letter streams that exist, with their lengths.
        let now = crate::clock::now_ms();
        let dbs = st.engine.dbs();
        dlqs.retain(|d| {
            dbs.get(db)
                .and_then(|x| x.get_raw(d))
                .is_some_and(|e| !e.is_expired(now) && matches!(e.value, rill_engine::keyspace::Value::Stream(_)))
        });
        (newest, policies)
    };
    let mut body = format!("<h1>Stream {}</h1>", shown_key(db, &key));
    body.push_str(&figures(&[
        ("length", m.length.to_string()),
        ("entries added", m.entries_added.to_string()),
        ("in", rate(last_rate(site, &Series::In(db, row.key.clone())))),
        ("memory", size(m.memory_bytes)),
        ("groups", m.groups.len().to_string()),
        (
            "first entry",
            m.first_entry_ms.map_or_else(|| "-".to_owned(), |t| dur(crate::clock::now_ms() - t as i64) + " ago"),
        ),
        (
            "last entry",
            m.last_entry_ms.map_or_else(|| "-".to_owned(), |t| dur(crate::clock::now_ms() - t as i64) + " ago"),
        ),
    ]));
    let now = now_secs();
    let mut charts = String::new();
    {
        let h = site.history.lock().map_err(|_| "history unavailable".to_owned())?;
        let name = |g: &Bytes| String::from_utf8_lossy(g).into_owned();
        // Rates from the samples; lag and pending end with their value now.
        let mut rates = vec![("added".to_owned(), h.points(&Series::In(db, row.key.clone())))];
        let (mut lag, mut pending) = (Vec::new(), Vec::new());
        for g in &m.groups {
            let k = |f: fn(usize, Bytes, Bytes) -> Series| f(db, row.key.clone(), g.name.clone());
            rates.push((format!("{} delivered", name(&g.name)), h.points(&k(Series::Out))));
            let mut l = h.points(&k(Series::Lag));
            if let Some(v) = g.lag {
                l.push((now, v as f64));
            }
            lag.push((name(&g.name), l));
            let mut p = h.points(&k(Series::Pending));
            p.push((now, g.pending as f64));
            pending.push((name(&g.name), p));
        }
        charts.push_str(&chart("Entries per second", "chart-rates", &rates, now, "/s"));
        if !m.groups.is_empty() {
            charts.push_str(&chart("Lag (entries not yet delivered)", "chart-lag", &lag, now, "entries"));
            charts.push_str(&chart("Pending (delivered, not acknowledged)", "chart-pending", &pending, now, "entries"));
        }
    }
    let _ = write!(body, "<h2>Last hour</h2><div class=\"charts\">{charts}</div>");
    let rows: Vec<Vec<String>> = m
        .groups
        .iter()
        .map(|g| {
            let policy = policies
                .iter()
                .find(|(n, _)| n == &g.name)
                .map(|(_, s)| esc(s))
                .unwrap_or_else(|| "<span class=\"muted\">none</span>".to_owned());
            vec![
                format!("<a href=\"{}\">{}</a>", esc(&group_href(db, &key, &g.name)), esc_b(&g.name)),
                g.lag.map_or_else(|| "?".to_owned(), |l| l.to_string()),
                if g.lag_ms > 0 { dur(g.lag_ms) } else { "-".to_owned() },
                g.pending.to_string(),
                g.oldest_pending_idle_ms.map_or_else(|| "-".to_owned(), dur),
                g.consumers.to_string(),
                rate(last_rate(site, &Series::Out(db, row.key.clone(), g.name.clone()))),
                g.counters.map_or_else(|| "-".to_owned(), |c| c.dead_lettered.to_string()),
                if policy.is_empty() { "<span class=\"muted\">defaults</span>".to_owned() } else { policy },
            ]
        })
        .collect();
    body.push_str("<h2>Groups</h2>");
    body.push_str(&table(
        "groups",
        &["group", "lag", "lag age", "pending", "oldest pending", "consumers", "delivered", "dead-lettered", "policy"],
        &rows,
    ));
    body.push_str("<h2>Dead letters</h2>");
    if dlqs.is_empty() {
        let _ = write!(
            body,
            "<p class=\"muted\">No dead-letter stream ({} is where they would go by default).</p>",
            esc_b(&dlq_default)
        );
    } else {
        body.push_str("<ul>");
        for d in &dlqs {
            let _ = write!(body, "<li><a href=\"{}\">{}</a></li>", esc(&dlq_href(db, d)), esc_b(d));
        }
        body.push_str("</ul>");
    }
    let rows: Vec<Vec<String>> = client::entries(&newest)
        .iter()
        .map(|(id, f)| vec![format!("<span class=\"id\">{}</span>", esc(id)), entry_fields(f)])
        .collect();
    body.push_str("<h2>Newest entries</h2>");
    body.push_str(&table("entries", &["id", "fields"], &rows));
    Ok((format!("Stream {}", String::from_utf8_lossy(&key)), body))
}

/// `/group`: a group's consumers and pending entries, 100 at a time, with the actions.
pub fn group(site: &Site, p: &Params, read_only: bool) -> PageResult {
    let (db, key) = key_param(p)?;
    let group = p.get("group").filter(|g| !g.is_empty()).ok_or("No group named (group=...).")?.to_vec();
    let consumer = p.get("consumer").filter(|c| !c.is_empty()).map(<[u8]>::to_vec);
    let after = p.get("after").filter(|a| !a.is_empty()).map(<[u8]>::to_vec);
    let row = row_of(site, db, &key)?;
    let g = row.m.groups.iter().find(|g| g.name.as_ref() == group.as_slice()).ok_or_else(|| {
        format!("No group {} on stream {}.", String::from_utf8_lossy(&group), String::from_utf8_lossy(&key))
    })?;
    let shared = &site.shared;
    let (pel, policy) = {
        let mut st = shared.lock();
        let mut c = Client::new(shared, db);
        let start = after.as_ref().map_or_else(|| b"-".to_vec(), |a| [b"(".as_slice(), a].concat());
        let count = ENTRIES_PER_PAGE.to_string();
        let mut args: Vec<&[u8]> = vec![b"XPENDING", &key, &group, &start, b"+", count.as_bytes()];
        if let Some(cn) = &consumer {
            args.push(cn);
        }
        let pel = c.run(shared, &mut st, &args);
        let policy =
            g.counters.is_some().then(|| pairs(&c.run(shared, &mut st, &[b"RILL.GROUP", b"INFO", &key, &group])));
        (pel, policy)
    };
    if let Some(e) = client::error(&pel) {
        return Err(e);
    }
    let title = format!("{} / {}", String::from_utf8_lossy(&key), String::from_utf8_lossy(&group));
    let mut body = format!(
        "<h1><a href=\"{}\">{}</a> / group {}</h1>",
        esc(&stream_href(db, &key)),
        shown_key(db, &key),
        esc_b(&group)
    );
    body.push_str(&figures(&[
        ("lag", g.lag.map_or_else(|| "?".to_owned(), |l| l.to_string())),
        ("lag age", if g.lag_ms > 0 { dur(g.lag_ms) } else { "-".to_owned() }),
        ("pending", g.pending.to_string()),
        ("handed back (XNACK)", g.nacked.to_string()),
        ("oldest pending", g.oldest_pending_idle_ms.map_or_else(|| "-".to_owned(), dur)),
        ("consumers", g.consumers.to_string()),
    ]));
    body.push_str("<h2>Consumers</h2>");
    let base = group_href(db, &key, &group);
    let rows: Vec<Vec<String>> = g
        .consumer_details
        .iter()
        .map(|c| {
            vec![
                format!("<a href=\"{}&amp;consumer={}\">{}</a>", esc(&base), esc(&enc(&c.name)), esc_b(&c.name)),
                c.pending.to_string(),
                dur(c.idle_ms),
            ]
        })
        .collect();
    body.push_str(&table("consumers", &["consumer", "pending", "idle"], &rows));
    let whose = consumer
        .as_ref()
        .map_or_else(String::new, |c| format!(" of {} (<a href=\"{}\">all</a>)", esc_b(c), esc(&base)));
    let _ = write!(body, "<h2>Pending entries{whose}</h2>");
    let mut back = base.clone();
    if let Some(cn) = &consumer {
        let _ = write!(back, "&consumer={}", enc(cn));
    }
    if let Some(a) = &after {
        let _ = write!(back, "&after={}", enc(a));
    }
    let entries = client::items(&pel);
    let mut rows = Vec::new();
    let mut last_id = None;
    for e in &entries {
        let f = client::items(e);
        let id = f.first().and_then(client::text).unwrap_or_default();
        let owner = f.get(1).and_then(client::text).unwrap_or_default();
        let idle = f.get(2).and_then(client::int).unwrap_or(0);
        let deliveries = f.get(3).and_then(client::int).unwrap_or(0);
        let mut r = Vec::new();
        if !read_only {
            r.push(format!(
                "<input type=\"checkbox\" name=\"id\" value=\"{}\" aria-label=\"select {}\">",
                esc(&id),
                esc(&id)
            ));
        }
        r.extend([format!("<span class=\"id\">{}</span>", esc(&id)), esc(&owner), dur(idle), deliveries.to_string()]);
        rows.push(r);
        last_id = Some(id);
    }
    let head: &[&str] = if read_only {
        &["id", "consumer", "idle", "deliveries"]
    } else {
        &["", "id", "consumer", "idle", "deliveries"]
    };
    if read_only {
        body.push_str(&table("pel", head, &rows));
    } else {
        body.push_str(&form_head(&site.token, &back, db, &key));
        let _ = write!(body, "<input type=\"hidden\" name=\"group\" value=\"{}\">", esc(&enc(&group)));
        body.push_str(&table("pel", head, &rows));
        body.push_str(
            "<div class=\"actions\"><button name=\"op\" value=\"ack\" id=\"ack\">Acknowledge</button>\
             <button name=\"op\" value=\"handback\" id=\"handback\">Hand back</button>\
             <label>to consumer <input type=\"text\" name=\"consumer\" id=\"claim-consumer\" size=\"14\"></label>\
             <button name=\"op\" value=\"claim\" id=\"claim\">Claim</button></div></form>",
        );
    }
    if entries.len() == ENTRIES_PER_PAGE {
        if let Some(last) = last_id {
            let mut next = base.clone();
            if let Some(cn) = &consumer {
                let _ = write!(next, "&consumer={}", enc(cn));
            }
            let _ = write!(
                body,
                "<p class=\"pager\"><a href=\"{}&amp;after={}\">next {ENTRIES_PER_PAGE}</a></p>",
                esc(&next),
                esc(&enc(last.as_bytes()))
            );
        }
    }
    // The policy last: the pending entries are what this page is opened for.
    if let Some(info) = &policy {
        body.push_str("<h2>Policy</h2>");
        let rows: Vec<Vec<String>> = info.iter().map(|(k, v)| vec![esc(k), esc(&reply_text(v))]).collect();
        body.push_str(&table("policy", &["option / counter", "value"], &rows));
    }
    Ok((title, body))
}

/// `/dlq`: a dead-letter stream's letters with their provenance, 100 at a time, with replay
/// and purge.
pub fn dlq(site: &Site, p: &Params, read_only: bool) -> PageResult {
    let (db, key) = key_param(p)?;
    let after = p.get("after").filter(|a| !a.is_empty()).map(<[u8]>::to_vec);
    let row = row_of(site, db, &key)?;
    let shared = &site.shared;
    let page = {
        let mut st = shared.lock();
        let mut c = Client::new(shared, db);
        let start = after.as_ref().map_or_else(|| b"-".to_vec(), |a| [b"(".as_slice(), a].concat());
        let count = ENTRIES_PER_PAGE.to_string();
        c.run(shared, &mut st, &[b"XRANGE", &key, &start, b"+", b"COUNT", count.as_bytes()])
    };
    if let Some(e) = client::error(&page) {
        return Err(e);
    }
    let entries = client::entries(&page);
    let mut body =
        format!("<h1>Dead letters in <a href=\"{}\">{}</a></h1>", esc(&stream_href(db, &key)), shown_key(db, &key));
    body.push_str(&figures(&[("entries", row.m.length.to_string()), ("memory", size(row.m.memory_bytes))]));
    let mut back = dlq_href(db, &key);
    if let Some(a) = &after {
        let _ = write!(back, "&after={}", enc(a));
    }
    let mut rows = Vec::new();
    for (id, fields) in &entries {
        let letter = dlq::parse(fields);
        let mut r = Vec::new();
        if !read_only {
            r.push(if letter.is_some() {
                format!("<input type=\"checkbox\" name=\"id\" value=\"{}\" aria-label=\"select {}\">", esc(id), esc(id))
            } else {
                String::new()
            });
        }
        r.push(format!("<span class=\"id\">{}</span>", esc(id)));
        match letter {
            Some(l) => r.extend([
                format!("<a href=\"{}\">{}</a>", esc(&stream_href(db, &l.source_stream)), esc_b(&l.source_stream)),
                format!("<span class=\"id\">{}</span>", esc(&l.source_id)),
                esc(&l.group),
                esc(&l.consumer),
                esc(&l.deliveries),
                esc(&l.reason),
                entry_fields(&l.fields),
            ]),
            None => r.extend([
                "<span class=\"muted\">not a dead letter (no provenance)</span>".to_owned(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                entry_fields(fields),
            ]),
        }
        rows.push(r);
    }
    let mut head = vec!["id", "source", "source id", "group", "consumer", "deliveries", "reason", "fields"];
    if !read_only {
        head.insert(0, "");
    }
    if read_only {
        body.push_str(&table("letters", &head, &rows));
    } else {
        body.push_str(&form_head(&site.token, &back, db, &key));
        body.push_str(&table("letters", &head, &rows));
        body.push_str(
            "<div class=\"actions\"><button name=\"op\" value=\"replay\" id=\"replay\">Replay selected</button>\
             <button name=\"op\" value=\"purge\" id=\"purge\" class=\"danger\">Purge selected</button></div></form>",
        );
        body.push_str(&form_head(&site.token, &dlq_href(db, &key), db, &key));
        body.push_str(
            "<div class=\"actions\"><button name=\"op\" value=\"replay-all\" id=\"replay-all\">Replay all</button>\
             <button name=\"op\" value=\"purge-all\" id=\"purge-all\" class=\"danger\">Purge all</button>\
             <span class=\"muted\">every letter of this stream; entries without provenance are kept</span></div></form>",
        );
    }
    if entries.len() == ENTRIES_PER_PAGE {
        if let Some((last, _)) = entries.last() {
            let _ = write!(
                body,
                "<p class=\"pager\"><a href=\"{}&amp;after={}\">next {ENTRIES_PER_PAGE}</a></p>",
                esc(&dlq_href(db, &key)),
                esc(&enc(last.as_bytes()))
            );
        }
    }
    Ok((format!("Dead letters in {}", String::from_utf8_lossy(&key)), body))
}

/// `/replication`: `INFO replication` and each replica's lag.
pub fn replication(site: &Site) -> PageResult {
    let shared = &site.shared;
    let (info, f) = {
        let mut st = shared.lock();
        let mut c = Client::new(shared, 0);
        let info = c.run(shared, &mut st, &[b"INFO", b"replication"]);
        let f = crate::metrics::server_figures(shared, &st, crate::clock::now_ms());
        (info, f)
    };
    let text = client::text(&info).unwrap_or_default();
    let fields: Vec<(String, String)> =
        text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_owned(), v.trim_end().to_owned())).collect();
    let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
    let mut body = String::from("<h1>Replication</h1>");
    body.push_str(&figures(&[
        ("role", get("role")),
        ("offset", get("master_repl_offset")),
        ("replicas", get("connected_slaves")),
        ("full syncs", f.syncs.0.to_string()),
        ("partial syncs", f.syncs.1.to_string()),
    ]));
    if f.replica {
        let _ = write!(
            body,
            "<p>Following <code>{}:{}</code>, link <strong>{}</strong>, last I/O {} s ago.</p>",
            esc(&get("master_host")),
            esc(&get("master_port")),
            esc(&get("master_link_status")),
            esc(&get("master_last_io_seconds_ago"))
        );
    }
    let rows: Vec<Vec<String>> = f
        .replicas
        .iter()
        .map(|r| vec![esc(&r.addr), format!("{} bytes", r.lag_bytes), format!("{:.1} s", r.ack_age_secs)])
        .collect();
    body.push_str("<h2>Replicas</h2>");
    body.push_str(&table("replicas", &["address", "behind", "last ack"], &rows));
    let rows: Vec<Vec<String>> = fields.iter().map(|(k, v)| vec![format!("<code>{}</code>", esc(k)), esc(v)]).collect();
    body.push_str("<h2>INFO replication</h2>");
    body.push_str(&table("info", &["field", "value"], &rows));
    Ok(("Replication".to_owned(), body))
}
