//! Shutting down without leaving the replicas behind (docs/REPLICATION.md, "Shutting down").
//!
//! ```text
//!  SHUTDOWN / SIGTERM / SIGINT ─► start: every replica acknowledged master_repl_offset
//!                                 (or NOW, or shutdown-timeout 0)? ──yes──► Finishing
//!                                   │ no
//!                                   ▼
//!                                 Waiting: writes paused (pause.rs, Purpose::Shutdown),
//!                                 REPLCONF GETACK * to the replicas; the controller (run.rs)
//!                                 looks every few ms ──caught up or time out──► Finishing
//!  Finishing: every command held (ALL) ─► finish: the snapshot (if due), then the log closed,
//!             the connections closed (a SHUTDOWN caller gets no reply), exit
//!  SHUTDOWN ABORT while Waiting, or a failed save without FORCE ─► cancel: the pause ends,
//!             each SHUTDOWN caller gets `-ERR Errors trying to SHUTDOWN. Check logs.`
//! ```
//!
//! The SHUTDOWN caller stays blocked (INFO `blocked_clients`, CLIENT LIST flag `b`) until the
//! process ends or the shutdown is cancelled. The state is in [`State::shutdown`]; the steps
//! that touch files (the final snapshot, closing the log) run in [`finish`], from the task in
//! `run.rs` that also receives the signals.

use crate::pause::{Actions, Purpose};
use crate::replication::primary::LinkState;
use crate::state::{now_ms, Shared, State};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::{watch, Notify};

/// What SHUTDOWN (or a signal) asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    /// `SAVE`: save a snapshot even without save points.
    pub save: bool,
    /// `NOSAVE`: no snapshot even with save points.
    pub nosave: bool,
    /// `NOW`: do not wait for the replicas.
    pub now: bool,
    /// `FORCE`: exit even if the snapshot cannot be written.
    pub force: bool,
}

/// Where a shutdown stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    /// No shutdown in progress.
    #[default]
    Idle,
    /// Writes paused until every replica acknowledged the whole stream, or `until_ms`.
    Waiting {
        /// When the wait ends anyway, Unix ms.
        until_ms: i64,
    },
    /// Decided: every command held until the process exits (or a failed save cancels it).
    Finishing,
}

/// The shutdown in progress, if any (in `State`).
#[derive(Debug)]
pub struct Shutdown {
    phase: Phase,
    flags: Flags,
    /// Started by a signal (a second SIGINT then exits at once, as in Redis).
    by_signal: bool,
    /// Connections blocked in SHUTDOWN (INFO `blocked_clients`).
    pub blocked: BTreeSet<u64>,
    /// Bumped when a shutdown is cancelled: the blocked callers get their error.
    cancelled: watch::Sender<u64>,
    /// Wakes the task that finishes the shutdown (`run.rs`).
    wake: Arc<Notify>,
}

impl Default for Shutdown {
    fn default() -> Shutdown {
        Shutdown {
            phase: Phase::Idle,
            flags: Flags::default(),
            by_signal: false,
            blocked: BTreeSet::new(),
            cancelled: watch::channel(0).0,
            wake: Arc::new(Notify::new()),
        }
    }
}

impl Shutdown {
    /// Whether a shutdown is in progress.
    pub fn in_progress(&self) -> bool {
        self.phase != Phase::Idle
    }

    /// Whether the shutdown in progress was started by a signal.
    pub fn by_signal(&self) -> bool {
        self.in_progress() && self.by_signal
    }

    /// INFO `shutdown_in_milliseconds`: what is left of the wait for the replicas, while it lasts.
    pub fn remaining_ms(&self, now_ms: i64) -> Option<i64> {
        match self.phase {
            Phase::Waiting { until_ms } => Some(until_ms - now_ms),
            _ => None,
        }
    }

    /// What a SHUTDOWN caller waits on: a change means the shutdown was cancelled.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.cancelled.subscribe()
    }

    /// What the finishing task waits on.
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }
}

