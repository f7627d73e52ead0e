//! Configuration, redis-server style: an optional config file path first, then
//! `--directive value ...` pairs. The same table serves `CONFIG GET` and `CONFIG SET`.
//!
//! Three kinds of directive:
//! - implemented ones ([`PARAMS`]): validated, stored, readable with CONFIG GET, and (where
//!   marked mutable) settable with CONFIG SET;
//! - directives Redis knows that rill does not implement ([`REDIS_ONLY`]): accepted at start-up
//!   with a logged warning, so an existing redis.conf keeps working;
//! - anything else: start-up stops with Redis' "Bad directive" message.

pub mod rewrite;

pub use rewrite::{replace_atomically, rewrite_file, rewrite_text, SIGNATURE};
use std::collections::BTreeMap;

/// How a parameter's value is validated and reported.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// An integer within bounds.
    Int(i64, i64),
    /// A byte count written like Redis' memory values (`100mb`, `1gb`, `4096`), reported in bytes.
    Memory(i64, i64),
    /// `yes` / `no`.
    Bool,
    /// One of the listed words.
    Enum(&'static [&'static str]),
    /// Free text.
    Text,
    /// `save`: empty or pairs of integers.
    SavePoints,
    /// `client-output-buffer-limit`: `<class> <hard> <soft> <seconds>` groups, each setting
    /// only its class (see [`crate::client_limits::merge_config`]).
    OutputLimits,
    /// `replicaof`: `<host> <port>`, or `no one` (stored as the empty value).
    ReplicaOf,
    /// A byte count as [`Kind::Memory`], or `N%` (of `maxmemory`, 0 to 100), kept as written.
    MemoryOrPercent,
    /// `notify-keyspace-events`: event class letters, stored in Redis' canonical order.
    KeyspaceEvents,
    /// `shutdown-on-sigint` / `-sigterm`: `default`, or any of `save nosave now force` (not
    /// both `save` and `nosave`), stored in that order.
    ShutdownFlags,
    /// `latency-tracking-info-percentiles`: numbers from 0 to 100, stored as C's `%f` with the
    /// trailing zeros trimmed (`99.9`, `50`); `""` for none.
    Percentiles,
}

/// One implemented parameter.
#[derive(Debug)]
pub struct Param {
    /// Name, lower case.
    pub name: &'static str,
    /// Default value as written in a config file.
    pub default: &'static str,
    /// Validation.
    pub kind: Kind,
    /// Whether CONFIG SET may change it at run time.
    pub mutable: bool,
}

const fn p(name: &'static str, default: &'static str, kind: Kind, mutable: bool) -> Param {
    Param { name, default, kind, mutable }
}

const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning", "nothing"];
const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
const FSYNC: &[&str] = &["always", "everysec", "no"];
/// Who may run a protected action (`enable-protected-configs`, `enable-debug-command`,
/// `enable-module-command`): nobody, everybody, or clients on a loopback address.
const PROTECTED_ACTION: &[&str] = &["no", "yes", "local"];
const I32: i64 = i32::MAX as i64;
/// `repl-diskless-load`'s values, as the newest Redis spells them (8.2 has no `flushdb`).
/// rill loads every full sync the same way whichever is set (docs/REPLICATION.md).
const DISKLESS_LOAD: &[&str] = &["disabled", "on-empty-db", "swapdb", "flushdb"];
const RDB_COMPAT: &[&str] = &["auto", "7.0"];

