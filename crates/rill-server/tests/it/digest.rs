//! DEBUG DIGEST, DEBUG DIGEST-VALUE and DEBUG POPULATE against a real Redis 8.2.3: the same
//! data loaded into both (every type rill stores, small and large so that Redis uses each of
//! its encodings, integers, expiries, several databases, streams with groups, PELs, consumers
//! and deleted entries) must give the same digests byte for byte; POPULATE must make the same
//! keys (same digest afterwards) and answer the same errors; and the keys it makes must come
//! back after a kill -9 with the log on (rill logs them as SETs).

use crate::common::ClientExt;
use rill_testkit::{escape, Proc, RawClient, ReferenceServer, Server, ServerKind, TempDir};
use std::time::Duration;

const ZERO: &[u8] = b"+0000000000000000000000000000000000000000\r\n";

/// rill and Redis 8.2.3 with DEBUG allowed; `None` for Redis when it is missing and
/// `RILL_SKIP_REFERENCE=1` (the test then checks what it can alone).
fn pair() -> (Server, Option<Server>) {
    let extra = ["--enable-debug-command", "yes"];
    let rill = Server::rill_with(&extra);
    let redis = ReferenceServer::Redis8
        .require()
        .map(|bin| Server::start(ServerKind::Redis(ReferenceServer::Redis8), &bin, &extra));
    (rill, redis)
}

/// Both servers' connections; every command goes to both, and [`Both::same`] compares.
struct Both {
    rill: RawClient,
    redis: Option<RawClient>,
}

impl Both {
    fn new(rill: &Server, redis: Option<&Server>) -> Both {
        Both { rill: rill.connect(), redis: redis.map(Server::connect) }
    }

    /// Send to both; rill's reply.
    fn run(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let ours = self.rill.request(args).unwrap();
        if let Some(r) = self.redis.as_mut() {
            r.request(args).unwrap();
        }
        ours
    }

    fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.run(&args)
    }

    /// Send to both and require byte-identical replies; rill's reply.
    fn same(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let ours = self.rill.request(args).unwrap();
        if let Some(r) = self.redis.as_mut() {
            let theirs = r.request(args).unwrap();
            let shown: Vec<String> = args.iter().map(|a| escape(a)).collect();
            assert_eq!(escape(&ours), escape(&theirs), "{shown:?}: rill vs redis 8.2.3");
        }
        ours
    }

    fn same_cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.same(&args)
    }

    /// DEBUG DIGEST on both, compared; rill's reply.
    fn digest(&mut self) -> Vec<u8> {
        let d = self.same_cmd(&["DEBUG", "DIGEST"]);
        assert_eq!(d.len(), 43, "{}", escape(&d));
        d
    }

    /// DEBUG DIGEST-VALUE of `keys` on both, compared, in the selected database.
    fn digest_values(&mut self, keys: &[&str]) -> Vec<u8> {
        let mut args = vec!["DEBUG", "DIGEST-VALUE"];
        args.extend_from_slice(keys);
        self.same_cmd(&args)
    }
}

fn strs(items: &[String]) -> Vec<&str> {
    items.iter().map(String::as_str).collect()
}

