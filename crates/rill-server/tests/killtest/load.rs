//! The load generator: producers pipelining XADD, consumers doing XREADGROUP then XACK, each on
//! its own connection and thread, recording every reply they got until the server is killed.
//!
//! Only a successful reply counts as acknowledged. What was sent without a reply (the window
//! in flight at the kill) is recorded as uncertain: either outcome is allowed for it.

use super::Rng;
use rill_testkit::{encode_command_into, RawClient, Value};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Read timeout of the load connections: only reached if the server hangs without dying.
const LOAD_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A stream entry ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub fn parse(bytes: &[u8]) -> Option<StreamId> {
        let s = std::str::from_utf8(bytes).ok()?;
        let (ms, seq) = s.split_once('-')?;
        Some(StreamId { ms: ms.parse().ok()?, seq: seq.parse().ok()? })
    }

    /// The smallest ID greater than this one (for resuming range scans).
    pub fn next(self) -> StreamId {
        match self.seq.checked_add(1) {
            Some(seq) => StreamId { ms: self.ms, seq },
            None => StreamId { ms: self.ms + 1, seq: 0 },
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// The field/value pairs producer `producer` writes for its `seq`-th entry:
/// `p <producer> s <seq> v <payload>`, the payload a deterministic function of both, so any
/// entry read back can be checked without remembering what was sent.
pub fn entry_fields(producer: u32, seq: u64, value_bytes: usize) -> [Vec<u8>; 6] {
    let mut x = (u64::from(producer) << 48) ^ seq ^ 0x9e37_79b9_7f4a_7c15;
    let mut v = Vec::with_capacity(value_bytes);
    while v.len() < value_bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(format!("{x:016x}").as_bytes());
    }
    v.truncate(value_bytes);
    [b"p".to_vec(), producer.to_string().into_bytes(), b"s".to_vec(), seq.to_string().into_bytes(), b"v".to_vec(), v]
}

/// Checks that `fields` (a flat field/value array from XRANGE or XREADGROUP) is exactly what
/// some producer wrote; returns that producer and seq.
pub fn check_fields(fields: &Value, value_bytes: usize) -> Result<(u32, u64), String> {
    let items = fields.as_array().ok_or_else(|| format!("fields not an array: {fields}"))?;
    let text = |i: usize| items.get(i).and_then(Value::as_str);
    let producer: u32 = text(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("no producer in {fields}"))?;
    let seq: u64 = text(3).and_then(|s| s.parse().ok()).ok_or_else(|| format!("no seq in {fields}"))?;
    let expected = entry_fields(producer, seq, value_bytes);
    let got: Vec<&[u8]> = items.iter().filter_map(Value::as_bytes).collect();
    if items.len() != expected.len() || got.iter().zip(&expected).any(|(g, e)| *g != e.as_slice()) {
        return Err(format!("fields differ from what producer {producer} wrote as seq {seq}: {fields}"));
    }
    Ok((producer, seq))
}

/// What one producer learned.
#[derive(Debug, Default)]
pub struct ProducerLog {
    pub producer: u32,
    /// `acked[seq]`: the ID XADD returned for this producer's `seq`-th entry and when the reply
    /// arrived. Replies come in order, so this is a prefix of the seqs sent.
    pub acked: Vec<(StreamId, Instant)>,
    /// Seqs `0..sent` were (maybe partially) written to the socket.
    pub sent: u64,
    /// The I/O error that ended the connection and when it happened.
    pub ended: Option<(String, Instant)>,
    /// An unexpected reply while the server was up: a harness or server bug.
    pub failure: Option<String>,
}

/// What one consumer learned.
#[derive(Debug, Default)]
pub struct ConsumerLog {
    pub name: String,
    /// Entries XREADGROUP delivered to this consumer (reply received), with the reply's time.
    pub delivered: Vec<(StreamId, Instant)>,
    /// Entries this consumer XACKed (reply received), with the reply's time.
    pub acked: Vec<(StreamId, Instant)>,
    /// An XREADGROUP was sent whose reply never came: the server may have delivered (and
    /// logged) entries this consumer never saw.
    pub read_in_flight: bool,
    /// IDs of an XACK whose reply never came: each may or may not be acknowledged.
    pub acks_in_flight: Vec<StreamId>,
    pub ended: Option<(String, Instant)>,
    pub failure: Option<String>,
}

/// Parameters shared by all load threads of one round.
#[derive(Debug, Clone)]
pub struct LoadParams {
    pub port: u16,
    pub key: String,
    pub group: String,
    /// Requests in flight per producer connection.
    pub window: usize,
    /// COUNT of each XREADGROUP.
    pub read_count: usize,
    pub value_bytes: usize,
    /// XADDs per second per producer (0: as fast as the server answers).
    pub rate_per_producer: u64,
    pub stop: Arc<AtomicBool>,
}

/// Pipelines XADD in batches of `window` until the connection fails.
pub fn run_producer(p: LoadParams, producer: u32) -> ProducerLog {
    let mut log = ProducerLog { producer, ..ProducerLog::default() };
    let mut conn = match RawClient::try_connect_timeout(p.port, LOAD_READ_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            log.ended = Some((format!("connect: {e}"), Instant::now()));
            return log;
        }
    };
    let mut batch = Vec::new();
    let started = Instant::now();
    while !p.stop.load(Ordering::Relaxed) {
        if p.rate_per_producer > 0 {
            let due = started + Duration::from_secs_f64(log.sent as f64 / p.rate_per_producer as f64);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        batch.clear();
        let first = log.sent;
        for seq in first..first + p.window as u64 {
            let fields = entry_fields(producer, seq, p.value_bytes);
            let mut args: Vec<&[u8]> = vec![b"XADD", p.key.as_bytes(), b"*"];
            args.extend(fields.iter().map(Vec::as_slice));
            encode_command_into(&mut batch, &args);
        }
        log.sent = first + p.window as u64;
        if let Err(e) = conn.send(&batch) {
            log.ended = Some((format!("send: {e}"), Instant::now()));
            return log;
        }
        for _ in 0..p.window {
            match conn.read_value() {
                Ok(Value::Bulk(id)) => match StreamId::parse(&id) {
                    Some(id) => log.acked.push((id, Instant::now())),
                    None => {
                        log.failure = Some(format!("XADD returned {:?}", String::from_utf8_lossy(&id)));
                        return log;
                    }
                },
                Ok(other) => {
                    log.failure = Some(format!("XADD replied {other}"));
                    return log;
                }
                Err(e) => {
                    log.ended = Some((format!("read: {e}"), Instant::now()));
                    return log;
                }
            }
        }
    }
    log
}

/// Loops XREADGROUP `>` then XACK of a random subset of what this consumer holds; about one
/// delivery in five is never acknowledged, so the PEL grows through the round.
pub fn run_consumer(p: LoadParams, name: String, mut rng: Rng) -> ConsumerLog {
    let mut log = ConsumerLog { name: name.clone(), ..ConsumerLog::default() };
    let mut conn = match RawClient::try_connect_timeout(p.port, LOAD_READ_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            log.ended = Some((format!("connect: {e}"), Instant::now()));
            return log;
        }
    };
    let count = p.read_count.to_string();
    // Delivered, not yet acknowledged, and meant to be acknowledged eventually.
    let mut holding: Vec<StreamId> = Vec::new();
    while !p.stop.load(Ordering::Relaxed) {
        log.read_in_flight = true;
        let reply = conn.call(&["XREADGROUP", "GROUP", &p.group, &name, "COUNT", &count, "STREAMS", &p.key, ">"]);
        let entries = match reply {
            Ok(Value::Nil) => Vec::new(),
            Ok(reply) => match delivered_entries(&reply, p.value_bytes) {
                Ok(ids) => ids,
                Err(e) => {
                    log.failure = Some(e);
                    return log;
                }
            },
            Err(e) => {
                log.ended = Some((format!("XREADGROUP: {e}"), Instant::now()));
                return log;
            }
        };
        log.read_in_flight = false;
        let now = Instant::now();
        for id in entries.iter().copied() {
            log.delivered.push((id, now));
            if rng.below(5) != 0 {
                holding.push(id);
            }
        }
        if entries.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (ack, keep): (Vec<StreamId>, Vec<StreamId>) = holding.iter().partition(|_| rng.below(2) == 0);
        holding = keep;
        if ack.is_empty() {
            continue;
        }
        log.acks_in_flight = ack.clone();
        let mut args = vec![b"XACK".to_vec(), p.key.clone().into_bytes(), p.group.clone().into_bytes()];
        args.extend(ack.iter().map(|id| id.to_string().into_bytes()));
        match conn.call(&args) {
            Ok(Value::Int(n)) if n == ack.len() as i64 => {
                let now = Instant::now();
                log.acked.extend(ack.iter().map(|&id| (id, now)));
                log.acks_in_flight.clear();
            }
            Ok(other) => {
                log.failure = Some(format!("XACK of {} pending IDs replied {other}", ack.len()));
                return log;
            }
            Err(e) => {
                log.ended = Some((format!("XACK: {e}"), Instant::now()));
                return log;
            }
        }
    }
    log
}

/// The IDs of an XREADGROUP reply `[[key, [[id, fields], ...]]]`, fields checked.
fn delivered_entries(reply: &Value, value_bytes: usize) -> Result<Vec<StreamId>, String> {
    let entries = reply
        .as_array()
        .and_then(|streams| streams.first())
        .and_then(Value::as_array)
        .and_then(|kv| kv.get(1))
        .and_then(Value::as_array)
        .ok_or_else(|| format!("XREADGROUP replied {reply}"))?;
    entries
        .iter()
        .map(|entry| {
            let parts = entry.as_array().unwrap_or_default();
            let id = parts
                .first()
                .and_then(Value::as_bytes)
                .and_then(StreamId::parse)
                .ok_or_else(|| format!("XREADGROUP entry {entry}"))?;
            let fields = parts.get(1).ok_or_else(|| format!("XREADGROUP entry {entry}"))?;
            check_fields(fields, value_bytes).map_err(|e| format!("XREADGROUP delivered {id}: {e}"))?;
            Ok(id)
        })
        .collect()
}
