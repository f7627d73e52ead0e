//! Bitmap commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP; BITFIELD and
//! BITFIELD_RO in [`bitfield`].
//!
//! A bitmap is an ordinary string (`Value::Str`); there is no separate type. Bits are numbered
//! from the most significant bit of the first byte, as Redis numbers them:
//!
//! ```text
//!  byte:        0                       1
//!          ┌───────────────────────┬───────────────────────┐
//!  bit:    │ 0  1  2  3  4  5  6  7│ 8  9 10 11 12 13 14 15│ ...
//!          └───────────────────────┴───────────────────────┘
//!            ^ 0x80                ^ 0x01
//! ```
//!
//! so bit `n` is `(byte[n / 8] >> (7 - n % 8)) & 1`. A missing key, and every byte past the end
//! of a string, reads as zeros.
//!
//! Costs: SETBIT and GETBIT O(1), except that SETBIT copies the string when it must grow it or a
//! reply still holds it (the engine's copy-on-write, as APPEND); BITCOUNT and BITPOS O(N) in the
//! bytes of the range; BITOP O(N·K) for K sources of at most N bytes.
//!
//! Redis behaviours we match on purpose:
//! - A bit offset is `0..2^32` (its byte must fit in 512 MiB, Redis' default
//!   `proto-max-bulk-len`); anything else, `#n` included, is `ERR bit offset is not an integer or
//!   out of range`, checked before the key's type.
//! - SETBIT that leaves the bit as it was and does not create or grow the string is not a write
//!   (no event, nothing logged); any SETBIT turns the string `raw`, as Redis unshares it.
//! - BITCOUNT and BITPOS parse every argument before looking the key up (Redis 7.2+; 7.0
//!   answered 0 / -1 for a missing key whatever followed). BITCOUNT's range is empty when both
//!   ends are negative and start > end; BITPOS clamps such a range to the first unit instead.
//! - BITPOS looking for a 0 in a range of ones answers the first bit after the string when no
//!   end was given (the string reads as zero-padded), -1 when one was.
//! - BITOP stores its result with `set` (dropping the destination's TTL and type), or, when
//!   every source is missing or empty, deletes the destination (`del` if it was there).

mod bitfield;
#[cfg(test)]
mod tests;

use super::{read_str, take_vec, MAX_STRING_BYTES};
use crate::command::{key_at, keys_from, CommandSpec, Flags, Handler, KeySpec};
use crate::types::object::meta::Form;
use crate::types::{arg, delete_key, is_token};
use crate::util::{int_arg, parse_i64};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

const RO_ACCESS: &[KeySpec] = &[key_at(1, &["RO", "ACCESS"])];
const READ_SLOW: &[&str] = &["@read", "@bitmap", "@slow"];
const WRITE_SLOW: &[&str] = &["@write", "@bitmap", "@slow"];
const WRITE_DENYOOM: Flags = Flags::WRITE.and(Flags::DENYOOM);

/// A bitmap command on one key at index 1.
const fn one_key(handler: Handler) -> CommandSpec {
    CommandSpec { first_key: 1, last_key: 1, step: 1, group: "bitmap", ..CommandSpec::of(handler) }
}

