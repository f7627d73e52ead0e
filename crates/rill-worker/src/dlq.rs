//! Dead letters: the entry format, the atomic move, and replay.
//!
//! A dead letter is the original entry's fields, in order, followed by a provenance block. Two
//! styles of block are read; rill-worker writes the first, and so does a rill server enforcing
//! a group's delivery limit (docs/spec/policies.md §3), with two more fields:
//!
//! ```text
//! rill style (six fields; eight from the server)     posts style (one field)
//! <field 1> <value 1> ... <field n> <value n>        <field 1> <value 1> ... <field n> <value n>
//! rill-source-stream  <stream the entry came from>   deadLetteredFrom  <stream>/<id>
//! rill-source-id      <its ID there>
//! rill-group          <consumer group that gave up on it>
//! rill-consumer       <consumer that moved it>
//! rill-deliveries     <delivery count when it was moved>
//! rill-reason         <why: the handler's message, or the delivery limit>
//! rill-first-delivery-ms  <unix ms>    (server only)
//! rill-last-delivery-ms   <unix ms>    (server only)
//! ```
//!
//! The posts style is what a widely read blog post's Node.js worker writes
//! (``xAdd(dlq, '*', { ...fields, deadLetteredFrom: `${stream}/${id}` })``, as in
//! tests/clients); many existing dead-letter streams hold it. It records the source and nothing
//! else. Its value is split at the last `/` (an entry ID has none, a stream name may).
//!
//! The provenance is recognised by position (the last eight or six fields with exactly these
//! names, or a last field `deadLetteredFrom` whose value ends in `/<ms>-<seq>`), so an original
//! entry that happens to have a field called `rill-reason` still replays intact.
//!
//! Moving is one transaction, `MULTI; XADD <dlq> * ...; XACK <stream> <group> <id>; EXEC`: the
//! entry is never both pending and dead-lettered, nor neither. On a cluster both keys must share
//! a slot (see [`crate::keys`]). Replay is the reverse but *not* a transaction: `XADD` to the
//! source stream first, and `XDEL` the dead letter only once that add succeeded — a failed add
//! inside MULTI would not stop the XDEL. Replay always writes to the source the letter names,
//! which matters because one dead-letter stream can hold letters of two sources (`orders` and
//! `{orders}` share `{orders}:dlq` by default).

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
    /// Written after [`ALL`] by a server's dead-letter policy only.
    pub const FIRST_DELIVERY_MS: &str = "rill-first-delivery-ms";
    pub const LAST_DELIVERY_MS: &str = "rill-last-delivery-ms";
    /// The server's block, in order.
    pub const ALL_SERVER: [&str; 8] =
        [SOURCE_STREAM, SOURCE_ID, GROUP, CONSUMER, DELIVERIES, REASON, FIRST_DELIVERY_MS, LAST_DELIVERY_MS];
    /// The one field of the posts style: `<stream>/<id>`.
    pub const DEAD_LETTERED_FROM: &str = "deadLetteredFrom";
}

/// Which provenance block a dead letter carries (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProvenanceStyle {
    /// The six `rill-*` fields.
    Rill,
    /// One `deadLetteredFrom` field: source stream and ID only.
    DeadLetteredFrom,
}

impl ProvenanceStyle {
    /// The name used in reports: `rill` or `deadLetteredFrom`.
    pub fn name(self) -> &'static str {
        match self {
            ProvenanceStyle::Rill => "rill",
            ProvenanceStyle::DeadLetteredFrom => field::DEAD_LETTERED_FROM,
        }
    }
}

