//! The append-only log and snapshots: restarts after `kill -9` reach the same state, torn and
//! corrupt logs, `--check-log`, compaction, SAVE/BGSAVE, a full disk, and maxmemory.

use rill_testkit::{free_port, ChildGuard, Proc, RawClient, TempDir, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rill-server");

fn s(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// A text picture of the state a client can observe, to compare before and after a restart.
fn picture(c: &mut RawClient) -> String {
    let mut out = String::new();
    for cmd in [
        &["XRANGE", "s", "-", "+"][..],
        // Not XPENDING's extended form: its idle times move with the clock.
        &["XINFO", "STREAM", "s", "FULL"],
        &["XPENDING", "s", "g"],
        &["XINFO", "STREAM", "s"],
        &["XINFO", "GROUPS", "s"],
        &["LRANGE", "l", "0", "-1"],
        &["SMEMBERS", "set"],
        &["HMGET", "h", "f0", "f1", "f2", "f3"],
        &["GET", "str"],
        &["PEXPIRETIME", "str"],
        &["DBSIZE"],
    ] {
        let mut reply = s(&c.cmd(cmd));
        if cmd[0] == "SMEMBERS" {
            let mut lines: Vec<&str> = reply.split("\r\n").collect();
            lines.sort_unstable();
            reply = lines.join("|");
        }
        out.push_str(&format!("{}: {reply}\n", cmd.join(" ")));
    }
    out
}

/// Poll `INFO persistence` until it holds every one of `lines` (20 s at most).
#[track_caller]
fn wait_info(c: &mut RawClient, lines: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = s(&c.cmd(&["INFO", "persistence"]));
        if lines.iter().all(|l| info.contains(&format!("\r\n{l}\r\n"))) {
            return;
        }
        assert!(Instant::now() < deadline, "INFO persistence never showed {lines:?}:\n{info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Compare two pictures line by line, reporting the first difference briefly.
#[track_caller]
fn assert_same(got: &str, want: &str) {
    for (g, w) in got.lines().zip(want.lines()) {
        if g != w {
            let cut = |t: &str| t.chars().take(600).collect::<String>();
            panic!("state differs after restart\n got: {}\nwant: {}", cut(g), cut(w));
        }
    }
    assert_eq!(got.lines().count(), want.lines().count());
}

fn fill(c: &mut RawClient, from: usize, to: usize) {
    for i in from..to {
        c.cmd(&["XADD", "s", "MAXLEN", "~", "40", "*", "n", &i.to_string(), "payload", "x"]);
        if i % 7 == 0 {
            c.cmd(&["XREADGROUP", "GROUP", "g", &format!("c{}", i % 3), "COUNT", "3", "STREAMS", "s", ">"]);
        }
        if i % 11 == 0 {
            c.cmd(&["XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "2"]);
        }
        if i % 13 == 0 {
            if let Value::Array(entries) = c.cmd_value(&["XPENDING", "s", "g", "-", "+", "1"]) {
                if let Some(Value::Array(e)) = entries.first() {
                    if let Some(Value::Bulk(id)) = e.first() {
                        let id = s(id);
                        c.cmd(&["XACK", "s", "g", &id]);
                    }
                }
            }
        }
        c.cmd(&["RPUSH", "l", &i.to_string()]);
        if i % 5 == 0 {
            c.cmd(&["SADD", "set", &i.to_string(), "a", "b"]);
            c.cmd(&["SPOP", "set"]);
            c.cmd(&["HSET", "h", &format!("f{}", i % 4), &i.to_string()]);
            c.cmd(&["LPOP", "l"]);
        }
    }
    c.cmd(&["SET", "str", "v", "EX", "1000"]);
    c.cmd(&["SET", "gone", "v", "PX", "1"]);
}

fn incr_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.rlog"))
        .collect();
    v.sort();
    v
}

/// Where the records of a log file end: at a zero length word (the padding of a file that
/// was being written under `appendfsync always`) or at the end of the file.
fn logical_end(bytes: &[u8]) -> usize {
    let mut pos = 8;
    while let Some(word) = bytes.get(pos..pos + 4) {
        let len = u32::from_le_bytes(word.try_into().unwrap()) as usize;
        if len == 0 || pos + 8 + len > bytes.len() {
            break;
        }
        pos += 8 + len;
    }
    pos
}

/// A number from `INFO persistence`.
fn info_field(c: &mut RawClient, name: &str) -> u64 {
    let info = s(&c.cmd(&["INFO", "persistence"]));
    let line =
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or_else(|| panic!("no {name}:\n{info}"));
    line.trim().parse().unwrap()
}

#[test]
fn kill9_restart_rewrite_and_restart_again_keep_the_same_state() {
    let dir = TempDir::new("rill-persist");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    fill(&mut c, 0, 300);
    std::thread::sleep(Duration::from_millis(5)); // let "gone" expire (its deletion is logged on access)
    c.cmd(&["GET", "gone"]);
    let before = picture(&mut c);
    p.kill9();

    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    let mut c = p.client();
    assert_same(&picture(&mut c), &before);
    // Compaction: the log becomes a snapshot plus a new tail; more writes go to the tail.
    assert_eq!(c.cmd(&["BGREWRITEAOF"]), b"+Background append only file rewriting started\r\n");
    wait_info(&mut c, &["aof_rewrites:1"]);
    fill(&mut c, 300, 400);
    let before = picture(&mut c);
    let manifest = std::fs::read_to_string(dir.path().join("appendonlydir/appendonly.aof.manifest.rill")).unwrap();
    assert!(manifest.contains("base appendonly.aof.2.base.rdb"), "{manifest}");
    assert_eq!(incr_files(dir.path()).len(), 1, "old files removed after the rewrite");
    p.kill9();

    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    let mut c = p.client();
    assert_same(&picture(&mut c), &before);
    // A clean SHUTDOWN, then a restart, too.
    let _ = c.request(&[b"SHUTDOWN"]);
    let _ = c.read_reply();
    drop(p);
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_same(&picture(&mut p.client()), &before);
}

#[test]
fn a_torn_tail_is_cut_back_and_a_corrupt_middle_stops_start_up() {
    let dir = TempDir::new("rill-torn");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    for i in 0..50 {
        c.cmd(&["XADD", "s", &format!("1-{}", i + 1), "n", &i.to_string()]);
    }
    p.kill9();
    let file = incr_files(dir.path()).pop().unwrap();
    let padded = std::fs::read(&file).unwrap();
    let good = padded[..logical_end(&padded)].to_vec();

    // Torn: half a record where the next one starts, then the rest of the padding (if the
    // server had preallocated any yet), as a crash mid-write leaves it.
    let mut torn = good.clone();
    torn.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3, 4, 5, 6]);
    torn.resize(torn.len().max(padded.len()), 0);
    std::fs::write(&file, &torn).unwrap();
    // aof-load-truncated no refuses it...
    let err = Proc::try_start(dir.path(), &["--appendonly", "yes", "--aof-load-truncated", "no"]).err().unwrap();
    assert!(err.contains("truncated record at offset"), "{err}");
    // ...yes (the default) cuts it back with a warning and keeps everything before it.
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(s(&p.client().cmd(&["XLEN", "s"])), ":50\r\n");
    assert!(p.log().contains("short read while loading the AOF file"));
    p.kill9();
    // The torn record is gone; whatever follows the records is new padding.
    let after = std::fs::read(&file).unwrap();
    assert_eq!(&after[..good.len()], &good[..]);
    assert!(after[good.len()..].iter().all(|&b| b == 0));

    // Corrupt: a flipped byte in the middle.
    let mut bad = good.clone();
    let mid = good.len() / 2;
    bad[mid] ^= 0x55;
    std::fs::write(&file, &bad).unwrap();
    let err = Proc::try_start(dir.path(), &["--appendonly", "yes"]).err().unwrap();
    assert!(err.contains("Bad file format reading the append only file") && err.contains("at offset"), "{err}");
    // --check-log names it; --fix cuts the file back to the last good record.
    let out = Command::new(BIN).args(["--check-log", file.to_str().unwrap()]).output().unwrap();
    let text = s(&out.stdout);
    assert!(!out.status.success() && text.contains("corrupt record at offset"), "{text}");
    let out = Command::new(BIN).args(["--check-log", file.to_str().unwrap(), "--fix"]).output().unwrap();
    assert!(out.status.success(), "{}", s(&out.stdout));
    let out = Command::new(BIN).args(["--check-log", file.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success() && s(&out.stdout).contains("OK"), "{}", s(&out.stdout));
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    let len: i64 = s(&p.client().cmd(&["XLEN", "s"]))[1..].trim().parse().unwrap();
    assert!(len > 0 && len < 50, "a prefix survives: {len}");
}

/// A rewrite lists its new log file before the writer switches to it; a crash in between (or
/// a disk failing mid-write, which keeps the writer from cutting its torn record off) leaves
/// the torn record in the file before, followed by a file holding nothing. Start-up cuts it
/// back as it would the newest file's, and appends to the new one; once the new file holds a
/// record, the same damage before it is refused.
#[test]
fn a_torn_tail_before_a_rewrites_empty_new_file_is_cut_back_too() {
    let dir = TempDir::new("rill-torn-rotation");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    for i in 0..50 {
        c.cmd(&["XADD", "s", &format!("1-{}", i + 1), "n", &i.to_string()]);
    }
    p.kill9();
    let files = incr_files(dir.path());
    assert_eq!(files.len(), 1);
    let first = files[0].clone();
    let padded = std::fs::read(&first).unwrap();
    let good = padded[..logical_end(&padded)].to_vec();
    let mut torn = good.clone();
    torn.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3, 4, 5, 6]);
    torn.resize(torn.len().max(padded.len()), 0);
    std::fs::write(&first, &torn).unwrap();
    let second = dir.path().join("appendonlydir/appendonly.aof.2.incr.rlog");
    std::fs::write(&second, b"RILLLOG1").unwrap();
    let manifest = dir.path().join("appendonlydir/appendonly.aof.manifest.rill");
    std::fs::write(&manifest, "rill-manifest 1\nincr appendonly.aof.1.incr.rlog\nincr appendonly.aof.2.incr.rlog\n")
        .unwrap();

    let err = Proc::try_start(dir.path(), &["--appendonly", "yes", "--aof-load-truncated", "no"]).err().unwrap();
    assert!(err.contains("appendonly.aof.1.incr.rlog ends with a truncated record at offset"), "{err}");
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    let mut c = p.client();
    assert_eq!(s(&c.cmd(&["XLEN", "s"])), ":50\r\n");
    assert!(p.log().contains("short read while loading the AOF file"));
    c.cmd(&["XADD", "s", "2-1", "n", "50"]);
    p.kill9();
    assert_eq!(std::fs::read(&first).unwrap(), good, "the torn record is cut off");
    assert!(logical_end(&std::fs::read(&second).unwrap()) > 8, "new records go to the new file");
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(s(&p.client().cmd(&["XLEN", "s"])), ":51\r\n");
    p.kill9();

    // The new file holds a record: the torn file before it was finished, the damage is not a
    // torn write.
    std::fs::write(&first, &torn).unwrap();
    let err = Proc::try_start(dir.path(), &["--appendonly", "yes"]).err().unwrap();
    assert!(err.contains("appendonly.aof.1.incr.rlog ends with a truncated record at offset"), "{err}");
}

/// Under `always` the file being written has zeros preallocated after its records: a
/// `kill -9` leaves them, the restart reads through them without a warning, and a clean
/// SHUTDOWN leaves a file that ends at its last record. INFO counts records only.
#[test]
fn always_preallocates_the_log_file_and_a_clean_shutdown_cuts_the_padding() {
    let dir = TempDir::new("rill-prealloc");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    for i in 0..200 {
        c.cmd(&["XADD", "s", "*", "n", &i.to_string()]);
    }
    let file = incr_files(dir.path()).pop().unwrap();
    // The padding is written in the background: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&file).unwrap().len() < 1 << 20 {
        assert!(Instant::now() < deadline, "no space preallocated after the records");
        std::thread::sleep(Duration::from_millis(20));
    }
    let reported = info_field(&mut c, "aof_current_size");
    p.kill9();

    let bytes = std::fs::read(&file).unwrap();
    let end = logical_end(&bytes);
    assert!(bytes.len() > end, "{} bytes, records end at {end}", bytes.len());
    assert!(bytes[end..].iter().all(|&b| b == 0), "only zeros after the records");
    assert_eq!(reported, end as u64, "aof_current_size counts the records, not the padding");
    let out = Command::new(BIN).args(["--check-log", file.to_str().unwrap()]).output().unwrap();
    let text = s(&out.stdout);
    assert!(
        out.status.success()
            && text.contains("200 records")
            && text.contains(&format!("{} bytes of zero padding", bytes.len() - end)),
        "{text}"
    );
    // --fix cuts the padding off (on a copy: the restart below reads the original).
    let copy = dir.path().join("copy.incr.rlog");
    std::fs::copy(&file, &copy).unwrap();
    let out = Command::new(BIN).args(["--check-log", copy.to_str().unwrap(), "--fix"]).output().unwrap();
    assert!(out.status.success(), "{}", s(&out.stdout));
    assert_eq!(std::fs::read(&copy).unwrap(), &bytes[..end]);

    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    assert_eq!(s(&c.cmd(&["XLEN", "s"])), ":200\r\n");
    let log = p.log();
    assert!(!log.contains("short read") && !log.contains("Bad file format"), "{log}");
    for i in 200..300 {
        c.cmd(&["XADD", "s", "*", "n", &i.to_string()]);
    }
    // A rewrite rotates to a new file; the sizes INFO reports still leave the padding out.
    assert_eq!(c.cmd(&["BGREWRITEAOF"]), b"+Background append only file rewriting started\r\n");
    wait_info(&mut c, &["aof_rewrites:1"]);
    for i in 300..400 {
        c.cmd(&["XADD", "s", "*", "n", &i.to_string()]);
    }
    let file = incr_files(dir.path()).pop().unwrap();
    let base_size = std::fs::metadata(dir.path().join("appendonlydir/appendonly.aof.2.base.rdb")).unwrap().len();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&file).unwrap().len() < 1 << 20 {
        assert!(Instant::now() < deadline, "no space preallocated in the file after the rewrite");
        std::thread::sleep(Duration::from_millis(20));
    }
    let reported = info_field(&mut c, "aof_current_size");
    let _ = c.request(&[b"SHUTDOWN"]);
    let _ = c.read_reply();
    let mut p = p;
    let status = p.wait_exit(Duration::from_secs(60)).expect("still running a minute after SHUTDOWN");
    assert!(status.success(), "{status}");

    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(logical_end(&bytes), bytes.len(), "a cleanly closed file ends at its last record");
    assert_eq!(reported, base_size + bytes.len() as u64);
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(s(&p.client().cmd(&["XLEN", "s"])), ":400\r\n");
}

