//! The replica side of replication: `REPLICAOF host port` starts a task that links to the
//! primary with Redis' handshake, loads its snapshot and applies its stream, until
//! `REPLICAOF NO ONE` (or another `REPLICAOF`) ends it. Works against rill and any Redis 7.0–8.x
//! primary (spec/replication.md §1, §4).
//!
//! ```text
//!  connect ─► PING ─► [AUTH] ─► REPLCONF listening-port / capa eof capa psync2
//!          ─► PSYNC <replid> <offset+1>   (this server's own history: continuing works after a
//!                                          failover, when the new primary has it as replid2)
//!             +CONTINUE [new replid] ─────────────────────────────┐
//!             +FULLRESYNC <replid> <offset> ─► snapshot ($len or   │
//!               $EOF:mark) ─► keyspace replaced (-LOADING meanwhile)│
//!          ─► the stream: each command applied as one unit ◄──────┘
//!             (unit::run, as the primary's client: never refused, never blocked), relayed
//!             byte for byte into this server's backlog for its own replicas;
//!             REPLCONF ACK <offset> every second and on REPLCONF GETACK
//!  link lost ─► retry every second, PSYNC from where it stopped
//! ```
//!
//! A replica never expires keys itself (`Engine::set_replica`): its primary's deletions
//! arrive in the stream. Its own log records what it applied; after a full sync the log
//! starts again from the loaded data.

use crate::client::{Action, Conn};
use crate::handover as failover;
use crate::replication::failover::Phase;
use crate::replication::{LinkStatus, MasterLink};
use crate::state::{now_ms, Shared, State};
use bytes::{BufMut, Bytes, BytesMut};
use rill_engine::command::Flags;
use rill_resp::{Limits, RequestParser};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long connecting (and a TLS handshake) may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a wait for the primary looks at `repl-timeout` again (CONFIG SET applies to a
/// wait already under way, as Redis' cron checks the link's last I/O every second).
const TIMEOUT_TICK: Duration = Duration::from_millis(250);
/// Room made for each read from the primary.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Most commands of the primary's stream applied under one hold of the lock.
const APPLY_BATCH: usize = 128;
/// Most payload bytes handed to the loader at a time (a full sync, [`receive_payload`]).
const PAYLOAD_CHUNK_BYTES: usize = 256 * 1024;
/// Most chunks waiting for the loader: what a full sync holds of the payload at once.
const PAYLOAD_QUEUE_CHUNKS: usize = 16;
/// Pause between attempts to reach the primary.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// `REPLICAOF host port`: follow that primary from now on. Already following it: false.
pub fn follow(shared: &Arc<Shared>, st: &mut State, host: String, port: u16) -> bool {
    if st.replication.master.as_ref().is_some_and(|m| m.host == host && m.port == port) {
        return false;
    }
    // Clients blocked on this server as it was are answered -UNBLOCKED and closed, as Redis
    // does: the replicated stream must not serve them.
    crate::blocking::unblock_all_for_role_change(st);
    let was_primary = st.replication.master.is_none();
    st.replication.link_generation += 1;
    let generation = st.replication.link_generation;
    tracing::info!("Connecting to MASTER {host}:{port}");
    // The link's times belong to the server, as Redis keeps them: a primary switched for
    // another leaves the link down since now (if it was up), and the disconnections so far
    // stay counted.
    let mut new_link = MasterLink::new(host.clone(), port);
    if let Some(old) = st.replication.master.take() {
        let now = now_ms();
        let was_up = old.state == LinkStatus::Connected;
        new_link.total_disconnect_secs = old.total_disconnect_secs;
        new_link.disconnect_start_ms = match old.disconnect_start_ms {
            0 if was_up => now,
            t => t,
        };
        new_link.down_since_ms = if was_up { now } else { old.down_since_ms };
    } else {
        (new_link.total_disconnect_secs, new_link.disconnect_start_ms) =
            std::mem::take(&mut st.replication.unlinked_disconnect);
    }
    st.replication.master = Some(new_link);
    if was_primary {
        // A backlog from now on (the offsets a failover continues from), fed with the
        // primary's stream as received; and no expiry of its own.
        let size = usize::try_from(st.config.get_i64("repl-backlog-size")).unwrap_or(1 << 20);
        let st2 = &mut *st;
        st2.replication.start_backlog(&mut st2.journal, size);
        st.journal.set_relaying(true);
        st.engine.set_replica(true);
        tracing::info!("Before turning into a replica, using my own master parameters to synthesize a cached master: I may be able to synchronize with the new master with just a partial transfer.");
    }
    let shared = shared.clone();
    tokio::spawn(async move { link(shared, generation, host, port).await });
    true
}

/// `REPLICAOF NO ONE`: stop following; this server is a primary with a new history that
/// continues the one it followed (replid2), so that the other replicas continue from it.
pub fn stop(st: &mut State) {
    let Some(old) = st.replication.master.take() else { return };
    // The link ends here: a disconnection starts (if none runs), counted on once a primary is
    // followed again, as Redis does.
    let start = match old.disconnect_start_ms {
        0 if old.state == LinkStatus::Connected || old.state == LinkStatus::Sync => now_ms(),
        t => t,
    };
    st.replication.unlinked_disconnect = (old.total_disconnect_secs, start);
    st.replication.link_generation += 1;
    st.replication.shift_replid(crate::run::run_id());
    st.journal.set_relaying(false);
    st.engine.set_replica(false);
    disconnect_replicas(st);
    tracing::info!("MASTER MODE enabled (user request from client)");
}

/// Drop the links of this server's own replicas: the history they follow changed (a new
/// replid), and reconnecting tells them (`+CONTINUE <new replid>`), as Redis does.
fn disconnect_replicas(st: &mut State) {
    let r = &st.replication;
    let ids: Vec<u64> = r.replicas.keys().chain(r.rdb_channels.open.keys()).copied().collect();
    for id in ids {
        if let Some(ci) = st.clients.get_mut(&id) {
            ci.kill_now();
        }
    }
}

/// Whether link task `generation` is still the one wanted.
fn current(shared: &Shared, generation: u64) -> bool {
    shared.lock().replication.link_generation == generation
}

fn set_state(shared: &Shared, generation: u64, state: LinkStatus) {
    let mut st = shared.lock();
    if st.replication.link_generation != generation {
        return;
    }
    if let Some(m) = st.replication.master.as_mut() {
        m.set_state(state, now_ms());
    }
}

/// Keep a link to `host:port` until `REPLICAOF` says otherwise.
async fn link(shared: Arc<Shared>, generation: u64, host: String, port: u16) {
    while current(&shared, generation) {
        match session(&shared, generation, &host, port).await {
            Ok(()) => return,
            Err(why) => {
                if current(&shared, generation) {
                    tracing::warn!("Replication with MASTER {host}:{port}: {why}");
                }
            }
        }
        set_state(&shared, generation, LinkStatus::Connecting);
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// A byte stream to the primary: the socket, or TLS over it (`tls-replication yes`).
trait Link: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Link for T {}

/// Where the link runs, as CLIENT LIST shows the primary's client.
#[derive(Debug, Clone)]
struct Ends {
    addr: String,
    laddr: String,
    fd: i64,
    /// A duplicate of the socket's descriptor, for CLIENT KILL to shut the link down at once.
    socket: Option<Arc<std::net::TcpStream>>,
}

/// The connection to the primary, read line by line during the handshake.
struct Upstream {
    shared: Arc<Shared>,
    stream: Box<dyn Link>,
    ends: Ends,
    buf: BytesMut,
}

impl Upstream {
    async fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut out = BytesMut::new();
        rill_resp::write_request(&mut out, args);
        self.stream.write_all(&out).await.map_err(|e| format!("write error: {e}"))
    }

    /// More bytes into `buf`; an error when the primary closed the link.
    async fn fill(&mut self) -> Result<(), String> {
        // Room for a large read: with none spare, `read_buf` reads 64 bytes at a time.
        self.buf.reserve(READ_CHUNK_BYTES);
        let n = self.stream.read_buf(&mut self.buf).await.map_err(|e| format!("read error: {e}"))?;
        if n == 0 {
            return Err("the primary closed the connection".into());
        }
        Ok(())
    }

    /// One line of a reply, without its CRLF. The primary silent for `repl-timeout` (read
    /// again at each tick) ends the handshake, as Redis' replica gives up on it.
    async fn line(&mut self) -> Result<String, String> {
        let mut last_io = tokio::time::Instant::now();
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(i + 1);
                let text = String::from_utf8_lossy(&line).trim_end_matches(['\r', '\n']).to_string();
                return Ok(text);
            }
            match tokio::time::timeout(TIMEOUT_TICK, self.fill()).await {
                Ok(read) => {
                    read?;
                    last_io = tokio::time::Instant::now();
                }
                Err(_) if last_io.elapsed() > repl_timeout(&self.shared) => {
                    tracing::warn!("Timeout connecting to the MASTER...");
                    return Err("timeout in the handshake".into());
                }
                Err(_) => {}
            }
        }
    }
}

