//! Reply shapes shared by the stream commands (spec §2.2): IDs are bulk strings `ms-seq`, an
//! entry is `[id, [field, value, ...]]` in both protocols.

use super::block::{EntryCursor, EntryPos, FieldSink};
use super::codec::{self, Scalar};
use super::{EntryLookup, Stream, StreamEntry, StreamId};
use bytes::Bytes;
use rill_resp::Reply;

/// Longest `ms-seq` text: two 20-digit numbers and the dash.
pub(super) const ID_MAX_TEXT_BYTES: usize = 2 * codec::U64_MAX_DIGITS + 1;

/// `ms-seq` in decimal, written into `text` on the stack; returns it.
pub(super) fn id_text(id: StreamId, text: &mut [u8; ID_MAX_TEXT_BYTES]) -> &[u8] {
    let mut digits = [0u8; codec::U64_MAX_DIGITS];
    let ms = codec::u64_digits(id.ms, &mut digits);
    let mut len = ms.len();
    if let Some(dst) = text.get_mut(..len) {
        dst.copy_from_slice(ms);
    }
    if let Some(dash) = text.get_mut(len) {
        *dash = b'-';
    }
    len += 1;
    let seq = codec::u64_digits(id.seq, &mut digits);
    if let Some(dst) = text.get_mut(len..len + seq.len()) {
        dst.copy_from_slice(seq);
    }
    len += seq.len();
    text.get(..len).unwrap_or_default()
}

/// An ID as a bulk string. Formatted on the stack: XADD replies with one per call.
pub(super) fn id(id: StreamId) -> Reply {
    let mut text = [0u8; ID_MAX_TEXT_BYTES];
    Reply::Bulk(Bytes::copy_from_slice(id_text(id, &mut text)))
}

/// Writes entries as RESP straight from a block cursor: `*<2 + extra>`, the ID, then
/// `*<2n>` and each field name and value as bulk strings; the caller appends the `extra`
/// elements (XREADGROUP CLAIM's idle time and delivery count). Keeps a scratch buffer for
/// number values, so one writer serves many entries without allocating.
#[derive(Debug, Default)]
pub(super) struct EntryWriter {
    scratch: Vec<u8>,
}

impl EntryWriter {
    /// Append entry `id` (stored at `offset` of `cursor`'s block) to `out`. False, with `out`
    /// as it was, if its bytes cannot be decoded.
    pub(super) fn entry(
        &mut self,
        out: &mut Vec<u8>,
        id: StreamId,
        extra: usize,
        cursor: &EntryCursor<'_>,
        offset: usize,
    ) -> bool {
        let start = out.len();
        put_header(out, b'*', 2 + extra);
        put_id(out, id);
        let decoded = cursor.fields_at(offset, &mut RespFields { out, scratch: &mut self.scratch });
        debug_assert!(decoded.is_some(), "undecodable stream entry");
        if decoded.is_none() {
            out.truncate(start);
            return false;
        }
        true
    }
}

/// A [`FieldSink`] writing an entry's fields as RESP.
struct RespFields<'w> {
    out: &'w mut Vec<u8>,
    scratch: &'w mut Vec<u8>,
}

impl<'a> FieldSink<'a> for RespFields<'_> {
    fn count(&mut self, n: usize) {
        put_header(self.out, b'*', 2 * n);
    }

    fn field(&mut self, name: &'a [u8], value: Scalar<'a>) {
        put_bulk(self.out, name);
        match value {
            Scalar::Raw(text) => put_bulk(self.out, text),
            number => {
                self.scratch.clear();
                codec::render(number, self.scratch);
                put_bulk(self.out, self.scratch);
            }
        }
    }
}

/// `:<n>\r\n`, an integer element appended after an [`EntryWriter`] entry.
pub(super) fn put_int(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    if n < 0 {
        out.push(b'-');
    }
    codec::put_u64_text(out, n.unsigned_abs());
    out.extend_from_slice(b"\r\n");
}

