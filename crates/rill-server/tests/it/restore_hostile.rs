//! RESTORE payloads with a valid footer whose lengths lie: an LZF string claiming to inflate
//! to 40 GB, collections and streams claiming 2^40 elements. Each reply must be Redis
//! 8.2.3's, byte for byte (`-ERR Bad data format`), and the server must go on serving with
//! its memory bounded. The same lie in a `dump.rdb` must stop start-up with an error.
//!
//! A set or hash claiming 2^40 elements is the exception: Redis 8.2.3 (and the newest) then
//! reserves a table of 2^40 buckets (8 TB of address space, granted by overcommit), fails on
//! the next element, and is still walking that table to free it minutes later. For those
//! two the reference reply is Redis' reply to the same payload claiming 2^20 elements.
//!
//! rill runs under `ulimit -v` (2 GiB of address space), standing in for a host with little
//! memory: an allocation sized by a claimed length fails there at once and aborts the
//! process (`memory allocation of N bytes failed`), where on a large host it would take a
//! payload of hundreds of MB to reach the same abort.

use rill_testkit::{escape, free_port, ChildGuard, ReferenceServer, Server, ServerKind, TempDir};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Address space rill gets: ~10 times what it maps idle, far below any claim here.
const ADDRESS_SPACE_KIB: u64 = 2 << 20;
/// Peak resident memory rill may reach over the whole test (the largest payload is 24 MiB and
/// sits in the query buffer once, plus its arguments).
const MAX_PEAK_RSS_KIB: u64 = 512 << 10;
/// RDB version on the payloads: the newest Redis 8.2.3 reads.
const VERSION: u16 = 12;

/// CRC-64/Jones, reflected, init 0, no final xor; bit by bit (independent of the engine's).
fn crc64(bytes: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in bytes {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5 } else { crc >> 1 };
        }
    }
    crc
}

/// `body` (type byte and value) with the footer DUMP writes: version, then the CRC of both.
fn seal(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&VERSION.to_le_bytes());
    let crc = crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// An RDB length: 6-bit, 32-bit or 64-bit form.
fn len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if let Ok(n) = u32::try_from(n) {
        out.push(0x80);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A string value, LZF-compressed: `data` claiming to inflate to `claimed` bytes.
fn lzf_string(data: &[u8], claimed: u64) -> Vec<u8> {
    let mut body = vec![0x00, 0xc3];
    len(&mut body, data.len() as u64);
    len(&mut body, claimed);
    body.extend_from_slice(data);
    seal(body)
}

/// Literal-only LZF data inflating to `n` bytes.
fn lzf_literals(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + n / 32 + 1);
    let mut left = n;
    while left > 0 {
        let run = left.min(32);
        out.push((run - 1) as u8);
        out.extend((0..run).map(|i| b'a' + (i % 26) as u8));
        left -= run;
    }
    out
}

/// `prefix`, a count of `claimed`, then `tail`.
fn with_count(prefix: &[u8], claimed: u64, tail: &[u8]) -> Vec<u8> {
    let mut body = prefix.to_vec();
    len(&mut body, claimed);
    body.extend_from_slice(tail);
    seal(body)
}

/// A type-21 stream without entries, up to where its groups are counted.
fn empty_stream() -> Vec<u8> {
    // type, nodes 0, length 0, last ID 0-0, first ID 0-0, max-deleted ID 0-0, entries-added 0
    vec![21, 0, 0, 0, 0, 0, 0, 0, 0, 0]
}

/// One group `g` (last delivered 0-0, entries-read 0), up to its PEL count.
fn stream_with_group() -> Vec<u8> {
    let mut b = empty_stream();
    b.extend_from_slice(&[1, 1, b'g', 0, 0, 0]);
    b
}

/// A payload for rill and the one whose Redis reply it must match (the same one, except
/// where Redis cannot answer it; see the module doc).
struct Case {
    name: String,
    payload: Vec<u8>,
    reference: Option<Vec<u8>>,
}

fn hostile_payloads() -> Vec<Case> {
    let mut cases = vec![("LZF: 2 bytes claiming 40 GB".to_string(), lzf_string(&[0x00, b'x'], 40_000_000_000))];
    let data = lzf_literals(24 << 20);
    let n = data.len() as u64;
    for claimed in [n * 132 + 64, n * 60, 1 << 40] {
        cases.push((format!("LZF: {n} bytes claiming {claimed}"), lzf_string(&data, claimed)));
    }
    let element = [0x01, b'a'];
    let filler = vec![0x01; 4 << 20];
    for (name, t) in [("list", 1u8), ("set", 2), ("hash", 4), ("quicklist", 18), ("stream nodes", 21)] {
        if t != 2 && t != 4 {
            cases.push((format!("{name}: 2^40"), with_count(&[t], 1 << 40, &element)));
        }
        cases.push((format!("{name}: as many as bytes left"), with_count(&[t], filler.len() as u64, &filler)));
    }
    cases.push(("stream groups: 2^40".into(), with_count(&empty_stream(), 1 << 40, &element)));
    cases.push(("stream PEL: 2^40".into(), with_count(&stream_with_group(), 1 << 40, &element)));
    let mut consumers = stream_with_group();
    consumers.push(0); // empty PEL
    cases.push(("stream consumers: 2^40".into(), with_count(&consumers, 1 << 40, &element)));
    let mut cases: Vec<Case> =
        cases.into_iter().map(|(name, payload)| Case { name, payload, reference: None }).collect();
    for (name, t) in [("set", 2u8), ("hash", 4)] {
        cases.push(Case {
            name: format!("{name}: 2^40"),
            payload: with_count(&[t], 1 << 40, &element),
            reference: Some(with_count(&[t], 1 << 20, &element)),
        });
    }
    cases
}

