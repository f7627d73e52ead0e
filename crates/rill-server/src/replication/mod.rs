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
pub mod failover;
pub mod forms;
pub mod primary;

use crate::journal::{Journal, LogSink, Progress, Sink};
use backlog::Backlog;
use bytes::{Bytes, BytesMut};
use rill_engine::effect::EffectBuf;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// A primary's replication state: which history its stream belongs to and, once a replica
/// has attached, the backlog.
#[derive(Debug)]
pub struct Replication {
    /// The 40-hex ID of this stream's history (`master_replid`): a new one at every start; a
    /// replica restarted cleanly takes back the one it followed ([`identity`]).
    pub replid: String,
    /// The history this one continues (`master_replid2`): 40 zeros when none.
    pub replid2: String,
    /// The last offset of `replid2`'s history that this one shares (`second_repl_offset`), -1
    /// when none.
    pub second_offset: i64,
    /// `master_repl_offset` while there is no backlog: 0, or the offset kept across a clean
    /// restart ([`identity`]), which the backlog continues from when it is made.
    pub base_offset: u64,
    /// On a replica, the database the primary's stream selected last (Redis'
    /// `repl-stream-db`): the primary's client runs in it when the link comes back, since a
    /// continued stream does not select it again. Kept across a clean restart.
    pub stream_db: usize,
    /// On a replica, whether the primary's stream stopped inside a `MULTI` whose `EXEC` has
    /// not arrived: the offset then counts queued commands that are not in the data, and is
    /// not kept across a restart.
    pub stream_in_transaction: bool,
    /// The backlog: made when the first replica attaches, as Redis makes it, so a server with
    /// no replica records nothing for one. Behind its own lock: replica connections will copy
    /// from it without holding the state lock.
    pub backlog: Option<Arc<Mutex<Backlog>>>,
    /// `master_repl_offset` after every unit the backlog took: what a replica's feed waits on
    /// for more of the stream (made with the backlog).
    pub grown: Option<Grown>,
    /// The replicas attached, by client id.
    pub replicas: BTreeMap<u64, primary::ReplicaLink>,
    /// `sync_full`, `sync_partial_ok`, `sync_partial_err` of INFO stats.
    pub syncs: primary::SyncStats,
    /// When the cron last put a PING in the stream, Unix ms.
    pub last_ping_ms: i64,
    /// The primary this server replicates (`REPLICAOF host port`), if any.
    pub master: Option<MasterLink>,
    /// Woken when a replica acknowledges an offset: clients in `WAIT`/`WAITAOF` look again.
    pub acked: Arc<tokio::sync::Notify>,
    /// Replicas syncing over an RDB channel (`repl-rdb-channel`): main channels waiting for
    /// theirs, and the RDB channels open.
    pub rdb_channels: primary::RdbChannels,
    /// `DEBUG REPL-PAUSE`: where a replica's sync stops this process for a test to look.
    pub debug_pause: DebugPause,
    /// Counts `REPLICAOF` changes: a link task whose number is no longer current ends.
    pub link_generation: u64,
    /// A `FAILOVER` under way (`master_failover_state`).
    pub failover: failover::Failover,
    /// Since when (Unix ms) this server is a primary without replicas: `repl-backlog-ttl`
    /// counts from there ([`Replication::expire_backlog`]); 0 until the cron first looks.
    pub no_replicas_since_ms: i64,
    /// A link's disconnection times kept while this server follows no primary (`REPLICAOF NO
    /// ONE`): Redis counts them server-wide, so following one again continues them
    /// (`total_disconnect_time_sec`). The seconds counted, and since when (Unix ms, 0: none)
    /// the disconnection under way runs.
    pub unlinked_disconnect: (i64, i64),
    /// Set when the backlog is freed: its journal sink is then dropped.
    backlog_freed: Arc<AtomicBool>,
    /// `lazyfree-lazy-server-del`, shared with the backlog's journal sink.
    lazy_server_del: Arc<AtomicBool>,
}

/// `DEBUG REPL-PAUSE` points, as in Redis: this process stops itself (SIGSTOP) there, and a
/// test resumes it (SIGCONT) once it has looked at what the other side sees meanwhile.
#[derive(Debug, Default, Clone, Copy)]
pub struct DebugPause {
    /// `before-rdb-channel`: a replica's RDB channel, set up, before it asks for the snapshot.
    pub before_rdb_channel: bool,
    /// `on-streaming-repl-buf`: each batch of the stream a replica buffered during a full sync
    /// over an RDB channel, as it applies it.
    pub on_streaming_buffer: bool,
}

