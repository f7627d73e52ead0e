//! The operator commands: pending, groups, tail (the dead-letter ones are in `dead_letters`).

use redis::Value;
use rill_worker::reply::{entry_list, read_reply};
use rill_worker::{ops, Connection, Target};

use crate::output::{fields_inline, human_ms, Json, Table};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

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
