//! The key table against a model (an `IndexMap`'s semantics written out as a vector), and
//! SCAN's guarantee across growth and shrinking.

#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use super::*;
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::HashSet;
use std::hash::Hasher;

/// A hasher that sends every key to a few homes with equal tag bits (the key's last byte mod
/// 4, in the low bits only): every lookup meets long runs and tag matches of other keys.
#[derive(Default, Clone)]
struct Crowded(u64);

impl Hasher for Crowded {
    fn finish(&self) -> u64 {
        self.0 % 4
    }
    fn write(&mut self, bytes: &[u8]) {
        if let Some(&b) = bytes.last() {
            self.0 = u64::from(b);
        }
    }
}

#[derive(Default, Clone)]
struct CrowdedState;

impl BuildHasher for CrowdedState {
    type Hasher = Crowded;
    fn build_hasher(&self) -> Crowded {
        Crowded::default()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u16, u32),
    Remove(u16),
    RemoveAt(u16),
    Swap(u16, u16),
    Shrink,
    Reserve(u8),
}

fn op(keys: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..keys, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => (0..keys).prop_map(Op::Remove),
        2 => any::<u16>().prop_map(Op::RemoveAt),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::Swap(a, b)),
        1 => Just(Op::Shrink),
        1 => any::<u8>().prop_map(Op::Reserve),
    ]
}

fn key(k: u16) -> Bytes {
    Bytes::from(format!("key:{k}"))
}

/// Apply `ops` to a table and to the model, comparing after each.
fn against_model<S: BuildHasher>(mut t: KeyTable<u32, S>, ops: &[Op], keys: u16) -> Result<(), TestCaseError> {
    let mut model: Vec<(Bytes, u32)> = Vec::new();
    let position = |m: &Vec<(Bytes, u32)>, k: &Bytes| m.iter().position(|(x, _)| x == k);
    for op in ops {
        match op {
            Op::Insert(k, v) => {
                let k = key(*k);
                let want = match position(&model, &k) {
                    Some(i) => (i, Some(std::mem::replace(&mut model[i].1, *v))),
                    None => {
                        model.push((k.clone(), *v));
                        (model.len() - 1, None)
                    }
                };
                prop_assert_eq!(t.insert_full(&k, *v), want);
            }
            Op::Remove(k) => {
                let k = key(*k);
                let want = position(&model, &k).map(|i| model.swap_remove(i));
                let got = t
                    .get_index_of(&k)
                    .and_then(|i| t.swap_remove_index(i))
                    .map(|(k, v)| (Bytes::copy_from_slice(&k), v));
                prop_assert_eq!(got, want);
            }
            Op::RemoveAt(i) => {
                let i = usize::from(*i) % (model.len() + 1);
                let want = (i < model.len()).then(|| model.swap_remove(i));
                prop_assert_eq!(t.swap_remove_index(i).map(|(k, v)| (Bytes::copy_from_slice(&k), v)), want);
            }
            Op::Swap(a, b) => {
                let n = model.len().max(1);
                let (a, b) = (usize::from(*a) % n, usize::from(*b) % n);
                if a < model.len() && b < model.len() {
                    model.swap(a, b);
                }
                t.swap_indices(a, b);
            }
            Op::Shrink => {
                t.shrink_if_sparse();
            }
            Op::Reserve(n) => {
                prop_assert!(t.try_reserve(usize::from(*n)).is_ok());
                prop_assert!(t.capacity() >= t.len() + usize::from(*n));
            }
        }
        t.check();
        prop_assert_eq!(t.len(), model.len());
        for (i, (k, v)) in model.iter().enumerate() {
            prop_assert_eq!(t.get_index(i), Some((&k[..], v)));
            prop_assert_eq!(t.get_index_of(k), Some(i));
            // Found by its hash alone too (the expiry index names keys so), with every other
            // item of that hash and none of another.
            let hash = t.hash_at(i).unwrap();
            let same: Vec<usize> = t.with_hash(hash).map(|(n, _, _)| n).collect();
            prop_assert!(same.contains(&i));
            prop_assert!(same.iter().all(|&n| t.hash_at(n) == Some(hash)));
        }
        prop_assert_eq!(t.get_index(model.len()), None);
    }
    for k in 0..keys {
        let k = key(k);
        prop_assert_eq!(t.get(&k), position(&model, &k).map(|i| &model[i].1));
    }
    Ok(())
}

