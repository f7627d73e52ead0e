//! The tokio driver: one task per connection moving bytes between a [`Transport`] and a
//! [`Session`], and waiting for whatever the session says comes next (input, a parked
//! command's release, the busy gate), while watching CLIENT KILL and shutdown.
//!
//! The driver knows nothing of commands: it reads into the session's query buffer, asks it to
//! run a batch, writes its output buffer, and follows [`Next`]. While it waits (for input, a
//! parked command, the busy gate), it also writes what other tasks push to the client
//! (`push.rs`).

use super::session::{Batch, Copies, Next, OutputWatch, Park, Released, Session, QBUF_IDLE_SHRINK, QBUF_SHRINK_RETRY};
use super::transport::Transport;
use bytes::Buf;
use rill_resp::OutputBuffer;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use tokio::sync::{watch, Notify};
use tokio::time::{Instant, Sleep};

/// What ends a connection from outside, whatever it is doing.
///
/// The wait for input, where a connection spends its idle life and every request of a client
/// with one request in flight begins, watches neither: a kill and a shutdown also wake the
/// session's push signal (`ClientInfo::kill_now`, `shutdown::finish`), and the wait looks at
/// [`Signals::ended`] when that signal fires. One waiter registered per wait instead of three
/// (each a lock of its `Notify` to register and another to deregister): 860 of the 8 170
/// user-space instructions of a GET with one request in flight (`bench/p1.sh --instructions`).
#[derive(Debug)]
pub struct Signals {
    /// CLIENT KILL.
    pub kill: Arc<Notify>,
    /// Server shutdown.
    pub shutdown: watch::Receiver<bool>,
}

impl Signals {
    /// Whether the connection was killed (taking the kill's wake-up) or the server shuts down.
    fn ended(&self) -> bool {
        *self.shutdown.borrow() || super::feed::notified_now(&self.kill)
    }
}

/// Serve the client until it quits, is killed, or the server shuts down.
///
/// An `async move` block rather than an `async fn`: the arguments are stored in the future
/// once (an `async fn` keeps a second copy of each, a session's worth per connection).
#[allow(clippy::manual_async_fn)]
pub fn drive<T: Transport>(mut t: T, mut s: Session, mut sig: Signals) -> impl std::future::Future<Output = ()> {
    async move {
        serve(&mut t, &mut s, &mut sig).await;
        s.finish().await;
    }
}

async fn serve<T: Transport>(t: &mut T, s: &mut Session, sig: &mut Signals) {
    loop {
        let mut batch: Batch = s.run_batch();
        if matches!(batch.next, Next::Drop) || !s.settle(&mut batch).await {
            return;
        }
        if matches!(batch.next, Next::Close | Next::Replica(_)) {
            // Everything goes out first (a replica's feed then owns the transport).
            if !s.out.is_empty() && !write_out(t, &mut s.out, &mut s.watch, sig).await {
                return;
            }
            if s.flush_owed && !flush(t, &s.watch, sig, Instant::now()).await {
                return;
            }
            s.flush_owed = false;
            s.written();
        } else if output_pending(s) {
            // What the transport does not take now is written while the client waits for
            // whatever comes next, its input read meanwhile, as Redis does: a client that
            // writes its whole pipeline before reading would otherwise wait for the server
            // while the server waited for it.
            if !write_pending_now(t, s) {
                return;
            }
            if matches!(batch.next, Next::Read) && output_pending(s) {
                match Box::pin(write_reading(t, s, sig)).await {
                    Output::Close => return,
                    Output::Written => {}
                    Output::Waiting => continue,
                }
            }
        }
        let carry_on = match batch.next {
            Next::Close | Next::Drop => false,
            // Every wait but the one for input is boxed: a task's future is as big as its
            // biggest wait, and a connection spends its idle life in `read`.
            Next::Wait(mut park) => Box::pin(parked(t, s, &mut park, sig)).await,
            Next::Read => read(t, s, sig).await,
            Next::Busy => Box::pin(busy(t, s, sig)).await,
            Next::Held(wait) => Box::pin(held(t, s, wait, sig)).await,
            Next::Copies(w) => Box::pin(copies(t, s, &w, sig)).await,
            Next::Freed(rx, reply) => {
                let done = Box::pin(wait_reading(t, s, sig, async move {
                    let _ = rx.await;
                }))
                .await;
                if done {
                    s.freed(&reply);
                }
                done
            }
            Next::Shutdown(mut cancelled) => {
                // The exit closes the connection (`sig.shutdown`): no reply, as from Redis.
                let done = Box::pin(wait_reading(t, s, sig, async move {
                    let _ = cancelled.changed().await;
                }))
                .await;
                if done {
                    s.shutdown_cancelled();
                }
                done
            }
            Next::Replica(feed) => {
                let shared = s.shared().clone();
                Box::pin(super::feed::run(t, &shared, s.client_id(), feed, sig)).await;
                false
            }
        };
        if !carry_on {
            return;
        }
    }
}

