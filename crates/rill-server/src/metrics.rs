//! The metrics snapshot (`Snapshot`): one typed record of the server and of every stream,
//! group and (optionally) consumer, which `/metrics` renders in the Prometheus text format
//! (`render`) and which the console and `rill top` will read too.
//!
//! It is taken off the hot path: the server-wide figures under one short hold of the lock, then
//! the keyspace in pages of [`PAGE_KEYS`] keys, the lock released and the task yielding
//! between pages, so a scrape of 10k streams never holds clients up for more than one page.
//! The price: a snapshot is not one instant (a stream is read as it is when its page is). A
//! key that moves between pages while a scrape walks (another key deleted) can be read twice
//! or missed by that scrape; the first read is kept, so a series never appears twice.

use crate::state::{Shared, State};
use bytes::Bytes;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use rill_engine::keyspace::Value;
use rill_engine::types::stream::metrics::StreamMetrics;
use std::collections::HashSet;

/// Keys looked at per hold of the lock.
pub const PAGE_KEYS: usize = 16;

/// A duration histogram: per-bucket counts (upper bound in seconds, the last `+Inf`), the
/// durations counted, their total µs.
pub type Durations = (Vec<(f64, u64)>, u64, u64);

/// One command's figures.
#[derive(Debug, Clone)]
pub struct CommandFigures {
    /// Full name (`xreadgroup`, `config|set`).
    pub name: &'static str,
    /// Calls.
    pub calls: u64,
    /// Calls that replied an error.
    pub failed: u64,
    /// Calls refused before running.
    pub rejected: u64,
    /// Total time, µs.
    pub usec: u64,
    /// Cumulative duration buckets: (upper bound in seconds, calls at or below it), and the
    /// calls counted (`latency-tracking`), if it has a histogram.
    pub buckets: Option<(Vec<(f64, u64)>, u64)>,
}

/// A replica as the primary sees it.
#[derive(Debug, Clone)]
pub struct ReplicaFigures {
    /// `ip:port` it listens on.
    pub addr: String,
    /// Bytes of the stream behind the primary's offset, by its last ACK.
    pub lag_bytes: u64,
    /// Seconds since its last ACK.
    pub ack_age_secs: f64,
}

/// The server-wide figures.
#[derive(Debug, Clone, Default)]
pub struct ServerFigures {
    /// When the snapshot was taken, Unix ms.
    pub taken_ms: i64,
    /// Process start, Unix seconds.
    pub started_secs: f64,
    /// Connected clients.
    pub clients: u64,
    /// Clients parked on keys.
    pub blocked_clients: u64,
    /// Commands run.
    pub commands_processed: u64,
    /// Connections accepted.
    pub connections_received: u64,
    /// Connections refused (maxclients).
    pub rejected_connections: u64,
    /// Bytes read from clients.
    pub net_input_bytes: u64,
    /// Bytes written to clients.
    pub net_output_bytes: u64,
    /// Keys per database (databases with keys only): (db, keys, keys with an expiry).
    pub keys: Vec<(usize, u64, u64)>,
    /// Keys removed by expiry.
    pub expired_keys: u64,
    /// Lookups that found / did not find their key.
    pub hits: u64,
    /// See `hits`.
    pub misses: u64,
    /// Bytes the allocator holds.
    pub used_memory: u64,
    /// Per command.
    pub commands: Vec<CommandFigures>,
    /// Error replies by code.
    pub errors: Vec<(String, u64)>,
    /// SLOWLOG's length and the commands it took.
    pub slowlog_len: u64,
    /// See `slowlog_len`.
    pub slowlog_total: u64,
    /// The effect log: on?
    pub log_enabled: bool,
    /// Its size on disk (base + incremental), bytes.
    pub log_bytes: u64,
    /// fsync durations (buckets as `CommandFigures::buckets`) and their total µs.
    pub log_fsync: Option<Durations>,
    /// Whether this server follows a primary.
    pub replica: bool,
    /// The replication offset.
    pub repl_offset: u64,
    /// Attached replicas.
    pub replicas: Vec<ReplicaFigures>,
    /// Full and partial resyncs served, and partial ones refused.
    pub syncs: (u64, u64, u64),
}

/// One stream's figures.
#[derive(Debug, Clone)]
pub struct StreamRow {
    /// Its database.
    pub db: usize,
    /// Its key.
    pub key: Bytes,
    /// The figures.
    pub m: StreamMetrics,
}

