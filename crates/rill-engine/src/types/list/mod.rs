//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LRANGE, LLEN, LINDEX, LSET, LREM,
//! LTRIM, BLPOP, BRPOP here; LMOVE, BLMOVE, RPOPLPUSH, BRPOPLPUSH in [`moves`]; LINSERT, LPOS in
//! [`search`].
//!
//! A list is a `VecDeque<Bytes>` (Redis uses a listpack or a quicklist of listpacks): pushes
//! and pops at either end are O(1), indexing is O(1) (Redis: O(N)), LREM is O(N), LTRIM
//! O(removed), LRANGE O(returned). Every write also tells the list's layout model
//! (`object::quicklist`) what changed, so OBJECT ENCODING reports what Redis would; that adds
//! O(1) per element pushed or popped, O(nodes) to LSET, LINSERT and LREM.
//!
//! LMPOP and BLMPOP are in [`mpop`].
//!
//! Blocking (BLPOP/BRPOP): when every key is missing the handler sets `ctx.block` with the keys,
//! the deadline and a nil-array timeout reply, and the server parks the client. Each push calls
//! [`Engine::signal_ready`]; the server then re-runs the same command with
//! `ctx.deadline_override` set, so a re-run that finds nothing (another client was faster) parks
//! again with the original deadline. Inside MULTI (`ctx.no_block`) the command never blocks and
//! replies a nil array at once.
//!
//! Redis behaviours we match on purpose:
//! - LPOP/RPOP with a count reply an array, and a nil *array* for a missing key (even with count
//!   0); count 0 on an existing list is an empty array; a negative or non-integer count is
//!   `ERR value is out of range, must be positive`. Without a count: a bulk or nil bulk.
//! - LSET on a missing key is `ERR no such key`, out of range `ERR index out of range`.
//! - LRANGE/LTRIM clamp their indexes the Redis way; LTRIM on a missing key replies OK.
//! - BLPOP/BRPOP parse the timeout before looking at keys (so a bad timeout wins over
//!   WRONGTYPE), scan the keys in order and fail with WRONGTYPE only when reaching a non-list
//!   before any list with data. Timeout errors: `ERR timeout is not a float or out of range`,
//!   `ERR timeout is negative`, `ERR timeout is out of range` (too large to add to the clock, as
//!   Redis 7.2+ reports it); fractions of a millisecond round up; 0 blocks forever.
//! - A list emptied by a pop, LREM or LTRIM is deleted.

mod moves;
mod mpop;
mod search;

use super::object::encoding::list_layout;
use super::object::ObjectMeta;
use super::{arg, arity_error, delete_key, owned};
use crate::command::{key_at, BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::long_double::LongDouble;
use crate::types::object::ObjectConfig;
use crate::util::{int_arg, parse_i64};
use crate::KeyEvent;
use crate::{BlockRequest, CallCtx, CmdError, Engine, Value, WakeOn};
use bytes::Bytes;
use rill_resp::Reply;
use std::collections::VecDeque;

type List = VecDeque<Bytes>;

const RO_ACCESS: &[KeySpec] = &[key_at(1, &["RO", "ACCESS"])];
const RW_INSERT: &[KeySpec] = &[key_at(1, &["RW", "INSERT"])];
const RW_ACCESS_DELETE: &[KeySpec] = &[key_at(1, &["RW", "ACCESS", "DELETE"])];
const RW_DELETE: &[KeySpec] = &[key_at(1, &["RW", "DELETE"])];
const WRITE_DENYOOM_FAST: Flags = Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST);

/// BLPOP/BRPOP keys: every argument from 1 up to the one before the timeout.
const BLOCKING_KEYS: &[KeySpec] = &[KeySpec {
    flags: &["RW", "ACCESS", "DELETE"],
    begin: BeginSearch::Index(1),
    find: FindKeys::Range { lastkey: -2, keystep: 1, limit: 0 },
    notes: "",
}];

/// A list command on the key at index 1.
const fn list_cmd(handler: Handler) -> CommandSpec {
    CommandSpec { first_key: 1, last_key: 1, step: 1, group: "list", ..CommandSpec::of(handler) }
}

