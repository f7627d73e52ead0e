//! From a parsed request to an action: command lookup and the checks that run before a command
//! (in Redis' order, so error precedence matches — docs/spec/connection.md §4), MULTI
//! queueing, and the call itself.

use crate::acl::{Context, Origin};
use crate::client::{Action, Conn};
use crate::clock::Tick;
use crate::cmd;
use crate::state::{Shared, State};
use bytes::Bytes;
use rill_engine::command::{CommandSpec, Flags, Handler, Lookup};
use rill_engine::{CallCtx, CmdError};
use rill_resp::{Protocol, Reply};

/// The error for an unknown command, as Redis words it: the name and up to ~128 bytes of its
/// arguments, each quoted and followed by a space. Built from raw bytes: Redis echoes them
/// unchanged (only CR/LF become spaces), whatever their encoding.
pub fn unknown_command_error(args: &[Bytes]) -> Reply {
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(trunc(args.first().map(|a| &a[..]).unwrap_or(b""), 128));
    text.extend_from_slice(b"', with args beginning with: ");
    let mut rest: Vec<u8> = Vec::new();
    for a in args.iter().skip(1) {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push(b'\'');
        rest.extend_from_slice(trunc(a, room));
        rest.extend_from_slice(b"' ");
    }
    text.extend_from_slice(&rest);
    error_bytes(text)
}

/// An error reply from raw bytes, echoed as Redis echoes them (the reply writer turns CR and
/// LF into spaces, for every error line).
fn error_bytes(text: Vec<u8>) -> Reply {
    Reply::Error(Bytes::from(text))
}

fn trunc(b: &[u8], max: usize) -> &[u8] {
    b.get(..max.min(b.len())).unwrap_or(b)
}

/// Run the pre-checks, queue or execute one request, and count it. `args` is taken only by a
/// request that keeps it (queued in MULTI, blocked); otherwise the caller reuses the vector.
pub fn execute(shared: &Shared, st: &mut State, conn: &mut Conn, args: &mut Vec<Bytes>, now_ms: i64) -> Action {
    let mut spec = None;
    let action = request(shared, st, conn, args, now_ms, &mut spec);
    if st.tracking.active() {
        let name = spec.map_or("", |s| s.name);
        crate::tracking::command_done(st, conn.id, name, conn.multi.is_some());
    }
    action
}

