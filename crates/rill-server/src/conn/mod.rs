//! A client connection, in three parts that meet at two seams, and the gate in front of the
//! state lock:
//!
//! ```text
//!            transport.rs              driver.rs                 session/
//!  bytes ◄──► Transport ◄── try_read ── drive(): one task ── run_batch ──► Session ──► dispatch
//!             (Tcp, Stream)  poll_*     per client; waits     settle        query buffer,
//!                 │          try_write_ for input, release,   released      parser, batch
//!                 │          vectored
//!                 │                     the busy gate; kill,  ...           under the lock,
//!                 │                     shutdown, timeouts                  output, Next
//!                 └─ direct(): DirectWrite ─────────────────────────────► blocking.rs writes
//!                    (TCP only)                                            a served reply
//!                                            ▲
//!                      push.rs: PushSender ──┘ frames other tasks hand the client (pub/sub
//!                      (in ClientInfo)         messages; next a replica's feed, MONITOR, ...)
//! ```
//!
//! * `session/` is the protocol state machine: it owns the query buffer, the parser, the
//!   output (`rill_resp::OutputBuffer`: encoded replies, large payloads referenced rather
//!   than copied) and the client's per-connection state, runs a batch of requests under the
//!   state lock (or, while the busy gate is closed, without it), and says what comes next
//!   ([`Next`]): read, write and run again, park, wait for the gate, close. It never touches a
//!   stream. Its async steps wait only for the log and for other tasks (yields).
//! * `driver.rs` is the I/O side for tokio: it reads into the session's buffer, writes its
//!   output, and waits on whatever `Next` names, with CLIENT KILL, shutdown, `timeout` and the
//!   soft output limit watched during every wait. It never sees a command.
//! * [`transport`] is what the driver reads and writes: [`Tcp`] (with direct delivery) or
//!   any tokio byte stream through [`Stream`] (a TLS stream, a Unix socket, a duplex pipe;
//!   replies for it when parked go through its task).
//! * [`busy`] is the gate in front of the state lock (`-BUSY` while a long script runs).
//! * [`push`] is push mode: output the client did not ask for, handed over by other tasks.
//!
//! ## Push mode
//!
//! Pub/sub messages (and next a primary's feed to a replica, MONITOR, keyspace events) reach a
//! client without a request. One mechanism serves them all, [`crate::push::push_to`]: under the state
//! lock, a task hands the client a frame, bytes already encoded for it, through the
//! [`crate::push::PushSender`] in its `ClientInfo`. The frame is queued (never written there, so no
//! lock is held while a socket is written), and the client's output limits are checked
//! against the queue plus what its output still holds, with the limits of its class (a
//! subscriber's are `client-output-buffer-limit pubsub`, a replica's will be `replica`): past
//! the hard limit, or the soft one for longer than its seconds, the client is closed and
//! counted in `client_output_buffer_limit_disconnections`, as Redis does.
//!
//! The client's own task takes the frames out, in order and whole: a batch, under the lock,
//! before its first request and after each reply (so a PUBLISH to the client's own channel
//! lands after the PUBLISH's reply, and inside EXEC after the whole EXEC, as in Redis); the
//! driver, woken by the queue's `Notify` while it waits for input or for a parked command,
//! writes them and goes on reading requests. A client that may be pushed to (subscribed) gets
//! no direct delivery when it parks, so that its driver is the only writer of its stream.
//!
//! Why not the blocked clients' path (`blocking.rs`): a release is one reply, handed over
//! once (a oneshot channel), that may have to wait for the log and may be written straight
//! into a parked socket; a push is a stream of frames, never waits for the log, and must keep
//! its order with the client's own replies. What they share is the client's output limits
//! (`client_limits.rs`) and the rule that another task writes a socket only when its owner
//! cannot be writing.
//!
//! Every fast path of the single-function loop this replaces is kept, and the TCP driver is
//! monomorphised over [`Tcp`], so it makes the same system calls in the same order: a read
//! attempted before any timer is armed, one state lock per batch, the yields that let woken
//! clients write first and make pipelined replies batch, replies written after the log is
//! safe, served clients' replies written straight into their sockets.
//!
//! ## Plugging in another I/O mechanism (io_uring)
//!
//! Measured first (`bench/p1.sh`, 2026-12-07, 50 clients, one GET in flight each, server on
//! one CPU): a server that does nothing but answer (`bench/floor/`, `reqresp-floor`) costs
//! about 9 µs of CPU per request on epoll, the same on io_uring (one receive per request, or
//! multishot receives into provided buffers with `DEFER_TASKRUN`: 10 paired rounds, median
//! ratio to epoll 1.00 and 1.01, rounds from 0.83 to 1.39), about 0.5-1 µs more on tokio.
//! Nearly all of it is the kernel's loopback TCP path, which no mechanism skips; the syscalls
//! themselves are already one `recvfrom` and one `sendto` per request with rill, as with Redis
//! (`epoll_wait` once per 30 requests). So io_uring was not built: what separates rill from
//! Redis at one request in flight is user-space work (8 170 instructions per GET against
//! Redis' 4 444, `bench/p1.sh --instructions`; 6 038 after that day's cuts), and that is where
//! the work went. Should a mechanism pay on another kernel or over a real network, a driver for
//! it replaces `driver.rs` and `transport.rs` only; the session and dispatch stay as they are.
//! What it must do, in the session's terms:
//!
//! 1. Keep a read submitted into the session's query buffer ([`Session::read_buffer`]; with
//!    completion-based I/O the kernel owns the buffer until the read completes, so lend it
//!    out and take it back, or read into a registered buffer and copy, as [`Stream`] does)
//!    and report the bytes with [`Session::received`]. On completion call
//!    [`Session::run_batch`], then [`Session::settle`], then submit a send of the session's
//!    output (`out`, visible to drivers inside `conn/`): its slices, as
//!    `OutputBuffer::with_slices` gives them, in one `sendmsg`, then `advance` it by what
//!    completed. The slices stay valid while the send is in flight as long as `out` is not
//!    touched: the encoded bytes are the session's, and each referenced payload is a `Bytes`
//!    the output holds (a zero-copy send can keep one alive past that by cloning it).
//!    Batching is where it pays: the ring gathers the sends and reads of every client that
//!    was ready in one loop turn and submits them with one `io_uring_enter`, where the epoll
//!    driver makes a `write`, a `read` and an `epoll_wait` wake-up per client per turn.
//! 2. Follow [`Next`] exactly as `driver.rs` does: `More` writes then runs again without
//!    reading; `Wait` keeps a read armed while it waits on the park's channel and timers;
//!    `Busy` waits on `shared.busy.opened()`; `Close` writes then closes; `Drop` closes.
//! 3. Decide direct delivery: an io_uring socket can offer a [`DirectWrite`] whose
//!    `try_write_vectored` is a plain non-blocking `writev(2)` on the descriptor (what TCP
//!    does now), or none, so that served replies go through the owner's ring like any other
//!    write.
//! 4. End with [`Session::finish`].

