//! From a parsed request to an action: command lookup and the checks that run before a command
//! (in Redis' order, so error precedence matches — docs/spec/connection.md §4), MULTI
//! queueing, and the call itself.

use crate::blocking;
use crate::clock::Tick;
use crate::cmd;
use crate::state::{Shared, State};
use bytes::Bytes;
use rill_engine::command::{CommandSpec, Flags, Handler, Lookup};
use rill_engine::{BlockRequest, CallCtx, CmdError};
use rill_resp::{Protocol, Reply};

/// Per-connection state that only the connection's own task touches.
#[derive(Debug)]
pub struct Conn {
    /// Client id.
    pub id: u64,
    /// Selected database.
    pub db: usize,
    /// Protocol in use.
    pub proto: Protocol,
    /// Whether AUTH (or HELLO AUTH) succeeded, or no password is required.
    pub authenticated: bool,
    /// Open transaction, if any.
    pub multi: Option<Multi>,
    /// CLIENT REPLY mode.
    pub reply_mode: ReplyMode,
    /// When the previous command finished (or the batch started): each command's duration is
    /// measured from here, so timing costs one clock read per command.
    pub clock: Tick,
    /// The last command run, not yet copied into the shared client record.
    pub last_cmd: &'static str,
    /// Commands run since the shared client record was last updated.
    pub cmds_unpublished: u64,
    /// Bytes read since the shared client record was last updated.
    pub net_in_unpublished: u64,
    /// Bytes written since the shared client record was last updated.
    pub net_out_unpublished: u64,
    /// The time the current batch of requests started, Unix ms.
    pub batch_now_ms: i64,
    /// The last top-level command resolved, by the name as the client spelled it: pipelines
    /// mostly repeat one command, and comparing a few bytes is cheaper than a hash lookup.
    pub last_lookup: LastLookup,
    /// The most bytes one reply may take (see [`crate::client_limits::reply_budget_bytes`]).
    pub reply_budget: u64,
    /// A reply did not fit the client's limits: close the connection without writing more.
    pub close_asap: bool,
}

/// A one-entry cache of name → command (containers are never cached: their subcommand
/// depends on the next argument).
#[derive(Debug, Default)]
pub struct LastLookup {
    name: [u8; 16],
    len: usize,
    spec: Option<&'static CommandSpec>,
}

impl LastLookup {
    fn resolve(&mut self, table: &rill_engine::command::CommandTable, args: &[Bytes]) -> Lookup {
        if let (Some(spec), Some(name)) = (self.spec, args.first()) {
            if self.name.get(..self.len) == Some(&name[..]) {
                return Lookup::Found(spec);
            }
        }
        match (args.first(), args.first().and_then(|name| table.get(name))) {
            (Some(name), Some(spec)) if !spec.is_container() => {
                if let Some(dst) = self.name.get_mut(..name.len()) {
                    dst.copy_from_slice(name);
                    self.len = name.len();
                    self.spec = Some(spec);
                }
                Lookup::Found(spec)
            }
            _ => table.resolve(args),
        }
    }
}

/// CLIENT REPLY ON|OFF|SKIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Replies are sent.
    On,
    /// No replies are sent.
    Off,
    /// The next command's reply is not sent.
    Skip,
    /// Set by SKIP: skip the reply of the command after the current one.
    SkipNext,
}

