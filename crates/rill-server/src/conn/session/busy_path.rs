//! The busy path: a batch run without the state lock while the busy gate is closed
//! (`src/busy.rs` says what it refuses and what waits).

use super::{emit, log_client, Batch, Next, Session, INLINE_MAX_BYTES};
use crate::client_limits;
use crate::state::{now_ms, State};
use bytes::Bytes;
use rill_engine::command::{CommandSpec, Flags, Lookup};
use rill_resp::{write_reply, Limits, Reply};

/// Work the busy path did without the lock, done the next time the connection holds it.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    /// Commands refused: their `rejected_calls`.
    rejected: Vec<&'static CommandSpec>,
    /// Error replies sent: `total_error_replies` and `errorstat_*`.
    errors: Vec<Bytes>,
    /// An EXEC was refused: the transaction is gone, and so are its watched keys.
    discard_watch: bool,
    /// The client was closed for its output limits.
    output_limit_close: bool,
    /// Its client record, admitted while a script held the lock (`conn::admit_later`).
    pub(super) register: Option<Box<crate::state::ClientInfo>>,
    /// The user an AUTH answered here authenticated it as (CLIENT LIST's `user`).
    user: Option<Bytes>,
    /// Commands run here (MULTI): their `calls`.
    calls: Vec<&'static CommandSpec>,
    /// Whether the client is in a transaction since (CLIENT LIST's `multi`): an EXEC refused
    /// or a MULTI answered here.
    in_multi: Option<bool>,
}

impl Deferred {
    /// Returns whether it registered the client.
    pub(super) fn apply(self, st: &mut State, id: u64) -> bool {
        let registered = self.register.is_some();
        if let Some(info) = self.register {
            st.stats.connections_received += 1;
            st.clients.insert(id, *info);
        }
        for spec in self.rejected {
            st.stats.command(spec).rejected += 1;
        }
        for text in &self.errors {
            st.stats.count_error(text);
        }
        for spec in self.calls {
            st.stats.command(spec).calls += 1;
        }
        if self.discard_watch {
            st.engine.unwatch_all(id);
        }
        if let (Some(open), Some(c)) = (self.in_multi, st.clients.get_mut(&id)) {
            c.multi = if open { 0 } else { -1 };
        }
        if let Some(user) = self.user {
            if let Some(c) = st.clients.get_mut(&id) {
                c.user = user;
            }
        }
        if self.output_limit_close {
            st.stats.output_buffer_limit_disconnections += 1;
            log_client(st, id, |line| client_limits::log_output_limit_close(line, true));
        }
        registered
    }
}

impl Session {
    /// Run what the query buffer holds while the busy gate is closed, without the lock.
    pub(super) fn busy_batch(&mut self) -> Batch {
        let next = self.run_busy();
        self.watch.authenticated = self.conn.authenticated;
        if !self.inbuf.is_empty() {
            self.qbuf_private = true;
        }
        self.publish_buffers();
        Batch { next, woke: false, wait_log: None, pipelined: false }
    }

