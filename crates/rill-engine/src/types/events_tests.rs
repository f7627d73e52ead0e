//! The keyspace events each command family records, checked against Redis 8.2.3.
//!
//! Each transcript line is `command => events` (`name:key`, in order). The transcripts were
//! recorded from a real Redis 8.2.3 (`--notify-keyspace-events EAn`, a client PSUBSCRIBEd to
//! `__keyevent@0__:*`, each command followed by a PUBLISH marker on that pattern to close its
//! events) and pasted here unchanged, except where a comment says rill differs.

use super::testkit::*;

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
    check(
        &mut h,
        "SET s1 v => new:s1 set:s1
         SET s1 w => set:s1
         SET s1 v EX 100 => set:s1 expire:s1
         SETEX s3 100 v => new:s3 set:s3 expire:s3
         MSET m1 a m2 b => new:m1 set:m1 new:m2 set:m2
         SETRANGE s4 2 x => new:s4 setrange:s4
         INCR n1 => new:n1 incrby:n1
         INCRBY n1 5 => incrby:n1
         DECR n1 => incrby:n1
         INCRBYFLOAT n1 1.5 => incrbyfloat:n1
         GETDEL s4 => del:s4
         GETEX s1 EX 100 => expire:s1
         GETEX s1 PERSIST => persist:s1
         GETEX s1 PXAT 1 => del:s1",
    );
    // Redis 8.2.3 stores a SET whose PXAT is past (`set`, `expire`) and expires it at the
    // next lookup; rill deletes it at once.
    check(&mut h, "SET s5 v PXAT 1 => new:s5 set:s5 del:s5");
}

#[test]
fn generic_events_match_redis() {
    let mut h = Harness::new();
    check(
        &mut h,
        "MSET m1 a m2 b => new:m1 set:m1 new:m2 set:m2
         EXPIRE m1 100 => expire:m1
         PERSIST m1 => persist:m1
         EXPIRE m1 0 => del:m1
         RENAME m2 r1 => new:r1 rename_from:m2 rename_to:r1
         SET r2 x => new:r2 set:r2
         RENAME r1 r2 => new:r2 rename_from:r1 rename_to:r2
         COPY r2 c1 => new:c1 copy_to:c1
         DEL r2 c1 nosuch => del:r2 del:c1",
    );
}

#[test]
fn list_events_match_redis() {
    let mut h = Harness::new();
    check(
        &mut h,
        "RPUSH l1 a b c => new:l1 rpush:l1
         LPUSH l1 z => lpush:l1
         LPOP l1 => lpop:l1
         RPOP l1 2 => rpop:l1
         LINSERT l1 BEFORE a q => linsert:l1
         LSET l1 0 y => lset:l1
         LREM l1 1 y => lrem:l1
         LTRIM l1 0 0 => ltrim:l1
         RPUSH l2 a b => new:l2 rpush:l2
         LMOVE l2 l3 LEFT RIGHT => new:l3 rpush:l3 lpop:l2
         LMOVE l2 l3 RIGHT LEFT => lpush:l3 rpop:l2 del:l2
         RPUSH l4 a b => new:l4 rpush:l4
         LMOVE l4 l4 LEFT RIGHT => rpush:l4 lpop:l4
         LPOP l4 2 => lpop:l4 del:l4
         RPUSH l5 a => new:l5 rpush:l5
         BLPOP l5 1 => lpop:l5 del:l5",
    );
}

#[test]
fn hash_events_match_redis() {
    let mut h = Harness::new();
    check(
        &mut h,
        "HSET h1 f v g w => new:h1 hset:h1
         HSETNX h1 x y => hset:h1
         HINCRBY h1 n 2 => hincrby:h1
         HINCRBYFLOAT h1 m 1.5 => hincrbyfloat:h1
         HDEL h1 f => hdel:h1
         HGETDEL h1 FIELDS 1 g => hdel:h1
         HDEL h1 x n m => hdel:h1 del:h1",
    );
}

#[test]
fn set_events_match_redis() {
    let mut h = Harness::new();
    check(
        &mut h,
        "SADD t1 a b c => new:t1 sadd:t1
         SREM t1 a => srem:t1
         SPOP t1 => spop:t1
         SMOVE t1 t2 b => srem:t1 del:t1 new:t2 sadd:t2
         SADD t3 a b => new:t3 sadd:t3
         SADD t4 b c => new:t4 sadd:t4
         SINTERSTORE t5 t3 t4 => new:t5 sinterstore:t5
         SUNIONSTORE t5 t3 t4 => sunionstore:t5
         SDIFFSTORE t5 t3 t4 => sdiffstore:t5
         SINTERSTORE t5 t3 nosuch => del:t5
         SPOP t3 5 => spop:t3 del:t3",
    );
}

#[test]
fn stream_events_match_redis() {
    let mut h = Harness::new();
    check(
        &mut h,
        "XADD x1 1-1 a 1 => new:x1 xadd:x1
         XADD x1 MAXLEN 1 2-1 a 2 => xadd:x1 xtrim:x1
         XADD x1 3-1 a 3 => xadd:x1
         XDEL x1 3-1 => xdel:x1
         XTRIM x1 MAXLEN 0 => xtrim:x1
         XSETID x1 5-0 => xsetid:x1
         XGROUP CREATE x1 g1 $ => xgroup-create:x1
         XGROUP CREATE x2 g1 $ MKSTREAM => new:x2 xgroup-create:x2
         XGROUP SETID x1 g1 0 => xgroup-setid:x1
         XGROUP CREATECONSUMER x1 g1 c1 => xgroup-createconsumer:x1
         XADD x1 6-1 a 1 => xadd:x1
         XREADGROUP GROUP g1 c2 COUNT 1 STREAMS x1 > => xgroup-createconsumer:x1
         XCLAIM x1 g1 c3 0 6-1 => xgroup-createconsumer:x1
         XAUTOCLAIM x1 g1 c4 0 0 => xgroup-createconsumer:x1
         XGROUP DELCONSUMER x1 g1 c1 => xgroup-delconsumer:x1
         XACKDEL x1 g1 IDS 1 6-1 => xdel:x1
         XGROUP DESTROY x1 g1 => xgroup-destroy:x1",
    );
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