/// A transaction being queued.
#[derive(Debug, Default)]
pub struct Multi {
    /// Queued commands.
    pub queued: Vec<(&'static CommandSpec, Vec<Bytes>)>,
    /// A queued command was rejected: EXEC must answer EXECABORT.
    pub failed: bool,
    /// Bytes of the queued commands' arguments (Redis' `multi-mem`; counts toward
    /// `client-query-buffer-limit`).
    pub argv_bytes: usize,
}

/// What the connection does after a request.
#[derive(Debug)]
pub enum Action {
    /// Send this reply.
    Reply(Reply),
    /// Park the client until a key is ready or the deadline passes.
    Block {
        /// The command to re-run.
        spec: &'static CommandSpec,
        /// Its arguments.
        args: Vec<Bytes>,
        /// Keys and deadline.
        request: BlockRequest,
    },
    /// Send the reply (if any), then close the connection.
    Close(Option<Reply>),
}

impl From<CmdError> for Action {
    fn from(e: CmdError) -> Action {
        Action::Reply(e.to_reply())
    }
}

/// Commands that run immediately even inside MULTI.
fn runs_inside_multi(name: &str) -> bool {
    matches!(name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset")
}

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
    if !spec.arity_ok(args.len()) {
        return reject(st, conn, Some(spec), CmdError::arity(spec.name).to_reply());
    }
    if spec.flags.has(Flags::PROTECTED) {
        if let Some(err) = protected_command_error(st, conn, spec) {
            return reject(st, conn, Some(spec), err);
        }
    }
    if !conn.authenticated && !spec.flags.has(Flags::NO_AUTH) {
        return reject(st, conn, Some(spec), CmdError::full("NOAUTH Authentication required.").to_reply());
    }
    if let Some(err) = persistence_checks(st, conn, spec) {
        return reject(st, conn, Some(spec), err);
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
        if !runs_inside_multi(spec.name) {
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
    let action = call(shared, st, conn, spec, args, now_ms, false);
    st.commit_effects(now_ms);
    blocking::serve_ready(st, now_ms);
    action
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

/// The checks Redis runs after authentication, in its order: memory (`-OOM` for commands that
/// may grow it, and for an EXEC whose queue holds one), the log (`-MISCONF` for writes and
/// PING while the last write or fsync failed), and loading (`-LOADING` for commands not
/// flagged `loading`).
fn persistence_checks(st: &State, conn: &Conn, spec: &'static CommandSpec) -> Option<Reply> {
    let maxmemory = st.hot.maxmemory;
    if maxmemory > 0 {
        let denyoom = spec.flags.has(Flags::DENYOOM)
            || (spec.name == "exec"
                && conn.multi.as_ref().is_some_and(|m| m.queued.iter().any(|(s, _)| s.flags.has(Flags::DENYOOM))));
        if denyoom && crate::alloc::allocated_bytes() > maxmemory {
            return Some(CmdError::full("OOM command not allowed when used memory > 'maxmemory'.").to_reply());
        }
    }
    if let Some(log) = &st.aof.log {
        if log.failed() && (spec.flags.has(Flags::WRITE) || spec.name == "ping") {
            let why = log.status.lock().ok().and_then(|s| s.last_error.clone()).unwrap_or_default();
            return Some(Reply::Error(Bytes::from(format!("MISCONF Errors writing to the AOF file: {why}"))));
        }
    }
    if st.persist.loading && !spec.flags.has(Flags::LOADING) {
        return Some(CmdError::full("LOADING Redis is loading the dataset in memory").to_reply());
    }
    None
}

/// A request rejected before running: counts as an error and, inside MULTI, dooms the EXEC.
/// A rejected EXEC itself discards the transaction and says why, as Redis does (also outside
/// MULTI): `EXECABORT Transaction discarded because of: <error without its code>`.
fn reject(st: &mut State, conn: &mut Conn, spec: Option<&'static CommandSpec>, err: Reply) -> Action {
    if let Some(m) = conn.multi.as_mut() {
        m.failed = true;
    }
    let mut err = err;
    if spec.is_some_and(|s| s.name == "exec") {
        conn.multi = None;
        st.engine.watch.unwatch_all(conn.id);
        if let Some(c) = st.clients.get_mut(&conn.id) {
            c.multi = -1;
        }
        if let Reply::Error(t) = &err {
            let reason = t.splitn(2, |&c| c == b' ').nth(1).unwrap_or(&t[..]);
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
    // server commands, which may report on the connection itself, publish it at once.
    conn.last_cmd = spec.name;
    conn.cmds_unpublished += 1;
    if matches!(spec.handler, Handler::Server) {
        publish_client_info(st, conn, now_ms);
    }
    let dirty_before = st.engine.dirty;
    let action = match spec.handler {
        Handler::Engine(handler) => {
            let mut ctx = CallCtx::new(conn.db, now_ms, conn.id);
            ctx.no_block = in_exec;
            ctx.resp3 = conn.proto == Protocol::Resp3;
            ctx.reply_budget_bytes = conn.reply_budget;
            ctx.recording = st.aof.recording();
            if ctx.recording {
                ctx.effects = st.aof.lend_buf();
            }
            let result = handler(&mut st.engine, &mut ctx, args);
            conn.close_asap |= ctx.reply_too_big;
            st.record_command(&mut ctx.effects, ctx.explicit, dirty_before, spec, conn.db, args);
            if ctx.recording {
                st.aof.return_buf(std::mem::take(&mut ctx.effects));
            }
            match ctx.block.take() {
                Some(request) if !in_exec => Action::Block { spec, args: std::mem::take(args), request },
                _ => match result {
                    Ok(r) => Action::Reply(r),
                    Err(e) => e.into(),
                },
            }
        }
        Handler::Server | Handler::Container => {
            let action = match cmd::run(shared, st, conn, spec, args, now_ms) {
                Ok(a) => a,
                Err(e) => e.into(),
            };
            // FLUSHALL, FLUSHDB, SWAPDB: logged as themselves.
            st.record_command(&mut Default::default(), false, dirty_before, spec, conn.db, args);
            action
        }
    };
    let finished = Tick::now();
    let stat = st.stats.command(spec);
    stat.calls += 1;
    stat.usec += finished.micros_since(conn.clock);
    conn.clock = finished;
    st.stats.commands_processed += 1;
    let failed = match &action {
        Action::Reply(Reply::Error(t)) | Action::Close(Some(Reply::Error(t))) => Some(t.clone()),
        _ => None,
    };
    if let Some(t) = failed {
        st.stats.command(spec).failed += 1;
        st.stats.count_error(&t);
    }
    action
}
