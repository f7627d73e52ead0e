//! Client-side caching (`CLIENT TRACKING`): which clients may hold which keys, and the
//! invalidation messages that tell them a key changed.
//!
//! ```text
//!  a read-only command of a tracking client ──► remember: key ─► {client ids}   (default mode)
//!  the engine, on every write / expiry / flush ─► Touch (rill_engine, recorded while on)
//!       │ taken after each call (dispatch::call, a blocked client served, unit::run's end)
//!       ▼
//!  invalidate: the key's ids each get `invalidate [key]`, and the key leaves the table;
//!              keys under a BCAST prefix are kept for the prefix's clients;
//!              a flush sends every tracking client `invalidate <null>`
//!  broadcast (unit::run's end): each prefix's keys, sorted, to its clients, one message
//! ```
//!
//! A message goes to the client itself as a RESP3 push (`>2 invalidate [keys]`), or to the
//! client it redirects to: as a push if that one speaks RESP3, as a Pub/Sub `message` on
//! `__redis__:invalidate` if it speaks RESP2 and is subscribed to anything, and not at all
//! otherwise (a RESP2 client without redirection gets nothing, as from Redis). A redirection to
//! a client that is gone marks the tracking client `broken_redirect` and tells it so, in RESP3,
//! with a `tracking-redir-broken` push. Messages ride the push queues (`push.rs`), so one to
//! the client whose command caused it lands after that command's reply, as Redis defers it.
//!
//! As in Redis, the table is not per database, it keeps a disconnected client's entries until
//! their key is invalidated, and `tracking-table-max-keys` bounds it: past it, keys are
//! dropped (their clients told, as if the key changed) up to 100 per command or cron tick, more
//! each round the table stays over.
//!
//! Costs: nothing per command while no client tracks (the engine records no touches); a read
//! O(keys); a write O(tracking clients of the key + BCAST prefixes); a flush O(tracking clients).

use crate::state::State;
use bytes::{BufMut, Bytes, BytesMut};
use rill_engine::command::{CommandSpec, Flags};
use rill_engine::{CmdError, Touch};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One client's tracking mode (Redis' `CLIENT_TRACKING_*` flags, redirection and prefixes).
#[derive(Debug, Clone, Default)]
pub struct Mode {
    /// The client messages go to instead (0: none).
    pub redirect: u64,
    /// BCAST: told of every key under its prefixes, nothing remembered per key.
    pub bcast: bool,
    /// OPTIN: a read is remembered only after `CLIENT CACHING yes`.
    pub optin: bool,
    /// OPTOUT: a read is remembered unless after `CLIENT CACHING no`.
    pub optout: bool,
    /// NOLOOP: not told of its own writes.
    pub noloop: bool,
    /// `CLIENT CACHING` was given for the next command (or transaction).
    pub caching: bool,
    /// The client it redirects to was gone when a message was due.
    pub broken_redirect: bool,
    /// Its BCAST prefixes.
    pub prefixes: BTreeSet<Bytes>,
}

/// What `CLIENT TRACKING ON` asks for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// REDIRECT id (0: none).
    pub redirect: u64,
    /// BCAST.
    pub bcast: bool,
    /// OPTIN.
    pub optin: bool,
    /// OPTOUT.
    pub optout: bool,
    /// NOLOOP.
    pub noloop: bool,
    /// PREFIX p, in the order given.
    pub prefixes: Vec<Bytes>,
}

/// What CLIENT LIST shows of a client's tracking (flags `t`, `R`, `B`; `redir=`), kept in
/// its record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shown {
    /// Tracking is on.
    pub on: bool,
    /// Its redirection is broken.
    pub broken: bool,
    /// In BCAST mode.
    pub bcast: bool,
    /// The client it redirects to.
    pub redirect: u64,
}

