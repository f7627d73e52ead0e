//! The protocol side of a connection: the query buffer, the parser, the batch run under the
//! state lock, the output buffer, and what the driver must do next ([`Next`]). Nothing here
//! reads or writes a stream; the driver (`driver.rs`) does, through the buffers and calls
//! below. The one write this side does is direct delivery to *other* clients, through the
//! [`DirectWrite`] handles their transports gave out (`blocking::deliver`).
//!
//! Requests are parsed one at a time inside the lock, right before each runs, because an AUTH
//! earlier in the same batch changes the limits that apply to the next request (Redis'
//! unauthenticated limits).
//!
//! `park.rs` holds what a parked client waits for; `busy_path.rs` the batch run without the
//! lock while the busy gate is closed.

mod busy_path;
mod park;

use busy_path::Deferred;
pub use park::{Park, Released};

use super::transport::DirectWrite;
use crate::aof::Log;
use crate::blocking::{self, Delivery, Waiter};
use crate::client::{Action, Conn, ReplyMode};
use crate::client_limits::{self, ClassLimit, ClientClass, ClientMemory, OutputGuard};
use crate::dispatch;
use crate::push::PushReceiver;
use crate::state::{now_ms, HotConfig, Shared, State};
use bytes::{Bytes, BytesMut};
use rill_resp::{write_reply, Limits, OutputBuffer, Protocol, Reply, RequestParser};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The query buffer grows by this much when a read finds it short of room.
pub(super) const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Redis' inline request limit.
const INLINE_MAX_BYTES: usize = 64 * 1024;
/// A private query buffer idle this long is shrunk to what it holds (Redis' cron does it for
/// clients idle more than 2 s).
pub(super) const QBUF_IDLE_SHRINK: Duration = Duration::from_secs(3);
/// Free room under which an idle query buffer is left alone (Redis: 4 KiB).
const QBUF_SHRINK_MIN_FREE_BYTES: usize = 4 * 1024;
/// While DEBUG PAUSE-CRON holds the shrink back, it is looked at again this often.
pub(super) const QBUF_SHRINK_RETRY: Duration = Duration::from_millis(100);
/// Redis' "big argument" size: a bulk at least this long gets a buffer of its own size.
const BIG_ARG_BYTES: usize = 32 * 1024;
/// An output buffer whose encoded bytes grew past this is given back once written.
const OUT_KEEP_MAX_BYTES: usize = 4 * 1024 * 1024;

/// What the driver must do after a batch (once the output is written; for `Read`, as much of
/// it as the socket takes: `conn/driver.rs`).
#[derive(Debug)]
pub enum Next {
    /// Wait for more input.
    Read,
    /// Write the replies, then close.
    Close,
    /// Close without writing what is pending (killed, over an output limit).
    Drop,
    /// A command blocked: park until [`Park`] says otherwise.
    Wait(Park),
    /// The busy gate is closed and the next request must wait for it to open (`busy.rs`).
    Busy,
    /// A pause holds the next request (`pause.rs`): write the output, then wait until the
    /// pause changes or ends, and run again (the request first).
    Held(crate::pause::HeldWait),
    /// `WAIT` / `WAITAOF` waits for copies: write the output, then answer it once they exist
    /// or its deadline passes ([`Session::answer_copies`]), and go on.
    Copies(Box<crate::replication::primary::CopiesWait>),
    /// The connection became a replica's link (`PSYNC`, `SYNC`): write the output, then feed
    /// the replica (`conn/feed.rs`) until the link ends.
    Replica(Box<crate::replication::primary::Feed>),
    /// A flush waits for the lazyfree thread: write the output, then add the reply once the
    /// keys are freed ([`Session::freed`]), and go on.
    Freed(tokio::sync::oneshot::Receiver<()>, Reply),
    /// `SHUTDOWN` blocked: write the output, then wait until the process ends (the connection
    /// closes) or the shutdown is cancelled ([`Session::shutdown_cancelled`]), and go on.
    Shutdown(tokio::sync::watch::Receiver<u64>),
}

/// Where a `WAIT` / `WAITAOF` stands ([`Session::answer_copies`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Copies {
    /// Still waiting.
    Waiting,
    /// The reply is in the output buffer: write it, then go on.
    Answered,
    /// The reply is in the output buffer: write it, then close the connection.
    Close,
}

/// What a batch leaves for the driver besides [`Next`].
#[derive(Debug)]
pub struct Batch {
    /// What to do once the output is written.
    pub next: Next,
    /// Parked clients this batch served got their replies through their own tasks.
    woke: bool,
    /// The replies wait until the log is safe up to this offset.
    wait_log: Option<(Arc<Log>, u64)>,
    /// The batch ran more than one request.
    pipelined: bool,
}

/// What a write stuck on a full stream must watch besides the stream: the client's output
/// limits (the soft limit's clock keeps running while nothing is written) and `timeout`.
#[derive(Debug)]
pub struct OutputWatch {
    shared: Arc<Shared>,
    id: u64,
    mem: Arc<ClientMemory>,
    guard: OutputGuard,
    /// As of the last batch.
    limit: ClassLimit,
    /// The memory past which client eviction closes this client, as of the last batch (0:
    /// none; `run::eviction_limit`).
    evict_at: u64,
    authenticated: bool,
    idle_timeout_secs: u64,
    /// The client's push queue: frames pushed while a write is stuck count in its output.
    push: crate::push::PushProbe,
}