/// Load every type rill stores into database 0, in both servers, checking the digests as it
/// goes; returns the keys.
fn load_db0(b: &mut Both) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let mut key = |k: &str| {
        keys.push(k.to_string());
        k.to_string()
    };
    // Strings: raw, embedded, integers (Redis' int encoding), binary, built up by APPEND and INCR.
    b.cmd(&["SET", &key("s:short"), "hello"]);
    b.cmd(&["SET", &key("s:long"), &"x".repeat(100)]);
    b.cmd(&["SET", &key("s:int"), "12345"]);
    b.cmd(&["SET", &key("s:neg"), "-9007199254740993"]);
    b.cmd(&["SET", &key("s:notint"), "007"]);
    b.cmd(&["SET", &key("s:empty"), ""]);
    b.run(&[b"SET", key("s:bin").as_bytes(), b"a\0b\r\n\xff"]);
    b.cmd(&["INCRBY", &key("s:counter"), "41"]);
    b.cmd(&["INCR", "s:counter"]);
    b.cmd(&["APPEND", &key("s:appended"), "abc"]);
    b.cmd(&["APPEND", "s:appended", "def"]);
    b.cmd(&["INCRBYFLOAT", &key("s:float"), "1.5"]);
    b.digest();

    // Lists: a small listpack, a quicklist of several nodes, integers, order that matters.
    b.cmd(&["RPUSH", &key("l:small"), "a", "b", "1", "2", "-3"]);
    let many: Vec<String> = (0..300).map(|i| if i % 3 == 0 { i.to_string() } else { format!("item-{i}") }).collect();
    let mut args = vec!["RPUSH", "l:big"];
    key("l:big");
    args.extend(strs(&many));
    b.cmd(&args);
    b.cmd(&["LPUSH", &key("l:long"), &"y".repeat(70), "z"]);
    b.cmd(&["RPUSH", &key("l:popped"), "1", "2", "3"]);
    b.cmd(&["LPOP", "l:popped"]);
    b.digest();
    // Order counts in a list: the reversed list has another digest (and Redis agrees).
    b.cmd(&["RPUSH", &key("l:ab"), "a", "b"]);
    b.cmd(&["RPUSH", &key("l:ba"), "b", "a"]);
    let ab = b.digest_values(&["l:ab"]);
    let ba = b.digest_values(&["l:ba"]);
    assert_ne!(ab, ba);

    // Sets: intset, listpack, hashtable (many members, long members), an intset grown past 512.
    b.cmd(&["SADD", &key("set:ints"), "1", "2", "3", "-100", "99999999999"]);
    b.cmd(&["SADD", &key("set:small"), "a", "b", "c", "1"]);
    let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "set:big"];
    key("set:big");
    args.extend(strs(&members));
    b.cmd(&args);
    let ints: Vec<String> = (0..600).map(|i| (i * 7).to_string()).collect();
    let mut args = vec!["SADD", "set:manyints"];
    key("set:manyints");
    args.extend(strs(&ints));
    b.cmd(&args);
    b.cmd(&["SADD", &key("set:longmember"), &"w".repeat(80), "short"]);
    b.cmd(&["SREM", "set:big", "m7", "m8"]);
    b.digest();

    // Hashes: listpack, hashtable (many fields, a long value), integer values, HINCRBY.
    b.cmd(&["HSET", &key("h:small"), "f", "v", "n", "12", "neg", "-3"]);
    let fields: Vec<String> = (0..300).flat_map(|i| [format!("field{i}"), i.to_string()]).collect();
    let mut args = vec!["HSET", "h:big"];
    key("h:big");
    args.extend(strs(&fields));
    b.cmd(&args);
    b.cmd(&["HSET", &key("h:longval"), "f", &"v".repeat(100)]);
    b.cmd(&["HINCRBY", &key("h:counter"), "c", "5"]);
    b.cmd(&["HINCRBYFLOAT", "h:counter", "d", "0.25"]);
    b.cmd(&["HDEL", "h:big", "field3"]);
    b.digest();

    // Streams: fields with integer and decimal values, explicit IDs, deleted and trimmed
    // entries, a stream of many nodes, an empty stream, consumer groups with PELs and consumers.
    b.cmd(&["XADD", &key("x:small"), "1-1", "a", "1", "b", "2.5", "c", "text"]);
    b.cmd(&["XADD", "x:small", "1-2", "a", "2", "b", "-0.75"]);
    b.cmd(&["XADD", "x:small", "5-0", "other", "fields", "here", "x"]);
    b.cmd(&["XADD", "x:small", "5-1", "a", "007", "b", "1e3"]);
    b.cmd(&["XDEL", "x:small", "1-2"]);
    for i in 1..=500u32 {
        let id = format!("{}-{}", 1000 + i / 7, i % 7);
        let v = if i % 2 == 0 { i.to_string() } else { format!("v{i}") };
        b.cmd(&["XADD", "x:big", &id, "n", &v, "m", "same"]);
    }
    key("x:big");
    b.cmd(&["XDEL", "x:big", "1010-1", "1020-3", "1050-0"]);
    b.cmd(&["XTRIM", "x:big", "MINID", "1003-0"]);
    b.cmd(&["XGROUP", "CREATE", &key("x:empty"), "g", "$", "MKSTREAM"]);
    b.cmd(&["XADD", &key("x:emptied"), "7-7", "f", "v"]);
    b.cmd(&["XDEL", "x:emptied", "7-7"]);
    let before_groups = b.digest_values(&["x:big", "x:small"]);
    b.cmd(&["XGROUP", "CREATE", "x:big", "g1", "0"]);
    b.cmd(&["XGROUP", "CREATE", "x:big", "g2", "$"]);
    b.cmd(&["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "20", "STREAMS", "x:big", ">"]);
    b.cmd(&["XREADGROUP", "GROUP", "g1", "bob", "COUNT", "5", "STREAMS", "x:big", ">"]);
    b.cmd(&["XACK", "x:big", "g1", "1003-0", "1003-1"]);
    b.cmd(&["XCLAIM", "x:big", "g1", "carol", "0", "1003-2", "1003-3"]);
    b.cmd(&["XGROUP", "CREATECONSUMER", "x:big", "g2", "idle"]);
    b.cmd(&["XGROUP", "CREATE", "x:small", "g", "0"]);
    b.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "x:small", ">"]);
    b.cmd(&["XGROUP", "SETID", "x:small", "g", "1-1", "ENTRIESREAD", "1"]);
    b.digest();
    // Groups, PELs and consumers are no part of a stream's digest, in Redis as in rill.
    assert_eq!(b.digest_values(&["x:big", "x:small"]), before_groups);
    // Deleting a PEL'd entry changes it.
    b.cmd(&["XDEL", "x:big", "1004-0"]);
    assert_ne!(b.digest_values(&["x:big", "x:small"]), before_groups);

    // Expiries: on every type; only whether a key expires counts, not when.
    for (k, secs) in [("s:short", "10000"), ("l:small", "20000"), ("set:ints", "30000"), ("h:small", "40000")] {
        b.cmd(&["EXPIRE", k, secs]);
    }
    b.cmd(&["PEXPIREAT", "x:small", "99999999999999"]);
    b.cmd(&["SET", &key("s:ttl"), "v", "EX", "100000"]);
    b.cmd(&["SET", &key("s:ttl2"), "v", "PX", "5000000"]);
    assert_eq!(b.digest_values(&["s:ttl"]), b.digest_values(&["s:ttl2"]));
    b.cmd(&["SET", &key("s:persisted"), "v", "EX", "100000"]);
    b.cmd(&["PERSIST", "s:persisted"]);
    b.digest();
    keys
}