/// [`execute`], saying in `resolved` which command the request named.
fn request(
    shared: &Shared,
    st: &mut State,
    conn: &mut Conn,
    args: &mut Vec<Bytes>,
    now_ms: i64,
    resolved: &mut Option<&'static CommandSpec>,
) -> Action {
    let spec = match conn.last_lookup.resolve(&shared.table, args) {
        Lookup::Found(s) => s,
        Lookup::UnknownCommand => return reject(st, conn, None, unknown_command_error(args)),
        Lookup::UnknownSubcommand(container) => {
            let mut text = b"ERR unknown subcommand '".to_vec();
            text.extend_from_slice(trunc(args.get(1).map(|a| &a[..]).unwrap_or(b""), 128));
            text.extend_from_slice(format!("'. Try {} HELP.", container.name.to_ascii_uppercase()).as_bytes());
            return reject(st, conn, Some(container), error_bytes(text));
        }
    };
    *resolved = Some(spec);
    if !spec.arity_ok(args.len()) {
        return reject(st, conn, Some(spec), CmdError::arity(spec.name).to_reply());
    }
    // A script's declared flags replace the command's own for the checks below.
    let flags = if spec.flags.has(Flags::SCRIPT) { crate::script::command_flags(st, spec, args) } else { spec.flags };
    if spec.flags.has(Flags::PROTECTED) {
        if let Some(err) = protected_command_error(st, conn, spec) {
            return reject(st, conn, Some(spec), err);
        }
    }
    if !conn.authenticated && !spec.flags.has(Flags::NO_AUTH) {
        return reject(st, conn, Some(spec), CmdError::full("NOAUTH Authentication required.").to_reply());
    }
    if conn.user.is_some() {
        let context = if conn.multi.is_some() { Context::Multi } else { Context::Toplevel };
        match acl_check(shared, st, conn, spec, args, Origin { context, running: spec.name }, now_ms) {
            AclOutcome::Allowed => {}
            AclOutcome::Gone => return Action::Close(None),
            AclOutcome::Denied(text) => {
                return reject(st, conn, Some(spec), Reply::Error(Bytes::from(format!("NOPERM {text}"))))
            }
        }
    }
    // Over maxmemory, keys are evicted first (each eviction a unit of its own, logged before
    // this command); `oom`: still over with nothing to evict. The primary's stream is obeyed.
    let oom = crate::evict::before_command(st, conn.db, now_ms) && !conn.is_master;
    if st.tracking.active() {
        // The tracking table kept to `tracking-table-max-keys`, before the command as in Redis.
        crate::tracking::limit(st, Some(conn.tracking_id), now_ms);
        // What an eviction or the limit invalidated for this client precedes its reply.
        conn.push_first = st.clients.get(&conn.id).is_some_and(|c| c.push.queued_bytes() > 0);
    }
    if let Some(err) = persistence_checks(st, conn, spec, flags, oom) {
        return reject(st, conn, Some(spec), err);
    }
    // A pause holds the command (queued or run) until it ends; the primary's stream on a
    // replica is held by its link (`replica.rs`), a replica's feed never reaches dispatch.
    if !conn.is_master {
        let writes = may_replicate(st, conn, flags);
        if st.pause.holds(writes, now_ms) {
            // CLIENT LIST shows the held command as the client's own, as Redis does.
            conn.last_cmd = spec.name;
            publish_client_info(st, conn, now_ms);
            let wait =
                crate::pause::HeldWait { changed: st.pause.subscribe(), until_ms: st.pause.held_until(writes, now_ms) };
            return Action::Held(wait);
        }
    }
    if conn.multi.is_some() {
        if spec.flags.has(Flags::NO_MULTI) {
            return reject(
                st,
                conn,
                Some(spec),
                CmdError::full("ERR Command not allowed inside a transaction").to_reply(),
            );
        }
        if !spec.flags.has(Flags::TRANSACTION_CONTROL) {
            if let Some(m) = conn.multi.as_mut() {
                m.argv_bytes += args.iter().map(Bytes::len).sum::<usize>();
                m.queued.push((spec, std::mem::take(args)));
                let n = m.queued.len() as i64;
                if let Some(c) = st.clients.get_mut(&conn.id) {
                    c.multi = n;
                }
            }
            return Action::Reply(Reply::simple("QUEUED"));
        }
    }
    if spec.flags.has(Flags::TOUCHES_ARBITRARY_KEYS) {
        st.journal.send_apart();
    }
    let action = crate::unit::run(st, now_ms, |st| call(shared, st, conn, spec, args, now_ms, false));
    if spec.flags.has(Flags::WRITE) || spec.flags.has(Flags::EXEC) {
        // Where this client's last write ended, for WAIT and WAITAOF.
        conn.last_write = (st.replication.offset(), st.journal.appended());
    }
    match (st.free_wait.take(), action) {
        (Some(rx), Action::Reply(r)) => Action::AwaitFreed(rx, r),
        (_, action) => action,
    }
}

/// What the ACL check of one command found.
#[derive(Debug)]
pub enum AclOutcome {
    /// The user may run it.
    Allowed,
    /// The user may not: the error text, without `NOPERM ` (logged already).
    Denied(String),
    /// The connection's user was deleted: the connection closes.
    Gone,
}