impl OutputWatch {
    /// Publish what `out` still holds, `written` bytes of it written already (CLIENT LIST
    /// `obl`, `omem`, `tot-mem`).
    pub fn pending(&self, out: &OutputBuffer, written: usize) {
        ClientMemory::set(&self.mem.out_pending, out.len());
        ClientMemory::set(&self.mem.out_shared, out.referenced_bytes());
        ClientMemory::set(&self.mem.out_unshared, out.solely_held_bytes());
        ClientMemory::set(&self.mem.out_written, written);
        ClientMemory::set(&self.mem.out_held, out.held_bytes());
    }

    /// Whether the output still to write (as last published by [`OutputWatch::pending`]) and
    /// the pushes queued behind it put the client over its output limits, counted as CLIENT
    /// LIST's `omem`; if so it is counted and logged, and the connection must close. Looked at
    /// while a write is stuck, also when nothing else happens: a subscriber that stopped
    /// reading is closed once its soft limit runs out after the publishing stopped.
    pub fn over_limit(&mut self) -> bool {
        let queued = self.push.queued_bytes();
        if self.evict_at > 0 && self.mem.total() + queued > self.evict_at {
            let mut st = self.shared.lock();
            if crate::run::evict_if_alone_over(&mut st, self.id, self.mem.total() + queued) {
                return true;
            }
        }
        let used = self.mem.counted(queued);
        if !self.guard.over_counted(used, &self.limit, self.authenticated, now_ms() / 1000) {
            return false;
        }
        let mut st = self.shared.lock();
        st.stats.output_buffer_limit_disconnections += 1;
        log_client(&st, self.id, |line| client_limits::log_output_limit_close(line, false));
        true
    }

    /// When the soft limit will have been exceeded long enough, if it is being exceeded now.
    pub fn soft_deadline(&self) -> Option<Instant> {
        self.guard.soft_deadline_secs(&self.limit).map(|s| instant_at_ms(s * 1000))
    }

    /// When a write that last made progress at `last_progress` makes the client idle too long.
    pub fn idle_deadline(&self, last_progress: Instant) -> Option<Instant> {
        (self.idle_timeout_secs > 0).then(|| last_progress + Duration::from_secs(self.idle_timeout_secs + 1))
    }
}

/// One client's protocol state.
#[derive(Debug)]
pub struct Session {
    shared: Arc<Shared>,
    conn: Conn,
    parser: RequestParser,
    /// The query buffer.
    inbuf: BytesMut,
    /// Whether the input buffer is reported as this client's own (Redis reports a client
    /// whose input fits one read as using the shared buffer: qbuf=0 qbuf-free=0).
    qbuf_private: bool,
    /// Replies not yet written (large payloads referenced, not copied).
    pub(super) out: OutputBuffer,
    /// A buffering transport (TLS) took output it has not pushed out yet (`conn/driver.rs`).
    pub(super) flush_owed: bool,
    /// What a stuck write watches.
    pub(super) watch: OutputWatch,
    /// Replies for the clients this batch served, to be written straight to their streams.
    deliveries: Vec<Delivery>,
    /// Bytes read not yet added to the counters.
    net_in: u64,
    /// Reads since the last batch (CLIENT LIST `read-events`).
    read_events: u64,
    /// Output bytes not yet added to this connection's counter, and of those the ones not yet
    /// added to the server's (replies written directly by another connection were counted by
    /// it).
    net_out: u64,
    net_out_uncounted: u64,
    /// This client's stream, for other connections to write to, if its transport allows it.
    direct: Option<Arc<dyn DirectWrite>>,
    /// `proto-max-bulk-len` and `client-query-buffer-limit` as of the last batch, for the
    /// busy path, which runs without the lock.
    max_bulk: usize,
    query_buffer_limit: u64,
    /// A request the busy path parsed that waits for the gate (run first by the next batch).
    pending: Option<Vec<Bytes>>,
    deferred: Option<Box<Deferred>>,
    /// What other tasks push to this client (`src/push.rs`).
    pub(super) push: PushReceiver,
}

/// The lock, taken by a script now: most scripts end within microseconds, so yield the thread
/// a few times (on a shared core that lets the script go on) and take it then; `None` when
/// the script is still running after that (or its hook marked it running): the connection
/// waits on the gate instead, so that it never sits in `lock()` for a long script's run.
fn lock_after_script(shared: &Shared) -> Option<std::sync::MutexGuard<'_, State>> {
    for _ in 0..32 {
        std::thread::yield_now();
        if !shared.busy.is_open() {
            return None;
        }
        if let Some(st) = shared.try_lock() {
            return Some(st);
        }
        if !shared.busy.script_started() {
            // The script ended and an ordinary batch holds the lock.
            return lock_contended(shared);
        }
    }
    None
}

/// The lock, held by another batch: taken after a few yields of the thread, else `None` (the
/// connection yields to the runtime and tries again). Never a wait in `lock()`: the batch
/// holding the lock may be about to start a script (an EVAL between taking the lock and its
/// script's start), and a connection in `lock()` would then wait, holding its runtime thread,
/// for as long as the script runs — forever for one that loops, with no BUSY reply.
fn lock_contended(shared: &Shared) -> Option<std::sync::MutexGuard<'_, State>> {
    for _ in 0..32 {
        std::thread::yield_now();
        if !shared.busy.is_open() || shared.busy.script_started() {
            return None;
        }
        if let Some(st) = shared.try_lock() {
            return Some(st);
        }
    }
    None
}

