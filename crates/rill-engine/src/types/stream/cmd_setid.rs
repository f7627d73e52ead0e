//! XSETID: set a stream's last-generated ID and its counters (spec §3.11). Redis documents it
//! as internal: replication and the log use it to restore stream metadata exactly.
//!
//! ```text
//! XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
//! ```

use super::args::{self, is};
use super::StreamId;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XSETID`.
pub(super) const XSETID: CommandSpec = CommandSpec {
    name: "xsetid",
    arity: -3,
    flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Overwrites a stream's last generated ID, entries-added counter and largest \
              deleted ID.",
    since: "5.0.0",
    complexity: "O(E) for the E entries of the last block (to find the last live entry).",
    syntax: "key:key last-id [ENTRIESADDED entries-added:integer] \
             [MAXDELETEDID max-deleted-id]",
    ..CommandSpec::of(Handler::Engine(xsetid))
};

/// A validated XSETID.
#[derive(Debug)]
struct SetIdRequest {
    last_id: StreamId,
    entries_added: Option<u64>,
    max_deleted: Option<StreamId>,
}

fn parse(args: &[Bytes]) -> Result<SetIdRequest, CmdError> {
    let last_id = args::strict_id(args.get(2).ok_or_else(|| CmdError::arity("xsetid"))?)?;
    let mut req = SetIdRequest { last_id, entries_added: None, max_deleted: None };
    let mut rest = args.get(3..).unwrap_or_default().iter();
    while let Some(opt) = rest.next() {
        match rest.next() {
            Some(value) if is(opt, "ENTRIESADDED") => {
                let n = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
                let n = u64::try_from(n).map_err(|_| CmdError::full("ERR entries_added must be positive"))?;
                req.entries_added = Some(n);
            }
            Some(value) if is(opt, "MAXDELETEDID") => {
                let id = args::strict_id(value)?;
                if last_id < id {
                    return Err(CmdError::full(
                        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                    ));
                }
                req.max_deleted = Some(id);
            }
            _ => return Err(CmdError::SYNTAX),
        }
    }
    Ok(req)
}

fn xsetid(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let req = parse(args)?;
    let key = args.get(1).ok_or_else(|| CmdError::arity("xsetid"))?;
    let stream = args::write_stream(engine, ctx, key)?.ok_or(CmdError::NO_SUCH_KEY)?;
    stream.set_id(req.last_id, req.entries_added, req.max_deleted)?;
    // A write for persistence, but (as in Redis) not a WATCH-visible modification.
    engine.count_changes(1);
    engine.record_event(ctx.db, key, KeyEvent::XSetId);
    Ok(Reply::ok())
}
