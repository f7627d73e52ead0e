//! The pending entries list (PEL) of one consumer group: every entry delivered to the group
//! and not yet acknowledged (spec §1.3, §4), indexed twice.
//!
//! ```text
//! Pel
//!   by_id: BTreeMap<StreamId, PendingEntry>          XACK, XPENDING, XAUTOCLAIM, history reads
//!     1-0 -> {owner: Some("alice"), time: 1700000000100, count: 1, order: Delivered(..100)}
//!     2-0 -> {owner: None,          time: 0,             count: 3, order: Nacked(7)}
//!     3-0 -> {owner: Some("bob"),   time: 1700000000050, count: 2, order: Delivered(..050)}
//!     4-0 -> {owner: None,          time: 0,             count: 0, order: Nacked(8)}
//!
//!   by_claim_order: BTreeSet<(ClaimOrder, StreamId)>  XREADGROUP ... CLAIM, oldest first
//!     head ┌──────────── XNACK zone (FIFO) ────────────┐┌──── delivered, by time ───────┐ tail
//!          │ (Nacked(7), 2-0)  (Nacked(8), 4-0)        ││ (Delivered(..050), 3-0)        │
//!          │                                           ││ (Delivered(..100), 1-0)        │
//!          └───────────────────────────────────────────┘└────────────────────────────────┘
//!
//!   Consumer "alice".pel: BTreeSet<StreamId> = {1-0}      IDs only: the record lives once,
//!   Consumer "bob".pel:   BTreeSet<StreamId> = {3-0}      in by_id (see group.rs)
//! ```
//!
//! `ClaimOrder::Nacked(seq)` sorts before every `Delivered(time)`, so the XNACK zone is the
//! head of the order and, within it, entries come out in the order XNACK released them
//! (`seq` is a per-group counter bumped by every release, so re-NACKing moves an entry to the
//! end of the zone). Outside the zone entries are ordered by last delivery time, ties by ID
//! (Redis keeps a list and appends on every delivery; an explicit `XCLAIM ... TIME` in the past
//! is placed by its time here rather than at the tail).
//!
//! Each record stores its own order key, so moving an entry is one remove and one insert in
//! each index: O(log n) for a PEL of n entries, whatever its size. Claiming k entries for
//! `XREADGROUP ... CLAIM` costs O(k log n); finding where to start costs O(log n).

use super::StreamId;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// Where a pending entry sits in the claim order (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClaimOrder {
    /// Released by XNACK; the number is the release sequence (FIFO zone at the head).
    Nacked(u64),
    /// Owned; the last delivery time in Unix ms.
    Delivered(i64),
}

/// One delivered-but-unacknowledged entry ("NACK" in Redis' terms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    /// The consumer it was delivered to; `None` after XNACK released it. Invariant: `Some(c)`
    /// iff the ID is in consumer `c`'s PEL set.
    pub owner: Option<Bytes>,
    /// Last delivery time, Unix ms; 0 while released by XNACK.
    pub delivery_time_ms: i64,
    /// Deliveries so far (saturates at [`DELIVERY_COUNT_MAX`]).
    pub delivery_count: u64,
    /// Key in [`Pel::by_claim_order`]; `Nacked` iff `owner` is `None`.
    order: ClaimOrder,
}

impl PendingEntry {
    /// Where this entry sits in the claim order.
    pub fn claim_order(&self) -> ClaimOrder {
        self.order
    }
}

/// Delivery counts saturate here (2^63 − 1), as in Redis.
pub const DELIVERY_COUNT_MAX: u64 = i64::MAX as u64;

