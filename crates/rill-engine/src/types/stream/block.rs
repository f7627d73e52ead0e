//! Compact blocks: the unit a stream stores its entries in (Redis' macro nodes).
//!
//! A stream is a `BTreeMap<StreamId, Block>` keyed by each block's *first* ID (the ID of its
//! master entry, kept even after that entry is deleted). A block is one byte buffer:
//!
//! ```text
//! block:  +------------------+-----------+-----------+-----+-----------+
//!         | master fields    | entry 0   | entry 1   | ... | entry n-1 |
//!         +------------------+-----------+-----------+-----+-----------+
//!         entry 0 is the master entry: its ID is the block's key, its field list is the master
//!         field list, and its values are what later entries may be encoded against.
//!
//! master fields:  +--------------+---------------------------------------+
//!                 | count varint | (name len varint, name bytes) * count |
//!                 +--------------+---------------------------------------+
//!
//! entry:  +------------------+------------------+---------------------+----------------+
//!         | head varint      | seq delta varint | own fields (only if | value * fields |
//!         |                  | zigzag(seq - s0) | SAME_FIELDS clear): |                |
//!         |                  | wrapping on u64  | same as master      |                |
//!         |                  |                  | fields layout       |                |
//!         +------------------+------------------+---------------------+----------------+
//!          head = (ms - m0) << HEAD_FLAG_BITS | SAME_FIELDS | DELETED      (m0-s0: block key)
//!          DELETED is bit 0 of the first byte of a varint, so deleting flips one bit in place.
//!
//! value:  one tag byte, then the payload the tag names ("master" = the master entry's value
//!         of the same field; delta tags only appear in entries with SAME_FIELDS set)
//!   0x00..=0x3E  RAW        bytes follow; length = tag
//!   0x3F         RAW_LONG   length varint, bytes
//!   0x40         INT        zigzag varint
//!   0x41         INT_DELTA  zigzag varint of (value - master), wrapping i64
//!   0x42         SAME       byte-identical to master; no payload
//!   0x51..=0x5F  DEC        scale = tag & 0x0F; zigzag varint mantissa ("101.25" = 10125, 2)
//!   0x61..=0x6F  DEC_DELTA  scale = tag & 0x0F; zigzag varint of (mantissa - master mantissa)
//!   0x80..=0xBF  INT_TINY   value = unzigzag(tag & 0x3F), -32..=31; no payload
//!   0xC0..=0xFF  INT_TINY_DELTA  value = master + unzigzag(tag & 0x3F); no payload
//!   (other tags are invalid)
//! ```
//!
//! Numbers are only stored as numbers when their text is canonical (see `codec::classify`),
//! so every value is restored byte for byte. Deleted entries keep their bytes until the block
//! is rewritten (only done when an append must go behind a deleted tail entry) or freed when
//! its last live entry goes, as Redis does.
//!
//! Costs: reading any entry needs the block's master entry and a forward scan to the entry
//! (there are no back pointers). Beside the buffer a block keeps the offset of every
//! [`MARK_EVERY_ENTRIES`]th entry, so locating an entry (the first one a range or a group read wants,
//! which for a reader keeping up is the newest) decodes a few heads to pick a mark and then
//! scans at most `MARK_EVERY_ENTRIES` entries, not the whole block.

use super::codec::{self, classify, get_varint, get_varint_u64, put_varint, unzigzag, zigzag, Scalar};
use super::id::StreamId;
use super::Fields;
use crate::rdb::listpack;
use bytes::Bytes;

/// Every how many entries (in storage order) a block notes an entry's offset.
pub const MARK_EVERY_ENTRIES: u32 = 16;

/// Bits of the head varint used by flags, below the ms delta.
pub const HEAD_FLAG_BITS: u32 = 2;
/// Head flag: the entry is deleted.
pub const FLAG_DELETED: u128 = 0b01;
/// Head flag: the entry's field names are the master field list (not stored again).
pub const FLAG_SAME_FIELDS: u128 = 0b10;

const TAG_RAW_MAX_INLINE: u8 = 0x3E;
const TAG_RAW_LONG: u8 = 0x3F;
const TAG_INT: u8 = 0x40;
const TAG_INT_DELTA: u8 = 0x41;
const TAG_SAME: u8 = 0x42;
const TAG_DEC: u8 = 0x50;
const TAG_DEC_DELTA: u8 = 0x60;
const TAG_SCALE_MASK: u8 = 0x0F;
const TAG_INT_TINY: u8 = 0x80;
const TAG_INT_TINY_DELTA: u8 = 0xC0;
const TAG_TINY_MASK: u8 = 0x3F;
/// Zigzagged values below this fit in a tiny tag.
const TINY_LIMIT: u64 = 0x40;

/// A block never grows past this many bytes, whatever the configuration (Redis' 1 GiB cap).
pub const BLOCK_HARD_MAX_BYTES: u64 = 1 << 30;
/// `stream-node-max-entries` default.
pub const DEFAULT_NODE_MAX_ENTRIES: u64 = 100;
/// `stream-node-max-bytes` default.
pub const DEFAULT_NODE_MAX_BYTES: u64 = 4096;

/// When a new block starts (`stream-node-max-entries`, `stream-node-max-bytes`; 0 = no limit).
/// Passed in from the configuration on every call that may create blocks, because Redis
/// applies a CONFIG SET to existing streams' next appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    /// Entries (live + deleted) after which the tail block is closed; 0 = no limit.
    pub max_entries: u64,
    /// Bytes (buffer + the next entry's raw field and value bytes) at which the tail block is
    /// closed; 0 = [`BLOCK_HARD_MAX_BYTES`].
    pub max_bytes: u64,
}

impl NodeLimits {
    /// From the signed config values (negative treated as 0).
    pub fn new(max_entries: i64, max_bytes: i64) -> NodeLimits {
        NodeLimits {
            max_entries: u64::try_from(max_entries).unwrap_or(0),
            max_bytes: u64::try_from(max_bytes).unwrap_or(0),
        }
    }