/// Implemented parameters. Some (encodings Redis tunes with listpack sizes) have no effect on
/// rill's own layouts; they are kept so tools and the Redis test suite can read and set them.
pub const PARAMS: &[Param] = &[
    // Changed at run time as Redis changes them: the listeners are rebound (`listen::Port`).
    p("port", "6379", Kind::Int(0, 65535), true),
    p("bind", "127.0.0.1", Kind::Text, true),
    // A Unix socket clients may connect through as well (`run.rs`); its mode in octal (0:
    // as the umask leaves it).
    p("unixsocket", "", Kind::Text, false),
    p("unixsocketperm", "0", Kind::Text, false),
    p("dir", "./data", Kind::Text, true),
    p("requirepass", "", Kind::Text, true),
    p("aclfile", "", Kind::Text, false),
    // TLS (`tls.rs`): a port of its own beside `port`, the certificates, who must show one.
    p("tls-port", "0", Kind::Int(0, 65535), true),
    p("tls-cert-file", "", Kind::Text, true),
    p("tls-key-file", "", Kind::Text, true),
    p("tls-key-file-pass", "", Kind::Text, true),
    p("tls-client-cert-file", "", Kind::Text, true),
    p("tls-client-key-file", "", Kind::Text, true),
    p("tls-client-key-file-pass", "", Kind::Text, true),
    p("tls-dh-params-file", "", Kind::Text, true),
    p("tls-ca-cert-file", "", Kind::Text, true),
    p("tls-ca-cert-dir", "", Kind::Text, true),
    p("tls-auth-clients", "yes", Kind::Enum(&["yes", "no", "optional"]), true),
    p("tls-auth-clients-user", "off", Kind::Enum(&["CN", "off"]), true),
    p("tls-protocols", "", Kind::Text, true),
    p("tls-ciphers", "", Kind::Text, true),
    p("tls-ciphersuites", "", Kind::Text, true),
    p("tls-prefer-server-ciphers", "no", Kind::Bool, true),
    p("tls-session-caching", "yes", Kind::Bool, true),
    p("tls-session-cache-size", "20480", Kind::Int(0, I32), true),
    p("tls-session-cache-timeout", "300", Kind::Int(0, I32), true),
    p("tls-replication", "no", Kind::Bool, true),
    p("tls-cluster", "no", Kind::Bool, true),
    p("acllog-max-len", "128", Kind::Int(0, i64::MAX), true),
    p("acl-pubsub-default", "resetchannels", Kind::Enum(&["allchannels", "resetchannels"]), true),
    // Stored and reported; rill checks every RESTORE payload and replication snapshot in
    // depth whatever it says (Redis' `yes`): its engine keeps its invariants only so (PEL
    // records of real consumers, IDs in order, counts that agree), and a payload that breaks
    // one is refused with "Bad data format", never stored.
    p("sanitize-dump-payload", "no", Kind::Enum(&["no", "yes", "clients"]), true),
    p("maxclients", "10000", Kind::Int(1, I32), true),
    p("timeout", "0", Kind::Int(0, I32), true),
    p("tcp-keepalive", "300", Kind::Int(0, I32), true),
    // Client eviction (Redis 7): the most memory all clients together may hold, as bytes or
    // a percentage of maxmemory; 0: no limit.
    p("maxmemory-clients", "0", Kind::MemoryOrPercent, true),
    p("loglevel", "notice", Kind::Enum(LOGLEVELS), true),
    p("logfile", "", Kind::Text, false),
    p("protected-mode", "yes", Kind::Bool, true),
    p("databases", "16", Kind::Int(1, I32), false),
    p("save", "3600 1 300 100 60 10000", Kind::SavePoints, true),
    p("appendonly", "yes", Kind::Bool, true),
    p("appendfsync", "everysec", Kind::Enum(FSYNC), true),
    p("appendfilename", "appendonly.aof", Kind::Text, false),
    p("dbfilename", "dump.rdb", Kind::Text, true),
    p("appenddirname", "appendonlydir", Kind::Text, false),
    p("maxmemory", "0", Kind::Memory(0, i64::MAX), true),
    p("maxmemory-policy", "noeviction", Kind::Enum(POLICIES), true),
    // Eviction (`evict.rs`): keys sampled per database for the LRU, LFU and TTL policies, and
    // how long one eviction pass may run before the rest goes on in the background.
    p("maxmemory-samples", "5", Kind::Int(1, 64), true),
    p("tracking-table-max-keys", "1000000", Kind::Int(0, i64::MAX), true),
    p("hll-sparse-max-bytes", "3000", Kind::Memory(0, i64::MAX), true),
    p("maxmemory-eviction-tenacity", "10", Kind::Int(0, 100), true),
    // The LFU counter (`types::object::meta`): how slowly it grows, minutes per decrement.
    p("lfu-log-factor", "10", Kind::Int(0, I32), true),
    p("lfu-decay-time", "1", Kind::Int(0, I32), true),
    p("proto-max-bulk-len", "536870912", Kind::Memory(1024 * 1024, i64::MAX), true),
    p("client-query-buffer-limit", "1073741824", Kind::Memory(1024 * 1024, i64::MAX), true),
    p("client-output-buffer-limit", crate::client_limits::DEFAULT_OUTPUT_LIMITS, Kind::OutputLimits, true),
    p("stream-node-max-bytes", "4096", Kind::Memory(0, i64::MAX), true),
    p("stream-node-max-entries", "100", Kind::Int(0, i64::MAX), true),
    p("stream-idmp-duration", "100", Kind::Int(1, 86_400), true),
    p("stream-idmp-maxsize", "100", Kind::Int(1, 10_000), true),
    p("hz", "10", Kind::Int(0, I32), true),
    p("daemonize", "no", Kind::Bool, false),
    p("pidfile", "", Kind::Text, false),
    p("tcp-backlog", "511", Kind::Int(0, I32), false),
    p("notify-keyspace-events", "", Kind::KeyspaceEvents, true),
    p("slowlog-log-slower-than", "10000", Kind::Int(-1, i64::MAX), true),
    p("slowlog-max-len", "128", Kind::Int(0, i64::MAX), true),
    p("slowlog-entry-max-argc", "32", Kind::Int(2, I32), true),
    p("slowlog-entry-max-string-len", "128", Kind::Int(1, i64::MAX), true),
    p("latency-monitor-threshold", "0", Kind::Int(0, i64::MAX), true),
    p("latency-tracking", "yes", Kind::Bool, true),
    p("latency-tracking-info-percentiles", "50 99 99.9", Kind::Percentiles, true),
    p("lazyfree-lazy-user-del", "no", Kind::Bool, true),
    // Deletions the server decides are sent to replicas (and logged) as UNLINK with these
    // (rill frees at once either way).
    p("lazyfree-lazy-eviction", "no", Kind::Bool, true),
    p("lazyfree-lazy-expire", "no", Kind::Bool, true),
    p("lazyfree-lazy-server-del", "no", Kind::Bool, true),
    p("lazyfree-lazy-user-flush", "no", Kind::Bool, true),
    p("aof-load-truncated", "yes", Kind::Bool, true),
    // Testing aid, as in Redis: pause this many microseconds after each key or record loaded.
    p("key-load-delay", "0", Kind::Int(0, I32), true),
    // Testing aid, as in Redis: pause this many microseconds after each key a snapshot (SAVE,
    // BGSAVE, a log rewrite's base, a replica's full sync) writes.
    p("rdb-key-save-delay", "0", Kind::Int(0, I32), true),
    // Redis' snapshot and event-loop knobs, with its names, defaults, bounds and mutability,
    // so that tools and Redis' own tests can read and set them. `rdbcompression` acts as in
    // Redis (a snapshot's strings over 20 bytes LZF-compressed where that saves 4 bytes, read
    // when the snapshot is written); the others are stored and reported only: rill writes
    // its snapshots always with a checksum, and none of the rest changes what rill does
    // (docs/spec/config.md).
    p("rdbcompression", "yes", Kind::Bool, true),
    p("rdbchecksum", "yes", Kind::Bool, false),
    p("rdb-del-sync-files", "no", Kind::Bool, true),
    p("stop-writes-on-bgsave-error", "yes", Kind::Bool, true),
    p("activerehashing", "yes", Kind::Bool, true),
    p("dynamic-hz", "yes", Kind::Bool, true),
    p("loading-process-events-interval-bytes", "524288", Kind::Int(1024, I32), true),
    p("watchdog-period", "0", Kind::Int(0, I32), true),
    p("auto-aof-rewrite-percentage", "100", Kind::Int(0, I32), true),
    p("auto-aof-rewrite-min-size", "67108864", Kind::Memory(0, i64::MAX), true),
    // Any int, as Redis: 0 acts as 1 and below -5 as -5 (the quicklist model clamps).
    p("list-max-listpack-size", "-2", Kind::Int(-I32 - 1, I32), true),
    // Stored and reported only: how many nodes at each end of a list Redis keeps
    // uncompressed. rill does not compress list nodes; no reply depends on it.
    p("list-compress-depth", "0", Kind::Int(0, I32), true),
    p("hash-max-listpack-entries", "512", Kind::Int(0, i64::MAX), true),
    p("hash-max-listpack-value", "64", Kind::Memory(0, i64::MAX), true),
    p("set-max-intset-entries", "512", Kind::Int(0, i64::MAX), true),
    p("set-max-listpack-entries", "128", Kind::Int(0, i64::MAX), true),
    // An integer in Redis, unlike the hash and zset ones (no `kb` suffix).
    p("set-max-listpack-value", "64", Kind::Int(0, i64::MAX), true),
    p("zset-max-listpack-entries", "128", Kind::Int(0, i64::MAX), true),
    p("zset-max-listpack-value", "64", Kind::Memory(0, i64::MAX), true),
    p("busy-reply-threshold", "5000", Kind::Int(0, i64::MAX), true),
    p("repl-diskless-sync", "yes", Kind::Bool, true),
    // Replication (issue 22). Stored, validated, reported and rewritten with Redis' names,
    // defaults and bounds; none of them acts yet: rill is always a primary without replicas
    // until replication lands, and start-up warns when one is set away from its default.
    p("replicaof", "", Kind::ReplicaOf, false),
    p("masterauth", "", Kind::Text, true),
    p("masteruser", "", Kind::Text, true),
    p("replica-read-only", "yes", Kind::Bool, true),
    p("replica-serve-stale-data", "yes", Kind::Bool, true),
    p("replica-priority", "100", Kind::Int(0, I32), true),
    p("replica-announce-ip", "", Kind::Text, true),
    p("replica-announce-port", "0", Kind::Int(0, 65535), true),
    p("replica-announced", "yes", Kind::Bool, true),
    p("replica-lazy-flush", "no", Kind::Bool, true),
    p("replica-ignore-maxmemory", "yes", Kind::Bool, true),
    // What a replica does when a command of its primary's stream fails on it (`replica.rs`):
    // `ignore` logs it and goes on; `panic` and `panic-on-replicas` end the process on a
    // read-only replica, as Redis panics (rill reads no AOF through a client, so both act
    // alike here).
    p("propagation-error-behavior", "ignore", Kind::Enum(&["ignore", "panic", "panic-on-replicas"]), true),
    // A replica whose log failed applies its primary's writes anyway (`yes`, logged every 10
    // s) or ends the process (`no`, the default), as Redis (`dispatch.rs`).
    p("replica-ignore-disk-write-errors", "no", Kind::Bool, true),
    p("repl-backlog-ttl", "3600", Kind::Int(0, i64::MAX), true),
    p("repl-ping-replica-period", "10", Kind::Int(1, I32), true),
    p("repl-timeout", "60", Kind::Int(1, I32), true),
    p("repl-diskless-sync-delay", "5", Kind::Int(0, I32), true),
    p("repl-diskless-sync-max-replicas", "0", Kind::Int(0, I32), true),
    p("repl-diskless-load", "disabled", Kind::Enum(DISKLESS_LOAD), true),
    p("repl-disable-tcp-nodelay", "no", Kind::Bool, true),
    // Redis 8's second connection for a full sync's RDB. rill sends the RDB on the replication
    // link itself, so its default is `no`; `yes` is stored and reported, and warned about.
    p("repl-rdb-channel", "yes", Kind::Bool, true),
    // A replica's buffer for the stream while its snapshot arrives over an RDB channel
    // (0: `client-output-buffer-limit replica`'s hard limit).
    p("replica-full-sync-buffer-limit", "0", Kind::Memory(0, i64::MAX), true),
    // How long a primary's shutdown waits for its replicas to acknowledge the whole stream
    // (`shutdown.rs`); 0: it does not wait.
    p("shutdown-timeout", "10", Kind::Int(0, I32), true),
    // What a signal's shutdown does (SHUTDOWN's flags; `default`: none).
    p("shutdown-on-sigint", "default", Kind::ShutdownFlags, true),
    p("shutdown-on-sigterm", "default", Kind::ShutdownFlags, true),
    p("min-replicas-to-write", "0", Kind::Int(0, I32), true),
    p("min-replicas-max-lag", "10", Kind::Int(0, I32), true),
    // The replication backlog's size (`replication::backlog`), applied when it is made and on
    // CONFIG SET.
    p("repl-backlog-size", "1048576", Kind::Memory(1, i64::MAX), true),
    p("enable-debug-command", "no", Kind::Enum(PROTECTED_ACTION), false),
    p("enable-protected-configs", "no", Kind::Enum(PROTECTED_ACTION), false),
    p("enable-module-command", "no", Kind::Enum(PROTECTED_ACTION), false),
    // rill's own: how long (at most, in microseconds) the event loop keeps polling after work
    // before it sleeps; see `poll.rs`. 0: never polls.
    p("busy-poll-us", "20", Kind::Int(0, 1000), true),
    // rill's own: up to this many keys, a snapshot (log rewrite, a replica's full sync) is a
    // copy made under the lock, copy-on-write for streams; above it, with the log on, it is
    // rebuilt from the log files in the background. See `persist/rewrite.rs`.
    p("snapshot-copy-max-keys", "1000000", Kind::Int(0, i64::MAX), true),
    // rill's own: the RDB a replica's full sync is sent in. `auto`: the oldest version that
    // holds the data (12, or 14 with 8.6-only stream state); `7.0`: RDB 10 with Redis 7.0's
    // stream type, for Redis 7.0 replicas (docs/REPLICATION.md, "Redis 7.0 replicas").
    p("repl-rdb-compat", "auto", Kind::Enum(RDB_COMPAT), true),
    // rill's own: the HTTP port of `/metrics` (`http.rs`), on `bind`'s addresses; 0: none.
    p("metrics-port", "0", Kind::Int(0, 65535), true),
    // rill's own: `/metrics` has a series per consumer too (cardinality: off by default).
    p("metrics-consumers", "no", Kind::Bool, true),
    // rill's own: the HTTP port speaks HTTPS, with the server's TLS certificate (`tls-*`);
    // client certificates are asked for as `tls-auth-clients` says.
    p("metrics-tls", "no", Kind::Bool, true),
    // rill's own: the console (`/` on metrics-port) shows but never acts: no forms, and
    // POST /action is refused.
    p("console-read-only", "no", Kind::Bool, true),
    // rill's own: the most memory the Lua VM of scripts may hold.
    p("script-memory-limit", "1073741824", Kind::Memory(1024 * 1024, i64::MAX), true),
];