#[test]
fn save_bgsave_and_dump_rdb_reload() {
    let dir = TempDir::new("rill-save");
    let p = Proc::start(dir.path(), &["--appendonly", "no"]);
    let mut c = p.client();
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    fill(&mut c, 0, 100);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert!(s(&c.cmd(&["INFO", "persistence"])).contains("rdb_changes_since_last_save:0"));
    fill(&mut c, 100, 150);
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    wait_info(&mut c, &["rdb_bgsave_in_progress:0"]);
    // "gone" has expired; reading it removes it, so DBSIZE does not depend on whether active
    // expiry got to it first. The snapshot may still hold it: loading skips it (as Redis).
    std::thread::sleep(Duration::from_millis(5));
    c.cmd(&["GET", "gone"]);
    let before = picture(&mut c);
    assert!(dir.path().join("dump.rdb").exists());
    p.kill9();
    let p = Proc::start(dir.path(), &["--appendonly", "no"]);
    assert_same(&picture(&mut p.client()), &before);
    p.kill9();
    // Turning the log on for the first time takes dump.rdb as its starting point.
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_same(&picture(&mut p.client()), &before);
    p.kill9();
    // The log holds the data by itself now (dump.rdb was copied in as its base).
    std::fs::remove_file(dir.path().join("dump.rdb")).unwrap();
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_same(&picture(&mut p.client()), &before);
}

