//! The operator commands: pending, groups, tail, dlq list/show/replay/purge.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use redis::Value;
use rill_worker::dlq::{self, DeadLetter};
use rill_worker::reply::{entry_list, read_reply};
use rill_worker::{keys, ops, Connection, Target, WorkerError};

use crate::output::{human_ms, lossy, Json, Table};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The dead-letter stream of `stream`: `--dlq` if given, else the default derived name.
pub fn dlq_name(stream: &str, explicit: Option<String>) -> Result<String> {
    match explicit {
        Some(name) => Ok(name),
        None => Ok(keys::default_dead_letter_stream(stream)?),
    }
}

fn fields_inline(fields: &[(Vec<u8>, Vec<u8>)]) -> String {
    fields.iter().map(|(f, v)| format!("{}={}", lossy(f), lossy(v))).collect::<Vec<_>>().join(" ")
}

// --- pending ----------------------------------------------------------------------------------

pub async fn pending(conn: &mut Connection, stream: &str, group: &str, count: usize, json: bool) -> Result<()> {
    let report = ops::pending(conn, stream, group, count).await?;
    if json {
        let doc = Json::obj([
            ("stream", Json::str(stream)),
            ("group", Json::str(group)),
            ("pending", Json::uint(report.summary.count)),
            ("smallest", report.summary.smallest.clone().map_or(Json::Null, Json::Str)),
            ("largest", report.summary.largest.clone().map_or(Json::Null, Json::Str)),
            (
                "consumers",
                Json::Array(
                    report
                        .consumers
                        .iter()
                        .map(|c| {
                            Json::obj([
                                ("name", Json::str(&c.name)),
                                ("pending", Json::uint(c.pending)),
                                ("idle_ms", Json::Int(c.idle_ms)),
                                ("inactive_ms", Json::opt_int(c.inactive_ms)),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "entries",
                Json::Array(
                    report
                        .entries
                        .iter()
                        .map(|e| {
                            Json::obj([
                                ("id", Json::str(&e.id)),
                                ("consumer", Json::str(&e.consumer)),
                                ("idle_ms", Json::Int(e.idle_ms)),
                                ("deliveries", Json::uint(e.deliveries)),
                            ])
                        })
                        .collect(),
                ),
            ),
        ]);
        println!("{}", doc.render());
        return Ok(());
    }
    print!("{}", pending_text(stream, group, &report));
    Ok(())
}

/// The human form of a pending report (shared with the demos).
pub fn pending_text(stream: &str, group: &str, report: &ops::PendingReport) -> String {
    let s = &report.summary;
    let mut out = format!("{stream} / {group}: {} pending", s.count);
    if let (Some(lo), Some(hi)) = (&s.smallest, &s.largest) {
        out.push_str(&format!(" ({lo} .. {hi})"));
    }
    out.push('\n');
    if !report.consumers.is_empty() {
        let mut t = Table::new(["consumer", "pending", "idle", "inactive"]);
        for c in &report.consumers {
            t.row(vec![
                c.name.clone(),
                c.pending.to_string(),
                human_ms(c.idle_ms),
                c.inactive_ms.map_or("-".to_owned(), human_ms),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    if !report.entries.is_empty() {
        let mut t = Table::new(["id", "consumer", "idle", "deliveries"]);
        for e in &report.entries {
            let consumer = if e.consumer.is_empty() { "(returned)".to_owned() } else { e.consumer.clone() };
            t.row(vec![e.id.clone(), consumer, human_ms(e.idle_ms), e.deliveries.to_string()]);
        }
        out.push('\n');
        out.push_str(&t.render());
        if (report.entries.len() as u64) < s.count {
            out.push_str(&format!("... {} more (use --count)\n", s.count - report.entries.len() as u64));
        }
    }
    out
}

// --- groups -----------------------------------------------------------------------------------

pub async fn groups(conn: &mut Connection, stream: &str, json: bool) -> Result<()> {
    let groups = ops::groups(conn, stream).await?;
    let length = ops::length(conn, stream).await?;
    if json {
        let doc = Json::obj([
            ("stream", Json::str(stream)),
            ("length", Json::uint(length)),
            (
                "groups",
                Json::Array(
                    groups
                        .iter()
                        .map(|g| {
                            Json::obj([
                                ("name", Json::str(&g.name)),
                                ("consumers", Json::uint(g.consumers)),
                                ("pending", Json::uint(g.pending)),
                                ("lag", Json::opt_int(g.lag)),
                                ("last_delivered_id", Json::str(&g.last_delivered_id)),
                                ("entries_read", Json::opt_int(g.entries_read)),
                            ])
                        })
                        .collect(),
                ),
            ),
        ]);
        println!("{}", doc.render());
        return Ok(());
    }
    print!("{}", groups_text(stream, length, &groups));
    Ok(())
}

pub fn groups_text(stream: &str, length: u64, groups: &[ops::GroupInfo]) -> String {
    let mut out = format!("{stream}: {length} entries, {} groups\n", groups.len());
    if groups.is_empty() {
        return out;
    }
    let mut t = Table::new(["group", "consumers", "pending", "lag", "last-delivered", "entries-read"]);
    for g in groups {
        let opt = |v: Option<i64>| v.map_or("?".to_owned(), |n| n.to_string());
        t.row(vec![
            g.name.clone(),
            g.consumers.to_string(),
            g.pending.to_string(),
            opt(g.lag),
            g.last_delivered_id.clone(),
            opt(g.entries_read),
        ]);
    }
    out.push('\n');
    out.push_str(&t.render());
    out
}

// --- tail -------------------------------------------------------------------------------------

/// Where an entry stands in a group.
async fn group_status(conn: &mut Connection, stream: &str, group: &str, id: &str) -> Result<(String, Json)> {
    let v: Value = redis::cmd("XPENDING").arg(stream).arg(group).arg(id).arg(id).arg(1).query_async(conn).await?;
    if let Some(p) = rill_worker::reply::pending_entries(&v)?.into_iter().next() {
        let who = if p.consumer.is_empty() { "(returned)".to_owned() } else { p.consumer.clone() };
        let text = format!("pending: {who}, {} deliveries", p.deliveries);
        let json = Json::obj([
            ("state", Json::str("pending")),
            ("consumer", Json::str(p.consumer)),
            ("deliveries", Json::uint(p.deliveries)),
        ]);
        return Ok((text, json));
    }
    let groups = ops::groups(conn, stream).await?;
    let Some(g) = groups.iter().find(|g| g.name == group) else {
        return Ok(("no such group".to_owned(), Json::obj([("state", Json::str("no-group"))])));
    };
    let delivered = crate::demo::id_le(id, &g.last_delivered_id);
    let state = if delivered { "acked" } else { "not delivered" };
    Ok((state.to_owned(), Json::obj([("state", Json::str(state))])))
}

pub async fn tail(
    target: &Target,
    stream: &str,
    group: Option<&str>,
    history: usize,
    limit: Option<usize>,
    json: bool,
) -> Result<()> {
    let mut reader = target.connect(None).await?;
    let mut conn = target.connect(None).await?;
    let mut printed = 0usize;
    let mut cursor = "$".to_owned();
    if history > 0 {
        let v: Value = redis::cmd("XREVRANGE")
            .arg(stream)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(history)
            .query_async(&mut conn)
            .await?;
        let mut entries = entry_list(&v, "XREVRANGE")?;
        entries.reverse();
        if let Some(last) = entries.last() {
            cursor = last.id.clone();
        }
        for e in entries {
            print_tail(&mut conn, stream, group, &e.id, &e.fields.unwrap_or_default(), json).await?;
            printed += 1;
            if limit.is_some_and(|l| printed >= l) {
                return Ok(());
            }
        }
    }
    loop {
        let v: Value = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(100)
            .arg("BLOCK")
            .arg(1000)
            .arg("STREAMS")
            .arg(stream)
            .arg(&cursor)
            .query_async(&mut reader)
            .await?;
        for e in read_reply(&v, stream, "XREAD")? {
            cursor = e.id.clone();
            print_tail(&mut conn, stream, group, &e.id, &e.fields.unwrap_or_default(), json).await?;
            printed += 1;
            if limit.is_some_and(|l| printed >= l) {
                return Ok(());
            }
        }
    }
}

async fn print_tail(
    conn: &mut Connection,
    stream: &str,
    group: Option<&str>,
    id: &str,
    fields: &[(Vec<u8>, Vec<u8>)],
    json: bool,
) -> Result<()> {
    let status = match group {
        Some(g) => Some(group_status(conn, stream, g, id).await?),
        None => None,
    };
    if json {
        let mut pairs = vec![("id".to_owned(), Json::str(id)), ("fields".to_owned(), Json::fields(fields))];
        if let Some((_, j)) = status {
            pairs.push(("group".to_owned(), j));
        }
        println!("{}", Json::Object(pairs).render());
    } else {
        match status {
            Some((text, _)) => println!("{id}  {}  [{text}]", fields_inline(fields)),
            None => println!("{id}  {}", fields_inline(fields)),
        }
    }
    Ok(())
}

// --- dlq --------------------------------------------------------------------------------------

fn letter_json(l: &DeadLetter) -> Json {
    Json::obj([
        ("id", Json::str(&l.id)),
        ("source_stream", Json::str(&l.source_stream)),
        ("source_id", Json::str(&l.source_id)),
        ("group", Json::str(&l.group)),
        ("consumer", Json::str(&l.consumer)),
        ("deliveries", Json::uint(l.deliveries)),
        ("reason", Json::str(&l.reason)),
        ("fields", Json::fields(&l.fields)),
    ])
}

pub fn dlq_table(letters: &[DeadLetter]) -> String {
    let mut t = Table::new(["id", "source-id", "deliveries", "reason", "fields"]);
    for l in letters {
        t.row(vec![
            l.id.clone(),
            l.source_id.clone(),
            l.deliveries.to_string(),
            l.reason.clone(),
            fields_inline(&l.fields),
        ]);
    }
    t.render()
}

pub async fn dlq_list(conn: &mut Connection, dlq_stream: &str, count: usize, json: bool) -> Result<()> {
    let letters = dlq::list(conn, dlq_stream, "-", count).await?;
    let total = ops::length(conn, dlq_stream).await?;
    if json {
        let doc = Json::obj([
            ("dlq", Json::str(dlq_stream)),
            ("length", Json::uint(total)),
            ("letters", Json::Array(letters.iter().map(letter_json).collect())),
        ]);
        println!("{}", doc.render());
        return Ok(());
    }
    println!("{dlq_stream}: {total} dead letters");
    if !letters.is_empty() {
        println!();
        print!("{}", dlq_table(&letters));
    }
    Ok(())
}

pub async fn dlq_show(conn: &mut Connection, dlq_stream: &str, id: &str, json: bool) -> Result<()> {
    let Some(l) = dlq::get(conn, dlq_stream, id).await? else {
        return Err(format!("no dead letter {id} in {dlq_stream}").into());
    };
    if json {
        println!("{}", letter_json(&l).render());
        return Ok(());
    }
    let mut t = Table::new(["field", "value"]);
    for (f, v) in &l.fields {
        t.row(vec![lossy(f), lossy(v)]);
    }
    println!("dead letter {} in {dlq_stream}", l.id);
    println!("  from      {} {}", l.source_stream, l.source_id);
    println!("  group     {} (consumer {})", l.group, l.consumer);
    println!("  delivered {} times", l.deliveries);
    println!("  reason    {}", l.reason);
    println!();
    print!("{}", t.render());
    Ok(())
}

/// Collects the letters to act on: the given IDs, or every letter.
async fn letters(conn: &mut Connection, dlq_stream: &str, ids: &[String]) -> Result<Vec<DeadLetter>> {
    if ids.is_empty() {
        let mut all = Vec::new();
        let mut start = "-".to_owned();
        loop {
            let page = dlq::list(conn, dlq_stream, &start, 500).await?;
            let Some(last) = page.last() else { break };
            start = format!("({}", last.id);
            let done = page.len() < 500;
            all.extend(page);
            if done {
                break;
            }
        }
        return Ok(all);
    }
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match dlq::get(conn, dlq_stream, id).await? {
            Some(l) => out.push(l),
            None => return Err(format!("no dead letter {id} in {dlq_stream}").into()),
        }
    }
    Ok(out)
}

fn progress(len: usize, json: bool, verb: &str) -> ProgressBar {
    if json || len < 50 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(verb.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

pub async fn dlq_replay(conn: &mut Connection, dlq_stream: &str, ids: &[String], json: bool) -> Result<()> {
    let letters = letters(conn, dlq_stream, ids).await?;
    let bar = progress(letters.len(), json, "replaying");
    let mut replayed = Vec::with_capacity(letters.len());
    let mut failure: Option<WorkerError> = None;
    for l in &letters {
        match dlq::replay(conn, dlq_stream, l).await {
            Ok(new_id) => {
                bar.inc(1);
                replayed.push((l.id.clone(), l.source_stream.clone(), new_id));
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    bar.finish_and_clear();
    if json {
        let doc = Json::obj([
            ("dlq", Json::str(dlq_stream)),
            (
                "replayed",
                Json::Array(
                    replayed
                        .iter()
                        .map(|(old, stream, new)| {
                            Json::obj([
                                ("dead_letter", Json::str(old)),
                                ("stream", Json::str(stream)),
                                ("id", Json::str(new)),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("error", failure.as_ref().map_or(Json::Null, |e| Json::str(e.to_string()))),
        ]);
        println!("{}", doc.render());
    } else {
        for (old, stream, new) in &replayed {
            println!("{old} -> {stream} {new}");
        }
        println!("replayed {} of {} dead letters", replayed.len(), letters.len());
    }
    match failure {
        Some(e) => Err(format!("replay stopped: {e} (that dead letter and the rest are still in {dlq_stream})").into()),
        None => Ok(()),
    }
}

pub async fn dlq_purge(conn: &mut Connection, dlq_stream: &str, ids: &[String], all: bool, json: bool) -> Result<()> {
    if ids.is_empty() && !all {
        return Err("name the dead letters to purge, or pass --all".into());
    }
    let ids: Vec<String> =
        if all { letters(conn, dlq_stream, &[]).await?.into_iter().map(|l| l.id).collect() } else { ids.to_vec() };
    let bar = progress(ids.len(), json, "purging");
    let mut deleted = 0;
    for chunk in ids.chunks(500) {
        deleted += dlq::purge(conn, dlq_stream, chunk).await?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    if json {
        println!("{}", Json::obj([("dlq", Json::str(dlq_stream)), ("deleted", Json::uint(deleted))]).render());
    } else {
        println!("deleted {deleted} dead letters from {dlq_stream}");
    }
    Ok(())
}
