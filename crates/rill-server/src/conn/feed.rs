//! A replica's link, on the primary: once `PSYNC` or `SYNC` made this connection a replica's
//! (`cmd/replication.rs`), its task stops reading requests and feeds the replica instead.
//!
//! ```text
//!  full sync:  snapshot (copied under the lock, copy-on-write) ─► encoded on a blocking
//!              thread in 1 MiB chunks, each sent as it is made: "$EOF:<mark>\r\n" ... <mark>
//!              (a replica without `capa eof`, `repl-diskless-sync no`, or a snapshot rebuilt
//!              from the log: the whole payload is made first, "\n" every second meanwhile,
//!              then sent)
//!              (after an EOF payload, the stream waits for the replica's first ACK)
//!              (a rill replica: its streams in rill's own type, blocks as they are in memory)
//!  then:       the backlog from the first byte not sent, as it grows (Replication::grown);
//!              REPLCONF ACK <offset> read back and recorded (INFO, ROLE)
//! ```
//!
//! Every replica reads the one backlog: the primary keeps no copy of the stream per replica.
//! The backlog holds what an attached replica has not been sent yet (while its snapshot is
//! made and sent, too), up to `client-output-buffer-limit replica`; past it the replica is
//! dropped, and resyncs (fully) when it reconnects: a slow replica costs the primary no more
//! memory than that limit (`replication/backlog.rs`). One that sends nothing for
//! `repl-timeout` seconds is dropped too.

use super::driver::Signals;
use super::transport::Transport;
use crate::persist::rewrite::{ReplicaSnapshot, Snapshot};
use crate::replication::backlog::Lost;
use crate::replication::primary::{Feed, LinkState};
use crate::state::{now_ms, Shared};
use bytes::{Bytes, BytesMut};
use rill_resp::{Limits, RequestParser};
use std::future::poll_fn;
use std::io::IoSlice;
use std::sync::Arc;
use std::time::Duration;

/// Why a replica whose pending output passed `client-output-buffer-limit replica` is dropped.
const OVER_LIMIT: &str = "overcoming of output buffer limits";

/// Turns of the run queue a woken feed lets pass before it reads the backlog (see `serve`).
/// One (the feed's first form) wrote to the replica between the clients' batches and their
/// replies: `bench/replication.sh`'s pipelined XADD with a replica went from 164k to 184-194k
/// requests/s, with less CPU per request (bigger writes, fewer of them).
const FEED_YIELDS: usize = 3;

/// Most stream bytes copied out of the backlog per write.
const FEED_CHUNK_BYTES: usize = 256 * 1024;

/// Feed the replica on `t` (client `id`) until the link ends; then forget it.
pub async fn run<T: Transport>(t: &mut T, shared: &Arc<Shared>, id: u64, feed: Box<Feed>, sig: &mut Signals) {
    let backlog = feed.backlog.clone();
    let reason = serve(t, shared, id, *feed, sig).await;
    tracing::info!("Connection with replica {} lost: {reason}", replica_name(shared, id));
    let mut st = shared.lock();
    st.replication.replicas.remove(&id);
    st.replication.rdb_channels.waiting.remove(&id);
    st.replication.rdb_channels.open.remove(&id);
    st.replication.rdb_channels.delayed.remove(&id);
    if reason == OVER_LIMIT {
        st.stats.output_buffer_limit_disconnections += 1;
    }
    drop(st);
    backlog.lock().unwrap_or_else(std::sync::PoisonError::into_inner).release(id);
}

fn replica_name(shared: &Shared, id: u64) -> String {
    let st = shared.lock();
    // An RDB channel goes by its main channel's name.
    let link = st.replication.replicas.get(&id).or_else(|| {
        let main = st.replication.rdb_channels.open.get(&id)?;
        st.replication.replicas.get(main)
    });
    link.map(|l| format!("{}:{}", l.ip, l.port)).unwrap_or_else(|| format!("id={id}"))
}

