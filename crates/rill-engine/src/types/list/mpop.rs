//! Popping from the first non-empty of several lists: LMPOP and its blocking form BLMPOP.
//!
//! `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]` looks at the keys in order, skips the
//! missing ones, and pops up to `count` elements (default 1) from the first list it finds. The
//! reply is `[key, [element, ...]]`, or a nil array when every key is missing. Cost: O(K) to
//! look at the keys plus O(M) for the M elements popped.
//!
//! `BLMPOP timeout numkeys ...` is the same, but parks the client on all the keys when every
//! one is missing (as BLPOP, see the module doc of [`super`]); it times out with a nil array,
//! and inside MULTI it replies a nil array at once.
//!
//! Redis behaviours we match on purpose:
//! - The arguments are checked in Redis' order: `numkeys` (a non-integer, zero or negative
//!   value is `ERR numkeys should be greater than 0`), then that the direction is where
//!   `numkeys` says it is (`ERR syntax error` if the arguments end first), the direction, the
//!   options (`COUNT` once; a second one, or anything else, is a syntax error; a count that is
//!   not an integer, or below 1, is `ERR count should be greater than 0`), and last BLMPOP's
//!   timeout. Only then are the keys looked at.
//! - A key of another type is WRONGTYPE when it is reached before any list with elements; a
//!   non-list after the list served is never looked at.
//! - Redis replicates a served (B)LMPOP as `LPOP key n` / `RPOP key n`, where `n` is the number
//!   of elements actually popped; rill records exactly that effect, so the log and a Redis
//!   replica both see the pop that happened rather than a request that chose among keys.

use super::{after_removal, existing_list, parse_timeout, pop_tracked, shrunk, End};
use crate::command::{BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::effect::Effect;
use crate::types::{arg, is_token};
use crate::util::parse_i64;
use crate::{BlockRequest, CallCtx, CmdError, Engine, WakeOn};
use bytes::Bytes;
use rill_resp::Reply;

/// The keys of LMPOP (counted by the argument at 1) and BLMPOP (at 2).
const fn mpop_keys(numkeys_at: i32) -> [KeySpec; 1] {
    [KeySpec {
        flags: &["RW", "ACCESS", "DELETE"],
        begin: BeginSearch::Index(numkeys_at),
        find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 },
        notes: "",
    }]
}

const LMPOP_KEYS: &[KeySpec] = &mpop_keys(1);
const BLMPOP_KEYS: &[KeySpec] = &mpop_keys(2);

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`
pub const LMPOP: CommandSpec = CommandSpec {
    name: "lmpop",
    arity: -4,
    flags: Flags::WRITE.and(Flags::MOVABLEKEYS),
    first_key: 0,
    last_key: 0,
    step: 0,
    acl: &["@write", "@list", "@slow"],
    key_specs: LMPOP_KEYS,
    group: "list",
    summary: "Pops one or more elements from one end of the first non-empty list among the keys.",
    since: "7.0.0",
    complexity: "O(N+M): N the number of keys, M the number of elements popped.",
    syntax: "numkeys:integer key:key ... where@(LEFT | RIGHT) [COUNT count:integer]",
    ..CommandSpec::of(Handler::Engine(lmpop))
};

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`
pub const BLMPOP: CommandSpec = CommandSpec {
    name: "blmpop",
    arity: -5,
    flags: Flags::WRITE.and(Flags::BLOCKING).and(Flags::MOVABLEKEYS),
    acl: &["@write", "@list", "@slow", "@blocking"],
    key_specs: BLMPOP_KEYS,
    summary: "Like LMPOP, but waits for one of the lists to have an element.",
    complexity: "O(N+M): N the number of keys, M the number of elements popped.",
    syntax: "timeout:double numkeys:integer key:key ... where@(LEFT | RIGHT) [COUNT count:integer]",
    ..CommandSpec { handler: Handler::Engine(blmpop), ..LMPOP }
};

/// A parsed LMPOP / BLMPOP request.
#[derive(Debug)]
struct MpopRequest<'a> {
    keys: &'a [Bytes],
    end: End,
    /// At least 1.
    count: usize,
}