/// A BCAST prefix: who listens, and the keys under it changed since the last broadcast, each
/// with the client that changed it last (`None`: the server, an expiry), for NOLOOP.
#[derive(Debug, Default)]
struct Prefix {
    clients: BTreeSet<u64>,
    keys: BTreeMap<Bytes, Option<u64>>,
}

/// The server's tracking state (`State::tracking`).
#[derive(Debug, Default)]
pub struct Tracking {
    /// Key → the clients that read it since it last changed (Redis' tracking table).
    keys: HashMap<Bytes, BTreeSet<u64>>,
    /// Entries over every key (INFO `tracking_total_items`).
    items: u64,
    prefixes: BTreeMap<Bytes, Prefix>,
    clients: HashMap<u64, Mode>,
    /// Rounds in a row the table stayed over `tracking-table-max-keys`.
    rounds_over: u32,
    /// The engine's touches, taken into a buffer kept for reuse.
    touches: Vec<Touch>,
    /// While a blocked client is served: the frames meant for it, held to follow its reply.
    held: Option<(u64, Vec<Bytes>)>,
}

/// What an invalidation message carries.
enum Value<'a> {
    /// One key.
    Key(&'a [u8]),
    /// An array of keys, already encoded (a broadcast).
    Encoded(&'a [u8]),
    /// Every key (a flush): a null in the tracking client's protocol.
    All,
}

impl Tracking {
    /// Whether any client tracks or any key is still tracked: the engine records touches only
    /// then, and commands look here only then.
    pub fn active(&self) -> bool {
        !self.clients.is_empty() || !self.keys.is_empty()
    }

    /// Client `id`'s mode, if it tracks.
    pub fn mode(&self, id: u64) -> Option<&Mode> {
        self.clients.get(&id)
    }

    /// INFO `tracking_clients`.
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// INFO `tracking_total_keys`.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// INFO `tracking_total_items`.
    pub fn item_count(&self) -> u64 {
        self.items
    }

    /// INFO `tracking_total_prefixes`.
    pub fn prefix_count(&self) -> usize {
        self.prefixes.len()
    }
}

/// Whether one prefix is a prefix of the other (Redis refuses such pairs for one client).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a.get(..n) == b.get(..n)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Tell the engine whether to record touches.
fn sync_engine(st: &mut State) {
    let on = st.tracking.active();
    st.engine.set_tracking(on);
}

/// Copy what CLIENT LIST shows into client `id`'s record.
fn show(st: &mut State, id: u64) {
    let shown = st.tracking.clients.get(&id).map_or(Shown::default(), |m| Shown {
        on: true,
        broken: m.broken_redirect,
        bcast: m.bcast,
        redirect: m.redirect,
    });
    if let Some(ci) = st.clients.get_mut(&id) {
        ci.tracking = shown;
    }
}

/// `CLIENT TRACKING ON` for client `id`, with Redis' checks in Redis' order.
pub fn enable(st: &mut State, id: u64, o: Options) -> Result<(), CmdError> {
    if !o.bcast && !o.prefixes.is_empty() {
        return Err(CmdError::full("ERR PREFIX option requires BCAST mode to be enabled"));
    }
    let current = st.tracking.clients.get(&id);
    if current.is_some_and(|m| m.bcast != o.bcast) {
        return Err(CmdError::full("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
    }
    if o.bcast && (o.optin || o.optout) {
        return Err(CmdError::full("ERR OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if o.optin && o.optout {
        return Err(CmdError::full("ERR You can't specify both OPTIN mode and OPTOUT mode"));
    }
    if current.is_some_and(|m| (o.optin && m.optout) || (o.optout && m.optin)) {
        return Err(CmdError::full("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
    }
    if o.bcast {
        for (i, p) in o.prefixes.iter().enumerate() {
            if let Some(old) = current.and_then(|m| m.prefixes.iter().find(|old| overlap(old, p))) {
                return Err(CmdError::owned(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    text(p),
                    text(old)
                )));
            }
            if let Some(other) = o.prefixes.iter().skip(i + 1).find(|q| overlap(p, q)) {
                return Err(CmdError::owned(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    text(p),
                    text(other)
                )));
            }
        }
    }
    let t = &mut st.tracking;
    let mode = t.clients.entry(id).or_default();
    mode.redirect = o.redirect;
    mode.broken_redirect = false;
    mode.optin = o.optin;
    mode.optout = o.optout;
    mode.noloop = o.noloop;
    mode.bcast = o.bcast;
    if o.bcast {
        let wanted: Vec<Bytes> = if o.prefixes.is_empty() { vec![Bytes::new()] } else { o.prefixes };
        for p in wanted {
            mode.prefixes.insert(p.clone());
            t.prefixes.entry(p).or_default().clients.insert(id);
        }
    }
    show(st, id);
    sync_engine(st);
    Ok(())
}

/// `CLIENT TRACKING OFF`, RESET, or the client left. Its entries in the table stay until
/// their keys change, as in Redis.
pub fn disable(st: &mut State, id: u64) {
    let Some(mode) = st.tracking.clients.remove(&id) else { return };
    for p in mode.prefixes {
        if let Some(state) = st.tracking.prefixes.get_mut(&p) {
            state.clients.remove(&id);
            if state.clients.is_empty() {
                st.tracking.prefixes.remove(&p);
            }
        }
    }
    show(st, id);
    sync_engine(st);
}

/// `CLIENT CACHING YES|NO` (`yes`): the next command or transaction is remembered (OPTIN) or
/// not (OPTOUT).
pub fn caching(st: &mut State, id: u64, yes: bool) -> Result<(), CmdError> {
    let Some(mode) = st.tracking.clients.get_mut(&id) else {
        return Err(CmdError::full(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    };
    match (yes, mode.optin, mode.optout) {
        (true, true, _) | (false, _, true) => {
            mode.caching = true;
            Ok(())
        }
        (true, ..) => {
            Err(CmdError::full("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."))
        }
        (false, ..) => {
            Err(CmdError::full("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."))
        }
    }
}

/// After a top-level command of client `id`: `CLIENT CACHING` lasts for the next command (the
/// whole transaction inside MULTI), and a CLIENT subcommand does not use it up, as in Redis.
pub fn command_done(st: &mut State, id: u64, spec_name: &str, in_multi: bool) {
    if in_multi || spec_name.starts_with("client|") {
        return;
    }
    if let Some(mode) = st.tracking.clients.get_mut(&id) {
        mode.caching = false;
    }
}

/// A command ran for client `owner` (a script's commands for its caller): if it reads and the
/// client tracks in default mode, remember the keys it read.
pub fn remember(st: &mut State, owner: u64, spec: &CommandSpec, args: &[Bytes]) {
    if !spec.flags.has(Flags::READONLY) || spec.flags.has(Flags::SCRIPT) || spec.flags.has(Flags::PUBSUB) {
        return;
    }
    let Some(mode) = st.tracking.clients.get(&owner) else { return };
    if mode.bcast || (mode.optin && !mode.caching) || (mode.optout && mode.caching) {
        return;
    }
    let Some(keys) = spec.keys_with_flags(args) else { return };
    let was_active = st.tracking.active();
    for (i, _) in keys {
        let Some(key) = args.get(i) else { continue };
        let ids = match st.tracking.keys.get_mut(&key[..]) {
            Some(ids) => ids,
            None => st.tracking.keys.entry(key.clone()).or_default(),
        };
        if ids.insert(owner) {
            st.tracking.items += 1;
        }
    }
    if !was_active {
        sync_engine(st);
    }
}

/// Send what the engine recorded since the last call: `current` is the client whose command
/// (or blocked command served) ran, if any (NOLOOP, and the keys of BCAST prefixes remember
/// it).
pub fn invalidate(st: &mut State, current: Option<u64>, now_ms: i64) {
    if !st.engine.has_tracking() {
        return;
    }
    let mut touches = std::mem::take(&mut st.tracking.touches);
    st.engine.take_tracking(&mut touches);
    for t in touches.drain(..) {
        match t {
            Touch::Key { key, by_server } => {
                invalidate_key(st, &key, if by_server { None } else { current }, current, true, now_ms)
            }
            Touch::Flush => flush(st, now_ms),
        }
    }
    st.tracking.touches = touches;
    if !st.tracking.active() {
        sync_engine(st);
    }
}

/// [`invalidate`] for a blocked client just served: the frames meant for the client itself
/// are returned, to follow its reply, rather than pushed.
pub fn invalidate_held(st: &mut State, client: u64, now_ms: i64) -> Vec<Bytes> {
    if !st.engine.has_tracking() {
        return Vec::new();
    }
    st.tracking.held = Some((client, Vec::new()));
    invalidate(st, Some(client), now_ms);
    st.tracking.held.take().map(|(_, frames)| frames).unwrap_or_default()
}

/// Push frames [`invalidate_held`] held, when no reply follows (the client stays parked).
pub fn push_held(st: &mut State, client: u64, frames: Vec<Bytes>, now_ms: i64) {
    for frame in frames {
        crate::push::push_to(st, client, frame, now_ms.div_euclid(1000));
    }
}

/// `key` changed (`bcast`), or is dropped from the table for its size: its clients are told,
/// and it leaves the table.
fn invalidate_key(st: &mut State, key: &Bytes, by: Option<u64>, current: Option<u64>, bcast: bool, now_ms: i64) {
    if bcast {
        for (p, state) in st.tracking.prefixes.iter_mut() {
            if key.starts_with(p) {
                state.keys.insert(key.clone(), by);
            }
        }
    }
    let Some(ids) = st.tracking.keys.remove(&key[..]) else { return };
    st.tracking.items = st.tracking.items.saturating_sub(ids.len() as u64);
    for id in ids {
        let Some(mode) = st.tracking.clients.get(&id) else { continue };
        // A client that switched to BCAST since it read the key is not told of it.
        if mode.bcast || (mode.noloop && Some(id) == current) {
            continue;
        }
        send(st, id, Value::Key(key), now_ms);
    }
}

/// Every database (or one) was emptied: every tracking client is told that all its keys are
/// invalid, and the table is emptied.
fn flush(st: &mut State, now_ms: i64) {
    let ids: Vec<u64> = st.tracking.clients.keys().copied().collect();
    for id in ids {
        send(st, id, Value::All, now_ms);
    }
    st.tracking.keys = HashMap::new();
    st.tracking.items = 0;
}

/// The end of a unit of work: each BCAST prefix's changed keys go to its clients, one
/// message per prefix (a NOLOOP client's without the keys it changed itself).
pub fn broadcast(st: &mut State, now_ms: i64) {
    if st.tracking.prefixes.values().all(|p| p.keys.is_empty()) {
        return;
    }
    let mut messages: Vec<(u64, Bytes)> = Vec::new();
    for state in st.tracking.prefixes.values_mut() {
        if state.keys.is_empty() {
            continue;
        }
        let keys = std::mem::take(&mut state.keys);
        let all = encode_keys(keys.keys());
        for &id in &state.clients {
            if st.tracking.clients.get(&id).is_some_and(|m| m.noloop) {
                let theirs: Vec<&Bytes> = keys.iter().filter(|(_, by)| **by != Some(id)).map(|(k, _)| k).collect();
                if !theirs.is_empty() {
                    messages.push((id, encode_keys(theirs.into_iter())));
                }
            } else {
                messages.push((id, all.clone()));
            }
        }
    }
    for (id, keys) in messages {
        send(st, id, Value::Encoded(&keys), now_ms);
    }
}

/// An array of bulk strings.
fn encode_keys<'a>(keys: impl ExactSizeIterator<Item = &'a Bytes>) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(format!("*{}\r\n", keys.len()).as_bytes());
    for k in keys {
        put_bulk(&mut out, k);
    }
    out.freeze()
}

fn put_bulk(out: &mut BytesMut, b: &[u8]) {
    out.put_slice(format!("${}\r\n", b.len()).as_bytes());
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// Deliver one message of client `id`'s tracking, to it or to the client it redirects to.
fn send(st: &mut State, id: u64, value: Value, now_ms: i64) {
    let Some(mode) = st.tracking.clients.get(&id) else { return };
    let redirect = mode.redirect;
    let own_resp3 = st.clients.get(&id).is_some_and(|c| c.resp == 3);
    let now_secs = now_ms.div_euclid(1000);
    let mut target = id;
    if redirect != 0 {
        if st.clients.get(&redirect).is_none_or(|c| c.killed) {
            if let Some(m) = st.tracking.clients.get_mut(&id) {
                m.broken_redirect = true;
            }
            show(st, id);
            if own_resp3 {
                let mut frame = BytesMut::new();
                frame.put_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n");
                frame.put_slice(format!(":{redirect}\r\n").as_bytes());
                crate::push::push_to(st, id, frame.freeze(), now_secs);
            }
            return;
        }
        target = redirect;
    }
    let Some(to) = st.clients.get(&target) else { return };
    let mut frame = BytesMut::new();
    if to.resp == 3 {
        frame.put_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else if redirect != 0 && to.subs.total() > 0 {
        frame.put_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    } else {
        // RESP2 has no pushes: without a redirection there is nothing to send.
        return;
    }
    match value {
        Value::Key(key) => {
            frame.put_slice(b"*1\r\n");
            put_bulk(&mut frame, key);
        }
        Value::Encoded(keys) => frame.put_slice(keys),
        // The null of the tracking client's protocol, wherever it goes (as Redis).
        Value::All => frame.put_slice(if own_resp3 { b"_\r\n" } else { b"$-1\r\n" }),
    }
    let frame = frame.freeze();
    if let Some((_, frames)) = st.tracking.held.as_mut().filter(|(held_for, _)| *held_for == target) {
        frames.push(frame);
        return;
    }
    crate::push::push_to(st, target, frame, now_secs);
}

/// `tracking-table-max-keys`: past it, drop keys from the table (their clients told) — up to
/// 100 per call, 100 more for each call in a row that left the table over the limit. Run
/// before each command and by the cron. `current`: the client about to run a command.
pub fn limit(st: &mut State, current: Option<u64>, now_ms: i64) {
    let max = st.hot.tracking_table_max_keys;
    if max == 0 || st.tracking.keys.len() <= max {
        st.tracking.rounds_over = 0;
        return;
    }
    let mut effort = 100 * (u64::from(st.tracking.rounds_over) + 1);
    while effort > 0 {
        effort -= 1;
        let Some(key) = st.tracking.keys.keys().next().cloned() else { break };
        invalidate_key(st, &key, None, current, false, now_ms);
        if st.tracking.keys.len() <= max {
            st.tracking.rounds_over = 0;
            sync_engine(st);
            return;
        }
    }
    st.tracking.rounds_over += 1;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_overlap_when_one_starts_the_other() {
        assert!(overlap(b"FOO", b"FOOBAR"));
        assert!(overlap(b"FOOBAR", b"FOO"));
        assert!(overlap(b"", b"x"));
        assert!(!overlap(b"FOO", b"BAR"));
    }

    #[test]
    fn keys_encode_as_one_array() {
        let keys = [Bytes::from_static(b"a"), Bytes::from_static(b"bc")];
        assert_eq!(&encode_keys(keys.iter())[..], b"*2\r\n$1\r\na\r\n$2\r\nbc\r\n");
    }
}
