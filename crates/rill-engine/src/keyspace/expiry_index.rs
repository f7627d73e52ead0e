//! The keys of a database that have an expiry, ordered by time: active expiry takes them from
//! the front, RANDOMKEY draws one by time. A key is named here by the 64-bit hash its key
//! table keeps for it, not by a copy of its name: 20 bytes an entry instead of a 40-byte
//! handle and the shared buffer a handle's clone makes of the stored name. The key is found
//! again through the table ([`super::Db::key_of`]): the one with that hash and that expiry.
//! Two keys may share a time and a hash (a 64-bit collision): the entry counts them.

use std::collections::BTreeMap;

/// Keys with an expiry as `(time, hash) → how many`.
#[derive(Debug, Default)]
pub(crate) struct ExpiryIndex {
    by_time: BTreeMap<(i64, u64), u32>,
    len: usize,
}

impl ExpiryIndex {
    /// Number of keys (not of entries).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Add a key expiring at `at_ms` whose table hash is `hash`.
    pub(crate) fn insert(&mut self, at_ms: i64, hash: u64) {
        *self.by_time.entry((at_ms, hash)).or_insert(0) += 1;
        self.len += 1;
    }

    /// Remove one key expiring at `at_ms` with hash `hash`; false if there is none.
    pub(crate) fn remove(&mut self, at_ms: i64, hash: u64) -> bool {
        let Some(n) = self.by_time.get_mut(&(at_ms, hash)) else { return false };
        *n -= 1;
        if *n == 0 {
            self.by_time.remove(&(at_ms, hash));
        }
        self.len -= 1;
        true
    }

    /// Whether a key expiring at `at_ms` with hash `hash` is here.
    #[cfg(test)]
    pub(crate) fn contains(&self, at_ms: i64, hash: u64) -> bool {
        self.by_time.contains_key(&(at_ms, hash))
    }

    /// The soonest: `(time, hash)`.
    pub(crate) fn first(&self) -> Option<(i64, u64)> {
        self.by_time.keys().next().copied()
    }

    /// The latest: `(time, hash)`.
    pub(crate) fn last(&self) -> Option<(i64, u64)> {
        self.by_time.keys().next_back().copied()
    }

    /// The soonest at or after `at_ms`.
    pub(crate) fn first_from(&self, at_ms: i64) -> Option<(i64, u64)> {
        self.by_time.range((at_ms, 0)..).next().map(|(k, _)| *k)
    }

    /// Forget every key.
    pub(crate) fn clear(&mut self) {
        self.by_time.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::ExpiryIndex;

    #[test]
    fn keys_sharing_a_time_and_a_hash_are_counted_apart() {
        let mut x = ExpiryIndex::default();
        x.insert(5, 1);
        x.insert(5, 1);
        x.insert(3, 9);
        assert_eq!((x.len(), x.first(), x.last()), (3, Some((3, 9)), Some((5, 1))));
        assert!(x.remove(5, 1));
        assert!(x.contains(5, 1), "the other key of (5, 1) is still there");
        assert!(x.remove(5, 1));
        assert!(!x.remove(5, 1));
        assert_eq!((x.len(), x.first_from(4)), (1, None));
        assert_eq!(x.first_from(3), Some((3, 9)));
    }
}
