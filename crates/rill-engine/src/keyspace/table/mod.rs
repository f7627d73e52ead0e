//! The key table of a database: keys numbered as well as hashed (RANDOMKEY and eviction draw a
//! key by its number in O(1)), and a SCAN cursor that survives the table's growth, as Redis'.
//!
//! Two parts, as an `IndexMap`: the items (hash, key, value) in a vector, numbered `0..len`,
//! and an index of slots, a power of two of them, each empty or naming an item:
//!
//! ```text
//!  slot word: [ top 24 bits of the hash | the item's number + 1 (40 bits) ]      0 = empty
//! ```
//!
//! An item's *home* is the slot its hash's low bits name (`hash & mask`); it sits in the first
//! free slot at or after its home (linear probing), so every slot from its home to where it
//! sits is taken. A lookup walks from the home until an empty slot, comparing the 24 hash bits
//! of the slot before it reads an item. Removing a slot shifts the items after it back towards
//! their homes (no tombstones), so that rule always holds. The index holds at most 3/4 of its
//! slots; past that it doubles and every item is placed again.
//!
//! **SCAN.** A cursor is a home, walked in Redis' reverse-binary order (the highest bit of the
//! home counted first). Because an item's home in a table twice as large is its home here or
//! that plus the old size, a home covered before the table grew is covered by all its
//! successors after it: an item present for the whole iteration is returned at least once,
//! whatever the table did between calls — the guarantee Redis gives, with the cursor values
//! Redis gives (at most the table's size). One step reads the run of taken slots from the home
//! and keeps the items whose home it is; a call walks homes until it has COUNT keys or has
//! walked ten times COUNT homes, as Redis' SCAN does. (Before this table, every SCAN call read
//! the whole database.)
//!
//! Moving an item to another number (`swap_indices`, `swap_remove_index`) rewrites the one slot
//! that names it; its home does not change.

use super::FastHash;
pub use key::CompactKey;
use std::collections::TryReserveError;
use std::hash::BuildHasher;

/// A slot with no item.
const EMPTY: u64 = 0;
/// Bits of a slot word that hold the item's number + 1.
const NUMBER_BITS: u32 = 40;
const NUMBER_MASK: u64 = (1 << NUMBER_BITS) - 1;
/// The fewest slots of a table that has any.
const MIN_SLOTS: usize = 8;

/// The most items a table holds: numbers 0..MAX_ITEMS fit the 40 bits of a slot word.
pub const MAX_ITEMS: usize = (1 << NUMBER_BITS) - 2;

struct Item<V> {
    hash: u64,
    key: CompactKey,
    value: V,
}

/// A hash table of keys numbered `0..len`, with Redis' SCAN cursor (see the module doc).
pub struct KeyTable<V, S = FastHash> {
    items: Vec<Item<V>>,
    /// Empty, or a power of two of slots (at least `MIN_SLOTS`).
    slots: Box<[u64]>,
    hasher: S,
}

impl<V, S: Default> Default for KeyTable<V, S> {
    fn default() -> Self {
        KeyTable { items: Vec::new(), slots: Box::default(), hasher: S::default() }
    }
}

impl<V: std::fmt::Debug, S: BuildHasher> std::fmt::Debug for KeyTable<V, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The slot word naming item `number` of hash `hash`.
fn word(hash: u64, number: usize) -> u64 {
    ((hash >> NUMBER_BITS) << NUMBER_BITS) | (number as u64 + 1)
}

/// The item number a (non-empty) slot word names.
fn number_of(word: u64) -> usize {
    ((word & NUMBER_MASK) as usize).wrapping_sub(1)
}

/// The most items `slots` slots hold (3/4 of them).
fn items_for(slots: usize) -> usize {
    slots - slots / 4
}

/// The fewest slots (a power of two) that hold `items` items: 3/4 of them at least `items`.
fn slots_for(items: usize) -> Option<usize> {
    let needed = items.checked_add(items.div_ceil(3))?;
    needed.max(MIN_SLOTS).checked_next_power_of_two()
}

/// Redis' reverse-binary cursor step: the home after `v` in a table of mask `mask` (0 once
/// every home was walked).
fn next_cursor(v: u64, mask: u64) -> u64 {
    let v = (v | !mask).reverse_bits().wrapping_add(1);
    v.reverse_bits()
}

