//! The layout Redis would give a list: one listpack, or a quicklist of listpack nodes.
//!
//! Redis 7.2+ keeps a small list in a single listpack and converts it to a quicklist when an
//! insertion would push the listpack past `list-max-listpack-size`; it converts back only when
//! the quicklist is down to one packed node holding at most half the limit. Whether that
//! happens depends on where Redis' node boundaries fall, so this module replays Redis' node
//! decisions (split, merge, new node, plain node for a large element) on a model that keeps,
//! per node, only its entry count and its byte size. The elements themselves stay in rill's
//! `VecDeque`; the handlers call in here with the elements they add, remove or replace.
//!
//! A listpack's size is exact: a 6-byte header, one end byte, and per entry an encoding (the
//! string, or the integer it spells) plus a back-length:
//!
//! ```text
//!  entry = encoding+data | backlen
//!  integer 0..=127                1 byte      string len < 64      1 + len
//!  integer -4096..=4095           2 bytes     string len < 4096    2 + len
//!  integer -32768..=32767         3 bytes     longer string        5 + len
//!  integer 24-bit                 4 bytes
//!  integer 32-bit                 5 bytes     backlen: 1 byte up to 127, 2 up to 16382,
//!  other i64                      9 bytes     3 up to 2097150, 4 up to 268435454, else 5
//! ```
//!
//! `fill` is `list-max-listpack-size`: a negative value selects a node size (-1: 4 KiB,
//! -2: 8 KiB, ... -5: 64 KiB); a positive one an entry count, with an 8 KiB safety bound.
//! Redis' size checks add an 8-byte estimate per new entry; the model does the same.
//!
//! What the model does not follow: list-compress-depth (compression does not change node
//! sizes as Redis counts them), and DEBUG QUICKLIST-PACKED-THRESHOLD.

use crate::util::parse_i64;
use bytes::Bytes;
use std::collections::VecDeque;

/// A listpack with no entries: header and end byte.
pub const LISTPACK_EMPTY_BYTES: usize = 7;
/// Node sizes the negative `fill` values select.
const NODE_SIZE_CLASSES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// The size bound on nodes under a positive (count) fill, and on single elements under it.
const SAFETY_LIMIT_BYTES: usize = 8192;
/// Redis' estimate of an entry's overhead when it decides whether one more fits a node.
const ENTRY_OVERHEAD_ESTIMATE: usize = 8;

/// One quicklist node as Redis would hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// Entries in the node.
    pub count: usize,
    /// The node's listpack size in bytes (a plain node: the element's length).
    pub bytes: usize,
    /// A plain node: one element too large for a listpack, stored on its own.
    pub plain: bool,
}

/// A list's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListLayout {
    /// One listpack of this many bytes.
    Listpack {
        /// Its size, header included.
        bytes: usize,
    },
    /// A quicklist; nodes from head to tail.
    Quicklist {
        /// The nodes.
        nodes: VecDeque<Node>,
    },
}

/// Bytes one element takes in a listpack.
pub fn entry_bytes(element: &[u8]) -> usize {
    let encoded = match parse_i64(element) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..=4095).contains(&v) => 2,
        Some(v) if (-32768..=32767).contains(&v) => 3,
        Some(v) if (-8_388_608..=8_388_607).contains(&v) => 4,
        Some(v) if i32::try_from(v).is_ok() => 5,
        Some(_) => 9,
        None if element.len() < 64 => 1 + element.len(),
        None if element.len() < 4096 => 2 + element.len(),
        None => 5 + element.len(),
    };
    encoded + crate::rdb::listpack::backlen_width(encoded)
}

/// The limits a `fill` sets: (node bytes, node entries); `usize::MAX` for "no limit".
fn node_limits(fill: i64) -> (usize, usize) {
    if fill >= 0 {
        (usize::MAX, usize::try_from(fill).unwrap_or(usize::MAX).max(1))
    } else {
        let class = usize::try_from(fill.unsigned_abs() - 1).unwrap_or(usize::MAX).min(NODE_SIZE_CLASSES.len() - 1);
        (NODE_SIZE_CLASSES.get(class).copied().unwrap_or(SAFETY_LIMIT_BYTES), usize::MAX)
    }
}

/// Whether a node of `bytes` and `count` entries would be over the limits.
fn exceeds(fill: i64, bytes: usize, count: usize) -> bool {
    let (size_limit, count_limit) = node_limits(fill);
    if size_limit != usize::MAX {
        bytes > size_limit
    } else {
        bytes > SAFETY_LIMIT_BYTES || count > count_limit
    }
}

