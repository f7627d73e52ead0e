//! The replication backlog: the newest bytes of the replication stream, so that a replica
//! that lost its link can continue from its offset (`PSYNC replid offset`) instead of
//! loading a whole snapshot again.
//!
//! ```text
//!  stream offset:  1 ............ first ................. end
//!                  [ dropped ]   [ held: histlen bytes ]
//!                                ^ first_byte_offset      ^ offset (master_repl_offset)
//! ```
//!
//! Offsets count bytes of the stream since the replication ID began, as Redis counts them:
//! `offset()` is the number of the last byte written (`master_repl_offset`), the first byte
//! held is `first_byte_offset()` (`repl_backlog_first_byte_offset`), and a replica that has
//! applied everything up to byte `n` asks for `n + 1`. Writing a unit is one translation into
//! Redis' forms ([`super::forms`]) and a copy into the ring.
//!
//! The ring is also every attached replica's output buffer, as Redis (7.0+) shares one
//! replication buffer between its backlog and its replicas: it holds `capacity` bytes
//! (`repl-backlog-size`), and more while an attached replica still needs older ones — a
//! replica receiving its snapshot while writes go on, or one that reads slowly. What a replica
//! has not been sent yet is its pending output, bounded by `client-output-buffer-limit
//! replica` (hard: at once; soft: held for longer than its seconds); past it, the replica is
//! dropped (and resyncs when it comes back), and its bytes are let go. So a slow replica costs
//! the primary at most its limit, and a full sync under writes succeeds up to it.
//!
//! Next to the bytes, the backlog keeps rill's own record of each unit they hold, once a rill
//! replica has asked for them (`REPLCONF capa rill`): the unit's effects as the log encodes
//! them, and where its bytes start and how many there are. A rill replica is sent each record
//! (`RILL.UNIT`) just before the unit's bytes, applies the record, which carries what Redis'
//! forms cannot (a consumer's seen-time, and every effect exactly as the primary logged it),
//! and takes the bytes that follow only to count them: the offsets are the same for every
//! replica, rill or Redis, so PSYNC and a failover work across both kinds
//! (docs/REPLICATION.md, rill → rill).

use super::forms::{self, Untranslatable};
use crate::client_limits::ClassLimit;
use bytes::Bytes;
use rill_engine::effect::Effect;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

/// The backlog (see the module doc).
#[derive(Debug)]
pub struct Backlog {
    /// The held bytes, oldest first.
    ring: VecDeque<u8>,
    /// At most this many bytes are held (`repl-backlog-size`, at least 1).
    capacity: usize,
    /// The number of the last byte written since the replication ID began (0: none yet).
    offset: u64,
    /// The stream's SELECT state.
    stream: forms::Stream,
    /// Scratch for one unit's bytes.
    scratch: Vec<u8>,
    /// Attached replicas (by client ID): the first byte each has not been sent yet.
    holds: BTreeMap<u64, Hold>,
    /// Replicas dropped for their output limit; their links end when they next look.
    over_limit: BTreeSet<u64>,
    /// `client-output-buffer-limit replica`.
    limit: ClassLimit,
    /// rill's records of the units whose bytes start in the ring, oldest first (see the
    /// module doc).
    records: VecDeque<UnitRecord>,
    /// Whether units are recorded: since a rill replica asked for them.
    keep_records: bool,
    /// The number the next record takes.
    next_record: u64,
    /// Bytes of the records' bodies: held to at most the backlog's size (records of units
    /// without bytes do not move the ring, so the ring alone would not bound them).
    record_bytes: usize,
    /// `lazyfree-lazy-server-del`: the server's own deletions (a time already past) go as
    /// `UNLINK` (set by the journal's sink before each unit).
    pub lazy_server_del: bool,
}

/// rill's own record of one unit in the stream (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitRecord {
    /// Its number: records are sent in this order, each once.
    pub seq: u64,
    /// The first byte of the unit's Redis forms (the offset after the bytes before it, plus 1).
    pub start: u64,
    /// How many bytes of Redis' forms follow it (0: the unit has none, e.g. only a consumer's
    /// seen-time moved).
    pub len: u64,
    /// The unit as the log encodes a record body (`rill_engine::effect::encode_record_buf`).
    pub body: Bytes,
}

/// What a rill replica is to be sent next (see [`Backlog::read_records`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// The record of the unit whose bytes start where the replica is.
    Record(UnitRecord),
    /// Bytes of the stream, up to the next record's start (two slices: the ring may wrap).
    Bytes(&'a [u8], &'a [u8]),
}