/// Parameters Redis keeps out of `CONFIG GET` patterns (its testing and internal knobs):
/// answered only when asked for by name.
pub const HIDDEN: &[&str] = &[
    "key-load-delay",
    "rdb-key-save-delay",
    "repl-rdb-channel",
    "loading-process-events-interval-bytes",
    "watchdog-period",
];

/// Parameters whose values are secrets: CONFIG SET's arguments for them are redacted in
/// SLOWLOG and MONITOR (the TLS ones too, though rill has no TLS yet: a secret sent to a
/// server that refuses it is still a secret).
pub const SENSITIVE: &[&str] =
    &["requirepass", "masterauth", "masteruser", "tls-key-file-pass", "tls-client-key-file-pass"];

/// Parameters that are stored but do nothing yet (see [`Config::inert`]).
const INERT: &[&str] = &["replica-lazy-flush", "repl-diskless-load", "repl-disable-tcp-nodelay"];

/// Directives Redis accepts that rill does not implement: accepted at start-up with a warning.
pub const REDIS_ONLY: &[&str] = &[
    "supervised",
    "syslog-enabled",
    "syslog-ident",
    "syslog-facility",
    "crash-log-enabled",
    "crash-memcheck-enabled",
    "always-show-logo",
    "set-proc-title",
    "proc-title-template",
    "locale-collate",
    "active-expire-effort",
    "io-threads",
    "io-threads-do-reads",
    "oom-score-adj",
    "oom-score-adj-values",
    "disable-thp",
    "aof-use-rdb-preamble",
    "aof-timestamp-enabled",
    "aof-rewrite-incremental-fsync",
    "no-appendfsync-on-rewrite",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-node-timeout",
    "cluster-port",
    "cluster-replica-validity-factor",
    "cluster-migration-barrier",
    "cluster-allow-replica-migration",
    "cluster-require-full-coverage",
    "cluster-replica-no-failover",
    "cluster-allow-reads-when-down",
    "cluster-allow-pubsubshard-when-down",
    "cluster-link-sendbuf-limit",
    "cluster-announce-hostname",
    "cluster-announce-human-nodename",
    "cluster-preferred-endpoint-type",
    "cluster-announce-ip",
    "cluster-announce-port",
    "cluster-announce-tls-port",
    "cluster-announce-bus-port",
    "latency-tracking",
    "latency-tracking-info-percentiles",
    "rdb-save-incremental-fsync",
    "max-new-connections-per-cycle",
    "max-new-tls-connections-per-cycle",
    "activedefrag",
    "active-defrag-ignore-bytes",
    "active-defrag-threshold-lower",
    "active-defrag-threshold-upper",
    "active-defrag-cycle-min",
    "active-defrag-cycle-max",
    "active-defrag-max-scan-fields",
    "jemalloc-bg-thread",
    "server_cpulist",
    "bio_cpulist",
    "aof_rewrite_cpulist",
    "bgsave_cpulist",
    "ignore-warnings",
    "zset-max-ziplist-entries",
    "zset-max-ziplist-value",
    "hash-max-ziplist-entries",
    "hash-max-ziplist-value",
    "list-max-ziplist-size",
    "lua-replicate-commands",
    "hide-user-data-from-log",
    "close-on-oom",
    "bind-source-addr",
    "client-default-resp",
];

