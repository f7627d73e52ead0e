//! The primitive encodings a stream block is made of: LEB128 varints, zigzag for signed
//! numbers, and the classification of a value's bytes as an integer or a fixed-point decimal
//! that can be stored as a number and restored byte for byte.
//!
//! Every reader here takes a byte slice and a cursor and returns `None` on truncated or
//! malformed input; nothing panics.

use crate::util::parse_i64;

/// Longest LEB128 encoding of a `u128` (7 payload bits per byte).
pub(crate) const VARINT_MAX_BYTES: usize = 19;

/// Append `v` as an unsigned LEB128 varint: 7 bits per byte, low bits first, high bit set on
/// every byte but the last. Because the low bits come first, the lowest bit of the first byte
/// is bit 0 of `v`, which lets a block toggle a flag kept there without moving any byte.
pub(crate) fn put_varint(buf: &mut Vec<u8>, mut v: u128) {
    loop {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf.push(low);
            return;
        }
        buf.push(low | 0x80);
    }
}

/// Number of bytes [`put_varint`] writes for `v`.
pub(crate) fn varint_len(mut v: u128) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Read a varint at `*pos`, advancing it. `None` if truncated or longer than a `u128`.
pub(crate) fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u128> {
    // Most varints in a block (deltas, lengths, counts) are one byte.
    let first = *buf.get(*pos)?;
    if first & 0x80 == 0 {
        *pos += 1;
        return Some(u128::from(first));
    }
    let mut v: u128 = 0;
    for i in 0..VARINT_MAX_BYTES {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        let payload = u128::from(byte & 0x7f);
        let shift = 7 * i as u32;
        // The last byte may only carry the top two bits; anything more would be lost.
        if shift == 126 && payload > 3 {
            return None;
        }
        v |= payload.checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Step over a varint without decoding it. `None` if truncated or longer than a `u128`.
pub(crate) fn skip_varint(buf: &[u8], pos: &mut usize) -> Option<()> {
    let rest = buf.get(*pos..)?;
    let len = rest.iter().take(VARINT_MAX_BYTES).position(|b| b & 0x80 == 0)?;
    *pos += len + 1;
    Some(())
}

/// Read a varint that must fit a `u64`.
pub(crate) fn get_varint_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    u64::try_from(get_varint(buf, pos)?).ok()
}

/// Map a signed number onto an unsigned one so small magnitudes of either sign stay small:
/// 0, -1, 1, -2, ... become 0, 1, 2, 3, ...
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Most fraction digits a value may have to be stored as a decimal number.
pub(crate) const DECIMAL_MAX_SCALE: u8 = 15;

/// What a value's bytes are, for storage purposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar<'a> {
    /// Stored as given.
    Raw(&'a [u8]),
    /// Canonical decimal integer text (Redis' strict integer syntax, fits `i64`).
    Int(i64),
    /// Canonical fixed-point text `-?(0|[1-9][0-9]*)\.[0-9]{1,15}`, equal to
    /// `mantissa / 10^scale`, with a mantissa that fits `i64` and no negative zero.
    /// `"101.25"` is `{ mantissa: 10125, scale: 2 }`; `"0.50"` is `{ 50, 2 }`.
    Decimal { mantissa: i64, scale: u8 },
}

/// Classify `b`. Only forms that [`render`] restores byte for byte are numbers; everything
/// else (`"-0"`, `"007"`, `"+1"`, `"1e3"`, `".5"`, `"1."`, `"-0.0"`, out of range) is raw.
pub(crate) fn classify(b: &[u8]) -> Scalar<'_> {
    if let Some(v) = parse_i64(b) {
        return Scalar::Int(v);
    }
    decimal(b).unwrap_or(Scalar::Raw(b))
}

fn decimal(b: &[u8]) -> Option<Scalar<'_>> {
    let dot = b.iter().position(|&c| c == b'.')?;
    let int_part = b.get(..dot)?;
    let frac = b.get(dot + 1..)?;
    let (neg, digits) = match int_part.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, int_part),
    };
    let scale = u8::try_from(frac.len()).ok()?;
    if digits.is_empty() || scale == 0 || scale > DECIMAL_MAX_SCALE {
        return None;
    }
    if digits.len() > 1 && digits.first() == Some(&b'0') {
        return None;
    }
    if !digits.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    // Accumulate negatively so i64::MIN's magnitude fits.
    let mut m: i64 = 0;
    for &d in digits.iter().chain(frac) {
        m = m.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if !neg {
        m = m.checked_neg()?;
    } else if m == 0 {
        return None; // "-0.0" would come back as "0.0"
    }
    Some(Scalar::Decimal { mantissa: m, scale })
}

/// Longest decimal text of a `u64` (`18446744073709551615`).
pub(crate) const U64_MAX_DIGITS: usize = 20;

/// The decimal digits of `v`, written right-aligned into `buf`; returns them. No allocation
/// and no `fmt` machinery (`itoa`, two digits per step): replies and block decoding format
/// numbers on every entry.
pub(crate) fn u64_digits(v: u64, buf: &mut [u8; U64_MAX_DIGITS]) -> &[u8] {
    let mut text = itoa::Buffer::new();
    let digits = text.format(v).as_bytes();
    let at = U64_MAX_DIGITS - digits.len();
    match buf.get_mut(at..) {
        Some(dst) => {
            dst.copy_from_slice(digits);
            dst
        }
        None => &[],
    }
}