/// Start a shutdown: wait for lagging replicas with writes paused, or go straight to finishing.
/// False if one is in progress already (the caller just waits for it).
pub fn start(st: &mut State, mut flags: Flags, by_signal: bool, now_ms: i64) -> bool {
    if st.shutdown.in_progress() {
        return false;
    }
    // Never a snapshot of half-loaded data.
    if st.persist.loading {
        flags.save = false;
        flags.nosave = true;
    }
    st.shutdown.flags = flags;
    st.shutdown.by_signal = by_signal;
    tracing::warn!("User requested shutdown...");
    let timeout_s = st.config.get_i64("shutdown-timeout");
    if !flags.now && timeout_s != 0 && !replicas_caught_up(st) {
        st.shutdown.phase = Phase::Waiting { until_ms: now_ms.saturating_add(timeout_s.saturating_mul(1000)) };
        // Ask for ACKs now rather than at the replicas' next second.
        st.request_replica_acks(now_ms);
        let expiry = st.pause.pause(Purpose::Shutdown, i64::MAX, Actions::WRITE_SET, now_ms);
        st.engine.pause_expiry(expiry);
        tracing::info!("Waiting for replicas before shutting down.");
    } else {
        finishing(st, now_ms);
    }
    st.shutdown.wake.notify_one();
    true
}

/// Whether every attached replica acknowledged the whole stream (none attached: yes).
pub fn replicas_caught_up(st: &State) -> bool {
    let offset = st.replication.offset();
    st.replication.replicas.values().all(|l| l.ack_offset == offset)
}

/// From the finishing task: whether the shutdown is to be finished now (the replicas caught
/// up, or the wait timed out); it then holds every command until the process exits.
pub fn due(st: &mut State, now_ms: i64) -> bool {
    match st.shutdown.phase {
        Phase::Idle => false,
        Phase::Finishing => true,
        Phase::Waiting { until_ms } => {
            if now_ms >= until_ms || replicas_caught_up(st) {
                finishing(st, now_ms);
                true
            } else {
                false
            }
        }
    }
}

/// Hold everything: nothing may run between the decision and the exit.
fn finishing(st: &mut State, now_ms: i64) {
    st.shutdown.phase = Phase::Finishing;
    let expiry = st.pause.pause(Purpose::Shutdown, i64::MAX, Actions::ALL_SET, now_ms);
    st.engine.pause_expiry(expiry);
}

/// `SHUTDOWN ABORT`: cancel the shutdown in progress. False if there is none.
pub fn abort(st: &mut State, now_ms: i64) -> bool {
    if !st.shutdown.in_progress() {
        return false;
    }
    cancel(st, now_ms);
    tracing::info!("Shutdown manually aborted.");
    true
}

/// Give the shutdown up: the pause ends and the SHUTDOWN callers get their error.
fn cancel(st: &mut State, now_ms: i64) {
    st.shutdown.phase = Phase::Idle;
    st.shutdown.flags = Flags::default();
    st.shutdown.by_signal = false;
    st.shutdown.cancelled.send_modify(|n| *n = n.wrapping_add(1));
    let expiry = st.pause.unpause(Purpose::Shutdown, now_ms);
    st.engine.pause_expiry(expiry);
}

/// The last steps, once [`due`]: report the replicas, save the snapshot if due, close the
/// connections and the log. False if the save failed without FORCE: the shutdown is cancelled
/// and the server goes on.
pub fn finish(shared: &Arc<Shared>) -> bool {
    let mut st = shared.lock();
    let now = now_ms();
    report_replicas(&st, now);
    let flags = st.shutdown.flags;
    let save_points = !st.config.get("save").trim().is_empty();
    // The snapshot first: the log, once closed, cannot be taken back if the save fails.
    if (save_points && !flags.nosave) || flags.save {
        tracing::info!("Saving the final RDB snapshot before exiting.");
        if crate::persist::rewrite::save(&mut st).is_err() {
            if flags.force {
                tracing::warn!("Error trying to save the DB. Exit anyway.");
            } else {
                tracing::warn!("Error trying to save the DB, can't exit.");
                tracing::warn!("Errors trying to shut down the server. Check the logs for more information.");
                cancel(&mut st, now);
                return false;
            }
        }
    }
    // Every connection ends (a SHUTDOWN caller without a reply); nothing runs meanwhile: the
    // shutdown's pause holds every command.
    let _ = shared.shutdown.send(true);
    // A connection waiting for input watches only its push signal (`conn::Signals`); one that
    // registers from here on finds the flag set (`Session::run_batch`, `conn::serve`).
    for ci in st.clients.values() {
        ci.push.wake();
    }
    let log = st.journal.log().cloned();
    drop(st);
    if let Some(log) = log {
        tracing::info!("Calling fsync() on the AOF file.");
        log.shutdown();
    }
    crate::identity::keep_at_shutdown(&shared.lock());
    true
}