    fn effective_max_bytes(self) -> u64 {
        if self.max_bytes == 0 || self.max_bytes > BLOCK_HARD_MAX_BYTES {
            BLOCK_HARD_MAX_BYTES
        } else {
            self.max_bytes
        }
    }
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits { max_entries: DEFAULT_NODE_MAX_ENTRIES, max_bytes: DEFAULT_NODE_MAX_BYTES }
    }
}

/// One block of entries. Its first ID is the key it is stored under; methods that decode IDs
/// take it as `first`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The encoded bytes (layout in the module doc).
    buf: Vec<u8>,
    /// ID of the physically last entry, deleted or not. Invariant: entries are stored in
    /// strictly increasing ID order, all ≥ the block key and ≤ `last_id`.
    last_id: StreamId,
    /// Entries not marked deleted. A block with none stays where Redis keeps such a node (an
    /// exact trim that marked the live rest of a node whose newest entries were deleted).
    live: u32,
    /// Entries marked deleted but still in `buf`.
    deleted: u32,
    /// Offsets of the heads of entries `MARK_EVERY_ENTRIES`, `2 * MARK_EVERY_ENTRIES`, ... in storage order
    /// (deleted or not): where a scan for an entry may start instead of entry 0.
    marks: Vec<u32>,
    /// Bytes this block's master fields and entries would take in Redis' listpack for the same
    /// node (everything but the header, the terminator and the live/deleted counts, which
    /// [`Block::listpack_bytes`] adds): what `stream-node-max-bytes` is measured against.
    lp_body: u32,
}

/// A stored value before master-relative forms are resolved.
#[derive(Debug, Clone, Copy)]
enum Stored<'a> {
    Plain(Scalar<'a>),
    IntDelta(i64),
    Same,
    DecDelta { delta: i64, scale: u8 },
}

/// A master value as [`Block::push`] needs it while it appends to the same buffer: numbers
/// by value, raw bytes by their place in the buffer.
#[derive(Debug, Clone, Copy)]
enum MasterValue {
    Raw { start: usize, end: usize },
    Int(i64),
    Decimal { mantissa: i64, scale: u8 },
}

/// Where an entry is and what its head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryPos {
    pub(crate) id: StreamId,
    pub(crate) deleted: bool,
    /// Offset of the head varint in the buffer.
    pub(crate) offset: usize,
}

/// The decoded master: field names and the master entry's values.
#[derive(Debug)]
pub(crate) struct Master<'a> {
    pub(crate) fields: Vec<&'a [u8]>,
    values: Vec<Scalar<'a>>,
    /// Offset of entry 0.
    entries_start: usize,
}

/// Reads a block's entries in storage order without allocating per entry: what range reads
/// use, so that reaching the first entry of a range costs one pass over the entries before it
/// (heads and values skipped, nothing decoded) instead of a decoded position list.
/// Receives one entry's fields from [`EntryCursor::fields_at`]: their number first, then each
/// name and value in order.
pub(crate) trait FieldSink<'a> {
    /// The entry has `n` fields.
    fn count(&mut self, n: usize);
    /// The next field.
    fn field(&mut self, name: &'a [u8], value: Scalar<'a>);
}

#[derive(Debug)]
pub(crate) struct EntryCursor<'a> {
    buf: &'a [u8],
    first: StreamId,
    master: Master<'a>,
    /// Offset of the next entry's head; `buf.len()` at the end.
    pos: usize,
}

impl<'a> EntryCursor<'a> {
    /// The block's master entry.
    pub(crate) fn master(&self) -> &Master<'a> {
        &self.master
    }

    /// The next entry's place and head, its values skipped. `None` at the end of the block
    /// or if the bytes cannot be decoded.
    pub(crate) fn next_entry(&mut self) -> Option<EntryPos> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let offset = self.pos;
        let mut pos = self.pos;
        let (id, head) = read_head(self.buf, &mut pos, self.first)?;
        let n =
            if head & FLAG_SAME_FIELDS != 0 { self.master.fields.len() } else { skip_field_names(self.buf, &mut pos)? };
        for _ in 0..n {
            skip_value(self.buf, &mut pos)?;
        }
        self.pos = pos;
        Some(EntryPos { id, deleted: head & FLAG_DELETED != 0, offset })
    }

    /// [`Self::next_entry`], its fields passed to `sink` on the way (one pass over the entry).
    pub(crate) fn next_entry_fields(&mut self, sink: &mut impl FieldSink<'a>) -> Option<EntryPos> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let offset = self.pos;
        let (id, head, end) = self.fields_from(offset, sink)?;
        self.pos = end;
        Some(EntryPos { id, deleted: head & FLAG_DELETED != 0, offset })
    }

    /// Decode the entry whose head is at `offset` (from [`Self::next_entry`]), passing each
    /// field name and value to `emit` in order. `None` if the bytes cannot be decoded (some
    /// fields may have been emitted).
    pub(crate) fn fields_at(&self, offset: usize, sink: &mut impl FieldSink<'a>) -> Option<()> {
        self.fields_from(offset, sink).map(|_| ())
    }

    /// [`Self::fields_at`], returning the entry's ID, head and where it ends.
    fn fields_from(&self, offset: usize, sink: &mut impl FieldSink<'a>) -> Option<(StreamId, u128, usize)> {
        let buf = self.buf;
        let mut pos = offset;
        let (id, head) = read_head(buf, &mut pos, self.first)?;
        if head & FLAG_SAME_FIELDS != 0 {
            sink.count(self.master.fields.len());
            for (name, master) in self.master.fields.iter().zip(&self.master.values) {
                let v = resolve(read_value(buf, &mut pos)?, Some(*master))?;
                sink.field(name, v);
            }
        } else {
            let count = get_varint(buf, &mut pos)?;
            sink.count(usize::try_from(count).ok()?);
            let mut names_pos = pos;
            // Names come first, then the values: walk both with two cursors.
            for _ in 0..count {
                let len = usize::try_from(get_varint(buf, &mut pos)?).ok()?;
                take(buf, &mut pos, len)?;
            }
            for _ in 0..count {
                let len = usize::try_from(get_varint(buf, &mut names_pos)?).ok()?;
                let name = take(buf, &mut names_pos, len)?;
                sink.field(name, resolve(read_value(buf, &mut pos)?, None)?);
            }
        }
        Some((id, head, pos))
    }
}

