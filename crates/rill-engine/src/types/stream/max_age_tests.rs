//! MAXAGE (`max_age.rs`, `cmd_stream_policy.rs`): RILL.STREAM's replies and errors, the lazy
//! trim on XADD, the bounded sweep and its resumption, the three reference modes, the exact
//! effects and their replay (which never trims by itself), and the setting in a snapshot.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::policy_model_tests::run_recorded;
use crate::command::CommandTable;
use crate::effect::Effect;
use crate::{Engine, EngineConfig};
use bytes::Bytes;

const START_MS: i64 = 1_000_000;

/// An engine run as the server runs it, keeping the records it would log.
struct Live {
    engine: Engine,
    table: CommandTable,
    now_ms: i64,
    log: Vec<(i64, Vec<Effect>)>,
}

impl Live {
    fn new() -> Live {
        Live {
            engine: Engine::new(EngineConfig::default()),
            table: CommandTable::new(&crate::types::families()),
            now_ms: START_MS,
            log: Vec::new(),
        }
    }

    /// Run one command (whitespace-separated words); the reply as `show` renders it. Its
    /// record (explicit effects, else itself if it changed something) goes to the log.
    fn run(&mut self, line: &str) -> String {
        let args: Vec<Bytes> = line.split_whitespace().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
        run_recorded(&mut self.engine, &self.table, self.now_ms, &mut self.log, args)
    }

    /// The policy timer's run now (MAXAGE's sweep included): its effects, as text.
    fn timer(&mut self) -> Vec<String> {
        let effects = self.engine.run_policy_timers(self.now_ms, true, &|_, _, _, _| false).decode().unwrap();
        if !effects.is_empty() {
            self.log.push((self.now_ms, effects.clone()));
        }
        effects.iter().map(text).collect()
    }

    /// The effects of the last record, as text.
    fn last_record(&self) -> Vec<String> {
        self.log.last().map(|(_, e)| e.iter().map(text).collect()).unwrap_or_default()
    }

    /// Everything a replay must reproduce, for `keys`.
    fn view(&mut self, keys: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for k in keys {
            out.push(self.run(&format!("XINFO STREAM {k} FULL")));
            out.push(self.run(&format!("RILL.STREAM GET {k}")));
        }
        out
    }

    /// A fresh engine with this one's log replayed as a restart replays it.
    fn replayed(&self) -> Live {
        let mut copy = Live::new();
        copy.now_ms = self.now_ms;
        copy.engine.set_loading(true);
        copy.apply_log(&self.log);
        copy.engine.set_loading(false);
        copy
    }

    /// A fresh engine that applied this one's log as a replica applies its primary's records.
    fn replica(&self) -> Live {
        let mut copy = Live::new();
        copy.now_ms = self.now_ms;
        copy.engine.set_replica(true);
        copy.apply_log(&self.log);
        copy
    }

    fn apply_log(&mut self, log: &[(i64, Vec<Effect>)]) {
        for (time, effects) in log {
            for e in effects {
                self.engine.apply_effect(&self.table, *time, e.clone()).unwrap();
            }
        }
    }

    fn xlen(&mut self, key: &str) -> String {
        self.run(&format!("XLEN {key}"))
    }
}

