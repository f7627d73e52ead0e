//! The primary's side of a replica link: what `REPLCONF` told us about a replica, the
//! `PSYNC` decision (continue from the backlog, or start over from a snapshot), and what the
//! connection's feed needs to send it (`conn/feed.rs`).
//!
//! ```text
//!  replica                         rill (this connection)
//!  REPLCONF listening-port 6380 ─► ReplConf (per connection)
//!  REPLCONF capa eof capa psync2 ─►
//!  PSYNC <replid> <offset+1> ────► decide(): Partial ─► +CONTINUE <replid>, then the backlog
//!                                            from the asked offset
//!                                  Full ─► +FULLRESYNC <replid> <offset>, the snapshot taken
//!                                          under the lock at that offset ($len or $EOF:), then
//!                                          the backlog from offset + 1
//!  REPLCONF ACK <offset> ◄──────► every second; the feed records it (INFO, ROLE, WAIT)
//! ```

use super::Replication;
use crate::journal::{Journal, LogSink};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What a connection said of itself with `REPLCONF` before it asked to sync.
#[derive(Debug, Default, Clone)]
pub struct ReplConf {
    /// `listening-port`: where the replica serves (INFO `slaveN:port`, ROLE).
    pub listening_port: u16,
    /// `ip-address`: what it announces, if anything (else its peer address is shown).
    pub ip_address: Option<String>,
    /// `capa eof`: it reads a snapshot sent with an end mark instead of a length.
    pub capa_eof: bool,
    /// `capa psync2`: it understands `+CONTINUE <new replid>`.
    pub capa_psync2: bool,
    /// `rdb-only 1`: it wants the snapshot and nothing after it (`redis-cli --rdb`).
    pub rdb_only: bool,
    /// `capa rill`: a rill replica, sent rill's record of each unit before its bytes
    /// (`backlog.rs`); Redis ignores the capability, so a rill replica can offer it to any
    /// primary.
    pub capa_rill: bool,
    /// `capa rdb-channel-repl` (honoured with `repl-rdb-channel yes` and `repl-diskless-sync
    /// yes`): a full sync goes over a second connection (its RDB channel), while this one, the
    /// main channel, carries the stream meanwhile.
    pub capa_rdb_channel: bool,
    /// `rdb-channel 1`: this connection is a replica's RDB channel.
    pub rdb_channel: bool,
    /// `main-ch-client-id <id>`: the main channel this RDB channel serves (one that was
    /// answered `+RDBCHANNELSYNC <id>` and waits).
    pub main_channel: Option<u64>,
}

/// Where a replica's link stands (INFO `state=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Its full sync waits for `repl-diskless-sync-delay` (`wait_bgsave`): nothing is taken
    /// yet, the replica gets a newline each second.
    Delayed,
    /// Its snapshot is being made, and sent as it is made when end-marked (`wait_bgsave`, as
    /// Redis shows a replica while its RDB child runs; INFO `rdb_bgsave_in_progress:1`).
    WaitBgsave,
    /// A snapshot made whole is being sent (`send_bulk`).
    SendBulk,
    /// A main channel answered `+RDBCHANNELSYNC`, waiting for its RDB channel to ask for the
    /// snapshot (`wait_bgsave`).
    WaitRdbChannel,
    /// A main channel streaming while its RDB channel carries the snapshot
    /// (`send_bulk_and_stream`).
    SendBulkAndStream,
    /// Streaming (`online`).
    Online,
}

impl LinkState {
    /// The word INFO's `slaveN:...,state=` shows.
    pub fn word(self) -> &'static str {
        match self {
            LinkState::Delayed | LinkState::WaitBgsave | LinkState::WaitRdbChannel => "wait_bgsave",
            LinkState::SendBulk => "send_bulk",
            LinkState::SendBulkAndStream => "send_bulk_and_stream",
            LinkState::Online => "online",
        }
    }
}

/// A replica's two connections while it syncs over an RDB channel (`repl-rdb-channel`):
///
/// ```text
///  main channel: PSYNC (full needed) ─► +RDBCHANNELSYNC <its id>     (state wait_bgsave)
///  RDB channel:  REPLCONF ... rdb-channel 1 main-ch-client-id <id>
///                PSYNC ? -1 ─► +FULLRESYNC, the snapshot ($EOF:), closed after it
///                  └─ in the same critical section the main channel gets the stream from
///                     the snapshot's offset on (send_bulk_and_stream); online once the
///                     snapshot is sent (or at its first ACK)
/// ```
///
/// The pair is one replica to INFO, ROLE and WAIT: only the main channel is in
/// `Replication::replicas`.
#[derive(Debug, Default)]
pub struct RdbChannels {
    /// Main channels waiting for their RDB channel: where to send the stream's first byte.
    pub waiting: BTreeMap<u64, MainChannel>,
    /// Open RDB channels, by client id: the main channel each serves.
    pub open: BTreeMap<u64, u64>,
    /// RDB channels whose full sync waits for `repl-diskless-sync-delay`, and since when
    /// (Unix ms): they start with the other replicas waiting.
    pub delayed: BTreeMap<u64, i64>,
}

/// A main channel waiting for its RDB channel.
#[derive(Debug)]
pub struct MainChannel {
    /// Hands the main channel's feed the stream's first byte after the snapshot.
    pub start: tokio::sync::oneshot::Sender<u64>,
    /// A rill replica (`capa rill` on the main channel): its stream carries rill's records.
    pub rill: bool,
}

