//! Commands on whole databases: DBSIZE, FLUSHDB, FLUSHALL, SWAPDB. They only read or change
//! the keyspace, so they are engine commands like any other: logged as themselves and
//! replayed through the same table as every data command.
//!
//! Costs: DBSIZE O(1); FLUSHDB and FLUSHALL O(N) in the keys removed, or, ASYNC (or without a
//! mode under `lazyfree-lazy-user-flush`), O(1) besides the keys watched or blocked on: the
//! database is freed on the server's background thread (`keyspace/lazyfree.rs`); SWAPDB O(N)
//! in the keys watched or blocked on in the two databases.

use crate::command::{CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

const FLUSH_ACL: &[&str] = &["@keyspace", "@write", "@slow", "@dangerous"];

/// The database commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "dbsize",
        arity: 1,
        flags: Flags::READONLY.and(Flags::FAST),
        acl: &["@keyspace", "@read", "@fast"],
        group: "server",
        summary: "Returns the number of keys in the selected database.",
        since: "1.0.0",
        ..CommandSpec::of(Handler::Engine(dbsize))
    },
    CommandSpec {
        name: "flushdb",
        arity: -1,
        flags: Flags::WRITE,
        acl: FLUSH_ACL,
        group: "server",
        summary: "Removes every key of the selected database.",
        since: "1.0.0",
        complexity: "O(N) where N is the number of keys",
        syntax: "[flush-type@(ASYNC | SYNC)]",
        ..CommandSpec::of(Handler::Engine(flushdb))
    },
    CommandSpec {
        name: "flushall",
        arity: -1,
        flags: Flags::WRITE,
        acl: FLUSH_ACL,
        group: "server",
        summary: "Removes every key of every database.",
        since: "1.0.0",
        complexity: "O(N) where N is the number of keys",
        syntax: "[flush-type@(ASYNC | SYNC)]",
        ..CommandSpec::of(Handler::Engine(flushall))
    },
    CommandSpec {
        name: "swapdb",
        arity: 3,
        flags: Flags::WRITE.and(Flags::FAST),
        acl: &["@keyspace", "@write", "@fast", "@dangerous"],
        group: "server",
        summary: "Swaps the contents of two databases.",
        since: "4.0.0",
        complexity: "O(N) where N is the number of watched or blocked keys",
        syntax: "index1:integer index2:integer",
        ..CommandSpec::of(Handler::Engine(swapdb))
    },
];

/// DBSIZE
pub fn dbsize(engine: &mut Engine, ctx: &mut CallCtx, _args: &[Bytes]) -> Result<Reply, CmdError> {
    Ok(Reply::Integer(engine.db(ctx.db).len() as i64))
}

/// `[ASYNC|SYNC]`: one optional flag, nothing else. How the keys are freed:
/// `(in the background, the caller waiting for it)` (`Engine::flush_waits`).
fn flush_mode(engine: &Engine, ctx: &CallCtx, args: &[Bytes]) -> Result<(bool, bool), CmdError> {
    let mode = match args {
        [_] => None,
        [_, a] if a.eq_ignore_ascii_case(b"async") => Some(true),
        [_, a] if a.eq_ignore_ascii_case(b"sync") => Some(false),
        _ => return Err(CmdError::SYNTAX),
    };
    Ok(engine.flush_waits(ctx, mode))
}

/// FLUSHDB [ASYNC|SYNC]
pub fn flushdb(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (lazy, waited) = flush_mode(engine, ctx, args)?;
    engine.flush_db(ctx.db, lazy, waited);
    ctx.propagate = true;
    Ok(Reply::ok())
}

/// FLUSHALL [ASYNC|SYNC]
pub fn flushall(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (lazy, waited) = flush_mode(engine, ctx, args)?;
    engine.flush_all(lazy, waited);
    ctx.propagate = true;
    Ok(Reply::ok())
}

/// SWAPDB index1 index2
pub fn swapdb(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let index = |i: usize| args.get(i).and_then(|a| parse_i64(a));
    let a = index(1).ok_or(CmdError::full("ERR invalid first DB index"))?;
    let b = index(2).ok_or(CmdError::full("ERR invalid second DB index"))?;
    let n = engine.db_count() as i64;
    if !(0..n).contains(&a) || !(0..n).contains(&b) {
        return Err(CmdError::full("ERR DB index is out of range"));
    }
    engine.swap_db(a as usize, b as usize, ctx.now_ms);
    Ok(Reply::ok())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(engine: &mut Engine, db: usize, f: crate::command::EngineHandler, args: &[&str]) -> Reply {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let mut ctx = CallCtx::new(db, 0, 1);
        f(engine, &mut ctx, &args).unwrap_or_else(|e| e.to_reply())
    }

    #[test]
    fn flush_and_swap_change_only_what_they_name() {
        let mut e = Engine::new(Default::default());
        e.insert(0, Bytes::from_static(b"a"), crate::Value::Str(Bytes::from_static(b"1")));
        e.insert(1, Bytes::from_static(b"b"), crate::Value::Str(Bytes::from_static(b"2")));
        assert_eq!(run(&mut e, 0, swapdb, &["swapdb", "0", "1"]), Reply::ok());
        assert_eq!(run(&mut e, 0, dbsize, &["dbsize"]), Reply::Integer(1));
        assert!(e.db(0).get_raw(b"b").is_some());
        assert_eq!(run(&mut e, 1, flushdb, &["flushdb", "async"]), Reply::ok());
        assert_eq!(e.total_keys(), 1);
        assert_eq!(run(&mut e, 0, flushall, &["flushall", "now"]), CmdError::SYNTAX.to_reply());
        assert_eq!(run(&mut e, 0, flushall, &["flushall"]), Reply::ok());
        assert_eq!(e.total_keys(), 0);
        let out_of_range = CmdError::full("ERR DB index is out of range").to_reply();
        assert_eq!(run(&mut e, 0, swapdb, &["swapdb", "0", "16"]), out_of_range);
        assert_eq!(
            run(&mut e, 0, swapdb, &["swapdb", "x", "1"]),
            CmdError::full("ERR invalid first DB index").to_reply()
        );
    }
}
