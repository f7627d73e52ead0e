//! Clients blocked on keys: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, XREAD BLOCK, XREADGROUP BLOCK.
//!
//! A blocking command that finds nothing to serve asks to block ([`BlockRequest`]). The client
//! is parked here: per key a FIFO queue of client ids, per client its parked command. Writes
//! signal keys ready inside the engine; after each command (and after EXEC as a whole) the
//! server drains those keys and re-runs each parked command in FIFO order under the same lock,
//! so the first client to block is the first served and a client that loses the race simply
//! stays parked with its original deadline.
//!
//! A served client's reply reaches its stream one of two ways. Inside a request batch, when
//! the reply need not wait for an fsync, it is encoded under the lock and the connection that
//! ran the batch writes it straight to the served client's stream ([`Delivery`]), as Redis
//! writes every reply from its one loop: no task switch per served client stands between an
//! XADD and its readers. If the log is already safe, [`serve_ready`] writes the first reply
//! as soon as it is served and the others in one burst once all are served; if the serving's
//! records must first be written to the OS, the batch writes them after its log write.
//! Otherwise (waiting for an `always` fsync, served by a timer, CLIENT UNBLOCK, or a client
//! whose transport offers no direct write, such as a TLS stream) the reply travels to the
//! client's own task over its oneshot channel. Either way the task learns the outcome from
//! that channel.
//!
//! Cost: O(k log n) to park or unpark a client on k keys with n clients parked on each;
//! serving a ready key costs one command run per parked client tried.
//!
//! A client in `WAIT` / `WAITAOF` is not parked here (its connection waits for copies, not
//! keys: `conn/driver.rs`), but it is registered ([`wait_copies`]) so that a change of role
//! reaches it: when the server starts following a primary, every blocked client, parked or
//! waiting for copies, is answered `-UNBLOCKED` and closed ([`unblock_all_for_role_change`]).

use crate::conn::DirectWrite;
use crate::journal::LogSink;
use crate::state::State;
use bytes::{Buf, Bytes};
use rill_engine::command::{CommandSpec, Handler};
use rill_engine::{BlockRequest, CallCtx, CmdError, WakeOn};
use rill_resp::{OutputBuffer, Reply};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tokio::sync::oneshot;

/// What a parked client's task learns when it is released.
#[derive(Debug)]
pub enum Outcome {
    /// Write this reply once the log is safe up to the offset (the log it was recorded in:
    /// offsets are per log, and CONFIG SET appendonly may switch logs meanwhile).
    /// Then the frames after it: the invalidation messages its own command caused
    /// (`tracking.rs`), which follow its reply whatever else was pushed.
    Reply(Reply, Option<(Arc<crate::aof::Log>, u64)>, Vec<Bytes>),
    /// The reply (`len` bytes) was written to the socket by the connection that served it,
    /// except `rest`, which the socket did not take and the task must write.
    Written {
        /// The unwritten tail.
        rest: OutputBuffer,
        /// Bytes of the whole reply.
        len: usize,
    },
    /// Write this reply, then close the connection (the server changed role under the
    /// blocked command: [`unblock_all_for_role_change`]).
    Close(Reply),
}

/// A served client's reply, encoded, to be written straight to its stream.
#[derive(Debug)]
pub struct Delivery {
    /// The client's stream, as its transport lets other tasks write to it.
    pub to: Arc<dyn DirectWrite>,
    /// The encoded reply (large payloads referenced).
    pub bytes: OutputBuffer,
    /// Tells the client's task what was written.
    pub tx: oneshot::Sender<Outcome>,
}

/// One parked client.
#[derive(Debug)]
pub struct Waiter {
    /// The command to re-run.
    pub spec: &'static CommandSpec,
    /// Its arguments.
    pub args: Vec<Bytes>,
    /// The client's database.
    pub db: usize,
    /// What the client blocked for.
    pub request: BlockRequest,
    /// Where the reply goes.
    pub tx: oneshot::Sender<Outcome>,
    /// Whether the client speaks RESP3 (some replies change shape, not just encoding).
    pub resp3: bool,
    /// The client's stream, if a reply may be written to it directly: its transport allows
    /// it (a TCP socket does, a TLS stream does not: `conn/transport.rs`), replies are on, and
    /// nothing of the client's was waiting to be written when it parked.
    pub direct: Option<Arc<dyn DirectWrite>>,
    /// How long its first run took, µs: counted with its last when it ends ([`ended`]).
    pub ran_micros: u64,
    /// The client's ACL user and the registry: a re-run is checked again, as Redis checks a
    /// blocked command it reprocesses (the user's rules may have changed meanwhile).
    pub acl: Option<(Arc<crate::acl::User>, Arc<crate::acl::Registry>)>,
}

