//! Server-wide state behind one lock: the engine, the configuration, the connected clients,
//! the clients blocked on keys, and the counters INFO reports.
//!
//! Why one lock: commands must be atomic with respect to each other (as Redis' single thread
//! makes them), and blocked clients must be served in the same critical section as the write
//! that readied their key. Connection tasks take the lock once per batch of pipelined requests,
//! so the lock is held for microseconds and socket I/O runs outside it on every core.

use crate::blocking::Blocked;
use crate::config::Config;
use bytes::Bytes;
use rill_engine::command::CommandTable;
use rill_engine::Engine;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::{watch, Notify};

pub use crate::clock::{now_ms, now_us};

/// What a connection shares about itself with the rest of the server (CLIENT LIST, KILL, INFO).
#[derive(Debug)]
pub struct ClientInfo {
    /// Unique, increasing id.
    pub id: u64,
    /// Peer address `ip:port`.
    pub addr: String,
    /// Local address `ip:port`.
    pub laddr: String,
    /// Socket file descriptor (for CLIENT LIST `fd=`).
    pub fd: i64,
    /// CLIENT SETNAME.
    pub name: Bytes,
    /// CLIENT SETINFO LIB-NAME.
    pub lib_name: Bytes,
    /// CLIENT SETINFO LIB-VER.
    pub lib_ver: Bytes,
    /// Connection time, Unix ms.
    pub created_ms: i64,
    /// Last command time, Unix ms.
    pub last_interaction_ms: i64,
    /// Selected database.
    pub db: usize,
    /// 2 or 3.
    pub resp: u8,
    /// Commands queued in MULTI, or −1 outside MULTI.
    pub multi: i64,
    /// Full name of the last command run.
    pub last_cmd: &'static str,
    /// Commands run to their end (a blocked one counts when it is released).
    pub tot_cmds: u64,
    /// Bytes read from this client.
    pub net_in: u64,
    /// Reads from its socket (CLIENT LIST `read-events`).
    pub read_events: u64,
    /// Commands per batch of input, summed, and the batches that held any (CLIENT LIST
    /// `avg-pipeline-len-sum`, `avg-pipeline-len-cnt`).
    pub pipeline_len_sum: u64,
    pub pipeline_len_cnt: u64,
    /// Bytes written to this client.
    pub net_out: u64,
    /// CLIENT NO-EVICT.
    pub no_evict: bool,
    /// CLIENT NO-TOUCH.
    pub no_touch: bool,
    /// Whether the connection has been told to close (CLIENT KILL).
    pub killed: bool,
    /// Wakes the connection task when it is killed.
    pub kill: Arc<Notify>,
    /// Blocked on keys right now.
    pub blocked: bool,
    /// Its buffers, as its task last reported them (CLIENT LIST `qbuf`, `omem`, ...).
    pub mem: Arc<crate::client_limits::ClientMemory>,
    /// What the connection is to the server (CLIENT LIST/KILL `TYPE`, output limit class).
    pub kind: ClientKind,
    /// Its pub/sub subscriptions (CLIENT LIST `sub`, `psub`, `ssub`); the registry is
    /// `State::pubsub`.
    pub subs: crate::pubsub::SubscriptionCounts,
    /// Where other tasks hand it output it did not ask for (`src/push.rs`).
    pub push: crate::push::PushSender,
    /// In MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: bool,
    /// The name of the user it is authenticated as (CLIENT LIST `user`, CLIENT KILL USER).
    pub user: bytes::Bytes,
    /// The primary's client on a replica: a handle on its socket (a duplicate descriptor), so
    /// that CLIENT KILL ends the link at once (`cmd/connection.rs::close_client`).
    pub link_socket: Option<Arc<std::net::TcpStream>>,
    /// Its CLIENT TRACKING state as CLIENT LIST shows it (the mode is `State::tracking`'s).
    pub tracking: crate::tracking::Shown,
}

