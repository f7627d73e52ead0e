//! One task per connection: read bytes, parse requests, run them under the state lock (one
//! lock per batch of pipelined requests), write the replies in order, park when a command
//! blocks.
//!
//! Requests are parsed one at a time inside the lock, right before each runs, because an AUTH
//! earlier in the same batch changes the limits that apply to the next request (Redis'
//! unauthenticated limits).

use crate::aof::Log;
use crate::blocking::{self, Delivery, Outcome, Waiter};
use crate::client_limits::{self, ClassLimit, ClientClass, ClientMemory, OutputGuard};
use crate::dispatch::{self, Action, Conn, ReplyMode};
use crate::state::{now_ms, Shared, State};
use bytes::BytesMut;
use rill_engine::BlockRequest;
use rill_resp::{write_reply, Limits, Protocol, Reply, RequestParser};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch, Notify};

const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Redis' inline request limit.
const INLINE_MAX_BYTES: usize = 64 * 1024;

/// A private query buffer idle this long is shrunk to what it holds (Redis' cron does it for
/// clients idle more than 2 s).
const QBUF_IDLE_SHRINK: Duration = Duration::from_secs(3);
/// Free room under which an idle query buffer is left alone (Redis: 4 KiB).
const QBUF_SHRINK_MIN_FREE_BYTES: usize = 4 * 1024;

/// What the task must do after a batch.
enum Next {
    /// Wait for more input.
    Read,
    /// The output reached the back-pressure threshold: write it, then run the rest of the
    /// input without reading more.
    More,
    /// Write the replies, then close.
    Close,
    /// Close without writing what is pending (killed, over an output limit).
    Drop,
    Wait(oneshot::Receiver<Outcome>, BlockRequest),
}

/// What a write waits on besides the socket: a write stuck on a client that does not read
/// must still end when the client is killed, the server shuts down, the client has been idle
/// for `timeout`, or its output has stayed over the soft limit too long.
struct Stops<'a> {
    shared: &'a Shared,
    id: u64,
    kill: &'a Notify,
    shutdown: &'a mut watch::Receiver<bool>,
    idle_timeout_secs: u64,
    mem: &'a ClientMemory,
    guard: &'a mut OutputGuard,
    limit: ClassLimit,
    authenticated: bool,
}

/// An instant `ms` Unix milliseconds from now (or now if that has passed).
fn instant_at_ms(ms: i64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis((ms - now_ms()).max(0) as u64)
}

