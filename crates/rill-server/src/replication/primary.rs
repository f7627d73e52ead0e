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
    /// Streaming (`online`).
    Online,
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
    pub snapshot: Option<crate::aof::rewrite::ReplicaSnapshot>,
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
}
