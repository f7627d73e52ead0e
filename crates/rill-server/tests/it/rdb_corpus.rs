//! Redis' own RDB files, loaded by rill and compared key by key with the Redis that wrote them.
//!
//! Each reference server (Redis 7.0.15, 8.2.3, and the redis-server `RILL_NEWEST_REDIS` names)
//! is filled through real commands so that its `dump.rdb` holds every type rill serves in every
//! encoding that Redis writes, in each of the 16 databases:
//!
//! | type   | forms in the file                                                                  |
//! |--------|------------------------------------------------------------------------------------|
//! | string | int-encoded (8, 16, 32 bits), raw (embstr and raw in memory), LZF-compressed, empty, binary |
//! | list   | quicklist of one listpack, of many listpacks, with plain nodes (big elements), with LZF-compressed nodes (`list-compress-depth 1`) |
//! | set    | intset, listpack (7.2+), hashtable (strings, and integers past the intset limit)    |
//! | hash   | listpack, hashtable (many fields, and a long value)                                |
//! | zset   | listpack (integer, fractional, infinite and negative-zero scores), skiplist (by size, by a long member) |
//! | stream | several nodes, deleted entries, groups with consumers and pending entries, entries-read known and unknown, a consumer without entries, an empty stream with a group; on the newest Redis also XNACKed entries and IDMP state |
//!
//! and keys with TTLs. After `SAVE`, rill starts on a copy of that file as `dbfilename`
//! (`appendonly no`) and as the first base of its log (`appendonly yes`, then again after a
//! rewrite has replaced the base with rill's own); each time every key of every database is
//! compared over the protocol: TYPE, PEXPIRETIME, the whole value (streams by `XINFO STREAM
//! FULL`, without the two radix-tree fields, which describe the node layout). The other way:
//! rill's `SAVE` of the loaded data is loaded by Redis 8.2.3 (by the newest Redis when it
//! holds 8.6-only stream state) with `sanitize-dump-payload yes` and compared with the source.
//!
//! What Redis makes of 7.0.15's file is read from Redis 8.2.3 loading it (the version rill
//! answers as; 7.0 reports the lag of a group on an emptied stream differently). Fields a
//! Redis version added to XINFO STREAM FULL (the IDMP and XNACK fields) are compared where
//! both sides report them. Times (seen, active, delivery) come from the file and are compared
//! exactly. `RILL_NEWEST_REDIS=path/to/redis/src/redis-server` adds the newest Redis (built from source).
//!
//! Keys of types rill lacks (hashes with field expiry) stop rill's start-up with an error naming
//! the key and the type, not a crash.