/// Everything `/metrics` shows.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Server-wide.
    pub server: ServerFigures,
    /// Every stream, in the order the walk met them.
    pub streams: Vec<StreamRow>,
    /// Whether consumers were read (`metrics-consumers`).
    pub consumers: bool,
}

/// Durations' upper bounds in seconds: 1 µs doubling up to about a second.
fn bucket_bounds() -> impl Iterator<Item = (u64, f64)> {
    (0..21).map(|k| {
        let us = 1u64 << k;
        (us, us as f64 / 1e6)
    })
}

/// Per-bucket counts (not cumulative: the encoder adds them up), the last one `+Inf`.
fn buckets(h: &crate::latency::Histogram) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    let mut below = 0;
    for (us, secs) in bucket_bounds() {
        let n = h.count_at_or_below_micros(us);
        out.push((secs, n - below));
        below = n;
    }
    out.push((f64::MAX, h.total() - below));
    out
}

/// The server-wide figures, under the lock (O(commands + replicas + databases)).
pub fn server_figures(shared: &Shared, st: &State, now_ms: i64) -> ServerFigures {
    let s = &st.stats;
    let mut commands: Vec<CommandFigures> = s
        .commands
        .values()
        .map(|c| CommandFigures {
            name: c.name,
            calls: c.calls,
            failed: c.failed,
            rejected: c.rejected,
            usec: c.usec,
            buckets: c.histogram.as_ref().map(|h| (buckets(h), h.total())),
        })
        .collect();
    commands.sort_by_key(|c| c.name);
    let (log_enabled, log_bytes, log_fsync) = match st.journal.log() {
        Some(l) => {
            let status = l.status.lock().map(|s| s.clone()).unwrap_or_default();
            let size = st.persist.base_file_size + status.incr_size;
            let times = l.fsync_times.lock().map(|t| t.clone()).unwrap_or_default();
            (true, size, Some((buckets(&times.histogram), times.histogram.total(), times.micros)))
        }
        None => (false, 0, None),
    };
    let r = &st.replication;
    let offset = r.offset();
    ServerFigures {
        taken_ms: now_ms,
        started_secs: now_ms as f64 / 1000.0 - shared.started.elapsed().as_secs_f64(),
        clients: st.clients.len() as u64,
        blocked_clients: st.clients.values().filter(|c| c.blocked).count() as u64,
        commands_processed: s.commands_processed,
        connections_received: s.connections_received,
        rejected_connections: s.rejected_connections,
        net_input_bytes: s.net_input_bytes,
        net_output_bytes: s.net_output_bytes,
        keys: st
            .engine
            .dbs()
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.is_empty())
            .map(|(i, d)| (i, d.len() as u64, d.expires_len() as u64))
            .collect(),
        expired_keys: st.engine.stats().expired_keys,
        hits: st.engine.stats().hits,
        misses: st.engine.stats().misses,
        used_memory: crate::alloc::allocated_bytes(),
        commands,
        errors: s.errors_by_code.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        slowlog_len: st.slowlog.len() as u64,
        slowlog_total: s.slowlog.count,
        log_enabled,
        log_bytes,
        log_fsync,
        replica: r.master.is_some(),
        repl_offset: offset,
        replicas: r
            .replicas
            .values()
            .map(|l| ReplicaFigures {
                addr: format!("{}:{}", l.ip, l.port),
                lag_bytes: offset.saturating_sub(l.ack_offset),
                ack_age_secs: (now_ms - l.ack_ms).max(0) as f64 / 1000.0,
            })
            .collect(),
        syncs: (r.syncs.full, r.syncs.partial_ok, r.syncs.partial_err),
    }
}

/// One page of the keyspace walk: from `(db, position)`, at most `keys` keys; the streams
/// met go into `out`. Returns where the next page starts (`None`: the walk is done).
pub fn page_from(
    st: &State,
    from: (usize, usize),
    now_ms: i64,
    consumers: bool,
    keys: usize,
    out: &mut Vec<StreamRow>,
) -> Option<(usize, usize)> {
    let dbs = st.engine.dbs();
    let (mut db, mut pos) = from;
    let mut budget = keys;
    while let Some(d) = dbs.get(db) {
        while budget > 0 {
            let Some((key, entry)) = d.key_at(pos) else { break };
            pos += 1;
            budget -= 1;
            if entry.is_expired(now_ms) {
                continue;
            }
            if let Value::Stream(s) = &entry.value {
                out.push(StreamRow { db, key: Bytes::copy_from_slice(key), m: s.metrics(now_ms, consumers) });
            }
        }
        if budget == 0 {
            return Some((db, pos));
        }
        db += 1;
        pos = 0;
    }
    None
}

