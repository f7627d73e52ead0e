//! Ordered delivery per key (`ORDERBY field`, policies spec §6): which keys have an entry in
//! flight, and the entries a `>` read deferred behind them.
//!
//! ```text
//! KeyOrder
//!   in_flight:   {key -> n}           pending entries (owned, handed back or delayed) per key
//!   pending_key: {ID -> key}          the key of each such entry (it may be deleted meanwhile)
//!   waiting:     {key -> [ID...]}     entries a `>` read deferred, per key, in ID order
//!   waiting_key: {ID -> key}          the same, by ID
//!   loose:       {ID}                 deferred entries no longer ordered (ORDERBY was unset
//!                                     or changed to a field they lack)
//!   unblocked:   {ID}                 the loose entries and the first waiting entry of each
//!                                     key with nothing in flight: deliverable now, served
//!                                     before new entries
//! ```
//!
//! A key is blocked for new entries while it has an entry in flight or waiting. Deferred
//! entries are IDs only (the cursor passed them; the stream keeps the payload). Every change
//! comes from applying a group effect, so a log replay or a replica reaches the same state.

use super::StreamId;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// The per-key state of a group with `ORDERBY` (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyOrder {
    in_flight: HashMap<Bytes, u32>,
    pending_key: BTreeMap<StreamId, Bytes>,
    waiting: HashMap<Bytes, VecDeque<StreamId>>,
    waiting_key: BTreeMap<StreamId, Bytes>,
    loose: BTreeSet<StreamId>,
    unblocked: BTreeSet<StreamId>,
}

