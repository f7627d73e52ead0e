//! A connection's own state, which only its task touches ([`Conn`]), the transaction it is
//! queueing ([`Multi`]), and what a request leads to ([`Action`]). Dispatch, the server
//! commands and the connection loop all use these; none of them owns them.

use crate::clock::Tick;
use bytes::Bytes;
use rill_engine::command::{CommandSpec, Lookup};
use rill_engine::{BlockRequest, CmdError};
use rill_resp::{Protocol, Reply};

/// Per-connection state that only the connection's own task touches.
#[derive(Debug)]
pub struct Conn {
    /// Client id.
    pub id: u64,
    /// Selected database.
    pub db: usize,
    /// Protocol in use.
    pub proto: Protocol,
    /// Whether AUTH (or HELLO AUTH) succeeded, or no password is required.
    pub authenticated: bool,
    /// Open transaction, if any.
    pub multi: Option<Multi>,
    /// CLIENT REPLY mode.
    pub reply_mode: ReplyMode,
    /// When the previous command finished (or the batch started): each command's duration is
    /// measured from here, so timing costs one clock read per command.
    pub clock: Tick,
    /// The last command run, not yet copied into the shared client record.
    pub last_cmd: &'static str,
    /// Commands run since the shared client record was last updated.
    pub cmds_unpublished: u64,
    /// Commands run in the current batch of input (CLIENT LIST `avg-pipeline-len-sum`).
    pub batch_cmds: u64,
    /// Bytes read since the shared client record was last updated.
    pub net_in_unpublished: u64,
    /// Bytes written since the shared client record was last updated.
    pub net_out_unpublished: u64,
    /// The time the current batch of requests started, Unix ms.
    pub batch_now_ms: i64,
    /// The last top-level command resolved, by the name as the client spelled it: pipelines
    /// mostly repeat one command, and comparing a few bytes is cheaper than a hash lookup.
    pub last_lookup: LastLookup,
    /// The most bytes one reply may take (see [`crate::client_limits::reply_budget_bytes`]).
    pub reply_budget: u64,
    /// A reply did not fit the client's limits: close the connection without writing more.
    pub close_asap: bool,
    /// What `REPLCONF` said of this connection (a replica about to sync).
    pub repl: crate::replication::primary::ReplConf,
    /// Replies are waiting to be written ahead of the command running (`PSYNC` refuses to
    /// start a link then, as Redis).
    pub output_pending: bool,
    /// The primary's stream on a replica (`replica.rs`): its writes are obeyed, never refused
    /// as a read-only replica's.
    pub is_master: bool,
    /// Where this client's last write ended: the replication offset and the log offset
    /// (`WAIT`, `WAITAOF` wait for copies up to them).
    pub last_write: (u64, u64),
    /// Subscribed to any channel, pattern or shard channel (Redis' `CLIENT_PUBSUB`): a RESP2
    /// client then runs only the commands flagged `SUBSCRIBE_CONTEXT`.
    pub subscribed: bool,
    /// The positions of the running command's secret arguments (a password), set by its
    /// handler: SLOWLOG (and MONITOR) show `(redacted)` in their place. Cleared after each
    /// command.
    pub redacted: Vec<u32>,
    /// How long the last command ran, µs: a command that parks is timed again when it ends,
    /// and its first run counts too (`blocking::Waiter::ran_micros`).
    pub last_micros: u64,
    /// The error this command replies was counted already (a script's error that a command
    /// inside it raised): dispatch counts the call failed but not the error again.
    pub error_already_counted: bool,
    /// The ACL user it runs as; `None` for the server's own connections (a primary's stream,
    /// scripts' inner client), which every command is allowed to.
    pub user: Option<std::sync::Arc<crate::acl::User>>,
    /// The ACL generation `user` was looked up at (`acl::Registry::refresh`).
    pub acl_gen: u64,
    /// The inner connection scripts run their commands on.
    pub script: bool,
    /// The client whose CLIENT TRACKING a read is remembered for and whose NOLOOP a write
    /// honours: its own id, or on scripts' inner connection the script's caller.
    pub tracking_id: u64,
    /// Output was pushed to it before its command ran (an eviction or the tracking table's
    /// limit invalidated a key it caches): that output goes before the reply, as in Redis.
    pub push_first: bool,
}

impl Conn {
    /// A new connection's state: database 0, RESP2, replies on, no transaction.
    pub fn new(id: u64, authenticated: bool) -> Conn {
        Conn {
            id,
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            multi: None,
            reply_mode: ReplyMode::On,
            clock: Tick::now(),
            last_cmd: "",
            cmds_unpublished: 0,
            batch_cmds: 0,
            net_in_unpublished: 0,
            net_out_unpublished: 0,
            batch_now_ms: 0,
            last_lookup: LastLookup::default(),
            reply_budget: u64::MAX,
            close_asap: false,
            repl: Default::default(),
            output_pending: false,
            is_master: false,
            last_write: (0, 0),
            subscribed: false,
            redacted: Vec::new(),
            last_micros: 0,
            error_already_counted: false,
            user: Some(crate::acl::unresolved_default()),
            acl_gen: u64::MAX,
            script: false,
            tracking_id: id,
            push_first: false,
        }
    }
}

