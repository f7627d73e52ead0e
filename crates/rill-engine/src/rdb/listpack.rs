//! Listpacks: the flat array Redis stores small lists, sets, hashes and every stream node in.
//!
//! ```text
//! <total bytes: u32 LE> <element count: u16 LE, 65535 = "count them"> <element>* <0xFF>
//! element = <encoding + data> <backlen>
//!   0xxxxxxx                        7-bit unsigned int
//!   10xxxxxx <data>                 string, 6-bit length
//!   110xxxxx yyyyyyyy               13-bit signed int (two's complement over 13 bits)
//!   1110xxxx yyyyyyyy <data>        string, 12-bit length (high bits first)
//!   11110000 <u32 LE length> <data> string, 32-bit length
//!   0xF1 / 0xF2 / 0xF3 / 0xF4       16 / 24 / 32 / 64-bit signed int, little-endian
//!   backlen: the size of <encoding + data> in 1-5 bytes of 7 bits (read backwards; we only
//!            need its width when walking forwards)
//! ```
//!
//! Strings that are the canonical decimal text of an `i64` are stored as integers (Redis does
//! the same), so decoding turns every integer back into that text.

use super::io::{le_u16, le_u32};
use super::RdbError;

const HEADER_BYTES: usize = 6;
const EOF: u8 = 0xff;
/// Element count field value meaning "too many to count here".
const COUNT_UNKNOWN: u16 = u16::MAX;

/// One decoded element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// An integer element.
    Int(i64),
    /// A string element.
    Str(&'a [u8]),
}

impl Item<'_> {
    /// The element as the bytes it stands for (an integer as its decimal text).
    pub fn to_bytes(self) -> Vec<u8> {
        match self {
            Item::Int(v) => v.to_string().into_bytes(),
            Item::Str(s) => s.to_vec(),
        }
    }

    /// The element as an integer, if it is one (stream nodes store their counts and IDs so).
    pub fn int(self) -> Result<i64, RdbError> {
        match self {
            Item::Int(v) => Ok(v),
            Item::Str(s) => crate::util::parse_i64(s).ok_or(RdbError::Corrupt("listpack: integer expected")),
        }
    }
}

/// Decode a whole listpack. Checks the header's byte count and the terminator.
pub fn decode(lp: &[u8]) -> Result<Vec<Item<'_>>, RdbError> {
    let bad = |why| RdbError::Corrupt(why);
    if lp.len() < HEADER_BYTES {
        return Err(bad("listpack: short header"));
    }
    let total = le_u32(lp).unwrap_or(0);
    let count = lp.get(4..).and_then(le_u16).unwrap_or(0);
    if usize::try_from(total).ok() != Some(lp.len()) || lp.last() != Some(&EOF) {
        return Err(bad("listpack: size or terminator wrong"));
    }
    let body = lp.get(HEADER_BYTES..lp.len() - 1).ok_or(bad("listpack: short"))?;
    let mut items = Vec::new();
    let mut pos = 0usize;
    while pos < body.len() {
        let (item, len) = element(body.get(pos..).unwrap_or_default())?;
        pos += len + backlen_width(len);
        if pos > body.len() {
            return Err(bad("listpack: element overruns"));
        }
        items.push(item);
    }
    if count != COUNT_UNKNOWN && usize::from(count) != items.len() {
        return Err(bad("listpack: element count wrong"));
    }
    Ok(items)
}

