//! Reply shapes shared by the stream commands (spec §2.2): IDs are bulk strings `ms-seq`, an
//! entry is `[id, [field, value, ...]]` in both protocols.

use super::{StreamEntry, StreamId};
use bytes::Bytes;
use rill_resp::Reply;

/// An ID as a bulk string.
pub(super) fn id(id: StreamId) -> Reply {
    Reply::Bulk(Bytes::from(id.to_string()))
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