proptest! {
    /// Numbers, lookups and removals as an `IndexMap` gives them, through growth and shrinking.
    #[test]
    fn behaves_as_a_numbered_map(ops in prop::collection::vec(op(300), 0..600)) {
        against_model(KeyTable::<u32>::default(), &ops, 300)?;
    }

    /// The same with every key crowded into four homes of equal tag bits: long runs, removals
    /// that shift items back across other homes, tag matches of other keys.
    #[test]
    fn behaves_as_a_numbered_map_when_hashes_collide(ops in prop::collection::vec(op(60), 0..300)) {
        against_model(KeyTable::<u32, CrowdedState>::with_hasher(CrowdedState), &ops, 60)?;
    }

    /// A key present for a whole SCAN iteration is returned, whatever the table does between
    /// calls (grows many times over, shrinks back, numbers change); every key returned was in
    /// the table; the cursor never passes the table's size.
    #[test]
    fn scan_returns_every_key_present_throughout(
        stable in 1u16..200,
        count in 1usize..20,
        between in prop::collection::vec(prop_oneof![
            3 => Just(Churn::Nothing),
            2 => (1u16..2000).prop_map(Churn::Add),
            1 => Just(Churn::DropAdded),
            1 => (0u16..200).prop_map(Churn::RemoveStable),
        ], 0..60),
    ) {
        let mut t: KeyTable<u32> = KeyTable::default();
        for k in 0..stable {
            t.insert(&key(k), 0);
        }
        let mut seen = HashSet::new();
        let mut ever: HashSet<Bytes> = t.keys().map(Bytes::copy_from_slice).collect();
        let mut removed = HashSet::new();
        let mut added: Vec<Bytes> = Vec::new();
        let mut cursor = 0;
        let mut between = between.into_iter();
        let mut calls = 0;
        loop {
            cursor = t.scan(cursor, count, |k, _| {
                seen.insert(Bytes::copy_from_slice(k));
            });
            prop_assert!(cursor < t.slots.len().max(1) as u64, "cursor within the table");
            match between.next().unwrap_or(Churn::Nothing) {
                Churn::Nothing => {}
                Churn::Add(n) => {
                    for _ in 0..n {
                        let k = Bytes::from(format!("new:{}", ever.len()));
                        t.insert(&k, 1);
                        ever.insert(k.clone());
                        added.push(k);
                    }
                }
                Churn::DropAdded => {
                    for k in added.drain(..) {
                        if let Some(i) = t.get_index_of(&k) {
                            t.swap_remove_index(i);
                            t.shrink_if_sparse();
                        }
                    }
                }
                Churn::RemoveStable(k) => {
                    if let Some(i) = t.get_index_of(&key(k)) {
                        t.swap_remove_index(i);
                        t.shrink_if_sparse();
                        removed.insert(k);
                    }
                }
            }
            calls += 1;
            prop_assert!(calls < 100_000);
            if cursor == 0 {
                break;
            }
        }
        for k in (0..stable).filter(|k| !removed.contains(k)) {
            prop_assert!(seen.contains(&key(k)), "key {} missed", k);
        }
        prop_assert!(seen.is_subset(&ever));
    }
}

#[derive(Debug, Clone)]
enum Churn {
    Nothing,
    Add(u16),
    DropAdded,
    RemoveStable(u16),
}

#[test]
fn a_full_scan_of_a_still_table_returns_each_key_once_in_about_len_over_count_calls() {
    let mut t: KeyTable<()> = KeyTable::default();
    for k in 0..50_000u32 {
        t.insert(format!("k{k}").as_bytes(), ());
    }
    for count in [1usize, 10, 100, 1000] {
        let mut seen = HashSet::new();
        let (mut cursor, mut calls) = (0, 0);
        loop {
            cursor = t.scan(cursor, count, |k, _| assert!(seen.insert(Bytes::copy_from_slice(k)), "{k:?} twice"));
            calls += 1;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 50_000);
        // Each call walks homes until it has COUNT keys: about len / count calls.
        assert!(calls <= 50_000 / count * 2 + 10, "count {count}: {calls} calls");
    }
}

#[test]
fn an_empty_table_scans_to_zero_at_once_and_shrinks_to_nothing() {
    let mut t: KeyTable<()> = KeyTable::default();
    assert_eq!(t.scan(0, 10, |_, _| panic!()), 0);
    assert_eq!(t.scan(12345, 10, |_, _| panic!()), 0);
    for k in 0..1000u32 {
        t.insert(k.to_string().as_bytes(), ());
    }
    let grown = t.slots.len();
    for k in 0..1000u32 {
        let i = t.get_index_of(k.to_string().as_bytes()).unwrap();
        t.swap_remove_index(i);
        t.shrink_if_sparse();
    }
    assert!(t.slots.len() < grown / 8, "{} slots left of {grown}", t.slots.len());
    t.check();
}
