//! Randomised check of OBJECT ENCODING against Redis 8.2.3: random list, set and hash commands
//! on three keys run on rill and on Redis, and after every command each key's encoding must
//! be the same. For a quicklist the node count and total listpack bytes (DEBUG OBJECT's
//! `ql_nodes` and `ql_uncompressed_size`) must be the same too: rill replays Redis' node
//! decisions (types/object/quicklist.rs), and this is what shows it replays them exactly.
//!
//! Lists run under `list-max-listpack-size` -2, -1, 3 and 5, with elements from integers to
//! ones large enough for a plain node. SPOP picks members at random: each server's reply must
//! be as many distinct members of the set as asked (or all), and exactly those must be gone
//! from it; the set's encoding is then compared only if both kept the same members (and the
//! key dropped otherwise). After any other command the members must be the same.
//! `RILL_ENCODING_FUZZ_STEPS=N` sets the commands per run (default 400). The six runs share a
//! seed: the fixed one (a regression) and, in CI and `scripts/test`, a fresh one that the run
//! prints (`rill_testkit::fresh_seed`); `RILL_FUZZ_SEED=S` replays S.

use rill_testkit::{fresh_seed, fuzz_seed, RawClient, ReferenceServer, Rng, Server, ServerKind, Value};

const KEYS: [&str; 3] = ["k0", "k1", "k2"];

fn list_element(rng: &mut Rng) -> String {
    match rng.below(100) {
        0..=24 => rng.range(-70_000, 70_000).to_string(),
        25..=49 => "e".repeat(rng.range(0, 70) as usize),
        50..=79 => "m".repeat(rng.range(60, 700) as usize),
        80..=96 => "b".repeat(rng.range(1000, 3000) as usize),
        _ => "L".repeat(rng.range(4000, 9500) as usize),
    }
}

fn member(rng: &mut Rng) -> String {
    match rng.below(100) {
        0..=59 => rng.range(-300, 300).to_string(),
        60..=94 => format!("s{}", rng.below(300)),
        _ => "S".repeat(rng.range(60, 70) as usize),
    }
}

fn key(rng: &mut Rng) -> String {
    rng.pick(&KEYS).to_string()
}

fn list_command(rng: &mut Rng, len: i64, element_at: &mut dyn FnMut(i64) -> Option<String>) -> Vec<String> {
    let k = key(rng);
    let pivot = |rng: &mut Rng, element_at: &mut dyn FnMut(i64) -> Option<String>| {
        element_at(rng.range(0, (len - 1).max(0))).unwrap_or_else(|| "zz".into())
    };
    match rng.below(11) {
        0 => vec!["LPUSH".into(), k, list_element(rng)],
        1 => vec!["RPUSH".into(), k, list_element(rng)],
        2 => {
            let mut c = vec![rng.pick(&["LPUSH", "RPUSH"]).into(), k];
            c.extend((0..rng.range(1, 30)).map(|_| list_element(rng)));
            c
        }
        3 => vec![rng.pick(&["LPOP", "RPOP"]).into(), k],
        4 => vec![rng.pick(&["LPOP", "RPOP"]).into(), k, rng.range(1, 20).to_string()],
        5 => vec!["LSET".into(), k, rng.range(-len - 1, len).to_string(), list_element(rng)],
        6 => {
            let p = pivot(rng, element_at);
            vec!["LINSERT".into(), k, rng.pick(&["BEFORE", "AFTER"]).into(), p, list_element(rng)]
        }
        7 => {
            let p = pivot(rng, element_at);
            vec!["LREM".into(), k, rng.range(-3, 3).to_string(), p]
        }
        8 => vec!["LTRIM".into(), k, rng.range(0, 5).to_string(), (-rng.range(1, 6)).to_string()],
        _ => {
            vec!["LMOVE".into(), k, key(rng), rng.pick(&["LEFT", "RIGHT"]).into(), rng.pick(&["LEFT", "RIGHT"]).into()]
        }
    }
}

fn set_command(rng: &mut Rng) -> Vec<String> {
    let k = key(rng);
    match rng.below(8) {
        0 => vec!["SADD".into(), k, member(rng)],
        1 => {
            let mut c = vec!["SADD".into(), k];
            c.extend((0..rng.range(1, 150)).map(|_| member(rng)));
            c
        }
        2 => {
            let mut c = vec!["SREM".into(), k];
            c.extend((0..rng.range(1, 40)).map(|_| member(rng)));
            c
        }
        3 => vec!["SPOP".into(), k, rng.range(1, 200).to_string()],
        4 => vec!["SMOVE".into(), k, key(rng), member(rng)],
        _ => {
            let mut c = vec![rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]).into(), k];
            c.extend((0..rng.range(1, 4)).map(|_| key(rng)));
            c
        }
    }
}