/// Stop this process here (SIGSTOP) until something continues it, logged as Redis logs it.
pub fn debug_stop() {
    tracing::info!("Process is about to stop.");
    if let Err(e) = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::STOP) {
        tracing::warn!("the process could not stop itself: {e}");
    }
    // A signal to the process may be taken by another of its threads, and this one go on a
    // little before the stop reaches it: it waits here, so nothing after this point runs
    // before the process has stopped (and been continued).
    std::thread::sleep(std::time::Duration::from_millis(100));
    tracing::info!("Process has been continued.");
}

/// The stream a replica's main channel buffers while its snapshot arrives over an RDB
/// channel (`repl-rdb-channel`; INFO `replica_full_sync_buffer_size` and `_peak`), counted
/// without the state lock.
#[derive(Debug, Default)]
pub struct SyncBuffer {
    /// Bytes buffered now.
    pub size: std::sync::atomic::AtomicU64,
    /// The most buffered at once.
    pub peak: std::sync::atomic::AtomicU64,
}

/// A replica's view of its primary (INFO, ROLE).
#[derive(Debug, Clone)]
pub struct MasterLink {
    /// `master_host`.
    pub host: String,
    /// `master_port`.
    pub port: u16,
    /// Where the link stands.
    pub state: LinkStatus,
    /// When something was last read from the primary, Unix ms.
    pub last_io_ms: i64,
    /// When the link, once up, went down, Unix ms (`master_link_down_since_seconds`; 0: it
    /// has not been up with this primary, -1 then, as Redis shows it).
    pub down_since_ms: i64,
    /// When the link came up, Unix ms (`master_link_up_since_seconds`; 0 while down).
    pub up_since_ms: i64,
    /// Connection attempts to this primary (`master_total_sync_attempts`), and those since
    /// the link was last up (`master_current_sync_attempts`), counted as each starts.
    pub sync_attempts: u64,
    pub current_sync_attempts: u64,
    /// When the link was last lost or a transfer failed, Unix ms, until it is up again (0:
    /// not disconnected), and the seconds of the periods ended so far
    /// (`total_disconnect_time_sec`, with the time since `down_since_ms`).
    pub disconnect_start_ms: i64,
    pub total_disconnect_secs: i64,
    /// The snapshot being received: its length (-1 until the primary said, 0 for an
    /// end-marked one, as Redis counts them), and the bytes read so far and when last.
    pub transfer_size: i64,
    pub transfer: Arc<TransferProgress>,
    /// Bytes of the primary's stream read and not applied yet (a transaction whose `EXEC` has
    /// not come, a unit whose bytes are arriving, what a paused replica holds): with the
    /// offset, `slave_read_repl_offset`.
    pub read_ahead: u64,
    /// The stream buffered during a full sync over an RDB channel.
    pub sync_buffer: Arc<SyncBuffer>,
}

/// How far the snapshot being received has come: updated by the link's task as it reads,
/// without the state lock (a busy script on the replica holds that lock while the link goes
/// on reading), read by INFO.
#[derive(Debug, Default)]
pub struct TransferProgress {
    /// Bytes of the payload read so far.
    pub read: std::sync::atomic::AtomicU64,
    /// When something was last read, Unix ms (0: nothing yet).
    pub last_io_ms: std::sync::atomic::AtomicI64,
}

impl TransferProgress {
    /// `n` more bytes read at `now_ms`.
    pub fn add(&self, n: u64, now_ms: i64) {
        self.read.fetch_add(n, Ordering::Relaxed);
        self.last_io_ms.store(now_ms, Ordering::Relaxed);
    }
}

impl MasterLink {
    /// A link to `host:port` about to make its first attempt.
    pub fn new(host: String, port: u16) -> MasterLink {
        MasterLink {
            host,
            port,
            state: LinkStatus::Connecting,
            last_io_ms: 0,
            down_since_ms: 0,
            up_since_ms: 0,
            sync_attempts: 0,
            current_sync_attempts: 0,
            disconnect_start_ms: 0,
            total_disconnect_secs: 0,
            transfer_size: -1,
            transfer: Arc::default(),
            read_ahead: 0,
            sync_buffer: Arc::default(),
        }
    }

