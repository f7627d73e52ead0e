//! A hash's fields, their values, and the expiry times some fields carry (HEXPIRE and kin).
//!
//! A small hash (nearly every hash an application keeps per object) lives in one buffer
//! ([`super::packed`]): a one-field hash costs one small allocation instead of a table, an
//! index and two buffers. A write that passes the buffer's limits turns it into the numbered
//! table (`indexmap`), for good; the numbered table lets HRANDFIELD read the field at a random
//! position in O(1) where a `HashMap` would walk to it.
//!
//! Both forms number the fields the same way (insertion order, the last field taking the place
//! of a removed one), so which form a hash is in is never observable: iteration order, random
//! picks and cursors are the same. Reading goes through the methods here (fields and values as
//! byte slices); every change goes through them too, so a field's time can never outlive the
//! field.
//!
//! Times are absolute Unix milliseconds. A field is gone once its time is *before* the
//! command's time (Redis keeps a field whose time equals the clock), unlike a key, which goes
//! when its time is reached. Most hashes have no times: they pay for one empty `Option`.

use bytes::Bytes;
use indexmap::IndexMap;
use std::collections::{BTreeSet, HashMap};

use super::packed::{self, Packed};

type Hasher = super::FastHash;

/// The fields of a hash, with optional per-field expiry times.
#[derive(Debug, Clone)]
pub struct HashFields {
    repr: Repr,
    ttls: Option<Box<FieldTimes>>,
}

#[derive(Debug, Clone)]
enum Repr {
    Packed(Packed<2>),
    /// Boxed: the one-buffer form is what keeps the whole collection a vector's size.
    Table(Box<IndexMap<Bytes, Bytes, Hasher>>),
}

impl Default for HashFields {
    fn default() -> Self {
        HashFields { repr: Repr::Packed(Packed::default()), ttls: None }
    }
}

/// Equal as maps (the same fields with the same values and times), whatever the order or form.
impl PartialEq for HashFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self.iter().all(|(f, v)| other.get(f) == Some(v))
            && self.ttls.as_deref().map(|t| &t.at) == other.ttls.as_deref().map(|t| &t.at)
    }
}

/// A hash's fields and values in their order, as byte slices.
#[derive(Debug, Clone)]
pub struct Iter<'a>(IterRepr<'a>);

#[derive(Debug, Clone)]
enum IterRepr<'a> {
    Packed(packed::Iter<'a, 2>),
    Table(indexmap::map::Iter<'a, Bytes, Bytes>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Packed(p) => p.next().map(|[f, v]| (f, v)),
            IterRepr::Table(t) => t.next().map(|(f, v)| (&f[..], &v[..])),
        }
    }
}

/// The expiry times of some fields: by field, and in time order.
/// Invariant: `(t, f)` is in `order` iff `at[f] == t`, and `f` is a field of the hash.
#[derive(Debug, Clone, Default, PartialEq)]
struct FieldTimes {
    at: HashMap<Bytes, i64>,
    order: BTreeSet<(i64, Bytes)>,
}

impl HashFields {
    /// An empty hash with room for `n` fields.
    pub fn with_capacity(n: usize) -> HashFields {
        let repr = if n <= packed::MAX_LEN {
            Repr::Packed(Packed::default())
        } else {
            Repr::Table(Box::new(IndexMap::with_capacity_and_hasher(n, Hasher::default())))
        };
        HashFields { repr, ttls: None }
    }