impl Block {
    /// A block holding one entry, which becomes its master.
    pub(crate) fn new<F: Fields + ?Sized>(id: StreamId, fields: &F) -> Block {
        let mut buf = Vec::new();
        put_field_names(&mut buf, fields.pairs().map(|(f, _)| f), fields.pair_count());
        put_varint(&mut buf, FLAG_SAME_FIELDS);
        put_varint(&mut buf, 0);
        for (_, v) in fields.pairs() {
            put_value(&mut buf, v, None);
        }
        let names = fields.pairs().map(|(f, _)| listpack::str_element_bytes(f)).sum::<usize>();
        let master = listpack::int_element_bytes(fields.pair_count() as i64) + names + LP_ZERO_BYTES;
        let lp_body = master + lp_entry_bytes(0, 0, true, fields);
        Block { buf, last_id: id, live: 1, deleted: 0, marks: Vec::new(), lp_body: saturating_u32(lp_body) }
    }

    /// The size of the listpack Redis would hold for this node, as `lpBytes` reports it.
    pub(crate) fn listpack_bytes(&self) -> u64 {
        let counts =
            listpack::int_element_bytes(i64::from(self.live)) + listpack::int_element_bytes(i64::from(self.deleted));
        (LP_HEADER_AND_END_BYTES + counts) as u64 + u64::from(self.lp_body)
    }

    /// Whether an entry with `raw_bytes` of field and value data may still go into this block
    /// (spec §6.4), Redis' rule to the byte: the node's listpack size as Redis measures it plus
    /// the raw bytes stays below the byte cap, and live + deleted entries below `max_entries`.
    pub(crate) fn has_room(&self, raw_bytes: u64, limits: NodeLimits) -> bool {
        let count = u64::from(self.live) + u64::from(self.deleted);
        let bytes = self.listpack_bytes().saturating_add(raw_bytes);
        bytes < limits.effective_max_bytes()
            && (limits.max_entries == 0 || count < limits.max_entries)
            && count < u64::from(u32::MAX)
    }

    /// Append an entry. `id` must be greater than [`Block::last_id`]; returns false (and
    /// changes nothing) otherwise or if the block cannot be decoded.
    pub(crate) fn push<F: Fields + ?Sized>(&mut self, first: StreamId, id: StreamId, fields: &F) -> bool {
        if id <= self.last_id || id < first {
            return false;
        }
        let Some(ms_delta) = id.ms.checked_sub(first.ms) else {
            return false;
        };
        let Some(live) = self.live.checked_add(1) else {
            return false;
        };
        let index = self.live + self.deleted;
        // Encoded straight onto the end of the buffer, reading the master in place (no
        // decoded copy of it, no temporary entry): this runs once per XADD. On any decoding
        // failure the buffer is cut back, so the block is unchanged.
        let old_len = self.buf.len();
        let Some((same, values)) = self.push_encoded(first, id, ms_delta, fields) else {
            self.buf.truncate(old_len);
            return false;
        };
        let entry = lp_entry_bytes_with(ms_delta as i64, id.seq.wrapping_sub(first.seq) as i64, same, fields, values);
        self.lp_body = saturating_u32(self.lp_body as usize + entry);
        self.last_id = id;
        self.live = live;
        if index.is_multiple_of(MARK_EVERY_ENTRIES) {
            if let Ok(offset) = u32::try_from(old_len) {
                self.marks.push(offset);
            }
        }
        true
    }

    /// [`Block::push`], the entry then marked deleted if `deleted` (a snapshot's node holding
    /// deleted entries, rebuilt as it was).
    pub(crate) fn push_marked<F: Fields + ?Sized>(
        &mut self,
        first: StreamId,
        id: StreamId,
        fields: &F,
        deleted: bool,
    ) -> bool {
        let at = self.buf.len();
        self.push(first, id, fields) && (!deleted || self.mark_at(at))
    }

    /// Mark entry 0 deleted (see [`Block::push_marked`]).
    pub(crate) fn mark_first(&mut self, first: StreamId) -> bool {
        match self.master(first).map(|m| m.entries_start) {
            Some(at) => self.mark_at(at),
            None => false,
        }
    }

