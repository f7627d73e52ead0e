//! Server commands: INFO, CONFIG, FLUSHDB/FLUSHALL, SWAPDB, TIME, DEBUG, SHUTDOWN.

use super::{ok, reply, syntax, Call, CmdResult};
use crate::client::Action;
use crate::info;
use crate::state::{now_us, Stats};
use bytes::Bytes;
use rill_engine::debug::hex as digest_hex;
use rill_engine::util::{parse_f64, parse_i64};
use rill_engine::CmdError;
use rill_resp::Reply;

/// CONFIG HELP lines.
pub const CONFIG_HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
];

/// MODULE HELP lines.
pub const MODULE_HELP: &[&str] = &[
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load a module library from <path>, while passing it module configurations and optional arguments.",
    "UNLOAD <name>",
    "    Unload a module.",
];

/// INFO [section ...]
pub fn info(c: &mut Call) -> CmdResult {
    let sections: Vec<String> =
        c.args.iter().skip(1).map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    let text = info::render(c.shared, c.st, &sections, c.now_ms);
    reply(Reply::Verbatim { format: *b"txt", text: Bytes::from(text) })
}

/// CONFIG GET pattern [pattern ...] → map of name → value.
pub fn config_get(c: &mut Call) -> CmdResult {
    let patterns: Vec<&[u8]> = c.args.iter().skip(2).map(|a| &a[..]).collect();
    let pairs = c.st.config.matching(&patterns);
    let b = |s: String| Reply::Bulk(Bytes::from(s));
    reply(Reply::Map(pairs.into_iter().map(|(k, v)| (b(k), b(v))).collect()))
}