/// Parameters CONFIG SET may change only as `enable-protected-configs` allows: together they
/// choose where SAVE writes a file, so an open CONFIG SET would let any client write a file
/// of its choosing anywhere the process may (Redis protects the same two since 7.0).
const PROTECTED: &[&str] = &["dir", "dbfilename"];

/// Directives Redis has that decide who may connect or what they may run, which rill does
/// not implement yet. Ignoring one would leave the server more open than its configuration
/// says, so start-up stops instead, saying what to do. Each entry: name, and why.
const REFUSED: &[(&str, &str)] =
    &[("loadmodule", "modules are not supported by rill"), ("sentinel", "rill is not a Sentinel")];

/// One `rename-command` directive: the command `from` is served as `to` (empty: removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rename {
    /// The command's current name.
    pub from: String,
    /// Its new name; empty removes the command.
    pub to: String,
    /// Where the directive was, for an error message.
    pub line: usize,
    /// The directive's text.
    pub text: String,
}

/// A configuration error, rendered by the caller in Redis' start-up style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line in the config file (or 0 for command-line arguments treated as one file).
    pub line: usize,
    /// The offending line.
    pub text: String,
    /// Why.
    pub reason: String,
}

/// The running configuration: every implemented parameter's current value.
#[derive(Debug, Clone)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
    /// Path of the config file, if one was given (CONFIG REWRITE writes there).
    pub file: Option<String>,
    /// Redis-only directives that were accepted with a warning.
    pub ignored: Vec<String>,
    /// `rename-command` directives, in order (applied to the command table at start-up).
    pub renames: Vec<Rename>,
    /// `user` directives in order: line number, the line, and its words after `user`
    /// (applied to the ACL registry at start-up, `run.rs`).
    pub users: Vec<(usize, String, Vec<String>)>,
    /// The event classes `notify-keyspace-events` selects, as its letters with `A` expanded,
    /// including the ones Redis keeps beside `A` without reporting them (see
    /// [`keyspace_events`]).
    event_letters: String,
}

impl Default for Config {
    fn default() -> Self {
        let values = PARAMS.iter().map(|p| (p.name, canonical(p, p.default).unwrap_or_default())).collect();
        Config {
            values,
            file: None,
            ignored: Vec::new(),
            renames: Vec::new(),
            users: Vec::new(),
            event_letters: String::new(),
        }
    }
}

/// Old names Redis still accepts for parameters (alias, parameter). CONFIG GET lists them as
/// names of their own when a pattern matches them; everything else treats them as the parameter.
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("slaveof", "replicaof"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-priority", "replica-priority"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
];

/// The parameter `name` (or an alias of it) names.
fn param(name: &str) -> Option<&'static Param> {
    let name = ALIASES.iter().find(|(alias, _)| alias.eq_ignore_ascii_case(name)).map_or(name, |(_, p)| *p);
    PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

/// Parse a memory value: digits with an optional k/kb/m/mb/g/gb unit (case-insensitive).
pub fn parse_memory(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let units: [(&str, i64); 6] =
        [("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10), ("g", 1_000_000_000), ("m", 1_000_000), ("k", 1000)];
    for (suffix, mul) in units {
        if let Some(num) = lower.strip_suffix(suffix) {
            return num.parse::<i64>().ok()?.checked_mul(mul);
        }
    }
    lower.parse::<i64>().ok()
}

/// [`canonical`], for a parameter whose new value updates its `current` one.
fn canonical_over(p: &Param, current: Option<&String>, value: &str) -> Result<String, String> {
    match (p.kind, current) {
        (Kind::OutputLimits, Some(current)) => crate::client_limits::merge_config(current, value),
        _ => canonical(p, value),
    }
}

/// Validate `value` for `p` and return the canonical text CONFIG GET reports.
fn canonical(p: &Param, value: &str) -> Result<String, String> {
    match p.kind {
        Kind::Int(min, max) => {
            let v: i64 = value.parse().map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if v < min || v > max {
                return Err(format!("argument must be between {min} and {max} inclusive"));
            }
            Ok(v.to_string())
        }
        Kind::Memory(min, max) => {
            let v = parse_memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            if v < min || v > max {
                return Err(format!("argument must be between {min} and {max} inclusive"));
            }
            Ok(v.to_string())
        }
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Enum(words) => {
            // As declared (Redis' `CN` keeps its case; every other word is lower case).
            if let Some(w) = words.iter().find(|w| w.eq_ignore_ascii_case(value)) {
                Ok((*w).to_string())
            } else {
                Err("argument(s) must be one of the following: ".to_string() + &words.join(", "))
            }
        }
        Kind::Text => {
            check_file_name(p.name, value)?;
            Ok(value.to_string())
        }
        Kind::OutputLimits => crate::client_limits::merge_config(p.default, value),
        Kind::MemoryOrPercent => match value.strip_suffix('%') {
            Some(n) => match n.parse::<i64>() {
                Ok(n) if (0..=100).contains(&n) => Ok(format!("{n}%")),
                Ok(n) if n > 100 => Err("percentage argument must be less or equal to 100".into()),
                _ => Err("argument must be a memory or percent value".into()),
            },
            None => parse_memory(value)
                .filter(|v| *v >= 0)
                .map(|v| v.to_string())
                .ok_or_else(|| "argument must be a memory or percent value".to_string()),
        },
        Kind::ReplicaOf => {
            let words: Vec<&str> = value.split_whitespace().collect();
            let [host, port] = words[..] else { return Err("wrong number of arguments".into()) };
            if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
                return Ok(String::new());
            }
            // Redis reads the port with strtol: digits, an optional sign, nothing after.
            match port.parse::<i64>() {
                Ok(port @ 0..=65535) => Ok(format!("{host} {port}")),
                _ => Err("Invalid master port".into()),
            }
        }
        Kind::KeyspaceEvents => keyspace_events(value),
        Kind::ShutdownFlags => shutdown_flags(value),
        Kind::Percentiles => percentiles(value),
        Kind::SavePoints => {
            let parts: Vec<&str> = value.split_whitespace().collect();
            if !parts.len().is_multiple_of(2) || parts.iter().any(|x| x.parse::<u64>().is_err()) {
                return Err("Invalid save parameters".into());
            }
            Ok(parts.join(" "))
        }
    }
}

/// `latency-tracking-info-percentiles` as Redis reads and reports it.
fn percentiles(value: &str) -> Result<String, String> {
    let mut out = Vec::new();
    for word in value.split_whitespace() {
        let v: f64 = word
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| "Invalid latency-tracking-info-percentiles parameters".to_string())?;
        if !(0.0..=100.0).contains(&v) {
            return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
        }
        out.push(trim_double(v));
    }
    Ok(out.join(" "))
}

