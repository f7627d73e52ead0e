//! BITFIELD and BITFIELD_RO: read, write and add to integers of 1 to 64 bits stored at any bit
//! offset of a string. O(1) per operation (a field is at most 64 bits), plus the cost of
//! growing the string (or copying it, when a reply still holds it) for a write.
//!
//! A field of type `u<n>` (n in 1..=63) or `i<n>` (n in 1..=64) at bit offset `o` is bits
//! `o..o+n` of the string, most significant first (the bit numbering of [`super`]); an offset
//! written `#k` means `k * n`. Signed fields are two's complement.
//!
//! Redis behaviours we match on purpose:
//! - Every operation is parsed before the key is looked up; BITFIELD_RO refuses a SET or
//!   INCRBY only after the whole command parsed (so a bad type or value is reported first).
//! - `#k` multiplies with 64-bit wrap-around, as Redis' C does: `i64 #1152921504606846976` is
//!   offset 0. The offset is then held to `0..2^32` like SETBIT's.
//! - OVERFLOW applies to the SET and INCRBY after it. A result out of the type's range wraps
//!   (WRAP, the default), saturates (SAT) or is not written (FAIL, reply nil). A SET value is
//!   read as a 64-bit two's complement number and, for an unsigned field, as unsigned: so
//!   `SET u8 0 -1` overflows (WRAP stores 255, SAT 255 too). A signed SET of a value so negative
//!   that `max - value` wraps in 64 bits saturates to the maximum, not the minimum (Redis'
//!   arithmetic: `OVERFLOW SAT SET i8 0 -9223372036854775808` stores 127).
//! - A write creates the key and zero-grows the string to the farthest field written before any
//!   operation runs, even if every write then fails under FAIL. A write counts as a change
//!   (the `dirty` counter) when it changed its field, or when the string was created or grown;
//!   one `setbit` event when any did. When every write failed, a creation or growth is no event
//!   and no change in Redis, which then does not propagate the new bytes (its AOF and replicas
//!   lose them); rill counts one change so that the command is logged.

use super::{bad_offset, change_bits, checked_offset, len_for_bit};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::types::{arg, is_token};
use crate::util::{int_arg, parse_i64};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `BITFIELD key [GET type offset | [OVERFLOW WRAP|SAT|FAIL] (SET type offset value | INCRBY
/// type offset increment)] ...`
pub(super) const BITFIELD: CommandSpec = CommandSpec {
    name: "bitfield",
    arity: -2,
    flags: Flags::WRITE.and(Flags::DENYOOM),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@bitmap", "@slow"],
    key_specs: &[key_at(1, &["RW", "ACCESS", "UPDATE", "VARIABLE_FLAGS"])],
    key_flags: Some(bitfield_key_flags),
    group: "bitmap",
    summary: "Reads, writes and increments integers of any width up to 64 bits at any bit offset \
              of a string.",
    since: "3.2.0",
    complexity: "O(1) per operation; O(N) in the string's length when a write must grow it or it \
                 is shared.",
    syntax: "key:key [operation@(get-block@GET (encoding offset:integer) | \
             write@(overflow-block@[OVERFLOW (WRAP | SAT | FAIL)] \
             write-operation@(set-block@SET (encoding offset:integer value:integer) | \
             incrby-block@INCRBY (encoding offset:integer increment:integer))))] ...",
    ..CommandSpec::of(Handler::Engine(bitfield))
};

/// `BITFIELD_RO key [GET type offset ...]`
pub(super) const BITFIELD_RO: CommandSpec = CommandSpec {
    name: "bitfield_ro",
    arity: -2,
    flags: Flags::READONLY.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@read", "@bitmap", "@fast"],
    key_specs: &[key_at(1, &["RO", "ACCESS"])],
    group: "bitmap",
    summary: "Reads integers of any width up to 64 bits at any bit offset of a string.",
    since: "6.0.0",
    complexity: "O(1) per operation.",
    syntax: "key:key [get-block@GET (encoding offset:integer) ...]",
    ..CommandSpec::of(Handler::Engine(bitfield_ro))
};

/// A field's type: signedness and width in bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FieldType {
    signed: bool,
    /// 1..=64 signed, 1..=63 unsigned (so every value fits an integer reply).
    bits: u32,
}