fn hash_command(rng: &mut Rng) -> Vec<String> {
    let k = key(rng);
    let field = |rng: &mut Rng| {
        if rng.below(10) == 0 {
            "F".repeat(rng.range(60, 70) as usize)
        } else {
            format!("f{}", rng.below(600))
        }
    };
    let value = |rng: &mut Rng| {
        if rng.below(2) == 0 {
            rng.below(99).to_string()
        } else {
            "v".repeat(rng.range(0, 70) as usize)
        }
    };
    match rng.below(5) {
        0 => vec!["HSET".into(), k, field(rng), value(rng)],
        1 => {
            let mut c = vec!["HSET".into(), k];
            for _ in 0..rng.range(1, 560) {
                c.push(field(rng));
                c.push(value(rng));
            }
            c
        }
        2 => {
            let mut c = vec!["HDEL".into(), k];
            c.extend((0..rng.range(1, 200)).map(|_| field(rng)));
            c
        }
        3 => vec!["HINCRBY".into(), k, field(rng), rng.range(-5, 5).to_string()],
        _ => vec!["HSETNX".into(), k, field(rng), value(rng)],
    }
}

fn text(v: &Value) -> String {
    String::from_utf8_lossy(v.as_bytes().unwrap_or(b"")).into_owned()
}

/// `ql_nodes` and `ql_uncompressed_size` from DEBUG OBJECT.
fn quicklist_shape(c: &mut RawClient, key: &str) -> (String, String) {
    let line = text(&c.cmd_value(&["DEBUG", "OBJECT", key]));
    let field = |name: &str| line.split(' ').find_map(|kv| kv.strip_prefix(name)).unwrap_or("?").to_string();
    (field("ql_nodes:"), field("ql_uncompressed_size:"))
}

fn sorted_members(c: &mut RawClient, key: &str) -> Vec<Vec<u8>> {
    let (Value::Array(items) | Value::Set(items)) = c.cmd_value(&["SMEMBERS", key]) else { return vec![] };
    let mut out: Vec<Vec<u8>> = items.iter().filter_map(|v| v.as_bytes().map(<[u8]>::to_vec)).collect();
    out.sort();
    out
}

/// An `SPOP key count` reply checked against the set before (`before`) and after (`after`,
/// both sorted): distinct members of `before`, as many as asked or all there were, and
/// exactly those gone from it.
fn check_spop(before: &[Vec<u8>], count: usize, reply: &[u8], after: &[Vec<u8>]) -> Result<(), String> {
    let Ok(Value::Array(items) | Value::Set(items)) = rill_testkit::parse_value(reply) else {
        return Err(format!("not an array: {}", rill_testkit::escape(reply)));
    };
    let mut popped: Vec<Vec<u8>> = items.iter().filter_map(|v| v.as_bytes().map(<[u8]>::to_vec)).collect();
    popped.sort();
    let distinct = popped.windows(2).all(|w| w[0] != w[1]);
    if popped.len() != items.len() || !distinct || popped.len() != count.min(before.len()) {
        return Err(format!("{} members ({} distinct) from a set of {}", items.len(), popped.len(), before.len()));
    }
    if let Some(stranger) = popped.iter().find(|m| before.binary_search(m).is_err()) {
        return Err(format!("popped {:?}, which was not a member", String::from_utf8_lossy(stranger)));
    }
    let left: Vec<Vec<u8>> = before.iter().filter(|m| popped.binary_search(m).is_err()).cloned().collect();
    if left != after {
        return Err(format!("{} members left, {} expected, or other ones", after.len(), left.len()));
    }
    Ok(())
}