/// Room kept at the front of a [`RawArray`]'s buffer for the `*<n>\r\n` header, which is
/// written last: a marker, up to 20 digits, CRLF.
const HEADER_ROOM: usize = 1 + codec::U64_MAX_DIGITS + 2;

/// An array reply encoded as RESP while it is built, into one buffer, for elements that are
/// the same bytes in RESP2 and RESP3 (arrays, bulk strings, integers): the array header goes
/// into room kept at the front once the number of elements is known.
#[derive(Debug)]
pub(super) struct RawArray {
    out: Vec<u8>,
    len: usize,
}

impl RawArray {
    /// An empty array with room for about `bytes` bytes of elements.
    pub(super) fn with_capacity(bytes: usize) -> RawArray {
        let mut out = Vec::with_capacity(HEADER_ROOM + bytes);
        out.resize(HEADER_ROOM, 0);
        RawArray { out, len: 0 }
    }

    /// Elements so far.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The buffer the next element's bytes go into (then call [`Self::added`]).
    pub(super) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// One more element was written into [`Self::buf`].
    pub(super) fn added(&mut self) {
        self.len += 1;
    }

    /// Take back the last element, `size` bytes long.
    pub(super) fn pop(&mut self, size: usize) {
        self.out.truncate(self.out.len().saturating_sub(size).max(HEADER_ROOM));
        self.len = self.len.saturating_sub(1);
    }

    /// The reply ([`Reply::Raw`]).
    pub(super) fn finish(mut self) -> Reply {
        let mut header = Vec::with_capacity(HEADER_ROOM);
        put_header(&mut header, b'*', self.len);
        let start = HEADER_ROOM.saturating_sub(header.len());
        if let Some(room) = self.out.get_mut(start..HEADER_ROOM) {
            room.copy_from_slice(&header);
        }
        Reply::Raw(Bytes::from(self.out).slice(start..))
    }
}

/// Builds an entries reply (`[[id, [f1, v1, ...]], ...]`) straight from block cursors (see
/// [`EntryWriter`]) into a [`RawArray`]: an entry list is arrays and bulk strings only (plus
/// integers with CLAIM), the same bytes in RESP2 and RESP3.
#[derive(Debug)]
pub(super) struct EntriesBuilder {
    list: RawArray,
    writer: EntryWriter,
}

impl EntriesBuilder {
    /// A builder sized for about `entries` entries (at most 16 up front: a COUNT is a limit,
    /// and a reader keeping up gets one or two entries, so bigger replies grow as they go).
    pub(super) fn with_capacity(entries: usize) -> EntriesBuilder {
        let list = RawArray::with_capacity(entries.min(16) * 160);
        EntriesBuilder { list, writer: EntryWriter::default() }
    }

    /// Entries added so far.
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    /// Add entry `p` of `cursor`'s block; false (nothing added) if its bytes cannot be decoded.
    pub(super) fn push(&mut self, cursor: &EntryCursor<'_>, p: &EntryPos) -> bool {
        self.push_extra(cursor, p, 0).is_some()
    }

    /// Add entry `p` of `cursor`'s block with room for `extra` trailing elements (added with
    /// [`Self::int`]); its size in bytes so far, `None` (nothing added) if it cannot be decoded.
    pub(super) fn push_extra(&mut self, cursor: &EntryCursor<'_>, p: &EntryPos, extra: usize) -> Option<usize> {
        let before = self.list.buf().len();
        let added = self.writer.entry(self.list.buf(), p.id, extra, cursor, p.offset);
        self.counted(added, before)
    }

    /// Add the live entry `id` found through `lookup`, as [`Self::push_extra`] does; `None`
    /// (nothing added) if there is no such live entry.
    pub(super) fn push_found(&mut self, lookup: &mut EntryLookup<'_>, id: StreamId, extra: usize) -> Option<usize> {
        let before = self.list.buf().len();
        let added = lookup.write(id, extra, &mut self.writer, self.list.buf());
        self.counted(added, before)
    }