    /// The busy path: refuse what the gate can decide alone (`busy.rs`), stop at the first
    /// request that must wait for the gate.
    fn run_busy(&mut self) -> Next {
        if self.pending.is_some() {
            return Next::Busy;
        }
        let limit = self.watch.limit;
        let mut args = Vec::new();
        loop {
            // Over the limit: the batch that runs once the gate opens closes the client (with
            // the counter and the log line, which need the lock).
            let used = (self.inbuf.len() + self.conn.multi.as_ref().map_or(0, |m| m.argv_bytes)) as u64;
            if used > self.query_buffer_limit
                || (!self.conn.authenticated && used > client_limits::UNAUTHENTICATED_QUERY_BYTES)
            {
                return Next::Busy;
            }
            self.conn.reply_budget = client_limits::reply_budget_bytes(&limit, self.conn.authenticated);
            let limits = Limits {
                max_bulk_len: self.max_bulk,
                max_inline_len: INLINE_MAX_BYTES,
                authenticated: self.conn.authenticated,
            };
            match self.parser.parse_into(&mut self.inbuf, &limits, &mut args) {
                Ok(true) => {}
                Ok(false) => return Next::Read,
                Err(e) => {
                    if let Some(r) = e.reply() {
                        if let Reply::Error(text) = &r {
                            self.deferred.get_or_insert_default().errors.push(text.clone());
                        }
                        write_reply(&mut self.out, &r, self.conn.proto);
                    }
                    return Next::Close;
                }
            }
            let lookup = self.shared.table.resolve(&args);
            let denied = match lookup {
                Lookup::Found(spec) if spec.arity_ok(args.len()) && self.conn.authenticated => {
                    self.acl_denial(spec, &args)
                }
                _ => None,
            };
            let reply = match lookup {
                _ if denied.is_some() => denied.unwrap_or(Reply::Null),
                Lookup::Found(spec) if kills(spec, args.len(), self.conn.authenticated) => {
                    // SCRIPT KILL / FUNCTION KILL: answered here, the script stops at its hook.
                    match self.shared.busy.kill(spec.flags.has(Flags::KILL_FUNCTION)) {
                        Ok(()) => Reply::ok(),
                        Err(text) => {
                            let text = Bytes::from_static(text.as_bytes());
                            self.deferred.get_or_insert_default().errors.push(text.clone());
                            Reply::Error(text)
                        }
                    }
                }
                Lookup::Found(spec) if tells_stats(spec, args.len(), self.conn.authenticated) => {
                    // FUNCTION STATS: what runs, from what the runner told the gate.
                    match self.shared.busy.function_stats() {
                        Ok(r) => r,
                        Err(text) => {
                            let text = Bytes::from_static(text.as_bytes());
                            self.deferred.get_or_insert_default().errors.push(text.clone());
                            Reply::Error(text)
                        }
                    }
                }
                Lookup::Found(spec) if stops(spec, args.len(), self.conn.authenticated) => {
                    // SHUTDOWN NOSAVE ends the process here, the script with it: its writes
                    // were never committed (all or none, as with kill -9), and every
                    // acknowledged write is already in the log. Without NOSAVE: BUSY.
                    if args.iter().skip(1).any(|a| a.eq_ignore_ascii_case(b"nosave"))
                        && !args.iter().skip(1).any(|a| a.eq_ignore_ascii_case(b"abort"))
                    {
                        tracing::warn!("User requested shutdown while a script runs: SHUTDOWN NOSAVE");
                        tracing::warn!("rill is now ready to exit, bye bye...");
                        std::process::exit(0);
                    }
                    self.refuse_busy(spec)
                }
                Lookup::Found(spec) if busy_refuses(spec, args.len(), self.conn.authenticated) => {
                    self.refuse_busy(spec)
                }
                // MULTI: the transaction is the connection's own.
                Lookup::Found(spec) if opens(spec, args.len(), self.conn.authenticated) => self.busy_multi(spec),
                // AUTH, as Redis answers it during a script: the users need no state lock.
                Lookup::Found(spec) if spec.flags.has(Flags::BUSY_AUTH) && spec.arity_ok(args.len()) => {
                    self.busy_auth(&args)
                }
                _ => {
                    self.pending = Some(args);
                    return Next::Busy;
                }
            };
            args.clear();
            emit(&mut self.out, &mut self.conn, &reply);
            let pending = self.out.len() as u64;
            if self.conn.close_asap
                || self.watch.guard.over(
                    pending,
                    self.out.referenced_bytes() as u64,
                    &limit,
                    self.conn.authenticated,
                    now_ms() / 1000,
                )
            {
                self.deferred.get_or_insert_default().output_limit_close = true;
                return Next::Drop;
            }
        }
    }

    /// Refuse `spec` as Redis refuses a command while a script runs: `-BUSY`, dooming an open
    /// transaction; an EXEC discards it (`-EXECABORT ... because of: BUSY ...`, the one
    /// EXECABORT where Redis keeps the error's code).
    fn refuse_busy(&mut self, spec: &'static CommandSpec) -> Reply {
        if let Some(m) = self.conn.multi.as_mut() {
            m.failed = true;
        }
        let deferred = self.deferred.get_or_insert_default();
        deferred.rejected.push(spec);
        let busy = self.shared.busy.busy_reply();
        let text = if spec.flags.has(Flags::EXEC) {
            self.conn.multi = None;
            deferred.discard_watch = true;
            deferred.in_multi = Some(false);
            Bytes::from(format!("EXECABORT Transaction discarded because of: {busy}"))
        } else {
            Bytes::from_static(busy.as_bytes())
        };
        deferred.errors.push(text.clone());
        Reply::Error(text)
    }
}

impl Session {
    /// MULTI while a script holds the lock, as Redis runs it between the script's slices: the
    /// transaction opens (the commands queued in it are refused `-BUSY` while the script runs,
    /// which dooms it), or the error for a nested one.
    fn busy_multi(&mut self, spec: &'static CommandSpec) -> Reply {
        let deferred = self.deferred.get_or_insert_default();
        deferred.calls.push(spec);
        if self.conn.multi.is_some() {
            let text = Bytes::from_static(b"ERR MULTI calls can not be nested");
            deferred.errors.push(text.clone());
            return Reply::Error(text);
        }
        self.conn.multi = Some(crate::client::Multi::default());
        deferred.in_multi = Some(true);
        Reply::ok()
    }

