//! Pub/Sub: who is subscribed to what, and the delivery of a published message.
//!
//! The registry lives under the state lock (`State::pubsub`), so a PUBLISH sees every
//! subscription made before it and none made after, as in Redis' single thread. Three
//! namespaces, as Redis keeps them: channels (SUBSCRIBE), patterns (PSUBSCRIBE, glob-matched
//! against the channel of every PUBLISH, `rill_engine::glob`), and shard channels
//! (SSUBSCRIBE, SPUBLISH; one shard here, since rill has no cluster mode).
//!
//! A message reaches a subscriber through its push queue (`src/push.rs`), encoded for its
//! protocol once per protocol (and per pattern for `pmessage`): a RESP2 array or a RESP3
//! `>` push. A client that disconnects is taken out of every namespace (`remove_client`).
//!
//! Cost: SUBSCRIBE/UNSUBSCRIBE O(log n) per channel; PUBLISH O(s + p): its channel's s
//! subscribers, and every distinct pattern p matched against the channel (as in Redis).

use crate::push;
use crate::state::State;
use bytes::{Bytes, BytesMut};
use rill_resp::{write_reply, Protocol, Reply};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The three subscription namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / UNSUBSCRIBE / PUBLISH.
    Channel,
    /// PSUBSCRIBE / PUNSUBSCRIBE, matched against PUBLISH's channel.
    Pattern,
    /// SSUBSCRIBE / SUNSUBSCRIBE / SPUBLISH.
    Shard,
}

impl Kind {
    /// The first element of a subscription confirmation.
    pub fn subscribe_word(self) -> &'static str {
        match self {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        }
    }

    /// The first element of an unsubscription confirmation.
    pub fn unsubscribe_word(self) -> &'static str {
        match self {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
            Kind::Shard => "sunsubscribe",
        }
    }
}

/// How many subscriptions a client holds in each namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriptionCounts {
    /// Channels (CLIENT LIST `sub`).
    pub channels: usize,
    /// Patterns (`psub`).
    pub patterns: usize,
    /// Shard channels (`ssub`).
    pub shard: usize,
}

impl SubscriptionCounts {
    /// All of them: a client with any is in pub/sub mode (Redis' `CLIENT_PUBSUB`).
    pub fn total(&self) -> usize {
        self.channels + self.patterns + self.shard
    }

    /// The count a confirmation in `kind` reports: channels and patterns together, or shard
    /// channels alone, as Redis counts them.
    pub fn reported(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels + self.patterns,
            Kind::Shard => self.shard,
        }
    }
}

/// One subscribed client.
#[derive(Debug, Default)]
struct Subscriber {
    channels: BTreeSet<Bytes>,
    patterns: BTreeSet<Bytes>,
    shard: BTreeSet<Bytes>,
    /// Its messages are RESP3 pushes.
    resp3: bool,
}

impl Subscriber {
    fn set(&mut self, kind: Kind) -> &mut BTreeSet<Bytes> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn counts(&self) -> SubscriptionCounts {
        SubscriptionCounts { channels: self.channels.len(), patterns: self.patterns.len(), shard: self.shard.len() }
    }
}

/// Every subscription. Invariant: a name is a key of a namespace's map exactly while some
/// client's set of that namespace holds it, and that client is in the name's set.
#[derive(Debug, Default)]
pub struct PubSub {
    channels: HashMap<Bytes, BTreeSet<u64>>,
    patterns: BTreeMap<Bytes, BTreeSet<u64>>,
    shard: HashMap<Bytes, BTreeSet<u64>>,
    clients: HashMap<u64, Subscriber>,
}

