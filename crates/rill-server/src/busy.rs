//! The busy gate: what a connection looks at before it takes the state lock for a batch, so
//! that while a long script holds the lock the other clients are answered `-BUSY` at once
//! instead of queueing on the mutex (which would also stall the runtime thread they run on).
//!
//! rill has no scripting yet; the gate's own API ([`BusyGate::close`]) is the only way to close
//! it today, and the tests use it. While it is closed a connection runs its requests without
//! the lock (`session/busy_path.rs`), one at a time in order:
//!
//! * a request the gate can decide alone — a known command with the right arity, from an
//!   authenticated client (or a `no-auth` command), not `protected` (DEBUG, MODULE), and not
//!   flagged `allow-busy` — is refused with Redis' reply, byte for byte: [`BUSY_SCRIPT`], or for
//!   EXEC `-EXECABORT Transaction discarded because of: BUSY ...` (the transaction is
//!   discarded, as Redis discards it). Inside MULTI the refusal dooms the transaction. The
//!   counters it moves (`rejected_calls`, `errorstat_BUSY`, `errorstat_EXECABORT`) and the
//!   watched keys an EXEC drops are applied the next time the connection holds the lock;
//!   nothing can read them before that, since INFO and CLIENT LIST need the lock too.
//! * anything else waits, with every request after it, until the gate opens, and then runs
//!   through dispatch as usual: the `allow-busy` commands (AUTH, HELLO, QUIT, RESET, MULTI,
//!   DISCARD, WATCH, UNWATCH, SHUTDOWN), and the requests whose reply depends on checks that
//!   come before BUSY in Redis' order (unknown command or subcommand, arity, NOAUTH, DEBUG's
//!   protection). They get the same reply Redis gives, later than Redis gives it.
//!
//! Where this differs from Redis, on purpose: Redis runs the `allow-busy` commands between
//! the slices of a running script, and answers the errors above at once. Redis also checks
//! OOM and MISCONF before BUSY; the gate cannot read the memory limit or the log's state
//! without the lock, so while a script runs on a server that is also over `maxmemory` or
//! failing to write its log, a refused command is answered BUSY where Redis says OOM or
//! MISCONF.
//!
//! What a script runner must do (the contract this gate offers):
//!
//! 1. Close the gate while it holds the state lock, once the script has run longer than
//!    `busy-reply-threshold` (Redis' `lua-time-limit`, 5 s by default), and keep the
//!    [`Closed`] value alive until the script ends; dropping it opens the gate and wakes every
//!    connection waiting for it. One runner at a time (scripts run under the lock, so they are
//!    one at a time anyway).
//! 2. Give the lock up now and then while the gate is closed (Redis' periodic event
//!    processing during a script). A connection that read the gate open just before it closed
//!    is waiting on the mutex; when it gets the lock it looks at the gate again, sees it
//!    closed, gives the lock back without running anything and answers as above. Without
//!    such yields those few connections (and their runtime threads) wait for the script's end.
//! 3. Honour SCRIPT KILL and SHUTDOWN NOSAVE while the gate is closed. Neither can be
//!    decided here today: rill's SCRIPT has no KILL subcommand (refused as an unknown
//!    subcommand when the gate opens), and SHUTDOWN, being `allow-busy`, waits for the gate. The runner must add
//!    a kill request to the gate that these two set without the lock and that it polls at
//!    its yields, and teach the busy path above to answer them.
//! 4. Not expect admission, CLIENT LIST or INFO to make progress while it holds the lock:
//!    they take it. A connection that ends while the gate is closed waits for the gate before
//!    it takes the lock to remove its client record.

use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// Redis' reply to a command refused while a script runs past `busy-reply-threshold`.
pub const BUSY_SCRIPT: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// Open (the normal state) or closed while a long script runs. Lives in [`crate::state::Shared`]
/// as `busy`; see the module documentation for the contract.
#[derive(Debug, Default)]
pub struct BusyGate {
    /// Set while a script runs past the threshold.
    closed: AtomicBool,
    /// Woken when the gate opens.
    reopened: Notify,
}

impl BusyGate {
    /// Whether requests may take the state lock. One atomic load: connections ask before
    /// every batch.
    pub fn is_open(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
    }

    /// Close the gate until the returned value is dropped. To be called with the state lock
    /// held (module documentation, point 1).
    pub fn close(&self) -> Closed<'_> {
        self.closed.store(true, Ordering::Release);
        Closed { gate: self }
    }

    /// Wait until the gate is open.
    pub async fn opened(&self) {
        loop {
            let reopened = self.reopened.notified();
            tokio::pin!(reopened);
            // Registered before the check, so an opening between the two is not missed.
            reopened.as_mut().enable();
            if self.is_open() {
                return;
            }
            reopened.await;
        }
    }

    fn open(&self) {
        self.closed.store(false, Ordering::Release);
        self.reopened.notify_waiters();
    }
}

/// The gate held closed; dropping it opens the gate.
#[derive(Debug)]
#[must_use = "the gate opens again when this is dropped"]
pub struct Closed<'a> {
    gate: &'a BusyGate,
}

impl Drop for Closed<'_> {
    fn drop(&mut self) {
        self.gate.open();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_waiter_is_woken_when_the_gate_opens_and_not_before() {
        let gate = std::sync::Arc::new(BusyGate::default());
        assert!(gate.is_open());
        let closed = gate.close();
        assert!(!gate.is_open());
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.opened().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "the gate is still closed");
        drop(closed);
        assert!(gate.is_open());
        let woke = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(matches!(woke, Ok(Ok(()))), "the waiter saw the gate open");
        // Open already: no wait at all.
        tokio::time::timeout(Duration::from_secs(5), gate.opened()).await.unwrap_or_else(|_| panic!("open gate"));
    }
}