/// ACL: the connection's user (looked up again when any user changed) must allow `spec` with
/// `args`, as Redis checks right after authentication. A refusal is counted and logged in the
/// ACL log under `origin`. A connection without a user (the server's own) is allowed all.
pub fn acl_check(
    shared: &Shared,
    st: &State,
    conn: &mut Conn,
    spec: &'static CommandSpec,
    args: &[Bytes],
    origin: Origin,
    now_ms: i64,
) -> AclOutcome {
    let Some(user) = conn.user.as_mut() else { return AclOutcome::Allowed };
    if !shared.acl.refresh(user, &mut conn.acl_gen) {
        return AclOutcome::Gone;
    }
    if user.unrestricted() {
        return AclOutcome::Allowed;
    }
    match user.check(&shared.acl.commands, spec, args) {
        Ok(()) => AclOutcome::Allowed,
        Err(denied) => {
            let user = user.clone();
            cmd::acl::log_denied(shared, st, conn.id, &user.name, denied, spec, args, origin, now_ms);
            AclOutcome::Denied(crate::acl::denied_text(denied, &user, spec, args, false))
        }
    }
}

/// Whether CLIENT PAUSE WRITE holds the command: it writes or may replicate, or it is an EXEC
/// whose queue holds such a command.
fn may_replicate(st: &State, conn: &Conn, flags: Flags) -> bool {
    let writes = |f: Flags| f.has(Flags::WRITE) || f.has(Flags::MAY_REPLICATE);
    // A queued script counts by its declared flags, as it would alone.
    let queued_flags = |s: &'static CommandSpec, args: &[Bytes]| {
        if s.flags.has(Flags::SCRIPT) {
            crate::script::command_flags(st, s, args)
        } else {
            s.flags
        }
    };
    writes(flags)
        || (flags.has(Flags::EXEC)
            && conn.multi.as_ref().is_some_and(|m| m.queued.iter().any(|(s, a)| writes(queued_flags(s, a)))))
}

/// DEBUG and MODULE LOAD/LOADEX/UNLOAD run only where `enable-debug-command` /
/// `enable-module-command` allow; checked right after arity, before authentication, as Redis.
fn protected_command_error(st: &State, conn: &Conn, spec: &'static CommandSpec) -> Option<Reply> {
    let (command, setting) = if spec.name.starts_with("module|") {
        ("MODULE", "enable-module-command")
    } else {
        ("DEBUG", "enable-debug-command")
    };
    if cmd::protected_action_allowed(st, conn.id, st.config.get(setting)) {
        return None;
    }
    Some(Reply::Error(Bytes::from(format!("ERR {command} command not allowed. If the {setting} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."))))
}

