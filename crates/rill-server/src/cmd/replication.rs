//! The primary's replication commands: `REPLCONF`, `PSYNC`, `SYNC` (spec/replication.md §2).
//! A `PSYNC` or `SYNC` that is accepted turns the connection into the replica's link: the
//! handler answers with [`Action::Replica`], and the connection feeds the replica from then on
//! (`conn/feed.rs`) instead of reading requests.

use super::{ok, reply, syntax, Call, CmdResult};
use crate::client::Action;
use crate::handover as failover;
use crate::replication::failover::Phase;
use crate::replication::primary::{decide, CopiesWait, Decision, Feed, LinkState, ReplicaLink};
use crate::state::State;
use rill_engine::util::parse_i64;
use rill_engine::CmdError;
use rill_resp::Reply;

/// `REPLCONF option value [option value ...]`: what a replica says of itself before it syncs.
/// `ACK` and `GETACK` get no reply, as from Redis (a replica's link reads its `ACK`s itself).
pub fn replconf(c: &mut Call) -> CmdResult {
    if c.args.len().is_multiple_of(2) {
        return Err(syntax());
    }
    let mut conf = c.conn.repl.clone();
    for pair in c.args.get(1..).unwrap_or_default().chunks(2) {
        let [option, value] = pair else { return Err(syntax()) };
        match option.to_ascii_lowercase().as_slice() {
            b"listening-port" => {
                let port = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
                // Redis keeps whatever number it is given; a port outside u16 shows as 0.
                conf.listening_port = u16::try_from(port).unwrap_or(0);
            }
            b"ip-address" => {
                // NET_HOST_STR_LEN in Redis: 256 bytes with the terminator.
                if value.len() >= 256 {
                    return Err(CmdError::owned(format!(
                        "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                        value.len()
                    )));
                }
                conf.ip_address = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"capa" => match value.to_ascii_lowercase().as_slice() {
                b"eof" => conf.capa_eof = true,
                b"psync2" => conf.capa_psync2 = true,
                b"rill" => conf.capa_rill = true,
                // Only while this server would serve it (Redis' test, at this moment).
                b"rdb-channel-repl" => {
                    conf.capa_rdb_channel =
                        c.st.config.get("repl-rdb-channel") == "yes" && c.st.config.get("repl-diskless-sync") == "yes";
                }
                // Unknown capabilities are ignored: a newer replica offers more than we use.
                _ => {}
            },
            b"ack" | b"getack" => return Ok(Action::Nothing),
            b"rdb-only" => conf.rdb_only = flag(value)?,
            b"rdb-channel" => conf.rdb_channel = flag(value)?,
            // Asks for a payload without compression or checksum: rill's payloads are not
            // compressed; the checksum stays (every reader takes one).
            b"rdb-no-compress" | b"rdb-no-checksum" => {
                flag(value)?;
            }
            b"main-ch-client-id" => {
                let id = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
                let waiting = u64::try_from(id).is_ok_and(|id| c.st.replication.rdb_channels.waiting.contains_key(&id));
                if !waiting {
                    return Err(CmdError::owned(format!("ERR Unrecognized RDB client id: {id}")));
                }
                conf.main_channel = u64::try_from(id).ok();
            }
            b"rdb-filter-only" => {
                for filter in String::from_utf8_lossy(value).split_ascii_whitespace() {
                    if !filter.eq_ignore_ascii_case("functions") {
                        return Err(CmdError::owned(format!("ERR Unsupported rdb-filter-only option: {filter}")));
                    }
                }
            }
            _ => {
                return Err(CmdError::owned(format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(option)
                )))
            }
        }
    }
    c.conn.repl = conf;
    ok()
}

/// A `REPLCONF` option that is 0 or 1, with Redis' errors.
fn flag(value: &[u8]) -> Result<bool, CmdError> {
    match parse_i64(value) {
        Some(v @ (0 | 1)) => Ok(v == 1),
        Some(_) => Err(CmdError::full("ERR value is out of range, value must between 0 and 1")),
        None => Err(CmdError::NOT_INTEGER),
    }
}