/// A setting in seconds (`repl-timeout`, ...), as it is now (60 if unset).
fn seconds_of(st: &State, name: &str) -> Duration {
    Duration::from_secs(crate::replication::primary::seconds(&st.config, name, 60))
}

/// `repl-timeout`, as it is now.
fn repl_timeout(shared: &Shared) -> Duration {
    seconds_of(&shared.lock(), "repl-timeout")
}

/// One read from the primary into `buf` (at most what it has room for); an error when the
/// primary closed the link, or was silent for `repl-timeout` (read again at each tick).
async fn read_into(
    shared: &Shared,
    stream: &mut Box<dyn Link>,
    buf: &mut impl BufMut,
    progress: &crate::replication::TransferProgress,
) -> Result<(), String> {
    let started = tokio::time::Instant::now();
    let read = loop {
        match tokio::time::timeout(TIMEOUT_TICK, stream.read_buf(buf)).await {
            Ok(read) => break read.map_err(|e| format!("read error: {e}"))?,
            // Looked up without waiting for the state lock: a busy script holds it while the
            // snapshot goes on arriving, and this task must not stop a runtime thread on it
            // (the tick is not a timeout then).
            Err(_) if shared.try_lock().is_some_and(|st| started.elapsed() > seconds_of(&st, "repl-timeout")) => {
                tracing::warn!("Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value.");
                return Err("timeout receiving the snapshot".into());
            }
            Err(_) => {}
        }
    };
    if read == 0 {
        return Err("the primary closed the connection".into());
    }
    // The snapshot's progress (INFO's `master_sync_read_bytes`, `master_sync_last_io_seconds_ago`),
    // counted without the state lock.
    progress.add(read as u64, now_ms());
    Ok(())
}

/// Open a connection to the primary (TLS over it with `tls-replication yes`).
async fn connect(shared: &Arc<Shared>, host: &str, port: u16) -> Result<Upstream, String> {
    let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect((host, port)))
        .await
        .map_err(|_| "timeout connecting".to_string())?
        .map_err(|e| format!("Error condition on socket for SYNC: {e}"))?;
    let _ = stream.set_nodelay(true);
    // A second descriptor of the socket (tokio's stream gives none out): shutting it down
    // ends the link whatever its task is doing.
    let (stream, socket) = match stream.into_std() {
        Ok(std) => {
            let socket = std.try_clone().ok().map(Arc::new);
            (TcpStream::from_std(std).map_err(|e| format!("Error condition on socket for SYNC: {e}"))?, socket)
        }
        Err(e) => return Err(format!("Error condition on socket for SYNC: {e}")),
    };
    let ends = Ends {
        socket,
        addr: stream.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
        laddr: stream.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        fd: {
            use std::os::fd::AsRawFd;
            i64::from(stream.as_raw_fd())
        },
    };
    // `tls-replication yes`: the link is TLS, the primary's certificate checked against the
    // CA of `tls-ca-cert-file` (Redis' replicas connect the same way).
    let tls = {
        let st = shared.lock();
        (st.config.get("tls-replication") == "yes").then(|| crate::tls::client_config(&st.config))
    };
    let stream: Box<dyn Link> = match tls {
        None => Box::new(stream),
        Some(config) => {
            let config = config.map_err(|e| format!("TLS configuration for the primary's link: {e}"))?;
            let name = crate::tls::server_name(host)?;
            let tls =
                tokio::time::timeout(HANDSHAKE_TIMEOUT, tokio_rustls::TlsConnector::from(config).connect(name, stream))
                    .await
                    .map_err(|_| "timeout in the TLS handshake with the primary".to_string())?
                    .map_err(|e| format!("TLS handshake with the primary: {e}"))?;
            Box::new(tls)
        }
    };
    Ok(Upstream { shared: shared.clone(), stream, ends, buf: BytesMut::new() })
}

