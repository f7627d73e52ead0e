//! A model test of group policies (docs/spec/policies.md §3–§6, docs/POLICIES.md): random
//! sequences of XADD, XDEL, XCLAIM, `>` reads by three consumers, XACK, XNACK (SILENT, FAIL, FATAL,
//! RETRYCOUNT), RILL.NACK with and without DELAY, RILL.TOUCH, clock steps followed by the policy
//! timer, RILL.GROUP SET / UNSET (ORDERBY on and off included), and a DEADLETTER key that stops
//! holding a stream, run against the engine and against a plain model of one group (a BTreeMap
//! PEL whose entries remember the ORDERBY key they hold, the deferred entries as a map, the
//! counters, the dead letters as lists). Each entry has a field `k` (one of three keys) for
//! ORDERBY.
//!
//! After every step the engine must read as the model says: XPENDING's extended form, RILL.GROUP
//! INFO (settings and counters), both dead-letter streams with their provenance fields, and the
//! reply of every read (the hand-back queue — released entries whose delay is over — by ID,
//! then new entries). At the end of a case every effect the engine emitted (the commands' and
//! the timer's) is replayed onto a fresh engine, which must read the same (XINFO STREAM FULL,
//! XPENDING, RILL.GROUP INFO, the dead letters) and, run forward by its own timer, act the same:
//! what a restart or a promoted replica relies on.
//!
//! The model is written from the spec, not from the engine's code. Where the spec leaves a
//! value open, the model follows docs/POLICIES.md: counters count from the moment the group got
//! its policy; a released entry's last delivery time is 0 (Redis' XNACK zone keeps none), so a
//! dead letter made of a released entry says `rill-consumer` "" and `rill-last-delivery-ms` 0;
//! `rill-deliveries` is the entry's count before the attempt ended; an entry whose payload is
//! gone (XDEL) leaves the PEL as by XACK where it would be dead-lettered or served. ORDERBY
//! records an entry's key when it starts tracking the entry (a delivery or claim while ORDERBY
//! is on, or ORDERBY being set over a PEL) if its payload exists then: a pending entry deleted
//! before that holds no key; one deleted after keeps holding its key until it leaves the PEL.
//! A deferred entry whose payload is gone when its turn comes is dropped, counted nowhere.
//!
//! One place where the model follows the engine and not the spec: §3 says a dead-letter move
//! that failed is retried on the next attempt end, but a failed `XNACK FATAL` move leaves only
//! the count (the maximum) behind, so the next attempt end dead-letters it only by MAXDELIVER
//! (reason `maxdeliver`) and, with MAXDELIVER off, hands it back for ever.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::cmd_tests::show;
use super::pel::DELIVERY_COUNT_MAX;
use crate::command::{CommandTable, Flags, Handler, Lookup};
use crate::effect::Effect;
use crate::types::families;
use crate::{CallCtx, Engine, EngineConfig, Value};
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// The source stream, its group, and the two dead-letter streams the settings can name.
const KEY: &str = "s";
const GROUP: &str = "g";
const DEFAULT_DLQ: &str = "{s}:dlq";
const OTHER_DLQ: &str = "dlq";
const START_MS: i64 = 1_700_000_000_000;

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

/// A stream ID as `(ms, seq)`.
type Id = (u64, u64);

/// The value of an entry's `k` field.
fn key_name(key: u8) -> &'static str {
    ["a", "b", "c"][usize::from(key)]
}

fn id_text((ms, seq): Id) -> String {
    format!("{ms}-{seq}")
}

/// The ID `XADD key *` makes at `now_ms` after `last` (Redis' rule: the clock, or one more
/// sequence number when the clock has not passed the last ID).
fn auto_id(last: Option<Id>, now_ms: i64) -> Id {
    let now = u64::try_from(now_ms).unwrap();
    match last {
        Some((ms, seq)) if ms >= now => (ms, seq + 1),
        _ => (now, 0),
    }
}

/// A group's policy settings (`RILL.GROUP SET`); 0 / empty / `None` = off or the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Settings {
    max_deliver: u64,
    ack_wait_ms: u64,
    backoff_ms: Vec<u64>,
    dead_letter: Option<&'static str>,
    /// ORDERBY k.
    order_by: bool,
    /// CONSUMERIDLE.
    consumer_idle_ms: u64,
    /// RELEASEONCLOSE.
    release_on_close: bool,
}

impl Settings {
    /// The delay after an entry's `attempts`-th failed attempt (§5): `d[min(n, k)]`, 1-based,
    /// the last value repeating; none without BACKOFF.
    fn backoff(&self, attempts: u64) -> u64 {
        let k = self.backoff_ms.len() as u64;
        if k == 0 {
            return 0;
        }
        let n = attempts.clamp(1, k);
        self.backoff_ms[(n - 1) as usize]
    }

    fn dead_letter_key(&self) -> &'static str {
        self.dead_letter.unwrap_or(DEFAULT_DLQ)
    }
}

/// One pending entry.
#[derive(Debug, Clone)]
struct Pending {
    /// Its consumer; `None` while released (handed back, nacked, or waiting out a delay).
    owner: Option<String>,
    /// Deliveries counted, as Redis counts them.
    count: u64,
    /// Last delivery (or touch) time; 0 while released.
    time_ms: i64,
    /// Order among entries delivered in the same millisecond (a global sequence).
    order: u64,
    /// First delivery made while the group had a policy.
    first_ms: Option<i64>,
    /// While released: deliverable from this time on (0: at once).
    ready_at_ms: i64,
    /// The ORDERBY key it holds in flight (see the module doc).
    key: Option<u8>,
}

/// One entry of a dead-letter stream.
#[derive(Debug, Clone)]
struct DeadLetter {
    id: Id,
    /// The source entry's `n` field (its index in the source stream).
    n: usize,
    /// The source entry's `k` field.
    key: u8,
    source: Id,
    consumer: String,
    deliveries: u64,
    reason: &'static str,
    first_ms: i64,
    last_ms: i64,
}

/// `RILL.GROUP INFO`'s counters.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    delivered: u64,
    redelivered: u64,
    acked: u64,
    handed_back: u64,
    nacked: u64,
    dead_lettered: u64,
    dead_letter_failures: u64,
    consumers_expired: u64,
    released_on_close: u64,
}

/// Why a failed attempt ended (which counter it goes to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    Deadline,
    Nack,
    /// The last connection that read as its owner closed (RELEASEONCLOSE).
    Closed,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Hand the entry back after `delay` (else the BACKOFF schedule), or dead-letter it at
    /// MAXDELIVER.
    Failed(Why, Option<u64>),
    /// XNACK FATAL: dead-letter it at once.
    Fatal,
    /// A claim found it at its MAXDELIVER: dead-letter it (reason `maxdeliver`).
    AtLimit,
}