async fn serve<T: Transport>(t: &mut T, shared: &Arc<Shared>, id: u64, feed: Feed, sig: &mut Signals) -> &'static str {
    let Feed {
        mut snapshot,
        mut from,
        eof_mark,
        backlog,
        mut grown,
        rdb_only,
        rill,
        delayed,
        awaits_rdb_channel,
        main_channel,
    } = feed;
    if let Some(psync) = delayed {
        // An RDB channel's snapshot starts its main channel's stream; any other replica's
        // stream is held for it.
        let hold = |st: &mut crate::state::State, from: u64| match main_channel {
            Some(main) => crate::cmd::replication::start_main_channel(st, &backlog, main, from, &format!("id={id}")),
            None => crate::cmd::replication::hold_stream(st, &backlog, id, from, rill, rdb_only),
        };
        match wait_bgsave(t, shared, id, psync, &hold, sig).await {
            Ok((snap, start)) => (snapshot, from) = (Some(snap), start),
            Err(why) => return why,
        }
    }
    let mut input = BytesMut::new();
    if let Some(start) = awaits_rdb_channel {
        match wait_rdb_channel(t, start, sig, &mut input).await {
            Ok(start) => from = start,
            Err(why) => return why,
        }
    }
    // The last of rill's records sent (a rill replica's feed).
    let mut sent_record: Option<u64> = None;
    let mut parser = RequestParser::new();
    let mut wait_first_ack = false;
    // Whether this replica's pending output passed its limit (looked at while it is not
    // reading the stream: its snapshot is on the way, or it has not loaded it yet).
    let over = || backlog.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_over_limit(id);
    if let Some(snapshot) = snapshot {
        // A rill replica takes streams in rill's own type: each block as it is in memory.
        let snapshot = match snapshot {
            ReplicaSnapshot::Copy(snap) if rill => ReplicaSnapshot::Copy(snap.for_rill_replica()),
            other => other,
        };
        let made = std::time::Instant::now();
        let counted = SnapshotInProgress::new(shared);
        // `repl-diskless-sync no`: made whole first, then sent, as Redis sends its RDB file
        // once written (the replica waits meanwhile, and loads only what is complete).
        // With its length then, as Redis sends a file, whatever the replica reads.
        let diskless = shared.lock().config.get("repl-diskless-sync") == "yes";
        let eof_mark = eof_mark && diskless;
        let sent = match snapshot {
            ReplicaSnapshot::Copy(snap) if eof_mark => send_streamed(t, snap, sig, &over, &mut input).await,
            snapshot => {
                let made = || set_state(shared, id, LinkState::SendBulk);
                send_whole(t, snapshot, eof_mark, sig, &over, &mut input, &made).await
            }
        };
        drop(counted);
        let sent = match sent {
            Ok(bytes) => bytes,
            Err(why) => {
                if let Some(main) = main_channel {
                    // The snapshot did not arrive: its main channel's stream is of no use.
                    tracing::warn!("Background transfer error");
                    drop_main_channel(shared, main);
                }
                return why;
            }
        };
        if let Some(main) = main_channel {
            // The snapshot is sent: its main channel is online (its first ACK would say so
            // too).
            let mut st = shared.lock();
            if let Some(link) = st.replication.replicas.get_mut(&main) {
                if link.state == LinkState::SendBulkAndStream {
                    link.state = LinkState::Online;
                }
            }
        }
        tracing::info!(
            "Synchronization with replica {} succeeded ({sent} bytes made and sent in {} ms)",
            replica_name(shared, id),
            made.elapsed().as_millis()
        );
        if rdb_only {
            return "the snapshot was all it asked for";
        }
        set_state(shared, id, LinkState::Online);
        // As Redis: after an end-marked payload the stream starts once the replica says it
        // loaded it, so nothing follows the mark before the replica reads past it.
        wait_first_ack = eof_mark;
    }
    let timeout = Duration::from_secs(crate::replication::primary::seconds(&shared.lock().config, "repl-timeout", 60));
    let mut last_heard = tokio::time::Instant::now();
    let mut next = from;
    // What it sent while its snapshot was on the way (a command with a reply ends the link
    // now, not at its next write).
    if !input.is_empty() {
        match read_back(shared, id, &mut parser, &mut input) {
            Err(why) => return why,
            Ok(acked) => wait_first_ack &= !acked,
        }
    }
    loop {
        if wait_first_ack && over() {
            return OVER_LIMIT;
        }
        if !wait_first_ack {
            let read = {
                let mut b = backlog.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if rill {
                    with_records(&mut b, id, next, &mut sent_record)
                } else {
                    b.read(id, next).map(|(x, y)| {
                        let x = x.get(..x.len().min(FEED_CHUNK_BYTES)).unwrap_or_default();
                        let y = y.get(..y.len().min(FEED_CHUNK_BYTES - x.len())).unwrap_or_default();
                        let chunk = [x, y].concat();
                        let n = chunk.len() as u64;
                        (chunk, n)
                    })
                }
            };
            let (chunk, stream_bytes) = match read {
                Err(Lost::Behind) => return "it fell behind the backlog",
                Err(Lost::OverLimit) => return OVER_LIMIT,
                Ok(read) => read,
            };
            if !chunk.is_empty() {
                // A CLIENT KILL run by the unit that made these bytes (inside its EXEC) came
                // first: they are not this replica's any more, as Redis writes nothing more to
                // a client it closes.
                if kill_pending(sig) {
                    return "killed";
                }
                if let Err(why) = write_watched(t, &[&chunk], sig, Some(&over)).await {
                    return why;
                }
                next += stream_bytes;
                continue;
            }
        }
        tokio::select! {
            r = grown.changed() => {
                if r.is_err() {
                    return "the stream ended";
                }
                // Let the connections with requests ready run their batches and write their
                // replies first, then send what they all added in one write, as Redis writes
                // to its replicas once per event-loop turn (after the clients' replies) rather
                // than once per command. A connection yields up to twice between its batch and
                // its write (`Session::settle`): the feed goes round once more than that.
                for _ in 0..FEED_YIELDS {
                    tokio::task::yield_now().await;
                }
            }
            r = poll_fn(|cx| t.poll_read_ready(cx)) => {
                if r.is_err() {
                    return "read error";
                }
                match t.try_read(&mut input) {
                    Ok(0) => return "closed by the replica",
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(_) => return "read error",
                }
                match read_back(shared, id, &mut parser, &mut input) {
                    Err(why) => return why,
                    Ok(acked) => {
                        last_heard = tokio::time::Instant::now();
                        wait_first_ack &= !acked;
                    }
                }
            }
            () = tokio::time::sleep_until(last_heard + timeout) => return "timeout",
            () = sig.kill.notified() => return "killed",
            _ = sig.shutdown.changed() => return "shutdown",
        }
    }
}

