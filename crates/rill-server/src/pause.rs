//! Pausing clients: `CLIENT PAUSE timeout [WRITE|ALL]` / `CLIENT UNPAUSE`, the pause of
//! writes a `FAILOVER` holds while its target catches up, and the one a shutdown holds while
//! its replicas catch up (`shutdown.rs`; docs/REPLICATION.md).
//!
//! Each purpose (the CLIENT command, a failover, a shutdown) holds its own pause: the actions it stops and
//! until when. What is paused at a time is the union of the purposes whose end has not come.
//! A paused command is *held*, not refused: dispatch answers [`crate::client::Action::Held`]
//! before queueing or running it, the connection keeps the request and waits (`conn/driver.rs`)
//! until the pause changes or ends, then runs it through dispatch again (it may be held again).
//!
//! - `ALL` holds every command of a normal client; `WRITE` holds the commands flagged `write`
//!   or `may-replicate` (PUBLISH, SPUBLISH), and an EXEC whose queue holds one.
//! - Both stop expiry (lazy and active: a key whose time has passed is hidden, not deleted,
//!   `Engine::pause_expiry`) and what a primary puts in its replicas' stream by itself (the
//!   keep-alive PING, `REPLCONF GETACK`), so that the replication offset stands still.
//! - A replica's feed is never paused; on a replica, the primary's stream is held like a write.
//!
//! A held client counts in INFO `blocked_clients` and shows flag `b` in CLIENT LIST, as in
//! Redis.

use std::collections::BTreeSet;
use tokio::sync::watch;

/// What a pause stops (Redis' pause actions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Actions(u8);

impl Actions {
    /// Commands that write or may replicate.
    pub const WRITE: Actions = Actions(1);
    /// Every command.
    pub const ALL: Actions = Actions(1 << 1);
    /// Lazy and active expiry.
    pub const EXPIRE: Actions = Actions(1 << 2);
    /// What the primary adds to its replicas' stream by itself (PING, GETACK).
    pub const REPLICA: Actions = Actions(1 << 3);
    /// What `CLIENT PAUSE WRITE` and a failover stop.
    pub const WRITE_SET: Actions = Actions(Self::WRITE.0 | Self::EXPIRE.0 | Self::REPLICA.0);
    /// What `CLIENT PAUSE [ALL]` stops.
    pub const ALL_SET: Actions = Actions(Self::ALL.0 | Self::EXPIRE.0 | Self::REPLICA.0);

    /// Whether any action of `other` is in this set.
    pub fn any(self, other: Actions) -> bool {
        self.0 & other.0 != 0
    }

    fn union(self, other: Actions) -> Actions {
        Actions(self.0 | other.0)
    }
}

/// Why a pause is held: each purpose has its own, as in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `CLIENT PAUSE`.
    Client = 0,
    /// A `FAILOVER` waiting for its target, or handing over.
    Failover = 1,
    /// A shutdown waiting for its replicas (writes), or finishing (everything).
    Shutdown = 2,
}

/// How many purposes there are.
const PURPOSES: usize = 3;

/// One purpose's pause.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    actions: Actions,
    /// Unix ms; paused while now is before it.
    end_ms: i64,
}

/// The server's pauses (in `State`), the clients held by them, and a signal for the held
/// clients whenever a pause changes.
#[derive(Debug)]
pub struct Pause {
    per: [Held; PURPOSES],
    /// Connections holding a request back (INFO `blocked_clients`).
    pub held: BTreeSet<u64>,
    changed: watch::Sender<u64>,
}

impl Default for Pause {
    fn default() -> Pause {
        Pause { per: [Held::default(); PURPOSES], held: BTreeSet::new(), changed: watch::channel(0).0 }
    }
}