impl KeyOrder {
    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.pending_key.is_empty() && self.waiting_key.is_empty() && self.loose.is_empty()
    }

    /// Whether a new entry of `key` must wait: an entry of it is in flight or waiting. O(1).
    pub fn blocked(&self, key: &[u8]) -> bool {
        self.in_flight.contains_key(key) || self.waiting.contains_key(key)
    }

    /// Whether `id` waits in a key's queue. O(log n).
    pub fn is_waiting(&self, id: StreamId) -> bool {
        self.waiting_key.contains_key(&id) || self.loose.contains(&id)
    }

    /// Entries deferred and not yet delivered (the `deferred` counter). O(1).
    pub fn deferred_count(&self) -> u64 {
        (self.waiting_key.len() + self.loose.len()) as u64
    }

    /// The first unblocked waiting entry after `after`. O(log n).
    pub fn next_unblocked(&self, after: Option<StreamId>) -> Option<StreamId> {
        match after {
            None => self.unblocked.first().copied(),
            Some(a) => self.unblocked.range((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)).next().copied(),
        }
    }

    /// Whether some waiting entry is deliverable now. O(1).
    pub fn has_unblocked(&self) -> bool {
        !self.unblocked.is_empty()
    }

    /// The waiting entries with their keys (`None`: loose), in ID order (for a snapshot).
    pub fn waiting(&self) -> Vec<(StreamId, Option<&Bytes>)> {
        let mut all: Vec<(StreamId, Option<&Bytes>)> = self.waiting_key.iter().map(|(id, k)| (*id, Some(k))).collect();
        all.extend(self.loose.iter().map(|id| (*id, None)));
        all.sort_unstable_by_key(|(id, _)| *id);
        all
    }

    /// The pending entries holding a key, ascending.
    pub fn pending_ids(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.pending_key.keys().copied()
    }

    /// The key of the pending entry `id`, if it has one.
    pub fn pending_key(&self, id: StreamId) -> Option<&Bytes> {
        self.pending_key.get(&id)
    }

    /// Take `key`'s first waiting entry out of `unblocked` (before a change to the key).
    fn unmark(&mut self, key: &[u8]) {
        if let Some(front) = self.waiting.get(key).and_then(VecDeque::front) {
            self.unblocked.remove(front);
        }
    }

    /// Put `key`'s first waiting entry in `unblocked` if nothing of `key` is in flight (after a
    /// change to the key).
    fn mark(&mut self, key: &[u8]) {
        if !self.in_flight.contains_key(key) {
            if let Some(front) = self.waiting.get(key).and_then(VecDeque::front) {
                self.unblocked.insert(*front);
            }
        }
    }

    /// Remove `id` from `key`'s waiting queue (usually its front: O(1); O(q) otherwise).
    fn unwait(&mut self, key: &Bytes, id: StreamId) {
        if let Some(q) = self.waiting.get_mut(key) {
            match q.front() {
                Some(f) if *f == id => {
                    q.pop_front();
                }
                _ => q.retain(|x| *x != id),
            }
            if q.is_empty() {
                self.waiting.remove(key);
            }
        }
    }

    /// `id`, of `key` (`None`: not ordered), is pending (delivered, claimed, or created by a
    /// forced claim). If it was waiting it stops waiting. Nothing changes if it was already
    /// pending.
    pub fn pending(&mut self, id: StreamId, key: Option<Bytes>) {
        if self.pending_key.contains_key(&id) {
            return;
        }
        if self.loose.remove(&id) {
            self.unblocked.remove(&id);
        }
        if let Some(k) = self.waiting_key.remove(&id) {
            self.unmark(&k);
            self.unwait(&k, id);
            self.mark(&k);
        }
        let Some(key) = key else { return };
        self.unmark(&key);
        *self.in_flight.entry(key.clone()).or_insert(0) += 1;
        self.pending_key.insert(id, key.clone());
        self.mark(&key);
    }

    /// `id` left the PEL (acked, dead-lettered, its consumer deleted): its key is freed when it
    /// was the key's last entry in flight.
    pub fn left(&mut self, id: StreamId) {
        let Some(key) = self.pending_key.remove(&id) else { return };
        if let Some(n) = self.in_flight.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(&key);
            }
        }
        self.mark(&key);
    }

    /// A `>` read deferred `id` behind `key`'s entries (`None`: a loose entry, deliverable at
    /// once).
    pub fn defer(&mut self, id: StreamId, key: Option<Bytes>) {
        if self.is_waiting(id) || self.pending_key.contains_key(&id) {
            return;
        }
        let Some(key) = key else {
            self.loose.insert(id);
            self.unblocked.insert(id);
            return;
        };
        self.unmark(&key);
        self.waiting.entry(key.clone()).or_default().push_back(id);
        self.waiting_key.insert(id, key.clone());
        self.mark(&key);
    }

    /// The waiting entry `id` is dropped (its payload is gone).
    pub fn drop_waiting(&mut self, id: StreamId) {
        if self.loose.remove(&id) {
            self.unblocked.remove(&id);
            return;
        }
        let Some(key) = self.waiting_key.remove(&id) else { return };
        self.unmark(&key);
        self.unwait(&key, id);
        self.mark(&key);
    }

    /// Check the indexes against each other (tests and the snapshot loader).
    pub fn validate(&self) -> bool {
        let mut counted: HashMap<&Bytes, u32> = HashMap::new();
        for k in self.pending_key.values() {
            *counted.entry(k).or_insert(0) += 1;
        }
        let flights_ok =
            counted.len() == self.in_flight.len() && counted.iter().all(|(k, n)| self.in_flight.get(*k) == Some(n));
        let queued: usize = self.waiting.values().map(VecDeque::len).sum();
        let queues_ok = queued == self.waiting_key.len()
            && self.waiting.iter().all(|(k, q)| {
                !q.is_empty()
                    && q.iter().zip(q.iter().skip(1)).all(|(a, b)| a < b)
                    && q.iter().all(|id| self.waiting_key.get(id) == Some(k))
            });
        let fronts: BTreeSet<StreamId> = self
            .waiting
            .iter()
            .filter(|(k, _)| !self.in_flight.contains_key(*k))
            .filter_map(|(_, q)| q.front().copied())
            .chain(self.loose.iter().copied())
            .collect();
        flights_ok
            && queues_ok
            && fronts == self.unblocked
            && self.waiting_key.keys().chain(&self.loose).all(|id| !self.pending_key.contains_key(id))
            && self.loose.iter().all(|id| !self.waiting_key.contains_key(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId { ms, seq: 0 }
    }

    fn k(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn a_key_waits_for_its_entry_in_flight_and_serves_its_queue_in_order() {
        let mut o = KeyOrder::default();
        o.pending(id(1), Some(k("a")));
        assert!(o.blocked(b"a") && !o.blocked(b"b"));
        o.defer(id(2), Some(k("a")));
        o.defer(id(3), Some(k("a")));
        assert_eq!(o.next_unblocked(None), None);
        assert_eq!(o.deferred_count(), 2);
        o.left(id(1));
        assert!(o.blocked(b"a"), "a key with waiting entries stays blocked for new ones");
        assert_eq!(o.next_unblocked(None), Some(id(2)));
        o.pending(id(2), Some(k("a")));
        assert_eq!(o.next_unblocked(None), None);
        o.left(id(2));
        assert_eq!(o.next_unblocked(None), Some(id(3)));
        o.drop_waiting(id(3));
        assert!(o.is_empty() && !o.blocked(b"a"));
        assert!(o.validate());
    }

    #[test]
    fn a_forced_claim_of_a_waiting_entry_takes_it_out_of_its_queue() {
        let mut o = KeyOrder::default();
        o.pending(id(1), Some(k("a")));
        o.defer(id(2), Some(k("a")));
        o.defer(id(3), Some(k("a")));
        o.pending(id(3), Some(k("a")));
        assert!(o.validate());
        o.left(id(1));
        o.left(id(3));
        assert_eq!(o.next_unblocked(None), Some(id(2)));
        assert!(o.validate());
    }

    #[test]
    fn loose_entries_are_deliverable_at_once() {
        let mut o = KeyOrder::default();
        o.defer(id(5), None);
        assert_eq!((o.next_unblocked(None), o.deferred_count()), (Some(id(5)), 1));
        o.pending(id(5), Some(k("a")));
        assert_eq!((o.next_unblocked(None), o.deferred_count()), (None, 0));
        assert!(o.validate());
    }
}
