//! Moving an element between lists: LMOVE, RPOPLPUSH and their blocking forms BLMOVE,
//! BRPOPLPUSH. Each is O(1): a pop at one end of the source, a push at one end of the
//! destination.
//!
//! Redis behaviours we match on purpose:
//! - LEFT/RIGHT are checked before anything else (so a bad direction beats a bad timeout), then
//!   the timeout, then the keys.
//! - A missing source replies nil whatever the destination holds; an existing source with a
//!   destination of another type is WRONGTYPE and moves nothing.
//! - Source and destination may be the same list: the element rotates from one end to the other.
//! - A source emptied by the move is deleted; a missing destination is created.
//! - Blocking forms park on the source only. They time out with a nil *array* (`*-1`), but
//!   inside MULTI reply a nil *bulk* (`$-1`) at once, as Redis does.

use super::{counted_len, existing_list, list_cmd, list_for_push, parse_timeout, pop_tracked, shrunk, End};
use crate::command::{key_at, CommandSpec, Flags, Handler, KeySpec};
use crate::types::object::encoding::list_layout;
use crate::types::{arg, is_token, owned};
use crate::{BlockRequest, CallCtx, CmdError, Engine, KeyEvent, WakeOn};
use bytes::Bytes;
use rill_resp::Reply;

/// Source (popped from) then destination (pushed to).
const MOVE_KEYS: &[KeySpec] = &[key_at(1, &["RW", "ACCESS", "DELETE"]), key_at(2, &["RW", "INSERT"])];

/// A command moving from the key at 1 to the key at 2.
const fn move_cmd(handler: Handler) -> CommandSpec {
    CommandSpec {
        last_key: 2,
        flags: Flags::WRITE.and(Flags::DENYOOM),
        acl: &["@write", "@list", "@slow"],
        key_specs: MOVE_KEYS,
        ..list_cmd(handler)
    }
}

const fn blocking_move_cmd(handler: Handler) -> CommandSpec {
    CommandSpec {
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::BLOCKING),
        acl: &["@write", "@list", "@slow", "@blocking"],
        ..move_cmd(handler)
    }
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`
pub const LMOVE: CommandSpec = CommandSpec {
    name: "lmove",
    arity: 5,
    summary: "Pops an element from one end of a list and pushes it at an end of another.",
    since: "6.2.0",
    syntax: "source:key destination:key wherefrom@(LEFT | RIGHT) whereto@(LEFT | RIGHT)",
    ..move_cmd(Handler::Engine(lmove))
};

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`
pub const BLMOVE: CommandSpec = CommandSpec {
    name: "blmove",
    arity: 6,
    summary: "Like LMOVE, but waits for the source list to have an element.",
    since: "6.2.0",
    syntax: "source:key destination:key wherefrom@(LEFT | RIGHT) whereto@(LEFT | RIGHT) \
             timeout:double",
    ..blocking_move_cmd(Handler::Engine(blmove))
};

/// `RPOPLPUSH source destination` (LMOVE … RIGHT LEFT).
pub const RPOPLPUSH: CommandSpec = CommandSpec {
    name: "rpoplpush",
    arity: 3,
    summary: "Pops the tail of a list and pushes it at the head of another (older LMOVE form).",
    since: "1.2.0",
    syntax: "source:key destination:key",
    ..move_cmd(Handler::Engine(rpoplpush))
};

/// `BRPOPLPUSH source destination timeout` (BLMOVE … RIGHT LEFT).
pub const BRPOPLPUSH: CommandSpec = CommandSpec {
    name: "brpoplpush",
    arity: 4,
    summary: "Like RPOPLPUSH, but waits for the source list to have an element.",
    since: "2.2.0",
    syntax: "source:key destination:key timeout:double",
    ..blocking_move_cmd(Handler::Engine(brpoplpush))
};

/// `LEFT` or `RIGHT`.
fn parse_end(raw: &[u8]) -> Result<End, CmdError> {
    if is_token(raw, "LEFT") {
        Ok(End::Head)
    } else if is_token(raw, "RIGHT") {
        Ok(End::Tail)
    } else {
        Err(CmdError::SYNTAX)
    }
}