/// One connection: handshake, sync, stream. `Ok` only when `REPLICAOF` changed meanwhile.
async fn session(shared: &Arc<Shared>, generation: u64, host: &str, port: u16) -> Result<(), String> {
    // Counted as the attempt starts, whether or not the primary answers (Redis'
    // `master_current_sync_attempts` and `master_total_sync_attempts`).
    {
        let mut st = shared.lock();
        if st.replication.link_generation == generation {
            if let Some(m) = st.replication.master.as_mut() {
                m.attempt();
            }
        }
    }
    let mut up = connect(shared, host, port).await?;
    tracing::info!("MASTER <-> REPLICA sync started");
    set_state(shared, generation, LinkStatus::Handshake);
    let (auth, my_port, announce_ip, replid, offset) = {
        let st = shared.lock();
        let pass = st.config.get("masterauth").to_string();
        let user = st.config.get("masteruser").to_string();
        let auth = (!pass.is_empty()).then_some((user, pass));
        let announce_port = st.config.get_i64("replica-announce-port");
        let my_port = if announce_port > 0 { announce_port.to_string() } else { shared.port().to_string() };
        let ip = st.config.get("replica-announce-ip").to_string();
        (auth, my_port, ip, st.replication.replid.clone(), st.replication.offset())
    };
    up.send(&[b"PING"]).await?;
    let pong = up.line().await?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") && !pong.starts_with("-NOPERM") {
        return Err(format!("Error reply to PING from master: '{pong}'"));
    }
    authenticate(&mut up, &auth).await?;
    up.send(&[b"REPLCONF", b"listening-port", my_port.as_bytes()]).await?;
    let mut expected = 1;
    if !announce_ip.is_empty() {
        up.send(&[b"REPLCONF", b"ip-address", announce_ip.as_bytes()]).await?;
        expected += 1;
    }
    // `capa rill`: a rill primary sends its own record of each unit too (any Redis ignores it).
    // `capa rdb-channel-repl` (`repl-rdb-channel yes`): a full sync may come over a second
    // connection while this one buffers the stream (`rdb_channel_sync`).
    let mut capa: Vec<&[u8]> = vec![b"REPLCONF", b"capa", b"eof", b"capa", b"psync2", b"capa", b"rill"];
    if shared.lock().config.get("repl-rdb-channel") == "yes" {
        capa.extend_from_slice(&[b"capa", b"rdb-channel-repl"]);
    }
    up.send(&capa).await?;
    expected += 1;
    for _ in 0..expected {
        let r = up.line().await?;
        if r.starts_with('-') {
            tracing::info!("(Non critical) Master does not understand REPLCONF: {r}");
        }
    }
    // PSYNC from this server's own history: what it followed, kept across a restart, or what
    // it served as a primary. Offset 0 too, as Redis asks: a replica that synced at offset 0
    // and got nothing since continues from byte 1; an ID the primary does not know (a new
    // server's) gets a full sync.
    let (ask_id, ask_offset) = (replid, (offset + 1).to_string());
    tracing::info!("Trying a partial resynchronization (request {ask_id}:{ask_offset}).");
    // A primary handing its role over (FAILOVER) tells the target to take it.
    let failing_over = shared.lock().replication.failover.phase == Phase::InProgress;
    if failing_over {
        up.send(&[b"PSYNC", ask_id.as_bytes(), ask_offset.as_bytes(), b"FAILOVER"]).await.inspect_err(|_| {
            let mut st = shared.lock();
            failover::abort(&mut st, "Write error to failover target", now_ms());
        })?;
    } else {
        up.send(&[b"PSYNC", ask_id.as_bytes(), ask_offset.as_bytes()]).await?;
    }
    let reply = loop {
        let line = up.line().await?;
        // Keep-alive newlines while the primary prepares the snapshot.
        if !line.is_empty() {
            break line;
        }
    };
    if !current(shared, generation) {
        return Ok(());
    }
    if failing_over {
        let mut st = shared.lock();
        if st.replication.failover.phase == Phase::InProgress {
            if reply.starts_with("+CONTINUE") || reply.starts_with("+FULLRESYNC") {
                // Handed over: the pause ends, and writes now get READONLY.
                failover::clear(&mut st, now_ms());
            } else {
                // One line, as Redis logs it: "FAILOVER to h:p aborted: Failover target ...".
                failover::abort(&mut st, "Failover target rejected psync request", now_ms());
                return Ok(());
            }
        }
    }
    let mut buffered = None;
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut words = rest.split(' ');
        let id = words.next().unwrap_or_default().to_string();
        let at: u64 =
            words.next().and_then(|w| w.parse().ok()).ok_or_else(|| format!("bad FULLRESYNC reply: {reply}"))?;
        tracing::info!("Full resync from master: {id}:{at}");
        full_sync(shared, generation, &mut up, id, at, true).await?;
    } else if let Some(client_id) = reply.strip_prefix("+RDBCHANNELSYNC ") {
        let hello = Hello { auth, my_port, announce_ip };
        let figures;
        (up, figures) = rdb_channel_sync(shared, generation, up, host, port, client_id.trim(), &hello).await?;
        buffered = Some(figures);
        if !current(shared, generation) {
            return Ok(());
        }
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new_id = rest.trim();
        let mut st = shared.lock();
        if !new_id.is_empty() && new_id != st.replication.replid {
            st.replication.shift_replid(new_id.to_string());
            tracing::info!("Master replication ID changed to {new_id}");
            // This server's own replicas follow the old ID: reconnecting tells them the new
            // one (`+CONTINUE <new replid>`), as Redis drops them here.
            disconnect_replicas(&mut st);
        }
        tracing::info!("Successful partial resynchronization with master.");
    } else {
        return Err(format!("Unexpected reply to PSYNC from master: {reply}"));
    }
    apply_stream(shared, generation, up, buffered).await
}

/// What this replica tells its primary of itself on a new connection.
struct Hello {
    /// `masteruser` (may be empty) and `masterauth`, when set.
    auth: Option<(String, String)>,
    /// The port it announces (`listening-port`).
    my_port: String,
    /// `replica-announce-ip`, if set.
    announce_ip: String,
}

/// `AUTH` on a new connection to the primary, when `masterauth` is set.
async fn authenticate(up: &mut Upstream, auth: &Option<(String, String)>) -> Result<(), String> {
    let Some((user, pass)) = auth else { return Ok(()) };
    if user.is_empty() {
        up.send(&[b"AUTH", pass.as_bytes()]).await?;
    } else {
        up.send(&[b"AUTH", user.as_bytes(), pass.as_bytes()]).await?;
    }
    let r = up.line().await?;
    if r.starts_with('-') {
        return Err(format!("Unable to AUTH to MASTER: {r}"));
    }
    Ok(())
}