/// `rill-server` behind a shell that limits its address space first (`exec` keeps the pid).
fn limited_rill(dir: &Path) -> PathBuf {
    let script = dir.join("rill-limited.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nulimit -v {ADDRESS_SPACE_KIB} || exit 1\nexec '{}' \"$@\"\n",
            env!("CARGO_BIN_EXE_rill-server")
        ),
    )
    .unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    script
}

/// A field of /proc/PID/status, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line =
        status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Redis 8.2.3's reply to each payload here, written down so that rill's checks (a reply, a
/// server still serving, bounded memory) also run without Redis; with it, the replies are
/// compared too.
const BAD_DATA_FORMAT: &[u8] = b"-ERR Bad data format\r\n";

#[test]
fn lying_lengths_get_redis_reply_and_the_server_keeps_serving() {
    // None (counted as a skip) only with RILL_SKIP_REFERENCE=1 and Redis 8.2.3 missing.
    let redis = Server::reference(ReferenceServer::Redis8);
    let scripts = TempDir::new("rill-restore-hostile");
    let mut rill = Server::start(ServerKind::Rill, &limited_rill(scripts.path()), &[]);
    let mut rc = rill.connect();
    let mut redis_client = redis.as_ref().map(Server::connect);
    let pid = rill.pid();
    for Case { name, payload, reference } in hostile_payloads() {
        let reference = reference.as_deref().unwrap_or(&payload);
        let args: [&[u8]; 5] = [b"RESTORE", b"k", b"0", &payload, b"REPLACE"];
        let got =
            rc.request(&args).unwrap_or_else(|e| panic!("{name}: no reply from rill ({e}); log:\n{}", rill.log()));
        if let Some(redis_client) = redis_client.as_mut() {
            let want = redis_client
                .request(&[b"RESTORE", b"k", b"0", reference, b"REPLACE"])
                .unwrap_or_else(|e| panic!("{name}: no reply from Redis ({e})"));
            assert_eq!(escape(&got), escape(&want), "{name}: rill and Redis 8.2.3 differ");
        }
        assert_eq!(escape(&got), escape(BAD_DATA_FORMAT), "{name}");
        assert_eq!(rc.request(&[b"PING"]).unwrap(), b"+PONG\r\n", "{name}: no PONG");
        assert!(rill.is_running(), "{name}: rill exited; log:\n{}", rill.log());
    }
    // Every case is a bad payload there (8.2.3 replies so to each; checked above as equal).
    if let Some(redis_client) = redis_client.as_mut() {
        assert_eq!(redis_client.request(&[b"EXISTS", b"k"]).unwrap(), b":0\r\n");
    }
    assert_eq!(rc.request(&[b"EXISTS", b"k"]).unwrap(), b":0\r\n");
    let peak = status_kib(pid, "VmHWM:");
    let now = status_kib(pid, "VmRSS:");
    eprintln!("rill: peak RSS {peak} KiB, now {now} KiB");
    assert!(peak < MAX_PEAK_RSS_KIB, "peak RSS {peak} KiB (limit {MAX_PEAK_RSS_KIB})");
    // Other clients are served too.
    assert_eq!(rill.connect().request(&[b"PING"]).unwrap(), b"+PONG\r\n");
}

/// The same reader loads `dump.rdb` at start-up: a snapshot whose string claims what no input
/// can inflate to must stop the start with an error naming the file, not abort the process.
#[test]
fn a_dump_rdb_with_a_lying_length_stops_start_up_with_an_error() {
    let dir = TempDir::new("rill-restore-hostile-rdb");
    let data = lzf_literals(24 << 20);
    let mut file = b"REDIS0012".to_vec();
    file.extend_from_slice(&[0xfe, 0, 0xfb, 1, 0]); // SELECTDB 0, RESIZEDB 1 0
    file.extend_from_slice(&[0x00, 1, b'k', 0xc3]); // a string key "k", LZF-encoded
    len(&mut file, data.len() as u64);
    len(&mut file, data.len() as u64 * 132 + 64);
    file.extend_from_slice(&data);
    file.push(0xff);
    let crc = crc64(&file);
    file.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.path().join("dump.rdb"), &file).unwrap();

    let port = free_port().to_string();
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let mut child = ChildGuard::spawn(
        Command::new(limited_rill(dir.path()))
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    );
    // Dropping the guard kills it.
    let Some(status) = child.wait_exit(Duration::from_secs(60)) else {
        panic!("rill kept running on a corrupt dump.rdb");
    };
    let text = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert_eq!(status.signal(), None, "rill was killed by a signal: {status}; log:\n{text}");
    assert!(!status.success(), "{text}");
    assert!(text.contains("dump.rdb") && text.contains("bad snapshot"), "{text}");
}