#[derive(Debug)]
struct Model {
    now_ms: i64,
    /// `None` until the group gets a policy (a group without one is Redis' exactly).
    policy: Option<Settings>,
    counters: Counters,
    /// The source stream's IDs; entry `i` has the fields `n` = `i`, `k` = `keys[i]`.
    entries: Vec<Id>,
    keys: Vec<u8>,
    /// Entries ORDERBY deferred (the cursor passed them), with the key they wait behind
    /// (`None`: deliverable at once, ORDERBY was unset or they were gone when it was set).
    deferred: BTreeMap<Id, Option<u8>>,
    /// Entries deleted by XDEL (their payload is gone; they may still be pending).
    deleted: BTreeSet<Id>,
    /// Entries `..delivered` were handed out by `>` reads.
    delivered: usize,
    pel: BTreeMap<Id, Pending>,
    next_order: u64,
    /// The dead-letter streams' entries, by key.
    dead_letters: BTreeMap<&'static str, Vec<DeadLetter>>,
    /// [`OTHER_DLQ`] holds a string: dead-letter moves to it fail.
    other_dlq_is_string: bool,
    /// The group's consumers with their seen-time (a read or claim attempt; Redis' state).
    seen: BTreeMap<String, i64>,
    /// With a policy: each consumer's last activity (a read or claim attempt, an XACK of an
    /// entry it owned, a RILL.TOUCH that touched something); from the seen-times when the policy
    /// came.
    activity: BTreeMap<String, i64>,
    /// RELEASEONCLOSE: consumers whose connection (consumer `cN` reads on connection N + 10)
    /// read as them while the option was on, and has not closed.
    readers: BTreeSet<String>,
    /// Consumers whose last reading connection closed, for the timer to hand back.
    closing: BTreeSet<String>,
}

impl Model {
    fn new() -> Model {
        Model {
            now_ms: START_MS,
            policy: None,
            counters: Counters::default(),
            entries: Vec::new(),
            keys: Vec::new(),
            deferred: BTreeMap::new(),
            deleted: BTreeSet::new(),
            delivered: 0,
            pel: BTreeMap::new(),
            next_order: 0,
            dead_letters: BTreeMap::new(),
            other_dlq_is_string: false,
            seen: BTreeMap::new(),
            activity: BTreeMap::new(),
            readers: BTreeSet::new(),
            closing: BTreeSet::new(),
        }
    }

    /// `consumer` is active now (with a policy).
    fn active(&mut self, consumer: &str) {
        if self.policy.is_some() {
            let t = self.activity.entry(consumer.to_string()).or_insert(self.now_ms);
            *t = (*t).max(self.now_ms);
        }
    }

    /// `consumer` tried to read or claim.
    fn seen_now(&mut self, consumer: &str) {
        self.seen.insert(consumer.to_string(), self.now_ms);
        self.active(consumer);
    }

    fn order(&mut self) -> u64 {
        self.next_order += 1;
        self.next_order
    }

    fn add(&mut self, key: u8) -> Id {
        let id = auto_id(self.entries.last().copied(), self.now_ms);
        self.entries.push(id);
        self.keys.push(key);
        id
    }

    fn key_of(&self, id: Id) -> u8 {
        self.keys[self.entries.binary_search(&id).unwrap()]
    }

    fn ordering(&self) -> bool {
        self.policy.as_ref().is_some_and(|s| s.order_by)
    }

    /// The key ORDERBY records for `id` if it starts tracking it now.
    fn tracked_key(&self, id: Id) -> Option<u8> {
        (self.ordering() && !self.deleted.contains(&id)).then(|| self.key_of(id))
    }

    /// Pending `id` was delivered again: it holds its key from now on if it held none.
    fn keyed(&mut self, id: Id) {
        let key = self.tracked_key(id);
        let p = self.pel.get_mut(&id).unwrap();
        if p.key.is_none() {
            p.key = key;
        }
    }

    /// Whether `key` has an entry in flight (pending, owned or not).
    fn in_flight(&self, key: u8) -> bool {
        self.pel.values().any(|p| p.key == Some(key))
    }

    /// Deliver the new entry `id` to `consumer` (a `>` read).
    fn deliver_new(&mut self, id: Id, consumer: &str) {
        let now = self.now_ms;
        let order = self.order();
        let policy = self.policy.is_some();
        let key = self.tracked_key(id);
        let first_ms = policy.then_some(now);
        let p =
            Pending { owner: Some(consumer.to_string()), count: 1, time_ms: now, order, first_ms, ready_at_ms: 0, key };
        self.pel.insert(id, p);
        if policy {
            self.counters.delivered += 1;
        }
    }

    /// ORDERBY changed: every pending and deferred entry holds (or waits behind) its key if
    /// ORDERBY is on and its payload exists, else none.
    fn rekey(&mut self) {
        let ids: Vec<Id> = self.pel.keys().copied().collect();
        for id in ids {
            let key = self.tracked_key(id);
            self.pel.get_mut(&id).unwrap().key = key;
        }
        let ids: Vec<Id> = self.deferred.keys().copied().collect();
        for id in ids {
            let key = self.tracked_key(id);
            self.deferred.insert(id, key);
        }
    }

    /// `XREADGROUP GROUP g consumer COUNT count STREAMS s >`: the entries served, in order.
    /// The hand-back queue comes first; an entry of it whose payload is gone leaves the PEL
    /// (as XAUTOCLAIM drops it) and takes no place in the reply.
    fn read(&mut self, consumer: &str, count: usize) -> Vec<Id> {
        self.seen_now(consumer);
        let now = self.now_ms;
        let policy = self.policy.is_some();
        let mut served = Vec::new();
        if policy {
            let ready: Vec<Id> =
                self.pel.iter().filter(|(_, p)| p.owner.is_none() && p.ready_at_ms <= now).map(|(id, _)| *id).collect();
            for id in ready {
                if served.len() >= count {
                    break;
                }
                if self.deleted.contains(&id) {
                    self.pel.remove(&id);
                    self.counters.acked += 1;
                    continue;
                }
                let order = self.order();
                let p = self.pel.get_mut(&id).unwrap();
                p.owner = Some(consumer.to_string());
                p.count = p.count.saturating_add(1).min(DELIVERY_COUNT_MAX);
                p.time_ms = now;
                p.order = order;
                p.first_ms.get_or_insert(now);
                self.counters.redelivered += 1;
                self.keyed(id);
                served.push(id);
            }
        }
        // Deferred entries next (§6), in ID order: each one whose key has nothing in flight
        // and no earlier deferred entry.
        let waiting: Vec<Id> = self.deferred.keys().copied().collect();
        for id in waiting {
            if served.len() >= count {
                break;
            }
            if let Some(k) = self.deferred[&id] {
                if self.in_flight(k) || self.deferred.range(..id).any(|(_, w)| *w == Some(k)) {
                    continue;
                }
            }
            self.deferred.remove(&id);
            if self.deleted.contains(&id) {
                continue;
            }
            self.deliver_new(id, consumer);
            served.push(id);
        }
        while served.len() < count && self.delivered < self.entries.len() {
            let id = self.entries[self.delivered];
            self.delivered += 1;
            if self.deleted.contains(&id) {
                continue;
            }
            if self.ordering() {
                let k = self.key_of(id);
                if self.in_flight(k) || self.deferred.values().any(|w| *w == Some(k)) {
                    self.deferred.insert(id, Some(k));
                    continue;
                }
            }
            self.deliver_new(id, consumer);
            served.push(id);
        }
        served
    }

    /// `XCLAIM s g consumer min_idle id ...`: the entries claimed. Claims are explicit
    /// overrides (§4): released and delayed entries are taken too, and this rill does not
    /// apply MAXDELIVER to them yet (docs/POLICIES.md).
    fn claim(&mut self, consumer: &str, min_idle_ms: i64, ids: &[Id]) -> Vec<Id> {
        self.seen_now(consumer);
        let now = self.now_ms;
        let policy = self.policy.is_some();
        let mut claimed = Vec::new();
        let mut at_limit = Vec::new();
        for &id in ids {
            let Some(p) = self.pel.get(&id) else { continue };
            if self.deleted.contains(&id) {
                self.pel.remove(&id);
                if policy {
                    self.counters.acked += 1;
                }
                continue;
            }
            if p.owner.is_some() && min_idle_ms > 0 && now - p.time_ms < min_idle_ms {
                continue;
            }
            // At its MAXDELIVER: dead-lettered after the claims instead of delivered (§3).
            let max = self.policy.as_ref().map_or(0, |s| s.max_deliver);
            if max > 0 && p.count >= max {
                at_limit.push(id);
                continue;
            }
            let order = self.order();
            let p = self.pel.get_mut(&id).unwrap();
            p.owner = Some(consumer.to_string());
            p.count = p.count.saturating_add(1).min(DELIVERY_COUNT_MAX);
            p.time_ms = now;
            p.order = order;
            if policy {
                p.first_ms.get_or_insert(now);
                self.counters.redelivered += 1;
                self.keyed(id);
            }
            claimed.push(id);
        }
        for id in at_limit {
            if let Some(count) = self.pel.get(&id).map(|p| p.count) {
                self.end_attempt(id, Ending::AtLimit, count);
            }
        }
        claimed
    }

