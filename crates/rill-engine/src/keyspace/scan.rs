//! SCAN cursors over a database, and SSCAN/HSCAN cursors over a set or hash.
//!
//! A database's SCAN walks its key table's homes in Redis' reverse-binary order
//! (`keyspace/table`): O(COUNT) per call, and a cursor that survives the table's growth and
//! shrinking, as Redis'.
//!
//! A set's members and a hash's fields live in `IndexSet`/`IndexMap` tables whose order
//! changes whenever an element is removed, so neither a bucket nor a number would survive
//! between calls. There every element has a fixed *scan position*: a 64-bit hash of its name
//! computed with a fixed-key hasher. A cursor is a position, and one call returns the elements
//! whose positions are the `count` smallest at or after it:
//!
//! ```text
//!  position: 0 ──────────────── c ════════════ t ─────────────────── u64::MAX
//!                               │  this call   │ next cursor = t + 1
//! ```
//!
//! Each call covers the closed interval `[c, t]` entirely and the next starts at `t + 1`, so an
//! element present for the whole scan (its position never changes) is returned exactly once,
//! elements added or removed meanwhile may or may not be, and the cursor never depends on table
//! size. Elements sharing a position (a 64-bit collision) are always returned in the same call,
//! so the scan can never stall on them. Cost: each call reads the whole collection,
//! O(N log COUNT). The positions are stable for one build of the server; they are not
//! persisted.

use super::Db;
use bytes::Bytes;
use std::collections::BinaryHeap;

/// The scan position of a key: XXH3-64 with the default (fixed) seed, so a cursor means the
/// same thing for the life of the process (and across restarts of one build).
pub fn scan_position(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

impl Db {
    /// One SCAN call: the keys of the table's homes walked from `cursor` until there are
    /// `count` of them or `10 * count` homes were walked, as Redis' SCAN, and the cursor to
    /// continue from (0 when the iteration is complete). Expired keys are included; the caller
    /// filters them. `count` 0 is treated as 1.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<Bytes>) {
        let mut keys = Vec::new();
        let next = self.keys.scan(cursor, count, |k, _| keys.push(Bytes::copy_from_slice(k)));
        (next, keys)
    }

    /// [`Db::scan`] that shows `found` each key with its entry instead of collecting them.
    pub fn scan_entries(&self, cursor: u64, count: usize, found: impl FnMut(&[u8], &super::Entry)) -> u64 {
        self.keys.scan(cursor, count, found)
    }
}

/// An item and its position, ordered by the position alone (for the heap).
struct ByPosition<T>(u64, T);

impl<T> PartialEq for ByPosition<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<T> Eq for ByPosition<T> {}

