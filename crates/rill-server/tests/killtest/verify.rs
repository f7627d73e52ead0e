//! Reading back the state a restarted server recovered, and checking it against what the load
//! generator was told before the kill.
//!
//! The model: the server executes commands in one order (stream IDs grow in that order) and
//! recovers a prefix of it. So after a kill:
//!
//! * every entry is one some producer wrote, with exactly its fields, and each producer's
//!   recovered seqs are `0..k` with no gap, in ID order, each with the ID its XADD returned;
//! * under `always` nothing acknowledged is missing: every XADD with a reply is there, every
//!   XACK with a reply is out of the PEL, every delivery with a reply and no XACK is in the
//!   PEL, owned by the consumer it went to, delivery count 1;
//! * under `everysec` an acknowledged fact may be missing only if it is newer than the
//!   allowed loss window before the kill, and missing XADDs must all be later (in ID order)
//!   than every recovered entry;
//! * either way the state is consistent: PEL IDs exist in the stream and are at most the
//!   group's last-delivered-id, which is at most the stream's last-generated-id; a PEL entry
//!   nobody was told about can only come from an XREADGROUP whose reply was cut by the kill;
//! * and the round tested something: some XADD was acknowledged early enough that it may not
//!   be lost, and some delivery and some XACK were acknowledged.

use super::load::{check_fields, ConsumerLog, ProducerLog, StreamId};
use rill_testkit::{RawClient, Value};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Entries per XRANGE / XPENDING call while reading back.
const SCAN_CHUNK: usize = 10_000;
/// Examples kept per kind of failure.
const EXAMPLES: usize = 3;

/// The state of one stream and its group, as read from the restarted server.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Every entry: its producer and seq (fields already checked).
    pub entries: BTreeMap<StreamId, (u32, u64)>,
    pub last_generated: StreamId,
    pub group_last_delivered: StreamId,
    /// PEL: owner and delivery count.
    pub pel: BTreeMap<StreamId, (String, i64)>,
}

fn cmd<A: AsRef<[u8]>>(conn: &mut RawClient, args: &[A]) -> Result<Value, String> {
    let reply = conn.call(args).map_err(|e| format!("{}: {e}", show(args)))?;
    if let Value::Error(e) = &reply {
        return Err(format!("{}: {e}", show(args)));
    }
    Ok(reply)
}

fn show<A: AsRef<[u8]>>(args: &[A]) -> String {
    args.iter().take(6).map(|a| String::from_utf8_lossy(a.as_ref()).into_owned()).collect::<Vec<_>>().join(" ")
}

fn id_field(reply: &Value, key: &str) -> Result<StreamId, String> {
    reply.get(key).and_then(Value::as_bytes).and_then(StreamId::parse).ok_or_else(|| format!("no {key} in {reply}"))
}

/// `last-generated-id` (XINFO STREAM) and the group's `last-delivered-id` (XINFO GROUPS).
pub fn stream_ids(conn: &mut RawClient, key: &str, group: &str) -> Result<(StreamId, StreamId), String> {
    let info = cmd(conn, &["XINFO", "STREAM", key])?;
    let last_generated = id_field(&info, "last-generated-id")?;
    let groups = cmd(conn, &["XINFO", "GROUPS", key])?;
    let g = groups
        .as_array()
        .unwrap_or_default()
        .iter()
        .find(|g| g.get("name").and_then(Value::as_bytes) == Some(group.as_bytes()))
        .ok_or_else(|| format!("group {group} of {key} is gone: XINFO GROUPS {groups}"))?;
    Ok((last_generated, id_field(g, "last-delivered-id")?))
}