impl<V, S> KeyTable<V, S> {
    /// A table hashing with `hasher`.
    #[cfg(test)]
    pub(crate) fn with_hasher(hasher: S) -> Self {
        KeyTable { items: Vec::new(), slots: Box::default(), hasher }
    }
}

impl<V, S: BuildHasher> KeyTable<V, S> {
    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the table holds no item.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// How many items the table holds before it grows.
    pub fn capacity(&self) -> usize {
        items_for(self.slots.len()).min(self.items.capacity())
    }

    /// The bytes the next insertion allocates when the table is at its
    /// [`KeyTable::capacity`]: a new index if the index is full, new room for the items if
    /// theirs is (a vector's growth: twice its size).
    pub fn growth_bytes(&self) -> usize {
        let mut bytes = 0;
        if self.items.len() >= items_for(self.slots.len()) {
            bytes += (self.slots.len() * 2).max(MIN_SLOTS) * std::mem::size_of::<u64>();
        }
        if self.items.len() >= self.items.capacity() {
            bytes += (self.items.capacity() * 2).max(4) * std::mem::size_of::<Item<V>>();
        }
        bytes
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    fn slot(&self, at: usize) -> u64 {
        self.slots.get(at).copied().unwrap_or(EMPTY)
    }

    fn set_slot(&mut self, at: usize, w: u64) {
        if let Some(s) = self.slots.get_mut(at) {
            *s = w;
        }
    }

    /// The home of an item (by its number) in the current index.
    fn home_of(&self, number: usize) -> usize {
        self.items.get(number).map_or(0, |it| it.hash as usize & self.mask())
    }

    /// The slot and number of `key` (hashed to `hash`).
    fn find(&self, hash: u64, key: &[u8]) -> Option<(usize, usize)> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let tag = hash >> NUMBER_BITS;
        let mut at = hash as usize & mask;
        // The index always has empty slots (at most 3/4 are taken): the walk ends.
        loop {
            let w = self.slot(at);
            if w == EMPTY {
                return None;
            }
            if w >> NUMBER_BITS == tag {
                let n = number_of(w);
                if self.items.get(n).is_some_and(|it| *it.key == *key) {
                    return Some((at, n));
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// The slot naming item `number`.
    fn slot_of_number(&self, number: usize) -> Option<usize> {
        let item = self.items.get(number)?;
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut at = item.hash as usize & mask;
        for _ in 0..self.slots.len() {
            let w = self.slot(at);
            if w == EMPTY {
                return None;
            }
            if number_of(w) == number {
                return Some(at);
            }
            at = (at + 1) & mask;
        }
        None
    }

    /// Put the word of item `number` (hash `hash`) in the first free slot from its home.
    fn place(&mut self, hash: u64, number: usize) {
        let mask = self.mask();
        let mut at = hash as usize & mask;
        for _ in 0..self.slots.len() {
            if self.slot(at) == EMPTY {
                self.set_slot(at, word(hash, number));
                return;
            }
            at = (at + 1) & mask;
        }
    }

    /// Empty slot `at` and shift the items after it back towards their homes, so that every
    /// item stays reachable from its home through taken slots.
    fn vacate(&mut self, at: usize) {
        let mask = self.mask();
        let mut hole = at;
        let mut next = (at + 1) & mask;
        loop {
            let w = self.slot(next);
            if w == EMPTY {
                break;
            }
            let home = self.home_of(number_of(w));
            // The item may fill the hole when the hole lies between its home and where it
            // sits (cyclically).
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.set_slot(hole, w);
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.set_slot(hole, EMPTY);
    }

    /// Rebuild the index with `slots` slots (a power of two, room for every item).
    fn rebuild(&mut self, slots: usize) -> Result<(), TryReserveError> {
        let mut fresh = Vec::new();
        fresh.try_reserve_exact(slots)?;
        fresh.resize(slots, EMPTY);
        self.slots = fresh.into_boxed_slice();
        for n in 0..self.items.len() {
            let hash = self.items.get(n).map_or(0, |it| it.hash);
            self.place(hash, n);
        }
        Ok(())
    }

    /// Make room for `additional` more items without growing again.
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), TryReserveError> {
        let Some(wanted) = self.items.len().checked_add(additional) else {
            // Reserving more than usize holds fails as the allocator would.
            return Vec::<u8>::new().try_reserve(usize::MAX);
        };
        if wanted > MAX_ITEMS {
            return Vec::<u8>::new().try_reserve(usize::MAX);
        }
        // The items grow as a vector does (to twice their room, or what is asked).
        if wanted > self.items.capacity() {
            self.items.try_reserve(additional)?;
        }
        if wanted > items_for(self.slots.len()) {
            // Double at least, so a run of single insertions costs O(1) each.
            let Some(slots) = slots_for(wanted.max(items_for(self.slots.len()) * 2)) else {
                return Vec::<u8>::new().try_reserve(usize::MAX);
            };
            self.rebuild(slots)?;
        }
        Ok(())
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        let (_, n) = self.find(self.hash(key), key)?;
        self.items.get(n).map(|it| &it.value)
    }

    /// The value of `key`, to change.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let (_, n) = self.find(self.hash(key), key)?;
        self.items.get_mut(n).map(|it| &mut it.value)
    }

    /// The stored key equal to `key`, and its value.
    pub fn get_key_value(&self, key: &[u8]) -> Option<(&[u8], &V)> {
        let (_, n) = self.find(self.hash(key), key)?;
        self.get_index(n)
    }

    /// Whether `key` is in the table.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get_index_of(key).is_some()
    }

    /// The number of `key`.
    pub fn get_index_of(&self, key: &[u8]) -> Option<usize> {
        self.find(self.hash(key), key).map(|(_, n)| n)
    }

    /// The hash kept for the item numbered `number`.
    pub fn hash_at(&self, number: usize) -> Option<u64> {
        self.items.get(number).map(|it| it.hash)
    }

    /// The items whose hash is `hash` (number, key, value), found through the index.
    pub fn with_hash(&self, hash: u64) -> impl Iterator<Item = (usize, &[u8], &V)> {
        let mask = self.mask();
        let tag = hash >> NUMBER_BITS;
        let mut at = (!self.slots.is_empty()).then_some(hash as usize & mask);
        std::iter::from_fn(move || loop {
            let here = at?;
            let w = self.slot(here);
            if w == EMPTY {
                at = None;
                return None;
            }
            at = Some((here + 1) & mask);
            if w >> NUMBER_BITS != tag {
                continue;
            }
            let n = number_of(w);
            match self.items.get(n) {
                Some(it) if it.hash == hash => return Some((n, &*it.key, &it.value)),
                _ => continue,
            }
        })
    }

    /// The key numbered `number` and its value.
    pub fn get_index(&self, number: usize) -> Option<(&[u8], &V)> {
        self.items.get(number).map(|it| (&*it.key, &it.value))
    }

    /// The key numbered `number` and its value, to change.
    pub fn get_index_mut(&mut self, number: usize) -> Option<(&[u8], &mut V)> {
        self.items.get_mut(number).map(|it| (&*it.key, &mut it.value))
    }

    /// The value numbered `number`. Panics when there is none, as indexing a `Vec` does.
    #[allow(clippy::indexing_slicing)]
    pub fn value_at_mut(&mut self, number: usize) -> &mut V {
        &mut self.items[number].value
    }

    /// Store `value` under `key`: a new key is numbered `len`; an existing one keeps its
    /// number and stored key, and its old value is returned. Panics only when the table would
    /// pass [`MAX_ITEMS`] or memory runs out, as a `Vec` does.
    pub fn insert_full(&mut self, key: &[u8], value: V) -> (usize, Option<V>) {
        let hash = self.hash(key);
        if let Some((_, n)) = self.find(hash, key) {
            let old = self.items.get_mut(n).map(|it| std::mem::replace(&mut it.value, value));
            return (n, old);
        }
        if self.items.len() >= items_for(self.slots.len()) {
            if let Err(e) = self.try_reserve(1) {
                panic!("key table cannot grow past {} items: {e}", self.items.len());
            }
        }
        let n = self.items.len();
        self.items.push(Item { hash, key: CompactKey::new(key), value });
        self.place(hash, n);
        (n, None)
    }

    /// [`KeyTable::insert_full`], returning the old value only.
    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        self.insert_full(key, value).1
    }

    /// Remove the item numbered `number`; the last item takes its number.
    pub fn swap_remove_index(&mut self, number: usize) -> Option<(CompactKey, V)> {
        let last = self.items.len().checked_sub(1)?;
        if number > last {
            return None;
        }
        let at = self.slot_of_number(number)?;
        self.vacate(at);
        if number != last {
            let moved = self.slot_of_number(last)?;
            let hash = self.items.get(last).map_or(0, |it| it.hash);
            self.set_slot(moved, word(hash, number));
        }
        let item = self.items.swap_remove(number);
        Some((item.key, item.value))
    }

    /// Exchange the numbers of two items (out of range: nothing happens).
    pub fn swap_indices(&mut self, a: usize, b: usize) {
        if a == b || a >= self.items.len() || b >= self.items.len() {
            return;
        }
        let (Some(sa), Some(sb)) = (self.slot_of_number(a), self.slot_of_number(b)) else { return };
        let (wa, wb) = (self.slot(sa), self.slot(sb));
        self.set_slot(sa, (wa & !NUMBER_MASK) | (b as u64 + 1));
        self.set_slot(sb, (wb & !NUMBER_MASK) | (a as u64 + 1));
        self.items.swap(a, b);
    }

    /// Every key and value, by number.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], &V)> + ExactSizeIterator {
        self.items.iter().map(|it| (&*it.key, &it.value))
    }