impl<T> PartialOrd for ByPosition<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for ByPosition<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// One scan step over any collection whose items have fixed positions (a key's name, a set's
/// member, a hash's field: SCAN, SSCAN, HSCAN): the items whose positions are the `count`
/// smallest at or after `cursor` (all items sharing the largest of those positions included),
/// in position order, and the cursor to continue from (0 when the iteration is complete).
/// `items` yields the same items each time it is called: once, and a second time only when
/// two items share the position where the step ends (a 64-bit collision). `count` 0 is
/// treated as 1. O(N log COUNT).
pub fn scan_by_position<T, I>(
    items: impl Fn() -> I,
    position: impl Fn(&T) -> u64,
    cursor: u64,
    count: usize,
) -> (u64, Vec<T>)
where
    I: Iterator<Item = T>,
{
    let count = count.max(1);
    // The `count` smallest positions >= cursor with their items, in a max-heap; the smallest
    // position pushed out of it, to tell whether an item at the final threshold was dropped.
    let mut heap: BinaryHeap<ByPosition<T>> = BinaryHeap::with_capacity(count.min(1024) + 1);
    let mut least_dropped = u64::MAX;
    for item in items() {
        let p = position(&item);
        if p < cursor {
            continue;
        }
        if heap.len() < count {
            heap.push(ByPosition(p, item));
        } else if heap.peek().is_some_and(|top| p < top.0) {
            if let Some(out) = heap.pop() {
                least_dropped = least_dropped.min(out.0);
            }
            heap.push(ByPosition(p, item));
        } else {
            least_dropped = least_dropped.min(p);
        }
    }
    let complete = heap.len() < count;
    let threshold = if complete { u64::MAX } else { heap.peek().map_or(u64::MAX, |top| top.0) };
    let next = if complete { 0 } else { threshold.checked_add(1).unwrap_or(0) };
    if !complete && least_dropped == threshold {
        // Items sharing the threshold were left out: take every item in [cursor, threshold]
        // (the same items, found again), so none of them is skipped by the next cursor.
        let mut found: Vec<(u64, T)> = items()
            .filter_map(|item| {
                let p = position(&item);
                (p >= cursor && p <= threshold).then_some((p, item))
            })
            .collect();
        // Stable: items sharing a position keep the collection's order.
        found.sort_by_key(|(p, _)| *p);
        return (next, found.into_iter().map(|(_, item)| item).collect());
    }
    // Ascending by position; items sharing one keep the collection's order only in the pass
    // above (here they cannot share one: a tie at the threshold went there, and a tie below
    // it is returned whole either way).
    let found = heap.into_sorted_vec();
    (next, found.into_iter().map(|ByPosition(_, item)| item).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Engine, EngineConfig, Value};
    use std::collections::HashSet;

    #[test]
    fn full_iteration_returns_every_key_once() {
        let mut e = Engine::new(EngineConfig::default());
        for i in 0..1000 {
            e.insert(0, Bytes::from(format!("key:{i}")), Value::Str(Bytes::new()));
        }
        for count in [1, 7, 10, 1000, 5000] {
            let mut seen = HashSet::new();
            let mut cursor = 0;
            let mut calls = 0;
            loop {
                let (next, keys) = e.db(0).scan(cursor, count);
                for k in keys {
                    assert!(seen.insert(k), "duplicate");
                }
                calls += 1;
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            assert_eq!(seen.len(), 1000);
            assert!(calls <= 1000 / count * 2 + 10, "count {count}: {calls} calls");
        }
    }

    #[test]
    fn keys_present_throughout_survive_growth_during_scan() {
        let mut e = Engine::new(EngineConfig::default());
        for i in 0..100 {
            e.insert(0, Bytes::from(format!("old:{i}")), Value::Str(Bytes::new()));
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            let (next, keys) = e.db(0).scan(cursor, 10);
            seen.extend(keys);
            // Grow the table (forcing HashMap resizes) and delete other keys between calls,
            // for the first rounds only so the scan can finish.
            if round < 20 {
                for j in 0..100 {
                    e.insert(0, Bytes::from(format!("new:{round}:{j}")), Value::Str(Bytes::new()));
                }
                e.remove(0, format!("new:{}:0", round.max(1) - 1).as_bytes());
            }
            round += 1;
            assert!(round < 10_000, "scan does not terminate");
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for i in 0..100 {
            assert!(seen.contains(format!("old:{i}").as_bytes()), "old:{i} missed");
        }
    }

    /// Items sharing positions (collisions, forced here: three items per position) are each
    /// returned exactly once, whatever COUNT cuts through them.
    #[test]
    fn shared_positions_are_never_split_or_skipped() {
        let items: Vec<u64> = (0..300).collect();
        for count in [1, 2, 3, 4, 5, 10, 299, 300, 301] {
            let mut seen = Vec::new();
            let mut cursor = 0;
            loop {
                let (next, got) = scan_by_position(|| items.iter().copied(), |i| 1000 + i / 3, cursor, count);
                // Ascending by position within a step.
                assert!(got.is_sorted_by_key(|i| i / 3), "{got:?}");
                seen.extend(got);
                if next == 0 {
                    break;
                }
                assert!(next > cursor);
                cursor = next;
            }
            seen.sort_unstable();
            assert_eq!(seen, items, "count {count}");
        }
    }

    #[test]
    fn empty_database_completes_at_once() {
        let db = Db::default();
        assert_eq!(db.scan(0, 10), (0, vec![]));
        assert_eq!(db.scan(u64::MAX, 10), (0, vec![]));
    }
}