/// Issue 26: a key in database 15 (`SELECT 15`, `SET a 1`) comes back after a restart, from
/// a compacted log's base and from `dump.rdb`. The loader read the database index as a count
/// of things still to read, bounded by the bytes left after it, and refused this small file.
/// With fewer databases than the file uses, start-up stops with a message naming both.
#[test]
fn a_key_in_database_15_survives_a_rewrite_or_a_save_and_a_restart() {
    let check = |p: &Proc, how: &str| {
        let mut c = p.client();
        assert_eq!(c.cmd(&["SELECT", "15"]), b"+OK\r\n");
        assert_eq!(s(&c.cmd(&["GET", "a"])), "$1\r\n1\r\n", "{how}; log:\n{}", p.log());
    };
    let write = |p: &Proc| {
        let mut c = p.client();
        assert_eq!(c.cmd(&["SELECT", "15"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["SET", "a", "1"]), b"+OK\r\n");
        c
    };

    let dir = TempDir::new("rill-db15-log");
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    let mut c = write(&p);
    assert_eq!(c.cmd(&["BGREWRITEAOF"]), b"+Background append only file rewriting started\r\n");
    wait_info(&mut c, &["aof_rewrites:1"]);
    p.kill9();
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    check(&p, "BGREWRITEAOF, restart");
    drop(p);

    let dir = TempDir::new("rill-db15-save");
    let p = Proc::start(dir.path(), &["--appendonly", "no"]);
    let mut c = write(&p);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    p.kill9();
    let p = Proc::start(dir.path(), &["--appendonly", "no"]);
    check(&p, "SAVE, restart");
    drop(p);

    // The same file on a server with 8 databases: refused, saying what to change.
    let log = match Proc::try_start(dir.path(), &["--appendonly", "no", "--databases", "8"]) {
        Ok(_) => panic!("rill started with 8 databases on a file using database 15"),
        Err(log) => log,
    };
    assert!(
        log.contains("dump.rdb")
            && log.contains("database 15")
            && log.contains("8 databases")
            && log.contains("`databases 16`"),
        "{log}"
    );
}

/// A log written by a server with 32 databases, replayed by one with 16: its records on
/// database 20 have nowhere to go, and start-up stops saying so (skipping them, with a
/// warning, lost that database's writes). With 32 databases again, everything is back.
#[test]
fn a_log_changing_a_database_the_server_lacks_stops_start_up() {
    let dir = TempDir::new("rill-db20-log");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--databases", "32"]);
    let mut c = p.client();
    assert_eq!(c.cmd(&["SELECT", "20"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "a", "1"]), b"+OK\r\n");
    assert_eq!(s(&c.cmd(&["XADD", "s", "*", "f", "v"])).len(), 22);
    assert_eq!(c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]), b"+OK\r\n");
    p.kill9();
    let log = match Proc::try_start(dir.path(), &["--appendonly", "yes"]) {
        Ok(_) => panic!("rill replayed a log of database 20 with 16 databases"),
        Err(log) => log,
    };
    assert!(
        log.contains(".incr.rlog")
            && log.contains("database 20")
            && log.contains("16 databases")
            && log.contains("`databases 21`"),
        "{log}"
    );
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--databases", "32"]);
    let mut c = p.client();
    assert_eq!(c.cmd(&["SELECT", "20"]), b"+OK\r\n");
    assert_eq!(s(&c.cmd(&["GET", "a"])), "$1\r\n1\r\n");
    assert_eq!(s(&c.cmd(&["XINFO", "GROUPS", "s"])).matches("$4\r\nname\r\n$1\r\ng").count(), 1);
}