/// A parked command ended (served, timed out, unblocked): it is counted a call now, and its
/// durations, first run and last (the wait between is not the server's), go into its time,
/// its latency histogram and the slow log, as for a command that did not park
/// (`dispatch::call`). `args` as the client sent them.
pub fn ended(st: &mut State, spec: &'static CommandSpec, args: &[Bytes], client: u64, micros: u64, now_ms: i64) {
    let stat = st.stats.command(spec);
    stat.calls += 1;
    stat.usec += micros;
    if st.hot.latency_tracking {
        st.stats.command(spec).histogram.get_or_insert_with(Default::default).record_micros(micros);
    }
    crate::slowlog::consider(st, spec, args, &[], client, micros, now_ms);
}

/// Every parked client.
#[derive(Debug, Default)]
pub struct Blocked {
    /// Per client: its parked command and its park sequence number.
    waiters: HashMap<u64, (Waiter, u64)>,
    /// Per key: the clients parked on it by park sequence number, so FIFO order, and O(log n)
    /// to take one out wherever it is.
    by_key: HashMap<(usize, Bytes), BTreeMap<u64, u64>>,
    /// The next park sequence number.
    next_seq: u64,
    /// While a connection runs a request batch: the replies it must write for the clients its
    /// commands served, once the log is safe (see [`release_at`]). `None` outside a batch.
    pub deliveries: Option<Vec<Delivery>>,
    /// Whether a reply in `deliveries` must wait until the batch has written the log.
    pub deliveries_wait_for_log: bool,
    /// Served clients whose replies went to their own tasks, ever.
    pub handed_to_tasks: u64,
    /// Clients waiting in `WAIT` / `WAITAOF`, by id.
    copies: HashMap<u64, CopiesWaiter>,
}

/// A client waiting in `WAIT` / `WAITAOF`.
#[derive(Debug)]
struct CopiesWaiter {
    /// The command waiting (its failure is counted on it).
    spec: &'static CommandSpec,
    /// Set when its wait was ended by force: the reply to write before closing.
    ended: Option<Reply>,
}

impl Blocked {
    /// Number of clients parked on keys.
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Number of clients waiting in `WAIT` / `WAITAOF` (blocked too, as Redis counts them).
    pub fn copies_len(&self) -> usize {
        self.copies.len()
    }

    /// Whether nobody is blocked.
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Number of distinct keys clients are blocked on.
    pub fn key_count(&self) -> usize {
        self.by_key.len()
    }

    /// Keys with at least one client that a deletion of the key must wake (XREADGROUP answers
    /// NOGROUP then): INFO `total_blocking_keys_on_nokey`.
    pub fn nokey_key_count(&self) -> usize {
        self.by_key
            .values()
            .filter(|q| {
                q.values().any(|c| self.waiters.get(c).is_some_and(|(w, _)| w.request.wakes_on == WakeOn::AnyChange))
            })
            .count()
    }

    /// When `client`'s parked command wants to be re-run without a signal (XREADGROUP CLAIM).
    pub fn wake_at(&self, client: u64) -> Option<i64> {
        self.waiters.get(&client).and_then(|(w, _)| w.request.wake_at_ms)
    }

    /// Whether a client is parked in XREADGROUP on `key` of `db` for `group`, as `consumer`
    /// (any consumer: `None`): group policies' idle expiry spares such a reader
    /// (`rill_engine::BlockedReaders`). O(clients parked on the key).
    pub fn reading(&self, db: usize, key: &[u8], group: &[u8], consumer: Option<&[u8]>) -> bool {
        let Some(clients) = self.by_key.get(&(db, Bytes::copy_from_slice(key))) else { return false };
        clients.values().filter_map(|client| self.waiters.get(client)).any(|(w, _)| {
            w.spec.flags.has(rill_engine::command::Flags::READS_AS_CONSUMER)
                && w.args.windows(3).any(|a| {
                    matches!(a, [token, g, c] if token.eq_ignore_ascii_case(b"GROUP")
                        && g.as_ref() == group
                        && consumer.is_none_or(|want| c.as_ref() == want))
                })
        })
    }
}