/// An element Redis keeps in a plain node of its own.
fn is_large(len: usize, fill: i64) -> bool {
    let (size_limit, _) = node_limits(fill);
    if size_limit == usize::MAX {
        len > SAFETY_LIMIT_BYTES
    } else {
        len > size_limit
    }
}

/// Whether one more element of `len` raw bytes may go into `node`.
fn allows_insert(node: Option<&Node>, fill: i64, len: usize) -> bool {
    match node {
        None => false,
        Some(n) if n.plain || is_large(len, fill) => false,
        Some(n) => !exceeds(fill, n.bytes + len + ENTRY_OVERHEAD_ESTIMATE, n.count + 1),
    }
}

fn allows_merge(a: Option<&Node>, b: Option<&Node>, fill: i64) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if !a.plain && !b.plain => {
            !exceeds(fill, (a.bytes + b.bytes).saturating_sub(LISTPACK_EMPTY_BYTES), a.count + b.count)
        }
        _ => false,
    }
}

fn packed(elements: impl Iterator<Item = usize>) -> Node {
    let (mut count, mut bytes) = (0, LISTPACK_EMPTY_BYTES);
    for e in elements {
        count += 1;
        bytes += e;
    }
    Node { count, bytes, plain: false }
}

fn plain(element: &[u8]) -> Node {
    Node { count: 1, bytes: element.len(), plain: true }
}

impl ListLayout {
    /// The layout Redis builds for `list` from scratch (a RESTORE payload or a snapshot): one
    /// listpack if it fits, else a quicklist filled from the head as RPUSH fills it.
    pub fn natural(list: &VecDeque<Bytes>, fill: i64) -> ListLayout {
        let bytes = LISTPACK_EMPTY_BYTES + list.iter().map(|e| entry_bytes(e)).sum::<usize>();
        if !list.iter().any(|e| is_large(e.len(), fill)) && !exceeds(fill, bytes, list.len()) {
            return ListLayout::Listpack { bytes };
        }
        let mut layout = ListLayout::Quicklist { nodes: VecDeque::new() };
        for e in list {
            layout.push(e, false, fill);
        }
        layout
    }

