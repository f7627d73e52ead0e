//! The arithmetic of INCRBYFLOAT and HINCRBYFLOAT as Redis does it on x86-64: in C's `long
//! double`, the x87 80-bit format (64-bit significand, 15-bit exponent), not in `f64`.
//!
//! Three parts must agree with Redis for the replies (and the stored strings) to match:
//! - reading: text is read as glibc's `strtold` reads it, whole: decimal (`1`, `-.5e-3`, `5.`),
//!   hexadecimal (`0x10`, `0x1.8p1`), `inf` / `infinity` in any case; not `nan`, not leading
//!   spaces, nothing left over, at most 5 119 bytes. A value too large (`1e5000`) or so small
//!   it reads as zero (`1e-5000`) is refused, as Redis refuses `strtold`'s range errors.
//! - adding: rounded to the nearest 64-bit significand, ties to even (the `rustc_apfloat`
//!   crate's model of the x87 format does the reading and the adding).
//! - writing: fixed notation with 17 digits after the point, rounded exactly (ties to even),
//!   then trailing zeros and a trailing point dropped, `-0` written `0`. So 0.1 + 0.2 is `0.3`
//!   (the 80-bit sum is 0.3000000000000000000108...), where an `f64` sum would print
//!   `0.30000000000000004`; and a sum of 2e308 is a 309-digit integer, not an overflow.

use bytes::Bytes;
use rustc_apfloat::ieee::X87DoubleExtended;
use rustc_apfloat::{Float, Round, Status};

/// A finite or infinite (never NaN) `long double`.
#[derive(Debug, Clone, Copy)]
pub struct LongDouble(X87DoubleExtended);

/// Redis reads at most this many bytes minus one as a `long double`.
const MAX_CHARS: usize = 5 * 1024;

/// Exponents beyond this change nothing, so larger ones are clamped: the text's digits shift
/// the value by at most 5 120 decimal places (20 480 binary ones for hexadecimal), and 80-bit
/// values span about ±4 951 decimal (±16 445 binary) orders.
const EXPONENT_CLAMP: i64 = 100_000;

impl LongDouble {
    pub const ZERO: LongDouble = LongDouble(X87DoubleExtended::ZERO);

    /// Read `text` as Redis reads a `long double` (see the module doc); `None` if it refuses it.
    pub fn parse(text: &[u8]) -> Option<LongDouble> {
        if text.is_empty() || text.len() >= MAX_CHARS {
            return None;
        }
        let (negative, rest) = match text.split_first() {
            Some((b'-', rest)) => (true, rest),
            Some((b'+', rest)) => (false, rest),
            _ => (false, text),
        };
        if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
            return Some(LongDouble(X87DoubleExtended::INFINITY.copy_sign(sign(negative))));
        }
        let canonical = match rest {
            [b'0', b'x' | b'X', hex @ ..] => hexadecimal(hex)?,
            _ => decimal(rest)?,
        };
        let read = X87DoubleExtended::from_str_r(&canonical, Round::NearestTiesToEven).ok()?;
        let value = read.value.copy_sign(sign(negative));
        // `strtold`'s range errors: an overflow, or an underflow all the way to zero.
        let underflow_to_zero = read.status.intersects(Status::UNDERFLOW) && value.is_zero();
        if read.status.intersects(Status::OVERFLOW) || underflow_to_zero {
            return None;
        }
        Some(LongDouble(value))
    }

    /// `self + other`, rounded as the x87 rounds; `None` if that is infinite or NaN.
    pub fn checked_add(self, other: LongDouble) -> Option<LongDouble> {
        let sum = self.0.add_r(other.0, Round::NearestTiesToEven).value;
        sum.is_finite().then_some(LongDouble(sum))
    }

    /// A blocking command's timeout of `self` seconds in whole milliseconds, as Redis computes
    /// it: `self` × 1000 in long double (so `-0.001` s, just above -1 ms there, rounds up to 0
    /// while `-0.002` s stays negative), `None` above `i64::MAX`, else rounded up; below
    /// `i64::MIN` (or minus infinity) it is `i64::MIN`, as the x86 conversion gives.
    pub fn seconds_to_ms_ceil(self) -> Option<i64> {
        let thousand = X87DoubleExtended::from_u128(1000).value;
        let ms = self.0.mul_r(thousand, Round::NearestTiesToEven).value;
        // i64::MAX is exact in a 64-bit significand.
        let limit = X87DoubleExtended::from_u128(i64::MAX as u128).value;
        if ms > limit {
            return None;
        }
        let up = ms.round_to_integral(Round::TowardPositive).value;
        Some(up.to_i128(64).value as i64)
    }

    pub fn is_finite(self) -> bool {
        self.0.is_finite()
    }

    /// The text Redis writes for a finite value (see the module doc).
    pub fn to_text(self) -> Bytes {
        let bits = self.0.to_bits();
        let negative = (bits >> 79) & 1 == 1;
        let exponent = ((bits >> 64) & 0x7fff) as i32;
        let significand = bits as u64;
        // value = significand × 2^power (a zero exponent field: denormal, the same scale as 1).
        let power = exponent.max(1) - 16383 - 63;
        let text = if power >= 0 {
            // An integer: every digit of it, and nothing after the point.
            integer_digits(significand, power.unsigned_abs())
        } else {
            // Round value × 10^17 to an integer (ties to even): < 2^121, so a u128 holds it.
            let scaled = u128::from(significand) * 10u128.pow(17);
            let shift = power.unsigned_abs();
            let rounded = if shift >= 128 {
                // Half a unit is 2^(shift - 1) ≥ 2^127 > scaled: rounds to 0.
                0
            } else {
                let kept = scaled >> shift;
                let rest = scaled & ((1u128 << shift) - 1);
                let half = 1u128 << (shift - 1);
                if rest > half || (rest == half && kept & 1 == 1) {
                    kept + 1
                } else {
                    kept
                }
            };
            let digits = format!("{rounded:018}");
            let (whole, fraction) = digits.split_at(digits.len() - 17);
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                whole.to_string()
            } else {
                format!("{whole}.{fraction}")
            }
        };
        Bytes::from(if negative && text != "0" { format!("-{text}") } else { text })
    }
}