/// `PSYNC replid offset`: continue from the backlog when it holds everything from `offset`
/// on in this history, else start over from a snapshot (`+FULLRESYNC`).
///
/// `PSYNC replid offset FAILOVER` is a primary handing this replica its role (`FAILOVER` on
/// it): when `replid` is the history this replica follows, it becomes a primary (as REPLICAOF
/// NO ONE: that history becomes its replid2) and the old primary continues from it.
pub fn psync(c: &mut Call) -> CmdResult {
    let replid = c.text(1);
    let Some(offset) = parse_i64(c.arg(2)) else {
        let who = match c.conn.repl.listening_port {
            0 => format!("client id #{}", c.conn.id),
            port => {
                let addr = c.st.clients.get(&c.conn.id).map(|ci| ci.addr.clone()).unwrap_or_default();
                let ip = c
                    .conn
                    .repl
                    .ip_address
                    .clone()
                    .unwrap_or_else(|| addr.rsplit_once(':').map(|(ip, _)| ip.to_string()).unwrap_or(addr));
                format!("{ip}:{port}")
            }
        };
        tracing::warn!("Replica {who} asks for synchronization but with a wrong offset");
        return Err(CmdError::NOT_INTEGER);
    };
    if c.args.get(3).is_some_and(|a| a.eq_ignore_ascii_case(b"failover")) {
        tracing::info!("Failover request received for replid {replid}.");
        if c.st.replication.master.is_none() {
            return Err(CmdError::full("ERR PSYNC FAILOVER can't be sent to a master."));
        }
        if replid != c.st.replication.replid {
            return Err(CmdError::full("ERR PSYNC FAILOVER replid must match my replid."));
        }
        crate::replica::stop(c.st);
        c.st.config.set_replicaof(None);
        let from = c.st.clients.get(&c.conn.id).map(|ci| ci.addr.clone()).unwrap_or_default();
        tracing::info!("MASTER MODE enabled (failover request from '{from}')");
    }
    if c.st.replication.failover.phase != Phase::None {
        return Err(CmdError::full("NOMASTERLINK Can't SYNC while failing over"));
    }
    refuse_without_master_link(c)?;
    attach(c, Some((replid, offset)))
}

/// A replica whose link to its primary is not up serves no replica, as Redis: what it holds
/// may be a history it is about to drop (a full sync on the way), and a replica of it would
/// follow that history instead of its primary's.
fn refuse_without_master_link(c: &Call) -> Result<(), CmdError> {
    match &c.st.replication.master {
        Some(m) if m.state != crate::replication::LinkStatus::Connected => {
            Err(CmdError::full("NOMASTERLINK Can't SYNC while not connected with my master"))
        }
        _ => Ok(()),
    }
}

/// `SYNC`: the old protocol: a snapshot at once, without a `+FULLRESYNC` line.
pub fn sync(c: &mut Call) -> CmdResult {
    refuse_without_master_link(c)?;
    attach(c, None)
}

