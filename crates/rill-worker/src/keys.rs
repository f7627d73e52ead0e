//! Key names derived from a stream name, kept in the stream's Redis Cluster slot.
//!
//! A dead letter is written with `MULTI; XADD <dead-letter stream>; XACK <stream>; EXEC`, and the
//! idempotency guard sets a key in the same transaction as the XACK. A transaction may only touch
//! keys of one hash slot on a Redis Cluster, so every derived key must hash like its stream.
//!
//! Redis hashes the *hash tag* of a key when it has one — the bytes between the first `{` and
//! the first `}` after it, if that span is non-empty — and the whole key otherwise. Hence the
//! rule used here, for a suffix such as `dlq`:
//!
//! | stream name   | has a tag? | derived key        | hashed bytes |
//! |---------------|------------|--------------------|--------------|
//! | `{orders}`    | `orders`   | `{orders}:dlq`     | `orders`     |
//! | `app:{o}:in`  | `o`        | `app:{o}:in:dlq`   | `o`          |
//! | `orders`      | no         | `{orders}:dlq`     | `orders`     |
//!
//! A stream without a tag hashes as its whole name, so wrapping that name in braces makes the
//! derived key hash to the same bytes. That only works when the name contains no `{` or `}` of
//! its own (`a}b` or `x{}y` would yield a different tag); such names are refused and the caller
//! must name the dead-letter stream explicitly.
//!
//! The rule has one collision, and it is kept: the untagged `orders` and the tagged `{orders}`
//! derive the same `{orders}:dlq` (no other pair does, see [`default_dead_letter_shared_with`]).
//! Any key in the slot of `orders` must contain `{orders}`, so only a longer suffix for untagged
//! names could avoid it, and that would break the documented rule (docs/spec/policies.md §2).
//! What makes the shared stream safe is that a dead letter names its source: replay writes to
//! that source, and `rill dlq` acts only on the letters of the stream it is given.

use crate::error::ConfigError;

/// The hash tag of `key` as Redis Cluster computes it, if it has one.
pub fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = key.get(open + 1..)?;
    let close = rest.find('}')?;
    let tag = rest.get(..close)?;
    (!tag.is_empty()).then_some(tag)
}

/// A key named after `stream` with `suffix`, in the same cluster slot as `stream`.
pub fn derived_key(stream: &str, suffix: &str) -> Result<String, ConfigError> {
    if hash_tag(stream).is_some() {
        return Ok(format!("{stream}:{suffix}"));
    }
    if stream.contains(['{', '}']) {
        return Err(ConfigError::UntaggableStreamName { stream: stream.to_owned() });
    }
    Ok(format!("{{{stream}}}:{suffix}"))
}

/// The idempotency guard key of entry `id` of `stream`:
/// `{<hashed part>}:done:<byte length of stream>:<stream>:<id>`.
///
/// Unlike [`derived_key`], the guard key must name its stream exactly: `ticks` and `{ticks}`
/// both derive `{ticks}:...`, and a guard shared between them would ack an entry of one stream
/// unhandled because the other stream handled the same ID. So the full name follows the hash
/// tag, length-prefixed, which makes the key determine the stream and the ID:
///
/// | stream       | guard key of `1-0`             | hashed bytes |
/// |--------------|--------------------------------|--------------|
/// | `ticks`      | `{ticks}:done:5:ticks:1-0`     | `ticks`      |
/// | `{ticks}`    | `{ticks}:done:7:{ticks}:1-0`   | `ticks`      |
/// | `app:{o}:in` | `{o}:done:10:app:{o}:in:1-0`   | `o`          |
///
/// The leading `{...}` is the stream's own tag (or its whole name when it has none), so the key
/// stays in the stream's slot; a tag never contains `}`, so the first `}` ends it. Untagged
/// names with stray braces are refused, as in [`derived_key`].
pub fn guard_key(stream: &str, id: &str) -> Result<String, ConfigError> {
    let tag = match hash_tag(stream) {
        Some(tag) => tag,
        None if stream.contains(['{', '}']) => {
            return Err(ConfigError::UntaggableStreamName { stream: stream.to_owned() })
        }
        None => stream,
    };
    Ok(format!("{{{tag}}}:done:{}:{stream}:{id}", stream.len()))
}

