//! What a worker is told: names, batch and timing knobs, and the dead-letter policy.

use std::time::Duration;

use crate::error::ConfigError;
use crate::keys;

/// Which server features the worker may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeatureMode {
    /// Ask the server (`COMMAND INFO`/`COMMAND DOCS`) and use XREADGROUP CLAIM and XNACK
    /// where it has them.
    #[default]
    Detect,
    /// Behave as on Redis 7 whatever the server is: XAUTOCLAIM sweeps, no XNACK.
    Legacy,
}

/// Whether the worker hands retries, reclaim and dead-lettering to a rill server's group
/// policy (`RILL.GROUP`, see [`crate::policy`]). On a server without `RILL.GROUP` (Redis,
/// Valkey) every mode runs the client-side loop; so does [`FeatureMode::Legacy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerPolicyMode {
    /// Never ask: the client-side loop (XAUTOCLAIM or XREADGROUP CLAIM, client dead letters).
    Off,
    /// Use the group's policy if it has one (`RILL.GROUP GET`: MAXDELIVER or ACKWAIT set);
    /// leave the group's settings alone.
    #[default]
    UseIfPresent,
    /// Set the group's policy from this config at start (MAXDELIVER = `delivery_limit`,
    /// DEADLETTER = `dead_letter_stream`, ACKWAIT = `min_idle`, BACKOFF = `retry_backoff`,
    /// RELEASEONCLOSE = `release_on_close`), then use it.
    Set,
}

/// Settings of one [`crate::Worker`]. Build with [`WorkerConfig::new`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The stream to consume.
    pub stream: String,
    /// The consumer group; created (with MKSTREAM) if missing.
    pub group: String,
    /// This worker's consumer name. Reuse it across restarts so a restarted worker finds
    /// its own pending history first.
    pub consumer: String,
    /// COUNT of each read or claim.
    pub batch_size: usize,
    /// BLOCK of each read for new entries.
    pub block: Duration,
    /// An entry delivered this long ago and not acked is taken to belong to a dead consumer
    /// and is reclaimed. Must be comfortably above the slowest handler (plus the time an
    /// entry can wait in a batch for a free handler slot), or live work is stolen.
    pub min_idle: Duration,
    /// How often an XAUTOCLAIM sweep runs (servers without XREADGROUP CLAIM only; with it
    /// every read reclaims).
    pub reclaim_interval: Duration,
    /// An entry is dead-lettered once a failed delivery reaches this count, or when it is
    /// delivered more often than this (a handler that crashes its process never fails
    /// cleanly).
    pub delivery_limit: u64,
    /// Where dead letters go; same hash tag as the stream. Default: [`keys::default_dead_letter_stream`].
    pub dead_letter_stream: String,
    /// Handlers running at once.
    pub concurrency: usize,
    /// If set, each handled ID is recorded with `SET <guard key> 1 NX PX ttl` in the same
    /// MULTI as its XACK, and an entry whose key exists is acked without running the handler.
    pub idempotency_ttl: Option<Duration>,
    /// The ID a newly created group starts from: `0` (everything in the stream) or `$`.
    pub group_start: String,
    /// Feature detection or forced Redis 7 behaviour.
    pub features: FeatureMode,
    /// Whether to use (or set) the group's server-side policy where the server has one.
    pub server_policy: ServerPolicyMode,
    /// Delays before a failed entry is delivered again (the n-th failure waits the n-th value,
    /// the last repeats). Only a server policy applies it (`BACKOFF`); the client-side loop
    /// retries at once.
    pub retry_backoff: Vec<Duration>,
    /// Ask the server to hand this group's entries back as soon as the last connection that
    /// read them as a consumer closes (`RELEASEONCLOSE`): a killed worker's entries go to the
    /// others at once instead of after `min_idle`. Set with [`ServerPolicyMode::Set`] only.
    pub release_on_close: bool,
}

