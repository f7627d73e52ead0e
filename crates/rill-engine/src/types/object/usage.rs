//! MEMORY USAGE: an estimate of the bytes a key takes in rill — not Redis' number, which
//! describes Redis' own structures.
//!
//! ```text
//!  key slot      POSITION_BYTES + size_of::<(Bytes, Entry)>()   the keyspace's table: a numbered
//!                + INDEX_SLOT_BYTES                             entry and its index slot
//!  key name      its length                                     (copied on insert)
//!  expiry        EXPIRY_INDEX_BYTES                              an entry of the time index
//!  string        its length
//!  hash          capacity * (POSITION_BYTES + size_of::<(Bytes, Bytes)>())
//!                + buckets * INDEX_SLOT_BYTES + group padding, plus the fields' and values'
//!                bytes (an `indexmap` table: numbered entries, and a hashbrown index of
//!                their positions)
//!  set           the same with size_of::<Bytes>() per entry, plus the members' bytes
//!  list          capacity * size_of::<Bytes>(), plus the elements' bytes
//!  stream        blocks, their index slots, and each group's pending-entry indexes
//! ```
//!
//! Element bytes are sampled as Redis samples them: the average of the first `samples`
//! elements (all of them with `SAMPLES 0`) times the element count, so the cost is
//! O(samples). What it leaves out: allocator rounding and headers, the spare capacity of a
//! buffer that grew by APPEND (`Bytes` does not expose it), and a shared buffer's header.

use crate::{Entry, Value};
use bytes::Bytes;

/// One entry of the expiry index: a `(i64, Bytes)` pair in a B-tree leaf, with the slack of
/// nodes about two-thirds full.
const EXPIRY_INDEX_BYTES: usize = 64;
/// hashbrown's control-byte group: the table allocates this many trailing control bytes.
const GROUP_WIDTH: usize = 16;
/// What an `indexmap` entry holds besides its key and value: the key's hash.
const POSITION_BYTES: usize = std::mem::size_of::<u64>();
/// One slot of an `indexmap` index: a position and its control byte.
const INDEX_SLOT_BYTES: usize = std::mem::size_of::<usize>() + 1;

/// The estimate for `entry` under `key`; `samples` 0 reads every element.
pub fn usage(key: &[u8], entry: &Entry, samples: usize) -> usize {
    let slot = POSITION_BYTES + std::mem::size_of::<(Bytes, Entry)>() + INDEX_SLOT_BYTES;
    let expiry = if entry.expire_at_ms().is_some() { EXPIRY_INDEX_BYTES } else { 0 };
    let meta = entry.meta.list.as_ref().map_or(0, |l| std::mem::size_of_val(&**l) + list_layout_heap(l));
    slot + key.len() + expiry + meta + value_bytes(&entry.value, samples)
}

fn list_layout_heap(layout: &super::quicklist::ListLayout) -> usize {
    match layout {
        super::quicklist::ListLayout::Listpack { .. } => 0,
        super::quicklist::ListLayout::Quicklist { nodes } => {
            nodes.capacity() * std::mem::size_of::<super::quicklist::Node>()
        }
    }
}

/// Buckets of a hashbrown table that can hold `capacity` items (the table keeps 1/8 free).
fn buckets(capacity: usize) -> usize {
    if capacity == 0 {
        0
    } else if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity.saturating_mul(8) / 7).next_power_of_two()
    }
}

/// An `indexmap` table of `capacity` entries of `item` bytes.
fn table_bytes(capacity: usize, item: usize) -> usize {
    match buckets(capacity) {
        0 => 0,
        b => capacity * (POSITION_BYTES + item) + b * INDEX_SLOT_BYTES + GROUP_WIDTH,
    }
}

/// The element bytes of a collection of `len` elements, from a sample.
fn sampled(len: usize, samples: usize, items: impl Iterator<Item = usize>) -> usize {
    let want = if samples == 0 { len } else { samples.min(len) };
    if want == 0 {
        return 0;
    }
    let total: usize = items.take(want).sum();
    if want == len {
        total
    } else {
        total / want * len
    }
}

fn value_bytes(value: &Value, samples: usize) -> usize {
    match value {
        Value::Str(s) => s.len(),
        Value::Hash(h) => {
            let table = table_bytes(h.capacity(), std::mem::size_of::<(Bytes, Bytes)>());
            table + sampled(h.len(), samples, h.iter().map(|(f, v)| f.len() + v.len()))
        }
        Value::Set(s) => {
            let table = table_bytes(s.capacity(), std::mem::size_of::<Bytes>());
            table + sampled(s.len(), samples, s.iter().map(<[u8]>::len))
        }
        Value::List(l) => {
            l.capacity() * std::mem::size_of::<Bytes>() + sampled(l.len(), samples, l.iter().map(Bytes::len))
        }
        Value::ZSet(z) => sampled(z.len(), samples, z.iter().map(|e| e.member.len() + 96)) + 64,
        Value::Stream(s) => {
            let groups: usize =
                s.groups().iter().map(|(name, g)| name.len() + std::mem::size_of_val(g) + g.pel().heap_bytes()).sum();
            s.memory_usage() + groups
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_counts_follow_hashbrown() {
        assert_eq!(buckets(0), 0);
        assert_eq!(buckets(3), 4);
        assert_eq!(buckets(7), 8);
        assert_eq!(buckets(14), 16);
        assert_eq!(buckets(28), 32);
    }

    #[test]
    fn sampling_scales_the_average() {
        assert_eq!(sampled(10, 0, [1usize; 10].into_iter()), 10);
        assert_eq!(sampled(10, 2, [4usize, 6, 100, 100].into_iter()), 50);
        assert_eq!(sampled(0, 5, std::iter::empty()), 0);
        assert_eq!(sampled(3, 5, [1usize, 2, 3].into_iter()), 6);
    }
}