/// The list commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "lpush",
        arity: -3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@list", "@fast"],
        key_specs: RW_INSERT,
        summary: "Adds elements at the head of a list (creating it), one after another.",
        complexity: "O(N) in the number of elements given.",
        syntax: "key:key element ...",
        ..list_cmd(Handler::Engine(lpush))
    },
    CommandSpec {
        name: "rpush",
        arity: -3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@list", "@fast"],
        key_specs: RW_INSERT,
        summary: "Adds elements at the tail of a list (creating it).",
        complexity: "O(N) in the number of elements given.",
        syntax: "key:key element ...",
        ..list_cmd(Handler::Engine(rpush))
    },
    CommandSpec {
        name: "lpushx",
        arity: -3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@list", "@fast"],
        key_specs: RW_INSERT,
        summary: "Adds elements at the head of a list only if the list exists.",
        since: "2.2.0",
        complexity: "O(N) in the number of elements given.",
        syntax: "key:key element ...",
        ..list_cmd(Handler::Engine(lpushx))
    },
    CommandSpec {
        name: "rpushx",
        arity: -3,
        flags: WRITE_DENYOOM_FAST,
        acl: &["@write", "@list", "@fast"],
        key_specs: RW_INSERT,
        summary: "Adds elements at the tail of a list only if the list exists.",
        since: "2.2.0",
        complexity: "O(N) in the number of elements given.",
        syntax: "key:key element ...",
        ..list_cmd(Handler::Engine(rpushx))
    },
    CommandSpec {
        name: "lpop",
        arity: -2,
        flags: Flags::WRITE.and(Flags::FAST),
        acl: &["@write", "@list", "@fast"],
        key_specs: RW_ACCESS_DELETE,
        summary: "Removes and returns the first element of a list, or the first `count`.",
        complexity: "O(N) in the number of elements returned.",
        syntax: "key:key [count:integer]",
        ..list_cmd(Handler::Engine(lpop))
    },
    CommandSpec {
        name: "rpop",
        arity: -2,
        flags: Flags::WRITE.and(Flags::FAST),
        acl: &["@write", "@list", "@fast"],
        key_specs: RW_ACCESS_DELETE,
        summary: "Removes and returns the last element of a list, or the last `count`.",
        complexity: "O(N) in the number of elements returned.",
        syntax: "key:key [count:integer]",
        ..list_cmd(Handler::Engine(rpop))
    },
    CommandSpec {
        name: "lrange",
        arity: 4,
        flags: Flags::READONLY,
        acl: &["@read", "@list", "@slow"],
        key_specs: RO_ACCESS,
        summary: "Returns the elements between two inclusive indexes (negative from the tail).",
        complexity: "O(N) in the number of elements returned.",
        syntax: "key:key start:integer stop:integer",
        ..list_cmd(Handler::Engine(lrange))
    },
    CommandSpec {
        name: "llen",
        arity: 2,
        flags: Flags::READONLY.and(Flags::FAST),
        acl: &["@read", "@list", "@fast"],
        key_specs: &[key_at(1, &["RO"])],
        summary: "Returns the length of a list (0 if missing).",
        syntax: "key:key",
        ..list_cmd(Handler::Engine(llen))
    },
    CommandSpec {
        name: "lindex",
        arity: 3,
        flags: Flags::READONLY,
        acl: &["@read", "@list", "@slow"],
        key_specs: RO_ACCESS,
        summary: "Returns the element at an index (negative from the tail), or nil.",
        syntax: "key:key index:integer",
        ..list_cmd(Handler::Engine(lindex))
    },
    CommandSpec {
        name: "lset",
        arity: 4,
        flags: Flags::WRITE.and(Flags::DENYOOM),
        acl: &["@write", "@list", "@slow"],
        key_specs: &[key_at(1, &["RW", "UPDATE"])],
        summary: "Replaces the element at an index of an existing list.",
        syntax: "key:key index:integer element",
        ..list_cmd(Handler::Engine(lset))
    },
    CommandSpec {
        name: "lrem",
        arity: 4,
        flags: Flags::WRITE,
        acl: &["@write", "@list", "@slow"],
        key_specs: RW_DELETE,
        summary: "Removes occurrences of an element: the first `count` (>0), the last (<0) or all (0).",
        complexity: "O(N) in the length of the list.",
        syntax: "key:key count:integer element",
        ..list_cmd(Handler::Engine(lrem))
    },
    CommandSpec {
        name: "ltrim",
        arity: 4,
        flags: Flags::WRITE,
        acl: &["@write", "@list", "@slow"],
        key_specs: RW_DELETE,
        summary: "Keeps only the elements between two inclusive indexes.",
        complexity: "O(N) in the number of elements removed.",
        syntax: "key:key start:integer stop:integer",
        ..list_cmd(Handler::Engine(ltrim))
    },
    CommandSpec {
        name: "blpop",
        arity: -3,
        flags: Flags::WRITE.and(Flags::BLOCKING),
        last_key: -2,
        acl: &["@write", "@list", "@slow", "@blocking"],
        key_specs: BLOCKING_KEYS,
        summary: "Pops the head of the first non-empty list among the keys, waiting for one if none.",
        since: "2.0.0",
        complexity: "O(N) in the number of keys.",
        syntax: "key:key ... timeout:double",
        ..list_cmd(Handler::Engine(blpop))
    },
    CommandSpec {
        name: "brpop",
        arity: -3,
        flags: Flags::WRITE.and(Flags::BLOCKING),
        last_key: -2,
        acl: &["@write", "@list", "@slow", "@blocking"],
        key_specs: BLOCKING_KEYS,
        summary: "Pops the tail of the first non-empty list among the keys, waiting for one if none.",
        since: "2.0.0",
        complexity: "O(N) in the number of keys.",
        syntax: "key:key ... timeout:double",
        ..list_cmd(Handler::Engine(brpop))
    },
    moves::LMOVE,
    moves::BLMOVE,
    moves::RPOPLPUSH,
    moves::BRPOPLPUSH,
    search::LINSERT,
    search::LPOS,
    mpop::LMPOP,
    mpop::BLMPOP,
];

