//! rill-server's integration tests, in one test binary: each module was a test target of its
//! own (`tests/NAME.rs`), and 18 binaries each linking the same dependencies cost more to
//! build than the tests took to run. A test's name is now `MODULE::NAME`; run one module
//! with `cargo test -p rill-server --test it MODULE::`.
//!
//! Servers, the raw RESP client, temporary directories and ports come from `rill-testkit`;
//! `common` holds what only these tests share.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
// Shared with `examples/killtest.rs`, which includes it by path too.
#[path = "../killtest/mod.rs"]
mod killtest;
// Shared with `examples/restart_fuzz.rs`, which includes it by path too.
#[path = "../restart_fuzz/mod.rs"]
mod restart_fuzz;

mod acl;
mod admin;
mod client_limits;
mod clients;
mod config_rewrite;
mod connection_limits;
mod console;
mod delivery;
mod demote;
mod differential;
mod digest;
mod durability;
mod encoding_fuzz;
mod eviction;
mod exporter;
mod failover;
mod hotkeys;
mod introspection;
mod keyspace_events;
mod keyspace_fuzz;
mod lazyfree;
mod log_format;
mod lose_nothing;
mod max_age;
mod migrate;
mod monitor;
mod partition;
mod persistence;
mod policies;
mod policy_kill;
mod ports;
mod protected_mode;
mod protocol;
mod pubsub;
mod rdb_corpus;
mod replica_limits;
mod replica_link;
mod replica_restart;
mod replica_side;
mod replication;
#[path = "restart_fuzz.rs"]
mod restart_fuzz_test;
mod restore_hostile;
mod rill_metrics;
mod scripting;
mod security;
mod shared_replies;
mod shutdown;
mod slowlog;
mod startup;
mod stream_fuzz;
mod tls;
mod tracking;
mod transport;

/// The binary `rill-testkit` starts is the one Cargo built for these tests.
#[test]
fn testkit_finds_the_binary_cargo_built() {
    let built = std::path::Path::new(env!("CARGO_BIN_EXE_rill-server")).canonicalize().unwrap();
    assert_eq!(rill_testkit::rill_server_binary().canonicalize().unwrap(), built);
}