/// Decode the element at the start of `p`: the element and the size of its encoding + data.
fn element(p: &[u8]) -> Result<(Item<'_>, usize), RdbError> {
    let bad = RdbError::Corrupt("listpack: truncated element");
    let b0 = *p.first().ok_or(bad.clone())?;
    let byte = |i: usize| p.get(i).copied().ok_or(RdbError::Corrupt("listpack: truncated element"));
    let string = |start: usize, len: usize| {
        p.get(start..start + len)
            .map(|s| (Item::Str(s), start + len))
            .ok_or(RdbError::Corrupt("listpack: truncated string"))
    };
    let le_int = |width: usize| -> Result<(Item<'_>, usize), RdbError> {
        let bytes = p.get(1..1 + width).ok_or(RdbError::Corrupt("listpack: truncated int"))?;
        let mut v: u64 = 0;
        for (i, b) in bytes.iter().enumerate() {
            v |= u64::from(*b) << (8 * i);
        }
        // Sign-extend from `width` bytes.
        let shift = 64 - 8 * width as u32;
        Ok((Item::Int(((v << shift) as i64) >> shift), 1 + width))
    };
    if b0 & 0x80 == 0 {
        Ok((Item::Int(i64::from(b0)), 1))
    } else if b0 & 0xc0 == 0x80 {
        string(1, usize::from(b0 & 0x3f))
    } else if b0 & 0xe0 == 0xc0 {
        let raw = (i64::from(b0 & 0x1f) << 8) | i64::from(byte(1)?);
        Ok((Item::Int(if raw >= 1 << 12 { raw - (1 << 13) } else { raw }), 2))
    } else if b0 & 0xf0 == 0xe0 {
        string(2, (usize::from(b0 & 0x0f) << 8) | usize::from(byte(1)?))
    } else {
        match b0 {
            0xf0 => {
                let len = u32::from_le_bytes([byte(1)?, byte(2)?, byte(3)?, byte(4)?]);
                string(5, usize::try_from(len).map_err(|_| bad)?)
            }
            0xf1 => le_int(2),
            0xf2 => le_int(3),
            0xf3 => le_int(4),
            0xf4 => le_int(8),
            _ => Err(RdbError::Corrupt("listpack: unknown encoding")),
        }
    }
}

/// Bytes the back-length of an element whose encoding and data take `len` bytes occupies.
/// Redis' rule, which is not the tightest one: each byte holds 7 bits, yet a length of
/// exactly 2^14 - 1, 2^21 - 1 or 2^28 - 1 already takes one byte more. Redis reads and
/// validates with the same rule, so a listpack must follow it to the byte (a 16 383-byte
/// element written with a 2-byte back-length is "Bad data format" to Redis).
pub(crate) fn backlen_width(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Bytes an integer element takes in a listpack (encoding, data and back-length), as Redis
/// encodes it: the narrowest of 7-bit unsigned, 13-, 16-, 24-, 32- and 64-bit signed forms.
pub(crate) fn int_element_bytes(v: i64) -> usize {
    if (0..=127).contains(&v) {
        2
    } else if (-4096..=4095).contains(&v) {
        3
    } else if i16::try_from(v).is_ok() {
        4
    } else if (-(1 << 23)..1 << 23).contains(&v) {
        5
    } else if i32::try_from(v).is_ok() {
        6
    } else {
        10
    }
}

/// Bytes a string element takes in a listpack, as [`Builder::push_str`] (and Redis) encodes
/// it: as an integer when it is an integer's canonical text, else with a 1-, 2- or 5-byte
/// header by length, plus the back-length.
pub(crate) fn str_element_bytes(s: &[u8]) -> usize {
    match crate::util::parse_i64(s) {
        Some(v) => int_element_bytes(v),
        None => text_element_bytes(s.len()),
    }
}

/// Bytes a string element of `len` bytes that is not an integer's text takes.
pub(crate) fn text_element_bytes(len: usize) -> usize {
    let head = if len < 64 {
        1
    } else if len < 4096 {
        2
    } else {
        5
    };
    head + len + backlen_width(head + len)
}

/// Builds a listpack.
#[derive(Debug)]
pub struct Builder {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder { buf: vec![0; HEADER_BYTES], count: 0 }
    }
}