/// The default dead-letter stream of `stream`: `<stream>:dlq`, or `{<stream>}:dlq` when the
/// stream name has no hash tag.
pub fn default_dead_letter_stream(stream: &str) -> Result<String, ConfigError> {
    derived_key(stream, "dlq")
}

/// The other stream whose default dead-letter stream is the same key as `stream`'s, if there is
/// one: `{k}` for an untagged `k`, and `k` for a stream named exactly `{k}` (with no other
/// braces). Other tagged names (`app:{o}:in`) derive a key no other stream derives.
pub fn default_dead_letter_shared_with(stream: &str) -> Option<String> {
    if hash_tag(stream).is_none() {
        return (!stream.contains(['{', '}'])).then(|| format!("{{{stream}}}"));
    }
    let inner = stream.strip_prefix('{')?.strip_suffix('}')?;
    (!inner.is_empty() && !inner.contains(['{', '}'])).then(|| inner.to_owned())
}

/// The bytes Redis Cluster hashes for `key`.
pub fn hashed_part(key: &str) -> &str {
    hash_tag(key).unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_the_cluster_rule() {
        assert_eq!(hash_tag("{orders}"), Some("orders"));
        assert_eq!(hash_tag("a{b}c{d}"), Some("b"));
        assert_eq!(hash_tag("{}x"), None);
        assert_eq!(hash_tag("x{}{y}"), None);
        assert_eq!(hash_tag("{{a}}"), Some("{a"));
        assert_eq!(hash_tag("plain"), None);
        assert_eq!(hash_tag("open{only"), None);
    }

    #[test]
    fn derived_keys_hash_like_their_stream() {
        for stream in ["{orders}", "app:{o}:in", "orders", "ticks:2024"] {
            let dlq = default_dead_letter_stream(stream).expect("taggable");
            assert_eq!(hashed_part(&dlq), hashed_part(stream), "{stream} -> {dlq}");
        }
        assert_eq!(default_dead_letter_stream("{orders}").ok().as_deref(), Some("{orders}:dlq"));
        assert_eq!(default_dead_letter_stream("orders").ok().as_deref(), Some("{orders}:dlq"));
    }

    #[test]
    fn the_one_collision_is_named() {
        for (stream, other) in [("orders", "{orders}"), ("{orders}", "orders"), ("ticks:2024", "{ticks:2024}")] {
            assert_eq!(default_dead_letter_shared_with(stream).as_deref(), Some(other), "{stream}");
            assert_eq!(default_dead_letter_stream(stream).ok(), default_dead_letter_stream(other).ok(), "{stream}");
        }
        for stream in ["app:{o}:in", "{o}:in", "x{o}", "{{a}}", "a}b", "{}x"] {
            assert_eq!(default_dead_letter_shared_with(stream), None, "{stream}");
        }
    }

    #[test]
    fn guard_keys_name_their_stream_exactly() {
        // `ticks` and `{ticks}` share a dead-letter stream; they must not share guards.
        let plain = guard_key("ticks", "1-0").expect("taggable");
        let tagged = guard_key("{ticks}", "1-0").expect("taggable");
        assert_ne!(plain, tagged);
        assert_eq!(plain, "{ticks}:done:5:ticks:1-0");
        assert_eq!(tagged, "{ticks}:done:7:{ticks}:1-0");
        for stream in ["ticks", "{ticks}", "app:{o}:in", "{{a}}", "x{ticks}y"] {
            let key = guard_key(stream, "7-1").expect("taggable");
            assert_eq!(hashed_part(&key), hashed_part(stream), "{stream} -> {key}");
        }
        // No two of these (stream, id) pairs meet, even where names and IDs could be re-split.
        let pairs = [("a", "1:b:1-0"), ("a:1:b", "1-0"), ("{a}", "1-0"), ("a", "1-0"), ("x{a}y", "1-0")];
        let keys: std::collections::BTreeSet<String> =
            pairs.iter().map(|(s, id)| guard_key(s, id).expect("taggable")).collect();
        assert_eq!(keys.len(), pairs.len(), "{keys:?}");
        assert!(guard_key("a}b", "1-0").is_err());
    }

    #[test]
    fn names_with_stray_braces_are_refused() {
        assert!(default_dead_letter_stream("a}b").is_err());
        assert!(default_dead_letter_stream("x{}y").is_err());
        assert!(default_dead_letter_stream("open{only").is_err());
    }
}
