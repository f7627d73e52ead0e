//! The keyspace events each command family records, checked against Redis 8.2.3.
//!
//! Each transcript line is `command => events` (`name:key`, in order). The transcripts
//! (`events_transcripts.txt`) were recorded from a real Redis 8.2.3
//! (`--notify-keyspace-events EAn`, a client PSUBSCRIBEd to `__keyevent@0__:*`, each command
//! followed by a PUBLISH marker on that pattern to close its events); rill-server's
//! `keyspace_events` test replays them against a live Redis 8.2.3 to keep them true. Where
//! rill differs, the test says so here.

use super::testkit::*;

/// The transcripts, shared with rill-server's live check against Redis.
const TRANSCRIPTS: &str = include_str!("events_transcripts.txt");

/// The lines of one `## name` section of [`TRANSCRIPTS`].
fn section(name: &str) -> &'static str {
    let start = TRANSCRIPTS.find(&format!("## {name}\n")).map(|i| i + name.len() + 4).expect("no such section");
    let rest = TRANSCRIPTS.get(start..).unwrap_or_default();
    rest.get(..rest.find("\n## ").unwrap_or(rest.len())).unwrap_or_default()
}

/// Run every line of `transcript` in order, checking the reply is no error and the events.
fn check(h: &mut Harness, transcript: &str) {
    for line in transcript.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (cmd, expected) = line.split_once("=>").unwrap_or((line, ""));
        let args: Vec<&str> = cmd.split_whitespace().collect();
        let reply = h.run(&args);
        assert!(!matches!(reply, rill_resp::Reply::Error(_)), "{cmd}: {reply:?}");
        let expected: Vec<&str> = expected.split_whitespace().collect();
        assert_eq!(events(h), expected, "{cmd}");
    }
}

#[test]
fn string_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("strings"));
    // Redis 8.2.3 stores a SET whose PXAT is past (`set`, `expire`) and expires it at the
    // next lookup; rill, as the newest Redis, stores nothing and deletes an existing key.
    check(&mut h, "SET s5 v PXAT 1 =>");
    check(&mut h, "SET s5 v => new:s5 set:s5\nSET s5 w PXAT 1 => del:s5");
}

#[test]
fn bitmap_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("bitmaps"));
}

#[test]
fn generic_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("generic"));
}

#[test]
fn list_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("list"));
}

#[test]
fn hash_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("hash"));
}

#[test]
fn hash_field_expiry_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("hash-expire"));
}

#[test]
fn set_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("set"));
}

#[test]
fn geo_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("geo"));
}

#[test]
fn stream_events_match_redis() {
    let mut h = Harness::new();
    check(&mut h, section("stream"));
}

#[test]
fn expiry_records_expired() {
    let mut h = Harness::new();
    // Lazy: the lookup that finds the key past its time records `expired` before the
    // command's own events (Redis: `APPEND s1 x => expired:s1 new:s1 append:s1`).
    check(&mut h, "SET e1 v PX 10 => new:e1 set:e1 expire:e1");
    h.now_ms += 50;
    check(&mut h, "APPEND e1 x => expired:e1 new:e1 append:e1");
    // Active expiry: each key the pass removes, and only those (the last command's events
    // are gone).
    check(&mut h, "SET e2 v PX 10 => new:e2 set:e2 expire:e2");
    check(&mut h, "SET e3 v PX 10 => new:e3 set:e3 expire:e3");
    h.now_ms += 50;
    let now = h.now_ms;
    assert_eq!(h.engine.active_expire(now, 100), 2);
    let mut got = events(&h);
    got.sort();
    assert_eq!(got, ["expired:e2", "expired:e3"]);
    // INFO's counters: three expired, two of them by the active cycle.
    let stats = h.engine.stats();
    assert_eq!((stats.expired_keys, stats.expired_keys_active), (3, 2));
    // The next command starts from an empty list.
    check(&mut h, "GET e1 =>");
}

#[test]
fn events_carry_their_db_and_class() {
    let mut h = Harness::new();
    h.db = 3;
    h.run(&["LPUSH", "k", "a"]);
    let got: Vec<(usize, &[u8], char)> = h.engine.events().map(|e| (e.db, e.key, e.event.class().letter())).collect();
    assert_eq!(got, [(3, &b"k"[..], 'n'), (3, &b"k"[..], 'l')]);
    // Every name is distinct, as the channels are.
    let mut names: Vec<&str> = crate::KeyEvent::ALL.iter().map(|e| e.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), crate::KeyEvent::ALL.len());
    // A command that fails records nothing.
    h.run(&["SET", "k", "v"]);
    h.run(&["LPUSH", "k", "a"]);
    assert_eq!(h.engine.events().count(), 0);
}

#[test]
fn restore_records_new_then_restore() {
    // Redis: RESTORE adds the key (`new`, also after REPLACE deleted the old one), then
    // `restore`, then for a REPLACE of a key that was there `overwritten` (and `type_changed`
    // for another type: checked with Redis 8.2.3); a TTL already past deletes what REPLACE
    // would replace (`del`).
    let mut h = Harness::new();
    h.run(&["SET", "k", "v"]);
    let rill_resp::Reply::Bulk(payload) = h.run(&["DUMP", "k"]) else { panic!("DUMP") };
    h.run_bytes(&[b"RESTORE", b"k2", b"0", &payload]);
    assert_eq!(events(&h), ["new:k2", "restore:k2"]);
    h.run_bytes(&[b"RESTORE", b"k2", b"0", &payload, b"REPLACE"]);
    assert_eq!(events(&h), ["new:k2", "restore:k2", "overwritten:k2"]);
    h.run(&["RPUSH", "k3", "a"]);
    h.run_bytes(&[b"RESTORE", b"k3", b"0", &payload, b"REPLACE"]);
    assert_eq!(events(&h), ["new:k3", "restore:k3", "overwritten:k3", "type_changed:k3"]);
    h.run_bytes(&[b"RESTORE", b"k2", b"1", &payload, b"REPLACE", b"ABSTTL"]);
    assert_eq!(events(&h), ["del:k2"]);
}