impl Session {
    /// Start authenticated as `user` (a TLS client certificate named it).
    pub fn start_as(&mut self, user: Arc<crate::acl::User>) {
        // Looked up again by name at the first command, whatever changed since.
        self.conn.acl_gen = u64::MAX;
        self.conn.user = Some(user);
        self.conn.authenticated = true;
    }

    /// The protocol state of a client just admitted (`hot`: the configuration then).
    pub fn new(
        shared: Arc<Shared>,
        id: u64,
        mem: Arc<ClientMemory>,
        authenticated: bool,
        hot: &HotConfig,
        direct: Option<Arc<dyn DirectWrite>>,
        push: PushReceiver,
    ) -> Session {
        let mut conn = Conn::new(id, authenticated);
        conn.batch_now_ms = now_ms();
        let watch = OutputWatch {
            shared: shared.clone(),
            id,
            mem,
            guard: OutputGuard::default(),
            limit: hot.output_limits.of(ClientClass::Normal),
            evict_at: 0,
            authenticated,
            idle_timeout_secs: hot.idle_timeout_secs,
            push: push.probe(),
        };
        Session {
            shared,
            conn,
            parser: RequestParser::new(),
            // Both buffers come from `spare` when input arrives: a connection that never
            // sends anything holds none.
            inbuf: BytesMut::new(),
            qbuf_private: false,
            out: OutputBuffer::default(),
            flush_owed: false,
            watch,
            deliveries: Vec::new(),
            net_in: 0,
            read_events: 0,
            net_out: 0,
            net_out_uncounted: 0,
            direct,
            max_bulk: hot.max_bulk_len,
            query_buffer_limit: hot.query_buffer_limit,
            pending: None,
            deferred: None,
            push,
        }
    }

    /// Register the client record the first time this connection holds the lock (it was
    /// admitted while a script held it).
    pub fn register_later(&mut self, info: Box<crate::state::ClientInfo>) {
        self.deferred.get_or_insert_default().register = Some(info);
    }

    /// Whether a request waits for the busy gate to open (the busy path could not decide it);
    /// otherwise the connection waits only until no script runs below the threshold.
    pub fn waits_for_open(&self) -> bool {
        self.pending.is_some()
    }

    /// The server this client belongs to.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// This client's id.
    pub fn client_id(&self) -> u64 {
        self.conn.id
    }

    /// A `WAIT` / `WAITAOF` waiting: when its copies exist, or `timed_out`, queue its reply;
    /// when its wait was ended by force (the server became a replica), queue that reply and
    /// say the connection must close after it.
    pub fn answer_copies(&mut self, w: &crate::replication::primary::CopiesWait, timed_out: bool) -> Copies {
        let mut st = self.shared.lock();
        let ended = blocking::copies_wait_ended(&st, self.conn.id);
        if !ended && !timed_out && !w.satisfied(&st.journal, &st.replication) {
            return Copies::Waiting;
        }
        let (reply, answer) = match blocking::end_copies_wait(&mut st, self.conn.id) {
            Some(r) => (r, Copies::Close),
            None => (w.reply(&st.journal, &st.replication), Copies::Answered),
        };
        drop(st);
        emit(&mut self.out, &mut self.conn, &reply);
        answer
    }

    /// What a flush set aside was freed (`Next::Freed`): its reply.
    pub fn freed(&mut self, reply: &Reply) {
        emit(&mut self.out, &mut self.conn, reply);
    }

    /// The shutdown this client's `SHUTDOWN` waited for was cancelled (ABORT, a failed save):
    /// it is no longer blocked and gets Redis' error.
    pub fn shutdown_cancelled(&mut self) {
        let error = rill_engine::CmdError::full("ERR Errors trying to SHUTDOWN. Check logs.").to_reply();
        let mut st = self.shared.lock();
        st.shutdown.blocked.remove(&self.conn.id);
        if let Some(c) = st.clients.get_mut(&self.conn.id) {
            c.blocked = false;
        }
        if let Reply::Error(text) = &error {
            st.stats.count_error(text);
        }
        drop(st);
        emit(&mut self.out, &mut self.conn, &error);
    }

    /// When a `WAIT` / `WAITAOF` answers anyway.
    pub fn copies_deadline(w: &crate::replication::primary::CopiesWait) -> Option<Instant> {
        w.deadline_ms.map(instant_at_ms)
    }

    // --------------------------------------------------------------------------------------------
    // The batch
    // --------------------------------------------------------------------------------------------