/// A main channel waits for its RDB channel's snapshot to be taken: the stream's first byte
/// after it arrives through `start`. A replica that closes the connection meanwhile ends it.
async fn wait_rdb_channel<T: Transport>(
    t: &mut T,
    start: tokio::sync::oneshot::Receiver<u64>,
    sig: &mut Signals,
    input: &mut BytesMut,
) -> Result<u64, &'static str> {
    tokio::pin!(start);
    loop {
        tokio::select! {
            from = &mut start => return from.map_err(|_| "its RDB channel never came"),
            r = poll_fn(|cx| t.poll_read_ready(cx)) => watch_input(t, r, input)?,
            () = sig.kill.notified() => return Err("killed"),
            _ = sig.shutdown.changed() => return Err("shutdown"),
        }
    }
}

/// Close main channel `main` (its RDB channel failed), as CLIENT KILL would.
fn drop_main_channel(shared: &Shared, main: u64) {
    let mut st = shared.lock();
    if let Some(ci) = st.clients.get_mut(&main) {
        ci.kill_now();
    }
}

/// A replica's snapshot counted in `Persist::replica_snapshots` while it is made and sent,
/// until it has been sent or its link ended. Made and dropped without the state lock held.
struct SnapshotInProgress<'a>(&'a Shared);

impl SnapshotInProgress<'_> {
    fn new(shared: &Shared) -> SnapshotInProgress<'_> {
        shared.lock().persist.replica_snapshots += 1;
        SnapshotInProgress(shared)
    }
}

impl Drop for SnapshotInProgress<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.persist.replica_snapshots = st.persist.replica_snapshots.saturating_sub(1);
    }
}

/// Whether CLIENT KILL was called on this link and not yet seen (takes the notification).
fn kill_pending(sig: &Signals) -> bool {
    notified_now(&sig.kill)
}

/// Whether `n` was notified and not yet seen, without waiting (takes the notification).
pub(crate) fn notified_now(n: &tokio::sync::Notify) -> bool {
    use std::future::Future;
    let mut notified = std::pin::pin!(n.notified());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    notified.as_mut().poll(&mut cx).is_ready()
}

