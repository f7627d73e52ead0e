//! Randomised differential test of the list, hash, set, sorted-set, string, bitmap and key
//! commands (sorted sets with `zset-max-listpack-entries` 4 too): proptest
//! generates command sequences over two keys of each type (every command also lands on a key
//! of another type now and then, so WRONGTYPE paths run too), and each sequence runs against
//! rill and Redis 8.2.3 (from `FLUSHALL`), every reply compared as RESP.
//!
//! Values come from a small set, so pivots, LREM/LPOS targets, duplicate fields and members
//! hit, and include integers, floats, the empty string and a value longer than the listpack
//! value limit (64); both servers run with small `hash-max-listpack-entries`,
//! `list-max-listpack-size`, `set-max-intset-entries` and `set-max-listpack-entries` (4), so
//! sequences cross the encoding conversions. Replies whose order Redis leaves unspecified
//! (HGETALL, HKEYS, HVALS, SMEMBERS, SINTER/SUNION/SDIFF, SPOP with a count) are sorted, and
//! TTL/PTTL keep only whether a time is set. Randomness is left out: SPOP only with counts
//! that take every member, no SRANDMEMBER/HRANDFIELD. Float increments include sums an `f64`
//! would print differently from Redis' 80-bit `long double` (0.1 + 0.2), hexadecimal and huge
//! ones. Hash field expiry (HPEXPIREAT, HPEXPIRETIME, HPERSIST, HGETEX, HSETEX) uses absolute
//! times only, far ahead or already past.
//!
//! Now and then a key is swapped between the servers by DUMP / RESTORE (each reads the other's
//! serialisation of whatever encoding was reached), and some steps run in MULTI / EXEC. Both
//! protocols are used. `RILL_FUZZ_CASES=N` runs N sequences (default 200).
//!
//! Each test runs twice: with its fixed seed (the same cases every run, a regression) and, in
//! CI and `scripts/test`, with a fresh seed that the run prints (`rill_testkit::fresh_seed`);
//! `RILL_FUZZ_SEED=S` replays S in both.
//!
//! A second test runs random sequences against rill alone with the log on, compacts the log
//! halfway now and then, kills the server with -9 and restarts it: every key must come back
//! with the same type, contents and expiry time. `RILL_FUZZ_RESTARTS=N` runs N (default 25).

use crate::common::{multi_commands, ClientExt, Side};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use rill_testkit::{fresh_seed, fuzz_seed, parse_value, seed_bytes, ReferenceServer, Server, Value};

const LISTS: &[&str] = &["l1", "l2"];
const HASHES: &[&str] = &["h1", "h2"];
const SETS: &[&str] = &["s1", "s2"];
const STRINGS: &[&str] = &["k1", "k2"];
const ZSETS: &[&str] = &["z1", "z2"];
const ALL: &[&str] = &["l1", "l2", "h1", "h2", "s1", "s2", "k1", "k2", "z1", "z2"];
/// HyperLogLogs (strings in Redis' HLL format), and the geo set: kept apart from [`ALL`].
const HLLS: &[&str] = &["p1", "p2"];
const OTHERS: &[&str] = &["p1", "p2", "g1"];
const LONG: &str = "a value longer than sixty-four bytes, so a small hash must leave listpack";

fn pick(list: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(list).prop_map(str::to_string)
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => pick(&["a", "b", "c", "1", "-2", "10", "3.5", "", "x y"]),
        1 => Just(LONG.to_string()),
    ]
}

/// A list key mostly, a hash key sometimes (a type error).
fn list_key() -> impl Strategy<Value = String> {
    prop_oneof![9 => pick(LISTS), 1 => pick(HASHES)]
}

/// A hash key mostly, a list key sometimes (a type error).
fn hash_key() -> impl Strategy<Value = String> {
    prop_oneof![9 => pick(HASHES), 1 => pick(LISTS)]
}

/// A set key mostly, another sometimes (a type error).
fn set_key() -> impl Strategy<Value = String> {
    prop_oneof![9 => pick(SETS), 1 => pick(ALL)]
}

/// A string key mostly, another sometimes (a type error).
fn string_key() -> impl Strategy<Value = String> {
    prop_oneof![9 => pick(STRINGS), 1 => pick(ALL)]
}

/// A set member: small integers (an intset) mostly, words sometimes.
fn member() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => pick(&["1", "2", "3", "-4", "10"]),
        2 => pick(&["a", "b", "c"]),
        1 => Just(LONG.to_string()),
    ]
}

fn index() -> impl Strategy<Value = String> {
    prop_oneof![(-6i64..7).prop_map(|i| i.to_string()), Just("x".to_string())]
}

fn field() -> impl Strategy<Value = String> {
    pick(&["f", "g", "h", "i", "j", "1"])
}

fn side() -> impl Strategy<Value = String> {
    pick(&["LEFT", "RIGHT"])
}

