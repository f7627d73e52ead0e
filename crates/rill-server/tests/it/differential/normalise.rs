//! Replies made comparable according to a command's modifiers.

use super::script::Modifiers;
use rill_testkit::{parse_value, split_aggregate, Value};

/// Where a command's reply carries clock readings, which `@times` blanks: each is replaced by a
/// fixed value when it is what a reading must be (an integer at least 0, a string of digits, a
/// well-formed stream ID), and kept otherwise, so that a wrong type, a negative value (`-1`: a
/// consumer never active, a key without expiry) or a malformed ID is still compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimeFields {
    /// The reply is a reading: TTL and PTTL (left to an absolute expiry, or to the millisecond),
    /// OBJECT IDLETIME, LASTSAVE.
    Whole,
    /// An array of digit strings: TIME's seconds and microseconds.
    Each,
    /// An array of rows; element `n` of each is a reading: XPENDING's extended form
    /// `[id, consumer, idle, deliveries]`.
    Column(usize),
    /// An array of maps (RESP2: flat key/value arrays); these keys' values are readings:
    /// XINFO CONSUMERS' `idle` and `inactive`.
    Fields(&'static [&'static str]),
    /// A stream ID the server generated from its clock: XADD with `*`.
    GeneratedId,
}

impl TimeFields {
    /// The readings in `command`'s reply; `None` if `@times` knows none there.
    pub(super) fn of(command: &[Vec<u8>]) -> Option<TimeFields> {
        let word = |i: usize| command.get(i).map(|w| String::from_utf8_lossy(w).to_ascii_uppercase());
        let name = word(0)?;
        match (name.as_str(), word(1).as_deref()) {
            ("TTL" | "PTTL" | "LASTSAVE", _) | ("OBJECT", Some("IDLETIME")) => Some(TimeFields::Whole),
            ("TIME", _) => Some(TimeFields::Each),
            // The summary form (key and group only) has no times.
            ("XPENDING", _) if command.len() >= 6 => Some(TimeFields::Column(2)),
            ("XINFO", Some("CONSUMERS")) => Some(TimeFields::Fields(&["idle", "inactive"])),
            ("XADD", _) if command.iter().any(|a| a == b"*") => Some(TimeFields::GeneratedId),
            _ => None,
        }
    }

    fn blank(self, reply: &[u8]) -> Vec<u8> {
        match self {
            TimeFields::Whole => blank_reading(reply),
            TimeFields::Each => map_elements(reply, |_, e| blank_reading(e)),
            TimeFields::Column(n) => map_elements(reply, |_, row| {
                map_elements(row, |i, e| if i == n { blank_reading(e) } else { e.to_vec() })
            }),
            TimeFields::Fields(keys) => map_elements(reply, |_, fields| {
                let mut key_before = false;
                map_elements(fields, |i, e| {
                    // Map keys are at even positions, in a RESP3 map as in a flat array.
                    if i % 2 == 0 {
                        key_before =
                            parse_value(e).ok().and_then(|k| k.as_str().map(|k| keys.contains(&k))) == Some(true);
                        e.to_vec()
                    } else if key_before {
                        blank_reading(e)
                    } else {
                        e.to_vec()
                    }
                })
            }),
            TimeFields::GeneratedId => match parse_value(reply) {
                Ok(Value::Bulk(id)) if is_stream_id(&id) => b"$3\r\n0-0\r\n".to_vec(),
                _ => reply.to_vec(),
            },
        }
    }
}

/// A clock reading replaced by a fixed one: an integer at least 0, or a string of digits.
fn blank_reading(reply: &[u8]) -> Vec<u8> {
    match parse_value(reply) {
        Ok(Value::Int(n)) if n >= 0 => b":0\r\n".to_vec(),
        Ok(Value::Bulk(b)) if !b.is_empty() && b.iter().all(u8::is_ascii_digit) => b"$1\r\n0\r\n".to_vec(),
        _ => reply.to_vec(),
    }
}

fn is_stream_id(id: &[u8]) -> bool {
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    let mut parts = id.splitn(2, |&b| b == b'-');
    matches!((parts.next(), parts.next()), (Some(ms), Some(seq)) if digits(ms) && digits(seq))
}

