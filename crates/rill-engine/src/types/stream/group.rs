//! Consumer groups: their state (spec §1.3, §1.4), the effect records every group command is
//! made of (§4), and the entries-read / lag arithmetic (§5).
//!
//! ```text
//! Stream.groups: BTreeMap<name, ConsumerGroup>          ordered by name (byte-wise)
//!   ConsumerGroup
//!     last_delivered_id, entries_read (None = unknown, shown as nil)
//!     pel: Pel            the one record per pending ID, indexed by ID and claim order,
//!                         and every consumer's PEL (the IDs it owns), by OwnerId
//!     consumers: BTreeMap<name, Consumer>
//!       Consumer { seen_time_ms, active_time_ms (-1 = never), owner: OwnerId }
//! ```
//!
//! A pending record is stored once, in the group [`Pel`], which also holds each consumer's PEL
//! (the set of IDs it owns) under the consumer's [`OwnerId`]. Invariant: consumer `c` has a
//! live slot `consumers[c].owner` in the PEL whose name is `c`, and no other slot is live.
//! Released (XNACKed) records have no owner and sit in no consumer's PEL.
//!
//! # Effects
//!
//! Every change to group state is a [`GroupEffect`] value applied by one function,
//! [`Stream::apply_group_effect`]. A command reads the stream and its clock, decides, and emits
//! effects with every time, count, owner and counter spelled out; `apply` reads no clock and
//! makes no decision, so replaying the same records (from the log, on a replica) reaches the
//! same state. Commands here compute an effect and apply it at once ([`Stream::apply_group`]
//! does both steps and collects the record), because later decisions of the same command (the
//! next entries-read value, the next claim) depend on the earlier ones. Entry payload changes
//! (appends, deletions, trims) are not group effects; DELREF's dropping of references is
//! expressed as [`GroupEffect::Acked`] records.

use super::block::Block;
use super::order::KeyOrder;
use super::pel::{OwnerId, Pel, DELIVERY_COUNT_MAX};
use super::policy::{Policy, PolicyState, Release, Settings};
use super::{Stream, StreamId};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

/// A consumer of a group.
#[derive(Debug, Clone)]
pub struct Consumer {
    /// Last time (ms) it tried to read or claim; set at creation.
    pub seen_time_ms: i64,
    /// Last time (ms) it received or claimed entries; −1 until that first happens.
    pub active_time_ms: i64,
    /// Its slot in the group PEL, which holds the IDs it owns.
    owner: OwnerId,
}

impl PartialEq for Consumer {
    /// Equal times; what each owns is compared with the PEL (slots may differ).
    fn eq(&self, other: &Self) -> bool {
        (self.seen_time_ms, self.active_time_ms) == (other.seen_time_ms, other.active_time_ms)
    }
}

impl Eq for Consumer {}

/// One consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// Highest ID handed out by `>` reads (or set by CREATE/SETID/XCLAIM LASTID).
    pub last_delivered_id: StreamId,
    /// Logical read counter (§5); `None` when unknown.
    pub entries_read: Option<u64>,
    /// Pending entries.
    pel: Pel,
    /// Consumers by name.
    consumers: BTreeMap<Bytes, Consumer>,
    /// rill's policy (`RILL.GROUP SET`); `None`: the group behaves as Redis' exactly.
    policy: Option<Box<Policy>>,
}

impl ConsumerGroup {
    fn new(last_delivered_id: StreamId, entries_read: Option<u64>) -> ConsumerGroup {
        ConsumerGroup { last_delivered_id, entries_read, pel: Pel::default(), consumers: BTreeMap::new(), policy: None }
    }

    /// The owner of pending `id` acknowledged it: its activity, with a policy.
    fn ack_activity(&mut self, id: StreamId, now_ms: i64) {
        if self.policy.is_none() {
            return;
        }
        let owner = self.pel.get(id).and_then(|e| e.owner.cloned());
        if let (Some(owner), Some(p)) = (owner, self.policy.as_deref_mut()) {
            p.active(&owner, now_ms);
        }
    }

    /// The group's policy, if it has one.
    pub fn policy(&self) -> Option<&Policy> {
        self.policy.as_deref()
    }

