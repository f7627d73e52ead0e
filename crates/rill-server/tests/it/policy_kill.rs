//! kill -9 while the group policies act (issue 23): the durability kill test with policies.
//!
//! A server with `appendonly yes`, `appendfsync always` runs a real workload on one source
//! stream with two policy groups sharing one dead-letter stream: producers add entries (some
//! poison, some fatal, some flaky), consumers read `>` only and ack, `RILL.NACK` (with and
//! without DELAY), `XNACK FAIL` or `XNACK FATAL` them, now and then rescue with XAUTOCLAIM (a
//! claim at the limit dead-letters), a "crashed" consumer of each group reads and never acks
//! (ACKWAIT hands its entries back), and the policy timer hands back and dead-letters. The
//! server is killed with -9 at seeded random moments, several rounds, and started again in
//! the same directory. After each restart, exactly:
//!
//! 1. nothing acknowledged is lost: every XADD that got its ID back is in the source stream;
//!    every XACK answered `:1` left the PEL for good; every `XNACK FATAL` answered `:1` is in
//!    the dead-letter stream (reason `fatal`); every entry handed to a client is pending, dead-
//!    lettered by that group, or was XACKed (answered or not);
//! 2. no entry is both pending and dead-lettered, no entry is dead-lettered twice by a group, and
//!    each dead letter carries its source entry's fields, in order, and its provenance
//!    (`rill-deliveries` is exactly MAXDELIVER for reason `maxdeliver`);
//! 3. `RILL.GROUP INFO` agrees with the state: `pending` = XPENDING's count and rows,
//!    `dead-lettered` = the group's dead letters, `delivered` = `acked` + `dead-lettered` +
//!    `pending` (every entry leaves the PEL one of those two ways), `acked` between the acks
//!    answered and the acks sent, `handed-back-queue` + `delayed` = the unowned rows, XINFO's
//!    lag = entries never delivered, `deferred` within it; and in the rounds that quiesce first
//!    (clients stopped, then either the timer left to finish or ACKWAIT raised so it has nothing
//!    due) the picture taken right before the kill equals the one right after the restart;
//! 4. after the last restart the policies keep acting: workers drain both groups, and every
//!    entry ends acked or dead-lettered (poison and fatal ones dead-lettered), PEL empty, and
//!    that final state survives one more kill -9.
//!
//! Ten rounds of 0.4–1.3 s of load each ([`PLAN`]): plain kills, one quiesced round of each
//! kind, one kill in the middle of a BGREWRITEAOF (slowed by `rdb-key-save-delay`, so the
//! restart loads the files from before the rewrite and the incremental file it started) and
//! one kill shortly after a finished one (the restart loads the new base, whose `rill-policy`
//! aux fields carry the policies, and the log after it). Every check reads the server in one
//! MULTI / EXEC ([`State`]): the timer acts right after a restart on deadlines that passed
//! while the server was down, and reads spread over several commands would see a move half
//! way. A failure names the seed and keeps the server's directory (log files and all) in
//! `$TMPDIR/rill-policy-kill-SEED`.
//!
//! A fixed seed runs in every `cargo test`; `rill_testkit::fresh_seed` adds a new one under CI
//! and `scripts/test` (printed; replay with `RILL_FUZZ_SEED=S`). About 14 s each in a debug
//! build. Seen to fail against three planted bugs: the dead-letter move not logging its
//! `DeadLettered` effect (pending and dead-lettered, dead-lettered twice after the restart),
//! the log replay running the policy timer (a quiesced round's counters differ), and a
//! snapshot dropping the policy state (`PolicyRestored`; the round after a finished rewrite
//! finds the counters reset).

use crate::common::ClientExt;
use rill_testkit::{escape, Proc, RawClient, Rng, TempDir, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SRC: &str = "jobs";
const DLQ: &str = "jobs:dead";
const ARGS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

/// A policy group of the workload.
struct GroupSpec {
    name: &'static str,
    maxdeliver: u64,
    ackwait: &'static str,
    /// The other options of its `RILL.GROUP SET`.
    rest: &'static [&'static str],
}

const GROUPS: [GroupSpec; 2] = [
    GroupSpec { name: "g1", maxdeliver: 3, ackwait: "200", rest: &["BACKOFF", "10,40,80"] },
    GroupSpec { name: "g2", maxdeliver: 2, ackwait: "300", rest: &["ORDERBY", "acct", "MAXACKPENDING", "16"] },
];