/// CONFIG SET name value [name value ...], all or nothing.
pub fn config_set(c: &mut Call) -> CmdResult {
    if !c.args.len().is_multiple_of(2) {
        return Err(CmdError::arity("config|set"));
    }
    // A secret's value never reaches SLOWLOG or MONITOR, whether or not the call succeeds.
    for (i, name) in c.args.iter().enumerate().skip(2).step_by(2) {
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if crate::config::SENSITIVE.contains(&name.as_str()) {
            c.conn.redacted.push(i as u32 + 1);
        }
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let pairs: Vec<(String, String)> = c
        .args
        .get(2..)
        .unwrap_or(&[])
        .chunks_exact(2)
        .filter_map(|p| Some((text(p.first()?), text(p.get(1)?))))
        .collect();
    // Validate everything on a copy first, so the call is all or nothing.
    let mut trial = c.st.config.clone();
    let protected_ok = super::protected_action_allowed(c.st, c.conn.id, c.st.config.get("enable-protected-configs"));
    let changed = trial.set_many(&pairs, protected_ok).map_err(CmdError::owned)?;
    // `dir` changes the working directory, as in Redis; refuse the whole call if it cannot.
    if changed.contains(&"dir") {
        let dir = trial.get("dir").to_string();
        if let Err(e) = std::env::set_current_dir(&dir) {
            // Redis prints strerror() alone: drop Rust's " (os error N)" suffix.
            let text = e.to_string();
            let reason = text.split(" (os error").next().unwrap_or(&text);
            return Err(CmdError::owned(format!(
                "ERR CONFIG SET failed (possibly related to argument 'dir') - {reason}"
            )));
        }
        if let Ok(abs) = std::env::current_dir() {
            let _ = trial.set_startup("dir", &abs.display().to_string());
        }
    }
    // As Redis: a larger maxclients needs the open-files limit raised first; refuse the
    // call if the system does not allow it.
    if changed.contains(&"maxclients") {
        let wanted = u64::try_from(trial.get_i64("maxclients")).unwrap_or(1);
        let fitted = crate::listen::adjust_open_files_limit(wanted).unwrap_or(0);
        if fitted != wanted {
            return Err(CmdError::owned(format!("ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with {fitted}")));
        }
    }
    // TLS: a changed certificate, key, CA or policy must build a working configuration, or
    // the call is refused (Redis' "Unable to update TLS configuration"); the connections open
    // keep theirs, new ones get the new one.
    let tls_changed = changed.iter().find(|n| crate::tls::SERVER_DIRECTIVES.contains(n) || **n == "tls-port");
    let mut new_tls = None;
    if let Some(arg) = tls_changed {
        let wanted = trial.get_i64("tls-port") != 0 || !trial.get("tls-cert-file").is_empty();
        if wanted {
            match crate::tls::server_config(&trial) {
                Ok(cfg) => new_tls = Some(cfg),
                Err(e) => {
                    tracing::warn!("Failed to update TLS configuration: {e}");
                    return Err(CmdError::owned(format!(
                        "ERR CONFIG SET failed (possibly related to argument '{arg}') - Unable to update TLS configuration. Check server logs."
                    )));
                }
            }
        }
    }
    // The listeners, last: a port that cannot be listened on refuses the whole call, with
    // the old sockets bound again (Redis' rollback).
    if changed.contains(&"tls-port") || (changed.contains(&"bind") && trial.get_i64("tls-port") != 0) {
        let backlog = u32::try_from(trial.get_i64("tcp-backlog")).unwrap_or(511);
        let port = u16::try_from(trial.get_i64("tls-port")).unwrap_or(0);
        if c.shared.ports.tls.rebind(trial.get("bind"), port, backlog).is_err() {
            return Err(CmdError::full(
                "ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs.",
            ));
        }
    }
    if let Some(cfg) = new_tls {
        c.shared.tls.set(cfg);
    }
    let rebinds_redis = changed.iter().any(|n| *n == "port" || *n == "bind");
    let rebinds_http = changed.iter().any(|n| *n == "metrics-port" || *n == "bind");
    if rebinds_redis || rebinds_http {
        let backlog = u32::try_from(trial.get_i64("tcp-backlog")).unwrap_or(511);
        let bind = trial.get("bind").to_string();
        let port_of = |name: &str| u16::try_from(trial.get_i64(name)).unwrap_or(0);
        let failed = |arg: &str, why: &str| {
            CmdError::owned(format!("ERR CONFIG SET failed (possibly related to argument '{arg}') - {why}"))
        };
        let why = |port_changed: bool| {
            if port_changed {
                "Unable to listen on this port. Check server logs."
            } else {
                "Failed to bind to specified addresses."
            }
        };
        let ports = &c.shared.ports;
        let (old_bind, old_port) = (c.st.config.get("bind").to_string(), c.st.config.get_i64("port"));
        if rebinds_redis && ports.redis.rebind(&bind, port_of("port"), backlog).is_err() {
            let port_changed = changed.contains(&"port");
            return Err(failed(if port_changed { "port" } else { "bind" }, why(port_changed)));
        }
        if rebinds_http && ports.http.rebind(&bind, port_of("metrics-port"), backlog).is_err() {
            // Both or neither: the Redis port goes back to where it was.
            let _ = ports.redis.rebind(&old_bind, u16::try_from(old_port).unwrap_or(0), backlog);
            let port_changed = changed.contains(&"metrics-port");
            return Err(failed(if port_changed { "metrics-port" } else { "bind" }, why(port_changed)));
        }
    }
    c.st.config = trial;
    for name in changed {
        apply(c, name);
    }
    c.st.hot = crate::state::HotConfig::from(&c.st.config);
    c.st.replication.set_lazy_server_del(c.st.hot.lazy.server_del);
    c.st.engine.set_lazy_free(c.st.hot.lazy);
    // The engine names the fields of hash events only while a subkey channel is selected.
    c.st.engine.set_subkey_events(c.st.hot.notify.subkeys());
    if let Some(b) = &c.st.replication.backlog {
        // The attached replicas' output limit (`replication/backlog.rs`).
        let limit = c.st.hot.output_limits.of(crate::client_limits::ClientClass::Replica);
        b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).set_limit(limit);
    }
    // A lower `maxmemory-clients` (or `maxmemory`, under a percentage) evicts at once, as Redis.
    crate::run::evict_clients(c.st);
    ok()
}