/// An attached replica's place in the ring (see the module doc).
#[derive(Debug, Clone, Copy)]
struct Hold {
    /// The first byte not sent to it yet.
    next: u64,
    /// Since when its pending output has been at or above the soft limit.
    over_soft_since: Option<Instant>,
}

/// Why a replica cannot be fed from the backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The bytes it needs are no longer held.
    Behind,
    /// Its pending output passed `client-output-buffer-limit replica`.
    OverLimit,
}

impl Backlog {
    /// An empty backlog of `capacity` bytes whose stream continues after byte `offset`
    /// (0 for a new replication ID).
    pub fn new(capacity: usize, offset: u64) -> Backlog {
        Backlog {
            ring: VecDeque::new(),
            capacity: capacity.max(1),
            offset,
            stream: forms::Stream::new(),
            scratch: Vec::new(),
            holds: BTreeMap::new(),
            over_limit: BTreeSet::new(),
            limit: ClassLimit::default(),
            records: VecDeque::new(),
            keep_records: false,
            next_record: 0,
            record_bytes: 0,
            lazy_server_del: false,
        }
    }

    /// Keep rill's record of every unit from now on (a rill replica attached).
    pub fn keep_records(&mut self) {
        self.keep_records = true;
    }

    /// Whether units are recorded.
    pub fn keeps_records(&self) -> bool {
        self.keep_records
    }

    /// Add the record of a unit whose `len` bytes of Redis' forms are appended next (or were
    /// just appended, if `len` is 0: none). Called by whoever appends the unit, before it.
    pub fn add_record(&mut self, len: u64, body: Bytes) {
        let seq = self.next_record;
        self.next_record += 1;
        self.record_bytes += body.len();
        self.records.push_back(UnitRecord { seq, start: self.offset + 1, len, body });
        // The oldest go first: a replica that needed one takes that unit's bytes instead.
        while self.record_bytes > self.capacity {
            let Some(r) = self.records.pop_front() else { break };
            self.record_bytes -= r.body.len();
        }
    }