/// How a round ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// kill -9 with every client running.
    Kill,
    /// kill -9 in the middle of a slowed BGREWRITEAOF, clients running.
    Rewrite,
    /// A BGREWRITEAOF to its end, then kill -9 a moment later, clients running: the restart
    /// loads the new base (policies in its `rill-policy` aux fields) and the log after it.
    AfterRewrite,
    /// Clients stopped, the timer left to finish (nothing owned, nothing delayed), picture,
    /// kill -9, picture again.
    Settled,
    /// Clients stopped, ACKWAIT raised to an hour (nothing due), picture, kill -9, picture
    /// again, ACKWAIT back.
    Frozen,
}

const PLAN: [Round; 10] = [
    Round::Kill,
    Round::Frozen,
    Round::Rewrite,
    Round::Kill,
    Round::Settled,
    Round::Kill,
    Round::Kill,
    Round::AfterRewrite,
    Round::Kill,
    Round::Kill,
];

/// What one client thread saw: what the server acknowledged, and what it sent without an
/// answer (the kill).
#[derive(Debug, Default)]
struct Seen {
    added: Vec<String>,
    /// (group index, id) handed to this client by a read or a claim.
    delivered: Vec<(usize, String)>,
    /// XACK answered `:1`.
    acked: Vec<(usize, String)>,
    /// XACK sent, answered or not.
    ack_sent: Vec<(usize, String)>,
    /// XNACK FATAL answered `:1`.
    fatal: Vec<(usize, String)>,
    /// Replies that are no answer to the command (error replies and the like).
    odd: Vec<String>,
}

/// Everything the clients saw, over all rounds.
#[derive(Debug, Default)]
struct History {
    added: HashSet<String>,
    delivered: [HashSet<String>; 2],
    acked: [HashSet<String>; 2],
    ack_sent: [HashSet<String>; 2],
    fatal: [HashSet<String>; 2],
}

