//! XACK and XACKDEL: acknowledge pending entries, optionally deleting them (spec §3.6, §3.7).
//!
//! ```text
//! XACK key group id [id ...]
//! XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
//! ```
//!
//! Acknowledging is group bookkeeping: it does not invalidate WATCH (spec §8); XACKDEL does
//! when it deletes an entry.

use super::cmd_delete::parse_ids_args;
use super::group::GroupEffect;
use super::{args, policy_act, reply};
use super::{RefStrategy, StreamId};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XACK`.
pub(super) const XACK: CommandSpec = CommandSpec {
    name: "xack",
    arity: -4,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Marks pending entries of a group as processed and counts how many were pending.",
    since: "5.0.0",
    complexity: "O(N log n) for N IDs and a PEL of n entries.",
    syntax: "key:key group id ...",
    ..CommandSpec::of(Handler::Engine(xack))
};

/// `XACKDEL`.
pub(super) const XACKDEL: CommandSpec = CommandSpec {
    name: "xackdel",
    arity: -6,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "update", "delete"])],
    group: "stream",
    summary: "Acknowledges pending entries of a group and deletes them from the stream, \
              choosing what happens to other groups' references.",
    since: "8.2.0",
    complexity: "O(N × (G log n + log B + E)) for N IDs, G groups with PELs of n entries, B \
                 blocks of E entries.",
    syntax: "key:key group condition@[KEEPREF | DELREF | ACKED] ids@IDS (numids:integer id ...)",
    ..CommandSpec::of(Handler::Engine(xackdel))
};

fn xack(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(1).ok_or_else(|| CmdError::arity("xack"))?;
    let group = args.get(2).ok_or_else(|| CmdError::arity("xack"))?;
    // A missing key or group answers 0 before the IDs are looked at.
    let Some(stream) = args::write_stream(engine, ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    if stream.group(group).is_none() {
        return Ok(Reply::Integer(0));
    }
    let ids =
        args.get(3..).unwrap_or_default().iter().map(|a| args::strict_id(a)).collect::<Result<Vec<StreamId>, _>>()?;
    let acked = stream.ack(group, &ids, ctx.now_ms);
    engine.count_changes(acked);
    if acked > 0 {
        policy_act::wake_readers_if_freed(engine, ctx, key, group);
    }
    Ok(reply::count(acked))
}

/// XACKDEL per-ID results.
const NOT_PENDING: i64 = -1;
const DELETED: i64 = 1;
const STILL_REFERENCED: i64 = 2;

fn xackdel(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(1).ok_or_else(|| CmdError::arity("xackdel"))?;
    let group = args.get(2).ok_or_else(|| CmdError::arity("xackdel"))?;
    // Redis' order: the key's type, the options, then a missing key or group (-1 for every
    // ID, however malformed), and only then the IDs.
    let has_group = args::write_stream(engine, ctx, key)?.is_some_and(|s| s.group(group).is_some());
    let opts = parse_ids_args(args, 3)?;
    let missing = || Ok(Reply::Array(vec![Reply::Integer(NOT_PENDING); opts.count]));
    if !has_group {
        return missing();
    }
    let ids = args
        .get(opts.first..opts.first + opts.count)
        .unwrap_or_default()
        .iter()
        .map(|a| args::strict_id(a))
        .collect::<Result<Vec<StreamId>, _>>()?;
    let Some(stream) = args::write_stream(engine, ctx, key)? else { return missing() };
    let mut results = Vec::with_capacity(ids.len());
    let mut deleted_any = false;
    let mut changes = 0u64;
    for id in ids {
        if !stream.group(group).is_some_and(|g| g.pel().contains(id)) {
            results.push(NOT_PENDING);
            continue;
        }
        stream.ack_activity(group, id, ctx.now_ms);
        stream.apply_group(GroupEffect::Acked { group: group.clone(), id });
        changes += 1;
        let result = match opts.strategy {
            RefStrategy::Acked if stream.is_referenced(id) => STILL_REFERENCED,
            RefStrategy::KeepRef | RefStrategy::Acked => {
                deleted_any |= stream.delete(id);
                DELETED
            }
            RefStrategy::DelRef => {
                stream.drop_references(id);
                deleted_any |= stream.delete(id);
                DELETED
            }
        };
        results.push(result);
    }
    engine.count_changes(changes);
    if changes > 0 {
        policy_act::wake_readers_if_freed(engine, ctx, key, group);
    }
    if deleted_any {
        engine.modified(ctx.db, key, KeyEvent::XDel);
    }
    Ok(Reply::Array(results.into_iter().map(Reply::Integer).collect()))
}