    /// What to send replica `id`, a rill replica that has been sent every byte before `from`
    /// and every record up to number `sent` (`None`: none yet; the first it is sent is then
    /// the first whose unit starts at or after `from`): the next record if its unit starts at
    /// `from`, else the bytes from `from` up to the next record's start (at most `max`).
    pub fn read_records(&mut self, id: u64, from: u64, sent: Option<u64>, max: usize) -> Result<Next<'_>, Lost> {
        // The first record not sent yet whose unit starts at or after `from`.
        let after = sent.map_or(0, |s| s + 1);
        // Records are numbered one after another: the one after the last sent is found by
        // its number (a feed asks for each in turn), the search is for the others.
        let direct = self.records.front().and_then(|first| usize::try_from(after.checked_sub(first.seq)?).ok());
        let i = match direct {
            Some(i) if self.records.get(i).is_some_and(|r| r.seq == after && r.start >= from) => i,
            _ => self.records.partition_point(|r| r.seq < after || r.start < from),
        };
        let next = self.records.get(i).cloned();
        let (x, y) = self.read(id, from)?;
        match next {
            Some(r) if r.start == from => Ok(Next::Record(r)),
            next => {
                let limit = next.map_or(max, |r| max.min(usize::try_from(r.start - from).unwrap_or(usize::MAX)));
                let x = x.get(..x.len().min(limit)).unwrap_or_default();
                let y = y.get(..y.len().min(limit - x.len())).unwrap_or_default();
                Ok(Next::Bytes(x, y))
            }
        }
    }

    /// Hold the stream from byte `from` on for replica `id` (attached by PSYNC or SYNC), under
    /// `limit` (`client-output-buffer-limit replica`, which also applies to every other
    /// attached replica from now on).
    pub fn hold(&mut self, id: u64, from: u64, limit: ClassLimit) {
        self.limit = limit;
        self.over_limit.remove(&id);
        self.holds.insert(id, Hold { next: from, over_soft_since: None });
    }

    /// Whether replica `id` was dropped for passing its output limit.
    pub fn is_over_limit(&self, id: u64) -> bool {
        self.over_limit.contains(&id)
    }

    /// `client-output-buffer-limit replica` changed (CONFIG SET).
    pub fn set_limit(&mut self, limit: ClassLimit) {
        self.limit = limit;
    }

    /// Replica `id`'s link ended: its bytes are no longer held for it.
    pub fn release(&mut self, id: u64) {
        self.holds.remove(&id);
        self.over_limit.remove(&id);
        self.trim();
    }

    /// The bytes from byte number `from` to the end for replica `id`, which has been sent
    /// everything before `from` (so those are no longer held for it).
    pub fn read(&mut self, id: u64, from: u64) -> Result<(&[u8], &[u8]), Lost> {
        if self.over_limit.contains(&id) {
            return Err(Lost::OverLimit);
        }
        if let Some(h) = self.holds.get_mut(&id) {
            if from > h.next {
                h.next = from;
                self.trim();
            }
        }
        self.since(from).ok_or(Lost::Behind)
    }

    /// The number of the last byte written (`master_repl_offset`).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The number of the first byte held (`repl_backlog_first_byte_offset`): `offset() + 1`
    /// while nothing is held.
    pub fn first_byte_offset(&self) -> u64 {
        self.offset + 1 - self.ring.len() as u64
    }

    /// How many bytes are held (`repl_backlog_histlen`).
    pub fn histlen(&self) -> usize {
        self.ring.len()
    }

    /// Bytes the backlog has allocated: the ring (what it holds, and room it grew for a
    /// replica) and the records kept for rill replicas (Redis' `repl_buffer_mem`).
    pub fn allocated(&self) -> usize {
        self.ring.capacity() + self.record_bytes + self.records.capacity() * std::mem::size_of::<UnitRecord>()
    }

    /// `repl-backlog-size`.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Change `repl-backlog-size`: a smaller backlog drops its oldest bytes.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        self.trim();
    }

    /// Append one committed unit, in Redis' forms. Returns how many bytes it added. A unit
    /// with no Redis form (a record from an old log) adds nothing and says so: the replicas
    /// must then resync fully.
    /// `record`: rill's record of the unit (see the module doc), kept if records are.
    pub fn append_unit(
        &mut self,
        effects: &[Effect],
        time_ms: i64,
        transaction: bool,
        record: impl FnOnce() -> Bytes,
    ) -> Result<usize, Untranslatable> {
        let commands = forms::commands_with(effects, time_ms, self.lazy_server_del)?;
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        self.stream.encode(&commands, transaction, &mut bytes);
        if self.keep_records {
            self.add_record(bytes.len() as u64, record());
        }
        self.append(&bytes);
        let n = bytes.len();
        self.scratch = bytes;
        Ok(n)
    }

    /// [`Backlog::append_unit`] for a unit whose effects are all commands that go as they
    /// were recorded ([`forms::as_recorded`]): their forms are written straight from the
    /// unit's buffer.
    pub fn append_unit_in_place(
        &mut self,
        commands: rill_engine::effect::CommandsInPlace<'_>,
        transaction: bool,
        record: impl FnOnce() -> Bytes,
    ) -> usize {
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        self.stream.encode_in_place(commands, transaction, &mut bytes);
        if self.keep_records {
            self.add_record(bytes.len() as u64, record());
        }
        self.append(&bytes);
        let n = bytes.len();
        self.scratch = bytes;
        n
    }

    /// Empty, continuing after byte `offset` (a replica's full sync from its primary).
    pub fn reset(&mut self, offset: u64) {
        self.ring.clear();
        self.holds.clear();
        self.over_limit.clear();
        self.records.clear();
        self.record_bytes = 0;
        self.offset = offset;
        self.stream = forms::Stream::new();
    }

    /// A replica starts reading at the current end after loading a snapshot: the next unit
    /// selects its database whatever was selected before.
    pub fn forget_selected(&mut self) {
        self.stream = forms::Stream::new();
    }

    /// The database the stream selected last (`None`: nothing since it began or since a new
    /// reader started).
    pub fn selected_db(&self) -> Option<usize> {
        self.stream.selected()
    }

    /// Append bytes of the stream as they are (PING, `REPLCONF GETACK *`).
    pub fn append(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as u64;
        if bytes.len() >= self.capacity && self.holds.is_empty() {
            self.ring.clear();
            self.ring.extend(bytes.get(bytes.len() - self.capacity..).unwrap_or_default());
            self.drop_old_records();
            return;
        }
        self.ring.extend(bytes);
        self.check_limits();
        self.trim();
    }

    /// Drop the holds of replicas whose pending output passed their limit.
    fn check_limits(&mut self) {
        let ClassLimit { hard_bytes, soft_bytes, soft_seconds } = self.limit;
        if hard_bytes == 0 && soft_bytes == 0 {
            return;
        }
        // A hard limit below `repl-backlog-size` is taken as that size, as Redis takes it: what
        // a replica has not been sent yet within the backlog's size costs nothing of its own
        // (the backlog holds those bytes anyway), and a replica dropped there would continue
        // partially from the same backlog and be dropped again.
        let hard_bytes = if hard_bytes > 0 { hard_bytes.max(self.capacity as u64) } else { 0 };
        let end = self.offset + 1;
        let mut dropped = Vec::new();
        // The clock is read only for a replica over its soft limit (not once per unit).
        let mut now: Option<Instant> = None;
        for (id, h) in &mut self.holds {
            let pending = end.saturating_sub(h.next);
            let over_soft = soft_bytes > 0 && pending >= soft_bytes;
            if !over_soft {
                h.over_soft_since = None;
            }
            let soft_expired = over_soft && {
                let now = *now.get_or_insert_with(Instant::now);
                let since = *h.over_soft_since.get_or_insert(now);
                now.duration_since(since).as_secs_f64() > soft_seconds.max(0) as f64
            };
            if (hard_bytes > 0 && pending >= hard_bytes) || soft_expired {
                dropped.push(*id);
            }
        }
        for id in dropped {
            // Redis' words, its client described by what the backlog knows of it.
            tracing::warn!(
                "Client id={id} flags=S scheduled to be closed ASAP for overcoming of output buffer limits."
            );
            self.holds.remove(&id);
            self.over_limit.insert(id);
        }
    }

    /// The bytes from byte number `from` to the end, as two slices (the ring may wrap), or
    /// `None` if `from` is not inside the backlog: from `first_byte_offset()` to `offset() + 1`
    /// (nothing is missing) a replica can continue, else it needs a full resync.
    pub fn since(&self, from: u64) -> Option<(&[u8], &[u8])> {
        let first = self.first_byte_offset();
        if from < first || from > self.offset + 1 {
            return None;
        }
        let skip = usize::try_from(from - first).ok()?;
        let (a, b) = self.ring.as_slices();
        Some(if skip <= a.len() {
            (a.get(skip..).unwrap_or_default(), b)
        } else {
            (&[][..], b.get(skip - a.len()..).unwrap_or_default())
        })
    }

    /// Drop the bytes neither the backlog's size nor an attached replica keeps.
    fn trim(&mut self) {
        if self.ring.len() <= self.capacity {
            return;
        }
        let mut excess = self.ring.len() - self.capacity;
        if let Some(needed) = self.holds.values().map(|h| h.next).min() {
            let first = self.first_byte_offset();
            excess = excess.min(usize::try_from(needed.saturating_sub(first)).unwrap_or(usize::MAX));
        }
        if excess > 0 {
            self.ring.drain(..excess);
            if self.ring.capacity() > 4 * self.capacity.max(self.ring.len()) {
                // The ring grew for a replica that is gone or caught up: give the memory back.
                self.ring.shrink_to(self.capacity.max(self.ring.len()));
            }
            self.drop_old_records();
        }
    }

    /// Drop the records of units whose first bytes are no longer held: a replica can start
    /// only where bytes are, and one starting inside a unit takes its bytes as they are.
    fn drop_old_records(&mut self) {
        let first = self.first_byte_offset();
        while self.records.front().is_some_and(|r| r.start < first) {
            if let Some(r) = self.records.pop_front() {
                self.record_bytes -= r.body.len();
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn joined(parts: (&[u8], &[u8])) -> Vec<u8> {
        [parts.0, parts.1].concat()
    }

    #[test]
    fn offsets_count_bytes_as_redis_does() {
        let mut b = Backlog::new(10, 0);
        assert_eq!((b.offset(), b.first_byte_offset(), b.histlen()), (0, 1, 0));
        assert_eq!(joined(b.since(1).unwrap()), b"", "a replica with everything continues");
        assert!(b.since(0).is_none() && b.since(2).is_none());
        b.append(b"abcdef");
        assert_eq!((b.offset(), b.first_byte_offset(), b.histlen()), (6, 1, 6));
        assert_eq!(joined(b.since(1).unwrap()), b"abcdef");
        assert_eq!(joined(b.since(4).unwrap()), b"def");
        assert_eq!(joined(b.since(7).unwrap()), b"");
        assert!(b.since(8).is_none(), "an offset the primary never reached");
        b.append(b"ghijkl");
        assert_eq!((b.offset(), b.first_byte_offset(), b.histlen()), (12, 3, 10));
        assert!(b.since(2).is_none(), "dropped: full resync");
        assert_eq!(joined(b.since(3).unwrap()), b"cdefghijkl");
        assert_eq!(joined(b.since(10).unwrap()), b"jkl");
        b.append(b"0123456789ABC");
        assert_eq!((b.offset(), b.first_byte_offset()), (25, 16));
        assert_eq!(joined(b.since(16).unwrap()), b"3456789ABC", "a write larger than the backlog keeps its tail");
    }

    /// Any run of appends: `since` gives exactly the model's tail for every offset it
    /// accepts, and refuses exactly the offsets outside the held bytes.
    #[test]
    fn since_matches_a_model_across_the_ring_wrapping() {
        let mut b = Backlog::new(37, 0);
        let mut all: Vec<u8> = Vec::new();
        let mut x: u32 = 7;
        for round in 0..200u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let len = (x >> 16) as usize % 23;
            let chunk: Vec<u8> = (0..len).map(|i| (round as usize * 31 + i) as u8).collect();
            b.append(&chunk);
            all.extend(&chunk);
            let end = all.len() as u64;
            let first = end + 1 - all.len().min(37) as u64;
            assert_eq!((b.offset(), b.first_byte_offset()), (end, first));
            for from in first.saturating_sub(2)..=end + 2 {
                let want = (from >= first && from <= end + 1).then(|| all[(from - 1) as usize..].to_vec());
                assert_eq!(b.since(from).map(joined), want, "from {from} after {end} bytes");
            }
        }
    }

    #[test]
    fn a_continuing_backlog_starts_after_its_offset_and_shrinks_on_request() {
        let mut b = Backlog::new(100, 1000);
        assert_eq!((b.offset(), b.first_byte_offset()), (1000, 1001));
        b.append(b"xyz");
        assert_eq!(joined(b.since(1001).unwrap()), b"xyz");
        b.set_capacity(2);
        assert_eq!((b.first_byte_offset(), b.histlen(), b.capacity()), (1002, 2, 2));
        assert_eq!(joined(b.since(1002).unwrap()), b"yz");
    }

    fn limit(hard: u64, soft: u64, soft_seconds: i64) -> ClassLimit {
        ClassLimit { hard_bytes: hard, soft_bytes: soft, soft_seconds }
    }

    #[test]
    fn an_attached_replica_keeps_what_it_was_not_sent_up_to_its_limit() {
        let mut b = Backlog::new(4, 0);
        b.hold(7, 1, limit(20, 0, 0));
        b.append(b"abcdef");
        b.append(b"ghij");
        assert_eq!((b.first_byte_offset(), b.histlen()), (1, 10), "held beyond the backlog's 4 bytes");
        assert_eq!(b.read(7, 1).map(joined), Ok(b"abcdefghij".to_vec()));
        // Sent up to byte 8: only the backlog's own size and byte 9 on are kept.
        assert_eq!(b.read(7, 9).map(joined), Ok(b"ij".to_vec()));
        assert_eq!((b.first_byte_offset(), b.histlen()), (7, 4));
        // Another replica that never reads passes the hard limit: dropped, its bytes let go;
        // the one that reads goes on.
        assert_eq!(b.read(7, 11).map(joined), Ok(Vec::new()));
        b.hold(8, 11, limit(20, 0, 0));
        b.append(&[b'x'; 19]);
        assert_eq!(b.histlen(), 19, "held for both");
        assert_eq!(b.read(7, 30).map(joined), Ok(Vec::new()));
        assert_eq!(b.histlen(), 19, "still held for 8");
        b.append(b"y");
        assert!(b.is_over_limit(8) && !b.is_over_limit(7));
        assert_eq!(b.read(8, 11), Err(Lost::OverLimit));
        assert_eq!(b.histlen(), 4, "nothing held beyond the backlog");
        assert_eq!(b.read(7, 30).map(joined), Ok(b"y".to_vec()));
        b.release(8);
        b.hold(8, b.offset() + 1, limit(20, 0, 0));
        assert!(b.read(8, b.offset() + 1).is_ok(), "attached again: fed again");
    }

    #[test]
    fn a_hard_limit_below_the_backlogs_size_is_taken_as_that_size() {
        let mut b = Backlog::new(16, 0);
        b.hold(1, 1, limit(4, 0, 0));
        b.append(&[b'x'; 15]);
        assert!(b.read(1, 1).is_ok(), "15 bytes pending: within the backlog's 16");
        b.append(b"y");
        assert_eq!(b.read(1, 1), Err(Lost::OverLimit), "16 bytes pending: at the limit");
    }

    #[test]
    fn the_soft_limit_drops_a_replica_held_above_it_for_longer_than_its_seconds() {
        let mut b = Backlog::new(4, 0);
        b.hold(1, 1, limit(0, 5, 0));
        b.append(b"abc");
        assert!(b.read(1, 1).is_ok(), "below the soft limit");
        b.append(b"def");
        assert!(b.read(1, 1).is_ok(), "at it since now: not for longer than 0 s yet");
        std::thread::sleep(std::time::Duration::from_millis(5));
        b.append(b"g");
        assert_eq!(b.read(1, 1), Err(Lost::OverLimit));
    }

    #[test]
    fn units_go_in_as_redis_forms() {
        let mut b = Backlog::new(1 << 20, 0);
        let set =
            Effect::command(0, vec![Bytes::from_static(b"SET"), Bytes::from_static(b"k"), Bytes::from_static(b"v")]);
        let n = b.append_unit(std::slice::from_ref(&set), 0, true, Bytes::new).unwrap();
        let wire = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
        assert_eq!(n, wire.len());
        assert_eq!(joined(b.since(1).unwrap()), wire);
        // The same database: no SELECT this time.
        let n2 = b.append_unit(&[set], 0, true, Bytes::new).unwrap();
        assert_eq!(n2, wire.len() - 23);
        assert_eq!(b.offset() as usize, n + n2);
    }

    /// A rill replica is sent each unit's record just before the unit's bytes, each record
    /// once, records of units without bytes included; one starting inside a unit takes that
    /// unit's bytes as they are; records go with the bytes they precede, and never hold more
    /// than the backlog's size.
    #[test]
    fn records_go_before_their_units_bytes_once_each() {
        let mut b = Backlog::new(256, 0);
        b.keep_records();
        let set = |v: &'static str| {
            Effect::command(
                0,
                vec![Bytes::from_static(b"SET"), Bytes::from_static(b"k"), Bytes::from_static(v.as_bytes())],
            )
        };
        let n1 = b.append_unit(&[set("1")], 0, true, || Bytes::from_static(b"r1")).unwrap() as u64;
        b.add_record(0, Bytes::from_static(b"seen"));
        let n2 = b.append_unit(&[set("2")], 0, true, || Bytes::from_static(b"r2")).unwrap() as u64;
        b.hold(9, 1, ClassLimit::default());
        let mut sent = None;
        let mut got = Vec::new();
        let mut from = 1;
        loop {
            match b.read_records(9, from, sent, 1 << 20).unwrap() {
                Next::Record(r) => {
                    sent = Some(r.seq);
                    got.push(format!("record {} len {} at {}", String::from_utf8_lossy(&r.body), r.len, r.start));
                }
                Next::Bytes(x, y) if x.len() + y.len() == 0 => break,
                Next::Bytes(x, y) => {
                    got.push(format!("{} bytes", x.len() + y.len()));
                    from += (x.len() + y.len()) as u64;
                }
            }
        }
        let start2 = n1 + 1;
        assert_eq!(
            got,
            vec![
                format!("record r1 len {n1} at 1"),
                format!("{n1} bytes"),
                format!("record seen len 0 at {start2}"),
                format!("record r2 len {n2} at {start2}"),
                format!("{n2} bytes"),
            ]
        );
        // From inside the first unit: its bytes as they are, then the records after it.
        match b.read_records(9, 3, None, 1 << 20).unwrap() {
            Next::Bytes(x, y) => assert_eq!((x.len() + y.len()) as u64, n1 - 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(b.read_records(9, start2, None, 1 << 20).unwrap(), Next::Record(r) if &r.body[..] == b"seen"));
        // Past the backlog's size, the oldest records go; and with the bytes they precede.
        b.release(9);
        for _ in 0..40 {
            b.add_record(0, Bytes::from_static(b"0123456789"));
        }
        assert!(
            b.record_bytes <= 256 && b.records.len() == 25,
            "{} records, {} bytes",
            b.records.len(),
            b.record_bytes
        );
        b.append(&[b'x'; 257]);
        assert!(b.records.is_empty() && b.record_bytes == 0, "their units' bytes left the ring");
    }
}