    /// AUTH while a script holds the lock: the credentials are checked against the ACL users
    /// (their registry has a lock of its own), the client record's user is set when the lock
    /// is next held, and a failure goes to the ACL log.
    fn busy_auth(&mut self, args: &[Bytes]) -> Reply {
        let registry = &self.shared.acl;
        let (name, password) = match args {
            [_, password] => {
                if registry.default_user().nopass {
                    let text = Bytes::from_static(b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
                    self.deferred.get_or_insert_default().errors.push(text.clone());
                    return Reply::Error(text);
                }
                (Bytes::from_static(b"default"), password)
            }
            [_, user, password] => (user.clone(), password),
            _ => {
                let text = Bytes::from_static(b"ERR syntax error");
                self.deferred.get_or_insert_default().errors.push(text.clone());
                return Reply::Error(text);
            }
        };
        let generation = registry.generation();
        match registry.user(&name) {
            Some(user) if user.password_ok(password) => {
                self.deferred.get_or_insert_default().user = Some(user.name.clone());
                self.conn.user = Some(user);
                self.conn.acl_gen = generation;
                self.conn.authenticated = true;
                Reply::ok()
            }
            _ => {
                let command = args.first().cloned().unwrap_or_default();
                registry.log.lock().unwrap_or_else(|p| p.into_inner()).add(
                    crate::acl::Reason::Auth,
                    crate::acl::Context::Toplevel,
                    command,
                    name,
                    format!("id={}", self.conn.id),
                    now_ms(),
                );
                let text = Bytes::from_static(b"WRONGPASS invalid username-password pair or user is disabled.");
                self.deferred.get_or_insert_default().errors.push(text.clone());
                Reply::Error(text)
            }
        }
    }

    /// ACL first, as Redis checks it before the busy refusal: a command the user may not run
    /// gets `-NOPERM` here too (logged with the client's id only: the client table is behind
    /// the lock the script holds).
    fn acl_denial(&mut self, spec: &'static CommandSpec, args: &[Bytes]) -> Option<Reply> {
        let user = self.conn.user.as_mut()?;
        if !self.shared.acl.refresh(user, &mut self.conn.acl_gen) || user.unrestricted() {
            return None;
        }
        let denied = user.check(&self.shared.acl.commands, spec, args).err()?;
        let (reason, object) = denied.logged(spec, args);
        let now = now_ms();
        self.shared.acl.log.lock().unwrap_or_else(|p| p.into_inner()).add(
            reason,
            crate::acl::Context::Toplevel,
            object,
            user.name.clone(),
            format!("id={}", self.conn.id),
            now,
        );
        let text = Bytes::from(format!("NOPERM {}", crate::acl::denied_text(denied, user, spec, args, false)));
        self.deferred.get_or_insert_default().errors.push(text.clone());
        Some(Reply::Error(text))
    }
}

/// Whether this request is a SCRIPT KILL or FUNCTION KILL the busy path answers itself.
fn kills(spec: &CommandSpec, argc: usize, authenticated: bool) -> bool {
    (spec.flags.has(Flags::KILL_SCRIPT) || spec.flags.has(Flags::KILL_FUNCTION)) && spec.arity_ok(argc) && authenticated
}

/// Whether this request is a MULTI the busy path answers itself.
fn opens(spec: &CommandSpec, argc: usize, authenticated: bool) -> bool {
    spec.flags.has(Flags::BUSY_MULTI) && spec.arity_ok(argc) && authenticated
}

/// Whether this request is a SHUTDOWN the busy path answers itself.
fn stops(spec: &CommandSpec, argc: usize, authenticated: bool) -> bool {
    spec.flags.has(Flags::BUSY_SHUTDOWN) && spec.arity_ok(argc) && authenticated
}

/// Whether this request is a FUNCTION STATS the busy path answers itself.
fn tells_stats(spec: &CommandSpec, argc: usize, authenticated: bool) -> bool {
    spec.flags.has(Flags::SCRIPT_STATS) && spec.arity_ok(argc) && authenticated
}

/// Whether the busy gate refuses this request itself (`busy.rs`): every check Redis makes
/// before BUSY that needs no state passes, and the command is not `allow-busy`.
fn busy_refuses(spec: &CommandSpec, argc: usize, authenticated: bool) -> bool {
    spec.arity_ok(argc)
        && !spec.flags.has(Flags::ALLOW_BUSY)
        && !spec.flags.has(Flags::PROTECTED)
        && (authenticated || spec.flags.has(Flags::NO_AUTH))
}
