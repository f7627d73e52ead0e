//! XGROUP: create, move, destroy consumer groups and manage their consumers (spec §3.16).
//!
//! ```text
//! XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read]
//! XGROUP SETID key group <id | $> [ENTRIESREAD entries-read]
//! XGROUP DESTROY key group
//! XGROUP CREATECONSUMER key group consumer
//! XGROUP DELCONSUMER key group consumer
//! XGROUP HELP
//! ```
//!
//! Every subcommand checks in Redis' order: its options, then the key's type, then that the
//! key exists (except `CREATE ... MKSTREAM`), then the group (SETID, CREATECONSUMER,
//! DELCONSUMER). Only key creation by MKSTREAM invalidates WATCH (spec §8); DESTROY wakes
//! blocked XREADGROUP clients so they fail with NOGROUP.

use super::args::{self, is, text};
use super::group::GroupEffect;
use super::{id, policy_act, Stream, StreamId};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `XGROUP` (container).
pub(super) const XGROUP: CommandSpec = CommandSpec {
    name: "xgroup",
    arity: -2,
    acl: &["@slow"],
    group: "stream",
    summary: "Manages the consumer groups of a stream and their consumers.",
    since: "5.0.0",
    complexity: "Depends on the subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::of(Handler::Container)
};

const SUBCOMMANDS: &[CommandSpec] =
    &[XGROUP_CREATE, XGROUP_SETID, XGROUP_DESTROY, XGROUP_CREATECONSUMER, XGROUP_DELCONSUMER, XGROUP_HELP];

const XGROUP_CREATE: CommandSpec = CommandSpec {
    name: "xgroup|create",
    arity: -5,
    flags: Flags::WRITE.and(Flags::DENYOOM),
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RW", "insert"])],
    group: "stream",
    summary: "Creates a consumer group that starts reading after a given ID, optionally \
              creating an empty stream.",
    since: "5.0.0",
    complexity: "O(log G) for G groups.",
    syntax: "key:key group id-selector@(id | $) [MKSTREAM] \
             [ENTRIESREAD entries-read:integer]",
    ..CommandSpec::of(Handler::Engine(xgroup_create))
};

const XGROUP_SETID: CommandSpec = CommandSpec {
    name: "xgroup|setid",
    arity: -5,
    flags: Flags::WRITE,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RW", "update"])],
    group: "stream",
    summary: "Moves a group's last-delivered ID, forwards or backwards.",
    since: "5.0.0",
    complexity: "O(log G) for G groups.",
    syntax: "key:key group id-selector@(id | $) [ENTRIESREAD entriesread:integer]",
    ..CommandSpec::of(Handler::Engine(xgroup_setid))
};

const XGROUP_DESTROY: CommandSpec = CommandSpec {
    name: "xgroup|destroy",
    arity: 4,
    flags: Flags::WRITE,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RW", "delete"])],
    group: "stream",
    summary: "Removes a consumer group with its consumers and pending entries.",
    since: "5.0.0",
    complexity: "O(C + P) for the group's C consumers and P pending entries.",
    syntax: "key:key group",
    ..CommandSpec::of(Handler::Engine(xgroup_destroy))
};

const XGROUP_CREATECONSUMER: CommandSpec = CommandSpec {
    name: "xgroup|createconsumer",
    arity: 5,
    flags: Flags::WRITE.and(Flags::DENYOOM),
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RW", "insert"])],
    group: "stream",
    summary: "Adds a named consumer to a group if it is not there yet.",
    since: "6.2.0",
    complexity: "O(log C) for C consumers.",
    syntax: "key:key group consumer",
    ..CommandSpec::of(Handler::Engine(xgroup_createconsumer))
};

const XGROUP_DELCONSUMER: CommandSpec = CommandSpec {
    name: "xgroup|delconsumer",
    arity: 5,
    flags: Flags::WRITE,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RW", "delete"])],
    group: "stream",
    summary: "Removes a consumer from a group, forgetting the entries pending for it.",
    since: "5.0.0",
    complexity: "O(P log n) for the consumer's P pending entries in a PEL of n.",
    syntax: "key:key group consumer",
    ..CommandSpec::of(Handler::Engine(xgroup_delconsumer))
};

