//! What the integration tests of rill-server, rill-worker and rill-cli share. A dev
//! dependency only (not published), with no dependencies of its own.
//!
//! * [`Server`] starts a real server process — this workspace's `rill-server` binary (found
//!   by [`rill_server_binary`]), or a reference `redis-server` ([`ReferenceServer`]: Debian's
//!   7.0.15, or 8.2.3 from `.deps/`) — on a free 127.0.0.1 port with a fresh temporary
//!   directory and persistence off, waits until it answers PING, and kills it (by the child's
//!   pid) when dropped. [`Launch`] adds a config file, arguments, a wrapper such as `prlimit`,
//!   or a free cluster bus port. [`Proc`] is rill on a directory that outlives it, for kill -9
//!   and restart tests.
//! * [`RawClient`] speaks RESP over a plain `TcpStream`: it sends bytes and reads back exactly
//!   one reply (raw bytes, or a parsed [`Value`]) or exactly so many bytes. The parser is
//!   deliberately tiny and independent of `rill-resp`, so a bug there cannot hide behind a
//!   matching bug here.
//! * [`TempDir`], [`free_port`], [`ChildGuard`] (kill on drop, wait for exit with a deadline)
//!   and [`redis_cli`]; [`Rng`], [`fuzz_seed`] (a fuzzer's fixed regression seed) and
//!   [`fresh_seed`] (a new one per CI run) for randomised tests.
//! * [`skip`]: the one way a test skips what it cannot check here, counted by `scripts/test`
//!   and refused under `CI=true`.
//!
//! When a reference server is missing the tests fail loudly (CI installs both through
//! `scripts/install-deps.sh`) unless `RILL_SKIP_REFERENCE=1` (refused under `CI=true`), which
//! counts each test that misses it as skipped; with `RILL_DIFF_SELFTEST=1`,
//! [`Server::subject`] is Redis 7.0.15 instead of rill.

mod binaries;
mod client;
mod ports;
mod process;
pub mod resp;
mod rng;
mod server;
mod skip;
mod temp_dir;

pub use binaries::{ci, rill_server_binary, selftest, skip_reference, workspace_root, ReferenceServer};
pub use client::{RawClient, READ_TIMEOUT};
pub use ports::{free_port, free_port_with_bus, CLUSTER_BUS_OFFSET};
pub use process::{redis_cli, wait_exit, ChildGuard};
pub use resp::{
    encode_command, encode_command_into, escape, frame_len, parse_frame, parse_value, split_aggregate, Value,
};
pub use rng::{fresh_seed, fuzz_seed, seed_bytes, Rng};
pub use server::{Launch, Proc, Server, ServerKind, RESTART_TIMEOUT, STARTUP_TIMEOUT};
pub use skip::{current_test, skip, SKIP_DIR_ENV};
pub use temp_dir::TempDir;
