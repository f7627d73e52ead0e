//! Group policies (docs/spec/policies.md): what a group with a policy keeps beside Redis' state,
//! and the rules its effects follow.
//!
//! ```text
//! ConsumerGroup.policy: Option<Box<Policy>>       None: the group is Redis' exactly (§1.1)
//!   Policy
//!     settings: Settings      MAXDELIVER, DEADLETTER, ACKWAIT, BACKOFF (RILL.GROUP SET)
//!     counters: Counters      delivered, redelivered, acked, ... (RILL.GROUP INFO)
//!     ready:   {ID}           released entries deliverable now: the hand-back queue, by ID
//!     delayed: {ID -> at}     released entries waiting out a backoff or NACK delay
//!     delay_order: {(at, ID)}   the same, by time (the timer's index)
//!     first_delivery: {ID -> ms}   for the dead letter's provenance
//!     order: KeyOrder         ORDERBY's keys in flight and deferred entries (order.rs)
//! ```
//!
//! Invariant: on a group with a policy, every released (XNACK-zone) PEL entry is in exactly one
//! of `ready` and `delayed`, and nothing else is. A delayed entry whose time has passed is
//! deliverable; moving it to `ready` ([`Policy::promote_due`]) changes nothing observable, so
//! it is done whenever convenient and is not an effect.
//!
//! Counters are changed only by applying group effects, so a log replay or a replica reaches
//! the same values. They count from the moment the group got its policy.

use super::order::KeyOrder;
use super::StreamId;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The most values BACKOFF takes.
pub const BACKOFF_MAX_VALUES: usize = 32;
/// The smallest non-zero CONSUMERIDLE / GROUPIDLE.
pub const IDLE_MIN_MS: u64 = 1000;

/// A group's policy settings (`RILL.GROUP SET`); zero / empty = off.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// Deliveries after which a failed attempt dead-letters; 0 = off.
    pub max_deliver: u64,
    /// Where dead letters go; `None` = the default name ([`default_dead_letter`]).
    pub dead_letter: Option<Bytes>,
    /// Visibility timeout in ms; 0 = off.
    pub ack_wait_ms: u64,
    /// Delays before a failed entry is deliverable again; empty = none.
    pub backoff_ms: Vec<u64>,
    /// Cap on entries owned by the group's consumers; 0 = off.
    pub max_ack_pending: u64,
    /// Cap on entries owned by one consumer; 0 = off.
    pub max_ack_pending_consumer: u64,
    /// The field whose value orders delivery (ORDERBY); `None` = off.
    pub order_by: Option<Bytes>,
    /// A consumer inactive this long (ms) is removed, its entries handed back; 0 = off.
    pub consumer_idle_ms: u64,
    /// A group inactive this long (ms) is destroyed; 0 = off.
    pub group_idle_ms: u64,
    /// When the last connection that read as a consumer closes, that consumer's entries are
    /// handed back at once (RELEASEONCLOSE).
    pub release_on_close: bool,
}

/// Why an entry was released by a policy (for the counters and the dead letter's reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Its ack deadline passed.
    Deadline,
    /// XNACK FAIL / SILENT or RILL.NACK.
    Nack,
    /// A dead-letter move failed (the key holds another type): it stays pending, unowned.
    DeadLetterFailed,
    /// The last connection that read as its owner closed (RELEASEONCLOSE).
    Closed,
}

impl Release {
    /// The byte that stands for it in a record.
    pub fn code(self) -> u8 {
        match self {
            Release::Deadline => 0,
            Release::Nack => 1,
            Release::DeadLetterFailed => 2,
            Release::Closed => 3,
        }
    }

    /// The reason for a code (unknown codes read as a deadline).
    pub fn from_code(code: u8) -> Release {
        match code {
            1 => Release::Nack,
            2 => Release::DeadLetterFailed,
            3 => Release::Closed,
            _ => Release::Deadline,
        }
    }
}

/// Counters since the group got its policy (`RILL.GROUP INFO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// New entries delivered by `>` reads.
    pub delivered: u64,
    /// Deliveries of entries delivered before: hand-backs served, claims, history re-reads.
    pub redelivered: u64,
    /// Entries acknowledged.
    pub acked: u64,
    /// Entries handed back because their ack deadline passed.
    pub handed_back: u64,
    /// Entries handed back by XNACK / RILL.NACK.
    pub nacked: u64,
    /// Entries moved to the dead-letter stream.
    pub dead_lettered: u64,
    /// Dead-letter moves that could not be done.
    pub dead_letter_failures: u64,
    /// Consumers CONSUMERIDLE removed.
    pub consumers_expired: u64,
    /// Entries handed back because the last connection that read as their owner closed.
    pub released_on_close: u64,
}

