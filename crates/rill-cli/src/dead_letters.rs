//! `rill dlq list|show|replay|purge`: the dead letters of a stream.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use rill_worker::dlq::{self, DeadLetter, ProvenanceStyle};
use rill_worker::{keys, ops, Connection, WorkerError};

use crate::output::{fields_inline, lossy, Json, Table};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The dead-letter stream of `stream`: `--dlq` if given, else the default derived name.
pub fn dlq_name(stream: &str, explicit: Option<String>) -> Result<String> {
    match explicit {
        Some(name) => Ok(name),
        None => Ok(keys::default_dead_letter_stream(stream)?),
    }
}

/// What is known of a letter's group, consumer, delivery count and reason: everything for
/// rill's provenance, nothing for the posts' `deadLetteredFrom`.
fn recorded(l: &DeadLetter) -> bool {
    l.style == ProvenanceStyle::Rill
}

fn letter_json(l: &DeadLetter) -> Json {
    let known = |value: Json| if recorded(l) { value } else { Json::Null };
    Json::obj([
        ("id", Json::str(&l.id)),
        ("provenance", Json::str(l.style.name())),
        ("source_stream", Json::str(&l.source_stream)),
        ("source_id", Json::str(&l.source_id)),
        ("group", known(Json::str(&l.group))),
        ("consumer", known(Json::str(&l.consumer))),
        ("deliveries", known(Json::uint(l.deliveries))),
        ("reason", known(Json::str(&l.reason))),
        ("fields", Json::fields(&l.fields)),
    ])
}

pub fn dlq_table(letters: &[DeadLetter]) -> String {
    let mut t = Table::new(["id", "source-id", "deliveries", "reason", "fields"]);
    for l in letters {
        let known = |value: String| if recorded(l) { value } else { "-".to_owned() };
        t.row(vec![
            l.id.clone(),
            l.source_id.clone(),
            known(l.deliveries.to_string()),
            known(l.reason.clone()),
            fields_inline(&l.fields),
        ]);
    }
    t.render()
}

const NO_PROVENANCE: &str = "neither rill-* provenance fields nor deadLetteredFrom";

pub async fn dlq_list(conn: &mut Connection, dlq_stream: &str, count: usize, json: bool) -> Result<()> {
    let page = dlq::page(conn, dlq_stream, "-", count).await?;
    let total = ops::length(conn, dlq_stream).await?;
    if json {
        let doc = Json::obj([
            ("dlq", Json::str(dlq_stream)),
            ("length", Json::uint(total)),
            ("letters", Json::Array(page.letters.iter().map(letter_json).collect())),
            ("unrecognised", Json::Array(page.unrecognised.iter().map(Json::str).collect())),
        ]);
        println!("{}", doc.render());
        return Ok(());
    }
    println!("{dlq_stream}: {total} dead letters");
    if !page.letters.is_empty() {
        println!();
        print!("{}", dlq_table(&page.letters));
    }
    if !page.unrecognised.is_empty() {
        println!(
            "\n{} entries with {NO_PROVENANCE}, not shown: {}",
            page.unrecognised.len(),
            page.unrecognised.join(" ")
        );
    }
    let shown = (page.letters.len() + page.unrecognised.len()) as u64;
    if shown < total {
        println!("... {} more (use --count)", total - shown);
    }
    Ok(())
}

fn not_found(id: &str, dlq_stream: &str) -> String {
    format!("no dead letter {id} in {dlq_stream} (no such entry, or one with {NO_PROVENANCE})")
}

pub async fn dlq_show(conn: &mut Connection, dlq_stream: &str, id: &str, json: bool) -> Result<()> {
    let Some(l) = dlq::get(conn, dlq_stream, id).await? else {
        return Err(not_found(id, dlq_stream).into());
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
    if recorded(&l) {
        println!("  group     {} (consumer {})", l.group, l.consumer);
        println!("  delivered {} times", l.deliveries);
        println!("  reason    {}", l.reason);
    } else {
        println!("  (written with deadLetteredFrom: no group, consumer, delivery count or reason recorded)");
    }
    println!();
    print!("{}", t.render());
    Ok(())
}

/// Every entry of a dead-letter stream, page by page.
struct Everything {
    letters: Vec<DeadLetter>,
    /// IDs of entries with neither provenance style: never replayed, purged only by ID.
    unrecognised: Vec<String>,
}

async fn everything(conn: &mut Connection, dlq_stream: &str) -> Result<Everything> {
    let mut all = Everything { letters: Vec::new(), unrecognised: Vec::new() };
    let mut start = "-".to_owned();
    loop {
        let page = dlq::page(conn, dlq_stream, &start, 500).await?;
        all.letters.extend(page.letters);
        all.unrecognised.extend(page.unrecognised);
        match page.next {
            Some(next) => start = next,
            None => return Ok(all),
        }
    }
}

/// Collects the letters to act on: the given IDs, or every letter.
async fn letters(conn: &mut Connection, dlq_stream: &str, ids: &[String]) -> Result<Vec<DeadLetter>> {
    if ids.is_empty() {
        return Ok(everything(conn, dlq_stream).await?.letters);
    }
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match dlq::get(conn, dlq_stream, id).await? {
            Some(l) => out.push(l),
            None => return Err(not_found(id, dlq_stream).into()),
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