const XGROUP_HELP: CommandSpec = CommandSpec {
    name: "xgroup|help",
    arity: 2,
    flags: Flags::LOADING.and(Flags::STALE),
    acl: &["@stream", "@slow"],
    group: "stream",
    summary: "Lists the XGROUP subcommands.",
    since: "5.0.0",
    complexity: "O(1)",
    ..CommandSpec::of(Handler::Engine(xgroup_help))
};

/// `ERR The XGROUP subcommand requires the key to exist. ...`
const KEY_REQUIRED: CmdError = CmdError::full(
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to \
     use the MKSTREAM option to create an empty stream automatically.",
);
/// `BUSYGROUP Consumer Group name already exists`
pub(super) const BUSYGROUP: CmdError = CmdError::full("BUSYGROUP Consumer Group name already exists");
/// `ERR value for ENTRIESREAD must be positive or -1`
const ENTRIESREAD_INVALID: CmdError = CmdError::full("ERR value for ENTRIESREAD must be positive or -1");

fn subcommand_error(args: &[Bytes]) -> CmdError {
    let sub: String = args.get(1).map(|s| text(s)).unwrap_or_default().chars().take(128).collect();
    CmdError::owned(format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try XGROUP HELP."))
}

fn arg(args: &[Bytes], i: usize) -> Result<&Bytes, CmdError> {
    args.get(i).ok_or_else(|| subcommand_error(args))
}

/// `ENTRIESREAD n`: `None` for −1 (unknown), else n.
fn parse_entries_read(arg: &[u8]) -> Result<Option<u64>, CmdError> {
    let n = parse_i64(arg).ok_or(CmdError::NOT_INTEGER)?;
    match n {
        -1 => Ok(None),
        n => u64::try_from(n).map(Some).map_err(|_| ENTRIESREAD_INVALID),
    }
}

/// The stream for a subcommand that needs the key (all but CREATE MKSTREAM).
fn existing<'e>(engine: &'e mut Engine, ctx: &CallCtx, key: &[u8]) -> Result<&'e mut Stream, CmdError> {
    args::write_stream(engine, ctx, key)?.ok_or(KEY_REQUIRED)
}

/// The stream for a subcommand that needs the group too.
fn with_group<'e>(engine: &'e mut Engine, ctx: &CallCtx, key: &[u8], group: &[u8]) -> Result<&'e mut Stream, CmdError> {
    let stream = existing(engine, ctx, key)?;
    if stream.group(group).is_none() {
        return Err(args::no_group_for_key(key, group));
    }
    Ok(stream)
}

fn xgroup_create(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let mut mkstream = false;
    let mut entries_read = None;
    let mut i = 5;
    while let Some(opt) = args.get(i) {
        if is(opt, "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if is(opt, "ENTRIESREAD") && i + 1 < args.len() {
            entries_read = parse_entries_read(arg(args, i + 1)?)?;
            i += 2;
        } else {
            return Err(subcommand_error(args));
        }
    }
    let key = arg(args, 2)?;
    let group = arg(args, 3)?;
    let stream = args::write_stream(engine, ctx, key)?;
    let exists = stream.is_some();
    if !exists && !mkstream {
        return Err(KEY_REQUIRED);
    }
    if args.len() > 8 {
        return Err(subcommand_error(args));
    }
    let id_arg = arg(args, 4)?;
    let last_id = if id_arg.as_ref() == b"$" {
        stream.map_or(StreamId::MIN, |s| s.last_generated_id())
    } else {
        id::parse_strict(id_arg, id::SEQ_DEFAULT_START)?
    };
    if !exists {
        let mut s = Box::<Stream>::default();
        s.idmp.configure(Some(engine.config.stream_idmp_duration_secs), Some(engine.config.stream_idmp_maxsize));
        engine.insert(ctx.db, key.clone(), Value::Stream(s));
        // The creation's events: `new`, then the group's (below).
        engine.modified(ctx.db, key, KeyEvent::XGroupCreate);
        engine.signal_ready(ctx.db, key);
    }
    let Some(stream) = args::write_stream(engine, ctx, key)? else {
        return Err(KEY_REQUIRED);
    };
    if stream.group(group).is_some() {
        return Err(BUSYGROUP);
    }
    // ENTRIESREAD beyond entries-added is clamped (Redis 8.2.2+).
    let entries_read = entries_read.map(|n| n.min(stream.entries_added()));
    stream.apply_group(GroupEffect::GroupCreated { group: crate::types::owned(group), last_id, entries_read });
    engine.count_changes(1);
    if exists {
        engine.record_event(ctx.db, key, KeyEvent::XGroupCreate);
    }
    Ok(Reply::ok())
}

