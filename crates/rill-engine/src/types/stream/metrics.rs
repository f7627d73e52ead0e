//! What monitoring reads of a stream (`/metrics`, the console, `rill top`): one typed record
//! per stream with its groups and, on request, their consumers — the figures XINFO gives, plus
//! the ones a user watching a pipeline asks for (how old is the oldest undelivered entry, how
//! long has the oldest pending one waited) and the group policy's counters.
//!
//! Costs O(G · (log E + log P)) for G groups, E entries and P pending entries, plus O(C) per
//! group for its C consumers when they are asked for: never a walk of the entries or the PEL.

use super::policy::Counters;
use super::Stream;
use bytes::Bytes;

/// A stream's figures.
#[derive(Debug, Clone, Default)]
pub struct StreamMetrics {
    /// Entries in it.
    pub length: u64,
    /// Entries ever added (XINFO `entries-added`).
    pub entries_added: u64,
    /// The ms part of the first live entry's ID (a Unix time for `*` IDs).
    pub first_entry_ms: Option<u64>,
    /// The ms part of the last live entry's ID.
    pub last_entry_ms: Option<u64>,
    /// The ms part of the last ID generated (XINFO `last-generated-id`).
    pub last_generated_ms: u64,
    /// Estimated bytes (as MEMORY USAGE reports it).
    pub memory_bytes: u64,
    /// Its groups, by name.
    pub groups: Vec<GroupMetrics>,
}

/// A consumer group's figures.
#[derive(Debug, Clone, Default)]
pub struct GroupMetrics {
    /// The group's name.
    pub name: Bytes,
    /// Consumers in it.
    pub consumers: u64,
    /// Entries delivered and not acknowledged (its PEL), NACKed ones included.
    pub pending: u64,
    /// Of those, released by XNACK and not yet delivered again.
    pub nacked: u64,
    /// Entries not yet delivered to the group (XINFO `lag`); `None` when Redis reports nil.
    pub lag: Option<i64>,
    /// How long ago (ms) the oldest entry not yet delivered to the group was added, by its
    /// ID's ms part: 0 when none waits.
    pub lag_ms: i64,
    /// How long (ms) the pending entry delivered longest ago has waited since that delivery
    /// (`None`: nothing pending with an owner).
    pub oldest_pending_idle_ms: Option<i64>,
    /// The group policy's counters since it was set, if it has one.
    pub counters: Option<Counters>,
    /// Its consumers, when asked for.
    pub consumer_details: Vec<ConsumerMetrics>,
}

/// A consumer's figures.
#[derive(Debug, Clone, Default)]
pub struct ConsumerMetrics {
    /// Its name.
    pub name: Bytes,
    /// Entries it owns.
    pub pending: u64,
    /// Since it last read or claimed (XINFO CONSUMERS `idle`), ms.
    pub idle_ms: i64,
}

impl Stream {
    /// The stream's figures at `now_ms`; with `consumers`, each group's consumers too.
    pub fn metrics(&self, now_ms: i64, consumers: bool) -> StreamMetrics {
        let age = |ms: u64| (now_ms - i64::try_from(ms).unwrap_or(i64::MAX)).max(0);
        let groups = self
            .groups()
            .iter()
            .map(|(name, g)| {
                // The first entry past the cursor is the oldest the group has not seen.
                let lag = self.lag(g);
                let lag_ms = if lag == Some(0) || g.last_delivered_id >= self.last_generated_id() {
                    0
                } else {
                    self.first_live_id_after(g.last_delivered_id).map_or(0, |id| age(id.ms))
                };
                GroupMetrics {
                    name: name.clone(),
                    consumers: g.consumers().len() as u64,
                    pending: g.pel().len(),
                    nacked: g.pel().nacked_count(),
                    lag,
                    lag_ms,
                    oldest_pending_idle_ms: g.pel().owned_by_time().next().map(|(t, _)| (now_ms - t).max(0)),
                    counters: g.policy().map(|p| p.counters),
                    consumer_details: if consumers {
                        g.consumers()
                            .iter()
                            .map(|(cname, c)| ConsumerMetrics {
                                name: cname.clone(),
                                pending: g.pending_count(c),
                                idle_ms: (now_ms - c.seen_time_ms).max(0),
                            })
                            .collect()
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect();
        StreamMetrics {
            length: self.len(),
            entries_added: self.entries_added(),
            first_entry_ms: (!self.is_empty()).then_some(self.first_id().ms),
            last_entry_ms: self.last_live_id().map(|id| id.ms),
            last_generated_ms: self.last_generated_id().ms,
            memory_bytes: self.memory_usage() as u64,
            groups,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::keyspace::Value;
    use crate::types::testkit::Harness;

    fn run(h: &mut Harness, now: i64, line: &str) {
        h.now_ms = now;
        let args: Vec<&str> = line.split(' ').collect();
        let reply = h.run(&args);
        assert!(!reply.is_error(), "{line}: {reply:?}");
    }

    #[test]
    fn figures_of_a_stream_with_groups() {
        let mut h = Harness::new();
        for i in 1..=5 {
            run(&mut h, 10_000, &format!("XADD s {}-0 f v", i * 1000));
        }
        run(&mut h, 10_000, "XGROUP CREATE s g 0");
        run(&mut h, 10_000, "XGROUP CREATE s idle $");
        run(&mut h, 20_000, "XREADGROUP GROUP g alice COUNT 2 STREAMS s >");
        run(&mut h, 25_000, "XREADGROUP GROUP g bob COUNT 1 STREAMS s >");
        run(&mut h, 25_000, "XACK s g 1000-0");
        let Some(Value::Stream(s)) = h.engine.lookup(0, b"s", 30_000).map(|x| &x.value) else { panic!() };
        let m = s.metrics(30_000, true);
        assert_eq!((m.length, m.entries_added, m.first_entry_ms, m.last_entry_ms), (5, 5, Some(1000), Some(5000)));
        assert!(m.memory_bytes > 0);
        let g = &m.groups[0];
        assert_eq!((&g.name[..], g.consumers, g.pending, g.lag), (&b"g"[..], 2, 2, Some(2)));
        // 4000-0 is the oldest entry g has not seen: added (by its ID) at 4 s, now 30 s.
        assert_eq!(g.lag_ms, 26_000);
        // 2000-0 was delivered at 20 s and is still pending.
        assert_eq!(g.oldest_pending_idle_ms, Some(10_000));
        assert!(g.counters.is_none());
        let names: Vec<(&[u8], u64, i64)> =
            g.consumer_details.iter().map(|c| (&c.name[..], c.pending, c.idle_ms)).collect();
        assert_eq!(names, [(&b"alice"[..], 1, 10_000), (&b"bob"[..], 1, 5_000)]);
        let idle = &m.groups[1];
        assert_eq!((idle.lag, idle.lag_ms, idle.oldest_pending_idle_ms), (Some(0), 0, None));
        assert!(s.metrics(30_000, false).groups[0].consumer_details.is_empty());
        // The oldest undelivered entry deleted: the next one's age.
        run(&mut h, 30_000, "XDEL s 4000-0");
        let Some(Value::Stream(s)) = h.engine.lookup(0, b"s", 30_000).map(|x| &x.value) else { panic!() };
        assert_eq!(s.metrics(30_000, false).groups[0].lag_ms, 25_000);
        run(&mut h, 30_000, "XDEL s 5000-0");
        let Some(Value::Stream(s)) = h.engine.lookup(0, b"s", 30_000).map(|x| &x.value) else { panic!() };
        assert_eq!(s.metrics(30_000, false).groups[0].lag_ms, 0, "nothing left to deliver");
    }
}
