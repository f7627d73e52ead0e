//! SLOWLOG and LATENCY: what `slowlog.rs` and `latency.rs` recorded, in Redis' reply shapes.

use super::{reply, Call, CmdResult};
use crate::state::CommandStat;
use bytes::Bytes;
use rill_engine::util::parse_i64;
use rill_engine::CmdError;
use rill_resp::Reply;

/// SLOWLOG HELP's lines.
pub const SLOWLOG_HELP: &[&str] = &[
    "GET [<count>]",
    "    Return the newest <count> entries of the slow log (10 by default; -1 for all).",
    "    Each entry holds: its id, the Unix time it was logged, how long the command ran in",
    "    microseconds, the command's arguments, the client's address and port, and the",
    "    client's name.",
    "LEN",
    "    Return how many entries the slow log holds.",
    "RESET",
    "    Empty the slow log.",
];

/// LATENCY HELP's lines.
pub const LATENCY_HELP: &[&str] = &[
    "DOCTOR",
    "    Return a report on the latency events recorded, in words.",
    "GRAPH <event>",
    "    Return an ASCII graph of the <event>'s samples.",
    "HISTORY <event>",
    "    Return the <event>'s samples as (Unix time, milliseconds) pairs.",
    "LATEST",
    "    Return each event's newest sample and its all-time high.",
    "RESET [<event> ...]",
    "    Forget the samples of the events given, or of every event.",
    "HISTOGRAM [COMMAND ...]",
    "    Return the cumulative distribution of the durations of the commands given (of every",
    "    command run when none is given), in microseconds.",
];

/// SLOWLOG GET [count]
pub fn slowlog_get(c: &mut Call) -> CmdResult {
    const BAD_COUNT: CmdError = CmdError::full("ERR count should be greater than or equal to -1");
    if c.args.len() > 3 {
        return Err(super::subcommand_syntax(c));
    }
    let len = c.st.slowlog.len();
    let count = match c.args.get(2) {
        None => 10,
        Some(a) => match parse_i64(a) {
            Some(-1) => len,
            Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => return Err(BAD_COUNT),
        },
    };
    let entries =
        c.st.slowlog
            .newest(count)
            .map(|e| {
                Reply::Array(vec![
                    Reply::Integer(e.id as i64),
                    Reply::Integer(e.unix_secs),
                    Reply::Integer(e.micros as i64),
                    Reply::Array(e.argv.iter().map(|a| Reply::Bulk(a.clone())).collect()),
                    Reply::Bulk(Bytes::from(e.peer.clone())),
                    Reply::Bulk(e.name.clone()),
                ])
            })
            .collect();
    reply(Reply::Array(entries))
}

/// SLOWLOG LEN
pub fn slowlog_len(c: &mut Call) -> CmdResult {
    reply(Reply::Integer(c.st.slowlog.len() as i64))
}

/// SLOWLOG RESET
pub fn slowlog_reset(c: &mut Call) -> CmdResult {
    c.st.slowlog.reset();
    reply(Reply::ok())
}

/// LATENCY LATEST
pub fn latency_latest(c: &mut Call) -> CmdResult {
    let events =
        c.st.latency
            .events()
            .map(|(name, s)| {
                let (time, ms) = s.latest().unwrap_or((0, 0));
                Reply::Array(vec![
                    Reply::Bulk(Bytes::copy_from_slice(name.as_bytes())),
                    Reply::Integer(time),
                    Reply::Integer(ms as i64),
                    Reply::Integer(s.max as i64),
                ])
            })
            .collect();
    reply(Reply::Array(events))
}

/// LATENCY HISTORY event
pub fn latency_history(c: &mut Call) -> CmdResult {
    let samples = match c.st.latency.event(c.arg(2)) {
        None => Vec::new(),
        Some((_, s)) => {
            s.samples().map(|&(t, ms)| Reply::Array(vec![Reply::Integer(t), Reply::Integer(ms as i64)])).collect()
        }
    };
    reply(Reply::Array(samples))
}

/// LATENCY GRAPH event
pub fn latency_graph(c: &mut Call) -> CmdResult {
    let now_secs = c.now_ms.div_euclid(1000);
    match c.st.latency.event(c.arg(2)) {
        Some((name, s)) => {
            let text = crate::latency::graph(name, s, now_secs);
            reply(Reply::Verbatim { format: *b"txt", text: Bytes::from(text) })
        }
        None => Err(CmdError::owned(format!("ERR No samples available for event '{}'", c.text(2)))),
    }
}

/// LATENCY DOCTOR
pub fn latency_doctor(c: &mut Call) -> CmdResult {
    let text = crate::latency::doctor(&c.st.latency, c.st.hot.latency_threshold_ms);
    reply(Reply::Verbatim { format: *b"txt", text: Bytes::from(text) })
}

/// LATENCY RESET [event ...]
pub fn latency_reset(c: &mut Call) -> CmdResult {
    let n = if c.args.len() == 2 {
        c.st.latency.reset(None)
    } else {
        let names: Vec<Bytes> = c.args.get(2..).unwrap_or(&[]).to_vec();
        names.iter().map(|n| c.st.latency.reset(Some(n))).sum()
    };
    reply(Reply::Integer(n as i64))
}

/// LATENCY HISTOGRAM [command ...]: per command with durations, `calls` and `histogram_usec`
/// (microseconds → durations at or below). A container's name covers its subcommands; a
/// name that is no command is skipped.
pub fn latency_histogram(c: &mut Call) -> CmdResult {
    let mut stats: Vec<&CommandStat> = c.st.stats.commands.values().filter(|s| s.histogram.is_some()).collect();
    stats.sort_by_key(|s| s.name);
    let mut pairs = Vec::new();
    let mut add = |s: &CommandStat| {
        if let Some(h) = &s.histogram {
            let steps =
                h.steps().into_iter().map(|(us, n)| (Reply::Integer(us as i64), Reply::Integer(n as i64))).collect();
            pairs.push((
                Reply::Bulk(Bytes::from_static(s.name.as_bytes())),
                Reply::Map(vec![
                    (Reply::Bulk(Bytes::from_static(b"calls")), Reply::Integer(h.total() as i64)),
                    (Reply::Bulk(Bytes::from_static(b"histogram_usec")), Reply::Map(steps)),
                ]),
            ));
        }
    };
    if c.args.len() == 2 {
        stats.iter().for_each(|s| add(s));
    } else {
        for name in c.args.get(2..).unwrap_or(&[]) {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            // The command itself, then its subcommands.
            for s in stats.iter().filter(|s| s.name == name) {
                add(s);
            }
            if !name.contains('|') {
                for s in stats.iter().filter(|s| s.name.strip_prefix(name.as_str()).is_some_and(|r| r.starts_with('|')))
                {
                    add(s);
                }
            }
        }
    }
    reply(Reply::Map(pairs))
}
