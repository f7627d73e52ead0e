//! XINFO: the introspection container (spec §3.17): `XINFO STREAM key [FULL [COUNT count]]`,
//! `XINFO GROUPS key`, `XINFO CONSUMERS key group` and `XINFO HELP`.

use super::args::{self, is};
use super::group::ConsumerGroup;
use super::{reply, Stream};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;
use std::ops::Bound;

/// `XINFO` (container).
pub(super) const XINFO: CommandSpec = CommandSpec {
    name: "xinfo",
    arity: -2,
    acl: &["@slow"],
    group: "stream",
    summary: "Describes streams and their consumer groups.",
    since: "5.0.0",
    complexity: "Depends on the subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::of(Handler::Container)
};

const SUBCOMMANDS: &[CommandSpec] = &[XINFO_STREAM, XINFO_GROUPS, XINFO_CONSUMERS, XINFO_HELP];

/// `XINFO GROUPS`.
const XINFO_GROUPS: CommandSpec = CommandSpec {
    name: "xinfo|groups",
    arity: 3,
    flags: Flags::READONLY,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RO", "access"])],
    group: "stream",
    summary: "Lists a stream's consumer groups with their position, pending count and lag.",
    since: "5.0.0",
    complexity: "O(G) for G groups (lag may cost O(E) for the E entries of the last block).",
    syntax: "key:key",
    ..CommandSpec::of(Handler::Engine(xinfo_groups))
};

/// `XINFO CONSUMERS`.
const XINFO_CONSUMERS: CommandSpec = CommandSpec {
    name: "xinfo|consumers",
    arity: 4,
    flags: Flags::READONLY,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(2, &["RO", "access"])],
    group: "stream",
    summary: "Lists the consumers of a group with their pending count and idle times.",
    since: "5.0.0",
    complexity: "O(C) for C consumers.",
    syntax: "key:key group",
    ..CommandSpec::of(Handler::Engine(xinfo_consumers))
};

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
    ..CommandSpec::of(Handler::Engine(xinfo_stream))
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
    ..CommandSpec::of(Handler::Engine(xinfo_help))
};

/// Entries XINFO STREAM FULL lists when COUNT is absent or negative.
const FULL_COUNT_DEFAULT: u64 = 10;

fn subcommand_error(args: &[Bytes]) -> CmdError {
    let sub = args.get(1).map(|s| String::from_utf8_lossy(s).into_owned()).unwrap_or_default();
    let sub: String = sub.chars().take(128).collect();
    CmdError::owned(format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try XINFO HELP."))
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
    m.push((reply::name("groups"), reply::count(s.groups().len() as u64)));
    m.push((reply::name("first-entry"), s.first_entry().map_or(Reply::Null, reply::entry)));
    m.push((reply::name("last-entry"), s.last_entry().map_or(Reply::Null, reply::entry)));
    Reply::Map(m)
}

fn full_info(s: &Stream, count: u64) -> Reply {
    let take = if count == 0 { None } else { usize::try_from(count).ok() };
    let (min, max) = (super::StreamId::MIN, super::StreamId::MAX);
    let entries = super::cmd_range::range_reply(s, min, max, take.unwrap_or(usize::MAX), false);
    let mut m = common_fields(s);
    m.push((reply::name("entries"), entries));
    let groups = s.groups().iter().map(|(name, g)| full_group(s, name, g, take)).collect();
    m.push((reply::name("groups"), Reply::Array(groups)));
    Reply::Map(m)
}

/// `entries-read` and `lag`: integers, or nil when unknown.
fn read_and_lag(s: &Stream, g: &ConsumerGroup) -> [(Reply, Reply); 2] {
    [
        (reply::name("entries-read"), g.entries_read.map_or(Reply::Null, reply::count)),
        (reply::name("lag"), s.lag(g).map_or(Reply::Null, Reply::Integer)),
    ]
}

/// One group of XINFO STREAM FULL: 8 fields, pending entries and consumers listed up to
/// `take` each.
fn full_group(s: &Stream, name: &Bytes, g: &ConsumerGroup, take: Option<usize>) -> Reply {
    let take = take.unwrap_or(usize::MAX);
    let pending = g
        .pel()
        .iter()
        .take(take)
        .map(|(id, e)| {
            Reply::Array(vec![
                reply::id(id),
                Reply::Bulk(e.owner.cloned().unwrap_or_default()),
                Reply::Integer(e.delivery_time_ms),
                reply::count(e.delivery_count),
            ])
        })
        .collect();
    let consumers = g
        .consumers()
        .iter()
        .map(|(cname, c)| {
            let own = g
                .pending_ids(c, Bound::Unbounded)
                .take(take)
                .filter_map(|id| {
                    let e = g.pel().get(id)?;
                    Some(Reply::Array(vec![
                        reply::id(id),
                        Reply::Integer(e.delivery_time_ms),
                        reply::count(e.delivery_count),
                    ]))
                })
                .collect();
            Reply::Map(vec![
                (reply::name("name"), Reply::Bulk(cname.clone())),
                (reply::name("seen-time"), Reply::Integer(c.seen_time_ms)),
                (reply::name("active-time"), Reply::Integer(c.active_time_ms)),
                (reply::name("pel-count"), reply::count(g.pending_count(c))),
                (reply::name("pending"), Reply::Array(own)),
            ])
        })
        .collect();
    let [er, lag] = read_and_lag(s, g);
    Reply::Map(vec![
        (reply::name("name"), Reply::Bulk(name.clone())),
        (reply::name("last-delivered-id"), reply::id(g.last_delivered_id)),
        er,
        lag,
        (reply::name("pel-count"), reply::count(g.pel().len())),
        (reply::name("nacked-count"), reply::count(g.pel().nacked_count())),
        (reply::name("pending"), Reply::Array(pending)),
        (reply::name("consumers"), Reply::Array(consumers)),
    ])
}

fn xinfo_groups(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(2).ok_or_else(|| subcommand_error(args))?;
    let s = args::read_stream(engine, ctx, key)?.ok_or(CmdError::NO_SUCH_KEY)?;
    let groups = s
        .groups()
        .iter()
        .map(|(name, g)| {
            let [er, lag] = read_and_lag(s, g);
            Reply::Map(vec![
                (reply::name("name"), Reply::Bulk(name.clone())),
                (reply::name("consumers"), reply::count(g.consumers().len() as u64)),
                (reply::name("pending"), reply::count(g.pel().len())),
                (reply::name("last-delivered-id"), reply::id(g.last_delivered_id)),
                er,
                lag,
            ])
        })
        .collect();
    Ok(Reply::Array(groups))
}

fn xinfo_consumers(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = args.get(2).ok_or_else(|| subcommand_error(args))?;
    let group = args.get(3).ok_or_else(|| subcommand_error(args))?;
    let now = ctx.now_ms;
    let s = args::read_stream(engine, ctx, key)?.ok_or(CmdError::NO_SUCH_KEY)?;
    let g = s.group(group).ok_or_else(|| args::no_group_for_key(key, group))?;
    let consumers = g
        .consumers()
        .iter()
        .map(|(name, c)| {
            let inactive = if c.active_time_ms == -1 { -1 } else { (now - c.active_time_ms).max(0) };
            Reply::Map(vec![
                (reply::name("name"), Reply::Bulk(name.clone())),
                (reply::name("pending"), reply::count(g.pending_count(c))),
                (reply::name("idle"), Reply::Integer((now - c.seen_time_ms).max(0))),
                (reply::name("inactive"), Reply::Integer(inactive)),
            ])
        })
        .collect();
    Ok(Reply::Array(consumers))
}