fn list_command() -> impl Strategy<Value = Vec<String>> {
    let values = proptest::collection::vec(value(), 1..4);
    let push = (pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), list_key(), values).prop_map(|(c, k, vs)| {
        let mut a = words(&[&c, &k]);
        a.extend(vs);
        a
    });
    let pop = (
        pick(&["LPOP", "RPOP"]),
        list_key(),
        proptest::option::of(prop_oneof![(0u64..5).prop_map(|n| n.to_string()), Just("-1".to_string()),]),
    )
        .prop_map(|(c, k, n)| {
            let mut a = words(&[&c, &k]);
            a.extend(n);
            a
        });
    let range = (list_key(), index(), index()).prop_map(|(k, a, b)| words(&["LRANGE", &k, &a, &b]));
    let lindex = (list_key(), index()).prop_map(|(k, i)| words(&["LINDEX", &k, &i]));
    let lset = (list_key(), index(), value()).prop_map(|(k, i, v)| words(&["LSET", &k, &i, &v]));
    let linsert = (list_key(), pick(&["BEFORE", "AFTER", "MIDDLE"]), value(), value())
        .prop_map(|(k, w, p, v)| words(&["LINSERT", &k, &w, &p, &v]));
    let lrem = (list_key(), -3i64..4, value()).prop_map(|(k, n, v)| words(&["LREM", &k, &n.to_string(), &v]));
    let ltrim = (list_key(), index(), index()).prop_map(|(k, a, b)| words(&["LTRIM", &k, &a, &b]));
    let llen = list_key().prop_map(|k| words(&["LLEN", &k]));
    let lpos = (
        list_key(),
        value(),
        proptest::option::of(prop_oneof![(-3i64..4).prop_map(|n| n.to_string()), Just("0".to_string())]),
        proptest::option::of(0u64..4),
        proptest::option::of(0u64..5),
    )
        .prop_map(|(k, v, rank, count, maxlen)| {
            let mut a = words(&["LPOS", &k, &v]);
            if let Some(r) = rank {
                a.extend(words(&["RANK", &r]));
            }
            if let Some(c) = count {
                a.extend(words(&["COUNT", &c.to_string()]));
            }
            if let Some(m) = maxlen {
                a.extend(words(&["MAXLEN", &m.to_string()]));
            }
            a
        });
    let lmove = (list_key(), list_key(), side(), side(), any::<bool>()).prop_map(|(s, d, from, to, old)| {
        if old {
            words(&["RPOPLPUSH", &s, &d])
        } else {
            words(&["LMOVE", &s, &d, &from, &to])
        }
    });
    prop_oneof![
        6 => push,
        3 => pop,
        3 => range,
        1 => lindex,
        2 => lset,
        2 => linsert,
        2 => lrem,
        2 => ltrim,
        1 => llen,
        2 => lpos,
        2 => lmove,
    ]
}

/// An INCRBYFLOAT / HINCRBYFLOAT increment: sums an `f64` would print differently (0.1 + 0.2),
/// hexadecimal, beyond `f64`'s range, and ones Redis refuses.
fn float_increment() -> impl Strategy<Value = String> {
    pick(&["1.5", "-0.25", "0.1", "0.2", "-0.7", "1e-20", "0x10", "1e308", "-1e308", "x", "1e", "inf", "1e3"])
}

fn hash_command() -> impl Strategy<Value = Vec<String>> {
    let pairs = proptest::collection::vec((field(), value()), 1..4);
    let hset = (pick(&["HSET", "HMSET"]), hash_key(), pairs).prop_map(|(c, k, ps)| {
        let mut a = words(&[&c, &k]);
        a.extend(ps.into_iter().flat_map(|(f, v)| [f, v]));
        a
    });
    let fields = || proptest::collection::vec(field(), 1..4);
    let multi_field = (pick(&["HMGET", "HDEL"]), hash_key(), fields()).prop_map(|(c, k, fs)| {
        let mut a = words(&[&c, &k]);
        a.extend(fs);
        a
    });
    let getdel = (hash_key(), fields(), any::<bool>()).prop_map(|(k, fs, wrong)| {
        // A wrong field count is an error.
        let n = if wrong { fs.len() + 1 } else { fs.len() };
        let mut a = words(&["HGETDEL", &k, "FIELDS", &n.to_string()]);
        a.extend(fs);
        a
    });
    let one = (pick(&["HGET", "HEXISTS", "HSTRLEN"]), hash_key(), field()).prop_map(|(c, k, f)| words(&[&c, &k, &f]));
    let setnx = (hash_key(), field(), value()).prop_map(|(k, f, v)| words(&["HSETNX", &k, &f, &v]));
    // Overflow needs huge counts, which only field `j` gets.
    let incr = (hash_key(), field(), pick(&["1", "-3", "x"]), proptest::option::of(any::<bool>())).prop_map(
        |(k, f, n, huge)| match huge {
            Some(up) => {
                let n = if up { "9223372036854775807" } else { "-9223372036854775808" };
                words(&["HINCRBY", &k, "j", n])
            }
            None => words(&["HINCRBY", &k, &f, &n]),
        },
    );
    let incr_float =
        (hash_key(), field(), float_increment()).prop_map(|(k, f, n)| words(&["HINCRBYFLOAT", &k, &f, &n]));
    let whole = (pick(&["HGETALL", "HKEYS", "HVALS", "HLEN"]), hash_key()).prop_map(|(c, k)| words(&[&c, &k]));
    // Field expiry, with absolute times only (far ahead, or past: the field goes at once), so
    // replies do not depend on when each server ran the command.
    let named = |head: Vec<String>, fs: Vec<String>| {
        let mut a = head;
        a.extend(["FIELDS".to_string(), fs.len().to_string()]);
        a.extend(fs);
        a
    };
    let hexpire = (
        hash_key(),
        pick(&["4000000000000", "4000000001000", "1"]),
        proptest::option::of(pick(&["NX", "XX", "GT", "LT"])),
        fields(),
    )
        .prop_map(move |(k, t, cond, fs)| {
            let mut head = words(&["HPEXPIREAT", &k, &t]);
            head.extend(cond);
            named(head, fs)
        });
    let times = (pick(&["HPEXPIRETIME", "HPERSIST"]), hash_key(), fields())
        .prop_map(move |(c, k, fs)| named(words(&[&c, &k]), fs));
    let getex =
        (hash_key(), pick(&["", "PXAT 4000000002000", "PERSIST", "PXAT 1"]), fields()).prop_map(move |(k, opt, fs)| {
            let mut head = words(&["HGETEX", &k]);
            head.extend(opt.split_whitespace().map(str::to_string));
            named(head, fs)
        });
    let setex = (
        hash_key(),
        pick(&["", "FNX", "FXX"]),
        pick(&["", "PXAT 4000000003000", "KEEPTTL", "PXAT 1"]),
        proptest::collection::vec((field(), value()), 1..3),
    )
        .prop_map(|(k, cond, opt, ps)| {
            let mut a = words(&["HSETEX", &k]);
            a.extend(cond.split_whitespace().chain(opt.split_whitespace()).map(str::to_string));
            a.extend(["FIELDS".to_string(), ps.len().to_string()]);
            a.extend(ps.into_iter().flat_map(|(f, v)| [f, v]));
            a
        });
    prop_oneof![
        6 => hset,
        3 => multi_field,
        2 => getdel,
        3 => one,
        1 => setnx,
        2 => incr,
        2 => incr_float,
        3 => whole,
        2 => hexpire,
        2 => times,
        2 => getex,
        2 => setex,
    ]
}

