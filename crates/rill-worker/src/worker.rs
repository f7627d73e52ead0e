//! The consumer loop.
//!
//! ```text
//!            ┌──────────────── refill (one source per round, in this order) ───────────────┐
//!            │ 1. own history   XREADGROUP ... STREAMS s <cursor>   from 0 until empty      │
//!            │ 2. sweep         XAUTOCLAIM s g c <min-idle> <cursor> until cursor 0-0       │
//!            │                  (servers without XREADGROUP CLAIM, every reclaim_interval)  │
//!            │ 3. new           XREADGROUP ... BLOCK b [CLAIM min-idle] STREAMS s >         │
//!            └───────────────────────────────┬───────────────────────────────────────────────┘
//!                                            ▼
//!                        queue ──(one permit per running handler)──▶ handler task
//!                                                                    ├ Ok          → XACK (+ guard SET NX PX, one MULTI)
//!                                                                    ├ DeadLetter  → MULTI XADD dlq; XACK; EXEC
//!                                                                    └ Retry       → at the limit: dead letter;
//!                                                                                    else XNACK FAIL, or stay pending
//! ```
//!
//! **With a server policy** (rill's `RILL.GROUP`, used when the group has MAXDELIVER or ACKWAIT
//! set, or set from the config with [`crate::ServerPolicyMode::Set`]) the server does the
//! reclaiming and the dead-lettering, and the loop shrinks to:
//!
//! ```text
//!   refill: 1. own history (as above)   3. new: XREADGROUP ... BLOCK b STREAMS s >  (no CLAIM,
//!           no sweep: the server hands back entries unacked for ACKWAIT and serves them first)
//!   handler ├ Ok          → XACK (+ guard)
//!           ├ DeadLetter  → XNACK s g FATAL IDS 1 id      (the server dead-letters, reason fatal)
//!           └ Retry       → RILL.NACK s g IDS 1 id        (the server applies BACKOFF, and at
//!                                                          MAXDELIVER dead-letters: maxdeliver)
//! ```
//!
//! The worker then never XADDs a dead letter. If the group's policy has no MAXDELIVER (ACKWAIT
//! only), a Retry at `delivery_limit` ends with `XNACK FATAL`, so the limit still holds. On a
//! server without `RILL.GROUP` the client-side loop above runs whatever the mode.
//!
//! Plain acks (no idempotency guard) are batched: handlers hand the IDs they finished to one
//! acker per connection, which sends one `XACK s g id...` with everything that arrived while
//! its previous XACK was answered (one in flight; an idle worker's ack goes out at once).
//!
//! The queue is refilled only when empty, so at most one batch waits for handler slots.
//! Reading history first matters: entries delivered to this consumer name before a crash are
//! in its PEL, and `>` never returns them again.
//!
//! Shutdown (token cancelled): the blocked read is cut short with `CLIENT UNBLOCK` (single
//! server; on a cluster the read runs out its BLOCK), nothing new is started, queued entries
//! are handed back with `XNACK SILENT` where the server has it (their aborted delivery is not
//! counted; elsewhere they stay in this consumer's PEL for its next start or for reclaim), and
//! running handlers finish and ack before `run` returns.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::{FeatureMode, ServerPolicyMode, WorkerConfig};
use crate::conn::{Connection, Target};
use crate::dlq::{self, Provenance};
use crate::error::WorkerError;
use crate::features::ServerFeatures;
use crate::metrics::Meters;
use crate::policy;
use crate::reply::{self, Entry, RawEntry};

/// What the handler wants done with an entry it could not handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAction {
    /// Deliver it again later (until the delivery limit, then dead-letter it).
    Retry,
    /// It can never succeed: dead-letter it now.
    DeadLetter,
}

/// A handler's failure: what to do, and why (the reason goes into the dead letter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError {
    pub action: FailureAction,
    pub reason: String,
}

impl HandlerError {
    pub fn retry(reason: impl Into<String>) -> HandlerError {
        HandlerError { action: FailureAction::Retry, reason: reason.into() }
    }

    pub fn dead_letter(reason: impl Into<String>) -> HandlerError {
        HandlerError { action: FailureAction::DeadLetter, reason: reason.into() }
    }
}

/// Handles one entry. Implemented for every `Fn(Entry) -> impl Future<Output = Result<(),
/// HandlerError>>`, so an `async` closure or function works. It must be idempotent: after a
/// crash between its effect and the XACK, the entry is delivered again.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, entry: Entry) -> impl Future<Output = Result<(), HandlerError>> + Send;
}

impl<F, Fut> Handler for F
where
    F: Fn(Entry) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send,
{
    fn handle(&self, entry: Entry) -> impl Future<Output = Result<(), HandlerError>> + Send {
        self(entry)
    }
}