/// A full sync over an RDB channel, after the primary answered `+RDBCHANNELSYNC <client_id>`
/// on `main`: a second connection names `client_id` and asks for the snapshot (`PSYNC ? -1`),
/// which is loaded while `main` receives the stream after it, buffered here (up to
/// `replica-full-sync-buffer-limit`, else `client-output-buffer-limit replica`'s hard limit:
/// past it this replica stops reading, and the primary holds the rest). The snapshot loaded,
/// the RDB channel closes and `main`, its buffer first, is the stream: returned for
/// [`apply_stream`]. The primary holds nothing for this replica while the snapshot is made
/// and loaded that the replica has already taken.
async fn rdb_channel_sync(
    shared: &Arc<Shared>,
    generation: u64,
    main: Upstream,
    host: &str,
    port: u16,
    client_id: &str,
    hello: &Hello,
) -> Result<(Upstream, Arc<crate::replication::SyncBuffer>), String> {
    // Still `handshake` to ROLE until the snapshot starts (`full_sync`), as in Redis.
    tracing::info!("PSYNC is not possible, initialize RDB channel.");
    let mut rdb = connect(shared, host, port).await?;
    authenticate(&mut rdb, &hello.auth).await?;
    let mut replconf: Vec<&[u8]> = vec![
        b"REPLCONF",
        b"capa",
        b"eof",
        b"rdb-only",
        b"1",
        b"rdb-channel",
        b"1",
        b"main-ch-client-id",
        client_id.as_bytes(),
        b"listening-port",
        hello.my_port.as_bytes(),
    ];
    if !hello.announce_ip.is_empty() {
        replconf.extend_from_slice(&[b"ip-address", hello.announce_ip.as_bytes()]);
    }
    // A rill primary sends its streams in rill's own type then (any Redis ignores it).
    replconf.extend_from_slice(&[b"capa", b"rill"]);
    rdb.send(&replconf).await?;
    let r = rdb.line().await?;
    if r.starts_with('-') {
        tracing::warn!("Master replied error to replconf: {r}");
        return Err(format!("Master replied error to replconf: {r}"));
    }
    if shared.lock().replication.debug_pause.before_rdb_channel {
        crate::replication::debug_stop();
    }
    rdb.send(&[b"PSYNC", b"?", b"-1"]).await?;
    let reply = loop {
        let line = rdb.line().await?;
        if !line.is_empty() {
            break line;
        }
    };
    let Some(rest) = reply.strip_prefix("+FULLRESYNC ") else {
        return Err(format!("Unexpected reply to PSYNC on the rdb channel: {reply}"));
    };
    let mut words = rest.split(' ');
    let id = words.next().unwrap_or_default().to_string();
    let at: u64 = words.next().and_then(|w| w.parse().ok()).ok_or_else(|| format!("bad FULLRESYNC reply: {reply}"))?;
    tracing::info!("Starting to receive RDB and replication stream in parallel.");
    let figures = shared.lock().replication.master.as_ref().map(|m| m.sync_buffer.clone()).unwrap_or_default();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let buffering = tokio::spawn(buffer_stream(shared.clone(), main, stopped, figures.clone()));
    tokio::pin!(buffering);
    let loaded = tokio::select! {
        r = full_sync(shared, generation, &mut rdb, id, at, false) => r,
        // The main channel failed first: the sync is given up (the load too), as Redis does.
        r = &mut buffering => {
            let why = match r {
                Ok(Err(e)) => e,
                Ok(Ok(_)) => "the main channel stopped".to_string(),
                Err(e) => e.to_string(),
            };
            tracing::warn!("Aborting rdb channel sync while loading the RDB: {why}");
            tracing::warn!("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
            figures.size.store(0, std::sync::atomic::Ordering::Relaxed);
            return Err(why);
        }
    };
    drop(rdb);
    let _ = stop.send(());
    let main = buffering.await.map_err(|e| e.to_string()).and_then(|r| r);
    if loaded.is_err() || main.is_err() {
        figures.size.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    loaded?;
    let mut main = main?;
    tracing::info!(
        "MASTER <-> REPLICA sync: Starting to stream replication buffer into the db ({} bytes).",
        main.buf.len()
    );
    // Loaded: the primary may count this replica online now.
    main.send(&[b"REPLCONF", b"ACK", at.to_string().as_bytes()]).await?;
    figures.size.store(main.buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
    Ok((main, figures))
}

/// The main channel during a full sync over an RDB channel: read the stream into its buffer
/// until `stop`, or until the buffer passes its limit (then stop reading: the primary holds
/// the rest). An error when the primary closes it or it fails.
async fn buffer_stream(
    shared: Arc<Shared>,
    mut main: Upstream,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    figures: Arc<crate::replication::SyncBuffer>,
) -> Result<Upstream, String> {
    use std::sync::atomic::Ordering;
    let limit = {
        let st = shared.lock();
        let own = u64::try_from(st.config.get_i64("replica-full-sync-buffer-limit")).unwrap_or(0);
        if own > 0 {
            own
        } else {
            st.hot.output_limits.of(crate::client_limits::ClientClass::Replica).hard_bytes
        }
    };
    let mut reading = true;
    main.buf.reserve(READ_CHUNK_BYTES);
    loop {
        if reading && limit > 0 && main.buf.len() as u64 > limit {
            tracing::info!("Replication buffer limit has been reached ({limit} bytes), stopped buffering replication stream. Further accumulation may occur on master side.");
            reading = false;
        }
        tokio::select! {
            _ = &mut stop => return Ok(main),
            r = main.stream.read_buf(&mut main.buf), if reading => {
                match r {
                    Ok(0) => return Err("the primary closed the main channel".into()),
                    Ok(_) => {
                        let size = main.buf.len() as u64;
                        figures.size.store(size, Ordering::Relaxed);
                        figures.peak.fetch_max(size, Ordering::Relaxed);
                    }
                    Err(e) => return Err(format!("Main channel error while reading from master: {e}")),
                }
                main.buf.reserve(READ_CHUNK_BYTES);
            }
        }
    }
}

/// Receive the snapshot after `+FULLRESYNC id at` and make it the keyspace. `ack`: say so to
/// the primary on `up` afterwards (not on an RDB channel, which is done then).
async fn full_sync(
    shared: &Arc<Shared>,
    generation: u64,
    up: &mut Upstream,
    id: String,
    at: u64,
    ack: bool,
) -> Result<(), String> {
    set_state(shared, generation, LinkStatus::Sync);
    let head = loop {
        let line = up.line().await?;
        if !line.is_empty() {
            break line;
        }
    };
    let (mark, total) = if let Some(mark) = head.strip_prefix("$EOF:") {
        if mark.len() != 40 {
            return Err(format!("bad end mark in {head}"));
        }
        tracing::info!("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF");
        (Some(mark.as_bytes().to_vec()), None)
    } else if let Some(len) = head.strip_prefix('$') {
        let len: usize = len.parse().map_err(|_| format!("bad payload length in {head}"))?;
        tracing::info!("MASTER <-> REPLICA sync: receiving {len} bytes from master");
        (None, Some(len))
    } else if head.starts_with('-') {
        return Err(format!("MASTER aborted replication with an error: {head}"));
    } else {
        return Err(format!("Bad protocol from MASTER, the first byte is not '$': {head}"));
    };
    let progress = {
        let mut st = shared.lock();
        let progress = Arc::new(crate::replication::TransferProgress::default());
        progress.add(up.buf.len() as u64, now_ms());
        if let Some(m) = st.replication.master.as_mut() {
            m.transfer_size = total.map_or(0, |t| i64::try_from(t).unwrap_or(i64::MAX));
            m.transfer = progress.clone();
        }
        progress
    };
    // The payload is loaded as it arrives, into a new engine on a blocking thread, while this
    // server goes on serving what it had (as Redis' `repl-diskless-load swapdb`): a transfer
    // that fails leaves it as it was. Loading and the transfer overlap; at most
    // PAYLOAD_QUEUE_CHUNKS chunks wait between them.
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    // As Redis' swapdb: a snapshot of the history this replica follows is a later point of the
    // data it serves, so it goes on serving that meanwhile (`async_loading`); one of another
    // history is not, so it answers -LOADING meanwhile (`loading`). Either way the old data
    // stays until the new one is complete.
    let same_history = id == shared.lock().replication.replid;
    let _loading = LoadingMark::set(shared, same_history);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(PAYLOAD_QUEUE_CHUNKS);
    let loader = shared.clone();
    let origin = std::path::PathBuf::from("the snapshot from the primary");
    let loading = tokio::task::spawn_blocking(move || {
        crate::persist::load::load_rdb_streaming(&loader, || rx.blocking_recv(), total, &origin)
    });
    let received = receive_payload(up, mark.as_deref(), total, &tx, &progress).await;
    drop(tx);
    let loaded = loading.await.map_err(|e| format!("loading failed: {e}")).and_then(|r| r);
    let loaded = match (received, loaded) {
        (Ok(()), loaded) => loaded,
        // The loader stopped first (the payload is bad): its error says why.
        (Err(None), Err(e)) => Err(e),
        (Err(None), Ok(_)) => Err("the loader stopped before the payload ended".into()),
        // The transfer failed: the loader saw its input stop short (Redis' loader reports a
        // short read of the payload as an internal error in the RDB, and tools look for it).
        (Err(Some(e)), _) => {
            tracing::warn!("Internal error in RDB reading the MASTER synchronization payload: it ended early ({e})");
            tracing::warn!("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
            return Err(e);
        }
    };
    if !finish_load(shared, generation, loaded, id, at)? {
        return Ok(());
    }
    if mark.is_some() && ack {
        // Nothing follows an end-marked payload until we say we loaded it.
        up.send(&[b"REPLCONF", b"ACK", at.to_string().as_bytes()]).await?;
    }
    Ok(())
}

/// INFO's `loading` or `async_loading` while a full sync's snapshot loads; cleared when the
/// load ends, whichever way (`finish_load` clears it first, under its lock).
struct LoadingMark(Arc<Shared>);

impl LoadingMark {
    fn set(shared: &Arc<Shared>, same_history: bool) -> LoadingMark {
        let mut st = shared.lock();
        st.persist.async_loading = same_history;
        st.persist.loading = !same_history;
        LoadingMark(shared.clone())
    }
}

impl Drop for LoadingMark {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.persist.async_loading = false;
        st.persist.loading = false;
    }
}

/// Pass the snapshot's payload to the loader in chunks as it arrives: `$EOF:` form (`mark`:
/// everything up to the end mark, which is held back until more arrives, since nothing follows
/// it) or `$<total>` form (exactly `total` bytes: what follows is the stream). `Err(None)`: the
/// loader stopped taking chunks; `Err(Some(why))`: the link failed.
async fn receive_payload(
    up: &mut Upstream,
    mark: Option<&[u8]>,
    total: Option<usize>,
    tx: &tokio::sync::mpsc::Sender<Vec<u8>>,
    progress: &crate::replication::TransferProgress,
) -> Result<(), Option<String>> {
    match mark {
        Some(mark) => {
            let mut held: Vec<u8> = std::mem::take(&mut up.buf).to_vec();
            loop {
                if held.len() >= mark.len() && held.ends_with(mark) {
                    held.truncate(held.len() - mark.len());
                    if !held.is_empty() {
                        tx.send(held).await.map_err(|_| None)?;
                    }
                    return Ok(());
                }
                if held.len() >= mark.len() + PAYLOAD_CHUNK_BYTES {
                    let keep = held.split_off(held.len() - mark.len());
                    tx.send(std::mem::replace(&mut held, keep)).await.map_err(|_| None)?;
                }
                held.reserve(READ_CHUNK_BYTES);
                read_into(&up.shared, &mut up.stream, &mut held, progress).await.map_err(Some)?;
            }
        }
        None => {
            let mut left = total.unwrap_or(0);
            let first = up.buf.split_to(up.buf.len().min(left)).to_vec();
            left -= first.len();
            if !first.is_empty() {
                tx.send(first).await.map_err(|_| None)?;
            }
            while left > 0 {
                let mut chunk: Vec<u8> = Vec::with_capacity(PAYLOAD_CHUNK_BYTES.min(left));
                let room = chunk.capacity();
                // At most what is missing: the stream follows the payload.
                read_into(&up.shared, &mut up.stream, &mut (&mut chunk).limit(room), progress).await.map_err(Some)?;
                left -= chunk.len();
                tx.send(chunk).await.map_err(|_| None)?;
            }
            Ok(())
        }
    }
}

/// Make the loaded snapshot the keyspace (or drop it, if it failed to load): the new history,
/// and the log restarted from it.
fn finish_load(
    shared: &Arc<Shared>,
    generation: u64,
    loaded: Result<rill_engine::Engine, String>,
    id: String,
    at: u64,
) -> Result<bool, String> {
    let mut st = shared.lock();
    st.persist.async_loading = false;
    st.persist.loading = false;
    let engine = match loaded {
        Ok(engine) => engine,
        // What this server had is still what it serves, with the history it belongs to.
        Err(e) => return Err(format!("Failed trying to load the MASTER synchronization DB from socket: {e}")),
    };
    if st.replication.link_generation != generation {
        // REPLICAOF changed meanwhile: this snapshot is no longer the one to follow.
        return Ok(false);
    }
    tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
    st.engine.replace_all(engine);
    st.replication.restart_at(id, at);
    disconnect_replicas(&mut st);
    st.persist.dirty_at_save = st.engine.dirty();
    // The log starts again from the loaded data, as Redis restarts its AOF after a sync.
    if st.journal.log().is_some() {
        if let Some(shared2) = shared.arc() {
            let _ = crate::persist::set_appendonly(&shared2, &mut st, false);
            if let Err(e) = crate::persist::set_appendonly(&shared2, &mut st, true) {
                tracing::warn!("the log could not restart after the sync: {e}");
            }
        }
    }
    tracing::info!("MASTER <-> REPLICA sync: Finished with success");
    Ok(true)
}

/// The primary's link as a client of this server, while its stream is applied: CLIENT LIST
/// shows it (`flags=M`), INFO counts it in `connected_clients`, and CLIENT KILL (by its
/// address, `ID` or `TYPE master`) drops the link, which then continues partially, as in Redis.
/// Its record goes when the stream stops.
struct MasterClient {
    shared: Arc<Shared>,
    id: u64,
    kill: Arc<tokio::sync::Notify>,
}

impl MasterClient {
    fn register(shared: &Arc<Shared>, ends: &Ends) -> MasterClient {
        let id = shared.next_client_id();
        let peer = crate::conn::Peer { addr: ends.addr.clone(), laddr: ends.laddr.clone(), fd: ends.fd };
        let mut st = shared.lock();
        let admitted = crate::conn::admit(&mut st, id, peer, true);
        if let Some(ci) = st.clients.get_mut(&id) {
            ci.kind = crate::state::ClientKind::Master;
            ci.link_socket = ends.socket.clone();
        }
        MasterClient { shared: shared.clone(), id, kill: admitted.kill }
    }
}

impl Drop for MasterClient {
    fn drop(&mut self) {
        // Never dropped while the state lock is held: declared before any guard of it.
        self.shared.lock().remove_client(self.id);
    }
}

/// Apply the primary's stream until the link breaks or `REPLICAOF` changes.
///
/// `buffered`: after a full sync over an RDB channel, the stream buffered meanwhile, at the
/// front of `up.buf`: its figures go down as it is applied (INFO
/// `replica_full_sync_buffer_size`).
async fn apply_stream(
    shared: &Arc<Shared>,
    generation: u64,
    mut up: Upstream,
    buffered: Option<Arc<crate::replication::SyncBuffer>>,
) -> Result<(), String> {
    let mut draining = buffered.map(|figures| (figures, up.buf.len() as u64, up.buf.len() as u64));
    let drained = apply_buffered(shared, generation, &mut up, &mut draining).await;
    if let Some((figures, _, _)) = &draining {
        // Ended (the link lost, or another REPLICAOF) before the buffer was all applied.
        figures.size.store(0, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!("Master client was freed while streaming accumulated replication data to db.");
    }
    drained
}

/// [`apply_stream`]'s loop; `draining`: the buffer's figures, what is left of it to apply and
/// its whole size.
async fn apply_buffered(
    shared: &Arc<Shared>,
    generation: u64,
    up: &mut Upstream,
    draining: &mut Option<(Arc<crate::replication::SyncBuffer>, u64, u64)>,
) -> Result<(), String> {
    let drain_batch_bytes =
        usize::try_from(shared.lock().config.get_i64("loading-process-events-interval-bytes")).unwrap_or(1 << 19);
    set_state(shared, generation, LinkStatus::Connected);
    let client = MasterClient::register(shared, &up.ends);
    {
        let mut st = shared.lock();
        if let Some(m) = st.replication.master.as_mut() {
            m.last_io_ms = now_ms();
        }
    }
    let timeout = repl_timeout(shared);
    let mut parser = RequestParser::new();
    let limits = Limits { max_bulk_len: usize::MAX >> 1, max_inline_len: 64 * 1024, authenticated: true };
    let mut master = Conn::new(client.id, true);
    master.is_master = true;
    // The primary's stream is obeyed whatever the ACL says (Redis' master client has no user).
    master.user = None;
    // A continued stream does not select its database again: it is the one selected last.
    master.db = shared.lock().replication.stream_db;
    let mut args: Vec<Bytes> = Vec::new();
    let mut ack_timer = tokio::time::interval(Duration::from_secs(1));
    let mut last_heard = tokio::time::Instant::now();
    let mut fack = 0u64;
    // The bytes of a transaction of the primary's still open (see the relay below).
    let mut in_transaction: Vec<u8> = Vec::new();
    // The unit whose bytes are arriving after its record (a rill primary's `RILL.UNIT`).
    let mut recorded: Option<Recorded> = None;
    // How far a paused replica has looked through what it holds in `buf`: the position, and
    // the stream bytes before it (rill's records apart, which no offset counts).
    let mut scanned = (0usize, 0u64);
    loop {
        // Apply the complete commands in the buffer, one unit each, up to APPLY_BATCH under
        // one lock hold: the clients of this replica get the lock between batches, as a
        // Redis replica serves its clients between reads of its primary's stream.
        let mut reply_ack = false;
        let mut held: Option<crate::pause::HeldWait> = None;
        let mut more = false;
        if !up.buf.is_empty() {
            let mut st = shared.lock();
            if st.replication.link_generation != generation {
                return Ok(());
            }
            let held_before = up.buf.len();
            // One clock reading for the batch: nothing can pause the stream while the lock is
            // held, and a pause that ends within the batch ends for the next one.
            let now = now_ms();
            // Framed here, not by the request parser (which keeps the bytes of a request it
            // has only part of): every byte the primary sent counts in the offset, exactly.
            let mut applied = 0usize;
            let mut applied_bytes = 0usize;
            while let Some(len) = frame_len(&up.buf) {
                // What a full sync buffered is applied in batches of at most
                // `loading-process-events-interval-bytes` too, as Redis serves its clients
                // every that many bytes of it.
                if applied == APPLY_BATCH || (draining.is_some() && applied_bytes >= drain_batch_bytes) {
                    more = true;
                    break;
                }
                applied += 1;
                applied_bytes += len;
                // CLIENT PAUSE on a replica holds its primary's stream too, as in Redis (all of
                // it: the stream is applied in order); what arrives meanwhile waits in `buf`.
                if st.pause.holds(true, now) {
                    held = Some(crate::pause::HeldWait {
                        changed: st.pause.subscribe(),
                        until_ms: st.pause.held_until(true, now),
                    });
                    break;
                }
                let raw = up.buf.split_to(len);
                if let Some(unit) = recorded.as_mut() {
                    // A command of a unit whose record is applied instead: not run (nor parsed:
                    // only its name and next argument are looked at), but counted in the
                    // offset and in INFO commandstats, as a Redis replica running it counts it
                    // (tools read those).
                    unit.bytes.extend_from_slice(&raw);
                    let (name, sub) = frame_head(&raw);
                    if let Some(name) = name {
                        let found = shared.log_table.resolve_parts(name, sub);
                        if let rill_engine::command::Lookup::Found(spec) = found {
                            st.stats.command(spec).calls += 1;
                            st.stats.commands_processed += 1;
                        }
                        if name.eq_ignore_ascii_case(b"select") {
                            if let Some(db) = sub.and_then(|s| std::str::from_utf8(s).ok()?.parse().ok()) {
                                master.db = db;
                            }
                        }
                    }
                    if unit.bytes.len() >= unit.len {
                        let unit = recorded.take().unwrap_or_default();
                        if unit.bytes.len() > unit.len {
                            return Err("the primary's stream does not match its unit record".into());
                        }
                        apply_record(shared, &mut st, &unit.body)?;
                        st.journal.relay_record(unit.len as u64, &unit.body);
                        st.journal.relay(&unit.bytes);
                        st.replication.stream_db = master.db;
                    }
                    continue;
                }
                let mut frame = raw.clone();
                match parser.parse_into(&mut frame, &limits, &mut args) {
                    Ok(true) => {}
                    // A blank line: nothing to run.
                    Ok(false) => args.clear(),
                    Err(e) => return Err(format!("protocol error in the primary's stream: {e:?}")),
                }
                if args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"rill.unit")) && master.multi.is_none() {
                    let len: Option<usize> = number(args.get(1));
                    let (Some(len), Some(body)) = (len, args.get(2).cloned()) else {
                        return Err("a malformed RILL.UNIT in the primary's stream".into());
                    };
                    if len == 0 {
                        apply_record(shared, &mut st, &body)?;
                        st.journal.relay_record(0, &body);
                    } else {
                        recorded = Some(Recorded { len, body, bytes: Vec::with_capacity(len) });
                    }
                    continue;
                }
                let getack = args.len() >= 2
                    && args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"replconf"))
                    && args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"getack"));
                if getack {
                    reply_ack = true;
                } else if !args.is_empty() {
                    apply(shared, &mut st, &mut master, &mut args);
                    st.replication.stream_db = master.db;
                    st.replication.stream_in_transaction = master.multi.is_some();
                }
                // Everything the primary sent counts in the offset, GETACK included — but a
                // transaction's commands only once its EXEC has run, as Redis advances a
                // replica's offset only outside one: a link lost inside MULTI … EXEC then
                // continues from the MULTI, on a connection with nothing queued, instead of
                // after commands the new connection never queued.
                in_transaction.extend_from_slice(&raw);
                if master.multi.is_none() {
                    st.journal.relay(&in_transaction);
                    in_transaction.clear();
                }
            }
            // What was read and not applied (`slave_read_repl_offset`); what a pause holds is
            // looked through once, as it arrives.
            if up.buf.len() != held_before {
                scanned = (0, 0);
            }
            let mut ahead = in_transaction.len() + recorded.as_ref().map_or(0, |u| u.bytes.len());
            if held.is_some() {
                while let Some(frame) = up.buf.get(scanned.0..).and_then(|rest| rest.get(..frame_len(rest)?)) {
                    if !frame_head(frame).0.is_some_and(|name| name.eq_ignore_ascii_case(b"rill.unit")) {
                        scanned.1 += frame.len() as u64;
                    }
                    scanned.0 += frame.len().max(1);
                }
                ahead +=
                    usize::try_from(scanned.1).unwrap_or(usize::MAX) + (up.buf.len() - scanned.0.min(up.buf.len()));
            }
            if let Some(m) = st.replication.master.as_mut() {
                m.last_io_ms = now_ms();
                m.read_ahead = ahead as u64;
            }
        }
        if reply_ack {
            send_ack(shared, up, &mut fack).await?;
        }
        if let Some((figures, left, total)) = draining.as_mut() {
            *left = if more || held.is_some() { (*left).min(up.buf.len() as u64) } else { 0 };
            figures.size.store(*left, std::sync::atomic::Ordering::Relaxed);
            if *left == 0 {
                tracing::info!(
                    "MASTER <-> REPLICA sync: Successfully streamed replication buffer into the db ({total} bytes in total)"
                );
                *draining = None;
            } else if shared.lock().replication.debug_pause.on_streaming_buffer {
                crate::replication::debug_stop();
            }
        }
        if more {
            tokio::task::yield_now().await;
            // Killed between two batches (the stream is not read until what it holds is
            // applied): the link ends now, not once all of it is.
            if crate::conn::feed::notified_now(&client.kill) {
                return Err("the link was killed (CLIENT KILL)".into());
            }
            continue;
        }
        up.buf.reserve(READ_CHUNK_BYTES);
        tokio::select! {
            // Held by a pause: look again when it changes or ends.
            () = pause_over(held) => continue,
            r = up.stream.read_buf(&mut up.buf) => match r {
                Ok(0) => return Err("the primary closed the connection".into()),
                Ok(_) => last_heard = tokio::time::Instant::now(),
                Err(e) => return Err(format!("read error: {e}")),
            },
            _ = ack_timer.tick() => {
                if !current(shared, generation) {
                    return Ok(());
                }
                send_ack(shared, up, &mut fack).await?;
            }
            () = tokio::time::sleep_until(last_heard + timeout) => {
                return Err("MASTER timeout: no data nor PING received".into());
            }
            () = client.kill.notified() => return Err("the link was killed (CLIENT KILL)".into()),
        }
    }
}

