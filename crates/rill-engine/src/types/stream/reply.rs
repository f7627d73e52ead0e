//! Reply shapes shared by the stream commands (spec §2.2): IDs are bulk strings `ms-seq`, an
//! entry is `[id, [field, value, ...]]` in both protocols.

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

/// Builds an entries reply (`[[id, [f1, v1, ...]], ...]`) straight from a block cursor's
/// output. Every ID, name and value text goes into one buffer, and the bulk strings are
/// slices of it: one allocation for all the text instead of one per string.
#[derive(Debug, Default)]
pub(super) struct EntriesBuilder {
    text: Vec<u8>,
    /// Name and value texts in order, as ranges of `text`.
    spans: Vec<(usize, usize)>,
    /// Per entry: its ID's range in `text` and the index of its first name in `spans`.
    entries: Vec<((usize, usize), usize)>,
}

impl EntriesBuilder {
    /// A builder sized for about `entries` entries (at most 16 up front: a COUNT is a limit,
    /// and a reader keeping up gets one or two entries, so bigger replies grow as they go).
    pub(super) fn with_capacity(entries: usize) -> EntriesBuilder {
        let entries = entries.min(16);
        EntriesBuilder {
            text: Vec::with_capacity(entries * 96),
            spans: Vec::with_capacity(entries * 8),
            entries: Vec::with_capacity(entries),
        }
    }

    /// Entries added so far.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Start an entry; its fields follow with [`Self::field`].
    pub(super) fn begin(&mut self, id: StreamId) {
        let start = self.text.len();
        codec::put_u64_text(&mut self.text, id.ms);
        self.text.push(b'-');
        codec::put_u64_text(&mut self.text, id.seq);
        self.entries.push(((start, self.text.len()), self.spans.len()));
    }

    /// One field of the current entry.
    pub(super) fn field(&mut self, name: &[u8], value: Scalar<'_>) {
        let start = self.text.len();
        self.text.extend_from_slice(name);
        let middle = self.text.len();
        codec::render(value, &mut self.text);
        self.spans.push((start, middle));
        self.spans.push((middle, self.text.len()));
    }

    /// Drop the current entry (its decoding failed part-way).
    pub(super) fn abandon(&mut self) {
        if let Some(((start, _), first_span)) = self.entries.pop() {
            self.text.truncate(start);
            self.spans.truncate(first_span);
        }
    }

    /// The reply: the entries array already encoded as RESP ([`Reply::Raw`]; an entry list is
    /// arrays and bulk strings only, the same bytes in RESP2 and RESP3).
    pub(super) fn finish(self) -> Reply {
        Reply::Raw(Bytes::from(self.encode()))
    }

    /// The entries array as RESP bytes: `*n`, then per entry `*2 $id *2k $f $v ...`.
    fn encode(&self) -> Vec<u8> {
        let text = self.text.as_slice();
        // Headers and bulk framing add at most ~16 bytes per string.
        let mut out = Vec::with_capacity(text.len() + 16 * (self.spans.len() + 2 * self.entries.len()) + 16);
        put_header(&mut out, b'*', self.entries.len());
        let mut entries = self.entries.iter().peekable();
        while let Some(&((id_start, id_end), first)) = entries.next() {
            let last = entries.peek().map_or(self.spans.len(), |&&(_, next)| next);
            let fields = self.spans.get(first..last).unwrap_or_default();
            out.extend_from_slice(b"*2\r\n");
            put_bulk(&mut out, text.get(id_start..id_end).unwrap_or_default());
            put_header(&mut out, b'*', fields.len());
            for &(start, end) in fields {
                put_bulk(&mut out, text.get(start..end).unwrap_or_default());
            }
        }
        out
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
