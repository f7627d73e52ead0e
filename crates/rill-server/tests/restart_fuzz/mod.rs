//! The restart fuzz: random commands of every type rill has, over all 16 databases, with
//! times set, changed and removed, renames, SWAPDB, FLUSHDB, COPY between databases, RESTORE,
//! streams with groups, transactions and clients served from a block; at random points
//! BGREWRITEAOF, automatic rewrites (a tiny `auto-aof-rewrite-min-size`), SAVE, BGSAVE,
//! `CONFIG SET appendonly` and `appendfsync` toggles; then kill -9 or SHUTDOWN at a random
//! point, a restart, and a check that the server came back with every acknowledged write.
//!
//! Shared by `tests/it/restart_fuzz.rs` (fixed seeds and one fresh seed, in CI) and
//! `examples/restart_fuzz.rs` (as many seeds as an hour takes, `bench/restart_fuzz.sh`).
//!
//! # The model
//!
//! One client runs everything in order and reads every reply before the next request, so at
//! any moment the state of the keyspace is exactly what its acknowledged writes made it. The
//! harness keeps *pictures* of that state (every key of every database: its type, its
//! contents read in full, and its absolute expiry time; see [`picture`]) at the points a
//! restart must come back to:
//!
//! | the server ran with | a restart with `appendonly yes` must show | with `appendonly no` |
//! | --- | --- | --- |
//! | the log on | the state at the stop | the last snapshot saved |
//! | the log turned off at T | the state at T (the log was closed then) | the last snapshot saved |
//! | the log just turned on, base not yet known written | the state at the switch-on or at the stop | (not tried) |
//!
//! Both `kill -9` and SHUTDOWN must keep everything acknowledged under `always` and
//! `everysec` alike: a reply is sent only after its record reached the OS (rill's promise; only
//! a power loss may take the last second under `everysec`, which a process kill cannot show).
//! A snapshot is the state when SAVE ran, or when BGSAVE started (the harness waits for BGSAVE
//! before its next command, so nothing else changes meanwhile).
//!
//! A key whose time passes between the picture and the check may be gone: it must then have
//! been due by the time of the check. Anything else that differs is a finding, reported with
//! the seed, the round, the key and the last commands sent.

#![allow(dead_code)] // The test and the example use different parts.

use rill_testkit::{parse_value, Proc, RawClient, Rng, Value};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Databases the server has (Redis' default).
pub const DATABASES: usize = 16;

/// How one run goes.
#[derive(Debug, Clone)]
pub struct Params {
    pub seed: u64,
    /// Stops and restarts.
    pub rounds: usize,
    /// Commands per round (admin actions included).
    pub steps: usize,
    /// `appendfsync` at start-up (`CONFIG SET` changes it now and then).
    pub fsync: &'static str,
    /// The negative control: before the first restart, write a key, kill -9, and cut the
    /// log's last record off (a loss the harness must report).
    pub cut_last_record: bool,
}

/// What a run did, for the summary line.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub commands: u64,
    pub rewrites: u64,
    pub saves: u64,
    pub toggles: u64,
    pub kills: u64,
    pub shutdowns: u64,
    pub restarts_without_log: u64,
    pub keys_checked: u64,
    pub expired_on_the_way: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} commands, {} rewrites, {} saves, {} appendonly toggles, {} kill -9, {} SHUTDOWN, \
             {} restarts from a snapshot, {} keys compared ({} expired on the way)",
            self.commands,
            self.rewrites,
            self.saves,
            self.toggles,
            self.kills,
            self.shutdowns,
            self.restarts_without_log,
            self.keys_checked,
            self.expired_on_the_way
        )
    }
}

/// `RILL_FUZZ_TRACE=1`: every command and reply on stderr.
fn trace() -> bool {
    std::env::var("RILL_FUZZ_TRACE").is_ok_and(|v| v == "1")
}

/// Unix time in ms.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Pictures

/// What a client can read of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    pub kind: String,
    /// Its contents, read in full (members and fields sorted: their order is unspecified).
    pub body: String,
    /// PEXPIRETIME: -1 for none.
    pub expire_at_ms: i64,
}

/// Every key of every database.
pub type Picture = BTreeMap<(usize, Vec<u8>), KeyState>;

fn show(v: &Value) -> String {
    format!("{v}")
}

fn sorted(v: Value) -> String {
    match v {
        Value::Array(mut items) | Value::Set(mut items) => {
            items.sort_by_key(show);
            show(&Value::Array(items))
        }
        other => show(&other),
    }
}

fn sorted_pairs(v: Value) -> String {
    match v {
        Value::Array(items) => {
            let mut pairs: Vec<(String, String)> =
                items.chunks(2).map(|p| (show(&p[0]), p.get(1).map(show).unwrap_or_default())).collect();
            pairs.sort();
            format!("{pairs:?}")
        }
        Value::Map(pairs) => {
            let mut pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (show(k), show(v))).collect();
            pairs.sort();
            format!("{pairs:?}")
        }
        other => show(&other),
    }
}

/// XINFO STREAM FULL without the node layout (`radix-tree-keys`, `radix-tree-nodes`): a
/// snapshot packs a stream's entries into nodes afresh, where Redis keeps its nodes as they
/// were, so the layout may change across a rewrite (a difference of node boundaries, not of
/// data; the differential stream fuzz is where boundaries are held to Redis').
fn without_layout(v: Value) -> Value {
    match v {
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            let mut blank_next = false;
            for item in items {
                if blank_next {
                    out.push(Value::Nil);
                    blank_next = false;
                    continue;
                }
                blank_next = matches!(&item, Value::Bulk(b) if b == b"radix-tree-keys" || b == b"radix-tree-nodes");
                out.push(item);
            }
            Value::Array(out)
        }
        other => other,
    }
}