// ---------------------------------------------------------------------------------------------
// Typed access

/// The list at `key` for reading; `None` when missing, WRONGTYPE for another type.
fn read_list<'e>(engine: &'e mut Engine, ctx: &CallCtx, key: &[u8]) -> Result<Option<&'e List>, CmdError> {
    match engine.lookup_read(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(CmdError::WRONGTYPE),
    }
}

/// The list at `key` for changing in place, with its metadata; `None` when missing,
/// WRONGTYPE for another type.
fn existing_list<'e>(
    engine: &'e mut Engine,
    ctx: &CallCtx,
    key: &[u8],
) -> Result<Option<(&'e mut List, &'e mut ObjectMeta)>, CmdError> {
    match engine.lookup_mut(ctx.db, key, ctx.now_ms) {
        None => Ok(None),
        Some(crate::Entry { value: Value::List(l), meta, .. }) => Ok(Some((l, meta))),
        Some(_) => Err(CmdError::WRONGTYPE),
    }
}

/// The list at `key` for pushing, created empty when missing, with its metadata.
fn list_for_push<'e>(
    engine: &'e mut Engine,
    ctx: &CallCtx,
    key: &Bytes,
) -> Result<(&'e mut List, &'e mut ObjectMeta), CmdError> {
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::List(List::new()));
    match &mut entry.value {
        Value::List(l) => Ok((l, &mut entry.meta)),
        _ => Err(CmdError::WRONGTYPE),
    }
}

/// What Redis counts of an element it is about to add when it decides whether a listpack
/// would grow too big: its length, but nothing for an element it already holds as an integer
/// (LMOVE pushes what it popped, and a popped integer entry is an integer object).
fn counted_len(element: &[u8], popped: bool) -> usize {
    if popped && parse_i64(element).is_some() {
        0
    } else {
        element.len()
    }
}

/// Pop from `end`, telling the layout.
fn pop_tracked(list: &mut List, meta: &mut ObjectMeta, end: End, cfg: &ObjectConfig) -> Option<Bytes> {
    let layout = list_layout(meta, list, cfg);
    let value = pop_end(list, end)?;
    layout.pop(&value, end == End::Head);
    Some(value)
}

