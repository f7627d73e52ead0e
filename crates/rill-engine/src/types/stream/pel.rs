//! The pending entries list (PEL) of one consumer group: every entry delivered to the group
//! and not yet acknowledged (spec §1.3, §4), with the consumer PELs, indexed three ways.
//!
//! ```text
//! Pel
//!   by_id: ChunkedMap<StreamId, Record>        16 + 16 B     XACK, XPENDING, XAUTOCLAIM
//!     1-0 -> {owner: 0 (alice), time: 1700000000100, count: 1}
//!     2-0 -> {owner: RELEASED,  time: seq 7,         count: 3}
//!     3-0 -> {owner: 1 (bob),   time: 1700000000050, count: 2}
//!     4-0 -> {owner: RELEASED,  time: seq 8,         count: 0}
//!
//!   claim order, oldest first (XREADGROUP ... CLAIM):
//!     head ┌──── nack_zone: (seq, id) 8 + 16 B ───┐┌──── delivered: (time, id) 8 + 16 B ────┐ tail
//!          │ (7, 2-0)  (8, 4-0)                   ││ (..050, 3-0)  (..100, 1-0)              │
//!          └──────────────────────────────────────┘└─────────────────────────────────────────┘
//!
//!   owners: Vec<Option<Owner>>, by OwnerId            one slot per consumer
//!     0: {name: "alice", ids: ChunkedSet<StreamId> = {1-0}}     16 B per owned entry
//!     1: {name: "bob",   ids: {3-0}}
//!
//!   spilled_counts: BTreeMap<StreamId, u64>           counts that do not fit in a u32
//! ```
//!
//! Every index is a [`ChunkedMap`] (sorted vectors of at most 256 pairs under a B-tree
//! directory), which packs pairs that arrive in key order (new deliveries by ID, claims by time)
//! with no slack. A pending entry owned by a consumer costs 32 B in `by_id`, 24 B in
//! `delivered` and 16 B in its owner's set: 72 B plus about 1 B of directory, where std
//! B-trees filled in key order cost about 61 B per 32-byte pair. A released entry costs 32 +
//! 24 B.
//!
//! The record names its owner by a 4-byte [`OwnerId`] (the slot of the consumer in `owners`,
//! reused after the consumer is deleted, when none of its entries is left), and keeps its
//! delivery count in 4 bytes; a count of 2^32 − 1 or more (XNACK FATAL sets 2^63 − 1,
//! RETRYCOUNT any value) is kept in `spilled_counts`, marked by [`COUNT_SPILLED`] in the
//! record.
//!
//! Claim order: the XNACK zone comes first, in the order XNACK released its entries (`seq` is a
//! per-PEL counter bumped by every release, so re-NACKing moves an entry to the end of the
//! zone; a released record keeps its `seq` in the time field, as its delivery time is 0 by
//! definition). Then owned entries by last delivery time, and entries delivered in the same
//! millisecond in the order they were delivered, as in Redis (which keeps a list, appends on
//! every delivery and puts an `XCLAIM ... TIME` in the past after the entries of that time).
//! An owned record's time field is therefore an order key, `time × 2^16 + tie`, where `tie`
//! counts up within the millisecond; past 65 535 deliveries in one millisecond to one group
//! the tie stays at its maximum and those entries fall back to ID order. A PEL rebuilt from
//! a snapshot gets its ties in ID order, as Redis' does after loading an RDB file.
//!
//! Costs for a PEL of n entries: lookup O(log n); every change (deliver, claim, release,
//! acknowledge) is one remove and one insert in `by_id`, in one claim-order index and in at
//! most two owner sets, each O(log n + 256). Claiming k entries for `XREADGROUP ... CLAIM` costs
//! O(k log n); finding where to start costs O(log n). A consumer's own entries after an ID:
//! O(log P) to start for P owned, then O(log n) per entry to read its record.