/// A group's PEL (see the module doc for the picture).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pel {
    /// Every pending entry by ID.
    by_id: BTreeMap<StreamId, PendingEntry>,
    /// The same entries by claim order. Invariant: `(e.order, id)` is here iff `by_id[id] = e`.
    by_claim_order: BTreeSet<(ClaimOrder, StreamId)>,
    /// Entries in the XNACK zone (`owner` is `None`).
    nacked: u64,
    /// The next XNACK release sequence.
    next_nack_seq: u64,
}

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
        self.nacked
    }

    /// The record for `id`. O(log n).
    pub fn get(&self, id: StreamId) -> Option<&PendingEntry> {
        self.by_id.get(&id)
    }

    /// Whether `id` is pending. O(log n).
    pub fn contains(&self, id: StreamId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Smallest and largest pending IDs. O(log n).
    pub fn bounds(&self) -> Option<(StreamId, StreamId)> {
        Some((*self.by_id.first_key_value()?.0, *self.by_id.last_key_value()?.0))
    }

    /// Entries with `start ≤ ID ≤ end`, ascending. O(log n) to start.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl Iterator<Item = (StreamId, &PendingEntry)> + '_ {
        let r = if start <= end { Some(self.by_id.range(start..=end)) } else { None };
        r.into_iter().flatten().map(|(k, v)| (*k, v))
    }

    /// Every entry by ID.
    pub fn iter(&self) -> impl Iterator<Item = (StreamId, &PendingEntry)> + '_ {
        self.by_id.iter().map(|(k, v)| (*k, v))
    }

    /// Entries in claim order: the XNACK zone first, then oldest delivery first.
    pub fn claim_order(&self) -> impl Iterator<Item = (StreamId, &PendingEntry)> + '_ {
        self.by_claim_order
            .iter()
            .filter_map(|(_, id)| self.by_id.get(id).map(|e| (*id, e)))
    }

    /// Make `id` pending for `owner` with this time and count, replacing any record (the
    /// caller moves the ID between consumer sets). Returns the previous record. O(log n).
    pub fn set_owned(
        &mut self,
        id: StreamId,
        owner: Bytes,
        delivery_time_ms: i64,
        delivery_count: u64,
    ) -> Option<PendingEntry> {
        let entry = PendingEntry {
            owner: Some(owner),
            delivery_time_ms,
            delivery_count: delivery_count.min(DELIVERY_COUNT_MAX),
            order: ClaimOrder::Delivered(delivery_time_ms),
        };
        self.put(id, entry)
    }

    /// Release `id` to the end of the XNACK zone with this count (no owner, time 0), creating
    /// the record if needed. Returns the previous record. O(log n).
    pub fn set_nacked(&mut self, id: StreamId, delivery_count: u64) -> Option<PendingEntry> {
        let seq = self.next_nack_seq;
        self.next_nack_seq = self.next_nack_seq.wrapping_add(1);
        let entry = PendingEntry {
            owner: None,
            delivery_time_ms: 0,
            delivery_count: delivery_count.min(DELIVERY_COUNT_MAX),
            order: ClaimOrder::Nacked(seq),
        };
        self.put(id, entry)
    }

    /// Change only the time and count of an existing record, keeping its owner (history
    /// re-reads). False if `id` is not pending or is released. O(log n).
    pub fn touch(&mut self, id: StreamId, delivery_time_ms: i64, delivery_count: u64) -> bool {
        let Some(owner) = self.by_id.get(&id).and_then(|e| e.owner.clone()) else {
            return false;
        };
        self.set_owned(id, owner, delivery_time_ms, delivery_count);
        true
    }

    /// Remove `id`, returning its record. O(log n).
    pub fn remove(&mut self, id: StreamId) -> Option<PendingEntry> {
        let old = self.by_id.remove(&id)?;
        self.by_claim_order.remove(&(old.order, id));
        if old.owner.is_none() {
            self.nacked = self.nacked.saturating_sub(1);
        }
        Some(old)
    }

    fn put(&mut self, id: StreamId, entry: PendingEntry) -> Option<PendingEntry> {
        let old = self.remove(id);
        if entry.owner.is_none() {
            self.nacked += 1;
        }
        self.by_claim_order.insert((entry.order, id));
        self.by_id.insert(id, entry);
        old
    }

    /// Check the two indexes agree. O(n log n).
    pub fn validate(&self) -> bool {
        self.by_id.len() == self.by_claim_order.len()
            && self.by_id.iter().all(|(id, e)| {
                self.by_claim_order.contains(&(e.order, *id))
                    && matches!(
                        (&e.owner, e.order),
                        (None, ClaimOrder::Nacked(_)) | (Some(_), ClaimOrder::Delivered(_))
                    )
                    && (e.owner.is_some() || e.delivery_time_ms == 0)
            })
            && self.nacked == self.by_id.values().filter(|e| e.owner.is_none()).count() as u64
    }
}