    /// Run what the query buffer holds: under the state lock (once for the whole batch), or,
    /// while the busy gate is closed, without it (`busy.rs`).
    pub fn run_batch(&mut self) -> Batch {
        if self.out.encoded_capacity() == 0 {
            if let Some(unused) = self.out.give_spare(super::spare::take()) {
                super::spare::put(unused);
            }
        }
        if self.shared.busy.is_running() {
            // A script holds the lock and has not reached the threshold: wait for it.
            return Batch { next: Next::Busy, woke: false, wait_log: None, pipelined: false };
        }
        if !self.shared.busy.is_open() {
            return self.busy_batch();
        }
        let shared = self.shared.clone();
        let mut st = match shared.try_lock() {
            Some(st) => st,
            // Taken by a script: wait on the gate, not on the lock (past the threshold, the
            // busy path answers).
            None if !shared.busy.is_open() => return self.run_batch(),
            None => {
                let taken =
                    if shared.busy.script_started() { lock_after_script(&shared) } else { lock_contended(&shared) };
                match taken {
                    Some(st) => st,
                    None => return Batch { next: Next::Busy, woke: false, wait_log: None, pipelined: false },
                }
            }
        };
        // Closed while this task waited for the lock (the tests' gate, which no script holds
        // the lock for): nothing may run but what the busy path allows.
        if !self.shared.busy.is_open() {
            drop(st);
            return self.busy_batch();
        }
        if let Some(d) = self.deferred.take() {
            // Registered after a shutdown woke every client it knew: wake this one too.
            if d.apply(&mut st, self.conn.id) && *self.shared.shutdown.borrow() {
                self.push.wake();
            }
        }
        // Held by a pause until now: the request runs again (and may be held again).
        if st.pause.held.remove(&self.conn.id) {
            if let Some(c) = st.clients.get_mut(&self.conn.id) {
                c.blocked = false;
            }
        }
        // Client eviction at once when this client alone holds more than all clients may.
        let limit = st.hot.maxmemory_clients;
        if limit > 0 {
            let mine = self.inbuf.len() + self.out.len() + self.conn.multi.as_ref().map_or(0, |m| m.argv_bytes);
            if mine as u64 > limit {
                self.publish_buffers();
                crate::run::evict_clients(&mut st);
                if st.clients.get(&self.conn.id).is_none_or(|c| c.killed) {
                    return Batch { next: Next::Drop, woke: false, wait_log: None, pipelined: false };
                }
            }
        }
        let conn = &mut self.conn;
        st.stats.net_input_bytes += self.net_in;
        conn.net_in_unpublished += self.net_in;
        self.net_in = 0;
        conn.net_out_unpublished += self.net_out;
        st.stats.net_output_bytes += self.net_out_uncounted;
        self.net_out = 0;
        self.net_out_uncounted = 0;
        self.watch.idle_timeout_secs = st.hot.idle_timeout_secs;
        self.watch.limit = st.hot.output_limits.of(client_class(&st, conn.id));
        self.watch.evict_at = crate::run::eviction_limit(&st, conn.id);
        self.max_bulk = st.hot.max_bulk_len;
        self.query_buffer_limit = st.hot.query_buffer_limit;
        if query_buffer_over(&st, conn, &self.inbuf) {
            st.stats.query_buffer_limit_disconnections += 1;
            log_client(&st, conn.id, |line| client_limits::log_query_limit_close(line, &self.inbuf));
            return Batch { next: Next::Drop, woke: false, wait_log: None, pipelined: false };
        }
        // CLIENT LIST `read-events`: the reads that brought this batch's input, counted before
        // its commands run (CLIENT INFO counts the read that brought it, as in Redis).
        if let Some(c) = st.clients.get_mut(&conn.id) {
            c.read_events += std::mem::take(&mut self.read_events);
        }
        conn.batch_cmds = 0;
        let handed_before = st.blocked.handed_to_tasks;
        let appended_before = st.journal.appended();
        st.blocked.deliveries = Some(std::mem::take(&mut self.deliveries));
        // The arguments' vector is the thread's, reused batch after batch (a new one per batch
        // was an allocation and a free per request for a client with one in flight), and
        // held by no connection between batches.
        let mut args = ARGS.take();
        // Output a socket did not take yet may be waiting from earlier batches.
        let out_before = self.out.len() as u64;
        let next = run_requests(
            &self.shared,
            &mut st,
            conn,
            &mut self.parser,
            &mut self.inbuf,
            &mut self.out,
            &self.direct,
            &mut self.watch.guard,
            &mut self.pending,
            &mut self.push,
            &mut args,
        );
        // Cleared first: its arguments refer to the query buffer, which is reclaimed whole
        // only when nothing refers to it (`spare::put`).
        args.clear();
        ARGS.set(args);
        self.deliveries = st.blocked.deliveries.take().unwrap_or_default();
        st.blocked.deliveries_wait_for_log = false;
        let pipelined = conn.cmds_unpublished > 1;
        // CLIENT LIST `avg-pipeline-len-sum|cnt`: the commands each batch of input held.
        if conn.batch_cmds > 0 {
            if let Some(c) = st.clients.get_mut(&conn.id) {
                c.pipeline_len_sum += conn.batch_cmds;
                c.pipeline_len_cnt += 1;
            }
        }
        // Replies wait for this batch's records, and also for any record before them not yet
        // safe (`Journal::reply_wait`; a replica's readers do not, see
        // `Replication::reads_wait_for_log`).
        let wait_log = st
            .journal
            .reply_wait(appended_before)
            .filter(|_| st.journal.appended() != appended_before || st.replication.reads_wait_for_log());
        // Parked clients this batch served whose replies are on the way to their tasks (the
        // others' replies are written, or in `deliveries` for this task to write).
        let woke = st.blocked.handed_to_tasks != handed_before;
        if matches!(next, Next::Drop) {
            return Batch { next, woke, wait_log, pipelined };
        }
        // Pushed frames were counted when pushed.
        let n = (self.out.len() as u64).saturating_sub(out_before).saturating_sub(self.push.take_drained());
        st.stats.net_output_bytes += n;
        conn.net_out_unpublished += n;
        let now = conn.batch_now_ms;
        dispatch::publish_client_info(&mut st, conn, now);
        // The class may have changed in this batch (SUBSCRIBE): the write that follows is
        // watched with the new one.
        self.watch.limit = st.hot.output_limits.of(client_class(&st, conn.id));
        self.watch.evict_at = crate::run::eviction_limit(&st, conn.id);
        drop(st);
        self.watch.authenticated = self.conn.authenticated;
        // What CLIENT LIST reports of this client's buffers until the next batch.
        if self.inbuf.is_empty() {
            // Reclaims the consumed front of the buffer, without copying.
            self.inbuf.reserve(READ_CHUNK_BYTES);
        } else {
            self.qbuf_private = true;
        }
        self.publish_buffers();
        Batch { next, woke, wait_log, pipelined }
    }