/// A number as C's `%f` prints it (six decimals), without trailing zeros or a trailing point.
pub fn trim_double(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `shutdown-on-sigint` / `-sigterm` as Redis reads and reports them: words of `default save
/// nosave now force` (any case), reported in that order, `default` alone when none is set.
fn shutdown_flags(value: &str) -> Result<String, String> {
    const WORDS: [&str; 5] = ["default", "save", "nosave", "now", "force"];
    let mut set = [false; 5];
    for word in value.split_whitespace() {
        let lower = word.to_ascii_lowercase();
        match WORDS.iter().position(|w| *w == lower) {
            Some(i) => {
                if let Some(on) = set.get_mut(i) {
                    *on = true;
                }
            }
            None => return Err("argument(s) must be one of the following: ".to_string() + &WORDS.join(", ")),
        }
    }
    if set.get(1..3) == Some(&[true, true]) {
        return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
    }
    let on: Vec<&str> = WORDS.iter().zip(set).skip(1).filter(|(_, on)| *on).map(|(w, _)| *w).collect();
    Ok(if on.is_empty() { "default".to_string() } else { on.join(" ") })
}

/// `notify-keyspace-events` as Redis 8.2 reads and reports it: any letters of
/// `A g $ l s h z x e t d n o c K E m` (and the newest Redis' `S T I V`), each once, in this order; `A` stands for
/// `g$lshzxetd` (so `n`, `o` and `c` are not shown next to it, as in Redis). The error names
/// the letters Redis' message names.
///
/// rill keeps the text Redis reports, so `An` is kept as `A`. Redis keeps the `n` set beside
/// `A` without showing it (until a CONFIG REWRITE and restart, which lose it there too); so
/// does rill: the classes notifications use are kept apart ([`Config::keyspace_event_letters`]).
fn keyspace_events(value: &str) -> Result<String, String> {
    const TYPES: &str = "g$lshzxetdnoc";
    const ALL: &str = "g$lshzxetd";
    // The channels: key space and key event, misses, and the newest Redis' subkey channels
    // (`S` subkeyspace, `T` subkeyevent, `I` subkeyspaceitem, `V` subkeyspaceevent).
    const KINDS: &str = "KEmSTIV";
    let mut seen = std::collections::BTreeSet::new();
    for c in value.chars() {
        match c {
            'A' => seen.extend(ALL.chars()),
            c if TYPES.contains(c) || KINDS.contains(c) => {
                seen.insert(c);
            }
            _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        }
    }
    let mut out = String::new();
    if ALL.chars().all(|c| seen.contains(&c)) {
        out.push('A');
    } else {
        out.extend(TYPES.chars().filter(|c| seen.contains(c)));
    }
    out.extend(KINDS.chars().filter(|c| seen.contains(c)));
    Ok(out)
}

/// The letters of an accepted `notify-keyspace-events` value, `A` expanded, each once.
fn event_letters(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars().flat_map(|c| if c == 'A' { "g$lshzxetd".chars().collect::<Vec<_>>() } else { vec![c] }) {
        if !out.contains(c) {
            out.push(c);
        }
    }
    out
}

/// The names the server creates files under must be plain names inside `dir`, never paths:
/// otherwise a name alone could point SAVE or the log anywhere (Redis' rule and wording).
fn check_file_name(param: &str, value: &str) -> Result<(), String> {
    let is_path = value.contains('/') || value.contains('\\');
    match param {
        "dbfilename" if is_path => Err("dbfilename can't be a path, just a filename".into()),
        "appendfilename" if value.is_empty() => Err("appendfilename can't be empty".into()),
        "appendfilename" if is_path => Err("appendfilename can't be a path, just a filename".into()),
        "appenddirname" if value.is_empty() => Err("appenddirname can't be empty".into()),
        "appenddirname" if is_path => Err("appenddirname can't be a path, just a dirname".into()),
        _ => Ok(()),
    }
}

/// Why a directive that rill does not implement must stop start-up, if it must.
fn refused(name: &str, values: &[String]) -> Option<&'static str> {
    if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
        return Some(why);
    }
    let only = |v: &str| values.len() == 1 && values.first().is_some_and(|x| x.eq_ignore_ascii_case(v));
    if name == "cluster-enabled" && !only("no") {
        return Some("cluster mode is not supported by rill; run a Redis Cluster for that (rill-worker and the rill CLI support one)");
    }
    None
}

/// How deep `include` may nest (a file including itself must not recurse forever).
const MAX_INCLUDE_DEPTH: usize = 16;

