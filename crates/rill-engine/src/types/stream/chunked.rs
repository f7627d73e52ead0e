//! A sorted map stored as short sorted vectors ("chunks") under a small B-tree directory: the
//! PEL's indexes (see pel.rs) are built from it.
//!
//! ```text
//! ChunkedMap<K, V>
//!   chunks: BTreeMap<K (separator), Arc<VecDeque<(K, V)>>>   one directory slot per chunk
//!     1-0   -> [(1-0, v) (2-0, v) ... (256-0, v)]        ≤ CHUNK_LEN pairs, sorted, packed
//!     257-0 -> [(257-0, v) ... (325-0, v)]
//!     326-0 -> [(327-0, v)]                              separator ≤ first key (see below)
//! ```
//!
//! Why not a `BTreeMap<K, V>`: std's B-tree leaves hold 11 pairs plus a header, and entries
//! appended in key order (new deliveries arrive in ID order, claims in time order) leave every
//! leaf split 6/5, so a 32-byte pair costs about 61 bytes. Here a chunk fills completely when
//! keys arrive in order, and the directory costs about 75 bytes per chunk (a 40-byte slot in
//! half-full std B-tree leaves), so a pair costs its own size plus under 1 B (plus the unused
//! tail of the last chunk's allocation).
//!
//! Invariant: every chunk is non-empty, and the keys of a chunk lie in `[its separator, the
//! next chunk's separator)`. A separator is the chunk's first key when the chunk is made, and
//! stays put when that key is removed (so removing from the front, as XACK of the oldest entry
//! does, never rewrites the directory); it is lowered only when a key below every separator
//! arrives.
//!
//! Costs for n pairs: lookup O(log n); insert and remove O(log n + CHUNK_LEN) (a binary search,
//! then a move of at most CHUNK_LEN / 2 pairs within one chunk: a chunk is a ring buffer, so
//! the shorter side moves, and removing a chunk's first pair — XACK of the oldest pending
//! entry, the usual case — moves nothing); iteration O(1) per pair.
//! Random removals merge a chunk that falls below a quarter full into a neighbour, so no chunk
//! holds fewer than CHUNK_LEN / 4 pairs unless it has no neighbour to merge with.
//!
//! Chunks are shared copy-on-write: a clone of the map (a snapshot for a replica or a
//! rewrite, see the server's `aof/rewrite.rs`) copies the directory and shares every chunk,
//! O(n / CHUNK_LEN); the first change to a shared chunk afterwards copies that chunk alone.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Most pairs per chunk. 256 keeps an in-chunk move to at most 4 KiB (128 pairs of 32 bytes; a
/// fraction of a microsecond) while the directory costs well under 1 B per pair. Per pending
/// entry in `bench/pel.sh` (three indexes): 64 measured 75 B, 128 measured 74.3 B, 256 measured
/// 73.1 B, with the same claim rates.
pub const CHUNK_LEN: usize = 256;

/// A sorted map of small `Copy` keys and values (see the module doc).
#[derive(Debug, Clone)]
pub struct ChunkedMap<K, V> {
    chunks: BTreeMap<K, Arc<VecDeque<(K, V)>>>,
    len: usize,
}

impl<K, V> Default for ChunkedMap<K, V> {
    fn default() -> Self {
        ChunkedMap { chunks: BTreeMap::new(), len: 0 }
    }
}

impl<K: Ord + Copy, V: Copy + PartialEq> PartialEq for ChunkedMap<K, V> {
    /// Equal contents, however they are chunked.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<K: Ord + Copy, V: Copy + Eq> Eq for ChunkedMap<K, V> {}

impl<K: Ord + Copy, V: Copy> ChunkedMap<K, V> {
    /// Pairs stored. O(1).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored. O(1).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk that holds `key` if it is stored, with its separator: the last chunk
    /// filed at or below `key` (a key below every separator is not stored). One descent of
    /// the directory. O(log n).
    fn chunk_of(&self, key: &K) -> Option<(K, &VecDeque<(K, V)>)> {
        self.chunks.range(..=*key).next_back().map(|(sep, chunk)| (*sep, &**chunk))
    }