mod driver;
pub(crate) mod feed;
mod session;
mod spare;
pub mod transport;

pub use driver::Signals;
pub use session::{Batch, Copies, Next, Park, Released, Session};
pub use transport::{DirectWrite, Stream, Tcp, Transport};

use crate::client_limits::ClientMemory;
use crate::state::{now_ms, ClientInfo, ClientKind, HotConfig, Shared, State};
use bytes::Bytes;
use std::sync::Arc;
use tokio::sync::Notify;

/// A client admitted to the server, not yet served: what [`serve`] needs.
#[derive(Debug)]
pub struct Admitted {
    /// Its id.
    pub id: u64,
    /// Wakes its task when it is killed.
    pub kill: Arc<Notify>,
    /// No password is required.
    pub authenticated: bool,
    mem: Arc<ClientMemory>,
    hot: HotConfig,
    /// Where other tasks push output to this client (`src/push.rs`).
    pub(crate) push: crate::push::PushReceiver,
    /// Its client record, when it was admitted while a script held the lock: the connection
    /// registers it the first time it holds the lock ([`admit_later`]).
    pub(crate) unregistered: Option<Box<crate::state::ClientInfo>>,
    /// The ACL user it starts as, when not the default one (a TLS client certificate's name,
    /// `tls-auth-clients-user`).
    pub user: Option<Arc<crate::acl::User>>,
}

