//! Busy polling for a short while after work, before the event loop goes to sleep
//! (`busy-poll-us`, rill's own directive; 0 turns it off).
//!
//! A connection whose peer sends the next request a few microseconds after its reply would
//! otherwise find the server asleep in `epoll_wait`: the peer's `send` then has to wake the
//! server's thread, which on a virtual machine costs an inter-processor interrupt paid on the
//! peer's CPU and a halted virtual CPU to resume. Redis, busier per request, rarely sleeps
//! under load; rill, cheaper per request, slept about 6 000 times a second under
//! `redis-benchmark -P 16 -c 50`, and the client paid for every wake-up.
//!
//! One task keeps a worker thread from parking while polling is likely to pay: it yields, and
//! each yield makes the runtime poll the sockets without blocking. How long it polls after
//! the last work adapts to the gaps between requests, as the kernel's `haltpoll` idle governor
//! does: a gap that polling covered, or that ended soon after polling gave up, doubles the
//! window (up to `busy-poll-us`); a longer gap halves it, down to nothing. So a server whose
//! requests come in bursts or back to back never sleeps between them, while one with sparse
//! requests stops polling after a few of them and costs nothing while idle.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Work reported by connections (a counter, so the poller sees that something happened).
static WORK: AtomicU64 = AtomicU64::new(0);
/// Whether the poller is waiting for work (and must be woken by the next report).
static WAITING: AtomicBool = AtomicBool::new(false);
/// One task waits on it (the poller), so a flag and a waker slot, no lock (`push::Signal`).
static WAKE: crate::push::Signal = crate::push::Signal::new();
/// `busy-poll-us`.
static MAX_US: AtomicU64 = AtomicU64::new(0);

/// The first window after a gap short enough to have been worth polling through.
const START: Duration = Duration::from_micros(10);

/// Set `busy-poll-us` (at start-up and by CONFIG SET).
pub fn set_max_us(us: u64) {
    MAX_US.store(us, Ordering::Relaxed);
    // A poller waiting with the old setting re-reads it.
    WAKE.notify();
}

/// Called by a connection after it handled requests.
pub fn report_work() {
    WORK.fetch_add(1, Ordering::Relaxed);
    if WAITING.load(Ordering::Relaxed) {
        WAITING.store(false, Ordering::Relaxed);
        WAKE.notify();
    }
}

/// The next window after an idle gap of `gap` that started with `window`.
fn adapt(window: Duration, gap: Duration, max: Duration) -> Duration {
    if gap <= max {
        (window * 2).max(START).min(max)
    } else if window / 2 < START {
        Duration::ZERO
    } else {
        window / 2
    }
}

/// Poll after work as described in the module documentation. Runs until the runtime ends.
pub async fn run() {
    let mut window = Duration::ZERO;
    let mut seen = WORK.load(Ordering::Relaxed);
    let mut idle_since = Instant::now();
    loop {
        let max = Duration::from_micros(MAX_US.load(Ordering::Relaxed));
        if window > Duration::ZERO && idle_since.elapsed() < window {
            // Never `sched_yield` here: with another task runnable on this core (a neighbour
            // process, even an idle-priority one), the kernel then runs it until its next tick,
            // and a request arriving meanwhile waited 3-4 ms (fan-out p99 went from 0.2 ms to
            // 3.3 ms with a `SCHED_IDLE` spinner on the server's core). Threads that need this
            // core (the log writer) get it anyway: a woken thread preempts the poller.
            tokio::task::yield_now().await;
        } else {
            // Nothing came while polling (or polling is off): wait for the next work.
            let woken = WAKE.notified();
            WAITING.store(true, Ordering::Relaxed);
            if WORK.load(Ordering::Relaxed) == seen {
                woken.await;
            }
            WAITING.store(false, Ordering::Relaxed);
        }
        let now_seen = WORK.load(Ordering::Relaxed);
        if now_seen != seen {
            seen = now_seen;
            window = adapt(window, idle_since.elapsed(), max);
            idle_since = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_grows_on_short_gaps_and_shrinks_to_nothing_on_long_ones() {
        let max = Duration::from_micros(50);
        let us = Duration::from_micros;
        let mut w = Duration::ZERO;
        for expected in [10, 20, 40, 50, 50] {
            w = adapt(w, us(5), max);
            assert_eq!(w, us(expected));
        }
        // A gap that ended soon after polling gave up still counts as short.
        assert_eq!(adapt(us(20), us(45), max), us(40));
        for expected in [25_000, 12_500, 0, 0] {
            w = adapt(w, us(400), max);
            assert_eq!(w, Duration::from_nanos(expected));
        }
        // Off: never polls.
        assert_eq!(adapt(Duration::ZERO, us(1), Duration::ZERO), Duration::ZERO);
    }
}