impl Config {
    /// Build from the process arguments (without the program name).
    pub fn from_args(args: &[String]) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        let mut rest = args;
        let mut text = String::new();
        if let Some(first) = rest.first() {
            if !first.starts_with("--") {
                let content = std::fs::read_to_string(first).map_err(|e| ConfigError {
                    line: 0,
                    text: first.clone(),
                    reason: format!("Fatal error, can't open config file '{first}': {e}"),
                })?;
                text.push_str(&content);
                text.push('\n');
                // Absolute, as Redis keeps it: the server later works inside `dir`. Symbolic
                // links are not followed, as in Redis: CONFIG REWRITE replaces a link to the
                // file with the new file (INFO's config_file shows the path as given).
                cfg.file =
                    Some(std::path::absolute(first).map(|p| p.display().to_string()).unwrap_or_else(|_| first.clone()));
                rest = rest.get(1..).unwrap_or(&[]);
            }
        }
        // Command-line options become config lines appended after the file, as Redis does.
        let mut line = String::new();
        for a in rest {
            if let Some(name) = a.strip_prefix("--") {
                if !line.is_empty() {
                    text.push_str(&line);
                    text.push('\n');
                }
                line = name.to_string();
            } else {
                line.push(' ');
                line.push_str(&quote(a));
            }
        }
        if !line.is_empty() {
            text.push_str(&line);
            text.push('\n');
        }
        cfg.load_text(&text, 0)?;
        let open_default = cfg.users.iter().find(|(_, _, words)| {
            words.first().is_some_and(|n| n == "default") && words.iter().any(|w| w.eq_ignore_ascii_case("nopass"))
        });
        if let Some((line, text, _)) = open_default.cloned() {
            if !cfg.get("requirepass").is_empty() {
                // Redis applies the user line after requirepass, and `nopass` wins: it would
                // let every client in. rill does not guess which one was meant.
                return Err(ConfigError {
                    line,
                    text,
                    reason: "this user line gives the default user no password, but requirepass sets one \
                             (Redis would accept every client without it): keep one of the two"
                        .into(),
                });
            }
        }
        Ok(cfg)
    }

    /// `include PATH`: the file's lines, in place; a `*`, `?` or `[` in the file name part
    /// includes every matching file of that folder in name order, as Redis does.
    fn include(&mut self, path: &str, depth: usize, err: &dyn Fn(&str) -> ConfigError) -> Result<(), ConfigError> {
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(err("include nested too deeply (a file includes itself?)"));
        }
        let p = std::path::Path::new(path);
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let files: Vec<std::path::PathBuf> = if name.contains(['*', '?', '[']) {
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
            let entries = std::fs::read_dir(dir)
                .map_err(|e| err(&format!("Fatal error, can't open config file '{path}': {e}")))?;
            let mut found: Vec<std::path::PathBuf> = entries
                .flatten()
                .filter(|e| rill_engine::glob::glob_match(name.as_bytes(), e.file_name().as_encoded_bytes(), false))
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            found.sort();
            found
        } else {
            vec![p.to_path_buf()]
        };
        for file in files {
            let content = std::fs::read_to_string(&file)
                .map_err(|e| err(&format!("Fatal error, can't open config file '{}': {e}", file.display())))?;
            self.load_text(&content, depth + 1)?;
        }
        Ok(())
    }

    fn load_text(&mut self, text: &str, depth: usize) -> Result<(), ConfigError> {
        for (i, raw) in text.lines().enumerate() {
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let err = |reason: &str| ConfigError { line: i + 1, text: trimmed.to_string(), reason: reason.to_string() };
            let words = split_config_line(trimmed).ok_or_else(|| err("Unbalanced quotes in configuration line"))?;
            let Some((name, values)) = words.split_first() else { continue };
            let lname = name.to_ascii_lowercase();
            if let Some(p) = param(&lname) {
                let joined = values.join(" ");
                if values.is_empty() && !matches!(p.kind, Kind::Text | Kind::SavePoints | Kind::OutputLimits) {
                    return Err(err("wrong number of arguments"));
                }
                let v = canonical_over(p, self.values.get(p.name), &joined).map_err(|r| err(&r))?;
                self.store(p, v, &joined);
            } else if lname == "include" && values.len() == 1 {
                self.include(values.first().map_or("", String::as_str), depth, &err)?;
            } else if lname == "rename-command" && values.len() == 2 {
                let (from, to) =
                    (values.first().cloned().unwrap_or_default(), values.get(1).cloned().unwrap_or_default());
                self.renames.push(Rename { from, to, line: i + 1, text: trimmed.to_string() });
            } else if lname == "user" && !values.is_empty() {
                let name = values.first().map(String::as_str).unwrap_or_default();
                if self.users.iter().any(|(_, _, w)| w.first().is_some_and(|n| n == name)) {
                    return Err(err(&format!(
                        "Error in user declaration '{name}': Duplicate user found. A user can only be defined once in config files"
                    )));
                }
                self.users.push((i + 1, trimmed.to_string(), values.to_vec()));
            } else if let Some(why) = refused(&lname, values) {
                return Err(err(&format!("'{lname}' is not implemented by rill, and ignoring it would leave the server more open than configured: {why}")));
            } else if REDIS_ONLY.contains(&lname.as_str()) {
                self.ignored.push(lname);
            } else {
                return Err(err("Bad directive or wrong number of arguments"));
            }
        }
        Ok(())
    }

    /// `latency-tracking-info-percentiles` as numbers.
    pub fn percentiles(&self) -> Vec<f64> {
        self.get("latency-tracking-info-percentiles").split_whitespace().filter_map(|w| w.parse().ok()).collect()
    }

    /// The replication directives set away from their defaults that rill stores and reports
    /// but does not act on yet (start-up warns about each).
    pub fn inert(&self) -> Vec<&'static str> {
        INERT.iter().copied().filter(|name| param(name).is_some_and(|p| self.get(name) != p.default)).collect()
    }

    /// Record the primary this server replicates (`None`: it is a primary), as REPLICAOF /
    /// SLAVEOF will: CONFIG GET replicaof reports it and CONFIG REWRITE writes it (or drops
    /// the file's `replicaof` lines), which is how Sentinel's `SLAVEOF; CONFIG REWRITE` makes a
    /// reconfiguration survive a restart.
    pub fn set_replicaof(&mut self, primary: Option<(&str, u16)>) {
        let value = primary.map_or_else(String::new, |(host, port)| format!("{host} {port}"));
        self.values.insert("replicaof", value);
    }

    /// Replace a parameter's value at start-up (no mutability check), e.g. `dir` made absolute.
    pub fn set_startup(&mut self, name: &str, value: &str) -> Result<(), String> {
        let p = param(name).ok_or_else(|| format!("unknown parameter '{name}'"))?;
        let v = canonical(p, value)?;
        self.store(p, v, value);
        Ok(())
    }

    /// Set parameter `p` to its canonical value `v`, given as `raw`.
    fn store(&mut self, p: &'static Param, v: String, raw: &str) {
        if matches!(p.kind, Kind::KeyspaceEvents) {
            self.event_letters = event_letters(raw);
        }
        self.values.insert(p.name, v);
    }

    /// The event classes `notify-keyspace-events` selects: its letters, `A` expanded to
    /// `g$lshzxetd`, plus `K` / `E` for the channels (`n` next to `A` included, though Redis
    /// reports `A` alone).
    pub fn keyspace_event_letters(&self) -> &str {
        &self.event_letters
    }

    /// Current value of an implemented parameter ("" if unknown).
    pub fn get(&self, name: &str) -> &str {
        param(name).and_then(|p| self.values.get(p.name)).map(String::as_str).unwrap_or("")
    }

    /// An integer parameter.
    pub fn get_i64(&self, name: &str) -> i64 {
        self.get(name).parse().unwrap_or(0)
    }

    /// `CONFIG GET`: every (name, value) whose name matches one of the glob patterns; a
    /// [`HIDDEN`] parameter only when named without a wildcard.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let aliases = ALIASES.iter().filter_map(|(alias, p)| Some((*alias, self.values.get(p)?)));
        let named: Vec<(&str, &String)> = self.values.iter().map(|(n, v)| (*n, v)).chain(aliases).collect();
        for pat in patterns {
            // A name without wildcards is looked up (in any case) and answered under the name
            // as given, as Redis does. A name already answered (in any case) is not repeated.
            if !pat.iter().any(|c| matches!(c, b'*' | b'?' | b'[')) {
                let given = String::from_utf8_lossy(pat).into_owned();
                if let Some(value) = param(&given).and_then(|p| self.values.get(p.name)) {
                    if !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(&given)) {
                        out.push((given, value.clone()));
                    }
                }
                continue;
            }
            for (name, value) in &named {
                if !HIDDEN.contains(name)
                    && rill_engine::glob::glob_match(pat, name.as_bytes(), true)
                    && !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
                {
                    out.push((name.to_string(), (*value).clone()));
                }
            }
        }
        out
    }

    /// `CONFIG SET` of several pairs, all or nothing. The error text is Redis'. `protected_ok`:
    /// whether this client may set the protected parameters (see `enable-protected-configs`).
    ///
    /// As Redis: every name is checked first (unknown, immutable, protected, given twice; the
    /// first problem is the one reported), and only then the values.
    pub fn set_many(&mut self, pairs: &[(String, String)], protected_ok: bool) -> Result<Vec<&'static str>, String> {
        let failed =
            |name: &str, why: &str| format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}");
        let mut params: Vec<&'static Param> = Vec::new();
        for (i, (name, _)) in pairs.iter().enumerate() {
            let Some(p) = param(name) else {
                return Err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"));
            };
            if !p.mutable {
                return Err(failed(name, "can't set immutable config"));
            }
            if PROTECTED.contains(&p.name) && !protected_ok {
                return Err(failed(name, "can't set protected config"));
            }
            // A name given twice is refused; a parameter and its alias are set in turn, as Redis.
            if pairs.iter().take(i).any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                return Err(failed(name, "duplicate parameter"));
            }
            params.push(p);
        }
        let mut staged: Vec<(&'static Param, String, &str)> = Vec::new();
        for (p, (name, value)) in params.iter().zip(pairs) {
            let v = canonical_over(p, self.values.get(p.name), value).map_err(|r| failed(name, &r))?;
            staged.push((*p, v, value.as_str()));
        }
        // Each parameter once, even when it was also set under an alias.
        let mut names: Vec<&'static str> = Vec::new();
        for (p, ..) in &staged {
            if !names.contains(&p.name) {
                names.push(p.name);
            }
        }
        for (p, v, raw) in staged {
            self.store(p, v, raw);
        }
        Ok(names)
    }
}

