//! XTRIM: trim a stream by length or minimum ID (spec §3.10, §6).
//!
//! ```text
//! XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]
//! ```

use super::args;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XTRIM`.
pub(super) const XTRIM: CommandSpec = CommandSpec {
    name: "xtrim",
    arity: -4,
    flags: Flags::WRITE,
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RW", "delete"])],
    group: "stream",
    summary: "Removes the oldest entries of a stream down to a length or up to an ID.",
    since: "5.0.0",
    complexity: "O(R × log B) for R whole blocks removed of B, plus O(E) for a partly trimmed \
                 block of E entries.",
    syntax: "key:key trim@((MAXLEN | MINID) [= | ~] threshold [LIMIT count:integer]) \
             [KEEPREF | DELREF | ACKED]",
    ..CommandSpec::of(Handler::Engine(xtrim))
};

fn xtrim(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let options = args::parse_add_or_trim(args, false)?;
    let trim = options.trim.ok_or(CmdError::SYNTAX)?;
    let key = args.get(1).ok_or_else(|| CmdError::arity("xtrim"))?;
    let limits = args::node_limits(engine);
    let Some(stream) = args::write_stream(engine, ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    let removed = args::apply_trim(stream, trim, options.strategy, limits, ctx, key);
    if removed > 0 {
        engine.modified(ctx.db, key, KeyEvent::XTrim);
    }
    Ok(Reply::Integer(i64::try_from(removed).unwrap_or(i64::MAX)))
}