/// Wait for a parked command's release, reading any input that arrives meanwhile (it waits in
/// the query buffer, bounded by the query buffer limit, checked when the next batch runs).
/// False if the connection must close.
async fn parked<T: Transport>(t: &mut T, s: &mut Session, park: &mut Park, sig: &mut Signals) -> bool {
    let pushed = s.push_signal();
    loop {
        let (deadline, wake_up) = (park.deadline, park.wake_up());
        let recheck = limit_recheck(s);
        tokio::select! {
            r = &mut park.rx => {
                // Frames pushed before the release go before the reply (a subscriber's; the
                // release of one never comes as `Written`: it gets no direct delivery).
                s.take_pushed();
                match s.released(r).await {
                    Released::Close => return false,
                    Released::Written(mut rest) => {
                        if rest.is_empty() {
                            return true;
                        }
                        if !s.out.is_empty() {
                            // Not so (direct delivery goes to a client parked with its output
                            // written), but nothing may come before what was written.
                            return write_out(t, &mut rest, &mut s.watch, sig).await;
                        }
                        // The tail waits as any output does (written while input is read): a
                        // client writing more requests before it reads would otherwise wait
                        // for the server while the server waited for it.
                        if let Some(spare) = s.out.take_spare() {
                            if let Some(spare) = rest.give_spare(spare) {
                                super::spare::put(spare);
                            }
                        }
                        s.out = rest;
                        return write_pending_now(t, s);
                    }
                    Released::Reply => break,
                    Released::Last => {
                        let _ = write_out(t, &mut s.out, &mut s.watch, sig).await;
                        return false;
                    }
                }
            }
            () = sleep_until_opt(deadline) => {
                // The lock is a running script's while the gate is not open.
                s.shared().clone().busy.opened().await;
                if s.park_timed_out() {
                    break;
                }
            }
            () = sleep_until_opt(wake_up) => {
                s.shared().clone().busy.opened().await;
                s.park_wake(park);
            }
            p = io_ready(t, &mut s.out, s.flush_owed, true) => {
                if on_progress(t, s, p).is_none() {
                    return false;
                }
            }
            // A parked client that may be pushed to got no direct delivery (`session`), so
            // this task is the only writer.
            () = pushed.notified() => {
                if !write_pushed(t, s) {
                    return false;
                }
            }
            () = sleep_until_opt(recheck) => {
                if s.watch.over_limit() {
                    return false;
                }
            }
            () = sig.kill.notified() => return false,
            _ = sig.shutdown.changed() => return false,
        }
    }
    // The reply waits with the rest for the next batch's write, if the transport does not
    // take it now.
    write_pending_now(t, s)
}