/// Counters of one run; also published through the `metrics` crate (see [`crate::metrics`]).
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Handler succeeded and the entry was acked.
    pub handled: AtomicU64,
    /// Handler returned an error or panicked, or the ack failed.
    pub failed: AtomicU64,
    /// Entries delivered again through a claim (XREADGROUP CLAIM or XAUTOCLAIM): taken over
    /// from an idle consumer, or retried after a failure (XNACK FAIL or left pending). With a
    /// server policy: entries a `>` read delivered again after the server handed them back.
    pub reclaimed: AtomicU64,
    /// Entries moved to the dead-letter stream by the worker, or (with a server policy) handed
    /// to the server with `XNACK FATAL`. Dead letters the server makes at MAXDELIVER are counted
    /// in `RILL.GROUP INFO`'s `dead-lettered`, not here.
    pub dead_lettered: AtomicU64,
    /// Entries acked without running the handler because the idempotency guard knew them.
    pub duplicates: AtomicU64,
    /// Unstarted entries handed back at shutdown (XNACK SILENT).
    pub returned: AtomicU64,
    /// Times the group was found missing and created again.
    pub group_recreated: AtomicU64,
}

/// A snapshot of [`WorkerStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    pub handled: u64,
    pub failed: u64,
    pub reclaimed: u64,
    pub dead_lettered: u64,
    pub duplicates: u64,
    pub returned: u64,
    pub group_recreated: u64,
}

impl WorkerStats {
    pub fn report(&self) -> WorkerReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WorkerReport {
            handled: get(&self.handled),
            failed: get(&self.failed),
            reclaimed: get(&self.reclaimed),
            dead_lettered: get(&self.dead_lettered),
            duplicates: get(&self.duplicates),
            returned: get(&self.returned),
            group_recreated: get(&self.group_recreated),
        }
    }
}

fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A reliable consumer of one stream in one group. See the module docs for the loop.
#[derive(Debug)]
pub struct Worker<H> {
    target: Target,
    config: Arc<WorkerConfig>,
    handler: Arc<H>,
    stats: Arc<WorkerStats>,
}

impl<H: Handler> Worker<H> {
    /// Checks the configuration; connects only when run.
    pub fn new(target: Target, config: WorkerConfig, handler: H) -> Result<Self, WorkerError> {
        config.validate()?;
        Ok(Worker {
            target,
            config: Arc::new(config),
            handler: Arc::new(handler),
            stats: Arc::new(WorkerStats::default()),
        })
    }

    /// Live counters, readable while the worker runs.
    pub fn stats(&self) -> Arc<WorkerStats> {
        Arc::clone(&self.stats)
    }

    /// Runs until SIGTERM or Ctrl-C, then shuts down gracefully.
    pub async fn run_until_signal(self) -> Result<WorkerReport, WorkerError> {
        let token = CancellationToken::new();
        let trigger = token.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            trigger.cancel();
        });
        self.run(token).await
    }

    /// Runs until `shutdown` is cancelled, then stops reading, hands back unstarted entries,
    /// waits for running handlers, and returns the counters. Returns an error only for what
    /// retrying cannot fix (a refused setting); lost connections are re-opened.
    pub async fn run(self, shutdown: CancellationToken) -> Result<WorkerReport, WorkerError> {
        let mut run = Run::start(self, shutdown).await?;
        let result = run.main_loop().await;
        run.finish().await;
        result.map(|()| run.stats.report())
    }
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

/// What every handler task needs.
#[derive(Debug)]
struct Shared<H> {
    config: Arc<WorkerConfig>,
    handler: Arc<H>,
    stats: Arc<WorkerStats>,
    features: ServerFeatures,
    /// The group has a server policy the loop defers to (see the module docs). Changes only
    /// when the group is re-created after NOGROUP.
    server_policy: AtomicBool,
    /// The policy's MAXDELIVER (0: none, the worker ends retries at its own limit).
    server_max_deliver: AtomicU64,
    meters: Meters,
}

impl<H> Shared<H> {
    fn uses_server_policy(&self) -> bool {
        self.server_policy.load(Ordering::Relaxed)
    }
}

/// The state of one `Worker::run`.
struct Run<H> {
    target: Target,
    shared: Arc<Shared<H>>,
    stats: Arc<WorkerStats>,
    shutdown: CancellationToken,
    reader: Connection,
    /// CLIENT ID of `reader` (single server only), for CLIENT UNBLOCK at shutdown.
    reader_id: Option<i64>,
    commands: Connection,
    /// Where handlers send the IDs of handled entries (see [`run_acker`]); a new acker on
    /// `commands` after each reconnection.
    acks: mpsc::UnboundedSender<String>,
    /// The current acker and those of earlier connections still settling their last acks.
    ackers: JoinSet<()>,
    permits: Arc<Semaphore>,
    tasks: JoinSet<()>,
    queue: VecDeque<Entry>,
    /// Next ID of the own-history drain; `None` once drained.
    history_cursor: Option<String>,
    /// Cursor of a running XAUTOCLAIM sweep.
    sweep_cursor: Option<String>,
    next_sweep: Instant,
}

