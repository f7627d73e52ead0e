//! The holes a hostile-input probe found (issue 26), each tried on rill and on a real Redis
//! with the same commands: a key whose time was changed after a rewrite, toggling
//! `appendonly` with clients connected, a write acknowledged while the log just turned on has
//! no base yet, and a blocked group reader whose stream is renamed away or expires.

use crate::killtest::process::{Flavor, Fsync, ServerProcess, ServerSpec};
use rill_testkit::{rill_server_binary, RawClient, ReferenceServer, TempDir, Value};
use std::time::{Duration, Instant};

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// rill, or a reference Redis, with the log on (`always`), restartable in `dir`.
fn spec(flavor: Flavor, binary: std::path::PathBuf) -> ServerSpec {
    ServerSpec { flavor, binary, fsync: Fsync::Always, appendonly: true, extra: Vec::new() }
}

/// The servers to compare: rill first, then Redis 8.2.3 (None if it is missing and skipping
/// is allowed).
fn servers() -> Vec<(String, ServerSpec)> {
    let mut out = vec![("rill".to_string(), spec(Flavor::Rill, rill_server_binary()))];
    if let Some(bin) = ReferenceServer::Redis8.require() {
        out.push((ReferenceServer::Redis8.label().to_string(), spec(Flavor::Redis, bin)));
    }
    out
}

/// Poll `INFO persistence` until `done` accepts it (20 s at most).
#[track_caller]
fn wait_persistence(c: &mut RawClient, what: &str, done: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = text(&c.cmd(&["INFO", "persistence"]));
        if done(&info) {
            return;
        }
        assert!(Instant::now() < deadline, "INFO persistence never showed {what}:\n{info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn field(info: &str, name: &str) -> String {
    info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or_default().trim().to_string()
}

/// BGREWRITEAOF, then wait until it has finished and no other one runs.
fn rewrite(c: &mut RawClient) {
    let before = text(&c.cmd(&["INFO", "persistence"]));
    let rewrites = field(&before, "aof_rewrites");
    let reply = text(&c.cmd(&["BGREWRITEAOF"]));
    assert!(reply.starts_with('+'), "BGREWRITEAOF: {reply}");
    wait_persistence(c, "the rewrite done", |info| {
        field(info, "aof_rewrite_in_progress") == "0"
            && field(info, "aof_rewrite_scheduled") != "1"
            && (field(info, "aof_rewrites") != rewrites || rewrites.is_empty())
    });
}

/// Stop the server: kill -9, or SHUTDOWN and wait for the process to end.
fn stop(p: &mut ServerProcess, c: &mut RawClient, kill: bool) {
    if kill {
        p.kill9();
        return;
    }
    stop_with(p, c, &[b"SHUTDOWN"]);
}

/// What a client sees of `keys` after the restart: type, contents, and whether a time is set
/// (the times themselves differ between the servers by when the commands ran).
fn picture(c: &mut RawClient, keys: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for k in keys {
        let ty = text(&c.cmd(&["TYPE", k]));
        let body = match ty.as_str() {
            "+string\r\n" => text(&c.cmd(&["GET", k])),
            "+stream\r\n" => {
                let range = text(&c.cmd(&["XRANGE", k, "-", "+"]));
                let pending = text(&c.cmd(&["XPENDING", k, "g"]));
                format!("{range} pending {pending}")
            }
            _ => String::new(),
        };
        let pttl = match c.cmd_value(&["PTTL", k]) {
            Value::Int(n) if n > 0 => "a time".to_string(),
            other => format!("{other:?}"),
        };
        out.push(format!("{k}: {} {body} ttl {pttl}", ty.trim()));
    }
    out
}

/// Item 2 of issue 26: the loader dropped a key that had expired *by the snapshot's time*
/// before replaying the records that changed that time, so `SET k v PX ..`, a rewrite, then
/// PERSIST (or a later PEXPIRE, or RENAME then PERSIST, or a group read of a stream and
/// PERSIST), past the old time, lost the key at the next start. Redis keeps it.
#[test]
fn a_time_changed_after_a_rewrite_survives_the_restart_as_on_redis() {
    const OLD_TTL_MS: &str = "700";
    let keys = ["persisted", "extended", "renamed", "moved-away", "stream", "expired"];
    let mut pictures: Vec<(String, Vec<String>)> = Vec::new();
    for (label, spec) in servers() {
        for kill in [true, false] {
            let dir = TempDir::new("rill-ttl-after-rewrite");
            let data = dir.path().join("data");
            std::fs::create_dir_all(&data).unwrap();
            let (mut p, _) = spec.start(&data, None).unwrap_or_else(|e| panic!("{label}: {e}"));
            let mut c = RawClient::connect(p.port);
            for k in ["persisted", "extended", "moved-away", "expired"] {
                c.cmd(&["SET", k, "v", "PX", OLD_TTL_MS]);
            }
            c.cmd(&["XADD", "stream", "1-1", "f", "v"]);
            c.cmd(&["XGROUP", "CREATE", "stream", "g", "0"]);
            c.cmd(&["PEXPIRE", "stream", OLD_TTL_MS]);
            rewrite(&mut c);
            assert_eq!(text(&c.cmd(&["PERSIST", "persisted"])), ":1\r\n", "{label}");
            assert_eq!(text(&c.cmd(&["PEXPIRE", "extended", "100000"])), ":1\r\n", "{label}");
            assert_eq!(text(&c.cmd(&["RENAME", "moved-away", "renamed"])), "+OK\r\n", "{label}");
            assert_eq!(text(&c.cmd(&["PERSIST", "renamed"])), ":1\r\n", "{label}");
            c.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "stream", ">"]);
            assert_eq!(text(&c.cmd(&["PERSIST", "stream"])), ":1\r\n", "{label}");
            // Past the old time: only "expired" is due.
            std::thread::sleep(Duration::from_millis(900));
            stop(&mut p, &mut c, kill);
            let (p, _) = spec.start(&data, None).unwrap_or_else(|e| panic!("{label} restart: {e}"));
            let mut c = RawClient::connect(p.port);
            let seen = picture(&mut c, &keys);
            let how = if kill { "kill -9" } else { "SHUTDOWN" };
            for (k, line) in keys.iter().zip(&seen) {
                let gone = *k == "expired" || *k == "moved-away";
                assert_eq!(line.contains("+none"), gone, "{label}, after {how}: {line}");
            }
            pictures.push((format!("{label} after {how}"), seen));
        }
    }
    let (first, want) = &pictures[0];
    for (label, seen) in &pictures[1..] {
        assert_eq!(seen, want, "{label} differs from {first}");
    }
}