impl Counters {
    /// How many counters a record holds.
    pub const LEN: usize = 9;

    /// The counters in record order.
    pub fn to_array(self) -> [u64; Counters::LEN] {
        [
            self.delivered,
            self.redelivered,
            self.acked,
            self.handed_back,
            self.nacked,
            self.dead_lettered,
            self.dead_letter_failures,
            self.consumers_expired,
            self.released_on_close,
        ]
    }

    /// From [`Counters::to_array`]'s order.
    pub fn from_array(a: [u64; Counters::LEN]) -> Counters {
        let [delivered, redelivered, acked, handed_back, nacked, dead_lettered, dead_letter_failures, consumers_expired, released_on_close] =
            a;
        Counters {
            delivered,
            redelivered,
            acked,
            handed_back,
            nacked,
            dead_lettered,
            dead_letter_failures,
            consumers_expired,
            released_on_close,
        }
    }
}

/// The policy state of one group (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// Its settings.
    pub settings: Settings,
    /// Its counters.
    pub counters: Counters,
    ready: BTreeSet<StreamId>,
    delayed: BTreeMap<StreamId, i64>,
    delay_order: BTreeSet<(i64, StreamId)>,
    first_delivery: BTreeMap<StreamId, i64>,
    /// ORDERBY's state (empty without ORDERBY, unless entries deferred before it was unset
    /// still wait: they are served first, unordered).
    pub order: KeyOrder,
    /// Each consumer's last activity (a read or claim attempt, a delivery, an XACK of an entry
    /// it owned, a RILL.TOUCH), ms, and the same by time (CONSUMERIDLE's index).
    activity: HashMap<Bytes, i64>,
    idle_order: BTreeSet<(i64, Bytes)>,
    /// The group's last activity (any consumer's, or the policy's setting), ms (GROUPIDLE).
    pub group_active_ms: i64,
    /// Idle expiry found a blocked reader it may not expire: look again no sooner than this
    /// (a server's observation, not state).
    pub idle_recheck: RuntimeTime,
    /// `>` reads a pending cap held back (served less, or nothing), since this server
    /// started: an observation, not state (not logged, not compared).
    pub held_back: RuntimeCount,
    /// Consumers whose last reading connection closed, their entries to be handed back by the
    /// timer (RELEASEONCLOSE): what this server saw, not state (not logged, not compared).
    pub closing: RuntimeSet,
}

/// Consumer names a server keeps for itself, not part of the state a log or a replica must
/// reproduce: every two compare equal.
#[derive(Debug, Clone, Default)]
pub struct RuntimeSet(pub BTreeSet<Bytes>);

impl PartialEq for RuntimeSet {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RuntimeSet {}

/// A count a server keeps of what it saw, not part of the state a log or a replica must
/// reproduce: every two compare equal.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimeCount(pub u64);

impl PartialEq for RuntimeCount {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RuntimeCount {}

/// A time a server keeps for itself, not part of the state a log or a replica must reproduce:
/// every two compare equal.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimeTime(pub i64);

impl PartialEq for RuntimeTime {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RuntimeTime {}

/// What a snapshot keeps of a policy beyond its settings: counters, delays, first deliveries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyState {
    /// The counters.
    pub counters: Counters,
    /// Released entries with the time they become deliverable again.
    pub delayed: Vec<(StreamId, i64)>,
    /// Pending entries with their first delivery time.
    pub first_delivery: Vec<(StreamId, i64)>,
    /// Entries ORDERBY deferred, in ID order, with their key (`None`: no longer ordered).
    pub deferred: Vec<(StreamId, Option<Bytes>)>,
    /// The group's last activity.
    pub group_active_ms: i64,
    /// Each consumer's last activity.
    pub activity: Vec<(Bytes, i64)>,
}

impl Policy {
    /// A new policy with these settings over a PEL whose released entries are `released`
    /// (they join the hand-back queue).
    pub fn new(settings: Settings, released: impl IntoIterator<Item = StreamId>) -> Policy {
        Policy { settings, ready: released.into_iter().collect(), ..Policy::default() }
    }

    /// Released entries deliverable now (after [`Policy::promote_due`]), ascending.
    pub fn ready(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.ready.iter().copied()
    }

    /// Whether some released entry is deliverable at `now_ms`. O(log n).
    pub fn has_ready(&self, now_ms: i64) -> bool {
        !self.ready.is_empty() || self.delay_order.first().is_some_and(|(at, _)| *at <= now_ms)
    }

    /// Move delayed entries whose time has come to the hand-back queue. Returns how many.
    /// O(k log n) for k moved.
    pub fn promote_due(&mut self, now_ms: i64) -> usize {
        let mut moved = 0;
        while let Some(&(at, id)) = self.delay_order.first() {
            if at > now_ms {
                break;
            }
            self.delay_order.pop_first();
            self.delayed.remove(&id);
            self.ready.insert(id);
            moved += 1;
        }
        moved
    }