    fn delete(&mut self, id: Id) -> u64 {
        u64::from(self.entries.binary_search(&id).is_ok() && self.deleted.insert(id))
    }

    fn ack(&mut self, ids: &[Id]) -> u64 {
        let mut acked = 0;
        for id in ids {
            if let Some(owner) = self.pel.get(id).and_then(|p| p.owner.clone()) {
                self.active(&owner);
            }
            if self.pel.remove(id).is_some() {
                acked += 1;
                if self.policy.is_some() {
                    self.counters.acked += 1;
                }
            }
        }
        acked
    }

    /// `id` loses its owner with this count, deliverable from `ready_at_ms` on.
    fn release(&mut self, id: Id, count: u64, ready_at_ms: i64) {
        let p = self.pel.get_mut(&id).unwrap();
        p.owner = None;
        p.count = count;
        p.time_ms = 0;
        p.ready_at_ms = ready_at_ms;
    }

    /// End the attempt on pending `id` (§3, §5); `count` is its count from now on.
    fn end_attempt(&mut self, id: Id, ending: Ending, count: u64) {
        let settings = self.policy.clone().unwrap();
        let reason = match ending {
            Ending::Fatal => Some("fatal"),
            Ending::AtLimit => Some("maxdeliver"),
            Ending::Failed(..) if settings.max_deliver > 0 && count >= settings.max_deliver => Some("maxdeliver"),
            Ending::Failed(..) => None,
        };
        if let Some(reason) = reason {
            if !self.dead_letter(id, reason) {
                // Nothing lost: it stays pending, unowned, deliverable, and is counted.
                self.release(id, count, 0);
                self.counters.dead_letter_failures += 1;
            }
            return;
        }
        let Ending::Failed(why, delay) = ending else { unreachable!() };
        let delay = delay.unwrap_or_else(|| settings.backoff(count));
        let ready_at_ms = if delay == 0 { 0 } else { self.now_ms + i64::try_from(delay).unwrap() };
        self.release(id, count, ready_at_ms);
        match why {
            Why::Deadline => self.counters.handed_back += 1,
            Why::Nack => self.counters.nacked += 1,
            Why::Closed => self.counters.released_on_close += 1,
        }
    }

    /// Move `id` to the dead-letter stream; false (nothing changed) if its key holds a string.
    /// An entry whose payload is gone has nothing to move (or lose): it leaves the PEL as by
    /// XACK, wherever the dead letters would go.
    fn dead_letter(&mut self, id: Id, reason: &'static str) -> bool {
        if self.deleted.contains(&id) {
            self.pel.remove(&id);
            self.counters.acked += 1;
            return true;
        }
        let key = self.policy.as_ref().unwrap().dead_letter_key();
        if key == OTHER_DLQ && self.other_dlq_is_string {
            return false;
        }
        let p = self.pel.remove(&id).unwrap();
        let n = self.entries.binary_search(&id).unwrap();
        let list = self.dead_letters.entry(key).or_default();
        list.push(DeadLetter {
            id: auto_id(list.last().map(|d| d.id), self.now_ms),
            n,
            key: self.keys[n],
            source: id,
            consumer: p.owner.unwrap_or_default(),
            deliveries: p.count,
            reason,
            first_ms: p.first_ms.unwrap_or(p.time_ms),
            last_ms: p.time_ms,
        });
        self.counters.dead_lettered += 1;
        true
    }

    fn xnack(&mut self, mode: NackMode, retry_count: Option<u64>, ids: &[Id]) -> u64 {
        let mut acted = 0;
        for &id in ids {
            let Some(current) = self.pel.get(&id).map(|p| p.count) else { continue };
            acted += 1;
            let count = match (retry_count, mode) {
                (Some(n), _) => n,
                (None, NackMode::Silent) => current.saturating_sub(1),
                (None, NackMode::Fail) => current,
                (None, NackMode::Fatal) => DELIVERY_COUNT_MAX,
            };
            if self.policy.is_none() {
                self.release(id, count, 0);
                continue;
            }
            let ending = match (mode, retry_count) {
                (NackMode::Fatal, None) => Ending::Fatal,
                _ => Ending::Failed(Why::Nack, None),
            };
            self.end_attempt(id, ending, count);
        }
        acted
    }

    fn rill_nack(&mut self, delay: Option<u64>, ids: &[Id]) -> Result<u64, String> {
        if self.policy.is_none() && delay.is_some_and(|d| d > 0) {
            return Err("-ERR DELAY needs a group with a policy (RILL.GROUP SET)".into());
        }
        let mut acted = 0;
        for &id in ids {
            let Some(count) = self.pel.get(&id).map(|p| p.count) else { continue };
            acted += 1;
            match self.policy {
                None => self.release(id, count, 0),
                Some(_) => self.end_attempt(id, Ending::Failed(Why::Nack, delay), count),
            }
        }
        Ok(acted)
    }

    fn touch(&mut self, consumer: &str, ids: &[Id]) -> u64 {
        let mut touched = 0;
        for id in ids {
            if self.pel.get(id).is_some_and(|p| p.owner.as_deref() == Some(consumer)) {
                let order = self.order();
                let p = self.pel.get_mut(id).unwrap();
                p.time_ms = self.now_ms;
                p.order = order;
                touched += 1;
                self.active(consumer);
            }
        }
        touched
    }

    /// The policy timer at `now_ms` (§4): every owned entry whose ack deadline has come ends its
    /// attempt, oldest delivery first.
    fn timer(&mut self) {
        self.deadlines();
        self.release_closed();
        self.idle_expiry();
    }

    /// A `>` read as `consumer` ran: with RELEASEONCLOSE its connection reads as it from now
    /// on (and it is alive again if it was closing).
    fn noted_reader(&mut self, consumer: &str) {
        if self.policy.as_ref().is_some_and(|s| s.release_on_close) {
            self.readers.insert(consumer.to_string());
            self.closing.remove(consumer);
        }
    }

    /// The connection consumer `consumer` reads on closed. Returns whether the timer now has
    /// its entries to hand back: it was the consumer's reader, the option is on and it owns
    /// something.
    fn close(&mut self, consumer: &str) -> bool {
        if !self.readers.remove(consumer) {
            return false;
        }
        let on = self.policy.as_ref().is_some_and(|s| s.release_on_close);
        let owns = self.pel.values().any(|p| p.owner.as_deref() == Some(consumer));
        if on && owns {
            self.closing.insert(consumer.to_string());
        }
        on && owns
    }

    /// RELEASEONCLOSE (§4): each consumer marked closing, by name, with no reader again and
    /// the option still on, has its entries (by ID) handed back as failed attempts.
    fn release_closed(&mut self) {
        let on = self.policy.as_ref().is_some_and(|s| s.release_on_close);
        for consumer in std::mem::take(&mut self.closing) {
            if !on || self.readers.contains(&consumer) {
                continue;
            }
            let owned: Vec<Id> =
                self.pel.iter().filter(|(_, p)| p.owner.as_deref() == Some(&consumer)).map(|(id, _)| *id).collect();
            for id in owned {
                let count = self.pel[&id].count;
                self.end_attempt(id, Ending::Failed(Why::Closed, None), count);
            }
        }
    }