/// One stream's row (with its consumers), if `key` of `db` holds a live stream; read as it
/// is, touching nothing (no expiry, not an access).
pub fn stream_row(st: &State, db: usize, key: &[u8], now_ms: i64) -> Option<StreamRow> {
    let entry = st.engine.dbs().get(db)?.get_raw(key)?;
    if entry.is_expired(now_ms) {
        return None;
    }
    match &entry.value {
        Value::Stream(s) => Some(StreamRow { db, key: Bytes::copy_from_slice(key), m: s.metrics(now_ms, true) }),
        _ => None,
    }
}

/// Take a snapshot: the server's figures, then the keyspace page by page, releasing the lock
/// between pages.
pub async fn collect(shared: &Shared) -> Snapshot {
    let (server, consumers) = {
        let st = shared.lock();
        let now = crate::clock::now_ms();
        (server_figures(shared, &st, now), st.config.get("metrics-consumers") == "yes")
    };
    let mut streams = Vec::new();
    let mut seen = HashSet::new();
    let mut at = Some((0, 0));
    let mut rows = Vec::new();
    while let Some(from) = at {
        at = {
            let st = shared.lock();
            page_from(&st, from, crate::clock::now_ms(), consumers, PAGE_KEYS, &mut rows)
        };
        // A key met twice (moved by a deletion between pages) keeps its first reading.
        streams.extend(rows.drain(..).filter(|r: &StreamRow| seen.insert((r.db, r.key.clone()))));
        tokio::task::yield_now().await;
    }
    Snapshot { server, streams, consumers }
}

// ------------------------------------------------------------------------------------------
// The Prometheus text format
// ------------------------------------------------------------------------------------------

/// A label value as the text format needs it: UTF-8 (other bytes replaced), with `\`, `"`
/// and newlines escaped (the encoder writes label values as given).
fn label(b: &[u8]) -> String {
    let text = String::from_utf8_lossy(b);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

type Labels = Vec<(&'static str, String)>;

/// A family's samples, written through the encoder.
struct Family<'a> {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    samples: Vec<(Labels, Sample<'a>)>,
}

enum Sample<'a> {
    Gauge(f64),
    Counter(f64),
    /// Buckets (upper bound, cumulative count), count, sum.
    Histogram(&'a [(f64, u64)], u64, f64),
    /// An info metric: its labels are everything, its value 1.
    Info,
}

impl<'a> Family<'a> {
    fn new(name: &'static str, help: &'static str, kind: MetricType) -> Family<'a> {
        Family { name, help, kind, samples: Vec::new() }
    }

    fn add(&mut self, labels: Labels, sample: Sample<'a>) {
        self.samples.push((labels, sample));
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        if self.samples.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(self.name, self.help, None, self.kind)?;
        // One sample without labels: written bare (`name value`, no `{}`).
        if let [(labels, sample)] = &self.samples[..] {
            if labels.is_empty() {
                return match sample {
                    Sample::Gauge(v) => ConstGauge::new(*v).encode(family),
                    Sample::Counter(v) => ConstCounter::new(*v).encode(family),
                    Sample::Histogram(b, count, sum) => {
                        family.encode_histogram::<prometheus_client::encoding::NoLabelSet>(*sum, *count, b, None)
                    }
                    Sample::Info => family.encode_info(labels),
                };
            }
        }
        for (labels, sample) in &self.samples {
            if let Sample::Info = sample {
                family.encode_info(labels)?;
                continue;
            }
            let m = family.encode_family(labels)?;
            match sample {
                Sample::Gauge(v) => ConstGauge::new(*v).encode(m)?,
                Sample::Counter(v) => ConstCounter::new(*v).encode(m)?,
                Sample::Histogram(b, count, sum) => {
                    let mut m = m;
                    m.encode_histogram::<prometheus_client::encoding::NoLabelSet>(*sum, *count, b, None)?
                }
                Sample::Info => {}
            }
        }
        Ok(())
    }
}

/// The snapshot in the Prometheus (OpenMetrics) text format, ending in `# EOF`.
pub fn render(snap: std::sync::Arc<Snapshot>) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(Collect(snap)));
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

/// The snapshot as the registry's one collector.
#[derive(Debug)]
struct Collect(std::sync::Arc<Snapshot>);

impl prometheus_client::collector::Collector for Collect {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        for f in families(&self.0) {
            f.encode(&mut encoder)?;
        }
        Ok(())
    }
}