use super::chunked::{ChunkedMap, ChunkedSet};
use super::StreamId;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Where a pending entry sits in the claim order (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClaimOrder {
    /// Released by XNACK; the number is the release sequence (FIFO zone at the head).
    Nacked(u64),
    /// Owned; the last delivery time in Unix ms.
    Delivered(i64),
}

/// A consumer's slot in its group's PEL (see the module doc); stable while the consumer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerId(u32);

/// One delivered-but-unacknowledged entry ("NACK" in Redis' terms), as read from the PEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingEntry<'a> {
    /// The consumer it was delivered to; `None` after XNACK released it.
    pub owner: Option<&'a Bytes>,
    /// Last delivery time, Unix ms; 0 while released by XNACK.
    pub delivery_time_ms: i64,
    /// Deliveries so far (saturates at [`DELIVERY_COUNT_MAX`]).
    pub delivery_count: u64,
    order: ClaimOrder,
}

impl PendingEntry<'_> {
    /// Where this entry sits in the claim order.
    pub fn claim_order(&self) -> ClaimOrder {
        self.order
    }
}

/// Delivery counts saturate here (2^63 − 1), as in Redis.
pub const DELIVERY_COUNT_MAX: u64 = i64::MAX as u64;

/// The record's owner field for a released entry.
const RELEASED: u32 = u32::MAX;

/// The record's count field for a count kept in `spilled_counts`.
pub const COUNT_SPILLED: u32 = u32::MAX;

/// Bits of an owned record's order key below its delivery time (see the module doc).
const TIE_BITS: u32 = 16;
/// The largest tie within one millisecond.
const TIE_MAX: i64 = (1 << TIE_BITS) - 1;
/// Delivery times the order key can hold, ± (about 2 200 years around 1970); others are
/// clamped (commands never produce them: XCLAIM TIME/IDLE clamp to [0, now]).
const TIME_LIMIT: i64 = i64::MAX >> (TIE_BITS + 1);

/// The stored form of a pending entry: 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    /// Owned: the order key, last delivery time (Unix ms) × 2^16 + tie (see the module doc).
    /// Released: the XNACK release sequence (as bits).
    time_or_seq: i64,
    /// Delivery count, or [`COUNT_SPILLED`].
    count: u32,
    /// An [`OwnerId`], or [`RELEASED`]. Invariant: `o` iff the ID is in `owners[o].ids`.
    owner: u32,
}

/// A consumer as the PEL knows it.
#[derive(Debug, Clone)]
struct Owner {
    name: Bytes,
    /// The IDs this consumer owns (its consumer PEL); the records live in `by_id`.
    ids: ChunkedSet<StreamId>,
}

/// A group's PEL (see the module doc for the picture).
#[derive(Debug, Clone, Default)]
pub struct Pel {
    /// Every pending entry by ID.
    by_id: ChunkedMap<StreamId, Record>,
    /// Owned entries by (order key, ID). Invariant: `(k, id)` is here iff `by_id[id]` is
    /// owned with order key `k`.
    delivered: ChunkedSet<(i64, StreamId)>,
    /// The last order key handed out: the largest of its millisecond.
    last_key: Option<i64>,
    /// Released entries by (release sequence, ID): the XNACK zone. Invariant: `(s, id)` is
    /// here iff `by_id[id]` is released with sequence `s`.
    nack_zone: ChunkedSet<(u64, StreamId)>,
    /// The next XNACK release sequence.
    next_nack_seq: u64,
    /// Consumers by [`OwnerId`]; `None` slots are free (listed in `free_owners`).
    owners: Vec<Option<Owner>>,
    free_owners: Vec<u32>,
    /// Delivery counts ≥ [`COUNT_SPILLED`], for records marked so.
    spilled_counts: BTreeMap<StreamId, u64>,
}

impl PartialEq for Pel {
    /// The same records (owners compared by name), the same claim order and the same consumer
    /// names; slots, sequences and chunking may differ.
    fn eq(&self, other: &Self) -> bool {
        let names = |p: &Pel| {
            let mut v: Vec<Bytes> = p.owners.iter().flatten().map(|o| o.name.clone()).collect();
            v.sort();
            v
        };
        self.len() == other.len()
            && self.iter().eq(other.iter())
            && self.claim_order().map(|(id, _)| id).eq(other.claim_order().map(|(id, _)| id))
            && names(self) == names(other)
    }
}