/// The aggregate `reply` with each top-level element replaced by `f(index, element)`; a
/// scalar reply unchanged.
fn map_elements(reply: &[u8], mut f: impl FnMut(usize, &[u8]) -> Vec<u8>) -> Vec<u8> {
    let Some((header, elems)) = split_aggregate(reply) else { return reply.to_vec() };
    let mut out = header;
    for (i, e) in elems.iter().enumerate() {
        out.extend(f(i, e));
    }
    out
}

/// `reply` without the pairs whose key is in `fields`: from a map or a flat key/value array,
/// or, in a string (CLIENT INFO, CLIENT LIST: `key=value` words, a line per client), those
/// words. `None` if the reply is neither.
fn drop_fields(reply: &[u8], fields: &[Vec<u8>]) -> Option<Vec<u8>> {
    if let Some((header, elems)) = split_aggregate(reply) {
        let kept: Vec<Vec<u8>> = elems
            .chunks(2)
            .filter(|kv| {
                let key = parse_value(&kv[0]).ok();
                let key = key.as_ref().and_then(|k| k.as_bytes());
                !key.is_some_and(|k| fields.iter().any(|f| f == k))
            })
            .map(|kv| kv.concat())
            .collect();
        let count = if header.first() == Some(&b'%') { kept.len() } else { kept.len() * 2 };
        let mut out = vec![header[0]];
        out.extend(format!("{count}\r\n").into_bytes());
        out.extend(kept.concat());
        return Some(out);
    }
    let (prefix, text) = match parse_value(reply).ok()? {
        Value::Bulk(text) => (String::new(), text),
        Value::Verbatim(format, text) => (format!("{format}:"), text),
        _ => return None,
    };
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            let keep = |word: &&str| !fields.iter().any(|f| word.split('=').next().map(str::as_bytes) == Some(f));
            line.split(' ').filter(keep).collect::<Vec<_>>().join(" ")
        })
        .collect();
    let body = format!("{prefix}{}", lines.join("\n"));
    let tag = if prefix.is_empty() { '$' } else { '=' };
    Some(format!("{tag}{}\r\n{body}\r\n", body.len()).into_bytes())
}

