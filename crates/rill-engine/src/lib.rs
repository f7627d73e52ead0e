//! rill's engine: the keyspace, its value types, and the semantics of every data command.
//!
//! Comments citing `spec §N` refer to the behaviour specification in `docs/spec/streams.md`
//! (stream code) or `docs/spec/connection.md` (keyspace and connection code).
//!
//! The engine owns no sockets, threads, files or clock. Time is passed into every call
//! ([`CallCtx::now_ms`]), so tests and log replay are deterministic and need no server.
//!
//! Layout:
//! - [`error`]: the one error type ([`CmdError`]) carrying a Redis error code and message.
//! - [`keyspace`]: the [`Engine`] (databases, keys, expiry, WATCH bookkeeping, blocking-key
//!   readiness, change counting; every field private) and the per-call [`CallCtx`].
//! - [`types`]: one module per command family (keys and databases, strings, hashes, lists,
//!   sets, streams, DUMP/RESTORE), each with its `COMMANDS` specs next to its handlers.
//! - [`command`]: the command table: one [`command::CommandSpec`] per command, read by dispatch,
//!   `COMMAND`, `COMMAND DOCS` and MULTI queueing.
//! - [`debug`]: what DEBUG computes from the keyspace (Redis' dataset digest) and writes into it
//!   (POPULATE).
//! - [`effect`]: what a write did, as the log and replication carry it: the record codec and
//!   [`Engine::apply_effect`], the one way a replay changes the keyspace.
//! - [`rdb`]: the RDB format (snapshots, DUMP payloads, a primary's full sync).
//! - [`glob`], [`long_double`], [`util`]: pattern matching, Redis' long-double formatting,
//!   integer parsing.

pub mod command;
pub mod debug;
pub mod effect;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod effect_tests;
pub mod error;
pub mod functions;
pub mod glob;
pub mod keyspace;
pub mod long_double;
pub mod rdb;
pub mod types;
pub mod util;

pub use error::CmdError;
pub use keyspace::{
    BlockRequest, CallCtx, Db, Engine, EngineConfig, Entry, EventClass, EvictionPolicy, Garbage, KeyEvent,
    KeyspaceEvent, KeyspaceStats, LazyFree, Outcome, Touch, Value, WakeOn,
};
