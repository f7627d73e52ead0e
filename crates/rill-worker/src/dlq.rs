//! Dead letters: the entry format, the atomic move, and replay.
//!
//! A dead letter is the original entry's fields, in order, followed by six provenance fields:
//!
//! ```text
//! <field 1> <value 1> ... <field n> <value n>      every original field, unchanged
//! rill-source-stream  <stream the entry came from>
//! rill-source-id      <its ID there>
//! rill-group          <consumer group that gave up on it>
//! rill-consumer       <consumer that moved it>
//! rill-deliveries     <delivery count when it was moved>
//! rill-reason         <why: the handler's message, or the delivery limit>
//! ```
//!
//! The provenance is recognised by position (the last six fields, with exactly these names), so
//! an original entry that happens to have a field called `rill-reason` still replays intact.
//!
//! Moving is one transaction, `MULTI; XADD <dlq> * ...; XACK <stream> <group> <id>; EXEC`: the
//! entry is never both pending and dead-lettered, nor neither. On a cluster both keys must share
//! a slot (see [`crate::keys`]). Replay is the reverse but *not* a transaction: `XADD` to the
//! source stream first, and `XDEL` the dead letter only once that add succeeded — a failed add
//! inside MULTI would not stop the XDEL.

use redis::Value;

use crate::conn::Connection;
use crate::error::WorkerError;
use crate::reply::{entry_list, RawEntry};

/// Field names of the provenance block, in the order they are written.
pub mod field {
    pub const SOURCE_STREAM: &str = "rill-source-stream";
    pub const SOURCE_ID: &str = "rill-source-id";
    pub const GROUP: &str = "rill-group";
    pub const CONSUMER: &str = "rill-consumer";
    pub const DELIVERIES: &str = "rill-deliveries";
    pub const REASON: &str = "rill-reason";
    /// All of them, in order.
    pub const ALL: [&str; 6] = [SOURCE_STREAM, SOURCE_ID, GROUP, CONSUMER, DELIVERIES, REASON];
}

/// One entry of a dead-letter stream, split into original fields and provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Its ID in the dead-letter stream.
    pub id: String,
    pub source_stream: String,
    pub source_id: String,
    pub group: String,
    pub consumer: String,
    pub deliveries: u64,
    pub reason: String,
    /// The original entry's fields.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl DeadLetter {
    /// Splits a dead-letter stream entry; `None` when it lacks the provenance block (not
    /// written by rill-worker) or its payload was deleted.
    pub fn from_raw(raw: RawEntry) -> Option<DeadLetter> {
        let mut fields = raw.fields?;
        let split = fields.len().checked_sub(field::ALL.len())?;
        let provenance = fields.split_off(split);
        let names_match =
            provenance.iter().zip(field::ALL).all(|((name, _), expected)| name.as_slice() == expected.as_bytes());
        if !names_match {
            return None;
        }
        let mut values = provenance.into_iter().map(|(_, v)| String::from_utf8_lossy(&v).into_owned());
        let mut next = || values.next().unwrap_or_default();
        Some(DeadLetter {
            id: raw.id,
            source_stream: next(),
            source_id: next(),
            group: next(),
            consumer: next(),
            deliveries: next().parse().unwrap_or(0),
            reason: next(),
            fields,
        })
    }
}

/// What [`move_to_dead_letter`] is told about the entry.
#[derive(Debug, Clone, Copy)]
pub struct Provenance<'a> {
    pub stream: &'a str,
    pub id: &'a str,
    pub group: &'a str,
    pub consumer: &'a str,
    pub deliveries: u64,
    pub reason: &'a str,
}

