#![allow(clippy::indexing_slicing)] // dispatch checks arity before any handler runs
//! Pub/Sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH and the PUBSUB
//! container. The registry and the delivery are `crate::pubsub`; messages travel through the
//! subscribers' push queues (`src/push.rs`).
//!
//! Costs: (un)subscribing O(log n) per channel; PUBLISH O(subscribers + patterns); PUBSUB
//! CHANNELS O(active channels); NUMSUB O(1) per channel asked about.

use super::{reply, Call, CmdResult};
use crate::client::Action;
use crate::pubsub::{self, Kind};
use bytes::Bytes;
use rill_resp::{Protocol, Reply};

/// PUBSUB HELP lines (rill's words).
pub const PUBSUB_HELP: &[&str] = &[
    "CHANNELS [<pattern>]",
    "    List the channels with at least one subscriber, those matching <pattern> if given.",
    "NUMPAT",
    "    Count the distinct patterns clients are subscribed to.",
    "NUMSUB [<channel> ...]",
    "    Count the subscribers of each channel given (pattern subscriptions not included).",
    "SHARDCHANNELS [<pattern>]",
    "    List the shard channels with at least one subscriber, those matching <pattern> if given.",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Count the subscribers of each shard channel given.",
];

/// SUBSCRIBE channel [channel ...]
pub fn subscribe(c: &mut Call) -> CmdResult {
    subscribe_to(c, Kind::Channel)
}

/// PSUBSCRIBE pattern [pattern ...]
pub fn psubscribe(c: &mut Call) -> CmdResult {
    subscribe_to(c, Kind::Pattern)
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
pub fn ssubscribe(c: &mut Call) -> CmdResult {
    subscribe_to(c, Kind::Shard)
}

/// UNSUBSCRIBE [channel ...]
pub fn unsubscribe(c: &mut Call) -> CmdResult {
    unsubscribe_from(c, Kind::Channel)
}

/// PUNSUBSCRIBE [pattern ...]
pub fn punsubscribe(c: &mut Call) -> CmdResult {
    unsubscribe_from(c, Kind::Pattern)
}

/// SUNSUBSCRIBE [shardchannel ...]
pub fn sunsubscribe(c: &mut Call) -> CmdResult {
    unsubscribe_from(c, Kind::Shard)
}

/// A (un)subscription confirmation: `[word, name or null, count]`, a push in RESP3.
fn confirmation(word: &'static str, name: Reply, count: usize) -> Reply {
    Reply::Push(vec![Reply::Bulk(Bytes::from_static(word.as_bytes())), name, Reply::Integer(count as i64)])
}

fn subscribe_to(c: &mut Call, kind: Kind) -> CmdResult {
    let (id, resp3) = (c.conn.id, c.conn.proto == Protocol::Resp3);
    let mut out = Vec::with_capacity(c.args.len() - 1);
    for name in &c.args[1..] {
        c.st.pubsub.subscribe(id, resp3, kind, name);
        let count = c.st.pubsub.counts(id).reported(kind);
        out.push(confirmation(kind.subscribe_word(), Reply::Bulk(name.clone()), count));
    }
    sync_counts(c);
    Ok(Action::Pushes(out))
}

fn unsubscribe_from(c: &mut Call, kind: Kind) -> CmdResult {
    let id = c.conn.id;
    let names = if c.args.len() > 1 { c.args[1..].to_vec() } else { c.st.pubsub.subscriptions(id, kind) };
    let mut out = Vec::with_capacity(names.len().max(1));
    for name in names {
        c.st.pubsub.unsubscribe(id, kind, &name);
        let count = c.st.pubsub.counts(id).reported(kind);
        out.push(confirmation(kind.unsubscribe_word(), Reply::Bulk(name), count));
    }
    if out.is_empty() {
        // Nothing to leave: one confirmation all the same, with a null name.
        let count = c.st.pubsub.counts(id).reported(kind);
        out.push(confirmation(kind.unsubscribe_word(), Reply::Null, count));
    }
    sync_counts(c);
    Ok(Action::Pushes(out))
}

/// Copy the client's subscription counts where the connection and CLIENT LIST look.
fn sync_counts(c: &mut Call) {
    let counts = c.st.pubsub.counts(c.conn.id);
    c.conn.subscribed = counts.total() > 0;
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        ci.subs = counts;
    }
}

/// Leave every subscription without confirmations (RESET; a disconnecting client is taken
/// out by its session).
pub fn leave_all(c: &mut Call) {
    c.st.pubsub.remove_client(c.conn.id);
    sync_counts(c);
}