/// Wait until a `WAIT` / `WAITAOF` has its copies (a replica's ACK wakes it; the local log's
/// fsync is looked at every few milliseconds) or its deadline passes, reading any input that
/// arrives meanwhile. A wait ended by force (the server became a replica) writes its reply and
/// closes. False if the connection must close.
async fn copies<T: Transport>(
    t: &mut T,
    s: &mut Session,
    w: &crate::replication::primary::CopiesWait,
    sig: &mut Signals,
) -> bool {
    let acked = s.shared().lock().replication.acked.clone();
    let deadline = Session::copies_deadline(w);
    let mut timed_out = false;
    loop {
        let notified = acked.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        match s.answer_copies(w, timed_out) {
            Copies::Waiting => {}
            Copies::Answered => return true,
            Copies::Close => {
                let _ = write_out(t, &mut s.out, &mut s.watch, sig).await;
                return false;
            }
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
            () = sleep_until_opt(deadline) => timed_out = true,
            p = io_ready(t, &mut s.out, s.flush_owed, true) => {
                if on_progress(t, s, p).is_none() {
                    return false;
                }
            }
            () = sig.kill.notified() => return false,
            _ = sig.shutdown.changed() => return false,
        }
    }
}

/// Wait for input. False if the connection must close.
async fn read<T: Transport>(t: &mut T, s: &mut Session, sig: &mut Signals) -> bool {
    s.prepare_read();
    // Fast path: input already waiting (a pipelining client) is read without arming the idle
    // and shrink timers of the wait below, which cost a timer registration per batch (about
    // 10 % of pipelined XADD throughput). `consume_budget` keeps such a client from starving
    // the others.
    match read_some(t, s) {
        None => return false,
        Some(0) => {}
        Some(_) => {
            tokio::task::consume_budget().await;
            return true;
        }
    }
    s.release_idle_buffers();
    // The two timers are boxed, and made only when armed (`timeout` set; a query buffer to
    // shrink): most connections wait here with neither.
    let mut idle = s.idle_deadline().map(|at| Box::pin(tokio::time::sleep_until(at)));
    // When the query buffer is given back: QBUF_IDLE_SHRINK after the wait began (the clock
    // is read only when there is something to give back).
    let mut shrink_at: Option<Instant> = None;
    let mut shrink: Option<Pin<Box<Sleep>>> = None;
    let pushed = s.push_signal();
    loop {
        if !s.may_shrink() {
            shrink = None;
        } else if shrink.is_none() {
            let at = *shrink_at.get_or_insert_with(|| Instant::now() + QBUF_IDLE_SHRINK);
            shrink = Some(Box::pin(tokio::time::sleep_until(at)));
        }
        // Biased: the branches in order, without drawing a random number per wait.
        tokio::select! {
            biased;
            () = pushed.notified() => {
                // A kill or a shutdown comes this way too (see `Signals`).
                if sig.ended() {
                    return false;
                }
                if !write_pushed(t, s) {
                    return false;
                }
                // What the transport did not take is written while input is read; input ends
                // this wait (the driver runs it with the output still pending).
                if output_pending(s) {
                    // Boxed: only a subscriber is pushed to, and this wait is where every idle
                    // connection's future sits.
                    match Box::pin(write_reading(t, s, sig)).await {
                        Output::Close => return false,
                        Output::Waiting => return true,
                        Output::Written => {}
                    }
                }
            }
            r = readable(t) => {
                if r.is_err() {
                    return false;
                }
                match read_some(t, s) {
                    None => return false,
                    Some(0) => continue,
                    Some(_) => return true,
                }
            }
            () = armed(&mut idle) => {
                tracing::debug!("Closing idle client");
                return false;
            }
            () = armed(&mut shrink) => {
                shrink = None;
                if !s.shrink_idle_input() {
                    shrink_at = Some(Instant::now() + QBUF_SHRINK_RETRY);
                }
            }
        }
    }
}

/// Write what the transport takes now of what other tasks pushed; the rest waits with the
/// output, written while the wait goes on reading input (a subscriber that writes commands
/// while it is not reading would otherwise wait for the server while the server waited for
/// it). False if the connection must close.
fn write_pushed<T: Transport>(t: &mut T, s: &mut Session) -> bool {
    !s.take_pushed() || write_pending_now(t, s)
}

