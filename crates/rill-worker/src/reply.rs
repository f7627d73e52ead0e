//! Reading the stream commands' replies out of [`redis::Value`], in RESP2 or RESP3 shape.
//!
//! Shapes handled (see `docs/spec/streams.md` §2.2, §3.5, §3.12, §3.14):
//!
//! ```text
//! XREADGROUP     nil | [[key, [entry...]]...]   (RESP3: {key: [entry...]})
//!   entry        [id, [field, value, ...]]      normal delivery
//!                [id, nil]                      history read of a deleted entry
//!                [id, [f, v...], idle, count]   XREADGROUP ... CLAIM (count before delivery)
//! XAUTOCLAIM     [next-cursor, [entry...], [deleted-id...]]
//! XPENDING       [count, smallest, largest, [[consumer, "n"]...]]   summary
//!                [[id, consumer, idle-ms, deliveries]...]           extended
//! ```

use redis::Value;

use crate::error::WorkerError;

/// One stream entry as the worker hands it to a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The stream the entry was read from.
    pub stream: String,
    /// Its ID, `<ms>-<seq>`.
    pub id: String,
    /// Field/value pairs in the order they were added.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// How many times the group has delivered it, this delivery included (1 on first read).
    pub deliveries: u64,
}

impl Entry {
    /// The value of the first field called `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields.iter().find(|(f, _)| f.as_slice() == name.as_bytes()).map(|(_, v)| v.as_slice())
    }

    /// The value of `name` when it is UTF-8.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }
}

/// An entry as a read command returned it, before the worker knows its delivery count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    pub id: String,
    /// `None` when the payload was deleted while the entry stayed pending.
    pub fields: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    /// XREADGROUP CLAIM only: idle time and delivery count *before* this delivery.
    pub claimed: Option<(i64, u64)>,
}

/// One row of extended XPENDING.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    pub id: String,
    /// Empty for entries returned to the group with XNACK (no owner).
    pub consumer: String,
    /// Milliseconds since the last delivery; -1 for XNACKed entries.
    pub idle_ms: i64,
    pub deliveries: u64,
}

/// Summary XPENDING.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingSummary {
    pub count: u64,
    pub smallest: Option<String>,
    pub largest: Option<String>,
    /// Consumers with at least one pending entry, by name.
    pub consumers: Vec<(String, u64)>,
}

pub(crate) fn as_bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        Value::VerbatimString { text, .. } => Some(text.as_bytes()),
        Value::Okay => Some(b"OK"),
        _ => None,
    }
}

pub(crate) fn as_string(v: &Value) -> Option<String> {
    as_bytes(v).map(|b| String::from_utf8_lossy(b).into_owned())
}

pub(crate) fn as_array(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(a) | Value::Set(a) => Some(a),
        _ => None,
    }
}

/// An integer reply, or a bulk string holding one (XPENDING summary counts are bulk strings).
pub(crate) fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        other => as_bytes(other).and_then(|b| std::str::from_utf8(b).ok()).and_then(|s| s.parse().ok()),
    }
}

/// Key/value pairs of a map reply: a RESP3 map, or the flat array RESP2 sends instead.
pub fn map_pairs(v: &Value) -> Vec<(String, &Value)> {
    match v {
        Value::Map(pairs) => pairs.iter().filter_map(|(k, v)| Some((as_string(k)?, v))).collect(),
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [k, v] => Some((as_string(k)?, v)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Looks `name` up in [`map_pairs`] output.
pub fn map_get<'a>(pairs: &[(String, &'a Value)], name: &str) -> Option<&'a Value> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
}

fn field_pairs(v: &Value) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let items = as_array(v)?;
    let mut out = Vec::with_capacity(items.len() / 2);
    for pair in items.chunks(2) {
        match pair {
            [f, v] => out.push((as_bytes(f)?.to_vec(), as_bytes(v)?.to_vec())),
            _ => return None,
        }
    }
    Some(out)
}

fn raw_entry(v: &Value, context: &'static str) -> Result<RawEntry, WorkerError> {
    let parts = as_array(v).ok_or_else(|| WorkerError::reply(context, "entry is not an array"))?;
    let (id, fields, claimed) = match parts {
        [id, fields] => (id, fields, None),
        [id, fields, idle, count] => {
            let idle = as_int(idle).ok_or_else(|| WorkerError::reply(context, "idle"))?;
            let count = as_int(count).ok_or_else(|| WorkerError::reply(context, "count"))?;
            (id, fields, Some((idle, u64::try_from(count).unwrap_or(0))))
        }
        _ => return Err(WorkerError::reply(context, "entry has neither 2 nor 4 elements")),
    };
    let id = as_string(id).ok_or_else(|| WorkerError::reply(context, "entry ID"))?;
    let fields = match fields {
        Value::Nil => None,
        other => Some(field_pairs(other).ok_or_else(|| WorkerError::reply(context, "fields"))?),
    };
    Ok(RawEntry { id, fields, claimed })
}

/// The entries of an entry list (XRANGE, XCLAIM, one stream of XREAD).
pub fn entry_list(v: &Value, context: &'static str) -> Result<Vec<RawEntry>, WorkerError> {
    match v {
        Value::Nil => Ok(Vec::new()),
        other => as_array(other)
            .ok_or_else(|| WorkerError::reply(context, "entry list is not an array"))?
            .iter()
            .map(|e| raw_entry(e, context))
            .collect(),
    }
}