impl WorkerConfig {
    /// Defaults: batch 16, block 2 s, min-idle 30 s, sweep every 5 s, delivery limit 5,
    /// dead letters in `<stream>:dlq` (hash-tagged), 4 handlers, no idempotency guard, new
    /// groups start at `0`, a group's server policy used if it has one, no retry backoff.
    pub fn new(stream: &str, group: &str, consumer: &str) -> Result<WorkerConfig, ConfigError> {
        Ok(WorkerConfig {
            stream: stream.to_owned(),
            group: group.to_owned(),
            consumer: consumer.to_owned(),
            batch_size: 16,
            block: Duration::from_secs(2),
            min_idle: Duration::from_secs(30),
            reclaim_interval: Duration::from_secs(5),
            delivery_limit: 5,
            dead_letter_stream: keys::default_dead_letter_stream(stream)?,
            concurrency: 4,
            idempotency_ttl: None,
            group_start: "0".to_owned(),
            features: FeatureMode::Detect,
            server_policy: ServerPolicyMode::UseIfPresent,
            retry_backoff: Vec::new(),
            release_on_close: false,
        })
    }

    pub fn with_batch_size(mut self, n: usize) -> Self {
        self.batch_size = n;
        self
    }
    pub fn with_block(mut self, d: Duration) -> Self {
        self.block = d;
        self
    }
    pub fn with_min_idle(mut self, d: Duration) -> Self {
        self.min_idle = d;
        self
    }
    pub fn with_reclaim_interval(mut self, d: Duration) -> Self {
        self.reclaim_interval = d;
        self
    }
    pub fn with_delivery_limit(mut self, n: u64) -> Self {
        self.delivery_limit = n;
        self
    }
    pub fn with_dead_letter_stream(mut self, name: &str) -> Self {
        self.dead_letter_stream = name.to_owned();
        self
    }
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }
    pub fn with_idempotency_ttl(mut self, ttl: Duration) -> Self {
        self.idempotency_ttl = Some(ttl);
        self
    }
    pub fn with_group_start(mut self, id: &str) -> Self {
        self.group_start = id.to_owned();
        self
    }
    pub fn with_features(mut self, mode: FeatureMode) -> Self {
        self.features = mode;
        self
    }
    pub fn with_server_policy(mut self, mode: ServerPolicyMode) -> Self {
        self.server_policy = mode;
        self
    }
    pub fn with_retry_backoff(mut self, delays: &[Duration]) -> Self {
        self.retry_backoff = delays.to_vec();
        self
    }
    pub fn with_release_on_close(mut self, on: bool) -> Self {
        self.release_on_close = on;
        self
    }

    /// The idempotency guard key of entry `id`, in the stream's slot and naming the stream
    /// exactly (see [`keys::guard_key`]).
    pub fn guard_key(&self, id: &str) -> Result<String, ConfigError> {
        keys::guard_key(&self.stream, id)
    }

    /// Checks the settings before anything touches the server.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.batch_size == 0 {
            return Err(ConfigError::OutOfRange { what: "batch_size must be at least 1" });
        }
        if self.concurrency == 0 {
            return Err(ConfigError::OutOfRange { what: "concurrency must be at least 1" });
        }
        if self.delivery_limit == 0 {
            return Err(ConfigError::OutOfRange { what: "delivery_limit must be at least 1" });
        }
        if self.block.is_zero() {
            // BLOCK 0 means "forever": the worker could then never notice a shutdown.
            return Err(ConfigError::OutOfRange { what: "block must be at least 1 ms" });
        }
        if keys::hashed_part(&self.dead_letter_stream) != keys::hashed_part(&self.stream) {
            return Err(ConfigError::DeadLetterSlotMismatch {
                stream: self.stream.clone(),
                dead_letter: self.dead_letter_stream.clone(),
            });
        }
        if self.retry_backoff.len() > 32 {
            // The server's limit for BACKOFF.
            return Err(ConfigError::OutOfRange { what: "retry_backoff takes at most 32 delays" });
        }
        if self.idempotency_ttl.is_some() {
            self.guard_key("0-0")?;
        }
        Ok(())
    }
}