/// The sign `copy_sign` takes: negative or positive one.
fn sign(negative: bool) -> X87DoubleExtended {
    let one = X87DoubleExtended::from_u128(1).value;
    if negative {
        -one
    } else {
        one
    }
}

/// `digits [. digits] [e [sign] digits]` (at least one digit before the exponent, and digits
/// after an `e`), the whole text: the same text with its exponent clamped, else `None`.
fn decimal(text: &[u8]) -> Option<String> {
    let mantissa_len = text.iter().position(|b| !(b.is_ascii_digit() || *b == b'.')).unwrap_or(text.len());
    let (mantissa, exponent) = text.split_at(mantissa_len);
    if !mantissa_ok(mantissa, u8::is_ascii_digit) {
        return None;
    }
    let mut canonical = String::from_utf8(mantissa.to_vec()).ok()?;
    match exponent {
        [] => {}
        [b'e' | b'E', rest @ ..] => canonical.push_str(&format!("e{}", exponent_value(rest)?)),
        _ => return None,
    }
    Some(canonical)
}

/// After `0x`: `hexdigits [. hexdigits] [p [sign] digits]` (at least one hex digit), the whole
/// text: the same in the form the reader wants (`0x…p…`, an exponent always), else `None`.
fn hexadecimal(text: &[u8]) -> Option<String> {
    let mantissa_len = text.iter().position(|b| !(b.is_ascii_hexdigit() || *b == b'.')).unwrap_or(text.len());
    let (mantissa, exponent) = text.split_at(mantissa_len);
    if !mantissa_ok(mantissa, u8::is_ascii_hexdigit) {
        return None;
    }
    let power = match exponent {
        [] => 0,
        [b'p' | b'P', rest @ ..] => exponent_value(rest)?,
        _ => return None,
    };
    Some(format!("0x{}p{power}", std::str::from_utf8(mantissa).ok()?))
}

/// Digits with at most one point among them, and at least one digit.
fn mantissa_ok(mantissa: &[u8], digit: fn(&u8) -> bool) -> bool {
    mantissa.iter().filter(|b| **b == b'.').count() <= 1 && mantissa.iter().any(digit)
}

/// `[sign] digits` (the whole text), clamped to ±[`EXPONENT_CLAMP`].
fn exponent_value(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude =
        digits.iter().try_fold(0i64, |n, d| n.checked_mul(10)?.checked_add(i64::from(d - b'0'))).unwrap_or(i64::MAX);
    let clamped = magnitude.min(EXPONENT_CLAMP);
    Some(if negative { -clamped } else { clamped })
}