/// A decimal argument of the primary's stream.
fn number<T: std::str::FromStr>(arg: Option<&Bytes>) -> Option<T> {
    std::str::from_utf8(arg?).ok()?.parse().ok()
}

/// A unit of a rill primary whose record arrived and whose bytes (Redis' forms, which the
/// record replaces here) are arriving: applied once they all have, so that the offset, which
/// counts them, and the data move together.
#[derive(Debug, Default)]
struct Recorded {
    /// How many bytes of Redis' forms the unit has.
    len: usize,
    /// The record (`rill_engine::effect` record body).
    body: Bytes,
    /// Its bytes received so far (relayed as they are, for this server's own replicas).
    bytes: Vec<u8>,
}

/// Apply rill's record of one of the primary's units, as one unit here (`unit::run`): each
/// effect as the log replays it, at the primary's time, so this server's log gets the same
/// record and its data what the primary's has (a consumer's seen-time too, which Redis' forms
/// do not carry); PUBLISH and SPUBLISH reach this server's subscribers.
fn apply_record(shared: &Shared, st: &mut State, body: &Bytes) -> Result<(), String> {
    use rill_engine::effect::Effect;
    let (time, effects) =
        rill_engine::effect::decode_record_shared(body.clone()).map_err(|e| format!("a bad unit record: {e}"))?;
    let published = |effect: &Effect| match effect {
        Effect::Command { args, .. } => {
            let shard = args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"spublish"));
            (shard || args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"publish"))).then_some(shard)
        }
        _ => None,
    };
    // The record's effects are what this server's journal gets, in the same encoding: copied
    // whole, not encoded again one by one — unless a PUBLISH among them, which reaches this
    // server's replicas but not its log.
    let whole = !effects.iter().any(|e| published(e).is_some());
    crate::unit::run(st, time, |st| {
        st.engine.set_applying_record(true);
        let mut buf = st.journal.lend_buf();
        for effect in effects {
            if let (Some(shard), Effect::Command { db, args }) = (published(&effect), &effect) {
                if let (Some(channel), Some(message)) = (args.get(1), args.get(2)) {
                    crate::pubsub::publish(st, shard, channel, message, time);
                }
                st.journal.push_unlogged_command(*db, args);
                continue;
            }
            if !whole {
                buf.push(&effect);
            }
            // The command's name and subcommand, for the log line of a failure.
            let head = match &effect {
                Effect::Command { args, .. } => [args.first().cloned(), args.get(1).cloned()],
                _ => [None, None],
            };
            if let Err(e) = st.engine.apply_effect(&shared.log_table, time, effect) {
                // A primary records only what it did: a failure means the copy now differs,
                // as when a command of Redis' forms fails (`apply`).
                let head: Vec<Bytes> = head.into_iter().flatten().collect();
                let name = match shared.log_table.resolve(&head) {
                    rill_engine::command::Lookup::Found(spec) => spec.name,
                    _ => "<unknown>",
                };
                sent_an_error_to_the_primary(st, e.to_string().as_bytes(), name);
            }
            // A replica notifies its own subscribers of what it applied, as Redis' do.
            crate::notify::publish_events(st, time);
            if !whole {
                st.journal.push(&mut buf);
            }
        }
        if whole && buf.append_record(body) {
            st.journal.push(&mut buf);
        }
        st.journal.return_buf(buf);
        st.engine.set_applying_record(false);
    });
    Ok(())
}

