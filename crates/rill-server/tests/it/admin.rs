//! Server administration that the differential scripts cannot express because it needs
//! start-up options or watches connections close: requirepass and AUTH/HELLO AUTH, DEBUG with
//! `enable-debug-command`, CLIENT KILL / CLIENT UNBLOCK ERROR on other connections, the idle
//! `timeout`, `maxclients`, SHUTDOWN, CONFIG REWRITE and rill's `busy-poll-us`. Where Redis
//! behaves the same, the same sequence runs against Redis 8.2.3 started with the same options
//! and the bytes are compared.

use crate::common::wait_blocked;
use rill_testkit::{escape, ReferenceServer, Server, ServerKind, TempDir};
use std::thread::sleep;
use std::time::Duration;

/// Start rill and (if installed) Redis 8.2.3 with the same extra options.
fn pair(extra: &[&str]) -> (Server, Option<Server>) {
    let rill = Server::rill_with(extra);
    let redis = ReferenceServer::Redis8
        .require()
        .map(|bin| Server::start(ServerKind::Redis(ReferenceServer::Redis8), &bin, extra));
    (rill, redis)
}

/// Run `script` (one command per entry) on a fresh connection to each server and require
/// identical replies.
fn same_replies(rill: &Server, redis: Option<&Server>, script: &[&[&str]]) -> Vec<Vec<u8>> {
    let mut ours = rill.connect();
    let mut theirs = redis.map(Server::connect);
    let mut out = Vec::new();
    for cmd in script {
        let a = ours.cmd(cmd);
        if let Some(t) = theirs.as_mut() {
            let b = t.cmd(cmd);
            assert_eq!(escape(&a), escape(&b), "{cmd:?}: rill vs redis 8.2.3");
        }
        out.push(a);
    }
    out
}