/// Append the decimal text of `v`.
pub(crate) fn put_u64_text(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; U64_MAX_DIGITS];
    out.extend_from_slice(u64_digits(v, &mut buf));
}

/// The length of [`render`]'s text of a decimal (never an integer's text: it has a point).
pub(crate) fn decimal_text_len(mantissa: i64, scale: u8) -> usize {
    let mut digit_buf = [0u8; U64_MAX_DIGITS];
    let digits = u64_digits(mantissa.unsigned_abs(), &mut digit_buf).len();
    let scale = usize::from(scale);
    let body = if digits > scale { digits + 1 } else { 2 + scale.max(digits) };
    usize::from(mantissa < 0) + body
}

/// Append the text of a number exactly as [`classify`] found it.
pub(crate) fn render(s: Scalar<'_>, out: &mut Vec<u8>) {
    match s {
        Scalar::Raw(b) => out.extend_from_slice(b),
        Scalar::Int(v) => {
            if v < 0 {
                out.push(b'-');
            }
            put_u64_text(out, v.unsigned_abs());
        }
        Scalar::Decimal { mantissa, scale } => {
            if mantissa < 0 {
                out.push(b'-');
            }
            let mut digit_buf = [0u8; U64_MAX_DIGITS];
            let digits = u64_digits(mantissa.unsigned_abs(), &mut digit_buf);
            let scale = usize::from(scale);
            match digits.len().checked_sub(scale) {
                Some(int_len) if int_len > 0 => {
                    out.extend_from_slice(digits.get(..int_len).unwrap_or_default());
                    out.push(b'.');
                    out.extend_from_slice(digits.get(int_len..).unwrap_or_default());
                }
                _ => {
                    // |value| < 1: "0." then zeros up to the scale, then the digits.
                    out.extend_from_slice(b"0.");
                    out.resize(out.len() + scale.saturating_sub(digits.len()), b'0');
                    out.extend_from_slice(digits);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decimal_text_len_is_the_rendered_length() {
        for (m, scale) in
            [(10125, 2), (5, 2), (-5, 3), (-10125, 2), (0, 1), (123, 3), (1234, 3), (i64::MIN, 5), (i64::MAX, 15)]
        {
            let mut out = Vec::new();
            render(Scalar::Decimal { mantissa: m, scale }, &mut out);
            assert_eq!(decimal_text_len(m, scale), out.len(), "{m} scale {scale}");
        }
    }

    fn round_trip(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        render(classify(b), &mut out);
        out
    }

    #[test]
    fn varints() {
        for v in [0u128, 1, 127, 128, 300, u128::from(u64::MAX), u128::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v));
            let mut pos = 0;
            assert_eq!(get_varint(&buf, &mut pos), Some(v));
            assert_eq!(pos, buf.len());
        }
        // Truncated, and too long.
        assert_eq!(get_varint(&[0x80], &mut 0), None);
        assert_eq!(get_varint(&[0xff; 20], &mut 0), None);
        assert_eq!(get_varint_u64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], &mut 0), None);
    }

    #[test]
    fn zigzag_extremes() {
        for v in [0, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn classification() {
        assert_eq!(classify(b"123"), Scalar::Int(123));
        assert_eq!(classify(b"-9223372036854775808"), Scalar::Int(i64::MIN));
        assert_eq!(classify(b"101.25"), Scalar::Decimal { mantissa: 10125, scale: 2 });
        assert_eq!(classify(b"-0.05"), Scalar::Decimal { mantissa: -5, scale: 2 });
        for raw in [
            &b""[..],
            b"-0",
            b"007",
            b"+1",
            b"9223372036854775808",
            b"1e3",
            b".5",
            b"1.",
            b"-0.0",
            b"00.5",
            b"1.2.3",
            b"1.0000000000000000",
            b"92233720368547758.08",
            b" 1",
            b"-",
            b"-.5",
            b"abc",
        ] {
            assert!(matches!(classify(raw), Scalar::Raw(_)), "{raw:?}");
        }
        for b in [&b"0.0"[..], b"0.05", b"10.00", b"-1.5", b"-922337203685477580.8", b"922337203685477580.7"] {
            assert!(matches!(classify(b), Scalar::Decimal { .. }), "{b:?}");
            assert_eq!(round_trip(b), b);
        }
    }

    proptest! {
        #[test]
        fn any_bytes_round_trip(b in proptest::collection::vec(
            prop_oneof![Just(b'0'), Just(b'1'), Just(b'9'), Just(b'-'), Just(b'.'), Just(b'+'), any::<u8>()], 0..24)) {
            prop_assert_eq!(round_trip(&b), b);
        }

        #[test]
        fn numbers_round_trip(m in any::<i64>(), scale in 0u8..=15) {
            let text = if scale == 0 { m.to_string() } else {
                let mut out = Vec::new();
                render(Scalar::Decimal { mantissa: m, scale }, &mut out);
                String::from_utf8(out).unwrap_or_default()
            };
            prop_assert_eq!(round_trip(text.as_bytes()), text.as_bytes());
        }
    }
}