/// Move one element; `None` when the source is missing (an empty list is never stored).
fn move_element(
    engine: &mut Engine,
    ctx: &CallCtx,
    source: &[u8],
    destination: &Bytes,
    from: End,
    to: End,
) -> Result<Option<Bytes>, CmdError> {
    let Some((list, _)) = existing_list(engine, ctx, source)? else {
        return Ok(None);
    };
    if list.is_empty() {
        return Ok(None);
    }
    // Check the destination's type before changing anything.
    existing_list(engine, ctx, destination)?;
    let cfg = engine.config.object;
    let fill = cfg.list_max_listpack_size;
    let Some(value) = existing_list(engine, ctx, source)?.and_then(|(l, m)| pop_tracked(l, m, from, &cfg)) else {
        return Ok(None);
    };
    // When source == destination the list is pushed back into before its emptiness is judged.
    let (target, meta) = list_for_push(engine, ctx, destination)?;
    let layout = list_layout(meta, target, &cfg);
    layout.before_growth(target.len(), std::iter::once(counted_len(&value, true)), fill);
    layout.push(&value, to == End::Head, fill);
    match to {
        End::Head => target.push_front(value.clone()),
        End::Tail => target.push_back(value.clone()),
    }
    // The source is checked for shrinking after the push, as Redis does (it may be the same
    // list).
    if let Some((l, m)) = existing_list(engine, ctx, source)? {
        shrunk(l, m, &cfg);
    }
    // Redis fires the push on the destination, then the pop (and `del`) on the source, and
    // counts one change for the move (INFO `rdb_changes_since_last_save`).
    engine.modified(ctx.db, destination, to.push_event());
    engine.signal_ready(ctx.db, destination);
    if source != &destination[..] {
        let now_empty = existing_list(engine, ctx, source)?.is_none_or(|(l, _)| l.is_empty());
        engine.modified_uncounted(ctx.db, source, from.pop_event());
        if now_empty && engine.remove(ctx.db, source).is_some() {
            engine.modified_uncounted(ctx.db, source, KeyEvent::Del);
            engine.signal_ready(ctx.db, source);
        }
    } else {
        engine.record_event(ctx.db, source, from.pop_event());
    }
    Ok(Some(value))
}

fn lmove(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (source, destination) = (arg(args, 1)?, arg(args, 2)?);
    let from = parse_end(arg(args, 3)?)?;
    let to = parse_end(arg(args, 4)?)?;
    let moved = move_element(engine, ctx, source, destination, from, to)?;
    Ok(moved.map_or(Reply::Null, Reply::Bulk))
}

fn rpoplpush(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (source, destination) = (arg(args, 1)?, arg(args, 2)?);
    let moved = move_element(engine, ctx, source, destination, End::Tail, End::Head)?;
    Ok(moved.map_or(Reply::Null, Reply::Bulk))
}

/// Serve a blocking move now, or ask the server to park the client on the source.
fn blocking_move(
    engine: &mut Engine,
    ctx: &mut CallCtx,
    args: &[Bytes],
    (from, to): (End, End),
    timeout: &[u8],
) -> Result<Reply, CmdError> {
    let (source, destination) = (arg(args, 1)?, arg(args, 2)?);
    let deadline = parse_timeout(timeout, ctx.now_ms)?;
    if let Some(value) = move_element(engine, ctx, source, destination, from, to)? {
        return Ok(Reply::Bulk(value));
    }
    if !ctx.no_block {
        ctx.block = Some(BlockRequest {
            keys: vec![owned(source)],
            wakes_on: WakeOn::List,
            deadline_ms: ctx.deadline_override.unwrap_or(deadline),
            timeout_reply: Reply::NullArray,
            rerun_args: None,
            wake_at_ms: None,
        });
    }
    Ok(Reply::Null)
}

fn blmove(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let from = parse_end(arg(args, 3)?)?;
    let to = parse_end(arg(args, 4)?)?;
    let timeout = arg(args, 5)?.clone();
    blocking_move(engine, ctx, args, (from, to), &timeout)
}