/// Wait for the busy gate to open (or, with no request held for it, for a script below the
/// threshold to end or pass it), reading input meanwhile up to the query buffer limit. False
/// if the connection must close.
async fn busy<T: Transport>(t: &mut T, s: &mut Session, sig: &mut Signals) -> bool {
    let shared = s.shared().clone();
    // What the script published reaches its subscribers while it still runs.
    if s.waits_for_open() {
        wait_reading(t, s, sig, shared.busy.opened()).await
    } else if shared.busy.is_open() && !shared.busy.script_started() {
        // No script: another batch held the lock longer than a few yields of the thread. Let
        // the runtime's other tasks run, then try again (see `lock_contended`).
        tokio::task::yield_now().await;
        true
    } else {
        wait_reading(t, s, sig, shared.busy.settled()).await
    }
}

/// Wait until the pause holding the next request changes or ends, reading input meanwhile up
/// to the query buffer limit. False if the connection must close.
async fn held<T: Transport>(t: &mut T, s: &mut Session, mut wait: crate::pause::HeldWait, sig: &mut Signals) -> bool {
    let until = wait.until_ms.map(crate::conn::session::instant_at_ms);
    // A change (UNPAUSE, a new pause, the failover's end), or its end: look again.
    let over = async move {
        tokio::select! {
            _ = wait.changed.changed() => {}
            () = sleep_until_opt(until) => {}
        }
    };
    wait_reading(t, s, sig, over).await
}

/// Until `done`, read input up to the query buffer limit and write what is pushed to this
/// client. True once `done` happened, false if the connection must close.
async fn wait_reading<T: Transport>(
    t: &mut T,
    s: &mut Session,
    sig: &mut Signals,
    done: impl std::future::Future<Output = ()>,
) -> bool {
    let pushed = s.push_signal();
    tokio::pin!(done);
    loop {
        let full = s.input_full();
        let recheck = limit_recheck(s);
        tokio::select! {
            () = &mut done => return true,
            () = pushed.notified() => {
                if !write_pushed(t, s) {
                    return false;
                }
            }
            () = sleep_until_opt(recheck) => {
                if s.watch.over_limit() {
                    return false;
                }
            }
            p = io_ready(t, &mut s.out, s.flush_owed, !full), if !full || output_pending(s) => {
                if on_progress(t, s, p).is_none() {
                    return false;
                }
            }
            () = sig.kill.notified() => return false,
            _ = sig.shutdown.changed() => return false,
        }
    }
}

/// Write what the transport takes of `buf` now, without waiting. False on a write error.
fn write_now<T: Transport>(t: &mut T, buf: &mut OutputBuffer) -> bool {
    while !buf.is_empty() {
        match buf.with_slices(|slices| t.try_write_vectored(slices)) {
            Ok(0) => return false,
            Ok(n) => buf.advance(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => return false,
        }
    }
    true
}

/// Whether a buffering transport pushed out what it holds without waiting.
fn flushed_now<T: Transport>(t: &mut T) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    matches!(t.poll_flush(&mut cx), std::task::Poll::Ready(Ok(())))
}

/// How [`write_reading`] ended.
enum Output {
    /// All written (and flushed).
    Written,
    /// Some of it still waits; input came first.
    Waiting,
    /// The connection must close.
    Close,
}

/// What the transport took of the output, or input, whichever came first.
enum Progress {
    Wrote(io::Result<usize>),
    Flushed(io::Result<()>),
    Readable(io::Result<()>),
}

