//! One task per connection: read bytes, parse requests, run them under the state lock (one
//! lock per batch of pipelined requests), write the replies in order, park when a command
//! blocks.
//!
//! Requests are parsed one at a time inside the lock, right before each runs, because an AUTH
//! earlier in the same batch changes the limits that apply to the next request (Redis'
//! unauthenticated limits).

use crate::aof::Log;
use crate::blocking::{self, Delivery, Outcome, Waiter};
use crate::dispatch::{self, Action, Conn, ReplyMode};
use crate::state::{now_ms, Shared, State};
use bytes::BytesMut;
use rill_engine::BlockRequest;
use rill_resp::{write_reply, Limits, Protocol, Reply, RequestParser};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};

const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Redis' inline request limit.
const INLINE_MAX_BYTES: usize = 64 * 1024;

/// What the task must do after a batch.
enum Next {
    Read,
    Close,
    Wait(oneshot::Receiver<Outcome>, BlockRequest),
}

/// Write all of `buf` to the socket.
async fn write_all(w: &OwnedWriteHalf, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        match w.try_write(buf) {
            Ok(n) => buf = buf.get(n..).unwrap_or_default(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => w.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
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
        ReplyMode::On => write_reply(out, reply, conn.proto),
        ReplyMode::Off => {}
        ReplyMode::SkipNext => conn.reply_mode = ReplyMode::Skip,
        ReplyMode::Skip => conn.reply_mode = ReplyMode::On,
    }
}

/// Run every complete request in `inbuf` until one blocks or closes the connection.
fn run_batch(
    shared: &Shared,
    st: &mut State,
    conn: &mut Conn,
    parser: &mut RequestParser,
    inbuf: &mut BytesMut,
    out: &mut BytesMut,
    socket: &Arc<OwnedWriteHalf>,
) -> Next {
    let now = now_ms();
    conn.batch_now_ms = now;
    conn.clock = crate::clock::Tick::now();
    let max_bulk = st.hot.max_bulk_len;
    let mut args = Vec::new();
    loop {
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
        if st.clients.get(&conn.id).is_some_and(|c| c.killed) {
            return Next::Close;
        }
    }
}

/// Serve one client until it quits, is killed, or the server shuts down.
pub async fn serve(shared: Arc<Shared>, socket: TcpStream, id: u64, kill: Arc<Notify>, authenticated: bool) {
    let _ = socket.set_nodelay(true);
    let (mut socket, writer) = socket.into_split();
    let writer = Arc::new(writer);
    let mut deliveries: Vec<Delivery> = Vec::new();
    // Output bytes not yet added to this connection's counter; the second also not yet to
    // the server's (replies written directly by another connection were counted by it).
    let mut net_out: u64 = 0;
    let mut net_out_uncounted: u64 = 0;
    let mut conn = Conn {
        id,
        db: 0,
        proto: Protocol::Resp2,
        authenticated,
        multi: None,
        reply_mode: ReplyMode::On,
        clock: crate::clock::Tick::now(),
        last_cmd: "",
        cmds_unpublished: 0,
        net_in_unpublished: 0,
        net_out_unpublished: 0,
        batch_now_ms: now_ms(),
        last_lookup: Default::default(),
    };
    let mut parser = RequestParser::new();
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut out = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut shutdown = shared.shutdown.subscribe();
    let mut net_in: u64 = 0;
    let mut idle_timeout: u64;
    let mut woke: bool;
    let mut pipelined: bool;
    let mut wait_log: Option<(Arc<Log>, u64)>;
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
            let handed_before = st.blocked.handed_to_tasks;
            let appended_before = st.aof.appended;
            st.blocked.deliveries = Some(std::mem::take(&mut deliveries));
            let next = run_batch(&shared, &mut st, &mut conn, &mut parser, &mut inbuf, &mut out, &writer);
            deliveries = st.blocked.deliveries.take().unwrap_or_default();
            st.blocked.deliveries_wait_for_log = false;
            pipelined = conn.cmds_unpublished > 1;
            // Replies wait for this batch's records, and also for any record before them not
            // yet safe: a reader must not see (and act on) a write a crash could still undo.
            // While the log is failing, reads are served at once (writes are refused then).
            wait_log = match &st.aof.log {
                Some(log)
                    if st.aof.appended != appended_before || (!log.failed() && st.aof.appended > log.safe_offset()) =>
                {
                    Some((log.clone(), st.aof.appended))
                }
                _ => None,
            };
            // Parked clients this batch served whose replies are on the way to their tasks
            // (the others' replies are written, or in `deliveries` for this task to write).
            woke = st.blocked.handed_to_tasks != handed_before;
            let n = out.len() as u64;
            st.stats.net_output_bytes += n;
            conn.net_out_unpublished += n;
            let now = conn.batch_now_ms;
            dispatch::publish_client_info(&mut st, &mut conn, now);
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
        if !out.is_empty() {
            if pipelined && !yielded {
                // A pipelined batch's replies go out after the other connections with
                // requests ready have run theirs, as Redis writes every reply once per
                // event-loop turn: a client then finds many replies per wake-up.
                tokio::task::yield_now().await;
            }
            if write_all(&writer, &out).await.is_err() {
                break;
            }
            out.clear();
            if out.capacity() > 4 * 1024 * 1024 {
                out = BytesMut::with_capacity(READ_CHUNK_BYTES);
            }
        }
        match next {
            Next::Close => break,
            Next::Wait(mut rx, request) => {
                let deadline = request
                    .deadline_ms
                    .map(|d| tokio::time::Instant::now() + Duration::from_millis((d - now_ms()).max(0) as u64));
                let to_instant =
                    |ms: i64| tokio::time::Instant::now() + Duration::from_millis((ms - now_ms()).max(0) as u64);
                let mut wake = request.wake_at_ms.map(to_instant);
                let reply = loop {
                    let sleep = async {
                        match deadline {
                            Some(d) => tokio::time::sleep_until(d).await,
                            None => std::future::pending().await,
                        }
                    };
                    // XREADGROUP CLAIM asks to be re-run when its oldest pending entry becomes
                    // claimable, even if no key is signalled.
                    let wake_up = async {
                        match wake {
                            Some(w) if deadline.is_none_or(|d| w < d) => tokio::time::sleep_until(w).await,
                            _ => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        r = &mut rx => match r {
                            Ok(Outcome::Written { rest, len }) => {
                                net_out += len as u64;
                                if !rest.is_empty() && write_all(&writer, &rest).await.is_err() {
                                    break 'outer;
                                }
                                continue 'outer;
                            }
                            Ok(Outcome::Reply(r, offset)) => {
                                let log = if offset > 0 { shared.lock().aof.log.clone() } else { None };
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
                        () = sleep => {
                            let mut st = shared.lock();
                            match blocking::unpark(&mut st, id) {
                                Some(w) => break w.request.timeout_reply,
                                None => continue,
                            }
                        }
                        () = wake_up => {
                            let mut st = shared.lock();
                            blocking::try_serve(&mut st, id, now_ms());
                            blocking::serve_ready(&mut st, now_ms());
                            wake = st.blocked.wake_at(id).map(to_instant);
                            continue;
                        }
                        n = socket.read_buf(&mut inbuf) => match n {
                            Ok(0) | Err(_) => break 'outer,
                            Ok(n) => net_in += n as u64,
                        },
                        () = kill.notified() => break 'outer,
                        _ = shutdown.changed() => break 'outer,
                    }
                };
                emit(&mut out, &mut conn, &reply);
                if !out.is_empty() {
                    net_out += out.len() as u64;
                    net_out_uncounted += out.len() as u64;
                    if write_all(&writer, &out).await.is_err() {
                        break;
                    }
                    out.clear();
                }
            }
            Next::Read => {
                if inbuf.capacity() - inbuf.len() < READ_CHUNK_BYTES / 2 {
                    inbuf.reserve(READ_CHUNK_BYTES);
                }
                let idle = async {
                    if idle_timeout > 0 && conn.multi.is_none() {
                        tokio::time::sleep(Duration::from_secs(idle_timeout)).await
                    } else {
                        std::future::pending().await
                    }
                };
                tokio::select! {
                    n = socket.read_buf(&mut inbuf) => match n {
                        Ok(0) | Err(_) => break,
                        Ok(n) => net_in += n as u64,
                    },
                    () = kill.notified() => break,
                    _ = shutdown.changed() => break,
                    () = idle => break,
                }
            }
        }
    }
    let mut st = shared.lock();
    blocking::unpark(&mut st, id);
    st.engine.watch.unwatch_all(id);
    st.stats.net_input_bytes += net_in;
    st.clients.remove(&id);
}