/// Parse `numkeys key ... LEFT|RIGHT [COUNT n]`, with `numkeys` at `numkeys_at`.
fn parse_mpop(args: &[Bytes], numkeys_at: usize) -> Result<MpopRequest<'_>, CmdError> {
    let numkeys_error = CmdError::full("ERR numkeys should be greater than 0");
    let numkeys = parse_i64(arg(args, numkeys_at)?)
        .filter(|n| *n >= 1)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(numkeys_error)?;
    let first_key = numkeys_at + 1;
    let where_at = first_key.checked_add(numkeys).filter(|i| *i < args.len()).ok_or(CmdError::SYNTAX)?;
    let keys = args.get(first_key..where_at).ok_or(CmdError::SYNTAX)?;
    let direction = arg(args, where_at)?;
    let end = if is_token(direction, "LEFT") {
        End::Head
    } else if is_token(direction, "RIGHT") {
        End::Tail
    } else {
        return Err(CmdError::SYNTAX);
    };
    let mut count = None;
    let mut i = where_at + 1;
    while let Some(option) = args.get(i) {
        match args.get(i + 1) {
            Some(value) if count.is_none() && is_token(option, "COUNT") => {
                let n = parse_i64(value)
                    .filter(|n| *n >= 1)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or(CmdError::full("ERR count should be greater than 0"))?;
                count = Some(n);
                i += 2;
            }
            _ => return Err(CmdError::SYNTAX),
        }
    }
    Ok(MpopRequest { keys, end, count: count.unwrap_or(1) })
}

/// Pop from the first non-empty list of the request: `Ok(None)` when every key is missing.
fn serve(engine: &mut Engine, ctx: &mut CallCtx, req: &MpopRequest<'_>) -> Result<Option<Reply>, CmdError> {
    let cfg = engine.config.object;
    for key in req.keys {
        let Some((list, meta)) = existing_list(engine, ctx, key)? else { continue };
        let n = req.count.min(list.len());
        if n == 0 {
            continue;
        }
        let popped: Vec<Reply> =
            (0..n).filter_map(|_| pop_tracked(list, meta, req.end, &cfg)).map(Reply::Bulk).collect();
        shrunk(list, meta, &cfg);
        let now_empty = list.is_empty();
        after_removal(engine, ctx, key, now_empty, req.end.pop_event());
        let pop = match req.end {
            End::Head => "LPOP",
            End::Tail => "RPOP",
        };
        ctx.emit(Effect::Command {
            db: ctx.db,
            args: vec![Bytes::from_static(pop.as_bytes()), key.clone(), Bytes::from(popped.len().to_string())],
        });
        return Ok(Some(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Array(popped)])));
    }
    Ok(None)
}

fn lmpop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let req = parse_mpop(args, 1)?;
    Ok(serve(engine, ctx, &req)?.unwrap_or(Reply::NullArray))
}

