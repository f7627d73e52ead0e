//! Golden fixtures of the log format: a log directory written by an earlier rill (a snapshot
//! base, a manifest and effect records of every kind), checked in under
//! `tests/fixtures/log-v1/`, must load into exactly the state recorded beside it.
//!
//! The compatibility rule (also in the README, Persistence): a rill release reads every log format
//! version whose fixture is here. A change to the record encoding, the effect tags, the
//! manifest or the snapshot writer that an old log would not load under fails this test; such
//! a change must keep reading the old version (and add a fixture for the new one), or say
//! plainly in the start-up error which versions it reads.
//!
//! `cargo test -p rill-server --test it -- --ignored log_format::write_fixture` writes a new
//! fixture from the running code (only for a new format version, into a new folder).

use crate::common::ClientExt;
use rill_testkit::{escape, Proc, RawClient, TempDir};
use std::path::{Path, PathBuf};

/// The fixture folders, oldest first.
const VERSIONS: &[&str] = &["log-v1", "log-v2"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// What the fixture's commands leave behind, as a client sees it (no clock-dependent field:
/// times in the replies are the ones the log recorded).
fn picture(c: &mut RawClient) -> String {
    let mut out = String::new();
    for db in ["0", "1", "2"] {
        assert_eq!(c.cmd(&["SELECT", db]), b"+OK\r\n");
        let mut keys: Vec<String> = match rill_testkit::parse_value(&c.cmd(&["KEYS", "*"])).unwrap() {
            rill_testkit::Value::Array(items) => {
                items.iter().map(|v| String::from_utf8_lossy(v.as_bytes().unwrap()).into_owned()).collect()
            }
            other => panic!("KEYS: {other:?}"),
        };
        keys.sort();
        for key in keys {
            let kind = String::from_utf8_lossy(&c.cmd(&["TYPE", &key])).trim().to_string();
            let mut lines = vec![format!("PEXPIRETIME {key}: {}", escape(&c.cmd(&["PEXPIRETIME", &key])))];
            let views: Vec<Vec<&str>> = match kind.as_str() {
                "+stream" => vec![
                    vec!["XINFO", "STREAM", &key, "FULL"],
                    vec!["XRANGE", &key, "-", "+"],
                    vec!["XINFO", "GROUPS", &key],
                ],
                "+hash" => vec![vec!["HGETALL", &key]],
                "+list" => vec![vec!["LRANGE", &key, "0", "-1"]],
                "+set" => vec![vec!["SMEMBERS", &key]],
                "+string" => vec![vec!["GET", &key]],
                other => panic!("{key}: unexpected type {other}"),
            };
            for v in views {
                let reply = c.cmd(&v);
                // Hashes and sets have no order (their iteration order is seeded per process).
                let shown = match v[0] {
                    "HGETALL" | "SMEMBERS" => unordered(&reply, if v[0] == "HGETALL" { 2 } else { 1 }),
                    _ => escape(&reply),
                };
                lines.push(format!("{}: {shown}", v.join(" ")));
            }
            out.push_str(&format!("db {db} {key} {kind}\n"));
            for l in lines {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    out
}

/// A flat array reply as its elements in groups of `group` (field and value for a hash),
/// sorted, so that the picture does not depend on iteration order.
fn unordered(reply: &[u8], group: usize) -> String {
    let rill_testkit::Value::Array(items) = rill_testkit::parse_value(reply).unwrap() else {
        return escape(reply);
    };
    let mut parts: Vec<String> = items
        .chunks(group)
        .map(|c| {
            c.iter().map(|v| String::from_utf8_lossy(v.as_bytes().unwrap()).into_owned()).collect::<Vec<_>>().join("=")
        })
        .collect();
    parts.sort();
    format!("{{{}}}", parts.join(", "))
}

/// Prints the state a fixture loads into (to inspect one; the test compares it).
#[test]
#[ignore]
fn print_fixture_state() {
    let version = std::env::var("RILL_GOLDEN_NAME").unwrap_or_else(|_| "log-v1".into());
    let dir = TempDir::new("rill-golden-print");
    copy_dir(&fixtures().join(&version).join("appendonlydir"), &dir.path().join("appendonlydir"));
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    print!("{}", picture(&mut p.client()));
    p.kill9();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn every_fixture_loads_into_its_recorded_state() {
    for version in VERSIONS {
        let fixture = fixtures().join(version);
        let expected = std::fs::read_to_string(fixture.join("expected.txt")).unwrap();
        let dir = TempDir::new("rill-test-golden");
        copy_dir(&fixture.join("appendonlydir"), &dir.path().join("appendonlydir"));
        let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
        let mut c = p.client();
        let got = picture(&mut c);
        assert!(!p.log().contains("could not be replayed"), "{version}: {}", p.log());
        assert_eq!(got, expected, "{version}: the fixture no longer loads into the state it recorded");
        p.kill9();
    }
}

/// Commands covering every kind of effect record: commands logged as themselves, XADD with its
/// ID, group changes (deliveries, claims, acks, NACKs), exact trims, SPOP's members, expiry
/// deletions, FLUSHDB, SWAPDB, a transaction.
fn fixture_commands() -> Vec<Vec<&'static str>> {
    let far = "4102444800000"; // 2100-01-01, so the fixture's TTLs stay in the future
    let lines: &[&[&str]] = &[
        &["XGROUP", "CREATE", "orders", "billing", "$", "MKSTREAM"],
        &["XGROUP", "CREATE", "orders", "audit", "0"],
        &["XADD", "orders", "1700000000000-0", "id", "1", "amount", "10"],
        &["XADD", "orders", "1700000000001-0", "id", "2", "amount", "20"],
        &["XADD", "orders", "1700000000002-0", "id", "3", "amount", "30"],
        &["XADD", "orders", "1700000000003-0", "id", "4", "amount", "40"],
        &["XREADGROUP", "GROUP", "billing", "c1", "COUNT", "3", "STREAMS", "orders", ">"],
        &["XACK", "orders", "billing", "1700000000000-0"],
        &["XCLAIM", "orders", "billing", "c2", "0", "1700000000001-0"],
        &["XAUTOCLAIM", "orders", "billing", "c3", "0", "0-0", "COUNT", "1"],
        &["XREADGROUP", "GROUP", "audit", "a1", "STREAMS", "orders", ">"],
        &["XNACK", "orders", "audit", "FAIL", "IDS", "1", "1700000000003-0"],
        // log-v2: a history re-read names its owner, XCLAIM LASTID the entries-read it keeps.
        &["XREADGROUP", "GROUP", "billing", "c2", "STREAMS", "orders", "0"],
        &["XCLAIM", "orders", "billing", "c2", "0", "1700000000001-0", "LASTID", "1700000000005-0"],
        &["XADD", "ticks", "MAXLEN", "3", "1700000000099-0", "p", "1"],
        &["XADD", "ticks", "1700000000100-0", "p", "2"],
        &["XADD", "ticks", "1700000000101-0", "p", "3"],
        &["XADD", "ticks", "1700000000102-0", "p", "4"],
        &["XADD", "ticks", "MAXLEN", "~", "2", "1700000000103-0", "p", "5"],
        &["XTRIM", "ticks", "MAXLEN", "2"],
        &["XDEL", "orders", "1700000000002-0"],
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["HDEL", "h", "b"],
        &["HINCRBYFLOAT", "h", "a", "0.1"],
        &["RPUSH", "l", "x", "y", "z"],
        &["LPOP", "l"],
        &["SADD", "s", "m1", "m2", "m3", "m4"],
        &["SPOP", "s"],
        &["SET", "str", "v", "PXAT", far],
        &["SET", "gone", "v", "PX", "1"],
        &["INCRBY", "n", "41"],
        &["INCR", "n"],
        &["MULTI"],
        &["SET", "tx1", "a"],
        &["SET", "tx2", "b"],
        &["EXEC"],
        &["SELECT", "1"],
        &["SET", "in1", "x"],
        &["SELECT", "2"],
        &["SET", "in2", "y"],
        &["FLUSHDB"],
        &["SET", "in2b", "z"],
        &["SWAPDB", "1", "2"],
        &["SELECT", "0"],
    ];
    lines.iter().map(|l| l.to_vec()).collect()
}

/// Writes `tests/fixtures/<RILL_GOLDEN_NAME>/` (default `log-new`) from the current code: the
/// commands above with a log rewrite halfway, so the fixture has a base snapshot and records.
#[test]
#[ignore]
fn write_fixture() {
    let name = std::env::var("RILL_GOLDEN_NAME").unwrap_or_else(|_| "log-new".into());
    let out = fixtures().join(&name);
    assert!(!out.exists(), "{} exists: fixtures are never rewritten", out.display());
    let dir = TempDir::new("rill-golden-write");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    let cmds = fixture_commands();
    let half = cmds.iter().position(|c| c[0] == "XREADGROUP").unwrap();
    for (i, cmd) in cmds.iter().enumerate() {
        if i == half {
            c.rewrite_log();
        }
        let r = c.cmd(cmd);
        assert!(!r.starts_with(b"-"), "{cmd:?}: {}", escape(&r));
    }
    std::thread::sleep(std::time::Duration::from_millis(50)); // `gone` expires: a DEL record
    let _ = c.cmd(&["GET", "gone"]);
    let expected = picture(&mut c);
    // A clean shutdown finishes the files (no preallocated tail).
    c.send_command(&[b"SHUTDOWN"]).unwrap(); // no reply: the connection closes
    let mut p = p;
    p.wait_exit(std::time::Duration::from_secs(60)).expect("still running a minute after SHUTDOWN");
    copy_dir(&dir.path().join("appendonlydir"), &out.join("appendonlydir"));
    std::fs::write(out.join("expected.txt"), expected).unwrap();
}