    /// The value for `key`. O(log n).
    pub fn get(&self, key: &K) -> Option<&V> {
        let (_, chunk) = self.chunk_of(key)?;
        let pos = chunk.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        chunk.get(pos).map(|(_, v)| v)
    }

    /// Whether `key` is stored. O(log n).
    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Store `value` under `key`, returning the value it replaces. O(log n + CHUNK_LEN).
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        // Above every key (new deliveries, a snapshot loading): straight onto the last chunk,
        // as the general path below would put it.
        if let Some(mut last) = self.chunks.last_entry() {
            if last.get().back().is_some_and(|(k, _)| *k < key) {
                self.len += 1;
                if last.get().len() < CHUNK_LEN {
                    Arc::make_mut(last.get_mut()).push_back((key, value));
                } else {
                    self.chunks.insert(key, Arc::new(VecDeque::from([(key, value)])));
                }
                return None;
            }
        }
        let Some((sep, chunk)) = self.chunks.range_mut(..=key).next_back() else {
            return self.insert_below_all(key, value);
        };
        let sep = *sep;
        let pos = match chunk.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(pos) => {
                let slot = Arc::make_mut(chunk).get_mut(pos)?;
                return Some(std::mem::replace(&mut slot.1, value));
            }
            Err(pos) => pos,
        };
        self.len += 1;
        if chunk.len() < CHUNK_LEN {
            Arc::make_mut(chunk).insert(pos, (key, value));
        } else if pos == CHUNK_LEN {
            // Appending past a full chunk starts the next one, so in-order arrivals leave every
            // chunk full rather than half full.
            self.chunks.insert(key, Arc::new(VecDeque::from([(key, value)])));
        } else {
            let chunk = Arc::make_mut(chunk);
            let mut right = chunk.split_off(CHUNK_LEN / 2);
            if pos <= CHUNK_LEN / 2 {
                chunk.insert(pos, (key, value));
            } else {
                right.insert(pos - CHUNK_LEN / 2, (key, value));
            }
            if let Some((first, _)) = right.front() {
                let first = *first;
                debug_assert!(first > sep);
                self.chunks.insert(first, Arc::new(right));
            }
        }
        None
    }

    /// [`Self::insert`] of a key below every separator (or into an empty map): the first chunk
    /// takes it and is re-filed under `key`. Never a replacement: such a key is not stored.
    fn insert_below_all(&mut self, key: K, value: V) -> Option<V> {
        let Some(mut first) = self.chunks.pop_first().map(|(_, chunk)| chunk) else {
            self.chunks.insert(key, Arc::new(VecDeque::from([(key, value)])));
            self.len = 1;
            return None;
        };
        self.len += 1;
        if first.len() < CHUNK_LEN {
            Arc::make_mut(&mut first).push_front((key, value));
            self.chunks.insert(key, first);
        } else {
            // Full: the key starts a chunk of its own in front.
            if let Some((sep, _)) = first.front() {
                self.chunks.insert(*sep, first);
            }
            self.chunks.insert(key, Arc::new(VecDeque::from([(key, value)])));
        }
        None
    }

    /// Remove `key`, returning its value. O(log n + CHUNK_LEN).
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let (sep, chunk) = self.chunks.range_mut(..=*key).next_back()?;
        let sep = *sep;
        let pos = chunk.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        let (_, value) = Arc::make_mut(chunk).remove(pos)?;
        let left = chunk.len();
        self.len -= 1;
        if left == 0 {
            self.chunks.remove(&sep);
        } else if left <= CHUNK_LEN / 4 {
            self.merge_small(sep);
        }
        Some(value)
    }

    /// Fold the chunk under `sep` into its next neighbour (or the next into it) when both fit
    /// in one chunk, and give back the spare capacity of a chunk draining from the front.
    fn merge_small(&mut self, sep: K) {
        use std::ops::Bound::{Excluded, Unbounded};
        let next = self.chunks.range((Excluded(sep), Unbounded)).next().map(|(k, c)| (*k, c.len()));
        let prev = self.chunks.range(..sep).next_back().map(|(k, c)| (*k, c.len()));
        let len = self.chunks.get(&sep).map_or(0, |c| c.len());
        // Merge into the earlier chunk of the pair; its separator covers both ranges.
        let pair = match (prev, next) {
            (Some((p, plen)), _) if plen + len <= CHUNK_LEN => Some((p, sep)),
            (_, Some((n, nlen))) if nlen + len <= CHUNK_LEN => Some((sep, n)),
            _ => None,
        };
        if let Some((keep, gone)) = pair {
            if let Some(moved) = self.chunks.remove(&gone) {
                if let Some(chunk) = self.chunks.get_mut(&keep) {
                    Arc::make_mut(chunk).append(&mut Arc::unwrap_or_clone(moved));
                }
            }
        } else if let Some(chunk) = self.chunks.get_mut(&sep) {
            if chunk.capacity() > 4 * chunk.len().max(1) {
                let len = chunk.len();
                Arc::make_mut(chunk).shrink_to(2 * len);
            }
        }
    }

    /// A helper for many lookups in ascending key order (see [`Finder`]).
    pub fn finder(&self) -> Finder<'_, K, V> {
        Finder { map: self, cur: None }
    }

    /// Every pair, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (K, V)> + '_ {
        self.chunks.values().flat_map(|c| c.iter().copied())
    }

    /// Pairs with key ≥ `start`, ascending. O(log n + CHUNK_LEN) to start.
    pub fn iter_from(&self, start: K) -> impl Iterator<Item = (K, V)> + '_ {
        // From the chunk that would hold `start` (the first one if `start` is below all).
        let sep = self.chunk_of(&start).map(|(sep, _)| sep).or_else(|| self.chunks.keys().next().copied());
        sep.into_iter()
            .flat_map(move |sep| self.chunks.range(sep..))
            .flat_map(|(_, c)| c.iter().copied())
            .skip_while(move |(k, _)| *k < start)
    }

    /// The largest pair with a key below `bound`. O(log n).
    pub fn last_below(&self, bound: &K) -> Option<(K, V)> {
        // The last chunk that starts below `bound` holds the answer, unless every key left in it
        // is at or above `bound` (its separator may lie below its first key): then the chunk
        // before it does.
        for (_, chunk) in self.chunks.range(..*bound).rev() {
            let below = chunk.partition_point(|(k, _)| k < bound);
            if below > 0 {
                return chunk.get(below - 1).copied();
            }
        }
        None
    }

    /// The smallest pair. O(log n).
    pub fn first(&self) -> Option<(K, V)> {
        self.chunks.values().next().and_then(|c| c.front().copied())
    }

    /// The largest pair. O(log n).
    pub fn last(&self) -> Option<(K, V)> {
        self.chunks.values().next_back().and_then(|c| c.back().copied())
    }

    /// Heap bytes held (chunk allocations plus directory slots, not counting the directory's
    /// node headers). O(n / CHUNK_LEN).
    pub fn heap_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(K, Arc<VecDeque<(K, V)>>)>() + 2 * std::mem::size_of::<usize>();
        self.chunks.values().map(|c| c.capacity() * std::mem::size_of::<(K, V)>() + slot).sum()
    }

    /// Check the module-doc invariant. O(n).
    pub fn validate(&self) -> bool {
        let mut prev: Option<K> = None;
        let mut count = 0;
        for (sep, chunk) in &self.chunks {
            if chunk.is_empty() || chunk.len() > CHUNK_LEN {
                return false;
            }
            for (k, _) in chunk.iter() {
                if *k < *sep || prev.is_some_and(|p| p >= *k) {
                    return false;
                }
                prev = Some(*k);
            }
            count += chunk.len();
        }
        count == self.len
    }
}

