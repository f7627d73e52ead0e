//! XDEL and XDELEX: delete entries by ID (spec §3.8, §3.9).
//!
//! ```text
//! XDEL key id [id ...]
//! XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
//! ```
//!
//! Both validate every ID before deleting any, and keep the key even when the stream becomes
//! empty. Group references: DELREF drops them with [`Stream::drop_references`], ACKED keeps
//! entries [`Stream::is_referenced`] still names.

use super::args::{self, is};
use super::{RefStrategy, Stream, StreamId};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XDEL`.
pub(super) const XDEL: CommandSpec = CommandSpec {
    name: "xdel",
    arity: -3,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "delete"])],
    group: "stream",
    summary: "Deletes entries from a stream by ID and counts how many existed.",
    since: "5.0.0",
    complexity: "O(N × (log B + E)) for N IDs, B blocks and E entries per block.",
    syntax: "key:key id ...",
    ..CommandSpec::of(Handler::Engine(xdel))
};

/// `XDELEX`.
pub(super) const XDELEX: CommandSpec = CommandSpec {
    name: "xdelex",
    arity: -5,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "delete"])],
    group: "stream",
    summary: "Deletes entries by ID, choosing what happens to consumer-group references, and \
              reports the outcome per ID.",
    since: "8.2.0",
    complexity: "O(N × (log B + E)) for N IDs, B blocks and E entries per block.",
    syntax: "key:key condition@[KEEPREF | DELREF | ACKED] ids@IDS (numids:integer id ...)",
    ..CommandSpec::of(Handler::Engine(xdelex))
};

/// XDELEX per-ID results.
const XDELEX_NOT_FOUND: i64 = -1;
const XDELEX_DELETED: i64 = 1;
const XDELEX_STILL_REFERENCED: i64 = 2;

fn xdel(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(1).ok_or_else(|| CmdError::arity("xdel"))?;
    // A missing key answers 0 without looking at the IDs, as Redis does.
    if args::write_stream(engine, ctx, key)?.is_none() {
        return Ok(Reply::Integer(0));
    }
    let ids = args.get(2..).unwrap_or_default().iter().map(|a| args::strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let Some(stream) = args::write_stream(engine, ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    let deleted = ids.iter().filter(|id| stream.delete(**id)).count();
    if deleted > 0 {
        engine.modified(ctx.db, key, KeyEvent::XDel);
    }
    Ok(Reply::Integer(deleted as i64))
}

/// XDELEX's (and later XACKDEL's) options: the strategy and where the IDs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct IdsArgs {
    /// `KEEPREF | DELREF | ACKED`, KEEPREF by default.
    pub strategy: RefStrategy,
    /// Index of the first ID.
    pub first: usize,
    /// `numids`.
    pub count: usize,
}

/// Scan `[KEEPREF | DELREF | ACKED] IDS numids id ...` from `start`, options in any order
/// (also after the IDs), with Redis' XACKDEL/XDELEX errors.
pub(super) fn parse_ids_args(args: &[Bytes], start: usize) -> Result<IdsArgs, CmdError> {
    let numids_error = CmdError::full("ERR Number of IDs must be a positive integer");
    let mut strategy = None;
    let mut ids: Option<(usize, usize)> = None;
    let mut j = start;
    while let Some(opt) = args.get(j) {
        if let Some(s) = args::ref_strategy(opt).filter(|_| strategy.is_none()) {
            strategy = Some(s);
            j += 1;
        } else if is(opt, "IDS") && j + 1 < args.len() {
            let n = args.get(j + 1).and_then(|a| parse_i64(a)).ok_or(numids_error.clone())?;
            let n = usize::try_from(n).ok().filter(|n| *n >= 1).ok_or(numids_error.clone())?;
            if n > args.len() - j - 2 {
                return Err(CmdError::full("ERR The `numids` parameter must match the number of arguments"));
            }
            ids = Some((j + 2, n));
            j += 2 + n;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    let (first, count) = ids.ok_or(CmdError::full("ERR IDS option is required"))?;
    Ok(IdsArgs { strategy: strategy.unwrap_or_default(), first, count })
}

fn xdelex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(1).ok_or_else(|| CmdError::arity("xdelex"))?;
    // Type first, then the options, then (for an existing key only) the IDs.
    let exists = args::write_stream(engine, ctx, key)?.is_some();
    let opts = parse_ids_args(args, 2)?;
    if !exists {
        return Ok(Reply::Array(vec![Reply::Integer(XDELEX_NOT_FOUND); opts.count]));
    }
    let ids = args
        .get(opts.first..opts.first + opts.count)
        .unwrap_or_default()
        .iter()
        .map(|a| args::strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(stream) = args::write_stream(engine, ctx, key)? else {
        return Ok(Reply::Array(vec![Reply::Integer(XDELEX_NOT_FOUND); opts.count]));
    };
    let mut refs_dropped = false;
    let results: Vec<i64> = ids
        .iter()
        .map(|id| {
            let (result, dropped) = delete_one(stream, *id, opts.strategy);
            refs_dropped |= dropped;
            result
        })
        .collect();
    if results.contains(&XDELEX_DELETED) {
        engine.modified(ctx.db, key, KeyEvent::XDel);
    } else if refs_dropped {
        // DELREF dropped pending references of entries already gone: no entry was deleted
        // (Redis neither signals the key nor counts a change), but the group state changed
        // and must reach the log and replicas. (Redis propagates nothing here, so its log
        // brings the references back on restart.)
        engine.count_changes(1);
    }
    Ok(Reply::Array(results.into_iter().map(Reply::Integer).collect()))
}

/// One XDELEX ID under a strategy: 1 deleted, −1 no such entry, 2 kept (still referenced);
/// and whether pending references to it were dropped (DELREF).
pub(super) fn delete_one(stream: &mut Stream, id: StreamId, strategy: RefStrategy) -> (i64, bool) {
    let mut dropped = false;
    match strategy {
        RefStrategy::Acked if stream.is_referenced(id) => return (XDELEX_STILL_REFERENCED, false),
        // DELREF drops every group's PEL reference first, even for a missing entry.
        RefStrategy::DelRef => {
            dropped = !stream.drop_references(id).is_empty();
        }
        RefStrategy::Acked | RefStrategy::KeepRef => {}
    }
    let result = if stream.delete(id) { XDELEX_DELETED } else { XDELEX_NOT_FOUND };
    (result, dropped)
}