/// What a connection is to the server, besides what it subscribed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientKind {
    /// A client (MONITOR included, as in Redis).
    #[default]
    Normal,
    /// A replica attached to this server: a connection that PSYNC or SYNC made its link.
    Replica,
    /// A replica's RDB channel (`repl-rdb-channel`): a replica too, carrying its snapshot
    /// (CLIENT LIST flags `SC`).
    RdbChannel,
    /// The connection to this server's primary (rill's runs as a task of its own, with no
    /// client record, so none yet).
    Master,
}

impl ClientInfo {
    /// Tell the connection's task to close (CLIENT KILL and the like): wherever it waits, it
    /// wakes (`kill` for every wait, the push signal for its wait for input) and ends.
    pub fn kill_now(&mut self) {
        self.killed = true;
        self.kill.notify_one();
        self.push.wake();
    }

    /// Redis' client type: the kind, else `pubsub` while subscribed to anything.
    pub fn client_type(&self) -> ClientType {
        match self.kind {
            ClientKind::Master => ClientType::Master,
            ClientKind::Replica | ClientKind::RdbChannel => ClientType::Replica,
            ClientKind::Normal if self.subs.total() > 0 => ClientType::Pubsub,
            ClientKind::Normal => ClientType::Normal,
        }
    }

    /// The output limit class its type falls in (a primary's connection is limited as a
    /// normal client, as Redis does).
    pub fn class(&self) -> crate::client_limits::ClientClass {
        use crate::client_limits::ClientClass;
        match self.client_type() {
            ClientType::Replica => ClientClass::Replica,
            ClientType::Pubsub => ClientClass::Pubsub,
            ClientType::Normal | ClientType::Master => ClientClass::Normal,
        }
    }
}

/// Redis' client types (CLIENT LIST/KILL `TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientType {
    /// `normal`
    Normal,
    /// `replica` / `slave`
    Replica,
    /// `pubsub`
    Pubsub,
    /// `master`
    Master,
}

impl ClientType {
    /// The type a `TYPE` argument names (any case), as Redis reads it.
    pub fn by_name(name: &str) -> Option<ClientType> {
        match name.to_ascii_lowercase().as_str() {
            "normal" => Some(ClientType::Normal),
            "slave" | "replica" => Some(ClientType::Replica),
            "pubsub" => Some(ClientType::Pubsub),
            "master" => Some(ClientType::Master),
            _ => None,
        }
    }
}

/// Counters INFO stats reports.
#[derive(Debug, Default)]
pub struct Stats {
    /// `evicted_clients`: closed by client eviction (`maxmemory-clients`).
    pub evicted_clients: u64,
    /// `total_connections_received`
    pub connections_received: u64,
    /// `rejected_connections`
    pub rejected_connections: u64,
    /// `total_commands_processed`
    pub commands_processed: u64,
    /// `total_net_input_bytes`
    pub net_input_bytes: u64,
    /// `total_net_output_bytes`
    pub net_output_bytes: u64,
    /// `total_error_replies`
    pub error_replies: u64,
    /// `unexpected_error_replies`: errors this server answered its primary's stream (or a
    /// replica) with, each a sign the copies differ (`replica::apply`).
    pub unexpected_error_replies: u64,
    /// `client_query_buffer_limit_disconnections`
    pub query_buffer_limit_disconnections: u64,
    /// `client_output_buffer_limit_disconnections`
    pub output_buffer_limit_disconnections: u64,
    /// `errorstat_<CODE>:count=n`
    pub errors_by_code: BTreeMap<String, u64>,
    /// Per command: calls, usec, rejected, failed (`cmdstat_<name>`), keyed by the address of
    /// its static spec: hashing a pointer is cheaper than hashing and comparing the name on
    /// every command.
    pub commands: HashMap<usize, CommandStat, foldhash::fast::RandomState>,
    /// `slowlog_commands_*`: what the slow log took.
    pub slowlog: crate::slowlog::Totals,
    /// The `instantaneous_*` rates, sampled by the cron.
    pub instantaneous: Instantaneous,
    /// `expire_cycle_cpu_milliseconds`: time active expiry took, µs.
    pub expire_cycle_us: u64,
    /// `total_net_repl_input_bytes`: the replication stream received (a replica).
    pub net_repl_input_bytes: u64,
    /// `total_net_repl_output_bytes`: the replication stream sent, to every replica.
    pub net_repl_output_bytes: u64,
    /// The replication offset the cron last saw (to count the two above).
    pub repl_offset_seen: u64,
    /// `total_eviction_exceeded_time`: µs the memory stayed over `maxmemory` (stretches that
    /// ended; `evict.rs`).
    pub eviction_exceeded_us: u64,
}