    /// CONSUMERIDLE (§8): each consumer inactive that long, least recently active first, has
    /// its entries (by ID) handed back as failed attempts, and is removed.
    fn idle_expiry(&mut self) {
        let idle = self.policy.as_ref().map_or(0, |s| i64::try_from(s.consumer_idle_ms).unwrap());
        if idle == 0 {
            return;
        }
        let mut due: Vec<(i64, String)> =
            self.activity.iter().filter(|(_, t)| **t + idle <= self.now_ms).map(|(c, t)| (*t, c.clone())).collect();
        due.sort();
        for (_, consumer) in due {
            let owned: Vec<Id> =
                self.pel.iter().filter(|(_, p)| p.owner.as_deref() == Some(&consumer)).map(|(id, _)| *id).collect();
            for id in owned {
                let count = self.pel[&id].count;
                self.end_attempt(id, Ending::Failed(Why::Deadline, None), count);
            }
            self.activity.remove(&consumer);
            self.seen.remove(&consumer);
            self.counters.consumers_expired += 1;
        }
    }

    /// ACKWAIT (§4): every owned entry whose deadline has come, oldest delivery first.
    fn deadlines(&mut self) {
        let Some(wait) = self.policy.as_ref().map(|s| s.ack_wait_ms).filter(|w| *w > 0) else { return };
        let wait = i64::try_from(wait).unwrap();
        let mut due: Vec<(i64, u64, Id)> = self
            .pel
            .iter()
            .filter(|(_, p)| p.owner.is_some() && p.time_ms + wait <= self.now_ms)
            .map(|(id, p)| (p.time_ms, p.order, *id))
            .collect();
        due.sort();
        for (_, _, id) in due {
            let count = self.pel[&id].count;
            self.end_attempt(id, Ending::Failed(Why::Deadline, None), count);
        }
    }

    /// When the policy next has something to do: the earliest ack deadline or delay end.
    fn next_due(&self) -> Option<i64> {
        let wait = self.policy.as_ref().map_or(0, |s| i64::try_from(s.ack_wait_ms).unwrap());
        let idle = self.policy.as_ref().map_or(0, |s| i64::try_from(s.consumer_idle_ms).unwrap());
        let expiry = self.activity.values().min().filter(|_| idle > 0).map(|t| t + idle);
        self.pel
            .values()
            .filter_map(|p| match &p.owner {
                Some(_) if wait > 0 => Some(p.time_ms + wait),
                Some(_) => None,
                None => Some(p.ready_at_ms).filter(|at| *at > self.now_ms),
            })
            .chain(expiry)
            .chain((!self.closing.is_empty()).then_some(self.now_ms))
            .min()
    }

    /// `RILL.GROUP SET`: every pair checked before anything changes.
    fn set(&mut self, options: &[SetOption]) -> Result<(), String> {
        let mut settings = self.policy.clone().unwrap_or_default();
        for option in options {
            match option {
                SetOption::MaxDeliver(n) => settings.max_deliver = *n,
                SetOption::AckWait(ms) => settings.ack_wait_ms = *ms,
                SetOption::Backoff(ms) => settings.backoff_ms = ms.clone(),
                SetOption::DeadLetter(KEY) => return Err("-ERR DEADLETTER may not name the stream itself".into()),
                SetOption::DeadLetter(key) if *key == OTHER_DLQ && self.other_dlq_is_string => {
                    return Err("-ERR DEADLETTER names a key that holds a value other than a stream".into());
                }
                SetOption::DeadLetter(key) => settings.dead_letter = Some(key),
                SetOption::OrderBy(on) => settings.order_by = *on,
                SetOption::ConsumerIdle(ms) => settings.consumer_idle_ms = *ms,
                SetOption::ReleaseOnClose(on) => settings.release_on_close = *on,
                SetOption::BadMaxDeliver => {
                    return Err("-ERR MAXDELIVER must be 0 (off) or a positive integer".into());
                }
            }
        }
        let reorder = settings.order_by != self.ordering();
        if self.policy.is_none() {
            // The consumers' activity so far is their seen-time.
            self.activity = self.seen.clone();
        }
        self.policy = Some(settings);
        if reorder {
            self.rekey();
        }
        Ok(())
    }

    /// `RILL.GROUP UNSET`: options back to their defaults (a group without a policy keeps none).
    fn unset(&mut self, names: &[OptionName]) {
        let ordering = self.ordering();
        let Some(settings) = self.policy.as_mut() else { return };
        for name in names {
            match name {
                OptionName::MaxDeliver => settings.max_deliver = 0,
                OptionName::AckWait => settings.ack_wait_ms = 0,
                OptionName::Backoff => settings.backoff_ms.clear(),
                OptionName::DeadLetter => settings.dead_letter = None,
                OptionName::OrderBy => settings.order_by = false,
                OptionName::ConsumerIdle => settings.consumer_idle_ms = 0,
                OptionName::ReleaseOnClose => settings.release_on_close = false,
            }
        }
        if ordering != self.ordering() {
            self.rekey();
        }
    }

    // -----------------------------------------------------------------------------------------
    // What the engine's replies must be (as `cmd_tests::show` renders them)
    // -----------------------------------------------------------------------------------------

    fn read_reply(&self, served: &[Id]) -> String {
        if served.is_empty() {
            return "nil*".into();
        }
        format!("[[{KEY} {}]]", self.entries_reply(served))
    }

    fn entries_reply(&self, ids: &[Id]) -> String {
        let entries: Vec<String> = ids
            .iter()
            .map(|id| {
                let n = self.entries.binary_search(id).unwrap();
                format!("[{} [n {n} k {}]]", id_text(*id), key_name(self.keys[n]))
            })
            .collect();
        format!("[{}]", entries.join(" "))
    }

    /// `XPENDING s g - + 1000`.
    fn pending_reply(&self) -> String {
        let rows: Vec<String> = self
            .pel
            .iter()
            .map(|(id, p)| {
                let idle = match p.owner {
                    Some(_) => (self.now_ms - p.time_ms).max(0),
                    None => -1,
                };
                format!("[{} {} :{idle} :{}]", id_text(*id), p.owner.as_deref().unwrap_or(""), p.count)
            })
            .collect();
        format!("[{}]", rows.join(" "))
    }