/// Output the transport did not take at once, of a client that may send more requests. As
/// Redis, which keeps reading a client whose replies wait and runs what it sends, wait for
/// whichever comes first: the transport taking the rest, or input. A client that writes its
/// whole pipeline before it reads a reply (redis-py's pipelines do) would otherwise wait for
/// the server while the server waited for it. The output grows until the client reads it or a
/// limit closes the client (its class's output limit, `maxmemory-clients`), as in Redis;
/// `timeout` counts from the last byte written or read.
async fn write_reading<T: Transport>(t: &mut T, s: &mut Session, sig: &mut Signals) -> Output {
    let mut last_progress = Instant::now();
    loop {
        if !output_pending(s) {
            return Output::Written;
        }
        if s.watch.over_limit() {
            return Output::Close;
        }
        let soft = s.watch.soft_deadline();
        let idle = s.watch.idle_deadline(last_progress);
        let full = s.input_full();
        let progress = tokio::select! {
            p = io_ready(t, &mut s.out, s.flush_owed, !full) => p,
            () = sig.kill.notified() => return Output::Close,
            _ = sig.shutdown.changed() => return Output::Close,
            () = sleep_until_opt(idle) => {
                tracing::debug!("Closing idle client");
                return Output::Close;
            }
            () = sleep_until_opt(soft) => continue,
            () = tokio::time::sleep(PUSH_LIMIT_RECHECK) => continue,
        };
        last_progress = Instant::now();
        match on_progress(t, s, progress) {
            None => return Output::Close,
            Some(true) => return Output::Waiting,
            Some(false) => {}
        }
    }
}

/// Whether output waits to be written (or pushed out of a buffering transport).
fn output_pending(s: &Session) -> bool {
    !s.out.is_empty() || s.flush_owed
}

/// Write what the transport takes of the pending output now, without waiting, and say so
/// (CLIENT LIST); once all is out, the output is done with (`Session::written`). False on a
/// write error.
fn write_pending_now<T: Transport>(t: &mut T, s: &mut Session) -> bool {
    let produced = s.out.len();
    if !write_now(t, &mut s.out) {
        return false;
    }
    if T::BUFFERS_WRITES && s.out.len() < produced {
        s.flush_owed = true;
    }
    s.watch.pending(&s.out, produced - s.out.len());
    if s.out.is_empty() && (!s.flush_owed || flushed_now(t)) {
        s.flush_owed = false;
        s.written();
    }
    true
}

/// Ready when the transport took some of `out` (or, with nothing left in `out` but a flush
/// owed, pushed out what it buffered), or, if `read`, when it has input.
async fn io_ready<T: Transport>(t: &mut T, out: &mut OutputBuffer, flush_owed: bool, read: bool) -> Progress {
    poll_fn(|cx| {
        if !out.is_empty() {
            if let Poll::Ready(r) = out.with_slices(|slices| t.poll_write_vectored(cx, slices)) {
                return Poll::Ready(Progress::Wrote(r));
            }
        } else if flush_owed {
            if let Poll::Ready(r) = t.poll_flush(cx) {
                return Poll::Ready(Progress::Flushed(r));
            }
        }
        if read {
            if let Poll::Ready(r) = t.poll_read_ready(cx) {
                return Poll::Ready(Progress::Readable(r));
            }
        }
        Poll::Pending
    })
    .await
}

/// Act on what [`io_ready`] found. None: the connection must close; otherwise whether input
/// was read.
fn on_progress<T: Transport>(t: &mut T, s: &mut Session, progress: Progress) -> Option<bool> {
    match progress {
        Progress::Wrote(Ok(n)) if n > 0 => {
            s.out.advance(n);
            if T::BUFFERS_WRITES {
                s.flush_owed = true;
            }
            write_pending_now(t, s).then_some(false)
        }
        Progress::Flushed(Ok(())) => {
            s.flush_owed = false;
            if s.out.is_empty() {
                s.written();
            }
            Some(false)
        }
        Progress::Readable(Ok(())) => read_some(t, s).map(|n| n > 0),
        Progress::Wrote(_) | Progress::Flushed(Err(_)) | Progress::Readable(Err(_)) => None,
    }
}