    /// Append the encoding of entry `id` to the buffer (see [`Block::push`]). Returns whether
    /// its field names are the master's, and the bytes its values take in Redis' listpack
    /// (counted from the values as classified here, not parsed again).
    fn push_encoded<F: Fields + ?Sized>(
        &mut self,
        first: StreamId,
        id: StreamId,
        ms_delta: u64,
        fields: &F,
    ) -> Option<(bool, usize)> {
        // Pass 1: do the names equal the master field list? Also finds entry 0.
        let mut pos = 0;
        let count = get_varint(&self.buf, &mut pos)?;
        let mut same = usize::try_from(count).ok() == Some(fields.pair_count());
        for i in 0..count {
            let len = usize::try_from(get_varint(&self.buf, &mut pos)?).ok()?;
            let name = take(&self.buf, &mut pos, len)?;
            let expected = usize::try_from(i).ok().and_then(|i| fields.pair(i));
            same = same && expected.is_some_and(|(f, _)| name == f);
        }
        let mut master_pos = pos;
        let (_, master_head) = read_head(&self.buf, &mut master_pos, first)?;
        if master_head & FLAG_SAME_FIELDS == 0 {
            return None;
        }
        let mut values = 0;
        let head = (u128::from(ms_delta) << HEAD_FLAG_BITS) | if same { FLAG_SAME_FIELDS } else { 0 };
        put_varint(&mut self.buf, head);
        put_varint(&mut self.buf, u128::from(zigzag(id.seq.wrapping_sub(first.seq) as i64)));
        if same {
            // Pass 2: master values are read one by one beside the new ones. The master's
            // bytes stay where they are (we only append), so a raw master value is kept as
            // its place in the buffer and compared there.
            for (_, v) in fields.pairs() {
                let master = match read_value(&self.buf, &mut master_pos)? {
                    Stored::Plain(Scalar::Raw(b)) => {
                        let end = master_pos;
                        MasterValue::Raw { start: end - b.len(), end }
                    }
                    Stored::Plain(Scalar::Int(m)) => MasterValue::Int(m),
                    Stored::Plain(Scalar::Decimal { mantissa, scale }) => MasterValue::Decimal { mantissa, scale },
                    _ => return None,
                };
                let scalar = classify(v);
                values += value_element_bytes(scalar, v);
                let (is_same, numeric) = match (master, scalar) {
                    (MasterValue::Raw { start, end }, Scalar::Raw(b)) => (self.buf.get(start..end) == Some(b), None),
                    (MasterValue::Raw { .. }, _) => (false, None),
                    (MasterValue::Int(m), _) => (scalar == Scalar::Int(m), Some(Scalar::Int(m))),
                    (MasterValue::Decimal { mantissa, scale }, _) => {
                        let m = Scalar::Decimal { mantissa, scale };
                        (scalar == m, Some(m))
                    }
                };
                if is_same {
                    self.buf.push(TAG_SAME);
                } else {
                    put_scalar(&mut self.buf, scalar, numeric);
                }
            }
        } else {
            put_field_names(&mut self.buf, fields.pairs().map(|(f, _)| f), fields.pair_count());
            for (_, v) in fields.pairs() {
                let scalar = classify(v);
                values += value_element_bytes(scalar, v);
                put_scalar(&mut self.buf, scalar, None);
            }
        }
        Some((same, values))
    }

    /// The encoded bytes (layout in the module doc), for snapshots and size accounting.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Entries not marked deleted.
    pub fn live_count(&self) -> u64 {
        u64::from(self.live)
    }

    /// Entries marked deleted and still stored.
    pub fn deleted_count(&self) -> u64 {
        u64::from(self.deleted)
    }

    /// ID of the physically last entry (possibly deleted).
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// Heap bytes held (buffer and marks capacity).
    pub fn heap_bytes(&self) -> usize {
        self.buf.capacity() + self.marks.capacity() * std::mem::size_of::<u32>()
    }

    /// Drop spare capacity; called when the block stops being the tail.
    pub(crate) fn shrink(&mut self) {
        self.buf.shrink_to_fit();
        self.marks.shrink_to_fit();
    }

    /// The offset of the last marked entry with an ID ≤ `id`, if any: a scan for `id` (or for
    /// the first entry after it) may start there. O(log marks) head decodes.
    fn mark_before(&self, first: StreamId, id: StreamId) -> Option<usize> {
        let at_or_before = |&m: &u32| {
            let mut pos = m as usize;
            read_head(&self.buf, &mut pos, first).is_some_and(|(here, _)| here <= id)
        };
        let n = self.marks.partition_point(at_or_before);
        n.checked_sub(1).and_then(|i| self.marks.get(i)).map(|&m| m as usize)
    }