/// Lookups that reuse the chunk of the previous one while keys stay in it: O(log CHUNK_LEN)
/// each then, O(log n) on entering another chunk. For keys asked in ascending order (a
/// consumer's pending IDs looked up in the group's PEL), mostly the former.
#[derive(Debug)]
pub struct Finder<'m, K, V> {
    map: &'m ChunkedMap<K, V>,
    /// The chunk entered last.
    cur: Option<Entered<'m, K, V>>,
}

/// A chunk a [`Finder`] entered: its separator, the next chunk's separator (none: the last
/// chunk), its pairs.
type Entered<'m, K, V> = (K, Option<K>, &'m VecDeque<(K, V)>);

impl<'m, K: Ord + Copy, V: Copy> Finder<'m, K, V> {
    /// The value for `key`.
    pub fn get(&mut self, key: &K) -> Option<&'m V> {
        use std::ops::Bound::{Excluded, Unbounded};
        let covered = self.cur.is_some_and(|(sep, next, _)| sep <= *key && next.is_none_or(|n| *key < n));
        if !covered {
            let (sep, chunk) = self.map.chunks.range(..=*key).next_back()?;
            let next = self.map.chunks.range((Excluded(*sep), Unbounded)).next().map(|(k, _)| *k);
            self.cur = Some((*sep, next, &**chunk));
        }
        let (_, _, chunk) = self.cur?;
        let pos = chunk.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        chunk.get(pos).map(|(_, v)| v)
    }
}

