//! `rill-server` as a library: everything the binary runs, so that dispatch, the log and the
//! connection state machine can be tested without a process or a socket. The binary
//! (`main.rs`) parses the command line, sets up logging and the crash-only panic hook, and
//! calls [`run::run`].

pub mod acl;
pub mod alloc;
pub mod aof;
pub mod blocking;
pub mod busy;
pub mod client;
pub mod client_limits;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod conn;
pub mod console;
pub mod dispatch;
pub mod evict;
pub mod handover;
pub mod hotkeys;
pub mod http;
pub mod identity;
pub mod info;
pub mod journal;
pub mod latency;
pub mod lazyfree;
pub mod listen;
pub mod logging;
pub mod metrics;
pub mod monitor;
pub mod notify;
pub mod pause;
pub mod persist;
pub mod poll;
pub mod pubsub;
pub mod push;
pub mod ratelimit;
pub mod replica;
pub mod replication;
pub mod run;
pub mod script;
pub mod shutdown;
pub mod slowlog;
pub mod state;
pub mod tls;
pub mod tracking;
pub mod unit;