/// When a replica last logged that it applies its primary's writes without its log (Unix ms).
static LAST_DISK_ERROR_LOG_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// The checks Redis runs after authentication, in its order: memory (`-OOM` for commands that
/// may grow it, and for an EXEC whose queue holds one, when `oom`: over `maxmemory` with
/// nothing left to evict, `evict.rs`), the log (`-MISCONF` for writes and PING while the last
/// write or fsync failed), RESP2 subscribe mode (only the commands flagged
/// `SUBSCRIBE_CONTEXT`), and loading (`-LOADING` for commands not flagged `loading`).
fn persistence_checks(st: &State, conn: &Conn, spec: &'static CommandSpec, flags: Flags, oom: bool) -> Option<Reply> {
    if oom {
        let denyoom = flags.has(Flags::DENYOOM)
            || (flags.has(Flags::EXEC)
                && conn.multi.as_ref().is_some_and(|m| m.queued.iter().any(|(s, _)| s.flags.has(Flags::DENYOOM))));
        if denyoom {
            return Some(CmdError::full("OOM command not allowed when used memory > 'maxmemory'.").to_reply());
        }
    }
    if flags.has(Flags::WRITE) || flags.has(Flags::REFUSED_ON_DISK_ERROR) {
        if let Some(why) = st.journal.refusal() {
            if !conn.is_master {
                return Some(Reply::Error(Bytes::from(format!("MISCONF Errors writing to the AOF file: {why}"))));
            }
            // The primary's stream is never refused: a replica that cannot log it ends the
            // process, or with `replica-ignore-disk-write-errors yes` applies it anyway, saying
            // so at most every 10 s (Redis' rule).
            if flags.has(Flags::WRITE) && st.config.get("replica-ignore-disk-write-errors") != "yes" {
                panic!("Replica was unable to write command to disk.");
            }
            let now = crate::clock::now_ms();
            let last = LAST_DISK_ERROR_LOG_MS.load(std::sync::atomic::Ordering::Relaxed);
            if now > last + 10_000 {
                LAST_DISK_ERROR_LOG_MS.store(now, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!("Replica is applying a command even though it is unable to write to disk.");
            }
        }
    }
    let write = flags.has(Flags::WRITE)
        || (flags.has(Flags::EXEC)
            && conn.multi.as_ref().is_some_and(|m| m.queued.iter().any(|(s, _)| s.flags.has(Flags::WRITE))));
    // min-replicas-to-write: a primary refuses writes while too few replicas acknowledged
    // within min-replicas-max-lag seconds (Redis checks only with both set).
    let min = st.hot.min_replicas_to_write;
    if write && min > 0 && st.hot.min_replicas_max_lag > 0 && st.replication.master.is_none() {
        let now = crate::clock::now_ms();
        if st.replication.good_replicas(now, st.hot.min_replicas_max_lag) < min {
            return Some(CmdError::full("NOREPLICAS Not enough good replicas to write.").to_reply());
        }
    }
    if let Some(link) = &st.replication.master {
        if write && !conn.is_master && st.config.get("replica-read-only") != "no" {
            return Some(CmdError::full("READONLY You can't write against a read only replica.").to_reply());
        }
        let stale = link.state != crate::replication::LinkStatus::Connected;
        if stale && !flags.has(Flags::STALE) && st.config.get("replica-serve-stale-data") == "no" {
            return Some(
                CmdError::full("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.")
                    .to_reply(),
            );
        }
    }
    // A RESP2 client in subscribe mode reads replies as messages: only the commands of that
    // mode run (RESP3 tells pushes from replies, so it has no such mode).
    if conn.subscribed && conn.proto == Protocol::Resp2 && !flags.has(Flags::SUBSCRIBE_CONTEXT) {
        return Some(Reply::Error(Bytes::from(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ))));
    }
    if (st.persist.loading && !flags.has(Flags::LOADING))
        || (st.persist.async_loading && flags.has(Flags::NO_ASYNC_LOADING))
    {
        return Some(CmdError::full("LOADING Redis is loading the dataset in memory").to_reply());
    }
    None
}

/// A request rejected before running: counts as an error and, inside MULTI, dooms the EXEC.
/// A rejected EXEC itself discards the transaction and says why, as Redis does (also outside
/// MULTI): `EXECABORT Transaction discarded because of: <error>`, less an `ERR` code.
fn reject(st: &mut State, conn: &mut Conn, spec: Option<&'static CommandSpec>, err: Reply) -> Action {
    if let Some(m) = conn.multi.as_mut() {
        m.failed = true;
    }
    let mut err = err;
    if spec.is_some_and(|s| s.flags.has(Flags::EXEC)) {
        conn.multi = None;
        st.engine.unwatch_all(conn.id);
        if let Some(c) = st.clients.get_mut(&conn.id) {
            c.multi = -1;
        }
        if let Reply::Error(t) = &err {
            // Redis words arity-style rejections as bare messages (its `ERR ` is added on
            // the way out) and keeps the code of the others (OOM, MISCONF, NOAUTH, ...).
            let reason = t.strip_prefix(b"ERR ").unwrap_or(&t[..]);
            let mut text = b"EXECABORT Transaction discarded because of: ".to_vec();
            text.extend_from_slice(reason);
            err = Reply::Error(Bytes::from(text));
        }
    }
    if let Some(s) = spec {
        st.stats.command(s).rejected += 1;
    }
    if let Reply::Error(t) = &err {
        st.stats.count_error(t);
    }
    Action::Reply(err)
}

