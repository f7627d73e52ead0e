//! Argument parsing helpers shared by every command: integers and floats exactly as Redis
//! accepts them, and a line split into arguments as Redis splits one.

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

/// Parse a float as Redis reads a double argument (C's `strtod`, checked): decimal and
/// hexadecimal (`0x1p+3`) forms, `inf`, `+inf`, `-inf`; rejects `nan`, empty text, leading or
/// trailing spaces or garbage, and a value out of range (too large for a double, or so small it
/// would read as 0). Arguments Redis reads as a
/// `long double` (INCRBYFLOAT, blocking timeouts) go through [`crate::long_double`] instead.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v: f64 = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            let (negative, body) = match lower.split_at_checked(1) {
                Some(("-", rest)) => (true, rest),
                Some(("+", rest)) => (false, rest),
                _ => (false, lower.as_str()),
            };
            if body.starts_with(['+', '-']) || body.contains("inf") || body.contains("nan") {
                return None;
            }
            let (v, mantissa) = match body.strip_prefix("0x") {
                Some(hex) => (hex_float(hex)?, hex.split('p').next().unwrap_or("")),
                None => (body.parse::<f64>().ok()?, body.split('e').next().unwrap_or("")),
            };
            // `strtod` reports a range error for a result too large (±inf) or too small (0 from
            // digits that are not all 0), and Redis refuses the argument.
            if v.is_infinite() || (v == 0.0 && mantissa.bytes().any(|c| c.is_ascii_alphanumeric() && c != b'0')) {
                return None;
            }
            if negative {
                -v
            } else {
                v
            }
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// The value of a C hexadecimal floating constant after its `0x` (lower case): hex digits
/// with an optional point, then an optional binary exponent `p[+-]digits`.
fn hex_float(text: &str) -> Option<f64> {
    let (digits, exp) = match text.split_once('p') {
        Some((d, e)) => (d, Some(e)),
        None => (text, None),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut m = 0f64;
    for c in int.chars().chain(frac.chars()) {
        m = m * 16.0 + f64::from(c.to_digit(16)?);
    }
    let exp: i32 = match exp {
        Some(e) if !e.is_empty() && e.trim_start_matches(['+', '-']).bytes().all(|c| c.is_ascii_digit()) => {
            e.parse().unwrap_or(if e.starts_with('-') { i32::MIN / 2 } else { i32::MAX / 2 })
        }
        Some(_) => return None,
        None => 0,
    };
    let shift = i64::from(exp) - 4 * frac.len() as i64;
    let shift = i32::try_from(shift.clamp(-4000, 4000)).unwrap_or(0);
    // Two steps so that a large shift does not overflow before the mantissa applies.
    Some(m * 2f64.powi(shift / 2) * 2f64.powi(shift - shift / 2))
}

/// Split a line into arguments as Redis' `sdssplitargs` does (and redis-cli, what the user
/// types): whitespace separates them; double quotes understand `\xHH`, `\n`, `\r`, `\t`,
/// `\b`, `\a` and any other escaped byte as itself; single quotes only `\'`; a closing quote
/// must be followed by whitespace or the end. The error says what is wrong.
pub fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| line.get(i).copied();
    let ends_quote = |i: usize| at(i + 1).is_none_or(|n| n.is_ascii_whitespace());
    loop {
        while at(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        if at(i).is_none() {
            return Ok(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            let c = at(i);
            if inq {
                match c {
                    None => return Err("unbalanced double quote"),
                    Some(b'\\') if at(i + 1) == Some(b'x') && hex_pair(at(i + 2), at(i + 3)).is_some() => {
                        cur.extend(hex_pair(at(i + 2), at(i + 3)));
                        i += 3;
                    }
                    Some(b'\\') if at(i + 1).is_some() => {
                        i += 1;
                        cur.push(match at(i).unwrap_or_default() {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                    }
                    Some(b'"') if !ends_quote(i) => return Err("closing quote must be followed by a space"),
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(other) => cur.push(other),
                }
            } else if insq {
                match c {
                    None => return Err("unbalanced single quote"),
                    Some(b'\\') if at(i + 1) == Some(b'\'') => {
                        cur.push(b'\'');
                        i += 1;
                    }
                    Some(b'\'') if !ends_quote(i) => return Err("closing quote must be followed by a space"),
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(other) => cur.push(other),
                }
            } else {
                match c {
                    None | Some(b' ' | b'\n' | b'\r' | b'\t' | 0) => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(other) => cur.push(other),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

fn hex_pair(a: Option<u8>, b: Option<u8>) -> Option<u8> {
    let digit = |c: u8| (c as char).to_digit(16);
    Some((digit(a?)? * 16 + digit(b?)?) as u8)
}

#[cfg(test)]
mod tests {
    #[test]
    fn doubles_read_as_redis_reads_them() {
        use super::parse_f64;
        let ok = |t: &str, v: f64| assert_eq!(parse_f64(t.as_bytes()), Some(v), "{t}");
        let bad = |t: &str| assert_eq!(parse_f64(t.as_bytes()), None, "{t}");
        ok("1.5", 1.5);
        ok("-2e3", -2000.0);
        ok("+inf", f64::INFINITY);
        ok("-Infinity", f64::NEG_INFINITY);
        ok("0x1p+0", 1.0);
        ok("0x0p+0", 0.0);
        ok("-0x1.8p1", -3.0);
        ok("0XAp-1", 5.0);
        ok("1e-300", 1e-300);
        ok("0e500", 0.0);
        bad("1e400");
        bad("1e-400");
        bad(&"9".repeat(400));
        bad("nan");
        bad("-nan");
        bad(" 1");
        bad("1 ");
        bad("");
        bad("0x");
        bad("0x1q");
        bad("--1");
        bad("-+1");
    }

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

    #[test]
    fn lines_split_as_redis_splits_them() {
        let split = |l: &str| super::split_args(l.as_bytes());
        let words = |w: &[&[u8]]| Ok(w.iter().map(|b| b.to_vec()).collect::<Vec<_>>());
        assert_eq!(split(" a  \"b c\" 'd\\'e' \"\\x41\\n\\q\""), words(&[b"a", b"b c", b"d'e", b"A\nq"]));
        assert_eq!(split(""), words(&[]));
        assert_eq!(split("name=\"foo\""), words(&[b"name=foo"]));
        assert_eq!(split("\"open"), Err("unbalanced double quote"));
        assert_eq!(split("'open"), Err("unbalanced single quote"));
        assert_eq!(split("\"a\"b"), Err("closing quote must be followed by a space"));
    }
}