fn quote(s: &str) -> String {
    if !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\') {
        return s.to_string();
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Split a config line into words with Redis' quoting rules (as in inline commands): in
/// double quotes `\n \r \t \a \b \xHH` and `\` before any other character; in single
/// quotes only `\'`. None for unbalanced quotes or a closing quote not followed by a space.
fn split_config_line(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    let hex = |b: u8| char::from(b).to_digit(16);
    loop {
        while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        let Some(&first) = bytes.get(i) else { return Some(out) };
        let mut word: Vec<u8> = Vec::new();
        if first == b'"' || first == b'\'' {
            i += 1;
            loop {
                let c = *bytes.get(i)?;
                i += 1;
                match c {
                    c if c == first => break,
                    b'\\' if first == b'"' => {
                        let e = *bytes.get(i)?;
                        i += 1;
                        match e {
                            b'n' => word.push(b'\n'),
                            b'r' => word.push(b'\r'),
                            b't' => word.push(b'\t'),
                            b'a' => word.push(0x07),
                            b'b' => word.push(0x08),
                            b'x' => {
                                match (bytes.get(i).and_then(|&h| hex(h)), bytes.get(i + 1).and_then(|&l| hex(l))) {
                                    (Some(h), Some(l)) => {
                                        word.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                                        i += 2;
                                    }
                                    _ => word.push(b'x'),
                                }
                            }
                            e => word.push(e),
                        }
                    }
                    b'\\' if bytes.get(i) == Some(&b'\'') => {
                        word.push(b'\'');
                        i += 1;
                    }
                    c => word.push(c),
                }
            }
            if bytes.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                return None;
            }
        } else {
            while let Some(&c) = bytes.get(i) {
                if c.is_ascii_whitespace() {
                    break;
                }
                word.push(c);
                i += 1;
            }
        }
        out.push(String::from_utf8_lossy(&word).into_owned());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn command_line_like_redis() {
        let c = Config::from_args(&args(&["--port", "7000", "--save", "", "--appendonly", "no"])).unwrap();
        assert_eq!(c.get("port"), "7000");
        assert_eq!(c.get("save"), "");
        assert_eq!(c.get("dir"), "./data");
        let c = Config::from_args(&args(&["--save", "900", "1", "--maxmemory", "1mb"])).unwrap();
        assert_eq!(c.get("save"), "900 1");
        assert_eq!(c.get("maxmemory"), "1048576");
    }

    #[test]
    fn unknown_and_redis_only_directives() {
        let e = Config::from_args(&args(&["--nonsense", "1"])).unwrap_err();
        assert_eq!(e.reason, "Bad directive or wrong number of arguments");
        let c = Config::from_args(&args(&["--io-threads", "4"])).unwrap();
        assert_eq!(c.ignored, vec!["io-threads".to_string()]);
        assert!(Config::from_args(&args(&["--port", "x"])).is_err());
    }

    #[test]
    fn config_set_is_all_or_nothing() {
        let mut c = Config::default();
        let r = c.set_many(&[("maxmemory".into(), "10mb".into()), ("hz".into(), "x".into())], false);
        assert!(r.unwrap_err().starts_with("ERR CONFIG SET failed (possibly related to argument 'hz')"));
        assert_eq!(c.get("maxmemory"), "0");
        assert_eq!(c.matching(&[b"stream-node-*"]).len(), 2);
    }

    #[test]
    fn protected_and_immutable_parameters() {
        let mut c = Config::default();
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        let e = c.set_many(&[pair("dir", "/tmp")], false).unwrap_err();
        assert_eq!(e, "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config");
        let e = c.set_many(&[pair("hz", "x"), pair("dbfilename", "x.rdb")], false).unwrap_err();
        assert!(
            e.ends_with("argument 'dbfilename') - can't set protected config"),
            "names are checked before values: {e}"
        );
        let e = c.set_many(&[pair("dbfilename", "/root/.ssh/authorized_keys")], true).unwrap_err();
        assert!(e.ends_with("dbfilename can't be a path, just a filename"), "{e}");
        assert_eq!(c.set_many(&[pair("dbfilename", "other.rdb")], true).unwrap(), vec!["dbfilename"]);
        let e = c.set_many(&[pair("appendfilename", "x")], true).unwrap_err();
        assert!(e.ends_with("argument 'appendfilename') - can't set immutable config"), "{e}");
        let e = c.set_many(&[pair("enable-protected-configs", "yes")], true).unwrap_err();
        assert!(e.ends_with("can't set immutable config"), "{e}");
        let e = Config::from_args(&args(&["--dbfilename", "../x.rdb"])).unwrap_err();
        assert_eq!(e.reason, "dbfilename can't be a path, just a filename");
        let e = Config::from_args(&args(&["--appenddirname", "/var/x"])).unwrap_err();
        assert_eq!(e.reason, "appenddirname can't be a path, just a dirname");
        assert!(Config::from_args(&args(&["--enable-protected-configs", "local"])).is_ok());
    }

    #[test]
    fn replication_directives_are_stored_with_redis_names_and_checks() {
        let c = Config::from_args(&args(&[
            "--slaveof",
            "10.0.0.1",
            "6380",
            "--masterauth",
            "pw",
            "--min-slaves-to-write",
            "2",
        ]))
        .unwrap();
        assert_eq!(
            (c.get("replicaof"), c.get("masterauth"), c.get("min-replicas-to-write")),
            ("10.0.0.1 6380", "pw", "2")
        );
        assert!(c.inert().is_empty(), "replicaof, masterauth and min-replicas-to-write act");
        let c = Config::from_args(&args(&["--repl-rdb-channel", "yes", "--repl-disable-tcp-nodelay", "yes"])).unwrap();
        assert_eq!((c.get("repl-rdb-channel"), c.inert()), ("yes", vec!["repl-disable-tcp-nodelay"]));
        let c = Config::from_args(&args(&["--replicaof", "NO", "one"])).unwrap();
        assert_eq!(c.get("replicaof"), "");
        assert!(c.inert().is_empty());
        let c = Config::from_args(&args(&["--latency-tracking-info-percentiles", "50.0 99 99.90 0"])).unwrap();
        assert_eq!(c.get("latency-tracking-info-percentiles"), "50 99 99.9 0");
        assert_eq!(c.percentiles(), [50.0, 99.0, 99.9, 0.0]);
        let mut c = Config::default();
        assert_eq!(c.get("latency-tracking-info-percentiles"), "50 99 99.9");
        c.set_many(&[("latency-tracking-info-percentiles".into(), "".into())], true).unwrap();
        assert!(c.percentiles().is_empty());
        for (bad, why) in [
            ("x", "Invalid latency-tracking-info-percentiles parameters"),
            ("101", "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"),
        ] {
            let e = c.set_many(&[("latency-tracking-info-percentiles".into(), bad.into())], true).unwrap_err();
            assert!(e.ends_with(why), "{e}");
        }
        // `n` beside `A` is kept for notifications though CONFIG GET shows `A` alone, as Redis.
        let mut c = Config::from_args(&args(&["--notify-keyspace-events", "KEAn"])).unwrap();
        assert_eq!(c.get("notify-keyspace-events"), "AKE");
        assert_eq!(c.keyspace_event_letters(), "KEg$lshzxetdn");
        c.set_many(&[("notify-keyspace-events".into(), "Ex".into())], true).unwrap();
        assert_eq!((c.get("notify-keyspace-events"), c.keyspace_event_letters()), ("xE", "Ex"));
        for (bad, why) in [
            (&["--replicaof", "h", "70000"][..], "Invalid master port"),
            (&["--replicaof", "h", "1x"], "Invalid master port"),
            (&["--replicaof", "h"], "wrong number of arguments"),
            (
                &["--repl-diskless-load", "unsafe"],
                "argument(s) must be one of the following: disabled, on-empty-db, swapdb, flushdb",
            ),
        ] {
            assert_eq!(Config::from_args(&args(bad)).unwrap_err().reason, why, "{bad:?}");
        }
        let mut c = Config::default();
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        let e = c.set_many(&[pair("slaveof", "no one")], true).unwrap_err();
        assert!(e.ends_with("argument 'slaveof') - can't set immutable config"), "{e}");
        assert_eq!(c.set_many(&[pair("lua-time-limit", "7")], false).unwrap(), ["busy-reply-threshold"]);
        assert_eq!(c.get("busy-reply-threshold"), "7");
    }

    #[test]
    fn user_lines_are_kept_and_a_passwordless_default_beside_requirepass_refused() {
        let line = ["--user", "default", "on", "nopass", "sanitize-payload", "~*", "&*", "+@all"];
        assert!(Config::from_args(&args(&line)).is_ok());
        assert!(Config::from_args(&args(&[
            "--user",
            "default",
            "ON",
            "allkeys",
            "allchannels",
            "allcommands",
            "nopass"
        ]))
        .is_ok());
        // Every user line is kept for the ACL registry (checked there, at start-up).
        let c = Config::from_args(&args(&["--user", "alice", "on", ">pw", "~*", "--user", "default", "off"])).unwrap();
        assert_eq!(c.users.len(), 2);
        assert_eq!(c.users.first().map(|u| u.2.clone()).unwrap_or_default(), ["alice", "on", ">pw", "~*"]);
        let with_password = [&line[..], &["--requirepass", "pw"]].concat();
        let e = Config::from_args(&args(&with_password)).unwrap_err();
        assert!(e.reason.contains("requirepass sets one"), "{}", e.reason);
    }

    #[test]
    fn security_directives_work_or_refuse_start_up() {
        for refused in [&["--loadmodule", "/x.so"][..], &["--cluster-enabled", "yes"]] {
            let e = Config::from_args(&args(refused)).unwrap_err();
            assert!(e.reason.contains("not implemented by rill"), "{refused:?}: {}", e.reason);
        }
        for accepted in [
            &["--tls-port", "0"][..],
            &["--tls-port", "6380", "--tls-cert-file", "x.crt", "--tls-auth-clients", "optional"],
            &["--cluster-enabled", "no"],
            &["--min-replicas-to-write", "0"],
            &["--aclfile", "/etc/users.acl"],
            &["--user", "default", "on", ">pw"],
        ] {
            assert!(Config::from_args(&args(accepted)).is_ok(), "{accepted:?}");
        }
        let c = Config::from_args(&args(&["--rename-command", "CONFIG", "", "--rename-command", "flushall", "nuke"]))
            .unwrap();
        assert_eq!(c.renames.len(), 2);
    }

    #[test]
    fn include_reads_files_in_place() {
        let dir = std::env::temp_dir().join(format!("rill-include-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.conf"), "hz 20\n").unwrap();
        std::fs::write(dir.join("b.conf"), "requirepass secret\n").unwrap();
        std::fs::write(dir.join("main.conf"), format!("include {}/*.conf\nport 7000\n", dir.display())).unwrap();
        // main.conf matches its own pattern: the depth limit stops the recursion with an error.
        assert!(Config::from_args(&args(&[dir.join("main.conf").to_str().unwrap()])).is_err());
        std::fs::write(dir.join("main.conf"), format!("include {}/?.conf\nport 7000\n", dir.display())).unwrap();
        let c = Config::from_args(&args(&[dir.join("main.conf").to_str().unwrap()])).unwrap();
        assert_eq!((c.get("hz"), c.get("requirepass"), c.get("port")), ("20", "secret", "7000"));
        let missing = Config::from_args(&args(&["--include", "/nonexistent/rill.conf"])).unwrap_err();
        assert!(missing.reason.contains("can't open config file"), "{}", missing.reason);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn aliases_set_their_parameter_in_turn() {
        let mut c = Config::default();
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        let set = [pair("hash-max-listpack-entries", "5"), pair("hz", "6"), pair("hash-max-ziplist-entries", "7")];
        assert_eq!(c.set_many(&set, false).unwrap(), vec!["hash-max-listpack-entries", "hz"]);
        assert_eq!(c.get("hash-max-listpack-entries"), "7");
        let twice = c.set_many(&[pair("hz", "5"), pair("HZ", "6")], false);
        assert!(twice.unwrap_err().ends_with("duplicate parameter"));
        let got = c.matching(&[b"HASH-MAX-ZIPLIST-ENTRIES", b"hash-max-*-entries"]);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["HASH-MAX-ZIPLIST-ENTRIES", "hash-max-listpack-entries"]);
    }
}
