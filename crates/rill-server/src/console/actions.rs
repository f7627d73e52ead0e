//! The console's actions, each run as the commands a client would send (`client.rs`):
//!
//! ```text
//! op=ack        XACK key group id...                       (group, id...)
//! op=claim      XCLAIM key group consumer 0 id... JUSTID   (group, consumer, id...)
//! op=handback   XNACK key group FAIL IDS n id...           (group, id...)
//! op=replay     per letter: XRANGE dlq id id; XADD source * <original fields>; then, only
//!               if that add succeeded, XDEL dlq id         (id... of the dead-letter stream)
//! op=replay-all the same for every letter of the stream, walked 100 at a time
//! op=purge      XDEL dlq id...
//! op=purge-all  XDEL of every letter of the stream (entries without provenance are kept)
//! ```
//!
//! The stream and group travel percent-encoded in the forms' hidden fields (`key`, `group`),
//! so any bytes round-trip. The reply is one line for the page's banner; a command's error
//! is shown as Redis wrote it.

use super::client::{self, Client};
use super::{dlq, Params, Site};
use percent_encoding::percent_decode;

/// At most this many letters per replay-all / purge-all.
const ALL_MAX: usize = 100_000;

fn decoded(p: &Params, name: &str) -> Vec<u8> {
    percent_decode(p.get(name).unwrap_or(b"")).collect()
}

/// Run the action `p` asks for; the banner's text.
pub fn run(site: &Site, p: &Params) -> String {
    let op = p.text("op");
    let db = p.db();
    let key = decoded(p, "key");
    let group = decoded(p, "group");
    let ids: Vec<&[u8]> = p.all("id");
    let shared = &site.shared;
    if db >= shared.lock().engine.dbs().len() {
        return "ERR DB index is out of range".to_owned();
    }
    if key.is_empty() {
        return "ERR no stream given".to_owned();
    }
    let needs_ids = matches!(op.as_str(), "ack" | "claim" | "handback" | "replay" | "purge");
    if needs_ids && ids.is_empty() {
        return "Nothing selected: tick the entries to act on.".to_owned();
    }
    let mut c = Client::new(shared, db);
    let n = ids.len();
    match op.as_str() {
        "ack" | "claim" | "handback" => {
            if group.is_empty() {
                return "ERR no group given".to_owned();
            }
            let consumer = p.get("consumer").unwrap_or(b"").to_vec();
            let mut args: Vec<&[u8]> = match op.as_str() {
                "ack" => vec![b"XACK", &key, &group],
                "claim" => {
                    if consumer.is_empty() {
                        return "ERR name the consumer to claim the entries for".to_owned();
                    }
                    vec![b"XCLAIM", &key, &group, &consumer, b"0"]
                }
                _ => vec![b"XNACK", &key, &group, b"FAIL", b"IDS"],
            };
            let count = n.to_string();
            if op == "handback" {
                args.push(count.as_bytes());
            }
            args.extend(ids.iter().copied());
            if op == "claim" {
                args.push(b"JUSTID");
            }
            let r = c.run(shared, &mut shared.lock(), &args);
            if let Some(e) = client::error(&r) {
                return e;
            }
            let done = client::int(&r).unwrap_or_else(|| client::items(&r).len() as i64);
            match op.as_str() {
                "ack" => format!("Acknowledged {done} of {n} entries."),
                "claim" => format!("Claimed {done} of {n} entries for {}.", String::from_utf8_lossy(&consumer)),
                _ => format!("Handed back {done} of {n} entries."),
            }
        }
        "replay" | "purge" => {
            let mut st = shared.lock();
            if op == "purge" {
                let mut args: Vec<&[u8]> = vec![b"XDEL", &key];
                args.extend(ids.iter().copied());
                let r = c.run(shared, &mut st, &args);
                return client::error(&r)
                    .unwrap_or_else(|| format!("Purged {} of {n} dead letters.", client::int(&r).unwrap_or(0)));
            }
            let mut done = 0;
            let mut first_error = None;
            for id in &ids {
                match replay_one(site, &mut c, &mut st, &key, id) {
                    Ok(()) => done += 1,
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            replayed(done, n, first_error)
        }
        "replay-all" | "purge-all" => all(site, &mut c, &key, op == "replay-all"),
        _ => format!("ERR unknown action '{op}'"),
    }
}

fn replayed(done: usize, n: usize, first_error: Option<String>) -> String {
    match first_error {
        None => format!("Replayed {done} of {n} dead letters."),
        Some(e) => format!("Replayed {done} of {n} dead letters; the first failure: {e}"),
    }
}

/// Replay the letter `id` of `key`: add its original fields to its source stream, then
/// delete it (only if the add succeeded).
fn replay_one(site: &Site, c: &mut Client, st: &mut crate::state::State, key: &[u8], id: &[u8]) -> Result<(), String> {
    let shared = &site.shared;
    let shown = String::from_utf8_lossy(id).into_owned();
    let r = c.run(shared, st, &[b"XRANGE", key, id, id]);
    if let Some(e) = client::error(&r) {
        return Err(e);
    }
    let found = client::entries(&r);
    let Some((_, fields)) = found.first() else { return Err(format!("{shown}: no such entry")) };
    let Some(letter) = dlq::parse(fields) else { return Err(format!("{shown}: not a dead letter (no provenance)")) };
    if letter.fields.is_empty() {
        return Err(format!("{shown}: the letter has no fields of the original entry"));
    }
    let mut args: Vec<&[u8]> = vec![b"XADD", &letter.source_stream, b"*"];
    for (f, v) in &letter.fields {
        args.push(f);
        args.push(v);
    }
    let r = c.run(shared, st, &args);
    if let Some(e) = client::error(&r) {
        return Err(format!("{shown}: {e}"));
    }
    let r = c.run(shared, st, &[b"XDEL", key, id]);
    client::error(&r).map_or(Ok(()), |e| Err(format!("{shown}: {e}")))
}

/// Replay or purge every letter of `key`, 100 at a time (the lock is released between).
fn all(site: &Site, c: &mut Client, key: &[u8], replay: bool) -> String {
    let shared = &site.shared;
    let mut start = b"-".to_vec();
    let (mut done, mut seen, mut skipped) = (0usize, 0usize, 0usize);
    let mut first_error = None;
    loop {
        let mut st = shared.lock();
        let r = c.run(shared, &mut st, &[b"XRANGE", key, &start, b"+", b"COUNT", b"100"]);
        if let Some(e) = client::error(&r) {
            return e;
        }
        let page = client::entries(&r);
        let Some((last, _)) = page.last() else { break };
        start = format!("({last}").into_bytes();
        for (id, fields) in &page {
            if dlq::parse(fields).is_none() {
                skipped += 1;
                continue;
            }
            seen += 1;
            if replay {
                match replay_one(site, c, &mut st, key, id.as_bytes()) {
                    Ok(()) => done += 1,
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            } else {
                let r = c.run(shared, &mut st, &[b"XDEL", key, id.as_bytes()]);
                done += usize::try_from(client::int(&r).unwrap_or(0)).unwrap_or(0);
            }
        }
        drop(st);
        if page.len() < 100 || seen >= ALL_MAX {
            break;
        }
    }
    let kept = if skipped > 0 { format!(" ({skipped} entries without provenance kept)") } else { String::new() };
    if replay {
        format!("{}{kept}", replayed(done, seen, first_error))
    } else {
        format!("Purged {done} of {seen} dead letters.{kept}")
    }
}