fn set_command() -> impl Strategy<Value = Vec<String>> {
    let members = || proptest::collection::vec(member(), 1..4);
    let add_rem = (pick(&["SADD", "SREM", "SMISMEMBER"]), set_key(), members()).prop_map(|(c, k, ms)| {
        let mut a = words(&[&c, &k]);
        a.extend(ms);
        a
    });
    let one = (pick(&["SISMEMBER"]), set_key(), member()).prop_map(|(c, k, m)| words(&[&c, &k, &m]));
    let whole = (pick(&["SCARD", "SMEMBERS"]), set_key()).prop_map(|(c, k)| words(&[&c, &k]));
    let smove = (set_key(), set_key(), member()).prop_map(|(a, b, m)| words(&["SMOVE", &a, &b, &m]));
    let algebra =
        (pick(&["SINTER", "SUNION", "SDIFF"]), set_key(), set_key(), any::<bool>()).prop_map(|(c, a, b, missing)| {
            let mut v = words(&[&c, &a, &b]);
            if missing {
                v.push("nokey".into());
            }
            v
        });
    let store = (pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), set_key(), set_key(), set_key())
        .prop_map(|(c, d, a, b)| words(&[&c, &d, &a, &b]));
    let card =
        (set_key(), set_key(), proptest::option::of(pick(&["0", "1", "2", "-1", "x"]))).prop_map(|(a, b, limit)| {
            let mut v = words(&["SINTERCARD", "2", &a, &b]);
            if let Some(l) = limit {
                v.extend(words(&["LIMIT", &l]));
            }
            v
        });
    // SORT of a set: numeric ties fall back to the members' bytes and ALPHA has none, so the
    // order is always Redis' own.
    let sort =
        (set_key(), set_key(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(k, d, alpha, desc, store)| {
            let mut v = words(&["SORT", &k]);
            if alpha {
                v.push("ALPHA".into());
            }
            if desc {
                v.push("DESC".into());
            }
            if store {
                v.extend(words(&["STORE", &d]));
            }
            v
        });
    // Only counts that take every member: which members a smaller SPOP takes is random.
    let spop = (set_key(), pick(&["100", "0", "-1"])).prop_map(|(k, n)| words(&["SPOP", &k, &n]));
    prop_oneof![
        6 => add_rem,
        2 => one,
        3 => whole,
        2 => smove,
        3 => algebra,
        2 => store,
        2 => card,
        2 => sort,
        1 => spop,
    ]
}

/// A sorted-set key mostly, a set sometimes (an input the algebra accepts) or any key.
fn zset_key() -> impl Strategy<Value = String> {
    prop_oneof![8 => pick(ZSETS), 1 => pick(SETS), 1 => pick(ALL)]
}

/// A score: integers, halves, infinities, -0, an exponent, hexadecimal, and bad ones.
fn score() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => pick(&["0", "1", "2", "-1", "2.5", "-0", "inf", "-inf", "1e3", "0x10", "10"]),
        1 => pick(&["x", "nan", ""]),
    ]
}

/// A score bound for the range commands.
fn score_bound() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => score(),
        3 => score().prop_map(|s| format!("({s}")),
        1 => pick(&["+inf", "-inf", "("]),
    ]
}

/// A lex bound for the range commands.
fn lex_bound() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => pick(&["-", "+"]),
        4 => member().prop_map(|m| format!("[{m}")),
        3 => member().prop_map(|m| format!("({m}")),
        1 => pick(&["a", ""]),
    ]
}