    /// How many fields the hash has (expired ones included).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Packed(p) => p.len(),
            Repr::Table(t) => t.len(),
        }
    }

    /// Whether the hash has no field.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many fields the hash has room for without growing.
    pub fn capacity(&self) -> usize {
        match &self.repr {
            Repr::Packed(p) => p.len(),
            Repr::Table(t) => t.capacity(),
        }
    }

    /// Whether the hash is kept in one buffer (internal form, for tests).
    pub fn is_packed(&self) -> bool {
        matches!(self.repr, Repr::Packed(_))
    }

    /// The value of `field` (expired or not).
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Packed(p) => p.find(field).map(|slot| p.last(slot)),
            Repr::Table(t) => t.get(field).map(|v| &v[..]),
        }
    }

    /// Whether the hash has `field` (expired or not).
    pub fn contains_key(&self, field: &[u8]) -> bool {
        match &self.repr {
            Repr::Packed(p) => p.find(field).is_some(),
            Repr::Table(t) => t.contains_key(field),
        }
    }

    /// The fields and values in their order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(match &self.repr {
            Repr::Packed(p) => IterRepr::Packed(p.iter()),
            Repr::Table(t) => IterRepr::Table(t.iter()),
        })
    }

    /// The field numbered `index` and its value (O(fields) in the one-buffer form, which
    /// holds at most [`packed::MAX_LEN`]).
    pub fn get_index(&self, index: usize) -> Option<(&[u8], &[u8])> {
        match &self.repr {
            Repr::Packed(p) => p.iter().nth(index).map(|[f, v]| (f, v)),
            Repr::Table(t) => t.get_index(index).map(|(f, v)| (&f[..], &v[..])),
        }
    }

    /// The table form, made from the buffer form if the hash was in it.
    fn table(&mut self) -> &mut IndexMap<Bytes, Bytes, Hasher> {
        if let Repr::Packed(p) = &self.repr {
            let mut t = IndexMap::with_capacity_and_hasher(p.len() + 1, Hasher::default());
            for [f, v] in p.iter() {
                t.insert(Bytes::copy_from_slice(f), Bytes::copy_from_slice(v));
            }
            self.repr = Repr::Table(Box::new(t));
        }
        match &mut self.repr {
            Repr::Table(t) => t,
            Repr::Packed(_) => unreachable!("made a table above"),
        }
    }

    /// Set `field` to `value` keeping any time; the old value if the field was there.
    fn put(&mut self, field: &[u8], value: Bytes, owned: Option<Bytes>) -> Option<Bytes> {
        if let Repr::Packed(p) = &mut self.repr {
            if packed::fits(&[field, &value]) {
                if let Some(slot) = p.find(field) {
                    let old = Bytes::copy_from_slice(p.last(slot));
                    p.replace_last(slot, &value);
                    return Some(old);
                }
                if p.len() < packed::MAX_LEN {
                    p.push([field, &value]);
                    return None;
                }
            }
        }
        let t = self.table();
        if let Some(v) = t.get_mut(field) {
            return Some(std::mem::replace(v, value));
        }
        t.insert(owned.unwrap_or_else(|| Bytes::copy_from_slice(field)), value);
        None
    }

    /// Set `field` to `value`, dropping any expiry time it had (HSET); returns the old value.
    pub fn insert(&mut self, field: Bytes, value: Bytes) -> Option<Bytes> {
        self.clear_ttl(&field);
        self.put(&field.clone(), value, Some(field))
    }

    /// [`HashFields::insert`] of a borrowed field: true when the field is new. Its bytes are
    /// copied only then (an existing field keeps its own).
    pub fn set(&mut self, field: &[u8], value: Bytes) -> bool {
        self.clear_ttl(field);
        self.put(field, value, None).is_none()
    }

    /// Set `field` to `value`, keeping its expiry time (HINCRBY, HSETEX KEEPTTL).
    pub fn insert_keep_ttl(&mut self, field: Bytes, value: Bytes) -> Option<Bytes> {
        self.put(&field.clone(), value, Some(field))
    }

    /// Remove `field` and its time, O(1) in the table form (the last field takes its
    /// position, in both forms).
    pub fn swap_remove(&mut self, field: &[u8]) -> Option<Bytes> {
        let old = match &mut self.repr {
            Repr::Packed(p) => {
                let slot = p.find(field)?;
                let old = Bytes::copy_from_slice(p.last(slot));
                p.swap_remove(slot);
                old
            }
            Repr::Table(t) => t.swap_remove(field)?,
        };
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
        let key = match &self.repr {
            Repr::Packed(p) => match p.find(field) {
                Some(_) => Bytes::copy_from_slice(field),
                None => return false,
            },
            Repr::Table(t) => match t.get_key_value(field) {
                Some((k, _)) => k.clone(),
                None => return false,
            },
        };
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
    pub fn get_live(&self, field: &[u8], now_ms: i64) -> Option<&[u8]> {
        if self.is_expired(field, now_ms) {
            return None;
        }
        self.get(field)
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
    pub fn iter_live(&self, now_ms: i64) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let check = self.min_ttl().is_some_and(|t| t < now_ms);
        self.iter().filter(move |(f, _)| !check || !self.is_expired(f, now_ms))
    }

    /// Number of fields not expired at `now_ms`.
    pub fn live_len(&self, now_ms: i64) -> usize {
        self.len() - self.expired_count(now_ms)
    }
}