/// Push a changed parameter into the parts of the server that use it.
fn apply(c: &mut Call, name: &str) {
    let cfg = &c.st.config;
    match name {
        "stream-node-max-entries" => {
            let v = cfg.get_i64(name);
            c.st.engine.reconfigure(|e| e.stream_node_max_entries = v);
        }
        "stream-node-max-bytes" => {
            let v = cfg.get_i64(name);
            c.st.engine.reconfigure(|e| e.stream_node_max_bytes = v);
        }
        "stream-idmp-duration" => {
            let v = cfg.get_i64(name).max(1) as u64;
            c.st.engine.reconfigure(|e| e.stream_idmp_duration_secs = v);
        }
        "stream-idmp-maxsize" => {
            let v = cfg.get_i64(name).max(1) as u64;
            c.st.engine.reconfigure(|e| e.stream_idmp_maxsize = v);
        }
        _ if rill_engine::types::object::ObjectConfig::DIRECTIVES.contains(&name) => {
            let (text, number) = (cfg.get(name).to_string(), cfg.get_i64(name));
            c.st.engine.reconfigure(|e| {
                e.object.set(name, &text, number);
            });
        }
        "repl-backlog-size" => {
            let size = usize::try_from(cfg.get_i64(name)).unwrap_or(usize::MAX);
            if let Some(b) = &c.st.replication.backlog {
                b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).set_capacity(size);
            }
        }
        "maxmemory" => {
            let max = u64::try_from(cfg.get_i64(name)).unwrap_or(0);
            let used = crate::alloc::allocated_bytes();
            if max > 0 && max < used {
                tracing::warn!("WARNING: the new maxmemory value set via CONFIG SET ({max}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.");
            }
            // Evictions start now, in the background, not only at the next command.
            c.st.eviction.wake.notify_one();
        }
        "loglevel" => crate::logging::set_level(cfg.get(name)),
        // The default user's only password, or none (Redis' ACLUpdateDefaultUserPassword).
        "requirepass" => c.shared.acl.set_default_password(cfg.get(name).as_bytes()),
        "acllog-max-len" => {
            let mut log = c.shared.acl.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // As Redis, the entries past a lower limit go at the next entry, not now.
            log.max_len = usize::try_from(cfg.get_i64(name)).unwrap_or(usize::MAX);
        }
        "acl-pubsub-default" => c.shared.acl.set_all_channels_default(cfg.get(name) == "allchannels"),
        "busy-poll-us" => crate::poll::set_max_us(u64::try_from(cfg.get_i64(name)).unwrap_or(0)),
        "appendfsync" => {
            if let Some(log) = c.st.journal.log() {
                log.set_policy(crate::aof::FsyncPolicy::parse(cfg.get(name)));
            }
        }
        "appendonly" => {
            let on = cfg.get(name) == "yes";
            if let Some(shared) = c.shared.arc() {
                if let Err(e) = crate::persist::set_appendonly(&shared, c.st, on) {
                    tracing::warn!("appendonly {}: {e}", if on { "yes" } else { "no" });
                }
            }
        }
        _ => {}
    }
}

/// CONFIG RESETSTAT
pub fn config_resetstat(c: &mut Call) -> CmdResult {
    // Redis keeps the ACL counters (`acl::AclLog`) across RESETSTAT.
    let repl_offset_seen = c.st.stats.repl_offset_seen;
    c.st.stats = Stats { repl_offset_seen, ..Stats::default() };
    c.st.engine.reset_stats();
    c.st.lazyfree.reset_freed();
    // sync_full, sync_partial_ok, sync_partial_err restart from 0 too (Redis resets them).
    c.st.replication.syncs = Default::default();
    ok()
}