#[test]
fn requirepass_auth_and_hello_auth_like_redis() {
    let (rill, redis) = pair(&["--requirepass", "s3cret"]);
    let replies = same_replies(
        &rill,
        redis.as_ref(),
        &[
            &["PING"],
            &["SET", "k", "v"],
            &["HELLO", "3"],
            &["AUTH", "wrong"],
            &["AUTH", "default", "wrong"],
            &["AUTH", "nosuchuser", "s3cret"],
            &["AUTH", "a", "b", "c"],
            &["PING"],
            &["AUTH", "s3cret"],
            &["PING"],
            &["RESET"],
            &["PING"],
            &["AUTH", "default", "s3cret"],
            &["GET", "k"],
        ],
    );
    assert_eq!(replies[0], b"-NOAUTH Authentication required.\r\n");
    assert!(replies[2].starts_with(b"-NOAUTH HELLO must be called"));
    assert_eq!(replies[3], b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    assert_eq!(replies[9], b"+PONG\r\n");
    assert_eq!(replies[11], b"-NOAUTH Authentication required.\r\n");

    // HELLO 3 AUTH authenticates and switches protocol in one step (RESP3 clients' handshake).
    let mut c = rill.connect();
    let hello = c.cmd(&["HELLO", "3", "AUTH", "default", "s3cret"]);
    assert!(hello.starts_with(b"%7\r\n"), "{}", escape(&hello));
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");

    // Before AUTH, a multibulk of more than 10 arguments is a protocol error (and a close).
    let mut c = rill.connect();
    let mut req = b"*11\r\n".to_vec();
    for _ in 0..11 {
        req.extend_from_slice(b"$1\r\nx\r\n");
    }
    c.send(&req).unwrap();
    let (bytes, closed) = c.read_until_close(Duration::from_millis(500));
    assert_eq!(bytes, b"-ERR Protocol error: unauthenticated multibulk length\r\n");
    assert!(closed);
}

/// The `field:value` lines of an INFO reply's section, in order.
fn info_fields(info: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(info)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('$'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn failed_authentication_is_counted_in_info_stats_like_redis() {
    let (rill, redis) = pair(&["--requirepass", "s3cret"]);
    same_replies(
        &rill,
        redis.as_ref(),
        &[
            &["AUTH", "wrong"],
            &["AUTH", "default", "wrong"],
            &["AUTH", "nosuchuser", "s3cret"],
            &["HELLO", "3", "AUTH", "default", "wrong"],
            &["AUTH", "s3cret"],
            // The ACL counters survive RESETSTAT.
            &["CONFIG", "RESETSTAT"],
        ],
    );
    let stats = |server: &Server| {
        let mut c = server.connect();
        c.cmd(&["AUTH", "s3cret"]);
        info_fields(&c.cmd(&["INFO", "stats"]))
    };
    let ours = stats(&rill);
    let acl: Vec<&(String, String)> = ours.iter().filter(|(k, _)| k.starts_with("acl_access_denied_")).collect();
    let names: Vec<&str> = acl.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "acl_access_denied_auth",
            "acl_access_denied_cmd",
            "acl_access_denied_key",
            "acl_access_denied_channel",
            "acl_access_denied_tls_cert"
        ]
    );
    assert_eq!(acl[0].1, "4", "four failed authentications");
    assert!(acl[1..].iter().all(|(_, v)| v == "0"));
    // Last in the section, as in Redis.
    assert_eq!(ours[ours.len() - acl.len()..].iter().collect::<Vec<_>>(), acl);
    if let Some(redis) = &redis {
        let theirs = stats(redis);
        let their_acl: Vec<&(String, String)> =
            theirs.iter().filter(|(k, _)| k.starts_with("acl_access_denied_")).collect();
        // 8.2.3 prints all but tls_cert (added later), in the same order, with the same counts.
        assert_eq!(acl[..their_acl.len()], their_acl[..], "acl_access_denied_*: rill vs redis 8.2.3");
        assert_eq!(their_acl.len(), 4);
        assert_eq!(theirs[theirs.len() - their_acl.len()..].iter().collect::<Vec<_>>(), their_acl);
    }

    // Each failure is logged, a few a second at most however fast they come.
    let mut c = rill.connect();
    let started = std::time::Instant::now();
    for _ in 0..300 {
        assert!(c.cmd(&["AUTH", "wrong"]).starts_with(b"-WRONGPASS"));
    }
    let seconds = started.elapsed().as_secs() + 1;
    let lines = rill.log().lines().filter(|l| l.contains("Failed authentication for user")).count() as u64;
    assert!((1..=3 * (seconds + 2)).contains(&lines), "{lines} lines for 304 failures in {seconds} s:\n{}", rill.log());
    assert!(!rill.log().contains("wrong"), "a password was logged:\n{}", rill.log());
}

#[test]
fn no_password_configured_auth_errors_like_redis() {
    let (rill, redis) = pair(&[]);
    let ours = same_replies(
        &rill,
        redis.as_ref(),
        &[&["AUTH", "x"], &["AUTH", "default", "anything"], &["AUTH", "other", "x"], &["PING"]],
    );
    // Redis 8.2.3's replies, written down so that the test checks rill without Redis too.
    let want: [&[u8]; 4] = [
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
        b"+OK\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        b"+PONG\r\n",
    ];
    for (got, want) in ours.iter().zip(want) {
        assert_eq!(escape(got), escape(want));
    }
}

#[test]
fn debug_subset_with_enable_debug_command() {
    let (rill, redis) = pair(&["--enable-debug-command", "yes"]);
    same_replies(
        &rill,
        redis.as_ref(),
        &[
            &["DEBUG", "LOG", "hello"],
            &["DEBUG", "SLEEP", "0"],
            &["DEBUG", "SLEEP", "abc"],
            &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
            &["DEBUG", "NOSUCHTHING"],
            &["DEBUG", "NOSUCHTHING", "with", "args"],
            &["PING"],
        ],
    );
    // Active expiry off: an expired key stays counted until something looks it up.
    let mut c = rill.connect();
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.cmd(&["SET", "gone", "1", "PX", "20"]);
    sleep(Duration::from_millis(300));
    assert_eq!(c.cmd(&["DBSIZE"]), b":1\r\n");
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    // Active expiry deletes it within a few cron ticks (hz 10): wait for it, not for a time.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while c.cmd(&["DBSIZE"]) != b":0\r\n" {
        assert!(std::time::Instant::now() < deadline, "active expiry never deleted the key");
        sleep(Duration::from_millis(20));
    }
    assert!(c.cmd(&["DEBUG", "SLEEP", "0.05"]).starts_with(b"+OK"));
}

