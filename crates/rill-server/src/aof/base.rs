//! The base gate: whether a log started by `CONFIG SET appendonly yes` has its base yet.
//!
//! Turning the log on starts an incremental file at once and a rewrite that writes the data
//! already in memory as the log's base (`rewrite.rs`, `Source::Copy`). Until that base is on
//! disk and named by the manifest, the files hold only the writes made since the switch: a
//! crash then would restart from them alone and lose everything before. So a write made in
//! that window is not acknowledged until the base is there:
//!
//! ```text
//!  CONFIG SET appendonly yes ── Pending ──(base written, manifest switched)──► Ready
//!                                  │  ▲
//!                   rewrite failed ▼  │ retried by the cron (once a second)
//!                                Failed: writes get -MISCONF; waiting replies are
//!                                        dropped with their connection (nothing is
//!                                        acknowledged that a crash could take)
//! ```
//!
//! Redis acknowledges such writes at once and loses them in a crash before its rewrite ends;
//! rill's promise under `appendfsync always` is that an acknowledged write survives, so it
//! delays the replies instead (by the time the base takes to write, once per switch).
//!
//! Turning the log off while the gate is closed opens it: with `appendonly no` nothing is
//! promised about a crash, so the replies waiting for the base go out (as Redis' would).

use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::watch;

/// The state of a log's base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// The manifest names a base (or the log was opened from files that did not need one).
    Ready,
    /// The rewrite that writes the base has not finished yet.
    Pending,
    /// The last attempt failed, with this error; the cron tries again.
    Failed(String),
}

/// A log's [`Base`], with waiting for it.
#[derive(Debug)]
pub struct BaseGate {
    state: watch::Sender<Base>,
    /// `state` is `Ready`: read on every write's reply and every command's checks, so an
    /// atomic load rather than the channel's lock.
    open: AtomicBool,
}

impl Default for BaseGate {
    fn default() -> BaseGate {
        BaseGate { state: watch::channel(Base::Ready).0, open: AtomicBool::new(true) }
    }
}

impl BaseGate {
    /// The state now.
    pub fn get(&self) -> Base {
        self.state.borrow().clone()
    }

    /// Whether the base is there (the common case, checked first and cheaply).
    pub fn ready(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Set the state (and wake the waiters when it opens or fails).
    pub fn set(&self, base: Base) {
        self.open.store(base == Base::Ready, Ordering::Release);
        self.state.send_replace(base);
    }

    /// Wait until the base is there: true then; false if an attempt to write it fails first
    /// (the reply must not go out).
    pub async fn wait(&self) -> bool {
        let mut rx = self.state.subscribe();
        loop {
            match &*rx.borrow_and_update() {
                Base::Ready => return true,
                Base::Failed(_) => return false,
                Base::Pending => {}
            }
            if rx.changed().await.is_err() {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_see_the_base_written_or_failed() {
        let gate = std::sync::Arc::new(BaseGate::default());
        assert!(gate.wait().await, "ready at once");
        gate.set(Base::Pending);
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.wait().await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a pending base holds the reply");
        gate.set(Base::Ready);
        assert!(waiter.await.unwrap_or(false));
        gate.set(Base::Pending);
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.wait().await });
        tokio::task::yield_now().await;
        gate.set(Base::Failed("disk full".into()));
        assert!(!waiter.await.unwrap_or(true), "a failed base drops the reply");
    }
}
