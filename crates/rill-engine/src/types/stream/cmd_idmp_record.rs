//! XIDMPRECORD: restore one idempotency record (spec §3.19). Redis emits it when it rewrites
//! its append-only file, so a log replay rebuilds the IDMP tables exactly; rill's log will do
//! the same.
//!
//! ```text
//! XIDMPRECORD key producer-id idempotent-id stream-id
//! ```

use super::args;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XIDMPRECORD`.
pub(super) const XIDMPRECORD: CommandSpec = CommandSpec {
    name: "xidmprecord",
    arity: 5,
    flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Records that a producer's idempotent ID produced a given entry (used to restore \
              idempotency state from a log).",
    since: "8.6.2",
    complexity: "O(log B + E) to check the entry exists (B blocks, E entries per block).",
    syntax: "key:key producer-id idempotent-id stream-id",
    ..CommandSpec::of(Handler::Engine(xidmprecord))
};

fn xidmprecord(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (Some(key), Some(pid), Some(iid), Some(id_arg)) = (args.get(1), args.get(2), args.get(3), args.get(4)) else {
        return Err(CmdError::arity("xidmprecord"));
    };
    let id = args::strict_id(id_arg)?;
    if pid.is_empty() {
        return Err(CmdError::full("ERR producer ID must be non-empty"));
    }
    if iid.is_empty() {
        return Err(CmdError::full("ERR idempotent ID must be non-empty"));
    }
    let stream = args::write_stream(engine, ctx, key)?.ok_or(CmdError::NO_SUCH_KEY)?;
    if !stream.contains(id) {
        return Err(CmdError::full("ERR No such message in stream"));
    }
    // IIDs past their duration go first, as the background expiry would have dropped them
    // by now (and as XADD IDMP does before recording): replaying XADD's effects (the append,
    // then this record) at the original time must find the same table.
    stream.idmp.expire(ctx.now_ms);
    match stream.idmp.recorded(pid, iid) {
        Some(existing) if existing == id => return Ok(Reply::ok()),
        Some(_) => return Err(CmdError::full("ERR IID already exists for this producer with a different stream ID")),
        None => stream.idmp.record(pid, iid.clone(), id),
    }
    // Persisted state; not a WATCH-visible change.
    engine.count_changes(1);
    Ok(Reply::ok())
}
