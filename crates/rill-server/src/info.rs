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
    "threads",
    "stats",
    "replication",
    "cpu",
    "hotkeys",
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
    "threads",
    "stats",
    "replication",
    "cpu",
    "hotkeys",
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

/// The memory figures INFO memory and MEMORY STATS report.
#[derive(Debug, Clone, Copy)]
pub struct MemoryFigures {
    /// Bytes allocated now.
    pub used: u64,
    /// Resident set size.
    pub rss: u64,
    /// Most bytes ever allocated.
    pub peak: u64,
    /// Allocated when start-up ended.
    pub startup: u64,
    /// Normal clients' buffers.
    pub clients_normal: u64,
    /// Of what normal clients' output holds, the payloads referenced rather than copied
    /// (shared with the values they come from), and of those the ones only the output still
    /// holds (CLIENT LIST `omem-shared`, `omem-unshared`, summed).
    pub clients_normal_shared: u64,
    /// See `clients_normal_shared`.
    pub clients_normal_unshared: u64,
    /// Replicas' buffers.
    pub clients_replicas: u64,
    /// The replication backlog.
    pub backlog: u64,
    /// The log's records not yet written.
    pub aof_buffer: u64,
    /// All that is not the data.
    pub overhead: u64,
    /// `used` less `overhead`.
    pub dataset: u64,
    /// `maxmemory`.
    pub max: u64,
}