/// `MULTI; XADD dlq * fields... provenance...; XACK stream group id; EXEC`. Returns the new
/// dead letter's ID and whether the XACK found the entry still pending.
pub async fn move_to_dead_letter(
    conn: &mut Connection,
    dead_letter_stream: &str,
    fields: &[(Vec<u8>, Vec<u8>)],
    p: Provenance<'_>,
) -> Result<(String, bool), WorkerError> {
    let mut xadd = redis::cmd("XADD");
    xadd.arg(dead_letter_stream).arg("*");
    for (f, v) in fields {
        xadd.arg(f.as_slice()).arg(v.as_slice());
    }
    let deliveries = p.deliveries.to_string();
    let values = [p.stream, p.id, p.group, p.consumer, deliveries.as_str(), p.reason];
    for (name, value) in field::ALL.iter().zip(values) {
        xadd.arg(*name).arg(value);
    }
    let mut xack = redis::cmd("XACK");
    xack.arg(p.stream).arg(p.group).arg(p.id);
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .add_command(xadd)
        .add_command(xack)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("dead-letter MULTI"))?;
    match replies.as_slice() {
        [id, acked] => {
            let id =
                crate::reply::as_string(id).ok_or_else(|| WorkerError::reply("dead-letter MULTI", "XADD reply"))?;
            Ok((id, crate::reply::as_int(acked) == Some(1)))
        }
        _ => Err(WorkerError::reply("dead-letter MULTI", "EXEC did not return two replies")),
    }
}

/// Dead letters of `dead_letter_stream` from `start` (inclusive, `-` for the first), at most
/// `count`. Entries without rill provenance are skipped.
pub async fn list(
    conn: &mut Connection,
    dead_letter_stream: &str,
    start: &str,
    count: usize,
) -> Result<Vec<DeadLetter>, WorkerError> {
    let v: Value = redis::cmd("XRANGE")
        .arg(dead_letter_stream)
        .arg(start)
        .arg("+")
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("XRANGE dead letters"))?;
    Ok(entry_list(&v, "XRANGE")?.into_iter().filter_map(DeadLetter::from_raw).collect())
}

/// One dead letter by ID.
pub async fn get(conn: &mut Connection, dead_letter_stream: &str, id: &str) -> Result<Option<DeadLetter>, WorkerError> {
    let v: Value = redis::cmd("XRANGE")
        .arg(dead_letter_stream)
        .arg(id)
        .arg(id)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("XRANGE dead letter"))?;
    Ok(entry_list(&v, "XRANGE")?.into_iter().next().and_then(DeadLetter::from_raw))
}

/// Re-adds the original fields to the source stream, then deletes the dead letter. Returns the
/// new ID in the source stream. If the XADD fails the dead letter stays where it was.
pub async fn replay(
    conn: &mut Connection,
    dead_letter_stream: &str,
    letter: &DeadLetter,
) -> Result<String, WorkerError> {
    let mut xadd = redis::cmd("XADD");
    xadd.arg(&letter.source_stream).arg("*");
    for (f, v) in &letter.fields {
        xadd.arg(f.as_slice()).arg(v.as_slice());
    }
    let new_id: String = xadd.query_async(conn).await.map_err(WorkerError::redis("XADD replayed entry"))?;
    redis::cmd("XDEL")
        .arg(dead_letter_stream)
        .arg(&letter.id)
        .query_async::<i64>(conn)
        .await
        .map_err(WorkerError::redis("XDEL replayed dead letter"))?;
    Ok(new_id)
}

/// Deletes dead letters by ID; returns how many existed.
pub async fn purge(conn: &mut Connection, dead_letter_stream: &str, ids: &[String]) -> Result<u64, WorkerError> {
    if ids.is_empty() {
        return Ok(0);
    }
    redis::cmd("XDEL")
        .arg(dead_letter_stream)
        .arg(ids)
        .query_async::<u64>(conn)
        .await
        .map_err(WorkerError::redis("XDEL dead letters"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn pair(f: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
        (f.as_bytes().to_vec(), v.as_bytes().to_vec())
    }

    #[test]
    fn provenance_is_read_by_position() {
        let mut fields = vec![pair("rill-reason", "mine"), pair("sku", "a")];
        let original = fields.clone();
        for (name, value) in field::ALL.iter().zip(["{o}", "1-0", "g", "c", "3", "boom"]) {
            fields.push(pair(name, value));
        }
        let letter = DeadLetter::from_raw(RawEntry { id: "9-0".into(), fields: Some(fields), claimed: None }).unwrap();
        assert_eq!(letter.fields, original);
        assert_eq!(letter.source_stream, "{o}");
        assert_eq!(letter.deliveries, 3);
        assert_eq!(letter.reason, "boom");
        let foreign = RawEntry { id: "1-0".into(), fields: Some(vec![pair("a", "1")]), claimed: None };
        assert!(DeadLetter::from_raw(foreign).is_none());
    }
}
