//! A coordinated failover: `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]` hands the
//! primary role to one of this primary's replicas without losing an acknowledged write
//! (docs/REPLICATION.md, Redis' protocol).
//!
//! ```text
//!  FAILOVER ─► writes paused (pause.rs, Purpose::Failover)       master_failover_state:
//!              wait until the target (or any replica) ACKs the       waiting-for-sync
//!              whole stream (`tick`, from the cron)
//!           ─► this server becomes the target's replica; its         failover-in-progress
//!              PSYNC carries FAILOVER: `PSYNC <replid> <offset+1> FAILOVER`
//!  target   ─► sees its own primary's replid, promotes itself (as REPLICAOF NO ONE: the old
//!              history becomes replid2) and answers +CONTINUE <new replid>
//!           ─► +CONTINUE / +FULLRESYNC: done, the pause ends           no-failover
//! ```
//!
//! TIMEOUT without FORCE gives up when the target has not caught up in time; with FORCE it
//! hands over anyway. A target that refuses the PSYNC, or ABORT while handing over, makes this
//! server a primary again (a new history, as REPLICAOF NO ONE). ABORT while waiting only ends
//! the pause.
//!
//! This module holds the failover's state (in `Replication`); running it against the server
//! (the pause, the replica link, the cron's checks) is `crate::handover`'s.

/// `master_failover_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// `no-failover`.
    #[default]
    None,
    /// `waiting-for-sync`: writes paused until a replica has the whole stream.
    WaitForSync,
    /// `failover-in-progress`: this server is the target's replica and sends it PSYNC FAILOVER.
    InProgress,
}

impl Phase {
    /// The word INFO prints.
    pub fn word(self) -> &'static str {
        match self {
            Phase::None => "no-failover",
            Phase::WaitForSync => "waiting-for-sync",
            Phase::InProgress => "failover-in-progress",
        }
    }
}

/// The failover under way, if any (in `Replication`).
#[derive(Debug, Clone, Default)]
pub struct Failover {
    /// Where it stands.
    pub phase: Phase,
    /// The replica it hands over to (chosen when one catches up, without `TO`).
    pub target: Option<(String, u16)>,
    /// `TIMEOUT`: when waiting ends, Unix ms.
    pub end_ms: Option<i64>,
    /// `FORCE`: hand over at the timeout even if the target has not caught up.
    pub force: bool,
}

/// A parsed `FAILOVER` request.
#[derive(Debug, Default)]
pub struct Request {
    /// `TO host port`.
    pub target: Option<(String, u16)>,
    /// `TIMEOUT ms` (> 0).
    pub timeout_ms: Option<i64>,
    /// `FORCE`.
    pub force: bool,
}