/// Reads the whole stream and PEL. Entries whose fields are not exactly a producer's go to
/// `bad` (with their ID) instead of failing the read.
pub fn read_back(
    conn: &mut RawClient,
    key: &str,
    group: &str,
    value_bytes: usize,
    bad: &mut Vec<String>,
) -> Result<Recovered, String> {
    let (last_generated, group_last_delivered) = stream_ids(conn, key, group)?;
    let mut rec = Recovered { last_generated, group_last_delivered, ..Recovered::default() };
    let chunk = SCAN_CHUNK.to_string();
    let mut start = String::from("-");
    loop {
        let reply = cmd(conn, &["XRANGE", key, &start, "+", "COUNT", &chunk])?;
        let items = reply.as_array().unwrap_or_default();
        let mut last = None;
        for item in items {
            let parts = item.as_array().unwrap_or_default();
            let id = parts
                .first()
                .and_then(Value::as_bytes)
                .and_then(StreamId::parse)
                .ok_or_else(|| format!("XRANGE entry {item}"))?;
            match parts.get(1).ok_or_else(|| "no fields".to_owned()).and_then(|f| check_fields(f, value_bytes)) {
                Ok(ps) => {
                    rec.entries.insert(id, ps);
                }
                Err(e) => bad.push(format!("entry {id}: {e}")),
            }
            last = Some(id);
        }
        match last {
            Some(id) if items.len() == SCAN_CHUNK => start = id.next().to_string(),
            _ => break,
        }
    }
    let mut start = String::from("-");
    loop {
        let reply = cmd(conn, &["XPENDING", key, group, &start, "+", &chunk])?;
        let items = reply.as_array().unwrap_or_default();
        let mut last = None;
        for item in items {
            let parts = item.as_array().unwrap_or_default();
            let id = parts.first().and_then(Value::as_bytes).and_then(StreamId::parse);
            let owner = parts.get(1).and_then(Value::as_str);
            let count = match parts.get(3) {
                Some(Value::Int(n)) => Some(*n),
                _ => None,
            };
            let (Some(id), Some(owner), Some(count)) = (id, owner, count) else {
                return Err(format!("XPENDING entry {item}"));
            };
            rec.pel.insert(id, (owner.to_owned(), count));
            last = Some(id);
        }
        match last {
            Some(id) if items.len() == SCAN_CHUNK => start = id.next().to_string(),
            _ => break,
        }
    }
    Ok(rec)
}

/// Failures grouped by kind: a count and the first few examples of each.
#[derive(Debug, Default)]
pub struct Failures {
    kinds: Vec<(String, usize, Vec<String>)>,
}