fn xgroup_setid(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let entries_read = match args.len() {
        5 => None,
        7 if is(arg(args, 5)?, "ENTRIESREAD") => parse_entries_read(arg(args, 6)?)?,
        _ => return Err(subcommand_error(args)),
    };
    let key = arg(args, 2)?;
    let group = arg(args, 3)?;
    let stream = with_group(engine, ctx, key, group)?;
    let id_arg = arg(args, 4)?;
    let last_id = if id_arg.as_ref() == b"$" {
        stream.last_generated_id()
    } else {
        id::parse_non_strict(id_arg, id::SEQ_DEFAULT_START)?
    };
    let entries_read = entries_read.map(|n| n.min(stream.entries_added()));
    stream.apply_group(GroupEffect::SetId { group: group.clone(), last_id, entries_read });
    engine.count_changes(1);
    engine.record_event(ctx.db, key, KeyEvent::XGroupSetId);
    Ok(Reply::ok())
}

fn xgroup_destroy(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 2)?;
    let group = arg(args, 3)?;
    let stream = existing(engine, ctx, key)?;
    if stream.group(group).is_none() {
        return Ok(Reply::Integer(0));
    }
    stream.apply_group(GroupEffect::GroupDestroyed { group: group.clone() });
    engine.count_changes(1);
    engine.record_event(ctx.db, key, KeyEvent::XGroupDestroy);
    // Clients blocked in XREADGROUP on this group re-run and fail with NOGROUP.
    engine.signal_ready(ctx.db, key);
    Ok(Reply::Integer(1))
}

fn xgroup_createconsumer(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 2)?;
    let group = arg(args, 3)?;
    let consumer = arg(args, 4)?;
    let stream = with_group(engine, ctx, key, group)?;
    if stream.group(group).and_then(|g| g.consumer(consumer)).is_some() {
        return Ok(Reply::Integer(0));
    }
    let effect = stream.apply_group(GroupEffect::ConsumerCreated {
        group: group.clone(),
        consumer: crate::types::owned(consumer),
        time_ms: ctx.now_ms,
    });
    engine.count_changes(1);
    engine.record_event(ctx.db, key, KeyEvent::XGroupCreateConsumer);
    ctx.emit_group(key, [effect]);
    Ok(Reply::Integer(1))
}

fn xgroup_delconsumer(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 2)?;
    let group = arg(args, 3)?;
    let consumer = arg(args, 4)?;
    let stream = with_group(engine, ctx, key, group)?;
    let Some(pending) = stream.group(group).and_then(|g| Some(g.pending_count(g.consumer(consumer)?))) else {
        return Ok(Reply::Integer(0));
    };
    stream.apply_group(GroupEffect::ConsumerDeleted { group: group.clone(), consumer: consumer.clone() });
    engine.count_changes(1);
    engine.record_event(ctx.db, key, KeyEvent::XGroupDelConsumer);
    if pending > 0 {
        policy_act::wake_readers_if_freed(engine, ctx, key, group);
    }
    Ok(Reply::Integer(pending as i64))
}

fn xgroup_help(_: &mut Engine, _: &mut CallCtx, _: &[Bytes]) -> Result<Reply, CmdError> {
    let lines = [
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a consumer group that reads entries after <id> ($ = the stream's last ID).",
        "    Options:",
        "    * MKSTREAM",
        "      Create an empty stream if the key does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries-read counter (for lag reporting).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Add a consumer to the group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove a consumer and forget the entries pending for it.",
        "DESTROY <key> <groupname>",
        "    Remove the group with its consumers and pending entries.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Move the group's last delivered ID.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect()))
}
