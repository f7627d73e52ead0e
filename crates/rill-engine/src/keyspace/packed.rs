//! Small collections in one buffer: each entry is `K` byte strings, each behind a one-byte
//! length (a set's member: `K = 1`; a hash's field and value: `K = 2`), entries one after the
//! other, as Redis keeps a small set or hash in one listpack. One small allocation instead of
//! a table, an index and a buffer per string; a lookup reads from the start, which is why the
//! collections keep to [`MAX_LEN`] entries of at most [`MAX_ITEM`] bytes per string here and
//! move to a table past either (for good).
//!
//! Entries are numbered as `indexmap` numbers them (in order of insertion, the last entry
//! taking the place of a removed one), so a collection reads the same in either form.

/// The most entries a collection keeps in one buffer.
pub const MAX_LEN: usize = 64;
/// The longest string a buffer entry may hold (its length is one byte).
pub const MAX_ITEM: usize = 64;

/// Whether every string fits a buffer entry.
pub fn fits(parts: &[&[u8]]) -> bool {
    parts.iter().all(|p| p.len() <= MAX_ITEM)
}

/// `K` strings per entry, each behind a one-byte length, after a first byte holding the
/// number of entries (an empty collection holds no buffer at all): one vector, so that the
/// collections holding one fit in a key's value without a box of their own.
#[derive(Debug, Clone, Default)]
pub struct Packed<const K: usize> {
    buf: Vec<u8>,
}

/// Where the first entry starts.
const FIRST: usize = 1;

/// Where one entry lies: `start..end` in the buffer; its last string (behind its length byte)
/// at `last..end`.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    start: usize,
    last: usize,
    end: usize,
}

impl<const K: usize> Packed<K> {
    /// How many entries it holds.
    pub fn len(&self) -> usize {
        usize::from(self.buf.first().copied().unwrap_or(0))
    }

    /// The strings of the entry starting at `at`, and where the next begins.
    fn entry_at(&self, at: usize) -> Option<([&[u8]; K], Slot)> {
        let mut parts: [&[u8]; K] = [&[]; K];
        let (start, mut pos, mut last) = (at, at, at);
        for part in parts.iter_mut() {
            last = pos;
            let n = usize::from(*self.buf.get(pos)?);
            *part = self.buf.get(pos + 1..pos + 1 + n)?;
            pos += 1 + n;
        }
        Some((parts, Slot { start, last, end: pos }))
    }

    /// The entries in their order.
    pub fn iter(&self) -> Iter<'_, K> {
        Iter { packed: self, at: FIRST }
    }

    /// The entry whose first string is `first`.
    pub fn find(&self, first: &[u8]) -> Option<Slot> {
        let mut at = FIRST;
        while let Some((parts, slot)) = self.entry_at(at) {
            if parts.first() == Some(&first) {
                return Some(slot);
            }
            at = slot.end;
        }
        None
    }

    /// The entry numbered `index`.
    pub fn slot(&self, index: usize) -> Option<Slot> {
        let mut at = FIRST;
        let mut i = 0;
        loop {
            let (_, slot) = self.entry_at(at)?;
            if i == index {
                return Some(slot);
            }
            at = slot.end;
            i += 1;
        }
    }

    /// The strings of the entry at `slot`.
    pub fn parts(&self, slot: Slot) -> [&[u8]; K] {
        self.entry_at(slot.start).map_or([&[]; K], |(parts, _)| parts)
    }

    /// The last string of the entry at `slot` (a hash's value).
    pub fn last(&self, slot: Slot) -> &[u8] {
        self.buf.get(slot.last + 1..slot.end).unwrap_or_default()
    }

    /// Append an entry (the caller checked [`fits`], the room, and that it is new).
    pub fn push(&mut self, parts: [&[u8]; K]) {
        let need: usize = parts.iter().map(|p| p.len() + 1).sum();
        if self.buf.is_empty() {
            self.buf.reserve_exact(FIRST + need);
            self.buf.push(0);
        } else {
            self.buf.reserve_exact(need);
        }
        for p in parts {
            self.buf.push(p.len() as u8);
            self.buf.extend_from_slice(p);
        }
        if let Some(n) = self.buf.first_mut() {
            *n += 1;
        }
    }

    /// Replace the last string of the entry at `slot` (the caller checked [`fits`]).
    pub fn replace_last(&mut self, slot: Slot, value: &[u8]) {
        let mut with = Vec::with_capacity(value.len() + 1);
        with.push(value.len() as u8);
        with.extend_from_slice(value);
        self.buf.splice(slot.last..slot.end, with);
        self.buf.shrink_to_fit();
    }

    /// Remove the entry at `slot`; the last entry takes its number.
    pub fn swap_remove(&mut self, slot: Slot) {
        if slot.end < self.buf.len() {
            let Some(tail) = self.len().checked_sub(1).and_then(|i| self.slot(i)) else { return };
            let moved = self.buf.get(tail.start..tail.end).map(<[u8]>::to_vec).unwrap_or_default();
            self.buf.truncate(tail.start);
            self.buf.splice(slot.start..slot.end, moved);
        } else {
            self.buf.truncate(slot.start);
        }
        match self.buf.first_mut() {
            Some(n) if *n > 1 => {
                *n -= 1;
                self.buf.shrink_to_fit();
            }
            _ => self.buf = Vec::new(),
        }
    }
}

/// The entries of a [`Packed`], in order.
#[derive(Debug, Clone)]
pub struct Iter<'a, const K: usize> {
    packed: &'a Packed<K>,
    at: usize,
}

impl<'a, const K: usize> Iterator for Iter<'a, K> {
    type Item = [&'a [u8]; K];
    fn next(&mut self) -> Option<Self::Item> {
        let (parts, slot) = self.packed.entry_at(self.at)?;
        self.at = slot.end;
        Some(parts)
    }
}
