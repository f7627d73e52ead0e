//! `cjson`: Lua CJSON 2.1.0 as Redis bundles it: `encode decode encode_sparse_array
//! encode_max_depth decode_max_depth encode_number_precision encode_keep_buffer
//! encode_invalid_numbers decode_invalid_numbers decode_array_with_array_mt new`, plus `null`,
//! `_NAME`, `_VERSION`.
//!
//! Behaviours that matter:
//!
//! * `cjson.null` (and every decoded JSON `null`) is a light userdata holding NULL
//!   (`mlua::Value::NULL`); it encodes as `null`, as does `nil`.
//! * A table is an array when all its keys are positive integers (`{}` is an object: `{}`).
//!   Sparse arrays (`max > items * ratio` and `max > safe`, defaults 2 and 10) are an error unless
//!   `encode_sparse_array(true)`, then objects; holes encode as `null`. Keys are converted with C's
//!   `(int)` cast, so huge keys behave as in Redis. A table whose metatable has a true
//!   `__is_cjson_array` field is encoded as an array of `#t` items, even when empty.
//! * Numbers are written with `%.14g` (precision settable 1..14); NaN/Inf are an error by default
//!   ("Cannot serialise number: must not be NaN or Inf"), `nan`/`inf` when
//!   `encode_invalid_numbers(true)`, `null` with `"null"`. Strings escape `"` `\` `/`, control
//!   characters and 0x7f; other bytes pass untouched.
//! * Decoding follows the C tokenizer byte for byte: `strtod` numbers (so hex, `inf`, `nan` and a
//!   leading `+` decode while `decode_invalid_numbers` is on, the default), the input ends at the
//!   first NUL byte, and error texts give the 1-based character, e.g. "Expected value but found
//!   invalid token at character 1", "Expected comma or array end but found T_OBJ_END at
//!   character 4".
//! * Nesting limits default to 1000 both ways ("Cannot serialise, excessive nesting (1001)",
//!   "Found too many nested data structures (1001) at character 1001"); past them, Lua 5.1's
//!   8000-slot C stack limit applies as in Redis.
//! * `decode_array_with_array_mt(true)` (from newer Redis; Redis 8.2.3 lacks it, but Redis' test
//!   suite uses it) gives decoded arrays a shared read-only metatable carrying
//!   `__is_cjson_array`, so `[]` round-trips; off by default.
//! * Configuration is per `cjson` table (shared by its functions, kept across calls);
//!   `cjson.new()` returns a fresh table with default settings.

use std::sync::{Arc, Mutex, MutexGuard};

use mlua::{Function, Lua, Table, Value};

use super::{add_fn, arg_err, as_number, c_f64_to_i32, registry, rt_err, type_name, Args, LibResult, Returns, Spine};
use super::{LibError, MAX_C_STACK};

#[derive(Debug, Clone, Copy)]
struct Config {
    encode_sparse_convert: i32,
    encode_sparse_ratio: i32,
    encode_sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    encode_invalid_numbers: i32,
    decode_invalid_numbers: i32,
    encode_keep_buffer: i32,
    encode_number_precision: i32,
    decode_array_with_array_mt: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encode_sparse_convert: 0,
            encode_sparse_ratio: 2,
            encode_sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: 1,
            encode_keep_buffer: 1,
            encode_number_precision: 14,
            decode_array_with_array_mt: 0,
        }
    }
}

type Shared = Arc<Mutex<Config>>;

fn lock(cfg: &Shared) -> MutexGuard<'_, Config> {
    cfg.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `cjson` table (also what `cjson.new()` returns).