/// Make this connection a replica's link: decide how it syncs, register it, and hand the
/// connection what its feed needs. `psync` is the replica's `PSYNC` arguments (`None`: SYNC).
fn attach(c: &mut Call, psync: Option<(String, i64)>) -> CmdResult {
    if c.conn.output_pending {
        return Err(CmdError::full("ERR SYNC and PSYNC are invalid with pending output"));
    }
    let size = usize::try_from(c.st.config.get_i64("repl-backlog-size")).unwrap_or(1 << 20);
    let id = c.conn.id;
    let st = &mut *c.st;
    let backlog = st.replication.backlog_for_replica(&mut st.journal, size, crate::run::run_id);
    let Some(grown) = st.replication.grown.clone() else {
        return Err(CmdError::full("ERR the replication backlog could not be made"));
    };
    let decision = match &psync {
        Some((replid, offset)) if replid != "?" => decide(&st.replication, replid, *offset),
        _ => Decision::Full,
    };
    let conf = c.conn.repl.clone();
    let ip = match &conf.ip_address {
        Some(ip) => ip.clone(),
        None => {
            let addr = st.clients.get(&id).map(|ci| ci.addr.clone()).unwrap_or_default();
            addr.rsplit_once(':').map(|(ip, _)| ip.to_string()).unwrap_or(addr)
        }
    };
    let name = format!("{ip}:{}", conf.listening_port);
    // An RDB channel serves the main channel it named (`REPLCONF rdb-channel 1
    // main-ch-client-id <id>`), which must still be waiting for it.
    let main_channel = conf.main_channel.filter(|_| conf.rdb_channel);
    let mut feed = Feed {
        snapshot: None,
        from: 0,
        eof_mark: false,
        backlog,
        grown,
        rdb_only: false,
        rill: conf.capa_rill,
        delayed: None,
        awaits_rdb_channel: None,
        main_channel: None,
    };
    let preamble = match decision {
        Decision::Partial { from } => {
            st.replication.syncs.partial_ok += 1;
            feed.from = from;
            if conf.capa_psync2 {
                format!("+CONTINUE {}\r\n", st.replication.replid)
            } else {
                "+CONTINUE\r\n".to_string()
            }
        }
        Decision::Full => {
            if psync.as_ref().is_some_and(|(id, _)| id != "?") {
                st.replication.syncs.partial_err += 1;
            }
            if conf.capa_rdb_channel && psync.is_some() && main_channel.is_none() {
                // The main channel of a replica that syncs over an RDB channel: it waits
                // for that channel to take the snapshot, then carries the stream.
                tracing::info!(
                    "Replica {name} is capable of rdb channel synchronization, and partial sync isn't possible. Full sync will continue with dedicated rdb channel."
                );
                let (start, rx) = tokio::sync::oneshot::channel();
                let main = crate::replication::primary::MainChannel { start, rill: conf.capa_rill };
                st.replication.rdb_channels.waiting.insert(id, main);
                feed.awaits_rdb_channel = Some(rx);
                format!("+RDBCHANNELSYNC {id}\r\n")
            } else {
                st.replication.syncs.full += 1;
                let Some(shared) = c.shared.arc() else {
                    return Err(CmdError::full("ERR server is shutting down"));
                };
                if main_channel.is_some() {
                    tracing::info!("Full resync requested by replica {name} (rdb-channel)");
                }
                feed.eof_mark = conf.capa_eof;
                feed.rdb_only = conf.rdb_only || main_channel.is_some();
                feed.main_channel = main_channel;
                if delays_full_sync(st, conf.capa_eof) {
                    // The feed takes the snapshot once the delay is over (`conn/feed.rs`).
                    tracing::info!("Delay next BGSAVE for diskless SYNC");
                    feed.delayed = Some(psync.is_some());
                    String::new()
                } else {
                    let target = if conf.capa_eof && st.config.get("repl-diskless-sync") == "yes" {
                        "replicas sockets"
                    } else {
                        "disk"
                    };
                    let suffix = if main_channel.is_some() { " (rdb-channel)" } else { "" };
                    tracing::info!("Starting BGSAVE for SYNC with target: {target}{suffix}");
                    let (line, snapshot, from) = begin_full_sync(&shared, st, psync.is_some());
                    feed.snapshot = Some(snapshot);
                    feed.from = from;
                    line
                }
            }
        }
    };
    if feed.delayed.is_none() && feed.awaits_rdb_channel.is_none() {
        match main_channel {
            Some(main) => start_main_channel(st, &feed.backlog, main, feed.from, &name),
            None => hold_stream(st, &feed.backlog, id, feed.from, conf.capa_rill, feed.rdb_only),
        }
    }
    if let Some(main) = main_channel {
        // Not a replica of its own to INFO, ROLE or WAIT: its main channel is.
        st.replication.rdb_channels.open.insert(id, main);
        if feed.delayed.is_some() {
            st.replication.rdb_channels.delayed.insert(id, c.now_ms);
        }
        if let Some(ci) = st.clients.get_mut(&id) {
            ci.kind = crate::state::ClientKind::RdbChannel;
        }
        return Ok(Action::Replica { preamble: preamble.into_bytes(), feed: Box::new(feed) });
    }
    let state = if feed.awaits_rdb_channel.is_some() {
        LinkState::WaitRdbChannel
    } else if feed.delayed.is_some() {
        LinkState::Delayed
    } else if feed.snapshot.is_some() {
        LinkState::WaitBgsave
    } else {
        LinkState::Online
    };
    let link = ReplicaLink { ip, port: conf.listening_port, state, ack_offset: 0, fack_offset: 0, ack_ms: c.now_ms };
    if st.replication.replicas.is_empty() {
        // The keep-alive's period counts from the first replica's arrival (the cron also
        // restarts it while there is none).
        st.replication.last_ping_ms = c.now_ms;
    }
    st.replication.replicas.insert(id, link);
    if let Some(ci) = st.clients.get_mut(&id) {
        // CLIENT LIST flags=S, CLIENT KILL TYPE replica.
        ci.kind = crate::state::ClientKind::Replica;
    }
    Ok(Action::Replica { preamble: preamble.into_bytes(), feed: Box::new(feed) })
}