    /// Decode the master field list and the master entry's values.
    pub(crate) fn master(&self, first: StreamId) -> Option<Master<'_>> {
        let buf = self.buf.as_slice();
        let mut pos = 0;
        let fields = read_field_names(buf, &mut pos)?;
        let entries_start = pos;
        let (_, head) = read_head(buf, &mut pos, first)?;
        if head & FLAG_SAME_FIELDS == 0 {
            return None;
        }
        let mut values = Vec::with_capacity(fields.len());
        for _ in 0..fields.len() {
            match read_value(buf, &mut pos)? {
                Stored::Plain(s) => values.push(s),
                _ => return None,
            }
        }
        Some(Master { fields, values, entries_start })
    }

    /// Every entry's position, in storage (= ID) order. O(bytes in the block).
    pub(crate) fn positions(&self, first: StreamId) -> Option<Vec<EntryPos>> {
        let buf = self.buf.as_slice();
        let mut pos = 0;
        let master_fields = read_field_names(buf, &mut pos)?.len();
        let mut out = Vec::with_capacity(self.live as usize + self.deleted as usize);
        while pos < buf.len() {
            let offset = pos;
            let (id, head) = read_head(buf, &mut pos, first)?;
            let n = if head & FLAG_SAME_FIELDS != 0 { master_fields } else { read_field_names(buf, &mut pos)?.len() };
            for _ in 0..n {
                read_value(buf, &mut pos)?;
            }
            out.push(EntryPos { id, deleted: head & FLAG_DELETED != 0, offset });
        }
        Some(out)
    }

    /// The position of entry `id`, scanning from the last mark before it.
    pub(crate) fn find(&self, first: StreamId, id: StreamId) -> Option<EntryPos> {
        let buf = self.buf.as_slice();
        let mut pos = 0;
        let master_fields = read_field_names(buf, &mut pos)?.len();
        if let Some(mark) = self.mark_before(first, id) {
            pos = mark;
        }
        while pos < buf.len() {
            let offset = pos;
            let (here, head) = read_head(buf, &mut pos, first)?;
            if here == id {
                return Some(EntryPos { id, deleted: head & FLAG_DELETED != 0, offset });
            }
            if here > id {
                return None;
            }
            let n = if head & FLAG_SAME_FIELDS != 0 { master_fields } else { read_field_names(buf, &mut pos)?.len() };
            for _ in 0..n {
                read_value(buf, &mut pos)?;
            }
        }
        None
    }

    /// Decode the fields of the entry whose head is at `offset`. `names` are the master field
    /// names as `Bytes` (cloned per entry, so a scan copies them once per block).
    pub(crate) fn decode_at(
        &self,
        first: StreamId,
        master: &Master<'_>,
        names: &[Bytes],
        offset: usize,
    ) -> Option<Vec<(Bytes, Bytes)>> {
        let buf = self.buf.as_slice();
        let mut pos = offset;
        let (_, head) = read_head(buf, &mut pos, first)?;
        let mut out = Vec::new();
        if head & FLAG_SAME_FIELDS != 0 {
            for (i, name) in names.iter().enumerate() {
                let stored = read_value(buf, &mut pos)?;
                let v = resolve(stored, master.values.get(i).copied())?;
                out.push((name.clone(), to_bytes(v)));
            }
        } else {
            let own = read_field_names(buf, &mut pos)?;
            for name in own {
                let v = resolve(read_value(buf, &mut pos)?, None)?;
                out.push((Bytes::copy_from_slice(name), to_bytes(v)));
            }
        }
        Some(out)
    }

    /// A reader positioned at entry 0, with the master decoded once for all the entries it
    /// reads. `None` if the block cannot be decoded.
    pub(crate) fn cursor(&self, first: StreamId) -> Option<EntryCursor<'_>> {
        let master = self.master(first)?;
        Some(EntryCursor { buf: &self.buf, first, pos: master.entries_start, master })
    }

    /// A reader positioned at or before the first entry with an ID ≥ `start` (at most
    /// [`MARK_EVERY_ENTRIES`] entries before it).
    pub(crate) fn cursor_from(&self, first: StreamId, start: StreamId) -> Option<EntryCursor<'_>> {
        let mut cursor = self.cursor(first)?;
        if let Some(mark) = self.mark_before(first, start) {
            cursor.pos = mark;
        }
        Some(cursor)
    }

    /// Mark the live entry `id` deleted. False if there is no such live entry.
    pub(crate) fn mark_deleted(&mut self, first: StreamId, id: StreamId) -> bool {
        if id < first || id > self.last_id {
            return false;
        }
        match self.find(first, id) {
            Some(p) if !p.deleted => self.mark_at(p.offset),
            _ => false,
        }
    }

    /// Mark live entries deleted from the front while `take(id)` says so; stops at the first
    /// live entry it refuses. Returns how many were marked.
    pub(crate) fn delete_front_while(&mut self, first: StreamId, mut take: impl FnMut(StreamId) -> bool) -> u64 {
        let Some(positions) = self.positions(first) else {
            return 0;
        };
        let mut marked = 0;
        for p in positions.iter().filter(|p| !p.deleted) {
            if !take(p.id) || !self.mark_at(p.offset) {
                break;
            }
            marked += 1;
        }
        marked
    }

    fn mark_at(&mut self, offset: usize) -> bool {
        match self.buf.get_mut(offset) {
            Some(b) if *b & FLAG_DELETED as u8 == 0 => {
                *b |= FLAG_DELETED as u8;
                self.live = self.live.saturating_sub(1);
                self.deleted = self.deleted.saturating_add(1);
                true
            }
            _ => false,
        }
    }

    /// A fresh block with only the live entries (the first live one becomes the master), and
    /// its key. `None` if nothing is live. O(bytes in the block).
    pub(crate) fn rewrite_live(&self, first: StreamId) -> Option<(StreamId, Block)> {
        let master = self.master(first)?;
        let names: Vec<Bytes> = master.fields.iter().map(|f| Bytes::copy_from_slice(f)).collect();
        let mut out: Option<(StreamId, Block)> = None;
        for p in self.positions(first)?.into_iter().filter(|p| !p.deleted) {
            let fields = self.decode_at(first, &master, &names, p.offset)?;
            match out.as_mut() {
                None => out = Some((p.id, Block::new(p.id, &fields))),
                Some((key, block)) => {
                    if !block.push(*key, p.id, &fields) {
                        return None;
                    }
                }
            }
        }
        out
    }

    /// The parts of this block a rill replica needs to rebuild it byte for byte
    /// ([`Block::from_raw`]): the buffer, the last ID, the live and deleted counts and the
    /// listpack size Redis would measure (its marks are rebuilt from the buffer).
    pub fn raw_parts(&self) -> (&[u8], StreamId, u32, u32, u32) {
        (&self.buf, self.last_id, self.live, self.deleted, self.lp_body)
    }

    /// A block from [`Block::raw_parts`] of a block keyed `first` (a rill primary's snapshot
    /// for its rill replica): its entries are walked once to rebuild the marks and to check
    /// everything the parts claim — every entry and value decodes (against the master where
    /// it refers to it), IDs rise from `first` to `last_id`, the live and deleted counts and
    /// the listpack size are the entries' — so a block that loads is one this server could
    /// have made. `None` if any of it does not hold. O(bytes), nothing allocated per entry,
    /// nothing re-encoded.
    pub(crate) fn from_raw(
        first: StreamId,
        buf: Vec<u8>,
        last_id: StreamId,
        live: u32,
        deleted: u32,
        lp_body: u32,
    ) -> Option<Block> {
        let mut block = Block { buf, last_id, live, deleted, marks: Vec::new(), lp_body };
        let (mut seen_live, mut seen_deleted, mut prev) = (0u32, 0u32, None::<StreamId>);
        let mut marks = Vec::new();
        {
            let mut cursor = block.cursor(first)?;
            let names = &cursor.master().fields;
            let names_bytes = names.iter().map(|f| listpack::str_element_bytes(f)).sum::<usize>();
            let mut lp = listpack::int_element_bytes(names.len() as i64) + names_bytes + LP_ZERO_BYTES;
            let master_bytes = names.iter().map(|f| listpack::str_element_bytes(f)).collect();
            let mut sizer = EntrySizer { master: names.clone(), master_bytes, ..EntrySizer::default() };
            let mut index = 0u32;
            while let Some(p) = cursor.next_entry_fields(&mut sizer) {
                if prev.map_or(p.id != first, |prev| p.id <= prev) {
                    return None;
                }
                prev = Some(p.id);
                lp += sizer.entry_bytes(p.id.ms.wrapping_sub(first.ms) as i64, p.id.seq.wrapping_sub(first.seq) as i64);
                if index > 0 && index.is_multiple_of(MARK_EVERY_ENTRIES) {
                    marks.push(u32::try_from(p.offset).ok()?);
                }
                index = index.checked_add(1)?;
                if p.deleted {
                    seen_deleted += 1;
                } else {
                    seen_live += 1;
                }
            }
            // `next_entry` also stops at bytes it cannot decode: the walk must end at the end.
            if cursor.pos != block.buf.len() || saturating_u32(lp) != lp_body {
                return None;
            }
        }
        if prev != Some(last_id) || seen_live != live || seen_deleted != deleted {
            return None;
        }
        block.marks = marks;
        Some(block)
    }

    /// Fully decode and check the block; used by tests (and later by the snapshot loader).
    /// Verifies counts, ID order and `last_id`.
    pub(crate) fn validate(&self, first: StreamId) -> bool {
        let Some(master) = self.master(first) else {
            return false;
        };
        let names: Vec<Bytes> = master.fields.iter().map(|f| Bytes::copy_from_slice(f)).collect();
        let Some(positions) = self.positions(first) else {
            return false;
        };
        let live = positions.iter().filter(|p| !p.deleted).count();
        let marks_ok = self.marks.iter().enumerate().all(|(i, &m)| {
            positions.get((i + 1) * MARK_EVERY_ENTRIES as usize).is_some_and(|p| p.offset == m as usize)
        }) && positions.len().saturating_sub(1) / MARK_EVERY_ENTRIES as usize == self.marks.len();
        let sorted = positions.windows(2).all(|w| matches!(w, [a, b] if a.id < b.id));
        let names_bytes = master.fields.iter().map(|f| listpack::str_element_bytes(f)).sum::<usize>();
        let mut lp_body = listpack::int_element_bytes(master.fields.len() as i64) + names_bytes + LP_ZERO_BYTES;
        for p in &positions {
            let Some(fields) = self.decode_at(first, &master, &names, p.offset) else {
                return false;
            };
            let same = fields.len() == names.len() && fields.iter().zip(&names).all(|((f, _), m)| f == m);
            let ms = p.id.ms.wrapping_sub(first.ms) as i64;
            lp_body += lp_entry_bytes(ms, p.id.seq.wrapping_sub(first.seq) as i64, same, &fields);
        }
        master.entries_start > 0
            && saturating_u32(lp_body) == self.lp_body
            && marks_ok
            && positions.first().map(|p| p.id) == Some(first)
            && positions.last().map(|p| p.id) == Some(self.last_id)
            && sorted
            && live == self.live as usize
            && positions.len() - live == self.deleted as usize
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// A listpack's 6-byte header (total bytes, element count) and its end byte.
const LP_HEADER_AND_END_BYTES: usize = 7;
/// The listpack element of the integer 0 (the master entry's terminator).
const LP_ZERO_BYTES: usize = 2;
/// The flags element of an entry (flags are at most 3: one byte and its back-length).
const LP_FLAGS_BYTES: usize = 2;

/// What one entry takes in Redis' listpack, from the fields a cursor hands over (see
/// [`Block::from_raw`]): [`lp_entry_bytes`] without a decoded copy of the entry.
#[derive(Debug, Default)]
struct EntrySizer<'a> {
    /// The master's field names, and the listpack bytes of each.
    master: Vec<&'a [u8]>,
    master_bytes: Vec<usize>,
    /// This entry's field count, whether its names are the master's so far, and the listpack
    /// bytes of its names and of its values.
    n: usize,
    same: bool,
    names: usize,
    values: usize,
}