/// An effect as one line: a command's words, or the group effect's debug form.
fn text(e: &Effect) -> String {
    match e {
        Effect::Command { args, .. } => {
            args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn rill_stream_set_get_help_and_errors() {
    let mut l = Live::new();
    let maxage_err = "-ERR MAXAGE must be 0 (off) or a positive integer (milliseconds)";
    assert_eq!(l.run("RILL.STREAM GET s"), "-ERR no such key");
    assert_eq!(l.run("RILL.STREAM SET s MAXAGE 10"), "-ERR no such key", "SET never creates the stream");
    assert_eq!(l.run("EXISTS s"), ":0");
    // Arguments are checked before the key is looked up.
    assert_eq!(l.run("RILL.STREAM SET s MAXAGE soon"), maxage_err);
    l.run("SET str x");
    assert!(l.run("RILL.STREAM SET str MAXAGE 10").starts_with("-WRONGTYPE"));
    assert!(l.run("RILL.STREAM GET str").starts_with("-WRONGTYPE"));
    l.run("XADD s 5-0 f v");
    let records = l.log.len();
    assert_eq!(l.run("RILL.STREAM GET s"), "{maxage=:0 refmode=KEEPREF}");
    for (line, want) in [
        ("RILL.STREAM SET s MAXAGE -1", maxage_err),
        ("RILL.STREAM SET s MAXAGE 1.5", maxage_err),
        ("RILL.STREAM SET s MAXAGE 10 FOO", "-ERR syntax error"),
        ("RILL.STREAM SET s MAXAGE 10 ACKED DELREF", "-ERR syntax error"),
        ("RILL.STREAM SET s MAXIMUM 10", "-ERR syntax error"),
        ("RILL.STREAM SET s MAXAGE", "-ERR wrong number of arguments for 'rill.stream|set' command"),
        ("RILL.STREAM GET s extra", "-ERR wrong number of arguments for 'rill.stream|get' command"),
        ("RILL.STREAM NOPE", "-ERR unknown"),
    ] {
        assert_eq!(l.run(line), want, "{line}");
    }
    assert_eq!(l.log.len(), records, "a refused SET records nothing");
    assert_eq!(l.run("RILL.STREAM SET s maxage 5000 acked"), "+OK");
    assert_eq!(l.run("RILL.STREAM GET s"), "{maxage=:5000 refmode=ACKED}");
    assert_eq!(l.last_record(), ["RILL.STREAM SET s MAXAGE 5000 ACKED"], "logged in its canonical form");
    assert_eq!(l.run("RILL.STREAM SET s MAXAGE 5000 ACKED"), "+OK");
    assert_eq!(l.log.len(), records + 1, "a SET that changes nothing records nothing");
    assert_eq!(l.run("RILL.STREAM SET s MAXAGE 7"), "+OK");
    assert_eq!(l.run("RILL.STREAM GET s"), "{maxage=:7 refmode=KEEPREF}", "KEEPREF is the default");
    assert_eq!(l.run("RILL.STREAM SET s MAXAGE 0 DELREF"), "+OK");
    assert_eq!(l.run("RILL.STREAM GET s"), "{maxage=:0 refmode=KEEPREF}", "0 turns it off");
    assert_eq!(l.last_record(), ["RILL.STREAM SET s MAXAGE 0 KEEPREF"]);
    let help = l.run("RILL.STREAM HELP");
    assert!(help.starts_with("[+RILL.STREAM <subcommand>") && help.contains("MAXAGE"), "{help}");
    // The setting itself trims nothing: the stream still holds its (very old) entry.
    assert_eq!(l.xlen("s"), ":1");
}

/// An XADD on a stream with MAXAGE whose oldest entry has aged trims what aged, with an exact
/// `XTRIM MINID =` after the XADD in the same record; before that, an XADD records only itself.
/// An entry whose client-chosen ID is old ages by its ID (gone as soon as it is added).
#[test]
fn xadd_trims_aged_entries_lazily() {
    let mut l = Live::new();
    for i in 0..5 {
        l.now_ms = START_MS + i * 10;
        l.run("XADD s * f v");
    }
    assert_eq!(l.run("RILL.STREAM SET s MAXAGE 100"), "+OK");
    l.now_ms = START_MS + 100;
    l.run("XADD s * f v");
    assert_eq!(l.last_record(), ["XADD s 1000100-0 f v"], "nothing aged yet: Redis' record");
    assert_eq!(l.xlen("s"), ":6");
    // Entries older than now - 100 = 1000025: 1000000, 1000010 and 1000020.
    l.now_ms = START_MS + 125;
    l.run("XADD s * f v");
    assert_eq!(l.last_record(), ["XADD s 1000125-0 f v", "XTRIM s MINID = 1000030-0"]);
    assert_eq!(l.xlen("s"), ":4");
    assert_eq!(l.run("XRANGE s - + COUNT 1"), "[[1000030-0 [f v]]]");
    // A client-chosen ID older than the age: trimmed at once, as XADD ... MINID would.
    l.run("XADD t 1-1 f v");
    l.run("RILL.STREAM SET t MAXAGE 100");
    l.run("XADD t 2-1 f v");
    assert_eq!(l.last_record(), ["XADD t 2-1 f v", "XTRIM t MAXLEN = 0"]);
    assert_eq!(l.xlen("t"), ":0");
    // No timer ran: all of it was XADD's doing.
    assert_eq!(l.view(&["s", "t"]), l.replayed().view(&["s", "t"]));
}

/// The sweep trims a stream nobody writes to, 1000 entries per run at most, and comes back at
/// once for the rest; then it sleeps until the new oldest entry ages.
#[test]
fn the_sweep_is_bounded_per_run_and_resumes_at_once() {
    let mut l = Live::new();
    for i in 1..=2500 {
        l.run(&format!("XADD s {i}-0 f v"));
    }
    l.run("XADD s 990000-0 f v");
    assert_eq!(l.engine.next_policy_due(), None, "no MAXAGE: nothing to do");
    l.run("RILL.STREAM SET s MAXAGE 10000");
    assert_eq!(l.engine.next_policy_due(), Some(1 + 10000 + 1), "the oldest entry's due");
    assert_eq!(l.timer(), ["XTRIM s MINID = 1001-0"]);
    assert_eq!(l.xlen("s"), ":1501");
    assert_eq!(l.engine.next_policy_due(), Some(l.now_ms), "the rest is due at once");
    assert_eq!(l.timer(), ["XTRIM s MINID = 2001-0"]);
    assert_eq!(l.timer(), ["XTRIM s MINID = 990000-0"]);
    assert_eq!(l.xlen("s"), ":1");
    assert_eq!(l.engine.next_policy_due(), Some(990000 + 10000 + 1), "the next oldest entry's due");
    assert_eq!(l.timer(), Vec::<String>::new(), "nothing due, nothing done");
    l.now_ms = 1_000_001;
    assert_eq!(l.timer(), ["XTRIM s MAXLEN = 0"]);
    assert_eq!(l.engine.next_policy_due(), None, "an empty stream is not looked at");
    // The budget is shared by all streams: 600 + 600 aged entries take two runs.
    for k in ["a", "b"] {
        for i in 1..=600 {
            l.run(&format!("XADD {k} {i}-0 f v"));
        }
        l.run(&format!("RILL.STREAM SET {k} MAXAGE 1000"));
    }
    assert_eq!(l.timer(), ["XTRIM a MAXLEN = 0", "XTRIM b MINID = 401-0"]);
    assert_eq!(l.timer(), ["XTRIM b MAXLEN = 0"]);
    assert_eq!(l.view(&["s", "a", "b"]), l.replayed().view(&["s", "a", "b"]));
}

/// Ten entries, all aged: 1-3 delivered and acked, 4-6 delivered and pending, 7-10 not yet
/// delivered to group g.
fn aged_with_group(mode: &str) -> Live {
    let mut l = Live::new();
    for i in 1..=10 {
        l.run(&format!("XADD s {i}-0 f v"));
    }
    l.run("XGROUP CREATE s g 0");
    l.run("XREADGROUP GROUP g c COUNT 6 STREAMS s >");
    assert_eq!(l.run("XACK s g 1-0 2-0 3-0"), ":3");
    assert_eq!(l.run(&format!("RILL.STREAM SET s MAXAGE 1000 {mode}")), "+OK");
    l
}

#[test]
fn keepref_trims_everything_aged_and_keeps_the_pel() {
    let mut l = aged_with_group("KEEPREF");
    assert_eq!(l.timer(), ["XTRIM s MAXLEN = 0"]);
    assert_eq!(l.xlen("s"), ":0");
    assert_eq!(l.run("XPENDING s g"), "[:3 4-0 6-0 [[c 3]]]", "references kept");
    assert_eq!(l.view(&["s"]), l.replayed().view(&["s"]));
}

#[test]
fn delref_trims_everything_aged_and_its_references() {
    let mut l = aged_with_group("DELREF");
    assert_eq!(l.timer(), ["XTRIM s MINID = 999000-0 DELREF"]);
    assert_eq!(l.xlen("s"), ":0");
    assert_eq!(l.run("XPENDING s g"), "[:0 nil nil nil*]", "references dropped");
    assert_eq!(l.view(&["s"]), l.replayed().view(&["s"]));
}

/// ACKED keeps what a group still references (pending, or not yet delivered), looks again a
/// second later, and trims each entry once the group is done with it.
#[test]
fn acked_keeps_referenced_entries_and_looks_again_later() {
    let mut l = aged_with_group("ACKED");
    assert_eq!(l.timer(), ["XTRIM s MINID = 6-1 ACKED"], "the walk stops after the last delivered");
    assert_eq!(l.run("XRANGE s - + COUNT 1"), "[[4-0 [f v]]]");
    assert_eq!(l.xlen("s"), ":7");
    assert_eq!(l.engine.next_policy_due(), Some(l.now_ms + super::max_age::RECHECK_MS));
    assert_eq!(l.run("XACK s g 4-0 6-0"), ":2");
    assert_eq!(l.timer(), Vec::<String>::new(), "not before the recheck");
    l.now_ms += super::max_age::RECHECK_MS;
    assert_eq!(l.timer(), ["XTRIM s MINID = 6-1 ACKED"]);
    assert_eq!(l.run("XRANGE s - 6 "), "[[5-0 [f v]]]", "5-0 is still pending");
    l.run("XREADGROUP GROUP g c STREAMS s >");
    l.run("XACK s g 5-0 7-0 8-0 9-0 10-0");
    // An XADD takes the lazy path once the recheck time has come.
    l.now_ms += super::max_age::RECHECK_MS;
    l.run("XADD s * f v");
    let now = l.now_ms;
    assert_eq!(l.last_record(), [format!("XADD s {now}-0 f v"), "XTRIM s MINID = 10-1 ACKED".to_string()]);
    assert_eq!(l.xlen("s"), ":1");
    assert_eq!(l.engine.next_policy_due(), Some(now + 1000 + 1));
    assert_eq!(l.view(&["s"]), l.replayed().view(&["s"]));
}

/// A log replay (and a replica applying its primary's records) reaches the live state from
/// the effects alone and trims nothing by itself: not while applying, not on an XADD run as a
/// command while loading, not from the sweep of a replica; once loading ends, its timer does
/// what the live one does.
#[test]
fn replay_reaches_the_same_state_and_never_trims_by_itself() {
    let mut l = Live::new();
    for i in 0..300 {
        l.now_ms = START_MS + i;
        l.run("XADD s * f v");
        l.run("XADD d * f v");
    }
    l.run("XGROUP CREATE s g 0");
    l.run("XREADGROUP GROUP g c COUNT 100 STREAMS s >");
    l.run("XACK s g 1000000-0 1000001-0");
    l.run("RILL.STREAM SET s MAXAGE 50 ACKED");
    l.run("RILL.STREAM SET d MAXAGE 20 DELREF");
    l.now_ms = START_MS + 320;
    l.timer();
    l.run("XADD d * f v");
    l.now_ms += 5;
    l.run("XADD s * f v");
    l.run("XACK s g 1000010-0");
    l.now_ms += 2000;
    l.timer();
    // A stream whose entries have not aged when the log ends.
    l.run("XADD k * f v");
    l.run("XADD k * f v");
    l.run("RILL.STREAM SET k MAXAGE 1000");
    // One that had no entry when MAXAGE was set: only its (replayed) append makes it due.
    l.run("XGROUP CREATE e g $ MKSTREAM");
    l.run("RILL.STREAM SET e MAXAGE 1000");
    l.run("XADD e * f v");
    let keys = ["s", "d", "k", "e"];
    let live = l.view(&keys);
    assert!(l.log.iter().flat_map(|(_, e)| e).filter(|e| text(e).starts_with("XTRIM")).count() >= 3);

    let mut copy = l.replayed();
    assert_eq!(copy.view(&keys), live, "the replayed state");
    // A replica: its sweep does nothing however late it runs.
    let mut replica = l.replica();
    assert_eq!(replica.view(&keys), live, "the replica's state");
    replica.now_ms += 1_000_000_000;
    assert_eq!(replica.timer(), Vec::<String>::new());
    assert_eq!(replica.view(&keys), live);

    // While loading, an XADD run as a command (a form the replay does not take directly)
    // appends and trims nothing.
    let mut loading = l.replayed();
    loading.engine.set_loading(true);
    assert_eq!(loading.xlen("k"), ":2");
    let add: Vec<Bytes> =
        "XADD k NOMKSTREAM 99999999-0 f v".split(' ').map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
    loading.engine.apply_effect(&loading.table, 99_999_999, Effect::Command { db: 0, args: add }).unwrap();
    assert_eq!(loading.xlen("k"), ":3");

    // The timer, later, does the same on all three (a restarted server, a promoted replica
    // enforce MAXAGE).
    replica.engine.set_replica(false);
    replica.now_ms = l.now_ms;
    for side in [&mut l, &mut copy, &mut replica] {
        side.now_ms += 3000;
        side.run("XACK s g 1000050-0");
    }
    let ours = l.timer();
    for k in ["s", "k", "e"] {
        assert!(ours.iter().any(|e| e.starts_with(&format!("XTRIM {k} "))), "{k}: {ours:?}");
    }
    assert_eq!(copy.timer(), ours, "after a restart");
    assert_eq!(replica.timer(), ours, "after a promotion");
    assert_eq!(copy.view(&keys), l.view(&keys));
    assert_eq!(replica.view(&keys), l.view(&keys));
}

/// Without MAXAGE nothing changes: XADD records only itself, the index holds nothing, the
/// timer has nothing to do, and a snapshot carries no `rill-stream` field.
#[test]
fn without_maxage_redis_behaviour_is_unchanged() {
    let mut l = Live::new();
    l.run("XADD s 1-0 f v");
    l.now_ms += 1_000_000;
    l.run("XADD s * f v");
    assert_eq!(l.last_record().len(), 1);
    assert_eq!(l.engine.max_age_index.len(), 0);
    assert_eq!(l.engine.next_policy_due(), None);
    assert_eq!(l.timer(), Vec::<String>::new());
    assert_eq!(l.xlen("s"), ":2");
    let file = snapshot(&l.engine);
    assert!(!contains(&file, b"rill-stream"));
    // Turned off, it is dropped from the index when its time comes and does nothing.
    l.run("RILL.STREAM SET s MAXAGE 10");
    l.run("RILL.STREAM SET s MAXAGE 0");
    assert_eq!(l.timer(), Vec::<String>::new());
    assert_eq!(l.engine.max_age_index.len(), 0);
    assert_eq!(l.xlen("s"), ":2");
}

fn snapshot(engine: &Engine) -> Vec<u8> {
    use crate::rdb::file::FileWriter;
    let mut w = FileWriter::new(Vec::new(), 12, START_MS).unwrap();
    let db = engine.db(0);
    w.select_db(0, db.len() as u64, 0).unwrap();
    for (k, e) in db.iter() {
        w.key(k, e).unwrap();
    }
    w.finish().unwrap().0
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The setting travels in a snapshot (an aux field before the key) and, loaded, arms the
/// sweep; it moves with its stream on RENAME.
#[test]
fn the_setting_survives_a_snapshot_and_a_rename() {
    use crate::rdb::file::FileReader;
    let mut l = Live::new();
    for i in 1..=5 {
        l.run(&format!("XADD s {i}-0 f v"));
    }
    l.run("XADD plain 1-0 f v");
    l.run("RILL.STREAM SET s MAXAGE 300000 DELREF");
    let file = snapshot(&l.engine);
    assert!(contains(&file, b"rill-stream") && contains(&file, b"MAXAGE 300000 DELREF"));
    let ctx = crate::rdb::LoadContext {
        limits: crate::types::stream::NodeLimits::default(),
        idmp_duration_secs: 100,
        idmp_max_size: 100,
        now_ms: START_MS,
        rill_streams: false,
    };
    let mut r = FileReader::new(&file, ctx, 16).unwrap();
    let mut loaded = Live::new();
    loaded.engine.set_loading(true);
    while let Some(k) = r.next_key().unwrap() {
        loaded.engine.insert(k.db, k.key, k.entry.value);
    }
    loaded.engine.set_loading(false);
    assert_eq!(loaded.view(&["s", "plain"]), l.view(&["s", "plain"]));
    assert_eq!(loaded.engine.next_policy_due(), Some(1 + 300_000 + 1));
    loaded.run("RENAME s t");
    loaded.now_ms = 400_000;
    assert_eq!(loaded.timer(), ["XTRIM t MAXLEN = 0"]);
    assert_eq!(loaded.run("RILL.STREAM GET t"), "{maxage=:300000 refmode=DELREF}");
}

/// ACKED over more referenced entries than one look takes: a look that could remove nothing
/// does not come back at once (no busy loop) but after the recheck delay; once some are acked,
/// it trims them and resumes at once for the rest of its window.
#[test]
fn acked_with_a_full_window_of_referenced_entries_waits_for_the_recheck() {
    let mut l = Live::new();
    for i in 1..=1500 {
        l.run(&format!("XADD s {i}-0 f v"));
    }
    l.run("XGROUP CREATE s g 0");
    l.run("XREADGROUP GROUP g c COUNT 2000 STREAMS s >");
    l.run("RILL.STREAM SET s MAXAGE 1000 ACKED");
    assert_eq!(l.timer(), Vec::<String>::new(), "every entry is pending");
    assert_eq!(l.engine.next_policy_due(), Some(l.now_ms + super::max_age::RECHECK_MS));
    let ids: Vec<String> = (1..=500).map(|i| format!("{i}-0")).collect();
    assert_eq!(l.run(&format!("XACK s g {}", ids.join(" "))), ":500");
    l.now_ms += super::max_age::RECHECK_MS;
    assert_eq!(l.timer(), ["XTRIM s MINID = 1001-0 ACKED"]);
    assert_eq!(l.xlen("s"), ":1000");
    assert_eq!(l.engine.next_policy_due(), Some(l.now_ms), "the window had room: at once");
    assert_eq!(l.timer(), Vec::<String>::new());
    assert_eq!(l.engine.next_policy_due(), Some(l.now_ms + super::max_age::RECHECK_MS));
    assert_eq!(l.view(&["s"]), l.replayed().view(&["s"]));
}