impl FromIterator<(Bytes, Bytes)> for HashFields {
    fn from_iter<I: IntoIterator<Item = (Bytes, Bytes)>>(iter: I) -> Self {
        let mut h = HashFields::default();
        for (f, v) in iter {
            h.put(&f.clone(), v, Some(f));
        }
        h
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
        assert_eq!(h.get_live(b"b", 5), Some(&b"2"[..]));
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

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, usize),
        Set(u8, usize),
        KeepTtl(u8, usize),
        Remove(u8),
        Ttl(u8, Option<i64>),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        // Few names (so writes meet existing fields) and value lengths around the limit.
        let name = 0u8..80;
        let len = prop_oneof![0usize..8, (packed::MAX_ITEM - 1)..(packed::MAX_ITEM + 2)];
        prop_oneof![
            4 => (name.clone(), len.clone()).prop_map(|(n, l)| Op::Insert(n, l)),
            2 => (name.clone(), len.clone()).prop_map(|(n, l)| Op::Set(n, l)),
            1 => (name.clone(), len).prop_map(|(n, l)| Op::KeepTtl(n, l)),
            3 => name.clone().prop_map(Op::Remove),
            1 => (name, proptest::option::of(0i64..100)).prop_map(|(n, t)| Op::Ttl(n, t)),
        ]
    }

    fn field(n: u8) -> Vec<u8> {
        // Field 79 is longer than a buffer entry may be.
        if n == 79 {
            vec![b'f'; packed::MAX_ITEM + 1]
        } else {
            format!("f{n}").into_bytes()
        }
    }

    fn value(n: u8, len: usize) -> Bytes {
        Bytes::from(std::iter::repeat_n(n, len).collect::<Vec<u8>>())
    }

    proptest::proptest! {
        /// Both forms behave as the numbered table they stand for: the same fields in the same
        /// order (random picks and cursors depend on it), the same old values, the same times;
        /// the buffer form holds exactly the hashes that never passed its limits.
        #[test]
        fn both_forms_follow_a_numbered_table(ops in proptest::collection::vec(op(), 0..400)) {
            let mut h = HashFields::default();
            let mut model: IndexMap<Vec<u8>, Bytes> = IndexMap::new();
            let mut times: HashMap<Vec<u8>, i64> = HashMap::new();
            let mut passed = false;
            for op in ops {
                match op {
                    Op::Insert(n, l) | Op::Set(n, l) | Op::KeepTtl(n, l) => {
                        let (f, v) = (field(n), value(n, l));
                        passed |= !packed::fits(&[&f, &v]) || (!model.contains_key(&f) && model.len() == packed::MAX_LEN);
                        let old = model.insert(f.clone(), v.clone());
                        match op {
                            Op::Insert(..) => {
                                times.remove(&f);
                                proptest::prop_assert_eq!(h.insert(Bytes::from(f), v), old);
                            }
                            Op::Set(..) => {
                                times.remove(&f);
                                proptest::prop_assert_eq!(h.set(&f, v), old.is_none());
                            }
                            _ => proptest::prop_assert_eq!(h.insert_keep_ttl(Bytes::from(f), v), old),
                        }
                    }
                    Op::Remove(n) => {
                        let f = field(n);
                        times.remove(&f);
                        proptest::prop_assert_eq!(h.swap_remove(&f), model.swap_remove(&f));
                    }
                    Op::Ttl(n, t) => {
                        let f = field(n);
                        let there = model.contains_key(&f);
                        if there {
                            match t {
                                Some(t) => times.insert(f.clone(), t),
                                None => times.remove(&f),
                            };
                        }
                        proptest::prop_assert_eq!(h.set_ttl(&f, t), there);
                    }
                }
                proptest::prop_assert_eq!(h.len(), model.len());
                proptest::prop_assert_eq!(h.is_packed(), !passed);
                let got: Vec<(&[u8], &[u8])> = h.iter().collect();
                let want: Vec<(&[u8], &[u8])> = model.iter().map(|(f, v)| (&f[..], &v[..])).collect();
                proptest::prop_assert_eq!(&got, &want);
                proptest::prop_assert_eq!(h.ttl_count(), times.len());
                proptest::prop_assert_eq!(h.min_ttl(), times.values().min().copied());
            }
            for (i, (f, v)) in model.iter().enumerate() {
                proptest::prop_assert_eq!(h.get_index(i), Some((&f[..], &v[..])));
                proptest::prop_assert_eq!(h.get(f), Some(&v[..]));
                proptest::prop_assert_eq!(h.ttl(f), times.get(f).copied());
            }
            proptest::prop_assert_eq!(h.get_index(model.len()), None);
            let rebuilt: HashFields = model.iter().map(|(f, v)| (Bytes::from(f.clone()), v.clone())).collect();
            if times.is_empty() {
                proptest::prop_assert_eq!(&rebuilt, &h);
            }
        }
    }
}