impl<'a> FieldSink<'a> for EntrySizer<'a> {
    fn count(&mut self, n: usize) {
        self.n = 0;
        self.same = n == self.master.len();
        self.names = listpack::int_element_bytes(n as i64);
        self.values = 0;
    }

    fn field(&mut self, name: &'a [u8], value: Scalar<'a>) {
        // An entry with the master's fields hands over the master's own slices.
        let master = self.master.get(self.n);
        self.same = self.same && master.is_some_and(|m| std::ptr::eq(*m, name) || *m == name);
        self.names += match self.master_bytes.get(self.n) {
            Some(&bytes) if self.same => bytes,
            _ => listpack::str_element_bytes(name),
        };
        self.n += 1;
        self.values += match value {
            Scalar::Raw(b) => listpack::str_element_bytes(b),
            Scalar::Int(v) => listpack::int_element_bytes(v),
            Scalar::Decimal { mantissa, scale } => {
                listpack::text_element_bytes(codec::decimal_text_len(mantissa, scale))
            }
        };
    }
}

impl EntrySizer<'_> {
    /// The entry's bytes, as [`lp_entry_bytes`] counts them, once its fields went through.
    fn entry_bytes(&self, ms_delta: i64, seq_delta: i64) -> usize {
        let ids = LP_FLAGS_BYTES + listpack::int_element_bytes(ms_delta) + listpack::int_element_bytes(seq_delta);
        let (body, elements) =
            if self.same { (self.values, self.n + 3) } else { (self.names + self.values, 2 * self.n + 4) };
        ids + body + listpack::int_element_bytes(elements as i64)
    }
}

/// Bytes one entry takes in Redis' stream listpack: flags, the ID's ms and seq deltas from the
/// master ID (wrapping, as signed integers), then with `same` fields only the values, else the
/// field count and each name and value; last the entry's element count.
fn lp_entry_bytes<F: Fields + ?Sized>(ms_delta: i64, seq_delta: i64, same: bool, fields: &F) -> usize {
    let n = fields.pair_count();
    let mut bytes = LP_FLAGS_BYTES + listpack::int_element_bytes(ms_delta) + listpack::int_element_bytes(seq_delta);
    let elements = if same {
        bytes += fields.pairs().map(|(_, v)| listpack::str_element_bytes(v)).sum::<usize>();
        n + 3
    } else {
        bytes += listpack::int_element_bytes(n as i64);
        bytes +=
            fields.pairs().map(|(f, v)| listpack::str_element_bytes(f) + listpack::str_element_bytes(v)).sum::<usize>();
        2 * n + 4
    };
    bytes + listpack::int_element_bytes(elements as i64)
}

