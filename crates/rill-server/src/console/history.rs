//! The console's charts: the last hour of the server's command rate and, per stream and
//! group, input and delivery rates, lag and pending — sampled from the metrics snapshot
//! (`metrics::collect`, the one `/metrics` and `rill top` read) every [`INTERVAL`], kept in
//! the server so the console needs no Prometheus.
//!
//! Memory is bounded: at most [`MAX_SERIES`] series (new ones past it are not kept), each
//! with at most an hour of points (8 bytes each); a series not seen for an hour is dropped.

use super::Site;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// Between two samples.
pub const INTERVAL: Duration = Duration::from_secs(10);
/// What a chart covers.
pub const SPAN_SECS: f64 = 3600.0;
/// Series kept at most (about 12 MB of points when all are full).
pub const MAX_SERIES: usize = 4096;

/// What a series measures.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Series {
    /// Commands per second, server-wide.
    Ops,
    /// Entries added per second to (db, stream).
    In(usize, Bytes),
    /// Entries delivered per second to (db, stream, group): added minus what the lag grew.
    Out(usize, Bytes, Bytes),
    /// The group's lag.
    Lag(usize, Bytes, Bytes),
    /// The group's pending entries.
    Pending(usize, Bytes, Bytes),
}

#[derive(Debug, Default)]
struct Ring {
    /// (Unix seconds relative to `History::epoch`, value).
    points: VecDeque<(u32, f32)>,
    seen: u64,
}

/// The kept samples.
#[derive(Debug, Default)]
pub struct History {
    /// Unix seconds the points count from.
    epoch: f64,
    series: HashMap<Series, Ring>,
    /// The counters rates are computed from: (Unix seconds, value, tick) at the last sample.
    counters: HashMap<Series, (f64, u64, u64)>,
    tick: u64,
}

impl History {
    fn push(&mut self, s: Series, at: f64, v: f64) {
        if !self.series.contains_key(&s) && self.series.len() >= MAX_SERIES {
            return;
        }
        let rel = (at - self.epoch).max(0.0) as u32;
        let ring = self.series.entry(s).or_default();
        ring.points.push_back((rel, v as f32));
        ring.seen = self.tick;
        while ring.points.front().is_some_and(|p| f64::from(rel - p.0) > SPAN_SECS) {
            ring.points.pop_front();
        }
    }

    /// A counter's rate since the last sample (none at its first).
    fn rate(&mut self, s: &Series, at: f64, value: u64) -> Option<f64> {
        if !self.counters.contains_key(s) && self.counters.len() >= MAX_SERIES {
            return None;
        }
        let before = self.counters.insert(s.clone(), (at, value, self.tick));
        let (t, v, _) = before?;
        (at > t).then(|| value.saturating_sub(v) as f64 / (at - t))
    }

    /// Add one snapshot's figures, taken at Unix time `at` (seconds).
    pub fn sample(&mut self, snap: &crate::metrics::Snapshot, at: f64) {
        if self.epoch == 0.0 {
            self.epoch = at;
        }
        self.tick += 1;
        if let Some(r) = self.rate(&Series::Ops, at, snap.server.commands_processed) {
            self.push(Series::Ops, at, r);
        }
        for row in &snap.streams {
            let m = &row.m;
            let s = Series::In(row.db, row.key.clone());
            if let Some(r) = self.rate(&s, at, m.entries_added) {
                self.push(s, at, r);
            }
            for g in &m.groups {
                let (db, k, n) = (row.db, row.key.clone(), g.name.clone());
                if let Some(lag) = g.lag {
                    let delivered = m.entries_added.saturating_sub(u64::try_from(lag).unwrap_or(0));
                    let s = Series::Out(db, k.clone(), n.clone());
                    if let Some(r) = self.rate(&s, at, delivered) {
                        self.push(s, at, r);
                    }
                    self.push(Series::Lag(db, k.clone(), n.clone()), at, lag as f64);
                }
                self.push(Series::Pending(db, k, n), at, g.pending as f64);
            }
        }
        // Forget what has not been seen for an hour.
        let keep_from = self.tick.saturating_sub((SPAN_SECS / INTERVAL.as_secs_f64()) as u64);
        self.series.retain(|_, r| r.seen >= keep_from);
        self.counters.retain(|_, c| c.2 >= keep_from);
    }

    /// A series' points as (Unix seconds, value), oldest first.
    pub fn points(&self, s: &Series) -> Vec<(f64, f64)> {
        self.series
            .get(s)
            .map(|r| r.points.iter().map(|&(t, v)| (self.epoch + f64::from(t), f64::from(v))).collect())
            .unwrap_or_default()
    }
}

/// Sample every [`INTERVAL`] until the process exits.
pub async fn sample_loop(site: Arc<Site>) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let snap = crate::metrics::collect(&site.shared).await;
        let at = snap.server.taken_ms as f64 / 1000.0;
        if let Ok(mut h) = site.history.lock() {
            h.sample(&snap, at);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::metrics::{Snapshot, StreamRow};
    use rill_engine::types::stream::metrics::{GroupMetrics, StreamMetrics};

    fn snap(added: u64, lag: i64, pending: u64, ops: u64) -> Snapshot {
        let mut s = Snapshot::default();
        s.server.commands_processed = ops;
        s.streams.push(StreamRow {
            db: 0,
            key: Bytes::from_static(b"s"),
            m: StreamMetrics {
                entries_added: added,
                groups: vec![GroupMetrics {
                    name: Bytes::from_static(b"g"),
                    lag: Some(lag),
                    pending,
                    ..Default::default()
                }],
                ..Default::default()
            },
        });
        s
    }

    #[test]
    fn rates_lag_and_pending_are_kept_for_an_hour() {
        let mut h = History::default();
        let t0 = 1_000_000.0;
        h.sample(&snap(100, 10, 5, 1000), t0);
        h.sample(&snap(200, 30, 7, 3000), t0 + 10.0);
        let key = |f: fn(usize, Bytes, Bytes) -> Series| f(0, Bytes::from_static(b"s"), Bytes::from_static(b"g"));
        assert_eq!(h.points(&Series::In(0, Bytes::from_static(b"s"))), vec![(t0 + 10.0, 10.0)]);
        assert_eq!(h.points(&Series::Ops), vec![(t0 + 10.0, 200.0)]);
        // Delivered: 90 then 170, 8 per second.
        assert_eq!(h.points(&key(Series::Out)), vec![(t0 + 10.0, 8.0)]);
        assert_eq!(h.points(&key(Series::Lag)), vec![(t0, 10.0), (t0 + 10.0, 30.0)]);
        assert_eq!(h.points(&key(Series::Pending)), vec![(t0, 5.0), (t0 + 10.0, 7.0)]);
        // An hour and more later, the first points are gone.
        for i in 2..=400 {
            h.sample(&snap(200, 30, 7, 3000), t0 + 10.0 * f64::from(i));
        }
        let lag = h.points(&key(Series::Lag));
        assert!(lag.len() <= 361 && lag[0].0 >= t0 + 4000.0 - SPAN_SECS, "{}", lag.len());
        // A stream that disappears is forgotten after an hour.
        let mut empty = Snapshot::default();
        empty.server.commands_processed = 3000;
        for i in 401..=800 {
            h.sample(&empty, t0 + 10.0 * f64::from(i));
        }
        assert!(h.points(&key(Series::Lag)).is_empty());
        assert_eq!(h.series.len(), 1);
    }
}
