//! rill's own stream command (docs/spec/policies.md §2, §8): `RILL.STREAM SET|GET|HELP`.
//!
//! ```text
//! RILL.STREAM SET key MAXAGE ms [KEEPREF | DELREF | ACKED]   -> OK   (MAXAGE 0: off)
//! RILL.STREAM GET key                                        -> map: maxage, refmode
//! RILL.STREAM HELP
//! ```
//!
//! Arguments are checked before the key is looked up (syntax, then the value); a key that
//! does not exist is `ERR no such key` (as XINFO STREAM and XSETID answer; SET never creates
//! the stream), a key of another type WRONGTYPE. SET is logged as the canonical
//! `RILL.STREAM SET key MAXAGE ms MODE` when it changed the setting; it trims nothing itself:
//! the trims it makes due come from the timer's sweep or the next XADD (see [`super::max_age`]).

use super::args;
use super::max_age::{parse_setting, MaxAge};
use super::reply;
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::effect::Effect;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `RILL.STREAM` (container).
pub(super) const RILL_STREAM: CommandSpec = CommandSpec {
    name: "rill.stream",
    arity: -2,
    acl: &["@slow"],
    group: "stream",
    summary: "Sets and shows a stream's retention by age (rill's own command).",
    since: "0.1.0",
    complexity: "Depends on the subcommand.",
    subcommands: &[RILL_STREAM_SET, RILL_STREAM_GET, RILL_STREAM_HELP],
    ..CommandSpec::of(Handler::Container)
};

const RILL_STREAM_SET: CommandSpec = CommandSpec {
    name: "rill.stream|set",
    arity: -5,
    flags: Flags::WRITE,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RW", "update"])],
    group: "stream",
    summary: "Sets a stream's MAXAGE: entries whose ID time is older than that many milliseconds \
              are trimmed, on XADD and in the background (0: off).",
    since: "0.1.0",
    complexity: "O(log S) for S streams with MAXAGE.",
    syntax: "key:key MAXAGE ms:integer [KEEPREF | DELREF | ACKED]",
    ..CommandSpec::of(Handler::Engine(stream_set))
};

const RILL_STREAM_GET: CommandSpec = CommandSpec {
    name: "rill.stream|get",
    arity: 3,
    flags: Flags::READONLY,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RO", "access"])],
    group: "stream",
    summary: "Shows a stream's MAXAGE setting and its reference mode.",
    since: "0.1.0",
    complexity: "O(1)",
    syntax: "key:key",
    ..CommandSpec::of(Handler::Engine(stream_get))
};

const RILL_STREAM_HELP: CommandSpec = CommandSpec {
    name: "rill.stream|help",
    arity: 2,
    flags: Flags::LOADING.and(Flags::STALE),
    acl: &["@stream", "@slow"],
    group: "stream",
    summary: "Lists the RILL.STREAM subcommands and options.",
    since: "0.1.0",
    complexity: "O(1)",
    ..CommandSpec::of(Handler::Engine(stream_help))
};

/// The record of a setting: `RILL.STREAM SET key MAXAGE ms MODE` (`MAXAGE 0 KEEPREF`: off).
fn setting_effect(db: usize, key: &Bytes, max_age: Option<MaxAge>) -> Effect {
    let (ms, mode) = max_age.map_or((0, "KEEPREF"), |m| (m.ms, m.mode_name()));
    let word = |s: &'static str| Bytes::from_static(s.as_bytes());
    Effect::Command {
        db,
        args: vec![
            word("RILL.STREAM"),
            word("SET"),
            key.clone(),
            word("MAXAGE"),
            Bytes::from(ms.to_string()),
            word(mode),
        ],
    }
}

fn stream_set(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(2).ok_or_else(|| CmdError::arity("rill.stream|set"))?;
    let setting = parse_setting(args.get(3..).unwrap_or_default())?;
    let stream = args::write_stream(engine, ctx, key)?.ok_or(CmdError::NO_SUCH_KEY)?;
    if stream.max_age() == setting {
        return Ok(Reply::ok());
    }
    stream.set_max_age(setting);
    ctx.emit(setting_effect(ctx.db, key, setting));
    engine.count_changes(1);
    engine.watch.touch(ctx.db, key);
    engine.arm_max_age(ctx.db, key);
    Ok(Reply::ok())
}

fn stream_get(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(2).ok_or_else(|| CmdError::arity("rill.stream|get"))?;
    let stream = args::read_stream(engine, ctx, key)?.ok_or(CmdError::NO_SUCH_KEY)?;
    let setting = stream.max_age();
    let ms = setting.map_or(0, |m| m.ms);
    let mode = setting.map_or("KEEPREF", MaxAge::mode_name);
    Ok(Reply::Map(vec![(reply::name("maxage"), reply::count(ms)), (reply::name("refmode"), reply::name(mode))]))
}

fn stream_help(_: &mut Engine, _: &mut CallCtx, _: &[Bytes]) -> Result<Reply, CmdError> {
    let lines = [
        "RILL.STREAM <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "SET <key> MAXAGE <ms> [KEEPREF|DELREF|ACKED]",
        "    Trim entries whose ID time is older than <ms> milliseconds, on XADD and in the",
        "    background (0: off). Entries age by their ID, as XTRIM MINID counts them.",
        "    KEEPREF (default) keeps consumer groups' references to trimmed entries, DELREF",
        "    removes them, ACKED trims only entries no group still references.",
        "GET <key>",
        "    Show the stream's MAXAGE (0: off) and reference mode.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect()))
}
