//! Replies made comparable according to a command's modifiers.

use super::script::Modifiers;
use rill_testkit::{parse_value, split_aggregate};

/// Reply bytes normalised according to the modifiers.
pub(super) fn normalise(reply: &[u8], mods: &Modifiers) -> Vec<u8> {
    if mods.type_only {
        return reply.get(..1).unwrap_or_default().to_vec();
    }
    if !mods.ignore_fields.is_empty() {
        if let Some((header, elems)) = split_aggregate(reply) {
            let kept: Vec<Vec<u8>> = elems
                .chunks(2)
                .filter(|kv| {
                    let key = parse_value(&kv[0]).ok();
                    let key = key.as_ref().and_then(|k| k.as_bytes());
                    !key.is_some_and(|k| mods.ignore_fields.iter().any(|f| f == k))
                })
                .map(|kv| kv.concat())
                .collect();
            let count = if header.first() == Some(&b'%') { kept.len() } else { kept.len() * 2 };
            let mut out = vec![header[0]];
            out.extend(format!("{count}\r\n").into_bytes());
            out.extend(kept.concat());
            let rest = Modifiers { ignore_fields: Vec::new(), ..mods.clone() };
            return normalise(&out, &rest);
        }
    }
    if mods.sort || mods.sort_pairs {
        if let Some((header, elems)) = split_aggregate(reply) {
            let pairwise = mods.sort_pairs || header.first() == Some(&b'%');
            // Nested aggregates are sorted too: SCAN's `[cursor, [keys...]]`.
            let nested = Modifiers { sort: true, sort_pairs: false, ..Default::default() };
            let elems: Vec<Vec<u8>> = elems.iter().map(|e| normalise(e, &nested)).collect();
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

    #[test]
    fn normalise_sorts() {
        let sorted = normalise(b"*2\r\n$1\r\nb\r\n$1\r\na\r\n", &Modifiers { sort: true, ..Default::default() });
        assert_eq!(sorted, b"*2\r\n$1\r\na\r\n$1\r\nb\r\n");
        let pairs = normalise(
            b"*4\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n",
            &Modifiers { sort_pairs: true, ..Default::default() },
        );
        assert_eq!(pairs, b"*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n1\r\n");
        let mut mods = Modifiers::default();
        assert!(mods.apply("@ignore-fields=id,version"));
        let map = normalise(b"%3\r\n+id\r\n:7\r\n+proto\r\n:3\r\n+version\r\n$1\r\n8\r\n", &mods);
        assert_eq!(map, b"%1\r\n+proto\r\n:3\r\n");
        let flat = normalise(b"*4\r\n+id\r\n:7\r\n+proto\r\n:2\r\n", &mods);
        assert_eq!(flat, b"*2\r\n+proto\r\n:2\r\n");
    }
}