#[test]
fn client_kill_and_unblock_error_act_on_other_connections() {
    let (rill, redis) = pair(&[]);
    for server in std::iter::once(&rill).chain(redis.as_ref()) {
        let mut admin = server.connect();
        let mut victim = server.connect();
        let id = String::from_utf8(victim.cmd(&["CLIENT", "ID"])).unwrap();
        let id = id.trim_start_matches(':').trim().to_string();
        assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", &id]), b":1\r\n", "{}", server.label());
        victim.send_command(&[b"PING"]).ok();
        let (_, closed) = victim.read_until_close(Duration::from_millis(1000));
        assert!(closed, "{}: killed client still open", server.label());

        let mut blocked = server.connect();
        let id = String::from_utf8(blocked.cmd(&["CLIENT", "ID"])).unwrap();
        let id = id.trim_start_matches(':').trim().to_string();
        blocked.send_command(&[b"BLPOP", b"nothing", b"0"]).unwrap();
        wait_blocked(&mut admin, 1);
        assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), b":1\r\n");
        assert_eq!(
            blocked.read_reply().unwrap(),
            b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
            "{}",
            server.label()
        );
        assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id]), b":0\r\n");
        // A blocked client that is killed goes away, and the others keep being served.
        blocked.send_command(&[b"BLPOP", b"nothing", b"0"]).unwrap();
        wait_blocked(&mut admin, 1);
        assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", &id]), b":1\r\n");
        let (_, closed) = blocked.read_until_close(Duration::from_millis(1000));
        assert!(closed);
        assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn idle_timeout_closes_quiet_clients() {
    let rill = Server::rill_with(&["--timeout", "1"]);
    let mut idle = rill.connect();
    assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
    let (_, closed) = idle.read_until_close(Duration::from_millis(3000));
    assert!(closed, "an idle client outlived `timeout 1`");
}

#[test]
fn maxclients_rejects_the_extra_client() {
    let rill = Server::rill_with(&["--maxclients", "2"]);
    // Until the server has noticed that the start-up PING's connection closed, `a` is not
    // the only client.
    let mut a = rill.connect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !String::from_utf8(a.cmd(&["INFO", "clients"])).unwrap().contains("\r\nconnected_clients:1\r\n") {
        assert!(std::time::Instant::now() < deadline, "the start-up connection still counts");
        sleep(Duration::from_millis(20));
    }
    let mut b = rill.connect();
    assert_eq!(a.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(b.cmd(&["PING"]), b"+PONG\r\n");
    let mut c = rill.connect();
    let (bytes, closed) = c.read_until_close(Duration::from_millis(1000));
    assert_eq!(bytes, b"-ERR max number of clients reached\r\n");
    assert!(closed);
    assert!(String::from_utf8(a.cmd(&["INFO", "stats"])).unwrap().contains("rejected_connections:1"));
}

#[test]
fn shutdown_stops_the_process() {
    let mut rill = Server::rill();
    let mut c = rill.connect();
    assert_eq!(c.cmd(&["SHUTDOWN", "ABORT"]), b"-ERR No shutdown in progress.\r\n");
    c.send_command(&[b"SHUTDOWN", b"NOSAVE"]).unwrap();
    let (bytes, closed) = c.read_until_close(Duration::from_millis(2000));
    assert!(bytes.is_empty() && closed, "{}", escape(&bytes));
    let status = rill.wait_exit(Duration::from_secs(10)).expect("rill-server still running 10 s after SHUTDOWN");
    assert!(status.success(), "SHUTDOWN NOSAVE ended it with {status}");
}

#[test]
fn config_rewrite_writes_the_config_file() {
    let dir = TempDir::new("rill-test-rewrite");
    let conf = dir.path().join("rill.conf");
    std::fs::write(&conf, "hz 10\n").unwrap();
    let rill = Server::start_with_config(
        ServerKind::Rill,
        std::path::Path::new(env!("CARGO_BIN_EXE_rill-server")),
        Some(&conf),
        &[],
    );
    let mut c = rill.connect();
    assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "25"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.lines().any(|l| l == "hz 25"), "{text}");

    let plain = Server::rill();
    let mut c = plain.connect();
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), b"-ERR The server is running without a config file\r\n");
}