/// When a pause holding the stream changes or ends (never, without one).
async fn pause_over(held: Option<crate::pause::HeldWait>) {
    let Some(mut w) = held else { return std::future::pending().await };
    let until = w.until_ms.map(|ms| Duration::from_millis(u64::try_from(ms - now_ms()).unwrap_or(0)));
    match until {
        Some(d) => {
            let _ = tokio::time::timeout(d, w.changed.changed()).await;
        }
        None => {
            let _ = w.changed.changed().await;
        }
    }
}

/// The end of the line starting at `from`, past its `\n`.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?.iter().position(|&b| b == b'\n').map(|i| from + i + 1)
}

/// The decimal number of a header line `buf[from..to]` (line end included), read as Redis reads
/// a request's counts and lengths (`util::parse_i64`); a negative one is 0.
fn header_number(buf: &[u8], from: usize, to: usize) -> Option<usize> {
    let mut text = buf.get(from..to)?;
    while let [rest @ .., b'\r' | b'\n'] = text {
        text = rest;
    }
    rill_engine::util::parse_i64(text).map(|n| usize::try_from(n).unwrap_or(0))
}

/// The first two arguments of a whole multibulk frame (`frame_len` found it all there):
/// the command's name and what may name its subcommand.
fn frame_head(frame: &[u8]) -> (Option<&[u8]>, Option<&[u8]>) {
    let mut head = [None, None];
    if frame.first() == Some(&b'*') {
        let Some(mut at) = line_end(frame, 0) else { return (None, None) };
        let count = header_number(frame, 1, at).unwrap_or(0);
        for slot in head.iter_mut().take(count) {
            if frame.get(at) != Some(&b'$') {
                break;
            }
            let Some(end) = line_end(frame, at) else { break };
            let Some(len) = header_number(frame, at + 1, end) else { break };
            *slot = frame.get(end..end.saturating_add(len));
            at = end.saturating_add(len).saturating_add(2);
        }
    }
    let [name, sub] = head;
    (name, sub)
}

