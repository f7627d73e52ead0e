//! INFO text: `# Section` headers, `field:value` lines ending in CRLF, sections separated by an
//! empty line — the fields clients, tools and Redis' own test runner read.

use crate::alloc;
use crate::cmd::connection::REDIS_VERSION;
use crate::state::{Shared, State};
use std::fmt::Write as _;

const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];
const ALL_EXTRA: &[&str] = &["commandstats", "latencystats"];
/// Every section in the order Redis prints them.
const ORDER: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// Render INFO for the requested sections (lower case; empty = default).
pub fn render(shared: &Shared, st: &State, requested: &[String], now_ms: i64) -> String {
    let mut wanted: Vec<&str> = Vec::new();
    if requested.is_empty() {
        wanted.extend(DEFAULT);
    }
    for r in requested {
        match r.as_str() {
            "default" => wanted.extend(DEFAULT),
            "all" | "everything" => {
                wanted.extend(DEFAULT);
                wanted.extend(ALL_EXTRA);
            }
            other => {
                if let Some(s) = DEFAULT.iter().chain(ALL_EXTRA).find(|s| **s == other) {
                    wanted.push(s);
                }
            }
        }
    }
    // Redis' order, whatever the order asked in.
    let wanted: Vec<&str> = ORDER.iter().copied().filter(|s| wanted.contains(s)).collect();
    let mut out = String::new();
    for (i, section) in wanted.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        section_text(&mut out, section, shared, st, now_ms);
    }
    out
}

macro_rules! line {
    ($out:expr, $($arg:tt)*) => {{
        let _ = write!($out, $($arg)*);
        $out.push_str("\r\n");
    }};
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}G", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.2}M", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else {
        format!("{bytes}B")
    }
}