#[test]
fn maxmemory_refuses_growth_but_not_deletion() {
    let dir = TempDir::new("rill-oom");
    let p = Proc::start(dir.path(), &["--appendonly", "no"]);
    let mut c = p.client();
    let info = s(&c.cmd(&["INFO", "memory"]));
    let used: u64 = info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap();
    let limit = used + 2 * 1024 * 1024;
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]), b"+OK\r\n");
    let big = "x".repeat(16 * 1024);
    let mut oom = None;
    for i in 0..1000 {
        let r = c.cmd(&["XADD", "s", "*", "i", &i.to_string(), "big", &big]);
        if r.starts_with(b"-") {
            oom = Some(s(&r));
            break;
        }
    }
    assert_eq!(oom.as_deref(), Some("-OOM command not allowed when used memory > 'maxmemory'.\r\n"));
    // Far over the limit: reads, deletions and trims still work; SET (denyoom) does not.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    assert!(c.cmd(&["XLEN", "s"]).starts_with(b":"));
    assert!(s(&c.cmd(&["SET", "k", "v"])).starts_with("-OOM"));
    assert_eq!(c.cmd(&["XTRIM", "s", "MAXLEN", "0"]).first(), Some(&b':'));
    assert_eq!(c.cmd(&["DEL", "s"]), b":1\r\n");
    // In MULTI the refusal dooms the EXEC.
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert!(s(&c.cmd(&["XADD", "s", "*", "a", "b"])).starts_with("-OOM"));
    assert!(s(&c.cmd(&["EXEC"])).starts_with("-EXECABORT"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
}

/// A full disk: writes are refused with MISCONF (nothing acknowledged is lost), reads go on,
/// and writes resume once space is back. Needs root for a small tmpfs; counted as skipped
/// otherwise (a failure under CI=true).
#[test]
fn a_full_disk_refuses_writes_and_recovers() {
    let dir = TempDir::new("rill-full");
    let Some(tmpfs) = crate::common::Tmpfs::mount(dir.path(), "1m") else { return };
    let mnt = tmpfs.path.clone();
    // Ballast we can delete to make room again.
    std::fs::write(mnt.join("ballast"), vec![0u8; 256 * 1024]).unwrap();
    let p = Proc::start(&mnt, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    let big = "y".repeat(8 * 1024);
    let mut acked: Vec<String> = Vec::new();
    let mut refused = None;
    for i in 0..400 {
        let mut c2 = match RawClient::try_connect(p.port) {
            Ok(c2) => c2,
            Err(_) => break,
        };
        c2.set_read_timeout(Duration::from_secs(5));
        match c2.request(&[b"XADD", b"s", b"*", b"big", big.as_bytes()]) {
            Ok(r) if r.starts_with(b"$") => acked.push(s(&r).lines().nth(1).unwrap().to_string()),
            Ok(r) if r.starts_with(b"-MISCONF") => {
                refused = Some(s(&r));
                break;
            }
            // The write that hit the full disk: its connection is closed without a reply.
            _ => {}
        }
        if i == 399 {
            panic!("the disk never filled");
        }
    }
    let refused = refused.expect("writes are refused once the disk is full");
    assert_eq!(refused, "-MISCONF Errors writing to the AOF file: No space left on device\r\n");
    assert!(s(&c.cmd(&["INFO", "persistence"])).contains("aof_last_write_status:err"));
    // Reads still work.
    assert!(c.cmd(&["XLEN", "s"]).starts_with(b":"));
    // Make room: the writer's retry succeeds and writes are accepted again.
    std::fs::remove_file(mnt.join("ballast")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.cmd(&["XADD", "s", "*", "small", "1"]);
        if r.starts_with(b"$") {
            break;
        }
        assert!(Instant::now() < deadline, "writes did not resume: {}", s(&r));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(s(&c.cmd(&["INFO", "persistence"])).contains("aof_last_write_status:ok"));
    p.kill9();
    // Every acknowledged write survives the restart.
    let p = Proc::start(&mnt, &["--appendonly", "yes"]);
    let mut c = p.client();
    for id in &acked {
        assert!(c.cmd(&["XRANGE", "s", id, id]).len() > 8 * 1024, "acknowledged {id} is missing");
    }
}

#[test]
fn while_loading_commands_answer_loading_and_info_says_so() {
    let dir = TempDir::new("rill-loading");
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    let mut c = p.client();
    for i in 0..300 {
        c.cmd(&["XADD", "s", "*", "n", &i.to_string()]);
    }
    p.kill9();
    // 300 records at 10 ms each: three seconds of loading to look at.
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("loading.log")).unwrap();
    let port_s = port.to_string();
    let mut child = ChildGuard::spawn(
        Command::new(BIN)
            .args(["--port", &port_s, "--bind", "127.0.0.1", "--dir", dir.path().to_str().unwrap(), "--save", ""])
            .args(["--appendonly", "yes", "--key-load-delay", "10000"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut c = loop {
        if let Ok(c) = RawClient::try_connect(port) {
            break c;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(s(&c.cmd(&["XLEN", "s"])), "-LOADING Redis is loading the dataset in memory\r\n");
    assert_eq!(s(&c.cmd(&["PING"])), "-LOADING Redis is loading the dataset in memory\r\n");
    assert!(s(&c.cmd(&["INFO", "persistence"])).contains("\r\nloading:1\r\n"));
    wait_info(&mut c, &["loading:0"]);
    assert_eq!(s(&c.cmd(&["XLEN", "s"])), ":300\r\n");
    child.kill9();
}

#[test]
fn config_set_appendonly_starts_the_log_from_the_current_data() {
    let dir = TempDir::new("rill-aof-on");
    let p = Proc::start(dir.path(), &["--appendonly", "no"]);
    let mut c = p.client();
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    fill(&mut c, 0, 60);
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "yes"]), b"+OK\r\n");
    wait_info(&mut c, &["aof_enabled:1", "aof_rewrites:1"]);
    fill(&mut c, 60, 90);
    let before = picture(&mut c);
    p.kill9();
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_same(&picture(&mut p.client()), &before);
}

#[test]
fn switching_appendfsync_at_runtime_keeps_answering_and_keeps_every_write() {
    // Records written through by connections under `everysec` are not covered by an fsync
    // round when the policy becomes `always`; the replies that then wait for them (CONFIG
    // SET's own, then every later one) must be released by an fsync, not wait forever.
    let dir = TempDir::new("rill-persist");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "everysec"]);
    let client = || {
        let c = p.client();
        c.set_read_timeout(Duration::from_secs(5));
        c
    };
    // Only writes a connection writes through itself: no expiring keys, whose deletions the
    // writer thread would write (and so publish as safe) on its own.
    let writes = |c: &mut RawClient, from: usize| {
        for i in from..from + 50 {
            c.cmd(&["XADD", "s", "*", "n", &i.to_string()]);
            if i % 7 == 0 {
                c.cmd(&["XREADGROUP", "GROUP", "g", "c1", "COUNT", "3", "STREAMS", "s", ">"]);
            }
        }
    };
    let mut c = client();
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    writes(&mut c, 0);
    drop(c);
    std::thread::sleep(Duration::from_millis(100));
    for (policy, from) in [("always", 50), ("no", 100), ("always", 150)] {
        let mut c = client();
        let r = c.request(&[b"CONFIG", b"SET", b"appendfsync", policy.as_bytes()]);
        assert_eq!(r.unwrap(), b"+OK\r\n", "CONFIG SET appendfsync {policy}");
        writes(&mut c, from);
    }
    let before = picture(&mut client());
    p.kill9();
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_same(&picture(&mut p.client()), &before);
}

/// XGROUP SETID ... ENTRIESREAD can put a group's entries-read above the stream's entries-added
/// (then XINFO shows a negative lag, as in Redis). The compacted log holds that state and a
/// restart must load it, not call it corrupt and refuse to start.
#[test]
fn a_group_read_past_entries_added_survives_compaction_and_restart() {
    let dir = TempDir::new("rill-entries-read");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    c.cmd(&["XADD", "s", "1-0", "f", "1"]);
    c.cmd(&["XADD", "s", "2-0", "f", "2"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    c.cmd(&["XGROUP", "SETID", "s", "g", "1-0", "ENTRIESREAD", "2"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
    let groups = s(&c.cmd(&["XINFO", "GROUPS", "s"]));
    assert!(groups.contains("$12\r\nentries-read\r\n:3\r\n$3\r\nlag\r\n:-1\r\n"), "{groups}");
    assert_eq!(c.cmd(&["BGREWRITEAOF"]), b"+Background append only file rewriting started\r\n");
    wait_info(&mut c, &["aof_rewrites:1", "aof_rewrite_in_progress:0"]);
    let before = picture(&mut c);
    p.kill9();
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_same(&picture(&mut p.client()), &before);
    assert_eq!(s(&p.client().cmd(&["XINFO", "GROUPS", "s"])), groups);
}

/// XDELEX ... DELREF of an entry already trimmed away deletes nothing (reply -1) but drops the
/// groups' pending references to it: that change is logged too, so a restart does not bring
/// the references back.
#[test]
fn xdelex_delref_of_a_trimmed_entry_survives_a_restart() {
    let dir = TempDir::new("rill-delref");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = p.client();
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    c.cmd(&["XADD", "s", "5-0", "f", "v"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
    assert_eq!(c.cmd(&["XTRIM", "s", "MINID", "6"]), b":1\r\n");
    assert_eq!(c.cmd(&["XDELEX", "s", "DELREF", "IDS", "1", "5-0"]), b"*1\r\n:-1\r\n");
    assert_eq!(c.cmd(&["XPENDING", "s", "g"]), b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n");
    let before = picture(&mut c);
    p.kill9();
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    assert_same(&picture(&mut p.client()), &before);
}

/// Crash-only: a panic inside a command (DEBUG PANIC inside a transaction, after the
/// transaction's first write has changed the keyspace) ends the process instead of leaving the
/// half-applied transaction visible to other clients; the restart replays every acknowledged
/// write and nothing of the transaction.
#[test]
fn a_panic_in_a_command_aborts_the_server_and_the_restart_replays_the_log() {
    for policy in ["always", "everysec"] {
        let dir = TempDir::new("rill-panic");
        let args = ["--appendonly", "yes", "--appendfsync", policy, "--enable-debug-command", "yes"];
        let mut p = Proc::start(dir.path(), &args);
        let mut c = p.client();
        for i in 0..50 {
            assert_eq!(c.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]), b"+OK\r\n");
        }
        let mut other = p.client();
        assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["SET", "half", "1"]), b"+QUEUED\r\n");
        assert_eq!(c.cmd(&["DEBUG", "PANIC"]), b"+QUEUED\r\n");
        c.send_command(&[b"EXEC"]).unwrap();
        let (got, closed) = c.read_until_close(Duration::from_secs(10));
        assert!(closed && got.is_empty(), "{policy}: EXEC answered {}", s(&got));
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = p.child.try_wait() {
                break status;
            }
            assert!(Instant::now() < deadline, "{policy}: the server kept running after a panic");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(!status.success(), "{policy}: {status}");
        assert!(p.log().contains("DEBUG PANIC called at Unix time"), "{policy}: {}", p.log());
        // Nobody is served the half-applied transaction.
        assert!(other.request(&[b"GET", b"half"]).is_err(), "{policy}: still serving after the panic");
        drop(p);
        let p = Proc::start(dir.path(), &args);
        let mut c = p.client();
        for i in 0..50 {
            assert_eq!(s(&c.cmd(&["GET", &format!("k{i}")])), format!("${}\r\nv{i}\r\n", format!("v{i}").len()));
        }
        assert_eq!(c.cmd(&["GET", "half"]), b"$-1\r\n", "{policy}");
    }
}

/// DUMP payloads cross between rill and Redis 8.2.3 both ways when a stream value sits at a
/// listpack back-length boundary: a 16 378-byte value is a 16 383-byte listpack element, whose
/// back-length Redis writes (and validates, with sanitize-dump-payload yes) in 3 bytes, not 2;
/// likewise 4 bytes at 2 097 151. Each neighbour size is checked too.
#[test]
fn dump_payloads_cross_with_redis_at_listpack_back_length_boundaries() {
    use rill_testkit::{ReferenceServer, Server, ServerKind};
    let Some(bin) = ReferenceServer::Redis8.require() else { return };
    let redis = Server::start(ServerKind::Redis(ReferenceServer::Redis8), &bin, &["--sanitize-dump-payload", "yes"]);
    let rill = Server::subject();
    let (mut r, mut q) = (RawClient::connect(redis.port), RawClient::connect(rill.port));
    for n in [16_377usize, 16_378, 16_379, 2_097_145, 2_097_146, 2_097_147] {
        let value = vec![b'x'; n];
        for redis_to_rill in [true, false] {
            let (from, to, way) =
                if redis_to_rill { (&mut r, &mut q, "Redis -> rill") } else { (&mut q, &mut r, "rill -> Redis") };
            from.request(&[b"DEL", b"s"]).unwrap();
            to.request(&[b"DEL", b"s"]).unwrap();
            assert_eq!(from.request(&[b"XADD", b"s", b"1-1", b"f", &value]).unwrap(), b"$3\r\n1-1\r\n");
            let Value::Bulk(payload) = from.call(&[&b"DUMP"[..], b"s"]).unwrap() else { panic!("DUMP") };
            let restored = to.request(&[b"RESTORE", b"s", b"0", &payload]).unwrap();
            assert_eq!(restored, b"+OK\r\n", "{way}, a {n}-byte value: {}", String::from_utf8_lossy(&restored));
            let Value::Array(entries) = to.call(&[&b"XRANGE"[..], b"s", b"-", b"+"]).unwrap() else { panic!("XRANGE") };
            let fields = entries[0].as_array().unwrap()[1].as_array().unwrap();
            assert_eq!(fields[1].as_bytes().unwrap().len(), n, "{way}");
        }
    }
}

/// `aof_pending_fsync_bytes` counts bytes written and not yet fsynced: under `everysec` it
/// falls back to 0 once the second's fsync ran (it used to only grow), under `always` it is 0
/// after every reply, under `no` (rill never fsyncs) it is 0.
#[test]
fn pending_fsync_bytes_fall_back_once_fsynced() {
    let server = rill_testkit::Server::rill_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let mut c = server.connect();
    for round in 0..3 {
        for i in 0..50 {
            c.cmd(&["XADD", "s", "*", "round", &round.to_string(), "i", &i.to_string()]);
        }
        let t = std::time::Instant::now();
        while info_field(&mut c, "aof_pending_fsync_bytes") != 0 {
            assert!(t.elapsed() < Duration::from_secs(5), "round {round}: never fsynced");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for policy in ["always", "no"] {
        c.cmd(&["CONFIG", "SET", "appendfsync", policy]);
        for i in 0..20 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        assert_eq!(info_field(&mut c, "aof_pending_fsync_bytes"), 0, "{policy}");
    }
}
