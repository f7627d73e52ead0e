//! `struct`: Roberto Ierusalimschy's struct library as Redis bundles it: `pack unpack size`.
//!
//! The format is read as a C string (it ends at the first NUL byte), one option at a time:
//!
//! * `>` big endian, `<` little endian (the default, as on x86-64), `![n]` maximum alignment `n`
//!   (default 8; "alignment %d is not a power of 2"), space ignored.
//! * `b B` 1 byte, `h H` 2, `l L` 8, `T` 8 (size_t), `i[n] I[n]` n bytes (default 4; "integral size
//!   %d is larger than limit of 32"), lower case signed; `f` float, `d` double; `c[n]` n chars
//!   (default 1; `c0` takes the whole string when packing and the previous result as length when
//!   unpacking: "format 'c0' needs a previous size"); `s` zero-terminated string; `x` one zero
//!   byte of padding. Anything else is "bad argument #1 to 'pack' (invalid format option 'z')";
//!   digit overflow is "integral size overflow".
//! * Integers are packed from the number as C's `(unsigned long)` / `(long)` conversions give it,
//!   only 8 significant bytes exist (wider integers get zero bytes), and unpacking sign-extends
//!   with the x86 shift rules the C code relies on.
//! * `unpack(fmt, data [, pos])` returns the values then the next position (1-based); errors are
//!   "data string too short" (argument 2), "offset must be 1 or greater", "unfinished string in
//!   data", "stack overflow (too many results)".
//! * `size(fmt)`: "option 's' has no fixed size", "option 'c0' has no fixed size"; unknown letters
//!   and digits count as size 0 there.

use mlua::{Lua, Table, Value};

use super::{add_fn, arg_err, c_f64_to_i64, c_f64_to_u64, rt_err, to_number, Args, LibResult, Returns, MAX_C_STACK};

const MAXINTSIZE: i32 = 32;
const MAXALIGN: i32 = 8;

#[derive(Debug, Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header { little: true, align: 1 }
    }
}

/// The format as a C string.
#[derive(Debug)]
struct Fmt<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Fmt<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Fmt { bytes: bytes.get(..end).unwrap_or(&[]), pos: 0 }
    }

    fn next_opt(&mut self) -> Option<u8> {
        let c = self.bytes.get(self.pos).copied()?;
        self.pos += 1;
        Some(c)
    }

    fn peek_digit(&self) -> Option<i32> {
        self.bytes.get(self.pos).filter(|c| c.is_ascii_digit()).map(|c| i32::from(c - b'0'))
    }

    /// `getnum`.
    fn getnum(&mut self, default: i32) -> LibResult<i32> {
        if self.peek_digit().is_none() {
            return Ok(default);
        }
        let mut a: i32 = 0;
        while let Some(d) = self.peek_digit() {
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return rt_err("integral size overflow");
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a)
    }

    /// `optsize`.
    fn optsize(&mut self, opt: u8) -> LibResult<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.getnum(1)? as usize,
            b'i' | b'I' => {
                let sz = self.getnum(4)?;
                if sz > MAXINTSIZE {
                    return rt_err(format!("integral size {sz} is larger than limit of {MAXINTSIZE}"));
                }
                sz as usize
            }
            _ => 0,
        })
    }

    /// `controloptions`.
    fn control(&mut self, opt: u8, h: &mut Header) -> LibResult<()> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.getnum(MAXALIGN)?;
                if !(a > 0 && a & (a - 1) == 0) {
                    return rt_err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a as usize;
            }
            _ => {
                let mut msg = b"invalid format option '".to_vec();
                msg.push(opt);
                msg.push(b'\'');
                return arg_err(1, msg);
            }
        }
        Ok(())
    }
}

/// `gettoalign`: padding before an item of `size` bytes at offset `len`.
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    size.wrapping_sub(len & size.wrapping_sub(1)) & size.wrapping_sub(1)
}