/// The sorted-set commands, on the sorted-set keys mostly. Only whole-set random picks, as
/// for sets.
fn zset_command() -> impl Strategy<Value = Vec<String>> {
    let flags = proptest::collection::vec(pick(&["NX", "XX", "GT", "LT", "CH", "INCR"]), 0..3);
    let pairs = proptest::collection::vec((score(), member()), 1..4);
    let zadd = (zset_key(), flags, pairs).prop_map(|(k, f, p)| {
        let mut a = words(&["ZADD", &k]);
        a.extend(f);
        for (s, m) in p {
            a.extend([s, m]);
        }
        a
    });
    let members = || proptest::collection::vec(member(), 1..4);
    let by_member = (pick(&["ZREM", "ZMSCORE"]), zset_key(), members()).prop_map(|(c, k, ms)| {
        let mut a = words(&[&c, &k]);
        a.extend(ms);
        a
    });
    let one =
        (pick(&["ZSCORE", "ZRANK", "ZREVRANK"]), zset_key(), member(), any::<bool>()).prop_map(|(c, k, m, with)| {
            let mut a = words(&[&c, &k, &m]);
            if with && c != "ZSCORE" {
                a.push("WITHSCORE".into());
            }
            a
        });
    let incr = (zset_key(), score(), member()).prop_map(|(k, s, m)| words(&["ZINCRBY", &k, &s, &m]));
    let card = zset_key().prop_map(|k| words(&["ZCARD", &k]));
    let rank_range = (zset_key(), index(), index(), any::<bool>(), any::<bool>()).prop_map(|(k, a, b, rev, ws)| {
        let mut v = words(&["ZRANGE", &k, &a, &b]);
        if rev {
            v.push("REV".into());
        }
        if ws {
            v.push("WITHSCORES".into());
        }
        v
    });
    let limit = proptest::option::of((-1i64..4, -1i64..4));
    let score_range = (
        pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZCOUNT", "ZREMRANGEBYSCORE"]),
        zset_key(),
        score_bound(),
        score_bound(),
        limit.clone(),
        any::<bool>(),
    )
        .prop_map(|(c, k, a, b, limit, ws)| {
            let mut v = words(&[&c, &k, &a, &b]);
            if c.contains("RANGEBY") && !c.starts_with("ZREM") {
                if ws {
                    v.push("WITHSCORES".into());
                }
                if let Some((o, n)) = limit {
                    v.extend(words(&["LIMIT", &o.to_string(), &n.to_string()]));
                }
            }
            v
        });
    // Lex ranges on `zlex`, whose members all score 0: on mixed scores Redis' answer depends
    // on its skiplist's random levels.
    let lex_add = proptest::collection::vec(member(), 1..4).prop_map(|ms| {
        let mut a = words(&["ZADD", "zlex"]);
        for m in ms {
            a.extend(["0".to_string(), m]);
        }
        a
    });
    let lex_range = (
        pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT", "ZREMRANGEBYLEX"]),
        Just("zlex".to_string()),
        lex_bound(),
        lex_bound(),
        limit,
    )
        .prop_map(|(c, k, a, b, limit)| {
            let mut v = words(&[&c, &k, &a, &b]);
            if let (Some((o, n)), true) = (limit, c.contains("RANGEBY") && !c.starts_with("ZREM")) {
                v.extend(words(&["LIMIT", &o.to_string(), &n.to_string()]));
            }
            v
        });
    let by_rank = (zset_key(), index(), index()).prop_map(|(k, a, b)| words(&["ZREMRANGEBYRANK", &k, &a, &b]));
    let store = (zset_key(), zset_key(), index(), index(), any::<bool>()).prop_map(|(d, s, a, b, rev)| {
        let mut v = words(&["ZRANGESTORE", &d, &s, &a, &b]);
        if rev {
            v.push("REV".into());
        }
        v
    });
    let pop = (pick(&["ZPOPMIN", "ZPOPMAX"]), zset_key(), proptest::option::of(pick(&["0", "1", "3", "-1"]))).prop_map(
        |(c, k, n)| {
            let mut v = words(&[&c, &k]);
            v.extend(n);
            v
        },
    );
    let mpop = (zset_key(), zset_key(), pick(&["MIN", "MAX"]), proptest::option::of(pick(&["1", "2", "10", "0"])))
        .prop_map(|(a, b, side, n)| {
            let mut v = words(&["ZMPOP", "2", &a, &b, &side]);
            if let Some(n) = n {
                v.extend(words(&["COUNT", &n]));
            }
            v
        });
    let algebra = (
        pick(&["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE", "ZINTERCARD"]),
        zset_key(),
        zset_key(),
        proptest::option::of((score(), score())),
        (proptest::option::of(pick(&["SUM", "MIN", "MAX"])), pick(ZSETS)),
        any::<bool>(),
    )
        .prop_map(|(c, a, b, weights, (agg, dst), ws)| {
            let mut v = words(&[&c]);
            if c.ends_with("STORE") {
                v.push(dst);
            }
            v.extend(words(&["2", &a, &b]));
            if !c.starts_with("ZDIFF") && c != "ZINTERCARD" {
                if let Some((x, y)) = weights {
                    v.extend(words(&["WEIGHTS", &x, &y]));
                }
                if let Some(agg) = agg {
                    v.extend(words(&["AGGREGATE", &agg]));
                }
            }
            if ws && !c.ends_with("STORE") && c != "ZINTERCARD" {
                v.push("WITHSCORES".into());
            }
            v
        });
    prop_oneof![
        8 => zadd,
        3 => by_member,
        3 => one,
        2 => incr,
        1 => card,
        3 => rank_range,
        3 => score_range,
        2 => lex_add,
        2 => lex_range,
        1 => by_rank,
        1 => store,
        2 => pop,
        1 => mpop,
        3 => algebra,
    ]
}

fn string_command() -> impl Strategy<Value = Vec<String>> {
    let option = proptest::option::of(pick(&["NX", "XX"]));
    let ttl = proptest::option::of(pick(&["KEEPTTL", "EX", "PX"]));
    let set = (string_key(), value(), option, any::<bool>(), ttl).prop_map(|(k, v, cond, get, ttl)| {
        let mut a = words(&["SET", &k, &v]);
        a.extend(cond);
        if get {
            a.push("GET".into());
        }
        match ttl.as_deref() {
            Some("EX") => a.extend(words(&["EX", "1000"])),
            Some("PX") => a.extend(words(&["PX", "1500000"])),
            Some(other) => a.push(other.into()),
            None => {}
        }
        a
    });
    let read = (pick(&["GET", "GETDEL", "STRLEN", "INCR", "DECR"]), string_key()).prop_map(|(c, k)| words(&[&c, &k]));
    let write = (pick(&["GETSET", "APPEND", "SETNX", "INCRBY", "DECRBY"]), string_key(), value())
        .prop_map(|(c, k, v)| words(&[&c, &k, &v]));
    let float = (string_key(), float_increment()).prop_map(|(k, n)| words(&["INCRBYFLOAT", &k, &n]));
    let range = (string_key(), index(), index()).prop_map(|(k, a, b)| words(&["GETRANGE", &k, &a, &b]));
    let setrange = (string_key(), pick(&["0", "2", "9", "-1", "x", "536870912"]), value())
        .prop_map(|(k, o, v)| words(&["SETRANGE", &k, &o, &v]));
    let multi = (pick(&["MSET", "MSETNX"]), string_key(), value(), string_key(), value())
        .prop_map(|(c, a, va, b, vb)| words(&[&c, &a, &va, &b, &vb]));
    let mget = (string_key(), string_key()).prop_map(|(a, b)| words(&["MGET", &a, &b, "nokey"]));
    let getex = (string_key(), proptest::option::of(pick(&["PERSIST", "EX"]))).prop_map(|(k, o)| match o.as_deref() {
        Some("EX") => words(&["GETEX", &k, "EX", "1200"]),
        Some(p) => words(&["GETEX", &k, p]),
        None => words(&["GETEX", &k]),
    });
    prop_oneof![
        4 => set,
        3 => read,
        3 => write,
        1 => float,
        2 => range,
        2 => setrange,
        2 => multi,
        1 => mget,
        1 => getex,
    ]
}

