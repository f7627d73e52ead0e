//! XCFGSET: per-stream settings of idempotent production (spec §3.18).
//!
//! ```text
//! XCFGSET key [IDMP-DURATION seconds] [IDMP-MAXSIZE count]
//! ```

use super::args::{self, is};
use super::idmp;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XCFGSET`.
pub(super) const XCFGSET: CommandSpec = CommandSpec {
    name: "xcfgset",
    arity: -2,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Changes how long and how many idempotency IDs a stream remembers per producer.",
    since: "8.6.0",
    complexity: "O(1), or O(N) for the N recorded IDs discarded when a value changes.",
    syntax: "key:key [IDMP-DURATION duration:integer] [IDMP-MAXSIZE maxsize:integer]",
    ..CommandSpec::of(Handler::Engine(xcfgset))
};

fn xcfgset(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(1).ok_or_else(|| CmdError::arity("xcfgset"))?;
    // Redis looks the key up before reading the options.
    if args::write_stream(engine, ctx, key)?.is_none() {
        return Err(CmdError::NO_SUCH_KEY);
    }
    let mut duration = None;
    let mut max_size = None;
    let mut rest = args.get(2..).unwrap_or_default().iter();
    while let Some(opt) = rest.next() {
        let is_duration = is(opt, "IDMP-DURATION");
        if !is_duration && !is(opt, "IDMP-MAXSIZE") {
            return Err(CmdError::SYNTAX);
        }
        let value = rest.next().ok_or(CmdError::SYNTAX)?;
        if is_duration {
            if duration.is_some() {
                return Err(CmdError::full("ERR IDMP-DURATION specified multiple times"));
            }
            let n = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
            if !idmp::DURATION_RANGE_SECS.contains(&n) {
                return Err(CmdError::full("ERR IDMP-DURATION must be between 1 and 86400 seconds"));
            }
            duration = u64::try_from(n).ok();
        } else {
            if max_size.is_some() {
                return Err(CmdError::full("ERR IDMP-MAXSIZE specified multiple times"));
            }
            let n = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
            if !idmp::MAX_SIZE_RANGE.contains(&n) {
                return Err(CmdError::full("ERR IDMP-MAXSIZE must be between 1 and 10000 entries"));
            }
            max_size = u64::try_from(n).ok();
        }
    }
    if duration.is_none() && max_size.is_none() {
        return Err(CmdError::full("ERR At least one parameter must be specified"));
    }
    let Some(stream) = args::write_stream(engine, ctx, key)? else {
        return Err(CmdError::NO_SUCH_KEY);
    };
    stream.idmp.configure(duration, max_size);
    // Persisted state, but no WATCH invalidation (spec §8).
    engine.count_changes(1);
    Ok(Reply::ok())
}