fn is_integer_opt(opt: u8) -> bool {
    matches!(opt, b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I')
}

fn pack(lua: &Lua, args: Args) -> LibResult<Returns> {
    let fmt_str = args.check_string(lua, 1)?;
    // b_pack pushes a nil to separate its arguments from the string buffer: one argument too
    // few is "got nil", not "got no value".
    let args = args.with_nil_mark();
    let fmt_bytes = fmt_str.as_bytes();
    let mut fmt = Fmt::new(&fmt_bytes);
    let mut h = Header::default();
    let mut arg = 2;
    let mut total: usize = 0;
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = fmt.next_opt() {
        let mut size = fmt.optsize(opt)?;
        let toalign = gettoalign(total, &h, opt, size);
        total = total.wrapping_add(toalign);
        out.resize(out.len() + toalign, 0);
        match opt {
            _ if is_integer_opt(opt) => {
                let n = args.check_number(lua, arg)?;
                arg += 1;
                let mut value: u64 = if n < 0.0 { c_f64_to_i64(n) as u64 } else { c_f64_to_u64(n) };
                let mut buf = vec![0u8; size];
                if h.little {
                    for b in buf.iter_mut() {
                        *b = value as u8;
                        value >>= 8;
                    }
                } else {
                    for b in buf.iter_mut().rev() {
                        *b = value as u8;
                        value >>= 8;
                    }
                }
                out.extend_from_slice(&buf);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = args.check_number(lua, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little { f.to_le_bytes() } else { f.to_be_bytes() });
            }
            b'd' => {
                let d = args.check_number(lua, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.little { d.to_le_bytes() } else { d.to_be_bytes() });
            }
            b'c' | b's' => {
                let s = args.check_string(lua, arg)?;
                arg += 1;
                let bytes = s.as_bytes();
                if size == 0 {
                    size = bytes.len();
                }
                // The C code has already moved on to the next argument when it checks.
                let Some(part) = bytes.get(..size) else {
                    return arg_err(arg as i64, "string too short");
                };
                out.extend_from_slice(part);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => fmt.control(opt, &mut h)?,
        }
        total = total.wrapping_add(size);
    }
    Ok(Returns::one(Value::String(lua.create_string(out)?)))
}

/// `getinteger`.
fn getinteger(bytes: &[u8], little: bool, signed: bool, size: usize) -> f64 {
    let fold = |l: u64, b: &u8| (l << 8) | u64::from(*b);
    let l = if little { bytes.iter().rev().fold(0, fold) } else { bytes.iter().fold(0, fold) };
    if !signed {
        return l as f64;
    }
    // `~0 << (size*8 - 1)` with x86's shift-count masking.
    let shift = ((size as i32).wrapping_mul(8).wrapping_sub(1) & 63) as u32;
    let mask = u64::MAX << shift;
    let l = if l & mask != 0 { l | mask } else { l };
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &Args) -> LibResult<Returns> {
    let fmt_str = args.check_string(lua, 1)?;
    let data_str = args.check_string(lua, 2)?;
    let fmt_bytes = fmt_str.as_bytes();
    let data_bytes = data_str.as_bytes();
    let data: &[u8] = &data_bytes;
    let ld = data.len();
    let mut pos = args.opt_integer(lua, 3, 1)? as u64 as usize;
    if pos == 0 {
        return arg_err(3, "offset must be 1 or greater");
    }
    pos -= 1;
    let mut fmt = Fmt::new(&fmt_bytes);
    let mut h = Header::default();
    let mut out = Returns::new();
    let nargs = args.len() as i64;
    let too_short = |size: usize, pos: usize| !(size <= ld && pos <= ld - size);
    while let Some(opt) = fmt.next_opt() {
        let mut size = fmt.optsize(opt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if too_short(size, pos) {
            return arg_err(2, "data string too short");
        }
        if nargs + out.len() as i64 + 2 > MAX_C_STACK {
            return rt_err("stack overflow (too many results)");
        }
        let item = data.get(pos..pos + size).unwrap_or(&[]);
        match opt {
            _ if is_integer_opt(opt) => {
                let v = getinteger(item, h.little, opt.is_ascii_lowercase(), size);
                out.push(lua, Value::Number(v))?;
            }
            b'x' => {}
            b'f' => {
                let raw: [u8; 4] = item.try_into().unwrap_or([0; 4]);
                let f = if h.little { f32::from_le_bytes(raw) } else { f32::from_be_bytes(raw) };
                out.push(lua, Value::Number(f64::from(f)))?;
            }
            b'd' => {
                let raw: [u8; 8] = item.try_into().unwrap_or([0; 8]);
                let d = if h.little { f64::from_le_bytes(raw) } else { f64::from_be_bytes(raw) };
                out.push(lua, Value::Number(d))?;
            }
            b'c' => {
                if size == 0 {
                    let prev = match out.last()? {
                        Some(v) => to_number(lua, &v)?,
                        None => None,
                    };
                    let Some(prev) = prev else {
                        return rt_err("format 'c0' needs a previous size");
                    };
                    size = c_f64_to_u64(prev) as usize;
                    out.pop()?;
                    if too_short(size, pos) {
                        return arg_err(2, "data string too short");
                    }
                }
                let s = data.get(pos..pos + size).unwrap_or(&[]);
                out.push(lua, Value::String(lua.create_string(s)?))?;
            }
            b's' => {
                let rest = data.get(pos..).unwrap_or(&[]);
                let Some(nul) = rest.iter().position(|&b| b == 0) else {
                    return rt_err("unfinished string in data");
                };
                size = nul + 1;
                out.push(lua, Value::String(lua.create_string(rest.get(..nul).unwrap_or(&[]))?))?;
            }
            _ => fmt.control(opt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(lua, Value::Number(pos.wrapping_add(1) as i64 as f64))?;
    Ok(out)
}

fn size(lua: &Lua, args: &Args) -> LibResult<Returns> {
    let fmt_str = args.check_string(lua, 1)?;
    let fmt_bytes = fmt_str.as_bytes();
    let mut fmt = Fmt::new(&fmt_bytes);
    let mut h = Header::default();
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next_opt() {
        let size = fmt.optsize(opt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if opt == b's' {
            return arg_err(1, "option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            return arg_err(1, "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            fmt.control(opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(Returns::one(Value::Number(pos as i64 as f64)))
}

/// The `struct` table.
pub(crate) fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    add_fn(lua, &t, "pack", |lua, args| pack(lua, args.clone()))?;
    add_fn(lua, &t, "unpack", unpack)?;
    add_fn(lua, &t, "size", size)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{hex, lua, run};

    #[test]
    fn packing() {
        let lua = lua();
        assert_eq!(hex(&lua, "struct.pack('>i2<i2', 258, 258)"), "true 01020201");
        assert_eq!(hex(&lua, "struct.pack('!4bi', 1, 2)"), "true 0100000002000000");
        assert_eq!(hex(&lua, "struct.pack('c0s', 'ab', 'cd')"), "true 6162636400");
        assert_eq!(hex(&lua, "struct.pack('<i10', -1)"), "true ffffffffffffffff0000");
        assert_eq!(hex(&lua, "struct.pack('>d', 1.5)"), "true 3ff8000000000000");
    }

    #[test]
    fn unpacking() {
        let lua = lua();
        assert_eq!(run(&lua, "return struct.unpack('>i2<h', '\\1\\2\\255\\255')"), "true 258 -1 5");
        assert_eq!(run(&lua, "return struct.unpack('bc0', '\\2hello')"), "true he 4");
        assert_eq!(run(&lua, "return struct.unpack('s', 'ab\\0cd')"), "true ab 4");
        assert_eq!(run(&lua, "return struct.unpack('B', 'xy', 2)"), "true 121 3");
        assert_eq!(run(&lua, "return struct.size('!8bd')"), "true 16");
    }

    #[test]
    fn errors() {
        let lua = lua();
        assert_eq!(run(&lua, "return struct.pack('i33', 1)"), "false integral size 33 is larger than limit of 32");
        assert_eq!(
            run(&lua, "return struct.pack('z', 1)"),
            "false bad argument #1 to 'pack' (invalid format option 'z')"
        );
        assert_eq!(run(&lua, "return struct.pack('!3')"), "false alignment 3 is not a power of 2");
        assert_eq!(run(&lua, "return struct.pack('c5', 'ab')"), "false bad argument #3 to 'pack' (string too short)");
        assert_eq!(
            run(&lua, "return struct.unpack('i', 'ab')"),
            "false bad argument #2 to 'unpack' (data string too short)"
        );
        assert_eq!(run(&lua, "return struct.unpack('c0', 'ab')"), "false format 'c0' needs a previous size");
        assert_eq!(run(&lua, "return struct.unpack('s', 'ab')"), "false unfinished string in data");
        assert_eq!(
            run(&lua, "return struct.unpack('b', 'a', 0)"),
            "false bad argument #3 to 'unpack' (offset must be 1 or greater)"
        );
        assert_eq!(
            run(&lua, "return struct.size('s')"),
            "false bad argument #1 to 'size' (option 's' has no fixed size)"
        );
        assert_eq!(run(&lua, "return struct.pack('i99999999999', 1)"), "false integral size overflow");
    }
}