/// The bitmap commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "setbit",
        arity: 4,
        flags: WRITE_DENYOOM,
        acl: WRITE_SLOW,
        key_specs: &[key_at(1, &["RW", "ACCESS", "UPDATE"])],
        summary: "Sets one bit of a string to 0 or 1, zero-padding it as needed, and replies the \
                  bit's previous value.",
        since: "2.2.0",
        complexity: "O(1); O(N) in the string's length when it must grow or is shared.",
        syntax: "key:key offset:integer value:integer",
        ..one_key(Handler::Engine(setbit))
    },
    CommandSpec {
        name: "getbit",
        arity: 3,
        flags: Flags::READONLY.and(Flags::FAST),
        acl: &["@read", "@bitmap", "@fast"],
        key_specs: RO_ACCESS,
        summary: "Replies one bit of a string (0 past its end or for a missing key).",
        since: "2.2.0",
        syntax: "key:key offset:integer",
        ..one_key(Handler::Engine(getbit))
    },
    CommandSpec {
        name: "bitcount",
        arity: -2,
        flags: Flags::READONLY,
        acl: READ_SLOW,
        key_specs: RO_ACCESS,
        summary: "Counts the bits set to 1 in a string, or in a range of its bytes or bits.",
        since: "2.6.0",
        complexity: "O(N) in the bytes of the range.",
        syntax: "key:key range@[start:integer end:integer unit@[BYTE | BIT]]",
        ..one_key(Handler::Engine(bitcount))
    },
    CommandSpec {
        name: "bitpos",
        arity: -3,
        flags: Flags::READONLY,
        acl: READ_SLOW,
        key_specs: RO_ACCESS,
        summary: "Finds the first bit set to 1, or to 0, in a string or a range of its bytes or \
                  bits.",
        since: "2.8.7",
        complexity: "O(N) in the bytes of the range.",
        syntax: "key:key bit:integer range@[start:integer end-unit-block@[end:integer unit@[BYTE | BIT]]]",
        ..one_key(Handler::Engine(bitpos))
    },
    CommandSpec {
        name: "bitop",
        arity: -4,
        flags: WRITE_DENYOOM,
        first_key: 2,
        last_key: -1,
        step: 1,
        acl: WRITE_SLOW,
        key_specs: &[key_at(2, &["OW", "UPDATE"]), keys_from(3, 1, &["RO", "ACCESS"])],
        group: "bitmap",
        summary: "Combines strings bit by bit (AND, OR, XOR, NOT, DIFF, DIFF1, ANDOR, ONE) and \
                  stores the result.",
        since: "2.6.0",
        complexity: "O(N·K) for K source strings of at most N bytes.",
        syntax: "operation@(AND | OR | XOR | NOT | DIFF | DIFF1 | ANDOR | ONE) destkey:key key:key ...",
        ..CommandSpec::of(Handler::Engine(bitop))
    },
    bitfield::BITFIELD,
    bitfield::BITFIELD_RO,
];

// ---------------------------------------------------------------------------------------------
// Offsets and bit access

/// The first bit offset out of range: a bit's byte must lie within 512 MiB.
const BIT_OFFSET_LIMIT: u64 = (MAX_STRING_BYTES as u64) * 8;

fn bad_offset() -> CmdError {
    CmdError::full("ERR bit offset is not an integer or out of range")
}

/// A bit offset as SETBIT and GETBIT take it: a plain integer in `0..2^32`.
fn bit_offset(raw: &[u8]) -> Result<u64, CmdError> {
    checked_offset(parse_i64(raw).ok_or_else(bad_offset)?)
}

fn checked_offset(n: i64) -> Result<u64, CmdError> {
    u64::try_from(n).ok().filter(|n| *n < BIT_OFFSET_LIMIT).ok_or_else(bad_offset)
}

/// Bit `n` of `s` (0 past its end).
fn bit_at(s: &[u8], n: u64) -> u8 {
    let byte = usize::try_from(n / 8).ok().and_then(|i| s.get(i)).copied().unwrap_or(0);
    (byte >> (7 - n % 8)) & 1
}