/// One entry of a dead-letter stream, split into original fields and provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Its ID in the dead-letter stream.
    pub id: String,
    /// The stream it came from: where [`replay`] writes it.
    pub source_stream: String,
    pub source_id: String,
    /// Empty for [`ProvenanceStyle::DeadLetteredFrom`], which does not record it.
    pub group: String,
    /// Empty for [`ProvenanceStyle::DeadLetteredFrom`].
    pub consumer: String,
    /// 0 for [`ProvenanceStyle::DeadLetteredFrom`] (unknown).
    pub deliveries: u64,
    /// Empty for [`ProvenanceStyle::DeadLetteredFrom`].
    pub reason: String,
    /// Times of the first and last delivery, when a server's policy wrote the letter.
    pub first_delivery_ms: Option<u64>,
    pub last_delivery_ms: Option<u64>,
    pub style: ProvenanceStyle,
    /// The original entry's fields.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl DeadLetter {
    /// Splits a dead-letter stream entry; `None` when it has neither provenance block (not a
    /// dead letter of a writer we know) or its payload was deleted.
    pub fn from_raw(raw: RawEntry) -> Option<DeadLetter> {
        let fields = raw.fields?;
        DeadLetter::rill_style(&raw.id, &fields).or_else(|| DeadLetter::posts_style(&raw.id, &fields))
    }

    fn rill_style(id: &str, fields: &[(Vec<u8>, Vec<u8>)]) -> Option<DeadLetter> {
        let (original, provenance) =
            trailing_block(fields, &field::ALL_SERVER).or_else(|| trailing_block(fields, &field::ALL))?;
        let mut values = provenance.iter().map(|(_, v)| String::from_utf8_lossy(v).into_owned());
        let mut next = || values.next().unwrap_or_default();
        Some(DeadLetter {
            id: id.to_owned(),
            source_stream: next(),
            source_id: next(),
            group: next(),
            consumer: next(),
            deliveries: next().parse().unwrap_or(0),
            reason: next(),
            first_delivery_ms: values.next().and_then(|v| v.parse().ok()),
            last_delivery_ms: values.next().and_then(|v| v.parse().ok()),
            style: ProvenanceStyle::Rill,
            fields: original.to_vec(),
        })
    }

    fn posts_style(id: &str, fields: &[(Vec<u8>, Vec<u8>)]) -> Option<DeadLetter> {
        let ((name, value), original) = fields.split_last()?;
        if name.as_slice() != field::DEAD_LETTERED_FROM.as_bytes() {
            return None;
        }
        let value = String::from_utf8_lossy(value);
        let (stream, source_id) = value.rsplit_once('/')?;
        if stream.is_empty() || !is_entry_id(source_id) {
            return None;
        }
        Some(DeadLetter {
            id: id.to_owned(),
            source_stream: stream.to_owned(),
            source_id: source_id.to_owned(),
            group: String::new(),
            consumer: String::new(),
            deliveries: 0,
            reason: String::new(),
            first_delivery_ms: None,
            last_delivery_ms: None,
            style: ProvenanceStyle::DeadLetteredFrom,
            fields: original.to_vec(),
        })
    }
}

/// An entry's field/value pairs, in order.
type Fields = [(Vec<u8>, Vec<u8>)];

/// `fields` split before its last `names.len()` fields, if those have exactly `names`.
fn trailing_block<'a>(fields: &'a Fields, names: &[&str]) -> Option<(&'a Fields, &'a Fields)> {
    let split = fields.len().checked_sub(names.len())?;
    let (original, block) = fields.split_at(split);
    let names_match = block.iter().zip(names).all(|((name, _), expected)| name.as_slice() == expected.as_bytes());
    names_match.then_some((original, block))
}

/// `<ms>-<seq>`, both decimal: the form of every ID a server returns.
fn is_entry_id(id: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    id.split_once('-').is_some_and(|(ms, seq)| digits(ms) && digits(seq))
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

/// One `XRANGE` page of a dead-letter stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    /// The dead letters in the page, in ID order.
    pub letters: Vec<DeadLetter>,
    /// IDs of the entries in the page with neither provenance block.
    pub unrecognised: Vec<String>,
    /// Where the next page starts (`(<last ID>`, exclusive), or `None` when this one reached
    /// the end of the stream.
    pub next: Option<String>,
}