    /// `RILL.GROUP INFO s g`.
    fn info_reply(&self) -> String {
        let settings = self.policy.clone().unwrap_or_default();
        let c = self.counters;
        let released = self.pel.values().filter(|p| p.owner.is_none()).count();
        let delayed = self.pel.values().filter(|p| p.owner.is_none() && p.ready_at_ms > self.now_ms).count();
        let oldest = self
            .pel
            .values()
            .filter(|p| p.owner.is_some())
            .map(|p| p.time_ms)
            .min()
            .map_or(0, |t| (self.now_ms - t).max(0));
        let backoff: Vec<String> = settings.backoff_ms.iter().map(|d| format!(":{d}")).collect();
        let fields: Vec<(&str, String)> = vec![
            ("maxdeliver", format!(":{}", settings.max_deliver)),
            ("deadletter", settings.dead_letter_key().to_string()),
            ("ackwait", format!(":{}", settings.ack_wait_ms)),
            ("backoff", format!("[{}]", backoff.join(" "))),
            ("orderby", if settings.order_by { "k".into() } else { String::new() }),
            ("maxackpending", ":0".into()),
            ("maxackpendingconsumer", ":0".into()),
            ("consumeridle", format!(":{}", settings.consumer_idle_ms)),
            ("groupidle", ":0".into()),
            ("releaseonclose", format!(":{}", u8::from(settings.release_on_close))),
            ("pending", format!(":{}", self.pel.len())),
            ("handed-back-queue", format!(":{}", released - delayed)),
            ("delivered", format!(":{}", c.delivered)),
            ("redelivered", format!(":{}", c.redelivered)),
            ("acked", format!(":{}", c.acked)),
            ("handed-back", format!(":{}", c.handed_back)),
            ("nacked", format!(":{}", c.nacked)),
            ("dead-lettered", format!(":{}", c.dead_lettered)),
            ("dead-letter-failures", format!(":{}", c.dead_letter_failures)),
            ("delayed", format!(":{delayed}")),
            ("deferred", format!(":{}", self.deferred.len())),
            ("oldest-pending-ms", format!(":{oldest}")),
            // The model sets no pending cap (MAXACKPENDING is covered by the server's tests).
            ("reads-held-back", ":0".into()),
            ("consumers-expired", format!(":{}", c.consumers_expired)),
            ("released-on-close", format!(":{}", c.released_on_close)),
        ];
        let fields: Vec<String> = fields.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{{{}}}", fields.join(" "))
    }

    /// `XRANGE key - +` of a dead-letter stream.
    fn dead_letters_reply(&self, key: &'static str) -> String {
        if key == OTHER_DLQ && self.other_dlq_is_string {
            return "-WRONGTYPE Operation against a key holding the wrong kind of value".into();
        }
        let entries: Vec<String> = self
            .dead_letters
            .get(key)
            .map(|list| {
                list.iter()
                    .map(|d| {
                        format!(
                            "[{} [n {} k {} rill-source-stream {KEY} rill-source-id {} rill-group {GROUP} \
                             rill-consumer {} rill-deliveries {} rill-reason {} rill-first-delivery-ms {} \
                             rill-last-delivery-ms {}]]",
                            id_text(d.id),
                            d.n,
                            key_name(d.key),
                            id_text(d.source),
                            d.consumer,
                            d.deliveries,
                            d.reason,
                            d.first_ms,
                            d.last_ms
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        format!("[{}]", entries.join(" "))
    }
}

// ---------------------------------------------------------------------------------------------
// The engine, run the way the server runs it
// ---------------------------------------------------------------------------------------------

/// An engine with its clock, and every record it would have logged.
struct Live {
    engine: Engine,
    table: CommandTable,
    now_ms: i64,
    /// `(time, effects)` per command or timer run that changed something.
    log: Vec<(i64, Vec<Effect>)>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").field("now_ms", &self.now_ms).field("records", &self.log.len()).finish()
    }
}

impl Live {
    fn new() -> Live {
        Live {
            engine: Engine::new(EngineConfig::default()),
            table: CommandTable::new(&families()),
            now_ms: START_MS,
            log: Vec::new(),
        }
    }

    /// Run a command as the server does and keep the record it would log; the reply as
    /// `show` renders it (see [`run_recorded`]).
    fn run(&mut self, args: &[String]) -> String {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.clone())).collect();
        run_recorded(&mut self.engine, &self.table, self.now_ms, &mut self.log, args)
    }

    /// [`Live::run`] as connection `client`.
    fn run_as(&mut self, client: u64, args: &[String]) -> String {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.clone())).collect();
        run_recorded_as(&mut self.engine, &self.table, self.now_ms, &mut self.log, client, args)
    }

    fn run_words(&mut self, words: &[&str]) -> String {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        self.run(&args)
    }

    /// The policy timer's run at the current time (its effects are one record).
    fn timer(&mut self) -> Vec<Effect> {
        let effects = self.engine.run_policy_timers(self.now_ms, true, &|_, _, _, _| false).decode().unwrap();
        if !effects.is_empty() {
            self.log.push((self.now_ms, effects.clone()));
        }
        effects
    }

    /// What the model is compared with: XPENDING, RILL.GROUP INFO, both dead-letter streams.
    fn view(&mut self) -> [String; 4] {
        [
            self.run_words(&["XPENDING", KEY, GROUP, "-", "+", "1000"]),
            self.run_words(&["RILL.GROUP", "INFO", KEY, GROUP]),
            self.run_words(&["XRANGE", DEFAULT_DLQ, "-", "+"]),
            self.run_words(&["XRANGE", OTHER_DLQ, "-", "+"]),
        ]
    }

    fn groups_valid(&self) -> bool {
        match self.engine.db(0).get_raw(KEY.as_bytes()).map(|e| &e.value) {
            Some(Value::Stream(s)) => s.validate_groups(),
            _ => false,
        }
    }
}

/// Run `args` on `engine` at `now_ms` as the server does, and push the record it would log
/// (its explicit effects, else the command itself if it changed something) onto `log`; the
/// reply as `show` renders it (an unknown command or a wrong arity: their errors).
pub(super) fn run_recorded(
    engine: &mut Engine,
    table: &CommandTable,
    now_ms: i64,
    log: &mut Vec<(i64, Vec<Effect>)>,
    args: Vec<Bytes>,
) -> String {
    run_recorded_as(engine, table, now_ms, log, 1, args)
}

/// [`run_recorded`] as connection `client`.
pub(super) fn run_recorded_as(
    engine: &mut Engine,
    table: &CommandTable,
    now_ms: i64,
    log: &mut Vec<(i64, Vec<Effect>)>,
    client: u64,
    args: Vec<Bytes>,
) -> String {
    let Lookup::Found(spec) = table.resolve(&args) else { return "-ERR unknown".into() };
    if !spec.arity_ok(args.len()) {
        return show(&crate::CmdError::arity(spec.name).to_reply());
    }
    let Handler::Engine(handler) = spec.handler else { panic!("not an engine command: {args:?}") };
    let mut ctx = CallCtx::new(0, now_ms, client);
    ctx.recording = true;
    ctx.no_block = true;
    let outcome = engine.call(handler, &mut ctx, &args);
    let mut effects: Vec<Effect> = engine.take_expired().into_iter().map(|(db, key)| Effect::del(db, key)).collect();
    if ctx.explicit {
        effects.extend(ctx.effects.decode().unwrap());
    } else if outcome.changes > 0 && spec.flags.has(Flags::WRITE) {
        effects.push(Effect::Command { db: 0, args });
    }
    if !effects.is_empty() {
        log.push((now_ms, effects));
    }
    show(&outcome.reply.unwrap_or_else(|e| e.to_reply()))
}

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NackMode {
    Silent,
    Fail,
    Fatal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SetOption {
    MaxDeliver(u64),
    AckWait(u64),
    Backoff(Vec<u64>),
    DeadLetter(&'static str),
    /// `ORDERBY k` (on) or `ORDERBY ""` (off).
    OrderBy(bool),
    ConsumerIdle(u64),
    ReleaseOnClose(bool),
    /// `MAXDELIVER -1`: refused, so the whole SET changes nothing.
    BadMaxDeliver,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OptionName {
    MaxDeliver,
    AckWait,
    Backoff,
    DeadLetter,
    OrderBy,
    ConsumerIdle,
    ReleaseOnClose,
}

/// An ID to name in a command: a pending one (most of the time) or any entry of the stream,
/// chosen when the step runs.
#[derive(Debug, Clone, Copy)]
struct Pick {
    pending: bool,
    index: usize,
}

#[derive(Debug, Clone)]
enum Op {
    /// XADD with this key (`k` field).
    Add(u8),
    /// XDEL of one entry (pending or not).
    Delete(Pick),
    Read {
        consumer: u8,
        count: usize,
    },
    Ack(Vec<Pick>),
    Nack {
        mode: NackMode,
        retry_count: Option<u64>,
        ids: Vec<Pick>,
    },
    RillNack {
        delay: Option<u64>,
        ids: Vec<Pick>,
    },
    Touch {
        consumer: u8,
        ids: Vec<Pick>,
    },
    Claim {
        consumer: u8,
        min_idle_ms: i64,
        ids: Vec<Pick>,
    },
    /// Advance the clock by this much, then (if `timer`) run the policy timer.
    Step {
        ms: i64,
        timer: bool,
    },
    /// Advance the clock to the model's next due time plus `offset` (−1, 0, 1): the edges.
    StepToDue {
        offset: i64,
        timer: bool,
    },
    Set(Vec<SetOption>),
    Unset(Vec<OptionName>),
    /// [`OTHER_DLQ`] becomes a string (`SET`), or is deleted if it is one.
    ToggleOtherDlq,
    /// The connection consumer `cN` reads on closes.
    Close(u8),
}

fn picks() -> impl Strategy<Value = Vec<Pick>> {
    let pick = (proptest::bool::weighted(0.85), any::<usize>()).prop_map(|(pending, index)| Pick { pending, index });
    proptest::collection::vec(pick, 1..4)
}

fn ack_wait() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(20), Just(50), Just(100)]
}

fn backoff() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(prop_oneof![Just(0u64), Just(5), Just(15), Just(40)], 1..4)
}