fn call(c: &mut RawClient, args: &[&[u8]]) -> Result<Value, String> {
    let raw = c.request(args).map_err(|e| format!("{}: {e}", String::from_utf8_lossy(&args.join(&b' '))))?;
    parse_value(&raw)
}

/// Read the whole keyspace through `c` (it is left in database 0).
pub fn picture(c: &mut RawClient) -> Result<Picture, String> {
    let mut out = Picture::new();
    for db in 0..DATABASES {
        call(c, &[b"SELECT", db.to_string().as_bytes()])?;
        let keys = match call(c, &[b"KEYS", b"*"])? {
            Value::Array(keys) => keys,
            other => return Err(format!("KEYS * in db {db}: {other}")),
        };
        for k in keys {
            let Value::Bulk(key) = k else { continue };
            let kind = match call(c, &[b"TYPE", &key])? {
                Value::Simple(t) => t,
                other => return Err(format!("TYPE: {other}")),
            };
            let body = match kind.as_str() {
                // Gone meanwhile (its time passed between KEYS and TYPE).
                "none" => continue,
                "string" => show(&call(c, &[b"GET", &key])?),
                "list" => show(&call(c, &[b"LRANGE", &key, b"0", b"-1"])?),
                "set" => sorted(call(c, &[b"SMEMBERS", &key])?),
                "hash" => sorted_pairs(call(c, &[b"HGETALL", &key])?),
                // Groups, consumers, pending entries with their times and counts, NACKed
                // order, IDMP counters: all of it is state a restart must keep.
                "stream" => show(&without_layout(call(c, &[b"XINFO", b"STREAM", &key, b"FULL", b"COUNT", b"0"])?)),
                other => return Err(format!("unexpected type {other}")),
            };
            let expire_at_ms = match call(c, &[b"PEXPIRETIME", &key])? {
                Value::Int(-2) => continue,
                Value::Int(t) => t,
                other => return Err(format!("PEXPIRETIME: {other}")),
            };
            out.insert((db, key), KeyState { kind, body, expire_at_ms });
        }
    }
    call(c, &[b"SELECT", b"0"])?;
    Ok(out)
}

/// The first way `got` (read at `checked_at_ms`) fails to be `want`, if any. A key of `want`
/// may be missing only if its time had come by then.
pub fn compare(want: &Picture, got: &Picture, checked_at_ms: i64, stats: &mut Stats) -> Option<String> {
    for (k, w) in want {
        match got.get(k) {
            Some(g) if g == w => stats.keys_checked += 1,
            Some(g) => {
                return Some(format!(
                    "db {} key {:?} differs\n  want: {w:?}\n  got:  {g:?}",
                    k.0,
                    String::from_utf8_lossy(&k.1)
                ))
            }
            None if w.expire_at_ms >= 0 && w.expire_at_ms <= checked_at_ms => stats.expired_on_the_way += 1,
            None => {
                return Some(format!(
                    "db {} key {:?} lost (want {w:?}; checked at {checked_at_ms})",
                    k.0,
                    String::from_utf8_lossy(&k.1)
                ))
            }
        }
    }
    got.iter()
        .find(|(k, _)| !want.contains_key(*k))
        .map(|(k, g)| format!("db {} key {:?} should not exist: {g:?}", k.0, String::from_utf8_lossy(&k.1)))
}

// ---------------------------------------------------------------------------------------------
// Commands

const STRINGS: &[&str] = &["s0", "s1", "s2", "n0"];
const LISTS: &[&str] = &["l0", "l1", "l2"];
const HASHES: &[&str] = &["h0", "h1"];
const SETS: &[&str] = &["t0", "t1", "t2"];
const STREAMS: &[&str] = &["x0", "x1"];
const GROUPS: &[&str] = &["g0", "g1"];
const CONSUMERS: &[&str] = &["c0", "c1", "c2"];
const LONG: &str = "a value longer than sixty-four bytes, so that small encodings give way to big ones";

fn all_keys() -> Vec<&'static str> {
    [STRINGS, LISTS, HASHES, SETS, STREAMS].concat()
}

fn value(rng: &mut Rng) -> String {
    match rng.below(12) {
        0 => LONG.to_string(),
        1 => String::new(),
        2 => "3.5".to_string(),
        3 => "x".repeat(rng.range(100, 3000) as usize),
        4..=6 => rng.range(-5, 300).to_string(),
        _ => rng.pick(&["a", "b", "c", "d", "hello", "x y"]).to_string(),
    }
}

/// A time to live: short ones run out during the round or across the restart.
fn ttl_ms(rng: &mut Rng) -> String {
    rng.pick(&["30", "150", "400", "900", "2500", "60000", "3600000"]).to_string()
}