#[test]
fn busy_poll_us_is_read_set_and_bounded_at_run_time() {
    // rill's own directive (no Redis counterpart): start-up value, CONFIG GET/SET, its bounds,
    // and a server that keeps answering whether polling is on, off or at its limit.
    let rill = Server::rill_with(&["--busy-poll-us", "35"]);
    let mut c = rill.connect();
    assert_eq!(c.cmd(&["CONFIG", "GET", "busy-poll-us"]), b"*2\r\n$12\r\nbusy-poll-us\r\n$2\r\n35\r\n");
    for value in ["0", "1000", "20"] {
        assert_eq!(c.cmd(&["CONFIG", "SET", "busy-poll-us", value]), b"+OK\r\n");
        for _ in 0..50 {
            assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
        }
        sleep(Duration::from_millis(5));
        assert_eq!(c.cmd(&["SET", "k", value]), b"+OK\r\n");
        assert_eq!(c.cmd(&["GET", "k"]), format!("${}\r\n{value}\r\n", value.len()).into_bytes());
    }
    let err = String::from_utf8(c.cmd(&["CONFIG", "SET", "busy-poll-us", "1001"])).unwrap();
    assert!(err.starts_with("-ERR CONFIG SET failed (possibly related to argument 'busy-poll-us')"), "{err}");
    assert!(err.contains("argument must be between 0 and 1000 inclusive"), "{err}");
    assert_eq!(c.cmd(&["CONFIG", "GET", "busy-poll-us"]), b"*2\r\n$12\r\nbusy-poll-us\r\n$2\r\n20\r\n");
}

#[test]
fn an_idle_server_stops_polling() {
    // Polling after work must end: a server left alone after a burst of requests (which grows
    // the polling window to its limit) uses next to no CPU. Spinning for the whole second
    // would show as ~100 ticks; the bound leaves a wide margin for a busy machine.
    let rill = Server::rill_with(&["--busy-poll-us", "1000"]);
    let mut c = rill.connect();
    for _ in 0..2000 {
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
    sleep(Duration::from_millis(200));
    let ticks = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", rill.pid())).unwrap();
        // Fields after the command name (which is in parentheses): utime is the 12th, stime the 13th.
        let rest = stat.rsplit_once(')').unwrap().1;
        let f: Vec<u64> = rest.split_whitespace().skip(11).take(2).map(|x| x.parse().unwrap()).collect();
        f[0] + f[1]
    };
    let before = ticks();
    sleep(Duration::from_secs(1));
    let used = ticks() - before;
    assert!(used < 20, "an idle server used {used} clock ticks in a second");
}

#[test]
fn repl_rdb_channel_is_on_by_default_and_set_as_in_redis() {
    // Redis 8 keeps the directive out of CONFIG GET * (hidden) but answers it by name; on by
    // default (a full sync over a second connection, docs/REPLICATION.md).
    let mut kinds = vec![(ServerKind::Rill, rill_testkit::rill_server_binary())];
    if let Some(redis) = ReferenceServer::Redis8.require() {
        kinds.push((ServerKind::Redis(ReferenceServer::Redis8), redis));
    }
    let mut seen = Vec::new();
    for (kind, binary) in kinds {
        let server = Server::start(kind, &binary, &[]);
        let mut c = server.connect();
        let replies: Vec<Vec<u8>> = [
            &["CONFIG", "GET", "repl-rdb-channel"][..],
            &["CONFIG", "SET", "repl-rdb-channel", "no"],
            &["CONFIG", "GET", "repl-rdb-channel"],
            &["CONFIG", "SET", "repl-rdb-channel", "maybe"],
        ]
        .iter()
        .map(|cmd| c.cmd(cmd))
        .collect();
        assert_eq!(
            escape(replies.first().unwrap()),
            escape(b"*2\r\n$16\r\nrepl-rdb-channel\r\n$3\r\nyes\r\n"),
            "{kind:?}"
        );
        seen.push(replies);
    }
    if let [ours, redis] = &seen[..] {
        assert_eq!(ours, redis, "rill, then Redis 8.2.3");
    }
}
