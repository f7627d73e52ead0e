//! Finding elements by value: LINSERT (insert next to a pivot) and LPOS (positions of matches).
//! Both walk the list: O(N) in the elements compared.
//!
//! Redis behaviours we match on purpose:
//! - LINSERT: BEFORE/AFTER is checked before the key; a missing key replies 0, a missing pivot
//!   -1, else the new length. Only the first occurrence of the pivot counts.
//! - LPOS: every option is validated before the key is read. RANK 0 is an error with Redis'
//!   long explanation; RANK counts matches from the head (positive) or the tail (negative);
//!   COUNT 0 means "all matches"; MAXLEN 0 means "compare every element"; COUNT and MAXLEN
//!   must not be negative. With COUNT the reply is an array (empty for a missing key),
//!   without it the first position or nil. Positions always count from the head.

use super::{existing_list, list_cmd, read_list};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::object::encoding::list_layout;
use crate::types::{arg, is_token, negatable_int_arg, owned};
use crate::util::parse_i64;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `LINSERT key BEFORE|AFTER pivot element`
pub const LINSERT: CommandSpec = CommandSpec {
    name: "linsert",
    arity: 5,
    flags: Flags::WRITE.and(Flags::DENYOOM),
    acl: &["@write", "@list", "@slow"],
    key_specs: &[key_at(1, &["RW", "INSERT"])],
    summary: "Inserts an element just before or after the first occurrence of a pivot value.",
    since: "2.2.0",
    complexity: "O(N) in the elements before the pivot.",
    syntax: "key:key where@(BEFORE | AFTER) pivot element",
    ..list_cmd(Handler::Engine(linsert))
};

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`
pub const LPOS: CommandSpec = CommandSpec {
    name: "lpos",
    arity: -3,
    flags: Flags::READONLY,
    acl: &["@read", "@list", "@slow"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    summary: "Returns the positions of the elements equal to a value.",
    since: "6.0.6",
    complexity: "O(N) in the elements compared (all of them, or MAXLEN).",
    syntax: "key:key element [RANK rank:integer] [COUNT num-matches:integer] \
             [MAXLEN len:integer]",
    ..list_cmd(Handler::Engine(lpos))
};

fn linsert(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, pivot, element) = (arg(args, 1)?, arg(args, 3)?, arg(args, 4)?);
    let where_ = arg(args, 2)?;
    let after = if is_token(where_, "AFTER") {
        true
    } else if is_token(where_, "BEFORE") {
        false
    } else {
        return Err(CmdError::SYNTAX);
    };
    let cfg = engine.config.object;
    let fill = cfg.list_max_listpack_size;
    let Some((list, meta)) = existing_list(engine, ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    // Redis makes room for the element before it looks for the pivot.
    let layout = list_layout(meta, list, &cfg);
    layout.before_growth(list.len(), std::iter::once(element.len()), fill);
    let Some(at) = list.iter().position(|e| e == pivot) else {
        return Ok(Reply::Integer(-1));
    };
    layout.insert(list, at, after, element, fill);
    list.insert(at + usize::from(after), owned(element));
    let len = list.len();
    engine.modified(ctx.db, key, KeyEvent::LInsert);
    Ok(Reply::Integer(len as i64))
}

/// A parsed LPOS request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LposRequest {
    /// Which match to start from: 1 = the first from the head, -1 = the first from the tail.
    rank: i64,
    /// How many positions to return; `None` without COUNT, `Some(0)` for all.
    count: Option<u64>,
    /// How many elements to compare at most; 0 for all.
    max_len: u64,
}

fn parse_lpos(args: &[Bytes]) -> Result<LposRequest, CmdError> {
    let mut req = LposRequest { rank: 1, count: None, max_len: 0 };
    let non_negative =
        |raw: &[u8], what: &'static str| parse_i64(raw).and_then(|n| u64::try_from(n).ok()).ok_or(CmdError::full(what));
    let mut i = 3;
    while let Some(opt) = args.get(i) {
        let Some(value) = args.get(i + 1) else {
            return Err(CmdError::SYNTAX);
        };
        if is_token(opt, "RANK") {
            req.rank = negatable_int_arg(value)?;
            if req.rank == 0 {
                return Err(CmdError::full(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                ));
            }
        } else if is_token(opt, "COUNT") {
            req.count = Some(non_negative(value, "ERR COUNT can't be negative")?);
        } else if is_token(opt, "MAXLEN") {
            req.max_len = non_negative(value, "ERR MAXLEN can't be negative")?;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 2;
    }
    Ok(req)
}

fn lpos(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, element) = (arg(args, 1)?, arg(args, 2)?);
    let req = parse_lpos(args)?;
    let empty = || {
        if req.count.is_some() {
            Reply::Array(vec![])
        } else {
            Reply::Null
        }
    };
    let Some(list) = read_list(engine, ctx, key)? else {
        return Ok(empty());
    };
    let len = list.len();
    let compared = match usize::try_from(req.max_len) {
        Ok(0) | Err(_) => len,
        Ok(n) => n.min(len),
    };
    let indexes: Box<dyn Iterator<Item = usize>> =
        if req.rank > 0 { Box::new(0..compared) } else { Box::new((len - compared..len).rev()) };
    let skip = usize::try_from(req.rank.unsigned_abs() - 1).unwrap_or(usize::MAX);
    let wanted = match req.count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let positions: Vec<usize> =
        indexes.filter(|&i| list.get(i).is_some_and(|e| e == element)).skip(skip).take(wanted).collect();
    Ok(match req.count {
        Some(_) => Reply::Array(positions.into_iter().map(|p| Reply::Integer(p as i64)).collect()),
        None => positions.first().map_or(Reply::Null, |&p| Reply::Integer(p as i64)),
    })
}

#[cfg(test)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    fn ints(v: &[i64]) -> Reply {
        Reply::Array(v.iter().map(|&n| int(n)).collect())
    }

    #[test]
    fn linsert_before_after() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "a"]);
        assert_eq!(h.run(&["LINSERT", "l", "BEFORE", "a", "X"]), int(4));
        assert_eq!(h.run(&["LINSERT", "l", "after", "a", "Y"]), int(5));
        assert_eq!(h.run(&["LRANGE", "l", "0", "-1"]), bulks(&["X", "a", "Y", "b", "a"]));
        assert_eq!(h.run(&["LINSERT", "l", "AFTER", "zz", "Y"]), int(-1));
        assert_eq!(h.run(&["LINSERT", "missing", "AFTER", "a", "Y"]), int(0));
        assert_eq!(h.run(&["EXISTS", "missing"]), int(0));
        h.run(&["SET", "s", "v"]);
        assert_eq!(h.run(&["LINSERT", "s", "MIDDLE", "a", "b"]), err("ERR syntax error"));
        assert_eq!(
            h.run(&["LINSERT", "s", "BEFORE", "a", "b"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }

    #[test]
    fn lpos_options() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "c", "b"]);
        assert_eq!(h.run(&["LPOS", "l", "b"]), int(1));
        assert_eq!(h.run(&["LPOS", "l", "b", "RANK", "-1"]), int(3));
        assert_eq!(h.run(&["LPOS", "l", "b", "RANK", "3"]), Reply::Null);
        assert_eq!(h.run(&["LPOS", "l", "b", "COUNT", "0"]), ints(&[1, 3]));
        assert_eq!(h.run(&["LPOS", "l", "b", "COUNT", "0", "RANK", "-1"]), ints(&[3, 1]));
        assert_eq!(h.run(&["LPOS", "l", "b", "RANK", "-2", "COUNT", "5"]), ints(&[1]));
        assert_eq!(h.run(&["LPOS", "l", "b", "MAXLEN", "1"]), Reply::Null);
        assert_eq!(h.run(&["LPOS", "l", "b", "MAXLEN", "2", "COUNT", "0"]), ints(&[1]));
        assert_eq!(h.run(&["LPOS", "l", "b", "RANK", "-1", "MAXLEN", "1"]), int(3));
        assert_eq!(h.run(&["LPOS", "l", "zz"]), Reply::Null);
        assert_eq!(h.run(&["LPOS", "l", "zz", "COUNT", "2"]), ints(&[]));
        assert_eq!(h.run(&["LPOS", "missing", "zz"]), Reply::Null);
        assert_eq!(h.run(&["LPOS", "missing", "zz", "COUNT", "0"]), ints(&[]));
    }

    #[test]
    fn lpos_errors_before_key() {
        let mut h = Harness::new();
        h.run(&["SET", "s", "v"]);
        assert!(
            matches!(h.run(&["LPOS", "s", "b", "RANK", "0"]), Reply::Error(e) if e.starts_with(b"ERR RANK can't be zero"))
        );
        assert_eq!(
            h.run(&["LPOS", "s", "b", "RANK", "-9223372036854775808"]),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(h.run(&["LPOS", "s", "b", "COUNT", "x"]), err("ERR COUNT can't be negative"));
        assert_eq!(h.run(&["LPOS", "s", "b", "MAXLEN", "-1"]), err("ERR MAXLEN can't be negative"));
        assert_eq!(h.run(&["LPOS", "s", "b", "RANK"]), err("ERR syntax error"));
        assert_eq!(h.run(&["LPOS", "s", "b", "FOO", "1"]), err("ERR syntax error"));
        assert_eq!(
            h.run(&["LPOS", "s", "b"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }
}