/// The length of the request at the front of `buf` if it is all there: a multibulk
/// (`*N` then N bulks) or an inline line.
fn frame_len(buf: &[u8]) -> Option<usize> {
    let number = header_number;
    if buf.first() != Some(&b'*') {
        return line_end(buf, 0);
    }
    let mut at = line_end(buf, 0)?;
    let count = number(buf, 1, at)?;
    for _ in 0..count {
        match buf.get(at) {
            Some(b'$') => {}
            // The next bulk has not arrived yet (a read can end right after a header): the
            // frame is not all there, and none of its bytes counts yet.
            None => return None,
            // Not a bulk: let the parser report the error on what is there.
            Some(_) => return Some(buf.len()),
        }
        let end = line_end(buf, at)?;
        let len = number(buf, at + 1, end)?;
        at = end.checked_add(len)?.checked_add(2)?;
        if at > buf.len() {
            return None;
        }
    }
    Some(at)
}

/// `REPLCONF ACK <offset>`: how far this replica has applied the stream; with the log on,
/// `FACK <offset>` too: how far its log holds the stream on disk (`WAITAOF` on the primary).
/// That is the offset applied when everything logged so far was fsynced, kept in `fack`.
async fn send_ack(shared: &Shared, up: &mut Upstream, fack: &mut u64) -> Result<(), String> {
    let (offset, logging) = {
        let st = shared.lock();
        let offset = st.replication.offset();
        let logging = st.journal.log().is_some();
        if logging && st.journal.log_copies_at(st.journal.appended()) > 0 {
            *fack = offset;
        }
        (offset, logging)
    };
    let offset = offset.to_string();
    if logging {
        let fack = fack.to_string();
        up.send(&[b"REPLCONF", b"ACK", offset.as_bytes(), b"FACK", fack.as_bytes()]).await
    } else {
        up.send(&[b"REPLCONF", b"ACK", offset.as_bytes()]).await
    }
}

