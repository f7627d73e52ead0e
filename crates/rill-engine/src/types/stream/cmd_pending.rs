//! XPENDING: inspect a group's pending entries (spec §3.12). Never changes anything.
//!
//! ```text
//! XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
//! ```

use super::args::{self, is};
use super::id;
use super::pel::PendingEntry;
use super::{reply, StreamId};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;
use std::ops::Bound;

/// `XPENDING`.
pub(super) const XPENDING: CommandSpec = CommandSpec {
    name: "xpending",
    arity: -3,
    flags: Flags::READONLY,
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RO", "access"])],
    group: "stream",
    summary: "Summarises a group's pending entries, or lists them with owner, idle time and \
              delivery count.",
    since: "5.0.0",
    complexity: "Summary: O(C) for C consumers. Listing: O(log n + M) for M entries returned \
                 from a PEL of n (more with IDLE, which skips entries).",
    syntax: "key:key group [filters@([IDLE min-idle-time:integer] start:string end:string \
             count:integer [consumer])]",
    ..CommandSpec::of(Handler::Engine(xpending))
};

/// The extended form's arguments.
#[derive(Debug)]
struct Range {
    min_idle: i64,
    start: StreamId,
    end: StreamId,
    count: u64,
    consumer: Option<Bytes>,
}

fn parse(args: &[Bytes]) -> Result<Option<Range>, CmdError> {
    let argc = args.len();
    if argc == 3 {
        return Ok(None);
    }
    if !(6..=9).contains(&argc) {
        return Err(CmdError::SYNTAX);
    }
    let at = |i: usize| args.get(i).map(|b| b.as_ref()).unwrap_or_default();
    let mut first = 3;
    let mut min_idle = 0;
    if is(at(3), "IDLE") {
        min_idle = parse_i64(at(4)).ok_or(CmdError::NOT_INTEGER)?;
        if argc < 8 {
            return Err(CmdError::SYNTAX);
        }
        first += 2;
    }
    let count = parse_i64(at(first + 2)).ok_or(CmdError::NOT_INTEGER)?;
    let count = u64::try_from(count).unwrap_or(0);
    let start = id::parse_interval_start(at(first))?;
    let end = id::parse_interval_end(at(first + 1))?;
    let consumer = args.get(first + 3).cloned();
    Ok(Some(Range { min_idle, start, end, count, consumer }))
}

fn xpending(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let range = parse(args)?;
    let key = args.get(1).ok_or_else(|| CmdError::arity("xpending"))?;
    let group_name = args.get(2).ok_or_else(|| CmdError::arity("xpending"))?;
    let group = args::read_stream(engine, ctx, key)?
        .and_then(|s| s.group(group_name))
        .ok_or_else(|| args::no_key_or_group(key, group_name))?;
    let Some(range) = range else {
        let pel = group.pel();
        let Some((min, max)) = pel.bounds() else {
            return Ok(Reply::Array(vec![Reply::Integer(0), Reply::Null, Reply::Null, Reply::NullArray]));
        };
        let owners = group
            .consumers()
            .iter()
            .map(|(name, c)| (name, group.pending_count(c)))
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| Reply::Array(vec![Reply::Bulk(name.clone()), Reply::Bulk(Bytes::from(n.to_string()))]))
            .collect();
        return Ok(Reply::Array(vec![reply::count(pel.len()), reply::id(min), reply::id(max), Reply::Array(owners)]));
    };
    // Rows `[id, consumer, idle, count]` are encoded straight into the reply.
    let now = ctx.now_ms;
    let take = usize::try_from(range.count).unwrap_or(usize::MAX);
    let mut rows = reply::RawArray::with_capacity(take.min(100) * 64);
    let row = |rows: &mut reply::RawArray, id: StreamId, e: PendingEntry| {
        let idle = match &e.owner {
            Some(_) => (now - e.delivery_time_ms).max(0),
            None => -1,
        };
        if e.owner.is_some() && range.min_idle > 0 && idle < range.min_idle {
            return;
        }
        let out = rows.buf();
        reply::put_header(out, b'*', 4);
        reply::put_id(out, id);
        reply::put_bulk(out, e.owner.map(|o| o.as_ref()).unwrap_or_default());
        reply::put_int(out, idle);
        reply::put_int(out, i64::try_from(e.delivery_count).unwrap_or(i64::MAX));
        rows.added();
    };
    match &range.consumer {
        None => {
            for (id, e) in group.pel().range(range.start, range.end) {
                if rows.len() >= take {
                    break;
                }
                row(&mut rows, id, e);
            }
        }
        Some(name) => {
            if let Some(c) = group.consumer(name).filter(|_| range.start <= range.end) {
                let mut find = group.pel().finder();
                let ids = group.pending_ids(c, Bound::Included(range.start)).take_while(|id| *id <= range.end);
                for id in ids {
                    if rows.len() >= take {
                        break;
                    }
                    if let Some(e) = find(id) {
                        row(&mut rows, id, e);
                    }
                }
            }
        }
    }
    Ok(rows.finish())
}