    /// Move to `state` at `now_ms`, keeping the link's times as Redis keeps them: coming up
    /// ends a disconnection; an up link going down starts one; a transfer that fails starts
    /// one if none is running.
    pub fn set_state(&mut self, state: LinkStatus, now_ms: i64) {
        let was = self.state;
        if state == LinkStatus::Connected && was != LinkStatus::Connected {
            self.down_since_ms = 0;
            self.up_since_ms = now_ms;
            if self.disconnect_start_ms != 0 {
                self.total_disconnect_secs += now_ms / 1000 - self.disconnect_start_ms / 1000;
                self.disconnect_start_ms = 0;
            }
        } else if state != LinkStatus::Connected && was == LinkStatus::Connected {
            self.down_since_ms = now_ms;
            self.up_since_ms = 0;
            self.current_sync_attempts = 0;
            if self.disconnect_start_ms == 0 {
                self.disconnect_start_ms = now_ms;
            }
        } else if was == LinkStatus::Sync && state != LinkStatus::Sync && self.disconnect_start_ms == 0 {
            self.disconnect_start_ms = now_ms;
        }
        self.state = state;
    }

    /// A connection attempt starts.
    pub fn attempt(&mut self) {
        self.sync_attempts += 1;
        self.current_sync_attempts += 1;
        self.transfer_size = -1;
        self.transfer = Arc::default();
    }

    /// `total_disconnect_time_sec` at `now_ms`.
    pub fn total_disconnect_secs(&self, now_ms: i64) -> i64 {
        let current = if self.down_since_ms > 0 { now_ms / 1000 - self.down_since_ms / 1000 } else { 0 };
        self.total_disconnect_secs + current
    }
}

/// A replica link's state, as ROLE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkStatus {
    /// `connect` / `connecting`: no connection yet.
    Connecting,
    /// `handshake`: the handshake and PSYNC.
    Handshake,
    /// `sync`: receiving and loading the snapshot.
    Sync,
    /// `connected`: applying the stream.
    Connected,
}

impl LinkStatus {
    /// The word ROLE uses.
    pub fn role_word(self) -> &'static str {
        match self {
            LinkStatus::Connecting => "connecting",
            LinkStatus::Handshake => "handshake",
            LinkStatus::Sync => "sync",
            LinkStatus::Connected => "connected",
        }
    }
}