/// Copy the per-command figures CLIENT LIST reports into the shared client record.
pub fn publish_client_info(st: &mut State, conn: &mut Conn, now_ms: i64) {
    if let Some(c) = st.clients.get_mut(&conn.id) {
        if !conn.last_cmd.is_empty() {
            c.last_cmd = conn.last_cmd;
        }
        c.tot_cmds += conn.cmds_unpublished;
        c.net_in += conn.net_in_unpublished;
        c.net_out += conn.net_out_unpublished;
        c.last_interaction_ms = now_ms;
        c.db = conn.db;
        let watched = st.engine.watched_by(conn.id) as u64;
        let subscriptions = if conn.subscribed {
            let n = st.pubsub.counts(conn.id);
            (n.channels + n.patterns + n.shard) as u64
        } else {
            0
        };
        let prefixes = st.tracking.mode(conn.id).map_or(0, |m| m.prefixes.len()) as u64;
        let book = watched * crate::client_limits::WATCHED_KEY_BYTES
            + subscriptions * crate::client_limits::SUBSCRIPTION_BYTES
            + prefixes * crate::client_limits::TRACKING_PREFIX_BYTES;
        crate::client_limits::ClientMemory::set(&c.mem.bookkeeping, book as usize);
    }
    conn.cmds_unpublished = 0;
    conn.net_in_unpublished = 0;
    conn.net_out_unpublished = 0;
}

/// Call a command that passed the checks. `in_exec`: inside EXEC, so nothing blocks. `args`
/// is taken only if the command blocks.
pub fn call(
    shared: &Shared,
    st: &mut State,
    conn: &mut Conn,
    spec: &'static CommandSpec,
    args: &mut Vec<Bytes>,
    now_ms: i64,
    in_exec: bool,
) -> Action {
    // What CLIENT LIST shows of this connection is published once per batch (conn.rs); only
    // server commands, which may report on the connection itself, publish it at once. A
    // command run by EXEC or a script leaves `cmd=` showing EXEC (EVAL, ...), as Redis.
    if !in_exec {
        conn.last_cmd = spec.name;
    }
    if matches!(spec.handler, Handler::Server(_)) {
        publish_client_info(st, conn, now_ms);
    }
    let action = match spec.handler {
        Handler::Engine(handler) => {
            let mut ctx = CallCtx::new(conn.db, now_ms, conn.id);
            ctx.no_block = in_exec;
            ctx.from_script = conn.script;
            ctx.resp3 = conn.proto == Protocol::Resp3;
            ctx.reply_budget_bytes = conn.reply_budget;
            if let Some(user) = conn.user.as_ref().filter(|u| !u.unrestricted()) {
                let read = rill_engine::command::KeyAccess { read: true, write: false };
                ctx.all_keys_readable = user.allows_with_all_keys(&shared.acl.commands, spec, args, read);
            }
            ctx.recording = st.journal.recording();
            if ctx.recording {
                ctx.effects = st.journal.lend_buf();
            }
            // A client's write on a (writable) replica: keys whose time has passed are deleted
            // for it, and the times it sets are this replica's to expire (Redis' rule).
            let replica_write = !conn.is_master && st.replication.master.is_some() && spec.flags.has(Flags::WRITE);
            if replica_write {
                st.engine.set_replica_client_write(true);
            }
            let outcome = st.engine.call(handler, &mut ctx, args);
            if replica_write {
                st.engine.set_replica_client_write(false);
            }
            conn.close_asap |= ctx.reply_too_big;
            st.record_command(
                &mut ctx.effects,
                ctx.explicit,
                outcome.changes > 0 || ctx.propagate,
                spec,
                conn.db,
                args,
            );
            crate::notify::publish_events(st, now_ms);
            if ctx.recording {
                st.journal.return_buf(std::mem::take(&mut ctx.effects));
            }
            match ctx.block.take() {
                Some(request) if !in_exec => {
                    Action::Block { spec, args: std::mem::take(args), request: Box::new(request) }
                }
                _ => match outcome.reply {
                    Ok(r) => Action::Reply(r),
                    Err(e) => e.into(),
                },
            }
        }
        Handler::Server(_) | Handler::Container => {
            let action = match cmd::run(shared, st, conn, spec, args, now_ms, in_exec) {
                Ok(a) => a,
                Err(e) => e.into(),
            };
            // Server commands change no key; a lookup one made may have expired some.
            st.collect_effects(&mut Default::default());
            action
        }
    };
    if st.tracking.active() {
        crate::tracking::remember(st, conn.tracking_id, spec, args);
        crate::tracking::invalidate(st, Some(conn.tracking_id), now_ms);
    }
    let finished = Tick::now();
    let micros = finished.micros_since(conn.clock);
    let tracking = st.hot.latency_tracking;
    let parked = matches!(action, Action::Block { .. });
    let stat = st.stats.command(spec);
    // A command that parks is counted (calls, time, histogram, slow log) when it ends, as
    // Redis counts a blocked command once it is served, times out or is unblocked.
    if !parked {
        stat.calls += 1;
        stat.usec += micros;
        if tracking {
            stat.histogram.get_or_insert_with(Default::default).record_micros(micros);
        }
        crate::slowlog::consider(st, spec, args, &conn.redacted, conn.id, micros, now_ms);
    }
    if !st.monitors.is_empty() {
        // A command that parks is shown once, now (its arguments went into the action).
        let shown: &[Bytes] = match &action {
            Action::Block { args, .. } => args,
            _ => args,
        };
        crate::monitor::feed(st, spec, conn.id, conn.db, shown, &conn.redacted);
    }
    if !conn.redacted.is_empty() {
        conn.redacted.clear();
    }
    // HOTKEYS: commands a client sent (EXEC's included), not the calls inside a script.
    if !parked && !conn.script && st.hotkeys.active(now_ms) {
        let reply = match &action {
            Action::Reply(r) | Action::Close(Some(r)) => Some(r),
            _ => None,
        };
        st.hotkeys.record(spec, args, finished.nanos_since(conn.clock), reply, conn.proto);
    }
    conn.last_micros = micros;
    latency_sample(st, spec, micros, now_ms);
    conn.clock = finished;
    st.stats.commands_processed += 1;
    let failed = match &action {
        Action::Reply(Reply::Error(t)) | Action::Close(Some(Reply::Error(t))) => Some(t.clone()),
        _ => None,
    };
    if let Some(t) = failed {
        st.stats.command(spec).failed += 1;
        if !std::mem::take(&mut conn.error_already_counted) {
            st.stats.count_error(&t);
        }
    }
    // As Redis, CLIENT LIST's tot-cmds counts a command once it has run (CLIENT INFO does not
    // count itself), and one that blocked when it is released (`blocking::unpark`).
    if !parked {
        conn.cmds_unpublished += 1;
        conn.batch_cmds += 1;
    }
    action
}