/// `client` waits in `WAIT` / `WAITAOF` until [`end_copies_wait`].
pub fn wait_copies(st: &mut State, client: u64, spec: &'static CommandSpec) {
    st.blocked.copies.insert(client, CopiesWaiter { spec, ended: None });
    if let Some(c) = st.clients.get_mut(&client) {
        // CLIENT LIST flag `b`, as for a client parked on keys.
        c.blocked = true;
    }
}

/// `client`'s wait for copies ends, as its connection answers it (or closes): the reply to
/// write and close after, if the wait was ended by force. The answer must be decided under
/// the same lock, so that a wait is never both answered and ended by force.
pub fn end_copies_wait(st: &mut State, client: u64) -> Option<Reply> {
    let w = st.blocked.copies.remove(&client)?;
    if let Some(c) = st.clients.get_mut(&client) {
        c.blocked = false;
    }
    w.ended
}

/// Whether `client`'s wait for copies was ended by force (it then answers with
/// [`end_copies_wait`]'s reply).
pub fn copies_wait_ended(st: &State, client: u64) -> bool {
    st.blocked.copies.get(&client).is_some_and(|w| w.ended.is_some())
}

/// What Redis answers a blocked client when the server becomes a replica.
const ROLE_CHANGED: CmdError =
    CmdError::full("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");

/// The server starts following a primary (`REPLICAOF host port`, a failover's demotion, a
/// replica pointed elsewhere): every blocked client, parked on keys or waiting in `WAIT` /
/// `WAITAOF`, is answered `-UNBLOCKED ...` and its connection closes after the reply, as Redis
/// does (`disconnectAllBlockedClients`). Otherwise a command that blocked on the primary would
/// be served by the replicated stream, and the replica would make changes of its own (an
/// XREADGROUP's deliveries). Each counts as a failed call of its command and an `UNBLOCKED`
/// error. Clients held by a pause are not blocked here: their command runs afresh once the
/// pause ends.
pub fn unblock_all_for_role_change(st: &mut State) {
    let reply = ROLE_CHANGED.to_reply();
    let parked: Vec<u64> = st.blocked.waiters.keys().copied().collect();
    for client in parked {
        let Some(w) = unpark(st, client) else { continue };
        count_unblocked(st, w.spec);
        ended(st, w.spec, &w.args, client, w.ran_micros, crate::clock::now_ms());
        st.blocked.handed_to_tasks += 1;
        // The receiver may be gone (client disconnected); nothing to do then.
        let _ = w.tx.send(Outcome::Close(reply.clone()));
    }
    let mut ended = Vec::new();
    for w in st.blocked.copies.values_mut().filter(|w| w.ended.is_none()) {
        w.ended = Some(reply.clone());
        ended.push(w.spec);
    }
    if !ended.is_empty() {
        // A waiting connection looks at its wait again when an acknowledgement arrives.
        st.replication.acked.notify_waiters();
    }
    for spec in ended {
        count_unblocked(st, spec);
    }
}

/// A blocked command ended by an error: a failed call of `spec`, and an `UNBLOCKED` error.
fn count_unblocked(st: &mut State, spec: &'static CommandSpec) {
    st.stats.count_error(ROLE_CHANGED.text().as_bytes());
    st.stats.command(spec).failed += 1;
}

/// Park `client`. A key listed twice (`BLPOP k k 0`) queues it once.
pub fn park(st: &mut State, client: u64, waiter: Waiter) {
    let seq = st.blocked.next_seq;
    st.blocked.next_seq += 1;
    for key in &waiter.request.keys {
        let k = (waiter.db, key.clone());
        let q = st.blocked.by_key.entry(k.clone()).or_default();
        if q.insert(seq, client).is_none() {
            st.engine.block_on(k.0, k.1);
        }
    }
    if let Some(c) = st.clients.get_mut(&client) {
        c.blocked = true;
    }
    st.blocked.waiters.insert(client, (waiter, seq));
}

