//! Push mode: output a connection gets without asking for it (pub/sub messages now; MONITOR,
//! keyspace events and a primary's feed to a replica next).
//!
//! ```text
//!  another task, under the state lock           the client's own task (driver + session)
//!  ─────────────────────────────────────        ─────────────────────────────────────────
//!  push_to(st, id, frame) ──► PushSender ─┐     batch (under the lock): drains the queue
//!    checks the client's output limits    │       into `out` before its first request and
//!    (class: pubsub, replica, normal) and ├─►     after each reply, so pushes keep their
//!    closes it past them                  │       place among the replies
//!                                 queue of │     driver (no lock): woken by `ready`, drains
//!                                 encoded  └──►   the queue into `out` and writes it, while
//!                                 frames          it also reads requests
//! ```
//!
//! A frame is bytes already encoded for the client's protocol (RESP2 array or RESP3 `>`
//! push, or a replication stream's raw bytes), handed over whole: frames never interleave,
//! and come out in the order they were pushed. Pushing never blocks and never writes to the
//! socket, so the pusher holds the state lock for a queue append only; the write happens in
//! the client's task, outside every lock. The queue is bounded by the client's
//! `client-output-buffer-limit` class, counted with what the client's output still holds:
//! past the hard limit, or past the soft one for longer than its seconds, the client is
//! closed (`client_output_buffer_limit_disconnections`), as Redis closes it.
//!
//! A push to the client whose command is running (a PUBLISH to a channel it is subscribed to)
//! lands after that command's reply, as in Redis (whose `pending_push_messages` defers it):
//! the batch drains the queue only once the reply is in `out`, so inside EXEC the messages
//! follow the whole EXEC reply.

use crate::client_limits::{self, ClassLimit, OutputGuard};
use crate::state::State;
use bytes::Bytes;
use rill_resp::{OutputBuffer, ReplyTarget};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The wake-up of a client's task: frames queued, a kill, a shutdown. One task waits on it, one
/// wait at a time, so it is a flag and the waiting task's waker (`atomic-waker`) rather than a
/// `Notify`: a wait registers with a compare of the waker it already holds, and neither takes
/// nor releases a lock (a `Notify` locks its waiter list to register and again to deregister,
/// on every wait for input of every connection).
#[derive(Debug, Default)]
pub struct Signal {
    set: std::sync::atomic::AtomicBool,
    waker: atomic_waker::AtomicWaker,
}

impl Signal {
    /// Not notified, no task waiting.
    pub const fn new() -> Signal {
        Signal { set: std::sync::atomic::AtomicBool::new(false), waker: atomic_waker::AtomicWaker::new() }
    }

    /// Wake the waiting task, or the next wait if none waits now.
    pub fn notify(&self) {
        self.set.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Until [`Signal::notify`] was called since the last wait that ended this way. A wait
    /// dropped before it ended keeps the notification for the next.
    pub fn notified(&self) -> impl std::future::Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.set.swap(false, Ordering::AcqRel) {
                return std::task::Poll::Ready(());
            }
            self.waker.register(cx.waker());
            if self.set.swap(false, Ordering::AcqRel) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
    }
}

/// The queue both halves share.
#[derive(Debug, Default)]
struct Inner {
    queue: Mutex<Queue>,
    /// Bytes in `queue`, readable without its lock (a batch looks at it after every request).
    queued_bytes: AtomicU64,
    /// Wakes the driver when a frame arrives.
    ready: Arc<Signal>,
}

#[derive(Debug, Default)]
struct Queue {
    frames: VecDeque<Bytes>,
    /// Since when the client's output has been over its soft limit, as pushes found it.
    guard: OutputGuard,
}

/// The sending half, kept in the client's record (`ClientInfo::push`) for other tasks.
#[derive(Debug, Clone, Default)]
pub struct PushSender(Arc<Inner>);

/// The receiving half, the client's session's.
#[derive(Debug)]
pub struct PushReceiver {
    inner: Arc<Inner>,
    /// Bytes moved into the output since [`PushReceiver::take_drained`] last asked: they were
    /// counted as output when pushed, so the batch does not count them again.
    drained: u64,
}

/// A connected pair.
pub fn channel() -> (PushSender, PushReceiver) {
    let inner = Arc::new(Inner::default());
    (PushSender(inner.clone()), PushReceiver { inner, drained: 0 })
}

impl PushSender {
    /// Bytes queued and not yet taken by the client's task (CLIENT LIST `omem`).
    pub fn queued_bytes(&self) -> u64 {
        self.0.queued_bytes.load(Ordering::Relaxed)
    }

    /// Queue `frame` and wake the client's task; returns the bytes now queued.
    fn send(&self, frame: Bytes) -> u64 {
        let n = frame.len() as u64;
        let mut q = self.0.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.frames.push_back(frame);
        let total = self.0.queued_bytes.fetch_add(n, Ordering::Relaxed) + n;
        drop(q);
        self.0.ready.notify();
        total
    }

    /// Wake the client's task without a frame: it was killed or the server shuts down. Its wait
    /// for input watches only this signal (one waiter to register per wait, not three) and
    /// looks at why when woken ([`crate::conn::Signals`]).
    pub fn wake(&self) {
        self.0.ready.notify();
    }

    /// Whether `pending` bytes of output put the client over `limit` (updating the soft
    /// limit's clock).
    fn over(&self, used: u64, limit: &ClassLimit, now_secs: i64) -> bool {
        let mut q = self.0.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.guard.over_counted(used, limit, true, now_secs)
    }
}

/// What the client's own task may look at of its queue while it is stuck writing: the bytes
/// queued, which count in its output.
#[derive(Debug, Clone)]
pub struct PushProbe(Arc<Inner>);