/// Samples kept per rate (Redis keeps 16, taken every 100 ms).
const RATE_SAMPLES: usize = 16;

/// INFO's `instantaneous_*` figures: per-second rates averaged over the last 16 samples, a
/// sample being the counter's growth since the one before (Redis' way, so the figures move
/// alike).
#[derive(Debug, Default, Clone)]
pub struct Instantaneous {
    /// Per rate (ops, input bytes, output bytes, replication input, replication output): the
    /// samples, per second.
    samples: [[f64; RATE_SAMPLES]; 5],
    next: usize,
    /// The counters and the time (ms) at the last sample.
    last: Option<(i64, [u64; 5])>,
}

impl Instantaneous {
    /// Take a sample of the five counters at `now_ms`.
    pub fn sample(&mut self, now_ms: i64, counters: [u64; 5]) {
        if let Some((then, before)) = self.last {
            let secs = (now_ms - then) as f64 / 1000.0;
            if secs <= 0.0 {
                return;
            }
            for (i, (now, was)) in counters.iter().zip(before).enumerate() {
                if let Some(slot) = self.samples.get_mut(i).and_then(|s| s.get_mut(self.next)) {
                    *slot = now.saturating_sub(was) as f64 / secs;
                }
            }
            self.next = (self.next + 1) % RATE_SAMPLES;
        }
        self.last = Some((now_ms, counters));
    }

    /// The average of rate `i`'s samples.
    pub fn rate(&self, i: usize) -> f64 {
        self.samples.get(i).map_or(0.0, |s| s.iter().sum::<f64>() / RATE_SAMPLES as f64)
    }
}

/// The `acl_access_denied_*` counters of INFO stats (kept by the ACL log, `acl::AclLog`). As
/// in Redis, CONFIG RESETSTAT keeps them.
#[derive(Debug, Default, Clone, Copy)]
pub struct AclStats {
    /// `acl_access_denied_auth`: failed AUTH and HELLO AUTH.
    pub denied_auth: u64,
    /// `acl_access_denied_cmd` (0 until rill has ACL users).
    pub denied_cmd: u64,
    /// `acl_access_denied_key` (0 until rill has ACL users).
    pub denied_key: u64,
    /// `acl_access_denied_channel` (0 until rill has ACL users).
    pub denied_channel: u64,
    /// `acl_access_denied_tls_cert` (0: rill has no TLS).
    pub denied_tls_cert: u64,
}

/// One `cmdstat_` line, and the command's latency histogram.
#[derive(Debug, Default, Clone)]
pub struct CommandStat {
    /// Full command name.
    pub name: &'static str,
    /// Calls.
    pub calls: u64,
    /// Total microseconds.
    pub usec: u64,
    /// Rejected before running.
    pub rejected: u64,
    /// Ran and replied an error.
    pub failed: u64,
    /// What the slow log took of it (`slowlog_*` fields, shown once it has any).
    pub slowlog: crate::slowlog::Totals,
    /// Its durations (`latency-tracking`), made on the first one.
    pub histogram: Option<Box<crate::latency::Histogram>>,
}