/// Run one command of the primary's stream through dispatch (one unit, `unit::run`), as the
/// primary's client: never refused as a write on a read-only replica, the reply dropped.
fn apply(shared: &Shared, st: &mut State, master: &mut Conn, args: &mut Vec<Bytes>) {
    let now = now_ms();
    // The primary's commands see keys whose time has passed: deleting them is its decision.
    st.engine.set_applying_stream(true);
    // The command's full name, as the log line below names it (`<unknown>`: no such command).
    let name = match shared.log_table.resolve(args) {
        rill_engine::command::Lookup::Found(spec) => Some(spec),
        _ => None,
    };
    let action = crate::dispatch::execute(shared, st, master, args, now);
    st.engine.set_applying_stream(false);
    // A primary streams only what succeeded on it: an error here means the copy now differs
    // from the primary. Redis logs each such reply and counts it; inside a transaction, each
    // failed command of the EXEC.
    let errors: Vec<Bytes> = match &action {
        Action::Reply(rill_resp::Reply::Error(e)) => vec![e.clone()],
        Action::Reply(rill_resp::Reply::Array(items)) if name.is_some_and(|s| s.flags.has(Flags::EXEC)) => items
            .iter()
            .filter_map(|r| match r {
                rill_resp::Reply::Error(e) => Some(e.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let name = name.map_or("<unknown>", |s| s.name);
    for e in errors {
        sent_an_error_to_the_primary(st, &e, name);
    }
}

/// This replica answered its primary's stream with the error `e` (after the command `name`):
/// logged as Redis logs it (the text tools and tests look for), counted in INFO
/// `unexpected_error_replies`, and, on a read-only replica whose `propagation-error-behavior`
/// says so, the end of the process (Redis panics there).
fn sent_an_error_to_the_primary(st: &mut State, e: &[u8], name: &str) {
    let text = String::from_utf8_lossy(e.get(..4096).unwrap_or(e));
    tracing::warn!(
        "== CRITICAL == This replica is sending an error to its master: '{text}' after processing the command '{name}'"
    );
    st.stats.unexpected_error_replies += 1;
    let behavior = st.config.get("propagation-error-behavior");
    let panics = behavior == "panic" || behavior == "panic-on-replicas";
    if panics && st.config.get("replica-read-only") != "no" {
        panic!("This replica panicked sending an error to its master after processing the command '{name}'");
    }
}

#[cfg(test)]
mod tests {
    use super::{frame_head, frame_len, header_number};

    #[test]
    fn a_frame_is_complete_only_with_all_its_bulks() {
        let set = b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$1\r\n1\r\n";
        assert_eq!(frame_len(set), Some(set.len()));
        // Every cut inside it (after the header too) leaves it incomplete.
        for cut in 0..set.len() {
            assert_eq!(frame_len(set.get(..cut).unwrap_or_default()), None, "cut at {cut}");
        }
        assert_eq!(frame_len(b"PING\r\n*1"), Some(6));
        // Not a bulk after the header: handed whole to the parser, which reports it.
        assert_eq!(frame_len(b"*1\r\n:1\r\n"), Some(8));
    }

    #[test]
    fn header_numbers_read_as_redis_reads_them_and_negatives_are_zero() {
        let n = |t: &[u8]| header_number(t, 0, t.len());
        assert_eq!(n(b"12\r\n"), Some(12));
        assert_eq!(n(b"0\r\n"), Some(0));
        assert_eq!(n(b"-1\r\n"), Some(0));
        assert_eq!(n(b"9223372036854775807\r\n"), Some(i64::MAX as usize));
        assert_eq!(n(b"9223372036854775808\r\n"), None);
        for bad in [&b"\r\n"[..], b"-\r\n", b"1 \r\n", b"x1\r\n", b"1.5\r\n", b"+7\r\n", b"07\r\n"] {
            assert_eq!(n(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_frames_head_is_its_name_and_next_argument() {
        let xgroup = b"*5\r\n$6\r\nXGROUP\r\n$6\r\nCREATE\r\n$1\r\ns\r\n$1\r\ng\r\n$1\r\n$\r\n";
        assert_eq!(frame_head(xgroup), (Some(&b"XGROUP"[..]), Some(&b"CREATE"[..])));
        assert_eq!(frame_head(b"*1\r\n$4\r\nPING\r\n"), (Some(&b"PING"[..]), None));
        assert_eq!(frame_head(b"*0\r\n"), (None, None));
        assert_eq!(frame_head(b"PING\r\n"), (None, None));
        assert_eq!(frame_head(b"*2\r\n:1\r\n"), (None, None));
    }
}