fn brpoplpush(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let timeout = arg(args, 3)?.clone();
    blocking_move(engine, ctx, args, (End::Tail, End::Head), &timeout)
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use crate::{BlockRequest, WakeOn};
    use bytes::Bytes;
    use rill_resp::Reply;

    /// A move counts one change, as Redis' `dirty`, even when it empties (deletes) the source;
    /// a pop that empties its list counts one too.
    #[test]
    fn a_move_is_one_change() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "src", "a"]);
        let before = h.engine.dirty();
        assert_eq!(h.run(&["LMOVE", "src", "dst", "LEFT", "LEFT"]), bulk("a"));
        assert_eq!(h.engine.dirty(), before + 1);
        assert_eq!(h.run(&["EXISTS", "src"]), int(0));
        assert_eq!(h.run(&["RPOPLPUSH", "dst", "dst"]), bulk("a"));
        assert_eq!(h.engine.dirty(), before + 2);
        assert_eq!(h.run(&["LPOP", "dst"]), bulk("a"));
        assert_eq!(h.engine.dirty(), before + 3);
        assert_eq!(h.run(&["LPOP", "dst", "1", "1"]), err("ERR wrong number of arguments for 'lpop' command"));
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

    #[test]
    fn lmove_directions_and_rotation() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "c"]);
        assert_eq!(h.run(&["LMOVE", "l", "d", "LEFT", "RIGHT"]), bulk("a"));
        assert_eq!(h.run(&["LMOVE", "l", "d", "right", "left"]), bulk("c"));
        assert_eq!(h.run(&["LRANGE", "d", "0", "-1"]), bulks(&["c", "a"]));
        assert_eq!(h.run(&["RPOPLPUSH", "d", "d"]), bulk("a"));
        assert_eq!(h.run(&["LRANGE", "d", "0", "-1"]), bulks(&["a", "c"]));
        // The last element: the source is deleted, unless it is also the destination.
        assert_eq!(h.run(&["LMOVE", "l", "l", "LEFT", "RIGHT"]), bulk("b"));
        assert_eq!(h.run(&["LRANGE", "l", "0", "-1"]), bulks(&["b"]));
        assert_eq!(h.run(&["RPOPLPUSH", "l", "d"]), bulk("b"));
        assert_eq!(h.run(&["EXISTS", "l"]), int(0));
        assert_eq!(h.run(&["LRANGE", "d", "0", "-1"]), bulks(&["b", "a", "c"]));
        assert_eq!(h.run(&["LMOVE", "missing", "d", "LEFT", "LEFT"]), Reply::Null);
        assert_eq!(h.run(&["RPOPLPUSH", "missing", "d"]), Reply::Null);
    }

    #[test]
    fn lmove_errors_change_nothing() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a"]);
        h.run(&["SET", "s", "v"]);
        assert_eq!(h.run(&["LMOVE", "l", "d", "LEFT", "UP"]), err("ERR syntax error"));
        assert_eq!(h.run(&["LMOVE", "s", "d", "UP", "LEFT"]), err("ERR syntax error"));
        assert_eq!(h.run(&["LMOVE", "l", "s", "LEFT", "RIGHT"]), err(WRONGTYPE));
        assert_eq!(h.run(&["LMOVE", "s", "l", "LEFT", "RIGHT"]), err(WRONGTYPE));
        // A missing source wins over a destination of another type.
        assert_eq!(h.run(&["LMOVE", "missing", "s", "LEFT", "RIGHT"]), Reply::Null);
        assert_eq!(h.run(&["LRANGE", "l", "0", "-1"]), bulks(&["a"]));
        assert_eq!(h.run(&["BLMOVE", "l", "d", "UP", "LEFT", "abc"]), err("ERR syntax error"));
        assert_eq!(h.run(&["BLMOVE", "l", "d", "LEFT", "LEFT", "-1"]), err("ERR timeout is negative"));
        assert_eq!(h.run(&["BRPOPLPUSH", "l", "d", "abc"]), err("ERR timeout is not a float or out of range"));
        assert_eq!(h.run(&["BLMOVE", "s", "d", "LEFT", "LEFT", "0"]), err(WRONGTYPE));
        assert_eq!(h.run(&["LLEN", "l"]), int(1));
    }

    #[test]
    fn blocking_move_serves_or_blocks() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "src", "x"]);
        h.engine.blocking_keys.insert((0, Bytes::from("dst")), 1);
        assert_eq!(h.run(&["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]), bulk("x"));
        assert_eq!(h.engine.take_ready_keys(), vec![(0, Bytes::from("dst"))]);

        let mut ctx = h.ctx();
        assert_eq!(h.run_ctx(&mut ctx, &["BRPOPLPUSH", "src", "dst", "2"]), Reply::Null);
        assert_eq!(
            ctx.block,
            Some(BlockRequest {
                keys: vec![Bytes::from("src")],
                wakes_on: WakeOn::List,
                deadline_ms: Some(h.now_ms + 2000),
                timeout_reply: Reply::NullArray,
                rerun_args: None,
                wake_at_ms: None,
            })
        );
        // Inside MULTI: a nil bulk at once.
        let mut ctx = h.ctx();
        ctx.no_block = true;
        assert_eq!(h.run_ctx(&mut ctx, &["BLMOVE", "src", "dst", "LEFT", "LEFT", "0"]), Reply::Null);
        assert!(ctx.block.is_none());
    }
}
