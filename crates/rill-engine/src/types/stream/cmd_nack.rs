//! XNACK: release pending entries back to the group without acknowledging them (spec §3.15).
//!
//! ```text
//! XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...] [RETRYCOUNT count] [FORCE]
//! ```
//!
//! A released entry loses its owner, gets delivery time 0 and goes to the end of the group's
//! XNACK zone, the head of the claim order (see [`super::pel`]), so `XREADGROUP ... CLAIM`
//! serves it before anything else. The count: SILENT −1 (not below 0), FAIL unchanged, FATAL
//! the maximum; RETRYCOUNT overrides the mode. Each release is a `Nacked` [`GroupEffect`]
//! carrying the resulting count. Releasing wakes blocked readers (CLAIM readers can now be
//! served) but does not invalidate WATCH.

use super::args::{self, is};
use super::group::GroupEffect;
use super::pel::DELIVERY_COUNT_MAX;
use super::policy::Release;
use super::policy_act::{end_attempt, Ending};
use super::StreamId;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XNACK`.
pub(super) const XNACK: CommandSpec = CommandSpec {
    name: "xnack",
    arity: -7,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Hands pending entries back to their group unacknowledged, to be claimed again \
              first, adjusting their delivery counts.",
    since: "8.8.0",
    complexity: "O(N log n) for N IDs and a PEL of n entries.",
    syntax: "key:key group mode@(SILENT | FAIL | FATAL) ids@IDS (numids:integer id ...) \
             [RETRYCOUNT count:integer] [FORCE]",
    ..CommandSpec::of(Handler::Engine(xnack))
};

/// How XNACK adjusts the delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The delivery did not count: −1.
    Silent,
    /// Processing failed: unchanged.
    Fail,
    /// Never retry: the maximum.
    Fatal,
}

impl Mode {
    fn count(self, current: u64, retry_count: Option<u64>) -> u64 {
        match (retry_count, self) {
            (Some(n), _) => n,
            (None, Mode::Silent) => current.saturating_sub(1),
            (None, Mode::Fail) => current,
            (None, Mode::Fatal) => DELIVERY_COUNT_MAX,
        }
    }
}

fn xnack(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let at = |i: usize| args.get(i).map(|b| b.as_ref()).unwrap_or_default();
    let key = args.get(1).ok_or_else(|| CmdError::arity("xnack"))?;
    let group = args.get(2).ok_or_else(|| CmdError::arity("xnack"))?;
    args::group_stream(engine, ctx, key, group, || args::no_key_or_group(key, group))?;
    let mode = match at(3) {
        m if is(m, "SILENT") => Mode::Silent,
        m if is(m, "FAIL") => Mode::Fail,
        m if is(m, "FATAL") => Mode::Fatal,
        _ => return Err(CmdError::full("ERR mode must be SILENT, FAIL, or FATAL")),
    };
    let mut ids_at: Option<(usize, usize)> = None;
    let mut force = false;
    let mut retry_count = None;
    let mut i = 4;
    while let Some(opt) = args.get(i) {
        let more = i + 1 < args.len();
        if is(opt, "IDS") && more {
            let n = parse_i64(at(i + 1))
                .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
                .ok_or(CmdError::full("ERR numids must be a positive integer"))?;
            let n = n as usize;
            if n > args.len() - (i + 2) {
                return Err(CmdError::full("ERR number of IDs doesn't match numids"));
            }
            ids_at = Some((i + 2, n));
            i += 2 + n;
            continue;
        } else if is(opt, "FORCE") {
            force = true;
        } else if is(opt, "RETRYCOUNT") && more {
            i += 1;
            let n = parse_i64(at(i)).ok_or(CmdError::NOT_INTEGER)?;
            retry_count =
                Some(u64::try_from(n).map_err(|_| CmdError::full("ERR Invalid RETRYCOUNT value, must be >= 0"))?);
        } else {
            return Err(CmdError::owned(format!("ERR Unrecognized XNACK option '{}'", args::text(opt))));
        }
        i += 1;
    }
    let (first, n) = ids_at.ok_or(CmdError::full("ERR syntax error, expected IDS keyword"))?;
    let ids = args
        .get(first..first + n)
        .unwrap_or_default()
        .iter()
        .map(|a| args::strict_id(a))
        .collect::<Result<Vec<StreamId>, _>>()?;

    let stream = args::group_stream(engine, ctx, key, group, || args::no_key_or_group(key, group))?;
    if stream.group(group).is_some_and(|g| g.policy().is_some()) {
        return Ok(Reply::Integer(nack_with_policy(engine, ctx, key, group, &ids, mode, retry_count, force) as i64));
    }
    let mut released = 0u64;
    let mut effects = Vec::new();
    for id in ids {
        let current = match stream.group(group).and_then(|g| g.pel().get(id)) {
            Some(p) => p.delivery_count,
            // FORCE creates a record (count 0) for an existing entry.
            None if force && stream.contains(id) => 0,
            None => continue,
        };
        let count = mode.count(current, retry_count);
        effects.push(stream.apply_group(GroupEffect::Nacked { group: group.clone(), id, count }));
        released += 1;
    }
    ctx.emit_group(key, effects);
    if released > 0 {
        engine.count_changes(released);
        engine.signal_ready(ctx.db, key);
    }
    Ok(Reply::Integer(released as i64))
}

/// XNACK on a group with a policy (policies spec §3, §5): each pending entry's attempt ends
/// there — FAIL and SILENT hand it back after its backoff (or dead-letter it at MAXDELIVER),
/// FATAL dead-letters it at once. FORCE first makes a record for an entry not pending (count
/// 0, released). Returns the entries acted on.
#[allow(clippy::too_many_arguments)]
fn nack_with_policy(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    key: &Bytes,
    group: &Bytes,
    ids: &[StreamId],
    mode: Mode,
    retry_count: Option<u64>,
    force: bool,
) -> u64 {
    let mut acted = 0u64;
    for &id in ids {
        let Ok(Some(stream)) = args::write_stream(engine, ctx, key) else { break };
        let current = match stream.group(group).and_then(|g| g.pel().get(id)) {
            Some(p) => p.delivery_count,
            None if force && stream.contains(id) => {
                let count = mode.count(0, retry_count);
                let effect = stream.apply_group(GroupEffect::Nacked { group: group.clone(), id, count });
                ctx.emit_group(key, [effect]);
                engine.count_changes(1);
                acted += 1;
                continue;
            }
            None => continue,
        };
        let how = match (mode, retry_count) {
            (Mode::Fatal, None) => Ending::Fatal,
            _ => Ending::Failed(Release::Nack, None),
        };
        if end_attempt(engine, ctx, key, group, id, how, Some(mode.count(current, retry_count))) {
            acted += 1;
        }
    }
    ctx.explicit();
    if acted > 0 {
        engine.signal_ready(ctx.db, key);
        engine.arm_policy(ctx.db, key, group);
    }
    acted
}