impl FieldType {
    fn parse(raw: &[u8]) -> Result<FieldType, CmdError> {
        let invalid = || {
            CmdError::full(
                "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
            )
        };
        let (signed, width) = match raw.split_first() {
            Some((b'i', rest)) => (true, rest),
            Some((b'u', rest)) => (false, rest),
            _ => return Err(invalid()),
        };
        let max = if signed { 64 } else { 63 };
        match parse_i64(width) {
            Some(bits @ 1..=64) if bits <= max => Ok(FieldType { signed, bits: bits as u32 }),
            _ => Err(invalid()),
        }
    }

    /// The smallest and largest value the field holds.
    fn limits(self) -> (i128, i128) {
        if self.signed {
            let half = 1i128 << (self.bits - 1);
            (-half, half - 1)
        } else {
            (0, (1i128 << self.bits) - 1)
        }
    }

    /// `v` reduced to the field's width: its low bits, read back as the field's type.
    fn wrap(self, v: i128) -> i128 {
        let span = 1i128 << self.bits;
        let low = v.rem_euclid(span);
        if self.signed && low > self.limits().1 {
            low - span
        } else {
            low
        }
    }
}

/// What to do with a result out of the field's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One parsed operation.
#[derive(Debug, Clone, Copy)]
struct FieldCmd {
    op: FieldOp,
    ty: FieldType,
    /// First bit of the field.
    offset: u64,
    /// The OVERFLOW in force for this operation.
    overflow: Overflow,
}

/// A field offset: `n`, or `#k` for `k` fields of this type.
fn field_offset(raw: &[u8], ty: FieldType) -> Result<u64, CmdError> {
    let offset = match raw.strip_prefix(b"#") {
        Some(k) => parse_i64(k).ok_or_else(bad_offset)?.wrapping_mul(i64::from(ty.bits)),
        None => parse_i64(raw).ok_or_else(bad_offset)?,
    };
    checked_offset(offset)
}

fn parse_ops(args: &[Bytes]) -> Result<Vec<FieldCmd>, CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while let Some(word) = args.get(i) {
        let left = args.len() - i - 1;
        let op = if is_token(word, "GET") && left >= 2 {
            FieldOp::Get
        } else if is_token(word, "SET") && left >= 3 {
            FieldOp::Set(0)
        } else if is_token(word, "INCRBY") && left >= 3 {
            FieldOp::IncrBy(0)
        } else if is_token(word, "OVERFLOW") && left >= 1 {
            let mode = arg(args, i + 1)?;
            overflow = [("WRAP", Overflow::Wrap), ("SAT", Overflow::Sat), ("FAIL", Overflow::Fail)]
                .into_iter()
                .find(|(t, _)| is_token(mode, t))
                .map(|(_, o)| o)
                .ok_or(CmdError::full("ERR Invalid OVERFLOW type specified"))?;
            i += 2;
            continue;
        } else {
            return Err(CmdError::SYNTAX);
        };
        let ty = FieldType::parse(arg(args, i + 1)?)?;
        let offset = field_offset(arg(args, i + 2)?, ty)?;
        let op = match op {
            FieldOp::Get => FieldOp::Get,
            FieldOp::Set(_) => FieldOp::Set(int_arg(arg(args, i + 3)?)?),
            FieldOp::IncrBy(_) => FieldOp::IncrBy(int_arg(arg(args, i + 3)?)?),
        };
        i += if op == FieldOp::Get { 3 } else { 4 };
        ops.push(FieldCmd { op, ty, offset, overflow });
    }
    Ok(ops)
}

/// The field's bits as an unsigned number (bits past the end of `s` read as 0).
fn read_raw(s: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |v, i| (v << 1) | u64::from(super::bit_at(s, offset + i)))
}

/// The field's value.
fn read_field(s: &[u8], cmd: &FieldCmd) -> i128 {
    let raw = read_raw(s, cmd.offset, cmd.ty.bits);
    if cmd.ty.signed {
        // Sign-extend from the field's top bit.
        let shift = 64 - cmd.ty.bits;
        i128::from(((raw << shift) as i64) >> shift)
    } else {
        i128::from(raw)
    }
}

/// Store `v` (within the field's range) in the field; `s` is long enough.
fn write_field(s: &mut [u8], cmd: &FieldCmd, v: i128) {
    let bits = cmd.ty.bits;
    for i in 0..bits {
        let on = (v >> (bits - 1 - i)) & 1 == 1;
        super::set_bit(s, cmd.offset + u64::from(i), on);
    }
}