/// The bitmap commands on the string keys: offsets around the strings' ends, every BITOP,
/// BITFIELD with each OVERFLOW mode, types up to i64 / u63, `#` offsets and values at the
/// 64-bit limits (where Redis' overflow arithmetic wraps).
fn bitmap_command() -> impl Strategy<Value = Vec<String>> {
    let setbit = (string_key(), 0..90u32, pick(&["0", "1", "2"]))
        .prop_map(|(k, o, b)| words(&["SETBIT", &k, &o.to_string(), &b]));
    let getbit = (string_key(), 0..100u32).prop_map(|(k, o)| words(&["GETBIT", &k, &o.to_string()]));
    let unit = || proptest::option::of(pick(&["BIT", "BYTE"]));
    let bitcount = (string_key(), proptest::option::of((index(), index(), unit()))).prop_map(|(k, range)| {
        let mut a = words(&["BITCOUNT", &k]);
        if let Some((start, end, unit)) = range {
            a.extend([start, end]);
            a.extend(unit);
        }
        a
    });
    let bitpos =
        (string_key(), pick(&["0", "1"]), proptest::option::of((index(), proptest::option::of((index(), unit())))))
            .prop_map(|(k, bit, range)| {
                let mut a = words(&["BITPOS", &k, &bit]);
                if let Some((start, end)) = range {
                    a.push(start);
                    if let Some((end, unit)) = end {
                        a.push(end);
                        a.extend(unit);
                    }
                }
                a
            });
    let ops = &["AND", "OR", "XOR", "NOT", "DIFF", "DIFF1", "ANDOR", "ONE"];
    let bitop =
        (pick(ops), string_key(), proptest::collection::vec(string_key(), 1..4)).prop_map(|(op, dest, srcs)| {
            let mut a = words(&["BITOP", &op, &dest]);
            a.extend(if op == "NOT" { srcs.into_iter().take(1).collect() } else { srcs });
            a
        });
    let ty = (pick(&["i", "u"]), pick(&["1", "3", "8", "13", "32", "63", "64"])).prop_map(|(s, w)| format!("{s}{w}"));
    let offset =
        prop_oneof![4 => (0..100u32).prop_map(|n| n.to_string()), 1 => (0..8u32).prop_map(|n| format!("#{n}"))];
    let number = prop_oneof![
        3 => (-300i64..300).prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => pick(&["9223372036854775807", "-9223372036854775808", "-9223372036854775681"]),
    ];
    let op =
        (pick(&["GET", "SET", "INCRBY"]), ty, offset, number, proptest::option::of(pick(&["WRAP", "SAT", "FAIL"])))
            .prop_map(|(op, ty, offset, n, overflow)| {
                let mut a = overflow.map(|o| words(&["OVERFLOW", &o])).unwrap_or_default();
                a.extend([op.clone(), ty, offset]);
                if op != "GET" {
                    a.push(n);
                }
                a
            });
    let bitfield = (pick(&["BITFIELD", "BITFIELD", "BITFIELD_RO"]), string_key(), proptest::collection::vec(op, 0..4))
        .prop_map(|(c, k, ops)| {
            let mut a = words(&[&c, &k]);
            a.extend(ops.into_iter().flatten());
            a
        });
    prop_oneof![3 => setbit, 1 => getbit, 2 => bitcount, 2 => bitpos, 2 => bitop, 4 => bitfield]
}

/// Key commands over every key (times in TTL replies are blanked; see [`normalise`]).
fn key_command() -> impl Strategy<Value = Vec<String>> {
    let one = (pick(&["DEL", "UNLINK", "TYPE", "EXISTS", "TTL", "PTTL", "PERSIST", "TOUCH"]), pick(ALL))
        .prop_map(|(c, k)| words(&[&c, &k]));
    let two =
        (pick(&["RENAME", "RENAMENX", "COPY"]), pick(ALL), pick(ALL), any::<bool>()).prop_map(|(c, a, b, replace)| {
            let mut v = words(&[&c, &a, &b]);
            if replace && c == "COPY" {
                v.push("REPLACE".into());
            }
            v
        });
    // Every way to set a time gives a different one (SET EX 1000 s, PX 1500 s, GETEX 1200 s,
    // EXPIRE 500 or 2000 s), so GT / LT never compare two times set a millisecond apart.
    let expire = (pick(ALL), proptest::option::of(pick(&["NX", "XX", "GT", "LT"])), pick(&["500", "2000"])).prop_map(
        |(k, cond, secs)| {
            let mut v = words(&["EXPIRE", &k, &secs]);
            v.extend(cond);
            v
        },
    );
    prop_oneof![4 => one, 2 => two, 1 => expire]
}

/// The pseudo-command that swaps a key between the servers (see [`swap`]).
const SWAP: &str = "@swap";
/// A position near Sicily mostly (four decimals, so two members rarely share a point and
/// searches sorted by distance have no ties to order), sometimes at a limit or out of range.
fn lon_lat() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        8 => (-20000i32..20000, -20000i32..20000)
            .prop_map(|(x, y)| (format!("{:.4}", 14.0 + f64::from(x) / 10000.0), format!("{:.4}", 38.0 + f64::from(y) / 10000.0))),
        1 => (pick(&["180", "-180", "180.5", "x", "0"]), pick(&["85.05112878", "-85.05112878", "85.1", "0"])),
    ]
}

/// A distance and its unit.
fn reach() -> impl Strategy<Value = Vec<String>> {
    (
        prop_oneof![8 => pick(&["30", "100", "250", "2000"]), 1 => pick(&["0", "1", "-1", "x"])],
        prop_oneof![8 => pick(&["km", "KM", "mi"]), 1 => pick(&["m", "ft", "parsec"])],
    )
        .prop_map(|(r, u)| vec![r, u])
}

/// The key a geo command works on: mostly the geo set `g1` (so searches find what GEOADD put
/// there), sometimes a sorted set holding any scores, or any key.
fn geo_key() -> impl Strategy<Value = String> {
    prop_oneof![6 => Just("g1".to_string()), 2 => pick(ZSETS), 1 => pick(ALL)]
}