/// Reply bytes normalised according to the modifiers of `command`.
pub(super) fn normalise(reply: &[u8], mods: &Modifiers, command: &[Vec<u8>]) -> Vec<u8> {
    if mods.type_only.is_some() {
        return reply.get(..1).unwrap_or_default().to_vec();
    }
    if !mods.ignore_fields.is_empty() {
        if let Some(out) = drop_fields(reply, &mods.ignore_fields) {
            let rest = Modifiers { ignore_fields: Vec::new(), ..mods.clone() };
            return normalise(&out, &rest, command);
        }
    }
    if mods.times {
        if let Some(fields) = TimeFields::of(command) {
            let rest = Modifiers { times: false, ..mods.clone() };
            return normalise(&fields.blank(reply), &rest, command);
        }
    }
    if mods.sort || mods.sort_pairs {
        if let Some((header, elems)) = split_aggregate(reply) {
            let pairwise = mods.sort_pairs || header.first() == Some(&b'%');
            // Nested aggregates are sorted too: SCAN's `[cursor, [keys...]]`.
            let nested = Modifiers { sort: true, sort_pairs: false, ..Default::default() };
            let elems: Vec<Vec<u8>> = elems.iter().map(|e| normalise(e, &nested, &[])).collect();
            let mut groups: Vec<Vec<u8>> = if pairwise { elems.chunks(2).map(|c| c.concat()).collect() } else { elems };
            groups.sort();
            let mut out = header;
            for g in groups {
                out.extend(g);
            }
            return out;
        }
    }
    reply.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(line: &str) -> Vec<Vec<u8>> {
        line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn normalise_sorts() {
        let sorted = normalise(b"*2\r\n$1\r\nb\r\n$1\r\na\r\n", &Modifiers { sort: true, ..Default::default() }, &[]);
        assert_eq!(sorted, b"*2\r\n$1\r\na\r\n$1\r\nb\r\n");
        let pairs = normalise(
            b"*4\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n",
            &Modifiers { sort_pairs: true, ..Default::default() },
            &[],
        );
        assert_eq!(pairs, b"*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n1\r\n");
        let mut mods = Modifiers::default();
        assert_eq!(mods.apply("@ignore-fields=id,version"), Ok(true));
        let map = normalise(b"%3\r\n+id\r\n:7\r\n+proto\r\n:3\r\n+version\r\n$1\r\n8\r\n", &mods, &[]);
        assert_eq!(map, b"%1\r\n+proto\r\n:3\r\n");
        let flat = normalise(b"*4\r\n+id\r\n:7\r\n+proto\r\n:2\r\n", &mods, &[]);
        assert_eq!(flat, b"*2\r\n+proto\r\n:2\r\n");
    }

    #[test]
    fn ignore_fields_drops_words_of_client_info() {
        let mut mods = Modifiers::default();
        assert_eq!(mods.apply("@ignore-fields=id,age"), Ok(true));
        let text = b"$28\r\nid=3 name=a age=9 db=0\nid=4\n\r\n";
        assert_eq!(normalise(text, &mods, &[]), b"$13\r\nname=a db=0\n\n\r\n");
        let verbatim = b"=20\r\ntxt:id=3 name=a db=0\r\n";
        assert_eq!(normalise(verbatim, &mods, &[]), b"=15\r\ntxt:name=a db=0\r\n");
    }

    #[test]
    fn times_blanks_readings_and_keeps_the_rest() {
        let mods = Modifiers { times: true, ..Default::default() };
        let xpending = command("XPENDING s g - + 10");
        let rows = |idle: &str, count: &str| {
            format!("*1\r\n*4\r\n$3\r\n1-0\r\n$5\r\nalice\r\n{idle}\r\n{count}\r\n").into_bytes()
        };
        let n = |reply: &[u8], cmd: &[Vec<u8>]| normalise(reply, &mods, cmd);
        assert_eq!(n(&rows(":12", ":1"), &xpending), n(&rows(":3400", ":1"), &xpending));
        assert_ne!(n(&rows(":12", ":1"), &xpending), n(&rows(":12", ":2"), &xpending), "the count is compared");
        assert_ne!(n(&rows(":12", ":1"), &xpending), n(&rows("$2\r\n12", ":1"), &xpending), "and the type");
        assert_eq!(TimeFields::of(&command("XPENDING s g")), None, "the summary has no times");

        let consumers = command("XINFO CONSUMERS s g");
        let consumer = |idle: &str, inactive: &str| {
            format!("*1\r\n%3\r\n+name\r\n$1\r\na\r\n+idle\r\n{idle}\r\n+inactive\r\n{inactive}\r\n").into_bytes()
        };
        assert_eq!(n(&consumer(":5", ":7"), &consumers), n(&consumer(":9", ":0"), &consumers));
        assert_ne!(n(&consumer(":5", ":-1"), &consumers), n(&consumer(":5", ":7"), &consumers), "never active");

        let time = command("TIME");
        assert_eq!(n(b"*2\r\n$10\r\n1700000000\r\n$6\r\n123456\r\n", &time), n(b"*2\r\n$1\r\n5\r\n$1\r\n6\r\n", &time));
        assert_ne!(n(b"*2\r\n$1\r\n5\r\n$1\r\n6\r\n", &time), n(b"*1\r\n$1\r\n5\r\n", &time));
        let xadd = command("XADD s * f v");
        assert_eq!(n(b"$15\r\n1700000000000-0\r\n", &xadd), n(b"$3\r\n5-1\r\n", &xadd));
        assert_ne!(n(b"$15\r\n1700000000000-0\r\n", &xadd), n(b"$13\r\n1700000000000\r\n", &xadd));
        let ttl = command("TTL k");
        assert_eq!(n(b":99\r\n", &ttl), n(b":100\r\n", &ttl));
        assert_ne!(n(b":99\r\n", &ttl), n(b":-1\r\n", &ttl));
        assert_eq!(TimeFields::of(&command("GET k")), None);
    }
}
