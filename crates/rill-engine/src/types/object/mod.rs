//! OBJECT and MEMORY: what Redis would report about a key's representation, and what rill's
//! copy of it costs.
//!
//! - `OBJECT ENCODING key` — the encoding Redis would use for the same sequence of commands:
//!   `int`/`embstr`/`raw`, `listpack`/`listpackex`/`hashtable`, `listpack`/`quicklist`,
//!   `intset`/`listpack`/`hashtable`, `stream`. rill stores one representation per type and
//!   replays Redis' conversion rules on per-key metadata ([`meta`], [`encoding`],
//!   [`quicklist`]). O(1), except that a value loaded from a snapshot or a RESTORE payload is
//!   classified from its content on first use: O(min(N, the type's listpack limit)), O(N) for
//!   a list.
//! - `OBJECT REFCOUNT key` — 1: rill never shares a value between keys (Redis 8 neither; Redis
//!   7.0 reports 2147483647 for its shared small integers).
//! - `OBJECT IDLETIME key` — whole seconds since the key was last read or written by a command
//!   other than OBJECT, TYPE, EXISTS, TTL/PTTL/EXPIRETIME/PEXPIRETIME and MEMORY USAGE (which
//!   Redis also leaves untouched). A key loaded from a snapshot counts from when the engine
//!   first saw a clock after loading; one rebuilt by replaying the log, from the logged time of
//!   its last write. Under an LFU `maxmemory-policy` it is Redis' error.
//! - `OBJECT FREQ key` — the logarithmic access counter Redis keeps under an LFU policy (new
//!   keys start at 5; `lfu-log-factor` 10 and `lfu-decay-time` 1, Redis' defaults: rill does
//!   not implement those two directives). Under any other policy it is Redis' error. Where a
//!   handler looks a key up twice (HINCRBY reads, then writes; APPEND, SETRANGE, LMOVE) the
//!   counter sees two accesses where Redis sees one; past the first few, each access
//!   increments it with a probability of 1/11 or less, so the difference stays small.
//! - `OBJECT HELP`, `MEMORY HELP` — rill's own wording.
//! - `MEMORY USAGE key [SAMPLES count]` — rill's estimate ([`usage`]); nil for a missing key.
//!   SAMPLES is read before the key, as Redis: a negative count is a syntax error, one that is
//!   not an integer `ERR value is not an integer or out of range`. O(samples).
//! - `MEMORY MALLOC-STATS` — what Redis built without jemalloc says ("Stats not supported for
//!   the current allocator"): rill runs on the system allocator.
//! - `MEMORY PURGE` — `OK` and nothing else, as Redis without jemalloc: the system allocator
//!   has nothing rill can ask it to purge.
//!
//! Not implemented: `MEMORY STATS` and `MEMORY DOCTOR` (Redis' figures describe its own
//! structures; rill has no honest equivalent for most of them yet).

pub mod encoding;
pub mod meta;
pub mod quicklist;
pub mod usage;

#[cfg(test)]
mod tests;

use super::arg;
use crate::command::{key_at, CommandSpec, Flags, Handler, KeySpec};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

pub use meta::{ObjectConfig, ObjectMeta};

/// Both containers.
pub const COMMANDS: &[CommandSpec] = &[OBJECT];

/// The key at index 2, read only.
const KEY_2_RO: &[KeySpec] = &[key_at(2, &["RO"])];

/// A subcommand reading the key at index 2.
const fn key_sub(handler: Handler) -> CommandSpec {
    CommandSpec {
        arity: 3,
        flags: Flags::READONLY,
        first_key: 2,
        last_key: 2,
        step: 1,
        acl: &["@keyspace", "@read", "@slow"],
        tips: &["nondeterministic_output"],
        key_specs: KEY_2_RO,
        since: "2.2.3",
        syntax: "key:key",
        ..CommandSpec::of(handler)
    }
}

