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

/// The default dead-letter stream of `stream`: `<stream>:dlq`, or `{<stream>}:dlq` when the
/// stream name has no hash tag.
pub fn default_dead_letter_stream(stream: &str) -> Result<String, ConfigError> {
    derived_key(stream, "dlq")
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
    fn names_with_stray_braces_are_refused() {
        assert!(default_dead_letter_stream("a}b").is_err());
        assert!(default_dead_letter_stream("x{}y").is_err());
        assert!(default_dead_letter_stream("open{only").is_err());
    }
}