/// Runs `steps` random commands of `kind`; returns the mismatches, and counts in `seen` the
/// encodings (and quicklist shapes) that were compared.
fn run(
    kind: &str,
    fill: &str,
    seed: u64,
    steps: usize,
    rill: &mut RawClient,
    redis: &mut RawClient,
    seen: &mut std::collections::BTreeMap<String, usize>,
) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut failures = Vec::new();
    for c in [&mut *rill, &mut *redis] {
        c.cmd(&["FLUSHALL"]);
        c.cmd(&["CONFIG", "SET", "list-max-listpack-size", fill]);
    }
    for step in 0..steps {
        let cmd = match kind {
            "list" => {
                let k = KEYS[(rng.next_u64() % 3) as usize];
                let len = match redis.cmd_value(&["LLEN", k]) {
                    Value::Int(n) => n,
                    _ => 0,
                };
                let mut element_at = |i: i64| {
                    redis
                        .cmd_value(&["LINDEX", k, &i.to_string()])
                        .as_bytes()
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                };
                let mut c = list_command(&mut rng, len, &mut element_at);
                c[1] = k.to_string();
                c
            }
            "set" => set_command(&mut rng),
            _ => hash_command(&mut rng),
        };
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        // The set SPOP takes from, the same on both servers (every key is kept the same).
        let spop = (cmd[0] == "SPOP").then(|| (cmd[1].as_str(), sorted_members(redis, &cmd[1])));
        let (a, b) = (rill.cmd(&args), redis.cmd(&args));
        match &spop {
            // The members are random: each server must pop what it held, as many as asked.
            Some((k, before)) => {
                let count: usize = cmd[2].parse().unwrap();
                for (label, c, reply) in [("rill", &mut *rill, &a), ("Redis", &mut *redis, &b)] {
                    if let Err(e) = check_spop(before, count, reply, &sorted_members(c, k)) {
                        failures.push(format!("{kind} seed {seed} step {step}: {label}'s SPOP {k} {count}: {e}"));
                    }
                }
            }
            None if a != b => failures.push(format!("{kind} fill {fill} step {step}: {} replies differ", cmd[0])),
            None => {}
        }
        for k in KEYS {
            if kind == "set" && sorted_members(rill, k) != sorted_members(redis, k) {
                if spop.as_ref().is_none_or(|(popped_from, _)| *popped_from != k) {
                    failures.push(format!(
                        "{kind} seed {seed} step {step} after {} on {}: key {k} has other members in rill",
                        cmd[0], cmd[1]
                    ));
                }
                // SPOP chose different members (or a failure is recorded): start the key
                // again on both.
                rill.cmd(&["DEL", k]);
                redis.cmd(&["DEL", k]);
                continue;
            }
            let (ea, eb) = (rill.cmd_value(&["OBJECT", "ENCODING", k]), redis.cmd_value(&["OBJECT", "ENCODING", k]));
            let mut same = text(&ea) == text(&eb);
            *seen.entry(format!("{kind} {}", text(&ea))).or_default() += 1;
            if same && text(&ea) == "quicklist" {
                same = quicklist_shape(rill, k) == quicklist_shape(redis, k);
            }
            if !same {
                let shape = if kind == "list" {
                    format!(" {:?} / {:?}", quicklist_shape(rill, k), quicklist_shape(redis, k))
                } else {
                    String::new()
                };
                failures.push(format!(
                    "{kind} fill {fill} seed {seed} step {step} after {} on {}: key {k} is {} in rill, {} in Redis{shape}",
                    cmd[0], cmd[1], text(&ea), text(&eb)
                ));
                rill.cmd(&["DEL", k]);
                redis.cmd(&["DEL", k]);
            }
        }
        if failures.len() > 5 {
            break;
        }
    }
    failures
}

#[test]
fn encodings_match_redis_after_every_command() {
    encodings_match(fuzz_seed(0x000b_1ec7), true);
}

#[test]
fn encodings_match_redis_after_every_command_fresh_seed() {
    if let Some(seed) = fresh_seed() {
        encodings_match(seed, false);
    }
}

/// `check_coverage`: every conversion was crossed often enough. That is a property of the
/// generator, checked on the fixed seed where it is deterministic; a fresh seed often compares
/// fewer than 20 `hash listpack` states (9 of 15 tried) and still checks every step it made.
fn encodings_match(seed: u64, check_coverage: bool) {
    let Some(binary) = ReferenceServer::Redis8.require() else { return };
    let debug = ["--enable-debug-command", "yes"];
    let rill_server = Server::rill_with(&debug);
    let redis_server = Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, &debug);
    let (mut rill, mut redis) = (rill_server.connect(), redis_server.connect());
    let steps = std::env::var("RILL_ENCODING_FUZZ_STEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let mut failures = Vec::new();
    let mut seen = std::collections::BTreeMap::new();
    for fill in ["-2", "-1", "3", "5"] {
        failures.extend(run("list", fill, seed, steps, &mut rill, &mut redis, &mut seen));
    }
    failures.extend(run("set", "-2", seed, steps, &mut rill, &mut redis, &mut seen));
    failures.extend(run("hash", "-2", seed, steps, &mut rill, &mut redis, &mut seen));
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
    // The sequences must have crossed every conversion, or they tested little.
    let wanted = [
        "list listpack",
        "list quicklist",
        "set intset",
        "set listpack",
        "set hashtable",
        "hash listpack",
        "hash hashtable",
    ];
    if check_coverage {
        for want in wanted {
            assert!(seen.get(want).is_some_and(|n| *n > 20), "too few '{want}' states compared: {seen:?}");
        }
    }
}
