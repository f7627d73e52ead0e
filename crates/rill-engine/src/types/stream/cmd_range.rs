//! XLEN, XRANGE and XREVRANGE: reads of one stream (spec §3.2, §3.3).
//!
//! ```text
//! XLEN key
//! XRANGE key start end [COUNT count]
//! XREVRANGE key end start [COUNT count]
//! ```

use super::args::{self, is};
use super::block::{EntryCursor, EntryPos};
use super::id::StreamId;
use super::{id, reply};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XLEN`.
pub(super) const XLEN: CommandSpec = CommandSpec {
    name: "xlen",
    arity: 2,
    flags: Flags::READONLY.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@read", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RO"])],
    group: "stream",
    summary: "Counts the live entries of a stream.",
    since: "5.0.0",
    complexity: "O(1)",
    syntax: "key:key",
    ..CommandSpec::of(Handler::Engine(xlen))
};

/// `XRANGE`.
pub(super) const XRANGE: CommandSpec = CommandSpec {
    name: "xrange",
    arity: -4,
    flags: Flags::READONLY,
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    key_specs: &[key_at(1, &["RO", "access"])],
    group: "stream",
    summary: "Lists the entries whose IDs fall in a range, oldest first.",
    since: "5.0.0",
    complexity: "O(log B + M) where B is the number of blocks and M the entries returned \
                 (plus up to one block's entries scanned at each end of the range).",
    syntax: "key:key start end [COUNT count:integer]",
    ..CommandSpec::of(Handler::Engine(xrange))
};

/// `XREVRANGE`.
pub(super) const XREVRANGE: CommandSpec = CommandSpec {
    name: "xrevrange",
    arity: -4,
    flags: Flags::READONLY,
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    key_specs: &[key_at(1, &["RO", "access"])],
    group: "stream",
    summary: "Lists the entries whose IDs fall in a range, newest first.",
    since: "5.0.0",
    complexity: "O(log B + M) where B is the number of blocks and M the entries returned \
                 (plus up to one block's entries scanned at each end of the range).",
    syntax: "key:key end start [COUNT count:integer]",
    ..CommandSpec::of(Handler::Engine(xrevrange))
};

fn xlen(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(1).ok_or_else(|| CmdError::arity("xlen"))?;
    let len = args::read_stream(engine, ctx, key)?.map_or(0, |s| s.len());
    Ok(reply::count(len))
}

fn xrange(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    range_command(engine, ctx, args, false)
}

fn xrevrange(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    range_command(engine, ctx, args, true)
}

/// A validated XRANGE / XREVRANGE.
#[derive(Debug)]
struct RangeRequest {
    start: id::StreamId,
    end: id::StreamId,
    /// `None`: no COUNT; `Some(0)`: COUNT ≤ 0 (nil reply).
    count: Option<u64>,
}

fn parse(args: &[Bytes], rev: bool) -> Result<RangeRequest, CmdError> {
    let (first, second) = match (args.get(2), args.get(3)) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(CmdError::arity(if rev { "xrevrange" } else { "xrange" })),
    };
    // XREVRANGE names the end first; each bound keeps its own default seq.
    let (start_arg, end_arg) = if rev { (second, first) } else { (first, second) };
    // Redis parses the start bound first whichever position it is in.
    let start = id::parse_interval_start(start_arg)?;
    let end = id::parse_interval_end(end_arg)?;
    let mut count = None;
    let mut rest = args.get(4..).unwrap_or_default().iter();
    while let Some(opt) = rest.next() {
        match rest.next() {
            Some(value) if is(opt, "COUNT") => {
                let n = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
                count = Some(u64::try_from(n).unwrap_or(0));
            }
            _ => return Err(CmdError::SYNTAX),
        }
    }
    Ok(RangeRequest { start, end, count })
}

fn range_command(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], rev: bool) -> Result<Reply, CmdError> {
    let req = parse(args, rev)?;
    let key = args.get(1).ok_or(CmdError::SYNTAX)?;
    let Some(stream) = args::read_stream(engine, ctx, key)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if req.count == Some(0) {
        return Ok(Reply::NullArray);
    }
    let count = req.count.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    Ok(range_reply(stream, req.start, req.end, count, rev))
}

/// Entries with `start ≤ ID ≤ end`, at most `count`, as the reply, read straight from the
/// blocks: each block's master is decoded once, entries before the range are skipped without
/// decoding their values, and the reply's strings share one buffer. Same result as
/// [`Stream::range`](super::Stream::range) collected through [`reply::entries`].
pub(super) fn range_reply(stream: &super::Stream, start: StreamId, end: StreamId, count: usize, rev: bool) -> Reply {
    let mut out = reply::EntriesBuilder::with_capacity(count);
    if start > end {
        return out.finish();
    }
    if rev {
        // Blocks can only be read forward: note the block's in-range entries, then emit them
        // backwards.
        let mut in_range: Vec<EntryPos> = Vec::new();
        for (&first, block) in stream.blocks.range(..=end).rev() {
            if block.last_id() < start {
                break;
            }
            let Some(mut cursor) = block.cursor(first) else { continue };
            in_range.clear();
            while let Some(p) = cursor.next_entry() {
                if p.id > end {
                    break;
                }
                if !p.deleted && p.id >= start {
                    in_range.push(p);
                }
            }
            for p in in_range.iter().rev() {
                if out.len() >= count || !emit(&mut out, &cursor, p) {
                    return out.finish();
                }
            }
        }
    } else {
        forward(stream, start, end, count, &mut out, |_, _| true);
    }
    out.finish()
}

/// Live entries with `start ≤ ID ≤ end`, ascending, into `out` until it holds `count` entries
/// or `admit` says no. `admit` is asked after each entry is added, with its ID and its size in
/// bytes; an entry it refuses is taken back out. Each block's master is decoded once and
/// entries before `start` are stepped over without decoding their values.
pub(super) fn forward(
    stream: &super::Stream,
    start: StreamId,
    end: StreamId,
    count: usize,
    out: &mut reply::EntriesBuilder,
    mut admit: impl FnMut(StreamId, usize) -> bool,
) {
    if start > end {
        return;
    }
    // The block holding `start` is the last one keyed at or before it.
    let seek = stream.blocks.range(..=start).next_back().map_or(start, |(k, _)| *k);
    for (&first, block) in stream.blocks.range(seek..=end) {
        if block.last_id() < start {
            continue;
        }
        let Some(mut cursor) = block.cursor_from(first, start) else { continue };
        while let Some(p) = cursor.next_entry() {
            if p.id > end || out.len() >= count {
                return;
            }
            if p.deleted || p.id < start {
                continue;
            }
            // An entry that cannot be decoded ends the range, as in `emit`.
            let Some(size) = out.push_extra(&cursor, &p, 0) else { return };
            if !admit(p.id, size) {
                out.pop(size);
                return;
            }
        }
    }
}

/// Add one entry to the reply; false (entry dropped) if its bytes cannot be decoded, which
/// ends the range as it does in [`Stream::range`](super::Stream::range).
fn emit(out: &mut reply::EntriesBuilder, cursor: &EntryCursor<'_>, p: &EntryPos) -> bool {
    out.push(cursor, p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::stream::{NodeLimits, Stream};
    use proptest::prelude::*;

    fn text(v: &[u8]) -> Bytes {
        Bytes::copy_from_slice(v)
    }

    fn arb_value() -> impl Strategy<Value = Bytes> {
        prop_oneof![
            Just(text(b"NVDA.OQ")),
            Just(text(b"007")),
            Just(text(b"-0.0")),
            (-300i64..300).prop_map(|v| text(v.to_string().as_bytes())),
            (0i64..100_000).prop_map(|v| text(format!("{}.{:04}", v / 10_000, v % 10_000).as_bytes())),
            any::<i64>().prop_map(|v| text(v.to_string().as_bytes())),
            proptest::collection::vec(any::<u8>(), 0..70).prop_map(Bytes::from),
        ]
    }

    fn arb_fields() -> impl Strategy<Value = Vec<(Bytes, Bytes)>> {
        let tick = proptest::collection::vec(arb_value(), 4).prop_map(|values| {
            ["symbol", "price", "seq", "ts"].iter().map(|f| text(f.as_bytes())).zip(values).collect()
        });
        let name = prop_oneof![Just(text(b"a")), Just(text(b"")), Just(text(b"price"))];
        let free = proptest::collection::vec((name, arb_value()), 1..4);
        prop_oneof![3 => tick, 1 => free]
    }

    proptest! {
        /// The direct range reader gives exactly what the generic range iterator gives.
        #[test]
        fn range_reply_matches_range_iterator(
            entries in proptest::collection::vec((1u64..4, 0u64..3, arb_fields(), any::<bool>()), 1..120),
            // Small blocks, and blocks long enough for position marks (no limit: one block).
            node_entries in prop_oneof![1u64..8, 17u64..50, Just(0u64)],
            bounds in (0u64..120, 0u64..4, 0u64..120, 0u64..4),
            count in prop_oneof![Just(usize::MAX), 1usize..12],
            rev in any::<bool>(),
        ) {
            let limits = NodeLimits { max_entries: node_entries, max_bytes: 0 };
            let mut stream = Stream::new();
            let mut ms = 0;
            let mut deleted = Vec::new();
            for (step, seq, fields, delete) in entries {
                ms += step;
                let id = StreamId::new(ms, seq);
                prop_assert!(stream.append(id, &fields, limits).is_ok());
                if delete {
                    deleted.push(id);
                }
            }
            for id in deleted {
                stream.delete(id);
            }
            let start = StreamId::new(bounds.0, bounds.1);
            let end = StreamId::new(bounds.2, bounds.3);
            let expected = reply::entries(stream.range_vec(start, end, Some(count), rev));
            prop_assert_eq!(reply::tree(&range_reply(&stream, start, end, count, rev)), expected);
        }
    }
}
