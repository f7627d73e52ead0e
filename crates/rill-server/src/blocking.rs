//! Clients blocked on keys (BLPOP, BRPOP, and later XREAD/XREADGROUP BLOCK).
//!
//! A blocking command that finds nothing to serve asks to block ([`BlockRequest`]). The client
//! is parked here: per key a FIFO queue of client ids, per client its parked command. Writes
//! signal keys ready inside the engine; after each command (and after EXEC as a whole) the
//! server drains those keys and re-runs each parked command in FIFO order under the same lock,
//! so the first client to block is the first served and a client that loses the race simply
//! stays parked with its original deadline. A served client's reply travels to its connection
//! task over a oneshot channel.
//!
//! Cost: O(k) to park or unpark a client on k keys; serving a ready key costs one command run
//! per parked client tried.

use crate::state::State;
use bytes::Bytes;
use rill_engine::command::{CommandSpec, Handler};
use rill_engine::{BlockRequest, CallCtx};
use rill_resp::Reply;
use std::collections::{HashMap, VecDeque};
use tokio::sync::oneshot;

/// One parked client.
#[derive(Debug)]
pub struct Waiter {
    /// The command to re-run.
    pub spec: &'static CommandSpec,
    /// Its arguments.
    pub args: Vec<Bytes>,
    /// The client's database.
    pub db: usize,
    /// What the client blocked for.
    pub request: BlockRequest,
    /// Where the reply goes.
    pub tx: oneshot::Sender<(Reply, u64)>,
    /// Whether the client speaks RESP3 (some replies change shape, not just encoding).
    pub resp3: bool,
}

/// Every parked client.
#[derive(Debug, Default)]
pub struct Blocked {
    waiters: HashMap<u64, Waiter>,
    by_key: HashMap<(usize, Bytes), VecDeque<u64>>,
}

impl Blocked {
    /// Number of blocked clients.
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Whether nobody is blocked.
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Number of distinct keys clients are blocked on.
    pub fn key_count(&self) -> usize {
        self.by_key.len()
    }

    /// Keys with at least one client that a deletion of the key must wake (XREADGROUP answers
    /// NOGROUP then): INFO `total_blocking_keys_on_nokey`.
    pub fn nokey_key_count(&self) -> usize {
        self.by_key
            .values()
            .filter(|q| q.iter().any(|c| self.waiters.get(c).is_some_and(|w| w.spec.name == "xreadgroup")))
            .count()
    }

    /// When `client`'s parked command wants to be re-run without a signal (XREADGROUP CLAIM).
    pub fn wake_at(&self, client: u64) -> Option<i64> {
        self.waiters.get(&client).and_then(|w| w.request.wake_at_ms)
    }
}

/// Park `client`.
pub fn park(st: &mut State, client: u64, waiter: Waiter) {
    for key in &waiter.request.keys {
        let k = (waiter.db, key.clone());
        let q = st.blocked.by_key.entry(k.clone()).or_default();
        if !q.contains(&client) {
            q.push_back(client);
            *st.engine.blocking_keys.entry(k).or_default() += 1;
        }
    }
    if let Some(c) = st.clients.get_mut(&client) {
        c.blocked = true;
    }
    st.blocked.waiters.insert(client, waiter);
}

/// Unpark `client`, returning its waiter (None if it was not parked).
pub fn unpark(st: &mut State, client: u64) -> Option<Waiter> {
    let w = st.blocked.waiters.remove(&client)?;
    for key in &w.request.keys {
        let k = (w.db, key.clone());
        if let Some(q) = st.blocked.by_key.get_mut(&k) {
            q.retain(|c| *c != client);
            if q.is_empty() {
                st.blocked.by_key.remove(&k);
            }
        }
        if let Some(n) = st.engine.blocking_keys.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                st.engine.blocking_keys.remove(&k);
            }
        }
    }
    if let Some(c) = st.clients.get_mut(&client) {
        c.blocked = false;
    }
    Some(w)
}

/// Answer a parked client with `reply` (timeout, CLIENT UNBLOCK). Returns false if it was not
/// parked.
/// Answer a parked client (served, timed out, unblocked) with `reply`, to be sent once the log is safe up to `offset`.
fn release_at(st: &mut State, client: u64, reply: Reply, offset: u64) -> bool {
    match unpark(st, client) {
        Some(w) => {
            // The receiver may be gone (client disconnected); nothing to do then.
            let _ = w.tx.send((reply, offset));
            true
        }
        None => false,
    }
}

/// Serve parked clients on every key signalled ready, until no key is ready. Called after each
/// command outside MULTI and after EXEC.
pub fn serve_ready(st: &mut State, now_ms: i64) {
    if st.blocked.is_empty() {
        let _ = st.engine.take_ready_keys();
        return;
    }
    loop {
        let ready = st.engine.take_ready_keys();
        if ready.is_empty() {
            return;
        }
        for key in ready {
            let queue: Vec<u64> = match st.blocked.by_key.get(&key) {
                Some(q) => q.iter().copied().collect(),
                None => continue,
            };
            for client in queue {
                try_serve(st, client, now_ms);
            }
        }
    }
}

/// Re-run one parked client's command; if it no longer blocks, unpark it and send the reply.
/// If it blocks again, it keeps its deadline and takes the new wake-up time it asked for.
/// The call was counted when the command first ran, so a re-run adds no call, only a failure
/// if it ends in an error (as Redis counts a blocked command once).
pub fn try_serve(st: &mut State, client: u64, now_ms: i64) {
    let Some(w) = st.blocked.waiters.get(&client) else { return };
    let Handler::Engine(handler) = w.spec.handler else { return };
    let mut ctx = CallCtx::new(w.db, now_ms, client);
    ctx.deadline_override = Some(w.request.deadline_ms);
    ctx.resp3 = w.resp3;
    let args = w.args.clone();
    let spec = w.spec;
    let w_db = w.db;
    ctx.recording = st.aof.recording();
    let dirty_before = st.engine.dirty;
    let result = handler(&mut st.engine, &mut ctx, &args);
    st.record_command(&mut ctx.effects, ctx.explicit, dirty_before, spec, w_db, &args);
    // One record per served client; its reply waits for it.
    let offset = st.commit_effects(now_ms);
    if let Some(again) = ctx.block {
        if let Some(w) = st.blocked.waiters.get_mut(&client) {
            w.request.wake_at_ms = again.wake_at_ms;
        }
        return;
    }
    let reply = match result {
        Ok(r) => r,
        Err(e) => {
            st.stats.count_error(e.text().as_bytes());
            st.stats.command(spec).failed += 1;
            e.to_reply()
        }
    };
    release_at(st, client, reply, offset);
}