/// Log each replica that has not acknowledged the whole stream, and how many have.
fn report_replicas(st: &State, now_ms: i64) {
    let offset = st.replication.offset();
    let replicas = &st.replication.replicas;
    let mut lagging = 0;
    for link in replicas.values().filter(|l| l.ack_offset != offset) {
        lagging += 1;
        let lag = if link.state == LinkState::Online { (now_ms - link.ack_ms).max(0) / 1000 } else { 0 };
        let state = link.state.word();
        tracing::info!(
            "Lagging replica {}:{} reported offset {} behind master, lag={lag}, state={state}.",
            link.ip,
            link.port,
            offset.saturating_sub(link.ack_offset)
        );
    }
    if !replicas.is_empty() {
        tracing::info!("{} of {} replicas are in sync when shutting down.", replicas.len() - lagging, replicas.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State::new(crate::config::Config::default())
    }

    #[test]
    fn without_replicas_a_shutdown_finishes_at_once_and_holds_everything() {
        let mut st = state();
        assert!(start(&mut st, Flags::default(), false, 1_000));
        assert!(st.shutdown.remaining_ms(1_000).is_none());
        assert!(st.pause.holds(false, 1_000), "every command held while finishing");
        assert!(due(&mut st, 1_000));
        assert!(!start(&mut st, Flags::default(), false, 1_000), "one at a time");
    }

    /// A state at offset 100 with one replica that acknowledged `acked`.
    fn with_replica(acked: u64) -> State {
        let mut st = state();
        st.replication.base_offset = 100;
        let link = crate::replication::primary::ReplicaLink {
            ip: "127.0.0.1".into(),
            port: 7000,
            state: LinkState::Online,
            ack_offset: acked,
            fack_offset: 0,
            ack_ms: 1_000,
        };
        st.replication.replicas.insert(1, link);
        st
    }

    #[test]
    fn a_lagging_replica_pauses_writes_until_it_catches_up_or_the_time_is_up() {
        let mut st = with_replica(90);
        assert!(start(&mut st, Flags::default(), false, 1_000));
        assert_eq!(st.shutdown.remaining_ms(1_500), Some(9_500), "shutdown-timeout 10 s by default");
        assert!(st.pause.holds(true, 1_500) && !st.pause.holds(false, 1_500), "writes held, reads not");
        assert!(!due(&mut st, 1_500));
        let offset = st.replication.offset();
        if let Some(l) = st.replication.replicas.get_mut(&1) {
            l.ack_offset = offset;
        }
        assert!(due(&mut st, 1_600), "caught up");
        assert!(st.pause.holds(false, 1_600), "finishing holds everything");
        // Timed out instead.
        let mut st = with_replica(90);
        assert!(start(&mut st, Flags::default(), false, 1_000));
        assert!(!due(&mut st, 10_999));
        assert!(due(&mut st, 11_000));
        // NOW does not wait.
        let mut st = with_replica(90);
        assert!(start(&mut st, Flags { now: true, ..Flags::default() }, false, 1_000));
        assert!(st.shutdown.remaining_ms(1_000).is_none());
    }

    #[test]
    fn abort_ends_the_pause_and_tells_the_callers() {
        let mut st = state();
        assert!(!abort(&mut st, 1_000), "nothing to abort");
        let caller = st.shutdown.subscribe();
        assert!(start(&mut st, Flags::default(), true, 1_000));
        assert!(st.shutdown.by_signal());
        assert!(abort(&mut st, 1_000));
        assert!(caller.has_changed().unwrap_or(false));
        assert!(!st.pause.holds(true, 1_000) && !st.shutdown.in_progress());
        assert!(!st.shutdown.by_signal());
    }
}