/// A full sync's delay (`repl-diskless-sync-delay`): a newline each second while the full
/// syncs waiting are not due (`cmd::replication::delayed_syncs_due`), then the snapshot and
/// the stream's position, taken under the lock (the stream held for the replica from there:
/// `hold`), and `+FULLRESYNC` (for a PSYNC). The state
/// lock is taken at every look, so a server stopped by DEBUG SLEEP sends no newline, as
/// Redis' stopped event loop sends none.
async fn wait_bgsave<T: Transport>(
    t: &mut T,
    shared: &Arc<Shared>,
    id: u64,
    psync: bool,
    hold: &(dyn Fn(&mut crate::state::State, u64) + Sync),
    sig: &mut Signals,
) -> Result<(ReplicaSnapshot, u64), &'static str> {
    let mut newline_at = tokio::time::Instant::now() + Duration::from_secs(1);
    loop {
        let started = {
            let mut st = shared.lock_async().await;
            // Another waiting replica's feed found them due and started them all.
            let r = &st.replication;
            let started = r.replicas.get(&id).is_some_and(|l| l.state != LinkState::Delayed)
                || (r.rdb_channels.open.contains_key(&id) && !r.rdb_channels.delayed.contains_key(&id));
            if started || crate::cmd::replication::delayed_syncs_due(&st, now_ms()) {
                if !started {
                    let suffix = if r.rdb_channels.delayed.is_empty() { "" } else { " (rdb-channel)" };
                    tracing::info!("Starting BGSAVE for SYNC with target: replicas sockets{suffix}");
                    for link in st.replication.replicas.values_mut().filter(|l| l.state == LinkState::Delayed) {
                        link.state = LinkState::WaitBgsave;
                    }
                    st.replication.rdb_channels.delayed.clear();
                }
                let (line, snap, from) = crate::cmd::replication::begin_full_sync(shared, &mut st, psync);
                hold(&mut st, from);
                Some((line, snap, from))
            } else {
                None
            }
        };
        if let Some((line, snap, from)) = started {
            if !line.is_empty() && !write_all(t, &[line.as_bytes()], sig).await {
                return Err("write error");
            }
            return Ok((snap, from));
        }
        if tokio::time::Instant::now() >= newline_at {
            if !write_all(t, &[b"\n"], sig).await {
                return Err("write error while it waited for its full sync");
            }
            newline_at = tokio::time::Instant::now() + Duration::from_secs(1);
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            () = sig.kill.notified() => return Err("killed"),
            _ = sig.shutdown.changed() => return Err("shutdown"),
        }
    }
}

/// A rill replica's next chunk: the stream's bytes from `next` with rill's record of each unit
/// before the unit's bytes (`RILL.UNIT <bytes> <record>`, see `replication/backlog.rs`), up to
/// about [`FEED_CHUNK_BYTES`]. Returns the chunk and how many stream bytes it holds (the
/// records do not count in the offsets).
fn with_records(
    b: &mut crate::replication::backlog::Backlog,
    id: u64,
    mut next: u64,
    sent_record: &mut Option<u64>,
) -> Result<(Vec<u8>, u64), Lost> {
    use crate::replication::backlog::Next;
    let mut chunk = Vec::new();
    let mut stream_bytes = 0u64;
    while chunk.len() < FEED_CHUNK_BYTES {
        match b.read_records(id, next, *sent_record, FEED_CHUNK_BYTES - chunk.len())? {
            Next::Record(r) => {
                *sent_record = Some(r.seq);
                let len = r.len.to_string();
                rill_resp::write_request_vec(&mut chunk, &[b"RILL.UNIT".as_slice(), len.as_bytes(), &r.body]);
            }
            Next::Bytes(x, y) => {
                let n = (x.len() + y.len()) as u64;
                if n == 0 {
                    break;
                }
                chunk.extend_from_slice(x);
                chunk.extend_from_slice(y);
                next += n;
                stream_bytes += n;
            }
        }
    }
    Ok((chunk, stream_bytes))
}

/// How often a replica whose snapshot is on the way is checked against its output limit.
const LIMIT_CHECK: Duration = Duration::from_millis(100);

