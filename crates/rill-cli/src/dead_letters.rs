//! `rill dlq list|show|replay|purge`: the dead letters of one source stream.
//!
//! One dead-letter stream can hold the letters of several sources: `ticks` and `{ticks}` both
//! default to `{ticks}:dlq` (the spec's naming rule, kept; see `rill_worker::keys`), and
//! `--dlq` may name a stream several workers share. So the stream argument names a *source*,
//! every letter is matched against the source its own provenance names, and:
//!
//! * `list` and `show` read every entry and print each letter's source;
//! * `replay ID...` and `purge ID...` refuse, before changing anything, when a named letter
//!   came from another stream, and print the command that would act on it;
//! * `replay` and `purge --all` take the letters of the given stream and leave the others,
//!   saying how many they left and whose;
//! * a replayed letter is written to the stream its provenance names, never to a name taken
//!   from the command line (they are equal, by the rules above).
//!
//! Both provenance styles are read everywhere (rill's `rill-*` fields, the posts'
//! `deadLetteredFrom`). Entries with neither are named by `list`, never replayed, and deleted
//! only when `purge` is given their IDs.

use std::collections::BTreeMap;
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

/// `s` quoted for a POSIX shell, so a suggested command can be pasted (`{orders}` is a brace
/// expansion in some shells).
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The `rill dlq <verb>` command that acts on `ids` of `source` in `dlq_stream`.
fn command_for(verb: &str, source: &str, dlq_stream: &str, ids: &[String]) -> String {
    let mut command = format!("rill dlq {verb} {}", quoted(source));
    for id in ids {
        command.push(' ');
        command.push_str(id);
    }
    if ids.is_empty() && verb == "purge" {
        command.push_str(" --all");
    }
    if keys::default_dead_letter_stream(source).ok().as_deref() != Some(dlq_stream) {
        command.push_str(&format!(" --dlq {}", quoted(dlq_stream)));
    }
    command
}

/// Says why `dlq_stream` holds letters of `other` when the user asked about `stream`, if the
/// default names are the reason.
fn shared_default(stream: &str, other: &str, dlq_stream: &str) -> Option<String> {
    let shared = keys::default_dead_letter_shared_with(stream).is_some_and(|s| s == other)
        && keys::default_dead_letter_stream(stream).ok().as_deref() == Some(dlq_stream);
    shared.then(|| format!("{dlq_stream} is the default dead-letter stream of both {stream} and {other}"))
}

/// Counts of letters by source stream.
type BySource = BTreeMap<String, u64>;

fn count_by_source<'a>(letters: impl IntoIterator<Item = &'a DeadLetter>) -> BySource {
    let mut counts = BySource::new();
    for l in letters {
        *counts.entry(l.source_stream.clone()).or_default() += 1;
    }
    counts
}

fn by_source_json(counts: &BySource) -> Json {
    Json::Object(counts.iter().map(|(source, n)| (source.clone(), Json::uint(*n))).collect())
}

/// The refusal when letters named by ID came from other streams than `stream`.
fn other_sources_error(
    verb: &str,
    stream: &str,
    dlq_stream: &str,
    mismatched: &[(String, String)],
) -> Box<dyn std::error::Error> {
    let mut ids_by_source: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (id, source) in mismatched {
        ids_by_source.entry(source.as_str()).or_default().push(id.clone());
    }
    let past = if verb == "replay" { "replayed" } else { "purged" };
    let mut message = format!(
        "{} of the named dead letters in {dlq_stream} came from another stream than {stream}; nothing was {past}",
        mismatched.len()
    );
    for (source, ids) in &ids_by_source {
        message.push_str(&format!(
            "\n  {} came from {source}: {}",
            ids.join(" "),
            command_for(verb, source, dlq_stream, ids)
        ));
        if let Some(why) = shared_default(stream, source, dlq_stream) {
            message.push_str(&format!("\n  ({why}; a letter is acted on only through the stream it came from)"));
        }
    }
    message.into()
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
        ("first_delivery_ms", l.first_delivery_ms.map_or(Json::Null, Json::uint)),
        ("last_delivery_ms", l.last_delivery_ms.map_or(Json::Null, Json::uint)),
        ("fields", Json::fields(&l.fields)),
    ])
}

pub fn dlq_table(letters: &[DeadLetter]) -> String {
    let mut t = Table::new(["id", "source", "source-id", "deliveries", "reason", "fields"]);
    for l in letters {
        let known = |value: String| if recorded(l) { value } else { "-".to_owned() };
        t.row(vec![
            l.id.clone(),
            l.source_stream.clone(),
            l.source_id.clone(),
            known(l.deliveries.to_string()),
            known(l.reason.clone()),
            fields_inline(&l.fields),
        ]);
    }
    t.render()
}

const NO_PROVENANCE: &str = "neither rill-* provenance fields nor deadLetteredFrom";