impl PubSub {
    fn namespace(&mut self, kind: Kind) -> &mut dyn Namespace {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Subscribe client `id` (speaking RESP3 if `resp3`) to `name`; false if it already was.
    pub fn subscribe(&mut self, id: u64, resp3: bool, kind: Kind, name: &Bytes) -> bool {
        let sub = self.clients.entry(id).or_default();
        sub.resp3 = resp3;
        if !sub.set(kind).insert(name.clone()) {
            return false;
        }
        self.namespace(kind).add(name, id);
        true
    }

    /// Unsubscribe client `id` from `name`; false if it was not subscribed.
    pub fn unsubscribe(&mut self, id: u64, kind: Kind, name: &[u8]) -> bool {
        let Some(sub) = self.clients.get_mut(&id) else { return false };
        if !sub.set(kind).remove(name) {
            return false;
        }
        if sub.counts().total() == 0 {
            self.clients.remove(&id);
        }
        self.namespace(kind).remove(name, id);
        true
    }

    /// What client `id` is subscribed to in `kind`, in order.
    pub fn subscriptions(&mut self, id: u64, kind: Kind) -> Vec<Bytes> {
        self.clients.get_mut(&id).map(|s| s.set(kind).iter().cloned().collect()).unwrap_or_default()
    }

    /// Client `id`'s counts.
    pub fn counts(&self, id: u64) -> SubscriptionCounts {
        self.clients.get(&id).map(Subscriber::counts).unwrap_or_default()
    }

    /// Client `id` switched protocol (HELLO): its next messages take the new form.
    pub fn set_resp3(&mut self, id: u64, resp3: bool) {
        if let Some(s) = self.clients.get_mut(&id) {
            s.resp3 = resp3;
        }
    }

    /// Take client `id` out of everything (it disconnected, or RESET).
    pub fn remove_client(&mut self, id: u64) {
        let Some(sub) = self.clients.remove(&id) else { return };
        for name in &sub.channels {
            Namespace::remove(&mut self.channels, name, id);
        }
        for name in &sub.patterns {
            Namespace::remove(&mut self.patterns, name, id);
        }
        for name in &sub.shard {
            Namespace::remove(&mut self.shard, name, id);
        }
    }

    /// Channels (or shard channels) with a subscriber, matching `pattern` if given (PUBSUB
    /// CHANNELS / SHARDCHANNELS).
    pub fn active(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let map = if shard { &self.shard } else { &self.channels };
        map.keys().filter(|c| pattern.is_none_or(|p| rill_engine::glob::glob_match(p, c, false))).cloned().collect()
    }

    /// Subscribers of a channel or shard channel, patterns not counted (PUBSUB NUMSUB).
    pub fn subscriber_count(&self, shard: bool, channel: &[u8]) -> usize {
        let map = if shard { &self.shard } else { &self.channels };
        map.get(channel).map_or(0, BTreeSet::len)
    }

    /// INFO: `pubsub_channels`, `pubsub_patterns`, `pubsubshard_channels`, `pubsub_clients`.
    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    /// Distinct patterns subscribed to (PUBSUB NUMPAT, INFO `pubsub_patterns`).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// Distinct shard channels subscribed to.
    pub fn shard_channel_count(&self) -> usize {
        self.shard.len()
    }

    /// Clients subscribed to anything.
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// Who gets a message published to `channel`: each (client, its protocol, the pattern
    /// that matched or `None` for the channel itself), channel subscribers first.
    fn receivers(&self, shard: bool, channel: &[u8]) -> Vec<(u64, bool, Option<Bytes>)> {
        let resp3 = |id: &u64| self.clients.get(id).is_some_and(|s| s.resp3);
        let map = if shard { &self.shard } else { &self.channels };
        let mut out: Vec<(u64, bool, Option<Bytes>)> =
            map.get(channel).into_iter().flatten().map(|id| (*id, resp3(id), None)).collect();
        if !shard {
            for (pattern, ids) in &self.patterns {
                if rill_engine::glob::glob_match(pattern, channel, false) {
                    out.extend(ids.iter().map(|id| (*id, resp3(id), Some(pattern.clone()))));
                }
            }
        }
        out
    }
}

/// The per-namespace map, a hash map or an ordered one.
trait Namespace {
    fn add(&mut self, name: &Bytes, id: u64);
    fn remove(&mut self, name: &[u8], id: u64);
}

/// The same for a channel table of either kind (plain and shard channels are hashed, patterns
/// ordered).
macro_rules! namespace_for {
    ($map:ident) => {
        impl Namespace for $map<Bytes, BTreeSet<u64>> {
            fn add(&mut self, name: &Bytes, id: u64) {
                self.entry(name.clone()).or_default().insert(id);
            }

            fn remove(&mut self, name: &[u8], id: u64) {
                if let Some(ids) = self.get_mut(name) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        self.remove(name);
                    }
                }
            }
        }
    };
}
namespace_for!(HashMap);
namespace_for!(BTreeMap);