/// Commands that walk every structure of a restored key: a payload that was refused left no
/// key; one that was stored must answer each (any reply, error or not) without the server
/// failing.
const READS: &[&[&str]] = &[
    &["TYPE", "m"],
    &["XINFO", "STREAM", "m", "FULL"],
    &["XINFO", "GROUPS", "m"],
    &["XPENDING", "m", "g"],
    &["XPENDING", "m", "g", "-", "+", "100"],
    &["XRANGE", "m", "-", "+"],
    &["XREVRANGE", "m", "+", "-", "COUNT", "3"],
    &["XREADGROUP", "GROUP", "g", "c9", "COUNT", "5", "STREAMS", "m", ">"],
    &["XAUTOCLAIM", "m", "g", "c9", "0", "0-0", "COUNT", "10"],
    &["XTRIM", "m", "MAXLEN", "2"],
    &["HGETALL", "m"],
    &["LRANGE", "m", "0", "-1"],
    &["SMEMBERS", "m"],
    &["GET", "m"],
    &["DUMP", "m"],
    &["DEBUG", "DIGEST-VALUE", "m"],
];

/// 10,000 DUMP payloads of real keys (streams with groups, consumers, a PEL and deleted
/// entries; a hash, a list, a set, strings), each with 1 to 4 random bytes changed and the
/// checksum made valid again, restored one after the other: every RESTORE is answered (OK or
/// an error), a stored key answers every read, and the server serves on. The seed is printed
/// (RILL_FUZZ_SEED replays one).
#[test]
fn mutated_dump_payloads_never_crash_or_hang_the_server() {
    let seed = rill_testkit::fuzz_seed(0x5eed_d00d);
    eprintln!("seed {seed}");
    let mut rng = rill_testkit::Rng::new(seed);
    let rill = Server::rill_with(&["--enable-debug-command", "yes"]);
    let mut c = rill.connect();
    let setup: &[&[&str]] = &[
        &["XADD", "s", "1-1", "f", "v", "n", "1"],
        &["XADD", "s", "2-1", "f", "w"],
        &["XADD", "s", "3-1", "a", "b", "c", "d"],
        &["XADD", "s", "4-1", "f", "v", "n", "1"],
        &["XGROUP", "CREATE", "s", "g", "0"],
        &["XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", "s", ">"],
        &["XDEL", "s", "2-1"],
        &["XGROUP", "CREATE", "s", "h", "$"],
        &["HSET", "hh", "a", "1", "b", "2"],
        &["RPUSH", "ll", "x", "y", "z"],
        &["SADD", "ss", "p", "q", "r"],
        &["SET", "st", "hello"],
        &["SET", "num", "12345"],
    ];
    for cmd in setup {
        c.cmd(cmd);
    }
    let payloads: Vec<Vec<u8>> = ["s", "hh", "ll", "ss", "st", "num"]
        .iter()
        .map(|k| match c.cmd_value(&["DUMP", k]) {
            rill_testkit::Value::Bulk(b) => b,
            other => panic!("DUMP {k}: {other:?}"),
        })
        .collect();
    let (mut stored, mut refused) = (0u32, 0u32);
    for n in 0..10_000u32 {
        let base = &payloads[(n as usize) % payloads.len()];
        let body_len = base.len() - 10;
        let mut body = base[..body_len + 2].to_vec(); // the value and the version
        for _ in 0..=rng.below(4) {
            let at = rng.below(body_len as u64) as usize;
            body[at] = match rng.below(3) {
                0 => body[at] ^ (1 << rng.below(8)),
                1 => rng.below(256) as u8,
                _ => body[at].wrapping_add(1),
            };
        }
        let crc = crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        let reply = c
            .request(&[b"RESTORE", b"m", b"0", &body, b"REPLACE"])
            .unwrap_or_else(|e| panic!("payload {n} (seed {seed}): no reply ({e}); log:\n{}", rill.log()));
        if reply == b"+OK\r\n" {
            stored += 1;
            for read in READS {
                c.call(read).unwrap_or_else(|e| panic!("payload {n} (seed {seed}): {read:?} got no reply ({e})"));
            }
            c.cmd(&["DEL", "m"]);
        } else {
            assert!(reply.starts_with(b"-"), "payload {n}: {}", escape(&reply));
            refused += 1;
        }
    }
    eprintln!("{stored} payloads stored and read back, {refused} refused");
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(rill.connect().cmd(&["DBSIZE"]), b":6\r\n", "the original keys are untouched");
}