const OBJECT: CommandSpec = CommandSpec {
    name: "object",
    arity: -2,
    acl: &["@slow"],
    summary: "Reports how Redis would represent a key's value, and how recently it was used.",
    since: "2.2.3",
    complexity: "Depends on the subcommand.",
    subcommands: &[
        CommandSpec {
            name: "object|encoding",
            summary: "Names the encoding Redis would use for the value (int, embstr, listpack, ...).",
            complexity: "O(1); a value loaded from a snapshot or RESTORE is classified once, \
                         O(min(N, listpack limit)), O(N) for a list.",
            ..key_sub(Handler::Engine(object_encoding))
        },
        CommandSpec {
            name: "object|refcount",
            summary: "Returns the value's reference count: always 1, rill shares no values.",
            complexity: "O(1)",
            ..key_sub(Handler::Engine(object_refcount))
        },
        CommandSpec {
            name: "object|idletime",
            summary: "Returns the seconds since the key was last accessed.",
            complexity: "O(1)",
            ..key_sub(Handler::Engine(object_idletime))
        },
        CommandSpec {
            name: "object|freq",
            summary: "Returns the key's logarithmic access counter (LFU policies only).",
            since: "4.0.0",
            complexity: "O(1)",
            ..key_sub(Handler::Engine(object_freq))
        },
        CommandSpec {
            name: "object|help",
            arity: 2,
            flags: Flags::LOADING.and(Flags::STALE),
            acl: &["@keyspace", "@slow"],
            summary: "Lists the OBJECT subcommands.",
            since: "6.2.0",
            complexity: "O(1)",
            ..CommandSpec::of(Handler::Engine(object_help))
        },
    ],
    ..CommandSpec::of(Handler::Container)
};

/// A MEMORY subcommand without a key.
pub const fn memory_sub(handler: Handler) -> CommandSpec {
    CommandSpec {
        arity: 2,
        acl: &["@slow"],
        group: "server",
        since: "4.0.0",
        complexity: "O(1)",
        ..CommandSpec::of(handler)
    }
}

/// The MEMORY container with the engine's subcommands only, for the engine's own tests (the
/// server declares the real one, with DOCTOR and STATS).
#[cfg(test)]
pub const TEST_MEMORY: &[CommandSpec] = &[CommandSpec {
    name: "memory",
    arity: -2,
    subcommands: &[MEMORY_USAGE, MEMORY_MALLOC_STATS, MEMORY_PURGE, MEMORY_HELP],
    ..CommandSpec::of(Handler::Container)
}];

/// MEMORY USAGE (the server declares the MEMORY container: DOCTOR and STATS need the
/// process's figures, which the engine does not see).
pub const MEMORY_USAGE: CommandSpec = CommandSpec {
    name: "memory|usage",
    arity: -3,
    flags: Flags::READONLY,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@read", "@slow"],
    key_specs: &[key_at(2, &["RO"])],
    summary: "Estimates the bytes a key and its value take in rill.",
    complexity: "O(samples): collections are sampled (5 elements unless SAMPLES says, \
                 0 = all).",
    syntax: "key:key [SAMPLES count:integer]",
    ..memory_sub(Handler::Engine(memory_usage))
};

/// MEMORY MALLOC-STATS
pub const MEMORY_MALLOC_STATS: CommandSpec = CommandSpec {
    name: "memory|malloc-stats",
    tips: &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"],
    summary: "Says that the system allocator rill runs on keeps no statistics to show.",
    ..memory_sub(Handler::Engine(memory_malloc_stats))
};

/// MEMORY PURGE
pub const MEMORY_PURGE: CommandSpec = CommandSpec {
    name: "memory|purge",
    tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
    summary: "Replies OK: the system allocator has nothing to purge on request.",
    ..memory_sub(Handler::Engine(memory_purge))
};

/// MEMORY HELP
pub const MEMORY_HELP: CommandSpec = CommandSpec {
    name: "memory|help",
    flags: Flags::LOADING.and(Flags::STALE),
    summary: "Lists the MEMORY subcommands.",
    ..memory_sub(Handler::Engine(memory_help))
};

// ---------------------------------------------------------------------------------------------
// OBJECT

/// Redis' errors for the access counters the current policy does not keep.
const IDLETIME_UNDER_LFU: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that \
     when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const FREQ_WITHOUT_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please \
     note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

fn object_encoding(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 2)?;
    let cfg = engine.config.object;
    Ok(match engine.peek_read(ctx.db, key, ctx.now_ms) {
        None => Reply::Null,
        Some(entry) => Reply::bulk(encoding::name(key, entry, &cfg)),
    })
}