/// Deliver `message` on `channel` (a shard channel if `shard`) to every subscriber; returns
/// how many deliveries were made (a client matched by two patterns counts twice, as in Redis).
pub fn publish(st: &mut State, shard: bool, channel: &Bytes, message: &Bytes, now_ms: i64) -> usize {
    let receivers = st.pubsub.receivers(shard, channel);
    if receivers.is_empty() {
        return 0;
    }
    let word = if shard { "smessage" } else { "message" };
    // One frame per protocol for the channel's own subscribers, and per pattern for
    // `pmessage` (receivers come grouped that way, so only the last one made is kept).
    let mut last: Option<(Option<Bytes>, bool, Bytes)> = None;
    for (id, resp3, pattern) in &receivers {
        let frame = match &last {
            Some((p, r, frame)) if p == pattern && r == resp3 => frame.clone(),
            _ => {
                let head = match pattern {
                    None => vec![bulk(word)],
                    Some(p) => vec![bulk("pmessage"), Reply::Bulk(p.clone())],
                };
                let elements = head.into_iter().chain([Reply::Bulk(channel.clone()), Reply::Bulk(message.clone())]);
                let frame = encode(*resp3, elements.collect());
                last = Some((pattern.clone(), *resp3, frame.clone()));
                frame
            }
        };
        push::push_to(st, *id, frame, now_ms / 1000);
    }
    receivers.len()
}

fn bulk(s: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(s.as_bytes()))
}

/// A message frame: a RESP3 push or, in RESP2, the same elements as an array.
fn encode(resp3: bool, elements: Vec<Reply>) -> Bytes {
    let mut out = BytesMut::new();
    let proto = if resp3 { Protocol::Resp3 } else { Protocol::Resp2 };
    write_reply(&mut out, &Reply::Push(elements), proto);
    out.freeze()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn the_namespaces_stay_consistent() {
        let mut ps = PubSub::default();
        assert!(ps.subscribe(1, false, Kind::Channel, &b("a")));
        assert!(!ps.subscribe(1, false, Kind::Channel, &b("a")), "twice is once");
        assert!(ps.subscribe(2, true, Kind::Channel, &b("a")));
        assert!(ps.subscribe(1, false, Kind::Pattern, &b("a*")));
        assert!(ps.subscribe(2, true, Kind::Pattern, &b("*")));
        assert!(ps.subscribe(2, true, Kind::Shard, &b("a")));
        assert_eq!(ps.counts(1), SubscriptionCounts { channels: 1, patterns: 1, shard: 0 });
        assert_eq!((ps.channel_count(), ps.pattern_count(), ps.shard_channel_count(), ps.client_count()), (1, 2, 1, 2));
        assert_eq!(ps.subscriber_count(false, b"a"), 2);
        assert_eq!(ps.subscriber_count(true, b"a"), 1);
        let r = ps.receivers(false, b"ab");
        assert_eq!(r, vec![(2, true, Some(b("*"))), (1, false, Some(b("a*")))]);
        let r = ps.receivers(false, b"a");
        assert_eq!(r.len(), 4, "two channel subscribers, two patterns: {r:?}");
        assert_eq!(ps.receivers(true, b"a"), vec![(2, true, None)], "shard messages ignore patterns");
        assert_eq!(ps.active(false, Some(b"x*")), Vec::<Bytes>::new());
        assert!(!ps.unsubscribe(1, Kind::Channel, b"zzz"));
        assert!(ps.unsubscribe(1, Kind::Channel, b"a"));
        assert_eq!(ps.subscriber_count(false, b"a"), 1);
        ps.remove_client(2);
        assert_eq!((ps.channel_count(), ps.pattern_count(), ps.shard_channel_count(), ps.client_count()), (0, 1, 0, 1));
        assert!(ps.unsubscribe(1, Kind::Pattern, b"a*"));
        assert_eq!(ps.client_count(), 0, "a client with no subscription left is gone");
        assert_eq!(ps.pattern_count(), 0);
    }

    #[test]
    fn frames_per_protocol() {
        let f = encode(false, vec![bulk("message"), Reply::Bulk(b("ch")), Reply::Bulk(b("hi"))]);
        assert_eq!(&f[..], b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
        let f = encode(true, vec![bulk("message"), Reply::Bulk(b("ch")), Reply::Bulk(b("hi"))]);
        assert_eq!(&f[..], b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    }
}