impl Pause {
    /// Pause `actions` for `purpose` until `end_ms`: the actions replace the purpose's old ones,
    /// the end is the later of the old and the new (Redis' rule). Returns the end of expiry's
    /// pause, for `Engine::pause_expiry`.
    pub fn pause(&mut self, purpose: Purpose, end_ms: i64, actions: Actions, now_ms: i64) -> i64 {
        let held = self.slot(purpose);
        let old_end = if held.end_ms > now_ms { held.end_ms } else { 0 };
        *held = Held { actions, end_ms: old_end.max(end_ms) };
        self.notify();
        self.expiry_end(now_ms)
    }

    /// End `purpose`'s pause; returns the end of expiry's pause, for `Engine::pause_expiry`.
    pub fn unpause(&mut self, purpose: Purpose, now_ms: i64) -> i64 {
        *self.slot(purpose) = Held::default();
        self.notify();
        self.expiry_end(now_ms)
    }

    /// The actions of `purpose`'s pause in effect at `now_ms`.
    pub fn of(&self, purpose: Purpose, now_ms: i64) -> Actions {
        let held = self.per.get(purpose as usize).copied().unwrap_or_default();
        if held.end_ms > now_ms {
            held.actions
        } else {
            Actions::default()
        }
    }

    /// Everything paused at `now_ms`.
    pub fn actions(&self, now_ms: i64) -> Actions {
        self.per.iter().filter(|h| h.end_ms > now_ms).fold(Actions::default(), |a, h| a.union(h.actions))
    }

    /// Whether a command is held at `now_ms`: `writes` says whether it writes or may replicate.
    pub fn holds(&self, writes: bool, now_ms: i64) -> bool {
        let a = self.actions(now_ms);
        a.any(Actions::ALL) || (writes && a.any(Actions::WRITE))
    }

    /// When the pauses holding a command end (the latest end among them), if one holds it.
    pub fn held_until(&self, writes: bool, now_ms: i64) -> Option<i64> {
        self.per
            .iter()
            .filter(|h| h.end_ms > now_ms && (h.actions.any(Actions::ALL) || (writes && h.actions.any(Actions::WRITE))))
            .map(|h| h.end_ms)
            .max()
    }

    /// A receiver that sees every change from now on: what a held client waits on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The end of expiry's pause (0: not paused).
    fn expiry_end(&self, now_ms: i64) -> i64 {
        self.per
            .iter()
            .filter(|h| h.end_ms > now_ms && h.actions.any(Actions::EXPIRE))
            .map(|h| h.end_ms)
            .max()
            .unwrap_or(0)
    }

    fn slot(&mut self, purpose: Purpose) -> &mut Held {
        let [client, failover, shutdown] = &mut self.per;
        match purpose {
            Purpose::Client => client,
            Purpose::Failover => failover,
            Purpose::Shutdown => shutdown,
        }
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// A held client's wait: for a change of the pauses, or their end.
#[derive(Debug)]
pub struct HeldWait {
    /// Changes of the pauses.
    pub changed: watch::Receiver<u64>,
    /// When the pauses holding the request end, Unix ms (`None`: not before a change).
    pub until_ms: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_pause_keeps_the_later_end_and_takes_the_new_actions() {
        let mut p = Pause::default();
        assert_eq!(p.pause(Purpose::Client, 5_000, Actions::WRITE_SET, 1_000), 5_000);
        assert!(!p.holds(false, 1_000) && p.holds(true, 1_000));
        // ALL for a shorter time: the end stays, the mode becomes ALL.
        p.pause(Purpose::Client, 2_000, Actions::ALL_SET, 1_000);
        assert!(p.holds(false, 1_000));
        assert_eq!(p.held_until(false, 1_000), Some(5_000));
        assert!(!p.holds(true, 5_000), "over at its end");
        // A failover's pause outlives an UNPAUSE of the client's.
        p.pause(Purpose::Failover, i64::MAX, Actions::WRITE_SET, 1_000);
        assert_eq!(p.unpause(Purpose::Client, 1_000), i64::MAX);
        assert!(p.holds(true, 1_000));
        assert_eq!(p.unpause(Purpose::Failover, 1_000), 0);
        assert!(!p.holds(true, 1_000));
    }
}
