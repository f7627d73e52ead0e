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
