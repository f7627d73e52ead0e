//! XLEN, XRANGE and XREVRANGE: reads of one stream (spec §3.2, §3.3).
//!
//! ```text
//! XLEN key
//! XRANGE key start end [COUNT count]
//! XREVRANGE key end start [COUNT count]
//! ```

use super::args::{self, is};
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
    handler: Handler::Engine(xlen),
    ..CommandSpec::DEFAULT
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
    handler: Handler::Engine(xrange),
    ..CommandSpec::DEFAULT
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
    handler: Handler::Engine(xrevrange),
    ..CommandSpec::DEFAULT
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

fn range_command(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    args: &[Bytes],
    rev: bool,
) -> Result<Reply, CmdError> {
    let req = parse(args, rev)?;
    let key = args.get(1).ok_or(CmdError::SYNTAX)?;
    let Some(stream) = args::read_stream(engine, ctx, key)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if req.count == Some(0) {
        return Ok(Reply::NullArray);
    }
    let count = req.count.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    Ok(reply::entries(stream.range_vec(req.start, req.end, count, rev)))
}