/// What the memory holds, as far as rill can tell: what is not the data is the clients'
/// buffers, the replication backlog, the log's unwritten records, and what start-up took.
pub fn memory_figures(st: &State) -> MemoryFigures {
    let used = alloc::allocated_bytes();
    let rss = alloc::rss_bytes();
    let peak = alloc::peak_bytes().max(used);
    let startup = alloc::startup_bytes().min(used);
    let max: u64 = st.config.get("maxmemory").parse().unwrap_or(0);
    let (mut clients_normal, mut clients_replicas) = (0, 0);
    let (mut clients_normal_shared, mut clients_normal_unshared) = (0, 0);
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    for c in st.clients.values() {
        let held = c.mem.total() + c.push.queued_bytes();
        match c.kind {
            crate::state::ClientKind::Replica | crate::state::ClientKind::RdbChannel => clients_replicas += held,
            _ => {
                clients_normal += held;
                clients_normal_shared += load(&c.mem.out_shared) + load(&c.mem.exec_shared);
                clients_normal_unshared += load(&c.mem.out_unshared);
            }
        }
    }
    let backlog = st.replication.with_backlog(|b| b.histlen() as u64).unwrap_or(0);
    let aof_buffer = st.journal.log().map_or(0, |l| st.journal.appended().saturating_sub(l.written()));
    let overhead = startup + clients_normal + clients_replicas + backlog + aof_buffer;
    let dataset = used.saturating_sub(overhead);
    MemoryFigures {
        used,
        rss,
        peak,
        startup,
        clients_normal,
        clients_normal_shared,
        clients_normal_unshared,
        clients_replicas,
        backlog,
        aof_buffer,
        overhead,
        dataset,
        max,
    }
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
            line!(out, "monotonic_clock:{}", crate::clock::describe());
            line!(out, "multiplexing_api:epoll");
            // Rust's atomics; no C compiler built rill.
            line!(out, "atomicvar_api:rust-std");
            line!(out, "gcc_version:0.0.0");
            line!(out, "process_id:{}", std::process::id());
            line!(out, "process_supervised:no");
            line!(out, "run_id:{}", shared.run_id);
            line!(out, "tcp_port:{}", shared.port());
            line!(out, "server_time_usec:{}", now_ms * 1000);
            line!(out, "uptime_in_seconds:{up}");
            line!(out, "uptime_in_days:{}", up / 86400);
            line!(out, "hz:{}", st.config.get("hz"));
            line!(out, "configured_hz:{}", st.config.get("hz"));
            // Redis' LRU clock: seconds, in 24 bits.
            line!(out, "lru_clock:{}", (now_ms / 1000) & ((1 << 24) - 1));
            line!(out, "executable:{}", std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
            line!(out, "config_file:{}", st.config.file.clone().unwrap_or_default());
            line!(out, "io_threads_active:0");
            let binds: Vec<String> = st.config.get("bind").split_whitespace().map(|b| format!("bind={b}")).collect();
            line!(out, "listener0:name=tcp,{},port={}", binds.join(","), shared.port());
            let tls_port = shared.ports.tls.port();
            if tls_port != 0 {
                line!(out, "listener1:name=tls,{},port={tls_port}", binds.join(","));
            }
            // Only while a shutdown waits for its replicas, as in Redis.
            if let Some(ms) = st.shutdown.remaining_ms(now_ms) {
                line!(out, "shutdown_in_milliseconds:{ms}");
            }
        }
        "clients" => {
            line!(out, "# Clients");
            line!(out, "connected_clients:{}", st.clients.len());
            line!(out, "cluster_connections:0");
            line!(out, "maxclients:{}", st.config.get("maxclients"));
            let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
            let max_in = st.clients.values().map(|c| load(&c.mem.qbuf)).max().unwrap_or(0);
            let max_out =
                st.clients.values().map(|c| c.mem.output_fields().2 + c.push.queued_bytes()).max().unwrap_or(0);
            line!(out, "client_recent_max_input_buffer:{max_in}");
            line!(out, "client_recent_max_output_buffer:{max_out}");
            line!(
                out,
                "blocked_clients:{}",
                st.blocked.len() + st.blocked.copies_len() + st.pause.held.len() + st.shutdown.blocked.len()
            );
            line!(out, "tracking_clients:{}", st.tracking.client_count());
            line!(out, "pubsub_clients:{}", st.pubsub.client_count());
            line!(out, "watching_clients:{}", st.engine.watching_clients());
            line!(out, "clients_in_timeout_table:{}", st.blocked.len());
            line!(out, "total_watched_keys:{}", st.engine.watched_key_count());
            line!(out, "total_blocking_keys:{}", st.blocked.key_count());
            line!(out, "total_blocking_keys_on_nokey:{}", st.blocked.nokey_key_count());
        }
        "memory" => {
            let MemoryFigures {
                used,
                rss,
                peak,
                startup,
                clients_normal,
                clients_normal_shared,
                clients_normal_unshared,
                clients_replicas,
                backlog,
                aof_buffer,
                overhead,
                dataset,
                max,
            } = memory_figures(st);
            let perc = |a: u64, b: u64| if b > 0 { a as f64 * 100.0 / b as f64 } else { 0.0 };
            let total_memory = alloc::total_system_memory();
            line!(out, "# Memory");
            line!(out, "used_memory:{used}");
            line!(out, "used_memory_human:{}", human(used));
            line!(out, "used_memory_rss:{rss}");
            line!(out, "used_memory_rss_human:{}", human(rss));
            line!(out, "used_memory_peak:{peak}");
            line!(out, "used_memory_peak_human:{}", human(peak));
            line!(out, "used_memory_peak_time:{}", alloc::peak_time_secs());
            line!(out, "used_memory_peak_perc:{:.2}%", perc(used, peak));
            line!(out, "used_memory_overhead:{overhead}");
            line!(out, "used_memory_startup:{startup}");
            line!(out, "used_memory_dataset:{dataset}");
            line!(out, "used_memory_dataset_perc:{:.2}%", perc(dataset, used.saturating_sub(startup)));
            // rill counts its own allocations over the system allocator: what it asked for is
            // what it holds, as far as it can tell.
            line!(out, "allocator_allocated:{used}");
            line!(out, "allocator_active:{used}");
            line!(out, "allocator_resident:{rss}");
            line!(out, "allocator_muzzy:0");
            line!(out, "total_system_memory:{total_memory}");
            line!(out, "total_system_memory_human:{}", human(total_memory));
            // Scripts: the EVAL VM and cache, the function VM and libraries.
            let (lua, scripts) = (st.scripts.vm_memory(), st.scripts.cache_memory());
            let f = &st.scripts.functions;
            let (fvm, fmem, (nlibs, nfuncs)) = (f.vm_memory(), f.overhead(), f.counts());
            line!(out, "used_memory_lua:{lua}");
            line!(out, "used_memory_vm_eval:{lua}");
            line!(out, "used_memory_lua_human:{}", human(lua as u64));
            line!(out, "used_memory_scripts_eval:{scripts}");
            line!(out, "number_of_cached_scripts:{}", st.scripts.cached());
            line!(out, "number_of_functions:{nfuncs}");
            line!(out, "number_of_libraries:{nlibs}");
            line!(out, "used_memory_vm_functions:{fvm}");
            line!(out, "used_memory_vm_total:{}", lua + fvm);
            line!(out, "used_memory_vm_total_human:{}", human((lua + fvm) as u64));
            line!(out, "used_memory_functions:{fmem}");
            line!(out, "used_memory_scripts:{}", scripts + fmem);
            line!(out, "used_memory_scripts_human:{}", human((scripts + fmem) as u64));
            line!(out, "maxmemory:{max}");
            line!(out, "maxmemory_human:{}", human(max));
            line!(out, "maxmemory_policy:{}", st.config.get("maxmemory-policy"));
            line!(out, "allocator_frag_ratio:1.00");
            line!(out, "allocator_frag_bytes:0");
            line!(out, "allocator_rss_ratio:{:.2}", if used > 0 { rss as f64 / used as f64 } else { 1.0 });
            line!(out, "allocator_rss_bytes:{}", rss.saturating_sub(used));
            line!(out, "rss_overhead_ratio:1.00");
            line!(out, "rss_overhead_bytes:0");
            line!(out, "mem_fragmentation_ratio:{:.2}", if used > 0 { rss as f64 / used as f64 } else { 1.0 });
            line!(out, "mem_fragmentation_bytes:{}", i128::from(rss) - i128::from(used));
            line!(out, "mem_not_counted_for_evict:{}", crate::evict::not_counted(st));
            line!(out, "mem_replication_backlog:{backlog}");
            line!(out, "mem_total_replication_buffers:{backlog}");
            line!(out, "mem_replica_full_sync_buffer:0");
            line!(out, "mem_clients_slaves:{clients_replicas}");
            line!(out, "mem_clients_normal:{clients_normal}");
            line!(out, "mem_clients_normal_shared:{clients_normal_shared}");
            line!(out, "mem_clients_normal_unshared:{clients_normal_unshared}");
            line!(out, "mem_cluster_links:0");
            line!(out, "mem_aof_buffer:{aof_buffer}");
            line!(out, "mem_allocator:system");
            line!(out, "mem_overhead_db_hashtable_rehashing:0");
            line!(out, "active_defrag_running:0");
            line!(out, "lazyfree_pending_objects:{}", st.lazyfree.pending());
            line!(out, "lazyfreed_objects:{}", st.lazyfree.freed());
        }
        "persistence" => {
            let p = &st.persist;
            let ok = |b: bool| if b { "ok" } else { "err" };
            line!(out, "# Persistence");
            line!(out, "loading:{}", u8::from(p.loading));
            line!(out, "async_loading:{}", u8::from(p.async_loading));
            // No fork: a snapshot is a copy-on-write view of the keyspace inside the process
            // (docs/REPLICATION.md), so these fork figures stay 0.
            line!(out, "current_cow_peak:0");
            line!(out, "current_cow_size:0");
            line!(out, "current_cow_size_age:0");
            line!(out, "current_fork_perc:0.00");
            line!(out, "current_save_keys_processed:0");
            line!(out, "current_save_keys_total:0");
            line!(out, "rdb_changes_since_last_save:{}", st.engine.dirty().saturating_sub(p.dirty_at_save));
            // A replica's snapshot being made (and, streamed, sent) counts as Redis' RDB child
            // for replicas does.
            let for_replica =
                st.replication.replicas.values().any(|l| l.state == crate::replication::primary::LinkState::WaitBgsave);
            line!(
                out,
                "rdb_bgsave_in_progress:{}",
                u8::from(p.bgsave_in_progress || p.replica_snapshots > 0 || for_replica)
            );
            line!(out, "rdb_last_save_time:{}", st.last_save_unix);
            line!(out, "rdb_last_bgsave_status:{}", ok(p.last_bgsave_ok));
            line!(out, "rdb_last_bgsave_time_sec:-1");
            line!(out, "rdb_current_bgsave_time_sec:-1");
            line!(out, "rdb_saves:{}", p.saves);
            line!(out, "rdb_last_cow_size:0");
            line!(out, "rdb_last_load_keys_expired:{}", p.last_load_keys_expired);
            line!(out, "rdb_last_load_keys_loaded:{}", p.last_load_keys_loaded);
            let log = st.journal.log();
            let status = log.and_then(|l| l.status.lock().ok().map(|s| s.clone())).unwrap_or_default();
            line!(out, "aof_enabled:{}", u8::from(log.is_some()));
            line!(out, "aof_rewrite_in_progress:{}", u8::from(p.rewrite_in_progress));
            line!(out, "aof_rewrite_scheduled:{}", u8::from(p.rewrite_scheduled));
            line!(out, "aof_last_rewrite_time_sec:{}", p.last_rewrite_secs);
            line!(out, "aof_current_rewrite_time_sec:-1");
            line!(out, "aof_last_bgrewrite_status:{}", ok(p.last_rewrite_ok));
            line!(out, "aof_rewrites:{}", p.rewrites);
            line!(out, "aof_rewrites_consecutive_failures:{}", u8::from(!p.last_rewrite_ok));
            line!(out, "aof_last_write_status:{}", ok(!log.is_some_and(|l| l.failed())));
            line!(out, "aof_last_cow_size:0");
            line!(out, "module_fork_in_progress:0");
            line!(out, "module_fork_last_cow_size:0");
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
        "threads" => {
            // rill's requests run on its runtime's threads, not Redis' I/O threads: one line,
            // as a Redis without I/O threads prints it.
            line!(out, "# Threads");
            let s = &st.stats;
            line!(
                out,
                "io_thread_0:clients={},reads={},writes={}",
                st.clients.len(),
                s.commands_processed,
                s.commands_processed
            );
        }
        "stats" => {
            let s = &st.stats;
            let inst = &s.instantaneous;
            line!(out, "# Stats");
            line!(out, "total_connections_received:{}", s.connections_received);
            line!(out, "total_commands_processed:{}", s.commands_processed);
            line!(out, "instantaneous_ops_per_sec:{}", inst.rate(0) as u64);
            line!(out, "total_net_input_bytes:{}", s.net_input_bytes);
            line!(out, "total_net_output_bytes:{}", s.net_output_bytes);
            line!(out, "total_net_repl_input_bytes:{}", s.net_repl_input_bytes);
            line!(out, "total_net_repl_output_bytes:{}", s.net_repl_output_bytes);
            line!(out, "instantaneous_input_kbps:{:.2}", inst.rate(1) / 1024.0);
            line!(out, "instantaneous_output_kbps:{:.2}", inst.rate(2) / 1024.0);
            line!(out, "instantaneous_input_repl_kbps:{:.2}", inst.rate(3) / 1024.0);
            line!(out, "instantaneous_output_repl_kbps:{:.2}", inst.rate(4) / 1024.0);
            line!(out, "rejected_connections:{}", s.rejected_connections);
            let syncs = st.replication.syncs;
            line!(out, "sync_full:{}", syncs.full);
            line!(out, "sync_partial_ok:{}", syncs.partial_ok);
            line!(out, "sync_partial_err:{}", syncs.partial_err);
            line!(out, "expired_subkeys:{}", st.engine.stats().expired_subkeys);
            // Newer than Redis 8.2, which has only the total.
            line!(out, "expired_subkeys_active:{}", st.engine.stats().expired_subkeys_active);
            line!(out, "expired_keys:{}", st.engine.stats().expired_keys);
            line!(out, "expired_keys_active:{}", st.engine.stats().expired_keys_active);
            line!(out, "expired_stale_perc:0.00");
            line!(out, "expired_time_cap_reached_count:0");
            line!(out, "expire_cycle_cpu_milliseconds:{}", s.expire_cycle_us / 1000);
            line!(out, "evicted_keys:{}", st.engine.stats().evicted_keys);
            line!(out, "evicted_clients:{}", st.stats.evicted_clients);
            line!(out, "evicted_scripts:{}", st.scripts.evicted);
            let current = crate::evict::current_exceeded_ms(st);
            line!(out, "total_eviction_exceeded_time:{}", st.stats.eviction_exceeded_us / 1000 + current);
            line!(out, "current_eviction_exceeded_time:{current}");
            line!(out, "keyspace_hits:{}", st.engine.stats().hits);
            line!(out, "keyspace_misses:{}", st.engine.stats().misses);
            line!(out, "pubsub_channels:{}", st.pubsub.channel_count());
            line!(out, "pubsub_patterns:{}", st.pubsub.pattern_count());
            line!(out, "pubsubshard_channels:{}", st.pubsub.shard_channel_count());
            line!(out, "latest_fork_usec:0");
            line!(out, "total_forks:0");
            line!(out, "migrate_cached_sockets:{}", st.migrate.len());
            line!(out, "slave_expires_tracked_keys:0");
            line!(out, "active_defrag_hits:0");
            line!(out, "active_defrag_misses:0");
            line!(out, "active_defrag_key_hits:0");
            line!(out, "active_defrag_key_misses:0");
            line!(out, "total_active_defrag_time:0");
            line!(out, "current_active_defrag_time:0");
            line!(out, "tracking_total_keys:{}", st.tracking.key_count());
            line!(out, "tracking_total_items:{}", st.tracking.item_count());
            line!(out, "tracking_total_prefixes:{}", st.tracking.prefix_count());
            line!(out, "unexpected_error_replies:{}", s.unexpected_error_replies);
            line!(out, "total_error_replies:{}", s.error_replies);
            line!(out, "dump_payload_sanitizations:0");
            line!(out, "total_reads_processed:{}", s.commands_processed);
            line!(out, "total_writes_processed:{}", s.commands_processed);
            line!(out, "io_threaded_reads_processed:0");
            line!(out, "io_threaded_writes_processed:0");
            line!(out, "io_threaded_total_prefetch_batches:0");
            line!(out, "io_threaded_total_prefetch_entries:0");
            line!(out, "client_query_buffer_limit_disconnections:{}", s.query_buffer_limit_disconnections);
            line!(out, "client_output_buffer_limit_disconnections:{}", s.output_buffer_limit_disconnections);
            line!(out, "reply_buffer_shrinks:0");
            line!(out, "reply_buffer_expands:0");
            // Redis' event-loop figures: rill has no single event loop; its cron ticks stand in.
            line!(out, "eventloop_cycles:0");
            line!(out, "eventloop_duration_sum:0");
            line!(out, "eventloop_duration_cmd_sum:0");
            line!(out, "instantaneous_eventloop_cycles_per_sec:0");
            line!(out, "instantaneous_eventloop_duration_usec:0");
            line!(out, "slowlog_commands_count:{}", s.slowlog.count);
            line!(out, "slowlog_commands_time_ms_max:{:.2}", s.slowlog.micros_max as f64 / 1000.0);
            line!(out, "slowlog_commands_time_ms_sum:{:.2}", s.slowlog.micros_sum as f64 / 1000.0);
            // Redis prints these last in the section, in this order.
            let acl = shared.acl.log.lock().unwrap_or_else(|p| p.into_inner()).stats;
            line!(out, "acl_access_denied_auth:{}", acl.denied_auth);
            line!(out, "acl_access_denied_cmd:{}", acl.denied_cmd);
            line!(out, "acl_access_denied_key:{}", acl.denied_key);
            line!(out, "acl_access_denied_channel:{}", acl.denied_channel);
            line!(out, "acl_access_denied_tls_cert:{}", acl.denied_tls_cert);
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
                    line!(out, "slave_read_repl_offset:{}", r.offset() + m.read_ahead);
                    line!(out, "slave_repl_offset:{}", r.offset());
                    // The stream buffered while a snapshot arrives over an RDB channel.
                    let buffered = &m.sync_buffer;
                    line!(
                        out,
                        "replica_full_sync_buffer_size:{}",
                        buffered.size.load(std::sync::atomic::Ordering::Relaxed)
                    );
                    line!(
                        out,
                        "replica_full_sync_buffer_peak:{}",
                        buffered.peak.load(std::sync::atomic::Ordering::Relaxed)
                    );
                    line!(out, "master_current_sync_attempts:{}", m.current_sync_attempts);
                    line!(out, "master_total_sync_attempts:{}", m.sync_attempts);
                    if m.state == crate::replication::LinkStatus::Sync {
                        let read = m.transfer.read.load(std::sync::atomic::Ordering::Relaxed);
                        let (size, read) = (m.transfer_size, i64::try_from(read).unwrap_or(i64::MAX));
                        let last_io_ms = m.transfer.last_io_ms.load(std::sync::atomic::Ordering::Relaxed);
                        let perc = if size != 0 { read as f64 / size as f64 * 100.0 } else { 0.0 };
                        line!(out, "master_sync_total_bytes:{size}");
                        line!(out, "master_sync_read_bytes:{read}");
                        line!(out, "master_sync_left_bytes:{}", size - read);
                        line!(out, "master_sync_perc:{perc:.2}");
                        let io = if last_io_ms > 0 { now_ms / 1000 - last_io_ms / 1000 } else { now_ms / 1000 };
                        line!(out, "master_sync_last_io_seconds_ago:{io}");
                    }
                    let secs_since = |ms: i64| if ms > 0 { now_ms / 1000 - ms / 1000 } else { -1 };
                    if up {
                        line!(out, "master_link_up_since_seconds:{}", secs_since(m.up_since_ms));
                        line!(out, "master_client_io_thread:0");
                    } else {
                        line!(out, "master_link_down_since_seconds:{}", secs_since(m.down_since_ms));
                    }
                    line!(out, "total_disconnect_time_sec:{}", m.total_disconnect_secs(now_ms));
                    let priority = st.config.get("replica-priority");
                    line!(out, "slave_priority:{}", if priority.is_empty() { "100" } else { priority });
                    line!(out, "slave_read_only:{}", u8::from(st.config.get("replica-read-only") != "no"));
                    line!(out, "replica_announced:{}", u8::from(st.config.get("replica-announced") != "no"));
                }
            }
            line!(out, "connected_slaves:{}", r.replicas.len());
            for (i, link) in r.replicas.values().enumerate() {
                let state = link.state.word();
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
            line!(out, "used_cpu_sys_children:0.000000");
            line!(out, "used_cpu_user_children:0.000000");
            // No main thread does all the work: the process's figures.
            line!(out, "used_cpu_sys_main_thread:{sys:.6}");
            line!(out, "used_cpu_user_main_thread:{user:.6}");
        }
        "hotkeys" => {
            line!(out, "# Hotkeys");
            if let Some((active, update_ms)) = st.hotkeys.summary(now_ms) {
                line!(out, "hotkeys-tracking-active:{}", u8::from(active));
                line!(out, "hotkeys-cmd-cpu-time:{update_ms}");
            }
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
                    line!(
                        out,
                        "db{i}:keys={},expires={},avg_ttl=0,subexpiry={}",
                        db.len(),
                        db.expires_len(),
                        db.subexpiry_len()
                    );
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