/// Some key, mostly of type `kinds`, now and then of another (a type error) or any.
fn key(rng: &mut Rng, kinds: &[&'static str]) -> String {
    if rng.below(10) == 0 {
        let all = all_keys();
        all[rng.below(all.len() as u64) as usize].to_string()
    } else {
        rng.pick(kinds).to_string()
    }
}

/// What the harness remembers about the run to make the next commands meaningful: stream IDs
/// it was given (to acknowledge, claim, delete), per database and key.
#[derive(Debug, Default)]
struct Memory {
    ids: BTreeMap<(usize, String), VecDeque<String>>,
}

impl Memory {
    fn some_ids(&self, rng: &mut Rng, db: usize, key: &str, max: u64) -> Vec<String> {
        let Some(ids) = self.ids.get(&(db, key.to_string())) else { return vec!["0-1".to_string()] };
        let n = 1 + rng.below(max);
        (0..n).filter_map(|_| ids.get(rng.below(ids.len() as u64) as usize).cloned()).collect()
    }
}

/// A database: 0 and 1 mostly, the others now and then, so that some hold many keys and some
/// one or two (a database with little in it is where the snapshot reader once went wrong).
fn some_db(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=4 => 0,
        5 | 6 => 1,
        _ => 2 + rng.below(DATABASES as u64 - 2) as usize,
    }
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// One random data command (possibly a type error or a no-op; the harness does not care).
fn data_command(rng: &mut Rng, mem: &Memory, db: usize) -> Vec<String> {
    let other_db = some_db(rng).to_string();
    match rng.below(100) {
        // Strings.
        0..=4 => {
            let mut c = words(&["SET", &key(rng, STRINGS), &value(rng)]);
            match rng.below(6) {
                0 => c.extend(words(&["PX", &ttl_ms(rng)])),
                1 => c.extend(words(&["EX", rng.pick(&["1", "100"])])),
                2 => c.push("KEEPTTL".into()),
                3 => c.push(rng.pick(&["NX", "XX", "GET"]).into()),
                _ => {}
            }
            c
        }
        5 => words(&["APPEND", &key(rng, STRINGS), &value(rng)]),
        6 => words(&["INCRBY", &key(rng, &["n0"]), &rng.range(-10, 10).to_string()]),
        7 => words(&["INCRBYFLOAT", &key(rng, &["n0"]), rng.pick(&["0.1", "-2.5", "1e3"])]),
        8 => words(&["SETRANGE", &key(rng, STRINGS), &rng.range(0, 80).to_string(), &value(rng)]),
        9 => words(&["GETDEL", &key(rng, STRINGS)]),
        10 => {
            let k = key(rng, STRINGS);
            match rng.below(3) {
                0 => words(&["GETEX", &k, "PX", &ttl_ms(rng)]),
                1 => words(&["GETEX", &k, "PERSIST"]),
                _ => words(&["PSETEX", &k, &ttl_ms(rng), &value(rng)]),
            }
        }
        11 => words(&["MSET", &key(rng, STRINGS), &value(rng), &key(rng, STRINGS), &value(rng)]),
        12 => words(&["SETNX", &key(rng, STRINGS), &value(rng)]),
        // Lists.
        13..=16 => {
            let cmd = rng.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
            let mut c = words(&[cmd, &key(rng, LISTS)]);
            for _ in 0..rng.range(1, 4) {
                c.push(value(rng));
            }
            c
        }
        17 | 18 => {
            let mut c = words(&[rng.pick(&["LPOP", "RPOP"]), &key(rng, LISTS)]);
            if rng.below(2) == 0 {
                c.push(rng.range(1, 3).to_string());
            }
            c
        }
        19 => words(&[
            "LMOVE",
            &key(rng, LISTS),
            &key(rng, LISTS),
            rng.pick(&["LEFT", "RIGHT"]),
            rng.pick(&["LEFT", "RIGHT"]),
        ]),
        20 => words(&["LINSERT", &key(rng, LISTS), rng.pick(&["BEFORE", "AFTER"]), &value(rng), &value(rng)]),
        21 => words(&["LSET", &key(rng, LISTS), &rng.range(-3, 3).to_string(), &value(rng)]),
        22 => words(&["LTRIM", &key(rng, LISTS), &rng.range(0, 2).to_string(), &rng.range(-3, 8).to_string()]),
        23 => words(&["LREM", &key(rng, LISTS), &rng.range(-2, 2).to_string(), &value(rng)]),
        // Hashes.
        24..=27 => {
            let mut c = words(&["HSET", &key(rng, HASHES)]);
            for _ in 0..rng.range(1, 3) {
                c.push(format!("f{}", rng.below(8)));
                c.push(value(rng));
            }
            c
        }
        28 => words(&["HDEL", &key(rng, HASHES), &format!("f{}", rng.below(8)), &format!("f{}", rng.below(8))]),
        29 => words(&["HINCRBY", &key(rng, HASHES), "counter", &rng.range(-5, 5).to_string()]),
        30 => words(&["HINCRBYFLOAT", &key(rng, HASHES), "float", "0.25"]),
        31 => words(&["HGETDEL", &key(rng, HASHES), "FIELDS", "1", &format!("f{}", rng.below(8))]),
        32 => words(&["HSETNX", &key(rng, HASHES), &format!("f{}", rng.below(8)), &value(rng)]),
        // Sets.
        33..=36 => {
            let mut c = words(&["SADD", &key(rng, SETS)]);
            for _ in 0..rng.range(1, 4) {
                c.push(if rng.below(2) == 0 { rng.range(0, 600).to_string() } else { value(rng) });
            }
            c
        }
        37 => words(&["SREM", &key(rng, SETS), &rng.range(0, 600).to_string(), &value(rng)]),
        38 => {
            let mut c = words(&["SPOP", &key(rng, SETS)]);
            if rng.below(2) == 0 {
                c.push(rng.range(0, 3).to_string());
            }
            c
        }
        39 => words(&["SMOVE", &key(rng, SETS), &key(rng, SETS), &rng.range(0, 600).to_string()]),
        40 => {
            let (cmd, d, a, b) = (
                rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE", "SORT"]),
                key(rng, SETS),
                key(rng, SETS),
                key(rng, SETS),
            );
            // SORT ... ALPHA STORE is logged as itself: its replay must build the same list.
            if cmd == "SORT" {
                words(&["SORT", &a, "ALPHA", "DESC", "STORE", &d])
            } else {
                words(&[cmd, &d, &a, &b])
            }
        }
        // Streams.
        41..=48 => {
            let mut c = words(&["XADD", &key(rng, STREAMS)]);
            match rng.below(8) {
                0 => c.extend(words(&["MAXLEN", "~", &rng.range(0, 20).to_string()])),
                1 => c.extend(words(&["MAXLEN", "=", &rng.range(0, 20).to_string()])),
                2 => c.extend(words(&["MINID", "~", &format!("{}", now_ms() - 200)])),
                3 => c.extend(words(&["IDMP", "p", &format!("i{}", rng.below(5))])),
                4 => c.push("NOMKSTREAM".into()),
                _ => {}
            }
            c.push("*".into());
            c.extend(words(&["f", &value(rng)]));
            if rng.below(3) == 0 {
                c.extend(words(&["g", &value(rng)]));
            }
            c
        }
        49 | 50 => {
            let k = key(rng, STREAMS);
            let start = rng.pick(&["$", "0", "-"]);
            let mut c = words(&["XGROUP", "CREATE", &k, rng.pick(GROUPS), if start == "-" { "0" } else { start }]);
            if rng.below(2) == 0 {
                c.push("MKSTREAM".into());
            }
            c
        }
        51..=56 => {
            let k = key(rng, STREAMS);
            let mut c = words(&["XREADGROUP", "GROUP", rng.pick(GROUPS), rng.pick(CONSUMERS)]);
            c.extend(words(&["COUNT", &rng.range(1, 5).to_string()]));
            if rng.below(6) == 0 {
                c.push("NOACK".into());
            }
            if rng.below(6) == 0 {
                c.extend(words(&["CLAIM", &rng.range(0, 50).to_string()]));
            }
            c.extend(words(&["STREAMS", &k, if rng.below(5) == 0 { "0" } else { ">" }]));
            c
        }
        57..=59 => {
            let k = key(rng, STREAMS);
            let mut c = words(&["XACK", &k, rng.pick(GROUPS)]);
            c.extend(mem.some_ids(rng, db, &k, 3));
            c
        }
        60 => {
            let k = key(rng, STREAMS);
            let mut c = words(&["XCLAIM", &k, rng.pick(GROUPS), rng.pick(CONSUMERS), "0"]);
            c.extend(mem.some_ids(rng, db, &k, 2));
            if rng.below(3) == 0 {
                c.push("JUSTID".into());
            }
            c
        }
        61 => {
            let k = key(rng, STREAMS);
            words(&[
                "XAUTOCLAIM",
                &k,
                rng.pick(GROUPS),
                rng.pick(CONSUMERS),
                "0",
                "0-0",
                "COUNT",
                &rng.range(1, 4).to_string(),
            ])
        }
        62 => {
            let k = key(rng, STREAMS);
            let ids = mem.some_ids(rng, db, &k, 2);
            let mut c = words(&["XNACK", &k, rng.pick(GROUPS), rng.pick(&["SILENT", "FAIL", "FATAL"])]);
            c.extend(words(&["IDS", &ids.len().to_string()]));
            c.extend(ids);
            c
        }
        63 => {
            let k = key(rng, STREAMS);
            let mut c = words(&["XDEL", &k]);
            c.extend(mem.some_ids(rng, db, &k, 2));
            c
        }
        64 => {
            let k = key(rng, STREAMS);
            let ids = mem.some_ids(rng, db, &k, 2);
            let mut c = words(&[rng.pick(&["XDELEX", "XACKDEL"]), &k]);
            if c[0] == "XACKDEL" {
                c.push(rng.pick(GROUPS).into());
            }
            c.push(rng.pick(&["KEEPREF", "DELREF", "ACKED"]).into());
            c.extend(words(&["IDS", &ids.len().to_string()]));
            c.extend(ids);
            c
        }
        65 => words(&["XTRIM", &key(rng, STREAMS), "MAXLEN", rng.pick(&["~", "="]), &rng.range(0, 10).to_string()]),
        66 => {
            let k = key(rng, STREAMS);
            match rng.below(4) {
                0 => words(&["XGROUP", "SETID", &k, rng.pick(GROUPS), rng.pick(&["0", "$"])]),
                1 => words(&["XGROUP", "DESTROY", &k, rng.pick(GROUPS)]),
                2 => words(&["XGROUP", "CREATECONSUMER", &k, rng.pick(GROUPS), rng.pick(CONSUMERS)]),
                _ => words(&["XGROUP", "DELCONSUMER", &k, rng.pick(GROUPS), rng.pick(CONSUMERS)]),
            }
        }
        // IIDs older than the duration are dropped by time (at a load too, as Redis does), so
        // durations stay longer than a run: the tracked counts must then survive exactly.
        67 => words(&[
            "XCFGSET",
            &key(rng, STREAMS),
            rng.pick(&["IDMP-DURATION", "IDMP-MAXSIZE"]),
            &rng.range(300, 1000).to_string(),
        ]),
        // Keys and times.
        68..=73 => {
            let k = key(rng, &all_keys());
            match rng.below(5) {
                0 => words(&["PEXPIRE", &k, &ttl_ms(rng)]),
                1 => words(&["EXPIRE", &k, rng.pick(&["1", "100", "100000"])]),
                2 => words(&["PEXPIREAT", &k, &(now_ms() + rng.range(10, 5000)).to_string()]),
                3 => words(&["PEXPIRE", &k, &ttl_ms(rng), rng.pick(&["NX", "XX", "GT", "LT"])]),
                _ => words(&["PERSIST", &k]),
            }
        }
        74 | 75 => words(&["PERSIST", &key(rng, &all_keys())]),
        76 => words(&[rng.pick(&["DEL", "UNLINK"]), &key(rng, &all_keys())]),
        77 | 78 => {
            let kinds = [STRINGS, LISTS, HASHES, SETS, STREAMS];
            let kind = kinds[rng.below(5) as usize];
            words(&[rng.pick(&["RENAME", "RENAMENX"]), &key(rng, kind), &key(rng, kind)])
        }
        79 | 80 => {
            let k = key(rng, &all_keys());
            let mut c = words(&["COPY", &k, &key(rng, &all_keys())]);
            if rng.below(2) == 0 {
                c.extend(words(&["DB", &other_db]));
            }
            if rng.below(2) == 0 {
                c.push("REPLACE".into());
            }
            c
        }
        81 => words(&["SWAPDB", &db.to_string(), &other_db]),
        82 => words(&["FLUSHDB"]),
        83 => words(&["TOUCH", &key(rng, &all_keys())]),
        // RESTORE of a DUMP: the harness fills in the payload.
        84 | 85 => {
            let from = key(rng, &all_keys());
            let to = key(rng, &all_keys());
            words(&["__RESTORE_FROM", &from, &to, &if rng.below(2) == 0 { "0".into() } else { ttl_ms(rng) }])
        }
        // Reads now and then (lazy expiry, access times).
        86..=89 => {
            let k = key(rng, &all_keys());
            words(&[rng.pick(&["GET", "LLEN", "SCARD", "HLEN", "XLEN", "EXISTS", "TYPE"]), &k])
        }
        _ => words(&["SELECT", &other_db]),
    }
}

// ---------------------------------------------------------------------------------------------
// The run

/// The state a restart with the log on must come back to. Where timing decides between
/// states (a log turned on and then off before its base was known written), every state it
/// may be is kept, and a restart must show one of them.
#[derive(Debug, Clone)]
enum LogState {
    /// The log is on: the state at the stop.
    Live,
    /// The log was turned off (or the server started without it): the states the files on
    /// disk may hold (none: there is no log).
    Closed(Vec<Picture>),
    /// Turned on again, its base not known to be written: the old log's states, or (once the
    /// base is there) the state at the stop. A write acknowledged since proves the base is
    /// there (`aof/base.rs`).
    Pending(Vec<Picture>),
}

impl LogState {
    /// What the files on disk may hold if the server stops with the state `now`.
    fn on_disk(&self, now: &Picture) -> Vec<Picture> {
        match self {
            LogState::Live => vec![now.clone()],
            LogState::Closed(p) => p.clone(),
            LogState::Pending(old) => old.iter().cloned().chain([now.clone()]).collect(),
        }
    }
}

/// Cut the last record off the newest incremental log file (the negative control): the file
/// ends at its last record, or at a zero length word (preallocated space under `always`).
fn cut_last_record(dir: &Path) -> Result<(), String> {
    let logdir = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(logdir.join("appendonly.aof.manifest.rill")).map_err(|e| e.to_string())?;
    let last = manifest.lines().filter_map(|l| l.strip_prefix("incr ")).next_back().ok_or("no incremental file")?;
    let path = logdir.join(last);
    let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
    // Records: a 4-byte length, a 4-byte checksum, the body; after an 8-byte magic.
    let (mut pos, mut last_start) = (8, None);
    while let Some(word) = bytes.get(pos..pos + 4) {
        let len = u32::from_le_bytes([word[0], word[1], word[2], word[3]]) as usize;
        if len == 0 || pos + 8 + len > bytes.len() {
            break;
        }
        last_start = Some(pos);
        pos += 8 + len;
    }
    let cut = last_start.ok_or("the newest log file holds no record")?;
    let f = std::fs::OpenOptions::new().write(true).open(&path).map_err(|e| e.to_string())?;
    f.set_len(cut as u64).map_err(|e| e.to_string())
}

/// One server process of the run and what it was started with.
struct Running {
    proc: Proc,
    client: RawClient,
    db: usize,
    appendonly: bool,
}

/// The harness of one run.
pub struct Fuzz<'a> {
    params: Params,
    dir: &'a Path,
    rng: Rng,
    mem: Memory,
    stats: Stats,
    /// The last commands sent, for a report.
    recent: VecDeque<String>,
    log: LogState,
    /// The state the last snapshot holds (SAVE, BGSAVE, SHUTDOWN SAVE; a rewrite's base too
    /// when BGSAVE ran with the log on), if one was taken.
    snapshot: Option<Picture>,
}