/// Run one operation on `s`: the reply (nil when FAIL refused a write) and, for a write that
/// happened, whether it changed the field.
fn apply(s: &mut [u8], cmd: &FieldCmd) -> (Reply, Option<bool>) {
    let old = read_field(s, cmd);
    let (wanted, reply_new) = match cmd.op {
        FieldOp::Get => return (Reply::Integer(old as i64), None),
        // The value's 64 bits, read as the field's signedness.
        FieldOp::Set(v) if cmd.ty.signed => (i128::from(v), false),
        FieldOp::Set(v) => (i128::from(v as u64), false),
        FieldOp::IncrBy(d) => (old + i128::from(d), true),
    };
    let (min, max) = cmd.ty.limits();
    // Redis decides "too large" first, computing `max - value` in wrapping 64-bit arithmetic:
    // a signed SET (narrower than 64 bits) of a value so far below the minimum that this wraps
    // (`SET i8 0 -9223372036854775808`) counts as too large, so SAT stores the maximum.
    let wraps_below = |v: i64| cmd.ty.signed && cmd.ty.bits < 64 && (max as i64).wrapping_sub(v) < 0;
    let too_large = wanted > max || matches!(cmd.op, FieldOp::Set(v) if wraps_below(v));
    let new = if !too_large && wanted >= min {
        wanted
    } else {
        match cmd.overflow {
            Overflow::Wrap => cmd.ty.wrap(wanted),
            Overflow::Sat if too_large => max,
            Overflow::Sat => min,
            Overflow::Fail => return (Reply::Null, None),
        }
    };
    write_field(s, cmd, new);
    let reply = if reply_new { new } else { old };
    (Reply::Integer(reply as i64), Some(new != old))
}

fn bitfield(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    bitfield_generic(engine, ctx, args, false)
}

fn bitfield_ro(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    bitfield_generic(engine, ctx, args, true)
}

fn bitfield_generic(engine: &mut Engine, ctx: &CallCtx, args: &[Bytes], read_only: bool) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let ops = parse_ops(args)?;
    // The last bit any write reaches.
    let last_written = ops.iter().filter(|c| c.op != FieldOp::Get).map(|c| c.offset + u64::from(c.ty.bits) - 1).max();
    let Some(last_written) = last_written else {
        let s = match engine.lookup_read(ctx.db, key, ctx.now_ms).map(|e| &e.value) {
            None => Bytes::new(),
            Some(Value::Str(s)) => s.clone(),
            Some(_) => return Err(CmdError::WRONGTYPE),
        };
        let replies = ops.iter().map(|c| Reply::Integer(read_field(&s, c) as i64)).collect();
        return Ok(Reply::Array(replies));
    };
    if read_only {
        return Err(CmdError::full("ERR BITFIELD_RO only supports the GET subcommand"));
    }
    let ((replies, writes), grown) = change_bits(engine, ctx, key, len_for_bit(last_written), |s| {
        let mut writes = Vec::new();
        let replies = ops
            .iter()
            .map(|c| {
                let (reply, written) = apply(s, c);
                writes.extend(written);
                reply
            })
            .collect::<Vec<_>>();
        (replies, writes)
    })?;
    // As Redis counts them: every write that ran, when the string was created or grown; else
    // every write that changed its field.
    let changes = writes.iter().filter(|changed| grown || **changed).count() as u64;
    if changes > 0 {
        engine.modified(ctx.db, key, KeyEvent::SetBit);
        engine.count_changes(changes - 1);
    } else if grown {
        // Every write failed (OVERFLOW FAIL), so Redis counts nothing and does not propagate
        // the bytes it created; rill logs the command all the same, so they survive a restart.
        engine.count_changes(1);
    }
    Ok(Reply::Array(replies))
}

/// BITFIELD writes its key only with a SET or INCRBY (or words it cannot parse, which it
/// assumes to be writes); with only GETs and OVERFLOWs it reads it (ACL's `%R~` / `%W~`).
fn bitfield_key_flags(args: &[Bytes]) -> &'static [&'static str] {
    let mut i = 2;
    while let Some(word) = args.get(i) {
        let left = args.len() - i - 1;
        if is_token(word, "GET") && left >= 2 {
            i += 3;
        } else if is_token(word, "OVERFLOW") && left >= 1 {
            i += 2;
        } else {
            return &["RW", "ACCESS", "UPDATE"];
        }
    }
    &["RO", "ACCESS"]
}