    /// Add the live entry `id` of `stream`, as [`Self::push`] does; false (nothing added) if
    /// there is no such live entry.
    pub(super) fn push_stored(&mut self, stream: &Stream, id: StreamId) -> bool {
        let before = self.list.buf().len();
        let added = stream.write_entry(id, 0, &mut self.writer, self.list.buf());
        self.counted(added, before).is_some()
    }

    fn counted(&mut self, added: bool, before: usize) -> Option<usize> {
        if !added {
            return None;
        }
        self.list.added();
        Some(self.list.buf().len() - before)
    }

    /// Take back the last entry added, `size` bytes long (it did not fit a budget).
    pub(super) fn pop(&mut self, size: usize) {
        self.list.pop(size);
    }

    /// Append an integer element to the last entry.
    pub(super) fn int(&mut self, n: i64) {
        put_int(self.list.buf(), n);
    }

    /// The reply: the entries array already encoded as RESP ([`Reply::Raw`]).
    pub(super) fn finish(self) -> Reply {
        self.list.finish()
    }
}

/// `ms-seq` as a bulk string.
pub(super) fn put_id(out: &mut Vec<u8>, id: StreamId) {
    let mut text = [0u8; ID_MAX_TEXT_BYTES];
    put_bulk(out, id_text(id, &mut text));
}

/// `<marker><n>\r\n`.
pub(super) fn put_header(out: &mut Vec<u8>, marker: u8, n: usize) {
    out.push(marker);
    if n < 10 {
        out.push(b'0' + n as u8);
    } else {
        codec::put_u64_text(out, n as u64);
    }
    out.extend_from_slice(b"\r\n");
}

/// `$<len>\r\n<bytes>\r\n`.
pub(super) fn put_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    put_header(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// `r` with a [`Reply::Raw`] read back into a reply tree (tests compare trees).
#[cfg(test)]
pub(super) fn tree(r: &Reply) -> Reply {
    match r {
        Reply::Raw(bytes) => match rill_resp::parse_reply(bytes) {
            Ok(Some((parsed, used))) if used == bytes.len() => parsed,
            other => panic!("malformed raw reply {bytes:?}: {other:?}"),
        },
        other => other.clone(),
    }
}

/// One entry: `[id, [f1, v1, ...]]`.
pub(super) fn entry((entry_id, fields): StreamEntry) -> Reply {
    let mut flat = Vec::with_capacity(fields.len() * 2);
    for (f, v) in fields {
        flat.push(Reply::Bulk(f));
        flat.push(Reply::Bulk(v));
    }
    Reply::Array(vec![id(entry_id), Reply::Array(flat)])
}

/// Entries as an array of [`entry`] replies (what the block-reading replies must equal).
#[cfg(test)]
pub(super) fn entries(list: Vec<StreamEntry>) -> Reply {
    Reply::Array(list.into_iter().map(entry).collect())
}

/// A map key (field names of XINFO maps).
pub(super) fn name(s: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(s.as_bytes()))
}

/// An unsigned counter as an integer reply (saturating at `i64::MAX`).
pub(super) fn count(n: u64) -> Reply {
    Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Bytes the entry takes on the wire in RESP2 (`*2 $id *n $f $v ...`): what XREAD's MAXSIZE
/// measures.
pub(super) fn entry_wire_bytes((entry_id, fields): &StreamEntry) -> u64 {
    fn bulk(len: usize) -> u64 {
        // `$<len>\r\n<bytes>\r\n`
        (1 + len.to_string().len() + 2 + len + 2) as u64
    }
    fn header(n: usize) -> u64 {
        (1 + n.to_string().len() + 2) as u64
    }
    let id_len = entry_id.to_string().len();
    header(2)
        + bulk(id_len)
        + header(fields.len() * 2)
        + fields.iter().map(|(f, v)| bulk(f.len()) + bulk(v.len())).sum::<u64>()
}