/// A sorted set on [`ChunkedMap`].
pub type ChunkedSet<K> = ChunkedMap<K, ()>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Keys of the model test: enough for several chunks, so they split and merge.
    const KEYS: u32 = CHUNK_LEN as u32 * 4;

    proptest! {
        #[test]
        fn matches_btreemap(ops in proptest::collection::vec((0..4u8, 0..KEYS, any::<u8>()), 0..6000)) {
            let mut m: ChunkedMap<u32, u8> = ChunkedMap::default();
            let mut model = BTreeMap::new();
            let half = ops.len() / 2;
            for (i, (op, k, v)) in ops.into_iter().enumerate() {
                // Three inserts to a removal in the first half, so the map fills several chunks;
                // the reverse in the second, so chunks shrink and merge.
                if (i < half && op < 3) || (i >= half && op < 1) {
                    prop_assert_eq!(m.insert(k, v), model.insert(k, v));
                } else {
                    prop_assert_eq!(m.remove(&k), model.remove(&k));
                }
                prop_assert!(m.validate());
            }
            prop_assert_eq!(m.len(), model.len());
            prop_assert!(m.iter().eq(model.iter().map(|(k, v)| (*k, *v))));
            for start in [0, 7, 150, KEYS / 2 + 1, KEYS - 1, KEYS] {
                prop_assert!(m.iter_from(start).eq(model.range(start..).map(|(k, v)| (*k, *v))));
            }
            let mut finder = m.finder();
            for k in 0..=KEYS {
                prop_assert_eq!(m.get(&k), model.get(&k));
                prop_assert_eq!(finder.get(&k), model.get(&k));
            }
            prop_assert_eq!(m.first(), model.first_key_value().map(|(k, v)| (*k, *v)));
            prop_assert_eq!(m.last(), model.last_key_value().map(|(k, v)| (*k, *v)));
            for k in [0, 1, 7, 150, 151, KEYS / 2, KEYS - 1, KEYS] {
                prop_assert_eq!(m.last_below(&k), model.range(..k).next_back().map(|(k, v)| (*k, *v)));
            }
        }
    }

    #[test]
    fn in_order_inserts_fill_chunks() {
        let mut m: ChunkedSet<u64> = ChunkedMap::default();
        for k in 0..10_000 {
            m.insert(k, ());
        }
        // 8 bytes a key, plus the directory and the last chunk's tail.
        assert!(m.heap_bytes() < 10_000 * 9, "{}", m.heap_bytes());
    }

    #[test]
    fn descending_inserts_fill_chunks() {
        let mut m: ChunkedSet<u64> = ChunkedMap::default();
        for k in (0..10_000).rev() {
            m.insert(k, ());
        }
        assert!(m.validate());
        assert!(m.iter().map(|(k, _)| k).eq(0..10_000));
        assert!(m.heap_bytes() < 10_000 * 9, "{}", m.heap_bytes());
    }

    #[test]
    fn draining_from_the_front_frees_memory() {
        let mut m: ChunkedSet<u64> = ChunkedMap::default();
        for k in 0..10_000 {
            m.insert(k, ());
        }
        for k in 0..9_990 {
            m.remove(&k);
        }
        assert!(m.validate());
        assert!(m.heap_bytes() < 2_000, "{}", m.heap_bytes());
    }
}