pub(crate) fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg: Shared = Arc::new(Mutex::new(Config::default()));

    let c = cfg.clone();
    add_fn(lua, &t, "encode", move |lua, args| {
        if args.len() != 1 {
            return arg_err(1, "expected 1 argument");
        }
        let config = *lock(&c);
        let v = args.get(1)?.unwrap_or(Value::Nil);
        let mut enc = Encoder { cfg: config, out: Vec::new() };
        enc.encode(lua, v)?;
        Ok(Returns::one(Value::String(lua.create_string(enc.out)?)))
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "decode", move |lua, args| {
        if args.len() != 1 {
            return arg_err(1, "expected 1 argument");
        }
        let config = *lock(&c);
        let s = args.check_string(lua, 1)?;
        let bytes = s.as_bytes();
        let data: &[u8] = &bytes;
        if data.len() >= 2 && (data.first() == Some(&0) || data.get(1) == Some(&0)) {
            return rt_err("JSON parser does not support UTF-16 or UTF-32");
        }
        let mut p = Parser { data, pos: 0, cfg: config, tmp: Vec::new() };
        Ok(Returns::one(p.decode(lua)?))
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "decode_array_with_array_mt", move |lua, args| {
        arg_init(args, 1)?;
        let mut g = lock(&c);
        Ok(Returns::one(enum_option(lua, args, 1, &mut g.decode_array_with_array_mt, &["off", "on"])?))
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_sparse_array", move |lua, args| {
        arg_init(args, 3)?;
        let mut g = lock(&c);
        let mut r = Returns::new();
        r.push(lua, enum_option(lua, args, 1, &mut g.encode_sparse_convert, &["off", "on"])?)?;
        r.push(lua, integer_option(lua, args, 2, &mut g.encode_sparse_ratio, 0, i32::MAX)?)?;
        r.push(lua, integer_option(lua, args, 3, &mut g.encode_sparse_safe, 0, i32::MAX)?)?;
        Ok(r)
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_max_depth", move |lua, args| {
        arg_init(args, 1)?;
        Ok(Returns::one(integer_option(lua, args, 1, &mut lock(&c).encode_max_depth, 1, i32::MAX)?))
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "decode_max_depth", move |lua, args| {
        arg_init(args, 1)?;
        Ok(Returns::one(integer_option(lua, args, 1, &mut lock(&c).decode_max_depth, 1, i32::MAX)?))
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_number_precision", move |lua, args| {
        arg_init(args, 1)?;
        Ok(Returns::one(integer_option(lua, args, 1, &mut lock(&c).encode_number_precision, 1, 14)?))
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_keep_buffer", move |lua, args| {
        arg_init(args, 1)?;
        Ok(Returns::one(enum_option(lua, args, 1, &mut lock(&c).encode_keep_buffer, &["off", "on"])?))
    })?;
    let c = cfg.clone();
    add_fn(lua, &t, "encode_invalid_numbers", move |lua, args| {
        arg_init(args, 1)?;
        let mut g = lock(&c);
        Ok(Returns::one(enum_option(lua, args, 1, &mut g.encode_invalid_numbers, &["off", "on", "null"])?))
    })?;
    let c = cfg;
    add_fn(lua, &t, "decode_invalid_numbers", move |lua, args| {
        arg_init(args, 1)?;
        Ok(Returns::one(enum_option(lua, args, 1, &mut lock(&c).decode_invalid_numbers, &["off", "on"])?))
    })?;
    add_fn(lua, &t, "new", |lua, _args| Ok(Returns::one(Value::Table(open(lua)?))))?;
    t.raw_set("null", Value::NULL)?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// `json_arg_init`: at most `n` arguments.
fn arg_init(args: &Args, n: usize) -> LibResult<()> {
    if args.len() > n {
        return arg_err(n as i64 + 1, "found too many arguments");
    }
    Ok(())
}

/// `json_integer_option`.
fn integer_option(lua: &Lua, args: &Args, i: usize, setting: &mut i32, min: i32, max: i32) -> LibResult<Value> {
    if !args.is_none_or_nil(i)? {
        // `int value = luaL_checkinteger(...)`: the 64-bit integer is truncated to int.
        let value = args.check_integer(lua, i)? as i32;
        if !(min <= value && value <= max) {
            return arg_err(1, format!("expected integer between {min} and {max}"));
        }
        *setting = value;
    }
    Ok(Value::Integer(i64::from(*setting)))
}

/// `json_enum_option` (every option here accepts booleans for its first two values).
fn enum_option(lua: &Lua, args: &Args, i: usize, setting: &mut i32, options: &[&str]) -> LibResult<Value> {
    match args.get(i)? {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = i32::from(b),
        Some(_) => {
            let name = args.check_string(lua, i)?;
            let bytes = name.as_bytes();
            // luaL_checkoption compares C strings.
            let cname = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
            match options.iter().position(|o| o.as_bytes() == cname) {
                Some(pos) => *setting = pos as i32,
                None => {
                    let mut msg = b"invalid option '".to_vec();
                    msg.extend_from_slice(cname);
                    msg.push(b'\'');
                    return arg_err(i as i64, msg);
                }
            }
        }
    }
    if *setting == 0 || *setting == 1 {
        Ok(Value::Boolean(*setting == 1))
    } else {
        let name = options.get(*setting as usize).copied().unwrap_or("");
        Ok(Value::String(lua.create_string(name)?))
    }
}

// ===== Numbers =====

/// Appends C's `printf("%.<prec>g", x)`.
fn push_g(out: &mut Vec<u8>, x: f64, prec: i32) {
    // Integers with at most `prec` digits print as themselves.
    if x.fract() == 0.0 && x.abs() < 10f64.powi(prec.max(1)) && !(x == 0.0 && x.is_sign_negative()) {
        out.extend_from_slice((x as i64).to_string().as_bytes());
        return;
    }
    out.extend_from_slice(fmt_g(x, prec).as_bytes());
}

/// C's `printf("%.<prec>g", x)` (glibc).
pub(crate) fn fmt_g(x: f64, prec: i32) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let p = prec.max(1) as usize;
    let sci = format!("{:.*e}", p - 1, x);
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    let mut out = String::with_capacity(p + 8);
    if x < 0.0 {
        out.push('-');
    }
    let trim = |d: &[u8]| -> String {
        let end = d.iter().rposition(|&c| c != b'0').map_or(0, |i| i + 1);
        String::from_utf8_lossy(d.get(..end).unwrap_or(&[])).into_owned()
    };
    if exp < -4 || exp >= p as i64 {
        out.push(char::from(digits.first().copied().unwrap_or(b'0')));
        let frac = trim(digits.get(1..).unwrap_or(&[]));
        if !frac.is_empty() {
            out.push('.');
            out.push_str(&frac);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
    } else if exp >= 0 {
        let split = (exp as usize + 1).min(digits.len());
        out.push_str(&String::from_utf8_lossy(digits.get(..split).unwrap_or(&[])));
        let frac = trim(digits.get(split..).unwrap_or(&[]));
        if !frac.is_empty() {
            out.push('.');
            out.push_str(&frac);
        }
    } else {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&trim(&digits));
    }
    out
}

fn at(data: &[u8], i: usize) -> u8 {
    data.get(i).copied().unwrap_or(0)
}

fn hex_val(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

/// glibc `strtod` on the NUL-terminated `data` from `start`: the value and where it stopped
/// (`start` when nothing was converted).
pub(crate) fn strtod(data: &[u8], start: usize) -> (f64, usize) {
    let mut i = start;
    while matches!(at(data, i), b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if matches!(at(data, i), b'+' | b'-') {
        neg = at(data, i) == b'-';
        i += 1;
    }
    let signed = |v: f64| if neg { -v } else { v };
    let lower3: Vec<u8> = (0..3).map(|k| at(data, i + k).to_ascii_lowercase()).collect();
    if lower3 == b"inf" {
        let rest: Vec<u8> = (3..8).map(|k| at(data, i + k).to_ascii_lowercase()).collect();
        let end = if rest == b"inity" { i + 8 } else { i + 3 };
        return (signed(f64::INFINITY), end);
    }
    if lower3 == b"nan" {
        let mut end = i + 3;
        if at(data, end) == b'(' {
            let mut k = end + 1;
            while at(data, k).is_ascii_alphanumeric() || at(data, k) == b'_' {
                k += 1;
            }
            if at(data, k) == b')' {
                end = k + 1;
            }
        }
        return (signed(f64::NAN), end);
    }
    if at(data, i) == b'0' && at(data, i + 1) | 0x20 == b'x' {
        let h = i + 2;
        let has_digit = hex_val(at(data, h)).is_some() || (at(data, h) == b'.' && hex_val(at(data, h + 1)).is_some());
        if has_digit {
            let (v, end) = hex_float(data, h);
            return (signed(v), end);
        }
        // Just "0": the 'x' is left over.
        return (signed(0.0), i + 1);
    }
    // Decimal.
    let mut k = i;
    let mut text = String::new();
    let mut ndigits = 0;
    while at(data, k).is_ascii_digit() {
        text.push(char::from(at(data, k)));
        k += 1;
        ndigits += 1;
    }
    if at(data, k) == b'.' {
        let mut f = k + 1;
        let mut frac = String::new();
        while at(data, f).is_ascii_digit() {
            frac.push(char::from(at(data, f)));
            f += 1;
            ndigits += 1;
        }
        if ndigits > 0 {
            text.push('.');
            text.push_str(&frac);
            k = f;
        }
    }
    if ndigits == 0 {
        return (0.0, start);
    }
    if at(data, k) | 0x20 == b'e' {
        let mut e = k + 1;
        let mut exp = String::from("e");
        if matches!(at(data, e), b'+' | b'-') {
            exp.push(char::from(at(data, e)));
            e += 1;
        }
        if at(data, e).is_ascii_digit() {
            while at(data, e).is_ascii_digit() {
                exp.push(char::from(at(data, e)));
                e += 1;
            }
            text.push_str(&exp);
            k = e;
        }
    }
    match text.parse::<f64>() {
        Ok(v) => (signed(v), k),
        Err(_) => (0.0, start),
    }
}

/// A hexadecimal float body (after "0x"), correctly rounded.
fn hex_float(data: &[u8], mut i: usize) -> (f64, usize) {
    let mut mant: u64 = 0;
    let mut exp2: i64 = 0;
    let mut sticky = false;
    let mut seen_point = false;
    loop {
        let c = at(data, i);
        if c == b'.' && !seen_point {
            seen_point = true;
            i += 1;
            continue;
        }
        let Some(d) = hex_val(c) else { break };
        if mant >> 60 == 0 {
            mant = (mant << 4) | u64::from(d);
            if seen_point {
                exp2 -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                exp2 += 4;
            }
        }
        i += 1;
    }
    if at(data, i) | 0x20 == b'p' {
        let mut k = i + 1;
        let mut eneg = false;
        if matches!(at(data, k), b'+' | b'-') {
            eneg = at(data, k) == b'-';
            k += 1;
        }
        if at(data, k).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(data, k).is_ascii_digit() {
                e = (e * 10 + i64::from(at(data, k) - b'0')).min(1 << 40);
                k += 1;
            }
            exp2 += if eneg { -e } else { e };
            i = k;
        }
    }
    (compose(mant, exp2, sticky), i)
}

/// `mant * 2^exp2` (plus a sticky tail) rounded to nearest-even.
fn compose(mant: u64, exp2: i64, sticky: bool) -> f64 {
    if mant == 0 {
        return 0.0;
    }
    let lz = i64::from(mant.leading_zeros());
    let m = u128::from(mant << lz);
    let e = exp2 - lz; // value = m * 2^e, m in [2^63, 2^64)
    let big_e = e + 63;
    if big_e > 1023 {
        return f64::INFINITY;
    }
    let shift = if big_e >= -1022 { 11 } else { 11 + (-1022 - big_e) };
    if shift > 65 {
        return 0.0;
    }
    let shift = shift as u32;
    let mut kept = m >> shift;
    let rem = m & ((1u128 << shift) - 1);
    let half = 1u128 << (shift - 1);
    if rem > half || (rem == half && (sticky || kept & 1 == 1)) {
        kept += 1;
    }
    if big_e >= -1022 {
        let mut be = big_e;
        if kept >> 53 != 0 {
            kept >>= 1;
            be += 1;
            if be > 1023 {
                return f64::INFINITY;
            }
        }
        let bits = (((be + 1023) as u64) << 52) | ((kept as u64) & ((1u64 << 52) - 1));
        f64::from_bits(bits)
    } else {
        f64::from_bits(kept as u64)
    }
}

// ===== Encoding =====

fn encode_err<T>(what: &str, reason: &str) -> LibResult<T> {
    rt_err(format!("Cannot serialise {what}: {reason}"))
}

/// Tables with at most this many entries have them copied out while being scanned...
const SMALL_TABLE: usize = 64;
/// ...as long as all the copies held at once stay under this many values (mlua references).
const COPY_BUDGET: usize = 2048;

/// The table being encoded at one nesting level.
#[derive(Debug)]
enum Frame {
    /// An array read with `rawgeti` from the table.
    Array { len: i64, next: i64, used: i64 },
    /// An array whose items were copied out.
    Items { items: std::vec::IntoIter<Value>, first: bool, used: i64, held: usize },
    /// An object read with `next` from the table.
    Object { first: bool, used: i64 },
    /// An object whose pairs were copied out.
    Pairs { pairs: std::vec::IntoIter<(Value, Value)>, first: bool, used: i64, held: usize },
}

/// What a scan of a table's pairs found.
#[derive(Debug)]
struct Scan {
    /// The array length as `lua_array_length` gives it (-1: an object).
    len: i64,
    /// No value is a table: the table can be written without descending.
    leaf: bool,
    /// All the pairs, when the table is small enough.
    pairs: Option<Vec<(Value, Value)>>,
}

#[derive(Debug)]
struct Encoder {
    cfg: Config,
    out: Vec<u8>,
}

impl Encoder {
    fn string(&mut self, s: &[u8]) {
        self.out.reserve(s.len() + 2);
        self.out.push(b'"');
        for &b in s {
            match b {
                b'"' => self.out.extend_from_slice(b"\\\""),
                b'\\' => self.out.extend_from_slice(b"\\\\"),
                b'/' => self.out.extend_from_slice(b"\\/"),
                0x08 => self.out.extend_from_slice(b"\\b"),
                b'\t' => self.out.extend_from_slice(b"\\t"),
                b'\n' => self.out.extend_from_slice(b"\\n"),
                0x0c => self.out.extend_from_slice(b"\\f"),
                b'\r' => self.out.extend_from_slice(b"\\r"),
                0..=0x1f | 0x7f => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    let hi = HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0');
                    let lo = HEX.get(usize::from(b & 15)).copied().unwrap_or(b'0');
                    self.out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hi, lo]);
                }
                _ => self.out.push(b),
            }
        }
        self.out.push(b'"');
    }

    fn number(&mut self, n: f64) -> LibResult<()> {
        match self.cfg.encode_invalid_numbers {
            0 => {
                if !n.is_finite() {
                    return encode_err("number", "must not be NaN or Inf");
                }
            }
            1 => {
                if n.is_nan() {
                    self.out.extend_from_slice(b"nan");
                    return Ok(());
                }
            }
            _ => {
                if !n.is_finite() {
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
            }
        }
        push_g(&mut self.out, n, self.cfg.encode_number_precision);
        Ok(())
    }

    /// Anything but a table.
    fn scalar(&mut self, v: &Value) -> LibResult<()> {
        match v {
            Value::String(s) => self.string(&s.as_bytes()),
            Value::Integer(_) | Value::Number(_) => self.number(as_number(v).unwrap_or(0.0))?,
            Value::Boolean(true) => self.out.extend_from_slice(b"true"),
            Value::Boolean(false) => self.out.extend_from_slice(b"false"),
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            other => return encode_err(type_name(other), "type not supported"),
        }
        Ok(())
    }

    fn key(&mut self, k: &Value) -> LibResult<()> {
        match k {
            Value::Integer(_) | Value::Number(_) => {
                self.out.push(b'"');
                self.number(as_number(k).unwrap_or(0.0))?;
                self.out.extend_from_slice(b"\":");
            }
            Value::String(s) => {
                self.string(&s.as_bytes());
                self.out.push(b':');
            }
            other => return encode_err(type_name(other), "table key must be a number or string"),
        }
        Ok(())
    }

    /// One pass over the pairs: `lua_array_length`, and whether a value is a table; copies the
    /// pairs of a small table (at most `copy` of them).
    fn scan(&self, t: &Table, copy: usize) -> LibResult<Scan> {
        let mut max: i32 = 0;
        let mut items: i32 = 0;
        let mut array = true;
        let mut leaf = true;
        let mut pairs = Some(Vec::new());
        t.for_each(|k: Value, v: Value| {
            if array {
                match as_number(&k) {
                    Some(kf) if kf != 0.0 && kf.floor() == kf && kf >= 1.0 => {
                        if kf > f64::from(max) {
                            max = c_f64_to_i32(kf);
                        }
                        items = items.wrapping_add(1);
                    }
                    _ => array = false,
                }
            }
            leaf &= !matches!(v, Value::Table(_));
            if let Some(p) = &mut pairs {
                if p.len() < copy {
                    p.push((k, v));
                } else {
                    pairs = None;
                }
            }
            Ok(())
        })?;
        let cfg = &self.cfg;
        let mut len = if array { i64::from(max) } else { -1 };
        if array
            && cfg.encode_sparse_ratio > 0
            && max > items.wrapping_mul(cfg.encode_sparse_ratio)
            && max > cfg.encode_sparse_safe
        {
            if cfg.encode_sparse_convert == 0 {
                return encode_err("table", "excessively sparse array");
            }
            len = -1;
        }
        Ok(Scan { len, leaf, pairs })
    }

    /// The items 1..=len of an array from its pairs (all positive integer keys).
    fn items_by_index(len: i64, pairs: Vec<(Value, Value)>) -> Vec<Value> {
        let mut items = vec![Value::Nil; usize::try_from(len).unwrap_or(0)];
        for (k, v) in pairs {
            let idx = as_number(&k).map_or(0, |n| n as usize);
            if let Some(slot) = idx.checked_sub(1).and_then(|i| items.get_mut(i)) {
                *slot = v;
            }
        }
        items
    }

    /// Starts encoding table `t` at nesting `depth` with `used` C stack slots in use. A table
    /// without nested tables is written at once (`None`); otherwise its frame is returned.
    fn open_table(&mut self, t: &Table, depth: usize, used: i64, budget: usize) -> LibResult<Option<Frame>> {
        if depth as i64 > i64::from(self.cfg.encode_max_depth) || used + 3 > MAX_C_STACK {
            return rt_err(format!("Cannot serialise, excessive nesting ({depth})"));
        }
        let as_array = match t.metatable() {
            Some(mt) => !matches!(mt.get::<Value>("__is_cjson_array")?, Value::Nil | Value::Boolean(false)),
            None => false,
        };
        if as_array {
            self.out.push(b'[');
            return Ok(Some(Frame::Array { len: t.raw_len() as i64, next: 1, used }));
        }
        let scan = self.scan(t, SMALL_TABLE.min(budget / 2))?;
        if scan.len > 0 {
            self.out.push(b'[');
            if let Some(pairs) = scan.pairs {
                let items = Self::items_by_index(scan.len, pairs);
                if scan.leaf {
                    for (i, v) in items.iter().enumerate() {
                        if i > 0 {
                            self.out.push(b',');
                        }
                        self.scalar(v)?;
                    }
                    self.out.push(b']');
                    return Ok(None);
                }
                let held = items.len();
                return Ok(Some(Frame::Items { items: items.into_iter(), first: true, used, held }));
            }
            if scan.leaf {
                for i in 1..=scan.len {
                    if i > 1 {
                        self.out.push(b',');
                    }
                    self.scalar(&t.raw_get::<Value>(i)?)?;
                }
                self.out.push(b']');
                return Ok(None);
            }
            return Ok(Some(Frame::Array { len: scan.len, next: 1, used }));
        }
        self.out.push(b'{');
        if let Some(pairs) = scan.pairs {
            if scan.leaf {
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.key(k)?;
                    self.scalar(v)?;
                }
                self.out.push(b'}');
                return Ok(None);
            }
            let held = pairs.len() * 2;
            return Ok(Some(Frame::Pairs { pairs: pairs.into_iter(), first: true, used, held }));
        }
        if scan.leaf {
            let mut failure = None;
            let mut first = true;
            let walk = t.for_each(|k: Value, v: Value| {
                if !first {
                    self.out.push(b',');
                }
                first = false;
                if let Err(e) = self.key(&k).and_then(|()| self.scalar(&v)) {
                    failure = Some(e);
                    return Err(mlua::Error::RuntimeError(String::new()));
                }
                Ok(())
            });
            if let Some(e) = failure {
                return Err(e);
            }
            walk?;
            self.out.push(b'}');
            return Ok(None);
        }
        Ok(Some(Frame::Object { first: true, used }))
    }

    fn encode(&mut self, lua: &Lua, value: Value) -> LibResult<()> {
        let mut next_fn: Option<Function> = None;
        let mut spine = Spine::new();
        let mut frames: Vec<Frame> = Vec::new();
        let mut held: usize = 0;
        let mut cur: Option<Table> = None;
        let mut cur_key = Value::Nil;
        let mut pending = Some((value, 1i64));
        loop {
            if let Some((v, used)) = pending.take() {
                if let Value::Table(t) = v {
                    let budget = COPY_BUDGET.saturating_sub(held);
                    if let Some(frame) = self.open_table(&t, frames.len() + 1, used, budget)? {
                        held += match &frame {
                            Frame::Items { held, .. } | Frame::Pairs { held, .. } => *held,
                            _ => 0,
                        };
                        if let Some(parent) = cur.take() {
                            spine.save(lua, frames.len(), Value::Table(parent), std::mem::take(&mut cur_key))?;
                        }
                        cur = Some(t);
                        cur_key = Value::Nil;
                        frames.push(frame);
                    }
                } else {
                    self.scalar(&v)?;
                }
            }
            let (Some(frame), Some(t)) = (frames.last_mut(), cur.as_ref()) else {
                return Ok(());
            };
            let done = match frame {
                Frame::Array { len, next: idx, used } => {
                    if *idx > *len {
                        self.out.push(b']');
                        true
                    } else {
                        if *idx > 1 {
                            self.out.push(b',');
                        }
                        let v: Value = t.raw_get(*idx)?;
                        *idx += 1;
                        pending = Some((v, *used + 1));
                        false
                    }
                }
                Frame::Items { items, first, used, .. } => match items.next() {
                    None => {
                        self.out.push(b']');
                        true
                    }
                    Some(v) => {
                        if !*first {
                            self.out.push(b',');
                        }
                        *first = false;
                        pending = Some((v, *used + 1));
                        false
                    }
                },
                Frame::Object { first, used } => {
                    let next = match &next_fn {
                        Some(f) => f,
                        None => next_fn.insert(registry(lua)?.raw_get("next")?),
                    };
                    let (k, v): (Value, Value) = next.call((t.clone(), cur_key.clone()))?;
                    if matches!(k, Value::Nil) {
                        self.out.push(b'}');
                        true
                    } else {
                        if !*first {
                            self.out.push(b',');
                        }
                        *first = false;
                        let used = *used;
                        self.key(&k)?;
                        cur_key = k;
                        pending = Some((v, used + 2));
                        false
                    }
                }
                Frame::Pairs { pairs, first, used, .. } => match pairs.next() {
                    None => {
                        self.out.push(b'}');
                        true
                    }
                    Some((k, v)) => {
                        if !*first {
                            self.out.push(b',');
                        }
                        *first = false;
                        let used = *used;
                        self.key(&k)?;
                        pending = Some((v, used + 2));
                        false
                    }
                },
            };
            if done {
                if let Some(Frame::Items { held: h, .. } | Frame::Pairs { held: h, .. }) = frames.pop() {
                    held -= h;
                }
                if frames.is_empty() {
                    return Ok(());
                }
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

// ===== Decoding =====

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Number(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(msg) => msg,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Token {
    tok: Tok,
    index: usize,
}

fn parse_err(expected: &str, t: Token) -> LibError {
    LibError::Runtime(
        format!("Expected {expected} but found {} at character {}", t.tok.name(), t.index + 1).into_bytes(),
    )
}

#[derive(Debug)]
enum DFrame {
    Array { idx: i64, used: i64 },
    Object { used: i64 },
}

#[derive(Debug)]
struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    cfg: Config,
    /// The text of the last string token.
    tmp: Vec<u8>,
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        at(self.data, i)
    }

    fn starts_with(&self, word: &[u8]) -> bool {
        word.iter().enumerate().all(|(k, &c)| self.at(self.pos + k) == c)
    }

    /// `json_is_invalid_number`: forms strtod takes that strict JSON does not.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        } else if c <= b'9' {
            return false;
        }
        let word: Vec<u8> = (0..3).map(|k| self.at(p + k).to_ascii_lowercase()).collect();
        word == b"inf" || word == b"nan"
    }

    fn number_token(&mut self) -> Tok {
        let (v, end) = strtod(self.data, self.pos);
        if end == self.pos {
            return Tok::Error("invalid number");
        }
        self.pos = end;
        Tok::Number(v)
    }

    fn hex4(&self, p: usize) -> Option<u32> {
        let mut v = 0;
        for k in 0..4 {
            v = (v << 4) | hex_val(self.at(p + k))?;
        }
        Some(v)
    }

    /// `\uXXXX` (and a surrogate pair) at `self.pos` into `tmp`.
    fn unicode_escape(&mut self) -> Option<()> {
        let mut cp = self.hex4(self.pos + 2)?;
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return None;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.pos + 8)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        if cp <= 0x7F {
            self.tmp.push(cp as u8);
        } else if cp <= 0x7FF {
            self.tmp.extend_from_slice(&[((cp >> 6) | 0xC0) as u8, ((cp & 0x3F) | 0x80) as u8]);
        } else if cp <= 0xFFFF {
            self.tmp.extend_from_slice(&[
                ((cp >> 12) | 0xE0) as u8,
                (((cp >> 6) & 0x3F) | 0x80) as u8,
                ((cp & 0x3F) | 0x80) as u8,
            ]);
        } else {
            self.tmp.extend_from_slice(&[
                ((cp >> 18) | 0xF0) as u8,
                (((cp >> 12) & 0x3F) | 0x80) as u8,
                (((cp >> 6) & 0x3F) | 0x80) as u8,
                ((cp & 0x3F) | 0x80) as u8,
            ]);
        }
        self.pos += len;
        Some(())
    }

    fn string_token(&mut self) -> Tok {
        self.pos += 1;
        self.tmp.clear();
        loop {
            let c = self.at(self.pos);
            if c == b'"' {
                break;
            }
            if c == 0 {
                return Tok::Error("unexpected end of string");
            }
            let mut out = c;
            if c == b'\\' {
                out = match self.at(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 0x0c,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape().is_some() {
                            continue;
                        }
                        return Tok::Error("invalid unicode escape code");
                    }
                    _ => return Tok::Error("invalid escape code"),
                };
                self.pos += 1;
            }
            self.tmp.push(out);
            self.pos += 1;
        }
        self.pos += 1;
        Tok::Str
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let single = match self.at(self.pos) {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(tok) = single {
            self.pos += 1;
            return Token { tok, index };
        }
        let c = self.at(self.pos);
        let tok = match c {
            0 => Tok::End,
            b'"' => self.string_token(),
            b'-' | b'0'..=b'9' => {
                if self.cfg.decode_invalid_numbers == 0 && self.is_invalid_number() {
                    Tok::Error("invalid number")
                } else {
                    self.number_token()
                }
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                if self.starts_with(b"true") {
                    self.pos += 4;
                    Tok::Bool(true)
                } else if self.starts_with(b"false") {
                    self.pos += 5;
                    Tok::Bool(false)
                } else if self.starts_with(b"null") {
                    self.pos += 4;
                    Tok::Null
                } else if self.cfg.decode_invalid_numbers != 0 && self.is_invalid_number() {
                    self.number_token()
                } else {
                    Tok::Error("invalid token")
                }
            }
            _ => Tok::Error("invalid token"),
        };
        // Errors point where the tokenizer stopped.
        let index = if matches!(tok, Tok::Error(_)) { self.pos } else { index };
        Token { tok, index }
    }

    /// An object key token and the colon after it.
    fn object_key(&mut self, lua: &Lua, t: Token) -> LibResult<Value> {
        if t.tok != Tok::Str {
            return Err(parse_err("object key string", t));
        }
        let key = Value::String(lua.create_string(&self.tmp)?);
        let colon = self.next_token();
        if colon.tok != Tok::Colon {
            return Err(parse_err("colon", colon));
        }
        Ok(key)
    }

    fn decode(&mut self, lua: &Lua) -> LibResult<Value> {
        let mut spine = Spine::new();
        let mut frames: Vec<DFrame> = Vec::new();
        let mut cur: Option<Table> = None;
        let mut cur_key = Value::Nil;
        let mut tok = self.next_token();
        loop {
            let used = match frames.last() {
                None => 1,
                Some(DFrame::Array { used, .. }) => used + 1,
                Some(DFrame::Object { used }) => used + 2,
            };
            let mut value = match tok.tok {
                Tok::Str => Value::String(lua.create_string(&self.tmp)?),
                Tok::Number(n) => Value::Number(n),
                Tok::Bool(b) => Value::Boolean(b),
                Tok::Null => Value::NULL,
                Tok::ObjBegin | Tok::ArrBegin => {
                    let is_obj = tok.tok == Tok::ObjBegin;
                    let depth = frames.len() + 1;
                    let slots = if is_obj { 3 } else { 2 };
                    if depth as i64 > i64::from(self.cfg.decode_max_depth) || used + slots > MAX_C_STACK {
                        return rt_err(format!(
                            "Found too many nested data structures ({depth}) at character {}",
                            self.pos
                        ));
                    }
                    let t = lua.create_table()?;
                    if !is_obj && self.cfg.decode_array_with_array_mt != 0 {
                        if used + 1 + 2 > MAX_C_STACK {
                            return rt_err("max lua stack reached");
                        }
                        let mt: Table = registry(lua)?.raw_get("array_mt")?;
                        t.set_metatable(Some(mt))?;
                    }
                    let next = self.next_token();
                    let empty = next.tok == if is_obj { Tok::ObjEnd } else { Tok::ArrEnd };
                    if empty {
                        Value::Table(t)
                    } else {
                        if let Some(parent) = cur.take() {
                            spine.save(lua, frames.len(), Value::Table(parent), std::mem::take(&mut cur_key))?;
                        }
                        cur = Some(t);
                        if is_obj {
                            frames.push(DFrame::Object { used });
                            cur_key = self.object_key(lua, next)?;
                            tok = self.next_token();
                        } else {
                            frames.push(DFrame::Array { idx: 1, used });
                            tok = next;
                        }
                        continue;
                    }
                }
                _ => return Err(parse_err("value", tok)),
            };
            // Hand the finished value to its container, closing containers as they end.
            loop {
                let Some(frame) = frames.last_mut() else {
                    let end = self.next_token();
                    if end.tok != Tok::End {
                        return Err(parse_err("the end", end));
                    }
                    return Ok(value);
                };
                let Some(t) = cur.as_ref() else {
                    return rt_err("BUG: no container");
                };
                let is_obj = matches!(frame, DFrame::Object { .. });
                match frame {
                    DFrame::Array { idx, .. } => {
                        t.raw_set(*idx, value)?;
                        *idx += 1;
                    }
                    DFrame::Object { .. } => t.raw_set(std::mem::take(&mut cur_key), value)?,
                }
                let next = self.next_token();
                let closer = if is_obj { Tok::ObjEnd } else { Tok::ArrEnd };
                if next.tok == closer {
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
                    continue;
                }
                if next.tok != Tok::Comma {
                    return Err(parse_err(if is_obj { "comma or object end" } else { "comma or array end" }, next));
                }
                tok = self.next_token();
                if is_obj {
                    cur_key = self.object_key(lua, tok)?;
                    tok = self.next_token();
                }
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{lua, run};
    use super::{fmt_g, strtod};

    #[test]
    fn number_formatting() {
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(100.0, 14), "100");
        assert_eq!(fmt_g(1e15, 14), "1e+15");
        assert_eq!(fmt_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(0.00001, 14), "1e-05");
        assert_eq!(fmt_g(-2.5, 1), "-2");
        assert_eq!(fmt_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(fmt_g(-0.0, 14), "-0");
        assert_eq!(fmt_g(5e-324, 14), "4.9406564584125e-324");
    }

    #[test]
    fn strtod_forms() {
        assert_eq!(strtod(b"1.5x", 0), (1.5, 3));
        assert_eq!(strtod(b"-", 0).1, 0);
        assert_eq!(strtod(b"0x10", 0), (16.0, 4));
        assert_eq!(strtod(b"0x", 0), (0.0, 1));
        assert_eq!(strtod(b"0x1.8p1", 0), (3.0, 7));
        assert_eq!(strtod(b"1e", 0), (1.0, 1));
        assert_eq!(strtod(b"Infinity", 0), (f64::INFINITY, 8));
        assert_eq!(strtod(b"info", 0), (f64::INFINITY, 3));
        assert!(strtod(b"nan(12)", 0).0.is_nan());
        assert_eq!(strtod(b"nan(12)", 0).1, 7);
        assert_eq!(strtod(b"1e999", 0).0, f64::INFINITY);
    }

    #[test]
    fn redis_json_numeric_decoding() {
        let lua = lua();
        assert_eq!(
            run(&lua, "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')"),
            "true 0 -5000 -1 0.0003 1023.2 0"
        );
    }

    #[test]
    fn redis_json_string_decoding() {
        let lua = lua();
        assert_eq!(
            run(&lua, "local d = cjson.decode('{\"keya\": \"a\", \"keyb\": \"b\"}') return d.keya .. d.keyb"),
            "true ab"
        );
    }

    #[test]
    fn redis_empty_array_decoding() {
        let lua = lua();
        assert_eq!(run(&lua, "return cjson.encode(cjson.decode('[]'))"), "true {}");
        assert_eq!(
            run(&lua, "cjson.decode_array_with_array_mt(false) return cjson.encode(cjson.decode('{\"item\": []}'))"),
            "true {\"item\":{}}"
        );
        assert_eq!(
            run(&lua, "cjson.decode_array_with_array_mt(true) return cjson.encode(cjson.decode('[]'))"),
            "true []"
        );
        assert_eq!(
            run(&lua, "cjson.decode_array_with_array_mt(true) return cjson.encode(cjson.decode('{\"item\": []}'))"),
            "true {\"item\":[]}"
        );
        assert_eq!(
            run(&lua, "cjson.decode_array_with_array_mt(true) local t = cjson.decode('[1, 2]') t[1] = nil t[2] = nil return cjson.encode(t)"),
            "true []"
        );
        assert_eq!(
            run(&lua, "cjson.decode_array_with_array_mt(false) local t = cjson.decode('[1, 2]') t[1] = nil t[2] = nil return cjson.encode(t)"),
            "true {}"
        );
        let ro = run(
            &lua,
            "cjson.decode_array_with_array_mt(true) local t = cjson.decode('[]') \
             getmetatable(t).__is_cjson_array = function() return 1 end return cjson.encode(t)",
        );
        assert!(ro.starts_with("false ") && ro.ends_with("Attempt to modify a readonly table"), "{ro}");
    }

    #[test]
    fn redis_json_smoke_test() {
        let lua = lua();
        let code = r#"
            local some_map = { s1="Some string", n1=100, a1={"Some","String","Array"}, nil1=nil, b1=true, b2=false}
            local encoded = cjson.encode(some_map)
            local decoded = cjson.decode(encoded)
            assert(table.concat(some_map) == table.concat(decoded))
            cjson.encode_keep_buffer(false)
            encoded = cjson.encode(some_map)
            decoded = cjson.decode(encoded)
            assert(table.concat(some_map) == table.concat(decoded))
            local table1 = {one="one", [1]="one"}
            encoded = cjson.encode(table1)
            decoded = cjson.decode(encoded)
            assert(decoded["one"] == table1["one"])
            assert(decoded["1"] == table1[1])
            local array1 = {[1]="one", [2]="two"}
            encoded = cjson.encode(array1)
            decoded = cjson.decode(encoded)
            assert(table.concat(array1) == table.concat(decoded))
            local invalid_map = {}
            invalid_map[false] = "false"
            local ok, encoded = pcall(cjson.encode, invalid_map)
            assert(ok == false)
            cjson.encode_max_depth(1)
            ok, encoded = pcall(cjson.encode, some_map)
            assert(ok == false)
            cjson.decode_max_depth(1)
            ok, decoded = pcall(cjson.decode, '{"obj": {"array": [1,2,3,4]}}')
            assert(ok == false)
            ok, encoded = pcall(cjson.encode, {num1=0/0})
            assert(ok == false)
            cjson.encode_invalid_numbers(true)
            ok, encoded = pcall(cjson.encode, {num1=0/0})
            assert(ok == true)
            cjson.decode_max_depth(1000)
            cjson.encode_max_depth(1000)
            cjson.encode_invalid_numbers(false)
            return 'ok'
        "#;
        assert_eq!(run(&lua, code), "true ok");
    }

    #[test]
    fn encoding() {
        let lua = lua();
        assert_eq!(run(&lua, "return cjson.encode({1,2,3})"), "true [1,2,3]");
        assert_eq!(run(&lua, "return cjson.encode({})"), "true {}");
        assert_eq!(run(&lua, "return cjson.encode({[1]=1,[3]=3})"), "true [1,null,3]");
        assert_eq!(run(&lua, "return cjson.encode('a/\"\\1\\127')"), "true \"a\\/\\\"\\u0001\\u007f\"");
        assert_eq!(run(&lua, "return cjson.encode({a=cjson.null, b=0.1})").len(), "true {\"a\":null,\"b\":0.1}".len());
        assert_eq!(
            run(&lua, "return cjson.encode(function() end)"),
            "false Cannot serialise function: type not supported"
        );
        assert_eq!(
            run(&lua, "return cjson.encode({[1000]=1})"),
            "false Cannot serialise table: excessively sparse array"
        );
        assert_eq!(run(&lua, "return cjson.encode(1/0)"), "false Cannot serialise number: must not be NaN or Inf");
        assert_eq!(
            run(&lua, "local t = {} t[1] = t return cjson.encode(t)"),
            "false Cannot serialise, excessive nesting (1001)"
        );
        assert_eq!(run(&lua, "return cjson.encode()"), "false bad argument #1 to 'encode' (expected 1 argument)");
    }

    #[test]
    fn decoding_errors() {
        let lua = lua();
        assert_eq!(
            run(&lua, "return cjson.decode('x')"),
            "false Expected value but found invalid token at character 1"
        );
        assert_eq!(run(&lua, "return cjson.decode('[1,}')"), "false Expected value but found T_OBJ_END at character 4");
        assert_eq!(run(&lua, "return cjson.decode('')"), "false Expected value but found T_END at character 1");
        assert_eq!(
            run(&lua, "return cjson.decode('\"abc')"),
            "false Expected value but found unexpected end of string at character 5"
        );
        assert_eq!(
            run(&lua, "return cjson.decode(string.rep('[', 1001))"),
            "false Found too many nested data structures (1001) at character 1001"
        );
        assert_eq!(
            run(&lua, "return cjson.decode('[1 2]')"),
            "false Expected comma or array end but found T_NUMBER at character 4"
        );
    }

    #[test]
    fn decoding_values() {
        let lua = lua();
        assert_eq!(run(&lua, "return cjson.decode('null') == cjson.null"), "true true");
        assert_eq!(run(&lua, "return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')"), "true é😀");
        assert_eq!(run(&lua, "return cjson.decode('0x10'), cjson.decode('+1'), cjson.decode(' 5 ')"), "true 16 1 5");
    }

    #[test]
    fn config_functions() {
        let lua = lua();
        assert_eq!(run(&lua, "return cjson.encode_sparse_array()"), "true false 2 10");
        assert_eq!(run(&lua, "return cjson.encode_invalid_numbers('null')"), "true null");
        assert_eq!(
            run(&lua, "return cjson.encode_max_depth(0)"),
            "false bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)"
        );
        assert_eq!(
            run(&lua, "return cjson.encode_keep_buffer('yes')"),
            "false bad argument #1 to 'encode_keep_buffer' (invalid option 'yes')"
        );
        assert_eq!(
            run(&lua, "return cjson.encode_number_precision(1, 2)"),
            "false bad argument #2 to 'encode_number_precision' (found too many arguments)"
        );
    }
}