fn families(snap: &Snapshot) -> Vec<Family<'_>> {
    use MetricType::{Counter, Gauge, Histogram};
    use Sample as S;
    let sv = &snap.server;
    let mut fams: Vec<Family> = Vec::new();
    let mut one = |name, help, kind, v: Sample<'static>| {
        let mut f = Family::new(name, help, kind);
        f.add(Vec::new(), v);
        fams.push(f);
    };
    one("rill_connected_clients", "Connected clients.", Gauge, S::Gauge(sv.clients as f64));
    one(
        "rill_blocked_clients",
        "Clients parked on keys (blocking reads and pops).",
        Gauge,
        S::Gauge(sv.blocked_clients as f64),
    );
    one("rill_commands_processed", "Commands run.", Counter, S::Counter(sv.commands_processed as f64));
    one("rill_connections_received", "Connections accepted.", Counter, S::Counter(sv.connections_received as f64));
    one(
        "rill_connections_rejected",
        "Connections refused at maxclients.",
        Counter,
        S::Counter(sv.rejected_connections as f64),
    );
    one("rill_net_input_bytes", "Bytes read from clients.", Counter, S::Counter(sv.net_input_bytes as f64));
    one("rill_net_output_bytes", "Bytes written to clients.", Counter, S::Counter(sv.net_output_bytes as f64));
    one("rill_expired_keys", "Keys removed by expiry.", Counter, S::Counter(sv.expired_keys as f64));
    one("rill_keyspace_hits", "Key lookups that found the key.", Counter, S::Counter(sv.hits as f64));
    one("rill_keyspace_misses", "Key lookups that did not find the key.", Counter, S::Counter(sv.misses as f64));
    one("rill_memory_used_bytes", "Bytes the server's allocator holds.", Gauge, S::Gauge(sv.used_memory as f64));
    one("rill_slowlog_length", "Entries in the slow log.", Gauge, S::Gauge(sv.slowlog_len as f64));
    one("rill_slowlog_commands", "Commands the slow log took.", Counter, S::Counter(sv.slowlog_total as f64));
    one(
        "rill_effect_log_enabled",
        "1 if the effect log (appendonly) is on.",
        Gauge,
        S::Gauge(f64::from(u8::from(sv.log_enabled))),
    );
    one("rill_effect_log_bytes", "Bytes of the effect log on disk.", Gauge, S::Gauge(sv.log_bytes as f64));
    one("rill_repl_replica", "1 if this server follows a primary.", Gauge, S::Gauge(f64::from(u8::from(sv.replica))));
    one("rill_repl_offset_bytes", "The replication offset.", Gauge, S::Gauge(sv.repl_offset as f64));
    one("rill_repl_connected_replicas", "Replicas attached.", Gauge, S::Gauge(sv.replicas.len() as f64));
    one("rill_repl_full_syncs", "Full resyncs served to replicas.", Counter, S::Counter(sv.syncs.0 as f64));
    let mut partial = Family::new("rill_repl_partial_syncs", "Partial resyncs asked for, by result.", Counter);
    partial.add(vec![("result", "ok".into())], S::Counter(sv.syncs.1 as f64));
    partial.add(vec![("result", "err".into())], S::Counter(sv.syncs.2 as f64));
    fams.push(partial);
    let mut lag =
        Family::new("rill_repl_replica_lag_bytes", "Bytes of the stream a replica has not acknowledged.", Gauge);
    let mut age =
        Family::new("rill_repl_replica_ack_age_seconds", "Seconds since a replica's last acknowledgement.", Gauge);
    for r in &sv.replicas {
        lag.add(vec![("replica", label(r.addr.as_bytes()))], S::Gauge(r.lag_bytes as f64));
        age.add(vec![("replica", label(r.addr.as_bytes()))], S::Gauge(r.ack_age_secs));
    }
    fams.extend([lag, age]);
    if let Some((b, count, micros)) = &sv.log_fsync {
        let mut f = Family::new(
            "rill_effect_log_fsync_duration_seconds",
            "How long each fsync of the effect log took.",
            Histogram,
        );
        f.add(Vec::new(), S::Histogram(b, *count, *micros as f64 / 1e6));
        fams.push(f);
    }
    let mut keys = Family::new("rill_keys", "Keys per database.", Gauge);
    let mut expiring = Family::new("rill_keys_expiring", "Keys with an expiry per database.", Gauge);
    for (db, n, e) in &sv.keys {
        keys.add(vec![("db", db.to_string())], S::Gauge(*n as f64));
        expiring.add(vec![("db", db.to_string())], S::Gauge(*e as f64));
    }
    fams.extend([keys, expiring]);
    let mut calls = Family::new("rill_command_calls", "Calls per command.", Counter);
    let mut failed = Family::new("rill_command_errors", "Calls that replied an error, per command.", Counter);
    let mut rejected = Family::new("rill_command_rejected", "Calls refused before running, per command.", Counter);
    let mut durations = Family::new(
        "rill_command_duration_seconds",
        "How long each call took, per command (latency-tracking).",
        Histogram,
    );
    for c in &sv.commands {
        let l = || vec![("cmd", c.name.to_string())];
        calls.add(l(), S::Counter(c.calls as f64));
        failed.add(l(), S::Counter(c.failed as f64));
        rejected.add(l(), S::Counter(c.rejected as f64));
        if let Some((b, count)) = &c.buckets {
            durations.add(l(), S::Histogram(b, *count, c.usec as f64 / 1e6));
        }
    }
    fams.extend([calls, failed, rejected, durations]);
    let mut errors = Family::new("rill_errors", "Error replies by their code.", Counter);
    for (code, n) in &sv.errors {
        errors.add(vec![("code", label(code.as_bytes()))], S::Counter(*n as f64));
    }
    fams.push(errors);

    streams(snap, &mut fams);
    process(&mut fams, sv);
    fams
}

