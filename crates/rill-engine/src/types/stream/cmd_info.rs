//! XINFO: the introspection container (spec §3.17). Implemented now: `XINFO STREAM key
//! [FULL [COUNT count]]` and `XINFO HELP`; `XINFO GROUPS` and `XINFO CONSUMERS` arrive with
//! consumer groups as further entries of [`SUBCOMMANDS`].

use super::args::{self, is};
use super::{reply, Stream};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `XINFO` (container).
pub(super) const XINFO: CommandSpec = CommandSpec {
    name: "xinfo",
    arity: -2,
    acl: &["@slow"],
    group: "stream",
    summary: "Describes streams and their consumer groups.",
    since: "5.0.0",
    complexity: "Depends on the subcommand.",
    handler: Handler::Container,
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
};

const SUBCOMMANDS: &[CommandSpec] = &[XINFO_STREAM, XINFO_HELP];

/// `XINFO STREAM`.
const XINFO_STREAM: CommandSpec = CommandSpec {
    name: "xinfo|stream",
    arity: -3,
    flags: Flags::READONLY,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RO", "access"])],
    group: "stream",
    summary: "Describes a stream; with FULL also lists its entries and consumer groups.",
    since: "5.0.0",
    complexity: "O(E) for the E entries of the last block; FULL adds O(COUNT) entries.",
    syntax: "key:key [full-block@(FULL [COUNT count:integer])]",
    handler: Handler::Engine(xinfo_stream),
    ..CommandSpec::DEFAULT
};

/// `XINFO HELP`.
const XINFO_HELP: CommandSpec = CommandSpec {
    name: "xinfo|help",
    arity: 2,
    flags: Flags::LOADING.and(Flags::STALE),
    acl: &["@stream", "@slow"],
    group: "stream",
    summary: "Lists the XINFO subcommands.",
    since: "5.0.0",
    complexity: "O(1)",
    handler: Handler::Engine(xinfo_help),
    ..CommandSpec::DEFAULT
};

/// Entries XINFO STREAM FULL lists when COUNT is absent or negative.
const FULL_COUNT_DEFAULT: u64 = 10;

fn subcommand_error(args: &[Bytes]) -> CmdError {
    let sub = args.get(1).map(|s| String::from_utf8_lossy(s).into_owned()).unwrap_or_default();
    let sub: String = sub.chars().take(128).collect();
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try XINFO HELP."
    ))
}

fn xinfo_help(_: &mut Engine, _: &mut CallCtx, _: &[Bytes]) -> Result<Reply, CmdError> {
    let lines = [
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    List the consumers of group <groupname>.",
        "GROUPS <key>",
        "    List the consumer groups of the stream.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Describe the stream; FULL adds its entries and groups.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect()))
}

/// `None`: the summary form; `Some(n)`: FULL with n entries (0 = all).
fn parse_options(args: &[Bytes]) -> Result<Option<u64>, CmdError> {
    let opts = args.get(3..).unwrap_or_default();
    match opts {
        [] => Ok(None),
        [full] if is(full, "FULL") => Ok(Some(FULL_COUNT_DEFAULT)),
        [full, count, n] if is(full, "FULL") && is(count, "COUNT") => {
            let n = parse_i64(n).ok_or(CmdError::NOT_INTEGER)?;
            Ok(Some(u64::try_from(n).unwrap_or(FULL_COUNT_DEFAULT)))
        }
        _ => Err(subcommand_error(args)),
    }
}

fn xinfo_stream(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(2).ok_or_else(|| subcommand_error(args))?;
    // The key comes before the options: a missing key wins over a bad option.
    let exists = args::write_stream(engine, ctx, key)?.is_some();
    if !exists {
        return Err(CmdError::NO_SUCH_KEY);
    }
    let full = parse_options(args)?;
    let Some(stream) = args::write_stream(engine, ctx, key)? else {
        return Err(CmdError::NO_SUCH_KEY);
    };
    // Redis' IDMP timer would have dropped expired IDs by now.
    stream.idmp.expire(ctx.now_ms);
    Ok(match full {
        None => summary(stream),
        Some(count) => full_info(stream, count),
    })
}

/// The fields both forms start with (13 of them).
fn common_fields(s: &Stream) -> Vec<(Reply, Reply)> {
    let blocks = s.block_count() as u64;
    vec![
        (reply::name("length"), reply::count(s.len())),
        (reply::name("radix-tree-keys"), reply::count(blocks)),
        // Redis reports its radix tree's node count here; we have a B-tree, so this is an
        // estimate of the same order (diagnostic only, spec §3.17).
        (reply::name("radix-tree-nodes"), reply::count(1 + 2 * blocks - blocks.min(1))),
        (reply::name("last-generated-id"), reply::id(s.last_generated_id())),
        (reply::name("max-deleted-entry-id"), reply::id(s.max_deleted_entry_id())),
        (reply::name("entries-added"), reply::count(s.entries_added())),
        (reply::name("recorded-first-entry-id"), reply::id(s.first_id())),
        (reply::name("idmp-duration"), reply::count(s.idmp.duration_secs())),
        (reply::name("idmp-maxsize"), reply::count(s.idmp.max_size())),
        (reply::name("pids-tracked"), reply::count(s.idmp.pids_tracked())),
        (reply::name("iids-tracked"), reply::count(s.idmp.iids_tracked())),
        (reply::name("iids-added"), reply::count(s.idmp.iids_added())),
        (reply::name("iids-duplicates"), reply::count(s.idmp.iids_duplicates())),
    ]
}

fn summary(s: &Stream) -> Reply {
    let mut m = common_fields(s);
    m.push((reply::name("groups"), Reply::Integer(0)));
    m.push((reply::name("first-entry"), s.first_entry().map_or(Reply::Null, reply::entry)));
    m.push((reply::name("last-entry"), s.last_entry().map_or(Reply::Null, reply::entry)));
    Reply::Map(m)
}

fn full_info(s: &Stream, count: u64) -> Reply {
    let take = if count == 0 { None } else { usize::try_from(count).ok() };
    let entries = s.range_vec(super::StreamId::MIN, super::StreamId::MAX, take, false);
    let mut m = common_fields(s);
    m.push((reply::name("entries"), reply::entries(entries)));
    // One map per consumer group, by name, once groups exist.
    m.push((reply::name("groups"), Reply::Array(Vec::new())));
    Reply::Map(m)
}