impl Eq for Pel {}

impl Pel {
    /// Pending entries. O(1).
    pub fn len(&self) -> u64 {
        self.by_id.len() as u64
    }

    /// Whether nothing is pending. O(1).
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Entries in the XNACK zone. O(1).
    pub fn nacked_count(&self) -> u64 {
        self.nack_zone.len() as u64
    }

    fn owner(&self, owner: u32) -> Option<&Owner> {
        self.owners.get(owner as usize).and_then(Option::as_ref)
    }

    fn owner_mut(&mut self, owner: u32) -> Option<&mut Owner> {
        self.owners.get_mut(owner as usize).and_then(Option::as_mut)
    }

    fn view(&self, id: StreamId, r: Record) -> PendingEntry<'_> {
        let delivery_count = match r.count {
            COUNT_SPILLED => self.spilled_counts.get(&id).copied().unwrap_or(u64::from(COUNT_SPILLED)),
            n => u64::from(n),
        };
        if r.owner == RELEASED {
            PendingEntry {
                owner: None,
                delivery_time_ms: 0,
                delivery_count,
                order: ClaimOrder::Nacked(r.time_or_seq as u64),
            }
        } else {
            PendingEntry {
                owner: self.owner(r.owner).map(|o| &o.name),
                delivery_time_ms: r.time_or_seq >> TIE_BITS,
                delivery_count,
                order: ClaimOrder::Delivered(r.time_or_seq),
            }
        }
    }

    /// The record for `id`. O(log n).
    pub fn get(&self, id: StreamId) -> Option<PendingEntry<'_>> {
        self.by_id.get(&id).map(|r| self.view(id, *r))
    }

    /// Lookups of IDs in ascending order, cheaper than [`Self::get`] each while they stay
    /// close (see [`super::chunked::Finder`]).
    pub fn finder<'p>(&'p self) -> impl FnMut(StreamId) -> Option<PendingEntry<'p>> + 'p {
        let mut by_id = self.by_id.finder();
        move |id| by_id.get(&id).map(|r| self.view(id, *r))
    }

    /// Whether `id` is pending. O(log n).
    pub fn contains(&self, id: StreamId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Smallest and largest pending IDs. O(log n).
    pub fn bounds(&self) -> Option<(StreamId, StreamId)> {
        Some((self.by_id.first()?.0, self.by_id.last()?.0))
    }

    /// Entries with `start ≤ ID ≤ end`, ascending. O(log n) to start.
    pub fn range(&self, start: StreamId, end: StreamId) -> impl Iterator<Item = (StreamId, PendingEntry<'_>)> + '_ {
        self.by_id.iter_from(start).take_while(move |(id, _)| *id <= end).map(|(id, r)| (id, self.view(id, r)))
    }

    /// Every entry by ID.
    pub fn iter(&self) -> impl Iterator<Item = (StreamId, PendingEntry<'_>)> + '_ {
        self.by_id.iter().map(|(id, r)| (id, self.view(id, r)))
    }

    /// Entries in claim order: the XNACK zone first, then oldest delivery first. O(log n)
    /// per entry.
    pub fn claim_order(&self) -> impl Iterator<Item = (StreamId, PendingEntry<'_>)> + '_ {
        self.nack_zone
            .iter()
            .map(|((_, id), ())| id)
            .chain(self.delivered.iter().map(|((_, id), ())| id))
            .filter_map(|id| self.get(id).map(|e| (id, e)))
    }

    /// Owned entries, oldest delivery first: (delivery time ms, ID). O(log n) to start.
    pub fn owned_by_time(&self) -> impl Iterator<Item = (i64, StreamId)> + '_ {
        self.delivered.iter().map(|((key, id), ())| (key >> TIE_BITS, id))
    }

    // -----------------------------------------------------------------------------------------
    // Owners (consumers)
    // -----------------------------------------------------------------------------------------

    /// Give the consumer `name` a slot. O(1) amortized.
    pub fn add_owner(&mut self, name: Bytes) -> OwnerId {
        let owner = Owner { name, ids: ChunkedSet::default() };
        match self.free_owners.pop() {
            Some(slot) => {
                if let Some(s) = self.owners.get_mut(slot as usize) {
                    *s = Some(owner);
                }
                OwnerId(slot)
            }
            None => {
                self.owners.push(Some(owner));
                // Slots stay below RELEASED: a group would need 2^32 − 1 live consumers.
                OwnerId((self.owners.len() - 1) as u32)
            }
        }
    }

    /// Forget a consumer and every entry it owns (XGROUP DELCONSUMER), freeing its slot.
    /// Returns how many entries went. O(P log n) for P owned entries.
    pub fn remove_owner(&mut self, owner: OwnerId) -> u64 {
        let Some(o) = self.owners.get_mut(owner.0 as usize).and_then(Option::take) else { return 0 };
        self.free_owners.push(owner.0);
        for (id, ()) in o.ids.iter() {
            // The owner's set is gone already; take the record out of the other indexes.
            if let Some(r) = self.by_id.remove(&id) {
                self.unindex(id, r);
            }
        }
        o.ids.len() as u64
    }

    /// Live slots (consumers). O(1).
    pub fn live_owners(&self) -> usize {
        self.owners.len() - self.free_owners.len()
    }

    /// The consumer's name. O(1).
    pub fn owner_name(&self, owner: OwnerId) -> Option<&Bytes> {
        self.owner(owner.0).map(|o| &o.name)
    }

    /// Entries owned by `owner`. O(1).
    pub fn owned_count(&self, owner: OwnerId) -> u64 {
        self.owner(owner.0).map_or(0, |o| o.ids.len() as u64)
    }

    /// IDs owned by `owner` after `after` (inclusive or exclusive), ascending. O(log P) to
    /// start for P owned.
    pub fn owned_ids(&self, owner: OwnerId, after: Bound<StreamId>) -> impl Iterator<Item = StreamId> + '_ {
        let (start, skip) = match after {
            Bound::Included(id) => (id, None),
            Bound::Excluded(id) => (id, Some(id)),
            Bound::Unbounded => (StreamId::MIN, None),
        };
        self.owner(owner.0)
            .into_iter()
            .flat_map(move |o| o.ids.iter_from(start))
            .map(|(id, ())| id)
            .filter(move |id| Some(*id) != skip)
    }

    // -----------------------------------------------------------------------------------------
    // Changes
    // -----------------------------------------------------------------------------------------

    /// Make `id` pending for `owner` with this time and count, replacing any record (and
    /// moving the ID between owner sets). Returns whether a record was replaced. A slot that
    /// is not live leaves the PEL unchanged. O(log n).
    pub fn set_owned(&mut self, id: StreamId, owner: OwnerId, delivery_time_ms: i64, delivery_count: u64) -> bool {
        if self.owner(owner.0).is_none() {
            return false;
        }
        // A new delivery comes after every pending ID: nothing to replace, no lookup needed.
        let existed = self.by_id.last().is_some_and(|(last, _)| last >= id) && self.remove(id);
        let count = self.store_count(id, delivery_count);
        let key = self.order_key(delivery_time_ms);
        self.by_id.insert(id, Record { time_or_seq: key, count, owner: owner.0 });
        self.delivered.insert((key, id), ());
        if let Some(o) = self.owner_mut(owner.0) {
            o.ids.insert(id, ());
        }
        existed
    }

    /// The order key for a delivery at `time_ms`: after every entry delivered in that
    /// millisecond so far. O(1) while deliveries stay in one millisecond, O(log n) for the first
    /// one of a millisecond.
    fn order_key(&mut self, time_ms: i64) -> i64 {
        let time_ms = time_ms.clamp(-TIME_LIMIT, TIME_LIMIT);
        let base = time_ms << TIE_BITS;
        let next = match self.last_key {
            Some(last) if last >> TIE_BITS == time_ms => last + 1,
            // The largest key of this millisecond still pending, if any (keys of a millisecond
            // are only handed out here, so while `last_key` stays in it, it is the largest).
            _ => match self.delivered.last_below(&(base + TIE_MAX + 1, StreamId::MIN)) {
                Some(((key, _), ())) if key >= base => key + 1,
                _ => base,
            },
        };
        let key = next.min(base + TIE_MAX);
        self.last_key = Some(key);
        key
    }

    /// Release `id` to the end of the XNACK zone with this count (no owner, time 0), creating
    /// the record if needed. Returns whether a record was replaced. O(log n).
    pub fn set_nacked(&mut self, id: StreamId, delivery_count: u64) -> bool {
        let seq = self.next_nack_seq;
        self.next_nack_seq = self.next_nack_seq.wrapping_add(1);
        let existed = self.remove(id);
        let count = self.store_count(id, delivery_count);
        self.by_id.insert(id, Record { time_or_seq: seq as i64, count, owner: RELEASED });
        self.nack_zone.insert((seq, id), ());
        existed
    }

    /// Change only the time and count of an existing record, keeping its owner (history
    /// re-reads). False if `id` is not pending or is released. O(log n).
    pub fn touch(&mut self, id: StreamId, delivery_time_ms: i64, delivery_count: u64) -> bool {
        match self.by_id.get(&id) {
            Some(r) if r.owner != RELEASED => self.set_owned(id, OwnerId(r.owner), delivery_time_ms, delivery_count),
            _ => false,
        }
    }

    /// Remove `id` (from its owner's set too). Returns whether it was pending. O(log n).
    pub fn remove(&mut self, id: StreamId) -> bool {
        let Some(r) = self.by_id.remove(&id) else { return false };
        if let Some(o) = self.owner_mut(r.owner) {
            o.ids.remove(&id);
        }
        self.unindex(id, r);
        true
    }

    /// Drop the claim-order key and spilled count of a record just taken out of `by_id`.
    fn unindex(&mut self, id: StreamId, r: Record) {
        if r.owner == RELEASED {
            self.nack_zone.remove(&(r.time_or_seq as u64, id));
        } else {
            self.delivered.remove(&(r.time_or_seq, id));
        }
        if r.count == COUNT_SPILLED {
            self.spilled_counts.remove(&id);
        }
    }

    /// The record's count field for `count` (saturated), spilling it if needed.
    fn store_count(&mut self, id: StreamId, count: u64) -> u32 {
        let count = count.min(DELIVERY_COUNT_MAX);
        match u32::try_from(count) {
            Ok(n) if n != COUNT_SPILLED => n,
            _ => {
                self.spilled_counts.insert(id, count);
                COUNT_SPILLED
            }
        }
    }

    /// Heap bytes held by the indexes (directory node headers not counted). O(n / 256).
    pub fn heap_bytes(&self) -> usize {
        self.by_id.heap_bytes()
            + self.delivered.heap_bytes()
            + self.nack_zone.heap_bytes()
            + self.owners.iter().flatten().map(|o| o.ids.heap_bytes()).sum::<usize>()
    }

    /// Check the indexes agree. O(n log n).
    pub fn validate(&self) -> bool {
        let owned: usize = self.owners.iter().flatten().map(|o| o.ids.len()).sum();
        self.by_id.validate()
            && self.delivered.validate()
            && self.nack_zone.validate()
            && self.by_id.len() == self.delivered.len() + self.nack_zone.len()
            && owned == self.delivered.len()
            && self.by_id.iter().all(|(id, r)| {
                let indexed = if r.owner == RELEASED {
                    self.nack_zone.contains_key(&(r.time_or_seq as u64, id))
                } else {
                    self.delivered.contains_key(&(r.time_or_seq, id))
                        && self.owner(r.owner).is_some_and(|o| o.ids.contains_key(&id))
                };
                let spilled = self.spilled_counts.get(&id);
                indexed
                    && match r.count {
                        COUNT_SPILLED => spilled.is_some_and(|c| *c >= u64::from(COUNT_SPILLED)),
                        _ => spilled.is_none(),
                    }
            })
            && self.spilled_counts.len() == self.by_id.iter().filter(|(_, r)| r.count == COUNT_SPILLED).count()
            && self.owners.iter().filter(|o| o.is_none()).count() == self.free_owners.len()
            && self.owners.iter().flatten().all(|o| o.ids.validate())
    }
}
