//! rill-worker: the reliable Redis Streams consumer loop, done once.
//!
//! Every Streams user writes the same loop by hand: read your own pending history (ID `0`)
//! before new entries (`>`), reclaim entries of dead consumers after they idle, count
//! deliveries and move poison entries to a dead-letter stream in the same transaction as their
//! XACK, shut down without stranding work. [`Worker`] is that loop. It speaks RESP through the
//! `redis` crate, so it runs against rill, Redis 7+, Valkey, or a Redis Cluster, and uses
//! `XREADGROUP ... CLAIM` and `XNACK` where the server has them ([`ServerFeatures`]).
//!
//! ```no_run
//! use rill_worker::{Entry, HandlerError, Target, Worker, WorkerConfig};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let config = WorkerConfig::new("{orders}", "billing", "pod-1")?.with_delivery_limit(3);
//! let worker = Worker::new(Target::Single("redis://127.0.0.1:6379".into()), config, |e: Entry| async move {
//!     match e.get_str("amount") {
//!         Some(_) => Ok(()),
//!         None => Err(HandlerError::dead_letter("no amount")),
//!     }
//! })?;
//! let report = worker.run_until_signal().await?;
//! println!("handled {}", report.handled);
//! # Ok(()) }
//! ```
//!
//! Layout: [`config`] (settings), [`worker`] (the loop), [`dlq`] (dead-letter format, move and
//! replay), [`keys`] (cluster-safe derived key names), [`ops`] (pending and group views for
//! operators), [`reply`] (reply parsing), [`conn`] (single server or cluster), [`features`]
//! (detection), [`metrics`] (metric names).

pub mod config;
pub mod conn;
pub mod dlq;
pub mod error;
pub mod features;
pub mod keys;
pub mod metrics;
pub mod ops;
pub mod policy;
pub mod reply;
pub mod worker;

pub use config::{FeatureMode, ServerPolicyMode, WorkerConfig};
pub use conn::{Connection, Target};
pub use error::{ConfigError, WorkerError};
pub use features::ServerFeatures;
pub use policy::GroupPolicy;
pub use reply::Entry;
pub use tokio_util::sync::CancellationToken;
pub use worker::{FailureAction, Handler, HandlerError, Worker, WorkerReport, WorkerStats};