/// The entries of `stream` in an XREAD/XREADGROUP reply (nil → none).
pub fn read_reply(v: &Value, stream: &str, context: &'static str) -> Result<Vec<RawEntry>, WorkerError> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::Map(pairs) => {
            for (k, entries) in pairs {
                if as_bytes(k) == Some(stream.as_bytes()) {
                    return entry_list(entries, context);
                }
            }
            Ok(Vec::new())
        }
        Value::Array(streams) => {
            for s in streams {
                if let Some([k, entries]) = as_array(s) {
                    if as_bytes(k) == Some(stream.as_bytes()) {
                        return entry_list(entries, context);
                    }
                }
            }
            Ok(Vec::new())
        }
        _ => Err(WorkerError::reply(context, "neither nil, array nor map")),
    }
}

/// XAUTOCLAIM: the next cursor, the claimed entries, and the IDs dropped because their
/// payload was deleted.
pub fn autoclaim_reply(v: &Value) -> Result<(String, Vec<RawEntry>, Vec<String>), WorkerError> {
    const CONTEXT: &str = "XAUTOCLAIM";
    let parts = as_array(v).ok_or_else(|| WorkerError::reply(CONTEXT, "not an array"))?;
    let (cursor, claimed, deleted) = match parts {
        [c, e] => (c, e, None),
        [c, e, d] => (c, e, Some(d)),
        _ => return Err(WorkerError::reply(CONTEXT, "not 2 or 3 elements")),
    };
    let cursor = as_string(cursor).ok_or_else(|| WorkerError::reply(CONTEXT, "cursor"))?;
    let entries = entry_list(claimed, CONTEXT)?;
    let deleted = deleted.and_then(as_array).map(|ids| ids.iter().filter_map(as_string).collect()).unwrap_or_default();
    Ok((cursor, entries, deleted))
}

/// Extended XPENDING.
pub fn pending_entries(v: &Value) -> Result<Vec<PendingEntry>, WorkerError> {
    const CONTEXT: &str = "XPENDING";
    let rows = as_array(v).ok_or_else(|| WorkerError::reply(CONTEXT, "not an array"))?;
    rows.iter()
        .map(|row| match as_array(row) {
            Some([id, consumer, idle, count]) => Ok(PendingEntry {
                id: as_string(id).ok_or_else(|| WorkerError::reply(CONTEXT, "id"))?,
                consumer: as_string(consumer).unwrap_or_default(),
                idle_ms: as_int(idle).ok_or_else(|| WorkerError::reply(CONTEXT, "idle"))?,
                deliveries: as_int(count)
                    .and_then(|c| u64::try_from(c).ok())
                    .ok_or_else(|| WorkerError::reply(CONTEXT, "count"))?,
            }),
            _ => Err(WorkerError::reply(CONTEXT, "row is not [id, consumer, idle, count]")),
        })
        .collect()
}

/// Summary XPENDING.
pub fn pending_summary(v: &Value) -> Result<PendingSummary, WorkerError> {
    const CONTEXT: &str = "XPENDING summary";
    let Some([count, smallest, largest, consumers]) = as_array(v) else {
        return Err(WorkerError::reply(CONTEXT, "not a 4-element array"));
    };
    let count =
        as_int(count).and_then(|c| u64::try_from(c).ok()).ok_or_else(|| WorkerError::reply(CONTEXT, "count"))?;
    let consumers = as_array(consumers)
        .unwrap_or_default()
        .iter()
        .filter_map(|pair| match as_array(pair) {
            Some([name, n]) => Some((as_string(name)?, u64::try_from(as_int(n)?).ok()?)),
            _ => None,
        })
        .collect();
    Ok(PendingSummary { count, smallest: as_string(smallest), largest: as_string(largest), consumers })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn xreadgroup_shapes() {
        let entry = Value::Array(vec![bulk("1-0"), Value::Array(vec![bulk("a"), bulk("1")])]);
        let ghost = Value::Array(vec![bulk("2-0"), Value::Nil]);
        let claimed =
            Value::Array(vec![bulk("3-0"), Value::Array(vec![bulk("b"), bulk("2")]), Value::Int(70), Value::Int(1)]);
        let resp2 =
            Value::Array(vec![Value::Array(vec![bulk("s"), Value::Array(vec![entry.clone(), ghost, claimed])])]);
        let got = read_reply(&resp2, "s", "t").unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].fields.as_ref().unwrap()[0], (b"a".to_vec(), b"1".to_vec()));
        assert_eq!(got[1].fields, None);
        assert_eq!(got[2].claimed, Some((70, 1)));
        let resp3 = Value::Map(vec![(bulk("s"), Value::Array(vec![entry]))]);
        assert_eq!(read_reply(&resp3, "s", "t").unwrap().len(), 1);
        assert!(read_reply(&Value::Nil, "s", "t").unwrap().is_empty());
    }

    #[test]
    fn xpending_summary_counts_are_bulk_strings() {
        let v = Value::Array(vec![
            Value::Int(3),
            bulk("1-0"),
            bulk("3-0"),
            Value::Array(vec![Value::Array(vec![bulk("c1"), bulk("3")])]),
        ]);
        let s = pending_summary(&v).unwrap();
        assert_eq!(s.count, 3);
        assert_eq!(s.consumers, vec![("c1".to_owned(), 3)]);
        let empty = Value::Array(vec![Value::Int(0), Value::Nil, Value::Nil, Value::Nil]);
        assert_eq!(pending_summary(&empty).unwrap(), PendingSummary::default());
    }
}