impl Stats {
    /// The counters of `spec`, created on first use.
    pub fn command(&mut self, spec: &'static rill_engine::command::CommandSpec) -> &mut CommandStat {
        let key = spec as *const rill_engine::command::CommandSpec as usize;
        self.commands.entry(key).or_insert_with(|| CommandStat { name: spec.name, ..CommandStat::default() })
    }

    /// Count an error reply by its code.
    pub fn count_error(&mut self, text: &[u8]) {
        self.error_replies += 1;
        let code = text.split(|&c| c == b' ').next().unwrap_or(b"ERR");
        let code = String::from_utf8_lossy(code).into_owned();
        *self.errors_by_code.entry(code).or_default() += 1;
    }
}

/// Connected clients by id ([`State::clients`]).
pub type Clients = HashMap<u64, ClientInfo, std::hash::BuildHasherDefault<IdHasher>>;

/// Hashes a client id (a counter) by one multiplication: the high bits, which the table
/// compares first, then differ for consecutive ids.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Everything behind the lock.
#[derive(Debug)]
pub struct State {
    /// The keyspace.
    pub engine: Engine,
    /// The running configuration.
    pub config: Config,
    /// Connected clients by id, in no order (CLIENT LIST sorts them): a batch looks its own
    /// client up several times, and a hash lookup is a few instructions where a B-tree of
    /// 50 clients costs about 60 (`bench/p1.sh --instructions`).
    pub clients: Clients,
    /// Clients blocked on keys.
    pub blocked: Blocked,
    /// Counters.
    pub stats: Stats,
    /// Last successful save, Unix seconds.
    pub last_save_unix: i64,
    /// Whether active expiry runs (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: bool,
    /// Parameters read on every request batch, kept parsed (updated by CONFIG SET).
    pub hot: HotConfig,
    /// The effect journal: the open unit of effects, the log writer and the other sinks.
    pub journal: Journal,
    /// Snapshot and rewrite status.
    pub persist: crate::persist::rewrite::Persist,
    /// Replication: the stream's history ID and offsets, the backlog.
    pub replication: crate::replication::Replication,
    /// Pub/sub: who is subscribed to what.
    pub pubsub: crate::pubsub::PubSub,
    /// Client-side caching: who tracks which keys (`tracking.rs`).
    pub tracking: crate::tracking::Tracking,
    /// MIGRATE's cached connections to its targets.
    pub migrate: crate::cmd::migrate::Sockets,
    /// CLIENT PAUSE and a failover's pause of writes, and the clients they hold.
    pub pause: crate::pause::Pause,
    /// A shutdown waiting for its replicas or finishing, and the SHUTDOWN callers it blocks.
    pub shutdown: crate::shutdown::Shutdown,
    /// Wakes the policy timer (`run.rs`) when a group policy's earliest due moved earlier.
    pub policy_wake: std::sync::Arc<tokio::sync::Notify>,
    /// SLOWLOG's entries.
    pub slowlog: crate::slowlog::SlowLog,
    /// The connections in MONITOR mode.
    pub monitors: crate::monitor::Monitors,
    /// The latency monitor's events (LATENCY LATEST, HISTORY, ...).
    pub latency: crate::latency::Monitor,
    /// HOTKEYS' tracking session.
    pub hotkeys: crate::hotkeys::HotKeys,
    /// Scripts: the Lua VM and the script cache (`script/`).
    pub scripts: crate::script::Scripts,
    /// Eviction (`evict.rs`): the OOM state a command started with, the background task's wake.
    pub eviction: crate::evict::Eviction,
    /// The thread that frees what deletions set aside (`lazyfree.rs`).
    pub lazyfree: crate::lazyfree::LazyFreer,
    /// Told when what the last unit's flush set aside is freed, if its caller waits for it
    /// (taken by `dispatch::execute`).
    pub free_wait: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl State {
    /// Forget client `id` (its connection ended). The table gives memory back as clients
    /// leave (a hash table keeps its size otherwise: 10,000 connections gone would leave
    /// megabytes behind), halving once it is a quarter full, so the cost stays constant per
    /// removal.
    pub fn remove_client(&mut self, id: u64) -> Option<ClientInfo> {
        let gone = self.clients.remove(&id);
        if self.clients.capacity() > 64 && self.clients.len() * 4 < self.clients.capacity() {
            self.clients.shrink_to(self.clients.len() * 2);
        }
        gone
    }

    /// The state of a server started with `config`: an empty keyspace, no clients, no log
    /// (start-up opens it after loading).
    pub fn new(config: Config) -> State {
        let mut engine_config = rill_engine::EngineConfig {
            databases: config.get_i64("databases").max(1) as usize,
            stream_node_max_entries: config.get_i64("stream-node-max-entries"),
            stream_node_max_bytes: config.get_i64("stream-node-max-bytes"),
            stream_idmp_duration_secs: config.get_i64("stream-idmp-duration").max(1) as u64,
            stream_idmp_maxsize: config.get_i64("stream-idmp-maxsize").max(1) as u64,
            object: Default::default(),
        };
        for name in rill_engine::types::object::ObjectConfig::DIRECTIVES {
            engine_config.object.set(name, config.get(name), config.get_i64(name));
        }
        let mut engine = Engine::new(engine_config);
        engine.set_subkey_events(HotConfig::from(&config).notify.subkeys());
        engine.set_lazy_free(HotConfig::from(&config).lazy);
        let replication = crate::replication::Replication::new(crate::run::run_id());
        replication.set_lazy_server_del(HotConfig::from(&config).lazy.server_del);
        State {
            hot: HotConfig::from(&config),
            engine,
            config,
            clients: Clients::default(),
            blocked: Blocked::default(),
            stats: Stats::default(),
            last_save_unix: now_ms() / 1000,
            active_expire: true,
            journal: Journal::default(),
            replication,
            pubsub: crate::pubsub::PubSub::default(),
            tracking: crate::tracking::Tracking::default(),
            migrate: Default::default(),
            pause: crate::pause::Pause::default(),
            shutdown: crate::shutdown::Shutdown::default(),
            policy_wake: Default::default(),
            slowlog: Default::default(),
            monitors: Default::default(),
            latency: Default::default(),
            hotkeys: Default::default(),
            scripts: Default::default(),
            eviction: Default::default(),
            lazyfree: Default::default(),
            free_wait: None,
            persist: crate::persist::rewrite::Persist {
                last_rewrite_ok: true,
                last_bgsave_ok: true,
                last_rewrite_secs: -1,
                ..Default::default()
            },
        }
    }

    /// Ask every replica to acknowledge its offset now (`REPLCONF GETACK *` into the stream)
    /// rather than at its next second, unless a pause keeps the offset still (the replicas' own
    /// ACKs come anyway). For whoever waits on the replicas' ACKs: WAIT, a shutdown, a failover.
    pub fn request_replica_acks(&mut self, now_ms: i64) {
        if self.replication.replicas.is_empty() || self.pause.actions(now_ms).any(crate::pause::Actions::REPLICA) {
            return;
        }
        self.journal.stream_only(&[
            Bytes::from_static(b"REPLCONF"),
            Bytes::from_static(b"GETACK"),
            Bytes::from_static(b"*"),
        ]);
    }

    /// Close the current unit of effects and hand it to the journal's sinks; returns the log
    /// offset a reply must wait for.
    pub fn commit_effects(&mut self, now_ms: i64) -> u64 {
        self.journal.commit(now_ms)
    }

    /// After an engine command ran: its explicit effects if it emitted them (`explicit`),
    /// otherwise, if it is a write that changed the keyspace (`changed`: its
    /// [`rill_engine::Outcome`] counted changes, or the handler asked to be propagated anyway,
    /// `CallCtx::propagate`), the command itself — after the expiry deletions it caused.
    /// The one place the logging rule of `rill_engine::effect` is applied. (Server commands
    /// never change the keyspace, so they are never logged.)
    pub fn record_command(
        &mut self,
        effects: &mut rill_engine::effect::EffectBuf,
        explicit: bool,
        changed: bool,
        spec: &rill_engine::command::CommandSpec,
        db: usize,
        args: &[Bytes],
    ) {
        self.collect_effects(effects);
        if !explicit && changed && spec.logged_when_changed() {
            // Under its own name, not the one `rename-command` gave it (see Shared::log_table).
            let own = spec.name.split('|').next().unwrap_or(spec.name);
            match args.split_first() {
                Some((name, rest)) if !name.eq_ignore_ascii_case(own.as_bytes()) => {
                    let renamed: Vec<Bytes> =
                        std::iter::once(Bytes::from_static(own.as_bytes())).chain(rest.iter().cloned()).collect();
                    self.journal.push_command(db, &renamed);
                }
                _ => self.journal.push_command(db, args),
            }
        }
    }

    /// Move the engine's expiry deletions and a command's explicit effects into the current
    /// unit.
    pub fn collect_effects(&mut self, ctx_effects: &mut rill_engine::effect::EffectBuf) {
        if self.engine.has_expired() {
            let unlink = self.hot.lazy.expire;
            for (db, key) in self.engine.take_expired() {
                self.journal.push_deletion(db, &key, unlink);
            }
            // Hash fields removed by expiry, as Redis propagates them: one HDEL per field (a
            // unit of several is one MULTI / EXEC for a replica, as Redis wraps them).
            for (db, key, fields) in self.engine.take_expired_fields() {
                for field in fields {
                    self.journal.push_command(db, &[Bytes::from_static(b"HDEL"), key.clone(), field]);
                }
            }
        }
        self.journal.push(ctx_effects);
    }
}

/// The journal of this server: its log is `aof::Log`.
pub type Journal = crate::journal::Journal<crate::aof::Log>;

/// Configuration values the connection loop reads per batch, parsed once.
#[derive(Debug, Clone, Copy)]
pub struct HotConfig {
    /// `proto-max-bulk-len`.
    pub max_bulk_len: usize,
    /// `timeout` in seconds (0: never).
    pub idle_timeout_secs: u64,
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory-policy`.
    pub eviction: rill_engine::EvictionPolicy,
    /// `maxmemory-samples`.
    pub maxmemory_samples: usize,
    /// `maxmemory-eviction-tenacity`.
    pub eviction_tenacity: u32,
    /// `replica-ignore-maxmemory`: a replica evicts nothing.
    pub replica_ignore_maxmemory: bool,
    /// `client-output-buffer-limit`.
    pub output_limits: crate::client_limits::OutputLimits,
    /// `client-query-buffer-limit` in bytes.
    pub query_buffer_limit: u64,
    /// `maxmemory-clients` in bytes (a percentage resolved against `maxmemory`; 0: none).
    pub maxmemory_clients: u64,
    /// `min-replicas-to-write` (0: writes need no replica).
    pub min_replicas_to_write: usize,
    /// `min-replicas-max-lag` in seconds.
    pub min_replicas_max_lag: i64,
    /// `notify-keyspace-events`.
    pub notify: crate::notify::Notify,
    /// `slowlog-*`.
    pub slowlog: crate::slowlog::Limits,
    /// `latency-tracking`: per-command histograms kept.
    pub latency_tracking: bool,
    /// `latency-monitor-threshold` in ms (0: the monitor is off).
    pub latency_threshold_ms: u64,
    /// `busy-reply-threshold` (`lua-time-limit`) in ms (0: never busy).
    pub busy_reply_threshold_ms: i64,
    /// `script-memory-limit` in bytes.
    pub script_memory_limit: usize,
    /// The `lazyfree-lazy-*` settings: the engine frees in the background by them, and
    /// `expire`, `eviction` and `server_del` also log and send those deletions as `UNLINK`
    /// (`server_del` through `Replication::lazy_server_del`, read by the backlog).
    pub lazy: rill_engine::LazyFree,
    /// `tracking-table-max-keys` (0: no limit).
    pub tracking_table_max_keys: usize,
}

impl HotConfig {
    /// Read from the configuration.
    pub fn from(config: &crate::config::Config) -> HotConfig {
        HotConfig {
            max_bulk_len: usize::try_from(config.get_i64("proto-max-bulk-len")).unwrap_or(usize::MAX),
            idle_timeout_secs: u64::try_from(config.get_i64("timeout")).unwrap_or(0),
            maxmemory: u64::try_from(config.get_i64("maxmemory")).unwrap_or(0),
            eviction: rill_engine::EvictionPolicy::parse(config.get("maxmemory-policy")).unwrap_or_default(),
            maxmemory_samples: usize::try_from(config.get_i64("maxmemory-samples")).unwrap_or(5),
            eviction_tenacity: u32::try_from(config.get_i64("maxmemory-eviction-tenacity")).unwrap_or(10),
            replica_ignore_maxmemory: config.get("replica-ignore-maxmemory") != "no",
            output_limits: crate::client_limits::OutputLimits::parse(config.get("client-output-buffer-limit")),
            query_buffer_limit: u64::try_from(config.get_i64("client-query-buffer-limit")).unwrap_or(u64::MAX),
            maxmemory_clients: {
                let v = config.get("maxmemory-clients");
                match v.strip_suffix('%') {
                    Some(p) => {
                        let max: u64 = config.get("maxmemory").parse().unwrap_or(0);
                        max.saturating_mul(p.parse().unwrap_or(0)) / 100
                    }
                    None => v.parse().unwrap_or(0),
                }
            },
            min_replicas_to_write: usize::try_from(config.get_i64("min-replicas-to-write")).unwrap_or(0),
            min_replicas_max_lag: config.get_i64("min-replicas-max-lag"),
            notify: crate::notify::Notify::from_letters(config.keyspace_event_letters()),
            slowlog: crate::slowlog::Limits::from(config),
            latency_tracking: config.get("latency-tracking") != "no",
            latency_threshold_ms: u64::try_from(config.get_i64("latency-monitor-threshold")).unwrap_or(0),
            busy_reply_threshold_ms: config.get_i64("busy-reply-threshold"),
            script_memory_limit: usize::try_from(config.get_i64("script-memory-limit")).unwrap_or(usize::MAX),
            lazy: lazy_free(config),
            tracking_table_max_keys: usize::try_from(config.get_i64("tracking-table-max-keys")).unwrap_or(usize::MAX),
        }
    }
}

/// The `lazyfree-lazy-*` settings.
fn lazy_free(config: &crate::config::Config) -> rill_engine::LazyFree {
    let on = |name| config.get(name) == "yes";
    rill_engine::LazyFree {
        user_del: on("lazyfree-lazy-user-del"),
        server_del: on("lazyfree-lazy-server-del"),
        expire: on("lazyfree-lazy-expire"),
        eviction: on("lazyfree-lazy-eviction"),
        user_flush: on("lazyfree-lazy-user-flush"),
    }
}

/// What every task shares.
#[derive(Debug)]
pub struct Shared {
    state: Mutex<State>,
    /// The command table clients use (immutable after start-up; `rename-command` applied).
    pub table: CommandTable,
    /// Every command under its own name: what the log is written and replayed with.
    pub log_table: CommandTable,
    /// Process start.
    pub started: Instant,
    /// 40 hex characters, new each start.
    pub run_id: String,
    /// The listening sockets: the Redis port and the HTTP port (`listen::Ports`).
    pub ports: crate::listen::Ports,
    /// Set to true to stop the server.
    pub shutdown: watch::Sender<bool>,
    /// Closed while a long script holds the lock: connections look at it before they take the
    /// lock, and answer `-BUSY` instead (`src/busy.rs`).
    pub busy: Arc<crate::busy::BusyGate>,
    /// The TLS configuration new TLS connections handshake with (`tls.rs`).
    pub tls: crate::tls::Tls,
    /// ACL users and log, readable without the state lock (`src/acl`).
    pub acl: Arc<crate::acl::Registry>,
    /// Next client id.
    next_id: std::sync::atomic::AtomicU64,
    /// This value's own `Arc`, for background work started from a command.
    me: std::sync::OnceLock<std::sync::Weak<Shared>>,
}

impl Shared {
    /// New shared state.
    pub fn new(state: State, table: CommandTable, log_table: CommandTable, port: u16, run_id: String) -> Shared {
        let (shutdown, _) = watch::channel(false);
        let acl = Arc::new(crate::acl::Registry::new(&log_table));
        Shared {
            tls: Default::default(),
            acl,
            state: Mutex::new(state),
            table,
            log_table,
            started: Instant::now(),
            run_id,
            ports: crate::listen::Ports {
                redis: crate::listen::Port::at(port),
                http: Default::default(),
                tls: Default::default(),
            },
            shutdown,
            busy: Default::default(),
            next_id: std::sync::atomic::AtomicU64::new(1),
            me: std::sync::OnceLock::new(),
        }
    }

    /// The Redis port listened on now (`CONFIG SET port` changes it; 0: none).
    pub fn port(&self) -> u16 {
        self.ports.redis.port()
    }

    /// Wrap in an `Arc` that [`Shared::arc`] can hand out again.
    pub fn into_arc(self) -> Arc<Shared> {
        let arc = Arc::new(self);
        let _ = arc.me.set(Arc::downgrade(&arc));
        arc
    }

    /// The `Arc` this value lives in.
    pub fn arc(&self) -> Option<Arc<Shared>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    /// Take the lock. It is never found poisoned: a panic aborts the process before the
    /// panicking thread releases it (main.rs, `crash_on_panic`), since a command that panicked
    /// may have left the state half-changed. Should a poisoned lock show up anyway (a build
    /// without that hook), the process ends here rather than serve that state.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(_) => {
                tracing::error!("the state lock is poisoned: a panic left the state half-changed; aborting");
                std::process::abort()
            }
        }
    }

    /// Take the lock from a task without ever blocking its runtime thread on a running script:
    /// while the busy gate is not open (a script holds the lock) it waits for the gate; a lock
    /// held by an ordinary batch (microseconds) is retried after yielding. For the background
    /// tasks (accepting connections, the cron, the policy timer), which would otherwise stall
    /// a runtime thread for a long script's whole run.
    pub async fn lock_async(&self) -> MutexGuard<'_, State> {
        let mut tries = 0u32;
        loop {
            if !self.busy.is_open() {
                self.busy.opened().await;
            }
            if let Some(g) = self.try_lock() {
                return g;
            }
            tries += 1;
            if tries < 64 {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    }

    /// [`Shared::lock_async`], but `None` as soon as a script holds the lock (it started, or
    /// the gate is not open): for a caller with something else to do meanwhile.
    pub async fn lock_unless_script(&self) -> Option<MutexGuard<'_, State>> {
        let mut tries = 0u32;
        loop {
            if !self.busy.is_open() || self.busy.script_started() {
                return None;
            }
            if let Some(g) = self.try_lock() {
                return Some(g);
            }
            tries += 1;
            if tries < 64 {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    }

    /// Take the lock if nobody holds it.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::WouldBlock) => None,
            Err(std::sync::TryLockError::Poisoned(_)) => Some(self.lock()),
        }
    }

    /// A fresh client id.
    pub fn next_client_id(&self) -> u64 {
        self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}