fn consumer_idle() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(1000), Just(1300)]
}

fn dead_letter_key() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(DEFAULT_DLQ), Just(OTHER_DLQ)]
}

/// A RILL.GROUP SET: each option or not, sometimes a bad one among them.
fn set_options() -> impl Strategy<Value = Vec<SetOption>> {
    (
        proptest::option::of(0u64..5),
        proptest::option::of(ack_wait()),
        proptest::option::of(backoff()),
        proptest::option::weighted(0.3, prop_oneof![6 => dead_letter_key(), 1 => Just(KEY)]),
        proptest::option::weighted(0.1, 0usize..4),
        proptest::option::weighted(0.2, any::<bool>()),
        proptest::option::weighted(0.15, consumer_idle()),
        proptest::option::weighted(0.2, any::<bool>()),
    )
        .prop_map(|(max, wait, backoff, dlq, bad, order, idle, close)| {
            let mut options: Vec<SetOption> = [
                max.map(SetOption::MaxDeliver),
                wait.map(SetOption::AckWait),
                backoff.map(SetOption::Backoff),
                dlq.map(SetOption::DeadLetter),
                order.map(SetOption::OrderBy),
                idle.map(SetOption::ConsumerIdle),
                close.map(SetOption::ReleaseOnClose),
            ]
            .into_iter()
            .flatten()
            .collect();
            if options.is_empty() {
                options.push(SetOption::MaxDeliver(max.unwrap_or(2)));
            }
            if let Some(at) = bad {
                options.insert(at.min(options.len()), SetOption::BadMaxDeliver);
            }
            options
        })
}

/// The policy a case starts with: mostly every mechanism on.
fn initial_settings() -> impl Strategy<Value = Vec<SetOption>> {
    (
        prop_oneof![1 => Just(0u64), 6 => 1u64..5],
        prop_oneof![1 => Just(0u64), 4 => Just(20), 4 => Just(50), 2 => Just(100)],
        proptest::option::weighted(0.6, backoff()),
        proptest::option::weighted(0.3, dead_letter_key()),
        proptest::bool::weighted(0.5),
        proptest::option::weighted(0.3, consumer_idle()),
        proptest::bool::weighted(0.4),
    )
        .prop_map(|(max, wait, backoff, dlq, order, idle, close)| {
            let mut options = vec![SetOption::MaxDeliver(max), SetOption::AckWait(wait)];
            options.extend(backoff.map(SetOption::Backoff));
            options.extend(dlq.map(SetOption::DeadLetter));
            if order {
                options.push(SetOption::OrderBy(true));
            }
            options.extend(idle.map(SetOption::ConsumerIdle));
            if close {
                options.push(SetOption::ReleaseOnClose(true));
            }
            options
        })
}

