//! rill as a primary of real replicas, over Redis' replication protocol: a real Redis 8.2.3
//! started with `--replicaof` rill syncs fully (the snapshot, then the stream), follows a
//! random workload of every type rill stores (streams with groups, claims and PELs; strings,
//! hashes, lists, sets; TTLs; two databases; transactions), continues partially after its link
//! is cut, and ends equal to rill key by key. `redis-cli --rdb` and `redis-cli --replica`
//! against rill, and the replies of REPLCONF / PSYNC / SYNC, are checked here too.

pub(crate) use crate::replication::text;
use crate::replication::{command as stream_command, picture};
use rill_testkit::{fresh_seed, fuzz_seed, Launch, RawClient, ReferenceServer, Rng, Server, ServerKind, Value};
use std::time::{Duration, Instant};

/// `field:value` of an INFO reply.
pub(crate) fn info_field(client: &mut RawClient, section: &str, field: &str) -> Option<String> {
    let v = client.cmd_value(&["INFO", section]);
    let text = String::from_utf8_lossy(v.as_bytes()?).into_owned();
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

/// Wait until the replica's link is up and it has applied everything rill has sent.
pub(crate) fn wait_caught_up(primary: &mut RawClient, replica: &mut RawClient) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ours = info_field(primary, "replication", "master_repl_offset");
        let up = info_field(replica, "replication", "master_link_status").as_deref() == Some("up");
        let theirs = info_field(replica, "replication", "slave_repl_offset");
        if up && ours.is_some() && ours == theirs {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replica did not catch up: rill at {ours:?}, replica at {theirs:?} (up: {up})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every key of the selected database, sorted.
fn keys(client: &mut RawClient) -> Vec<String> {
    let mut keys: Vec<String> = match client.cmd_value(&["KEYS", "*"]) {
        Value::Array(items) => items.iter().map(text).collect(),
        other => panic!("KEYS: {other:?}"),
    };
    keys.sort();
    keys
}

/// What must be equal of one key on primary and replica: its type, its value, whether it
/// has a TTL.
fn key_picture(client: &mut RawClient, key: &str) -> Vec<String> {
    let kind = text(&client.cmd_value(&["TYPE", key]));
    let mut out = vec![format!("{key}: {kind}")];
    let mut sorted = |args: &[&str]| {
        let mut items: Vec<String> = match client.cmd_value(args) {
            Value::Array(items) => items.iter().map(text).collect(),
            other => vec![text(&other)],
        };
        items.sort();
        items
    };
    match kind.as_str() {
        "string" => out.push(text(&client.cmd_value(&["GET", key]))),
        "list" => out.push(text(&client.cmd_value(&["LRANGE", key, "0", "-1"]))),
        "hash" => out.extend(sorted(&["HGETALL", key])),
        "set" => out.extend(sorted(&["SMEMBERS", key])),
        "stream" => out.extend(picture(&client.cmd_value(&["XINFO", "STREAM", key, "FULL", "COUNT", "0"]))),
        other => panic!("{key}: a type the workload does not make: {other}"),
    }
    let ttl = text(&client.cmd_value(&["PTTL", key]));
    out.push(if ttl == "-1" { "no ttl".into() } else { "ttl".into() });
    out
}

/// Databases 0 and 1 must hold the same keys with the same values on both.
pub(crate) fn assert_equal(primary: &mut RawClient, replica: &mut RawClient, what: &str) {
    assert_equal_but(primary, replica, what, &[]);
}

/// [`assert_equal`], leaving out the group fields named in `unlike` (`lag`: Redis 7.0 counts
/// a group's lag differently from 8.x, and rill counts it as 8.x does).
pub(crate) fn assert_equal_but(primary: &mut RawClient, replica: &mut RawClient, what: &str, unlike: &[&str]) {
    let strip = |picture: Vec<String>| -> Vec<String> {
        picture
            .into_iter()
            .map(|line| {
                line.split(' ')
                    .filter(|w| !unlike.iter().any(|u| w.starts_with(&format!("{u}="))))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    for db in ["0", "1"] {
        assert_eq!(primary.cmd(&["SELECT", db]), b"+OK\r\n");
        assert_eq!(replica.cmd(&["SELECT", db]), b"+OK\r\n");
        let ours = keys(primary);
        assert_eq!(ours, keys(replica), "{what}: the keys of database {db} differ");
        for key in &ours {
            let (ours, theirs) = (strip(key_picture(primary, key)), strip(key_picture(replica, key)));
            assert_eq!(ours, theirs, "{what}: {key} in database {db} differs");
        }
    }
}

/// One random command on the other types: strings, hashes, lists, sets, TTLs, deletions.
fn other_command(rng: &mut Rng) -> Vec<String> {
    let key = |rng: &mut Rng, kind: &str| format!("{kind}{}", rng.below(4));
    let n = |rng: &mut Rng| rng.below(50).to_string();
    let w = |s: &str| s.to_string();
    match rng.below(14) {
        0 => vec![w("SET"), key(rng, "str"), n(rng)],
        1 => vec![w("SET"), key(rng, "str"), n(rng), w("PX"), (50_000 + rng.below(50_000)).to_string()],
        2 => vec![w("INCRBY"), key(rng, "num"), n(rng)],
        3 => vec![w("APPEND"), key(rng, "str"), n(rng)],
        4 => vec![w("HSET"), key(rng, "hash"), n(rng), n(rng)],
        5 => vec![w("HDEL"), key(rng, "hash"), n(rng)],
        6 => vec![w("RPUSH"), key(rng, "list"), n(rng), n(rng)],
        7 => vec![w("LPOP"), key(rng, "list")],
        8 => vec![w("SADD"), key(rng, "set"), n(rng), n(rng)],
        9 => vec![w("SPOP"), key(rng, "set")],
        10 => vec![w("EXPIRE"), key(rng, "hash"), (100 + rng.below(100)).to_string()],
        11 => vec![w("PERSIST"), key(rng, "hash")],
        12 => vec![w("DEL"), key(rng, "str")],
        _ => vec![w("SREM"), key(rng, "set"), n(rng)],
    }
}

/// Run `steps` random commands on rill: stream and group commands (the forms test's
/// generator) and the other types, in databases 0 and 1, transactions included.
pub(crate) fn workload(rill: &mut RawClient, rng: &mut Rng, ids: &mut Vec<String>, steps: usize) {
    workload_with(rill, rng, ids, steps, |_| true);
}

/// [`workload`] of the commands `keep` accepts (the others are drawn and left out).
fn workload_with(
    rill: &mut RawClient,
    rng: &mut Rng,
    ids: &mut Vec<String>,
    steps: usize,
    keep: impl Fn(&[String]) -> bool,
) {
    let mut in_multi = false;
    for _ in 0..steps {
        let mut cmd = if rng.below(3) == 0 { other_command(rng) } else { stream_command(rng, ids) };
        if !keep(&cmd) {
            continue;
        }
        match cmd[0].as_str() {
            "MULTI" if in_multi => cmd = vec!["EXEC".into()],
            "EXEC" if !in_multi => continue,
            _ => {}
        }
        if !in_multi && cmd[0] != "EXEC" {
            let db = rng.pick(&["0", "0", "1"]);
            assert_eq!(rill.cmd(&["SELECT", db]), b"+OK\r\n");
        }
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let reply = rill.cmd_value(&args);
        match cmd[0].as_str() {
            "MULTI" => in_multi = true,
            "EXEC" => in_multi = false,
            "XADD" => {
                if let Value::Bulk(id) = &reply {
                    ids.push(String::from_utf8_lossy(id).into_owned());
                }
            }
            _ => {}
        }
    }
    if in_multi {
        rill.cmd(&["EXEC"]);
    }
}

/// The id of the connection rill feeds the replica on (CLIENT LIST: its last command was
/// PSYNC or SYNC).
fn replica_link_id(rill: &mut RawClient) -> String {
    let list = text(&rill.cmd_value(&["CLIENT", "LIST"]));
    let line = list.lines().find(|l| l.contains("cmd=psync") || l.contains("cmd=sync")).expect("no replica link");
    line.split(' ').find_map(|f| f.strip_prefix("id=")).unwrap().to_string()
}

#[test]
fn a_redis_replica_follows_rill_through_a_full_and_a_partial_sync() {
    follows(fuzz_seed(0x005E_ED0F_4E91), &[]);
}

/// With the log on, the full sync's snapshot is by default a copy-on-write copy, as without it.
#[test]
fn a_redis_replica_follows_rill_with_the_log_on() {
    follows(fuzz_seed(0x0010_6ED5_4E91), &["--appendonly", "yes", "--appendfsync", "everysec"]);
}

/// Above `snapshot-copy-max-keys` keys the full sync's snapshot is rebuilt from the log files
/// in the background (`persist::rewrite::replica_snapshot`), not copied under the lock: it must
/// be the same state.
#[test]
fn a_redis_replica_follows_rill_from_a_snapshot_rebuilt_from_the_log() {
    follows(
        fuzz_seed(0x0010_6ED5_4E92),
        &["--appendonly", "yes", "--appendfsync", "everysec", "--snapshot-copy-max-keys", "0"],
    );
}

#[test]
fn a_redis_replica_follows_rill_fresh_seed() {
    if let Some(seed) = fresh_seed() {
        follows(seed, &["--appendonly", "yes"]);
    }
}

fn follows(seed: u64, rill_args: &[&str]) {
    let Some(binary) = ReferenceServer::Redis8.require() else { return };
    let rill_server = Server::rill_with(rill_args);
    let mut rill = rill_server.connect();
    let mut rng = Rng::new(seed);
    let mut ids = Vec::new();
    // Data before the replica attaches: it arrives in the snapshot.
    workload(&mut rill, &mut rng, &mut ids, 300);
    let port = rill_server.port.to_string();
    let redis =
        Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, &["--replicaof", "127.0.0.1", &port]);
    let mut replica = redis.connect();
    wait_caught_up(&mut rill, &mut replica);
    assert_equal(&mut rill, &mut replica, &format!("after the full sync (seed {seed})"));
    let rebuilt = rill_server.log().contains("rebuilding it from the log files");
    let copied = rill_server.log().contains("Snapshot for a replica: keyspace copied");
    let rebuilds = rill_args.windows(2).any(|w| w == ["--snapshot-copy-max-keys", "0"]);
    assert_eq!((rebuilt, copied), (rebuilds, !rebuilds), "how the snapshot was made: {}", rill_server.log());
    // The stream, as it is made.
    workload(&mut rill, &mut rng, &mut ids, 300);
    wait_caught_up(&mut rill, &mut replica);
    assert_equal(&mut rill, &mut replica, &format!("after streaming (seed {seed})"));
    // The link cut: the replica continues from its offset, with what was written meanwhile.
    let id = replica_link_id(&mut rill);
    assert_eq!(rill.cmd(&["CLIENT", "KILL", "ID", &id]), b":1\r\n");
    workload(&mut rill, &mut rng, &mut ids, 100);
    wait_caught_up(&mut rill, &mut replica);
    assert_equal(&mut rill, &mut replica, &format!("after the partial resync (seed {seed})"));
    assert_eq!(info_field(&mut rill, "stats", "sync_full").as_deref(), Some("1"));
    assert_eq!(info_field(&mut rill, "stats", "sync_partial_ok").as_deref(), Some("1"), "the replica resynced fully");
    // INFO and ROLE show the replica, at the offset it acknowledged (the stream's end, once
    // the replica's next ACK comes; the cron's PING may move the end meanwhile).
    assert_eq!(info_field(&mut rill, "replication", "connected_slaves").as_deref(), Some("1"));
    let deadline = Instant::now() + Duration::from_secs(5);
    let offset = loop {
        let offset = info_field(&mut rill, "replication", "master_repl_offset").unwrap();
        let line = info_field(&mut rill, "replication", "slave0").unwrap();
        if line.contains(&format!("offset={offset},")) {
            assert!(line.starts_with(&format!("ip=127.0.0.1,port={},state=online,", redis.port)), "{line}");
            break offset;
        }
        assert!(Instant::now() < deadline, "the replica's ACK never reached {offset}: {line}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let role = text(&rill.cmd_value(&["ROLE"]));
    let want = format!("[master {offset} [[127.0.0.1 {} {offset}]]]", redis.port);
    // A PING between the two reads moves both offsets by 14 bytes: read again then.
    let role = if role == want { role } else { text(&rill.cmd_value(&["ROLE"])) };
    assert!(role.starts_with("[master ") && role.contains(&format!("[[127.0.0.1 {} ", redis.port)), "{role}");
}

#[test]
fn redis_cli_takes_a_snapshot_and_follows_the_stream_of_rill() {
    let Some(binary) = ReferenceServer::Redis8.require() else { return };
    let cli = binary.with_file_name("redis-cli");
    let cli = if cli.is_file() { cli } else { std::path::PathBuf::from("redis-cli") };
    let rill_server = Server::rill();
    let mut rill = rill_server.connect();
    for i in 0..100 {
        rill.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    rill.cmd(&["XADD", "s", "1-1", "f", "v"]);
    rill.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    // --rdb: the snapshot (REPLCONF rdb-only 1), which a real Redis then loads.
    let dir = rill_testkit::TempDir::new("rill-cli-rdb");
    let file = dir.path().join("dump.rdb");
    let port = rill_server.port.to_string();
    let out = std::process::Command::new(&cli).args(["-p", &port, "--rdb"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "redis-cli --rdb: {}", String::from_utf8_lossy(&out.stderr));
    let redis = Server::start(
        ServerKind::Redis(ReferenceServer::Redis8),
        &binary,
        &["--dir", dir.path().to_str().unwrap(), "--dbfilename", "dump.rdb"],
    );
    let mut loaded = redis.connect();
    assert_eq!(loaded.cmd(&["DBSIZE"]), b":101\r\n");
    assert_eq!(loaded.cmd(&["GET", "k7"]), b"$2\r\nv7\r\n");
    assert!(text(&loaded.cmd_value(&["XINFO", "GROUPS", "s"])).contains("name g"));
    // --replica: the stream after the snapshot, as commands (line-buffered into a file:
    // redis-cli's stdout is no terminal here).
    let printed_to = dir.path().join("replica.out");
    let mut child = rill_testkit::ChildGuard::spawn(
        std::process::Command::new("stdbuf")
            .arg("-oL")
            .arg(&cli)
            .args(["-p", &port, "--replica"])
            .stdout(std::fs::File::create(&printed_to).unwrap())
            .stderr(std::process::Stdio::null()),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut rill, "replication", "connected_slaves").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "redis-cli --replica never attached");
        std::thread::sleep(Duration::from_millis(20));
    }
    rill.cmd(&["SET", "after", "the-snapshot"]);
    loop {
        let printed = std::fs::read_to_string(&printed_to).unwrap_or_default();
        if printed.to_ascii_lowercase().contains("\"set\",\"after\",\"the-snapshot\"") {
            break;
        }
        assert!(Instant::now() < deadline, "redis-cli --replica printed: {printed}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill9();
}

#[test]
fn replconf_and_psync_reply_as_redis() {
    let rill_server = Server::rill();
    let mut c = rill_server.connect();
    assert_eq!(c.cmd(&["REPLCONF", "listening-port", "6380", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["REPLCONF", "capa", "unknown-capa"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["REPLCONF", "listening-port"]), b"-ERR syntax error\r\n");
    assert_eq!(c.cmd(&["REPLCONF", "listening-port", "x"]), b"-ERR value is not an integer or out of range\r\n");
    assert_eq!(c.cmd(&["REPLCONF", "nosuch", "1"]), b"-ERR Unrecognized REPLCONF option: nosuch\r\n");
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["PSYNC", "?", "-1"]), b"-ERR Command not allowed inside a transaction\r\n");
    assert_eq!(c.cmd(&["DISCARD"]), b"+OK\r\n");
    // PSYNC with a history rill does not know: a full resync, then the snapshot.
    c.send(b"PSYNC 0123456789012345678901234567890123456789 100\r\n").unwrap();
    let line = c.read_reply().unwrap();
    let line = String::from_utf8_lossy(&line).into_owned();
    assert!(line.starts_with("+FULLRESYNC ") && line.ends_with(" 0\r\n"), "{line}");
    let replid = line.split(' ').nth(1).unwrap().to_string();
    assert_eq!(replid.len(), 40);
    let mut next = c.read_exact(1).unwrap();
    while next == b"\n" {
        next = c.read_exact(1).unwrap();
    }
    assert_eq!(next, b"$", "the snapshot is sent with an end mark (capa eof)");
    let head = c.read_exact(46).unwrap();
    assert!(head.starts_with(b"EOF:") && head.ends_with(b"\r\n"), "{}", String::from_utf8_lossy(&head));
}

#[test]
fn a_replica_whose_offset_left_the_backlog_syncs_fully() {
    let rill_server = Server::rill_with(&["--repl-backlog-size", "16384"]);
    let mut rill = rill_server.connect();
    // Attach once (a full sync), read nothing more, then ask to continue from an offset the
    // backlog no longer holds.
    let mut first = rill_server.connect();
    first.send(b"PSYNC ? -1\r\n").unwrap();
    let line = String::from_utf8_lossy(&first.read_reply().unwrap()).into_owned();
    let replid = line.split(' ').nth(1).unwrap().to_string();
    drop(first);
    for i in 0..2000 {
        rill.cmd(&["SET", &format!("key:{i}"), "some value to fill the backlog"]);
    }
    let mut second = rill_server.connect();
    second.send(format!("PSYNC {replid} 1\r\n").as_bytes()).unwrap();
    let line = String::from_utf8_lossy(&second.read_reply().unwrap()).into_owned();
    assert!(line.starts_with(&format!("+FULLRESYNC {replid} ")), "{line}");
    // And one that is in the backlog continues.
    let offset: u64 = info_field(&mut rill, "replication", "master_repl_offset").unwrap().parse().unwrap();
    let mut third = rill_server.connect();
    third.send(b"REPLCONF capa psync2\r\n").unwrap();
    assert_eq!(third.read_reply().unwrap(), b"+OK\r\n");
    third.send(format!("PSYNC {replid} {}\r\n", offset - 10).as_bytes()).unwrap();
    assert_eq!(String::from_utf8_lossy(&third.read_reply().unwrap()), format!("+CONTINUE {replid}\r\n"));
    assert_eq!(third.read_exact(10).unwrap().len(), 10, "the last 10 bytes of the stream follow");
    assert_eq!(info_field(&mut rill, "stats", "sync_partial_err").as_deref(), Some("1"));
}

#[test]
fn wait_and_waitaof_count_the_replicas_that_hold_a_write() {
    let Some(binary) = ReferenceServer::Redis8.require() else { return };
    let rill_server = Server::rill_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut rill = rill_server.connect();
    let port = rill_server.port.to_string();
    // A rill replica with its log on (it says FACK) and a Redis replica without (it does not).
    let rill_replica =
        Server::rill_with(&["--appendonly", "yes", "--appendfsync", "always", "--replicaof", "127.0.0.1", &port]);
    let redis =
        Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, &["--replicaof", "127.0.0.1", &port]);
    let (mut r1, mut r2) = (rill_replica.connect(), redis.connect());
    wait_caught_up(&mut rill, &mut r1);
    wait_caught_up(&mut rill, &mut r2);
    assert_eq!(rill.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    // Both acknowledge at once (the primary asks them with REPLCONF GETACK).
    let started = Instant::now();
    assert_eq!(rill.cmd(&["WAIT", "2", "10000"]), b":2\r\n");
    assert!(started.elapsed() < Duration::from_secs(5), "WAIT took {:?}", started.elapsed());
    // More than there are: the count after the timeout.
    let started = Instant::now();
    assert_eq!(rill.cmd(&["WAIT", "3", "300"]), b":2\r\n");
    assert!(started.elapsed() >= Duration::from_millis(290));
    // WAITAOF: the local log, and the one replica whose log holds it on disk.
    assert_eq!(rill.cmd(&["SET", "k", "v2"]), b"+OK\r\n");
    assert_eq!(rill.cmd(&["WAITAOF", "1", "1", "10000"]), b"*2\r\n:1\r\n:1\r\n");
    assert_eq!(rill.cmd(&["WAITAOF", "1", "2", "300"]), b"*2\r\n:1\r\n:1\r\n");
    // A replica refuses both, with Redis' words.
    for cmd in [&["WAIT", "1", "0"][..], &["WAITAOF", "0", "1", "0"]] {
        assert_eq!(r1.cmd(cmd), r2.cmd(cmd), "{cmd:?} on a replica");
    }
    // min-replicas-to-write 2 with both replicas acknowledging: writes pass; with one gone,
    // they are refused once its last ACK is older than min-replicas-max-lag.
    assert_eq!(rill.cmd(&["CONFIG", "SET", "min-replicas-to-write", "2", "min-replicas-max-lag", "1"]), b"+OK\r\n");
    assert_eq!(rill.cmd(&["SET", "k", "v3"]), b"+OK\r\n");
    drop(r2);
    drop(redis);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = rill.cmd(&["SET", "k", "v4"]);
        if reply == b"-NOREPLICAS Not enough good replicas to write.\r\n" {
            break;
        }
        assert_eq!(reply, b"+OK\r\n");
        assert!(Instant::now() < deadline, "writes were never refused");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Reads are still served.
    assert!(rill.cmd(&["GET", "k"]).starts_with(b"$2\r\nv"));
}

/// `repl-backlog-ttl`: a primary whose last replica left more than that many seconds ago frees
/// its backlog and takes a new replication ID (replid2 cleared); the offset stays and no longer
/// grows, and the replica that comes back syncs fully. The same steps and checks run on Redis
/// 8.2.3 and on rill.
#[test]
fn a_primary_without_replicas_frees_its_backlog_after_repl_backlog_ttl() {
    let rill = Launch::rill().args(&["--repl-backlog-ttl", "1"]).start();
    backlog_ttl_frees_the_backlog(&rill);
    if let Some(redis) = Launch::reference(ReferenceServer::Redis8) {
        backlog_ttl_frees_the_backlog(&redis.args(&["--repl-backlog-ttl", "1"]).start());
    }
}

/// `CLIENT KILL` of the primary's link on a replica ends the link at once, even when the same
/// EXEC then holds the server (`DEBUG SLEEP`): the primary counts the replica gone meanwhile,
/// frees its backlog after `repl-backlog-ttl`, and the replica that comes back gets a full sync
/// (`sync_partial_err`), as from Redis (replication-psync's "backlog expired"). The link's task
/// used to close its socket only after the sleep, and the replica continued partially.
#[test]
fn a_killed_primary_link_ends_at_once_even_while_the_replica_sleeps() {
    killed_link_ends_at_once(Launch::rill());
    if let Some(redis) = Launch::reference(ReferenceServer::Redis8) {
        killed_link_ends_at_once(redis);
    }
}

/// While a replica's snapshot is made and sent, INFO says `rdb_bgsave_in_progress:1` (Redis
/// forks for it), and a replica that goes away meanwhile is noticed at once, not when the
/// snapshot is done (replication-buffer's setup and its "replica doesn't disconnect" waits).
/// A slow snapshot: `rdb-key-save-delay` of a second per key.
#[test]
fn a_replica_leaving_during_its_snapshot_is_noticed_at_once() {
    let server = Launch::rill().args(&["--rdb-key-save-delay", "1000000"]).start();
    let mut c = server.connect();
    for k in ["a", "b", "c"] {
        c.cmd(&["SET", k, "v"]);
    }
    let info = |c: &mut RawClient, s: &str, f: &str| info_field(c, s, f).unwrap_or_default();
    assert_eq!(info(&mut c, "persistence", "rdb_bgsave_in_progress"), "0");
    let mut replica = server.connect();
    assert_eq!(replica.cmd(&["REPLCONF", "capa", "eof"]), b"+OK\r\n");
    replica.send(b"PSYNC ? -1\r\n").unwrap();
    assert!(replica.read_reply().unwrap().starts_with(b"+FULLRESYNC"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while info(&mut c, "persistence", "rdb_bgsave_in_progress") != "1" {
        assert!(Instant::now() < deadline, "no snapshot in progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info(&mut c, "replication", "connected_slaves"), "1");
    drop(replica);
    let left = Instant::now();
    while info(&mut c, "replication", "connected_slaves") != "0" {
        assert!(left.elapsed() < Duration::from_secs(2), "the replica that left is still counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    while info(&mut c, "persistence", "rdb_bgsave_in_progress") != "0" {
        assert!(left.elapsed() < Duration::from_secs(2), "the snapshot is still counted");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A replica whose snapshot is slow to come and whose held stream passes its output limit is
/// dropped then, not once a chunk of its snapshot is ready (replication-buffer's "backlog
/// memory will become smaller if disconnecting with replica").
#[test]
fn a_replica_over_its_output_limit_during_its_snapshot_is_dropped_at_once() {
    let server = Launch::rill().args(&["--rdb-key-save-delay", "1000000", "--repl-backlog-size", "16kb"]).start();
    let mut c = server.connect();
    for k in ["a", "b", "c", "d", "e"] {
        c.cmd(&["SET", k, "v"]);
    }
    let info = |c: &mut RawClient, s: &str, f: &str| info_field(c, s, f).unwrap_or_default();
    let mut replica = server.connect();
    assert_eq!(replica.cmd(&["REPLCONF", "capa", "eof"]), b"+OK\r\n");
    replica.send(b"PSYNC ? -1\r\n").unwrap();
    assert!(replica.read_reply().unwrap().starts_with(b"+FULLRESYNC"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "replica 64kb 0 0"]), b"+OK\r\n");
    c.cmd(&["SET", "big", &"x".repeat(100_000)]);
    let set = Instant::now();
    while info(&mut c, "replication", "connected_slaves") != "0" {
        assert!(set.elapsed() < Duration::from_secs(2), "the replica over its limit is still attached");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info(&mut c, "stats", "client_output_buffer_limit_disconnections"), "1");
}

/// psync2's "generate load while killing replication links": a primary under INCR load whose
/// replicas kill their link to it again and again continue partially every time, and end with
/// the primary's offset and data exactly (no full sync beyond the first ones). A cut right after
/// a command's header used to leave a replica counting bytes of a command it lost.
#[test]
fn replicas_killing_their_link_under_load_keep_the_primarys_offset_and_data() {
    // A backlog that holds the whole run: a replica slow to reconnect (a loaded machine) must
    // not fall out of it, which would be a full sync for another reason.
    let primary_server =
        Launch::rill().args(&["--repl-ping-replica-period", "1", "--repl-backlog-size", "256mb"]).start();
    let replicas: Vec<Server> = (0..3).map(|_| Launch::rill().start()).collect();
    let mut primary = primary_server.connect();
    let port = primary_server.port.to_string();
    let mut clients: Vec<RawClient> = replicas.iter().map(Server::connect).collect();
    for r in &mut clients {
        assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
        wait_caught_up(&mut primary, r);
    }
    let (start, mut next_kill, mut n, mut kills) = (Instant::now(), Instant::now(), 0u64, 0usize);
    while start.elapsed() < Duration::from_secs(4) {
        primary.cmd(&["INCR", "x"]);
        n += 1;
        if Instant::now() >= next_kill {
            next_kill = Instant::now() + Duration::from_millis(150);
            let victim = kills % clients.len();
            kills += 1;
            clients[victim].cmd(&["CLIENT", "KILL", "TYPE", "master"]);
        }
    }
    // No keep-alive from now on: the offsets can then be compared exactly.
    assert_eq!(primary.cmd(&["CONFIG", "SET", "repl-ping-replica-period", "3600"]), b"+OK\r\n");
    for r in &mut clients {
        wait_caught_up(&mut primary, r);
        assert_eq!(r.cmd(&["GET", "x"]), format!("${}\r\n{n}\r\n", n.to_string().len()).into_bytes());
    }
    let offset = info_field(&mut primary, "replication", "master_repl_offset").unwrap();
    for r in &mut clients {
        assert_eq!(info_field(r, "replication", "master_repl_offset").unwrap(), offset);
    }
    assert_eq!(info_field(&mut primary, "stats", "sync_full").unwrap(), "3", "a full sync after a kill");
    assert!(info_field(&mut primary, "stats", "sync_partial_ok").unwrap() != "0");
}

fn killed_link_ends_at_once(launch: Launch) {
    let primary_server = launch.clone().args(&["--repl-backlog-ttl", "1"]).start();
    let replica_server = launch.args(&["--enable-debug-command", "yes"]).start();
    let who = primary_server.label();
    let (mut primary, mut replica) = (primary_server.connect(), replica_server.connect());
    let port = primary_server.port.to_string();
    assert_eq!(replica.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    primary.cmd(&["SET", "a", "1"]);
    wait_caught_up(&mut primary, &mut replica);
    assert_eq!(replica.cmd(&["MULTI"]), b"+OK\r\n");
    for cmd in [&["CLIENT", "KILL", "TYPE", "master"][..], &["DEBUG", "SLEEP", "3"]] {
        assert_eq!(replica.cmd(cmd), b"+QUEUED\r\n", "{who}");
    }
    assert_eq!(replica.cmd(&["EXEC"]), b"*2\r\n:1\r\n+OK\r\n", "{who}");
    primary.cmd(&["SET", "b", "2"]);
    wait_caught_up(&mut primary, &mut replica);
    let stat = |c: &mut RawClient, f: &str| info_field(c, "stats", f).unwrap_or_default();
    assert_eq!(stat(&mut primary, "sync_partial_ok"), "0", "{who}: the replica continued partially");
    // The first sync (the replica asks with its own history) and the one after the kill.
    assert_eq!(stat(&mut primary, "sync_partial_err"), "2", "{who}");
    assert_eq!(stat(&mut primary, "sync_full"), "2", "{who}");
    assert_eq!(replica.cmd(&["GET", "b"]), b"$1\r\n2\r\n", "{who}");
}

fn backlog_ttl_frees_the_backlog(server: &Server) {
    let who = server.label();
    let mut c = server.connect();
    let info = |c: &mut RawClient, f: &str| info_field(c, "replication", f).unwrap_or_default();
    let mut replica = server.connect();
    replica.send(b"PSYNC ? -1\r\n").unwrap();
    let line = String::from_utf8_lossy(&replica.read_reply().unwrap()).into_owned();
    let replid = line.split(' ').nth(1).unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while info(&mut c, "connected_slaves") != "1" {
        assert!(Instant::now() < deadline, "{who}: the replica did not attach");
        std::thread::sleep(Duration::from_millis(20));
    }
    c.cmd(&["SET", "a", "1"]);
    drop(replica);
    while info(&mut c, "connected_slaves") != "0" {
        assert!(Instant::now() < deadline, "{who}: the replica did not leave");
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = Instant::now();
    assert_eq!(info(&mut c, "repl_backlog_active"), "1", "{who}: freed at once");
    let offset = info(&mut c, "master_repl_offset");
    assert_ne!(offset, "0", "{who}");
    while info(&mut c, "repl_backlog_active") != "0" {
        assert!(left.elapsed() < Duration::from_secs(5), "{who}: the backlog was not freed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(left.elapsed() > Duration::from_millis(900), "{who}: freed after {:?}", left.elapsed());
    // What INFO says after the free.
    let new_id = info(&mut c, "master_replid");
    assert!(new_id.len() == 40 && new_id != replid, "{who}: {new_id}");
    for (field, want) in [
        ("role", "master"),
        ("connected_slaves", "0"),
        ("master_replid2", &"0".repeat(40)),
        ("master_repl_offset", &offset),
        ("second_repl_offset", "-1"),
        ("repl_backlog_active", "0"),
        ("repl_backlog_size", "1048576"),
        ("repl_backlog_first_byte_offset", "0"),
        ("repl_backlog_histlen", "0"),
    ] {
        assert_eq!(info(&mut c, field), want, "{who}: {field} after the free");
    }
    // Without a backlog the offset stays.
    c.cmd(&["SET", "b", "2"]);
    assert_eq!(info(&mut c, "master_repl_offset"), offset, "{who}");
    // The replica that comes back syncs fully from the kept offset, and the backlog made for
    // it starts one more history (Redis makes every backlog made from scratch so).
    let mut back = server.connect();
    let next: u64 = offset.parse::<u64>().unwrap() + 1;
    back.send(format!("PSYNC {replid} {next}\r\n").as_bytes()).unwrap();
    let line = String::from_utf8_lossy(&back.read_reply().unwrap()).into_owned();
    let words: Vec<&str> = line.trim_end().split(' ').collect();
    assert!(words.len() == 3 && words[0] == "+FULLRESYNC" && words[2] == offset, "{who}: {line}");
    assert!(words[1] != replid && words[1] != new_id, "{who}: {line}");
    assert_eq!(info(&mut c, "master_replid"), words[1], "{who}");
    assert_eq!(info(&mut c, "repl_backlog_active"), "1", "{who}: a new backlog");
}

/// `repl-rdb-compat 7.0`: a Redis 7.0.15 replica (RDB 10, stream type 19) loads rill's full
/// sync and follows the stream of a workload that 7.0 can parse (no DELREF/ACKED trims), and
/// equals rill key by key but for the groups' lag (7.0 counts it otherwise). A stream with
/// state 7.0 cannot hold (here an XNACKed entry) fails the next full sync, named in rill's log.
#[test]
fn a_redis_7_0_replica_follows_rill_with_repl_rdb_compat_7_0() {
    let Some(binary) = ReferenceServer::Redis7.require() else { return };
    let seed = fuzz_seed(0x0007_0015_4E91);
    let rill_server = Server::rill_with(&["--repl-rdb-compat", "7.0"]);
    let mut rill = rill_server.connect();
    let mut rng = Rng::new(seed);
    let mut ids = Vec::new();
    let known_to_7_0 = |cmd: &[String]| !cmd.iter().any(|w| w == "DELREF" || w == "ACKED");
    workload_with(&mut rill, &mut rng, &mut ids, 300, known_to_7_0);
    let port = rill_server.port.to_string();
    let redis =
        Server::start(ServerKind::Redis(ReferenceServer::Redis7), &binary, &["--replicaof", "127.0.0.1", &port]);
    let mut replica = redis.connect();
    wait_caught_up(&mut rill, &mut replica);
    assert_equal_but(&mut rill, &mut replica, &format!("after the full sync (seed {seed})"), &["lag"]);
    workload_with(&mut rill, &mut rng, &mut ids, 300, known_to_7_0);
    wait_caught_up(&mut rill, &mut replica);
    assert_equal_but(&mut rill, &mut replica, &format!("after streaming (seed {seed})"), &["lag"]);
    assert_eq!(info_field(&mut rill, "stats", "sync_full").as_deref(), Some("1"));

    // A released (XNACKed) entry: no RDB 10 holds it, so a new full sync is refused.
    for cmd in [
        &["SELECT", "0"][..],
        &["XADD", "nacked", "1-1", "f", "v"],
        &["XGROUP", "CREATE", "nacked", "g", "0"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "nacked", ">"],
        &["XNACK", "nacked", "g", "FAIL", "IDS", "1", "1-1"],
    ] {
        let reply = rill.cmd(cmd);
        assert!(!reply.starts_with(b"-"), "{cmd:?}: {}", String::from_utf8_lossy(&reply));
    }
    let mut second = rill_server.connect();
    second.send(b"PSYNC ? -1\r\n").unwrap();
    let line = String::from_utf8_lossy(&second.read_reply().unwrap()).into_owned();
    assert!(line.starts_with("+FULLRESYNC "), "{line}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let why = "key 'nacked' cannot be written in RDB 10 for Redis 7.0";
    while !rill_server.log().contains(why) {
        assert!(Instant::now() < deadline, "no refusal in the log: {}", rill_server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Keys a SCAN or RANDOMKEY finds expired are deleted and sent to the replicas one `DEL` at a
/// time, never in `MULTI`/`EXEC` (Redis' `touches-arbitrary-keys`), while another read that
/// expires several keys (MGET) sends its deletions as one transaction; a transaction's
/// `SELECT` comes after its `MULTI`. The stream's shape is compared with Redis 8.2.3's.
#[test]
fn expirations_by_scan_reach_replicas_apart_and_a_transaction_selects_inside_multi_as_redis() {
    let Some(redis) = Launch::reference(ReferenceServer::Redis8) else { return };
    let shape =
        |launch: Launch| -> Vec<String> {
            let server = launch.args(&["--enable-debug-command", "yes"]).start();
            let mut c = server.connect();
            assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
            let mut replica = crate::shutdown::TestReplica::attach(server.port);
            for k in ["a", "b", "c"] {
                c.cmd(&["SET", k, "1", "PX", "30"]);
            }
            std::thread::sleep(Duration::from_millis(60));
            c.cmd(&["SCAN", "0", "COUNT", "100"]);
            c.cmd(&["SET", "d", "1", "PX", "30"]);
            c.cmd(&["SET", "e", "1", "PX", "30"]);
            std::thread::sleep(Duration::from_millis(60));
            c.cmd(&["MGET", "d", "e"]);
            c.cmd(&["SELECT", "3"]);
            c.cmd(&["MULTI"]);
            c.cmd(&["SET", "x", "1"]);
            c.cmd(&["SET", "y", "1"]);
            c.cmd(&["EXEC"]);
            c.cmd(&["SET", "marker", "1"]);
            replica.read_until("marker");
            // Times and the order SCAN meets keys in differ between servers: keep the shape.
            replica
                .commands()
                .into_iter()
                .map(|cmd| {
                    if cmd.starts_with("SET ") {
                        cmd.split(" PXAT").next().unwrap_or_default().to_string()
                    } else {
                        cmd
                    }
                })
                .map(|cmd| if cmd.starts_with("DEL ") { "DEL".to_string() } else { cmd })
                .collect()
        };
    let ours = shape(Launch::rill());
    let theirs = shape(redis);
    assert_eq!(ours, theirs);
    assert!(ours.iter().filter(|c| *c == "MULTI").count() == 2, "{ours:?}");
}

/// Attach to `server` as a bare replica (`PSYNC ? -1`, with `capas` said first), read past the
/// snapshot, and return the connection, which reads the stream from then on.
/// The first byte a replica link reads after the keep-alive newlines a primary sends while it
/// prepares a full sync.
fn past_newlines(c: &mut RawClient) -> Vec<u8> {
    let mut byte = c.read_exact(1).unwrap();
    while byte == b"\n" {
        byte = c.read_exact(1).unwrap();
    }
    byte
}

fn bare_replica(server: &Server, capas: &[&str]) -> RawClient {
    let mut c = server.connect();
    if !capas.is_empty() {
        let mut args = vec!["REPLCONF"];
        for capa in capas {
            args.extend(["capa", capa]);
        }
        assert_eq!(c.cmd(&args), b"+OK\r\n");
    }
    c.send(b"PSYNC ? -1\r\n").unwrap();
    let line = c.read_reply().unwrap();
    assert!(line.starts_with(b"+FULLRESYNC "), "{}", String::from_utf8_lossy(&line));
    let byte = past_newlines(&mut c);
    assert_eq!(byte, b"$", "the snapshot's length follows");
    let mut len = Vec::new();
    loop {
        let b = c.read_exact(1).unwrap();
        if b == b"\r" {
            break;
        }
        len.extend(b);
    }
    assert_eq!(c.read_exact(1).unwrap(), b"\n");
    let len: usize = String::from_utf8_lossy(&len).parse().expect("a length (no capa eof)");
    c.read_exact(len).unwrap();
    c
}

/// The commands of the stream, lower case, PING and SELECT left out, up to and including the
/// first whose name is `last`.
fn stream_until(c: &mut RawClient, last: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let words: Vec<String> = match c.read_value().unwrap() {
            Value::Array(items) => items.iter().map(|v| text(v).to_ascii_lowercase()).collect(),
            other => panic!("not a command in the stream: {other:?}"),
        };
        let name = words.first().cloned().unwrap_or_default();
        if name == "ping" || name == "select" {
            continue;
        }
        out.push(words.join(" "));
        if name == last {
            return out;
        }
    }
}

#[test]
fn flushdb_and_flushall_reach_the_stream_even_with_nothing_to_flush_as_on_redis() {
    let kinds = rill_and_redis8();
    for (kind, binary) in kinds {
        let server = Server::start(kind, &binary, &["--repl-diskless-sync", "no", "--appendonly", "yes"]);
        let mut c = server.connect();
        let mut replica = bare_replica(&server, &[]);
        c.cmd(&["SET", "key", "value"]);
        c.cmd(&["FLUSHDB"]);
        c.cmd(&["FLUSHDB", "ASYNC"]);
        c.cmd(&["EVAL", "redis.call('flushdb', 'sync')", "0"]);
        c.cmd(&["FLUSHALL"]);
        c.cmd(&["FLUSHALL", "SYNC"]);
        c.cmd(&["EVAL", "redis.call('flushall')", "0"]);
        c.cmd(&["INCR", "x"]);
        let expected = [
            "set key value",
            "flushdb",
            "flushdb async",
            "flushdb sync",
            "flushall",
            "flushall sync",
            "flushall",
            "incr x",
        ];
        assert_eq!(stream_until(&mut replica, "incr"), expected, "{kind:?}");
        // A flush that found nothing counts no change: the SET, the key the first FLUSHDB
        // deleted, the INCR.
        assert_eq!(info_field(&mut c, "persistence", "rdb_changes_since_last_save").as_deref(), Some("3"), "{kind:?}");
    }
}

#[test]
fn a_diskless_full_sync_waits_its_delay_in_wait_bgsave_as_on_redis() {
    let kinds = rill_and_redis8();
    for (kind, binary) in kinds {
        let server = Server::start(kind, &binary, &["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "2"]);
        let mut c = server.connect();
        let mut replica = server.connect();
        assert_eq!(replica.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
        let asked = Instant::now();
        replica.send(b"PSYNC ? -1\r\n").unwrap();
        // Waiting: no reply to the PSYNC yet, a newline each second, state wait_bgsave.
        std::thread::sleep(Duration::from_millis(300));
        let info = text(&c.cmd_value(&["INFO", "replication"]));
        assert!(info.contains("state=wait_bgsave"), "{kind:?}: {info}");
        assert_eq!(replica.read_exact(1).unwrap(), b"\n", "{kind:?}");
        assert!(asked.elapsed() < Duration::from_millis(1500), "{kind:?}: a newline within the delay");
        let byte = past_newlines(&mut replica);
        assert_eq!(byte, b"+", "{kind:?}");
        // Redis counts the delay in whole seconds of its clock: at least one passes.
        assert!(asked.elapsed() >= Duration::from_millis(1000), "{kind:?}: the sync started before its delay");
        assert_eq!(replica.read_exact(11).unwrap(), b"FULLRESYNC ", "{kind:?}");
        drop(replica);
        // With a long delay, `repl-diskless-sync-max-replicas` replicas waiting start at once.
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "100", "repl-diskless-sync-max-replicas", "2"]),
            b"+OK\r\n"
        );
        let mut first = server.connect();
        assert_eq!(first.cmd(&["REPLCONF", "capa", "eof"]), b"+OK\r\n");
        first.send(b"PSYNC ? -1\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let mut second = server.connect();
        assert_eq!(second.cmd(&["REPLCONF", "capa", "eof"]), b"+OK\r\n");
        let asked = Instant::now();
        second.send(b"PSYNC ? -1\r\n").unwrap();
        for replica in [&mut first, &mut second] {
            let byte = past_newlines(replica);
            assert_eq!(byte, b"+", "{kind:?}");
        }
        assert!(asked.elapsed() < Duration::from_secs(5), "{kind:?}: max-replicas did not start the sync");
    }
}

#[test]
fn a_replica_snapshot_in_the_making_shows_as_redis_shows_its_rdb_child() {
    let kinds = rill_and_redis8();
    for (kind, binary) in kinds {
        // 0.2 s a key: the snapshot of 10 keys takes 2 s to make.
        let server =
            Server::start(kind, &binary, &["--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "200000"]);
        let mut c = server.connect();
        for i in 0..10 {
            c.cmd(&["SET", &format!("key:{i}"), "value"]);
        }
        assert_eq!(info_field(&mut c, "persistence", "rdb_bgsave_in_progress").as_deref(), Some("0"));
        let mut replica = server.connect();
        assert_eq!(replica.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
        replica.send(b"PSYNC ? -1\r\n").unwrap();
        let deadline = Instant::now() + Duration::from_millis(1500);
        loop {
            let state = info_field(&mut c, "replication", "slave0").unwrap_or_default();
            let child = info_field(&mut c, "persistence", "rdb_bgsave_in_progress");
            if state.contains("state=wait_bgsave") && child.as_deref() == Some("1") {
                break;
            }
            assert!(Instant::now() < deadline, "{kind:?}: {state} rdb_bgsave_in_progress:{child:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Read it all: once sent, nothing is in the making any more.
        let mut byte = replica.read_exact(1).unwrap();
        while byte != b"$" {
            byte = replica.read_exact(1).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_field(&mut c, "persistence", "rdb_bgsave_in_progress").as_deref() != Some("0") {
            let _ = replica.read_until_close(Duration::from_millis(100));
            assert!(Instant::now() < deadline, "{kind:?}: the snapshot never ended");
        }
    }
}

#[test]
fn a_replica_link_that_sends_a_command_with_a_reply_is_closed_and_a_bad_psync_offset_refused_as_on_redis() {
    let kinds = rill_and_redis8();
    for (kind, binary) in kinds {
        let server = Server::start(kind, &binary, &["--repl-diskless-sync-delay", "0"]);
        let mut c = server.connect();
        c.cmd(&["SET", "foo", "bar"]);
        for (command, name, keyspace) in [("PING", "ping", false), ("GET foo", "get", true)] {
            let mut replica = bare_replica(&server, &[]);
            replica.send(format!("{command}\r\n").as_bytes()).unwrap();
            let (rest, closed) = replica.read_until_close(Duration::from_secs(5));
            assert!(closed, "{kind:?}: the link stays open after {command}");
            assert!(!String::from_utf8_lossy(&rest).contains("PONG"), "{kind:?}: a reply went out");
            let deadline = Instant::now() + Duration::from_secs(5);
            let line = format!("Replica generated a reply to command '{name}', disconnecting it: ");
            while !server.log().contains(&line) {
                assert!(Instant::now() < deadline, "{kind:?}: no '{line}' in\n{}", server.log());
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(server.log().contains("Replica can't interact with the keyspace"), keyspace, "{kind:?}");
            assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
        }
        assert_eq!(
            c.cmd(&["PSYNC", "replicationid", "offset_str"]),
            b"-ERR value is not an integer or out of range\r\n",
            "{kind:?}"
        );
        assert!(server.log().contains("asks for synchronization but with a wrong offset"), "{kind:?}");
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn without_diskless_sync_the_snapshot_is_made_whole_then_sent_with_its_length_as_on_redis() {
    let kinds = rill_and_redis8();
    for (kind, binary) in kinds {
        // 0.1 s a key: 10 keys take 1 s to write.
        let server = Server::start(kind, &binary, &["--repl-diskless-sync", "no", "--rdb-key-save-delay", "100000"]);
        let mut c = server.connect();
        for i in 0..10 {
            c.cmd(&["SET", &format!("key:{i}"), "value"]);
        }
        let mut replica = server.connect();
        assert_eq!(replica.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
        let asked = Instant::now();
        replica.send(b"PSYNC ? -1\r\n").unwrap();
        assert!(replica.read_reply().unwrap().starts_with(b"+FULLRESYNC "), "{kind:?}");
        let byte = past_newlines(&mut replica);
        assert_eq!(byte, b"$", "{kind:?}");
        assert!(asked.elapsed() >= Duration::from_millis(900), "{kind:?}: sent before it was made whole");
        let head = replica.read_exact(3).unwrap();
        assert!(head.iter().all(u8::is_ascii_digit), "{kind:?}: a length, not an end mark: {head:?}");
    }
}

/// With `lazyfree-lazy-server-del`, `-expire` and `-eviction` on, the deletions the server
/// decides reach the replicas as `UNLINK` (a RESTORE REPLACE whose ABSTTL has passed, a key
/// found expired), `DEL` with them off; a client's DEL stays DEL. The stream is compared with
/// Redis 8.2.3's. A SET whose PXAT has passed deletes at once in rill and the newest Redis
/// (8.2.3 stores the key and expires it later), so that one is checked on rill alone.
#[test]
fn lazyfree_settings_make_the_servers_deletions_unlink_as_in_redis() {
    let Some(redis) = Launch::reference(ReferenceServer::Redis8) else { return };
    let stream = |launch: Launch, set_past: bool| -> Vec<String> {
        let server = launch.args(&["--enable-debug-command", "yes"]).start();
        let mut c = server.connect();
        assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
        c.cmd(&["SET", "a", "1"]);
        c.cmd(&["SET", "b", "1"]);
        let dump = c.cmd_value(&["DUMP", "a"]);
        let payload = dump.as_bytes().unwrap().to_vec();
        let mut replica = crate::shutdown::TestReplica::attach(server.port);
        for on in ["no", "yes"] {
            for name in ["lazyfree-lazy-server-del", "lazyfree-lazy-expire", "lazyfree-lazy-eviction"] {
                assert_eq!(c.cmd(&["CONFIG", "SET", name, on]), b"+OK\r\n");
            }
            if set_past {
                c.cmd(&["SET", "a", "1"]);
                c.cmd(&["SET", "a", "2", "PXAT", "1000"]);
            }
            let restore: Vec<&[u8]> = vec![b"RESTORE", b"b", b"1000", &payload, b"REPLACE", b"ABSTTL"];
            c.request(&restore).unwrap();
            c.cmd(&["SET", "t", "1", "PX", "20"]);
            std::thread::sleep(Duration::from_millis(40));
            c.cmd(&["GET", "t"]);
            c.cmd(&["SET", "d", "1"]);
            c.cmd(&["DEL", "d"]);
            c.cmd(&["SET", "b", "1"]);
        }
        c.cmd(&["SET", "marker", "1"]);
        replica.read_until("marker");
        replica.commands().into_iter().map(|cmd| cmd.split(" PXAT").next().unwrap_or_default().to_string()).collect()
    };
    let ours = stream(Launch::rill(), false);
    let theirs = stream(redis, false);
    assert_eq!(ours, theirs);
    assert!(ours.iter().any(|c| c == "UNLINK b") && ours.iter().any(|c| c == "UNLINK t"), "{ours:?}");
    let with_set = stream(Launch::rill(), true);
    let from = |s: &[String], first: &str| s.iter().skip_while(|c| *c != first).take(2).cloned().collect::<Vec<_>>();
    assert_eq!(from(&with_set, "SET a 1"), ["SET a 1", "DEL a"], "{with_set:?}");
    let second = with_set.iter().rposition(|c| c == "SET a 1").unwrap();
    assert_eq!(with_set.get(second + 1).map(String::as_str), Some("UNLINK a"), "{with_set:?}");
}

/// rill, then Redis 8.2.3 if it is there (`RILL_SKIP_REFERENCE=1` only; otherwise a missing one
/// fails): the servers a test runs the same steps on.
fn rill_and_redis8() -> Vec<(ServerKind, std::path::PathBuf)> {
    let mut kinds = vec![(ServerKind::Rill, rill_testkit::rill_server_binary())];
    if let Some(redis) = ReferenceServer::Redis8.require() {
        kinds.push((ServerKind::Redis(ReferenceServer::Redis8), redis));
    }
    kinds
}

/// Read an end-marked payload (`$EOF:<40 bytes>\r\n` ... mark) after newlines; its length.
fn read_eof_payload(c: &mut RawClient, who: &str) -> usize {
    let byte = past_newlines(c);
    assert_eq!(byte, b"$", "{who}");
    assert_eq!(c.read_exact(4).unwrap(), b"EOF:", "{who}: an end-marked payload");
    let mark = c.read_exact(40).unwrap();
    assert_eq!(c.read_exact(2).unwrap(), b"\r\n", "{who}");
    let mut payload: Vec<u8> = Vec::new();
    while !payload.ends_with(&mark) {
        payload.extend(c.read_exact(1).unwrap());
    }
    payload.len() - mark.len()
}

/// A replica's full sync over an RDB channel (`repl-rdb-channel`), spoken by hand to rill
/// and to Redis 8.2.3 alike: the main channel is told `+RDBCHANNELSYNC <its client id>` and
/// waits (`wait_bgsave`); a second connection naming that id gets the snapshot
/// (`send_bulk_and_stream`, CLIENT LIST flags `SC`) while the main channel carries the stream
/// written after it; the pair is one replica to INFO and ROLE, online once the snapshot is
/// sent. REPLCONF's errors for the channel's options are Redis' own, byte for byte.
#[test]
fn a_full_sync_over_an_rdb_channel_goes_as_on_redis() {
    let mut errors: Vec<Vec<Vec<u8>>> = Vec::new();
    for (kind, binary) in rill_and_redis8() {
        let who = format!("{kind:?}");
        let args = [
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
            "--repl-rdb-channel",
            "yes",
            // 0.3 s per key: the snapshot is on the way long enough to look at.
            "--rdb-key-save-delay",
            "300000",
        ];
        let server = Server::start(kind, &binary, &args);
        let mut c = server.connect();
        for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
            assert_eq!(c.cmd(&["SET", k, v]), b"+OK\r\n");
        }
        let mut main = server.connect();
        let main_id = text(&main.cmd_value(&["CLIENT", "ID"]));
        assert_eq!(
            main.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2", "capa", "rdb-channel-repl"]),
            b"+OK\r\n",
            "{who}"
        );
        main.send(b"PSYNC ? -1\r\n").unwrap();
        assert_eq!(main.read_reply().unwrap(), format!("+RDBCHANNELSYNC {main_id}\r\n").into_bytes(), "{who}");
        let info = text(&c.cmd_value(&["INFO", "replication"]));
        assert!(info.contains("connected_slaves:1") && info.contains("state=wait_bgsave"), "{who}: {info}");
        let mut rdb = server.connect();
        errors.push(
            [
                &["REPLCONF", "main-ch-client-id", "999999"][..],
                &["REPLCONF", "main-ch-client-id", "x"],
                &["REPLCONF", "rdb-channel", "2"],
            ]
            .iter()
            .map(|cmd| rdb.cmd(cmd))
            .collect(),
        );
        let id = main_id.to_string();
        let hello = [
            "REPLCONF",
            "capa",
            "eof",
            "rdb-only",
            "1",
            "rdb-channel",
            "1",
            "main-ch-client-id",
            &id,
            "listening-port",
            "7777",
        ];
        assert_eq!(rdb.cmd(&hello), b"+OK\r\n", "{who}");
        rdb.send(b"PSYNC ? -1\r\n").unwrap();
        let full = String::from_utf8(rdb.read_reply().unwrap()).unwrap();
        assert!(full.starts_with("+FULLRESYNC "), "{who}: {full}");
        // Written after the snapshot was taken: it comes on the main channel.
        assert_eq!(c.cmd(&["SET", "after", "x"]), b"+OK\r\n");
        assert_eq!(stream_until(&mut main, "set"), ["set after x"], "{who}");
        let info = text(&c.cmd_value(&["INFO", "replication"]));
        assert!(info.contains("connected_slaves:1"), "{who}: the pair is one replica: {info}");
        assert!(info.contains("slave0:ip=127.0.0.1,port=0,state=send_bulk_and_stream,"), "{who}: {info}");
        assert!(!info.contains("slave1:"), "{who}: {info}");
        let list = text(&c.cmd_value(&["CLIENT", "LIST", "TYPE", "replica"]));
        let flags: Vec<&str> =
            list.lines().filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("flags="))).collect();
        assert_eq!(flags, ["S", "SC"], "{who}: {list}");
        let role = text(&c.cmd_value(&["ROLE"]));
        assert!(role.ends_with("[]]"), "{who}: not online yet, so ROLE lists none: {role}");
        assert!(read_eof_payload(&mut rdb, &who) > 0, "{who}");
        // The snapshot sent: the main channel is online (Redis notices at its next check).
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let info = text(&c.cmd_value(&["INFO", "replication"]));
            if info.contains("state=online") {
                break;
            }
            assert!(Instant::now() < deadline, "{who}: never online: {info}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(info_field(&mut c, "stats", "sync_full").as_deref(), Some("1"), "{who}");
        let role = text(&c.cmd_value(&["ROLE"]));
        assert!(role.contains("[[127.0.0.1 0 "), "{who}: {role}");
    }
    if let [ours, redis] = &errors[..] {
        assert_eq!(ours, redis, "REPLCONF's errors");
    }
    let ours = errors.first().unwrap();
    assert_eq!(ours.first().unwrap(), b"-ERR Unrecognized RDB client id: 999999\r\n");
}

/// An RDB channel's full sync waits `repl-diskless-sync-delay` as any disk-less one does, on
/// rill as on Redis 8.2.3: meanwhile both connections are replicas to CLIENT LIST, INFO shows
/// one in `wait_bgsave`, and the RDB channel gets a newline each second before `+FULLRESYNC`.
#[test]
fn an_rdb_channel_waits_the_disk_less_delay_as_on_redis() {
    for (kind, binary) in rill_and_redis8() {
        let who = format!("{kind:?}");
        let args = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "2", "--repl-rdb-channel", "yes"];
        let server = Server::start(kind, &binary, &args);
        let mut c = server.connect();
        let mut main = server.connect();
        let id = text(&main.cmd_value(&["CLIENT", "ID"]));
        assert_eq!(main.cmd(&["REPLCONF", "capa", "eof", "capa", "rdb-channel-repl"]), b"+OK\r\n", "{who}");
        main.send(b"PSYNC ? -1\r\n").unwrap();
        assert_eq!(main.read_reply().unwrap(), format!("+RDBCHANNELSYNC {id}\r\n").into_bytes(), "{who}");
        let mut rdb = server.connect();
        let hello = ["REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1", "main-ch-client-id", &id];
        assert_eq!(rdb.cmd(&hello), b"+OK\r\n", "{who}");
        let asked = Instant::now();
        rdb.send(b"PSYNC ? -1\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let info = text(&c.cmd_value(&["INFO", "replication"]));
        assert!(info.contains("connected_slaves:1") && info.contains("state=wait_bgsave"), "{who}: {info}");
        let list = text(&c.cmd_value(&["CLIENT", "LIST", "TYPE", "replica"]));
        assert_eq!(list.trim().lines().count(), 2, "{who}: {list}");
        assert_eq!(rdb.read_exact(1).unwrap(), b"\n", "{who}: a newline while it waits");
        let byte = past_newlines(&mut rdb);
        assert_eq!(byte, b"+", "{who}");
        assert!(asked.elapsed() >= Duration::from_millis(1000), "{who}: the sync started before its delay");
        assert_eq!(rdb.read_exact(11).unwrap(), b"FULLRESYNC ", "{who}");
    }
}

/// A command with a reply that a replica sends while its snapshot is still being made closes
/// its link too (the snapshot slowed to 10 ms a key), on rill as on Redis 8.2.3.
#[test]
fn a_command_sent_during_the_snapshot_closes_the_replica_link_as_on_redis() {
    for (kind, binary) in rill_and_redis8() {
        let args = ["--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "10000"];
        let server = Server::start(kind, &binary, &args);
        let mut c = server.connect();
        for i in 0..100 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        let mut replica = server.connect();
        replica.send(b"PSYNC ? -1\r\n").unwrap();
        let line = replica.read_reply().unwrap();
        assert!(line.starts_with(b"+FULLRESYNC "), "{kind:?}: {}", String::from_utf8_lossy(&line));
        replica.send(b"GET k1\r\n").unwrap();
        let (_, closed) = replica.read_until_close(Duration::from_secs(10));
        assert!(closed, "{kind:?}: the link stays open");
        let deadline = Instant::now() + Duration::from_secs(5);
        let line = "Replica generated a reply to command 'get', disconnecting it: ";
        while !server.log().contains(line) {
            assert!(Instant::now() < deadline, "{kind:?}: no '{line}' in\n{}", server.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
}