/// Item 3 of issue 26: after `CONFIG SET appendonly no` then `yes`, every connection's next
/// batch waited for an offset of the old log in the new one: the reply to the second CONFIG
/// SET never came and every client was closed without a reply. The same commands on Redis get
/// the same replies, and what was written survives a kill -9.
#[test]
fn toggling_appendonly_keeps_every_client_served_as_on_redis() {
    let mut transcripts = Vec::new();
    for (label, spec) in servers() {
        let dir = TempDir::new("rill-toggle-aof");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let (mut p, _) = spec.start(&data, None).unwrap_or_else(|e| panic!("{label}: {e}"));
        let mut admin = RawClient::connect(p.port);
        let mut other = RawClient::connect(p.port);
        other.set_read_timeout(Duration::from_secs(10));
        admin.set_read_timeout(Duration::from_secs(10));
        let mut transcript = Vec::new();
        let mut run = |c: &mut RawClient, args: &[&str]| {
            let args8: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let reply = c.request(&args8).unwrap_or_else(|e| panic!("{label}: no reply to {args:?}: {e}"));
            transcript.push(format!("{} -> {}", args.join(" "), text(&reply)));
        };
        run(&mut other, &["SET", "before", "1"]);
        for round in 0..3 {
            run(&mut admin, &["CONFIG", "SET", "appendonly", "no"]);
            run(&mut other, &["INCR", "counter"]);
            run(&mut admin, &["CONFIG", "SET", "appendonly", "yes"]);
            run(&mut other, &["INCR", "counter"]);
            run(&mut admin, &["SET", &format!("round{round}"), "x"]);
            let mut fresh = RawClient::connect(p.port);
            fresh.set_read_timeout(Duration::from_secs(10));
            run(&mut fresh, &["PING"]);
            wait_persistence(&mut admin, "the log on and rewritten", |info| {
                field(info, "aof_enabled") == "1" && field(info, "aof_rewrite_in_progress") == "0"
            });
        }
        run(&mut other, &["INCR", "counter"]);
        p.kill9();
        let (p, _) = spec.start(&data, None).unwrap_or_else(|e| panic!("{label} restart: {e}"));
        let mut c = RawClient::connect(p.port);
        for k in ["before", "counter", "round0", "round1", "round2"] {
            transcript.push(format!("after restart GET {k} -> {}", text(&c.cmd(&["GET", k]))));
        }
        transcripts.push((label, transcript));
    }
    let (first, want) = &transcripts[0];
    assert!(want.iter().any(|l| l == "after restart GET counter -> $1\r\n7\r\n"), "{first}: {want:#?}");
    for (label, seen) in &transcripts[1..] {
        assert_eq!(seen, want, "{label} differs from {first}");
    }
}