use crate::common::ClientExt;
use rill_testkit::{encode_command_into, escape, Proc, RawClient, ReferenceServer, Server, ServerKind, TempDir, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const DATABASES: usize = 16;
/// Entries per stream node on the servers that write the corpus: a stream of a few hundred
/// entries then spans several nodes.
const STREAM_NODE_MAX_ENTRIES: &str = "50";
/// Elements above this size go into plain quicklist nodes (`DEBUG QUICKLIST-PACKED-THRESHOLD`).
const PACKED_THRESHOLD_BYTES: usize = 4096;
/// XINFO STREAM FULL fields that describe where entries sit, not what the stream holds: rill
/// lays a loaded stream out in its own nodes.
const LAYOUT_FIELDS: &[&str] = &["radix-tree-keys", "radix-tree-nodes"];
/// XINFO STREAM FULL fields a Redis version added (7.2: `active-time`; 8.6: IDMP; 8.8: XNACK).
const VERSION_FIELDS: &[&str] = &[
    "active-time",
    "idmp-duration",
    "idmp-maxsize",
    "pids-tracked",
    "iids-tracked",
    "iids-added",
    "iids-duplicates",
    "nacked-count",
];

/// A Redis that writes a corpus.
struct Source {
    label: String,
    binary: PathBuf,
    /// Older than the Redis rill answers as (8.2.3).
    old: bool,
}

/// Redis 7.0.15 and 8.2.3 (when installed, see `ReferenceServer::require`), and
/// `RILL_NEWEST_REDIS` if set.
fn sources() -> Vec<Source> {
    let mut out = Vec::new();
    for which in [ReferenceServer::Redis7, ReferenceServer::Redis8] {
        if let Some(binary) = which.require() {
            out.push(Source { label: which.label().to_string(), binary, old: which == ReferenceServer::Redis7 });
        }
    }
    if let Ok(path) = std::env::var("RILL_NEWEST_REDIS") {
        out.push(Source { label: format!("newest redis ({path})"), binary: PathBuf::from(path), old: false });
    }
    out
}

fn start_redis(binary: &Path, extra: &[&str]) -> Server {
    // The kind only picks the command-line convention; every Redis shares it.
    Server::start(ServerKind::Redis(ReferenceServer::Redis8), binary, extra)
}

type Command = Vec<Vec<u8>>;

fn cmd(args: &[&str]) -> Command {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Send every command, then read every reply; an error reply fails the test.
fn pipeline(c: &mut RawClient, cmds: &[Command], who: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for chunk in cmds.chunks(500) {
        let mut bytes = Vec::new();
        for args in chunk {
            encode_command_into(&mut bytes, args);
        }
        c.send(&bytes).unwrap();
        for args in chunk {
            let reply = c.read_value().unwrap_or_else(|e| panic!("{who}: {e}"));
            if let Value::Error(e) = &reply {
                let shown: Vec<String> = args.iter().take(6).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                panic!("{who}: {shown:?} -> {e}");
            }
            out.push(reply);
        }
    }
    out
}

fn one(c: &mut RawClient, args: &[&str], who: &str) -> Value {
    pipeline(c, &[cmd(args)], who).remove(0)
}

/// Bytes no compressor shrinks much (xorshift), `n` of them.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'!' + (x % 90) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The corpus
// ---------------------------------------------------------------------------------------------

/// Stream state only newer Redis versions have.
#[derive(Debug, Clone, Copy)]
struct Newer {
    /// IDMP (XADD ... IDMP, XCFGSET): 8.6.
    idmp: bool,
    /// XNACK: 8.8.
    xnack: bool,
}

/// Fill database `db` (already selected) with every form, and the newer stream state `newer`
/// names.
fn fill_database(c: &mut RawClient, db: usize, newer: Newer, who: &str) {
    let d = db.to_string();
    let mut cmds: Vec<Command> = Vec::new();
    let mut set = |k: &str, v: Vec<u8>| cmds.push(vec![b"SET".to_vec(), k.as_bytes().to_vec(), v]);
    set("str:int8", format!("{}", db as i64 - 100).into_bytes());
    set("str:int16", format!("{}", 30_000 + db).into_bytes());
    set("str:int32", b"-2147483648".to_vec());
    set("str:int32max", b"2147483647".to_vec());
    set("str:int64", format!("{}", 9_000_000_000_000_000_000u64 + db as u64).into_bytes());
    set("str:lead0", b"007".to_vec());
    set("str:empty", Vec::new());
    set("str:embstr", format!("hello-{d}").into_bytes());
    set("str:raw", noise(db as u64 + 1, 60));
    set("str:lzf", format!("{}{d}", "abcdefgh".repeat(200)).into_bytes());
    set("str:big", (0..20_000).map(|i| b'a' + ((i / 100 + db) % 26) as u8).collect());
    set("str:binary", (0..=255u8).chain([0, 0, 0]).collect());

    // Lists: one listpack node; many listpack nodes; plain nodes between packed ones.
    cmds.push(cmd(&["RPUSH", "list:lp", "a", "1", "-2", "", "300", &"x".repeat(70), &d]));
    let mut ql = cmd(&["RPUSH", "list:ql"]);
    ql.extend(
        (0..3000).map(|i| if i % 5 == 0 { (i * 7).to_string() } else { format!("element-{d}-{i:05}") }.into_bytes()),
    );
    cmds.push(ql);
    let big = |n: usize, b: u8| vec![b; n];
    cmds.push(vec![
        b"RPUSH".to_vec(),
        b"list:plain".to_vec(),
        b"small".to_vec(),
        big(PACKED_THRESHOLD_BYTES + 904, b'p'),
        b"42".to_vec(),
        noise(db as u64 + 7, PACKED_THRESHOLD_BYTES * 2),
        b"tail".to_vec(),
    ]);
    // Quicklist nodes compressed in memory are saved LZF-compressed.
    cmds.push(cmd(&["CONFIG", "SET", "list-compress-depth", "1"]));
    let mut lzf = cmd(&["RPUSH", "list:lzf"]);
    lzf.extend((0..2000).map(|i| format!("compressible-compressible-{}", i % 10).into_bytes()));
    cmds.push(lzf);
    cmds.push(cmd(&["CONFIG", "SET", "list-compress-depth", "0"]));

    // Sets: intset, listpack (7.2+; a hashtable before), hashtable twice.
    cmds.push(cmd(&["SADD", "set:int", "1", "2", "3", "-5", "100000", &d]));
    cmds.push(cmd(&["SADD", "set:lp", "a", "b", "c", "12", &format!("m{d}")]));
    // Sorted sets: a listpack (scores that are integers, fractions, infinities, -0), a
    // skiplist by size and one by a long member.
    cmds.push(cmd(&["ZADD", "zset:lp", "1", "a", "2.5", "b", "-inf", "c", "inf", "d", "-0", "e", "1e300", &d]));
    let mut zbig = cmd(&["ZADD", "zset:sl"]);
    for i in 0..300 {
        zbig.push(format!("{}", (i * 7919) % 1000).into_bytes());
        zbig.push(format!("m{i}").into_bytes());
    }
    cmds.push(zbig);
    cmds.push(cmd(&["ZADD", "zset:long", "1", "a", "2", &"x".repeat(100)]));
    let mut ht = cmd(&["SADD", "set:ht"]);
    ht.extend((0..200).map(|i| format!("member-{i}").into_bytes()));
    cmds.push(ht);
    let mut ints = cmd(&["SADD", "set:ints"]);
    ints.extend((0..600).map(|i| (i * 3 - 500).to_string().into_bytes()));
    cmds.push(ints);

    // Hashes: listpack, hashtable by count, hashtable by value length.
    cmds.push(cmd(&["HSET", "hash:lp", "f1", "v1", "f2", "2", "f3", "", "n", &d]));
    let mut hh = cmd(&["HSET", "hash:ht"]);
    for i in 0..600 {
        hh.push(format!("field-{i}").into_bytes());
        hh.push(if i % 2 == 0 { i.to_string().into_bytes() } else { format!("value-{i}").into_bytes() });
    }
    cmds.push(hh);
    cmds.push(vec![b"HSET".to_vec(), b"hash:long".to_vec(), b"f".to_vec(), noise(db as u64 + 3, 100)]);

    // Streams. Several nodes with a mix of same-field and own-field entries.
    let id = |i: usize| format!("{}-{}", 1_700_000_000_000u64 + i as u64 * 10, db);
    for i in 0..260 {
        let mut x = cmd(&["XADD", "stream:s", &id(i), "a", &i.to_string(), "b", "text"]);
        if i % 3 != 0 {
            x.extend([format!("c{}", i % 4).into_bytes(), noise(i as u64, 10)]);
        }
        cmds.push(x);
    }
    // Deleted entries: inside a node, at a node's start, and a whole node.
    let mut del = cmd(&["XDEL", "stream:s", &id(10), &id(11), &id(50)]);
    del.extend((150..200).map(|i| id(i).into_bytes()));
    cmds.push(del);
    cmds.push(cmd(&["XGROUP", "CREATE", "stream:s", "g1", "0"]));
    cmds.push(cmd(&["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "20", "STREAMS", "stream:s", ">"]));
    cmds.push(cmd(&["XREADGROUP", "GROUP", "g1", "bob", "COUNT", "10", "STREAMS", "stream:s", ">"]));
    cmds.push(cmd(&["XACK", "stream:s", "g1", &id(0), &id(2), &id(3)]));
    cmds.push(cmd(&["XCLAIM", "stream:s", "g1", "carol", "0", &id(24), &id(25)]));
    // XCLAIM again: a delivery count above 1.
    cmds.push(cmd(&["XCLAIM", "stream:s", "g1", "carol", "0", &id(24)]));
    cmds.push(cmd(&["XGROUP", "CREATECONSUMER", "stream:s", "g1", "dave"]));
    cmds.push(cmd(&["XGROUP", "CREATE", "stream:s", "g2", &id(120), "ENTRIESREAD", "70"]));
    cmds.push(cmd(&["XREADGROUP", "GROUP", "g2", "erin", "COUNT", "5", "STREAMS", "stream:s", ">"]));
    // SETID without ENTRIESREAD: entries-read unknown.
    cmds.push(cmd(&["XGROUP", "CREATE", "stream:s", "g3", "$"]));
    cmds.push(cmd(&["XGROUP", "SETID", "stream:s", "g3", &id(30)]));
    if newer.xnack {
        cmds.push(cmd(&["XNACK", "stream:s", "g1", "SILENT", "IDS", "2", &id(5), &id(6)]));
    }
    if newer.idmp {
        cmds.push(cmd(&["XCFGSET", "stream:s", "IDMP-DURATION", "3000", "IDMP-MAXSIZE", "50"]));
        cmds.push(cmd(&["XADD", "stream:s", "IDMP", "producer-1", "iid-1", "*", "f", "v"]));
        cmds.push(cmd(&["XADD", "stream:s", "IDMP", "producer-1", "iid-2", "*", "f", "v"]));
        cmds.push(cmd(&["XADD", "stream:s", "IDMP", "producer-2", "iid-1", "*", "f", "w"]));
        // A duplicate: counted, not added.
        cmds.push(cmd(&["XADD", "stream:s", "IDMP", "producer-2", "iid-1", "*", "f", "w"]));
    }
    // An empty stream that keeps its group, last ID and a pending entry trimmed away.
    cmds.push(cmd(&["XADD", "stream:empty", "5-1", "f", "v"]));
    cmds.push(cmd(&["XADD", "stream:empty", "5-2", "f", "v"]));
    cmds.push(cmd(&["XGROUP", "CREATE", "stream:empty", "g", "0"]));
    cmds.push(cmd(&["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "stream:empty", ">"]));
    cmds.push(cmd(&["XTRIM", "stream:empty", "MAXLEN", "0"]));
    cmds.push(cmd(&["XADD", "stream:plain", "*", "only", "entry"]));

    // TTLs, relative (the file holds absolute times, compared through PEXPIRETIME).
    for (key, ms) in [
        ("str:embstr", 3_600_000u64),
        ("list:lp", 7_200_000),
        ("set:int", 10_000_000),
        ("hash:ht", 9_000_000),
        ("zset:lp", 8_000_000),
        ("stream:plain", 5_000_000),
        ("str:lzf", 86_400_000 * 365),
    ] {
        cmds.push(cmd(&["PEXPIRE", key, &(ms + db as u64).to_string()]));
    }
    pipeline(c, &cmds, who);
}

/// Fill a Redis with the corpus in every database and check it holds the forms meant.
fn fill(c: &mut RawClient, source: &Source) -> Newer {
    let who = source.label.as_str();
    let knows = |c: &mut RawClient, command: &str| matches!(one(c, &["COMMAND", "INFO", command], who), Value::Array(ref a) if a.first().is_some_and(|v| *v != Value::Nil));
    let newer = Newer { idmp: knows(c, "XCFGSET"), xnack: knows(c, "XNACK") };
    one(c, &["CONFIG", "SET", "stream-node-max-entries", STREAM_NODE_MAX_ENTRIES], who);
    one(c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", &PACKED_THRESHOLD_BYTES.to_string()], who);
    for db in 0..DATABASES {
        one(c, &["SELECT", &db.to_string()], who);
        fill_database(c, db, newer, who);
    }
    one(c, &["SELECT", "15"], who);
    let set_listpack = one(c, &["CONFIG", "GET", "set-max-listpack-entries"], who) != Value::Array(Vec::new());
    let encoding =
        |c: &mut RawClient, key: &str| one(c, &["OBJECT", "ENCODING", key], who).as_str().unwrap_or("").to_string();
    for (key, want) in [
        ("str:int8", "int"),
        ("str:int64", "int"),
        ("str:embstr", "embstr"),
        ("str:raw", "raw"),
        ("str:big", "raw"),
        ("list:ql", "quicklist"),
        ("list:plain", "quicklist"),
        ("list:lzf", "quicklist"),
        ("set:int", "intset"),
        ("set:lp", if set_listpack { "listpack" } else { "hashtable" }),
        ("set:ht", "hashtable"),
        ("set:ints", "hashtable"),
        ("hash:lp", "listpack"),
        ("hash:ht", "hashtable"),
        ("hash:long", "hashtable"),
        ("zset:lp", "listpack"),
        ("zset:sl", "skiplist"),
        ("zset:long", "skiplist"),
        ("stream:s", "stream"),
    ] {
        assert_eq!(encoding(c, key), want, "{who}: OBJECT ENCODING {key}");
    }
    let debug =
        |c: &mut RawClient, key: &str| one(c, &["DEBUG", "OBJECT", key], who).as_str().unwrap_or("").to_string();
    assert!(debug(c, "list:lzf").contains("ql_compressed:1"), "{who}: list:lzf not compressed");
    // A plain node holds one element: five elements, two of them big, take at least four nodes.
    let nodes = debug(c, "list:plain");
    let count = nodes.split_whitespace().find_map(|f| f.strip_prefix("ql_nodes:")).and_then(|n| n.parse::<u32>().ok());
    assert!(count.is_some_and(|n| n >= 4), "{who}: list:plain is not in plain nodes: {nodes}");
    newer
}

// ---------------------------------------------------------------------------------------------
// Pictures
// ---------------------------------------------------------------------------------------------

/// What a client sees of one key.
#[derive(Debug, Clone, PartialEq)]
struct KeyView {
    kind: String,
    pexpiretime: Value,
    value: Value,
}

/// Every key of every database.
type Picture = BTreeMap<(usize, Vec<u8>), KeyView>;

fn sorted(items: &[Value]) -> Value {
    let mut v = items.to_vec();
    v.sort_by_key(|x| format!("{x:?}"));
    Value::Array(v)
}

/// Every key of every database through `c`, in RESP3 (so XINFO's maps are maps).
fn picture(c: &mut RawClient, who: &str) -> Picture {
    one(c, &["HELLO", "3"], who);
    let mut out = Picture::new();
    for db in 0..DATABASES {
        one(c, &["SELECT", &db.to_string()], who);
        let keys: Vec<Vec<u8>> = match one(c, &["KEYS", "*"], who) {
            Value::Array(k) | Value::Set(k) => k.iter().map(|k| k.as_bytes().unwrap().to_vec()).collect(),
            other => panic!("{who}: KEYS: {other:?}"),
        };
        let mut meta = Vec::new();
        for k in &keys {
            meta.push(vec![b"TYPE".to_vec(), k.clone()]);
            meta.push(vec![b"PEXPIRETIME".to_vec(), k.clone()]);
        }
        let meta = pipeline(c, &meta, who);
        let kinds: Vec<String> = meta.iter().step_by(2).map(|t| t.as_str().unwrap_or("?").to_string()).collect();
        let reads: Vec<Command> = keys
            .iter()
            .zip(&kinds)
            .map(|(k, kind)| {
                let k = k.clone();
                match kind.as_str() {
                    "string" => vec![b"GET".to_vec(), k],
                    "list" => vec![b"LRANGE".to_vec(), k, b"0".to_vec(), b"-1".to_vec()],
                    "set" => vec![b"SMEMBERS".to_vec(), k],
                    "hash" => vec![b"HGETALL".to_vec(), k],
                    "zset" => vec![b"ZRANGE".to_vec(), k, b"0".to_vec(), b"-1".to_vec(), b"WITHSCORES".to_vec()],
                    "stream" => vec![
                        b"XINFO".to_vec(),
                        b"STREAM".to_vec(),
                        k,
                        b"FULL".to_vec(),
                        b"COUNT".to_vec(),
                        b"0".to_vec(),
                    ],
                    other => panic!("{who}: a key of type {other}"),
                }
            })
            .collect();
        let values = pipeline(c, &reads, who);
        for (i, (k, value)) in keys.into_iter().zip(values).enumerate() {
            let value = match value {
                Value::Set(items) => sorted(&items),
                Value::Map(pairs) if kinds[i] == "hash" => {
                    sorted(&pairs.into_iter().map(|(f, v)| Value::Array(vec![f, v])).collect::<Vec<_>>())
                }
                other => other,
            };
            out.insert((db, k), KeyView { kind: kinds[i].clone(), pexpiretime: meta[2 * i + 1].clone(), value });
        }
    }
    out
}

/// Map keys anywhere in `v`.
fn field_names(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Map(pairs) => {
            for (k, v) in pairs {
                out.extend(k.as_str().map(str::to_string));
                field_names(v, out);
            }
        }
        Value::Array(items) | Value::Set(items) | Value::Push(items) => items.iter().for_each(|i| field_names(i, out)),
        _ => {}
    }
}

/// `v` without the map entries named in `drop`.
fn without(v: &Value, drop: &BTreeSet<String>) -> Value {
    match v {
        Value::Map(pairs) => Value::Map(
            pairs
                .iter()
                .filter(|(k, _)| !k.as_str().is_some_and(|k| drop.contains(k)))
                .map(|(k, v)| (k.clone(), without(v, drop)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|i| without(i, drop)).collect()),
        other => other.clone(),
    }
}

/// The two XINFO STREAM FULL replies as compared: no layout fields, and a version's added
/// fields only where both sides have them.
fn comparable_streams(a: &Value, b: &Value) -> (Value, Value) {
    let (mut fa, mut fb) = (BTreeSet::new(), BTreeSet::new());
    field_names(a, &mut fa);
    field_names(b, &mut fb);
    let mut drop: BTreeSet<String> = LAYOUT_FIELDS.iter().map(|f| f.to_string()).collect();
    drop.extend(fa.symmetric_difference(&fb).filter(|f| VERSION_FIELDS.contains(&f.as_str())).cloned());
    (without(a, &drop), without(b, &drop))
}

/// `v` as compact text for a failure message, cut at 1500 characters.
fn short(v: &Value) -> String {
    fn text(v: &Value, out: &mut String) {
        let list = |items: &[Value], open: &str, close: &str, out: &mut String| {
            out.push_str(open);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                text(item, out);
            }
            out.push_str(close);
        };
        match v {
            Value::Bulk(b) | Value::Verbatim(_, b) => out.push_str(&escape(b)),
            Value::Simple(s) => out.push_str(s),
            Value::Error(e) => out.push_str(&format!("-{e}")),
            Value::Int(n) => out.push_str(&n.to_string()),
            Value::Nil => out.push_str("nil"),
            Value::Array(items) | Value::Set(items) | Value::Push(items) => list(items, "[", "]", out),
            Value::Map(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    text(k, out);
                    out.push_str(": ");
                    text(v, out);
                }
                out.push('}');
            }
            other => out.push_str(&format!("{other:?}")),
        }
    }
    let mut out = String::new();
    text(v, &mut out);
    match out.char_indices().nth(1500) {
        Some((cut, _)) => format!("{}... ({} chars)", &out[..cut], out.len()),
        None => out,
    }
}

/// Panic listing the first differences between two pictures.
#[track_caller]
fn assert_same(a_label: &str, a: &Picture, b_label: &str, b: &Picture) {
    let mut diffs = Vec::new();
    let keys: BTreeSet<_> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let name = format!("db {} key {}", k.0, String::from_utf8_lossy(&k.1));
        match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) => {
                let (vx, vy) = if x.kind == "stream" && y.kind == "stream" {
                    comparable_streams(&x.value, &y.value)
                } else {
                    (x.value.clone(), y.value.clone())
                };
                if x.kind != y.kind || x.pexpiretime != y.pexpiretime || vx != vy {
                    diffs.push(format!(
                        "{name}:\n  {a_label}: {} {} {}\n  {b_label}: {} {} {}",
                        x.kind,
                        short(&x.pexpiretime),
                        short(&vx),
                        y.kind,
                        short(&y.pexpiretime),
                        short(&vy)
                    ));
                }
            }
            (x, _) => diffs.push(format!("{name}: only on {}", if x.is_some() { a_label } else { b_label })),
        }
    }
    assert!(
        diffs.is_empty(),
        "{} keys differ; the first:\n{}",
        diffs.len(),
        diffs.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// Start rill in `dir` with `args`; the picture it serves.
fn rill_picture(dir: &Path, args: &[&str], who: &str) -> (Proc, Picture) {
    let p = Proc::try_start(dir, args).unwrap_or_else(|log| panic!("{who}: rill did not start:\n{log}"));
    let pic = picture(&mut p.client(), who);
    (p, pic)
}

#[test]
fn redis_rdb_files_of_every_type_and_encoding_load_into_rill_and_back() {
    for source in sources() {
        let who = source.label.clone();
        let redis = start_redis(&source.binary, &["--enable-debug-command", "yes"]);
        let mut c = redis.connect();
        let newer = fill(&mut c, &source);
        one(&mut c, &["SAVE"], &who);
        let file = std::fs::read(redis.dir().join("dump.rdb")).unwrap();
        // What Redis makes of the file. For 7.0.15's, that is Redis 8.2.3's reading, the
        // version rill answers as: 7.0 reports a group's lag on an emptied stream otherwise.
        let (who, want) = match (source.old, ReferenceServer::Redis8.require()) {
            (true, Some(redis8)) => {
                let copy = TempDir::new("rill-corpus-7");
                std::fs::write(copy.path().join("dump.rdb"), &file).unwrap();
                let dir_arg = copy.path().to_string_lossy().into_owned();
                let reader = start_redis(&redis8, &["--dir", &dir_arg]);
                let who = format!("redis 8.2.3 loading {who}'s file");
                let want = picture(&mut reader.connect(), &who);
                (who, want)
            }
            _ => {
                let want = picture(&mut c, &who);
                (who, want)
            }
        };
        assert!(want.len() > DATABASES * 25, "{who}: only {} keys", want.len());
        eprintln!("{who}: {} keys, a {}-byte file, newer stream state: {newer:?}", want.len(), file.len());

        // As dbfilename, the log off.
        let dir = TempDir::new("rill-corpus-rdb");
        std::fs::write(dir.path().join("dump.rdb"), &file).unwrap();
        let (p, got) = rill_picture(dir.path(), &["--appendonly", "no"], &format!("rill on {who}'s dump.rdb"));
        assert_same(&who, &want, "rill (dbfilename)", &got);

        // The other way: rill's SAVE of what it loaded, into Redis 8.2.3, or the newest Redis
        // when the file needs it; with deep checks of every value.
        let mut rc = p.client();
        one(&mut rc, &["SAVE"], "rill");
        let saved = dir.path().join("dump.rdb");
        let target =
            if newer.idmp || newer.xnack { Some(source.binary.clone()) } else { ReferenceServer::Redis8.require() };
        if let Some(target) = target {
            let back = TempDir::new("rill-corpus-back");
            std::fs::copy(&saved, back.path().join("dump.rdb")).unwrap();
            let dir_arg = back.path().to_string_lossy().into_owned();
            let loaded = start_redis(&target, &["--dir", &dir_arg, "--sanitize-dump-payload", "yes"]);
            let label = format!("{} loading rill's SAVE", target.display());
            assert_same(&who, &want, &label, &picture(&mut loaded.connect(), &label));
        }
        drop(p);

        // As the first base of the log; then after a rewrite wrote rill's own base.
        let dir = TempDir::new("rill-corpus-base");
        std::fs::write(dir.path().join("dump.rdb"), &file).unwrap();
        let (p, got) = rill_picture(dir.path(), &["--appendonly", "yes"], &format!("rill, log on, on {who}'s file"));
        assert_same(&who, &want, "rill (first base)", &got);
        let mut rc = p.client();
        rc.rewrite_log();
        p.kill9();
        let (_p, got) = rill_picture(dir.path(), &["--appendonly", "yes"], "rill after a rewrite");
        assert_same(&who, &want, "rill (its own base)", &got);
    }
}

/// A Redis 8.2.3 file holding hashes with field expiry times — a small one (a `listpackex`,
/// RDB type 25) and a big one (a hash table, type 24) — loads with every field and time. (It
/// was the one type rill lacked; start-up then stopped naming the key.)
#[test]
fn hashes_with_field_expiry_from_a_redis_file_keep_their_times() {
    let Some(binary) = ReferenceServer::Redis8.require() else { return };
    let redis = start_redis(&binary, &[]);
    let mut c = redis.connect();
    one(&mut c, &["FLUSHALL"], "redis");
    one(&mut c, &["SELECT", "3"], "redis");
    one(&mut c, &["HSET", "small", "f", "v", "g", "w"], "redis");
    one(&mut c, &["HPEXPIREAT", "small", "4000000000000", "FIELDS", "1", "f"], "redis");
    let mut big = vec!["HSET", "big"];
    let names: Vec<String> = (0..600).map(|i| format!("f{i}")).collect();
    for n in &names {
        big.extend([n.as_str(), "v"]);
    }
    one(&mut c, &big, "redis");
    one(&mut c, &["HPEXPIREAT", "big", "4000000000123", "FIELDS", "2", "f1", "f599"], "redis");
    one(&mut c, &["SAVE"], "redis");
    let dir = TempDir::new("rill-corpus-hfe");
    std::fs::copy(redis.dir().join("dump.rdb"), dir.path().join("dump.rdb")).unwrap();
    let p = Proc::try_start(dir.path(), &["--appendonly", "no"])
        .unwrap_or_else(|log| panic!("rill refused the file: {log}"));
    let mut rc = p.client();
    one(&mut rc, &["SELECT", "3"], "rill");
    let times = one(&mut rc, &["HPEXPIRETIME", "small", "FIELDS", "2", "f", "g"], "rill");
    assert_eq!(times, Value::Array(vec![Value::Int(4_000_000_000_000), Value::Int(-1)]));
    assert_eq!(one(&mut rc, &["OBJECT", "ENCODING", "small"], "rill"), Value::Bulk(b"listpackex".to_vec()));
    let times = one(&mut rc, &["HPEXPIRETIME", "big", "FIELDS", "3", "f0", "f1", "f599"], "rill");
    assert_eq!(times, Value::Array(vec![Value::Int(-1), Value::Int(4_000_000_000_123), Value::Int(4_000_000_000_123)]));
    assert_eq!(one(&mut rc, &["HLEN", "big"], "rill"), Value::Int(600));
}

/// `rdbcompression yes` (the default) stores a snapshot's long strings and stream nodes
/// LZF-compressed as Redis does, `no` stores them as they are; Redis 8.2.3 loads both (with
/// deep checks) to the same data, and rill's compressed file is about the size of Redis' own.
#[test]
fn snapshots_compress_their_strings_as_rdbcompression_says() {
    let Some(binary) = ReferenceServer::Redis8.require() else { return };
    let mut commands = vec![
        cmd(&["SET", "text", &"the same words again and again, ".repeat(200)]),
        cmd(&["SET", "noise", &String::from_utf8(noise(7, 3000)).unwrap()]),
        cmd(&["SET", "short", "twenty-one bytes long"]),
        cmd(&["RPUSH", "list", &"element ".repeat(40), &"element ".repeat(41)]),
    ];
    for i in 0..5000 {
        let (seq, ts) = (i.to_string(), (1_732_950_000_000u64 + i).to_string());
        commands.push(cmd(&["XADD", "ticks", "*", "symbol", "NVDA.OQ", "price", "1187.2500", "seq", &seq, "ts", &ts]));
    }
    commands.push(cmd(&["XGROUP", "CREATE", "ticks", "g", "0"]));
    commands.push(cmd(&["XREADGROUP", "GROUP", "g", "c", "COUNT", "100", "STREAMS", "ticks", ">"]));

    let dir = TempDir::new("rill-rdbcompression");
    let (p, want) = {
        let p = Proc::try_start(dir.path(), &["--appendonly", "no"]).unwrap_or_else(|log| panic!("rill: {log}"));
        let mut c = p.client();
        pipeline(&mut c, &commands, "rill");
        let pic = picture(&mut c, "rill");
        (p, pic)
    };
    let mut c = p.client();
    let mut size = |setting: &str| {
        one(&mut c, &["CONFIG", "SET", "rdbcompression", setting], "rill");
        one(&mut c, &["SAVE"], "rill");
        let file = std::fs::read(dir.path().join("dump.rdb")).unwrap();
        let back = TempDir::new("rill-rdbcompression-back");
        std::fs::write(back.path().join("dump.rdb"), &file).unwrap();
        let dir_arg = back.path().to_string_lossy().into_owned();
        let loaded = start_redis(&binary, &["--dir", &dir_arg, "--sanitize-dump-payload", "yes"]);
        let label = format!("redis 8.2.3 loading rill's SAVE with rdbcompression {setting}");
        assert_same("rill", &want, &label, &picture(&mut loaded.connect(), &label));
        file.len()
    };
    let (packed, plain) = (size("yes"), size("no"));

    let redis = start_redis(&binary, &[]);
    let mut rc = redis.connect();
    pipeline(&mut rc, &commands, "redis");
    one(&mut rc, &["SAVE"], "redis");
    let redis_size = std::fs::metadata(redis.dir().join("dump.rdb")).unwrap().len() as usize;
    eprintln!("rill compressed {packed} B, uncompressed {plain} B; redis 8.2.3 {redis_size} B");
    assert!(packed * 2 < plain, "compressed {packed} B, uncompressed {plain} B");
    assert!(packed * 4 < redis_size * 5, "rill {packed} B, redis {redis_size} B");
}