/// PUBLISH channel message
pub fn publish(c: &mut Call) -> CmdResult {
    publish_in(c, false)
}

/// SPUBLISH shardchannel message
pub fn spublish(c: &mut Call) -> CmdResult {
    publish_in(c, true)
}

fn publish_in(c: &mut Call, shard: bool) -> CmdResult {
    let receivers = pubsub::publish(c.st, shard, &c.args[1], &c.args[2], c.now_ms);
    // Replicas run it too (their own subscribers get it); a replay of the log must not.
    let own: &'static [u8] = if shard { b"spublish" } else { b"publish" };
    if c.args[0].eq_ignore_ascii_case(own) {
        c.st.journal.push_unlogged_command(c.conn.db, c.args);
    } else {
        // Renamed (`rename-command`): propagated under its own name, as the log names commands.
        let args = [Bytes::from_static(own), c.args[1].clone(), c.args[2].clone()];
        c.st.journal.push_unlogged_command(c.conn.db, &args);
    }
    reply(Reply::Integer(receivers as i64))
}

fn channel_list(c: &mut Call, shard: bool) -> CmdResult {
    if c.args.len() > 3 {
        return Err(crate::cmd::subcommand_syntax(c));
    }
    let pattern = c.args.get(2).map(|p| &p[..]);
    let names = c.st.pubsub.active(shard, pattern);
    reply(Reply::Array(names.into_iter().map(Reply::Bulk).collect()))
}

fn subscriber_counts(c: &mut Call, shard: bool) -> CmdResult {
    let mut out = Vec::with_capacity(2 * (c.args.len() - 2));
    for name in &c.args[2..] {
        out.push(Reply::Bulk(name.clone()));
        out.push(Reply::Integer(c.st.pubsub.subscriber_count(shard, name) as i64));
    }
    reply(Reply::Array(out))
}

/// PUBSUB CHANNELS [pattern]
pub fn channels(c: &mut Call) -> CmdResult {
    channel_list(c, false)
}

/// PUBSUB SHARDCHANNELS [pattern]
pub fn shardchannels(c: &mut Call) -> CmdResult {
    channel_list(c, true)
}

/// PUBSUB NUMSUB [channel ...]
pub fn numsub(c: &mut Call) -> CmdResult {
    subscriber_counts(c, false)
}

/// PUBSUB SHARDNUMSUB [shardchannel ...]
pub fn shardnumsub(c: &mut Call) -> CmdResult {
    subscriber_counts(c, true)
}

/// PUBSUB NUMPAT
pub fn numpat(c: &mut Call) -> CmdResult {
    reply(Reply::Integer(c.st.pubsub.pattern_count() as i64))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::client::{Action, Conn};
    use crate::replication::forms;
    use crate::state::{Shared, State};
    use bytes::Bytes;
    use rill_resp::Reply;

    fn run(shared: &Shared, conn: &mut Conn, line: &str) -> Action {
        let mut args: Vec<Bytes> = line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let mut st = shared.lock();
        crate::dispatch::execute(shared, &mut st, conn, &mut args, 1_000)
    }

    #[test]
    fn publish_enters_the_replication_stream_in_its_place_among_the_writes() {
        let st = State::new(crate::config::Config::default());
        let shared = Shared::new(st, crate::cmd::table(), crate::cmd::table(), 0, "0".repeat(40));
        let backlog = {
            let mut st = shared.lock();
            let st = &mut *st;
            st.replication.start_backlog(&mut st.journal, 1 << 20)
        };
        let mut conn = Conn::new(1, true);
        assert!(matches!(run(&shared, &mut conn, "PUBLISH ch hello"), Action::Reply(Reply::Integer(0))));
        for line in ["MULTI", "SET k v", "SPUBLISH sh x", "DEL k", "EXEC"] {
            run(&shared, &mut conn, line);
        }
        // A read, and a PUBLISH refused for its arity, add nothing.
        run(&shared, &mut conn, "GET k");
        run(&shared, &mut conn, "PUBLISH ch");
        let cmd = |s: &str| (0, s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect::<Vec<_>>());
        let mut want = Vec::new();
        let mut stream = forms::Stream::new();
        stream.encode(&[cmd("PUBLISH ch hello")], true, &mut want);
        stream.encode(&[cmd("SET k v"), cmd("SPUBLISH sh x"), cmd("DEL k")], true, &mut want);
        let b = backlog.lock().unwrap();
        let (x, y) = b.since(1).unwrap();
        let got = [x, y].concat();
        assert_eq!(got, want, "{}", String::from_utf8_lossy(&got));
    }
}