impl Replication {
    /// A new history with ID `replid`, no backlog.
    pub fn new(replid: String) -> Replication {
        Replication {
            replid,
            replid2: "0".repeat(40),
            second_offset: -1,
            base_offset: 0,
            stream_db: 0,
            stream_in_transaction: false,
            backlog: None,
            grown: None,
            replicas: BTreeMap::new(),
            syncs: primary::SyncStats::default(),
            last_ping_ms: 0,
            master: None,
            acked: Arc::new(tokio::sync::Notify::new()),
            rdb_channels: primary::RdbChannels::default(),
            debug_pause: DebugPause::default(),
            link_generation: 0,
            failover: failover::Failover::default(),
            no_replicas_since_ms: 0,
            unlinked_disconnect: (0, 0),
            backlog_freed: Arc::new(AtomicBool::new(false)),
            lazy_server_del: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether a reply that only read must wait until what it read is safe in this server's
    /// log (`Journal::reply_wait`, and a blocked reader served). Not on a replica: what it
    /// serves came from its primary, which holds it; its own log is for its restart (which
    /// resyncs if the log lost it), so its readers do not wait for it — above all not while
    /// the log's base is written after a full sync, which takes as long as encoding the whole
    /// dataset. Its clients' own writes (`replica-read-only no`) still wait.
    pub fn reads_wait_for_log(&self) -> bool {
        self.master.is_none()
    }

    /// `master_repl_offset`: the last byte of the stream (`base_offset` while there is no
    /// backlog).
    pub fn offset(&self) -> u64 {
        self.with_backlog(|b| b.offset()).unwrap_or(self.base_offset)
    }

    /// `f` of the backlog, if there is one.
    pub fn with_backlog<T>(&self, f: impl FnOnce(&Backlog) -> T) -> Option<T> {
        let backlog = self.backlog.as_ref()?.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(f(&backlog))
    }

    /// How many replicas acknowledged everything up to `offset` (`WAIT`): with `fsynced`,
    /// how many said their log holds it on disk (`WAITAOF`, from `REPLCONF ACK .. FACK ..`).
    pub fn replicas_at(&self, offset: u64, fsynced: bool) -> usize {
        self.replicas
            .values()
            .filter(|l| l.state == primary::LinkState::Online)
            .filter(|l| if fsynced { l.fack_offset >= offset } else { l.ack_offset >= offset })
            .count()
    }

    /// Replicas online whose last ACK is at most `max_lag_secs` old: what
    /// `min-replicas-to-write` counts.
    pub fn good_replicas(&self, now_ms: i64, max_lag_secs: i64) -> usize {
        self.replicas
            .values()
            .filter(|l| l.state == primary::LinkState::Online && (now_ms - l.ack_ms) / 1000 <= max_lag_secs)
            .count()
    }

    /// Leave the history followed so far for a new one, keeping the old one as `replid2` up to
    /// the current offset: what a replica promoted to primary does, so that the other replicas
    /// of the old primary continue from it partially.
    pub fn shift_replid(&mut self, new_replid: String) {
        self.replid2 = std::mem::replace(&mut self.replid, new_replid);
        self.second_offset = i64::try_from(self.offset()).unwrap_or(i64::MAX) + 1;
    }

    /// `DEBUG CHANGE-REPL-ID`: a new history ID and none before it (`replid2` cleared), so
    /// the next PSYNC of any replica, whatever it followed, is answered with a full sync.
    pub fn change_replid(&mut self, replid: String) {
        self.replid = replid;
        self.replid2 = "0".repeat(40);
        self.second_offset = -1;
    }

    /// Start following history `replid` at `offset` (a full sync from a primary): the backlog
    /// starts empty there, and the replicas of this server resync.
    pub fn restart_at(&mut self, replid: String, offset: u64) {
        self.replid = replid;
        self.replid2 = "0".repeat(40);
        self.second_offset = -1;
        self.base_offset = offset;
        // The stream after a full sync selects its database first.
        self.stream_db = 0;
        self.stream_in_transaction = false;
        if let Some(b) = &self.backlog {
            b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).reset(offset);
        }
    }

    /// The backlog, made now if there is none (of `size` bytes, continuing the stream's offset)
    /// and fed by `journal` from its next committed unit on: what attaching the first replica
    /// does.
    /// `lazyfree-lazy-server-del`: the backlog sends the server's own deletions as `UNLINK`.
    pub fn set_lazy_server_del(&self, on: bool) {
        self.lazy_server_del.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn start_backlog<L: LogSink>(&mut self, journal: &mut Journal<L>, size: usize) -> Arc<Mutex<Backlog>> {
        if let Some(b) = &self.backlog {
            return b.clone();
        }
        let backlog = Arc::new(Mutex::new(Backlog::new(size, self.offset())));
        let (tx, rx) = watch::channel(self.offset());
        let unseen = Arc::new(AtomicBool::new(false));
        let (grown, rx) = (GrowTeller { tx, unseen: unseen.clone() }, Grown { rx, unseen });
        self.backlog_freed = Arc::new(AtomicBool::new(false));
        journal.add_sink(Box::new(BacklogSink {
            backlog: backlog.clone(),
            grown,
            relaying: self.master.is_some(),
            freed: self.backlog_freed.clone(),
            lazy_server_del: self.lazy_server_del.clone(),
            records: BytesMut::new(),
            record_scratch: Vec::new(),
        }));
        self.backlog = Some(backlog.clone());
        self.grown = Some(rx);
        backlog
    }
}

impl Replication {
    /// The backlog for a replica attaching (`PSYNC`, `SYNC`): made now if there is none, and
    /// then, on a primary, in a new history (a new ID, replid2 cleared), as Redis makes it: the
    /// offset has not counted the writes made without a backlog, so no replica may continue
    /// the old ID from it (one that followed this server before a `repl-backlog-ttl` free).
    pub fn backlog_for_replica<L: LogSink>(
        &mut self,
        journal: &mut Journal<L>,
        size: usize,
        new_replid: impl FnOnce() -> String,
    ) -> Arc<Mutex<Backlog>> {
        if self.backlog.is_none() && self.master.is_none() {
            self.replid = new_replid();
            self.replid2 = "0".repeat(40);
            self.second_offset = -1;
        }
        self.start_backlog(journal, size)
    }

    /// `repl-backlog-ttl` (Redis' rule, run by the cron): a primary that has had a backlog and
    /// no replica for more than `ttl_secs` seconds (0: never) frees the backlog. The stream's
    /// offset then stays where it is until a replica makes a new backlog, so the history gets
    /// a new ID and forgets `replid2` (a replica of the old ID would otherwise continue across
    /// writes it never got): a replica that comes back syncs fully. A replica never frees its
    /// backlog (it may be promoted), and a promoted one counts from its promotion. Returns
    /// whether it freed the backlog.
    pub fn expire_backlog<L: LogSink>(
        &mut self,
        journal: &mut Journal<L>,
        now_ms: i64,
        ttl_secs: i64,
        new_replid: impl FnOnce() -> String,
    ) -> bool {
        if !self.replicas.is_empty() || self.master.is_some() || self.no_replicas_since_ms == 0 {
            self.no_replicas_since_ms = now_ms;
            return false;
        }
        // Whole seconds, compared as Redis compares its `unixtime`s.
        let idle = now_ms.div_euclid(1000) - self.no_replicas_since_ms.div_euclid(1000);
        if ttl_secs <= 0 || self.backlog.is_none() || idle <= ttl_secs {
            return false;
        }
        self.base_offset = self.offset();
        self.backlog = None;
        self.grown = None;
        self.backlog_freed.store(true, Ordering::Relaxed);
        journal.drop_closed_sinks();
        self.replid = new_replid();
        self.replid2 = "0".repeat(40);
        self.second_offset = -1;
        true
    }
}

/// What a replica's feed waits on for more of the stream: woken when the stream has grown
/// since it last woke (the stream's end, `master_repl_offset`, is the backlog's to read).
#[derive(Debug, Clone)]
pub struct Grown {
    rx: watch::Receiver<u64>,
    /// Shared with the sink's [`GrowTeller`]: the stream grew after the feeds were last told,
    /// and no feed has woken for it yet.
    unseen: Arc<AtomicBool>,
}

impl Grown {
    /// Wait until the stream grows; an error once it has ended (the backlog is gone). The
    /// feed reads the backlog after this returns: everything a unit added before the wake is
    /// there, and a unit added after it wakes the feeds again.
    pub async fn changed(&mut self) -> Result<(), watch::error::RecvError> {
        let r = self.rx.changed().await;
        self.unseen.store(false, Ordering::SeqCst);
        r
    }
}

/// The sink's side of [`Grown`]: wakes the feeds once per run of units rather than once per
/// unit (a pipelined client commits one unit per command, and each wake-up costs the primary
/// more than the unit's own bytes): a unit that grows the stream while the feeds have not yet
/// woken for an earlier one adds nothing to do, since each feed reads the backlog to its end
/// once awake.
#[derive(Debug)]
struct GrowTeller {
    tx: watch::Sender<u64>,
    unseen: Arc<AtomicBool>,
}

impl GrowTeller {
    fn tell(&self, end: u64) {
        if !self.unseen.swap(true, Ordering::SeqCst) {
            self.tx.send_replace(end);
        }
    }
}

/// The journal sink that writes each committed unit into the backlog, in Redis' forms, and
/// tells the replicas' feeds how far the stream now goes.
#[derive(Debug)]
struct BacklogSink {
    backlog: Arc<Mutex<Backlog>>,
    grown: GrowTeller,
    /// A replica: the stream is the primary's, relayed; applied units are not added.
    relaying: bool,
    /// The backlog was freed ([`Replication::expire_backlog`]): this sink is done.
    freed: Arc<AtomicBool>,
    /// `lazyfree-lazy-server-del` ([`Replication::set_lazy_server_del`]).
    lazy_server_del: Arc<AtomicBool>,
    /// Where units' records are made: each is a slice of a block shared with the records
    /// made before it ([`RECORD_BLOCK_BYTES`]), not an allocation of its own (the backlog
    /// keeps a record per unit and drops the oldest as it goes).
    records: BytesMut,
    /// Where a record is encoded before it is copied into its block.
    record_scratch: Vec<u8>,
}

/// Size of the blocks units' records are made in.
const RECORD_BLOCK_BYTES: usize = 64 << 10;

/// A copy of `body` in the current block of `blocks` (a new block if it has no room; a big
/// record is an allocation of its own).
fn block_copy(blocks: &mut BytesMut, body: &[u8]) -> Bytes {
    if body.len() > RECORD_BLOCK_BYTES / 4 {
        return Bytes::copy_from_slice(body);
    }
    if blocks.capacity() < body.len() {
        *blocks = BytesMut::with_capacity(RECORD_BLOCK_BYTES);
    }
    blocks.extend_from_slice(body);
    blocks.split().freeze()
}

impl BacklogSink {
    fn lock(&self) -> std::sync::MutexGuard<'_, Backlog> {
        self.backlog.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Progress for BacklogSink {
    /// `master_repl_offset`.
    fn end(&self) -> u64 {
        self.lock().offset()
    }

    /// The replicas that acknowledged `offset` (none attach yet).
    fn copies_at(&self, _offset: u64) -> usize {
        0
    }
}

impl BacklogSink {
    /// Append a committed unit to the backlog, in `MULTI`/`EXEC` if `transaction` and it has
    /// more than one command.
    fn take_unit(&mut self, time_ms: i64, unit: &EffectBuf, transaction: bool) {
        if self.relaying {
            return;
        }
        let mut backlog = self.backlog.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        backlog.lazy_server_del = self.lazy_server_del.load(std::sync::atomic::Ordering::Relaxed);
        let (blocks, body) = (&mut self.records, &mut self.record_scratch);
        let mut record = || {
            body.clear();
            rill_engine::effect::encode_record_buf(body, time_ms, unit);
            block_copy(blocks, body)
        };
        // The common unit, commands that go as they were recorded (one XADD): their forms are
        // written straight from the unit's buffer, and the record made only for a rill replica.
        if let Some(commands) = unit
            .commands_in_place()
            .filter(|c| c.clone().all(|(_, mut args)| args.next().is_some_and(forms::as_recorded)))
        {
            backlog.append_unit_in_place(commands, transaction, record);
            let end = backlog.offset();
            drop(backlog);
            self.grown.tell(end);
            return;
        }
        // rill's record of the unit, made once: its effects are decoded as slices of it (no
        // copy per argument) for Redis' forms, and it is what a rill replica is sent.
        let body = record();
        let written = rill_engine::effect::decode_record_shared(body.clone()).map_err(|e| e.to_string()).and_then(
            |(_, effects)| backlog.append_unit(&effects, time_ms, transaction, || body).map_err(|e| e.to_string()),
        );
        if let Err(why) = written {
            // Only a record read back from an old log can lack a Redis form, and units here are
            // live: this is a bug, and the replicas' copy would now differ.
            tracing::error!("a journal unit could not enter the replication backlog: {why}");
        }
        let end = backlog.offset();
        drop(backlog);
        self.grown.tell(end);
    }
}

impl Sink for BacklogSink {
    fn commit(&mut self, time_ms: i64, unit: &EffectBuf) {
        self.take_unit(time_ms, unit, true);
    }

    fn commit_apart(&mut self, time_ms: i64, unit: &EffectBuf) {
        self.take_unit(time_ms, unit, false);
    }

    fn stream_only(&mut self, args: &[Bytes]) {
        if self.relaying {
            // A replica's stream is its primary's, byte for byte.
            return;
        }
        let mut backlog = self.lock();
        let mut bytes = Vec::new();
        forms::encode_command(&mut bytes, args);
        backlog.append(&bytes);
        let end = backlog.offset();
        drop(backlog);
        self.grown.tell(end);
    }

    fn new_reader(&mut self) {
        self.lock().forget_selected();
    }

    fn set_relaying(&mut self, relaying: bool) {
        self.relaying = relaying;
        // Whatever the relayed stream selected last, the next unit says its database.
        self.lock().forget_selected();
    }

    fn closed(&self) -> bool {
        self.freed.load(Ordering::Relaxed)
    }

    fn relay_record(&mut self, len: u64, body: &Bytes) {
        if !self.relaying {
            return;
        }
        let mut backlog = self.backlog.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Kept only for a rill replica of this one; copied into a block of records, not held
        // as a slice of the link's input (which would keep each read buffer alive as long).
        if backlog.keeps_records() {
            backlog.add_record(len, block_copy(&mut self.records, body));
        }
        let end = backlog.offset();
        drop(backlog);
        if len == 0 {
            // No bytes follow to wake the feeds.
            self.grown.tell(end);
        }
    }

    fn relay(&mut self, bytes: &[u8]) {
        if !self.relaying {
            return;
        }
        let mut backlog = self.lock();
        backlog.append(bytes);
        let end = backlog.offset();
        drop(backlog);
        self.grown.tell(end);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::client::{Action, Conn};
    use crate::state::{Shared, State};
    use bytes::Bytes;
    use rill_resp::Reply;

    fn run(shared: &Shared, conn: &mut Conn, line: &str, now_ms: i64) -> Reply {
        let mut args: Vec<Bytes> = line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let mut st = shared.lock();
        match crate::dispatch::execute(shared, &mut st, conn, &mut args, now_ms) {
            Action::Reply(r) | Action::AwaitFreed(_, r) => r,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn the_backlog_starts_recording_when_made_and_holds_the_redis_forms() {
        let st = State::new(crate::config::Config::default());
        let shared = Shared::new(st, crate::cmd::table(), crate::cmd::table(), 0, "0".repeat(40));
        let mut conn = Conn::new(1, true);
        run(&shared, &mut conn, "SET before v", 1_000);
        let backlog = {
            let mut st = shared.lock();
            assert!(!st.journal.recording(), "no log, no replica: nothing is recorded");
            let st = &mut *st;
            st.replication.start_backlog(&mut st.journal, 1 << 20)
        };
        assert!(shared.lock().journal.recording());
        run(&shared, &mut conn, "SET k v", 2_000);
        run(&shared, &mut conn, "XADD s * f v", 3_000);
        run(&shared, &mut conn, "GET k", 4_000);
        let mut want = Vec::new();
        let mut stream = forms::Stream::new();
        let set = |s: &str| s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect::<Vec<_>>();
        stream.encode(&[(0, set("SET k v"))], true, &mut want);
        stream.encode(&[(0, set("XADD s 3000-0 f v"))], true, &mut want);
        let b = backlog.lock().unwrap();
        let (x, y) = b.since(1).unwrap();
        assert_eq!([x, y].concat(), want, "{}", String::from_utf8_lossy(&[x, y].concat()));
        assert_eq!(b.offset(), want.len() as u64);
        drop(b);
        let st = shared.lock();
        assert_eq!(st.replication.offset(), want.len() as u64);
        let info = crate::info::render(&shared, &st, &["replication".to_string()], 5_000);
        assert!(info.contains("repl_backlog_active:1\r\n"), "{info}");
        assert!(info.contains(&format!("master_repl_offset:{}\r\n", want.len())), "{info}");
        assert!(info.contains("repl_backlog_first_byte_offset:1\r\n"), "{info}");
    }

    #[test]
    fn repl_backlog_ttl_frees_the_backlog_of_a_primary_left_without_replicas() {
        let st = State::new(crate::config::Config::default());
        let shared = Shared::new(st, crate::cmd::table(), crate::cmd::table(), 0, "0".repeat(40));
        let t0 = 1_000_000;
        let mut st = shared.lock();
        let st = &mut *st;
        let r = &mut st.replication;
        r.start_backlog(&mut st.journal, 1 << 20);
        let id = || "1".repeat(40);
        // The first look starts the count; the idle time must pass the ttl, in whole seconds.
        assert!(!r.expire_backlog(&mut st.journal, t0, 1, id));
        assert!(!r.expire_backlog(&mut st.journal, t0 + 1_999, 1, id));
        // 0: never.
        assert!(!r.expire_backlog(&mut st.journal, t0 + 60_000, 0, id));
        // A replica never frees its own; once promoted, the count starts again.
        r.master = Some(MasterLink { state: LinkStatus::Connected, ..MasterLink::new("h".into(), 1) });
        assert!(!r.expire_backlog(&mut st.journal, t0 + 60_000, 1, id));
        r.master = None;
        assert!(!r.expire_backlog(&mut st.journal, t0 + 61_000, 1, id));
        r.replid2 = "2".repeat(40);
        r.second_offset = 5;
        assert!(r.expire_backlog(&mut st.journal, t0 + 62_000, 1, id));
        assert!(r.backlog.is_none() && !st.journal.recording(), "the backlog's sink is gone");
        assert_eq!((r.replid.as_str(), r.replid2.as_str(), r.second_offset), (&*"1".repeat(40), &*"0".repeat(40), -1));
    }
}
