//! Replication over Redis' own protocol (docs/REPLICATION.md). Built in steps; what exists:
//!
//! - [`forms`]: the command stream a Redis replica is sent for each committed journal unit, in
//!   the forms Redis itself propagates (deliveries as `XCLAIM ... FORCE JUSTID`, cursor moves
//!   as `XGROUP SETID ... ENTRIESREAD`, expiries as `DEL`), with `SELECT` and `MULTI`/`EXEC`
//!   as Redis places them. Checked by feeding it to a real Redis (`tests/it/replication.rs`).
//!
//! - [`backlog`]: the newest `repl-backlog-size` bytes of that stream with Redis' offsets
//!   (`master_repl_offset`, `repl_backlog_first_byte_offset`), and which offsets a replica can
//!   continue from.
//!
//! Next: the replication ID and the backlog in the server state, fed by the journal when the
//! first replica attaches (Redis makes its backlog then, so a server without replicas pays
//! nothing); the primary side of the handshake (`REPLCONF`, `PSYNC`/`SYNC`, a snapshot from
//! the compaction machinery); then the replica side.

pub mod backlog;
pub mod forms;

/// A primary's replication state: which history its stream belongs to and, once a replica
/// has attached, the backlog.
#[derive(Debug)]
pub struct Replication {
    /// The 40-hex ID of this stream's history (`master_replid`); a new one at every start
    /// until it is kept across restarts.
    pub replid: String,
    /// The history this one continues (`master_replid2`): 40 zeros when none.
    pub replid2: String,
    /// The last offset of `replid2`'s history that this one shares (`second_repl_offset`), -1
    /// when none.
    pub second_offset: i64,
    /// The backlog: made when the first replica attaches, as Redis makes it, so a server with
    /// no replica records nothing for one.
    pub backlog: Option<backlog::Backlog>,
}

impl Replication {
    /// A new history with ID `replid`, no backlog.
    pub fn new(replid: String) -> Replication {
        Replication { replid, replid2: "0".repeat(40), second_offset: -1, backlog: None }
    }

    /// `master_repl_offset`: the last byte of the stream (0 while there is no backlog).
    pub fn offset(&self) -> u64 {
        self.backlog.as_ref().map_or(0, backlog::Backlog::offset)
    }
}