/// `copy_snapshots`: rewrites take copy-on-write copies of the keyspace (the default);
/// otherwise they rebuild it from the log files (`snapshot-copy-max-keys 0`).
fn startup_args(appendonly: bool, fsync: &str, copy_snapshots: bool) -> Vec<String> {
    words(&[
        "--appendonly",
        if appendonly { "yes" } else { "no" },
        "--appendfsync",
        fsync,
        "--snapshot-copy-max-keys",
        if copy_snapshots { "1000000" } else { "0" },
        // Rewrites by themselves, often.
        "--auto-aof-rewrite-min-size",
        "32768",
        "--auto-aof-rewrite-percentage",
        "50",
        "--enable-debug-command",
        "yes",
    ])
}

impl<'a> Fuzz<'a> {
    pub fn new(params: Params, dir: &'a Path) -> Fuzz<'a> {
        // Spread the seed's bits first: `Rng::new` only sets the lowest bit, so seeds 2 and 3
        // would run the same case (splitmix64's finaliser).
        let mut z = params.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let rng = Rng::new(z ^ (z >> 31));
        Fuzz {
            params,
            dir,
            rng,
            mem: Memory::default(),
            stats: Stats::default(),
            recent: VecDeque::new(),
            log: LogState::Live,
            snapshot: None,
        }
    }

    fn fail(&self, round: usize, what: &str) -> String {
        let recent: Vec<&String> = self.recent.iter().collect();
        format!(
            "restart fuzz, seed {} ({} rounds of {} steps, appendfsync {}), round {round}: {what}\n  last commands: {recent:#?}\n  reproduce: RILL_FUZZ_SEED={} cargo test -p rill-server --test it restart_fuzz_test::",
            self.params.seed, self.params.rounds, self.params.steps, self.params.fsync, self.params.seed
        )
    }

    fn start(&self, appendonly: bool) -> Result<Running, String> {
        // Odd seeds copy snapshots, even ones rebuild them from the log: both paths run.
        let args = startup_args(appendonly, self.params.fsync, self.params.seed % 2 == 1);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let proc = Proc::try_start(self.dir, &args)?;
        let client = proc.client();
        Ok(Running { proc, client, db: 0, appendonly })
    }

    /// Send one command and read its reply; a closed connection is a finding.
    fn send(&mut self, run: &mut Running, args: &[String]) -> Result<Value, String> {
        self.stats.commands += 1;
        let line = args.iter().map(|a| a.chars().take(40).collect::<String>()).collect::<Vec<_>>().join(" ");
        self.recent.push_back(format!("db {}: {line}", run.db));
        if self.recent.len() > 40 {
            self.recent.pop_front();
        }
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let raw = run.client.request(&bytes).map_err(|e| format!("no reply to {line}: {e}"))?;
        if trace() {
            eprintln!("[{}] db {}: {line} -> {}", now_ms(), run.db, String::from_utf8_lossy(&raw).trim_end());
        }
        parse_value(&raw)
    }

    /// Run one data command (filling in what the harness must: a DUMP for RESTORE).
    fn data_step(&mut self, run: &mut Running) -> Result<(), String> {
        let cmd = data_command(&mut self.rng, &self.mem, run.db);
        if cmd[0] == "__RESTORE_FROM" {
            let dump = self.send(run, &words(&["DUMP", &cmd[1]]))?;
            let Value::Bulk(payload) = dump else { return Ok(()) };
            let args: [&[u8]; 5] = [b"RESTORE", cmd[2].as_bytes(), cmd[3].as_bytes(), &payload, b"REPLACE"];
            self.stats.commands += 1;
            self.recent.push_back(format!("db {}: RESTORE {} {} <dump of {}> REPLACE", run.db, cmd[2], cmd[3], cmd[1]));
            run.client.request(&args).map_err(|e| format!("no reply to RESTORE: {e}"))?;
            return Ok(());
        }
        let reply = self.send(run, &cmd)?;
        match (cmd[0].as_str(), &reply) {
            ("SELECT", Value::Simple(_)) => run.db = cmd[1].parse().unwrap_or(run.db),
            ("XADD", Value::Bulk(id)) => {
                let ids = self.mem.ids.entry((run.db, cmd[1].clone())).or_default();
                ids.push_back(String::from_utf8_lossy(id).into_owned());
                if ids.len() > 30 {
                    ids.pop_front();
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A transaction of a few data commands.
    fn transaction(&mut self, run: &mut Running) -> Result<(), String> {
        self.send(run, &words(&["MULTI"]))?;
        let n = self.rng.range(2, 4);
        let mut selected = None;
        for _ in 0..n {
            let mut cmd = data_command(&mut self.rng, &self.mem, run.db);
            if cmd[0] == "__RESTORE_FROM" {
                cmd = words(&["PERSIST", &cmd[1]]);
            }
            if cmd[0] == "SELECT" {
                selected = cmd[1].parse().ok();
            }
            self.send(run, &cmd)?;
        }
        let reply = self.send(run, &words(&["EXEC"]))?;
        if let (Some(db), Value::Array(_)) = (selected, reply) {
            run.db = db;
        }
        Ok(())
    }

    /// A second client blocks (BLMOVE, or XREADGROUP BLOCK) with a short timeout, this one
    /// may serve it; both replies are read, so the state stays known.
    fn blocked_client(&mut self, run: &mut Running) -> Result<(), String> {
        let mut other = RawClient::try_connect(run.proc.port).map_err(|e| e.to_string())?;
        call(&mut other, &[b"SELECT", run.db.to_string().as_bytes()])?;
        let stream = self.rng.below(2) == 0;
        let block: Vec<String> = if stream {
            let k = key(&mut self.rng, STREAMS);
            // So that it blocks rather than fails (unless the key is not a stream).
            self.send(run, &words(&["XGROUP", "CREATE", &k, "g0", "$", "MKSTREAM"]))?;
            words(&["XREADGROUP", "GROUP", "g0", "c9", "COUNT", "2", "BLOCK", "100", "STREAMS", &k, ">"])
        } else {
            words(&["BLMOVE", &key(&mut self.rng, LISTS), &key(&mut self.rng, LISTS), "LEFT", "RIGHT", "0.1"])
        };
        let bytes: Vec<&[u8]> = block.iter().map(|a| a.as_bytes()).collect();
        other.send_command(&bytes).map_err(|e| e.to_string())?;
        self.recent.push_back(format!("(second client) db {}: {}", run.db, block.join(" ")));
        // (Not blocked within this time: it was answered at once, an error or data.)
        let deadline = Instant::now() + Duration::from_millis(300);
        // Serve it (or not) only once it is blocked, or it may find what it waits for at once.
        loop {
            let info = self.send(run, &words(&["INFO", "clients"]))?;
            if show(&info).contains("blocked_clients:1") || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.rng.below(3) != 0 {
            let k = block[if stream { 9 } else { 1 }].clone();
            let serve = if stream { words(&["XADD", &k, "*", "f", "served"]) } else { words(&["RPUSH", &k, "served"]) };
            self.send(run, &serve)?;
        }
        other.read_reply().map_err(|e| format!("the blocked client got no reply: {e}"))?;
        Ok(())
    }

    /// BGSAVE, then wait for it: its snapshot is the state now.
    fn bgsave(&mut self, run: &mut Running) -> Result<(), String> {
        let before = picture(&mut run.client)?;
        run.db = 0;
        let reply = self.send(run, &words(&["BGSAVE"]))?;
        if !matches!(reply, Value::Simple(_)) {
            return Ok(()); // another save or rewrite runs: no new snapshot
        }
        self.wait_persistence(run, "rdb_bgsave_in_progress:0")?;
        let info = show(&self.send(run, &words(&["INFO", "persistence"]))?);
        if info.contains("rdb_last_bgsave_status:ok") {
            self.snapshot = Some(before);
            self.stats.saves += 1;
        }
        Ok(())
    }

    fn wait_persistence(&mut self, run: &mut Running, line: &str) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let raw = run.client.request(&[b"INFO", b"persistence"]).map_err(|e| e.to_string())?;
            if String::from_utf8_lossy(&raw).contains(&format!("\r\n{line}\r\n")) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("INFO persistence never showed {line}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Times changed across a rewrite: a few keys get short times, a rewrite writes them
    /// into the base, then the times are removed, lengthened or carried by a rename, and
    /// (sometimes) the old times pass. A loader that decides anything by the clock before
    /// replaying the records after the base loses those keys.
    fn times_across_a_rewrite(&mut self, run: &mut Running) -> Result<(), String> {
        let keys: Vec<String> = (0..self.rng.range(1, 3)).map(|_| key(&mut self.rng, &all_keys())).collect();
        for k in &keys {
            let ms = self.rng.range(50, 400).to_string();
            self.send(run, &words(&["PEXPIRE", k, &ms]))?;
        }
        let reply = self.send(run, &words(&["BGREWRITEAOF"]))?;
        if matches!(reply, Value::Simple(_)) {
            self.stats.rewrites += 1;
            self.wait_persistence(run, "aof_rewrite_in_progress:0")?;
        }
        for k in &keys {
            match self.rng.below(4) {
                0 => self.send(run, &words(&["PEXPIRE", k, "3600000"]))?,
                1 => {
                    let to = format!("{k}:moved");
                    self.send(run, &words(&["RENAME", k, &to]))?;
                    self.send(run, &words(&["PERSIST", &to]))?
                }
                _ => self.send(run, &words(&["PERSIST", k]))?,
            };
        }
        if self.rng.below(2) == 0 {
            std::thread::sleep(Duration::from_millis(400));
        }
        Ok(())
    }

    /// One admin action.
    fn admin_step(&mut self, run: &mut Running) -> Result<(), String> {
        match self.rng.below(11) {
            0..=2 => {
                self.send(run, &words(&["BGREWRITEAOF"]))?;
                self.stats.rewrites += 1;
            }
            3 => {
                let state = picture(&mut run.client)?;
                run.db = 0;
                if matches!(self.send(run, &words(&["SAVE"]))?, Value::Simple(_)) {
                    self.snapshot = Some(state);
                    self.stats.saves += 1;
                }
            }
            4 => self.bgsave(run)?,
            5 | 6 => {
                let on = matches!(self.log, LogState::Live | LogState::Pending(_));
                if on {
                    let state = picture(&mut run.client)?;
                    run.db = 0;
                    self.send(run, &words(&["CONFIG", "SET", "appendonly", "no"]))?;
                    // Turned off before its base was written, a new log leaves the old files
                    // as they were (nothing written since was acknowledged).
                    self.log = LogState::Closed(self.log.on_disk(&state));
                } else {
                    self.send(run, &words(&["CONFIG", "SET", "appendonly", "yes"]))?;
                    let old = match std::mem::replace(&mut self.log, LogState::Live) {
                        LogState::Closed(p) => p,
                        _ => Vec::new(),
                    };
                    self.log = LogState::Pending(old);
                    if self.rng.below(3) != 0 {
                        // A write: acknowledged only once the new log has its base.
                        self.send(run, &words(&["INCR", "fuzz:marker"]))?;
                        self.log = LogState::Live;
                    }
                }
                self.stats.toggles += 1;
            }
            7 => {
                let p = self.rng.pick(&["always", "everysec", "no"]);
                self.send(run, &words(&["CONFIG", "SET", "appendfsync", p]))?;
            }
            8 => self.times_across_a_rewrite(run)?,
            _ => self.blocked_client(run)?,
        }
        Ok(())
    }

    /// Run the whole thing.
    pub fn run(mut self) -> Result<Stats, String> {
        let mut run = self.start(true).map_err(|log| self.fail(0, &format!("the first start failed:\n{log}")))?;
        for round in 0..self.params.rounds {
            for _ in 0..self.params.steps {
                let r = match self.rng.below(100) {
                    0..=3 => self.admin_step(&mut run),
                    4..=8 => self.transaction(&mut run),
                    _ => self.data_step(&mut run),
                };
                r.map_err(|e| self.fail(round, &e))?;
            }
            run = self.stop_and_restart(round, run)?;
        }
        let _ = run.client.request(&[b"SHUTDOWN", b"NOSAVE"]);
        Ok(self.stats)
    }

    /// Stop the server (kill -9 or a SHUTDOWN of some kind), start it again (with the log on,
    /// mostly), and compare what it holds with what it must hold.
    fn stop_and_restart(&mut self, round: usize, mut run: Running) -> Result<Running, String> {
        if self.params.cut_last_record && !matches!(self.log, LogState::Live) {
            self.send(&mut run, &words(&["CONFIG", "SET", "appendonly", "yes"])).map_err(|e| self.fail(round, &e))?;
            self.send(&mut run, &words(&["INCR", "fuzz:marker"])).map_err(|e| self.fail(round, &e))?;
            self.log = LogState::Live;
        }
        // Now and then let short times run out before the stop: the keys whose times a
        // record after the base changed are the ones a loader deciding by the clock drops.
        if self.rng.below(2) == 0 {
            std::thread::sleep(Duration::from_millis(self.rng.below(800)));
        }
        // The state now: every write so far was acknowledged.
        let mut now = picture(&mut run.client).map_err(|e| self.fail(round, &e))?;
        run.db = 0;
        if self.params.cut_last_record {
            // A write the harness knows to be the log's last record: no expiry sweep may log a
            // deletion after it.
            self.send(&mut run, &words(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"])).map_err(|e| self.fail(round, &e))?;
            let v = format!("round {round}");
            self.send(&mut run, &words(&["SET", "fuzz:last", &v])).map_err(|e| self.fail(round, &e))?;
            let state = KeyState { kind: "string".into(), body: show(&Value::Bulk(v.into_bytes())), expire_at_ms: -1 };
            now.insert((0, b"fuzz:last".to_vec()), state);
        }
        let stop = if self.params.cut_last_record { 0 } else { self.rng.below(10) };
        let Running { proc: mut server, mut client, .. } = run;
        match stop {
            0..=5 => {
                server.kill9();
                self.stats.kills += 1;
            }
            k => {
                let how: &[&[u8]] = match k {
                    6 | 7 => &[b"SHUTDOWN"],
                    8 => &[b"SHUTDOWN", b"NOSAVE"],
                    _ => &[b"SHUTDOWN", b"SAVE"],
                };
                self.recent.push_back(String::from_utf8_lossy(&how.join(&b' ')).into_owned());
                let _ = client.request(how);
                if server.wait_exit(Duration::from_secs(30)).is_none() {
                    return Err(self.fail(round, "SHUTDOWN did not end the server"));
                }
                if k == 9 {
                    self.snapshot = Some(now.clone());
                }
                self.stats.shutdowns += 1;
                drop(server);
            }
        }
        if self.params.cut_last_record {
            cut_last_record(self.dir).map_err(|e| self.fail(round, &e))?;
        }
        // What the log on disk holds now.
        let log_state = self.log.on_disk(&now);
        let has_log = !log_state.is_empty();
        // From the snapshot only if one was saved.
        let with_log = self.params.cut_last_record || self.snapshot.is_none() || self.rng.below(5) != 0;
        let (wanted, appendonly) = if with_log {
            (if has_log { log_state.clone() } else { vec![self.snapshot.clone().unwrap_or_default()] }, true)
        } else {
            self.stats.restarts_without_log += 1;
            (vec![self.snapshot.clone().unwrap_or_default()], false)
        };
        let run = self.start(appendonly).map_err(|log| self.fail(round, &format!("the restart failed:\n{log}")))?;
        let mut run = run;
        let got = picture(&mut run.client).map_err(|e| self.fail(round, &e))?;
        let checked_at = now_ms();
        let mut first_diff = None;
        for want in &wanted {
            match compare(want, &got, checked_at, &mut self.stats) {
                None => {
                    first_diff = None;
                    break;
                }
                Some(d) => {
                    first_diff.get_or_insert(d);
                }
            }
        }
        if let (Some(_), true) = (&first_diff, trace()) {
            for (i, want) in wanted.iter().enumerate() {
                eprintln!("--- wanted picture {i}:");
                for (k, v) in want {
                    eprintln!("  db {} {:?}: {v:?}", k.0, String::from_utf8_lossy(&k.1));
                }
            }
            eprintln!("--- got:");
            for (k, v) in &got {
                eprintln!("  db {} {:?}: {v:?}", k.0, String::from_utf8_lossy(&k.1));
            }
        }
        if let Some(d) = first_diff {
            let how = if appendonly { "the log" } else { "the snapshot" };
            return Err(self.fail(round, &format!("after the restart from {how}: {d}")));
        }
        // From here the log (when on) holds exactly what the server loaded.
        // Started without its log, the server leaves the files of the log as they were.
        self.log = if appendonly { LogState::Live } else { LogState::Closed(log_state) };
        Ok(run)
    }
}