fn blmpop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let req = parse_mpop(args, 2)?;
    let deadline = parse_timeout(arg(args, 1)?, ctx.now_ms)?;
    if let Some(reply) = serve(engine, ctx, &req)? {
        return Ok(reply);
    }
    if !ctx.no_block {
        ctx.block = Some(BlockRequest {
            keys: req.keys.to_vec(),
            wakes_on: WakeOn::List,
            deadline_ms: ctx.deadline_override.unwrap_or(deadline),
            timeout_reply: Reply::NullArray,
            rerun_args: None,
            wake_at_ms: None,
        });
    }
    Ok(Reply::NullArray)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::*;
    use crate::{BlockRequest, WakeOn};
    use bytes::Bytes;
    use rill_resp::Reply;

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const NUMKEYS: &str = "ERR numkeys should be greater than 0";
    const COUNT: &str = "ERR count should be greater than 0";
    const SYNTAX: &str = "ERR syntax error";

    fn served(key: &str, elements: &[&str]) -> Reply {
        Reply::Array(vec![bulk(key), bulks(elements)])
    }

    #[test]
    fn pops_from_the_first_non_empty_list() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "b", "1", "2", "3", "4"]);
        h.run(&["RPUSH", "c", "x"]);
        assert_eq!(h.run(&["LMPOP", "3", "a", "b", "c", "LEFT"]), served("b", &["1"]));
        assert_eq!(h.run(&["LMPOP", "3", "a", "b", "c", "right", "COUNT", "2"]), served("b", &["4", "3"]));
        // More than the list holds: what there is, and the emptied key is deleted.
        assert_eq!(h.run(&["LMPOP", "2", "b", "c", "LEFT", "count", "10"]), served("b", &["2"]));
        assert_eq!(h.run(&["EXISTS", "b"]), int(0));
        assert_eq!(h.run(&["LMPOP", "2", "b", "c", "LEFT"]), served("c", &["x"]));
        assert_eq!(h.run(&["LMPOP", "2", "b", "c", "LEFT"]), Reply::NullArray);
        // The same key twice is fine.
        h.run(&["RPUSH", "d", "1"]);
        assert_eq!(h.run(&["LMPOP", "2", "d", "d", "RIGHT"]), served("d", &["1"]));
    }

    #[test]
    fn argument_errors_in_redis_order() {
        let mut h = Harness::new();
        h.run(&["SET", "s", "v"]);
        for (cmd, want) in [
            (&["LMPOP", "0", "a", "LEFT"][..], NUMKEYS),
            (&["LMPOP", "-1", "a", "LEFT"], NUMKEYS),
            (&["LMPOP", "x", "a", "LEFT"], NUMKEYS),
            (&["LMPOP", "9223372036854775807", "a", "LEFT"], SYNTAX),
            (&["LMPOP", "2", "a", "LEFT"], SYNTAX),
            (&["LMPOP", "1", "a", "MIDDLE"], SYNTAX),
            (&["LMPOP", "1", "a", "LEFT", "COUNT"], SYNTAX),
            (&["LMPOP", "1", "a", "LEFT", "COUNT", "0"], COUNT),
            (&["LMPOP", "1", "a", "LEFT", "COUNT", "-3"], COUNT),
            (&["LMPOP", "1", "a", "LEFT", "COUNT", "x"], COUNT),
            (&["LMPOP", "1", "a", "LEFT", "COUNT", "1", "COUNT", "2"], SYNTAX),
            (&["LMPOP", "1", "a", "LEFT", "LIMIT", "2"], SYNTAX),
            // Arguments first, then the keys.
            (&["LMPOP", "1", "s", "LEFT", "COUNT", "0"], COUNT),
            (&["LMPOP", "1", "s", "LEFT"], WRONGTYPE),
            (&["LMPOP", "2", "a", "s", "LEFT"], WRONGTYPE),
            // BLMPOP: the timeout is checked last.
            (&["BLMPOP", "-1", "0", "a", "LEFT"], NUMKEYS),
            (&["BLMPOP", "x", "1", "a", "LEFT", "COUNT", "0"], COUNT),
            (&["BLMPOP", "x", "1", "a", "LEFT"], "ERR timeout is not a float or out of range"),
            (&["BLMPOP", "-1", "1", "s", "LEFT"], "ERR timeout is negative"),
            (&["BLMPOP", "0", "1", "s", "LEFT"], WRONGTYPE),
        ] {
            assert_eq!(h.run(cmd), err(want), "{cmd:?}");
        }
        // A non-list after the list served is never looked at.
        h.run(&["RPUSH", "l", "1"]);
        assert_eq!(h.run(&["LMPOP", "2", "l", "s", "LEFT"]), served("l", &["1"]));
    }

    #[test]
    fn blocks_on_every_key_or_serves_at_once() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "b", "1", "2", "3"]);
        assert_eq!(h.run(&["BLMPOP", "0", "2", "a", "b", "RIGHT", "COUNT", "2"]), served("b", &["3", "2"]));

        let mut ctx = h.ctx();
        assert_eq!(h.run_ctx(&mut ctx, &["BLMPOP", "1.5", "2", "x", "y", "LEFT"]), Reply::NullArray);
        assert_eq!(
            ctx.block,
            Some(BlockRequest {
                keys: vec![Bytes::from("x"), Bytes::from("y")],
                wakes_on: WakeOn::List,
                deadline_ms: Some(h.now_ms + 1500),
                timeout_reply: Reply::NullArray,
                rerun_args: None,
                wake_at_ms: None,
            })
        );
        // A re-run keeps the deadline it is given.
        let mut ctx = h.ctx();
        ctx.deadline_override = Some(Some(42));
        h.run_ctx(&mut ctx, &["BLMPOP", "10", "1", "x", "LEFT"]);
        assert_eq!(ctx.block.as_ref().map(|b| b.deadline_ms), Some(Some(42)));
        // Inside MULTI: a nil array at once.
        let mut ctx = h.ctx();
        ctx.no_block = true;
        assert_eq!(h.run_ctx(&mut ctx, &["BLMPOP", "0", "1", "x", "LEFT"]), Reply::NullArray);
        assert!(ctx.block.is_none());
    }

    #[test]
    fn recorded_as_the_pop_that_happened() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "b", "1", "2", "3"]);
        let mut ctx = h.ctx();
        ctx.recording = true;
        h.run_ctx(&mut ctx, &["LMPOP", "2", "a", "b", "RIGHT", "COUNT", "10"]);
        assert!(ctx.explicit);
        let effects = ctx.effects.decode().unwrap();
        assert_eq!(effects, vec![crate::effect::Effect::command(0, ["RPOP", "b", "3"].map(Bytes::from).to_vec())]);
        // Nothing popped, nothing recorded.
        let mut ctx = h.ctx();
        ctx.recording = true;
        h.run_ctx(&mut ctx, &["LMPOP", "1", "b", "LEFT"]);
        assert!(!ctx.explicit);
    }
}