fn streams<'a>(snap: &'a Snapshot, fams: &mut Vec<Family<'a>>) {
    use MetricType::{Counter, Gauge};
    use Sample as S;
    let mut length = Family::new("rill_stream_length", "Entries in the stream.", Gauge);
    let mut added = Family::new("rill_stream_entries_added", "Entries ever added to the stream.", Counter);
    let mut first =
        Family::new("rill_stream_first_entry_timestamp_seconds", "The time part of the first entry's ID.", Gauge);
    let mut last =
        Family::new("rill_stream_last_entry_timestamp_seconds", "The time part of the last entry's ID.", Gauge);
    let mut memory = Family::new("rill_stream_memory_bytes", "Estimated bytes the stream occupies.", Gauge);
    let mut groups = Family::new("rill_stream_groups", "Consumer groups of the stream.", Gauge);
    let mut g_lag = Family::new("rill_group_lag", "Entries not yet delivered to the group.", Gauge);
    let mut g_lag_s = Family::new(
        "rill_group_lag_seconds",
        "Age of the oldest entry not yet delivered to the group (by its ID).",
        Gauge,
    );
    let mut g_pending =
        Family::new("rill_group_pending", "Entries delivered to the group and not acknowledged.", Gauge);
    let mut g_nacked =
        Family::new("rill_group_nacked", "Pending entries released by XNACK, waiting to be delivered again.", Gauge);
    let mut g_oldest = Family::new(
        "rill_group_pending_oldest_idle_seconds",
        "How long the pending entry delivered longest ago has waited.",
        Gauge,
    );
    let mut g_consumers = Family::new("rill_group_consumers", "Consumers in the group.", Gauge);
    let mut g_delivered =
        Family::new("rill_group_deliveries", "New entries delivered (groups with a policy).", Counter);
    let mut g_redelivered =
        Family::new("rill_group_redeliveries", "Entries delivered again (groups with a policy).", Counter);
    let mut g_acked = Family::new("rill_group_acks", "Entries acknowledged (groups with a policy).", Counter);
    let mut g_handed =
        Family::new("rill_group_handed_back", "Entries handed back, by reason (groups with a policy).", Counter);
    let mut g_dead = Family::new(
        "rill_group_dead_letters",
        "Entries moved to the dead-letter stream (groups with a policy).",
        Counter,
    );
    let mut g_dead_fail = Family::new(
        "rill_group_dead_letter_failures",
        "Dead-letter moves that could not be done (groups with a policy).",
        Counter,
    );
    let mut g_expired = Family::new(
        "rill_group_consumers_expired",
        "Consumers removed by CONSUMERIDLE (groups with a policy).",
        Counter,
    );
    let mut c_pending =
        Family::new("rill_consumer_pending", "Entries the consumer owns (metrics-consumers yes).", Gauge);
    let mut c_idle = Family::new(
        "rill_consumer_idle_seconds",
        "Since the consumer last read or claimed (metrics-consumers yes).",
        Gauge,
    );
    for row in &snap.streams {
        let sl = || vec![("db", row.db.to_string()), ("stream", label(&row.key))];
        let m = &row.m;
        length.add(sl(), S::Gauge(m.length as f64));
        added.add(sl(), S::Counter(m.entries_added as f64));
        if let Some(ms) = m.first_entry_ms {
            first.add(sl(), S::Gauge(ms as f64 / 1000.0));
        }
        if let Some(ms) = m.last_entry_ms {
            last.add(sl(), S::Gauge(ms as f64 / 1000.0));
        }
        memory.add(sl(), S::Gauge(m.memory_bytes as f64));
        groups.add(sl(), S::Gauge(m.groups.len() as f64));
        for g in &m.groups {
            let gl = || {
                let mut l = sl();
                l.push(("group", label(&g.name)));
                l
            };
            if let Some(lag) = g.lag {
                g_lag.add(gl(), S::Gauge(lag as f64));
            }
            g_lag_s.add(gl(), S::Gauge(g.lag_ms as f64 / 1000.0));
            g_pending.add(gl(), S::Gauge(g.pending as f64));
            g_nacked.add(gl(), S::Gauge(g.nacked as f64));
            g_oldest.add(gl(), S::Gauge(g.oldest_pending_idle_ms.unwrap_or(0) as f64 / 1000.0));
            g_consumers.add(gl(), S::Gauge(g.consumers as f64));
            if let Some(c) = &g.counters {
                g_delivered.add(gl(), S::Counter(c.delivered as f64));
                g_redelivered.add(gl(), S::Counter(c.redelivered as f64));
                g_acked.add(gl(), S::Counter(c.acked as f64));
                for (reason, n) in [("deadline", c.handed_back), ("nack", c.nacked), ("closed", c.released_on_close)] {
                    let mut l = gl();
                    l.push(("reason", reason.to_string()));
                    g_handed.add(l, S::Counter(n as f64));
                }
                g_dead.add(gl(), S::Counter(c.dead_lettered as f64));
                g_dead_fail.add(gl(), S::Counter(c.dead_letter_failures as f64));
                g_expired.add(gl(), S::Counter(c.consumers_expired as f64));
            }
            for c in &g.consumer_details {
                let cl = || {
                    let mut l = gl();
                    l.push(("consumer", label(&c.name)));
                    l
                };
                c_pending.add(cl(), S::Gauge(c.pending as f64));
                c_idle.add(cl(), S::Gauge(c.idle_ms as f64 / 1000.0));
            }
        }
    }
    fams.extend([
        length,
        added,
        first,
        last,
        memory,
        groups,
        g_lag,
        g_lag_s,
        g_pending,
        g_nacked,
        g_oldest,
        g_consumers,
        g_delivered,
        g_redelivered,
        g_acked,
        g_handed,
        g_dead,
        g_dead_fail,
        g_expired,
        c_pending,
        c_idle,
    ]);
}