#[test]
fn digest_and_digest_value_match_redis_for_every_type() {
    let (rill, redis) = pair();
    let mut b = Both::new(&rill, redis.as_ref());
    // Nothing stored: twenty zero bytes; a missing key too; no key: an empty array.
    assert_eq!(b.digest(), ZERO);
    assert_eq!(b.digest_values(&["nope"]), [b"*1\r\n", ZERO].concat());
    assert_eq!(b.digest_values(&[]), b"*0\r\n");
    b.same_cmd(&["DEBUG", "DIGEST", "extra"]);
    b.same_cmd(&["DEBUG", "DIGEST-VALUE"]);

    let keys = load_db0(&mut b);
    let mut all = strs(&keys);
    all.push("missing");
    let values = b.digest_values(&all);
    assert!(values.starts_with(format!("*{}\r\n", all.len()).as_bytes()));
    assert_eq!(b.rill.cmd(&["DBSIZE"]), format!(":{}\r\n", keys.len()).into_bytes());

    // More databases: the same key and value in another database is another dataset; a
    // database's number is part of the digest.
    let db0_only = b.digest();
    b.cmd(&["SELECT", "1"]);
    b.cmd(&["SET", "s:short", "hello"]);
    b.cmd(&["SADD", "other", "x", "y"]);
    let with_db1 = b.digest();
    assert_ne!(with_db1, db0_only);
    b.digest_values(&["s:short", "other", "l:big"]);
    // The same key and value in database 5 instead of 1 (rill has no MOVE yet).
    b.cmd(&["DEL", "other"]);
    b.cmd(&["SELECT", "5"]);
    b.cmd(&["SADD", "other", "x", "y"]);
    assert_ne!(b.digest(), with_db1);
    b.cmd(&["SELECT", "15"]);
    b.cmd(&["RPUSH", "last", "1", "2"]);
    b.cmd(&["HSET", "lasth", "a", "1"]);
    b.digest();
    b.digest_values(&["last", "lasth", "nope"]);
    b.cmd(&["SWAPDB", "0", "15"]);
    b.digest();
    b.cmd(&["SELECT", "0"]);
    b.digest_values(&["last", "lasth", "s:short"]);

    // RESP3: the same replies.
    b.cmd(&["HELLO", "3"]);
    b.digest();
    b.digest_values(&["last", "nope"]);

    // A change, and undoing it, shows in the digest.
    let now = b.digest();
    b.cmd(&["SELECT", "15"]);
    b.cmd(&["LSET", "l:big", "0", "changed"]);
    assert_ne!(b.digest(), now);
    b.cmd(&["LSET", "l:big", "0", "0"]);
    assert_eq!(b.digest(), now);

    // Emptied, it is zero again.
    b.cmd(&["FLUSHALL"]);
    assert_eq!(b.digest(), ZERO);
}