/// After elements left a list that is not empty: Redis may turn a quicklist back into a
/// listpack.
fn shrunk(list: &List, meta: &mut ObjectMeta, cfg: &ObjectConfig) {
    if !list.is_empty() {
        list_layout(meta, list, cfg).after_shrink(cfg.list_max_listpack_size);
    }
}

/// After a removal by `event`: delete the key if the list is now empty (the event, then
/// `del`, as Redis fires them), else record the write.
fn after_removal(engine: &mut Engine, ctx: &CallCtx, key: &[u8], now_empty: bool, event: KeyEvent) {
    if now_empty {
        engine.record_event(ctx.db, key, event);
        delete_key(engine, ctx.db, key);
    } else {
        engine.modified(ctx.db, key, event);
    }
}

impl End {
    /// The event of a pop from this end.
    fn pop_event(self) -> KeyEvent {
        match self {
            End::Head => KeyEvent::LPop,
            End::Tail => KeyEvent::RPop,
        }
    }

    /// The event of a push at this end.
    fn push_event(self) -> KeyEvent {
        match self {
            End::Head => KeyEvent::LPush,
            End::Tail => KeyEvent::RPush,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Head,
    Tail,
}

fn pop_end(list: &mut List, end: End) -> Option<Bytes> {
    match end {
        End::Head => list.pop_front(),
        End::Tail => list.pop_back(),
    }
}

// ---------------------------------------------------------------------------------------------
// Pushes

fn push_generic(
    engine: &mut Engine,
    ctx: &CallCtx,
    args: &[Bytes],
    end: End,
    only_existing: bool,
) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let elements = args.get(2..).unwrap_or(&[]);
    let cfg = engine.config.object;
    let fill = cfg.list_max_listpack_size;
    let (list, meta) = if only_existing {
        match existing_list(engine, ctx, key)? {
            Some(l) => l,
            None => return Ok(Reply::Integer(0)),
        }
    } else {
        list_for_push(engine, ctx, key)?
    };
    let layout = list_layout(meta, list, &cfg);
    layout.before_growth(list.len(), elements.iter().map(|e| e.len()), fill);
    for e in elements {
        layout.push(e, end == End::Head, fill);
        match end {
            End::Head => list.push_front(owned(e)),
            End::Tail => list.push_back(owned(e)),
        }
    }
    let len = list.len();
    engine.modified(ctx.db, key, end.push_event());
    engine.signal_ready(ctx.db, key);
    Ok(Reply::Integer(len as i64))
}

fn lpush(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    push_generic(engine, ctx, args, End::Head, false)
}

fn rpush(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    push_generic(engine, ctx, args, End::Tail, false)
}

fn lpushx(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    push_generic(engine, ctx, args, End::Head, true)
}

fn rpushx(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    push_generic(engine, ctx, args, End::Tail, true)
}

// ---------------------------------------------------------------------------------------------
// Pops

fn pop_generic(engine: &mut Engine, ctx: &CallCtx, args: &[Bytes], end: End) -> Result<Reply, CmdError> {
    // Arity -2 in the table, but at most a count after the key.
    if args.len() > 3 {
        return Err(arity_error(args));
    }
    let key = arg(args, 1)?;
    let count = match args.get(2) {
        None => None,
        Some(c) => Some(
            parse_i64(c)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(CmdError::full("ERR value is out of range, must be positive"))?,
        ),
    };
    let cfg = engine.config.object;
    let Some((list, meta)) = existing_list(engine, ctx, key)? else {
        return Ok(if count.is_some() { Reply::NullArray } else { Reply::Null });
    };
    let reply = match count {
        None => pop_tracked(list, meta, end, &cfg).map_or(Reply::Null, Reply::Bulk),
        Some(0) => return Ok(Reply::Array(vec![])),
        Some(n) => {
            let n = n.min(list.len());
            Reply::Array((0..n).filter_map(|_| pop_tracked(list, meta, end, &cfg)).map(Reply::Bulk).collect())
        }
    };
    shrunk(list, meta, &cfg);
    let now_empty = list.is_empty();
    after_removal(engine, ctx, key, now_empty, end.pop_event());
    Ok(reply)
}

fn lpop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    pop_generic(engine, ctx, args, End::Head)
}

