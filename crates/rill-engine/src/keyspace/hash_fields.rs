//! A hash's fields, their values, and the expiry times some fields carry (HEXPIRE and kin).
//!
//! The table numbers its fields (`indexmap`), so HRANDFIELD reads the field at a random
//! position in O(1) where a `HashMap` would walk to it; the price is ~11 bytes per field.
//! Reading goes through `Deref` to the table; every change goes through the methods here, so
//! a field's time can never outlive the field.
//!
//! Times are absolute Unix milliseconds. A field is gone once its time is *before* the
//! command's time (Redis keeps a field whose time equals the clock), unlike a key, which goes
//! when its time is reached. Most hashes have no times: they pay for one empty `Option`.

use bytes::Bytes;
use indexmap::IndexMap;
use std::collections::{BTreeSet, HashMap};

type Hasher = super::FastHash;

/// The fields of a hash, with optional per-field expiry times.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HashFields {
    map: IndexMap<Bytes, Bytes, Hasher>,
    ttls: Option<Box<FieldTimes>>,
}

/// The expiry times of some fields: by field, and in time order.
/// Invariant: `(t, f)` is in `order` iff `at[f] == t`, and `f` is a field of the hash.
#[derive(Debug, Clone, Default, PartialEq)]
struct FieldTimes {
    at: HashMap<Bytes, i64>,
    order: BTreeSet<(i64, Bytes)>,
}

impl std::ops::Deref for HashFields {
    type Target = IndexMap<Bytes, Bytes, Hasher>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl HashFields {
    /// An empty hash with room for `n` fields.
    pub fn with_capacity(n: usize) -> HashFields {
        HashFields { map: IndexMap::with_capacity_and_hasher(n, Hasher::default()), ttls: None }
    }

    /// Set `field` to `value`, dropping any expiry time it had (HSET); returns the old value.
    pub fn insert(&mut self, field: Bytes, value: Bytes) -> Option<Bytes> {
        self.clear_ttl(&field);
        self.map.insert(field, value)
    }

    /// [`HashFields::insert`] of a borrowed field: true when the field is new. Its bytes are
    /// copied only then (an existing field keeps its own).
    pub fn set(&mut self, field: &[u8], value: Bytes) -> bool {
        self.clear_ttl(field);
        if let Some(v) = self.map.get_mut(field) {
            *v = value;
            return false;
        }
        self.map.insert(Bytes::copy_from_slice(field), value);
        true
    }

    /// Set `field` to `value`, keeping its expiry time (HINCRBY, HSETEX KEEPTTL).
    pub fn insert_keep_ttl(&mut self, field: Bytes, value: Bytes) -> Option<Bytes> {
        self.map.insert(field, value)
    }

    /// Remove `field` and its time, O(1) (the last field takes its position).
    pub fn swap_remove(&mut self, field: &[u8]) -> Option<Bytes> {
        let old = self.map.swap_remove(field)?;
        self.clear_ttl(field);
        Some(old)
    }

    /// The expiry time of `field`, if it has one.
    pub fn ttl(&self, field: &[u8]) -> Option<i64> {
        self.ttls.as_ref().and_then(|t| t.at.get(field).copied())
    }

    /// Give an existing `field` the expiry time `at` (`None`: none). Returns false when the
    /// hash has no such field.
    pub fn set_ttl(&mut self, field: &[u8], at: Option<i64>) -> bool {
        let Some((key, _)) = self.map.get_key_value(field) else { return false };
        let key = key.clone();
        self.clear_ttl(field);
        if let Some(t) = at {
            let times = self.ttls.get_or_insert_with(Box::default);
            times.at.insert(key.clone(), t);
            times.order.insert((t, key));
        }
        true
    }

    fn clear_ttl(&mut self, field: &[u8]) {
        let Some(times) = self.ttls.as_mut() else { return };
        if let Some((k, t)) = times.at.remove_entry(field) {
            times.order.remove(&(t, k));
        }
        if times.at.is_empty() {
            self.ttls = None;
        }
    }

    /// The earliest expiry time of a field, if any field has one.
    pub fn min_ttl(&self) -> Option<i64> {
        self.ttls.as_ref().and_then(|t| t.order.first()).map(|(t, _)| *t)
    }

    /// How many fields have an expiry time.
    pub fn ttl_count(&self) -> usize {
        self.ttls.as_ref().map_or(0, |t| t.at.len())
    }

    /// Every field with an expiry time, and the time, soonest first.
    pub fn ttls(&self) -> impl Iterator<Item = (&Bytes, i64)> + '_ {
        self.ttls.iter().flat_map(|t| t.order.iter()).map(|(t, f)| (f, *t))
    }