    /// Before the batch's output is written: let woken clients write first, wait for the log,
    /// write the served clients' replies, and let other pipelining clients run. False if the
    /// connection must close instead (the log failed: nothing may be acknowledged).
    pub async fn settle(&mut self, batch: &mut Batch) -> bool {
        crate::poll::report_work();
        if batch.woke {
            // Let the clients this batch unblocked write their replies first: a write here
            // would delay every one of them by a syscall, while this client's own reply is
            // no later than if it had been written first by a few microseconds per waiter.
            tokio::task::yield_now().await;
        }
        // Waiting for the log (or for woken clients) has already let the others run.
        let yielded = batch.woke || batch.wait_log.is_some();
        if let Some((log, offset)) = batch.wait_log.take() {
            if !durable(&log, offset).await {
                // Not on disk: acknowledge nothing. The client sees the connection close (and
                // so do the clients in `deliveries`, whose tasks see their channel drop).
                return false;
            }
        }
        // Served clients first, as Redis writes its readers' replies before the writer's.
        blocking::deliver(&mut self.deliveries);
        if batch.pipelined && !yielded && !self.out.is_empty() {
            // A pipelined batch's replies go out after the other connections with requests
            // ready have run theirs, as Redis writes every reply once per event-loop turn: a
            // client then finds many replies per wake-up.
            tokio::task::yield_now().await;
        }
        true
    }

    /// After the output buffer was written out.
    pub fn written(&mut self) {
        if self.out.encoded_capacity() > OUT_KEEP_MAX_BYTES && client_limits::reply_buffer_resizing() {
            self.out = OutputBuffer::default();
        }
        ClientMemory::set(&self.watch.mem.out_held, self.out.held_bytes());
        ClientMemory::set(&self.watch.mem.out_written, 0);
    }

    // --------------------------------------------------------------------------------------------
    // Input
    // --------------------------------------------------------------------------------------------

    /// The query buffer, with room for a read.
    pub fn read_buffer(&mut self) -> &mut BytesMut {
        if self.inbuf.capacity() == 0 {
            self.inbuf = super::spare::take();
        } else if self.inbuf.capacity() - self.inbuf.len() < READ_CHUNK_BYTES / 2 && !self.big_arg_has_room() {
            self.inbuf.reserve(READ_CHUNK_BYTES);
        }
        &mut self.inbuf
    }

    /// Whether the buffer holds a big argument in progress and has room for the rest of it:
    /// it was sized for it (`prepare_read`), and growing it for the last few bytes would
    /// double it (CLIENT LIST `qbuf-free`, `tot-mem` and client eviction would see twice the
    /// argument, where Redis sees it once).
    fn big_arg_has_room(&self) -> bool {
        let rest = self.parser.bulk_bytes_announced(&self.inbuf);
        rest > 0 && self.inbuf.capacity() - self.inbuf.len() >= rest && self.inbuf.len() + rest >= BIG_ARG_BYTES
    }

    /// `n` bytes were read into the query buffer.
    pub fn received(&mut self, n: usize) {
        self.net_in += n as u64;
        self.read_events += 1;
    }

    /// Before waiting for input: a big argument is read into a buffer of its size, as Redis
    /// does for arguments of 32 KiB and more. The size is the client's word (bounded by
    /// proto-max-bulk-len, and by 16 KiB before AUTH, in the parser), so it is reserved
    /// fallibly; the pages are only touched as the bytes arrive. If the allocator refuses,
    /// the buffer grows with what really arrives.
    pub fn prepare_read(&mut self) {
        let announced = self.parser.bulk_bytes_announced(&self.inbuf);
        if announced >= BIG_ARG_BYTES && self.inbuf.capacity() - self.inbuf.len() < announced {
            if let Some(bigger) = with_room(&self.inbuf, announced) {
                self.inbuf = bigger;
            } else {
                let wanted = self.parser.bytes_wanted(&self.inbuf);
                self.inbuf.reserve(wanted);
            }
            self.qbuf_private = true;
            self.publish_buffers();
        }
    }