/// The entries of `dead_letter_stream` from `start` (inclusive, `-` for the first), at most
/// `count` of them, sorted into dead letters and unrecognised entries. Page on with
/// [`Page::next`]: a page with few letters is not the last one if it had other entries.
pub async fn page(
    conn: &mut Connection,
    dead_letter_stream: &str,
    start: &str,
    count: usize,
) -> Result<Page, WorkerError> {
    if count == 0 {
        return Ok(Page::default());
    }
    let v: Value = redis::cmd("XRANGE")
        .arg(dead_letter_stream)
        .arg(start)
        .arg("+")
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("XRANGE dead letters"))?;
    let entries = entry_list(&v, "XRANGE")?;
    let next = if entries.len() < count { None } else { entries.last().map(|e| format!("({}", e.id)) };
    let mut page = Page { next, ..Page::default() };
    for raw in entries {
        let id = raw.id.clone();
        match DeadLetter::from_raw(raw) {
            Some(letter) => page.letters.push(letter),
            None => page.unrecognised.push(id),
        }
    }
    Ok(page)
}

/// Dead letters of `dead_letter_stream` from `start` (inclusive, `-` for the first), among the
/// next `count` entries. Entries with neither provenance block are skipped ([`page`] names
/// them).
pub async fn list(
    conn: &mut Connection,
    dead_letter_stream: &str,
    start: &str,
    count: usize,
) -> Result<Vec<DeadLetter>, WorkerError> {
    Ok(page(conn, dead_letter_stream, start, count).await?.letters)
}

/// One dead letter by ID; `None` when there is no such entry or it has neither provenance block.
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

/// Re-adds the original fields to the letter's own source stream (its provenance, whatever
/// stream the caller had in mind), then deletes the dead letter. Returns the new ID in the
/// source stream. If the XADD fails the dead letter stays where it was.
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
        assert_eq!(letter.style, ProvenanceStyle::Rill);
        assert_eq!((letter.first_delivery_ms, letter.last_delivery_ms), (None, None));
        let foreign = RawEntry { id: "1-0".into(), fields: Some(vec![pair("a", "1")]), claimed: None };
        assert!(DeadLetter::from_raw(foreign).is_none());
    }

    #[test]
    fn the_servers_eight_fields_are_read() {
        let original = vec![pair("rill-last-delivery-ms", "an original field"), pair("n", "1")];
        let mut fields = original.clone();
        let values = ["orders", "5-0", "g", "c", "4", "maxdeliver", "1000", "2500"];
        for (name, value) in field::ALL_SERVER.iter().zip(values) {
            fields.push(pair(name, value));
        }
        let letter = DeadLetter::from_raw(RawEntry { id: "9-0".into(), fields: Some(fields), claimed: None }).unwrap();
        assert_eq!(letter.fields, original);
        assert_eq!(
            (letter.source_stream.as_str(), letter.deliveries, letter.reason.as_str()),
            ("orders", 4, "maxdeliver")
        );
        assert_eq!((letter.first_delivery_ms, letter.last_delivery_ms), (Some(1000), Some(2500)));
    }

    #[test]
    fn the_posts_style_is_read() {
        let raw = |fields| RawEntry { id: "9-0".into(), fields: Some(fields), claimed: None };
        let original = vec![pair("deadLetteredFrom", "an original field"), pair("n", "3")];
        let mut fields = original.clone();
        fields.push(pair("deadLetteredFrom", "app/{orders}/1712-7"));
        let letter = DeadLetter::from_raw(raw(fields)).unwrap();
        assert_eq!(letter.style, ProvenanceStyle::DeadLetteredFrom);
        assert_eq!((letter.source_stream.as_str(), letter.source_id.as_str()), ("app/{orders}", "1712-7"));
        assert_eq!(letter.fields, original);
        assert_eq!((letter.deliveries, letter.reason.as_str()), (0, ""));
        for bad in ["{orders}", "/1-0", "{orders}/1", "{orders}/x-0", "{orders}/1-"] {
            assert!(DeadLetter::from_raw(raw(vec![pair("n", "1"), pair("deadLetteredFrom", bad)])).is_none(), "{bad}");
        }
        let not_last = vec![pair("deadLetteredFrom", "{o}/1-0"), pair("n", "1")];
        assert!(DeadLetter::from_raw(raw(not_last)).is_none());
    }
}
