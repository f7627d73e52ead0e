//! `cmsgpack`: lua-cmsgpack 0.4.0 as Redis bundles it: `pack unpack unpack_one unpack_limit`,
//! plus `_NAME`, `_VERSION`, `_COPYRIGHT`, `_DESCRIPTION`.
//!
//! Behaviours that matter:
//!
//! * `pack(...)` encodes each argument and concatenates them; no argument is "bad argument #0 to
//!   'pack' (MessagePack pack needs input.)", more than 4000 is "... (Too many arguments for
//!   MessagePack pack.)".
//! * A table whose keys are exactly 1..n (n = number of keys, keys must fit a C `int`) is an array
//!   (`{}` packs as an empty array), anything else a map. Tables nested 16 deep are packed as nil,
//!   which is how circular references come out.
//! * A number that equals its `int64_t` conversion packs as the smallest integer form, else as a
//!   float32 when exact, else as a float64. Strings use fixstr/str8/str16/str32 (never bin);
//!   nil, functions, userdata (including `cjson.null`) and threads pack as nil.
//! * Unpacking accepts what the C code accepts: no bin/ext types ("Bad data format in input."),
//!   truncated data is "Missing bytes in input.", uint64 values wrap through `int64_t`, a nil or
//!   NaN map key is "table index is nil"/"table index is NaN".
//! * `unpack_one(s [, offset])` and `unpack_limit(s, limit [, offset])` return the next offset
//!   (0-based, -1 at the end) first, then the values; `unpack_limit(s, 0, 0)` unpacks everything
//!   without an offset. The error for negative arguments prints the input length where the limit
//!   should be, as the C code does.
//! * At most 7999 values come back from one call (Lua 5.1's C stack); deeper nesting than about
//!   4000 arrays fails as in Redis.

use mlua::{Lua, Table, Value};

use super::MAX_C_STACK;
use super::{
    add_fn, arg_err, as_number, c_f64_to_i32, c_f64_to_i64, rt_err, Args, LibError, LibResult, Returns, Spine,
};

const MAX_NESTING: usize = 16;

/// The `cmsgpack` table.
pub(crate) fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    add_fn(lua, &t, "pack", pack)?;
    add_fn(lua, &t, "unpack", |lua, args| unpack_full(lua, args, args.len() as i64, 0, 0))?;
    add_fn(lua, &t, "unpack_one", |lua, args| {
        let offset = args.opt_integer(lua, 2, 0)?;
        unpack_full(lua, args, 1, 1, offset)
    })?;
    add_fn(lua, &t, "unpack_limit", |lua, args| {
        let limit = args.check_integer(lua, 2)?;
        let offset = args.opt_integer(lua, 3, 0)?;
        unpack_full(lua, args, 1, limit, offset)
    })?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

// ===== Encoding =====

fn stack_check(used: i64, extra: i64, what: &str) -> LibResult<()> {
    if used + extra > MAX_C_STACK {
        return rt_err(format!("stack overflow ({what})"));
    }
    Ok(())
}

fn pack(lua: &Lua, args: &Args) -> LibResult<Returns> {
    let n = args.len() as i64;
    if n == 0 {
        return arg_err(0, "MessagePack pack needs input.");
    }
    if n + n > MAX_C_STACK {
        return arg_err(0, "Too many arguments for MessagePack pack.");
    }
    let mut out = Vec::new();
    for i in 1..=args.len() {
        let v = args.get(i)?.unwrap_or(Value::Nil);
        // Stack: the arguments, the encodings so far, the copy being encoded.
        encode(&mut out, &v, 0, n + i as i64)?;
    }
    Ok(Returns::one(Value::String(lua.create_string(out)?)))
}

fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(out: &mut Vec<u8>, d: f64) {
    let i = c_f64_to_i64(d);
    if !d.is_infinite() && i as f64 == d {
        encode_int(out, i);
        return;
    }
    let f = d as f32;
    if f64::from(f) == d {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

fn encode_header(out: &mut Vec<u8>, n: u64, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 65535 {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// `mp_encode_lua_type` for the value at stack depth `used`.
fn encode(out: &mut Vec<u8>, v: &Value, level: usize, used: i64) -> LibResult<()> {
    match v {
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(_) | Value::Number(_) => encode_number(out, as_number(v).unwrap_or(0.0)),
        Value::Table(t) if level < MAX_NESTING => encode_table(out, t, level, used)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

/// `table_is_an_array`: keys exactly 1..n.
fn is_array(t: &Table) -> LibResult<bool> {
    let mut count: i64 = 0;
    let mut max: i32 = 0;
    let mut array = true;
    // Nesting is at most 16 deep, so walking with `for_each` inside `for_each` is fine here.
    t.for_each(|k: Value, _: Value| {
        let n = match k {
            Value::Integer(_) | Value::Number(_) => as_number(&k).unwrap_or(0.0),
            _ => 0.0,
        };
        if n <= 0.0 || f64::from(c_f64_to_i32(n)) != n {
            array = false;
            // Stop the walk.
            return Err(mlua::Error::RuntimeError(String::new()));
        }
        if n > f64::from(max) {
            max = n as i32;
        }
        count += 1;
        Ok(())
    })
    .or_else(|e| if array { Err(e) } else { Ok(()) })?;
    Ok(array && i64::from(max) == count)
}

fn encode_table(out: &mut Vec<u8>, t: &Table, level: usize, used: i64) -> LibResult<()> {
    stack_check(used, 2, "in function table_is_an_array")?;
    if is_array(t)? {
        let len = t.raw_len();
        encode_header(out, len as u64, 0x90, 0xdc, 0xdd);
        stack_check(used, 1, "in function mp_encode_lua_table_as_array")?;
        for j in 1..=len {
            let v: Value = t.raw_get(j)?;
            encode(out, &v, level + 1, used + 1)?;
        }
    } else {
        stack_check(used, 3, "in function mp_encode_lua_table_as_map")?;
        let mut len: u64 = 0;
        t.for_each(|_: Value, _: Value| {
            len += 1;
            Ok(())
        })?;
        encode_header(out, len, 0x80, 0xde, 0xdf);
        let mut failure = None;
        let walk = t.for_each(|k: Value, v: Value| {
            let r = encode(out, &k, level + 1, used + 3).and_then(|()| encode(out, &v, level + 1, used + 2));
            if let Err(e) = r {
                failure = Some(e);
                return Err(mlua::Error::RuntimeError(String::new()));
            }
            Ok(())
        });
        if let Some(e) = failure {
            return Err(e);
        }
        walk?;
    }
    Ok(())
}

// ===== Decoding =====

#[derive(Debug)]
enum DecodeError {
    Eof,
    BadFormat,
    Lib(LibError),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lib(LibError::Lua(e))
    }
}

fn stack_overflow(what: &str) -> DecodeError {
    DecodeError::Lib(LibError::Runtime(format!("stack overflow ({what})").into_bytes()))
}

#[derive(Debug)]
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.left() < n {
            return Err(DecodeError::Eof);
        }
        Ok(())
    }

    /// `n` bytes after the first `skip`, then advance past all of them.
    fn take(&mut self, skip: usize, n: usize) -> Result<&[u8], DecodeError> {
        self.need(skip + n)?;
        let start = self.pos + skip;
        self.pos = start + n;
        self.data.get(start..start + n).ok_or(DecodeError::Eof)
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        let bytes = self.take(1, n)?;
        Ok(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }
}

#[derive(Debug)]
enum Frame {
    Array { remaining: u64, idx: f64, used: i64 },
    Map { remaining: u64, have_key: bool, used: i64 },
}

#[derive(Debug)]
enum Item {
    Value(Value),
    Array(u64),
    Map(u64),
}

fn read_item(lua: &Lua, c: &mut Cursor<'_>) -> Result<Item, DecodeError> {
    let b = c.data.get(c.pos).copied().unwrap_or(0);
    let num = |n: f64| Ok(Item::Value(Value::Number(n)));
    match b {
        0xcc => num(c.be(1)? as f64),
        0xd0 => num(f64::from(c.be(1)? as u8 as i8)),
        0xcd => num(c.be(2)? as f64),
        0xd1 => num(f64::from(c.be(2)? as u16 as i16)),
        0xce => num(c.be(4)? as f64),
        0xd2 => num(f64::from(c.be(4)? as u32 as i32)),
        // lua_pushunsigned is lua_pushinteger on 64-bit builds: the value goes through int64_t.
        0xcf => num(c.be(8)? as i64 as f64),
        0xd3 => num(c.be(8)? as i64 as f64),
        0xc0 => {
            c.pos += 1;
            Ok(Item::Value(Value::Nil))
        }
        0xc3 | 0xc2 => {
            c.pos += 1;
            Ok(Item::Value(Value::Boolean(b == 0xc3)))
        }
        0xca => num(f64::from(f32::from_bits(c.be(4)? as u32))),
        0xcb => num(f64::from_bits(c.be(8)?)),
        0xd9 | 0xda => {
            let hdr = if b == 0xd9 { 1 } else { 2 };
            c.need(1 + hdr)?;
            let len = c
                .data
                .get(c.pos + 1..c.pos + 1 + hdr)
                .unwrap_or(&[])
                .iter()
                .fold(0usize, |a, &x| (a << 8) | x as usize);
            let s = c.take(1 + hdr, len)?;
            Ok(Item::Value(Value::String(lua.create_string(s)?)))
        }
        0xdb => {
            let len = c.be(4)? as usize;
            let s = c.take(0, len)?;
            Ok(Item::Value(Value::String(lua.create_string(s)?)))
        }
        0xdc => Ok(Item::Array(c.be(2)?)),
        0xdd => Ok(Item::Array(c.be(4)?)),
        0xde => Ok(Item::Map(c.be(2)?)),
        0xdf => Ok(Item::Map(c.be(4)?)),
        _ if b & 0x80 == 0 => {
            c.pos += 1;
            num(f64::from(b))
        }
        _ if b & 0xe0 == 0xe0 => {
            c.pos += 1;
            num(f64::from(b as i8))
        }
        _ if b & 0xe0 == 0xa0 => {
            let s = c.take(1, usize::from(b & 0x1f))?;
            Ok(Item::Value(Value::String(lua.create_string(s)?)))
        }
        _ if b & 0xf0 == 0x90 => {
            c.pos += 1;
            Ok(Item::Array(u64::from(b & 0xf)))
        }
        _ if b & 0xf0 == 0x80 => {
            c.pos += 1;
            Ok(Item::Map(u64::from(b & 0xf)))
        }
        _ => Err(DecodeError::BadFormat),
    }
}

/// `mp_decode_to_lua_type`: one value, with `base` C stack slots in use.
fn decode_one(lua: &Lua, c: &mut Cursor<'_>, base: i64) -> Result<Value, DecodeError> {
    let mut spine = Spine::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut cur: Option<Table> = None;
    let mut cur_key = Value::Nil;
    loop {
        let used = match frames.last() {
            None => base,
            Some(Frame::Array { used, .. }) => used + 2,
            Some(Frame::Map { have_key: false, used, .. }) => used + 1,
            Some(Frame::Map { have_key: true, used, .. }) => used + 2,
        };
        c.need(1)?;
        if used + 1 > MAX_C_STACK {
            return Err(stack_overflow("too many return values at once; use unpack_one or unpack_limit instead."));
        }
        let (frame, scalar) = match read_item(lua, c)? {
            Item::Value(v) => (None, v),
            Item::Array(n) => {
                if used + 2 > MAX_C_STACK {
                    return Err(stack_overflow("in function mp_decode_to_lua_array"));
                }
                (Some(Frame::Array { remaining: n, idx: 1.0, used }), Value::Nil)
            }
            Item::Map(n) => (Some(Frame::Map { remaining: n, have_key: false, used }), Value::Nil),
        };
        let mut value = match frame {
            None => scalar,
            Some(Frame::Array { remaining: 0, .. } | Frame::Map { remaining: 0, .. }) => {
                Value::Table(lua.create_table()?)
            }
            Some(frame) => {
                if let Some(parent) = cur.take() {
                    spine.save(lua, frames.len(), Value::Table(parent), std::mem::take(&mut cur_key))?;
                }
                cur = Some(lua.create_table()?);
                frames.push(frame);
                continue;
            }
        };
        // Store the value in its container; close containers that are complete.
        loop {
            let Some(frame) = frames.last_mut() else {
                return Ok(value);
            };
            let Some(t) = cur.as_ref() else {
                return Err(DecodeError::BadFormat);
            };
            let complete = match frame {
                Frame::Array { remaining, idx, .. } => {
                    t.raw_set(*idx, value)?;
                    *idx += 1.0;
                    *remaining -= 1;
                    *remaining == 0
                }
                Frame::Map { remaining, have_key, .. } => {
                    if !*have_key {
                        cur_key = value;
                        *have_key = true;
                        break;
                    }
                    let key = std::mem::take(&mut cur_key);
                    match &key {
                        Value::Nil => return Err(DecodeError::Lib(LibError::Raw(b"table index is nil".to_vec()))),
                        Value::Number(n) if n.is_nan() => {
                            return Err(DecodeError::Lib(LibError::Raw(b"table index is NaN".to_vec())))
                        }
                        _ => {}
                    }
                    t.raw_set(key, value)?;
                    *have_key = false;
                    *remaining -= 1;
                    *remaining == 0
                }
            };
            if !complete {
                break;
            }
            frames.pop();
            value = cur.take().map_or(Value::Nil, Value::Table);
            if !frames.is_empty() {
                let (parent, key) = spine.take(frames.len())?;
                cur = match parent {
                    Value::Table(p) => Some(p),
                    _ => None,
                };
                cur_key = key;
            }
        }
    }
}

/// `mp_unpack_full`; `base` is how many arguments are left on the C stack.
fn unpack_full(lua: &Lua, args: &Args, base: i64, limit: i64, offset: i64) -> LibResult<Returns> {
    let s = args.check_string(lua, 1)?;
    let bytes = s.as_bytes();
    let data: &[u8] = &bytes;
    let len = data.len();
    if offset < 0 || limit < 0 {
        return rt_err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        ));
    }
    if offset as u64 > len as u64 {
        return rt_err(format!("Start offset {} greater than input length {}.", offset as i32, len as i32));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all { i64::from(i32::MAX) } else { limit };
    let mut c = Cursor { data, pos: offset as usize };
    let mut out = Returns::new();
    if !decode_all {
        // The next offset comes first; it is filled in at the end.
        out.push(lua, Value::Nil)?;
    }
    let mut cnt: i64 = 0;
    while c.left() > 0 && cnt < limit {
        match decode_one(lua, &mut c, base + cnt) {
            Ok(v) => out.push(lua, v)?,
            Err(DecodeError::Eof) => return rt_err("Missing bytes in input."),
            Err(DecodeError::BadFormat) => return rt_err("Bad data format in input."),
            Err(DecodeError::Lib(e)) => return Err(e),
        }
        cnt += 1;
    }
    if !decode_all {
        if base + cnt + 1 > MAX_C_STACK {
            return rt_err("stack overflow (in function mp_unpack_full)");
        }
        let next = if c.left() == 0 { -1 } else { (len - c.left()) as i64 };
        out.set(1, Value::Integer(next))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{hex, lua, run};

    #[test]
    fn redis_pack_double_and_int64() {
        let lua = lua();
        assert_eq!(hex(&lua, "cmsgpack.pack(0.1)"), "true cb3fb999999999999a");
        assert_eq!(hex(&lua, "cmsgpack.pack(-1099511627776)"), "true d3ffffff0000000000");
    }

    #[test]
    fn redis_smoke_test() {
        let lua = lua();
        let code = r#"
            local str_lt_32 = string.rep("x", 30)
            local str_lt_255 = string.rep("x", 250)
            local str_lt_65535 = string.rep("x", 65530)
            local str_long = string.rep("x", 100000)
            local array_lt_15 = {1, 2, 3, 4, 5}
            local array_lt_65535 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
            local array_big = {}
            for i=1, 100000 do array_big[i] = i end
            local map_lt_15 = {a=1, b=2}
            local map_big = {}
            for i=1, 100000 do map_big[tostring(i)] = i end
            local some_map = { s1=str_lt_32, s2=str_lt_255, s3=str_lt_65535, s4=str_long, d1=0.1, i1=1, i2=250,
                i3=65530, i4=100000, i5=2^40, i6=-1, i7=-120, i8=-32000, i9=-100000, i10=-3147483648,
                a1=array_lt_15, a2=array_lt_65535, a3=array_big, m1=map_lt_15, m2=map_big, b1=false, b2=true, n=nil }
            local encoded = cmsgpack.pack(some_map)
            local decoded = cmsgpack.unpack(encoded)
            assert(table.concat(some_map) == table.concat(decoded))
            local offset, decoded_one = cmsgpack.unpack_one(encoded, 0)
            assert(table.concat(some_map) == table.concat(decoded_one))
            assert(offset == -1)
            local encoded_multiple = cmsgpack.pack(str_lt_32, str_lt_255, str_lt_65535, str_long)
            local offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, 0)
            assert(obj == str_lt_32)
            offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
            assert(obj == str_lt_255)
            offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
            assert(obj == str_lt_65535)
            offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
            assert(obj == str_long)
            assert(offset == -1)
            assert(decoded.m2["777"] == 777 and decoded.a3[99999] == 99999 and decoded.i10 == -3147483648)
            return 'ok'
        "#;
        assert_eq!(run(&lua, code), "true ok");
    }

    #[test]
    fn redis_circular_references() {
        let lua = lua();
        let code = r#"
            local a = {x=nil,y=5}
            local b = {x=a}
            a['x'] = b
            local encoded = cmsgpack.pack(a)
            local h = ""
            for i = 1, #encoded do h = h .. string.format("%02x",string.byte(encoded,i)) end
            local re = cmsgpack.unpack(encoded)
            assert(re)
            assert(re.x)
            assert(re.x.x.y == re.y)
            assert(re.x.x.x.x.y == re.y)
            assert(re.x.x.x.x.x.x.y == re.y)
            assert(re.x.x.x.x.x.x.x.x.x.x.y == re.y)
            assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y == re.y)
            assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x)
            assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil)
            return h, re.x.x.x.x.x.x.x.x.y == re.y, re.y == 5
        "#;
        let expected = "82a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a178c0";
        assert_eq!(run(&lua, code), format!("true {expected} true true"));
    }

    #[test]
    fn values_and_errors() {
        let lua = lua();
        assert_eq!(hex(&lua, "cmsgpack.pack({})"), "true 90");
        assert_eq!(hex(&lua, "cmsgpack.pack(1, -1, 1.5, 'ab', true, nil)"), "true 01ffca3fc00000a26162c3c0");
        assert_eq!(
            run(&lua, "return cmsgpack.pack()"),
            "false bad argument #0 to 'pack' (MessagePack pack needs input.)"
        );
        assert_eq!(run(&lua, "return cmsgpack.unpack('\\196\\1a')"), "false Bad data format in input.");
        assert_eq!(run(&lua, "return cmsgpack.unpack('\\146\\1')"), "false Missing bytes in input.");
        assert_eq!(run(&lua, "return cmsgpack.unpack('\\129\\192\\1')"), "false table index is nil");
        assert_eq!(run(&lua, "return select('#', cmsgpack.unpack(''))"), "true 0");
        assert_eq!(run(&lua, "return cmsgpack.unpack_one('\\1\\2', 1)"), "true -1 2");
        assert_eq!(run(&lua, "return cmsgpack.unpack_limit('\\1\\2\\3', 2)"), "true 2 1 2");
        assert_eq!(
            run(&lua, "return cmsgpack.unpack_one('\\1', -1)"),
            "false Invalid request to unpack with offset of -1 and limit of 1."
        );
        assert_eq!(
            run(&lua, "return cmsgpack.unpack_one('\\1', 5)"),
            "false Start offset 5 greater than input length 1."
        );
        assert_eq!(run(&lua, "return cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255')"), "true -1");
    }

    #[test]
    fn stack_limits() {
        let lua = lua();
        assert_eq!(
            run(&lua, "return pcall(cmsgpack.unpack, string.rep('\\1', 8000))"),
            "true false stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"
        );
        assert_eq!(
            run(&lua, "return pcall(cmsgpack.unpack, string.rep('\\145', 5000))"),
            "true false stack overflow (in function mp_decode_to_lua_array)"
        );
        assert_eq!(
            run(&lua, "local t = {} for i=1,4001 do t[i]=i end return pcall(cmsgpack.pack, unpack(t))"),
            "true false bad argument #0 to '?' (Too many arguments for MessagePack pack.)"
        );
    }
}
