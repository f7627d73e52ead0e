//! Values between the server and Lua, as Redis converts them.
//!
//! A command's reply reaches the script as the script's protocol (RESP2 unless
//! `redis.setresp(3)`) would carry it:
//!
//! | reply | RESP2 | RESP3 |
//! |---|---|---|
//! | integer | number | number |
//! | bulk string | string | string |
//! | null bulk / null array | false | nil |
//! | status | `{ok=text}` | `{ok=text}` |
//! | error | `{err=text}` | `{err=text}` |
//! | array (and a RESP2 map, set, push) | table 1..n | table 1..n |
//! | map / set | (flat array / array) | `{map={k=v}}` / `{set={m=true}}` |
//! | double / boolean / big number / verbatim | as RESP2 writes them (bulk, integer) | `{double=n}` / boolean / `{big_number=s}` / `{verbatim_string={format=, string=}}` |
//!
//! A script's returned value becomes the reply: a string a bulk string, a number an integer
//! (truncated), a boolean `:1`/null in RESP2 (a RESP3 boolean after `redis.setresp(3)`), a
//! table an error (`err`), status (`ok`), double, big number, verbatim, map or set by its
//! field, else an array of its elements 1.. up to the first nil; anything else null.

use bytes::{Bytes, BytesMut};
use mlua::{Table, Value};
use rill_resp::{Protocol, Reply};

/// A command's reply with every part that has no Lua form in the script's protocol (`resp3`)
/// made into what the wire would carry (RESP3-only types in RESP2, pre-encoded parts): the
/// reply itself when there is none, which is the usual case. `raw.rs` pushes the result.
pub fn lowered(reply: Reply, resp3: bool) -> Reply {
    if plain(&reply, resp3) {
        reply
    } else {
        lower(&reply, resp3)
    }
}

/// Whether every part of `r` has a Lua form of its own.
fn plain(r: &Reply, resp3: bool) -> bool {
    match r {
        Reply::Integer(_) | Reply::Bulk(_) | Reply::Null | Reply::NullArray | Reply::Simple(_) | Reply::Error(_) => {
            true
        }
        Reply::Array(items) | Reply::Push(items) | Reply::Set(items) => items.iter().all(|i| plain(i, resp3)),
        Reply::Map(pairs) => pairs.iter().all(|(k, v)| plain(k, resp3) && plain(v, resp3)),
        Reply::Boolean(_) | Reply::Double(_) | Reply::BigNumber(_) | Reply::Verbatim { .. } => resp3,
        Reply::Attribute(_, inner) => plain(inner, resp3),
        Reply::Raw(_) => false,
    }
}

fn lower(r: &Reply, resp3: bool) -> Reply {
    match r {
        Reply::Array(items) => Reply::Array(items.iter().map(|i| lower(i, resp3)).collect()),
        Reply::Push(items) => Reply::Push(items.iter().map(|i| lower(i, resp3)).collect()),
        Reply::Set(items) => Reply::Set(items.iter().map(|i| lower(i, resp3)).collect()),
        Reply::Map(pairs) => Reply::Map(pairs.iter().map(|(k, v)| (lower(k, resp3), lower(v, resp3))).collect()),
        Reply::Attribute(_, inner) => lower(inner, resp3),
        plain_part if plain(plain_part, resp3) => plain_part.clone(),
        // What the wire would carry, read back: one value, or an array of several.
        other => {
            let proto = if resp3 { Protocol::Resp3 } else { Protocol::Resp2 };
            let mut out = BytesMut::new();
            rill_resp::write_reply(&mut out, other, proto);
            let mut values = Vec::new();
            let mut at = 0;
            while let Ok(Some((v, used))) = rill_resp::parse_reply(out.get(at..).unwrap_or_default()) {
                if used == 0 {
                    break;
                }
                values.push(lowered(v, resp3));
                at += used;
            }
            match values.len() {
                1 => values.pop().unwrap_or(Reply::Null),
                _ => Reply::Array(values),
            }
        }
    }
}