impl Failures {
    pub fn add(&mut self, kind: &str, example: String) {
        match self.kinds.iter_mut().find(|(k, _, _)| k == kind) {
            Some((_, n, ex)) => {
                *n += 1;
                if ex.len() < EXAMPLES {
                    ex.push(example);
                }
            }
            None => self.kinds.push((kind.to_owned(), 1, vec![example])),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    pub fn report(&self) -> String {
        self.kinds
            .iter()
            .map(|(k, n, ex)| format!("  {k}: {n}x, e.g. {}", ex.join("; ")))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Figures of one verified round.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub acked_adds: usize,
    pub recovered_entries: usize,
    /// Acknowledged XADDs missing after the restart.
    pub lost_adds: usize,
    /// Acknowledged XACKs or deliveries not reflected in the PEL after the restart.
    pub lost_group_facts: usize,
    /// From the oldest lost acknowledgement to the kill.
    pub loss_span: Option<Duration>,
    pub deliveries: usize,
    pub acks: usize,
    pub pel: usize,
    /// PEL entries from an XREADGROUP whose reply the kill cut off.
    pub unseen_deliveries: usize,
}

/// Everything the load generator learned in one round.
#[derive(Debug)]
pub struct RoundLog {
    pub producers: Vec<ProducerLog>,
    pub consumers: Vec<ConsumerLog>,
    pub killed_at: Instant,
    pub read_count: usize,
}

/// Checks the recovered state against the round's log. `allowed_loss` is zero under
/// `always`: an acknowledged fact may be missing only if acknowledged less than
/// `allowed_loss` before the kill.
pub fn check(log: &RoundLog, rec: &Recovered, allowed_loss: Duration, f: &mut Failures) -> Stats {
    let mut stats = Stats { recovered_entries: rec.entries.len(), pel: rec.pel.len(), ..Stats::default() };
    let mut oldest_lost: Option<Instant> = None;
    let mut lost = |at: Instant, kind: &str, example: String, f: &mut Failures| {
        oldest_lost = Some(oldest_lost.map_or(at, |o: Instant| o.min(at)));
        let age = log.killed_at.saturating_duration_since(at);
        if age >= allowed_loss {
            f.add(kind, format!("{example}, acknowledged {age:?} before the kill"));
        }
    };

    // --- entries, per producer --------------------------------------------------------------
    let max_present = rec.entries.keys().next_back().copied().unwrap_or_default();
    let mut by_producer: HashMap<u32, Vec<(StreamId, u64)>> = HashMap::new();
    for (&id, &(p, seq)) in &rec.entries {
        by_producer.entry(p).or_default().push((id, seq)); // in ID order
    }
    for (p, seqs) in &by_producer {
        if !log.producers.iter().any(|l| l.producer == *p) {
            f.add("entry from an unknown producer", format!("producer {p}"));
        }
        for (i, (id, seq)) in seqs.iter().enumerate() {
            if *seq != i as u64 {
                f.add(
                    "a producer's entries are not seqs 0..k in ID order (gap, duplicate or reorder)",
                    format!("producer {p}: entry {id} has seq {seq}, expected {i}"),
                );
                break;
            }
        }
    }
    for pl in &log.producers {
        stats.acked_adds += pl.acked.len();
        let present = by_producer.get(&pl.producer).map_or(&[][..], Vec::as_slice);
        if present.len() as u64 > pl.sent {
            f.add(
                "more entries than were sent",
                format!("producer {}: {} recovered, {} sent", pl.producer, present.len(), pl.sent),
            );
        }
        for (seq, &(id, at)) in pl.acked.iter().enumerate() {
            match present.get(seq) {
                Some(&(got, _)) if got == id => {}
                Some(&(got, _)) => f.add(
                    "entry recovered under another ID than XADD returned",
                    format!("producer {} seq {seq}: XADD returned {id}, recovered {got}", pl.producer),
                ),
                None => {
                    stats.lost_adds += 1;
                    lost(at, "acknowledged XADD missing", format!("{id} (producer {} seq {seq})", pl.producer), f);
                    if id <= max_present {
                        f.add(
                            "missing XADD older than a recovered one (not a prefix)",
                            format!("{id} missing, {max_present} present"),
                        );
                    }
                }
            }
        }
    }
    if rec.last_generated < max_present {
        f.add("last-generated-id below the last entry", format!("{} < {max_present}", rec.last_generated));
    }

    // --- the group ---------------------------------------------------------------------------
    if rec.group_last_delivered > rec.last_generated {
        f.add(
            "group last-delivered-id past the stream's last-generated-id",
            format!("{} > {}", rec.group_last_delivered, rec.last_generated),
        );
    }
    for (id, (owner, _)) in &rec.pel {
        if *id > rec.group_last_delivered {
            f.add(
                "PEL entry past the group's last-delivered-id",
                format!("{id} ({owner}) > {}", rec.group_last_delivered),
            );
        }
        if *id > rec.last_generated {
            f.add("PEL entry past the stream's last-generated-id", format!("{id} ({owner}) > {}", rec.last_generated));
        }
        if !rec.entries.contains_key(id) {
            f.add("PEL entry for a missing stream entry", format!("{id} ({owner})"));
        }
    }

    // What each consumer was told: delivered (and when), acknowledged (and when), uncertain.
    let mut delivered: HashMap<StreamId, (&str, Instant)> = HashMap::new();
    let mut acked: HashMap<StreamId, Instant> = HashMap::new();
    let mut uncertain_ack: HashMap<StreamId, &str> = HashMap::new();
    let mut max_delivered: HashMap<&str, StreamId> = HashMap::new();
    for c in &log.consumers {
        stats.deliveries += c.delivered.len();
        stats.acks += c.acked.len();
        for &(id, at) in &c.delivered {
            if let Some((other, _)) = delivered.insert(id, (&c.name, at)) {
                f.add("entry delivered twice by XREADGROUP >", format!("{id} to {other} and {}", c.name));
            }
            let m = max_delivered.entry(&c.name).or_default();
            *m = (*m).max(id);
        }
        for &(id, at) in &c.acked {
            acked.insert(id, at);
        }
        for &id in &c.acks_in_flight {
            uncertain_ack.insert(id, &c.name);
        }
    }
    let max_confirmed = max_delivered.values().max().copied().unwrap_or_default();
    if rec.group_last_delivered < max_confirmed {
        let at = delivered.get(&max_confirmed).map(|d| d.1).unwrap_or(log.killed_at);
        lost(
            at,
            "group last-delivered-id below a delivered entry",
            format!("{} < {max_confirmed}", rec.group_last_delivered),
            f,
        );
    }
    for (&id, &(consumer, delivered_at)) in &delivered {
        let in_pel = rec.pel.get(&id);
        if !rec.entries.contains_key(&id) {
            // Its XADD was lost too (only allowed under everysec, and then it cannot be pending).
            lost(delivered_at, "delivered entry missing from the stream", format!("{id} ({consumer})"), f);
            continue;
        }
        if let Some((owner, count)) = in_pel {
            if owner != consumer {
                f.add(
                    "PEL entry owned by another consumer",
                    format!("{id}: delivered to {consumer}, owned by {owner}"),
                );
            }
            if *count != 1 {
                f.add("PEL delivery count not 1", format!("{id}: {count}"));
            }
        }
        if uncertain_ack.contains_key(&id) {
            continue;
        }
        match (acked.get(&id), in_pel) {
            (Some(&at), Some(_)) => {
                stats.lost_group_facts += 1;
                lost(at, "acknowledged XACK not reflected: entry still pending", format!("{id} ({consumer})"), f);
            }
            (None, None) => {
                stats.lost_group_facts += 1;
                lost(delivered_at, "acknowledged delivery not in the PEL", format!("{id} ({consumer})"), f);
            }
            _ => {}
        }
    }
    let mut unseen: HashMap<&str, usize> = HashMap::new();
    for (id, (owner, _)) in &rec.pel {
        if delivered.contains_key(id) {
            continue;
        }
        let Some(c) = log.consumers.iter().find(|c| c.name == *owner) else {
            f.add("PEL entry owned by an unknown consumer", format!("{id} ({owner})"));
            continue;
        };
        let after_last_seen = !matches!(max_delivered.get(owner.as_str()), Some(m) if id <= m);
        let n = unseen.entry(&c.name).or_default();
        *n += 1;
        if !c.read_in_flight || !after_last_seen || *n > log.read_count {
            f.add(
                "PEL entry no XREADGROUP reply announced (and not from the read cut by the kill)",
                format!("{id} ({owner}, read in flight: {})", c.read_in_flight),
            );
        }
    }
    stats.unseen_deliveries = unseen.values().sum();
    stats.loss_span = oldest_lost.map(|o| log.killed_at.saturating_duration_since(o));

    // --- the round tested something ----------------------------------------------------------
    // Nothing acknowledged (or all of it young enough to be lost) passes every check above.
    let checkable = log
        .producers
        .iter()
        .flat_map(|p| &p.acked)
        .filter(|(_, at)| log.killed_at.saturating_duration_since(*at) >= allowed_loss)
        .count();
    if checkable == 0 {
        f.add(
            "no XADD acknowledged early enough to be checked: the round tested nothing",
            format!("{} acknowledged, none {allowed_loss:?} or more before the kill", stats.acked_adds),
        );
    }
    if stats.deliveries == 0 || stats.acks == 0 {
        f.add(
            "no delivery or no XACK acknowledged: the round tested no consumer group",
            format!("{} deliveries, {} XACKs", stats.deliveries, stats.acks),
        );
    }
    stats
}
