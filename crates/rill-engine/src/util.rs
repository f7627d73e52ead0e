//! Argument parsing helpers shared by every command: integers and floats exactly as Redis
//! accepts them.

use crate::CmdError;

/// Parse a signed 64-bit integer the way Redis' `string2ll` does: optional `-`, decimal digits,
/// no leading `+`, no leading zeros (except "0"), no spaces, fits in i64.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 1 && digits.first() == Some(&b'0') {
        return None;
    }
    if neg && digits == b"0" {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        let d = i64::from(d - b'0');
        v = if neg { v.checked_mul(10)?.checked_sub(d)? } else { v.checked_mul(10)?.checked_add(d)? };
    }
    Some(v)
}

/// [`parse_i64`] with Redis' error for a bad integer argument.
pub fn int_arg(b: &[u8]) -> Result<i64, CmdError> {
    parse_i64(b).ok_or(CmdError::NOT_INTEGER)
}

/// Parse a float roughly as C's `strtod` does (no hexadecimal): accepts `inf`, `+inf`, `-inf`;
/// rejects `nan`, empty and trailing garbage and leading spaces. Arguments Redis reads as a
/// `long double` (INCRBYFLOAT, blocking timeouts) go through [`crate::long_double`] instead.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let v: f64 = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => s.parse().ok()?,
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        for bad in [&b""[..], b"+1", b"01", b" 1", b"1 ", b"-0", b"1.0", b"-"] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }
}