/// An RDB channel's snapshot was just taken, its stream position `from`: the main channel
/// `main` waiting for it carries the stream from there on (`send_bulk_and_stream`).
pub fn start_main_channel(
    st: &mut State,
    backlog: &std::sync::Mutex<crate::replication::backlog::Backlog>,
    main: u64,
    from: u64,
    name: &str,
) {
    let Some(waiting) = st.replication.rdb_channels.waiting.remove(&main) else {
        tracing::warn!("Starting to deliver RDB to replica {name} but it has no associated main channel");
        return;
    };
    hold_stream(st, backlog, main, from, waiting.rill, false);
    if waiting.start.send(from).is_ok() {
        if let Some(link) = st.replication.replicas.get_mut(&main) {
            link.state = LinkState::SendBulkAndStream;
        }
        tracing::info!("Starting to deliver RDB and replication stream to replica: {name}");
    }
}

/// Whether a full sync waits before its snapshot is taken, as Redis delays a diskless one
/// (`repl-diskless-sync yes`, `repl-diskless-sync-delay` > 0, a replica that reads an
/// end-marked payload): Redis waits so that the replicas arriving meanwhile share one fork;
/// rill takes a copy per replica, but keeps the wait (and the `wait_bgsave` state) that
/// tools and tests rely on.
fn delays_full_sync(st: &State, capa_eof: bool) -> bool {
    capa_eof && st.config.get("repl-diskless-sync") == "yes" && st.config.get_i64("repl-diskless-sync-delay") > 0
}

/// Whether the full syncs waiting for their delay start now: the longest waiting one has
/// waited `repl-diskless-sync-delay` seconds, or `repl-diskless-sync-max-replicas` (when set)
/// replicas are waiting. They all start together, as Redis attaches every waiting replica to
/// the one snapshot it makes.
pub fn delayed_syncs_due(st: &State, now_ms: i64) -> bool {
    let waiting = st.replication.replicas.values().filter(|l| l.state == LinkState::Delayed).map(|l| l.ack_ms);
    // RDB channels wait with them.
    let waiting = waiting.chain(st.replication.rdb_channels.delayed.values().copied());
    let (count, oldest) = waiting.fold((0i64, now_ms), |(n, oldest), since| (n + 1, oldest.min(since)));
    let delay_ms = st.config.get_i64("repl-diskless-sync-delay").saturating_mul(1000);
    let max_replicas = st.config.get_i64("repl-diskless-sync-max-replicas");
    (max_replicas > 0 && count >= max_replicas) || now_ms - oldest >= delay_ms
}

/// A full sync starts: the snapshot and the stream's position are taken in one critical
/// section, so the stream after it starts with the next unit (which selects its database
/// again). Returns the `+FULLRESYNC` line (empty for SYNC), the snapshot and the stream's first
/// byte after it.
pub fn begin_full_sync(
    shared: &std::sync::Arc<crate::state::Shared>,
    st: &mut State,
    psync: bool,
) -> (String, crate::persist::rewrite::ReplicaSnapshot, u64) {
    st.journal.new_reader();
    let offset = st.replication.offset();
    let snapshot = crate::persist::rewrite::replica_snapshot(shared, st);
    let line = if psync { format!("+FULLRESYNC {} {offset}\r\n", st.replication.replid) } else { String::new() };
    (line, snapshot, offset + 1)
}

/// Hold the stream for replica `id` from byte `from` on, up to its output limit (and rill's
/// records too for a rill replica). A replica that wants the snapshot only (`rdb-only`) is
/// held nothing, as Redis feeds such a replica no stream.
pub fn hold_stream(
    st: &State,
    backlog: &std::sync::Mutex<crate::replication::backlog::Backlog>,
    id: u64,
    from: u64,
    rill: bool,
    rdb_only: bool,
) {
    if rdb_only {
        return;
    }
    let limit = st.hot.output_limits.of(crate::client_limits::ClientClass::Replica);
    let mut b = backlog.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    b.hold(id, from, limit);
    if rill {
        b.keep_records();
    }
}