    /// `timeout`: when a client waiting for input from now on is idle too long. As Redis, a
    /// client in MULTI times out too; a blocked one does not.
    pub fn idle_deadline(&self) -> Option<Instant> {
        let secs = self.watch.idle_timeout_secs;
        // Nor does a subscribed one: it waits for messages, not for its own requests.
        (secs > 0 && !self.conn.subscribed).then(|| Instant::now() + Duration::from_secs(secs))
    }

    // --------------------------------------------------------------------------------------------
    // Push mode
    // --------------------------------------------------------------------------------------------

    /// What the driver waits on for pushed output (`src/push.rs`).
    pub fn push_signal(&self) -> Arc<crate::push::Signal> {
        self.push.signal()
    }

    /// Move what other tasks pushed into the output, outside a batch (the driver, while it
    /// waits with its output written); true if there was anything.
    pub fn take_pushed(&mut self) -> bool {
        let n = self.push.drain_into(&mut self.out);
        // Counted as output when pushed.
        self.push.take_drained();
        ClientMemory::set(&self.watch.mem.out_pending, self.out.len());
        ClientMemory::set(&self.watch.mem.out_shared, self.out.referenced_bytes());
        ClientMemory::set(&self.watch.mem.out_unshared, self.out.solely_held_bytes());
        n > 0
    }

    /// The connection starts to wait for input: with nothing read and nothing left to write,
    /// its two buffers go back to `spare` (an idle connection holds neither).
    pub fn release_idle_buffers(&mut self) {
        if self.inbuf.is_empty() && self.inbuf.capacity() > 0 && !self.qbuf_private {
            super::spare::put(std::mem::take(&mut self.inbuf));
        }
        if !client_limits::reply_buffer_resizing() {
            return;
        }
        if let Some(buf) = self.out.take_spare() {
            super::spare::put(buf);
            ClientMemory::set(&self.watch.mem.out_held, self.out.held_bytes());
        }
    }

    /// Whether an idle query buffer has room worth giving back.
    pub fn may_shrink(&self) -> bool {
        self.qbuf_private && self.inbuf.capacity() - self.inbuf.len() > QBUF_SHRINK_MIN_FREE_BYTES
    }

    /// The query buffer has been idle `QBUF_IDLE_SHRINK`: give its spare room back, as
    /// Redis' cron does (an empty buffer is freed; the next read allocates a new one). False
    /// if DEBUG PAUSE-CRON holds it back (ask again after `QBUF_SHRINK_RETRY`).
    pub fn shrink_idle_input(&mut self) -> bool {
        if client_limits::cron_paused() {
            return false;
        }
        if self.inbuf.is_empty() {
            self.inbuf = BytesMut::new();
            self.qbuf_private = false;
        } else {
            self.inbuf = BytesMut::from(&self.inbuf[..]);
        }
        self.publish_buffers();
        true
    }

    /// Whether the query buffer is over its limit as of the last batch (the busy path stops
    /// reading then; the next batch closes the client).
    pub fn input_full(&self) -> bool {
        self.inbuf.len() as u64 > self.query_buffer_limit
    }

    // --------------------------------------------------------------------------------------------
    // The end
    // --------------------------------------------------------------------------------------------

    /// Release what this client held in the server (its buffers go with the session).
    pub async fn finish(&mut self) {
        ClientMemory::set(&self.watch.mem.out_pending, 0);
        ClientMemory::set(&self.watch.mem.out_shared, 0);
        ClientMemory::set(&self.watch.mem.out_unshared, 0);
        // The lock is the script's while the gate is not open.
        self.shared.busy.opened().await;
        let mut st = self.shared.lock();
        let id = self.conn.id;
        if let Some(d) = self.deferred.take() {
            d.apply(&mut st, id);
        }
        blocking::unpark(&mut st, id);
        st.monitors.remove(id);
        blocking::end_copies_wait(&mut st, id);
        st.pause.held.remove(&id);
        st.shutdown.blocked.remove(&id);
        st.engine.unwatch_all(id);
        crate::tracking::disable(&mut st, id);
        // RELEASEONCLOSE: the consumers only this connection read as have their entries
        // handed back by the policy timer, as a unit of its own.
        if st.engine.policy_client_closed(id) {
            st.policy_wake.notify_one();
        }
        st.pubsub.remove_client(id);
        st.stats.net_input_bytes += self.net_in;
        st.remove_client(id);
    }

    /// Publish the sizes CLIENT LIST reports.
    fn publish_buffers(&self) {
        let mem = &self.watch.mem;
        let inbuf = &self.inbuf;
        ClientMemory::set(&mem.qbuf, inbuf.len());
        ClientMemory::set(
            &mem.qbuf_free,
            if self.qbuf_private || !inbuf.is_empty() { inbuf.capacity() - inbuf.len() } else { 0 },
        );
        ClientMemory::set(&mem.out_pending, self.out.len());
        ClientMemory::set(&mem.out_shared, self.out.referenced_bytes());
        ClientMemory::set(&mem.out_unshared, self.out.solely_held_bytes());
        ClientMemory::set(&mem.out_written, 0);
        ClientMemory::set(&mem.out_held, self.out.held_bytes());
        ClientMemory::set(&mem.multi_mem, self.conn.multi.as_ref().map_or(0, |m| m.argv_bytes));
    }
}

