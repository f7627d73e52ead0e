//! `bit`: LuaBitOp 1.0.2 as Redis bundles it (`tobit tohex bnot band bor bxor lshift rshift
//! arshift rol ror bswap`).
//!
//! Behaviours that matter:
//!
//! * Every argument goes through `lua_tonumber` (so numeric strings work) and is normalised to
//!   32 bits by adding 2^52+2^51 to the double and taking the low word of its bit pattern: any
//!   double wraps modulo 2^32 after rounding to an integer (half to even), NaN and ±inf give 0.
//! * A non-number gives `bad argument #N to 'f' (number expected, got T)`; results are signed
//!   32-bit numbers.
//! * Shift counts use their low 5 bits; `tohex(x, n)`: `n` defaults to 8 (only when absent, an
//!   explicit nil is an error), a negative `n` means upper case, `|n|` is capped at 8.

use mlua::{Lua, Table, Value};

use super::{add_fn, Args, LibResult, Returns};

/// LuaBitOp's `barg`: the argument as 32 bits.
fn barg(lua: &Lua, args: &Args, i: usize) -> LibResult<u32> {
    // A number that is not one makes lua_tonumber return 0, whose bits are 0: an error then.
    let n = args.check_number(lua, i)?;
    Ok(tobit(n))
}

/// The 2^52+2^51 trick: the low 32 bits of the double's pattern after the addition.
pub(crate) fn tobit(n: f64) -> u32 {
    (n + 6755399441055744.0).to_bits() as u32
}

fn ret(b: u32) -> LibResult<Returns> {
    Ok(Returns::one(Value::Number(f64::from(b as i32))))
}

fn fold(lua: &Lua, args: &Args, op: fn(u32, u32) -> u32) -> LibResult<Returns> {
    let mut b = barg(lua, args, 1)?;
    // LuaBitOp walks the arguments from the last one down to the second.
    let mut i = args.len();
    while i > 1 {
        b = op(b, barg(lua, args, i)?);
        i -= 1;
    }
    ret(b)
}

fn shift(lua: &Lua, args: &Args, op: fn(u32, u32) -> u32) -> LibResult<Returns> {
    let b = barg(lua, args, 1)?;
    let n = barg(lua, args, 2)? & 31;
    ret(op(b, n))
}

fn tohex(lua: &Lua, args: &Args) -> LibResult<Returns> {
    let mut b = barg(lua, args, 1)?;
    let mut n: i32 = if args.get(2)?.is_none() { 8 } else { barg(lua, args, 2)? as i32 };
    let mut digits: &[u8; 16] = b"0123456789abcdef";
    if n == i32::MIN {
        n = i32::MIN + 1;
    }
    if n < 0 {
        n = -n;
        digits = b"0123456789ABCDEF";
    }
    let n = n.min(8) as usize;
    let mut buf = vec![b'0'; n];
    for slot in buf.iter_mut().rev() {
        *slot = digits.get((b & 15) as usize).copied().unwrap_or(b'0');
        b >>= 4;
    }
    Ok(Returns::one(Value::String(lua.create_string(buf)?)))
}

/// The `bit` table.
pub(crate) fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    add_fn(lua, &t, "tobit", |lua, args| ret(barg(lua, args, 1)?))?;
    add_fn(lua, &t, "bnot", |lua, args| ret(!barg(lua, args, 1)?))?;
    add_fn(lua, &t, "band", |lua, args| fold(lua, args, |a, b| a & b))?;
    add_fn(lua, &t, "bor", |lua, args| fold(lua, args, |a, b| a | b))?;
    add_fn(lua, &t, "bxor", |lua, args| fold(lua, args, |a, b| a ^ b))?;
    add_fn(lua, &t, "lshift", |lua, args| shift(lua, args, |b, n| b << n))?;
    add_fn(lua, &t, "rshift", |lua, args| shift(lua, args, |b, n| b >> n))?;
    add_fn(lua, &t, "arshift", |lua, args| shift(lua, args, |b, n| ((b as i32) >> n) as u32))?;
    add_fn(lua, &t, "rol", |lua, args| shift(lua, args, |b, n| b.rotate_left(n)))?;
    add_fn(lua, &t, "ror", |lua, args| shift(lua, args, |b, n| b.rotate_right(n)))?;
    add_fn(lua, &t, "bswap", |lua, args| ret(barg(lua, args, 1)?.swap_bytes()))?;
    add_fn(lua, &t, "tohex", tohex)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{lua, run};

    #[test]
    fn normalisation() {
        assert_eq!(super::tobit(1437217655.0), 1437217655);
        assert_eq!(super::tobit(4294967296.0 + 5.0), 5);
        assert_eq!(super::tobit(-1.0), u32::MAX);
        assert_eq!(super::tobit(2.5), 2);
        assert_eq!(super::tobit(3.5), 4);
        assert_eq!(super::tobit(f64::NAN), 0);
    }

    #[test]
    fn redis_minimal_bitop_test() {
        let lua = lua();
        let code = "assert(bit.tobit(1) == 1); assert(bit.band(1) == 1); assert(bit.bxor(1,2) == 3); \
                    assert(bit.bor(1,2,4,8,16,32,64,128) == 255) return 'ok'";
        assert_eq!(run(&lua, code), "true ok");
    }

    #[test]
    fn operations() {
        let lua = lua();
        assert_eq!(run(&lua, "return bit.tobit(0xffffffff), bit.bnot(0), bit.lshift(1, 31)"), "true -1 -1 -2147483648");
        assert_eq!(
            run(&lua, "return bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(0x12345678, 36)"),
            "true 15 -16 591751041"
        );
        assert_eq!(
            run(&lua, "return bit.bswap(0x12345678), bit.ror(1, 1), bit.band('0x10', 0x30)"),
            "true 2018915346 -2147483648 16"
        );
    }

    #[test]
    fn tohex() {
        let lua = lua();
        assert_eq!(run(&lua, "return bit.tohex(65535, -2147483648)"), "true 0000FFFF");
        assert_eq!(
            run(&lua, "return bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -3), bit.tohex(1, 0)"),
            "true ffffffff ff 0FF "
        );
        assert_eq!(
            run(&lua, "return bit.tohex(1, nil)"),
            "false bad argument #2 to 'tohex' (number expected, got nil)"
        );
    }

    #[test]
    fn errors() {
        let lua = lua();
        assert_eq!(run(&lua, "return bit.band()"), "false bad argument #1 to 'band' (number expected, got no value)");
        assert_eq!(run(&lua, "return bit.bor(1, {})"), "false bad argument #2 to 'bor' (number expected, got table)");
        assert_eq!(
            run(&lua, "return bit.lshift('x', 1)"),
            "false bad argument #1 to 'lshift' (number expected, got string)"
        );
    }
}