impl<H: Handler> Run<H> {
    async fn start(worker: Worker<H>, shutdown: CancellationToken) -> Result<Self, WorkerError> {
        let (reader, mut commands) = connect_pair(&worker.target).await?;
        let features = match worker.config.features {
            FeatureMode::Detect => ServerFeatures::detect(&mut commands).await,
            FeatureMode::Legacy => ServerFeatures::LEGACY,
        };
        tracing::info!(
            stream = %worker.config.stream,
            group = %worker.config.group,
            consumer = %worker.config.consumer,
            claim_on_read = features.claim_on_read,
            xnack = features.xnack,
            "worker starting"
        );
        let permits = Arc::new(Semaphore::new(worker.config.concurrency));
        let meters = Meters::new(&worker.config);
        let (acks, _) = mpsc::unbounded_channel();
        let mut run = Run {
            target: worker.target,
            shared: Arc::new(Shared {
                config: worker.config,
                handler: worker.handler,
                stats: Arc::clone(&worker.stats),
                features,
                server_policy: AtomicBool::new(false),
                server_max_deliver: AtomicU64::new(0),
                meters,
            }),
            stats: worker.stats,
            shutdown,
            reader,
            reader_id: None,
            commands,
            acks,
            ackers: JoinSet::new(),
            permits,
            tasks: JoinSet::new(),
            queue: VecDeque::new(),
            history_cursor: Some("0".to_owned()),
            sweep_cursor: None,
            next_sweep: Instant::now(),
        };
        run.start_acker();
        run.reader_id = run.client_id().await;
        run.ensure_group().await?;
        run.adopt_policy().await?;
        Ok(run)
    }

    /// Sets the group's server policy from the config (mode `Set`) and decides whether the
    /// loop defers to it. Only on a server with `RILL.GROUP` and without `FeatureMode::Legacy`.
    async fn adopt_policy(&mut self) -> Result<(), WorkerError> {
        let c = Arc::clone(&self.shared.config);
        let eligible = self.shared.features.policies
            && c.features == FeatureMode::Detect
            && c.server_policy != ServerPolicyMode::Off;
        let found = if eligible {
            if c.server_policy == ServerPolicyMode::Set {
                policy::set_from_config(&mut self.commands, &c).await?;
            }
            Some(policy::get(&mut self.commands, &c.stream, &c.group).await?)
        } else {
            None
        };
        let active = found.as_ref().is_some_and(policy::GroupPolicy::is_active);
        let max_deliver = found.as_ref().map_or(0, |p| p.max_deliver);
        self.shared.server_policy.store(active, Ordering::Relaxed);
        self.shared.server_max_deliver.store(max_deliver, Ordering::Relaxed);
        tracing::info!(
            stream = %c.stream,
            group = %c.group,
            server_policy = active,
            policy = ?found,
            "{}",
            if active { "the server's group policy reclaims and dead-letters" } else { "client-side reclaim and dead letters" }
        );
        Ok(())
    }

    fn config(&self) -> &WorkerConfig {
        &self.shared.config
    }

    async fn client_id(&mut self) -> Option<i64> {
        if self.target.is_cluster() {
            return None;
        }
        redis::cmd("CLIENT").arg("ID").query_async::<i64>(&mut self.reader).await.ok()
    }