fn object_refcount(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 2)?;
    Ok(match engine.peek_read(ctx.db, key, ctx.now_ms) {
        None => Reply::Null,
        Some(_) => Reply::Integer(1),
    })
}

fn object_idletime(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 2)?;
    let (lfu, loaded_s) = (engine.config.object.lfu, engine.first_clock_s());
    // The key is looked up first: a missing key is nil whatever the policy, as in Redis.
    let Some(entry) = engine.peek_read(ctx.db, key, ctx.now_ms) else { return Ok(Reply::Null) };
    if lfu {
        return Err(CmdError::full(IDLETIME_UNDER_LFU));
    }
    Ok(Reply::Integer(i64::try_from(entry.meta.idle_seconds(ctx.now_ms, loaded_s)).unwrap_or(i64::MAX)))
}

fn object_freq(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 2)?;
    let (lfu, decay) = (engine.config.object.lfu, engine.config.object.lfu_decay_time);
    let Some(entry) = engine.peek_read(ctx.db, key, ctx.now_ms) else { return Ok(Reply::Null) };
    if !lfu {
        return Err(CmdError::full(FREQ_WITHOUT_LFU));
    }
    Ok(Reply::Integer(i64::from(entry.meta.lfu_decayed(ctx.now_ms, decay))))
}

fn help(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect())
}

fn object_help(_: &mut Engine, _: &mut CallCtx, _: &[Bytes]) -> Result<Reply, CmdError> {
    Ok(help(&[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    The encoding Redis would use for the value at <key>.",
        "FREQ <key>",
        "    The logarithmic access counter of <key> (LFU maxmemory policies only).",
        "IDLETIME <key>",
        "    Seconds since <key> was last accessed (not under LFU maxmemory policies).",
        "REFCOUNT <key>",
        "    References to the value at <key>: always 1 in rill.",
        "HELP",
        "    Print this help.",
    ]))
}

// ---------------------------------------------------------------------------------------------
// MEMORY

/// Elements sampled when SAMPLES is not given (Redis' default).
const DEFAULT_SAMPLES: usize = 5;

fn parse_samples(args: &[Bytes]) -> Result<usize, CmdError> {
    let mut samples = DEFAULT_SAMPLES;
    let mut i = 3;
    while let Some(opt) = args.get(i) {
        let value = args.get(i + 1).filter(|_| super::is_token(opt, "SAMPLES")).ok_or(CmdError::SYNTAX)?;
        let n = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
        if n < 0 {
            return Err(CmdError::SYNTAX);
        }
        // 0: every element.
        samples = usize::try_from(n).unwrap_or(usize::MAX);
        i += 2;
    }
    Ok(samples)
}

fn memory_usage(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 2)?;
    let samples = parse_samples(args)?;
    Ok(match engine.peek_read(ctx.db, key, ctx.now_ms) {
        None => Reply::Null,
        Some(entry) => Reply::Integer(i64::try_from(usage::usage(key, entry, samples)).unwrap_or(i64::MAX)),
    })
}

fn memory_malloc_stats(_: &mut Engine, _: &mut CallCtx, _: &[Bytes]) -> Result<Reply, CmdError> {
    Ok(Reply::bulk("Stats not supported for the current allocator"))
}

fn memory_purge(_: &mut Engine, _: &mut CallCtx, _: &[Bytes]) -> Result<Reply, CmdError> {
    Ok(Reply::ok())
}

fn memory_help(_: &mut Engine, _: &mut CallCtx, _: &[Bytes]) -> Result<Reply, CmdError> {
    Ok(help(&[
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Look for memory problems and describe them.",
        "MALLOC-STATS",
        "    Allocator statistics (the system allocator rill uses keeps none to show).",
        "STATS",
        "    Where the memory goes: data, buffers, scripts, the allocator.",
        "PURGE",
        "    Ask the allocator to release memory (nothing to do with the system allocator).",
        "USAGE <key> [SAMPLES <count>]",
        "    Estimated bytes <key> and its value take in rill. Collections are sampled",
        "    <count> elements (default: 5, 0 means all).",
        "HELP",
        "    Print this help.",
    ]))
}