/// Where a client connects from and to (CLIENT LIST `addr`, `laddr`, `fd`).
#[derive(Debug, Clone)]
pub struct Peer {
    /// `ip:port` of the client.
    pub addr: String,
    /// `ip:port` it connected to.
    pub laddr: String,
    /// The socket's descriptor, or −1.
    pub fd: i64,
}

/// Register client `id` in the server's client table (under the lock, as admission checks
/// `maxclients` in the same critical section). `authenticated`: no password is required.
pub fn admit(st: &mut State, id: u64, peer: Peer, authenticated: bool) -> Admitted {
    let (info, admitted) = new_client(id, peer, authenticated, st.hot);
    st.clients.insert(id, info);
    admitted
}

/// Admit client `id` without the lock, while a script holds it: with the admission facts
/// the accept loop saw last (`hot`); its record is added when the connection first holds
/// the lock, so that it can be answered (BUSY, SCRIPT KILL) meanwhile, as Redis answers a new
/// client during a long script.
pub fn admit_later(id: u64, peer: Peer, authenticated: bool, hot: HotConfig) -> Admitted {
    let (info, mut admitted) = new_client(id, peer, authenticated, hot);
    admitted.unregistered = Some(Box::new(info));
    admitted
}

fn new_client(id: u64, peer: Peer, authenticated: bool, hot: HotConfig) -> (ClientInfo, Admitted) {
    let now = now_ms();
    let kill = Arc::new(Notify::new());
    let mem = Arc::new(ClientMemory::default());
    let (push_tx, push_rx) = crate::push::channel();
    let info = ClientInfo {
        id,
        addr: peer.addr,
        laddr: peer.laddr,
        fd: peer.fd,
        name: Bytes::new(),
        lib_name: Bytes::new(),
        lib_ver: Bytes::new(),
        created_ms: now,
        last_interaction_ms: now,
        db: 0,
        resp: 2,
        multi: -1,
        last_cmd: "",
        tot_cmds: 0,
        net_in: 0,
        read_events: 0,
        pipeline_len_sum: 0,
        pipeline_len_cnt: 0,
        net_out: 0,
        no_evict: false,
        no_touch: false,
        killed: false,
        kill: kill.clone(),
        blocked: false,
        mem: mem.clone(),
        kind: ClientKind::Normal,
        subs: Default::default(),
        push: push_tx,
        monitor: false,
        user: bytes::Bytes::from_static(b"default"),
        link_socket: None,
        tracking: Default::default(),
    };
    (info, Admitted { id, kill, authenticated, mem, hot, push: push_rx, unregistered: None, user: None })
}

/// Serve an admitted client over `transport` until it quits, is killed, or the server shuts
/// down; its client record is removed at the end.
///
/// The set-up runs here, at once; what is returned is only the driver's loop, so the task a
/// connection is spawned as holds neither `client` nor a second copy of the session.
pub fn serve<T: Transport>(
    shared: Arc<Shared>,
    transport: T,
    client: Admitted,
) -> impl std::future::Future<Output = ()> {
    let mut shutdown = shared.shutdown.subscribe();
    if *shutdown.borrow() {
        // Accepted while the server shuts down: a new receiver has seen the change, so it would
        // never fire. Such a client must not be served (a replica attaching now would be sent
        // bytes past the offset the server keeps for its restart).
        shutdown.mark_changed();
        client.push.wake();
    }
    let signals = Signals { kill: client.kill, shutdown };
    let mut session =
        Session::new(shared, client.id, client.mem, client.authenticated, &client.hot, transport.direct(), client.push);
    if let Some(info) = client.unregistered {
        session.register_later(info);
    }
    if let Some(user) = client.user {
        session.start_as(user);
    }
    driver::drive(transport, session, signals)
}