/// Bytes of an encoded snapshot handed from the encoder to the link at a time. With
/// [`SNAPSHOT_QUEUE_CHUNKS`] it bounds what a full sync holds of the payload (a chunk being
/// made, those queued, the one being written: 512 KiB), as Redis' fork writes into a pipe:
/// the primary's memory does not grow with the snapshot.
const SNAPSHOT_CHUNK_BYTES: usize = 128 * 1024;

/// Chunks waiting between the encoder and the link.
const SNAPSHOT_QUEUE_CHUNKS: usize = 2;

/// Encode `snap` on a blocking thread while it is sent, end-marked (`$EOF:<mark>`): the
/// encoder hands over chunks of [`SNAPSHOT_CHUNK_BYTES`] through a queue of a few, so the
/// primary never holds the whole encoded snapshot, and sending overlaps encoding. Returns the
/// payload's size.
async fn send_streamed<T: Transport>(
    t: &mut T,
    snap: Snapshot,
    sig: &mut Signals,
    over: &impl Fn() -> bool,
    input: &mut BytesMut,
) -> Result<u64, &'static str> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(SNAPSHOT_QUEUE_CHUNKS);
    let encoder = background(move || {
        let out = ChunkSender { tx, buf: Vec::with_capacity(SNAPSHOT_CHUNK_BYTES) };
        let (mut out, size) = snap.write_to(out)?;
        out.send_rest()?;
        Ok::<u64, std::io::Error>(size)
    });
    let mark = crate::run::run_id();
    let head = format!("$EOF:{mark}\r\n");
    if !write_all(t, &[head.as_bytes()], sig).await {
        return Err("write error while sending the snapshot");
    }
    loop {
        let chunk = tokio::select! {
            c = rx.recv() => c,
            r = poll_fn(|cx| t.poll_read_ready(cx)) => {
                watch_input(t, r, input)?;
                continue;
            }
            // A slow snapshot (a chunk may take long to make): the output limit is looked at
            // meanwhile too, as the stream held for this replica grows.
            () = tokio::time::sleep(LIMIT_CHECK) => {
                if over() {
                    return Err(OVER_LIMIT);
                }
                continue;
            }
            () = sig.kill.notified() => return Err("killed"),
            _ = sig.shutdown.changed() => return Err("shutdown"),
        };
        let Some(chunk) = chunk else { break };
        if !write_all(t, &[&chunk], sig).await {
            // Dropping the queue stops the encoder at its next chunk.
            return Err("write error while sending the snapshot");
        }
        if over() {
            return Err(OVER_LIMIT);
        }
    }
    let size = match encoder.await {
        Ok(Ok(size)) => size,
        Ok(Err(e)) => {
            tracing::warn!("the snapshot for a replica could not be made: {e}");
            return Err("the snapshot could not be made");
        }
        Err(_) => return Err("the snapshot could not be made"),
    };
    if !write_all(t, &[mark.as_bytes()], sig).await {
        return Err("write error while sending the snapshot");
    }
    Ok(size)
}

/// Make the whole payload first, then send it with its length (a replica without `capa eof`)
/// or end-marked: a rebuilt snapshot arrives whole. Meanwhile a newline each second keeps the
/// replica from timing out, as Redis does while it prepares a snapshot.
async fn send_whole<T: Transport>(
    t: &mut T,
    snapshot: ReplicaSnapshot,
    eof_mark: bool,
    sig: &mut Signals,
    over: &impl Fn() -> bool,
    input: &mut BytesMut,
    made: &impl Fn(),
) -> Result<u64, &'static str> {
    let job = async move {
        match snapshot {
            ReplicaSnapshot::Copy(snap) => {
                background(move || snap.write_to(Vec::new()).map(|(bytes, _)| bytes).map_err(|e| e.to_string()))
                    .await
                    .map_err(|e| e.to_string())?
            }
            ReplicaSnapshot::Building(rx) => rx.await.map_err(|e| e.to_string())?,
        }
    };
    tokio::pin!(job);
    let payload: Result<Vec<u8>, String> = loop {
        tokio::select! {
            r = &mut job => break r,
            r = poll_fn(|cx| t.poll_read_ready(cx)) => watch_input(t, r, input)?,
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if over() {
                    return Err(OVER_LIMIT);
                }
                if !write_all(t, &[b"\n"], sig).await {
                    return Err("write error while the snapshot was made");
                }
            }
            () = sig.kill.notified() => return Err("killed"),
            _ = sig.shutdown.changed() => return Err("shutdown"),
        }
    };
    let payload = payload.map_err(|e| {
        tracing::warn!("the snapshot for a replica could not be made: {e}");
        "the snapshot could not be made"
    })?;
    made();
    let sent = if eof_mark {
        let mark = crate::run::run_id();
        let head = format!("$EOF:{mark}\r\n");
        write_all(t, &[head.as_bytes(), &payload, mark.as_bytes()], sig).await
    } else {
        let head = format!("${}\r\n", payload.len());
        write_all(t, &[head.as_bytes(), &payload], sig).await
    };
    if sent {
        Ok(payload.len() as u64)
    } else {
        Err("write error while sending the snapshot")
    }
}