/// Sleep until `at`, or forever.
async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Write all of `buf` to the socket, consuming it. False if the connection must close instead:
/// a write error, or one of [`Stops`] while the socket would not take more.
async fn write_out(w: &OwnedWriteHalf, buf: &mut BytesMut, stops: &mut Stops<'_>) -> bool {
    let mut last_progress = tokio::time::Instant::now();
    loop {
        while !buf.is_empty() {
            match w.try_write(buf) {
                Ok(n) => {
                    let _ = buf.split_to(n);
                    last_progress = tokio::time::Instant::now();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return false,
            }
        }
        ClientMemory::set(&stops.mem.out_pending, buf.len());
        if buf.is_empty() {
            return true;
        }
        // Stuck on a full socket: the soft limit keeps counting while nothing is written.
        if stops.guard.over(buf.len() as u64, &stops.limit, stops.authenticated, now_ms() / 1000) {
            let mut st = stops.shared.lock();
            st.stats.output_buffer_limit_disconnections += 1;
            log_client(&st, stops.id, |line| client_limits::log_output_limit_close(line, false));
            return false;
        }
        let soft = stops.guard.soft_deadline_secs(&stops.limit).map(|s| instant_at_ms(s * 1000));
        let idle =
            (stops.idle_timeout_secs > 0).then(|| last_progress + Duration::from_secs(stops.idle_timeout_secs + 1));
        tokio::select! {
            r = w.writable() => if r.is_err() { return false },
            () = stops.kill.notified() => return false,
            _ = stops.shutdown.changed() => return false,
            () = sleep_until_opt(idle) => {
                tracing::debug!("Closing idle client");
                return false;
            }
            () = sleep_until_opt(soft) => {}
        }
    }
}

/// Call `f` with the CLIENT LIST line of client `id` (for a log line).
fn log_client(st: &State, id: u64, f: impl FnOnce(&str)) {
    let now = now_ms();
    let watch = st.engine.watched_by(id);
    let line = st.clients.get(&id).map(|ci| crate::cmd::connection::client_line(ci, now, watch)).unwrap_or_default();
    f(&line);
}

/// Wait until the log is safe up to `offset` (per the fsync policy: fsynced under `always`,
/// written to the OS otherwise). False if the log failed first: the replies must not go out.
async fn durable(log: &Arc<Log>, offset: u64) -> bool {
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

fn emit(out: &mut BytesMut, conn: &mut Conn, reply: &Reply) {
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

/// Run every complete request in `inbuf` until one blocks or closes the connection, or the
/// output reaches the back-pressure threshold.
#[allow(clippy::too_many_arguments)]
fn run_batch(
    shared: &Shared,
    st: &mut State,
    conn: &mut Conn,
    parser: &mut RequestParser,
    inbuf: &mut BytesMut,
    out: &mut BytesMut,
    socket: &Arc<OwnedWriteHalf>,
    guard: &mut OutputGuard,
) -> Next {
    let now = now_ms();
    conn.batch_now_ms = now;
    conn.clock = crate::clock::Tick::now();
    let max_bulk = st.hot.max_bulk_len;
    let limit = st.hot.output_limits.of(ClientClass::Normal);
    let mut args = Vec::new();
    if st.clients.get(&conn.id).is_none_or(|c| c.killed) {
        return Next::Drop;
    }
    loop {
        // Per request: an AUTH earlier in the batch changes the limits.
        conn.reply_budget = client_limits::reply_budget_bytes(&limit, conn.authenticated);
        let limits =
            Limits { max_bulk_len: max_bulk, max_inline_len: INLINE_MAX_BYTES, authenticated: conn.authenticated };
        match parser.parse_into(inbuf, &limits, &mut args) {
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
        match dispatch::execute(shared, st, conn, &mut args, now) {
            Action::Reply(r) => emit(out, conn, &r),
            Action::Close(r) => {
                if let Some(r) = r {
                    emit(out, conn, &r);
                }
                return Next::Close;
            }
            Action::Block { spec, args, request } => {
                let (tx, rx) = oneshot::channel();
                let args = request.rerun_args.clone().unwrap_or(args);
                // Nothing may overtake replies still waiting to be written.
                let direct = (conn.reply_mode == ReplyMode::On && out.is_empty()).then(|| socket.clone());
                let waiter = Waiter {
                    spec,
                    args,
                    db: conn.db,
                    request: request.clone(),
                    tx,
                    resp3: conn.proto == Protocol::Resp3,
                    direct,
                };
                blocking::park(st, conn.id, waiter);
                return Next::Wait(rx, request);
            }
        }
        if st.clients.get(&conn.id).is_none_or(|c| c.killed) {
            return Next::Drop;
        }
        let pending = out.len() as u64;
        if conn.close_asap || guard.over(pending, &limit, conn.authenticated, now / 1000) {
            st.stats.output_buffer_limit_disconnections += 1;
            log_client(st, conn.id, |line| client_limits::log_output_limit_close(line, true));
            return Next::Drop;
        }
        if pending >= client_limits::backpressure_bytes(&limit, conn.authenticated) {
            return Next::More;
        }
    }
}

/// Whether the input buffer plus the MULTI queue passed `client-query-buffer-limit` (or, for
/// a client that still has to AUTH, 1 MiB), as Redis checks after every read.
fn query_buffer_over(st: &State, conn: &Conn, inbuf: &BytesMut) -> bool {
    let used = (inbuf.len() + conn.multi.as_ref().map_or(0, |m| m.argv_bytes)) as u64;
    used > st.hot.query_buffer_limit || (!conn.authenticated && used > client_limits::UNAUTHENTICATED_QUERY_BYTES)
}

/// Serve one client until it quits, is killed, or the server shuts down.
pub async fn serve(shared: Arc<Shared>, socket: TcpStream, id: u64, kill: Arc<Notify>, authenticated: bool) {
    let _ = socket.set_nodelay(true);
    let (socket, writer) = socket.into_split();
    let writer = Arc::new(writer);
    let mut deliveries: Vec<Delivery> = Vec::new();
    // Output bytes not yet added to this connection's counter; the second also not yet to
    // the server's (replies written directly by another connection were counted by it).
    let mut net_out: u64 = 0;
    let mut net_out_uncounted: u64 = 0;
    let mut conn = Conn::new(id, authenticated);
    conn.batch_now_ms = now_ms();
    let mut parser = RequestParser::new();
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    // Whether the input buffer is reported as this client's own (Redis reports a client whose
    // input fits one read as using the shared buffer: qbuf=0 qbuf-free=0).
    let mut qbuf_private = false;
    let mut out = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut shutdown = shared.shutdown.subscribe();
    let mut guard = OutputGuard::default();
    let mut net_in: u64 = 0;
    let mut idle_timeout: u64;
    let mut limit: ClassLimit;
    let mut woke: bool;
    let mut pipelined: bool;
    let mut wait_log: Option<(Arc<Log>, u64)>;
    let mem: Arc<ClientMemory> = shared.lock().clients.get(&id).map(|c| c.mem.clone()).unwrap_or_default();
    'outer: loop {
        let next = {
            let mut st = shared.lock();
            st.stats.net_input_bytes += net_in;
            conn.net_in_unpublished += net_in;
            net_in = 0;
            conn.net_out_unpublished += net_out;
            st.stats.net_output_bytes += net_out_uncounted;
            net_out = 0;
            net_out_uncounted = 0;
            idle_timeout = st.hot.idle_timeout_secs;
            limit = st.hot.output_limits.of(ClientClass::Normal);
            if query_buffer_over(&st, &conn, &inbuf) {
                st.stats.query_buffer_limit_disconnections += 1;
                log_client(&st, id, |line| client_limits::log_query_limit_close(line, &inbuf));
                break 'outer;
            }
            let next = {
                let handed_before = st.blocked.handed_to_tasks;
                let appended_before = st.journal.appended;
                st.blocked.deliveries = Some(std::mem::take(&mut deliveries));
                let next =
                    run_batch(&shared, &mut st, &mut conn, &mut parser, &mut inbuf, &mut out, &writer, &mut guard);
                deliveries = st.blocked.deliveries.take().unwrap_or_default();
                st.blocked.deliveries_wait_for_log = false;
                pipelined = conn.cmds_unpublished > 1;
                // Replies wait for this batch's records, and also for any record before them
                // not yet safe: a reader must not see (and act on) a write a crash could still
                // undo. While the log is failing, reads are served at once (writes are refused).
                wait_log = match &st.journal.log {
                    Some(log)
                        if st.journal.appended != appended_before
                            || (!log.failed() && st.journal.appended > log.safe_offset()) =>
                    {
                        Some((log.clone(), st.journal.appended))
                    }
                    _ => None,
                };
                // Parked clients this batch served whose replies are on the way to their tasks
                // (the others' replies are written, or in `deliveries` for this task to write).
                woke = st.blocked.handed_to_tasks != handed_before;
                next
            };
            if matches!(next, Next::Drop) {
                break 'outer;
            }
            let n = out.len() as u64;
            st.stats.net_output_bytes += n;
            conn.net_out_unpublished += n;
            let now = conn.batch_now_ms;
            dispatch::publish_client_info(&mut st, &mut conn, now);
            // What CLIENT LIST reports of this client's buffers until the next batch.
            if inbuf.is_empty() {
                // Reclaims the consumed front of the buffer, without copying.
                inbuf.reserve(READ_CHUNK_BYTES);
            } else {
                qbuf_private = true;
            }
            publish_buffers(&mem, &inbuf, qbuf_private, &out, &conn);
            next
        };
        crate::poll::report_work();
        if woke {
            // Let the clients this batch unblocked write their replies first: a write here
            // would delay every one of them by a syscall, while this client's own reply is
            // no later than if it had been written first by a few microseconds per waiter.
            tokio::task::yield_now().await;
        }
        // Waiting for the log (or for woken clients) has already let the others run.
        let yielded = woke || wait_log.is_some();
        if let Some((log, offset)) = wait_log.take() {
            if !durable(&log, offset).await {
                // Not on disk: acknowledge nothing. The client sees the connection close
                // (and so do the clients in `deliveries`, whose tasks see their channel drop).
                break;
            }
        }
        // Served clients first, as Redis writes its readers' replies before the writer's.
        blocking::deliver(&mut deliveries);
        let mut stops = Stops {
            shared: &shared,
            id,
            kill: &kill,
            shutdown: &mut shutdown,
            idle_timeout_secs: idle_timeout,
            mem: &mem,
            guard: &mut guard,
            limit,
            authenticated: conn.authenticated,
        };
        if !out.is_empty() {
            if pipelined && !yielded {
                // A pipelined batch's replies go out after the other connections with
                // requests ready have run theirs, as Redis writes every reply once per
                // event-loop turn: a client then finds many replies per wake-up.
                tokio::task::yield_now().await;
            }
            if !write_out(&writer, &mut out, &mut stops).await {
                break;
            }
            if out.capacity() > 4 * 1024 * 1024 {
                out = BytesMut::with_capacity(READ_CHUNK_BYTES);
            }
            ClientMemory::set(&mem.out_capacity, out.capacity());
        }
        match next {
            Next::Close | Next::Drop => break,
            Next::More => continue,
            Next::Wait(mut rx, request) => {
                let deadline = request.deadline_ms.map(instant_at_ms);
                let mut wake = request.wake_at_ms.map(instant_at_ms);
                let reply = loop {
                    // XREADGROUP CLAIM asks to be re-run when its oldest pending entry becomes
                    // claimable, even if no key is signalled.
                    let wake_up = match wake {
                        Some(w) if deadline.is_none_or(|d| w < d) => Some(w),
                        _ => None,
                    };
                    tokio::select! {
                        r = &mut rx => match r {
                            Ok(Outcome::Written { mut rest, len }) => {
                                net_out += len as u64;
                                if !rest.is_empty() && !write_out(&writer, &mut rest, &mut stops).await {
                                    break 'outer;
                                }
                                continue 'outer;
                            }
                            Ok(Outcome::Reply(r, offset)) => {
                                let log = if offset > 0 { shared.lock().journal.log.clone() } else { None };
                                if let Some(log) = log {
                                    if !durable(&log, offset).await {
                                        break 'outer;
                                    }
                                }
                                break r;
                            }
                            // Unparked without a reply: killed.
                            Err(_) => break 'outer,
                        },
                        () = sleep_until_opt(deadline) => {
                            let mut st = shared.lock();
                            match blocking::unpark(&mut st, id) {
                                Some(w) => break w.request.timeout_reply,
                                None => continue,
                            }
                        }
                        () = sleep_until_opt(wake_up) => {
                            let mut st = shared.lock();
                            blocking::try_serve(&mut st, id, now_ms());
                            blocking::serve_ready(&mut st, now_ms());
                            wake = st.blocked.wake_at(id).map(instant_at_ms);
                            continue;
                        }
                        // Input that arrives meanwhile waits in the buffer (bounded by the
                        // query buffer limit, checked when the batch runs).
                        r = socket.readable() => {
                            if r.is_err() || read_some(&socket, &mut inbuf, &mut net_in).is_none() {
                                break 'outer;
                            }
                        }
                        () = stops.kill.notified() => break 'outer,
                        _ = stops.shutdown.changed() => break 'outer,
                    }
                };
                emit(&mut out, &mut conn, &reply);
                if !out.is_empty() {
                    net_out += out.len() as u64;
                    net_out_uncounted += out.len() as u64;
                    if !write_out(&writer, &mut out, &mut stops).await {
                        break;
                    }
                }
            }
            Next::Read => {
                // A big argument is read into a buffer of its size, as Redis does for
                // arguments of 32 KiB and more. The size is the client's word (bounded by
                // proto-max-bulk-len, and by 16 KiB before AUTH, in the parser), so it is
                // reserved fallibly; the pages are only touched as the bytes arrive. If the
                // allocator refuses, the buffer grows with what really arrives.
                let announced = parser.bulk_bytes_announced(&inbuf);
                if announced >= BIG_ARG_BYTES && inbuf.capacity() - inbuf.len() < announced {
                    if let Some(bigger) = with_room(&inbuf, announced) {
                        inbuf = bigger;
                    } else {
                        inbuf.reserve(parser.bytes_wanted(&inbuf));
                    }
                    qbuf_private = true;
                    publish_buffers(&mem, &inbuf, qbuf_private, &out, &conn);
                }
                // Fast path: input already waiting (a pipelining client) is read without
                // arming the idle and shrink timers of the wait below, which cost a timer
                // registration per batch (about 10 % of pipelined XADD throughput).
                // `consume_budget` keeps such a client from starving the others.
                match read_some(&socket, &mut inbuf, &mut net_in) {
                    None => break 'outer,
                    Some(0) => {}
                    Some(_) => {
                        tokio::task::consume_budget().await;
                        continue 'outer;
                    }
                }
                // As Redis, a client in MULTI times out too; a blocked one does not (above).
                let idle = (idle_timeout > 0).then(|| tokio::time::Instant::now() + Duration::from_secs(idle_timeout));
                let mut shrink = tokio::time::Instant::now() + QBUF_IDLE_SHRINK;
                loop {
                    let may_shrink = qbuf_private && inbuf.capacity() - inbuf.len() > QBUF_SHRINK_MIN_FREE_BYTES;
                    tokio::select! {
                        r = socket.readable() => {
                            if r.is_err() {
                                break 'outer;
                            }
                            match read_some(&socket, &mut inbuf, &mut net_in) {
                                None => break 'outer,
                                Some(0) => continue,
                                Some(_) => break,
                            }
                        }
                        () = kill.notified() => break 'outer,
                        _ = shutdown.changed() => break 'outer,
                        () = sleep_until_opt(idle) => {
                            tracing::debug!("Closing idle client");
                            break 'outer;
                        }
                        () = tokio::time::sleep_until(shrink), if may_shrink => {
                            if client_limits::cron_paused() {
                                shrink = tokio::time::Instant::now() + Duration::from_millis(100);
                                continue;
                            }
                            // Idle with room to spare: give it back, as Redis' cron does (an
                            // empty buffer is freed; the next read allocates a new one).
                            if inbuf.is_empty() {
                                inbuf = BytesMut::new();
                                qbuf_private = false;
                            } else {
                                inbuf = BytesMut::from(&inbuf[..]);
                            }
                            publish_buffers(&mem, &inbuf, qbuf_private, &out, &conn);
                        }
                    }
                }
            }
        }
    }
    // What this client held is released now (with `inbuf` and `out` when the task ends).
    ClientMemory::set(&mem.out_pending, 0);
    let mut st = shared.lock();
    blocking::unpark(&mut st, id);
    st.engine.unwatch_all(id);
    st.stats.net_input_bytes += net_in;
    st.clients.remove(&id);
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

/// Redis' "big argument" size: a bulk at least this long gets a buffer of its own size.
const BIG_ARG_BYTES: usize = 32 * 1024;

/// Read what the socket has into `inbuf` (growing it by a chunk when short of room): the
/// bytes read (0 if none were ready), None when the peer closed or the read failed.
fn read_some(socket: &tokio::net::tcp::OwnedReadHalf, inbuf: &mut BytesMut, net_in: &mut u64) -> Option<usize> {
    if inbuf.capacity() - inbuf.len() < READ_CHUNK_BYTES / 2 {
        inbuf.reserve(READ_CHUNK_BYTES);
    }
    match socket.try_read_buf(inbuf) {
        Ok(0) => None,
        Ok(n) => {
            *net_in += n as u64;
            Some(n)
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Some(0),
        Err(_) => None,
    }
}

/// Publish the sizes CLIENT LIST reports.
fn publish_buffers(mem: &ClientMemory, inbuf: &BytesMut, private: bool, out: &BytesMut, conn: &Conn) {
    ClientMemory::set(&mem.qbuf, inbuf.len());
    ClientMemory::set(&mem.qbuf_free, if private || !inbuf.is_empty() { inbuf.capacity() - inbuf.len() } else { 0 });
    ClientMemory::set(&mem.out_pending, out.len());
    ClientMemory::set(&mem.out_capacity, out.capacity());
    ClientMemory::set(&mem.multi_mem, conn.multi.as_ref().map_or(0, |m| m.argv_bytes));
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