/// The standard `process_*` metrics and `rill_build_info`.
fn process(fams: &mut Vec<Family>, sv: &ServerFigures) {
    use MetricType::{Counter, Gauge};
    let (user, sys) = crate::alloc::cpu_seconds();
    let mut one = |name, help, kind, v: Sample<'static>| {
        let mut f = Family::new(name, help, kind);
        f.add(Vec::new(), v);
        fams.push(f);
    };
    one("process_cpu_seconds", "User and system CPU time spent, seconds.", Counter, Sample::Counter(user + sys));
    one(
        "process_resident_memory_bytes",
        "Resident memory size, bytes.",
        Gauge,
        Sample::Gauge(crate::alloc::rss_bytes() as f64),
    );
    if let Some(v) = virtual_memory_bytes() {
        one("process_virtual_memory_bytes", "Virtual memory size, bytes.", Gauge, Sample::Gauge(v as f64));
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        one("process_open_fds", "Open file descriptors.", Gauge, Sample::Gauge(fds.count() as f64));
    }
    if let (_, Some(max)) = crate::listen::open_files_limit() {
        one("process_max_fds", "The open-files limit.", Gauge, Sample::Gauge(max as f64));
    }
    one(
        "process_start_time_seconds",
        "Start time of the process, Unix seconds.",
        Gauge,
        Sample::Gauge(sv.started_secs.floor()),
    );
    let mut build = Family::new("rill_build", "The running build (its value is 1).", MetricType::Info);
    build.add(vec![("version", env!("CARGO_PKG_VERSION").to_string())], Sample::Info);
    fams.push(build);
}

fn virtual_memory_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    Some(pages * 4096)
}