/// While a snapshot is made and sent, the replica's side is watched too: a replica that closed
/// the link (it shut down, or gave up) ends it now, not when the snapshot is done, as Redis
/// notices it. What it sends meanwhile is kept for the stream's reading of its ACKs.
fn watch_input<T: Transport>(t: &mut T, ready: std::io::Result<()>, input: &mut BytesMut) -> Result<(), &'static str> {
    if ready.is_err() {
        return Err("read error");
    }
    match t.try_read(input) {
        Ok(0) => Err("closed by the replica"),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
        Err(_) => Err("read error"),
    }
}

/// Run `work` on a thread of its own at a lower priority (`rewrite::background_priority`:
/// the event loop comes first when both want the CPU); its result arrives on the receiver.
fn background<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> tokio::sync::oneshot::Receiver<R> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        crate::persist::rewrite::background_priority();
        let _ = tx.send(work());
    });
    rx
}

/// The encoder's end of [`send_streamed`]: full chunks go into the queue (waiting while it is
/// full); an error once the link's end is gone.
struct ChunkSender {
    tx: tokio::sync::mpsc::Sender<Vec<u8>>,
    buf: Vec<u8>,
}

impl ChunkSender {
    fn send_rest(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(SNAPSHOT_CHUNK_BYTES));
        self.tx.blocking_send(chunk).map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
}

impl std::io::Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        // Filled to its capacity and no further: a chunk is never reallocated to a bigger one.
        let mut rest = data;
        while !rest.is_empty() {
            let room = SNAPSHOT_CHUNK_BYTES.saturating_sub(self.buf.len()).max(1);
            let (now, later) = rest.split_at(rest.len().min(room));
            self.buf.extend_from_slice(now);
            rest = later;
            if self.buf.len() >= SNAPSHOT_CHUNK_BYTES {
                self.send_rest()?;
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Parse what the replica sent: the highest `REPLCONF ACK <offset> [FACK <offset>]` among
/// complete requests (anything else a replica sends is ignored, as Redis ignores a replica's
/// replies).
/// What a replica's link reads that is not an acknowledgement.
enum Stray {
    /// Bytes that are not RESP requests.
    Protocol,
    /// A command with a reply (anything but `REPLCONF ACK` / `GETACK`).
    Command(Vec<Bytes>),
}

/// A replica sent a command whose reply would go into its replication stream: Redis logs it
/// and closes the link (a command that reads or writes the keyspace is refused first, with
/// an error Redis logs as critical). Nothing is run.
fn stray_command(shared: &Shared, id: u64, args: &[Bytes]) {
    use rill_engine::command::{Flags, Lookup};
    let (name, keyspace) = match shared.table.resolve(args) {
        Lookup::Found(spec) => {
            let keyspace =
                spec.flags.has(Flags::READONLY) || spec.flags.has(Flags::WRITE) || spec.flags.has(Flags::MAY_REPLICATE);
            (spec.name.to_string(), keyspace)
        }
        _ => (args.first().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).unwrap_or_default(), false),
    };
    if keyspace {
        tracing::warn!(
            "== CRITICAL == This master is sending an error to its replica: 'Replica can't interact with the keyspace' after processing the command '{name}'"
        );
    }
    tracing::warn!("Replica generated a reply to command '{name}', disconnecting it: {}", replica_name(shared, id));
}

fn take_acks(parser: &mut RequestParser, input: &mut BytesMut) -> Result<Option<(u64, u64)>, Stray> {
    let limits = Limits { max_bulk_len: 1 << 20, max_inline_len: 64 * 1024, authenticated: true };
    let mut args: Vec<Bytes> = Vec::new();
    let mut best = None;
    loop {
        match parser.parse_into(input, &limits, &mut args) {
            Ok(true) => {}
            Ok(false) => return Ok(best),
            Err(_) => return Err(Stray::Protocol),
        }
        let replconf = args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"replconf"));
        let option = |o: &[u8]| args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(o));
        if !(replconf && (option(b"ack") || option(b"getack"))) {
            return Err(Stray::Command(std::mem::take(&mut args)));
        }
        let is_ack = args.len() >= 3 && option(b"ack");
        if is_ack {
            let number = |i: usize| {
                args.get(i).and_then(|a| rill_engine::util::parse_i64(a)).map(|n| u64::try_from(n).unwrap_or(0))
            };
            if let Some(offset) = number(2) {
                let fack = if args.get(3).is_some_and(|a| a.eq_ignore_ascii_case(b"fack")) {
                    number(4).unwrap_or(0)
                } else {
                    0
                };
                best = Some(best.map_or((offset, fack), |(b, f): (u64, u64)| (b.max(offset), f.max(fack))));
            }
        }
    }
}