impl Builder {
    /// Bytes so far, header included, terminator not.
    pub fn len_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Append a string (stored as an integer when it is an integer's canonical text).
    pub fn push_str(&mut self, s: &[u8]) {
        match crate::util::parse_i64(s) {
            Some(v) => self.push_int(v),
            None => {
                let start = self.buf.len();
                let len = s.len();
                if len < 64 {
                    self.buf.push(0x80 | len as u8);
                } else if len < 4096 {
                    self.buf.push(0xe0 | (len >> 8) as u8);
                    self.buf.push(len as u8);
                } else {
                    self.buf.push(0xf0);
                    self.buf.extend_from_slice(&(len as u32).to_le_bytes());
                }
                self.buf.extend_from_slice(s);
                self.finish_element(start);
            }
        }
    }

    /// Append an integer in the narrowest encoding.
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let raw = if v < 0 { (1 << 13) + v } else { v } as u16;
            self.buf.push(0xc0 | (raw >> 8) as u8);
            self.buf.push(raw as u8);
        } else {
            let (tag, width) = if i16::try_from(v).is_ok() {
                (0xf1, 2)
            } else if (-(1 << 23)..1 << 23).contains(&v) {
                (0xf2, 3)
            } else if i32::try_from(v).is_ok() {
                (0xf3, 4)
            } else {
                (0xf4, 8)
            };
            self.buf.push(tag);
            self.buf.extend_from_slice(v.to_le_bytes().get(..width).unwrap_or_default());
        }
        self.finish_element(start);
    }

    fn finish_element(&mut self, start: usize) {
        let len = (self.buf.len() - start) as u64;
        let width = backlen_width(len as usize);
        // Most significant 7-bit group first; every byte but the first has the high bit set.
        for i in (0..width).rev() {
            let group = ((len >> (7 * i)) & 0x7f) as u8;
            self.buf.push(if i == width - 1 { group } else { group | 0x80 });
        }
        self.count += 1;
    }

    /// The finished listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        let count = u16::try_from(self.count).unwrap_or(COUNT_UNKNOWN);
        if let Some(h) = self.buf.get_mut(0..4) {
            h.copy_from_slice(&total.to_le_bytes());
        }
        if let Some(h) = self.buf.get_mut(4..6) {
            h.copy_from_slice(&count.to_le_bytes());
        }
        self.buf
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_round_trips() {
        let ints = [
            0,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -32768,
            32767,
            8_388_607,
            -8_388_608,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ];
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let mut b = Builder::default();
        for v in ints {
            b.push_int(v);
        }
        for s in [&b""[..], b"abc", b"007", &mid, &long] {
            b.push_str(s);
        }
        let lp = b.finish();
        let items = decode(&lp).unwrap();
        let ints_back: Vec<i64> = items.iter().take(ints.len()).map(|i| i.int().unwrap()).collect();
        assert_eq!(ints_back, ints);
        let strs: Vec<Vec<u8>> = items.iter().skip(ints.len()).map(|i| i.to_bytes()).collect();
        assert_eq!(strs, vec![b"".to_vec(), b"abc".to_vec(), b"007".to_vec(), mid, long]);
    }

    #[test]
    fn matches_redis_bytes() {
        // HSET h a 1 on Redis: a listpack of "a", 1.
        let mut b = Builder::default();
        b.push_str(b"a");
        b.push_str(b"1");
        assert_eq!(b.finish(), [0x0c, 0, 0, 0, 2, 0, 0x81, b'a', 2, 1, 1, 0xff]);
    }

    /// Around Redis' back-length boundaries (a 32-bit string header is 5 bytes, so a string of
    /// 16 378 bytes is a 16 383-byte element): the width Redis uses, and a round trip.
    #[test]
    fn back_lengths_take_redis_widths_at_the_boundaries() {
        let widths: Vec<usize> = [127, 128, 16_382, 16_383, 2_097_150, 2_097_151, 268_435_454, 268_435_455]
            .into_iter()
            .map(backlen_width)
            .collect();
        assert_eq!(widths, [1, 2, 2, 3, 3, 4, 4, 5]);
        for n in [16_377, 16_378, 16_379] {
            let mut b = Builder::default();
            b.push_str(&vec![b'x'; n]);
            b.push_int(7);
            let lp = b.finish();
            // header, element (5 + n), its back-length, the integer (1 + 1), terminator
            assert_eq!(lp.len(), 6 + 5 + n + backlen_width(5 + n) + 2 + 1, "{n}");
            let items = decode(&lp).unwrap();
            assert_eq!(items.len(), 2, "{n}");
            assert_eq!(items[1].int().unwrap(), 7, "{n}");
        }
    }
}