    /// The earliest time a delayed entry becomes deliverable.
    pub fn next_delay_end(&self) -> Option<i64> {
        self.delay_order.first().map(|(at, _)| *at)
    }

    /// Entries waiting out a delay at `now_ms`. O(d) for d delayed.
    pub fn delayed_count(&self, now_ms: i64) -> u64 {
        self.delay_order.iter().rev().take_while(|(at, _)| *at > now_ms).count() as u64
    }

    /// When `id` was first delivered, if known.
    pub fn first_delivery(&self, id: StreamId) -> Option<i64> {
        self.first_delivery.get(&id).copied()
    }

    /// `id` is no longer released (it was delivered, claimed, acked or removed).
    pub fn unrelease(&mut self, id: StreamId) {
        if !self.ready.remove(&id) {
            if let Some(at) = self.delayed.remove(&id) {
                self.delay_order.remove(&(at, id));
            }
        }
    }

    /// `id` left the PEL.
    pub fn forget(&mut self, id: StreamId) {
        self.unrelease(id);
        self.first_delivery.remove(&id);
        self.order.left(id);
    }

    /// `id` was delivered at `time_ms` (kept as its first delivery if it has none).
    pub fn delivered(&mut self, id: StreamId, time_ms: i64) {
        self.unrelease(id);
        self.first_delivery.entry(id).or_insert(time_ms);
    }

    /// `id` was released, deliverable again at `ready_at_ms` (0 or past: at once).
    pub fn released(&mut self, id: StreamId, ready_at_ms: i64) {
        self.unrelease(id);
        if ready_at_ms > 0 {
            self.delayed.insert(id, ready_at_ms);
            self.delay_order.insert((ready_at_ms, id));
        } else {
            self.ready.insert(id);
        }
    }

    /// The state a snapshot keeps (see [`PolicyState`]).
    pub fn state(&self) -> PolicyState {
        PolicyState {
            counters: self.counters,
            delayed: self.delayed.iter().map(|(id, at)| (*id, *at)).collect(),
            first_delivery: self.first_delivery.iter().map(|(id, at)| (*id, *at)).collect(),
            deferred: self.order.waiting().into_iter().map(|(id, k)| (id, k.cloned())).collect(),
            group_active_ms: self.group_active_ms,
            activity: self.idle_order.iter().map(|(t, c)| (c.clone(), *t)).collect(),
        }
    }

    /// Take a snapshot's state back (the entries must be pending; `delayed` ones released).
    pub fn restore(&mut self, state: &PolicyState) {
        self.counters = state.counters;
        for (id, at) in &state.delayed {
            if self.ready.remove(id) {
                self.delayed.insert(*id, *at);
                self.delay_order.insert((*at, *id));
            }
        }
        self.first_delivery = state.first_delivery.iter().copied().collect();
        for (id, key) in &state.deferred {
            self.order.defer(*id, key.clone());
        }
        for (consumer, t) in &state.activity {
            self.active(consumer, *t);
        }
        self.group_active_ms = self.group_active_ms.max(state.group_active_ms);
    }

    /// `consumer` was active at `t` (so was the group). O(log c).
    pub fn active(&mut self, consumer: &[u8], t: i64) {
        self.group_active_ms = self.group_active_ms.max(t);
        let name = match self.activity.get_key_value(consumer) {
            Some((_, old)) if *old >= t => return,
            Some((name, old)) => {
                let name = name.clone();
                self.idle_order.remove(&(*old, name.clone()));
                name
            }
            None => Bytes::copy_from_slice(consumer),
        };
        self.idle_order.insert((t, name.clone()));
        self.activity.insert(name, t);
    }

    /// `consumer` was deleted.
    pub fn consumer_gone(&mut self, consumer: &[u8]) {
        if let Some((name, t)) = self.activity.remove_entry(consumer) {
            self.idle_order.remove(&(t, name));
        }
    }

    /// Consumers by last activity, least recent first.
    pub fn least_active(&self) -> impl Iterator<Item = (i64, &Bytes)> + '_ {
        self.idle_order.iter().map(|(t, c)| (*t, c))
    }

    /// When idle expiry (CONSUMERIDLE, GROUPIDLE) next needs a look. O(1).
    pub fn idle_due(&self) -> Option<i64> {
        let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let consumer = match self.settings.consumer_idle_ms {
            0 => None,
            idle => self.idle_order.first().map(|(t, _)| t.saturating_add(ms(idle))),
        };
        let group = match self.settings.group_idle_ms {
            0 => None,
            idle => Some(self.group_active_ms.saturating_add(ms(idle))),
        };
        let due = match (consumer, group) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        due.map(|d| d.max(self.idle_recheck.0))
    }