fn rpop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    pop_generic(engine, ctx, args, End::Tail)
}

/// A blocking pop's timeout (seconds, read as Redis reads a `long double`) as an absolute
/// deadline in ms; `None` waits forever.
pub(crate) fn parse_timeout(raw: &[u8], now_ms: i64) -> Result<Option<i64>, CmdError> {
    let secs = LongDouble::parse(raw).ok_or(CmdError::TIMEOUT_NOT_FLOAT)?;
    let out_of_range = || CmdError::full("ERR timeout is out of range");
    let ms = secs.seconds_to_ms_ceil().ok_or_else(out_of_range)?;
    if ms < 0 {
        return Err(CmdError::TIMEOUT_NEGATIVE);
    }
    if ms == 0 {
        return Ok(None);
    }
    now_ms.checked_add(ms).map(Some).ok_or_else(out_of_range)
}

fn blocking_pop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], end: End) -> Result<Reply, CmdError> {
    let keys = args.get(1..args.len().saturating_sub(1)).unwrap_or(&[]);
    let timeout = arg(args, args.len().saturating_sub(1).max(2))?;
    let deadline = parse_timeout(timeout, ctx.now_ms)?;
    // A re-run is the whole command again, as in Redis: the server re-runs a parked client
    // only when a key it waits on holds a list, and then a key before it that now holds
    // another type is WRONGTYPE.
    let cfg = engine.config.object;
    for key in keys {
        let Some((list, meta)) = existing_list(engine, ctx, key)? else { continue };
        let Some(value) = pop_tracked(list, meta, end, &cfg) else { continue };
        shrunk(list, meta, &cfg);
        let now_empty = list.is_empty();
        after_removal(engine, ctx, key, now_empty, end.pop_event());
        return Ok(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(value)]));
    }
    if !ctx.no_block {
        ctx.block = Some(BlockRequest {
            keys: keys.to_vec(),
            wakes_on: WakeOn::List,
            deadline_ms: ctx.deadline_override.unwrap_or(deadline),
            timeout_reply: Reply::NullArray,
            rerun_args: None,
            wake_at_ms: None,
        });
    }
    Ok(Reply::NullArray)
}

fn blpop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    blocking_pop(engine, ctx, args, End::Head)
}

fn brpop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    blocking_pop(engine, ctx, args, End::Tail)
}

// ---------------------------------------------------------------------------------------------
// Reads and in-place edits

/// Redis' LRANGE/LTRIM normalisation: the inclusive index range to keep, or `None` if empty.
pub(crate) fn clamp_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    let stop = stop.min(len - 1);
    Some((start as usize, stop as usize))
}

fn lrange(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let start = int_arg(arg(args, 2)?)?;
    let stop = int_arg(arg(args, 3)?)?;
    let Some(list) = read_list(engine, ctx, key)? else { return Ok(Reply::Array(vec![])) };
    let out = match clamp_range(start, stop, list.len()) {
        None => vec![],
        Some((a, b)) => list.range(a..=b).map(|e| Reply::Bulk(e.clone())).collect(),
    };
    Ok(Reply::Array(out))
}

fn llen(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let len = read_list(engine, ctx, arg(args, 1)?)?.map_or(0, List::len);
    Ok(Reply::Integer(len as i64))
}

/// A Redis list index (negative from the tail) as a position, if inside the list.
fn position(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 { (len as i64).checked_add(index)? } else { index };
    usize::try_from(i).ok().filter(|i| *i < len)
}

fn lindex(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    // The key before the index, as Redis: a missing key is nil whatever the index says.
    let Some(list) = read_list(engine, ctx, key)? else { return Ok(Reply::Null) };
    let index = int_arg(arg(args, 2)?)?;
    let value = position(index, list.len()).and_then(|i| list.get(i)).cloned();
    Ok(value.map_or(Reply::Null, Reply::Bulk))
}