/// How a script's failure is counted: an error a command inside it already counted is not
/// counted again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Count the reply's error as usual.
    No,
    /// A command's error, counted when it happened.
    Already,
}

/// How deep a returned table may nest (a table that holds itself would never end): past it
/// the innermost reply is Redis' error.
const MAX_DEPTH: usize = 500;

/// The reply for a script's returned value. `resp3` is the script's protocol (booleans).
pub fn to_reply(v: &Value, resp3: bool) -> (Reply, Counted) {
    match v {
        Value::Table(t) => table_reply(t, resp3, 0),
        other => (plain_reply(other, resp3, 0), Counted::No),
    }
}

fn plain_reply(v: &Value, resp3: bool, depth: usize) -> Reply {
    match v {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(b) if resp3 => Reply::Boolean(*b),
        Value::Boolean(true) => Reply::Integer(1),
        Value::Integer(i) => Reply::Integer(*i),
        Value::Number(n) => Reply::Integer(lua_integer(*n)),
        Value::Table(_) if depth >= MAX_DEPTH => Reply::Error(Bytes::from_static(b"ERR reached lua stack limit")),
        Value::Table(t) => table_reply(t, resp3, depth + 1).0,
        _ => Reply::Null,
    }
}

/// A Lua number as Redis casts it to an integer: truncated; out of range (or NaN) the x86
/// conversion's answer, the smallest integer.
fn lua_integer(n: f64) -> i64 {
    if n.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn text_field(t: &Table, name: &str) -> Option<Bytes> {
    match t.raw_get::<Value>(name).ok()? {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        _ => None,
    }
}

fn spaces(b: Bytes) -> Bytes {
    if b.iter().any(|&c| c == b'\r' || c == b'\n') {
        Bytes::from(b.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect::<Vec<u8>>())
    } else {
        b
    }
}

fn table_reply(t: &Table, resp3: bool, depth: usize) -> (Reply, Counted) {
    if let Some(err) = text_field(t, "err") {
        let counted = match t.raw_get::<Value>("ignore_error_stats_update") {
            Ok(Value::Boolean(true)) => Counted::Already,
            _ => Counted::No,
        };
        return (Reply::Error(err), counted);
    }
    if let Some(ok) = text_field(t, "ok") {
        return (Reply::Simple(spaces(ok)), Counted::No);
    }
    if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
        return (Reply::Double(d), Counted::No);
    }
    if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
        return (Reply::Double(d as f64), Counted::No);
    }
    if let Some(n) = text_field(t, "big_number") {
        return (Reply::BigNumber(spaces(n)), Counted::No);
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Some(format), Some(text)) = (text_field(&v, "format"), text_field(&v, "string")) {
            let mut f = [b' '; 3];
            for (slot, b) in f.iter_mut().zip(format.iter()) {
                *slot = *b;
            }
            return (Reply::Verbatim { format: f, text }, Counted::No);
        }
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs = m.pairs::<Value, Value>().filter_map(Result::ok);
        let pairs = pairs.map(|(k, v)| (plain_reply(&k, resp3, depth), plain_reply(&v, resp3, depth))).collect();
        return (Reply::Map(pairs), Counted::No);
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let members =
            s.pairs::<Value, Value>().filter_map(Result::ok).map(|(k, _)| plain_reply(&k, resp3, depth)).collect();
        return (Reply::Set(members), Counted::No);
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(plain_reply(&v, resp3, depth)),
        }
    }
    (Reply::Array(items), Counted::No)
}

/// A Lua number as redis.call passes it to the command: an integer when it is one (within
/// ±2^62), otherwise in Redis' shortest decimal form.
pub fn number_text(n: f64, out: &mut Vec<u8>) {
    let limit = (i64::MAX / 2) as f64;
    if n.fract() == 0.0 && n >= -limit && n <= limit {
        use std::io::Write as _;
        let _ = write!(out, "{}", n as i64);
    } else {
        out.extend_from_slice(rill_resp::double_text(n).as_bytes());
    }
}
