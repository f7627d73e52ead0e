//! Dead letters as the console reads them: the same two provenance blocks `rill-worker`
//! reads and writes (`crates/rill-worker/src/dlq.rs` documents them), recognised by position
//! so an original field that happens to share a name is kept.
//!
//! ```text
//! rill style: <fields...> rill-source-stream S rill-source-id I rill-group G rill-consumer C
//!             rill-deliveries N rill-reason R [rill-first-delivery-ms T1 rill-last-delivery-ms T2]
//! posts style: <fields...> deadLetteredFrom <S>/<I>
//! ```

use bytes::Bytes;

const RILL: [&str; 6] =
    ["rill-source-stream", "rill-source-id", "rill-group", "rill-consumer", "rill-deliveries", "rill-reason"];
const SERVER_EXTRA: [&str; 2] = ["rill-first-delivery-ms", "rill-last-delivery-ms"];

/// One dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    /// Where it goes back to.
    pub source_stream: Bytes,
    pub source_id: String,
    /// Empty in the posts style.
    pub group: String,
    pub consumer: String,
    pub deliveries: String,
    pub reason: String,
    /// `rill` or `deadLetteredFrom`.
    pub style: &'static str,
    /// The original entry's fields.
    pub fields: Vec<(Bytes, Bytes)>,
}

fn is_id(s: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(s) else { return false };
    let mut parts = s.splitn(2, '-');
    let ms = parts.next().unwrap_or("");
    let seq = parts.next().unwrap_or("");
    !ms.is_empty()
        && !seq.is_empty()
        && ms.bytes().all(|b| b.is_ascii_digit())
        && seq.bytes().all(|b| b.is_ascii_digit())
}

/// The letter in an entry's fields, if it carries either block.
pub fn parse(fields: &[(Bytes, Bytes)]) -> Option<Letter> {
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    let tail = |names: &[&str]| -> Option<usize> {
        let start = fields.len().checked_sub(names.len())?;
        let ok = fields.get(start..)?.iter().zip(names).all(|((f, _), n)| f.as_ref() == n.as_bytes());
        ok.then_some(start)
    };
    let full: Vec<&str> = RILL.iter().chain(SERVER_EXTRA.iter()).copied().collect();
    if let Some(start) = tail(&full).or_else(|| tail(&RILL)) {
        let v = |i: usize| fields.get(start + i).map(|(_, v)| v.clone()).unwrap_or_default();
        return Some(Letter {
            source_stream: v(0),
            source_id: text(&v(1)),
            group: text(&v(2)),
            consumer: text(&v(3)),
            deliveries: text(&v(4)),
            reason: text(&v(5)),
            style: "rill",
            fields: fields.get(..start).unwrap_or_default().to_vec(),
        });
    }
    let (last_f, last_v) = fields.last()?;
    if last_f.as_ref() != b"deadLetteredFrom" {
        return None;
    }
    let slash = last_v.iter().rposition(|&b| b == b'/')?;
    let (stream, id) = (last_v.slice(..slash), last_v.slice(slash + 1..));
    if stream.is_empty() || !is_id(&id) {
        return None;
    }
    Some(Letter {
        source_stream: stream,
        source_id: text(&id),
        group: String::new(),
        consumer: String::new(),
        deliveries: String::new(),
        reason: String::new(),
        style: "deadLetteredFrom",
        fields: fields.get(..fields.len() - 1).unwrap_or_default().to_vec(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn f(pairs: &[(&str, &str)]) -> Vec<(Bytes, Bytes)> {
        pairs.iter().map(|(a, b)| (Bytes::from(a.to_string()), Bytes::from(b.to_string()))).collect()
    }

    #[test]
    fn both_styles_by_position() {
        let l = parse(&f(&[
            ("rill-reason", "mine"),
            ("n", "1"),
            ("rill-source-stream", "{s}"),
            ("rill-source-id", "7-0"),
            ("rill-group", "g"),
            ("rill-consumer", "c"),
            ("rill-deliveries", "5"),
            ("rill-reason", "boom"),
        ]))
        .unwrap();
        assert_eq!((l.source_stream.as_ref(), l.source_id.as_str(), l.reason.as_str()), (&b"{s}"[..], "7-0", "boom"));
        assert_eq!(l.fields, f(&[("rill-reason", "mine"), ("n", "1")]));
        let mut server = f(&[("x", "y")]);
        server.extend(f(&[
            ("rill-source-stream", "a/b"),
            ("rill-source-id", "1-1"),
            ("rill-group", "g"),
            ("rill-consumer", ""),
            ("rill-deliveries", "3"),
            ("rill-reason", "maxdeliver"),
            ("rill-first-delivery-ms", "1"),
            ("rill-last-delivery-ms", "2"),
        ]));
        let l = parse(&server).unwrap();
        assert_eq!(l.fields, f(&[("x", "y")]));
        assert_eq!(l.deliveries, "3");
        let l = parse(&f(&[("a", "1"), ("deadLetteredFrom", "or/ders/12-3")])).unwrap();
        assert_eq!(
            (l.source_stream.as_ref(), l.source_id.as_str(), l.style),
            (&b"or/ders"[..], "12-3", "deadLetteredFrom")
        );
        assert!(parse(&f(&[("deadLetteredFrom", "orders/x")])).is_none());
        assert!(parse(&f(&[("a", "1")])).is_none());
    }
}