/// Take what the replica sent from `input`: its highest ACK recorded (true if there was one);
/// a command with a reply, or bytes that are no request, end the link (the reason).
fn read_back(shared: &Shared, id: u64, parser: &mut RequestParser, input: &mut BytesMut) -> Result<bool, &'static str> {
    match take_acks(parser, input) {
        Err(Stray::Protocol) => Err("protocol error in what it sent"),
        Err(Stray::Command(args)) => {
            stray_command(shared, id, &args);
            Err("it sent a command that has a reply")
        }
        Ok(Some((offset, fack))) => {
            record_ack(shared, id, offset, fack);
            Ok(true)
        }
        Ok(None) => Ok(false),
    }
}

fn record_ack(shared: &Shared, id: u64, offset: u64, fack: u64) {
    let mut st = shared.lock();
    if let Some(link) = st.replication.replicas.get_mut(&id) {
        link.ack_offset = link.ack_offset.max(offset);
        link.fack_offset = link.fack_offset.max(fack);
        link.ack_ms = now_ms();
        link.state = LinkState::Online;
    }
    st.replication.acked.notify_waiters();
}

fn set_state(shared: &Shared, id: u64, state: LinkState) {
    if let Some(link) = shared.lock().replication.replicas.get_mut(&id) {
        link.state = state;
    }
}

/// Write every piece of `parts`, watching CLIENT KILL and shutdown. False if the connection
/// must close.
async fn write_all<T: Transport>(t: &mut T, parts: &[&[u8]], sig: &mut Signals) -> bool {
    write_watched(t, parts, sig, None).await.is_ok()
}

/// [`write_all`], and while the replica does not read, its output limit looked at every
/// [`LIMIT_CHECK`] (`over`): a replica that stopped reading is dropped once the stream held
/// for it passes the limit, not when it reads again. The reason when the link must close.
async fn write_watched<T: Transport>(
    t: &mut T,
    parts: &[&[u8]],
    sig: &mut Signals,
    over: Option<&(dyn Fn() -> bool + Sync)>,
) -> Result<(), &'static str> {
    let mut done = 0usize;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    while done < total {
        let mut slices = Vec::with_capacity(parts.len());
        let mut skip = done;
        for p in parts {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            slices.push(IoSlice::new(p.get(skip..).unwrap_or_default()));
            skip = 0;
        }
        tokio::select! {
            r = poll_fn(|cx| t.poll_write_vectored(cx, &slices)) => match r {
                Ok(n) if n > 0 => done += n,
                _ => return Err("write error"),
            },
            () = tokio::time::sleep(LIMIT_CHECK), if over.is_some() => {
                if over.is_some_and(|over| over()) {
                    return Err(OVER_LIMIT);
                }
            }
            () = sig.kill.notified() => return Err("killed"),
            _ = sig.shutdown.changed() => return Err("shutdown"),
        }
    }
    poll_fn(|cx| t.poll_flush(cx)).await.map_err(|_| "write error")
}