/// Unpark `client`, returning its waiter (None if it was not parked). O(k log n) for k keys
/// with n clients parked on each.
pub fn unpark(st: &mut State, client: u64) -> Option<Waiter> {
    let (w, seq) = st.blocked.waiters.remove(&client)?;
    for key in &w.request.keys {
        let k = (w.db, key.clone());
        let Some(q) = st.blocked.by_key.get_mut(&k) else { continue };
        // Counted once per key, however often the key is listed.
        if q.remove(&seq).is_none() {
            continue;
        }
        if q.is_empty() {
            st.blocked.by_key.remove(&k);
        }
        st.engine.unblock_from(k.0, k.1);
    }
    if let Some(c) = st.clients.get_mut(&client) {
        c.blocked = false;
        // Served, timed out or unblocked: the command is done (tot-cmds, see `dispatch::call`).
        c.tot_cmds += 1;
    }
    Some(w)
}

/// Answer a served client with `reply`, to be sent once the log is safe up to `offset`.
///
/// Inside a batch that collects deliveries, a client whose stream may be written directly
/// gets a [`Delivery`] in the batch's list, which [`serve_ready`] writes out when it has served
/// every ready client, if the log is already safe up to every reply in it (no log, or no
/// record of these servings left unwritten); otherwise (`everysec`, `no`) the list waits
/// until the batch has written the log. If the reply must be fsynced first (`always`), or
/// outside a batch, it goes through the client's task.
fn release_at(st: &mut State, client: u64, reply: Reply, offset: u64, then: Vec<Bytes>) {
    let Some(w) = unpark(st, client) else { return };
    // A replica's readers do not wait for its log (`Replication::reads_wait_for_log`).
    let waits = st.replication.reads_wait_for_log();
    let (fsync_first, safe) = match st.journal.log().filter(|_| waits) {
        Some(log) => (log.fsync_before_reply(), log.safe_offset() >= offset),
        None => (false, true),
    };
    match (w.direct, st.blocked.deliveries.as_mut()) {
        (Some(to), Some(list)) if !fsync_first => {
            let mut bytes = OutputBuffer::default();
            let proto = if w.resp3 { rill_resp::Protocol::Resp3 } else { rill_resp::Protocol::Resp2 };
            rill_resp::write_reply(&mut bytes, &reply, proto);
            for frame in &then {
                rill_resp::ReplyTarget::encoded(&mut bytes).extend_from_slice(frame);
            }
            st.stats.net_output_bytes += bytes.len() as u64;
            list.push(Delivery { to, bytes, tx: w.tx });
            st.blocked.deliveries_wait_for_log |= !safe;
        }
        _ => {
            st.blocked.handed_to_tasks += 1;
            // The receiver may be gone (client disconnected); nothing to do then.
            let wait = st.journal.log().filter(|_| offset > 0 && waits).map(|log| (log.clone(), offset));
            let _ = w.tx.send(Outcome::Reply(reply, wait, then));
        }
    }
}

/// Write `deliveries` (collected by a batch, see [`Blocked::deliveries`]) to their streams,
/// and tell each client's task. The log must already be safe up to every reply's record.
pub fn deliver(deliveries: &mut Vec<Delivery>) {
    for d in deliveries.drain(..) {
        deliver_one(d);
    }
}

fn deliver_one(d: Delivery) {
    let len = d.bytes.len();
    let mut rest = d.bytes;
    // A would-block or a failed write leaves the rest to the task, which meets the same
    // error and closes the connection.
    if let Ok(n) = rest.with_slices(|slices| d.to.try_write_vectored(slices)) {
        rest.advance(n);
    }
    let _ = d.tx.send(Outcome::Written { rest, len });
}

/// Serve parked clients on every key signalled ready, until no key is ready. Called after each
/// command outside MULTI and after EXEC.
pub fn serve_ready(st: &mut State, now_ms: i64) {
    if st.blocked.is_empty() {
        let _ = st.engine.take_ready_keys();
        return;
    }
    let mut first = true;
    loop {
        let ready = st.engine.take_ready_keys();
        if ready.is_empty() {
            break;
        }
        for key in ready {
            let queue: Vec<u64> = match st.blocked.by_key.get(&key) {
                Some(q) => q.values().copied().collect(),
                None => continue,
            };
            for client in queue {
                // As Redis, a parked client is re-run only if the key holds what it waits for
                // (looked at again for each client: serving one may have emptied the key). A
                // BLPOP whose key became a hash stays parked.
                let holds = st.engine.lookup(key.0, &key.1, now_ms).map(|e| e.value.type_name());
                let waiter = st.blocked.waiters.get(&client);
                let wakes = waiter.is_some_and(|(w, _)| w.request.wakes_on.wakes(holds));
                if !wakes {
                    continue;
                }
                try_serve(st, client, now_ms);
                if first && st.blocked.deliveries.as_ref().is_some_and(|l| !l.is_empty()) {
                    // The first reply goes out at once: the reader's wake-up (tens of
                    // microseconds on an idle CPU) overlaps the serving of the others.
                    first = false;
                    write_safe_deliveries(st);
                }
            }
        }
    }
    // The rest in one burst, so that a reader working through its replies finds the next
    // one already there instead of waiting for it to be served.
    write_safe_deliveries(st);
}