/// A timeout in milliseconds, as Redis parses one (`0`: none).
pub(super) fn timeout_ms(arg: &[u8], now_ms: i64) -> Result<Option<i64>, CmdError> {
    let ms = parse_i64(arg).ok_or(CmdError::full("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::full("ERR timeout is negative"));
    }
    if ms > i64::MAX - now_ms {
        return Err(CmdError::full("ERR timeout is out of range"));
    }
    Ok((ms > 0).then_some(now_ms + ms))
}

/// `WAIT numreplicas timeout`: how many replicas acknowledged this client's last write,
/// waiting up to `timeout` ms (0: for ever) for `numreplicas` of them.
pub fn wait(c: &mut Call) -> CmdResult {
    if c.st.replication.master.is_some() {
        return Err(CmdError::full("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let wanted = parse_i64(c.arg(1)).ok_or(CmdError::NOT_INTEGER)?;
    let deadline_ms = timeout_ms(c.arg(2), c.now_ms)?;
    let w = CopiesWait {
        repl_offset: c.conn.last_write.0,
        log_offset: c.conn.last_write.1,
        local: 0,
        replicas: usize::try_from(wanted).unwrap_or(0),
        aof: false,
        deadline_ms,
        spec: c.spec,
    };
    await_copies(c, w)
}

/// `WAITAOF numlocal numreplicas timeout`: whether the local log, and how many replicas'
/// logs, hold this client's last write on disk: `[local, replicas]`.
pub fn waitaof(c: &mut Call) -> CmdResult {
    let local = match parse_i64(c.arg(1)) {
        Some(n @ 0..=1) => n as usize,
        Some(_) => return Err(CmdError::full("ERR value is out of range, value must between 0 and 1")),
        None => return Err(CmdError::NOT_INTEGER),
    };
    let replicas = match parse_i64(c.arg(2)) {
        Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
        Some(_) => return Err(CmdError::full("ERR value is out of range, must be positive")),
        None => return Err(CmdError::NOT_INTEGER),
    };
    let deadline_ms = timeout_ms(c.arg(3), c.now_ms)?;
    if c.st.replication.master.is_some() {
        return Err(CmdError::full("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated."));
    }
    if local > 0 && c.st.journal.log().is_none() {
        return Err(CmdError::full("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled."));
    }
    let w = CopiesWait {
        repl_offset: c.conn.last_write.0,
        log_offset: c.conn.last_write.1,
        local,
        replicas,
        aof: true,
        deadline_ms,
        spec: c.spec,
    };
    await_copies(c, w)
}

/// Answer at once when the copies exist (or inside a transaction, which cannot wait);
/// otherwise ask the replicas for an ACK now and let the connection wait.
fn await_copies(c: &mut Call, w: CopiesWait) -> CmdResult {
    if w.satisfied(&c.st.journal, &c.st.replication) {
        return reply(w.reply(&c.st.journal, &c.st.replication));
    }
    if w.replicas > 0 {
        // The replicas answer at once instead of at their next second.
        c.st.request_replica_acks(c.now_ms);
    }
    Ok(Action::AwaitCopies(Box::new(w)))
}

/// `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]`: hand the primary role to a replica
/// once it has the whole stream, writes paused meanwhile (`handover.rs`);
/// `FAILOVER ABORT` gives a failover under way up.
pub fn failover(c: &mut Call) -> CmdResult {
    if c.args.len() == 2 && c.arg(1).eq_ignore_ascii_case(b"abort") {
        if c.st.replication.failover.phase == Phase::None {
            return Err(CmdError::full("ERR No failover in progress."));
        }
        failover::abort(c.st, "Failover manually aborted", c.now_ms);
        return ok();
    }
    let not_integer = || CmdError::full("ERR value is not an integer or out of range");
    let mut req = crate::replication::failover::Request::default();
    let mut j = 1;
    while j < c.args.len() {
        let word = c.arg(j);
        if word.eq_ignore_ascii_case(b"timeout") && j + 1 < c.args.len() && req.timeout_ms.is_none() {
            let ms = parse_i64(c.arg(j + 1)).ok_or_else(not_integer)?;
            if ms <= 0 {
                return Err(CmdError::full("ERR FAILOVER timeout must be greater than 0"));
            }
            req.timeout_ms = Some(ms);
            j += 2;
        } else if word.eq_ignore_ascii_case(b"to") && j + 2 < c.args.len() && req.target.is_none() {
            let port = parse_i64(c.arg(j + 2)).ok_or_else(not_integer)?;
            // Any number parses, as in Redis; one that is no port matches no replica.
            req.target = Some((c.text(j + 1), u16::try_from(port).unwrap_or(0)));
            j += 3;
        } else if word.eq_ignore_ascii_case(b"force") && !req.force {
            req.force = true;
            j += 1;
        } else {
            return Err(syntax());
        }
    }
    if c.st.replication.failover.phase != Phase::None {
        return Err(CmdError::full("ERR FAILOVER already in progress."));
    }
    if c.st.replication.master.is_some() {
        return Err(CmdError::full("ERR FAILOVER is not valid when server is a replica."));
    }
    if c.st.replication.replicas.is_empty() {
        return Err(CmdError::full("ERR FAILOVER requires connected replicas."));
    }
    if req.force && (req.timeout_ms.is_none() || req.target.is_none()) {
        return Err(CmdError::full("ERR FAILOVER with force option requires both a timeout and target HOST and IP."));
    }
    if let Some((host, port)) = &req.target {
        let Some(link) = failover::find_replica(c.st, host, *port) else {
            return Err(CmdError::full("ERR FAILOVER target HOST and PORT is not a replica."));
        };
        if link.state != LinkState::Online {
            return Err(CmdError::full("ERR FAILOVER target replica is not online."));
        }
    }
    failover::start(c.st, req, c.now_ms);
    ok()
}

/// `REPLICAOF host port | NO ONE` (and `SLAVEOF`): follow a primary, or stop following one
/// (`replica.rs`).
pub fn replicaof(c: &mut Call) -> CmdResult {
    if c.st.replication.failover.phase != Phase::None {
        return Err(CmdError::full("ERR REPLICAOF not allowed while failing over."));
    }
    if c.arg(1).eq_ignore_ascii_case(b"no") && c.arg(2).eq_ignore_ascii_case(b"one") {
        crate::replica::stop(c.st);
        // CONFIG REWRITE drops the file's replicaof line from now on.
        c.st.config.set_replicaof(None);
        return ok();
    }
    let port = match parse_i64(c.arg(2)) {
        Some(p @ 0..=65535) => p as u16,
        _ => return Err(CmdError::full("ERR Invalid master port")),
    };
    let host = c.text(1);
    let Some(shared) = c.shared.arc() else { return Err(CmdError::full("ERR server is shutting down")) };
    // CONFIG GET replicaof reports it and CONFIG REWRITE writes it (Sentinel's
    // `SLAVEOF; CONFIG REWRITE` survives a restart so).
    c.st.config.set_replicaof(Some((&host, port)));
    if !crate::replica::follow(&shared, c.st, host, port) {
        return reply(Reply::simple("OK Already connected to specified master"));
    }
    ok()
}

/// `ROLE`: on a primary `master`, the offset, and per replica its address, port and the
/// offset it acknowledged; on a replica `slave`, its primary, the link's state and the offset
/// applied.
pub fn role(c: &mut Call) -> CmdResult {
    let r = &c.st.replication;
    if let Some(m) = &r.master {
        return reply(Reply::Array(vec![
            Reply::Bulk(bytes::Bytes::from_static(b"slave")),
            Reply::Bulk(bytes::Bytes::from(m.host.clone())),
            Reply::Integer(i64::from(m.port)),
            Reply::Bulk(bytes::Bytes::from_static(m.state.role_word().as_bytes())),
            Reply::Integer(i64::try_from(r.offset()).unwrap_or(i64::MAX)),
        ]));
    }
    let offset = i64::try_from(r.offset()).unwrap_or(i64::MAX);
    let replicas = r
        .replicas
        .values()
        .filter(|l| l.state == LinkState::Online)
        .map(|l| {
            Reply::Array(vec![
                Reply::Bulk(bytes::Bytes::from(l.ip.clone())),
                Reply::Bulk(bytes::Bytes::from(l.port.to_string())),
                Reply::Bulk(bytes::Bytes::from(l.ack_offset.to_string())),
            ])
        })
        .collect();
    reply(Reply::Array(vec![
        Reply::Bulk(bytes::Bytes::from_static(b"master")),
        Reply::Integer(offset),
        Reply::Array(replicas),
    ]))
}