    /// The group's policy, to move delayed entries whose time has come into its hand-back
    /// queue ([`Policy::promote_due`], which changes nothing observable).
    pub fn policy_mut(&mut self) -> Option<&mut Policy> {
        self.policy.as_deref_mut()
    }

    /// The group PEL.
    pub fn pel(&self) -> &Pel {
        &self.pel
    }

    /// Consumers by name.
    pub fn consumers(&self) -> &BTreeMap<Bytes, Consumer> {
        &self.consumers
    }

    /// One consumer.
    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumers.get(name)
    }

    /// How many entries `consumer` owns (its PEL's size). O(1).
    pub fn pending_count(&self, consumer: &Consumer) -> u64 {
        self.pel.owned_count(consumer.owner)
    }

    /// The IDs `consumer` owns after `after`, ascending. O(log P) to start for P owned.
    pub fn pending_ids(&self, consumer: &Consumer, after: Bound<StreamId>) -> impl Iterator<Item = StreamId> + '_ {
        self.pel.owned_ids(consumer.owner, after)
    }

    fn consumer_or_create(&mut self, name: &Bytes, time_ms: i64) -> &mut Consumer {
        let pel = &mut self.pel;
        // The PEL's copy of the name shares the consumer's own (`name` may be a slice of a
        // request buffer, which the group must not keep alive).
        self.consumers.entry(name.clone()).or_insert_with_key(|name| Consumer {
            seen_time_ms: time_ms,
            active_time_ms: -1,
            owner: pel.add_owner(name.clone()),
        })
    }

    /// Give `id` to `consumer` with this time and count, and set the consumer's active-time to
    /// `active_ms` (creating it with seen-time `time_ms` if needed). One consumer lookup.
    fn own(&mut self, id: StreamId, consumer: &Bytes, time_ms: i64, count: u64, active_ms: i64) {
        let owner = match self.consumers.get_mut(consumer) {
            Some(c) => {
                c.active_time_ms = active_ms;
                c.owner
            }
            None => {
                let c = self.consumer_or_create(&crate::types::owned(consumer), time_ms);
                c.active_time_ms = active_ms;
                c.owner
            }
        };
        self.pel.set_owned(id, owner, time_ms, count);
    }

    /// With a policy: `consumer` was active at `t` (idle expiry's clock).
    fn active(&mut self, consumer: &[u8], t: i64) {
        if let Some(p) = self.policy.as_deref_mut() {
            p.active(consumer, t);
        }
    }

    /// Check the PEL indexes and that consumers and PEL slots match one to one.
    pub fn validate(&self) -> bool {
        let mut slots = BTreeSet::new();
        let released = || self.pel.claim_order().filter(|(_, p)| p.owner.is_none()).map(|(id, _)| id).collect();
        self.policy.as_ref().is_none_or(|p| p.validate(&released()))
            && self.policy.as_ref().is_none_or(|p| p.order.pending_ids().all(|id| self.pel.contains(id)))
            && self.pel.validate()
            && self
                .consumers
                .iter()
                .all(|(name, c)| slots.insert(c.owner) && self.pel.owner_name(c.owner) == Some(name))
            && self.pel.live_owners() == self.consumers.len()
    }
}