/// `CONFIG SET appendonly yes` starts a log whose base (the data already in memory) is written
/// by a rewrite in the background. A write acknowledged before that base is on disk would be
/// lost by a crash (the files would hold only what came after the switch), so its reply waits
/// for the base. Enough data that the base takes a while to write; a kill -9 right after the
/// first acknowledged write must keep everything.
#[test]
fn a_write_acknowledged_after_appendonly_yes_survives_a_crash_with_everything_before_it() {
    let dir = TempDir::new("rill-aof-on-base");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut spec = spec(Flavor::Rill, rill_server_binary());
    spec.appendonly = false;
    let (mut p, _) = spec.start(&data, None).unwrap();
    let mut c = RawClient::connect(p.port);
    fill(&mut c);
    assert_eq!(text(&c.cmd(&["CONFIG", "SET", "appendonly", "yes"])), "+OK\r\n");
    assert_eq!(text(&c.cmd(&["SET", "after", "1"])), "+OK\r\n");
    p.kill9();
    spec.appendonly = true;
    let (p, _) = spec.start(&data, None).unwrap();
    let mut c = RawClient::connect(p.port);
    assert_eq!(text(&c.cmd(&["GET", "after"])), "$1\r\n1\r\n");
    assert_eq!(text(&c.cmd(&["DBSIZE"])), format!(":{}\r\n", KEYS + 1));
}

/// Keys enough that writing them as a base takes a while (a debug build: about a second).
const KEYS: usize = 200_000;

/// `KEYS` string keys, `key:0` ..., by MSETs of a thousand.
fn fill(c: &mut RawClient) {
    for chunk in 0..KEYS / 1000 {
        let mut args = vec!["MSET".to_string()];
        for i in chunk * 1000..(chunk + 1) * 1000 {
            args.push(format!("key:{i}"));
            args.push("a value of some length".to_string());
        }
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(c.request(&args).unwrap(), b"+OK\r\n");
    }
}

/// Turning the log off then on again: until the new log's base is written, the files of the
/// log turned off are what a crash restarts from (the new log used to clear the manifest and
/// remove them at once, so a crash then lost everything written while the first log was on).
#[test]
fn a_crash_before_the_new_logs_base_restarts_from_the_log_turned_off() {
    let dir = TempDir::new("rill-aof-off-on");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let spec = spec(Flavor::Rill, rill_server_binary());
    let (mut p, _) = spec.start(&data, None).unwrap();
    let mut c = RawClient::connect(p.port);
    fill(&mut c);
    assert_eq!(text(&c.cmd(&["CONFIG", "SET", "appendonly", "no"])), "+OK\r\n");
    assert_eq!(text(&c.cmd(&["CONFIG", "SET", "appendonly", "yes"])), "+OK\r\n");
    // The base (200k keys) is being written now.
    p.kill9();
    let (p, _) = spec.start(&data, None).unwrap();
    let mut c = RawClient::connect(p.port);
    assert_eq!(text(&c.cmd(&["DBSIZE"])), format!(":{KEYS}\r\n"));
}