fn section_text(out: &mut String, section: &str, shared: &Shared, st: &State, now_ms: i64) {
    match section {
        "server" => {
            let up = shared.started.elapsed().as_secs();
            line!(out, "# Server");
            line!(out, "redis_version:{REDIS_VERSION}");
            line!(out, "rill_version:{}", env!("CARGO_PKG_VERSION"));
            line!(out, "redis_git_sha1:00000000");
            line!(out, "redis_git_dirty:0");
            line!(out, "redis_build_id:0");
            line!(out, "redis_mode:standalone");
            line!(out, "os:{} {}", std::env::consts::OS, std::env::consts::ARCH);
            line!(out, "arch_bits:{}", usize::BITS);
            line!(out, "multiplexing_api:epoll");
            line!(out, "process_id:{}", std::process::id());
            line!(out, "run_id:{}", shared.run_id);
            line!(out, "tcp_port:{}", shared.port);
            line!(out, "server_time_usec:{}", now_ms * 1000);
            line!(out, "uptime_in_seconds:{up}");
            line!(out, "uptime_in_days:{}", up / 86400);
            line!(out, "hz:{}", st.config.get("hz"));
            line!(out, "configured_hz:{}", st.config.get("hz"));
            line!(out, "executable:{}", std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
            line!(out, "config_file:{}", st.config.file.clone().unwrap_or_default());
            // Only while a shutdown waits for its replicas, as in Redis.
            if let Some(ms) = st.shutdown.remaining_ms(now_ms) {
                line!(out, "shutdown_in_milliseconds:{ms}");
            }
        }
        "clients" => {
            line!(out, "# Clients");
            line!(out, "connected_clients:{}", st.clients.len());
            line!(out, "maxclients:{}", st.config.get("maxclients"));
            line!(
                out,
                "blocked_clients:{}",
                st.blocked.len() + st.blocked.copies_len() + st.pause.held.len() + st.shutdown.blocked.len()
            );
            line!(out, "tracking_clients:0");
            line!(out, "pubsub_clients:{}", st.pubsub.client_count());
            line!(out, "watching_clients:{}", st.engine.watching_clients());
            line!(out, "clients_in_timeout_table:{}", st.blocked.len());
            line!(out, "total_watched_keys:{}", st.engine.watched_key_count());
            line!(out, "total_blocking_keys:{}", st.blocked.key_count());
            line!(out, "total_blocking_keys_on_nokey:{}", st.blocked.nokey_key_count());
        }
        "memory" => {
            let used = alloc::allocated_bytes();
            let rss = alloc::rss_bytes();
            let max: u64 = st.config.get("maxmemory").parse().unwrap_or(0);
            line!(out, "# Memory");
            line!(out, "used_memory:{used}");
            line!(out, "used_memory_human:{}", human(used));
            line!(out, "used_memory_rss:{rss}");
            line!(out, "used_memory_rss_human:{}", human(rss));
            line!(out, "used_memory_peak:{}", alloc::peak_bytes());
            line!(out, "used_memory_peak_human:{}", human(alloc::peak_bytes()));
            line!(out, "used_memory_dataset:{used}");
            line!(out, "maxmemory:{max}");
            line!(out, "maxmemory_human:{}", human(max));
            line!(out, "maxmemory_policy:{}", st.config.get("maxmemory-policy"));
            line!(out, "mem_fragmentation_ratio:{:.2}", if used > 0 { rss as f64 / used as f64 } else { 1.0 });
            line!(out, "mem_allocator:system");
            line!(out, "lazyfree_pending_objects:0");
        }
        "persistence" => {
            let p = &st.persist;
            let ok = |b: bool| if b { "ok" } else { "err" };
            line!(out, "# Persistence");
            line!(out, "loading:{}", u8::from(p.loading));
            line!(out, "async_loading:0");
            line!(out, "rdb_changes_since_last_save:{}", st.engine.dirty().saturating_sub(p.dirty_at_save));
            line!(out, "rdb_bgsave_in_progress:{}", u8::from(p.bgsave_in_progress));
            line!(out, "rdb_last_save_time:{}", st.last_save_unix);
            line!(out, "rdb_last_bgsave_status:{}", ok(p.last_bgsave_ok));
            line!(out, "rdb_saves:{}", p.saves);
            let log = st.journal.log();
            let status = log.and_then(|l| l.status.lock().ok().map(|s| s.clone())).unwrap_or_default();
            line!(out, "aof_enabled:{}", u8::from(log.is_some()));
            line!(out, "aof_rewrite_in_progress:{}", u8::from(p.rewrite_in_progress));
            line!(out, "aof_rewrite_scheduled:{}", u8::from(p.rewrite_scheduled));
            line!(out, "aof_last_rewrite_time_sec:{}", p.last_rewrite_secs);
            line!(out, "aof_last_bgrewrite_status:{}", ok(p.last_rewrite_ok));
            line!(out, "aof_rewrites:{}", p.rewrites);
            line!(out, "aof_last_write_status:{}", ok(!log.is_some_and(|l| l.failed())));
            if let Some(l) = log {
                line!(out, "aof_current_size:{}", p.base_file_size + status.incr_size);
                line!(out, "aof_base_size:{}", p.rewrite_base_size);
                line!(out, "aof_buffer_length:{}", st.journal.appended().saturating_sub(l.written()));
                // Written to the OS and not yet covered by an fsync (`always`: none once a reply
                // went out; `everysec`: at most about a second's worth). Under `no` rill never
                // fsyncs: nothing waits for one.
                let pending = match st.config.get("appendfsync") {
                    "no" => 0,
                    _ => l.written().saturating_sub(l.synced()),
                };
                line!(out, "aof_pending_fsync_bytes:{pending}");
                line!(out, "aof_delayed_fsync:{}", status.delayed_fsync);
                line!(out, "aof_fsync_policy:{}", st.config.get("appendfsync"));
                if let Some(e) = &status.last_error {
                    line!(out, "aof_last_write_error:{e}");
                }
            }
        }
        "stats" => {
            let s = &st.stats;
            line!(out, "# Stats");
            line!(out, "total_connections_received:{}", s.connections_received);
            line!(out, "total_commands_processed:{}", s.commands_processed);
            line!(out, "instantaneous_ops_per_sec:0");
            line!(out, "total_net_input_bytes:{}", s.net_input_bytes);
            line!(out, "total_net_output_bytes:{}", s.net_output_bytes);
            line!(out, "rejected_connections:{}", s.rejected_connections);
            let syncs = st.replication.syncs;
            line!(out, "sync_full:{}", syncs.full);
            line!(out, "sync_partial_ok:{}", syncs.partial_ok);
            line!(out, "sync_partial_err:{}", syncs.partial_err);
            line!(out, "expired_keys:{}", st.engine.stats().expired_keys);
            line!(out, "evicted_keys:0");
            line!(out, "keyspace_hits:{}", st.engine.stats().hits);
            line!(out, "keyspace_misses:{}", st.engine.stats().misses);
            line!(out, "pubsub_channels:{}", st.pubsub.channel_count());
            line!(out, "pubsub_patterns:{}", st.pubsub.pattern_count());
            line!(out, "pubsubshard_channels:{}", st.pubsub.shard_channel_count());
            line!(out, "total_error_replies:{}", s.error_replies);
            line!(out, "total_reads_processed:{}", s.commands_processed);
            line!(out, "client_query_buffer_limit_disconnections:{}", s.query_buffer_limit_disconnections);
            line!(out, "client_output_buffer_limit_disconnections:{}", s.output_buffer_limit_disconnections);
            line!(out, "slowlog_commands_count:{}", s.slowlog.count);
            line!(out, "slowlog_commands_time_ms_max:{:.2}", s.slowlog.micros_max as f64 / 1000.0);
            line!(out, "slowlog_commands_time_ms_sum:{:.2}", s.slowlog.micros_sum as f64 / 1000.0);
            // Redis prints these last in the section, in this order.
            line!(out, "acl_access_denied_auth:{}", s.acl.denied_auth);
            line!(out, "acl_access_denied_cmd:{}", s.acl.denied_cmd);
            line!(out, "acl_access_denied_key:{}", s.acl.denied_key);
            line!(out, "acl_access_denied_channel:{}", s.acl.denied_channel);
            line!(out, "acl_access_denied_tls_cert:{}", s.acl.denied_tls_cert);
        }
        "replication" => {
            let r = &st.replication;
            line!(out, "# Replication");
            match &r.master {
                None => line!(out, "role:master"),
                Some(m) => {
                    let up = m.state == crate::replication::LinkStatus::Connected;
                    line!(out, "role:slave");
                    line!(out, "master_host:{}", m.host);
                    line!(out, "master_port:{}", m.port);
                    line!(out, "master_link_status:{}", if up { "up" } else { "down" });
                    let io = if m.last_io_ms > 0 { (now_ms - m.last_io_ms).max(0) / 1000 } else { -1 };
                    line!(out, "master_last_io_seconds_ago:{io}");
                    line!(out, "master_sync_in_progress:{}", u8::from(m.state == crate::replication::LinkStatus::Sync));
                    line!(out, "slave_read_repl_offset:{}", r.offset());
                    line!(out, "slave_repl_offset:{}", r.offset());
                    if !up {
                        let down = if m.down_since_ms > 0 { (now_ms - m.down_since_ms).max(0) / 1000 } else { -1 };
                        line!(out, "master_link_down_since_seconds:{down}");
                    }
                    let priority = st.config.get("replica-priority");
                    line!(out, "slave_priority:{}", if priority.is_empty() { "100" } else { priority });
                    line!(out, "slave_read_only:{}", u8::from(st.config.get("replica-read-only") != "no"));
                    line!(out, "replica_announced:{}", u8::from(st.config.get("replica-announced") != "no"));
                }
            }
            line!(out, "connected_slaves:{}", r.replicas.len());
            for (i, link) in r.replicas.values().enumerate() {
                let state = match link.state {
                    crate::replication::primary::LinkState::SendBulk => "send_bulk",
                    crate::replication::primary::LinkState::Online => "online",
                };
                let lag = (now_ms - link.ack_ms).max(0) / 1000;
                line!(
                    out,
                    "slave{i}:ip={},port={},state={state},offset={},lag={lag}",
                    link.ip,
                    link.port,
                    link.ack_offset
                );
            }
            line!(out, "master_failover_state:{}", r.failover.phase.word());
            line!(out, "master_replid:{}", r.replid);
            line!(out, "master_replid2:{}", r.replid2);
            line!(out, "master_repl_offset:{}", r.offset());
            line!(out, "second_repl_offset:{}", r.second_offset);
            line!(out, "repl_backlog_active:{}", u8::from(r.backlog.is_some()));
            line!(out, "repl_backlog_size:{}", st.config.get_i64("repl-backlog-size"));
            // Redis shows 0 for both while it has no backlog.
            let (first, histlen) = r.with_backlog(|b| (b.first_byte_offset(), b.histlen())).unwrap_or((0, 0));
            line!(out, "repl_backlog_first_byte_offset:{first}");
            line!(out, "repl_backlog_histlen:{histlen}");
        }
        "cpu" => {
            let (user, sys) = alloc::cpu_seconds();
            line!(out, "# CPU");
            line!(out, "used_cpu_sys:{sys:.6}");
            line!(out, "used_cpu_user:{user:.6}");
        }
        "modules" => line!(out, "# Modules"),
        "errorstats" => {
            line!(out, "# Errorstats");
            for (code, n) in &st.stats.errors_by_code {
                line!(out, "errorstat_{code}:count={n}");
            }
        }
        "cluster" => {
            line!(out, "# Cluster");
            line!(out, "cluster_enabled:0");
        }
        "keyspace" => {
            line!(out, "# Keyspace");
            for (i, db) in st.engine.dbs().iter().enumerate() {
                if !db.is_empty() {
                    line!(out, "db{i}:keys={},expires={},avg_ttl=0,subexpiry=0", db.len(), db.expires_len());
                }
            }
        }
        "commandstats" => {
            line!(out, "# Commandstats");
            let mut stats: Vec<_> = st.stats.commands.values().collect();
            stats.sort_by_key(|s| s.name);
            for s in stats {
                let name = s.name;
                let per = if s.calls > 0 { s.usec as f64 / s.calls as f64 } else { 0.0 };
                let _ = write!(
                    out,
                    "cmdstat_{}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
                    name, s.calls, s.usec, s.rejected, s.failed
                );
                // Only for a command the slow log took, as Redis.
                if s.slowlog.count > 0 {
                    let _ = write!(
                        out,
                        ",slowlog_count={},slowlog_time_ms_sum={:.2},slowlog_time_ms_max={:.2}",
                        s.slowlog.count,
                        s.slowlog.micros_sum as f64 / 1000.0,
                        s.slowlog.micros_max as f64 / 1000.0
                    );
                }
                out.push_str("\r\n");
            }
        }
        "latencystats" => {
            line!(out, "# Latencystats");
            if st.hot.latency_tracking {
                let percentiles = st.config.percentiles();
                let mut stats: Vec<_> = st.stats.commands.values().filter(|s| s.histogram.is_some()).collect();
                stats.sort_by_key(|s| s.name);
                for s in stats {
                    let Some(h) = &s.histogram else { continue };
                    let values: Vec<String> = percentiles
                        .iter()
                        .map(|&p| {
                            let us = h.value_at_percentile(p) as f64 / 1000.0;
                            format!("p{}={us:.3}", crate::config::trim_double(p))
                        })
                        .collect();
                    line!(out, "latency_percentiles_usec_{}:{}", s.name, values.join(","));
                }
            }
        }
        _ => {}
    }
}