/// Set bit `n` of `s` to `on`; `s` must be long enough.
fn set_bit(s: &mut [u8], n: u64, on: bool) {
    if let Some(byte) = usize::try_from(n / 8).ok().and_then(|i| s.get_mut(i)) {
        let mask = 0x80u8 >> (n % 8);
        if on {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Run `change` on the string at `key` for writing, grown with zeros to at least `min_len`
/// bytes and created when missing. The string is written in place when nothing else shares it.
/// Replies WRONGTYPE, creating nothing, for another type. Returns `change`'s result and
/// whether the string was created or grown. Does not call [`Engine::modified`].
fn change_bits<R>(
    engine: &mut Engine,
    ctx: &CallCtx,
    key: &Bytes,
    min_len: usize,
    change: impl FnOnce(&mut [u8]) -> R,
) -> Result<(R, bool), CmdError> {
    let existed = match engine.lookup(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
        None => false,
        Some(Value::Str(_)) => true,
        Some(_) => return Err(CmdError::WRONGTYPE),
    };
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::Str(Bytes::new()));
    // Redis writes bits into a private `raw` copy, whether or not they change.
    entry.meta.form = Form::StrRaw;
    let Value::Str(b) = &mut entry.value else { return Err(CmdError::WRONGTYPE) };
    let mut v = take_vec(b);
    let grown = v.len() < min_len;
    if grown {
        v.resize(min_len, 0);
    }
    let out = change(&mut v);
    *b = Bytes::from(v);
    Ok((out, grown || !existed))
}

/// The byte length a string needs to hold bit `n` (at most 512 MiB + 8 for BITFIELD's widest
/// field at the last offset).
fn len_for_bit(n: u64) -> usize {
    usize::try_from(n / 8 + 1).unwrap_or(usize::MAX)
}

// ---------------------------------------------------------------------------------------------
// SETBIT / GETBIT

fn setbit(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let offset = bit_offset(arg(args, 2)?)?;
    let on = match arg(args, 3)?.as_ref() {
        b"0" => false,
        b"1" => true,
        _ => return Err(CmdError::full("ERR bit is not an integer or out of range")),
    };
    let (old, grown) = change_bits(engine, ctx, key, len_for_bit(offset), |s| {
        let old = bit_at(s, offset);
        set_bit(s, offset, on);
        old
    })?;
    if grown || old != u8::from(on) {
        engine.modified(ctx.db, key, KeyEvent::SetBit);
    }
    Ok(Reply::Integer(old.into()))
}

fn getbit(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let offset = bit_offset(arg(args, 2)?)?;
    let bit = read_str(engine, ctx, key)?.map_or(0, |s| bit_at(&s, offset));
    Ok(Reply::Integer(bit.into()))
}

// ---------------------------------------------------------------------------------------------
// Ranges: BITCOUNT / BITPOS

/// The unit a range's ends count in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Byte,
    Bit,
}

fn parse_unit(raw: &[u8]) -> Result<Unit, CmdError> {
    if is_token(raw, "BYTE") {
        Ok(Unit::Byte)
    } else if is_token(raw, "BIT") {
        Ok(Unit::Bit)
    } else {
        Err(CmdError::SYNTAX)
    }
}

/// A range as the client gave it: inclusive ends, negative from the end, in `unit`s.
#[derive(Debug, Clone, Copy)]
struct Range {
    start: i64,
    end: i64,
    unit: Unit,
}

impl Range {
    /// The inclusive bit range `[first, last]` this range covers in a string of `len` bytes,
    /// clamped as Redis clamps it; `None` when it is empty.
    fn bits(self, len: usize) -> Option<(u64, u64)> {
        let total = match self.unit {
            Unit::Byte => len as i64,
            Unit::Bit => (len as i64).saturating_mul(8),
        };
        let from_end = |i: i64| if i < 0 { total.saturating_add(i).max(0) } else { i };
        let start = from_end(self.start);
        let end = from_end(self.end).min(total - 1);
        if start > end {
            return None;
        }
        let (start, end) = (u64::try_from(start).ok()?, u64::try_from(end).ok()?);
        Some(match self.unit {
            Unit::Byte => (start * 8, end * 8 + 7),
            Unit::Bit => (start, end),
        })
    }
}

/// The bits of byte `i` that lie within `[first, last]`, as a mask.
fn edge_mask(i: u64, first: u64, last: u64) -> u8 {
    let low = if i == first / 8 { first % 8 } else { 0 };
    let high = if i == last / 8 { last % 8 } else { 7 };
    // Bits `low..=high` from the most significant end.
    ((0xFFu32 >> low) & (0xFFu32 << (7 - high))) as u8
}

/// The number of bits set in `s` within the bit range `[first, last]` (inside `s`).
fn count_ones(s: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = ((first / 8) as usize, (last / 8) as usize);
    let Some(bytes) = s.get(fb..=lb) else { return 0 };
    let mut words = bytes.chunks_exact(8);
    let mut n: u64 =
        words.by_ref().map(|w| u64::from_ne_bytes(w.try_into().unwrap_or([0; 8])).count_ones()).map(u64::from).sum();
    n += words.remainder().iter().map(|b| u64::from(b.count_ones())).sum::<u64>();
    // Take away the bits of the edge bytes outside the range.
    let outside = |i: usize| s.get(i).map_or(0, |b| u64::from((b & !edge_mask(i as u64, first, last)).count_ones()));
    n -= outside(fb);
    if lb != fb {
        n -= outside(lb);
    }
    n
}

/// The first bit equal to `target` in `s` within the bit range `[first, last]`.
fn find_bit(s: &[u8], first: u64, last: u64, target: bool) -> Option<u64> {
    // Looking for a 0 is looking for a 1 in the complement.
    let flip: u8 = if target { 0 } else { 0xFF };
    let (fb, lb) = (first / 8, last / 8);
    let hit = |i: u64| -> Option<u64> {
        let byte = (s.get(usize::try_from(i).ok()?)? ^ flip) & edge_mask(i, first, last);
        (byte != 0).then(|| i * 8 + u64::from(byte.leading_zeros()))
    };
    if let Some(p) = hit(fb) {
        return Some(p);
    }
    if lb == fb {
        return None;
    }
    let middle = s.get((fb + 1) as usize..lb as usize).unwrap_or_default();
    match middle.iter().position(|&b| b != flip) {
        Some(at) => hit(fb + 1 + at as u64),
        None => hit(lb),
    }
}

fn bitcount(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let range = match args.len() {
        2 => None,
        4 | 5 => {
            let start = int_arg(arg(args, 2)?)?;
            let end = int_arg(arg(args, 3)?)?;
            let unit = args.get(4).map_or(Ok(Unit::Byte), |u| parse_unit(u))?;
            Some(Range { start, end, unit })
        }
        _ => return Err(CmdError::SYNTAX),
    };
    let Some(s) = read_str(engine, ctx, key)? else { return Ok(Reply::Integer(0)) };
    let bits = match range {
        None => (!s.is_empty()).then(|| (0, s.len() as u64 * 8 - 1)),
        // Unlike BITPOS (and GETRANGE), two negative ends the wrong way round count nothing
        // rather than clamping to the first unit.
        Some(r) if r.start < 0 && r.end < 0 && r.start > r.end => None,
        Some(r) => r.bits(s.len()),
    };
    let n = bits.map_or(0, |(first, last)| count_ones(&s, first, last));
    Ok(Reply::Integer(n as i64))
}

fn bitpos(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let target = match int_arg(arg(args, 2)?)? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::full("ERR The bit argument must be 1 or 0.")),
    };
    if args.len() > 6 {
        return Err(CmdError::SYNTAX);
    }
    let start = args.get(3).map(|s| int_arg(s)).transpose()?.unwrap_or(0);
    let unit = args.get(5).map_or(Ok(Unit::Byte), |u| parse_unit(u))?;
    let end = args.get(4).map(|e| int_arg(e)).transpose()?;
    let Some(s) = read_str(engine, ctx, key)? else {
        // A missing key is an endless run of zeros.
        return Ok(Reply::Integer(if target { -1 } else { 0 }));
    };
    let range = Range { start, end: end.unwrap_or(-1), unit };
    let Some((first, last)) = range.bits(s.len()) else { return Ok(Reply::Integer(-1)) };
    let pos = match find_bit(&s, first, last, target) {
        Some(p) => p as i64,
        // Without an end the string continues with zeros: the first one is right after it.
        None if !target && end.is_none() => s.len() as i64 * 8,
        None => -1,
    };
    Ok(Reply::Integer(pos))
}

