//! Replication over Redis' own protocol (docs/REPLICATION.md). Built in steps; what exists:
//!
//! - [`forms`]: the command stream a Redis replica is sent for each committed journal unit, in
//!   the forms Redis itself propagates (deliveries as `XCLAIM ... FORCE JUSTID`, cursor moves
//!   as `XGROUP SETID ... ENTRIESREAD`, expiries as `DEL`), with `SELECT` and `MULTI`/`EXEC`
//!   as Redis places them. Checked by feeding it to a real Redis (`tests/it/replication.rs`).
//!
//! Next: the backlog (a [`crate::journal::Sink`] appending [`forms::Stream`] bytes to a ring of
//! `repl-backlog-size`, with the replication ID and offset), the primary side of the handshake
//! (`REPLCONF`, `PSYNC`/`SYNC`, a snapshot from the compaction machinery), then the replica side.

pub mod forms;