pub async fn dlq_list(conn: &mut Connection, stream: &str, dlq_stream: &str, count: usize, json: bool) -> Result<()> {
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
    println!("{dlq_stream}: {total} entries");
    if !page.letters.is_empty() {
        println!();
        print!("{}", dlq_table(&page.letters));
    }
    let others = count_by_source(page.letters.iter().filter(|l| l.source_stream != stream));
    for (source, n) in &others {
        println!("\n{n} of these came from {source}, not {stream}: replay and purge of {stream} leave them alone");
        if let Some(why) = shared_default(stream, source, dlq_stream) {
            println!("({why})");
        }
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

pub async fn dlq_show(conn: &mut Connection, stream: &str, dlq_stream: &str, id: &str, json: bool) -> Result<()> {
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
    if l.source_stream != stream {
        let ids = [l.id.clone()];
        println!(
            "  note      not from {stream}; replay it with: {}",
            command_for("replay", &l.source_stream, dlq_stream, &ids)
        );
    }
    if recorded(&l) {
        println!("  group     {} (consumer {})", l.group, l.consumer);
        println!("  delivered {} times", l.deliveries);
        println!("  reason    {}", l.reason);
        if let (Some(first), Some(last)) = (l.first_delivery_ms, l.last_delivery_ms) {
            println!("  first delivered at {first} ms, last at {last} ms (unix time; written by the server's policy)");
        }
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

/// The letters a replay or purge acts on, and what it leaves.
struct Chosen {
    letters: Vec<DeadLetter>,
    left_other_streams: BySource,
    left_unrecognised: Vec<String>,
}

/// The letters of `stream` named by `ids`, or all of them when `ids` is empty. Refuses when a
/// named letter is missing or came from another stream, before anything is changed.
async fn choose(conn: &mut Connection, stream: &str, dlq_stream: &str, ids: &[String]) -> Result<Chosen> {
    if ids.is_empty() {
        let all = everything(conn, dlq_stream).await?;
        let (letters, others): (Vec<_>, Vec<_>) = all.letters.into_iter().partition(|l| l.source_stream == stream);
        return Ok(Chosen {
            letters,
            left_other_streams: count_by_source(&others),
            left_unrecognised: all.unrecognised,
        });
    }
    let mut letters = Vec::with_capacity(ids.len());
    let mut mismatched = Vec::new();
    for id in ids {
        match dlq::get(conn, dlq_stream, id).await? {
            Some(l) if l.source_stream != stream => mismatched.push((l.id, l.source_stream)),
            Some(l) => letters.push(l),
            None => return Err(not_found(id, dlq_stream).into()),
        }
    }
    if !mismatched.is_empty() {
        return Err(other_sources_error("replay", stream, dlq_stream, &mismatched));
    }
    Ok(Chosen { letters, left_other_streams: BySource::new(), left_unrecognised: Vec::new() })
}

/// Tells what a replay-all or purge --all left in the dead-letter stream.
fn print_left(stream: &str, dlq_stream: &str, verb: &str, others: &BySource, unrecognised: &[String]) {
    for (source, n) in others {
        println!(
            "left {n} dead letters of {source} in {dlq_stream} (not {stream}'s): {}",
            command_for(verb, source, dlq_stream, &[])
        );
    }
    if !unrecognised.is_empty() {
        println!("left {} entries with {NO_PROVENANCE} in {dlq_stream}", unrecognised.len());
    }
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

pub async fn dlq_replay(
    conn: &mut Connection,
    stream: &str,
    dlq_stream: &str,
    ids: &[String],
    json: bool,
) -> Result<()> {
    let chosen = choose(conn, stream, dlq_stream, ids).await?;
    let letters = &chosen.letters;
    let bar = progress(letters.len(), json, "replaying");
    let mut replayed = Vec::with_capacity(letters.len());
    let mut failure: Option<WorkerError> = None;
    for l in letters {
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
            ("left_other_streams", by_source_json(&chosen.left_other_streams)),
            ("left_unrecognised", Json::uint(chosen.left_unrecognised.len() as u64)),
            ("error", failure.as_ref().map_or(Json::Null, |e| Json::str(e.to_string()))),
        ]);
        println!("{}", doc.render());
    } else {
        for (old, source, new) in &replayed {
            println!("{old} -> {source} {new}");
        }
        println!("replayed {} of {} dead letters of {stream}", replayed.len(), letters.len());
        print_left(stream, dlq_stream, "replay", &chosen.left_other_streams, &chosen.left_unrecognised);
    }
    match failure {
        Some(e) => Err(format!("replay stopped: {e} (that dead letter and the rest are still in {dlq_stream})").into()),
        None => Ok(()),
    }
}

pub async fn dlq_purge(
    conn: &mut Connection,
    stream: &str,
    dlq_stream: &str,
    ids: &[String],
    all: bool,
    json: bool,
) -> Result<()> {
    if ids.is_empty() && !all {
        return Err("name the dead letters to purge, or pass --all".into());
    }
    let (ids, left_other_streams, left_unrecognised) = if all {
        let chosen = choose(conn, stream, dlq_stream, &[]).await?;
        let ids = chosen.letters.into_iter().map(|l| l.id).collect();
        (ids, chosen.left_other_streams, chosen.left_unrecognised)
    } else {
        // Named IDs: a letter of another stream is refused; an entry with no provenance (or
        // none at all) is the user's to delete.
        let mut mismatched = Vec::new();
        for id in ids {
            if let Some(l) = dlq::get(conn, dlq_stream, id).await? {
                if l.source_stream != stream {
                    mismatched.push((l.id, l.source_stream));
                }
            }
        }
        if !mismatched.is_empty() {
            return Err(other_sources_error("purge", stream, dlq_stream, &mismatched));
        }
        (ids.to_vec(), BySource::new(), Vec::new())
    };
    let bar = progress(ids.len(), json, "purging");
    let mut deleted = 0;
    for chunk in ids.chunks(500) {
        deleted += dlq::purge(conn, dlq_stream, chunk).await?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    if json {
        let doc = Json::obj([
            ("dlq", Json::str(dlq_stream)),
            ("deleted", Json::uint(deleted)),
            ("left_other_streams", by_source_json(&left_other_streams)),
            ("left_unrecognised", Json::uint(left_unrecognised.len() as u64)),
        ]);
        println!("{}", doc.render());
    } else {
        println!("deleted {deleted} dead letters from {dlq_stream}");
        print_left(stream, dlq_stream, "purge", &left_other_streams, &left_unrecognised);
    }
    Ok(())
}