    /// For DEBUG OBJECT: the number of quicklist nodes and their total listpack bytes (Redis'
    /// `ql_nodes` and `ql_uncompressed_size`); `None` for a listpack.
    pub fn quicklist_shape(&self) -> Option<(usize, usize)> {
        match self {
            ListLayout::Listpack { .. } => None,
            ListLayout::Quicklist { nodes } => Some((nodes.len(), nodes.iter().map(|n| n.bytes).sum())),
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn name(&self) -> &'static str {
        match self {
            ListLayout::Listpack { .. } => "listpack",
            ListLayout::Quicklist { .. } => "quicklist",
        }
    }

    /// Before adding elements (`len` now in the list, `added` the raw lengths Redis counts for
    /// the new ones): a listpack that would grow past the limit becomes a one-node quicklist.
    pub fn before_growth(&mut self, len: usize, added: impl Iterator<Item = usize>, fill: i64) {
        let ListLayout::Listpack { bytes } = *self else { return };
        let (mut add_bytes, mut add_count) = (0usize, 0usize);
        for a in added {
            add_bytes = add_bytes.saturating_add(a);
            add_count += 1;
        }
        if exceeds(fill, bytes.saturating_add(add_bytes), len + add_count) {
            let mut nodes = VecDeque::new();
            if len > 0 {
                nodes.push_back(Node { count: len, bytes, plain: false });
            }
            *self = ListLayout::Quicklist { nodes };
        }
    }

    /// After removing elements: a quicklist down to one packed node within half the limits
    /// becomes a listpack again.
    pub fn after_shrink(&mut self, fill: i64) {
        let ListLayout::Quicklist { nodes } = self else { return };
        let (1, Some(only)) = (nodes.len(), nodes.front().copied()) else { return };
        if only.plain {
            return;
        }
        let (size_limit, count_limit) = node_limits(fill);
        if only.bytes <= size_limit / 2 && only.count <= count_limit / 2 {
            *self = ListLayout::Listpack { bytes: only.bytes };
        }
    }

    /// An element pushed at the head or the tail.
    pub fn push(&mut self, element: &[u8], head: bool, fill: i64) {
        match self {
            ListLayout::Listpack { bytes } => *bytes += entry_bytes(element),
            ListLayout::Quicklist { nodes } => {
                let len = element.len();
                if is_large(len, fill) {
                    insert_end(nodes, plain(element), head);
                    return;
                }
                let end = if head { nodes.front_mut() } else { nodes.back_mut() };
                match end {
                    Some(n) if allows_insert(Some(n), fill, len) => {
                        n.count += 1;
                        n.bytes += entry_bytes(element);
                    }
                    _ => insert_end(nodes, packed(std::iter::once(entry_bytes(element))), head),
                }
            }
        }
    }

    /// An element popped from the head or the tail.
    pub fn pop(&mut self, element: &[u8], head: bool) {
        match self {
            ListLayout::Listpack { bytes } => *bytes = bytes.saturating_sub(entry_bytes(element)),
            ListLayout::Quicklist { nodes } => {
                let end = if head { nodes.front_mut() } else { nodes.back_mut() };
                let Some(n) = end else { return };
                n.count = n.count.saturating_sub(1);
                n.bytes = if n.plain { 0 } else { n.bytes.saturating_sub(entry_bytes(element)) };
                if n.count == 0 {
                    if head {
                        nodes.pop_front();
                    } else {
                        nodes.pop_back();
                    }
                }
            }
        }
    }

    /// LREM: copies of `element` removed at these positions of the list as it was (ascending).
    pub fn remove_at(&mut self, positions: &[usize], element: &[u8]) {
        let size = entry_bytes(element);
        match self {
            ListLayout::Listpack { bytes } => *bytes = bytes.saturating_sub(size * positions.len()),
            ListLayout::Quicklist { nodes } => {
                let mut start = 0;
                let mut next = positions.iter().peekable();
                for n in nodes.iter_mut() {
                    let end = start + n.count;
                    let mut k = 0;
                    while next.next_if(|p| **p < end).is_some() {
                        k += 1;
                    }
                    if k > 0 {
                        n.count -= k.min(n.count);
                        n.bytes = if n.plain { 0 } else { n.bytes.saturating_sub(size * k) };
                    }
                    start = end;
                }
                nodes.retain(|n| n.count > 0);
            }
        }
    }

    /// LSET: the element at `index` (of `list`, before the change) replaced by `new`.
    pub fn replace(&mut self, list: &VecDeque<Bytes>, index: usize, new: &[u8], fill: i64) {
        let Some(old) = list.get(index) else { return };
        let nodes = match self {
            ListLayout::Listpack { bytes } => {
                *bytes = (*bytes + entry_bytes(new)).saturating_sub(entry_bytes(old));
                return;
            }
            ListLayout::Quicklist { nodes } => nodes,
        };
        let Some((ni, first, offset)) = locate(nodes, index) else { return };
        let Some(node) = nodes.get(ni).copied() else { return };
        let large = is_large(new.len(), fill);
        if !node.plain && !large {
            if let Some(n) = nodes.get_mut(ni) {
                n.bytes = (n.bytes + entry_bytes(new)).saturating_sub(entry_bytes(old));
            }
        } else if node.plain {
            if large {
                if let Some(n) = nodes.get_mut(ni) {
                    n.bytes = new.len();
                }
            } else {
                // Redis inserts the new element after the plain node, then drops the node.
                insert_into(nodes, list, ni, first, 0, true, new, fill);
                nodes.remove(ni);
            }
        } else {
            // A packed node and a large element: split after the entry, put the element in a
            // plain node between the halves, drop the old entry, then merge around it.
            let sizes = |r: std::ops::Range<usize>| list.range(r).map(|e| entry_bytes(e));
            if offset + 1 != node.count {
                let keep = packed(sizes(first..first + offset + 1));
                let rest = packed(sizes(first + offset + 1..first + node.count));
                if let Some(n) = nodes.get_mut(ni) {
                    *n = keep;
                }
                nodes.insert(ni + 1, rest);
            }
            nodes.insert(ni + 1, plain(new));
            let kept = nodes.get(ni).copied().unwrap_or(node);
            if kept.count == 1 {
                nodes.remove(ni);
            } else {
                if let Some(n) = nodes.get_mut(ni) {
                    n.count -= 1;
                    n.bytes = n.bytes.saturating_sub(entry_bytes(old));
                }
                merge_around(nodes, ni + 1, fill);
            }
        }
    }

    /// LINSERT: `element` inserted before or after the pivot at `index` of `list` (before the
    /// insertion).
    pub fn insert(&mut self, list: &VecDeque<Bytes>, index: usize, after: bool, element: &[u8], fill: i64) {
        let nodes = match self {
            ListLayout::Listpack { bytes } => {
                *bytes += entry_bytes(element);
                return;
            }
            ListLayout::Quicklist { nodes } => nodes,
        };
        let Some((ni, first, offset)) = locate(nodes, index) else { return };
        insert_into(nodes, list, ni, first, offset, after, element, fill);
    }
}

fn insert_end(nodes: &mut VecDeque<Node>, node: Node, head: bool) {
    if head {
        nodes.push_front(node);
    } else {
        nodes.push_back(node);
    }
}

/// The node holding list position `index`: (node index, position of its first element, offset
/// of `index` in it).
fn locate(nodes: &VecDeque<Node>, index: usize) -> Option<(usize, usize, usize)> {
    let mut first = 0;
    for (i, n) in nodes.iter().enumerate() {
        if index < first + n.count {
            return Some((i, first, index - first));
        }
        first += n.count;
    }
    None
}

/// Redis' quicklist insertion next to the entry at `offset` of node `ni` (whose first element is
/// at list position `first`).
#[allow(clippy::too_many_arguments)]
fn insert_into(
    nodes: &mut VecDeque<Node>,
    list: &VecDeque<Bytes>,
    ni: usize,
    first: usize,
    offset: usize,
    after: bool,
    element: &[u8],
    fill: i64,
) {
    let Some(node) = nodes.get(ni).copied() else { return };
    let len = element.len();
    let size = entry_bytes(element);
    let full = !allows_insert(Some(&node), fill, len);
    let at_tail = after && offset + 1 == node.count;
    let at_head = !after && offset == 0;
    let avail_next = at_tail && allows_insert(nodes.get(ni + 1), fill, len);
    let avail_prev = at_head && ni > 0 && allows_insert(ni.checked_sub(1).and_then(|p| nodes.get(p)), fill, len);
    let sizes = |r: std::ops::Range<usize>| list.range(r).map(|e| entry_bytes(e));
    // The node split at `offset`: (the part before the new element, the part after it).
    let split = || {
        if after {
            (packed(sizes(first..first + offset + 1)), packed(sizes(first + offset + 1..first + node.count)))
        } else {
            (packed(sizes(first..first + offset)), packed(sizes(first + offset..first + node.count)))
        }
    };
    if is_large(len, fill) {
        if node.plain || at_tail || at_head {
            nodes.insert(if after { ni + 1 } else { ni }, plain(element));
        } else {
            let (before, rest) = split();
            if let Some(n) = nodes.get_mut(ni) {
                *n = before;
            }
            nodes.insert(ni + 1, plain(element));
            nodes.insert(ni + 2, rest);
        }
        return;
    }
    if !full {
        if let Some(n) = nodes.get_mut(ni) {
            n.count += 1;
            n.bytes += size;
        }
    } else if at_tail && avail_next {
        if let Some(n) = nodes.get_mut(ni + 1) {
            n.count += 1;
            n.bytes += size;
        }
    } else if at_head && avail_prev {
        if let Some(n) = ni.checked_sub(1).and_then(|p| nodes.get_mut(p)) {
            n.count += 1;
            n.bytes += size;
        }
    } else if at_tail || at_head {
        nodes.insert(if after { ni + 1 } else { ni }, packed(std::iter::once(size)));
    } else {
        // Split the full node; the new element joins the half on its side, then Redis tries
        // to merge the neighbourhood of the original node.
        let (mut before, mut rest) = split();
        let center = if after {
            rest.count += 1;
            rest.bytes += size;
            if let Some(n) = nodes.get_mut(ni) {
                *n = before;
            }
            nodes.insert(ni + 1, rest);
            ni
        } else {
            before.count += 1;
            before.bytes += size;
            if let Some(n) = nodes.get_mut(ni) {
                *n = rest;
            }
            nodes.insert(ni, before);
            ni + 1
        };
        merge_around(nodes, center, fill);
    }
}

/// Merge `b` into `a` (adjacent, `a` first) if allowed; returns the index of the result.
fn merge_pair(nodes: &mut VecDeque<Node>, a: usize, fill: i64) -> Option<usize> {
    if !allows_merge(nodes.get(a), nodes.get(a + 1), fill) {
        return None;
    }
    let b = nodes.remove(a + 1)?;
    let n = nodes.get_mut(a)?;
    n.count += b.count;
    n.bytes = (n.bytes + b.bytes).saturating_sub(LISTPACK_EMPTY_BYTES);
    Some(a)
}

/// Redis' `_quicklistMergeNodes`: try (prev-prev, prev), (next, next-next), (prev, center) and
/// (center, next), in that order.
fn merge_around(nodes: &mut VecDeque<Node>, center: usize, fill: i64) {
    let mut center = center;
    if center >= 2 && merge_pair(nodes, center - 2, fill).is_some() {
        center -= 1;
    }
    let _ = merge_pair(nodes, center + 1, fill);
    let target = match center.checked_sub(1).and_then(|p| merge_pair(nodes, p, fill)) {
        Some(t) => t,
        None => center,
    };
    let _ = merge_pair(nodes, target, fill);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> VecDeque<Bytes> {
        items.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()
    }

    #[test]
    fn entry_sizes_follow_the_listpack_encodings() {
        assert_eq!(entry_bytes(b"7"), 2);
        assert_eq!(entry_bytes(b"127"), 2);
        assert_eq!(entry_bytes(b"128"), 3);
        assert_eq!(entry_bytes(b"-4096"), 3);
        assert_eq!(entry_bytes(b"-4097"), 4);
        assert_eq!(entry_bytes(b"40000"), 5);
        assert_eq!(entry_bytes(b"9000000"), 6);
        assert_eq!(entry_bytes(b"3000000000"), 10);
        assert_eq!(entry_bytes(b"a"), 3);
        assert_eq!(entry_bytes(b"07"), 4);
        assert_eq!(entry_bytes(&[b'x'; 100]), 103);
        assert_eq!(entry_bytes(&[b'x'; 200]), 204);
        assert_eq!(entry_bytes(&[b'x'; 5000]), 5007);
    }

    /// The thresholds measured on Redis 8.2.3: 100-byte elements turn a list into a quicklist
    /// at the 80th push and back into a listpack at 39 elements; one-byte strings at 2730,
    /// small integers at 4094.
    #[test]
    fn growth_and_shrink_thresholds_match_redis() {
        let fill = -2;
        let x = vec![b'x'; 100];
        let mut layout = ListLayout::Listpack { bytes: LISTPACK_EMPTY_BYTES };
        let mut len = 0;
        loop {
            layout.before_growth(len, std::iter::once(x.len()), fill);
            layout.push(&x, false, fill);
            len += 1;
            if layout.name() == "quicklist" {
                break;
            }
        }
        assert_eq!(len, 80);
        while layout.name() == "quicklist" {
            layout.pop(&x, false);
            len -= 1;
            layout.after_shrink(fill);
        }
        assert_eq!(len, 39);
        for (element, at) in [(&b"a"[..], 2730), (b"7", 4094)] {
            let mut layout = ListLayout::Listpack { bytes: LISTPACK_EMPTY_BYTES };
            let mut len = 0;
            while layout.name() == "listpack" {
                layout.before_growth(len, std::iter::once(element.len()), fill);
                layout.push(element, false, fill);
                len += 1;
            }
            assert_eq!(len, at);
        }
    }

    #[test]
    fn count_fill_and_plain_nodes() {
        // Fill 3: nodes of three; a quicklist shrinks back only at one entry (3 / 2).
        let l = list(&["a", "b", "c", "d"]);
        let mut layout = ListLayout::natural(&l, 3);
        assert_eq!(
            layout,
            ListLayout::Quicklist {
                nodes: [Node { count: 3, bytes: 16, plain: false }, Node { count: 1, bytes: 10, plain: false }].into()
            }
        );
        for e in ["d", "c"] {
            layout.pop(e.as_bytes(), false);
            layout.after_shrink(3);
            assert_eq!(layout.name(), "quicklist");
        }
        layout.pop(b"b", false);
        layout.after_shrink(3);
        assert_eq!(layout.name(), "listpack");
        // A large element gets a plain node, which never converts back.
        let big = vec![b'x'; 9000];
        let mut layout = ListLayout::natural(&VecDeque::from([Bytes::from(big.clone())]), -2);
        assert_eq!(layout, ListLayout::Quicklist { nodes: [Node { count: 1, bytes: 9000, plain: true }].into() });
        layout.after_shrink(-2);
        assert_eq!(layout.name(), "quicklist");
    }

    #[test]
    fn lrem_and_lset_update_the_nodes() {
        let l = list(&["a", "b", "a", "c", "a"]);
        let mut layout = ListLayout::natural(&l, 2);
        // Nodes [a b] [a c] [a]; removing the a's at 0, 2 and 4 drops the last node.
        layout.remove_at(&[0, 2, 4], b"a");
        assert_eq!(
            layout,
            ListLayout::Quicklist {
                nodes: [Node { count: 1, bytes: 10, plain: false }, Node { count: 1, bytes: 10, plain: false }].into()
            }
        );
        let l = list(&["b", "c"]);
        layout.replace(&l, 1, b"12345", 2);
        assert_eq!(
            layout,
            ListLayout::Quicklist {
                nodes: [Node { count: 1, bytes: 10, plain: false }, Node { count: 1, bytes: 11, plain: false }].into()
            }
        );
    }
}