/// A one-entry cache of name → command (containers are never cached: their subcommand
/// depends on the next argument).
#[derive(Debug, Default)]
pub struct LastLookup {
    name: [u8; 16],
    len: usize,
    spec: Option<&'static CommandSpec>,
}

impl LastLookup {
    pub(crate) fn resolve(&mut self, table: &rill_engine::command::CommandTable, args: &[Bytes]) -> Lookup {
        if let (Some(spec), Some(name)) = (self.spec, args.first()) {
            if self.name.get(..self.len) == Some(&name[..]) {
                return Lookup::Found(spec);
            }
        }
        match (args.first(), args.first().and_then(|name| table.get(name))) {
            (Some(name), Some(spec)) if !spec.is_container() => {
                if let Some(dst) = self.name.get_mut(..name.len()) {
                    dst.copy_from_slice(name);
                    self.len = name.len();
                    self.spec = Some(spec);
                }
                Lookup::Found(spec)
            }
            _ => table.resolve(args),
        }
    }
}

/// CLIENT REPLY ON|OFF|SKIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Replies are sent.
    On,
    /// No replies are sent.
    Off,
    /// The next command's reply is not sent.
    Skip,
    /// Set by SKIP: skip the reply of the command after the current one.
    SkipNext,
}

/// A transaction being queued.
#[derive(Debug, Default)]
pub struct Multi {
    /// Queued commands.
    pub queued: Vec<(&'static CommandSpec, Vec<Bytes>)>,
    /// A queued command was rejected: EXEC must answer EXECABORT.
    pub failed: bool,
    /// Bytes of the queued commands' arguments (Redis' `multi-mem`; counts toward
    /// `client-query-buffer-limit`).
    pub argv_bytes: usize,
}

/// What the connection does after a request.
#[derive(Debug)]
pub enum Action {
    /// Send this reply.
    Reply(Reply),
    /// Park the client until a key is ready or the deadline passes.
    Block {
        /// The command to re-run.
        spec: &'static CommandSpec,
        /// Its arguments.
        args: Vec<Bytes>,
        /// Keys and deadline; boxed, so that every other action (every request's, moved
        /// several times on its way to the reply) is 56 bytes rather than 160.
        request: Box<BlockRequest>,
    },
    /// Send the reply (if any), then close the connection.
    Close(Option<Reply>),
    /// No reply at all (`REPLCONF ACK` from a connection that is no replica's link, as Redis).
    Nothing,
    /// `WAIT` / `WAITAOF` that must wait: the connection answers once enough copies exist or
    /// the deadline passes (`conn/`), reading nothing meanwhile.
    AwaitCopies(Box<crate::replication::primary::CopiesWait>),
    /// The connection becomes a replica's link (`PSYNC`, `SYNC`): send `preamble` (the
    /// `+FULLRESYNC` / `+CONTINUE` line), then feed it.
    Replica {
        /// Raw bytes to send first.
        preamble: Vec<u8>,
        /// What the feed needs.
        feed: Box<crate::replication::primary::Feed>,
    },
    /// Send these replies, one after the other, whatever CLIENT REPLY says: the subscription
    /// confirmations of (P|S)(UN)SUBSCRIBE, one per channel, which Redis sends as pushes
    /// (RESP3 `>` frames) rather than as a reply.
    Pushes(Vec<Reply>),
    /// The command is held by a pause (`pause.rs`): the connection keeps the request and runs
    /// it again when the pause changes or ends. Only [`crate::dispatch::execute`] answers it.
    Held(crate::pause::HeldWait),
    /// A flush without ASYNC: the caller gets the reply once the lazyfree thread has freed
    /// the keys (the server serves everyone else meanwhile), as Redis 8 answers it.
    AwaitFreed(tokio::sync::oneshot::Receiver<()>, Reply),
    /// `SHUTDOWN`: the caller waits until the process ends (the connection closes, no reply)
    /// or the shutdown is cancelled (a change here: it gets the error) (`shutdown.rs`).
    AwaitShutdown(tokio::sync::watch::Receiver<u64>),
}

// Every request's action is moved several times on its way to the reply: kept small (the
// rare big ones boxed).
const _: () = assert!(std::mem::size_of::<Action>() <= 56);

impl From<CmdError> for Action {
    fn from(e: CmdError) -> Action {
        Action::Reply(e.to_reply())
    }
}