    /// Whether `field` has an expiry time before `now_ms` (it is gone for every reader).
    pub fn is_expired(&self, field: &[u8], now_ms: i64) -> bool {
        self.ttl(field).is_some_and(|t| t < now_ms)
    }

    /// The value of `field` unless it is missing or expired at `now_ms`.
    pub fn get_live(&self, field: &[u8], now_ms: i64) -> Option<&Bytes> {
        if self.is_expired(field, now_ms) {
            return None;
        }
        self.map.get(field)
    }

    /// The fields whose time is before `now_ms`, soonest first, at most `limit`.
    pub fn due(&self, now_ms: i64, limit: usize) -> Vec<Bytes> {
        self.ttls
            .iter()
            .flat_map(|t| t.order.iter())
            .take_while(|(t, _)| *t < now_ms)
            .take(limit)
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// How many fields are expired at `now_ms` (not yet removed). O(expired).
    pub fn expired_count(&self, now_ms: i64) -> usize {
        self.ttls.iter().flat_map(|t| t.order.iter()).take_while(|(t, _)| *t < now_ms).count()
    }

    /// The fields and values not expired at `now_ms`, in table order.
    pub fn iter_live(&self, now_ms: i64) -> impl Iterator<Item = (&Bytes, &Bytes)> + '_ {
        let check = self.min_ttl().is_some_and(|t| t < now_ms);
        self.map.iter().filter(move |(f, _)| !check || !self.is_expired(f, now_ms))
    }

    /// Number of fields not expired at `now_ms`.
    pub fn live_len(&self, now_ms: i64) -> usize {
        self.map.len() - self.expired_count(now_ms)
    }
}

impl FromIterator<(Bytes, Bytes)> for HashFields {
    fn from_iter<I: IntoIterator<Item = (Bytes, Bytes)>>(iter: I) -> Self {
        HashFields { map: iter.into_iter().collect(), ttls: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_follow_their_fields() {
        let mut h = HashFields::default();
        h.insert("a".into(), "1".into());
        h.insert("b".into(), "2".into());
        assert!(!h.set_ttl(b"zz", Some(5)));
        assert!(h.set_ttl(b"a", Some(10)));
        assert!(h.set_ttl(b"b", Some(5)));
        assert_eq!(h.min_ttl(), Some(5));
        assert_eq!(h.due(11, 10), vec![Bytes::from("b"), Bytes::from("a")]);
        assert_eq!(h.due(10, 10), vec![Bytes::from("b")]);
        assert_eq!(h.live_len(6), 1);
        assert_eq!(h.get_live(b"b", 5), Some(&Bytes::from("2")));
        assert_eq!(h.get_live(b"b", 6), None);
        h.insert_keep_ttl("b".into(), "3".into());
        assert_eq!(h.ttl(b"b"), Some(5));
        h.insert("b".into(), "4".into());
        assert_eq!(h.ttl(b"b"), None);
        h.swap_remove(b"a");
        assert_eq!(h.ttl_count(), 0);
        assert_eq!(h.min_ttl(), None);
        assert_eq!(h, [(Bytes::from("b"), Bytes::from("4"))].into_iter().collect());
    }
}