/// One change to consumer-group state, with everything needed to redo it (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEffect {
    /// XGROUP CREATE.
    GroupCreated { group: Bytes, last_id: StreamId, entries_read: Option<u64> },
    /// XGROUP DESTROY: the group, its consumers and its PEL go.
    GroupDestroyed { group: Bytes },
    /// XGROUP SETID (PEL untouched).
    SetId { group: Bytes, last_id: StreamId, entries_read: Option<u64> },
    /// XCLAIM LASTID above the current last-delivered-id; entries-read is unchanged, and
    /// `entries_read` says what it was (a Redis replica is sent `XGROUP SETID ... ENTRIESREAD`,
    /// which sets both). `None` in records written before it was recorded.
    LastIdRaised { group: Bytes, last_id: StreamId, entries_read: Option<u64> },
    /// Explicit or implicit consumer creation (seen-time = `time_ms`, active-time −1).
    ConsumerCreated { group: Bytes, consumer: Bytes, time_ms: i64 },
    /// A consumer tried to read or claim: seen-time := `time_ms`.
    ConsumerSeen { group: Bytes, consumer: Bytes, time_ms: i64 },
    /// XGROUP DELCONSUMER: the consumer goes and its pending entries are forgotten.
    ConsumerDeleted { group: Bytes, consumer: Bytes },
    /// XREADGROUP `>` delivered a new entry: last-delivered-id := `id`, entries-read :=
    /// `entries_read`; unless `noack`, `id` is pending for `consumer` (count 1, time
    /// `time_ms`, replacing any earlier record) and the consumer's active-time := `time_ms`.
    Delivered { group: Bytes, consumer: Bytes, id: StreamId, time_ms: i64, entries_read: Option<u64>, noack: bool },
    /// A history read re-delivered `id` to its owner `consumer`: time and count set, owner
    /// unchanged (a Redis replica is sent an XCLAIM to that owner). `consumer` is empty in
    /// records written before it was recorded; replay does not need it.
    Redelivered { group: Bytes, consumer: Bytes, id: StreamId, time_ms: i64, count: u64 },
    /// XCLAIM / XAUTOCLAIM / XREADGROUP CLAIM: `id` is owned by `consumer` with this time and
    /// count (the record is created if missing: XCLAIM FORCE); active-time := `active_ms`.
    Claimed { group: Bytes, consumer: Bytes, id: StreamId, time_ms: i64, count: u64, active_ms: i64 },
    /// XNACK: `id` released to the end of the XNACK zone with this count (created if missing:
    /// XNACK FORCE).
    Nacked { group: Bytes, id: StreamId, count: u64 },
    /// `id` is no longer pending: XACK, XACKDEL, DELREF, or a claim finding its payload gone.
    Acked { group: Bytes, id: StreamId },
    /// RILL.GROUP SET / UNSET at `time_ms`: the group's policy settings are now `settings`
    /// (the group gets a policy if it had none; its released entries join the hand-back queue;
    /// the setting counts as the group's activity). `time_ms` is 0 in records written before
    /// it was recorded, and in snapshots (their `PolicyRestored` has the times).
    PolicySet { group: Bytes, settings: Settings, time_ms: i64 },
    /// A snapshot's policy state (counters, delays, first deliveries), after its `PolicySet`.
    PolicyRestored { group: Bytes, state: PolicyState },
    /// A policy released `id` (no owner, count `count`), deliverable again at `ready_at_ms`
    /// (0: at once); `why` counts it.
    HandedBack { group: Bytes, id: StreamId, count: u64, ready_at_ms: i64, why: Release },
    /// A policy moved `id` to the dead-letter stream (the XADD is the effect before this one):
    /// it leaves the PEL.
    DeadLettered { group: Bytes, id: StreamId },
    /// RILL.TOUCH: the deadline of `id`, owned by `consumer`, restarts at `time_ms`; its count
    /// (`count`, unchanged) is spelled out for a Redis replica's XCLAIM.
    Touched { group: Bytes, consumer: Bytes, id: StreamId, time_ms: i64, count: u64 },
    /// ORDERBY: a `>` read passed the new entry `id`, whose `key` had an entry in flight:
    /// last-delivered-id := `id` (entries-read unchanged: it counts `id` when it is delivered),
    /// and `id` waits behind its key's entries.
    Deferred { group: Bytes, id: StreamId, key: Bytes },
    /// ORDERBY: the deferred entry `id` was found deleted when its turn came: it stops waiting.
    DeferredDropped { group: Bytes, id: StreamId },
    /// CONSUMERIDLE removed `consumer` (its entries were handed back by the effects before):
    /// as `ConsumerDeleted`, counted.
    ConsumerExpired { group: Bytes, consumer: Bytes },
}