/// Write all of `buf`, consuming it. False if the connection must close instead: a write
/// error, or one of the [`OutputWatch`] conditions, CLIENT KILL or shutdown while the
/// transport would not take more.
async fn write_out<T: Transport>(
    t: &mut T,
    buf: &mut OutputBuffer,
    watch: &mut OutputWatch,
    sig: &mut Signals,
) -> bool {
    let produced = buf.len();
    // What the transport takes at once, here; the waits for the rest are boxed (a full
    // socket is rare), which keeps every connection's future small.
    if !write_now(t, buf) {
        return false;
    }
    watch.pending(buf, produced - buf.len());
    if buf.is_empty() {
        return !T::BUFFERS_WRITES || flush(t, watch, sig, Instant::now()).await;
    }
    Box::pin(write_rest(t, buf, watch, sig, produced)).await
}

/// [`write_out`] once the transport stopped taking bytes: wait until it takes the rest.
async fn write_rest<T: Transport>(
    t: &mut T,
    buf: &mut OutputBuffer,
    watch: &mut OutputWatch,
    sig: &mut Signals,
    produced: usize,
) -> bool {
    let mut last_progress = Instant::now();
    loop {
        while !buf.is_empty() {
            match buf.with_slices(|slices| t.try_write_vectored(slices)) {
                Ok(0) => return false,
                Ok(n) => {
                    buf.advance(n);
                    last_progress = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return false,
            }
        }
        watch.pending(buf, produced - buf.len());
        if buf.is_empty() {
            return !T::BUFFERS_WRITES || flush(t, watch, sig, last_progress).await;
        }
        // Stuck on a full transport: the soft limit keeps counting while nothing is written.
        if watch.over_limit() {
            return false;
        }
        let soft = watch.soft_deadline();
        let idle = watch.idle_deadline(last_progress);
        tokio::select! {
            r = poll_fn(|cx| buf.with_slices(|slices| t.poll_write_vectored(cx, slices))) => match r {
                Ok(n) if n > 0 => {
                    buf.advance(n);
                    last_progress = Instant::now();
                }
                _ => return false,
            },
            () = sig.kill.notified() => return false,
            _ = sig.shutdown.changed() => return false,
            () = sleep_until_opt(idle) => {
                tracing::debug!("Closing idle client");
                return false;
            }
            () = sleep_until_opt(soft) => {}
            () = tokio::time::sleep(PUSH_LIMIT_RECHECK) => {}
        }
    }
}

/// While output waits for the client to read, when to look at its output limits again (the
/// pushes queued behind it count, and none may come to do it); never while nothing waits.
fn limit_recheck(s: &Session) -> Option<Instant> {
    output_pending(s).then(|| Instant::now() + PUSH_LIMIT_RECHECK)
}

/// How often a stuck write looks at the output limits again: pushes queue up behind it
/// (a subscriber that stopped reading) without waking it, and none may come to do it.
const PUSH_LIMIT_RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Push out what a buffering transport holds, watching what [`write_out`] watches.
async fn flush<T: Transport>(t: &mut T, watch: &OutputWatch, sig: &mut Signals, last_progress: Instant) -> bool {
    let idle = watch.idle_deadline(last_progress);
    tokio::select! {
        r = poll_fn(|cx| t.poll_flush(cx)) => r.is_ok(),
        () = sig.kill.notified() => false,
        _ = sig.shutdown.changed() => false,
        () = sleep_until_opt(idle) => {
            tracing::debug!("Closing idle client");
            false
        }
    }
}

/// Read what the transport has into the session's query buffer: the bytes read (0 if none
/// were ready), None when the peer closed or the read failed.
fn read_some<T: Transport>(t: &mut T, s: &mut Session) -> Option<usize> {
    match t.try_read(s.read_buffer()) {
        Ok(0) => None,
        Ok(n) => {
            s.received(n);
            Some(n)
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Some(0),
        Err(_) => None,
    }
}

/// Ready when a read may make progress.
async fn readable<T: Transport>(t: &mut T) -> io::Result<()> {
    poll_fn(|cx| t.poll_read_ready(cx)).await
}

/// Until the timer fires, or forever when there is none.
async fn armed(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(t) => t.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Sleep until `at`, or forever.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