fn option_name() -> impl Strategy<Value = OptionName> {
    prop_oneof![
        Just(OptionName::MaxDeliver),
        Just(OptionName::AckWait),
        Just(OptionName::Backoff),
        Just(OptionName::DeadLetter),
        Just(OptionName::OrderBy),
        Just(OptionName::ConsumerIdle),
        Just(OptionName::ReleaseOnClose)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let mode = prop_oneof![1 => Just(NackMode::Silent), 3 => Just(NackMode::Fail), 2 => Just(NackMode::Fatal)];
    let delay = proptest::option::of(prop_oneof![1 => Just(0u64), 3 => 1u64..60]);
    let timer = proptest::bool::weighted(0.9);
    prop_oneof![
        4 => (0u8..3).prop_map(Op::Add),
        1 => (proptest::bool::weighted(0.7), any::<usize>()).prop_map(|(pending, index)| Op::Delete(Pick { pending, index })),
        6 => (0u8..3, 1usize..4).prop_map(|(consumer, count)| Op::Read { consumer, count }),
        2 => picks().prop_map(Op::Ack),
        2 => (mode, proptest::option::weighted(0.15, 0u64..4), picks())
            .prop_map(|(mode, retry_count, ids)| Op::Nack { mode, retry_count, ids }),
        2 => (delay, picks()).prop_map(|(delay, ids)| Op::RillNack { delay, ids }),
        2 => (0u8..3, picks()).prop_map(|(consumer, ids)| Op::Touch { consumer, ids }),
        1 => (0u8..3, prop_oneof![Just(0i64), Just(30)], picks())
            .prop_map(|(consumer, min_idle_ms, ids)| Op::Claim { consumer, min_idle_ms, ids }),
        4 => (prop_oneof![3 => 0i64..30, 1 => 30i64..250], timer).prop_map(|(ms, timer)| Op::Step { ms, timer }),
        3 => (-1i64..=1, timer).prop_map(|(offset, timer)| Op::StepToDue { offset, timer }),
        1 => set_options().prop_map(Op::Set),
        1 => proptest::collection::vec(option_name(), 1..3).prop_map(Op::Unset),
        1 => Just(Op::ToggleOtherDlq),
        1 => (0u8..3).prop_map(Op::Close),
    ]
}

// ---------------------------------------------------------------------------------------------
// Running a case
// ---------------------------------------------------------------------------------------------

fn consumer_name(c: u8) -> String {
    format!("c{c}")
}

/// The connection consumer `c`'s reads run on (RELEASEONCLOSE tracks connections).
fn reader_client(c: u8) -> u64 {
    u64::from(c) + 10
}

/// The IDs `picks` name in the model's current state (an absent ID when there is none).
fn pick_ids(model: &Model, picks: &[Pick]) -> Vec<Id> {
    let pending: Vec<Id> = model.pel.keys().copied().collect();
    picks
        .iter()
        .map(|p| {
            let from = if p.pending && !pending.is_empty() { &pending } else { &model.entries };
            from.get(p.index % from.len().max(1)).copied().unwrap_or((0, 1))
        })
        .collect()
}

fn id_args(ids: &[Id]) -> Vec<String> {
    let mut out = vec!["IDS".to_string(), ids.len().to_string()];
    out.extend(ids.iter().map(|id| id_text(*id)));
    out
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn set_args(options: &[SetOption]) -> Vec<String> {
    let mut args = words(&["RILL.GROUP", "SET", KEY, GROUP]);
    for option in options {
        let (name, value) = match option {
            SetOption::MaxDeliver(n) => ("MAXDELIVER", n.to_string()),
            SetOption::AckWait(ms) => ("ACKWAIT", ms.to_string()),
            SetOption::Backoff(ms) => ("BACKOFF", ms.iter().map(|d| d.to_string()).collect::<Vec<String>>().join(",")),
            SetOption::DeadLetter(key) => ("DEADLETTER", key.to_string()),
            SetOption::OrderBy(on) => ("ORDERBY", if *on { "k" } else { "" }.to_string()),
            SetOption::ConsumerIdle(ms) => ("CONSUMERIDLE", ms.to_string()),
            SetOption::ReleaseOnClose(on) => ("RELEASEONCLOSE", u8::from(*on).to_string()),
            SetOption::BadMaxDeliver => ("MAXDELIVER", "-1".to_string()),
        };
        args.push(name.into());
        args.push(value);
    }
    args
}

/// Run `op` on both sides; the engine's reply must be the model's.
fn step(live: &mut Live, model: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    let (got, want) = match op {
        Op::Add(key) => {
            let n = model.entries.len().to_string();
            let got = live.run_words(&["XADD", KEY, "*", "n", &n, "k", key_name(*key)]);
            (got, id_text(model.add(*key)))
        }
        Op::Delete(pick) => {
            let id = pick_ids(model, &[*pick])[0];
            (live.run_words(&["XDEL", KEY, &id_text(id)]), format!(":{}", model.delete(id)))
        }
        Op::Read { consumer, count } => {
            let c = consumer_name(*consumer);
            let args = words(&["XREADGROUP", "GROUP", GROUP, &c, "COUNT", &count.to_string(), "STREAMS", KEY, ">"]);
            let got = live.run_as(reader_client(*consumer), &args);
            let served = model.read(&c, *count);
            model.noted_reader(&c);
            (got, model.read_reply(&served))
        }
        Op::Ack(picks) => {
            let ids = pick_ids(model, picks);
            let mut args = words(&["XACK", KEY, GROUP]);
            args.extend(ids.iter().map(|id| id_text(*id)));
            (live.run(&args), format!(":{}", model.ack(&ids)))
        }
        Op::Nack { mode, retry_count, ids } => {
            let ids = pick_ids(model, ids);
            let name = match mode {
                NackMode::Silent => "SILENT",
                NackMode::Fail => "FAIL",
                NackMode::Fatal => "FATAL",
            };
            let mut args = words(&["XNACK", KEY, GROUP, name]);
            args.extend(id_args(&ids));
            if let Some(n) = retry_count {
                args.extend(["RETRYCOUNT".to_string(), n.to_string()]);
            }
            (live.run(&args), format!(":{}", model.xnack(*mode, *retry_count, &ids)))
        }
        Op::RillNack { delay, ids } => {
            let ids = pick_ids(model, ids);
            let mut args = words(&["RILL.NACK", KEY, GROUP]);
            if let Some(d) = delay {
                args.extend(["DELAY".to_string(), d.to_string()]);
            }
            args.extend(id_args(&ids));
            let want = model.rill_nack(*delay, &ids).map_or_else(|e| e, |n| format!(":{n}"));
            (live.run(&args), want)
        }
        Op::Touch { consumer, ids } => {
            let ids = pick_ids(model, ids);
            let c = consumer_name(*consumer);
            let mut args = words(&["RILL.TOUCH", KEY, GROUP, &c]);
            args.extend(id_args(&ids));
            (live.run(&args), format!(":{}", model.touch(&c, &ids)))
        }
        Op::Claim { consumer, min_idle_ms, ids } => {
            let ids = pick_ids(model, ids);
            let c = consumer_name(*consumer);
            let mut args = words(&["XCLAIM", KEY, GROUP, &c, &min_idle_ms.to_string()]);
            args.extend(ids.iter().map(|id| id_text(*id)));
            let claimed = model.claim(&c, *min_idle_ms, &ids);
            (live.run(&args), model.entries_reply(&claimed))
        }
        Op::Step { ms, timer } => {
            advance(live, model, model.now_ms + ms, *timer);
            return Ok(());
        }
        Op::StepToDue { offset, timer } => {
            let to = model.next_due().map_or(model.now_ms + 1, |due| (due + offset).max(model.now_ms));
            advance(live, model, to, *timer);
            return Ok(());
        }
        Op::Set(options) => {
            let want = model.set(options).map_or_else(|e| e, |()| "+OK".into());
            (live.run(&set_args(options)), want)
        }
        Op::Unset(names) => {
            let mut args = words(&["RILL.GROUP", "UNSET", KEY, GROUP]);
            args.extend(names.iter().map(|n| {
                match n {
                    OptionName::MaxDeliver => "MAXDELIVER",
                    OptionName::AckWait => "ACKWAIT",
                    OptionName::Backoff => "BACKOFF",
                    OptionName::DeadLetter => "DEADLETTER",
                    OptionName::OrderBy => "ORDERBY",
                    OptionName::ConsumerIdle => "CONSUMERIDLE",
                    OptionName::ReleaseOnClose => "RELEASEONCLOSE",
                }
                .to_string()
            }));
            model.unset(names);
            (live.run(&args), "+OK".into())
        }
        Op::Close(consumer) => {
            let marked = live.engine.policy_client_closed(reader_client(*consumer));
            (marked.to_string(), model.close(&consumer_name(*consumer)).to_string())
        }
        Op::ToggleOtherDlq => {
            if model.other_dlq_is_string {
                model.other_dlq_is_string = false;
                (live.run_words(&["DEL", OTHER_DLQ]), ":1".into())
            } else {
                model.other_dlq_is_string = true;
                model.dead_letters.remove(OTHER_DLQ);
                (live.run_words(&["SET", OTHER_DLQ, "not-a-stream"]), "+OK".into())
            }
        }
    };
    prop_assert_eq!(got, want, "reply to {:?}", op);
    Ok(())
}

fn advance(live: &mut Live, model: &mut Model, to_ms: i64, timer: bool) {
    live.now_ms = to_ms;
    model.now_ms = to_ms;
    if timer {
        live.timer();
        model.timer();
    }
}

/// The engine reads as the model says.
fn check(live: &mut Live, model: &Model) -> Result<(), TestCaseError> {
    let [pending, info, dlq, other] = live.view();
    prop_assert_eq!(pending, model.pending_reply(), "XPENDING");
    prop_assert_eq!(info, model.info_reply(), "RILL.GROUP INFO");
    prop_assert_eq!(dlq, model.dead_letters_reply(DEFAULT_DLQ), "XRANGE {}", DEFAULT_DLQ);
    prop_assert_eq!(other, model.dead_letters_reply(OTHER_DLQ), "XRANGE {}", OTHER_DLQ);
    prop_assert!(live.groups_valid(), "the group's invariants");
    Ok(())
}

/// Everything a replay must reproduce.
fn full_view(live: &mut Live) -> Vec<String> {
    let mut out = vec![live.run_words(&["XINFO", "STREAM", KEY, "FULL"])];
    out.extend(live.view());
    out
}

/// Replay `live`'s log onto a fresh engine: it must read the same, and its timer, run later,
/// must do what `live`'s does (a restarted server or a promoted replica enforces the policy
/// from the replayed state).
fn check_replay(live: &mut Live, model: &mut Model) -> Result<(), TestCaseError> {
    // Which consumers' connections closed is this server's observation, not state: a restart
    // forgets it (spec §4, RELEASEONCLOSE). The live server's timer acts on it at once; let it,
    // so that what follows compares state only.
    if !model.closing.is_empty() {
        let now = live.now_ms;
        advance(live, model, now, true);
        check(live, model)?;
    }
    let mut copy = Live::new();
    copy.now_ms = live.now_ms;
    copy.engine.set_loading(true);
    for (time, effects) in &live.log {
        for e in effects {
            let applied = copy.engine.apply_effect(&copy.table, *time, e.clone());
            prop_assert!(applied.is_ok(), "replaying {:?}: {:?}", e, applied);
        }
    }
    copy.engine.set_loading(false);
    prop_assert_eq!(full_view(&mut copy), full_view(live), "the state replayed from the effects");

    let later = live.now_ms + 1000;
    for side in [&mut *live, &mut copy] {
        side.now_ms = later;
    }
    model.now_ms = later;
    model.timer();
    prop_assert_eq!(copy.timer(), live.timer(), "the timer's work after the replay");
    check(live, model)?;
    prop_assert_eq!(full_view(&mut copy), full_view(live), "the states after both timers ran");
    Ok(())
}

fn run_case(initial: Vec<SetOption>, policy_after: usize, mut ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut live = Live::new();
    let mut model = Model::new();
    prop_assert_eq!(live.run_words(&["XGROUP", "CREATE", KEY, GROUP, "$", "MKSTREAM"]), "+OK");
    // Some steps first on a group without a policy (Redis' behaviour), then the policy.
    ops.insert(policy_after.min(ops.len()), Op::Set(initial));
    for (i, op) in ops.iter().enumerate() {
        step(&mut live, &mut model, op)?;
        check(&mut live, &model).map_err(|e| TestCaseError::fail(format!("after step {i} {op:?}: {e}")))?;
    }
    check_replay(&mut live, &mut model)
}

/// GROUPIDLE: a group nobody reads, acks or claims from for that long is destroyed by the
/// timer, with a `rill-group-expired` event; a reader blocked on it spares it (looked at again a
/// second later); a read in time postpones it. Replay of the effects reaches the same state.
#[test]
fn groupidle_destroys_an_inactive_group_unless_a_reader_waits_on_it() {
    use crate::KeyEvent;
    let mut live = Live::new();
    assert_eq!(live.run_words(&["XGROUP", "CREATE", KEY, GROUP, "$", "MKSTREAM"]), "+OK");
    assert_eq!(live.run_words(&["RILL.GROUP", "SET", KEY, GROUP, "GROUPIDLE", "1000"]), "+OK");
    live.now_ms += 600;
    live.run_words(&["XREADGROUP", "GROUP", GROUP, "c0", "STREAMS", KEY, ">"]);
    live.now_ms += 600;
    live.timer();
    assert_eq!(live.engine.next_policy_due(), Some(START_MS + 1600), "the read moved the expiry");
    live.now_ms = START_MS + 1600;
    // A reader blocked on the group spares it.
    let waiting = |_: usize, _: &[u8], g: &[u8], c: Option<&[u8]>| g == GROUP.as_bytes() && c.is_none();
    let spared = live.engine.run_policy_timers(live.now_ms, true, &waiting).decode().unwrap();
    assert!(spared.is_empty(), "{spared:?}");
    assert_eq!(live.engine.next_policy_due(), Some(START_MS + 2600), "looked at again a second later");
    live.now_ms = START_MS + 2600;
    live.engine.clear_events();
    let effects = live.timer();
    assert!(
        matches!(
            effects.as_slice(),
            [Effect::Group { effect: crate::types::stream::group::GroupEffect::GroupDestroyed { .. }, .. }]
        ),
        "{effects:?}"
    );
    let events: Vec<KeyEvent> = live.engine.events().map(|e| e.event).collect();
    assert_eq!(events, [KeyEvent::RillGroupExpired]);
    assert_eq!(live.run_words(&["XINFO", "GROUPS", KEY]), "[]");
    assert_eq!(live.engine.next_policy_due(), None);
}

/// A handed-back entry whose payload is gone takes no place in a `>` read: the next one in the
/// queue is served, not a new entry (the model test found a read that took the first COUNT IDs
/// of the queue and filled the place of the gone one with a new entry).
#[test]
fn a_gone_entry_of_the_hand_back_queue_lets_no_new_entry_pass() {
    let mut live = Live::new();
    assert_eq!(live.run_words(&["XGROUP", "CREATE", KEY, GROUP, "$", "MKSTREAM"]), "+OK");
    for i in 1..=3 {
        live.run_words(&["XADD", KEY, &format!("{i}-0"), "n", &i.to_string()]);
    }
    assert_eq!(live.run_words(&["RILL.GROUP", "SET", KEY, GROUP, "MAXDELIVER", "5"]), "+OK");
    live.run_words(&["XREADGROUP", "GROUP", GROUP, "c0", "COUNT", "2", "STREAMS", KEY, ">"]);
    assert_eq!(live.run_words(&["XDEL", KEY, "1-0"]), ":1");
    assert_eq!(live.run_words(&["RILL.NACK", KEY, GROUP, "IDS", "2", "1-0", "2-0"]), ":2");
    let read = live.run_words(&["XREADGROUP", "GROUP", GROUP, "c1", "COUNT", "1", "STREAMS", KEY, ">"]);
    assert_eq!(read, "[[s [[2-0 [n 2]]]]]");
    assert_eq!(live.run_words(&["XPENDING", KEY, GROUP, "-", "+", "10"]), "[[2-0 c1 :0 :2]]");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn policies_match_the_model(
        initial in initial_settings(),
        policy_after in prop_oneof![3 => Just(0usize), 1 => 1usize..8],
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        run_case(initial, policy_after, ops)?;
    }
}

/// An XACKDEL is its owner's activity, as an XACK is: CONSUMERIDLE counts from it (it used to
/// expire a consumer that only acknowledged with XACKDEL), and a replay reaches the same state.
#[test]
fn xackdel_is_activity_for_consumeridle() {
    let mut live = Live::new();
    assert_eq!(live.run_words(&["XGROUP", "CREATE", KEY, GROUP, "$", "MKSTREAM"]), "+OK");
    assert_eq!(live.run_words(&["RILL.GROUP", "SET", KEY, GROUP, "CONSUMERIDLE", "1000"]), "+OK");
    for i in 1..=2 {
        live.run_words(&["XADD", KEY, &format!("{i}-0"), "n", &i.to_string()]);
    }
    live.run_words(&["XREADGROUP", "GROUP", GROUP, "c0", "COUNT", "2", "STREAMS", KEY, ">"]);
    live.now_ms += 900;
    assert_eq!(live.run_words(&["XACKDEL", KEY, GROUP, "IDS", "1", "1-0"]), "[:1]");
    live.now_ms += 600;
    live.timer();
    assert_eq!(live.run_words(&["XPENDING", KEY, GROUP, "-", "+", "10"]), "[[2-0 c0 :1500 :1]]", "c0 kept its entry");
    assert_eq!(live.engine.next_policy_due(), Some(START_MS + 1900), "idle from the XACKDEL on");
    live.now_ms = START_MS + 1900;
    live.timer();
    assert_eq!(live.run_words(&["XPENDING", KEY, GROUP, "-", "+", "10"]), "[[2-0  :-1 :1]]", "expired: handed back");
    let mut copy = Live::new();
    copy.engine.set_loading(true);
    for (time, effects) in &live.log {
        for e in effects {
            copy.engine.apply_effect(&copy.table, *time, e.clone()).unwrap();
        }
    }
    copy.engine.set_loading(false);
    copy.now_ms = live.now_ms;
    assert_eq!(full_view(&mut copy), full_view(&mut live));
}