/// [`lp_entry_bytes`], given the bytes of the entry's values (see [`value_element_bytes`]).
fn lp_entry_bytes_with<F: Fields + ?Sized>(
    ms_delta: i64,
    seq_delta: i64,
    same: bool,
    fields: &F,
    values: usize,
) -> usize {
    let n = fields.pair_count();
    let ids = LP_FLAGS_BYTES + listpack::int_element_bytes(ms_delta) + listpack::int_element_bytes(seq_delta);
    let (body, elements) = if same {
        (values, n + 3)
    } else {
        let names = fields.pairs().map(|(f, _)| listpack::str_element_bytes(f)).sum::<usize>();
        (listpack::int_element_bytes(n as i64) + names + values, 2 * n + 4)
    };
    ids + body + listpack::int_element_bytes(elements as i64)
}

/// The bytes value `text` takes as a listpack element, from its classification: an integer's
/// text is stored as the integer, anything else as text ([`listpack::str_element_bytes`]
/// without parsing it again).
fn value_element_bytes(scalar: Scalar<'_>, text: &[u8]) -> usize {
    match scalar {
        Scalar::Int(v) => listpack::int_element_bytes(v),
        _ => listpack::text_element_bytes(text.len()),
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn put_field_names<'a>(buf: &mut Vec<u8>, names: impl Iterator<Item = &'a [u8]>, count: usize) {
    put_varint(buf, count as u128);
    for name in names {
        put_varint(buf, name.len() as u128);
        buf.extend_from_slice(name);
    }
}

/// Encode `value` with the shortest form available, given the master's value of the same
/// field when the entry shares the master field list.
fn put_value(buf: &mut Vec<u8>, value: &[u8], master: Option<Scalar<'_>>) {
    let scalar = classify(value);
    if master == Some(scalar) {
        buf.push(TAG_SAME);
        return;
    }
    put_scalar(buf, scalar, master);
}

/// Encode `scalar`, not equal to `master`; a numeric master allows a delta form.
fn put_scalar(buf: &mut Vec<u8>, scalar: Scalar<'_>, master: Option<Scalar<'_>>) {
    match scalar {
        Scalar::Raw(b) => {
            match u8::try_from(b.len()) {
                Ok(len) if len <= TAG_RAW_MAX_INLINE => buf.push(len),
                _ => {
                    buf.push(TAG_RAW_LONG);
                    put_varint(buf, b.len() as u128);
                }
            }
            buf.extend_from_slice(b);
        }
        Scalar::Int(v) => {
            let absolute = zigzag(v);
            let delta = match master {
                Some(Scalar::Int(m)) => Some(zigzag(v.wrapping_sub(m))),
                _ => None,
            };
            match delta {
                Some(d) if number_len(d) < number_len(absolute) => {
                    put_number(buf, TAG_INT_DELTA, Some(TAG_INT_TINY_DELTA), d);
                }
                _ => put_number(buf, TAG_INT, Some(TAG_INT_TINY), absolute),
            }
        }
        Scalar::Decimal { mantissa, scale } => {
            let scale_bits = scale & TAG_SCALE_MASK;
            let absolute = zigzag(mantissa);
            let delta = match master {
                Some(Scalar::Decimal { mantissa: m, scale: s }) if s == scale => Some(zigzag(mantissa.wrapping_sub(m))),
                _ => None,
            };
            match delta {
                Some(d) if codec::varint_len(u128::from(d)) < codec::varint_len(u128::from(absolute)) => {
                    put_number(buf, TAG_DEC_DELTA | scale_bits, None, d);
                }
                _ => put_number(buf, TAG_DEC | scale_bits, None, absolute),
            }
        }
    }
}

fn number_len(zigzagged: u64) -> usize {
    if zigzagged < TINY_LIMIT {
        1
    } else {
        1 + codec::varint_len(u128::from(zigzagged))
    }
}

fn put_number(buf: &mut Vec<u8>, tag: u8, tiny_tag: Option<u8>, zigzagged: u64) {
    match (tiny_tag, u8::try_from(zigzagged)) {
        (Some(t), Ok(small)) if u64::from(small) < TINY_LIMIT => buf.push(t | small),
        _ => {
            buf.push(tag);
            put_varint(buf, u128::from(zigzagged));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding (every reader returns None on malformed input)
// ---------------------------------------------------------------------------------------------

fn read_field_names<'a>(buf: &'a [u8], pos: &mut usize) -> Option<Vec<&'a [u8]>> {
    let count = get_varint(buf, pos)?;
    // No capacity from the count: a corrupt count must not allocate.
    let mut names = Vec::new();
    for _ in 0..count {
        let len = usize::try_from(get_varint(buf, pos)?).ok()?;
        names.push(take(buf, pos, len)?);
    }
    Some(names)
}

/// Skip a field name list; returns how many names it has.
fn skip_field_names(buf: &[u8], pos: &mut usize) -> Option<usize> {
    let count = usize::try_from(get_varint(buf, pos)?).ok()?;
    for _ in 0..count {
        let len = usize::try_from(get_varint(buf, pos)?).ok()?;
        take(buf, pos, len)?;
    }
    Some(count)
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, len: usize) -> Option<&'a [u8]> {
    let end = pos.checked_add(len)?;
    let out = buf.get(*pos..end)?;
    *pos = end;
    Some(out)
}

/// Read an entry head and seq delta; returns the ID and the head (for its flags).
fn read_head(buf: &[u8], pos: &mut usize, first: StreamId) -> Option<(StreamId, u128)> {
    let head = get_varint(buf, pos)?;
    let ms_delta = u64::try_from(head >> HEAD_FLAG_BITS).ok()?;
    let seq_delta = unzigzag(get_varint_u64(buf, pos)?);
    let id = StreamId { ms: first.ms.checked_add(ms_delta)?, seq: first.seq.wrapping_add(seq_delta as u64) };
    Some((id, head))
}

fn read_value<'a>(buf: &'a [u8], pos: &mut usize) -> Option<Stored<'a>> {
    let tag = *buf.get(*pos)?;
    *pos += 1;
    let stored = match tag {
        0..=TAG_RAW_MAX_INLINE => Stored::Plain(Scalar::Raw(take(buf, pos, usize::from(tag))?)),
        TAG_RAW_LONG => {
            let len = usize::try_from(get_varint(buf, pos)?).ok()?;
            Stored::Plain(Scalar::Raw(take(buf, pos, len)?))
        }
        TAG_INT => Stored::Plain(Scalar::Int(unzigzag(get_varint_u64(buf, pos)?))),
        TAG_INT_DELTA => Stored::IntDelta(unzigzag(get_varint_u64(buf, pos)?)),
        TAG_SAME => Stored::Same,
        0x51..=0x5F => Stored::Plain(Scalar::Decimal {
            mantissa: unzigzag(get_varint_u64(buf, pos)?),
            scale: tag & TAG_SCALE_MASK,
        }),
        0x61..=0x6F => Stored::DecDelta { delta: unzigzag(get_varint_u64(buf, pos)?), scale: tag & TAG_SCALE_MASK },
        0x80..=0xBF => Stored::Plain(Scalar::Int(unzigzag(u64::from(tag & TAG_TINY_MASK)))),
        0xC0..=0xFF => Stored::IntDelta(unzigzag(u64::from(tag & TAG_TINY_MASK))),
        _ => return None,
    };
    Some(stored)
}

