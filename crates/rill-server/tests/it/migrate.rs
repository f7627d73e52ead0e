//! MIGRATE between rill and a real Redis 8.2.3, both ways: every type rill and Redis share
//! travels as Redis' DUMP payload (TTL kept), COPY keeps the source, REPLACE overwrites, the
//! target's errors come back as Redis words them (BUSYKEY, a wrong AUTH / AUTH2 password), and
//! a key moved away is deleted in rill's log as well (kill -9 and restart: still gone).
//! Option errors and NOKEY are compared byte for byte in `tests/diff/keys.redis`; Redis' own
//! MIGRATE tests (unit/dump, spawning two rills) pass too.

use rill_testkit::resp::Value;
use rill_testkit::{RawClient, ReferenceServer, Server};

fn text(c: &mut RawClient, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd(args)).into_owned()
}

fn port(s: &Server) -> String {
    s.port.to_string()
}

#[test]
fn keys_move_between_rill_and_redis_both_ways() {
    let Some(redis) = Server::reference(ReferenceServer::Redis8) else { return };
    let rill = Server::rill();
    let (mut r, mut x) = (rill.connect(), redis.connect());
    r.cmd(&["SET", "s", "v"]);
    r.cmd(&["HSET", "h", "f", "1", "g", "2"]);
    r.cmd(&["XADD", "x", "1-1", "a", "1"]);
    r.cmd(&["XGROUP", "CREATE", "x", "g", "0"]);
    r.cmd(&["ZADD", "z", "1.5", "m"]);
    r.cmd(&["RPUSH", "l", "a", "b"]);
    r.cmd(&["SADD", "set", "a", "b"]);
    r.cmd(&["PFADD", "p", "a", "b", "c"]);
    r.cmd(&["SET", "t", "v", "PX", "100000"]);
    let keys = ["s", "h", "x", "z", "l", "set", "p", "t"];
    let mut args = vec!["MIGRATE", "127.0.0.1", "", "", "0", "5000", "KEYS"];
    let target = port(&redis);
    args[2] = &target;
    args.extend(keys);
    assert_eq!(text(&mut r, &args), "+OK\r\n");
    for k in keys {
        assert_eq!(text(&mut r, &["EXISTS", k]), ":0\r\n", "{k} left rill");
    }
    assert_eq!(text(&mut x, &["GET", "s"]), "$1\r\nv\r\n");
    assert_eq!(text(&mut x, &["HGET", "h", "g"]), "$1\r\n2\r\n");
    assert!(text(&mut x, &["XINFO", "GROUPS", "x"]).contains("$1\r\ng\r\n"));
    assert_eq!(text(&mut x, &["ZSCORE", "z", "m"]), "$3\r\n1.5\r\n");
    assert_eq!(text(&mut x, &["PFCOUNT", "p"]), ":3\r\n");
    let ttl: i64 = match x.cmd_value(&["PTTL", "t"]) {
        Value::Int(n) => n,
        other => panic!("{other:?}"),
    };
    assert!((90_000..=100_000).contains(&ttl), "{ttl}");
    assert!(text(&mut r, &["INFO", "stats"]).contains("migrate_cached_sockets:1"));

    // Back from Redis into rill's database 2.
    let back = port(&rill);
    let mut args = vec!["MIGRATE", "127.0.0.1", &back, "", "2", "5000", "KEYS"];
    args.extend(keys);
    assert_eq!(text(&mut x, &args), "+OK\r\n");
    r.cmd(&["SELECT", "2"]);
    assert_eq!(text(&mut r, &["LRANGE", "l", "0", "-1"]), "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    assert_eq!(text(&mut r, &["SMISMEMBER", "set", "a", "b"]), "*2\r\n:1\r\n:1\r\n");
    assert_eq!(text(&mut r, &["XRANGE", "x", "-", "+"]), "*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    assert_eq!(text(&mut r, &["PFCOUNT", "p"]), ":3\r\n");

    // COPY keeps the source; the target's BUSYKEY comes back; REPLACE overwrites.
    assert_eq!(text(&mut r, &["MIGRATE", "127.0.0.1", &target, "s", "0", "5000", "COPY"]), "+OK\r\n");
    assert_eq!(text(&mut r, &["EXISTS", "s"]), ":1\r\n");
    assert_eq!(
        text(&mut r, &["MIGRATE", "127.0.0.1", &target, "s", "0", "5000", "COPY"]),
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n"
    );
    x.cmd(&["SET", "s", "old"]);
    assert_eq!(text(&mut r, &["MIGRATE", "127.0.0.1", &target, "s", "0", "5000", "REPLACE"]), "+OK\r\n");
    assert_eq!(text(&mut x, &["GET", "s"]), "$1\r\nv\r\n");
    assert_eq!(text(&mut r, &["EXISTS", "s"]), ":0\r\n");
}

#[test]
fn a_password_protected_target_needs_auth_and_a_moved_key_stays_gone_after_kill9() {
    let Some(redis) = Server::reference(ReferenceServer::Redis8) else { return };
    let guarded = Server::rill_with(&["--requirepass", "pw"]);
    let dir = rill_testkit::TempDir::new("rill-migrate");
    let log = ["--appendonly", "yes", "--appendfsync", "always"];
    let source = rill_testkit::Proc::start(dir.path(), &log);
    let mut c = source.client();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["SET", "stay", "v"]);
    let to = port(&guarded);
    assert!(text(&mut c, &["MIGRATE", "127.0.0.1", &to, "k", "0", "5000"])
        .starts_with("-ERR Target instance replied with error: NOAUTH"));
    assert_eq!(
        text(&mut c, &["MIGRATE", "127.0.0.1", &to, "k", "0", "5000", "AUTH", "nope"]),
        "-ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(text(&mut c, &["MIGRATE", "127.0.0.1", &to, "k", "0", "5000", "AUTH2", "default", "pw"]), "+OK\r\n");
    let mut g = guarded.connect();
    g.cmd(&["AUTH", "pw"]);
    assert_eq!(text(&mut g, &["GET", "k"]), "$1\r\nv\r\n");
    // And to a Redis, with the same cached-connection rules.
    let redis_port = port(&redis);
    c.cmd(&["SET", "k2", "v2"]);
    assert_eq!(text(&mut c, &["MIGRATE", "127.0.0.1", &redis_port, "k2", "0", "5000"]), "+OK\r\n");
    // The moves were logged as DELs: after kill -9 the keys are still gone.
    source.kill9();
    let again = rill_testkit::Proc::start(dir.path(), &log);
    let mut c = again.client();
    assert_eq!(text(&mut c, &["EXISTS", "k", "k2", "stay"]), ":1\r\n");
}