/// One attached replica, as INFO, ROLE and WAIT see it.
#[derive(Debug, Clone)]
pub struct ReplicaLink {
    /// Its address as INFO shows it.
    pub ip: String,
    /// Its listening port.
    pub port: u16,
    /// Where the link stands.
    pub state: LinkState,
    /// The last offset it acknowledged (`REPLCONF ACK`).
    pub ack_offset: u64,
    /// The last offset it said its log holds on disk (`REPLCONF ACK .. FACK <offset>`).
    pub fack_offset: u64,
    /// When it last acknowledged, Unix ms (while it waits for its full sync: when it
    /// started waiting).
    pub ack_ms: i64,
}

/// Full and partial syncs served (INFO stats).
#[derive(Debug, Default, Clone, Copy)]
pub struct SyncStats {
    /// `sync_full`.
    pub full: u64,
    /// `sync_partial_ok`.
    pub partial_ok: u64,
    /// `sync_partial_err`.
    pub partial_err: u64,
}

/// How a `PSYNC` is answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// `+CONTINUE`: the stream from byte `from` on is in the backlog.
    Partial {
        /// The first byte to send.
        from: u64,
    },
    /// `+FULLRESYNC`: a snapshot, then the stream after it.
    Full,
}

/// Decide a `PSYNC replid offset`: a partial resync when the replica follows this history
/// (or the one it continues, up to where they part) and every byte from `offset` on is still
/// in the backlog; a full one otherwise (`PSYNC ? -1` always).
pub fn decide(r: &Replication, replid: &str, offset: i64) -> Decision {
    let ours = replid.eq_ignore_ascii_case(&r.replid);
    let previous = replid.eq_ignore_ascii_case(&r.replid2) && offset <= r.second_offset;
    let Ok(from) = u64::try_from(offset) else { return Decision::Full };
    if !(ours || previous) {
        return Decision::Full;
    }
    let held = r.with_backlog(|b| b.since(from).is_some()).unwrap_or(false);
    if held {
        Decision::Partial { from }
    } else {
        Decision::Full
    }
}

/// A replication directive in seconds, `default` while it is unset or not positive.
pub fn seconds(config: &crate::config::Config, name: &str, default: u64) -> u64 {
    u64::try_from(config.get_i64(name)).ok().filter(|s| *s > 0).unwrap_or(default)
}

/// A `WAIT` or `WAITAOF` waiting for copies of a client's last write.
#[derive(Debug, Clone)]
pub struct CopiesWait {
    /// The replication offset the replicas must have acknowledged.
    pub repl_offset: u64,
    /// The log offset the local log must have fsynced (`WAITAOF`).
    pub log_offset: u64,
    /// Local copies wanted: 0 or 1 (`WAITAOF numlocal`).
    pub local: usize,
    /// Replica copies wanted.
    pub replicas: usize,
    /// `WAITAOF`: replicas count by what their logs hold on disk; the reply is
    /// `[local, replicas]` rather than an integer.
    pub aof: bool,
    /// When to answer anyway, Unix ms (`None`: never).
    pub deadline_ms: Option<i64>,
    /// The command waiting (`WAIT` or `WAITAOF`).
    pub spec: &'static rill_engine::command::CommandSpec,
}

impl CopiesWait {
    /// The copies there are now: (local, replicas), asked of the journal's log and of the
    /// replicas' acknowledgements.
    pub fn count<L: LogSink>(&self, journal: &Journal<L>, r: &Replication) -> (usize, usize) {
        let local = if self.aof { journal.log_copies_at(self.log_offset) } else { 0 };
        (local, r.replicas_at(self.repl_offset, self.aof))
    }

    /// Whether the copies wanted exist.
    pub fn satisfied<L: LogSink>(&self, journal: &Journal<L>, r: &Replication) -> bool {
        let (local, replicas) = self.count(journal, r);
        local >= self.local && replicas >= self.replicas
    }

    /// The reply, with the copies there are now.
    pub fn reply<L: LogSink>(&self, journal: &Journal<L>, r: &Replication) -> rill_resp::Reply {
        let (local, replicas) = self.count(journal, r);
        let n = |x: usize| rill_resp::Reply::Integer(i64::try_from(x).unwrap_or(i64::MAX));
        if self.aof {
            rill_resp::Reply::Array(vec![n(local), n(replicas)])
        } else {
            n(replicas)
        }
    }
}

/// What a connection that became a replica's link needs to feed it.
#[derive(Debug)]
pub struct Feed {
    /// The snapshot to send first (a full sync); the stream continues after it at `from`.
    pub snapshot: Option<crate::aof::snapshot::ReplicaSnapshot>,
    /// The first byte of the stream to send.
    pub from: u64,
    /// Send the snapshot with an end mark (`$EOF:`), not a length.
    pub eof_mark: bool,
    /// The backlog to read the stream from.
    pub backlog: Arc<Mutex<super::backlog::Backlog>>,
    /// The stream's end, as it grows.
    pub grown: super::Grown,
    /// Close after the snapshot (`REPLCONF rdb-only 1`).
    pub rdb_only: bool,
    /// A rill replica: send rill's records too (`REPLCONF capa rill`).
    pub rill: bool,
    /// A full sync that waits for `repl-diskless-sync-delay` before its snapshot is taken
    /// (`snapshot` and `from` are set then); `Some(true)`: it answers a PSYNC, so
    /// `+FULLRESYNC` goes out then too.
    pub delayed: Option<bool>,
    /// A main channel answered `+RDBCHANNELSYNC`: its stream starts at the byte this hands
    /// over once its RDB channel's snapshot is taken.
    pub awaits_rdb_channel: Option<tokio::sync::oneshot::Receiver<u64>>,
    /// An RDB channel: the main channel it serves (online once the snapshot is sent; dropped
    /// if it fails).
    pub main_channel: Option<u64>,
}