fn lset(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, element) = (arg(args, 1)?, arg(args, 3)?);
    let cfg = engine.config.object;
    let fill = cfg.list_max_listpack_size;
    // The key before the index, as Redis.
    let (list, meta) = existing_list(engine, ctx, key)?.ok_or(CmdError::NO_SUCH_KEY)?;
    let index = int_arg(arg(args, 2)?)?;
    // Redis makes room for the new element before it checks the index, so even an LSET out of
    // range can turn a listpack into a quicklist.
    let layout = list_layout(meta, list, &cfg);
    layout.before_growth(list.len(), std::iter::once(element.len()), fill);
    let i = position(index, list.len()).ok_or(CmdError::full("ERR index out of range"))?;
    layout.replace(list, i, element, fill);
    if let Some(slot) = list.get_mut(i) {
        *slot = owned(element);
    }
    shrunk(list, meta, &cfg);
    engine.modified(ctx.db, key, KeyEvent::LSet);
    Ok(Reply::ok())
}

fn lrem(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, element) = (arg(args, 1)?, arg(args, 3)?);
    let count = int_arg(arg(args, 2)?)?;
    let cfg = engine.config.object;
    let Some((list, meta)) = existing_list(engine, ctx, key)? else { return Ok(Reply::Integer(0)) };
    let limit = if count == 0 { usize::MAX } else { usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX) };
    // The positions to remove, ascending (from the tail when the count is negative).
    let matches = list.iter().enumerate().filter(|(_, e)| *e == element).map(|(i, _)| i);
    let positions: Vec<usize> = if count >= 0 {
        matches.take(limit).collect()
    } else {
        let mut from_tail: Vec<usize> = matches.rev().take(limit).collect();
        from_tail.reverse();
        from_tail
    };
    let removed = positions.len();
    if removed > 0 {
        list_layout(meta, list, &cfg).remove_at(&positions, element);
        let mut next = positions.iter().peekable();
        let mut i = 0;
        list.retain(|_| {
            let drop = next.next_if_eq(&&i).is_some();
            i += 1;
            !drop
        });
        shrunk(list, meta, &cfg);
        let now_empty = list.is_empty();
        after_removal(engine, ctx, key, now_empty, KeyEvent::LRem);
    }
    Ok(Reply::Integer(removed as i64))
}