thread_local! {
    /// A batch's arguments' vector, kept between batches (see `Session::run_batch`).
    static ARGS: std::cell::Cell<Vec<Bytes>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Run every complete request in `inbuf` (after `pending`, a request parsed earlier) until one
/// blocks or closes the connection. As Redis, what one read brought runs before any of its
/// output is written: an output limit sees the replies of a whole pipelined read.
#[allow(clippy::too_many_arguments)]
fn run_requests(
    shared: &Shared,
    st: &mut State,
    conn: &mut Conn,
    parser: &mut RequestParser,
    inbuf: &mut BytesMut,
    out: &mut OutputBuffer,
    direct: &Option<Arc<dyn DirectWrite>>,
    guard: &mut OutputGuard,
    pending: &mut Option<Vec<Bytes>>,
    pushed: &mut PushReceiver,
    args: &mut Vec<Bytes>,
) -> Next {
    let now = now_ms();
    conn.batch_now_ms = now;
    conn.clock = crate::clock::Tick::now();
    let max_bulk = st.hot.max_bulk_len;
    let mut limit = st.hot.output_limits.of(client_class(st, conn.id));
    if st.clients.get(&conn.id).is_none_or(|c| c.killed) {
        return Next::Drop;
    }
    let evict_at = crate::run::eviction_limit(st, conn.id);
    // What was pushed before this batch took the lock goes before its replies.
    pushed.drain_into(out);
    loop {
        // Per request: an AUTH earlier in the batch changes the limits.
        conn.reply_budget = client_limits::reply_budget_bytes(&limit, conn.authenticated);
        if let Some(parsed) = pending.take() {
            *args = parsed;
        } else {
            let limits =
                Limits { max_bulk_len: max_bulk, max_inline_len: INLINE_MAX_BYTES, authenticated: conn.authenticated };
            match parser.parse_into(inbuf, &limits, args) {
                Ok(true) => {}
                Ok(false) => return Next::Read,
                Err(e) => {
                    if let Some(r) = e.reply() {
                        if let Reply::Error(text) = &r {
                            st.stats.count_error(text);
                        }
                        write_reply(out, &r, conn.proto);
                    }
                    return Next::Close;
                }
            }
        }
        conn.output_pending = !out.is_empty();
        let was_subscribed = conn.subscribed;
        let action = dispatch::execute(shared, st, conn, args, now);
        if std::mem::take(&mut conn.push_first) {
            pushed.drain_into(out);
        }
        match action {
            Action::Reply(r) => emit(out, conn, &r),
            Action::Pushes(rs) => emit_pushes(out, conn, &rs),
            Action::Nothing => {}
            Action::AwaitCopies(w) => {
                // Registered, so that a change of role ends the wait (`blocking.rs`).
                blocking::wait_copies(st, conn.id, w.spec);
                return Next::Copies(w);
            }
            Action::AwaitFreed(rx, r) => return Next::Freed(rx, r),
            Action::AwaitShutdown(cancelled) => {
                // Blocked until the exit or a cancellation (CLIENT LIST flag b).
                st.shutdown.blocked.insert(conn.id);
                if let Some(c) = st.clients.get_mut(&conn.id) {
                    c.blocked = true;
                }
                return Next::Shutdown(cancelled);
            }
            Action::Held(wait) => {
                // Kept whole, and run first when the pause lets it (CLIENT LIST flag b).
                *pending = Some(std::mem::take(args));
                st.pause.held.insert(conn.id);
                if let Some(c) = st.clients.get_mut(&conn.id) {
                    c.blocked = true;
                }
                return Next::Held(wait);
            }
            Action::Replica { preamble, feed } => {
                write_reply(out, &Reply::Raw(preamble.into()), conn.proto);
                return Next::Replica(feed);
            }
            Action::Close(r) => {
                if let Some(r) = r {
                    emit(out, conn, &r);
                }
                return Next::Close;
            }
            Action::Block { spec, args, request } => {
                let (tx, rx) = oneshot::channel();
                let args = request.rerun_args.clone().unwrap_or(args);
                // Nothing may overtake replies still waiting to be written; and the driver of a
                // client that may be pushed to writes while parked, so nobody else may.
                let direct = if conn.reply_mode == ReplyMode::On && out.is_empty() && !conn.subscribed {
                    direct.clone()
                } else {
                    None
                };
                let park = Park {
                    rx,
                    deadline: request.deadline_ms.map(instant_at_ms),
                    wake: request.wake_at_ms.map(instant_at_ms),
                };
                let waiter = Waiter {
                    spec,
                    args,
                    db: conn.db,
                    request: *request,
                    tx,
                    resp3: conn.proto == Protocol::Resp3,
                    direct,
                    ran_micros: conn.last_micros,
                    acl: conn.user.clone().map(|u| (u, shared.acl.clone())),
                };
                blocking::park(st, conn.id, waiter);
                return Next::Wait(park);
            }
        }
        // Pushed while the command ran (a PUBLISH to its own channel): after its reply.
        pushed.drain_into(out);
        if st.clients.get(&conn.id).is_none_or(|c| c.killed) {
            return Next::Drop;
        }
        if conn.subscribed != was_subscribed {
            limit = st.hot.output_limits.of(client_class(st, conn.id));
        }
        let pending = out.len() as u64;
        if conn.close_asap || guard.over(pending, out.referenced_bytes() as u64, &limit, conn.authenticated, now / 1000)
        {
            st.stats.output_buffer_limit_disconnections += 1;
            log_client(st, conn.id, |line| client_limits::log_output_limit_close(line, true));
            return Next::Drop;
        }
        if evict_at > 0 {
            let mine = inbuf.len() + out.len() + conn.multi.as_ref().map_or(0, |m| m.argv_bytes);
            if mine as u64 > evict_at && crate::run::evict_if_alone_over(st, conn.id, mine as u64) {
                return Next::Drop;
            }
        }
    }
}

/// A command's confirmations sent as pushes: written whatever CLIENT REPLY says (as Redis
/// writes pushes), and a SKIP still counts them as the one reply it skips.
fn emit_pushes(out: &mut OutputBuffer, conn: &mut Conn, replies: &[Reply]) {
    for r in replies {
        write_reply(out, r, conn.proto);
    }
    match conn.reply_mode {
        ReplyMode::SkipNext => conn.reply_mode = ReplyMode::Skip,
        ReplyMode::Skip => conn.reply_mode = ReplyMode::On,
        ReplyMode::On | ReplyMode::Off => {}
    }
}

/// The output limit class of client `id` (normal if it is gone).
fn client_class(st: &State, id: u64) -> ClientClass {
    st.clients.get(&id).map_or(ClientClass::Normal, |ci| ci.class())
}

fn emit(out: &mut OutputBuffer, conn: &mut Conn, reply: &Reply) {
    match conn.reply_mode {
        // A reply that cannot fit the client's budget is not encoded: the client is closed,
        // as Redis closes one whose output passes its limit.
        ReplyMode::On if client_limits::reply_size_at_least(reply, conn.reply_budget) > conn.reply_budget => {
            conn.close_asap = true;
        }
        ReplyMode::On => write_reply(out, reply, conn.proto),
        ReplyMode::Off => {}
        ReplyMode::SkipNext => conn.reply_mode = ReplyMode::Skip,
        ReplyMode::Skip => conn.reply_mode = ReplyMode::On,
    }
}

/// Whether the input buffer plus the MULTI queue passed `client-query-buffer-limit` (or, for
/// a client that still has to AUTH, 1 MiB), as Redis checks after every read.
fn query_buffer_over(st: &State, conn: &Conn, inbuf: &BytesMut) -> bool {
    let used = (inbuf.len() + conn.multi.as_ref().map_or(0, |m| m.argv_bytes)) as u64;
    used > st.hot.query_buffer_limit || (!conn.authenticated && used > client_limits::UNAUTHENTICATED_QUERY_BYTES)
}

/// Wait until the log is safe up to `offset` (per the fsync policy: fsynced under `always`,
/// written to the OS otherwise). False if the log failed first: the replies must not go out.
async fn durable(log: &Arc<Log>, offset: u64) -> bool {
    // A log just turned on holds every reply until its base is on disk (`aof/base.rs`).
    if !log.base.ready() && !log.base.wait().await {
        return false;
    }
    if log.policy() != crate::aof::FsyncPolicy::Always {
        if log.written() < offset {
            // Let the other connections with requests ready run their batches first: the
            // first of us to come back writes everyone's records with one write(2), as
            // Redis writes its AOF buffer once per event-loop turn.
            tokio::task::yield_now().await;
        }
        return log.write_through(offset);
    }
    if log.durable().offset >= offset {
        return true;
    }
    log.wait_durable(offset).await.unwrap_or(false)
}

/// Call `f` with the CLIENT LIST line of client `id` (for a log line).
fn log_client(st: &State, id: u64, f: impl FnOnce(&str)) {
    let now = now_ms();
    let watch = st.engine.watched_by(id);
    let line = st.clients.get(&id).map(|ci| crate::cmd::connection::client_line(ci, now, watch)).unwrap_or_default();
    f(&line);
}

/// An instant `ms` Unix milliseconds from now (or now if that has passed).
pub(in crate::conn) fn instant_at_ms(ms: i64) -> Instant {
    Instant::now() + Duration::from_millis((ms - now_ms()).max(0) as u64)
}

/// `buf`'s bytes in a new buffer with room for `more` after them, or `None` if the allocator
/// refuses that much (a fallible reservation: `BytesMut::reserve` would abort the process).
fn with_room(buf: &BytesMut, more: usize) -> Option<BytesMut> {
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(buf.len().checked_add(more)?).ok()?;
    v.extend_from_slice(buf);
    // A uniquely owned `Bytes` made from a `Vec` converts back without a copy, keeping the
    // vector's capacity (checked by the test below).
    bytes::Bytes::from(v).try_into_mut().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn with_room_keeps_the_bytes_and_the_room() {
        let buf = bytes::BytesMut::from(&b"*3\r\n$3\r\nset\r\n"[..]);
        let bigger = super::with_room(&buf, 1 << 20);
        let bigger = bigger.as_ref().map(|b| (&b[..], b.capacity() >= buf.len() + (1 << 20)));
        assert_eq!(bigger, Some((&buf[..], true)));
        assert!(super::with_room(&buf, usize::MAX).is_none(), "a reservation too big is refused, not an abort");
    }
}