impl PushProbe {
    /// Bytes queued and not yet taken.
    pub fn queued_bytes(&self) -> u64 {
        self.0.queued_bytes.load(Ordering::Relaxed)
    }
}

impl PushReceiver {
    /// For the output watch of the client's task.
    pub fn probe(&self) -> PushProbe {
        PushProbe(self.inner.clone())
    }

    /// Whether anything is queued (no lock taken).
    pub fn is_empty(&self) -> bool {
        self.inner.queued_bytes.load(Ordering::Relaxed) == 0
    }

    /// Move every queued frame to the end of `out`; returns the bytes moved.
    pub fn drain_into(&mut self, out: &mut OutputBuffer) -> usize {
        if self.is_empty() {
            return 0;
        }
        let mut q = self.inner.queue.lock().unwrap_or_else(|p| p.into_inner());
        let mut moved = 0;
        for frame in q.frames.drain(..) {
            moved += frame.len();
            if frame.len() >= rill_resp::SHARED_PAYLOAD_MIN_BYTES {
                out.payload(&frame);
            } else {
                out.encoded().extend_from_slice(&frame);
            }
        }
        self.inner.queued_bytes.fetch_sub(moved as u64, Ordering::Relaxed);
        self.drained += moved as u64;
        moved
    }

    /// The bytes drained since the last call.
    pub fn take_drained(&mut self) -> u64 {
        std::mem::take(&mut self.drained)
    }

    /// Wake the client's own task (see [`PushSender::wake`]).
    pub fn wake(&self) {
        self.inner.ready.notify();
    }

    /// What the driver waits on for frames (a permit is kept if none was waiting, so a frame
    /// pushed between a drain and the wait is not missed).
    pub fn signal(&self) -> Arc<Signal> {
        self.inner.ready.clone()
    }
}

/// Push `frame` to client `id` if it is connected and not closing. Checks its output limits
/// (its class's, with what its output still holds) and closes it past them, or past
/// `maxmemory-clients` (client eviction, as Redis evicts a client its pushes grew). Returns whether
/// the frame was queued. Its bytes count as the client's output from here (INFO
/// `total_net_output_bytes`, CLIENT LIST `tot-net-out`): a client that only listens has no
/// batch of its own to count them.
pub fn push_to(st: &mut State, id: u64, frame: Bytes, now_secs: i64) -> bool {
    let Some(ci) = st.clients.get_mut(&id) else { return false };
    if ci.killed {
        return false;
    }
    let n = frame.len() as u64;
    ci.net_out += n;
    st.stats.net_output_bytes += n;
    let Some(ci) = st.clients.get(&id) else { return false };
    let queued = ci.push.send(frame);
    let used = ci.mem.counted(queued);
    let held = ci.mem.total() + queued;
    let limit = st.hot.output_limits.of(ci.class());
    if !ci.push.over(used, &limit, now_secs) {
        crate::run::evict_if_alone_over(st, id, held);
        return true;
    }
    st.stats.output_buffer_limit_disconnections += 1;
    let watch = st.engine.watched_by(id);
    let line = crate::cmd::connection::client_line(ci, now_secs * 1000, watch);
    client_limits::log_output_limit_close(&line, true);
    crate::cmd::connection::close_client(st, id);
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::client_limits::{OutputLimits, UNCOUNTED_OUTPUT_BYTES};

    #[test]
    fn frames_come_out_whole_in_order_and_past_its_class_limit_the_client_is_closed() {
        let mut st = State::new(crate::config::Config::default());
        st.hot.output_limits = OutputLimits::parse("normal 0 0 0 slave 0 0 0 pubsub 1000 0 0");
        let peer = crate::conn::Peer { addr: "127.0.0.1:1".into(), laddr: "127.0.0.1:2".into(), fd: -1 };
        let mut client = crate::conn::admit(&mut st, 7, peer, true);
        let frame = |i: usize| Bytes::from(format!("*1\r\n$4\r\n{i:04}\r\n").repeat(100));
        // A normal client: no limit.
        for i in 0..50 {
            assert!(push_to(&mut st, 7, frame(i), 0));
        }
        assert!(!st.clients[&7].killed);
        assert_eq!(st.clients[&7].push.queued_bytes(), 50 * frame(0).len() as u64);
        let mut out = OutputBuffer::default();
        let moved = client.push.drain_into(&mut out);
        assert_eq!((moved, client.push.take_drained()), (50 * frame(0).len(), moved as u64));
        let want: Vec<u8> = (0..50).flat_map(|i| frame(i).to_vec()).collect();
        assert_eq!(out.contiguous(), Some(&want[..]), "whole frames, in order");
        assert!(client.push.is_empty());
        assert_eq!(st.stats.net_output_bytes, want.len() as u64, "counted as output when pushed");

        // Subscribed: the pubsub class, whose hard limit counts beyond the uncounted 16 KiB.
        st.clients.get_mut(&7).unwrap().subs.channels = 1;
        let mut pushed = 0u64;
        while !st.clients[&7].killed {
            assert!(push_to(&mut st, 7, frame(0), 0), "queued until the limit is passed");
            pushed += frame(0).len() as u64;
            assert!(pushed < 100_000, "never closed");
        }
        // Closed by the frame that took it to the limit (16 KiB uncounted, then 1000 bytes).
        let limit = UNCOUNTED_OUTPUT_BYTES + 1000;
        assert!((limit..limit + frame(0).len() as u64).contains(&pushed), "{pushed}");
        assert_eq!(st.stats.output_buffer_limit_disconnections, 1);
        assert!(!push_to(&mut st, 7, frame(0), 0), "a closing client is not pushed to");
        assert!(!push_to(&mut st, 8, frame(0), 0), "nor one that is gone");
    }
}