/// The geo commands, on `g1` mostly: positions added, read back, measured, searched
/// (every shape, centre and option) and stored.
fn geo_command() -> impl Strategy<Value = Vec<String>> {
    let flags = proptest::collection::vec(pick(&["NX", "XX", "CH"]), 0..2);
    let points = proptest::collection::vec((lon_lat(), member()), 1..7);
    let add = (geo_key(), flags, points).prop_map(|(k, f, p)| {
        let mut a = words(&["GEOADD", &k]);
        a.extend(f);
        for ((lon, lat), m) in p {
            a.extend([lon, lat, m]);
        }
        a
    });
    let read =
        (pick(&["GEOPOS", "GEOHASH"]), geo_key(), proptest::collection::vec(member(), 1..3)).prop_map(|(c, k, ms)| {
            let mut a = words(&[&c, &k]);
            a.extend(ms);
            a
        });
    let dist = (geo_key(), member(), member(), proptest::option::of(pick(&["km", "mi", "ft", "m", "x"]))).prop_map(
        |(k, a, b, u)| {
            let mut v = words(&["GEODIST", &k, &a, &b]);
            v.extend(u);
            v
        },
    );
    let from = || {
        prop_oneof![
            member().prop_map(|m| words(&["FROMMEMBER", &m])),
            lon_lat().prop_map(|(lon, lat)| words(&["FROMLONLAT", &lon, &lat])),
        ]
    };
    let by = || {
        prop_oneof![
            reach().prop_map(|r| {
                let mut v = words(&["BYRADIUS"]);
                v.extend(r);
                v
            }),
            (prop_oneof![8 => pick(&["50", "200", "500"]), 1 => pick(&["10", "-1"])], reach()).prop_map(|(w, r)| {
                let mut v = words(&["BYBOX", &w]);
                v.extend(r);
                v
            }),
        ]
    };
    let options = || {
        (
            proptest::option::of(pick(&["ASC", "DESC"])),
            proptest::option::of((prop_oneof![8 => pick(&["1", "2", "5"]), 1 => pick(&["0"])], any::<bool>())),
            proptest::collection::vec(pick(&["WITHDIST", "WITHCOORD", "WITHHASH"]), 0..2),
        )
            .prop_map(|(order, count, with)| {
                let mut v: Vec<String> = order.into_iter().collect();
                if let Some((n, any)) = count {
                    v.extend(words(&["COUNT", &n]));
                    if any {
                        v.push("ANY".into());
                    }
                }
                v.extend(with);
                v
            })
    };
    let search = (geo_key(), from(), by(), options()).prop_map(|(k, f, b, o)| {
        let mut v = words(&["GEOSEARCH", &k]);
        v.extend(f);
        v.extend(b);
        v.extend(o);
        v
    });
    let radius =
        (geo_key(), lon_lat(), reach(), options(), proptest::option::of((pick(&["STORE", "STOREDIST"]), geo_key())))
            .prop_map(|(k, (lon, lat), r, o, store)| {
                let mut v = words(&["GEORADIUS", &k, &lon, &lat]);
                v.extend(r);
                v.extend(o);
                if let Some((how, dest)) = store {
                    v.extend([how, dest]);
                }
                v
            });
    let store = (geo_key(), geo_key(), from(), by(), any::<bool>()).prop_map(|(d, k, f, b, dist)| {
        let mut v = words(&["GEOSEARCHSTORE", &d, &k]);
        v.extend(f);
        v.extend(b);
        if dist {
            v.push("STOREDIST".into());
        }
        v
    });
    prop_oneof![6 => add, 2 => read, 1 => dist, 3 => search, 2 => radius, 1 => store]
}

/// The key an HLL command works on: mostly an HLL, sometimes a plain string (not an HLL) or
/// any key.
fn hll_key() -> impl Strategy<Value = String> {
    prop_oneof![8 => pick(HLLS), 1 => pick(STRINGS), 1 => pick(ALL)]
}

/// The HyperLogLog commands: elements added (sparse HLLs turn dense past the servers' small
/// `hll-sparse-max-bytes`), counted (the cached estimate, the union), merged, and the bytes
/// themselves compared (GET, PFDEBUG DECODE), so every sparse update must encode as Redis'.
fn hll_command() -> impl Strategy<Value = Vec<String>> {
    let element = || prop_oneof![4 => (0..60u8).prop_map(|i| format!("e{i}")), 1 => value()];
    let add = (hll_key(), proptest::collection::vec(element(), 0..12)).prop_map(|(k, els)| {
        let mut v = words(&["PFADD", &k]);
        v.extend(els);
        v
    });
    let count = proptest::collection::vec(hll_key(), 1..3).prop_map(|keys| {
        let mut v = words(&["PFCOUNT"]);
        v.extend(keys);
        v
    });
    let merge = (hll_key(), proptest::collection::vec(hll_key(), 0..3)).prop_map(|(d, srcs)| {
        let mut v = words(&["PFMERGE", &d]);
        v.extend(srcs);
        v
    });
    let get = hll_key().prop_map(|k| words(&["GET", &k]));
    let debug = (pick(&["ENCODING", "TODENSE", "DECODE"]), hll_key()).prop_map(|(s, k)| words(&["PFDEBUG", &s, &k]));
    prop_oneof![6 => add, 3 => count, 2 => merge, 2 => get, 1 => debug]
}

/// `@multi n1 CMD1... n2 CMD2...`: the commands in MULTI / EXEC.
const MULTI: &str = "@multi";
/// `@block i CMD...`: the blocking CMD sent on side connection `i` of both servers (see
/// [`Side`]); `@await i`, or the end of the sequence, ends it and compares what each got.
const BLOCK: &str = "@block";
/// See [`BLOCK`].
const AWAIT: &str = "@await";

fn plain() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        10 => list_command(),
        10 => hash_command(),
        10 => set_command(),
        10 => string_command(),
        4 => bitmap_command(),
        8 => zset_command(),
        8 => geo_command(),
        4 => hll_command(),
        4 => key_command(),
    ]
}

