//! The indexed PEL against a plain reference model (proptest), and group state under random
//! effect sequences against plain maps.

use super::chunked::CHUNK_LEN;
use super::group::{ConsumerGroup, GroupEffect};
use super::pel::{ClaimOrder, OwnerId, Pel, DELIVERY_COUNT_MAX};
use super::{Stream, StreamId};
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// One PEL operation.
#[derive(Debug, Clone)]
enum Op {
    Own {
        id: u64,
        owner: u8,
        time: i64,
        count: u64,
    },
    Nack {
        id: u64,
        count: u64,
    },
    Touch {
        id: u64,
        time: i64,
        count: u64,
    },
    Remove {
        id: u64,
    },
    /// XGROUP DELCONSUMER: the owner goes with its entries (it comes back on its next Own).
    DropOwner {
        owner: u8,
    },
}

/// Counts around the 32-bit spill threshold and the saturation point, and small ones.
fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..5u64,
        1 => (u64::from(u32::MAX) - 2)..(u64::from(u32::MAX) + 2),
        1 => Just(DELIVERY_COUNT_MAX),
        1 => Just(u64::MAX),
    ]
}

/// IDs the model test draws from: enough for the indexes to hold several chunks each.
const IDS: u64 = CHUNK_LEN as u64 * 3;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..IDS, 0..3u8, 0..20i64, count())
            .prop_map(|(id, owner, time, count)| Op::Own { id, owner, time, count }),
        2 => (0..IDS, count()).prop_map(|(id, count)| Op::Nack { id, count }),
        2 => (0..IDS, 0..20i64, count()).prop_map(|(id, time, count)| Op::Touch { id, time, count }),
        3 => (0..IDS).prop_map(|id| Op::Remove { id }),
        1 => (0..3u8).prop_map(|owner| Op::DropOwner { owner }),
    ]
}

/// The model: a plain map to (owner, time, count, release sequence if released, delivery
/// sequence: when it was last owned or touched, which orders entries of the same time).
type Model = BTreeMap<u64, (Option<u8>, i64, u64, Option<u64>, u64)>;