fn ltrim(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let start = int_arg(arg(args, 2)?)?;
    let stop = int_arg(arg(args, 3)?)?;
    let cfg = engine.config.object;
    let Some((list, meta)) = existing_list(engine, ctx, key)? else { return Ok(Reply::ok()) };
    match clamp_range(start, stop, list.len()) {
        None => list.clear(),
        Some((a, b)) => {
            let layout = list_layout(meta, list, &cfg);
            // From the tail inwards, as pops: each element leaves the node it is in.
            for e in list.range(b + 1..).rev() {
                layout.pop(e, false);
            }
            for e in list.range(..a) {
                layout.pop(e, true);
            }
            list.truncate(b + 1);
            list.drain(..a);
        }
    }
    shrunk(list, meta, &cfg);
    let now_empty = list.is_empty();
    after_removal(engine, ctx, key, now_empty, KeyEvent::LTrim);
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use crate::{BlockRequest, WakeOn};
    use bytes::Bytes;
    use rill_resp::Reply;

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

    #[test]
    fn push_pop_and_nil_shapes() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["LPOP", "nope"]), Reply::Null);
        assert_eq!(h.run(&["LPOP", "nope", "2"]), Reply::NullArray);
        assert_eq!(h.run(&["LPOP", "nope", "0"]), Reply::NullArray);
        assert_eq!(h.run(&["RPUSH", "l", "a", "b", "c"]), int(3));
        assert_eq!(h.run(&["LPUSH", "l", "x", "y"]), int(5));
        assert_eq!(h.run(&["LRANGE", "l", "0", "-1"]), bulks(&["y", "x", "a", "b", "c"]));
        assert_eq!(h.run(&["LPOP", "l", "0"]), Reply::Array(vec![]));
        assert_eq!(h.run(&["LPOP", "l", "-1"]), err("ERR value is out of range, must be positive"));
        assert_eq!(h.run(&["LPOP", "l", "abc"]), err("ERR value is out of range, must be positive"));
        assert_eq!(h.run(&["LPOP", "l"]), bulk("y"));
        assert_eq!(h.run(&["RPOP", "l", "2"]), bulks(&["c", "b"]));
        assert_eq!(h.run(&["LPOP", "l", "5"]), bulks(&["x", "a"]));
        assert_eq!(h.run(&["EXISTS", "l"]), int(0));
        assert_eq!(h.run(&["LPUSHX", "l", "a"]), int(0));
        assert_eq!(h.run(&["EXISTS", "l"]), int(0));
        h.run(&["RPUSH", "l", "a"]);
        assert_eq!(h.run(&["RPUSHX", "l", "b", "c"]), int(3));
        assert_eq!(h.run(&["LLEN", "l"]), int(3));
        assert_eq!(h.run(&["LLEN", "nope"]), int(0));
    }

    #[test]
    fn ranges_and_indexes() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "c", "d", "e"]);
        assert_eq!(h.run(&["LRANGE", "l", "-100", "100"]), bulks(&["a", "b", "c", "d", "e"]));
        assert_eq!(h.run(&["LRANGE", "l", "2", "1"]), bulks(&[]));
        assert_eq!(h.run(&["LRANGE", "l", "-2", "-1"]), bulks(&["d", "e"]));
        assert_eq!(h.run(&["LRANGE", "l", "10", "20"]), bulks(&[]));
        assert_eq!(h.run(&["LRANGE", "nope", "0", "-1"]), bulks(&[]));
        assert_eq!(h.run(&["LINDEX", "l", "-1"]), bulk("e"));
        assert_eq!(h.run(&["LINDEX", "l", "10"]), Reply::Null);
        assert_eq!(h.run(&["LINDEX", "l", "-6"]), Reply::Null);
        assert_eq!(h.run(&["LINDEX", "l", "x"]), err("ERR value is not an integer or out of range"));
        assert_eq!(h.run(&["LSET", "l", "10", "x"]), err("ERR index out of range"));
        assert_eq!(h.run(&["LSET", "nope", "0", "x"]), err("ERR no such key"));
        assert_eq!(h.run(&["LSET", "l", "-1", "Z"]), ok());
        assert_eq!(h.run(&["LINDEX", "l", "4"]), bulk("Z"));
    }

    #[test]
    fn lrem_and_ltrim() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "a", "c", "a"]);
        assert_eq!(h.run(&["LREM", "l", "-2", "a"]), int(2));
        assert_eq!(h.run(&["LRANGE", "l", "0", "-1"]), bulks(&["a", "b", "c"]));
        h.run(&["RPUSH", "l", "a", "a"]);
        assert_eq!(h.run(&["LREM", "l", "1", "a"]), int(1));
        assert_eq!(h.run(&["LRANGE", "l", "0", "-1"]), bulks(&["b", "c", "a", "a"]));
        assert_eq!(h.run(&["LREM", "l", "0", "a"]), int(2));
        assert_eq!(h.run(&["LREM", "nope", "0", "a"]), int(0));
        assert_eq!(h.run(&["LREM", "l", "x", "a"]), err("ERR value is not an integer or out of range"));
        h.run(&["RPUSH", "t", "a", "b", "c", "d", "e"]);
        assert_eq!(h.run(&["LTRIM", "t", "1", "-2"]), ok());
        assert_eq!(h.run(&["LRANGE", "t", "0", "-1"]), bulks(&["b", "c", "d"]));
        assert_eq!(h.run(&["LTRIM", "t", "5", "10"]), ok());
        assert_eq!(h.run(&["EXISTS", "t"]), int(0));
        assert_eq!(h.run(&["LTRIM", "nope", "0", "1"]), ok());
        assert_eq!(h.run(&["LREM", "l", "0", "b"]), int(1));
        assert_eq!(h.run(&["LREM", "l", "0", "c"]), int(1));
        assert_eq!(h.run(&["EXISTS", "l"]), int(0));
    }

    #[test]
    fn wrongtype_everywhere() {
        let mut h = Harness::new();
        h.run(&["SET", "s", "v"]);
        for cmd in [
            &["LPUSH", "s", "a"][..],
            &["RPUSHX", "s", "a"],
            &["LPOP", "s"],
            &["LPOP", "s", "0"],
            &["LRANGE", "s", "0", "1"],
            &["LLEN", "s"],
            &["LINDEX", "s", "0"],
            &["LSET", "s", "0", "x"],
            &["LREM", "s", "0", "x"],
            &["LTRIM", "s", "0", "1"],
            &["BLPOP", "nope", "s", "0"],
        ] {
            assert_eq!(h.run(cmd), err(WRONGTYPE), "{cmd:?}");
        }
    }

    #[test]
    fn blocking_pop_serves_or_blocks() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "b", "1", "2"]);
        assert_eq!(h.run(&["BLPOP", "a", "b", "0"]), bulks(&["b", "1"]));
        assert_eq!(h.run(&["BRPOP", "a", "b", "0"]), bulks(&["b", "2"]));
        assert_eq!(h.run(&["EXISTS", "b"]), int(0));

        let mut ctx = h.ctx();
        assert_eq!(h.run_ctx(&mut ctx, &["BLPOP", "a", "b", "1.5"]), Reply::NullArray);
        assert_eq!(
            ctx.block,
            Some(BlockRequest {
                keys: vec![Bytes::from("a"), Bytes::from("b")],
                wakes_on: WakeOn::List,
                deadline_ms: Some(h.now_ms + 1500),
                timeout_reply: Reply::NullArray,
                rerun_args: None,
                wake_at_ms: None,
            })
        );
        // Timeout 0 blocks forever; fractions of a ms round up.
        let mut ctx = h.ctx();
        h.run_ctx(&mut ctx, &["BLPOP", "a", "0"]);
        assert_eq!(ctx.block.as_ref().map(|b| b.deadline_ms), Some(None));
        let mut ctx = h.ctx();
        h.run_ctx(&mut ctx, &["BLPOP", "a", "0.0001"]);
        assert_eq!(ctx.block.as_ref().map(|b| b.deadline_ms), Some(Some(h.now_ms + 1)));

        // A re-run keeps the deadline the server hands back.
        let mut ctx = h.ctx();
        ctx.deadline_override = Some(Some(42));
        h.run_ctx(&mut ctx, &["BRPOP", "a", "10"]);
        assert_eq!(ctx.block.as_ref().map(|b| b.deadline_ms), Some(Some(42)));

        // Inside MULTI: never blocks.
        let mut ctx = h.ctx();
        ctx.no_block = true;
        assert_eq!(h.run_ctx(&mut ctx, &["BLPOP", "a", "0"]), Reply::NullArray);
        assert!(ctx.block.is_none());
    }

    #[test]
    fn blocking_timeout_errors() {
        let mut h = Harness::new();
        h.run(&["SET", "s", "v"]);
        assert_eq!(h.run(&["BLPOP", "a", "abc"]), err("ERR timeout is not a float or out of range"));
        assert_eq!(h.run(&["BLPOP", "a", "nan"]), err("ERR timeout is not a float or out of range"));
        assert_eq!(h.run(&["BLPOP", "a", "1 "]), err("ERR timeout is not a float or out of range"));
        assert_eq!(h.run(&["BLPOP", "a", "-1"]), err("ERR timeout is negative"));
        assert_eq!(h.run(&["BLPOP", "a", "-inf"]), err("ERR timeout is negative"));
        assert_eq!(h.run(&["BLPOP", "a", "1e300"]), err("ERR timeout is out of range"));
        // The timeout is checked before the keys.
        assert_eq!(h.run(&["BLPOP", "s", "-1"]), err("ERR timeout is negative"));
    }

    #[test]
    fn pushes_signal_ready_keys() {
        let mut h = Harness::new();
        h.engine.blocking_keys.insert((0, Bytes::from("q")), 1);
        h.run(&["RPUSH", "other", "x"]);
        assert!(h.engine.take_ready_keys().is_empty());
        h.run(&["LPUSH", "q", "x"]);
        h.run(&["RPUSH", "q", "y"]);
        assert_eq!(h.engine.take_ready_keys(), vec![(0, Bytes::from("q"))]);
    }
}