/// CONFIG REWRITE: bring the file the server was started with up to the running
/// configuration, keeping its lines, comments and order as Redis does (`config::rewrite_file`).
/// It runs under the state lock, as Redis runs it on its one thread: the server waits for the
/// file's two syncs (rare, and what Sentinel's reconfiguration transaction expects).
pub fn config_rewrite(c: &mut Call) -> CmdResult {
    let Some(path) = c.st.config.file.clone() else {
        return Err(CmdError::full("ERR The server is running without a config file"));
    };
    if let Err(e) = crate::config::rewrite_file(std::path::Path::new(&path), &c.st.config, &c.shared.acl.lines_text()) {
        // Redis prints strerror() alone: drop Rust's " (os error N)" suffix.
        let text = e.to_string();
        let reason = text.split(" (os error").next().unwrap_or(&text);
        tracing::warn!("CONFIG REWRITE failed: {reason}");
        return Err(CmdError::owned(format!("ERR Rewriting config file: {reason}")));
    }
    tracing::info!("CONFIG REWRITE executed with success.");
    ok()
}

/// MODULE LOAD|LOADEX path ...: rill loads no modules, so this fails as Redis fails a module
/// it cannot load.
pub fn module_load(c: &mut Call) -> CmdResult {
    tracing::warn!("Module {} failed to load: rill does not load modules", c.text(2));
    Err(CmdError::full("ERR Error loading the extension. Please check the server logs."))
}

/// TIME → [seconds, microseconds] as bulk strings.
pub fn time() -> CmdResult {
    let us = now_us();
    reply(Reply::Array(vec![
        Reply::Bulk(Bytes::from((us / 1_000_000).to_string())),
        Reply::Bulk(Bytes::from((us % 1_000_000).to_string())),
    ]))
}

const DEBUG_HELP: &[&str] = &[
    "LOG <message>",
    "    Write <message> to the server log.",
    "REPLICATE <command> [<arg> ...]",
    "    Send <command> to the replicas, as it is, without running it here.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing (here: shrinking idle query buffers).",
    "REPLYBUFFER RESIZING <0|1>",
    "    Keep (0) each client's reply buffer at the size it grew to, or let it be given back",
    "    when idle and dropped when it grew large (1, the default).",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Turn active expiry off or on.",
    "LISTPACK <key>",
    "    Log the elements of a listpack-encoded key (a hash's fields with their expiry times).",
    "SET-ALLOW-ACCESS-EXPIRED <0|1>",
    "    Let commands see (1) or not (0) hash fields whose expiry time has passed.",
    "OBJECT <key>",
    "    Show low-level information about the value stored at <key>.",
    "PANIC",
    "    Panic inside the command: the server aborts, and a restart replays the log.",
    "DIGEST",
    "    A 40-hex-digit fingerprint of every database's data, equal to Redis' for the same data.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    The fingerprint of each key's value (all zeros for a missing key).",
    "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
    "    Save the snapshot (not with NOSAVE), empty the data and the function libraries (not",
    "    with NOFLUSH), load the snapshot back (MERGE: its keys and libraries replace those there).",
    "LOADAOF",
    "    Hand the append-only log to the OS and reload the dataset from its files.",
    "REPL-PAUSE <clear|before-rdb-channel|on-streaming-repl-buf>",
    "    Stop the process (SIGSTOP) at that point of a replica's sync over an RDB channel.",
    "CHANGE-REPL-ID",
    "    Start a new replication history (and forget the one before): replicas then sync fully.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys <prefix>:0, <prefix>:1, ... (prefix 'key') holding",
    "    'value:N', cut or zero-padded to <size> bytes if given. Existing keys are kept.",
    "    Logged as SETs (Redis neither logs nor replicates it).",
];