    /// Whether the released entries are exactly `released` (tests and the snapshot loader).
    pub fn validate(&self, released: &BTreeSet<StreamId>) -> bool {
        self.ready.is_disjoint(&self.delayed.keys().copied().collect())
            && self.ready.len() + self.delayed.len() == released.len()
            && self.ready.iter().chain(self.delayed.keys()).all(|id| released.contains(id))
            && self.delay_order.len() == self.delayed.len()
            && self.delay_order.iter().all(|(at, id)| self.delayed.get(id) == Some(at))
            && self.order.validate()
    }

    /// Whether `>` reads go through ORDERBY's path: ORDERBY is set, or entries it deferred
    /// before it was unset still wait.
    pub fn orders(&self) -> bool {
        self.settings.order_by.is_some() || self.order.deferred_count() > 0
    }

    /// Whether an XACK (or another removal from the PEL) may let a blocked `>` reader have
    /// something: a pending cap may have room, or a key's deferred entries may be free.
    pub fn frees_readers(&self) -> bool {
        self.has_caps() || self.order.has_unblocked()
    }

    /// Whether a pending cap (MAXACKPENDING, MAXACKPENDINGCONSUMER) is set.
    pub fn has_caps(&self) -> bool {
        self.settings.max_ack_pending > 0 || self.settings.max_ack_pending_consumer > 0
    }

    /// The delay before an entry that failed its `attempt`-th delivery is deliverable again.
    pub fn backoff_for(&self, attempts: u64) -> u64 {
        let b = &self.settings.backoff_ms;
        let i = usize::try_from(attempts.max(1) - 1).unwrap_or(usize::MAX).min(b.len().saturating_sub(1));
        b.get(i).copied().unwrap_or(0)
    }
}

/// The default dead-letter stream of `key` (the toolkit's rule): `key:dlq` when the key has a
/// hash tag, `{key}:dlq` when it has none, so both hash to the same Redis Cluster slot; a key
/// with stray braces (which no tag would fit) gets `key:dlq`.
pub fn default_dead_letter(key: &[u8]) -> Bytes {
    let tagged = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| key.get(open + 1..))
        .and_then(|rest| rest.iter().position(|b| *b == b'}'))
        .is_some_and(|close| close > 0);
    let mut out = Vec::with_capacity(key.len() + 6);
    if tagged || key.contains(&b'{') || key.contains(&b'}') {
        out.extend_from_slice(key);
    } else {
        out.push(b'{');
        out.extend_from_slice(key);
        out.push(b'}');
    }
    out.extend_from_slice(b":dlq");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId { ms, seq: 0 }
    }

    #[test]
    fn default_dead_letter_keeps_the_slot() {
        assert_eq!(default_dead_letter(b"ticks"), Bytes::from_static(b"{ticks}:dlq"));
        assert_eq!(default_dead_letter(b"{ticks}"), Bytes::from_static(b"{ticks}:dlq"));
        assert_eq!(default_dead_letter(b"app:{o}:in"), Bytes::from_static(b"app:{o}:in:dlq"));
        assert_eq!(default_dead_letter(b"a}b"), Bytes::from_static(b"a}b:dlq"));
    }

    #[test]
    fn backoff_repeats_its_last_value() {
        let p = Policy::new(Settings { backoff_ms: vec![10, 20, 40], ..Settings::default() }, []);
        let got: Vec<u64> = (0..6).map(|n| p.backoff_for(n)).collect();
        assert_eq!(got, [10, 10, 20, 40, 40, 40]);
        assert_eq!(Policy::default().backoff_for(3), 0);
    }

    #[test]
    fn released_entries_are_ready_or_delayed_never_both() {
        let mut p = Policy::new(Settings::default(), [id(1)]);
        p.released(id(2), 50);
        p.released(id(3), 0);
        p.released(id(1), 70);
        let all: BTreeSet<StreamId> = [id(1), id(2), id(3)].into();
        assert!(p.validate(&all));
        assert_eq!(p.ready().collect::<Vec<_>>(), [id(3)]);
        assert!(!p.has_ready(10) || p.ready().count() == 1);
        assert_eq!(p.delayed_count(60), 1);
        assert_eq!(p.promote_due(60), 1);
        assert_eq!(p.ready().collect::<Vec<_>>(), [id(2), id(3)]);
        p.delivered(id(2), 61);
        p.forget(id(1));
        assert!(p.validate(&[id(3)].into()));
        assert_eq!(p.first_delivery(id(2)), Some(61));
    }
}