#[test]
fn populate_matches_redis() {
    let (rill, redis) = pair();
    let mut b = Both::new(&rill, redis.as_ref());
    // A key that exists is left alone; one whose time has passed is made afresh.
    b.cmd(&["SET", "key:5", "mine"]);
    b.cmd(&["SET", "key:7", "gone", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    b.same_cmd(&["DEBUG", "POPULATE", "100"]);
    b.same_cmd(&["DBSIZE"]);
    b.same_cmd(&["GET", "key:5"]);
    b.same_cmd(&["GET", "key:7"]);
    b.same_cmd(&["TTL", "key:7"]);
    b.same_cmd(&["GET", "key:99"]);
    b.same_cmd(&["OBJECT", "ENCODING", "key:1"]);
    b.digest();
    // With a prefix; with a size that cuts the value, and one that pads it with zero bytes.
    b.same_cmd(&["DEBUG", "POPULATE", "20", "pre"]);
    b.same_cmd(&["DEBUG", "POPULATE", "10", "cut", "3"]);
    b.same_cmd(&["DEBUG", "POPULATE", "10", "pad", "64"]);
    b.same_cmd(&["DEBUG", "POPULATE", "10", "zero", "0"]);
    b.same_cmd(&["DEBUG", "POPULATE", "0"]);
    b.same_cmd(&["GET", "cut:4"]);
    b.same_cmd(&["GET", "pad:4"]);
    b.same_cmd(&["GET", "zero:4"]);
    b.same_cmd(&["OBJECT", "ENCODING", "pad:4"]);
    b.same_cmd(&["STRLEN", "pad:9"]);
    // A prefix longer than Redis' 128-byte buffer is cut with the number.
    let long = "p".repeat(200);
    b.same_cmd(&["DEBUG", "POPULATE", "2", &long]);
    b.same_cmd(&["KEYS", "ppp*"]);
    b.digest();
    // In another database.
    b.same_cmd(&["SELECT", "3"]);
    b.same_cmd(&["DEBUG", "POPULATE", "50", "db3", "9"]);
    b.same_cmd(&["DBSIZE"]);
    b.digest();
    b.same_cmd(&["SELECT", "0"]);
    // Errors: count and size must be integers >= 0, with the same text for both mistakes;
    // too many arguments is an unknown subcommand.
    for bad in [
        &["DEBUG", "POPULATE", "-1"][..],
        &["DEBUG", "POPULATE", "abc"],
        &["DEBUG", "POPULATE", "1.5"],
        &["DEBUG", "POPULATE", "99999999999999999999"],
        &["DEBUG", "POPULATE", "1", "e", "-1"],
        &["DEBUG", "POPULATE", "1", "e", "x"],
        &["DEBUG", "POPULATE", "1", "e", "1", "1"],
        &["DEBUG", "POPULATE"],
        &["debug", "populate", "-5", "e", "x"],
    ] {
        let reply = b.same_cmd(bad);
        assert!(reply.starts_with(b"-ERR"), "{bad:?}: {}", escape(&reply));
    }
    // A bad size creates nothing.
    b.same_cmd(&["EXISTS", "e:0"]);
    // WATCH sees the keys it makes.
    b.same_cmd(&["WATCH", "w:3"]);
    b.same_cmd(&["MULTI"]);
    b.same_cmd(&["PING"]);
    let mut other = Both::new(&rill, redis.as_ref());
    other.same_cmd(&["DEBUG", "POPULATE", "5", "w"]);
    assert_eq!(b.same_cmd(&["EXEC"]), b"*-1\r\n");
    b.digest();
    assert_ne!(b.digest(), ZERO);
}

#[test]
fn populated_keys_survive_a_restart_with_the_log_on() {
    let dir = TempDir::new("rill-digest");
    let args = ["--appendonly", "yes", "--appendfsync", "always", "--enable-debug-command", "yes"];
    let p = Proc::start(dir.path(), &args);
    let mut c = p.client();
    c.cmd(&["SET", "key:3", "kept"]);
    c.cmd(&["SET", "key:4", "expires", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "1000"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "10", "sized", "40"]), b"+OK\r\n");
    c.cmd(&["SELECT", "2"]);
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "30", "two"]), b"+OK\r\n");
    let digest = c.cmd(&["DEBUG", "DIGEST"]);
    assert_ne!(digest, ZERO);
    p.kill9();

    let p = Proc::start(dir.path(), &args);
    let mut c = p.client();
    assert_eq!(escape(&c.cmd(&["DEBUG", "DIGEST"])), escape(&digest), "the populated keys after kill -9");
    assert_eq!(c.cmd(&["DBSIZE"]), b":1010\r\n");
    assert_eq!(c.cmd(&["GET", "key:3"]), b"$4\r\nkept\r\n");
    assert_eq!(c.cmd(&["GET", "key:4"]), b"$7\r\nvalue:4\r\n");
    // Through a compaction too.
    c.rewrite_log();
    p.kill9();
    let p = Proc::start(dir.path(), &args);
    assert_eq!(escape(&p.client().cmd(&["DEBUG", "DIGEST"])), escape(&digest), "after a rewrite and kill -9");
}