    /// XGROUP CREATE ... MKSTREAM; an existing group (BUSYGROUP) is fine.
    async fn ensure_group(&mut self) -> Result<(), WorkerError> {
        let c = &self.shared.config;
        let result = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&c.stream)
            .arg(&c.group)
            .arg(&c.group_start)
            .arg("MKSTREAM")
            .query_async::<Value>(&mut self.commands)
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            Err(e) => Err(WorkerError::Redis { context: "XGROUP CREATE", source: e }),
        }
    }

    async fn main_loop(&mut self) -> Result<(), WorkerError> {
        let mut backoff = Duration::from_millis(50);
        loop {
            self.reap_finished();
            self.start_queued();
            if self.shutdown.is_cancelled() {
                return Ok(());
            }
            if !self.queue.is_empty() {
                let permits = Arc::clone(&self.permits);
                tokio::select! {
                    _ = self.shutdown.cancelled() => return Ok(()),
                    permit = permits.acquire_owned() => {
                        if let (Ok(permit), Some(entry)) = (permit, self.queue.pop_front()) {
                            self.spawn(entry, permit);
                        }
                    }
                }
                continue;
            }
            match self.refill().await {
                Ok(()) => backoff = Duration::from_millis(50),
                Err(e) if e.code() == Some("NOGROUP") => {
                    tracing::warn!(
                        stream = %self.config().stream,
                        group = %self.config().group,
                        "consumer group is gone (NOGROUP); creating it again"
                    );
                    self.ensure_group().await?;
                    // A re-created group has no policy: set it again, or fall back.
                    self.adopt_policy().await?;
                    bump(&self.stats.group_recreated, 1);
                    self.history_cursor = Some("0".to_owned());
                    self.sweep_cursor = None;
                }
                Err(e) if e.is_connection_error() => {
                    tracing::warn!(error = %e, "connection lost; reconnecting in {backoff:?}");
                    tokio::select! {
                        _ = self.shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    if let Ok((reader, commands)) = connect_pair(&self.target).await {
                        self.reader = reader;
                        self.commands = commands;
                        self.start_acker();
                        self.reader_id = self.client_id().await;
                        self.history_cursor = Some("0".to_owned());
                    }
                }
                Err(e) => {
                    // A refused command that retrying will not fix soon (WRONGTYPE, ...):
                    // report it, back off, and keep going rather than drop the consumer.
                    tracing::error!(error = %e, "read failed; retrying in {backoff:?}");
                    tokio::select! {
                        _ = self.shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Collects finished handler tasks; a panicked handler leaves its entry pending.
    fn reap_finished(&mut self) {
        while let Some(done) = self.tasks.try_join_next() {
            if let Err(e) = done {
                if e.is_panic() {
                    tracing::error!("a handler panicked; its entry stays pending for reclaim");
                    bump(&self.stats.failed, 1);
                    self.shared.meters.failed(1);
                }
            }
        }
    }

    fn start_queued(&mut self) {
        while !self.queue.is_empty() {
            let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
                return;
            };
            if let Some(entry) = self.queue.pop_front() {
                self.spawn(entry, permit);
            }
        }
    }

    fn spawn(&mut self, entry: Entry, permit: OwnedSemaphorePermit) {
        let shared = Arc::clone(&self.shared);
        let conn = self.commands.clone();
        let acks = self.acks.clone();
        self.tasks.spawn(async move {
            process(&shared, conn, &acks, entry).await;
            drop(permit);
        });
    }

    /// Starts the acker of the current `commands` connection; the previous one (if any) ends
    /// once the handlers that hold its sender have sent their last IDs and it has acked them.
    fn start_acker(&mut self) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.acks = tx;
        let conn = self.commands.clone();
        let config = Arc::clone(&self.shared.config);
        let stats = Arc::clone(&self.stats);
        let meters = self.shared.meters.clone();
        self.ackers.spawn(run_acker(config, stats, meters, conn, rx));
    }

    /// Fills the empty queue from the first source that has work.
    async fn refill(&mut self) -> Result<(), WorkerError> {
        if let Some(cursor) = self.history_cursor.clone() {
            let (entries, next) = self.read_history(&cursor).await?;
            self.history_cursor = next;
            self.queue.extend(entries);
            return Ok(());
        }
        if self.shared.uses_server_policy() {
            // The server hands back entries of dead consumers to `>` reads: no sweep.
            let entries = self.read_new().await?;
            self.queue.extend(entries);
            return Ok(());
        }
        let features = self.shared.features;
        if !features.claim_on_read && self.sweep_cursor.is_none() && Instant::now() >= self.next_sweep {
            self.sweep_cursor = Some("0-0".to_owned());
        }
        if let Some(cursor) = self.sweep_cursor.clone() {
            let (next, entries) = self.sweep(&cursor).await?;
            if next == "0-0" {
                self.sweep_cursor = None;
                self.next_sweep = Instant::now() + self.config().reclaim_interval;
            } else {
                self.sweep_cursor = Some(next);
            }
            if !entries.is_empty() {
                self.queue.extend(entries);
                return Ok(());
            }
            if self.sweep_cursor.is_some() {
                return Ok(());
            }
        }
        let entries = self.read_new().await?;
        self.queue.extend(entries);
        Ok(())
    }

    /// `XREADGROUP GROUP g c COUNT n STREAMS s <cursor>`: this consumer's own pending entries,
    /// and the cursor of the next page (`None` once the history is drained).
    async fn read_history(&mut self, cursor: &str) -> Result<(Vec<Entry>, Option<String>), WorkerError> {
        let c = Arc::clone(&self.shared.config);
        // RILL.READGROUP's entries say their earlier deliveries: no XPENDING afterwards.
        let counts = self.shared.features.readgroup_counts;
        let v: Value = redis::cmd(if counts { "RILL.READGROUP" } else { "XREADGROUP" })
            .arg("GROUP")
            .arg(&c.group)
            .arg(&c.consumer)
            .arg("COUNT")
            .arg(c.batch_size)
            .arg("STREAMS")
            .arg(&c.stream)
            .arg(cursor)
            .query_async(&mut self.reader)
            .await
            .map_err(WorkerError::redis("XREADGROUP history"))?;
        let raw = reply::read_reply(&v, &c.stream, "XREADGROUP history")?;
        let next = raw.last().map(|e| e.id.clone());
        // The read itself counted a delivery; XPENDING tells the totals. A deleted payload
        // ([id, nil]) cannot be handled: ack it so it stops haunting the PEL.
        let (live, ghosts): (Vec<RawEntry>, Vec<RawEntry>) = raw.into_iter().partition(|e| e.fields.is_some());
        if !ghosts.is_empty() {
            let ids: Vec<&str> = ghosts.iter().map(|e| e.id.as_str()).collect();
            tracing::warn!(count = ids.len(), "acking pending entries whose payload was deleted");
            redis::cmd("XACK")
                .arg(&c.stream)
                .arg(&c.group)
                .arg(&ids)
                .query_async::<i64>(&mut self.commands)
                .await
                .map_err(WorkerError::redis("XACK deleted entries"))?;
        }
        if counts {
            return Ok((with_counts_given(&c.stream, live).0, next));
        }
        Ok((self.with_delivery_counts(live).await?, next))
    }

    /// One page of `XAUTOCLAIM s g c <min-idle> <cursor> COUNT n`.
    async fn sweep(&mut self, cursor: &str) -> Result<(String, Vec<Entry>), WorkerError> {
        let c = Arc::clone(&self.shared.config);
        let v: Value = redis::cmd("XAUTOCLAIM")
            .arg(&c.stream)
            .arg(&c.group)
            .arg(&c.consumer)
            .arg(millis(c.min_idle))
            .arg(cursor)
            .arg("COUNT")
            .arg(c.batch_size)
            .query_async(&mut self.commands)
            .await
            .map_err(WorkerError::redis("XAUTOCLAIM"))?;
        let (next, raw, deleted) = reply::autoclaim_reply(&v)?;
        if !deleted.is_empty() {
            tracing::warn!(count = deleted.len(), "XAUTOCLAIM dropped pending entries whose payload was deleted");
        }
        let live: Vec<RawEntry> = raw.into_iter().filter(|e| e.fields.is_some()).collect();
        if !live.is_empty() {
            tracing::info!(count = live.len(), "reclaimed idle entries (XAUTOCLAIM)");
            bump(&self.stats.reclaimed, live.len() as u64);
            self.shared.meters.reclaimed(live.len() as u64);
        }
        Ok((next, self.with_delivery_counts(live).await?))
    }

    /// `XREADGROUP GROUP g c COUNT n BLOCK b [CLAIM min-idle] STREAMS s >`.
    async fn read_new(&mut self) -> Result<Vec<Entry>, WorkerError> {
        let c = Arc::clone(&self.shared.config);
        let server_policy = self.shared.uses_server_policy();
        let claim = self.shared.features.claim_on_read && !server_policy;
        // On a policy group, RILL.READGROUP's entries carry their earlier deliveries (the
        // hand-backs' counts), so no XPENDING follows the read.
        let counts = server_policy && self.shared.features.readgroup_counts;
        let mut cmd = redis::cmd(if counts { "RILL.READGROUP" } else { "XREADGROUP" });
        cmd.arg("GROUP")
            .arg(&c.group)
            .arg(&c.consumer)
            .arg("COUNT")
            .arg(c.batch_size)
            .arg("BLOCK")
            .arg(millis(c.block).max(1));
        if claim {
            cmd.arg("CLAIM").arg(millis(c.min_idle));
        }
        cmd.arg("STREAMS").arg(&c.stream).arg(">");

        let mut reader = self.reader.clone();
        let read = async move { cmd.query_async::<Value>(&mut reader).await };
        tokio::pin!(read);
        let v = tokio::select! {
            v = &mut read => v,
            _ = self.shutdown.cancelled() => {
                // Cut the BLOCK short and take whatever the read still returns: entries it
                // delivered are in this consumer's PEL and are handed back at shutdown.
                if let Some(id) = self.reader_id {
                    let _ = redis::cmd("CLIENT").arg("UNBLOCK").arg(id)
                        .query_async::<Value>(&mut self.commands).await;
                }
                read.await
            }
        }
        .map_err(WorkerError::redis("XREADGROUP"))?;
        let raw = reply::read_reply(&v, &c.stream, "XREADGROUP")?;
        if server_policy {
            // XREADGROUP's handed-back entries come as plain 2-element entries: XPENDING tells
            // their count.
            let entries =
                if counts { with_counts_given(&c.stream, raw).0 } else { self.with_delivery_counts(raw).await? };
            let again = entries.iter().filter(|e| e.deliveries > 1).count() as u64;
            if again > 0 {
                tracing::info!(count = again, "entries handed back by the server's policy delivered again");
                bump(&self.stats.reclaimed, again);
                self.shared.meters.reclaimed(again);
            }
            return Ok(entries);
        }
        let (entries, reclaimed) = with_counts_given(&c.stream, raw);
        if reclaimed > 0 {
            tracing::info!(count = reclaimed, "reclaimed idle entries (XREADGROUP CLAIM)");
            bump(&self.stats.reclaimed, reclaimed);
            self.shared.meters.reclaimed(reclaimed);
        }
        Ok(entries)
    }

    /// Looks up delivery counts with one `XPENDING s g first last n consumer` over the batch's
    /// ID range (this consumer's pending entries in it: the batch and at most the entries it
    /// holds besides), then one `XPENDING s g id id 1 consumer` per entry the range reply was
    /// too short to reach. Entries no longer pending for this consumer are dropped.
    async fn with_delivery_counts(&mut self, raw: Vec<RawEntry>) -> Result<Vec<Entry>, WorkerError> {
        if raw.is_empty() {
            return Ok(Vec::new());
        }
        let c = Arc::clone(&self.shared.config);
        let (Some(first), Some(last)) =
            (raw.iter().map(|e| id_key(&e.id)).min(), raw.iter().map(|e| id_key(&e.id)).max())
        else {
            return Ok(Vec::new());
        };
        let limit = raw.len() + self.tasks.len() + self.queue.len() + c.concurrency;
        let v: Value = redis::cmd("XPENDING")
            .arg(&c.stream)
            .arg(&c.group)
            .arg(format!("{}-{}", first.0, first.1))
            .arg(format!("{}-{}", last.0, last.1))
            .arg(limit)
            .arg(&c.consumer)
            .query_async(&mut self.commands)
            .await
            .map_err(WorkerError::redis("XPENDING delivery counts"))?;
        let rows = reply::pending_entries(&v)?;
        // A full reply may have stopped before the batch's last IDs: those are looked up one
        // by one. Below the last row, an ID missing from the reply is not pending.
        let reached = if rows.len() >= limit { rows.last().map(|r| id_key(&r.id)) } else { Some(last) };
        let mut counts: HashMap<String, u64> = rows.into_iter().map(|r| (r.id, r.deliveries)).collect();
        let unreached: Vec<&str> = raw
            .iter()
            .filter(|e| reached.is_none_or(|r| id_key(&e.id) > r) && !counts.contains_key(&e.id))
            .map(|e| e.id.as_str())
            .collect();
        if !unreached.is_empty() {
            let mut pipe = redis::pipe();
            for id in &unreached {
                pipe.cmd("XPENDING").arg(&c.stream).arg(&c.group).arg(id).arg(id).arg(1).arg(&c.consumer);
            }
            let replies: Vec<Value> =
                pipe.query_async(&mut self.commands).await.map_err(WorkerError::redis("XPENDING delivery counts"))?;
            for v in replies {
                if let Some(row) = reply::pending_entries(&v)?.into_iter().next() {
                    counts.insert(row.id, row.deliveries);
                }
            }
        }
        let mut out = Vec::with_capacity(raw.len());
        for e in raw {
            let (Some(deliveries), Some(fields)) = (counts.get(&e.id), e.fields) else { continue };
            out.push(Entry { stream: c.stream.clone(), id: e.id, fields, deliveries: *deliveries });
        }
        Ok(out)
    }

    /// Hands queued entries back, waits for running handlers.
    async fn finish(&mut self) {
        let unstarted: Vec<Entry> = self.queue.drain(..).collect();
        if !unstarted.is_empty() && self.shared.features.xnack {
            let c = Arc::clone(&self.shared.config);
            let mut cmd = redis::cmd("XNACK");
            cmd.arg(&c.stream).arg(&c.group).arg("SILENT").arg("IDS").arg(unstarted.len());
            for e in &unstarted {
                cmd.arg(&e.id);
            }
            match cmd.query_async::<u64>(&mut self.commands).await {
                Ok(n) => {
                    tracing::info!(count = n, "returned unstarted entries to the group (XNACK SILENT)");
                    bump(&self.stats.returned, n);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "XNACK at shutdown failed; entries stay pending")
                }
            }
        } else if !unstarted.is_empty() {
            tracing::info!(
                count = unstarted.len(),
                "leaving unstarted entries pending for this consumer's next start or for reclaim"
            );
        }
        while let Some(done) = self.tasks.join_next().await {
            if let Err(e) = done {
                if e.is_panic() {
                    bump(&self.stats.failed, 1);
                }
            }
        }
        // Every handler is done: closing the last sender lets each acker send what it holds
        // and end.
        let (closed, _) = mpsc::unbounded_channel();
        drop(std::mem::replace(&mut self.acks, closed));
        while self.ackers.join_next().await.is_some() {}
    }
}

/// The most IDs one XACK carries.
const ACK_BATCH: usize = 1000;

/// Acks handled entries in batches: one `XACK s g id...` with every ID that arrived while the
/// previous XACK was on the wire, one XACK in flight at a time. An idle worker's ack goes out
/// at once; a busy one's acks shrink to one command per batch instead of one per entry (the
/// commands, their replies and their parsing were most of a handled entry's client CPU).
/// `handled` counts an entry once its XACK is answered, as before; a failed XACK counts its
/// entries `failed` and leaves them pending, to be delivered again.
async fn run_acker(
    config: Arc<WorkerConfig>,
    stats: Arc<WorkerStats>,
    meters: Meters,
    mut conn: Connection,
    mut rx: mpsc::UnboundedReceiver<String>,
) {
    let mut ids = Vec::new();
    while rx.recv_many(&mut ids, ACK_BATCH).await > 0 {
        let n = ids.len() as u64;
        let r = redis::cmd("XACK").arg(&config.stream).arg(&config.group).arg(&ids).query_async::<i64>(&mut conn).await;
        match r {
            Ok(_) => {
                bump(&stats.handled, n);
                meters.handled(n);
            }
            Err(e) => {
                tracing::warn!(count = n, error = %e, "ack failed; the entries will be delivered again");
                bump(&stats.failed, n);
                meters.failed(n);
            }
        }
        ids.clear();
    }
}

/// A stream ID as a sortable pair (an unparsable part counts as 0; IDs come from the server).
fn id_key(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// The entries of a read whose replies carry each entry's earlier deliveries (RILL.READGROUP,
/// XREADGROUP CLAIM): each with its deliveries counting this one, and how many had been
/// delivered before. An entry whose payload is gone is left out.
fn with_counts_given(stream: &str, raw: Vec<RawEntry>) -> (Vec<Entry>, u64) {
    let mut again = 0u64;
    let mut entries = Vec::with_capacity(raw.len());
    for e in raw {
        let Some(fields) = e.fields else { continue };
        let before = e.claimed.map_or(0, |(_, count)| count);
        if before > 0 {
            again += 1;
        }
        entries.push(Entry { stream: stream.to_string(), id: e.id, fields, deliveries: before.saturating_add(1) });
    }
    (entries, again)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

async fn connect_pair(target: &Target) -> Result<(Connection, Connection), WorkerError> {
    let reader = target.connect(None).await?;
    let commands = target.connect(None).await?;
    Ok((reader, commands))
}

/// Runs the handler for one entry and settles it: ack, dead-letter, or give back.
async fn process<H: Handler>(
    shared: &Shared<H>,
    mut conn: Connection,
    acks: &mpsc::UnboundedSender<String>,
    entry: Entry,
) {
    let c = &shared.config;
    let stats = &shared.stats;
    let server_policy = shared.uses_server_policy();
    if !server_policy && entry.deliveries > c.delivery_limit {
        let reason = format!(
            "delivered {} times, over the limit of {} (the handler never finished)",
            entry.deliveries, c.delivery_limit
        );
        dead_letter(shared, &mut conn, &entry, &reason).await;
        return;
    }
    let guard_key = c.idempotency_ttl.and_then(|_| c.guard_key(&entry.id).ok());
    if let Some(key) = &guard_key {
        match redis::cmd("EXISTS").arg(key).query_async::<i64>(&mut conn).await {
            Ok(1) => {
                tracing::debug!(id = %entry.id, "already handled (idempotency guard); acking");
                if ack(c, &mut conn, &entry.id, None).await.is_ok() {
                    bump(&stats.duplicates, 1);
                }
                return;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "idempotency guard check failed; entry stays pending");
                bump(&stats.failed, 1);
                return;
            }
        }
    }
    // What settling needs after the handler took the entry: the client-side loop keeps the
    // payload for a dead letter; with a server policy the server writes dead letters from its
    // own copy, so only the ID and the count are kept.
    let kept = if server_policy {
        Entry { stream: String::new(), id: entry.id.clone(), fields: Vec::new(), deliveries: entry.deliveries }
    } else {
        entry.clone()
    };
    let started = Instant::now();
    let result = shared.handler.handle(entry).await;
    let entry = kept;
    shared.meters.handler_latency(started.elapsed());
    match result {
        Ok(()) if guard_key.is_none() => {
            if acks.send(entry.id).is_err() {
                // No acker (it ended early): the entry stays pending and comes back.
                bump(&stats.failed, 1);
                shared.meters.failed(1);
            }
        }
        Ok(()) => match ack(c, &mut conn, &entry.id, guard_key.as_deref()).await {
            Ok(()) => {
                bump(&stats.handled, 1);
                shared.meters.handled(1);
            }
            Err(e) => {
                tracing::warn!(id = %entry.id, error = %e, "ack failed; the entry will be delivered again");
                bump(&stats.failed, 1);
                shared.meters.failed(1);
            }
        },
        Err(err) => {
            bump(&stats.failed, 1);
            shared.meters.failed(1);
            if server_policy {
                settle_with_policy(shared, &mut conn, &entry, &err).await;
                return;
            }
            match err.action {
                FailureAction::DeadLetter => dead_letter(shared, &mut conn, &entry, &err.reason).await,
                FailureAction::Retry if entry.deliveries >= c.delivery_limit => {
                    let reason = format!("delivery limit {} reached; last error: {}", c.delivery_limit, err.reason);
                    dead_letter(shared, &mut conn, &entry, &reason).await;
                }
                FailureAction::Retry => {
                    tracing::debug!(id = %entry.id, deliveries = entry.deliveries, reason = %err.reason, "handler asked for a retry");
                    if shared.features.xnack {
                        // FAIL keeps the delivery count and puts the entry at the head of
                        // the group's claim order, so any consumer retries it next.
                        let r = redis::cmd("XNACK")
                            .arg(&c.stream)
                            .arg(&c.group)
                            .arg("FAIL")
                            .arg("IDS")
                            .arg(1)
                            .arg(&entry.id)
                            .query_async::<i64>(&mut conn)
                            .await;
                        if let Err(e) = r {
                            tracing::warn!(error = %e, "XNACK FAIL failed; the entry waits for reclaim");
                        }
                    }
                }
            }
        }
    }
}

/// A failed entry on a group with a server policy: `XNACK FATAL` (the server dead-letters it,
/// reason `fatal`) or `RILL.NACK` (the server applies BACKOFF and MAXDELIVER). Nothing is
/// written to the dead-letter stream from here.
async fn settle_with_policy<H>(shared: &Shared<H>, conn: &mut Connection, entry: &Entry, err: &HandlerError) {
    let c = &shared.config;
    let max_deliver = shared.server_max_deliver.load(Ordering::Relaxed);
    // A policy without MAXDELIVER never ends retries; the worker's own limit does, by FATAL.
    let fatal = err.action == FailureAction::DeadLetter || (max_deliver == 0 && entry.deliveries >= c.delivery_limit);
    let mut cmd = if fatal {
        let mut cmd = redis::cmd("XNACK");
        cmd.arg(&c.stream).arg(&c.group).arg("FATAL");
        cmd
    } else {
        let mut cmd = redis::cmd("RILL.NACK");
        cmd.arg(&c.stream).arg(&c.group);
        cmd
    };
    cmd.arg("IDS").arg(1).arg(&entry.id);
    match cmd.query_async::<i64>(conn).await {
        Ok(n) if fatal && n > 0 => {
            tracing::warn!(id = %entry.id, reason = %err.reason, "handed to the server to dead-letter (XNACK FATAL)");
            bump(&shared.stats.dead_lettered, 1);
            shared.meters.dead_lettered();
        }
        Ok(_) => {
            tracing::debug!(id = %entry.id, deliveries = entry.deliveries, reason = %err.reason, "handed back (RILL.NACK)");
        }
        Err(e) => {
            tracing::warn!(id = %entry.id, error = %e, "NACK failed; the server hands the entry back after ACKWAIT");
        }
    }
}

/// XACK, or with the idempotency guard `MULTI; SET guard 1 NX PX ttl; XACK; EXEC`.
async fn ack(
    c: &WorkerConfig,
    conn: &mut Connection,
    id: &str,
    guard_key: Option<&str>,
) -> Result<(), redis::RedisError> {
    match (guard_key, c.idempotency_ttl) {
        (Some(key), Some(ttl)) => {
            let mut set = redis::cmd("SET");
            set.arg(key).arg(1).arg("NX").arg("PX").arg(millis(ttl).max(1));
            let mut xack = redis::cmd("XACK");
            xack.arg(&c.stream).arg(&c.group).arg(id);
            redis::pipe().atomic().add_command(set).add_command(xack).query_async::<Value>(conn).await.map(|_| ())
        }
        _ => redis::cmd("XACK").arg(&c.stream).arg(&c.group).arg(id).query_async::<i64>(conn).await.map(|_| ()),
    }
}

async fn dead_letter<H>(shared: &Shared<H>, conn: &mut Connection, entry: &Entry, reason: &str) {
    let c = &shared.config;
    let provenance = Provenance {
        stream: &c.stream,
        id: &entry.id,
        group: &c.group,
        consumer: &c.consumer,
        deliveries: entry.deliveries,
        reason,
    };
    match dlq::move_to_dead_letter(conn, &c.dead_letter_stream, &entry.fields, provenance).await {
        Ok((dlq_id, was_pending)) => {
            if !was_pending {
                // Another consumer reclaimed and settled it while this one held it: min-idle
                // is shorter than this handler took.
                tracing::warn!(id = %entry.id, "dead-lettered an entry that was no longer pending; raise min_idle");
            }
            tracing::warn!(id = %entry.id, dead_letter = %dlq_id, reason, "moved to the dead-letter stream");
            bump(&shared.stats.dead_lettered, 1);
            shared.meters.dead_lettered();
        }
        Err(e) => {
            tracing::error!(id = %entry.id, error = %e, "dead-lettering failed; the entry stays pending");
        }
    }
}
