//! Read-only views an operator wants: pending entries and consumer groups of a stream.

use redis::Value;

use crate::conn::Connection;
use crate::error::WorkerError;
use crate::reply::{as_array, as_int, as_string, map_get, map_pairs, pending_entries, pending_summary};
pub use crate::reply::{PendingEntry, PendingSummary};

/// One consumer of a group, from XINFO CONSUMERS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerInfo {
    pub name: String,
    pub pending: u64,
    /// Milliseconds since the consumer last tried to read or claim.
    pub idle_ms: i64,
    /// Milliseconds since it last got an entry; -1 if it never did (Redis < 7.2 leaves it out).
    pub inactive_ms: Option<i64>,
}

/// The pending entries of a group: XPENDING summary, consumers, and the entries oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingReport {
    pub summary: PendingSummary,
    pub consumers: Vec<ConsumerInfo>,
    /// Sorted by idle time, longest first (the oldest delivery first). Entries handed back
    /// with XNACK (idle -1, no owner) come first: they wait for any consumer.
    pub entries: Vec<PendingEntry>,
}

/// One consumer group, from XINFO GROUPS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    pub name: String,
    pub consumers: u64,
    pub pending: u64,
    pub last_delivered_id: String,
    /// Entries the group has read; `None` when the server cannot tell.
    pub entries_read: Option<i64>,
    /// Entries not yet delivered to the group; `None` when the server cannot tell.
    pub lag: Option<i64>,
}

/// XPENDING summary, XINFO CONSUMERS, and up to `limit` pending entries.
pub async fn pending(
    conn: &mut Connection,
    stream: &str,
    group: &str,
    limit: usize,
) -> Result<PendingReport, WorkerError> {
    let summary: Value = redis::cmd("XPENDING")
        .arg(stream)
        .arg(group)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("XPENDING"))?;
    let summary = pending_summary(&summary)?;
    let rows: Value = redis::cmd("XPENDING")
        .arg(stream)
        .arg(group)
        .arg("-")
        .arg("+")
        .arg(limit)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("XPENDING range"))?;
    let mut entries = pending_entries(&rows)?;
    entries.sort_by_key(|e| (e.idle_ms >= 0, std::cmp::Reverse(e.idle_ms)));
    let consumers = consumers(conn, stream, group).await?;
    Ok(PendingReport { summary, consumers, entries })
}

/// XINFO CONSUMERS.
pub async fn consumers(conn: &mut Connection, stream: &str, group: &str) -> Result<Vec<ConsumerInfo>, WorkerError> {
    let v: Value = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg(stream)
        .arg(group)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("XINFO CONSUMERS"))?;
    Ok(as_array(&v)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| {
            let m = map_pairs(c);
            Some(ConsumerInfo {
                name: as_string(map_get(&m, "name")?)?,
                pending: u64::try_from(as_int(map_get(&m, "pending")?)?).ok()?,
                idle_ms: as_int(map_get(&m, "idle")?)?,
                inactive_ms: map_get(&m, "inactive").and_then(as_int),
            })
        })
        .collect())
}

/// XINFO GROUPS.
pub async fn groups(conn: &mut Connection, stream: &str) -> Result<Vec<GroupInfo>, WorkerError> {
    let v: Value = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(stream)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("XINFO GROUPS"))?;
    Ok(as_array(&v)
        .unwrap_or_default()
        .iter()
        .filter_map(|g| {
            let m = map_pairs(g);
            Some(GroupInfo {
                name: as_string(map_get(&m, "name")?)?,
                consumers: u64::try_from(as_int(map_get(&m, "consumers")?)?).ok()?,
                pending: u64::try_from(as_int(map_get(&m, "pending")?)?).ok()?,
                last_delivered_id: map_get(&m, "last-delivered-id").and_then(as_string).unwrap_or_default(),
                entries_read: map_get(&m, "entries-read").and_then(as_int),
                lag: map_get(&m, "lag").and_then(as_int),
            })
        })
        .collect())
}

/// XLEN.
pub async fn length(conn: &mut Connection, stream: &str) -> Result<u64, WorkerError> {
    redis::cmd("XLEN").arg(stream).query_async(conn).await.map_err(WorkerError::redis("XLEN"))
}

/// The highest ID below which every group has read and acked everything: the minimum, over
/// all groups, of the oldest pending ID and the last-delivered ID. `XTRIM key MINID <id>`
/// (or `MINID ~ <id>`) then drops only entries no group still needs. `None` when the stream
/// has no groups (nothing says what is safe).
pub async fn safe_trim_id(conn: &mut Connection, stream: &str) -> Result<Option<String>, WorkerError> {
    let groups = groups(conn, stream).await?;
    let mut safe: Option<(u64, u64)> = None;
    for g in &groups {
        let mut point = parse_id(&g.last_delivered_id);
        if g.pending > 0 {
            let v: Value = redis::cmd("XPENDING")
                .arg(stream)
                .arg(&g.name)
                .query_async(conn)
                .await
                .map_err(WorkerError::redis("XPENDING"))?;
            if let Some(oldest) = pending_summary(&v)?.smallest {
                point = point.min(parse_id(&oldest));
            }
        }
        safe = Some(safe.map_or(point, |s| s.min(point)));
    }
    Ok(safe.map(|(ms, seq)| format!("{ms}-{seq}")))
}

/// `XTRIM stream MINID ~ <safe_trim_id>`; returns the entries removed (0 without groups).
pub async fn trim_acked(conn: &mut Connection, stream: &str) -> Result<u64, WorkerError> {
    let Some(id) = safe_trim_id(conn, stream).await? else {
        return Ok(0);
    };
    redis::cmd("XTRIM")
        .arg(stream)
        .arg("MINID")
        .arg("~")
        .arg(&id)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("XTRIM MINID"))
}

fn parse_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}