fn command() -> impl Strategy<Value = Vec<String>> {
    let swap = pick(ALL).prop_map(|k| words(&[SWAP, &k]));
    let multi = proptest::collection::vec(plain(), 1..4).prop_map(|cmds| {
        let mut a = words(&[MULTI]);
        for cmd in cmds {
            a.push(cmd.len().to_string());
            a.extend(cmd);
        }
        a
    });
    // Blocking pops and moves, woken (or not) by the main connection's later commands.
    let block = (0..2u8, 0..4, list_key(), list_key(), side(), side()).prop_map(|(i, op, a, b, from, to)| {
        let mut v = words(&[BLOCK, &i.to_string()]);
        v.extend(match op {
            0 => words(&["BLPOP", &a, &b, "0"]),
            1 => words(&["BRPOP", &a, "0"]),
            2 => words(&["BLMOVE", &a, &b, &from, &to, "0"]),
            _ => words(&["BRPOPLPUSH", &a, &b, "0"]),
        });
        v
    });
    let await_ = (0..2u8).prop_map(|i| words(&[AWAIT, &i.to_string()]));
    prop_oneof![30 => plain(), 2 => swap, 2 => multi, 3 => block, 2 => await_]
}

/// Replies whose order Redis does not specify, sorted; others as they are.
fn normalise(cmd: &[String], v: Value) -> Value {
    let key = |v: &Value| v.to_string();
    match (cmd[0].to_ascii_uppercase().as_str(), v) {
        ("HKEYS" | "HVALS" | "SMEMBERS" | "SINTER" | "SUNION" | "SDIFF" | "SPOP", Value::Array(mut items)) => {
            items.sort_by_key(key);
            Value::Array(items)
        }
        ("SMEMBERS" | "SINTER" | "SUNION" | "SDIFF" | "SPOP", Value::Set(mut items)) => {
            items.sort_by_key(key);
            Value::Set(items)
        }
        // Remaining time moves with the clock: only whether there is one is compared.
        ("TTL" | "PTTL", Value::Int(n)) if n > 0 => Value::Int(1),
        ("HGETALL", Value::Array(items)) => {
            let mut pairs: Vec<(Value, Value)> = Vec::new();
            let mut it = items.into_iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                pairs.push((f, v));
            }
            pairs.sort_by_key(|(f, _)| key(f));
            Value::Array(pairs.into_iter().flat_map(|(f, v)| [f, v]).collect())
        }
        ("HGETALL", Value::Map(mut pairs)) => {
            pairs.sort_by_key(|(f, _)| key(f));
            Value::Map(pairs)
        }
        (_, v) => v,
    }
}

/// DUMP `key` on both servers and RESTORE each payload into the other (REPLACE); the replies.
fn swap(rill: &mut rill_testkit::RawClient, redis: &mut rill_testkit::RawClient, key: &str) -> (Value, Value) {
    let (from_rill, from_redis) = (rill.cmd_value(&["DUMP", key]), redis.cmd_value(&["DUMP", key]));
    (rill.restore_dump(key, &from_redis), redis.restore_dump(key, &from_rill))
}

/// Run `cmds` on both servers from an empty keyspace; the first difference, described.
/// The main connections (rill's, Redis') and two [`Side`]s.
struct Session {
    main: [rill_testkit::RawClient; 2],
    sides: [Side; 2],
}

/// End the command parked on side `i`, if any; the difference between the servers, if any.
fn unpark(s: &mut Session, i: usize) -> Option<String> {
    let (cmd, unblock, got) = s.sides[i].unpark(&mut s.main)?;
    let what = format!("side {i}: {}", cmd.join(" "));
    if unblock[0] != unblock[1] {
        let (a, b) = (&unblock[0], &unblock[1]);
        return Some(format!("{what}: still blocked?\n  rill:  {a}\n  redis: {b}"));
    }
    (got[0] != got[1]).then(|| format!("{what}\n  rill:  {}\n  redis: {}", got[0], got[1]))
}

fn run_both(s: &mut Session, cmds: &[Vec<String>], proto: &str) -> Option<String> {
    for c in s.main.iter_mut() {
        c.cmd(&["FLUSHALL"]);
    }
    for cmd in cmds {
        let i = cmd.get(1).and_then(|i| i.parse::<usize>().ok()).unwrap_or(0) % 2;
        match cmd[0].as_str() {
            BLOCK => {
                s.sides[i].park(&mut s.main, cmd[2..].to_vec());
                continue;
            }
            AWAIT => match unpark(s, i) {
                Some(diff) => return Some(format!("{diff} ({proto})")),
                None => continue,
            },
            _ => {}
        }
        let conns = &mut s.main;
        let run = |c: &mut rill_testkit::RawClient, cmd: &[String]| {
            let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            normalise(cmd, parse_value(&c.request(&args).unwrap()).unwrap())
        };
        let (a, b) = match cmd[0].as_str() {
            SWAP => {
                let [a, b] = conns;
                swap(a, b, &cmd[1])
            }
            MULTI => {
                let parts = multi_commands(&cmd[1..]);
                let mut got = Vec::new();
                for c in conns.iter_mut() {
                    c.cmd(&["MULTI"]);
                    let mut replies: Vec<Value> = parts.iter().map(|p| run(c, p)).collect();
                    let exec = match parse_value(&c.cmd(&["EXEC"])).unwrap() {
                        Value::Array(items) if items.len() == parts.len() => {
                            Value::Array(items.into_iter().zip(&parts).map(|(v, p)| normalise(p, v)).collect())
                        }
                        other => other,
                    };
                    replies.push(exec);
                    got.push(Value::Array(replies));
                }
                let b = got.pop().unwrap();
                (got.pop().unwrap(), b)
            }
            _ => {
                let [a, b] = conns;
                (run(a, cmd), run(b, cmd))
            }
        };
        if a != b {
            return Some(format!("{} ({proto})\n  rill:  {a}\n  redis: {b}", cmd.join(" ")));
        }
    }
    (0..2).find_map(|i| unpark(s, i)).map(|diff| format!("{diff} ({proto})"))
}