/// DEBUG subcommand [args]: the safe subset. Anything else is an error, never a dropped
/// connection.
pub fn debug(c: &mut Call) -> CmdResult {
    // Whether `enable-debug-command` lets this client in is checked before the call, with
    // the other protected commands (dispatch.rs).
    let sub = c.text(1).to_ascii_lowercase();
    let n = c.args.len();
    match (sub.as_str(), n) {
        ("help", 2) => reply(super::help("DEBUG", DEBUG_HELP)),
        ("log", 3) => {
            tracing::warn!(target: "rill::debug", "DEBUG LOG: {}", c.text(2));
            ok()
        }
        ("sleep", 3) => {
            // Redis reads the seconds with strtod: text that is not a number sleeps 0 s.
            let secs = parse_f64(c.arg(2)).filter(|s| *s >= 0.0 && s.is_finite()).unwrap_or(0.0);
            // Holding the lock is the point: DEBUG SLEEP stops the whole server, as in Redis.
            std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
            ok()
        }
        ("repl-pause", 3) => {
            let point = c.text(2).to_ascii_lowercase();
            let pause = &mut c.st.replication.debug_pause;
            match point.as_str() {
                "clear" => *pause = crate::replication::DebugPause::default(),
                "before-rdb-channel" => pause.before_rdb_channel = true,
                "on-streaming-repl-buf" => pause.on_streaming_buffer = true,
                // `after-fork` stops Redis' parent while its child sends the snapshot; rill
                // has no child: stopping would stop the sending too.
                _ => return Err(super::subcommand_syntax(c)),
            }
            ok()
        }
        ("pause-cron", 3) => {
            crate::client_limits::pause_cron(c.arg(2) != b"0");
            ok()
        }
        ("replybuffer", 4) if c.arg(2).eq_ignore_ascii_case(b"resizing") => {
            // As Redis reads it (atoi): anything but a number other than 0 turns it off.
            let on = parse_i64(c.arg(3)).is_some_and(|n| n != 0);
            crate::client_limits::set_reply_buffer_resizing(on);
            ok()
        }
        ("set-active-expire", 3) => {
            c.st.active_expire = c.arg(2) != b"0";
            ok()
        }
        ("set-allow-access-expired", 3) => {
            c.st.engine.set_allow_access_expired(c.arg(2) != b"0");
            ok()
        }
        ("panic", 2) => {
            // Crash-only (main.rs): the process aborts here, with the lock held.
            panic!("DEBUG PANIC called at Unix time {}", c.now_ms / 1000)
        }
        ("object", 3) => {
            let key = c.arg(2).to_vec();
            let cfg = c.st.engine.config().object;
            let loaded_s = c.st.engine.first_clock_s();
            // Not an access, and no expiry check, as in Redis: a key whose time has passed but
            // that is still held (on a replica, while expiry is paused) is described.
            let Some(e) = c.st.engine.db(c.conn.db).get_raw(&key) else {
                return Err(CmdError::NO_SUCH_KEY);
            };
            let ttl = e.expire_at_ms().map(|t| t - c.now_ms).unwrap_or(-1);
            let (encoding, quicklist) = rill_engine::types::object::encoding::debug_fields(&key, e, &cfg);
            let ql = quicklist.map_or(String::new(), |(nodes, avg, bytes)| {
                format!(
                    " ql_nodes:{nodes} ql_avg_node:{avg:.2} ql_listpack_max:{} ql_compressed:0 \
                     ql_uncompressed_size:{bytes}",
                    cfg.list_max_listpack_size
                )
            });
            reply(Reply::Simple(Bytes::from(format!(
                "Value at:0x0 refcount:1 encoding:{encoding} serializedlength:0 lru:0 lru_seconds_idle:{}{ql} type:{} \
                 ttl_ms:{ttl}",
                e.meta.idle_seconds(c.now_ms, loaded_s),
                e.value.type_name(),
            ))))
        }
        ("listpack", 3) => {
            // Redis prints the listpack's bytes; rill has none, so it logs what Redis would hold
            // in it: the key, its encoding and its elements (a hash's fields with their times).
            let key = c.arg(2).to_vec();
            let cfg = c.st.engine.config().object;
            let Some(e) = c.st.engine.peek(c.conn.db, &key, c.now_ms) else {
                return Err(CmdError::NO_SUCH_KEY);
            };
            let encoding = rill_engine::types::object::encoding::name(&key, e, &cfg);
            if encoding != "listpack" && encoding != "listpackex" {
                return Err(CmdError::full("ERR Not a listpack encoded object."));
            }
            let elements = match &e.value {
                rill_engine::Value::Hash(h) => h
                    .iter()
                    .map(|(f, v)| {
                        let ttl = h.ttl(f).map_or(String::new(), |t| format!(" ttl {t}"));
                        format!("{:?}={:?}{ttl}", String::from_utf8_lossy(f), String::from_utf8_lossy(v))
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                other => format!("a {}", other.type_name()),
            };
            tracing::info!("DEBUG LISTPACK {:?} ({encoding}): {elements}", String::from_utf8_lossy(&key));
            reply(Reply::Simple(Bytes::from_static(b"Listpack structure printed on stdout")))
        }
        ("digest", 2) => reply(Reply::Simple(Bytes::from(digest_hex(&c.st.engine.dataset_digest())))),
        ("digest-value", _) => {
            let db = c.conn.db;
            let digests = c.args.iter().skip(2).map(|key| {
                // Not an access, and found even when its time has passed, as in Redis.
                Reply::Simple(Bytes::from(digest_hex(&c.st.engine.key_value_digest(db, key))))
            });
            reply(Reply::Array(digests.collect()))
        }
        ("populate", 3..=5) => debug_populate(c),
        ("reload", _) => debug_reload(c),
        ("loadaof", 2) => debug_loadaof(c),
        ("change-repl-id", 2) => {
            tracing::info!("Changing replication IDs after receiving DEBUG change-repl-id");
            c.st.replication.change_replid(crate::run::run_id());
            ok()
        }
        ("replicate", n) if n >= 3 => {
            // The arguments, as a command, straight into the replication stream (after what was
            // committed so far, no SELECT, not logged): a testing aid, as in Redis, which feeds
            // them only from a primary.
            if c.st.replication.master.is_none() {
                let command: Vec<Bytes> = c.args.get(2..).unwrap_or_default().to_vec();
                c.st.journal.stream_only(&command);
            }
            ok()
        }
        _ => Err(super::subcommand_syntax(c)),
    }
}

/// DEBUG LOADAOF: have the log's writer hand every record to the OS, then replace the
/// keyspace with what the log files hold (their base and every record), as a restart would
/// load it. Records nothing: the data is the log's own. Needs `appendonly yes` (Redis would
/// exit on a missing AOF; rill answers an error).
fn debug_loadaof(c: &mut Call) -> CmdResult {
    let Some(log) = c.st.journal.log().cloned() else {
        return Err(CmdError::full("ERR DEBUG LOADAOF needs the append-only log (appendonly yes)"));
    };
    if !log.write_through(c.st.journal.appended()) {
        return Err(CmdError::full("ERR DEBUG LOADAOF: the log could not be written, check server logs"));
    }
    let config = c.st.engine.config().clone();
    let loaded = crate::aof::load::rebuild_from_dir(
        c.st.config.get("appenddirname"),
        c.st.config.get("appendfilename"),
        config,
        &c.shared.log_table,
    )
    .map_err(|e| {
        tracing::warn!("DEBUG LOADAOF: {e}");
        CmdError::full("ERR DEBUG LOADAOF: the log could not be loaded, check server logs")
    })?;
    c.st.engine.replace_all(loaded);
    tracing::info!("Append Only File loaded by DEBUG LOADAOF");
    ok()
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: save the snapshot (unless NOSAVE), empty the
/// keyspace and the function libraries (unless NOFLUSH), and load the snapshot file back;
/// MERGE lets what it holds replace keys and libraries already there, without it one there
/// fails the load (nothing changed). A reload after a save and a flush gives back what was
/// there, so it records nothing; any other changes the data, and records what it changed
/// (FLUSHALL, a RESTORE per key, each library) like any write.
fn debug_reload(c: &mut Call) -> CmdResult {
    let (mut merge, mut flush, mut save) = (false, true, true);
    for a in c.args.iter().skip(2) {
        if a.eq_ignore_ascii_case(b"merge") {
            merge = true;
        } else if a.eq_ignore_ascii_case(b"noflush") {
            flush = false;
        } else if a.eq_ignore_ascii_case(b"nosave") {
            save = false;
        } else {
            return Err(CmdError::full("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."));
        }
    }
    if save && crate::persist::rewrite::save(c.st).is_err() {
        return Err(CmdError::full("ERR"));
    }
    let failed = || CmdError::full("ERR Error trying to load the RDB dump, check server logs.");
    let path = std::path::PathBuf::from(c.st.config.get("dbfilename"));
    let config = c.st.engine.config().clone();
    let mut loaded = crate::aof::load::rebuild(Some(&path), &[], config, &c.shared.log_table).map_err(|e| {
        tracing::warn!("DEBUG RELOAD: {e}");
        failed()
    })?;
    if save && flush {
        c.st.engine.replace_all(loaded);
        tracing::info!("DB reloaded by DEBUG RELOAD");
        return ok();
    }
    let libraries: Vec<Bytes> = loaded.libraries().iter().map(|l| l.code.clone()).collect();
    let dbs = loaded.drain_dbs();
    if !flush && !merge {
        let engine = &c.st.engine;
        let dup_key = dbs.iter().enumerate().find_map(|(db, keys)| {
            keys.iter().find(|(k, _)| engine.db(db).get_raw(k).is_some()).map(|(k, _)| k.clone())
        });
        let dup_lib = libraries.iter().find_map(|code| {
            let name = rill_engine::functions::parse_meta(code).ok()?.name;
            engine.libraries().get(&name).is_some().then_some(name)
        });
        if let Some(key) = dup_key {
            tracing::warn!("DEBUG RELOAD: the snapshot holds key '{}', already there", String::from_utf8_lossy(&key));
            return Err(failed());
        }
        if let Some(name) = dup_lib {
            tracing::warn!("DEBUG RELOAD: the snapshot holds library '{name}', already there");
            return Err(failed());
        }
    }
    if flush {
        c.st.journal.push_command(0, &[Bytes::from_static(b"FLUSHALL")]);
        c.st.engine.flush_all(false, false);
        c.st.journal.push_effect(&rill_engine::effect::Effect::LibrariesFlushed);
        c.st.engine.libraries_mut().clear();
    }
    for (db, keys) in dbs.into_iter().enumerate() {
        for (key, entry) in keys {
            let payload = rill_engine::rdb::dump(&entry.value, c.now_ms);
            let mut args = vec![
                Bytes::from_static(b"RESTORE"),
                key.clone(),
                Bytes::from(entry.expire_at_ms().unwrap_or(0).to_string()),
                Bytes::from(payload),
                Bytes::from_static(b"REPLACE"),
            ];
            if entry.expire_at_ms().is_some() {
                args.push(Bytes::from_static(b"ABSTTL"));
            }
            c.st.journal.push_command(db, &args);
            let expiry = entry.expire_at_ms();
            c.st.engine.insert(db, key.clone(), entry.value);
            c.st.engine.set_expire(db, &key, expiry);
        }
    }
    for code in libraries {
        let _ = c.st.engine.libraries_mut().set(code.clone());
        c.st.journal.push_effect(&rill_engine::effect::Effect::Library { code });
    }
    tracing::info!("DB reloaded by DEBUG RELOAD");
    ok()
}

/// DEBUG POPULATE count [prefix] [size]: the arguments checked in Redis' order (count, then
/// loading, then size), then the keys made by the engine, which records each one as a `SET`.
fn debug_populate(c: &mut Call) -> CmdResult {
    // Redis answers the same for text that is not a number and for a negative one.
    let non_negative = |arg: &[u8]| {
        parse_i64(arg)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or(CmdError::full("ERR value is out of range, must be positive"))
    };
    let count = non_negative(c.arg(2))?;
    if c.st.persist.loading {
        return Err(CmdError::full("LOADING Redis is loading the dataset in memory"));
    }
    let size = if c.args.len() == 5 { non_negative(c.arg(4))? } else { 0 };
    let prefix =
        if c.args.len() >= 4 { c.args.get(3).cloned().unwrap_or_default() } else { Bytes::from_static(b"key") };
    let mut ctx = rill_engine::CallCtx::new(c.conn.db, c.now_ms, c.conn.id);
    ctx.recording = c.st.journal.recording();
    if ctx.recording {
        ctx.effects = c.st.journal.lend_buf();
    }
    let made = c.st.engine.populate(&mut ctx, count, &prefix, size);
    // Deletions of expired keys it met first, then its SETs.
    c.st.collect_effects(&mut ctx.effects);
    if ctx.recording {
        c.st.journal.return_buf(std::mem::take(&mut ctx.effects));
    }
    made?;
    ok()
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: a primary with lagging replicas pauses
/// writes and waits for them first (`shutdown.rs`); the caller stays blocked until the process
/// ends (no reply) or the shutdown is cancelled (an error).
pub fn shutdown(c: &mut Call) -> CmdResult {
    let mut flags = crate::shutdown::Flags::default();
    let mut abort = false;
    for a in c.args.iter().skip(1) {
        match a.to_ascii_lowercase().as_slice() {
            b"nosave" => flags.nosave = true,
            b"save" => flags.save = true,
            b"now" => flags.now = true,
            b"force" => flags.force = true,
            b"abort" => abort = true,
            _ => return Err(syntax()),
        }
    }
    if (abort && flags != crate::shutdown::Flags::default()) || (flags.save && flags.nosave) {
        return Err(syntax());
    }
    if abort {
        return if crate::shutdown::abort(c.st, c.now_ms) {
            ok()
        } else {
            Err(CmdError::full("ERR No shutdown in progress."))
        };
    }
    // Subscribed before it starts: a cancellation from here on reaches this caller.
    let cancelled = c.st.shutdown.subscribe();
    crate::shutdown::start(c.st, flags, false, c.now_ms);
    Ok(Action::AwaitShutdown(cancelled))
}

/// SAVE: write the snapshot now.
pub fn save(c: &mut Call) -> CmdResult {
    if c.st.persist.bgsave_in_progress {
        return Err(CmdError::full("ERR Background save already in progress"));
    }
    match crate::persist::rewrite::save(c.st) {
        Ok(()) => ok(),
        Err(_) => Err(CmdError::full("ERR")),
    }
}

/// BGSAVE [SCHEDULE]: write the snapshot in the background.
pub fn bgsave(c: &mut Call) -> CmdResult {
    let schedule = match c.args.get(1) {
        None => false,
        Some(a) if c.args.len() == 2 && a.eq_ignore_ascii_case(b"schedule") => true,
        Some(_) => return Err(syntax()),
    };
    let Some(shared) = c.shared.arc() else { return Err(CmdError::full("ERR server is shutting down")) };
    if c.st.persist.rewrite_in_progress && schedule {
        return reply(Reply::simple("Background saving scheduled"));
    }
    // With the log on, a BGSAVE is a log rewrite whose snapshot is also copied to dbfilename:
    // it is built from the log files in the background, without copying the keyspace.
    if c.st.journal.log().is_some() && !c.st.persist.bgsave_in_progress {
        let dest = std::path::PathBuf::from(c.st.config.get("dbfilename"));
        return match crate::persist::rewrite::start_with(&shared, c.st, Some(dest)) {
            Ok(()) => reply(Reply::simple("Background saving started")),
            Err(_) if c.st.persist.rewrite_in_progress => {
                Err(CmdError::full("ERR Background append only file rewriting in progress"))
            }
            Err(e) => Err(CmdError::full(e)),
        };
    }
    match crate::persist::rewrite::bgsave(&shared, c.st) {
        Ok(()) => reply(Reply::simple("Background saving started")),
        Err(e) => Err(CmdError::full(e)),
    }
}

/// BGREWRITEAOF: compact the log in the background.
pub fn bgrewriteaof(c: &mut Call) -> CmdResult {
    let Some(shared) = c.shared.arc() else { return Err(CmdError::full("ERR server is shutting down")) };
    if c.st.persist.rewrite_in_progress {
        return Err(CmdError::full("ERR Background append only file rewriting already in progress"));
    }
    if c.st.persist.bgsave_in_progress {
        c.st.persist.rewrite_scheduled = true;
        return reply(Reply::simple("Background append only file rewriting scheduled"));
    }
    match crate::persist::rewrite::start(&shared, c.st) {
        Ok(()) => reply(Reply::simple("Background append only file rewriting started")),
        Err(e) => Err(CmdError::full(e)),
    }
}