/// The decimal digits of `significand × 2^power`.
fn integer_digits(significand: u64, power: u32) -> String {
    // Little-endian 32-bit limbs of the product.
    let mut limbs = vec![0u32; (power / 32) as usize];
    let shift = power % 32;
    let wide = u128::from(significand) << shift;
    limbs.extend([wide as u32, (wide >> 32) as u32, (wide >> 64) as u32]);
    while limbs.last() == Some(&0) && limbs.len() > 1 {
        limbs.pop();
    }
    // Nine digits at a time, least significant first.
    let mut groups = Vec::new();
    while limbs.iter().any(|l| *l != 0) {
        let mut remainder = 0u64;
        for limb in limbs.iter_mut().rev() {
            let current = (remainder << 32) | u64::from(*limb);
            *limb = (current / 1_000_000_000) as u32;
            remainder = current % 1_000_000_000;
        }
        groups.push(remainder as u32);
        while limbs.last() == Some(&0) && limbs.len() > 1 {
            limbs.pop();
        }
    }
    let mut text = groups.last().map_or_else(|| "0".to_string(), |g| g.to_string());
    for g in groups.iter().rev().skip(1) {
        text.push_str(&format!("{g:09}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> Option<String> {
        let (a, b) = (LongDouble::parse(a.as_bytes())?, LongDouble::parse(b.as_bytes())?);
        Some(String::from_utf8(a.checked_add(b)?.to_text().to_vec()).unwrap_or_default())
    }

    #[test]
    fn sums_print_as_redis_prints_them() {
        // Replies of Redis 7.0.15 and 8.2.3 (x86-64) to INCRBYFLOAT b on a key holding a.
        for (a, b, redis) in [
            ("0.1", "0.2", "0.3"),
            ("1.1", "2.2", "3.3"),
            ("3000", "0.0000001", "3000.00000010000000006"),
            ("0.1", "0.7", "0.8"),
            ("10.5", "0", "10.5"),
            ("0", "-0", "0"),
            ("-0.1", "0.1", "0"),
            ("0x10", "1", "17"),
            ("0x1.8p1", "0", "3"),
            ("-1e-20", "0", "0"),
            ("1.5e3", "-.5", "1499.5"),
            ("2.5", "1e-17", "2.50000000000000001"),
            ("0", "0.000000000000000015", "0.00000000000000002"),
            ("123456789012345678901234567890", "0.1", "123456789012345678899921813504"),
        ] {
            assert_eq!(sum(a, b).as_deref(), Some(redis), "{a} + {b}");
        }
        // Beyond f64: 309 digits.
        let big = sum("1e308", "1e308").unwrap_or_default();
        assert_eq!(big.len(), 309);
        assert!(big.starts_with("1999999999999999999933717593116912913211"), "{big}");
    }

    #[test]
    fn reads_what_strtold_reads_whole() {
        let ok = |s: &str| LongDouble::parse(s.as_bytes()).is_some();
        let good = ["1", "+5", "-.5e-3", "5.", ".5", "0x10", "0X1p-3", "0x.8", "inf", "-Infinity", "1E+3"];
        let zeros = "0".repeat(5000);
        let shifted = [format!("0x1{zeros}p-30000"), format!("0.{zeros}1e9000"), format!("1{zeros}e-8000")];
        let shifted = shifted.iter().map(String::as_str);
        for text in good.into_iter().chain(shifted).chain(["0e99999999999999999999", "1e-4940"]) {
            assert!(ok(text), "{text}");
        }
        let bad = ["", ".", "e3", "1e", "1e+", " 1", "1 ", "0x", "0x.", "0x1p", "nan", "NaN", "infinit"];
        let huge = ["1e99999999999999999999", "1e-99999999999999999999", "0x1p100000"];
        for text in bad.into_iter().chain(["1_0", "1e5000", "1e-5000", "--1", "1..2", "0x1.8.8", "+-1"]).chain(huge) {
            assert!(!ok(text), "{text}");
        }
        // 5 119 characters are read, 5 120 are not (as Redis 7.0.15 and 8.2.3).
        assert!(ok(&format!("{}1", "0".repeat(MAX_CHARS - 2))));
        assert!(!ok(&format!("{}1", "0".repeat(MAX_CHARS - 1))));
    }

    #[test]
    fn timeouts_round_up_in_long_double() {
        let ms = |s: &str| LongDouble::parse(s.as_bytes()).and_then(LongDouble::seconds_to_ms_ceil);
        assert_eq!(ms("-0.001"), Some(0));
        assert_eq!(ms("-0.002"), Some(-1));
        assert_eq!(ms("0x1p-20"), Some(1));
        assert_eq!(ms("1.5"), Some(1500));
        assert_eq!(ms("-inf"), Some(i64::MIN));
        assert_eq!(ms("inf"), None);
        assert_eq!(ms("9223372036854775.807"), Some(i64::MAX));
        assert_eq!(ms("9223372036854775.808"), None);
    }

    #[test]
    fn infinite_sums_are_refused() {
        assert_eq!(sum("inf", "1"), None);
        assert_eq!(sum("1e4932", "1e4932"), None);
    }
}