/// Step over a value without decoding it (range reads pass most entries of a block unseen).
/// Accepts the tags [`read_value`] accepts; payloads are only checked to be present.
fn skip_value(buf: &[u8], pos: &mut usize) -> Option<()> {
    let tag = *buf.get(*pos)?;
    *pos += 1;
    match tag {
        0..=TAG_RAW_MAX_INLINE => {
            take(buf, pos, usize::from(tag))?;
        }
        TAG_RAW_LONG => {
            let len = usize::try_from(get_varint(buf, pos)?).ok()?;
            take(buf, pos, len)?;
        }
        TAG_INT | TAG_INT_DELTA | 0x51..=0x5F | 0x61..=0x6F => codec::skip_varint(buf, pos)?,
        TAG_SAME | 0x80..=0xFF => {}
        _ => return None,
    }
    Some(())
}

fn resolve<'a>(stored: Stored<'a>, master: Option<Scalar<'a>>) -> Option<Scalar<'a>> {
    match (stored, master) {
        (Stored::Plain(s), _) => Some(s),
        (Stored::Same, Some(m)) => Some(m),
        (Stored::IntDelta(d), Some(Scalar::Int(m))) => Some(Scalar::Int(m.wrapping_add(d))),
        (Stored::DecDelta { delta, scale }, Some(Scalar::Decimal { mantissa, scale: s })) if s == scale => {
            Some(Scalar::Decimal { mantissa: mantissa.wrapping_add(delta), scale })
        }
        _ => None,
    }
}

fn to_bytes(s: Scalar<'_>) -> Bytes {
    match s {
        Scalar::Raw(b) => Bytes::copy_from_slice(b),
        other => {
            let mut out = Vec::new();
            codec::render(other, &mut out);
            Bytes::from(out)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod size_tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    /// Values of every kind the classification tells apart: integers (canonical or not),
    /// decimals, text, and text that looks almost numeric.
    fn value() -> impl Strategy<Value = Bytes> {
        prop_oneof![
            any::<i64>().prop_map(|v| Bytes::from(v.to_string())),
            (0u8..200).prop_map(|v| Bytes::from(v.to_string())),
            (-99_999i64..99_999, 1u32..6).prop_map(|(m, s)| Bytes::from(format!(
                "{}.{:0>w$}",
                m / 10,
                m.unsigned_abs() % 10,
                w = s as usize
            ))),
            prop::sample::select(vec!["007", "-0", "1e3", " 1", "NVDA.OQ", "", "9223372036854775808", "1187.2500"])
                .prop_map(Bytes::from),
            "[a-z]{0,70}".prop_map(Bytes::from),
        ]
    }

    fn entry() -> impl Strategy<Value = Vec<(Bytes, Bytes)>> {
        let name = prop::sample::select(vec!["symbol", "price", "seq", "ts", "1", "x"]).prop_map(Bytes::from);
        prop::collection::vec((name, value()), 1..5)
    }

    proptest! {
        /// Each entry's share of the node's listpack size, counted from its values as `push`
        /// classified them, is what counting from their text gives (`lp_entry_bytes`).
        #[test]
        fn an_entrys_listpack_bytes_do_not_depend_on_how_they_are_counted(
            master in entry(),
            rest in prop::collection::vec((entry(), any::<bool>(), 0u64..3_000, 0u64..5), 0..40),
        ) {
            let first = StreamId::new(1_000, 0);
            let mut block = Block::new(first, &master);
            let names: Vec<Bytes> = master.iter().map(|(f, _)| f.clone()).collect();
            let mut id = first;
            for (mut fields, use_master_names, ms_step, seq) in rest {
                if use_master_names {
                    fields = names.iter().cloned().zip(fields.into_iter().map(|(_, v)| v).chain(std::iter::repeat(Bytes::from_static(b"v")))).collect();
                }
                id = if ms_step == 0 { StreamId::new(id.ms, id.seq + 1 + seq) } else { StreamId::new(id.ms + ms_step, seq) };
                let same = fields.len() == names.len() && fields.iter().zip(&names).all(|((f, _), n)| f == n);
                let want = lp_entry_bytes((id.ms - first.ms) as i64, id.seq.wrapping_sub(first.seq) as i64, same, &fields);
                let before = block.lp_body;
                prop_assert!(block.push(first, id, &fields));
                prop_assert_eq!((block.lp_body - before) as usize, want);
            }
        }
    }
}
