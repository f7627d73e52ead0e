//! `RILL.METRICS`: the metrics snapshot (`metrics.rs`) over the Redis protocol, for `rill top`
//! and scripts — the same figures `/metrics` renders, paged like SCAN so that no call holds
//! the server for more than a page.
//!
//! ```text
//! RILL.METRICS SERVER                                  -> map: the server's figures
//! RILL.METRICS STREAMS cursor [COUNT n] [CONSUMERS]    -> [next cursor, [stream map ...]]
//! ```
//!
//! A cursor is 0 to start and 0 when the walk is done; it counts keys looked at, so COUNT
//! bounds the work of a call (streams are fewer when other keys are met). As with SCAN, a key
//! may be met twice or missed if keys are deleted during the walk.

use super::{reply, Call, CmdResult};
use crate::metrics::{page_from, server_figures, StreamRow};
use bytes::Bytes;
use rill_engine::util::parse_i64;
use rill_engine::CmdError;
use rill_resp::Reply;

/// RILL.METRICS HELP's lines.
pub const HELP: &[&str] = &[
    "SERVER",
    "    The server's figures: clients, commands, rates, memory, keys, replication, the log.",
    "STREAMS <cursor> [COUNT <count>] [CONSUMERS]",
    "    The next streams from <cursor> (0 to start), looking at about <count> keys (default",
    "    16): per stream its length, additions, first and last entry times, memory and groups",
    "    (lag, lag age, pending, oldest pending, consumers, a policy's counters); with",
    "    CONSUMERS, each group's consumers. Returns the next cursor (0: done) and the streams.",
];

fn name(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn int(n: impl TryInto<i64>) -> Reply {
    Reply::Integer(n.try_into().unwrap_or(i64::MAX))
}

fn opt(n: Option<impl TryInto<i64>>) -> Reply {
    n.map_or(Reply::Null, int)
}

/// RILL.METRICS SERVER
pub fn server(c: &mut Call) -> CmdResult {
    let f = server_figures(c.shared, c.st, c.now_ms);
    let inst = &c.st.stats.instantaneous;
    let commands: Vec<(Reply, Reply)> = f
        .commands
        .iter()
        .map(|cmd| {
            (
                name(cmd.name),
                Reply::Map(vec![
                    (name("calls"), int(cmd.calls)),
                    (name("failed"), int(cmd.failed)),
                    (name("rejected"), int(cmd.rejected)),
                    (name("usec"), int(cmd.usec)),
                ]),
            )
        })
        .collect();
    reply(Reply::Map(vec![
        (name("time-ms"), int(f.taken_ms)),
        (name("role"), name(if f.replica { "replica" } else { "primary" })),
        (name("connected-clients"), int(f.clients)),
        (name("blocked-clients"), int(f.blocked_clients)),
        (name("commands-processed"), int(f.commands_processed)),
        (name("ops-per-sec"), int(inst.rate(0) as u64)),
        (name("net-input-bytes"), int(f.net_input_bytes)),
        (name("net-output-bytes"), int(f.net_output_bytes)),
        (name("used-memory"), int(f.used_memory)),
        (name("keys"), int(f.keys.iter().map(|k| k.1).sum::<u64>())),
        (name("expired-keys"), int(f.expired_keys)),
        (name("log-enabled"), int(u8::from(f.log_enabled))),
        (name("log-bytes"), int(f.log_bytes)),
        (name("repl-offset"), int(f.repl_offset)),
        (name("connected-replicas"), int(f.replicas.len())),
        (name("commands"), Reply::Map(commands)),
    ]))
}

fn stream_reply(row: &StreamRow) -> Reply {
    let m = &row.m;
    let groups = m
        .groups
        .iter()
        .map(|g| {
            let counters = g.counters.map_or(Reply::Null, |c| {
                Reply::Map(vec![
                    (name("delivered"), int(c.delivered)),
                    (name("redelivered"), int(c.redelivered)),
                    (name("acked"), int(c.acked)),
                    (name("handed-back"), int(c.handed_back)),
                    (name("nacked"), int(c.nacked)),
                    (name("dead-lettered"), int(c.dead_lettered)),
                    (name("dead-letter-failures"), int(c.dead_letter_failures)),
                    (name("consumers-expired"), int(c.consumers_expired)),
                    (name("released-on-close"), int(c.released_on_close)),
                ])
            });
            let consumers = g
                .consumer_details
                .iter()
                .map(|c| {
                    Reply::Map(vec![
                        (name("name"), Reply::Bulk(c.name.clone())),
                        (name("pending"), int(c.pending)),
                        (name("idle-ms"), int(c.idle_ms)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                (name("name"), Reply::Bulk(g.name.clone())),
                (name("consumers"), int(g.consumers)),
                (name("pending"), int(g.pending)),
                (name("nacked"), int(g.nacked)),
                (name("lag"), opt(g.lag)),
                (name("lag-ms"), int(g.lag_ms)),
                (name("oldest-pending-idle-ms"), opt(g.oldest_pending_idle_ms)),
                (name("counters"), counters),
                (name("consumer-list"), Reply::Array(consumers)),
            ])
        })
        .collect();
    Reply::Map(vec![
        (name("db"), int(row.db)),
        (name("stream"), Reply::Bulk(row.key.clone())),
        (name("length"), int(m.length)),
        (name("entries-added"), int(m.entries_added)),
        (name("first-entry-ms"), opt(m.first_entry_ms)),
        (name("last-entry-ms"), opt(m.last_entry_ms)),
        (name("memory"), int(m.memory_bytes)),
        (name("groups"), Reply::Array(groups)),
    ])
}

/// Cursors: the database in the high bits, the key position in the low 40.
const POS_BITS: u32 = 40;

/// RILL.METRICS STREAMS cursor [COUNT n] [CONSUMERS]
pub fn streams(c: &mut Call) -> CmdResult {
    let cursor = c.arg(2);
    let cursor = std::str::from_utf8(cursor)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or(CmdError::full("ERR invalid cursor"))?;
    let mut count = 16usize;
    let mut consumers = false;
    let mut i = 3;
    while i < c.args.len() {
        let a = c.arg(i);
        if a.eq_ignore_ascii_case(b"COUNT") {
            let n = c.args.get(i + 1).and_then(|v| parse_i64(v)).ok_or(CmdError::NOT_INTEGER)?;
            if n < 1 {
                return Err(CmdError::SYNTAX);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX).min(1 << 20);
            i += 2;
        } else if a.eq_ignore_ascii_case(b"CONSUMERS") {
            consumers = true;
            i += 1;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    let from = ((cursor >> POS_BITS) as usize, (cursor & ((1 << POS_BITS) - 1)) as usize);
    let mut rows = Vec::new();
    let next = page_from(c.st, from, c.now_ms, consumers, count, &mut rows);
    let next = next.map_or(0, |(db, pos)| ((db as u64) << POS_BITS) | pos as u64);
    reply(Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(rows.iter().map(stream_reply).collect()),
    ]))
}