fn owner_name(o: u8) -> Bytes {
    Bytes::from(format!("c{o}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn pel_matches_model(ops in proptest::collection::vec(op(), 0..1500)) {
        let mut pel = Pel::default();
        let mut slots: BTreeMap<u8, OwnerId> = BTreeMap::new();
        let mut model: Model = BTreeMap::new();
        let mut seq = 0u64;
        let mut delivered = 0u64;
        for op in ops {
            delivered += 1;
            match op {
                Op::Own { id, owner, time, count } => {
                    let slot = *slots.entry(owner).or_insert_with(|| pel.add_owner(owner_name(owner)));
                    let replaced = pel.set_owned(StreamId::new(id, 0), slot, time, count);
                    prop_assert_eq!(replaced, model.contains_key(&id));
                    model.insert(id, (Some(owner), time, count.min(DELIVERY_COUNT_MAX), None, delivered));
                }
                Op::Nack { id, count } => {
                    pel.set_nacked(StreamId::new(id, 0), count);
                    model.insert(id, (None, 0, count.min(DELIVERY_COUNT_MAX), Some(seq), 0));
                    seq += 1;
                }
                Op::Touch { id, time, count } => {
                    let done = pel.touch(StreamId::new(id, 0), time, count);
                    let expect = matches!(model.get(&id), Some((Some(_), ..)));
                    prop_assert_eq!(done, expect);
                    if let Some(e) = model.get_mut(&id).filter(|e| e.0.is_some()) {
                        e.1 = time;
                        e.2 = count.min(DELIVERY_COUNT_MAX);
                        e.4 = delivered;
                    }
                }
                Op::Remove { id } => {
                    let removed = pel.remove(StreamId::new(id, 0));
                    prop_assert_eq!(removed, model.remove(&id).is_some());
                }
                Op::DropOwner { owner } => {
                    let gone = slots.remove(&owner).map_or(0, |slot| pel.remove_owner(slot));
                    let before = model.len();
                    model.retain(|_, e| e.0 != Some(owner));
                    prop_assert_eq!(gone, (before - model.len()) as u64);
                }
            }
            prop_assert!(pel.validate());
        }
        // By ID, and by ID from a midpoint.
        let by_id: Vec<(u64, Option<Bytes>, i64, u64)> = pel
            .iter()
            .map(|(id, e)| (id.ms, e.owner.cloned(), e.delivery_time_ms, e.delivery_count))
            .collect();
        let expect: Vec<(u64, Option<Bytes>, i64, u64)> = model
            .iter()
            .map(|(id, (o, t, c, _, _))| (*id, o.map(owner_name), *t, *c))
            .collect();
        prop_assert_eq!(by_id, expect);
        let mid: Vec<u64> = pel.range(StreamId::new(100, 0), StreamId::new(200, 0)).map(|(id, _)| id.ms).collect();
        prop_assert_eq!(mid, model.range(100..=200).map(|(id, _)| *id).collect::<Vec<_>>());
        prop_assert_eq!(pel.bounds().map(|(a, b)| (a.ms, b.ms)),
            model.keys().next().and_then(|a| Some((*a, *model.keys().next_back()?))));
        // Claim order: released first in release order, then by time, entries of the same time
        // in the order they were delivered.
        let mut order: Vec<((u8, u64, i64, u64), u64)> = model
            .iter()
            .map(|(id, (_, t, _, s, d))| match s {
                Some(s) => ((0, *s, 0, 0), *id),
                None => ((1, 0, *t, *d), *id),
            })
            .collect();
        order.sort();
        let got: Vec<u64> = pel.claim_order().map(|(id, _)| id.ms).collect();
        prop_assert_eq!(got, order.iter().map(|(_, id)| *id).collect::<Vec<_>>());
        prop_assert_eq!(pel.nacked_count(), model.values().filter(|e| e.0.is_none()).count() as u64);
        let nacked_first = pel
            .claim_order()
            .map(|(_, e)| matches!(e.claim_order(), ClaimOrder::Nacked(_)))
            .collect::<Vec<_>>();
        prop_assert!(nacked_first.windows(2).all(|w| matches!(w, [true, _] | [false, false])));
        // Each owner's PEL: its IDs ascending, whole and after an ID.
        for (owner, slot) in &slots {
            let mine: Vec<u64> = model.iter().filter(|(_, e)| e.0 == Some(*owner)).map(|(id, _)| *id).collect();
            prop_assert_eq!(pel.owned_count(*slot), mine.len() as u64);
            let all: Vec<u64> = pel.owned_ids(*slot, Bound::Unbounded).map(|id| id.ms).collect();
            prop_assert_eq!(&all, &mine);
            let after: Vec<u64> = pel.owned_ids(*slot, Bound::Excluded(StreamId::new(150, 0))).map(|id| id.ms).collect();
            prop_assert_eq!(after, mine.iter().copied().filter(|id| *id > 150).collect::<Vec<_>>());
            prop_assert_eq!(pel.owner_name(*slot), Some(&owner_name(*owner)));
        }
    }

    /// Random effects on a group keep every consumer's PEL equal to the IDs the group PEL says
    /// it owns, and leave released entries in no consumer.
    #[test]
    fn group_effects_keep_owner_sets_consistent(
        ops in proptest::collection::vec((0..6u8, 0..20u64, 0..3u8, 0..50i64), 0..150)
    ) {
        let g = Bytes::from_static(b"g");
        let mut s = Stream::new();
        s.apply_group_effect(&GroupEffect::GroupCreated { group: g.clone(), last_id: StreamId::MIN, entries_read: None });
        let mut model: BTreeMap<u64, Option<u8>> = BTreeMap::new();
        let mut consumers: BTreeSet<u8> = BTreeSet::new();
        for (kind, id, c, t) in ops {
            let sid = StreamId::new(id, 0);
            let effect = match kind {
                0 => { model.insert(id, Some(c)); consumers.insert(c);
                       GroupEffect::Delivered { group: g.clone(), consumer: owner_name(c), id: sid, time_ms: t, entries_read: None, noack: false } }
                1 => { model.insert(id, Some(c)); consumers.insert(c);
                       GroupEffect::Claimed { group: g.clone(), consumer: owner_name(c), id: sid, time_ms: t, count: 2, active_ms: t } }
                2 => { model.insert(id, None);
                       GroupEffect::Nacked { group: g.clone(), id: sid, count: 1 } }
                3 => { model.remove(&id);
                       GroupEffect::Acked { group: g.clone(), id: sid } }
                4 => { model.retain(|_, o| *o != Some(c)); consumers.remove(&c);
                       GroupEffect::ConsumerDeleted { group: g.clone(), consumer: owner_name(c) } }
                _ => { consumers.insert(c);
                       GroupEffect::ConsumerCreated { group: g.clone(), consumer: owner_name(c), time_ms: t } }
            };
            s.apply_group_effect(&effect);
            prop_assert!(s.validate_groups());
        }
        let group: &ConsumerGroup = s.group(b"g").expect("group");
        prop_assert_eq!(group.pel().len(), model.len() as u64);
        prop_assert_eq!(group.consumers().len(), consumers.len());
        for c in &consumers {
            let expect: Vec<StreamId> = model
                .iter()
                .filter(|(_, o)| **o == Some(*c))
                .map(|(id, _)| StreamId::new(*id, 0))
                .collect();
            let consumer = group.consumer(&owner_name(*c)).expect("consumer");
            let got: Vec<StreamId> = group.pending_ids(consumer, Bound::Unbounded).collect();
            prop_assert_eq!(group.pending_count(consumer), expect.len() as u64);
            prop_assert_eq!(got, expect);
        }
        for (id, e) in group.pel().iter() {
            prop_assert_eq!(e.owner.cloned(), model.get(&id.ms).copied().flatten().map(owner_name));
        }
    }
}

/// Claiming from the head of a large PEL touches only what it claims.
#[test]
fn same_time_deliveries_keep_their_order() {
    let mut pel = Pel::default();
    let a = pel.add_owner(owner_name(0));
    let id = |n: u64| StreamId::new(n, 0);
    let order = |pel: &Pel| pel.claim_order().map(|(id, _)| id.ms).collect::<Vec<_>>();
    pel.set_owned(id(3), a, 10, 1);
    pel.set_owned(id(1), a, 10, 1);
    pel.set_owned(id(2), a, 20, 1);
    // A delivery in the past goes after the entries of its time, as Redis' sorted insert does.
    pel.set_owned(id(0), a, 10, 1);
    assert_eq!(order(&pel), [3, 1, 0, 2]);
    // Re-delivering moves an entry to the end of its new time.
    pel.touch(id(3), 20, 2);
    assert_eq!(order(&pel), [1, 0, 2, 3]);
    assert_eq!(pel.get(id(3)).map(|e| e.delivery_time_ms), Some(20));
    assert!(pel.validate());

    // Past 2^16 deliveries in one millisecond the rest fall back to ID order.
    let mut pel = Pel::default();
    let a = pel.add_owner(owner_name(0));
    for n in (0..70_000u64).rev() {
        pel.set_owned(id(n), a, 1_700_000_000_000, 1);
    }
    assert!(pel.validate());
    let got = order(&pel);
    assert_eq!(got.len(), 70_000);
    let (distinct, shared) = got.split_at(65_535);
    assert!(distinct.iter().copied().eq((70_000 - 65_535..70_000).rev()));
    assert!(shared.iter().copied().eq(0..70_000 - 65_535));
    assert!(pel.iter().all(|(_, e)| e.delivery_time_ms == 1_700_000_000_000));
}

#[test]
fn claim_order_scales() {
    let mut pel = Pel::default();
    let a = pel.add_owner(Bytes::from_static(b"a"));
    let b = pel.add_owner(Bytes::from_static(b"b"));
    for i in 0..200_000u64 {
        pel.set_owned(StreamId::new(i + 1, 0), a, i as i64, 1);
    }
    let start = std::time::Instant::now();
    for _ in 0..1000 {
        let (id, _) = pel.claim_order().next().expect("entry");
        pel.set_owned(id, b, 1_000_000, 2);
    }
    assert_eq!(pel.len(), 200_000);
    assert_eq!(pel.owned_count(b), 1000);
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
}

/// Entries delivered in ID order to one consumer cost their packed size: the figure the
/// module doc gives (72 B plus the directory; this counts only its slots).
#[test]
fn delivered_in_order_are_packed() {
    let mut pel = Pel::default();
    let a = pel.add_owner(Bytes::from_static(b"a"));
    let n = 100_000u64;
    for i in 0..n {
        pel.set_owned(StreamId::new(i + 1, 1), a, 1_700_000_000_000 + (i / 100) as i64, 1);
    }
    let per_entry = pel.heap_bytes() as f64 / n as f64;
    assert!(per_entry < 74.0, "{per_entry} bytes per entry");
}