impl GroupEffect {
    /// The group the effect changes.
    pub fn group(&self) -> &Bytes {
        match self {
            GroupEffect::GroupCreated { group, .. }
            | GroupEffect::GroupDestroyed { group }
            | GroupEffect::SetId { group, .. }
            | GroupEffect::LastIdRaised { group, .. }
            | GroupEffect::ConsumerCreated { group, .. }
            | GroupEffect::ConsumerSeen { group, .. }
            | GroupEffect::ConsumerDeleted { group, .. }
            | GroupEffect::Delivered { group, .. }
            | GroupEffect::Redelivered { group, .. }
            | GroupEffect::Claimed { group, .. }
            | GroupEffect::Nacked { group, .. }
            | GroupEffect::Acked { group, .. }
            | GroupEffect::PolicySet { group, .. }
            | GroupEffect::PolicyRestored { group, .. }
            | GroupEffect::HandedBack { group, .. }
            | GroupEffect::DeadLettered { group, .. }
            | GroupEffect::Touched { group, .. }
            | GroupEffect::Deferred { group, .. }
            | GroupEffect::DeferredDropped { group, .. }
            | GroupEffect::ConsumerExpired { group, .. } => group,
        }
    }
}

/// A consumer group as a snapshot describes it, for [`Stream::restore_group`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupSnapshot {
    /// The group's last-delivered-id.
    pub last_delivered_id: StreamId,
    /// The group's entries-read; `None` when unknown.
    pub entries_read: Option<u64>,
    /// Every PEL record: ID, last delivery time (ms), delivery count.
    pub pending: Vec<(StreamId, i64, u64)>,
    /// Consumers with the IDs each owns.
    pub consumers: Vec<ConsumerSnapshot>,
    /// Released (XNACKed) IDs in XNACK-zone order, head first.
    pub nacked: Vec<StreamId>,
}

/// One consumer of a [`GroupSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerSnapshot {
    /// Consumer name.
    pub name: Bytes,
    /// Seen-time, ms.
    pub seen_time_ms: i64,
    /// Active-time, ms (−1: never active).
    pub active_time_ms: i64,
    /// IDs it owns; each must be in the group's `pending`.
    pub pending: Vec<StreamId>,
}

/// A group PEL record while a snapshot loads: its ID, delivery time, delivery count, owner.
type PelRecord = (StreamId, (i64, u64, Option<OwnerId>));

impl Stream {
    /// Add a consumer group from a snapshot (RESTORE). Owned records keep their time and
    /// count; records listed in `nacked` form the XNACK zone in that order; a record nobody
    /// owns and not listed there (older formats had no zone) joins the zone after them, by ID.
    /// Errors, adding nothing, on what no live group can hold: a duplicate group, consumer or
    /// PEL ID, an owned ID missing from the PEL or owned twice, a released ID that is owned.
    /// O(P log P) for P pending entries.
    pub fn restore_group(&mut self, name: Bytes, snap: GroupSnapshot) -> Result<(), &'static str> {
        if self.groups.contains_key(&name) {
            return Err("duplicate consumer group");
        }
        // The records by ID, in a sorted vector (a file lists them in ID order: no sort then).
        let mut records: Vec<PelRecord> =
            snap.pending.into_iter().map(|(id, time, count)| (id, (time, count, None))).collect();
        let ascending = |r: &[PelRecord]| r.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0));
        if !ascending(&records) {
            records.sort_unstable_by_key(|r| r.0);
            if !ascending(&records) {
                return Err("duplicate group PEL entry");
            }
        }
        let find = |records: &[PelRecord], id: &StreamId| records.binary_search_by_key(id, |r| r.0).ok();
        let mut group = ConsumerGroup::new(snap.last_delivered_id, snap.entries_read);
        for c in snap.consumers {
            if group.consumers.contains_key(&c.name) {
                return Err("duplicate consumer");
            }
            let consumer = group.consumer_or_create(&c.name, c.seen_time_ms);
            consumer.active_time_ms = c.active_time_ms;
            let slot = consumer.owner;
            // A consumer's IDs come in ID order too: each is looked for first right after the
            // one before it (O(1) when one consumer owns a run of records), then anywhere.
            let mut next = 0usize;
            for id in c.pending {
                let at = match records.get(next) {
                    Some(r) if r.0 == id => Some(next),
                    _ => find(&records, &id),
                };
                next = at.map_or(next, |i| i + 1);
                match at.and_then(|i| records.get_mut(i)).map(|r| &mut r.1) {
                    Some((_, _, owner @ None)) => *owner = Some(slot),
                    Some(_) => return Err("consumer PEL entry owned twice"),
                    None => return Err("consumer PEL entry missing from the group PEL"),
                }
            }
        }
        let mut released: BTreeSet<StreamId> = BTreeSet::new();
        for id in &snap.nacked {
            match find(&records, id).and_then(|i| records.get(i)).map(|r| &r.1) {
                Some((_, _, None)) if released.insert(*id) => {}
                Some((_, _, None)) => return Err("duplicate XNACK zone entry"),
                Some(_) => return Err("XNACK zone entry has an owner"),
                None => return Err("XNACK zone entry missing from the group PEL"),
            }
        }
        for id in snap.nacked {
            if let Some((_, (_, count, _))) = find(&records, &id).and_then(|i| records.get(i)) {
                group.pel.set_nacked(id, *count);
            }
        }
        for (id, (time, count, owner)) in records {
            match owner {
                Some(owner) => {
                    group.pel.set_owned(id, owner, time, count);
                }
                None if !released.contains(&id) => {
                    group.pel.set_nacked(id, count);
                }
                None => {}
            }
        }
        self.groups.insert(name, group);
        Ok(())
    }
}