/// The latency monitor's `command` / `fast-command` events: a command of `spec` ran `micros`.
pub fn latency_sample(st: &mut State, spec: &CommandSpec, micros: u64, now_ms: i64) {
    let threshold = st.hot.latency_threshold_ms;
    if threshold > 0 && micros / 1000 >= threshold {
        let event = if spec.flags.has(Flags::FAST) { "fast-command" } else { "command" };
        st.latency.sample(event, micros / 1000, now_ms.div_euclid(1000));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    //! Dispatch without a socket: requests through `execute`, effects caught by a journal sink.

    use super::*;
    use crate::journal::MemorySink;
    use rill_engine::effect::Effect;
    use rill_engine::Engine;

    fn server() -> (Shared, MemorySink) {
        let mut st = State::new(crate::config::Config::default());
        let sink = MemorySink::default();
        st.journal.add_sink(Box::new(sink.clone()));
        (Shared::new(st, cmd::table(), cmd::table(), 0, "0".repeat(40)), sink)
    }

    fn run(shared: &Shared, conn: &mut Conn, line: &str) -> Reply {
        let mut args: Vec<Bytes> = line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let mut st = shared.lock();
        match execute(shared, &mut st, conn, &mut args, 1_000) {
            Action::Reply(r) | Action::Close(Some(r)) => r,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn bulk(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn effects_reach_a_sink_without_a_log_and_replay_to_the_same_keyspace() {
        let (shared, sink) = server();
        let mut conn = Conn::new(1, true);
        let queued = Reply::simple("QUEUED");
        assert_eq!(run(&shared, &mut conn, "SET k v"), Reply::ok());
        assert_eq!(run(&shared, &mut conn, "GET k"), Reply::Bulk(bulk("v")));
        assert_eq!(run(&shared, &mut conn, "DEL missing"), Reply::Integer(0));
        assert_eq!(run(&shared, &mut conn, "XADD s * f v"), Reply::Bulk(bulk("1000-0")));
        assert_eq!(run(&shared, &mut conn, "MULTI"), Reply::ok());
        assert_eq!(run(&shared, &mut conn, "SET a 1"), queued);
        assert_eq!(run(&shared, &mut conn, "INCR a"), queued);
        assert_eq!(run(&shared, &mut conn, "EXEC"), Reply::Array(vec![Reply::ok(), Reply::Integer(2)]));
        assert_eq!(run(&shared, &mut conn, "SWAPDB 0 1"), Reply::ok());
        assert_eq!(run(&shared, &mut conn, "PING"), Reply::simple("PONG"));

        let units = sink.units.lock().unwrap().clone();
        let cmd = |db, line: &str| Effect::command(db, line.split(' ').map(bulk).collect());
        // Reads, a write that changed nothing and server commands leave no unit; a write is
        // logged as itself unless it decided something (XADD's ID); EXEC is one unit.
        assert_eq!(units.len(), 4, "{units:?}");
        assert_eq!(units[0], (1_000, vec![cmd(0, "SET k v")]));
        assert!(
            matches!(&units[1].1[..], [Effect::Command { args, .. }] if args.get(2) == Some(&bulk("1000-0"))),
            "XADD is logged with the ID it made: {:?}",
            units[1]
        );
        assert_eq!(units[2].1, vec![cmd(0, "SET a 1"), cmd(0, "INCR a")]);
        assert_eq!(units[3].1, vec![cmd(0, "SWAPDB 0 1")]);

        // The journal holds everything: replaying it gives the same keyspace.
        let mut copy = Engine::new(shared.lock().engine.config().clone());
        for (time, effects) in units {
            for e in effects {
                copy.apply_effect(&shared.log_table, time, e).unwrap();
            }
        }
        let view = |e: &Engine| -> Vec<Vec<(Bytes, rill_engine::Entry)>> {
            e.dbs()
                .iter()
                .map(|db| {
                    let mut keys: Vec<_> = db.iter().map(|(k, v)| (Bytes::copy_from_slice(k), v.clone())).collect();
                    keys.sort_by(|a, b| a.0.cmp(&b.0));
                    keys
                })
                .collect()
        };
        let live = view(&shared.lock().engine);
        assert_eq!(live[1].len(), 3, "k, s and a moved to db 1");
        assert!(view(&copy) == live, "replayed keyspace differs");
    }

    #[test]
    fn transaction_control_and_exec_are_flags_not_names() {
        let (shared, _) = server();
        let mut conn = Conn::new(1, true);
        assert_eq!(run(&shared, &mut conn, "MULTI"), Reply::ok());
        // A rejected EXEC discards the transaction and says why, whatever it is called.
        let spec = match shared.table.resolve(&[bulk("exec")]) {
            Lookup::Found(s) => s,
            _ => unreachable!("exec is in the table"),
        };
        assert!(spec.flags.has(Flags::EXEC) && spec.flags.has(Flags::TRANSACTION_CONTROL));
        assert_eq!(
            run(&shared, &mut conn, "EXEC extra"),
            Reply::Error(bulk(
                "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"
            ))
        );
        assert!(conn.multi.is_none());
        assert_eq!(run(&shared, &mut conn, "EXEC"), Reply::Error(bulk("ERR EXEC without MULTI")));
        // WATCH runs at once inside MULTI (it is refused there, as in Redis), GET is queued.
        assert_eq!(run(&shared, &mut conn, "MULTI"), Reply::ok());
        assert_eq!(run(&shared, &mut conn, "GET k"), Reply::simple("QUEUED"));
        assert_eq!(run(&shared, &mut conn, "WATCH k"), Reply::Error(bulk("ERR WATCH inside MULTI is not allowed")));
        assert_eq!(run(&shared, &mut conn, "DISCARD"), Reply::ok());
    }
}