/// Write the batch's deliveries now unless one of them waits for the log.
fn write_safe_deliveries(st: &mut State) {
    if !st.blocked.deliveries_wait_for_log {
        if let Some(list) = st.blocked.deliveries.as_mut() {
            deliver(list);
        }
    }
}

/// The `-NOPERM` error a parked command gets if its user may no longer run it (logged).
fn acl_refusal(st: &State, w: &Waiter, client: u64, now_ms: i64) -> Option<String> {
    let (user, registry) = w.acl.as_ref()?;
    let now = registry.user(&user.name)?;
    if now.unrestricted() {
        return None;
    }
    let denied = now.check(&registry.commands, w.spec, &w.args).err()?;
    let origin = crate::acl::Origin { context: crate::acl::Context::Toplevel, running: w.spec.name };
    crate::cmd::acl::log_denied_in(registry, st, client, &now.name, denied, w.spec, &w.args, origin, now_ms);
    Some(format!("NOPERM {}", crate::acl::denied_text(denied, &now, w.spec, &w.args, false)))
}

/// Re-run one parked client's command; if it no longer blocks, unpark it and send the reply.
/// If it blocks again, it keeps its deadline and takes the new wake-up time it asked for.
/// The call was counted when the command first ran, so a re-run adds no call, only a failure
/// if it ends in an error (as Redis counts a blocked command once).
pub fn try_serve(st: &mut State, client: u64, now_ms: i64) {
    let Some((w, _)) = st.blocked.waiters.get(&client) else { return };
    let Handler::Engine(handler) = w.spec.handler else { return };
    if let Some(refusal) = acl_refusal(st, w, client, now_ms) {
        let spec = w.spec;
        st.stats.command(spec).rejected += 1;
        st.stats.count_error(refusal.as_bytes());
        release_at(st, client, Reply::Error(Bytes::from(refusal)), 0, Vec::new());
        return;
    }
    let mut ctx = CallCtx::new(w.db, now_ms, client);
    ctx.deadline_override = Some(w.request.deadline_ms);
    ctx.resp3 = w.resp3;
    let spec = w.spec;
    let w_db = w.db;
    // Borrowed out of the waiter for the run (the handler needs the state mutably), put back
    // if the client stays parked.
    let (args, ran) = st
        .blocked
        .waiters
        .get_mut(&client)
        .map(|(w, _)| (std::mem::take(&mut w.args), w.ran_micros))
        .unwrap_or_default();
    let started = crate::clock::Tick::now();
    ctx.recording = st.journal.recording();
    let outcome = st.engine.call(handler, &mut ctx, &args);
    st.record_command(&mut ctx.effects, ctx.explicit, outcome.changes > 0 || ctx.propagate, spec, w_db, &args);
    crate::notify::publish_events(st, now_ms);
    // Its own invalidations follow its reply (below), as Redis sends them after it.
    let then = crate::tracking::invalidate_held(st, client, now_ms);
    // One record per served client; its reply waits for it.
    let offset = st.commit_effects(now_ms);
    if let Some(again) = ctx.block {
        if let Some((w, _)) = st.blocked.waiters.get_mut(&client) {
            w.request.wake_at_ms = again.wake_at_ms;
            w.args = args;
        }
        crate::tracking::push_held(st, client, then, now_ms);
        return;
    }
    let reply = match outcome.reply {
        Ok(r) => r,
        Err(e) => {
            st.stats.count_error(e.text().as_bytes());
            st.stats.command(spec).failed += 1;
            e.to_reply()
        }
    };
    ended(st, spec, &args, client, ran + crate::clock::Tick::now().micros_since(started), now_ms);
    release_at(st, client, reply, offset, then);
}