#[cfg(test)]
thread_local! {
    /// Every effect commands applied on this thread (tests check replay against it).
    pub(crate) static EFFECT_LOG: std::cell::RefCell<Vec<GroupEffect>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The value of `field` (its first occurrence) in the live entry `id`, if any.
pub(super) fn field_of(blocks: &BTreeMap<StreamId, Arc<Block>>, id: StreamId, field: &[u8]) -> Option<Bytes> {
    let (&first, block) = blocks.range(..=id).next_back()?;
    let p = block.find(first, id).filter(|p| !p.deleted)?;
    let master = block.master(first)?;
    let names: Vec<Bytes> = master.fields.iter().map(|f| Bytes::copy_from_slice(f)).collect();
    let fields = block.decode_at(first, &master, &names, p.offset)?;
    fields.into_iter().find(|(f, _)| f.as_ref() == field).map(|(_, v)| v)
}

/// ORDERBY's state after the field changed to `field` (`None`: off): the PEL's entries keyed
/// by their new values, and every deferred entry deferred again behind its new key, in ID order
/// (loose when it lacks the field or is gone, so nothing the cursor passed is lost).
fn rekey(blocks: &BTreeMap<StreamId, Arc<Block>>, pel: &Pel, old: &KeyOrder, field: Option<&Bytes>) -> KeyOrder {
    let mut order = KeyOrder::default();
    if let Some(f) = field {
        for (id, _) in pel.claim_order() {
            if let Some(key) = field_of(blocks, id, f) {
                order.pending(id, Some(key));
            }
        }
    }
    for (id, _) in old.waiting() {
        order.defer(id, field.and_then(|f| field_of(blocks, id, f)));
    }
    order
}

/// Saturating +1 on a delivery count.
pub fn bump(count: u64) -> u64 {
    count.saturating_add(1).min(DELIVERY_COUNT_MAX)
}

impl Stream {
    /// Whether any consumer group exists. O(1).
    pub fn has_groups(&self) -> bool {
        !self.groups.is_empty()
    }

    /// Groups by name.
    pub fn groups(&self) -> &BTreeMap<Bytes, ConsumerGroup> {
        &self.groups
    }

    /// One group.
    pub fn group(&self, name: &[u8]) -> Option<&ConsumerGroup> {
        self.groups.get(name)
    }

    /// Whether some group still references `id` (spec §6.3): it is above a group's
    /// last-delivered-id (not read yet) or in a group's PEL. O(G log n) for G groups.
    pub fn is_referenced(&self, id: StreamId) -> bool {
        self.groups.values().any(|g| g.last_delivered_id < id || g.pel.contains(id))
    }

    /// Drop every group's reference to `id` (DELREF), returning the effects. O(G log n).
    pub fn drop_references(&mut self, id: StreamId) -> Vec<GroupEffect> {
        let names: Vec<Bytes> =
            self.groups.iter().filter(|(_, g)| g.pel.contains(id)).map(|(n, _)| n.clone()).collect();
        names.into_iter().map(|group| self.apply_group(GroupEffect::Acked { group, id })).collect()
    }

    /// Apply `effect` and hand it back (to be collected by the command).
    pub fn apply_group(&mut self, effect: GroupEffect) -> GroupEffect {
        self.apply_group_effect(&effect);
        #[cfg(test)]
        EFFECT_LOG.with(|log| log.borrow_mut().push(effect.clone()));
        effect
    }

    /// XACK: the [`GroupEffect::Acked`] effect for each of `ids` pending in `group`, the others
    /// skipped. Returns how many were pending. One group lookup in all, one PEL removal per ID
    /// (the same changes as applying each `Acked` record, without a lookup per record).
    pub fn ack(&mut self, group: &Bytes, ids: &[StreamId], now_ms: i64) -> u64 {
        let Some(g) = self.groups.get_mut(group) else { return 0 };
        let mut acked = 0;
        for &id in ids {
            g.ack_activity(id, now_ms);
            if g.pel.remove(id) {
                acked += 1;
                if let Some(p) = g.policy.as_deref_mut() {
                    p.forget(id);
                    p.counters.acked += 1;
                }
                #[cfg(test)]
                EFFECT_LOG.with(|log| log.borrow_mut().push(GroupEffect::Acked { group: group.clone(), id }));
            }
        }
        acked
    }

    /// An acknowledgement of pending `id` of `group` (XACK, XACKDEL) is its owner's activity
    /// (idle expiry, policies spec §8).
    pub fn ack_activity(&mut self, group: &[u8], id: StreamId, now_ms: i64) {
        if let Some(g) = self.groups.get_mut(group) {
            g.ack_activity(id, now_ms);
        }
    }

    /// A copy of the stream without its groups (tests replay effects onto it).
    #[cfg(test)]
    pub(crate) fn without_groups(&self) -> Stream {
        Stream { groups: BTreeMap::new(), ..self.clone() }
    }

    /// Apply one effect record. Reads no clock and decides nothing: the record carries every
    /// value. A record naming a missing group does nothing (it cannot come from a command that
    /// checked the group exists). O(log n) for PEL changes; O(P log n) for ConsumerDeleted with
    /// P entries pending for that consumer.
    pub fn apply_group_effect(&mut self, effect: &GroupEffect) {
        match effect {
            GroupEffect::GroupCreated { group, last_id, entries_read } => {
                self.groups.entry(group.clone()).or_insert_with(|| ConsumerGroup::new(*last_id, *entries_read));
            }
            GroupEffect::GroupDestroyed { group } => {
                self.groups.remove(group);
            }
            GroupEffect::SetId { group, last_id, entries_read } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.last_delivered_id = *last_id;
                    g.entries_read = *entries_read;
                }
            }
            GroupEffect::LastIdRaised { group, last_id, .. } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.last_delivered_id = g.last_delivered_id.max(*last_id);
                }
            }
            GroupEffect::ConsumerCreated { group, consumer, time_ms } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.consumer_or_create(consumer, *time_ms);
                    g.active(consumer, *time_ms);
                }
            }
            GroupEffect::ConsumerSeen { group, consumer, time_ms } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.consumer_or_create(consumer, *time_ms).seen_time_ms = *time_ms;
                    g.active(consumer, *time_ms);
                }
            }
            GroupEffect::ConsumerDeleted { group, consumer } | GroupEffect::ConsumerExpired { group, consumer } => {
                let expired = matches!(effect, GroupEffect::ConsumerExpired { .. });
                if let Some(g) = self.groups.get_mut(group) {
                    if let Some(c) = g.consumers.remove(consumer) {
                        if let Some(p) = g.policy.as_deref_mut() {
                            for id in g.pel.owned_ids(c.owner, std::ops::Bound::Unbounded) {
                                p.forget(id);
                            }
                            p.consumer_gone(consumer);
                            if expired {
                                p.counters.consumers_expired += 1;
                            }
                        }
                        g.pel.remove_owner(c.owner);
                    }
                }
            }
            GroupEffect::Delivered { group, consumer, id, time_ms, entries_read, noack } => {
                let Stream { groups, blocks, .. } = self;
                if let Some(g) = groups.get_mut(group) {
                    // A deferred entry (ORDERBY) is delivered after the cursor passed it.
                    g.last_delivered_id = g.last_delivered_id.max(*id);
                    g.entries_read = *entries_read;
                    if !*noack {
                        g.own(*id, consumer, *time_ms, 1, *time_ms);
                    }
                    if let Some(p) = g.policy.as_deref_mut() {
                        p.active(consumer, *time_ms);
                        p.counters.delivered += 1;
                        p.forget(*id);
                        if *noack {
                            p.order.drop_waiting(*id);
                        } else {
                            p.delivered(*id, *time_ms);
                            let key = p.settings.order_by.as_ref().and_then(|f| field_of(blocks, *id, f));
                            p.order.pending(*id, key);
                        }
                    }
                }
            }
            GroupEffect::Redelivered { group, consumer, id, time_ms, count } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.pel.touch(*id, *time_ms, *count);
                    if let Some(p) = g.policy.as_deref_mut() {
                        if !consumer.is_empty() {
                            p.active(consumer, *time_ms);
                        }
                        p.counters.redelivered += 1;
                    }
                }
            }
            GroupEffect::Claimed { group, consumer, id, time_ms, count, active_ms } => {
                let Stream { groups, blocks, .. } = self;
                if let Some(g) = groups.get_mut(group) {
                    g.own(*id, consumer, *time_ms, *count, *active_ms);
                    if let Some(p) = g.policy.as_deref_mut() {
                        p.active(consumer, *active_ms);
                        p.counters.redelivered += 1;
                        p.delivered(*id, *time_ms);
                        if p.order.pending_key(*id).is_none() {
                            let key = p.settings.order_by.as_ref().and_then(|f| field_of(blocks, *id, f));
                            p.order.pending(*id, key);
                        }
                    }
                }
            }
            GroupEffect::Nacked { group, id, count } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.pel.set_nacked(*id, *count);
                    if let Some(p) = g.policy.as_deref_mut() {
                        p.counters.nacked += 1;
                        p.released(*id, 0);
                    }
                }
            }
            GroupEffect::Acked { group, id } => {
                if let Some(g) = self.groups.get_mut(group) {
                    if g.pel.remove(*id) {
                        if let Some(p) = g.policy.as_deref_mut() {
                            p.forget(*id);
                            p.counters.acked += 1;
                        }
                    }
                }
            }
            GroupEffect::PolicySet { group, settings, time_ms } => {
                let Stream { groups, blocks, .. } = self;
                if let Some(g) = groups.get_mut(group) {
                    let before = g.policy.as_ref().and_then(|p| p.settings.order_by.clone());
                    match g.policy.as_deref_mut() {
                        Some(p) => p.settings = settings.clone(),
                        None => {
                            let released = g.pel.claim_order().filter(|(_, e)| e.owner.is_none()).map(|(id, _)| id);
                            let mut p = Policy::new(settings.clone(), released);
                            // The consumers' activity so far, as Redis' state has it.
                            for (name, c) in &g.consumers {
                                p.active(name, c.seen_time_ms.max(c.active_time_ms));
                            }
                            g.policy = Some(Box::new(p));
                        }
                    }
                    if let Some(p) = g.policy.as_deref_mut() {
                        p.group_active_ms = p.group_active_ms.max(*time_ms);
                        p.idle_recheck.0 = 0;
                    }
                    if before != settings.order_by {
                        if let Some(p) = g.policy.as_deref_mut() {
                            p.order = rekey(blocks, &g.pel, &p.order, settings.order_by.as_ref());
                        }
                    }
                }
            }
            GroupEffect::PolicyRestored { group, state } => {
                if let Some(p) = self.groups.get_mut(group).and_then(|g| g.policy.as_deref_mut()) {
                    p.restore(state);
                }
            }
            GroupEffect::HandedBack { group, id, count, ready_at_ms, why } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.pel.set_nacked(*id, *count);
                    if let Some(p) = g.policy.as_deref_mut() {
                        match why {
                            Release::Deadline => p.counters.handed_back += 1,
                            Release::Nack => p.counters.nacked += 1,
                            Release::DeadLetterFailed => p.counters.dead_letter_failures += 1,
                            Release::Closed => p.counters.released_on_close += 1,
                        }
                        p.released(*id, *ready_at_ms);
                    }
                }
            }
            GroupEffect::DeadLettered { group, id } => {
                if let Some(g) = self.groups.get_mut(group) {
                    if g.pel.remove(*id) {
                        if let Some(p) = g.policy.as_deref_mut() {
                            p.forget(*id);
                            p.counters.dead_lettered += 1;
                        }
                    }
                }
            }
            GroupEffect::Touched { group, consumer, id, time_ms, count } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.pel.touch(*id, *time_ms, *count);
                    g.active(consumer, *time_ms);
                }
            }
            GroupEffect::Deferred { group, id, key } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.last_delivered_id = g.last_delivered_id.max(*id);
                    if let Some(p) = g.policy.as_deref_mut() {
                        p.order.defer(*id, Some(key.clone()));
                    }
                }
            }
            GroupEffect::DeferredDropped { group, id } => {
                if let Some(p) = self.groups.get_mut(group).and_then(|g| g.policy.as_deref_mut()) {
                    p.order.drop_waiting(*id);
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // entries-read and lag (spec §5)
    // -----------------------------------------------------------------------------------------

    /// Whether a deleted entry may lie at or after `from`: the stream is non-empty, something
    /// was deleted, and `from ≤ max-deleted-entry-id`.
    fn tombstone_from(&self, from: StreamId) -> bool {
        self.length > 0 && self.max_deleted_entry_id != StreamId::MIN && from <= self.max_deleted_entry_id
    }

    /// The logical read counter of `id` (its position by `entries-added` numbering), when it
    /// can be known.
    pub fn estimate_entries_read(&self, id: StreamId) -> Option<u64> {
        let added = self.entries_added;
        if added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_generated_id {
            return Some(added);
        }
        if id != StreamId::MIN && id < self.max_deleted_entry_id {
            return None;
        }
        if id == self.last_generated_id {
            return Some(added);
        }
        if id > self.last_generated_id {
            return None;
        }
        let maxdel = self.max_deleted_entry_id;
        if maxdel == StreamId::MIN || maxdel < self.first_id {
            if id < self.first_id {
                return Some(added - self.length);
            }
            if id == self.first_id {
                return Some(added - self.length + 1);
            }
        }
        None
    }

    /// The entries-read value after `group` is handed the new entry `id` by a `>` read.
    pub fn entries_read_after(&self, group: &ConsumerGroup, id: StreamId) -> Option<u64> {
        let ld = group.last_delivered_id;
        match group.entries_read {
            Some(er) if ld >= self.first_id && !self.tombstone_from(ld) => Some(er.saturating_add(1)),
            current if self.entries_added == 0 => current,
            _ => self.estimate_entries_read(id),
        }
    }

    /// Entries not yet delivered to `group`, when it can be known (XINFO `lag`). Negative when
    /// the group's entries-read is ahead of the stream's entries-added, as XGROUP SETID ...
    /// ENTRIESREAD can leave it: Redis reports the difference as it is.
    pub fn lag(&self, group: &ConsumerGroup) -> Option<i64> {
        let added = self.entries_added;
        if added == 0 || self.length == 0 {
            return Some(0);
        }
        let ld = group.last_delivered_id;
        if ld < self.first_id && self.max_deleted_entry_id < self.first_id {
            return Some(i64::try_from(self.length).unwrap_or(i64::MAX));
        }
        let diff = |read: u64| {
            let (added, read) = (i128::from(added), i128::from(read));
            i64::try_from(added - read).unwrap_or(if added > read { i64::MAX } else { i64::MIN })
        };
        if let Some(er) = group.entries_read {
            if !self.tombstone_from(ld) {
                return Some(diff(er));
            }
        }
        self.estimate_entries_read(ld).map(diff)
    }

    /// Check every group's invariants (tests; later the snapshot loader).
    pub fn validate_groups(&self) -> bool {
        self.groups.values().all(ConsumerGroup::validate)
    }
}