    /// Every key, by number.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        self.items.iter().map(|it| &*it.key)
    }

    /// Take every item out, by number; the table is left empty with no memory held.
    pub fn take_all(&mut self) -> Vec<(bytes::Bytes, V)> {
        self.slots = Box::default();
        std::mem::take(&mut self.items)
            .into_iter()
            .map(|it| (bytes::Bytes::copy_from_slice(&it.key), it.value))
            .collect()
    }

    /// Give back memory when at most an eighth of the room is used (Redis shrinks its tables
    /// at that fill). The SCAN cursor survives it (a smaller table's homes are coarser).
    /// Returns whether the table shrank.
    pub fn shrink_if_sparse(&mut self) -> bool {
        let room = items_for(self.slots.len());
        if self.slots.len() <= MIN_SLOTS || self.items.len() > room / 8 {
            return false;
        }
        let Some(slots) = slots_for(self.items.len()) else { return false };
        if slots >= self.slots.len() {
            return false;
        }
        self.items.shrink_to(items_for(slots));
        // Allocating a smaller index can fail only where any allocation would; keep the
        // old one then.
        let old = std::mem::take(&mut self.slots);
        if self.rebuild(slots).is_err() {
            self.slots = old;
            return false;
        }
        true
    }

    /// One SCAN call from `cursor`: the keys of the homes walked (each with its value), and
    /// the cursor to continue from (0: the iteration is complete). Walks homes until it has
    /// `count` keys or has walked `10 * count` homes, as Redis' SCAN.
    pub fn scan(&self, cursor: u64, count: usize, mut found: impl FnMut(&[u8], &V)) -> u64 {
        if self.items.is_empty() || self.slots.is_empty() {
            return 0;
        }
        let mask = self.mask();
        let mut v = cursor;
        let mut got = 0usize;
        let mut homes_left = count.max(1).saturating_mul(10);
        loop {
            let home = v as usize & mask;
            let mut at = home;
            loop {
                let w = self.slot(at);
                if w == EMPTY {
                    break;
                }
                if let Some(it) = self.items.get(number_of(w)) {
                    if it.hash as usize & mask == home {
                        found(&it.key, &it.value);
                        got += 1;
                    }
                }
                at = (at + 1) & mask;
                if at == home {
                    break;
                }
            }
            v = next_cursor(v, mask as u64);
            homes_left -= 1;
            if v == 0 || homes_left == 0 || got >= count {
                return v;
            }
        }
    }

    /// Check the index against the items (tests): every item found from its home through
    /// taken slots, every taken slot naming a distinct item, at most 3/4 of the slots taken.
    #[cfg(test)]
    pub(crate) fn check(&self) {
        let taken = self.slots.iter().filter(|&&w| w != EMPTY).count();
        assert_eq!(taken, self.items.len(), "one slot per item");
        assert!(self.items.len() <= items_for(self.slots.len()), "fill");
        for (n, it) in self.items.iter().enumerate() {
            assert_eq!(self.hash(&it.key), it.hash);
            assert_eq!(self.find(it.hash, &it.key).map(|(_, m)| m), Some(n), "item {n} findable");
        }
    }
}

mod key;
#[cfg(test)]
mod tests;