/// WATCH of a key already expired (not yet deleted, active expiry off): its deletion later —
/// by a lookup, FLUSHDB or SWAPDB — is no change to the transaction, nor is SWAPDB bringing an
/// expired key where there was none or another expired one; a real change still aborts. Redis'
/// unit/multi "stale keys" cases, EXEC's reply compared with Redis 8.2.3's.
#[test]
fn watch_of_stale_keys_is_not_broken_by_their_deletion_as_in_redis() {
    let (rill, redis) = pair();
    let mut b = Both::new(&rill, redis.as_ref());
    let exec_after = |b: &mut Both, setup: &[&[&str]], watch_db: &str, between: &[&str], want: &[u8]| {
        b.same_cmd(&["FLUSHALL"]);
        b.same_cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        for cmd in setup {
            b.same_cmd(cmd);
        }
        std::thread::sleep(Duration::from_millis(5));
        b.same_cmd(&["SELECT", watch_db]);
        b.same_cmd(&["WATCH", "x"]);
        if !between.is_empty() {
            b.same_cmd(between);
        }
        b.same_cmd(&["MULTI"]);
        b.same_cmd(&["PING"]);
        assert_eq!(b.same_cmd(&["EXEC"]), want, "{setup:?} then {between:?}");
        b.same_cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
        b.same_cmd(&["SELECT", "0"]);
    };
    let pong: &[u8] = b"*1\r\n+PONG\r\n";
    let stale = ["SET", "x", "foo", "PX", "1"];
    // Deleted by a lookup, by FLUSHDB, swapped for nothing.
    exec_after(&mut b, &[&stale], "0", &["EXISTS", "x"], pong);
    exec_after(&mut b, &[&stale], "0", &["FLUSHDB"], pong);
    exec_after(&mut b, &[&["SELECT", "1"], &stale], "1", &["SWAPDB", "0", "1"], pong);
    // Nothing swapped for an expired key; an expired key for another.
    exec_after(&mut b, &[&stale], "1", &["SWAPDB", "0", "1"], pong);
    exec_after(
        &mut b,
        &[&["SELECT", "1"], &stale, &["SELECT", "0"], &["SET", "x", "bar", "PX", "1"]],
        "1",
        &["SWAPDB", "0", "1"],
        pong,
    );
    // A live key swapped in, and a stale key written again, are changes.
    exec_after(
        &mut b,
        &[&["SELECT", "1"], &stale, &["SELECT", "0"], &["SET", "x", "bar"]],
        "1",
        &["SWAPDB", "0", "1"],
        b"*-1\r\n",
    );
    exec_after(&mut b, &[&stale], "0", &["SET", "x", "new"], b"*-1\r\n");
    // A live key deleted by FLUSHDB is a change too.
    exec_after(&mut b, &[&["SET", "x", "live"]], "0", &["FLUSHDB"], b"*-1\r\n");
}