impl History {
    fn take(&mut self, seen: Seen) -> Vec<String> {
        self.added.extend(seen.added);
        for (g, id) in seen.delivered {
            self.delivered[g].insert(id);
        }
        for (g, id) in seen.acked {
            self.acked[g].insert(id);
        }
        for (g, id) in seen.ack_sent {
            self.ack_sent[g].insert(id);
        }
        for (g, id) in seen.fatal {
            self.fatal[g].insert(id);
        }
        seen.odd
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Acks, nacks, fails, rescues with XAUTOCLAIM; now and then forgets an entry (a crash).
    Worker,
    /// Reads `>` and never acks: its entries come back by ACKWAIT.
    Crasher,
    /// The drain after the last restart: acks every good entry, still fails the poison ones.
    Drain,
}

fn text(v: &Value) -> String {
    match v {
        Value::Int(n) => n.to_string(),
        other => other.as_str().map_or_else(|| format!("{other:?}"), str::to_string),
    }
}

/// Entries `[[id, [f, v, ...]], ...]` as (id, field pairs).
fn entries(v: &Value) -> Vec<(String, Vec<(String, String)>)> {
    let Some(items) = v.as_array() else { return Vec::new() };
    items
        .iter()
        .filter_map(|e| {
            let e = e.as_array()?;
            let id = e.first()?.as_str()?.to_string();
            let fields = e.get(1)?.as_array()?.chunks(2).map(|kv| (text(&kv[0]), text(&kv[1]))).collect();
            Some((id, fields))
        })
        .collect()
}

/// The entries of an XREADGROUP reply on one stream (nil: none).
fn read_entries(v: &Value) -> Vec<(String, Vec<(String, String)>)> {
    let Some(streams) = v.as_array() else { return Vec::new() };
    streams.iter().filter_map(|s| s.as_array()?.get(1).map(entries)).flatten().collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn producer(port: u16, tag: String, mut rng: Rng, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let Ok(mut c) = RawClient::try_connect(port) else { return seen };
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let kind = match rng.below(100) {
            0..=9 => "poison",
            10..=14 => "fatal",
            15..=29 => "flaky",
            _ => "ok",
        };
        let seq = format!("{tag}-{n}");
        let acct = format!("a{}", rng.below(12));
        let mut args = vec!["XADD", SRC, "*", "seq", &seq, "kind", kind];
        // A few entries carry no ORDERBY key: they flow unordered.
        if rng.below(10) != 0 {
            args.extend(["acct", acct.as_str()]);
        }
        match c.call(&args) {
            Ok(Value::Bulk(id)) => seen.added.push(String::from_utf8_lossy(&id).into_owned()),
            Ok(other) => seen.odd.push(format!("{args:?}: {other:?}")),
            Err(_) => break,
        }
        std::thread::sleep(Duration::from_millis(2 + rng.below(7)));
    }
    seen
}

/// One consumer of group `g` until `stop` or the connection ends (the kill).
fn consumer(port: u16, g: usize, name: String, role: Role, mut rng: Rng, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let Ok(mut c) = RawClient::try_connect(port) else { return seen };
    let group = GROUPS[g].name;
    while !stop.load(Ordering::Relaxed) {
        let got = if role == Role::Crasher {
            std::thread::sleep(Duration::from_millis(100 + rng.below(100)));
            c.call(&["XREADGROUP", "GROUP", group, &name, "COUNT", "2", "STREAMS", SRC, ">"]).map(|v| read_entries(&v))
        } else if role == Role::Worker && rng.below(20) == 0 {
            // A rescue: entries idle 100 ms (a crashed consumer's, or released ones). One at
            // its MAXDELIVER limit is dead-lettered instead of claimed.
            c.call(&["XAUTOCLAIM", SRC, group, &name, "100", "0-0", "COUNT", "3"])
                .map(|v| v.as_array().and_then(|a| a.get(1)).map(entries).unwrap_or_default())
        } else {
            let count = (1 + rng.below(5)).to_string();
            c.call(&["XREADGROUP", "GROUP", group, &name, "COUNT", &count, "BLOCK", "100", "STREAMS", SRC, ">"])
                .map(|v| read_entries(&v))
        };
        let Ok(got) = got else { break };
        for (id, fields) in got {
            seen.delivered.push((g, id.clone()));
            if role == Role::Crasher {
                continue;
            }
            let kind = field(&fields, "kind").unwrap_or("?");
            let action: &[&str] = match (kind, role, rng.below(100)) {
                ("ok", Role::Worker, 0..=4) => &[],
                ("ok", ..) => &["XACK"],
                ("flaky", Role::Drain, _) | ("flaky", _, 0..=49) => &["XACK"],
                ("flaky", _, 50..=74) => &["RILL.NACK"],
                ("flaky", ..) => &["RILL.NACK", "DELAY", "30"],
                ("poison", _, 0..=33) => &["RILL.NACK"],
                ("poison", _, 34..=66) => &["RILL.NACK", "DELAY", "20"],
                ("poison", ..) => &["XNACK", "FAIL"],
                ("fatal", ..) => &["XNACK", "FATAL"],
                _ => {
                    seen.odd.push(format!("an entry of no kind: {id} {fields:?}"));
                    &[]
                }
            };
            let Some((&verb, opts)) = action.split_first() else { continue };
            let mut args: Vec<&str> = vec![verb, SRC, group];
            if verb == "XACK" {
                args.push(&id);
                seen.ack_sent.push((g, id.clone()));
            } else {
                args.extend(opts);
                args.extend(["IDS", "1", &id]);
            }
            match c.call(&args) {
                Ok(Value::Int(1)) if verb == "XACK" => seen.acked.push((g, id.clone())),
                Ok(Value::Int(1)) if opts == ["FATAL"] => seen.fatal.push((g, id.clone())),
                Ok(Value::Int(0 | 1)) => {}
                Ok(other) => seen.odd.push(format!("{args:?}: {other:?}")),
                Err(_) => return seen,
            }
        }
    }
    seen
}

/// The client threads of a round: two producers (none in the drain), two workers and a
/// crasher per group.
fn start_clients(port: u16, rng: &mut Rng, stop: &Arc<AtomicBool>, round: usize, drain: bool) -> Vec<JoinHandle<Seen>> {
    let mut handles = Vec::new();
    if !drain {
        for p in 0..2 {
            let (tag, r, s) = (format!("r{round}p{p}"), Rng::new(rng.next_u64()), stop.clone());
            handles.push(std::thread::spawn(move || producer(port, tag, r, s)));
        }
    }
    for (g, spec) in GROUPS.iter().enumerate() {
        let roles: &[Role] =
            if drain { &[Role::Drain, Role::Drain] } else { &[Role::Worker, Role::Worker, Role::Crasher] };
        for (i, &role) in roles.iter().enumerate() {
            let name = format!("{}-{}{i}", spec.name, if role == Role::Crasher { "crash" } else { "w" });
            let (r, s) = (Rng::new(rng.next_u64()), stop.clone());
            handles.push(std::thread::spawn(move || consumer(port, g, name, role, r, s)));
        }
    }
    handles
}

fn join_all(handles: Vec<JoinHandle<Seen>>, hist: &mut History) -> Vec<String> {
    let mut odd = Vec::new();
    for h in handles {
        odd.extend(hist.take(h.join().expect("a client thread panicked")));
    }
    odd
}

fn ok(c: &mut RawClient, args: &[&str]) {
    let r = c.cmd(args);
    assert_eq!(r, b"+OK\r\n", "{args:?}: {}", escape(&r));
}

fn set_ackwait(c: &mut RawClient, g: usize, ms: &str) {
    ok(c, &["RILL.GROUP", "SET", SRC, GROUPS[g].name, "ACKWAIT", ms]);
}

/// Everything the checks read, taken in one MULTI / EXEC: the policy timer acts on its own
/// (right after a restart, on deadlines that passed while the server was down), and a check
/// that read the dead-letter stream before a move and the counters after it would see a
/// difference that is not there.
struct State {
    xlen: Value,
    source: Value,
    dlq_len: Value,
    dlq: Value,
    xinfo_groups: Value,
    /// Per group: RILL.GROUP INFO, XPENDING's summary, its rows, XINFO CONSUMERS.
    groups: Vec<[Value; 4]>,
}

fn state(c: &mut RawClient) -> State {
    let mut cmds: Vec<Vec<&str>> = vec![
        vec!["XLEN", SRC],
        vec!["XRANGE", SRC, "-", "+"],
        vec!["XLEN", DLQ],
        vec!["XRANGE", DLQ, "-", "+"],
        vec!["XINFO", "GROUPS", SRC],
    ];
    for g in &GROUPS {
        cmds.push(vec!["RILL.GROUP", "INFO", SRC, g.name]);
        cmds.push(vec!["XPENDING", SRC, g.name]);
        cmds.push(vec!["XPENDING", SRC, g.name, "-", "+", "1000000"]);
        cmds.push(vec!["XINFO", "CONSUMERS", SRC, g.name]);
    }
    ok(c, &["MULTI"]);
    for cmd in &cmds {
        assert_eq!(c.cmd(cmd), b"+QUEUED\r\n", "{cmd:?}");
    }
    let replies = match c.cmd_value(&["EXEC"]) {
        Value::Array(replies) if replies.len() == cmds.len() => replies,
        other => panic!("EXEC: {other:?}"),
    };
    let mut it = replies.into_iter();
    let mut next = || it.next().unwrap_or(Value::Nil);
    let (xlen, source, dlq_len, dlq, xinfo_groups) = (next(), next(), next(), next(), next());
    let groups = GROUPS.iter().map(|_| [next(), next(), next(), next()]).collect();
    State { xlen, source, dlq_len, dlq, xinfo_groups, groups }
}

/// `RILL.GROUP INFO` as (name, value) pairs, values as text.
fn info_pairs(v: &Value) -> Vec<(String, String)> {
    let items = v.as_array().unwrap_or_else(|| panic!("RILL.GROUP INFO: {v:?}"));
    items
        .chunks(2)
        .map(|kv| (text(&kv[0]), if let Value::Array(_) = kv[1] { format!("{:?}", kv[1]) } else { text(&kv[1]) }))
        .collect()
}

fn group_info(c: &mut RawClient, group: &str) -> Vec<(String, String)> {
    info_pairs(&c.cmd_value(&["RILL.GROUP", "INFO", SRC, group]))
}

fn num(info: &[(String, String)], name: &str) -> u64 {
    let v = info
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in {info:?}"));
    v.parse().unwrap_or_else(|_| panic!("{name} = {v:?}"))
}

/// XPENDING's rows: id → (consumer, delivery count); empty consumer: released.
fn pending_rows(v: &Value) -> BTreeMap<String, (String, i64)> {
    let rows = v.as_array().unwrap_or_else(|| panic!("XPENDING: {v:?}"));
    rows.iter()
        .map(|r| {
            let r = r.as_array().unwrap_or_else(|| panic!("XPENDING row: {r:?}"));
            let count = if let Value::Int(n) = r[3] { n } else { -1 };
            (text(&r[0]), (text(&r[1]), count))
        })
        .collect()
}

/// What a quiesced server shows, with nothing that moves with the clock: idle times,
/// `oldest-pending-ms`, `reads-held-back` (counted since the start, not logged), and the
/// split of released entries between `delayed` and `handed-back-queue` (a delay ends by
/// itself) — their sum is kept.
fn picture(c: &mut RawClient) -> Vec<(String, String)> {
    let st = state(c);
    let mut out = vec![
        ("XLEN jobs".to_string(), format!("{:?}", st.xlen)),
        ("XLEN dlq".to_string(), format!("{:?}", st.dlq_len)),
        ("XRANGE dlq".to_string(), format!("{:?}", st.dlq)),
        ("XINFO GROUPS".to_string(), format!("{:?}", st.xinfo_groups)),
    ];
    for (spec, [info, summary, rows, consumers]) in GROUPS.iter().zip(&st.groups) {
        let g = spec.name;
        let mut info = info_pairs(info);
        let released = num(&info, "delayed") + num(&info, "handed-back-queue");
        info.retain(|(k, _)| {
            !["oldest-pending-ms", "reads-held-back", "delayed", "handed-back-queue"].contains(&k.as_str())
        });
        info.push(("delayed+handed-back-queue".into(), released.to_string()));
        out.push((format!("RILL.GROUP INFO {g}"), format!("{info:?}")));
        out.push((format!("XPENDING {g}"), format!("{summary:?}")));
        out.push((format!("XPENDING {g} - +"), format!("{:?}", pending_rows(rows))));
        let consumers: Vec<String> = consumers
            .as_array()
            .unwrap_or_default()
            .iter()
            .map(|row| {
                format!(
                    "{}:{}",
                    row.get("name").map(text).unwrap_or_default(),
                    row.get("pending").map(text).unwrap_or_default()
                )
            })
            .collect();
        out.push((format!("XINFO CONSUMERS {g}"), consumers.join(" ")));
    }
    out
}

fn compare(before: &[(String, String)], after: &[(String, String)]) -> Result<(), String> {
    for ((what, b), (_, a)) in before.iter().zip(after) {
        if a != b {
            return Err(format!("{what} differs after the restart\n  before: {b}\n  after:  {a}"));
        }
    }
    Ok(())
}

/// A dead letter: its group, source id, reason, deliveries, and the source fields it carries.
struct DeadLetter {
    id: String,
    group: String,
    source: String,
    reason: String,
    deliveries: String,
    fields: Vec<(String, String)>,
}

fn dead_letters(dlq: &Value) -> Result<Vec<DeadLetter>, String> {
    let mut out = Vec::new();
    for (id, fields) in entries(dlq) {
        let Some(at) = fields.iter().position(|(k, _)| k == "rill-source-stream") else {
            return Err(format!("dead letter {id} has no provenance: {fields:?}"));
        };
        let (orig, prov) = fields.split_at(at);
        let get = |name: &str| field(prov, name).unwrap_or_default().to_string();
        let names: Vec<&str> = prov.iter().map(|(k, _)| k.as_str()).collect();
        let want = [
            "rill-source-stream",
            "rill-source-id",
            "rill-group",
            "rill-consumer",
            "rill-deliveries",
            "rill-reason",
            "rill-first-delivery-ms",
            "rill-last-delivery-ms",
        ];
        if names != want || get("rill-source-stream") != SRC {
            return Err(format!("dead letter {id}: provenance {prov:?}"));
        }
        out.push(DeadLetter {
            id,
            group: get("rill-group"),
            source: get("rill-source-id"),
            reason: get("rill-reason"),
            deliveries: get("rill-deliveries"),
            fields: orig.to_vec(),
        });
    }
    Ok(out)
}

/// What a check found, for the round's line.
#[derive(Debug, Default)]
struct Counts {
    entries: usize,
    dead: usize,
    pending: [usize; 2],
}

/// Checks 1–3 of the module doc on the restarted server; every finding, not just the first.
fn check(c: &mut RawClient, hist: &History) -> Result<Counts, String> {
    let st = state(c);
    let mut bad: Vec<String> = Vec::new();
    let source: HashMap<String, Vec<(String, String)>> = entries(&st.source).into_iter().collect();
    let lost: Vec<&String> = hist.added.iter().filter(|id| !source.contains_key(*id)).collect();
    if !lost.is_empty() {
        bad.push(format!(
            "{} acknowledged XADDs missing from {SRC}, e.g. {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        ));
    }
    if st.xlen != Value::Int(source.len() as i64) {
        bad.push(format!("XLEN {SRC} {:?}, XRANGE {}", st.xlen, source.len()));
    }
    let dead = dead_letters(&st.dlq)?;
    if st.dlq_len != Value::Int(dead.len() as i64) {
        bad.push(format!("XLEN {DLQ} {:?}, XRANGE {}", st.dlq_len, dead.len()));
    }
    // group -> source id -> reason
    let mut dead_by: [HashMap<String, String>; 2] = Default::default();
    for d in &dead {
        let Some(g) = GROUPS.iter().position(|s| s.name == d.group) else {
            bad.push(format!("dead letter {} of an unknown group {:?}", d.id, d.group));
            continue;
        };
        match source.get(&d.source) {
            None => bad.push(format!("dead letter {} of {} that is not in {SRC}", d.id, d.source)),
            Some(f) if *f != d.fields => {
                bad.push(format!("dead letter {} carries {:?}, {} has {f:?}", d.id, d.fields, d.source))
            }
            Some(_) => {}
        }
        let deliveries_ok = match d.reason.as_str() {
            "maxdeliver" => d.deliveries == GROUPS[g].maxdeliver.to_string(),
            "fatal" => d.deliveries.parse::<u64>().is_ok_and(|n| (1..=GROUPS[g].maxdeliver).contains(&n)),
            _ => false,
        };
        if !deliveries_ok {
            bad.push(format!("dead letter {}: reason {:?} after {} deliveries", d.id, d.reason, d.deliveries));
        }
        if dead_by[g].insert(d.source.clone(), d.reason.clone()).is_some() {
            bad.push(format!("{} dead-lettered twice by {}", d.source, d.group));
        }
    }
    let mut counts = Counts { entries: source.len(), dead: dead.len(), pending: [0, 0] };
    for (g, (spec, [info, summary, rows, _])) in GROUPS.iter().zip(&st.groups).enumerate() {
        let name = spec.name;
        let rows = pending_rows(rows);
        counts.pending[g] = rows.len();
        let info = info_pairs(info);
        let summary_count = summary.as_array().and_then(|a| a.first()).cloned();
        if summary_count != Some(Value::Int(rows.len() as i64)) || num(&info, "pending") != rows.len() as u64 {
            bad.push(format!(
                "{name}: XPENDING rows {}, summary {summary:?}, INFO pending {}",
                rows.len(),
                num(&info, "pending")
            ));
        }
        let per_consumer: u64 = summary
            .as_array()
            .and_then(|a| a.get(3))
            .and_then(Value::as_array)
            .unwrap_or_default()
            .iter()
            .map(|kv| {
                kv.as_array()
                    .and_then(|kv| kv.get(1))
                    .and_then(Value::as_str)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum();
        let unowned = rows.values().filter(|(owner, _)| owner.is_empty()).count() as u64;
        if per_consumer + unowned != rows.len() as u64 {
            bad.push(format!("{name}: consumers own {per_consumer}, {unowned} released, {} pending", rows.len()));
        }
        let released = num(&info, "delayed") + num(&info, "handed-back-queue");
        if released != unowned {
            bad.push(format!("{name}: delayed + handed-back-queue = {released}, {unowned} unowned rows"));
        }
        for (id, (owner, count)) in &rows {
            if dead_by[g].contains_key(id) {
                bad.push(format!("{id} is both pending in {name} (owner {owner:?}) and dead-lettered"));
            }
            if !source.contains_key(id) {
                bad.push(format!("{id} pending in {name} but not in {SRC}"));
            }
            if *count < 1 || *count as u64 > spec.maxdeliver {
                bad.push(format!("{id} pending in {name} with {count} deliveries (MAXDELIVER {})", spec.maxdeliver));
            }
        }
        let dl = dead_by[g].len() as u64;
        if num(&info, "dead-lettered") != dl {
            bad.push(format!(
                "{name}: INFO dead-lettered {}, {dl} dead letters of {name} in {DLQ}",
                num(&info, "dead-lettered")
            ));
        }
        if num(&info, "dead-letter-failures") != 0 {
            bad.push(format!("{name}: dead-letter-failures {}", num(&info, "dead-letter-failures")));
        }
        let (delivered, acked) = (num(&info, "delivered"), num(&info, "acked"));
        if delivered != acked + dl + rows.len() as u64 {
            bad.push(format!(
                "{name}: delivered {delivered} != acked {acked} + dead-lettered {dl} + pending {}",
                rows.len()
            ));
        }
        let (acks_answered, acks_sent) = (hist.acked[g].len() as u64, hist.ack_sent[g].len() as u64);
        if acked < acks_answered || acked > acks_sent {
            bad.push(format!("{name}: INFO acked {acked}, {acks_answered} XACKs answered :1, {acks_sent} sent"));
        }
        // XINFO's lag is the entries never delivered: ORDERBY's deferred ones are among them.
        let lag = st
            .xinfo_groups
            .as_array()
            .unwrap_or_default()
            .iter()
            .find(|row| row.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|row| row.get("lag"))
            .cloned();
        let deferred = num(&info, "deferred");
        match lag {
            Some(Value::Int(lag)) if lag as u64 + delivered == source.len() as u64 && deferred <= lag as u64 => {}
            other => bad.push(format!(
                "{name}: lag {other:?}, delivered {delivered}, deferred {deferred}, {} entries",
                source.len()
            )),
        }
        if !spec.rest.contains(&"ORDERBY") && deferred != 0 {
            bad.push(format!("{name}: {deferred} deferred without ORDERBY"));
        }
        for id in &hist.acked[g] {
            if rows.contains_key(id) || dead_by[g].contains_key(id) {
                bad.push(format!(
                    "{id} was acked in {name} (XACK answered 1) and is {}",
                    if rows.contains_key(id) { "pending again" } else { "dead-lettered" }
                ));
            }
        }
        for id in &hist.fatal[g] {
            if dead_by[g].get(id).map(String::as_str) != Some("fatal") {
                bad.push(format!("{id}: XNACK FATAL answered 1 in {name}, dead letter {:?}", dead_by[g].get(id)));
            }
        }
        let lost: Vec<&String> = hist.delivered[g]
            .iter()
            .filter(|id| !rows.contains_key(*id) && !dead_by[g].contains_key(*id) && !hist.ack_sent[g].contains(*id))
            .collect();
        if !lost.is_empty() {
            bad.push(format!(
                "{name}: {} entries handed to a client are neither pending, dead-lettered nor acked, e.g. {:?}",
                lost.len(),
                &lost[..lost.len().min(5)]
            ));
        }
    }
    if bad.is_empty() {
        Ok(counts)
    } else {
        Err(bad.join("\n"))
    }
}

/// Poll until `done` holds (panics after `secs` seconds with `what`).
fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "never {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Nothing owned and nothing delayed in either group: the timer has nothing left to do.
fn settled(c: &mut RawClient) -> bool {
    let st = state(c);
    st.groups.iter().all(|[info, _, rows, _]| {
        num(&info_pairs(info), "delayed") == 0 && pending_rows(rows).values().all(|(owner, _)| owner.is_empty())
    })
}

fn rewrite_in_progress(c: &mut RawClient) -> bool {
    String::from_utf8_lossy(&c.cmd(&["INFO", "persistence"])).contains("aof_rewrite_in_progress:1")
}

/// How a run reports a finding.
struct Fail<'a> {
    dir: &'a std::path::Path,
    seed: u64,
}

impl Fail<'_> {
    /// Panics with the finding, the seed that replays it and the tail of the server's log.
    fn at(&self, round: &str, what: String) -> ! {
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        let seed = self.seed;
        // The log files that show it outlive the test's directory.
        let kept = std::env::temp_dir().join(format!("rill-policy-kill-{seed}"));
        let kept = match copy_dir(self.dir, &kept) {
            Ok(()) => format!("the server's directory is kept in {}", kept.display()),
            Err(e) => format!("the server's directory could not be kept: {e}"),
        };
        panic!("seed {seed}, {round}: {what}\nreplay: RILL_FUZZ_SEED={seed}; {kept}\nserver log tail:\n{tail}");
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// The whole run for one seed; panics with the finding, the seed and the round.
fn run(seed: u64) {
    let started = Instant::now();
    let dir = TempDir::new("rill-policy-kill");
    let fail = Fail { dir: dir.path(), seed };
    let mut rng = Rng::new(seed);
    let mut server = Proc::start(dir.path(), ARGS);
    let mut c = server.client();
    ok(&mut c, &["XGROUP", "CREATE", SRC, "g1", "$", "MKSTREAM"]);
    ok(&mut c, &["XGROUP", "CREATE", SRC, "g2", "$"]);
    for spec in &GROUPS {
        let mut args = vec!["RILL.GROUP", "SET", SRC, spec.name, "DEADLETTER", DLQ, "ACKWAIT", spec.ackwait];
        let max = spec.maxdeliver.to_string();
        args.extend(["MAXDELIVER", &max]);
        args.extend(spec.rest);
        ok(&mut c, &args);
    }
    let mut hist = History::default();
    for (i, &round) in PLAN.iter().enumerate() {
        let label = format!("round {i} ({round:?})");
        let stop = Arc::new(AtomicBool::new(false));
        let mut clients = Some(start_clients(server.port, &mut rng, &stop, i, false));
        std::thread::sleep(Duration::from_millis(400 + rng.below(900)));
        let mut before = None;
        let mut odd = Vec::new();
        match round {
            Round::Kill => server.kill9(),
            Round::Rewrite => {
                // Two keys at 0.4 s each: the rewrite runs for 0.8 s; the kill comes within it.
                ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "400000"]);
                let r = c.cmd(&["BGREWRITEAOF"]);
                assert!(r.starts_with(b"+"), "BGREWRITEAOF: {}", escape(&r));
                std::thread::sleep(Duration::from_millis(50 + rng.below(500)));
                if !rewrite_in_progress(&mut c) {
                    fail.at(&label, "the rewrite was over before the kill".into());
                }
                server.kill9();
            }
            Round::AfterRewrite => {
                c.rewrite_log();
                std::thread::sleep(Duration::from_millis(100 + rng.below(400)));
                server.kill9();
            }
            Round::Settled | Round::Frozen => {
                stop.store(true, Ordering::Relaxed);
                odd = join_all(clients.take().unwrap_or_default(), &mut hist);
                if round == Round::Frozen {
                    for g in 0..GROUPS.len() {
                        set_ackwait(&mut c, g, "3600000");
                    }
                } else {
                    wait_until("settled: entries still owned or delayed", 10, || settled(&mut c));
                }
                before = Some(picture(&mut c));
                server.kill9();
            }
        }
        if let Some(clients) = clients.take() {
            odd = join_all(clients, &mut hist);
        }
        if !odd.is_empty() {
            fail.at(&label, format!("unexpected replies: {odd:?}"));
        }
        server = Proc::start(dir.path(), ARGS);
        c = server.client();
        if let Some(before) = before {
            if let Err(e) = compare(&before, &picture(&mut c)) {
                fail.at(&label, e);
            }
            if round == Round::Frozen {
                for (g, spec) in GROUPS.iter().enumerate() {
                    set_ackwait(&mut c, g, spec.ackwait);
                }
            }
        }
        match check(&mut c, &hist) {
            Ok(n) => eprintln!(
                "seed {seed} {label}: {} entries, {} dead letters, pending {:?} ({:.1?})",
                n.entries,
                n.dead,
                n.pending,
                started.elapsed()
            ),
            Err(e) => fail.at(&label, e),
        }
    }
    // 4: the policies act after the last restart: drain both groups.
    let stop = Arc::new(AtomicBool::new(false));
    let clients = start_clients(server.port, &mut rng, &stop, PLAN.len(), true);
    let source_len = match c.cmd_value(&["XLEN", SRC]) {
        Value::Int(n) => n as u64,
        other => panic!("XLEN {other:?}"),
    };
    let drained = |c: &mut RawClient| {
        GROUPS.iter().all(|g| {
            let info = group_info(c, g.name);
            num(&info, "pending") == 0 && num(&info, "deferred") == 0 && num(&info, "delivered") == source_len
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !drained(&mut c) {
        if Instant::now() > deadline {
            let infos: Vec<_> = GROUPS.iter().map(|g| group_info(&mut c, g.name)).collect();
            fail.at("the drain", format!("never drained: {infos:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let odd = join_all(clients, &mut hist);
    if !odd.is_empty() {
        fail.at("the drain", format!("unexpected replies: {odd:?}"));
    }
    if let Err(e) = check(&mut c, &hist) {
        fail.at("the drain", e);
    }
    let st = state(&mut c);
    let source = entries(&st.source);
    let dead = dead_letters(&st.dlq).unwrap_or_else(|e| fail.at("the drain", e));
    for (spec, [info, ..]) in GROUPS.iter().zip(&st.groups) {
        let info = info_pairs(info);
        let (acked, dl) = (num(&info, "acked"), num(&info, "dead-lettered"));
        if acked + dl != source_len {
            fail.at("the drain", format!("{}: {acked} acked + {dl} dead-lettered of {source_len} entries", spec.name));
        }
        let dead_here: HashSet<&str> =
            dead.iter().filter(|d| d.group == spec.name).map(|d| d.source.as_str()).collect();
        for (id, fields) in &source {
            let kind = field(fields, "kind").unwrap_or_default();
            if (kind == "poison" || kind == "fatal") && !dead_here.contains(id.as_str()) {
                fail.at("the drain", format!("{kind} entry {id} was not dead-lettered by {}", spec.name));
            }
        }
    }
    // The drained state survives one more kill -9 exactly.
    let before = picture(&mut c);
    server.kill9();
    let server = Proc::start(dir.path(), ARGS);
    let mut c = server.client();
    if let Err(e) = compare(&before, &picture(&mut c)) {
        fail.at("after the drain", e);
    }
    eprintln!(
        "seed {seed}: {source_len} entries, {} dead letters, all acked or dead-lettered ({:.1?})",
        dead.len(),
        started.elapsed()
    );
}

/// The fixed seed (`RILL_FUZZ_SEED` replaces it).
#[test]
fn policies_act_exactly_across_kill_9() {
    run(rill_testkit::fuzz_seed(23));
}

/// A seed never tried before, under CI and `scripts/test` (counted as skipped in a plain
/// `cargo test`).
#[test]
fn policies_act_exactly_across_kill_9_fresh_seed() {
    let Some(seed) = rill_testkit::fresh_seed() else { return };
    run(seed);
}