// ---------------------------------------------------------------------------------------------
// BITOP

/// A BITOP operation. DIFF, DIFF1, ANDOR and ONE are Redis 8.2's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
    /// The first source's bits set in none of the others.
    Diff,
    /// The others' bits not set in the first.
    Diff1,
    /// The first source's bits set in at least one of the others.
    AndOr,
    /// The bits set in exactly one source.
    One,
}

fn parse_bitop(raw: &[u8], sources: usize) -> Result<BitOp, CmdError> {
    const OPS: [(&str, BitOp); 8] = [
        ("AND", BitOp::And),
        ("OR", BitOp::Or),
        ("XOR", BitOp::Xor),
        ("NOT", BitOp::Not),
        ("DIFF", BitOp::Diff),
        ("DIFF1", BitOp::Diff1),
        ("ANDOR", BitOp::AndOr),
        ("ONE", BitOp::One),
    ];
    let (name, op) = OPS.into_iter().find(|(name, _)| is_token(raw, name)).ok_or(CmdError::SYNTAX)?;
    match op {
        BitOp::Not if sources != 1 => Err(CmdError::full("ERR BITOP NOT must be called with a single source key.")),
        BitOp::Diff | BitOp::Diff1 | BitOp::AndOr if sources < 2 => {
            Err(CmdError::owned(format!("ERR BITOP {name} must be called with at least two source keys.")))
        }
        _ => Ok(op),
    }
}