/// Item 6 of issue 26: a group reader blocked on a stream that is renamed away or expires is
/// answered at once (Redis 8 re-runs its command: NOGROUP), not left waiting out its timeout
/// (forever with BLOCK 0). DEL, FLUSHALL and SWAPDB already woke it.
#[test]
fn a_blocked_group_reader_is_told_when_its_stream_is_renamed_or_expires_as_on_redis() {
    type Step = fn(&mut RawClient);
    let cases: [(&str, Step); 4] = [
        ("RENAME", |c| assert_eq!(c.cmd(&["RENAME", "s", "s2"]), b"+OK\r\n")),
        // Found due by active expiry.
        ("PEXPIRE", |c| assert_eq!(c.cmd(&["PEXPIRE", "s", "50"]), b":1\r\n")),
        // Found due by a command that looks at it (lazy expiry), before active expiry does.
        ("expired on access", |c| {
            c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
            assert_eq!(c.cmd(&["PEXPIRE", "s", "20"]), b":1\r\n");
            std::thread::sleep(Duration::from_millis(60));
            assert_eq!(c.cmd(&["EXISTS", "s"]), b":0\r\n");
        }),
        ("SET over it", |c| assert_eq!(c.cmd(&["SET", "s", "x"]), b"+OK\r\n")),
    ];
    let mut replies: Vec<(String, Vec<String>)> = Vec::new();
    for (label, mut spec) in servers() {
        spec.appendonly = false;
        spec.extra = vec!["--enable-debug-command".into(), "yes".into()];
        let dir = TempDir::new("rill-blocked-told");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let (p, _) = spec.start(&data, None).unwrap_or_else(|e| panic!("{label}: {e}"));
        let mut seen = Vec::new();
        for (what, step) in cases {
            let mut c = RawClient::connect(p.port);
            c.cmd(&["FLUSHALL"]);
            c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
            c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
            let mut reader = RawClient::connect(p.port);
            reader.set_read_timeout(Duration::from_secs(10));
            reader
                .send_command(&[b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK", b"0", b"STREAMS", b"s", b">"])
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !text(&c.cmd(&["INFO", "clients"])).contains("\r\nblocked_clients:1\r\n") {
                assert!(Instant::now() < deadline, "{label}: the reader never blocked");
                std::thread::sleep(Duration::from_millis(5));
            }
            step(&mut c);
            let reply = reader.read_reply().unwrap_or_else(|e| panic!("{label}, {what}: the reader was not told: {e}"));
            seen.push(format!("{what}: {}", text(&reply)));
        }
        replies.push((label, seen));
    }
    let (first, want) = &replies[0];
    assert!(want[0].contains("NOGROUP"), "{first}: {want:?}");
    for (label, seen) in &replies[1..] {
        assert_eq!(seen, want, "{label} differs from {first}");
    }
}

/// Found by the restart fuzz: SHUTDOWN SAVE (or save points) with the log on saved no
/// snapshot, so a dump.rdb kept beside the log held an older state. Redis saves it whether
/// the log is on or not.
#[test]
fn shutdown_save_with_the_log_on_writes_the_snapshot_as_redis() {
    for (label, spec) in servers() {
        let dir = TempDir::new("rill-shutdown-save");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let (mut p, _) = spec.start(&data, None).unwrap_or_else(|e| panic!("{label}: {e}"));
        let mut c = RawClient::connect(p.port);
        assert_eq!(text(&c.cmd(&["SET", "k", "at the stop"])), "+OK\r\n");
        stop_with(&mut p, &mut c, &[b"SHUTDOWN", b"SAVE"]);
        let mut without_log = spec.clone();
        without_log.appendonly = false;
        let (p, _) = without_log.start(&data, None).unwrap_or_else(|e| panic!("{label} restart: {e}"));
        let mut c = RawClient::connect(p.port);
        assert_eq!(text(&c.cmd(&["GET", "k"])), "$11\r\nat the stop\r\n", "{label}: dump.rdb at SHUTDOWN SAVE");
    }
}

/// Send a SHUTDOWN of some form and wait for the process to end.
fn stop_with(p: &mut ServerProcess, c: &mut RawClient, shutdown: &[&[u8]]) {
    let _ = c.request(shutdown);
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.is_running() {
        assert!(Instant::now() < deadline, "SHUTDOWN did not end the server");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The base of a log just turned on cannot be written (a full disk): no write made since is
/// acknowledged, later writes get -MISCONF, and once there is room again the cron writes the
/// base and writes are served; after a kill -9 everything acknowledged is there. (Redis would
/// acknowledge those writes and lose them in a crash before its rewrite succeeded.)
#[test]
fn a_base_that_cannot_be_written_holds_writes_until_it_can() {
    use std::process::Command;
    let dir = TempDir::new("rill-base-full");
    let Some(tmpfs) = crate::common::Tmpfs::mount(dir.path(), "2m") else { return };
    let mnt = tmpfs.path.clone();
    let mut spec = spec(Flavor::Rill, rill_server_binary());
    spec.appendonly = false;
    let (mut p, _) = spec.start(&mnt, None).unwrap();
    let mut c = RawClient::connect(p.port);
    // About 1 MB of data no compression shrinks (the base compresses its strings), and
    // ballast so that its base cannot fit.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut value = || -> String {
        (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 90) as u8)
            })
            .collect()
    };
    for chunk in 0..10 {
        let mut args = vec!["MSET".to_string()];
        for i in chunk * 100..(chunk + 1) * 100 {
            args.push(format!("key:{i}"));
            args.push(value());
        }
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(c.request(&args).unwrap(), b"+OK\r\n");
    }
    let free = || {
        let out = Command::new("df").args(["-B1", "--output=avail"]).arg(&mnt).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse::<usize>().unwrap()
    };
    std::fs::write(mnt.join("ballast"), vec![0u8; free().saturating_sub(300 * 1024)]).unwrap();
    // The switch and a write in one batch, so the write runs before the rewrite can fail: its
    // reply waits for the base, which fails; nothing of the batch is acknowledged, the
    // connection closes.
    let mut writer = RawClient::connect(p.port);
    writer.set_read_timeout(Duration::from_secs(10));
    let mut batch = Vec::new();
    rill_testkit::encode_command_into(&mut batch, &["CONFIG", "SET", "appendonly", "yes"]);
    rill_testkit::encode_command_into(&mut batch, &["SET", "during", "x"]);
    writer.send(&batch).unwrap();
    let reply = writer.read_reply().and_then(|a| Ok((a, writer.read_reply()?)));
    assert!(reply.is_err(), "acknowledged before its base was written: {reply:?}");
    // Then writes are not acknowledged until the base can be written: refused with -MISCONF,
    // or, when one arrives while the cron's retry of the base runs (once a second; longer on
    // a loaded machine), held and dropped with its connection when that retry fails too.
    let mut probe = RawClient::connect(p.port);
    probe.set_read_timeout(Duration::from_secs(10));
    if let Ok(reply) = probe.request(&[b"SET", b"refused", b"x"]) {
        let refused = text(&reply);
        assert!(refused.starts_with("-MISCONF Errors writing to the AOF file: "), "{refused}");
    }
    assert!(c.cmd(&["GET", "key:1"]).starts_with(b"$1000"), "reads are served");
    std::fs::remove_file(mnt.join("ballast")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = text(&c.cmd(&["SET", "after", "1"]));
        if r == "+OK\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "writes did not resume: {r}");
        std::thread::sleep(Duration::from_millis(100));
    }
    p.kill9();
    let mut with_log = spec.clone();
    with_log.appendonly = true;
    let (p, _) = with_log.start(&mnt, None).unwrap();
    let mut c = RawClient::connect(p.port);
    assert_eq!(text(&c.cmd(&["GET", "after"])), "$1\r\n1\r\n");
    assert!(c.cmd(&["GET", "key:999"]).starts_with(b"$1000"));
    drop(p);
}
