//! Reply shapes shared by the stream commands (spec §2.2): IDs are bulk strings `ms-seq`, an
//! entry is `[id, [field, value, ...]]` in both protocols.

use super::block::FieldSink;
use super::codec::{self, Scalar};
use super::{StreamEntry, StreamId};
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

/// Room kept at the front of an [`EntriesBuilder`]'s buffer for the `*<n>\r\n` header, which
/// is written last: a marker, up to 20 digits, CRLF.
const HEADER_ROOM: usize = 1 + codec::U64_MAX_DIGITS + 2;

/// Builds an entries reply (`[[id, [f1, v1, ...]], ...]`) straight from a block cursor's
/// output, encoded as RESP in one pass into one buffer: each entry's framing, ID and field
/// texts are written as they are decoded, and the array header goes into room kept at the
/// front once the number of entries is known.
#[derive(Debug)]
pub(super) struct EntriesBuilder {
    out: Vec<u8>,
    entries: usize,
    /// Where the current entry starts in `out` (to drop it).
    entry_start: usize,
    /// A number value's text, before it is framed.
    scratch: Vec<u8>,
}

impl EntriesBuilder {
    /// A builder sized for about `entries` entries (at most 16 up front: a COUNT is a limit,
    /// and a reader keeping up gets one or two entries, so bigger replies grow as they go).
    pub(super) fn with_capacity(entries: usize) -> EntriesBuilder {
        let mut out = Vec::with_capacity(HEADER_ROOM + entries.min(16) * 160);
        out.resize(HEADER_ROOM, 0);
        EntriesBuilder { out, entries: 0, entry_start: HEADER_ROOM, scratch: Vec::new() }
    }

    /// Entries added so far.
    pub(super) fn len(&self) -> usize {
        self.entries
    }

    /// Start an entry; its field count and fields follow through [`FieldSink`].
    pub(super) fn begin(&mut self, id: StreamId) {
        self.entry_start = self.out.len();
        self.entries += 1;
        let mut text = [0u8; ID_MAX_TEXT_BYTES];
        self.out.extend_from_slice(b"*2\r\n");
        put_bulk(&mut self.out, id_text(id, &mut text));
    }

    /// Drop the current entry (its decoding failed part-way).
    pub(super) fn abandon(&mut self) {
        self.out.truncate(self.entry_start);
        self.entries -= 1;
    }

    /// The reply: the entries array already encoded as RESP ([`Reply::Raw`]; an entry list is
    /// arrays and bulk strings only, the same bytes in RESP2 and RESP3).
    pub(super) fn finish(mut self) -> Reply {
        let mut header = Vec::with_capacity(HEADER_ROOM);
        put_header(&mut header, b'*', self.entries);
        let start = HEADER_ROOM.saturating_sub(header.len());
        if let Some(room) = self.out.get_mut(start..HEADER_ROOM) {
            room.copy_from_slice(&header);
        }
        Reply::Raw(Bytes::from(self.out).slice(start..))
    }
}

impl<'a> FieldSink<'a> for EntriesBuilder {
    fn count(&mut self, n: usize) {
        put_header(&mut self.out, b'*', 2 * n);
    }

    fn field(&mut self, name: &'a [u8], value: Scalar<'a>) {
        put_bulk(&mut self.out, name);
        match value {
            Scalar::Raw(text) => put_bulk(&mut self.out, text),
            number => {
                self.scratch.clear();
                codec::render(number, &mut self.scratch);
                put_bulk(&mut self.out, &self.scratch);
            }
        }
    }
}

/// `<marker><n>\r\n`.
fn put_header(out: &mut Vec<u8>, marker: u8, n: usize) {
    out.push(marker);
    if n < 10 {
        out.push(b'0' + n as u8);
    } else {
        codec::put_u64_text(out, n as u64);
    }
    out.extend_from_slice(b"\r\n");
}

/// `$<len>\r\n<bytes>\r\n`.
fn put_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
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

/// Entries as an array of [`entry`] replies.
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