/// `acc[i] = f(acc[i], src[i])` over all of `acc`, `src` read as zero past its end.
fn combine(acc: &mut [u8], src: &[u8], f: impl Fn(u8, u8) -> u8) {
    let padded = src.iter().copied().chain(std::iter::repeat(0));
    for (a, b) in acc.iter_mut().zip(padded) {
        *a = f(*a, b);
    }
}

/// The result of `op` over `sources`, as long as the longest one.
fn bitop_result(op: BitOp, sources: &[Bytes]) -> Vec<u8> {
    let len = sources.iter().map(Bytes::len).max().unwrap_or(0);
    let (first, rest): (&[u8], &[Bytes]) = sources.split_first().map_or((&[], &[]), |(f, r)| (f.as_ref(), r));
    let mut out = vec![0u8; len];
    combine(&mut out, first, |_, b| b);
    // The OR of every source after the first (DIFF, DIFF1, ANDOR).
    let rest_or = || {
        let mut any = vec![0u8; len];
        for s in rest {
            combine(&mut any, s, |a, b| a | b);
        }
        any
    };
    match op {
        BitOp::And => rest.iter().for_each(|s| combine(&mut out, s, |a, b| a & b)),
        BitOp::Or => rest.iter().for_each(|s| combine(&mut out, s, |a, b| a | b)),
        BitOp::Xor => rest.iter().for_each(|s| combine(&mut out, s, |a, b| a ^ b)),
        BitOp::Not => combine(&mut out, &[], |a, _| !a),
        BitOp::Diff => combine(&mut out, &rest_or(), |a, b| a & !b),
        BitOp::Diff1 => combine(&mut out, &rest_or(), |a, b| !a & b),
        BitOp::AndOr => combine(&mut out, &rest_or(), |a, b| a & b),
        BitOp::One => {
            // Bits seen once so far (`out`) and bits seen more than once.
            let mut twice = vec![0u8; len];
            for s in rest {
                let padded = s.iter().copied().chain(std::iter::repeat(0));
                for ((t, o), b) in twice.iter_mut().zip(out.iter_mut()).zip(padded) {
                    *t |= *o & b;
                    *o |= b;
                }
            }
            combine(&mut out, &twice, |o, t| o & !t);
        }
    }
    out
}

fn bitop(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let dest = arg(args, 2)?;
    let keys = args.get(3..).unwrap_or_default();
    let op = parse_bitop(arg(args, 1)?, keys.len())?;
    let mut sources = Vec::with_capacity(keys.len());
    for key in keys {
        sources.push(read_str(engine, ctx, key)?.unwrap_or_default());
    }
    let result = bitop_result(op, &sources);
    drop(sources);
    let len = result.len();
    // A write lookup first: a destination whose time passed is expired, not overwritten.
    engine.expire_if_needed(ctx.db, dest, ctx.now_ms);
    if len == 0 {
        delete_key(engine, ctx.db, dest);
    } else {
        engine.set_key(ctx.db, dest, Value::Str(Bytes::from(result)), false);
        if let Some(e) = engine.entry_mut(ctx.db, dest) {
            // Redis stores the result as a `raw` string, however short.
            e.meta.form = Form::StrRaw;
        }
        engine.modified(ctx.db, dest, KeyEvent::Set);
    }
    Ok(Reply::Integer(len as i64))
}