#[test]
fn random_keyspace_sequences_match_redis() {
    match_redis(fuzz_seed(0x5eed_0002));
}

#[test]
fn random_keyspace_sequences_match_redis_fresh_seed() {
    if let Some(seed) = fresh_seed() {
        match_redis(seed);
    }
}

fn match_redis(seed: u64) {
    let Some(redis) = Server::reference(ReferenceServer::Redis8) else { return };
    let rill = Server::rill();
    let open = |resp3: bool| {
        let mut main = [rill.connect(), redis.connect()];
        for c in main.iter_mut() {
            c.cmd(&["CONFIG", "SET", "hash-max-listpack-entries", "4"]);
            c.cmd(&["CONFIG", "SET", "list-max-listpack-size", "4"]);
            c.cmd(&["CONFIG", "SET", "set-max-intset-entries", "4"]);
            c.cmd(&["CONFIG", "SET", "set-max-listpack-entries", "4"]);
            c.cmd(&["CONFIG", "SET", "zset-max-listpack-entries", "4"]);
            c.cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", "64"]);
            if resp3 {
                c.cmd(&["HELLO", "3"]);
            }
        }
        Session { main, sides: [Side::open(&rill, &redis), Side::open(&rill, &redis)] }
    };
    let conns = std::cell::RefCell::new([open(false), open(true)]);
    let cases = std::env::var("RILL_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed)));
    let strategy = (any::<bool>(), proptest::collection::vec(command(), 1..40));
    let result = runner.run(&strategy, |(resp3, cmds)| {
        let mut all = conns.borrow_mut();
        let proto = if resp3 { "RESP3" } else { "RESP2" };
        let diff = run_both(&mut all[usize::from(resp3)], &cmds, proto);
        prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
        Ok(())
    });
    if let Err(e) = result {
        panic!("rill and Redis 8.2.3 differ (seed {seed}): {e}");
    }
}

/// What the restart test compares, per key: its type, expiry time (absolute, so exact) and
/// contents (unordered ones sorted), and a hash's field expiry times. Not the encoding: reloading may pick a more compact one
/// for a value that shrank, as Redis's does.
fn picture(c: &mut rill_testkit::RawClient) -> crate::common::Picture {
    let mut out = Vec::new();
    for key in ALL.iter().chain(OTHERS) {
        let mut ask = |cmd: &[&str]| {
            let words: Vec<String> = cmd.iter().map(|w| w.to_string()).collect();
            let v = normalise(&words, parse_value(&c.cmd(cmd)).unwrap());
            out.push((words.join(" "), v.clone()));
            v
        };
        ask(&["PEXPIRETIME", key]);
        let read: &[&str] = match ask(&["TYPE", key]).as_bytes() {
            Some(b"list") => &["LRANGE", key, "0", "-1"],
            Some(b"hash") => &["HGETALL", key],
            Some(b"set") => &["SMEMBERS", key],
            Some(b"zset") => &["ZRANGE", key, "0", "-1", "WITHSCORES"],
            Some(b"string") => &["GET", key],
            _ => continue,
        };
        ask(read);
        if read.first() == Some(&"HGETALL") {
            // The fields' expiry times (absolute in the workload) come back from the log too.
            ask(&["HPEXPIRETIME", key, "FIELDS", "6", "f", "g", "h", "i", "j", "1"]);
        }
    }
    out
}

/// Random sequences against rill with the log on (`appendfsync always`, the small encoding
/// limits of the differential test), sometimes compacted halfway: after `kill -9` and a
/// restart in the same directory every key is what it was. A swap here is a DUMP of the key
/// RESTOREd over it (so RESTORE's log record is replayed too); blocking commands are left out.
#[test]
fn random_keyspace_sequences_survive_kill9_and_compaction() {
    survive_kill9(fuzz_seed(0x5eed_0003));
}

#[test]
fn random_keyspace_sequences_survive_kill9_and_compaction_fresh_seed() {
    if let Some(seed) = fresh_seed() {
        survive_kill9(seed);
    }
}

fn survive_kill9(seed: u64) {
    let dir = rill_testkit::TempDir::new("rill-keyspace-restart");
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--hash-max-listpack-entries",
        "4",
        "--list-max-listpack-size",
        "4",
        "--set-max-intset-entries",
        "4",
        "--set-max-listpack-entries",
        "4",
        "--zset-max-listpack-entries",
        "4",
        "--hll-sparse-max-bytes",
        "64",
    ];
    let proc = std::cell::RefCell::new(Some(rill_testkit::Proc::start(dir.path(), &args)));
    let cases = std::env::var("RILL_FUZZ_RESTARTS").ok().and_then(|v| v.parse().ok()).unwrap_or(25);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed)));
    let strategy = (proptest::collection::vec(command(), 1..40), any::<Option<u8>>());
    let result = runner.run(&strategy, |(cmds, rewrite_at)| {
        let mut slot = proc.borrow_mut();
        let p = slot.take().unwrap();
        let mut c = p.client();
        c.cmd(&["FLUSHALL"]);
        let rewrite_at = rewrite_at.map(|n| usize::from(n) % cmds.len());
        for (i, cmd) in cmds.iter().enumerate() {
            let run: Vec<&[String]> = match cmd[0].as_str() {
                MULTI => multi_commands(&cmd[1..]),
                SWAP => {
                    let dump = c.cmd_value(&["DUMP", &cmd[1]]);
                    c.restore_dump(&cmd[1], &dump);
                    Vec::new()
                }
                _ if cmd[0].starts_with('@') => Vec::new(),
                _ => vec![&cmd[..]],
            };
            // A transaction is logged as one unit: run it as one here too.
            c.run_all(&run, cmd[0] == MULTI);
            if Some(i) == rewrite_at {
                c.rewrite_log();
            }
        }
        let (p, diff) = crate::common::kill9_and_compare(p, &mut c, dir.path(), &args, picture);
        *slot = Some(p);
        prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
        Ok(())
    });
    if let Err(e) = result {
        panic!("state changed across a restart (seed {seed}): {e}");
    }
}