/// A client blocked on a key that an EXEC makes ready is served at the time the EXEC ended:
/// a key whose time passed during the EXEC (DEBUG SLEEP inside it) is expired for it, so it
/// blocks again until its own timeout, as in Redis (unit/type/zset "reprocessing command").
#[test]
fn a_client_woken_by_a_long_exec_sees_the_time_it_ended() {
    let (rill, redis) = pair();
    let run = |server: &Server| -> Vec<u8> {
        let mut c = server.connect();
        let mut blocked = server.connect();
        assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
        blocked.send_command(&[b"BZPOPMIN", b"z", b"1"]).unwrap();
        crate::common::wait_blocked(&mut c, 1);
        assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
        c.cmd(&["ZADD", "z", "1", "one"]);
        c.cmd(&["PEXPIRE", "z", "100"]);
        c.cmd(&["DEBUG", "SLEEP", "0.2"]);
        assert_eq!(c.cmd(&["EXEC"]), b"*3\r\n:1\r\n:1\r\n+OK\r\n");
        blocked.read_reply().unwrap()
    };
    let ours = run(&rill);
    assert_eq!(escape(&ours), "*-1\\r\\n");
    if let Some(redis) = redis.as_ref() {
        assert_eq!(escape(&ours), escape(&run(redis)));
    }
}

/// DEBUG LOADAOF replaces the data with what the log files hold — the same data, as a restart
/// would load it (streams with groups, PELs and consumers, other types, expiries): the digest
/// and the groups (XINFO STREAM FULL) are the same after it; without the log it is an error.
#[test]
fn debug_loadaof_reloads_the_data_from_the_log() {
    let rill = Server::rill_with(&["--enable-debug-command", "yes", "--appendonly", "yes"]);
    let mut c = rill.connect();
    for i in 0..20 {
        c.cmd(&["XADD", "s", "*", "f", &i.to_string()]);
        c.cmd(&["HSET", "h", &format!("f{i}"), "v"]);
    }
    c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "5", "STREAMS", "s", ">"]);
    c.cmd(&["SET", "ttl", "v", "EX", "1000"]);
    c.cmd(&["SADD", "set", "a", "b"]);
    let digest = c.cmd(&["DEBUG", "DIGEST"]);
    // Absolute times only (XPENDING's idle times move with the clock).
    let pending = c.cmd(&["XINFO", "STREAM", "s", "FULL"]);
    assert_ne!(digest, ZERO);
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), digest);
    let after = c.cmd(&["XINFO", "STREAM", "s", "FULL"]);
    assert_eq!(escape(&after), escape(&pending));
    assert_eq!(c.cmd(&["SCARD", "set"]), b":2\r\n");
    // Writes go on into the same log after it.
    c.cmd(&["XACK", "s", "g", "0-1"]);
    c.cmd(&["SET", "after", "1"]);
    let digest2 = c.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), digest2);
    let off = Server::rill_with(&["--enable-debug-command", "yes"]);
    let reply = off.connect().cmd(&["DEBUG", "LOADAOF"]);
    assert!(reply.starts_with(b"-ERR DEBUG LOADAOF needs"), "{}", escape(&reply));
}
