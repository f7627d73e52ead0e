//! Encodings Redis no longer writes but still loads: ziplists (lists, hashes and quicklist
//! nodes before 7.0), intsets (all-integer sets) and zipmaps (hashes before 2.6). Decoding
//! only.
//!
//! ```text
//! ziplist  <zlbytes: u32 LE> <zltail: u32 LE> <zllen: u16 LE> <entry>* <0xFF>
//!   entry = <prevlen: 1 byte, or 0xFE + u32 LE> <encoding> <data>
//!     00xxxxxx                 string, 6-bit length
//!     01xxxxxx yyyyyyyy        string, 14-bit length, big-endian
//!     10000000 <u32 BE>        string, 32-bit length
//!     0xC0 / 0xD0 / 0xE0       int16 / int32 / int64, little-endian
//!     0xF0                     int24, little-endian
//!     0xFE                     int8
//!     0xF1..=0xFD              immediate 0..=12 (low nibble − 1)
//! intset   <encoding: u32 LE = 2|4|8> <count: u32 LE> <count × signed LE ints, ascending>
//! zipmap   <count: 1 byte> (<len> <key> <len> <free: 1 byte> <value> <free bytes>)* <0xFF>
//!   len = 1 byte < 254, or 0xFE + u32 LE
//! ```

use super::io::{be_u32, le_u32};
use super::RdbError;

const ZIPLIST_HEADER_BYTES: usize = 10;
const END: u8 = 0xff;

fn corrupt(why: &'static str) -> RdbError {
    RdbError::Corrupt(why)
}

fn le_signed(bytes: &[u8]) -> i64 {
    let mut v: u64 = 0;
    for (i, b) in bytes.iter().enumerate() {
        v |= u64::from(*b) << (8 * i);
    }
    let shift = 64 - 8 * bytes.len() as u32;
    ((v << shift) as i64) >> shift
}

/// Every element of a ziplist, integers as their decimal text.
pub fn ziplist(zl: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    if zl.len() < ZIPLIST_HEADER_BYTES {
        return Err(corrupt("ziplist: short header"));
    }
    let total = le_u32(zl).unwrap_or(0);
    if usize::try_from(total).ok() != Some(zl.len()) || zl.last() != Some(&END) {
        return Err(corrupt("ziplist: size or terminator wrong"));
    }
    let mut out = Vec::new();
    let mut pos = ZIPLIST_HEADER_BYTES;
    let at = |i: usize| zl.get(i).copied().ok_or(corrupt("ziplist: truncated entry"));
    let slice = |from: usize, len: usize| zl.get(from..from.checked_add(len)?).ok_or(()).ok();
    loop {
        let first = at(pos)?;
        if first == END {
            break;
        }
        pos += if first == 0xfe { 5 } else { 1 };
        let enc = at(pos)?;
        let (value, next) = match enc >> 6 {
            0 => {
                let len = usize::from(enc & 0x3f);
                (slice(pos + 1, len).ok_or(corrupt("ziplist: truncated string"))?.to_vec(), pos + 1 + len)
            }
            1 => {
                let len = usize::from(enc & 0x3f) << 8 | usize::from(at(pos + 1)?);
                (slice(pos + 2, len).ok_or(corrupt("ziplist: truncated string"))?.to_vec(), pos + 2 + len)
            }
            2 => {
                let len = slice(pos + 1, 4).and_then(be_u32).ok_or(corrupt("ziplist: truncated length"))?;
                let len = usize::try_from(len).map_err(|_| corrupt("ziplist: length"))?;
                (slice(pos + 5, len).ok_or(corrupt("ziplist: truncated string"))?.to_vec(), pos + 5 + len)
            }
            _ => {
                let width = match enc {
                    0xc0 => 2,
                    0xd0 => 4,
                    0xe0 => 8,
                    0xf0 => 3,
                    0xfe => 1,
                    0xf1..=0xfd => 0,
                    _ => return Err(corrupt("ziplist: unknown encoding")),
                };
                let v = if width == 0 {
                    i64::from(enc & 0x0f) - 1
                } else {
                    le_signed(slice(pos + 1, width).ok_or(corrupt("ziplist: truncated int"))?)
                };
                (v.to_string().into_bytes(), pos + 1 + width)
            }
        };
        out.push(value);
        pos = next;
    }
    if pos != zl.len() - 1 {
        return Err(corrupt("ziplist: bytes after the end marker"));
    }
    Ok(out)
}

/// Every member of an intset, as decimal text.
pub fn intset(is: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    let width = le_u32(is).ok_or(corrupt("intset: short header"))? as usize;
    let count = is.get(4..).and_then(le_u32).ok_or(corrupt("intset: short header"))? as usize;
    if !matches!(width, 2 | 4 | 8) || Some(is.len()) != count.checked_mul(width).map(|n| n + 8) {
        return Err(corrupt("intset: bad encoding or size"));
    }
    let body = is.get(8..).unwrap_or_default();
    let values: Vec<i64> = body.chunks_exact(width).map(le_signed).collect();
    if values.windows(2).any(|w| matches!(w, [a, b] if a >= b)) {
        return Err(corrupt("intset: not strictly ascending"));
    }
    Ok(values.into_iter().map(|v| v.to_string().into_bytes()).collect())
}

/// The field/value pairs of a zipmap.
pub fn zipmap(zm: &[u8]) -> Result<Vec<super::Pair>, RdbError> {
    let mut pos = 1usize;
    let at = |i: usize| zm.get(i).copied().ok_or(corrupt("zipmap: truncated"));
    let read_len = |pos: &mut usize| -> Result<usize, RdbError> {
        let b = at(*pos)?;
        if b < 254 {
            *pos += 1;
            Ok(usize::from(b))
        } else if b == 254 {
            let len = zm.get(*pos + 1..).and_then(le_u32).ok_or(corrupt("zipmap: truncated"))?;
            *pos += 5;
            usize::try_from(len).map_err(|_| corrupt("zipmap: length"))
        } else {
            Err(corrupt("zipmap: unexpected end"))
        }
    };
    let mut out = Vec::new();
    loop {
        if at(pos)? == END {
            break;
        }
        let klen = read_len(&mut pos)?;
        let key = zm.get(pos..pos + klen).ok_or(corrupt("zipmap: truncated key"))?.to_vec();
        pos += klen;
        let vlen = read_len(&mut pos)?;
        let free = usize::from(at(pos)?);
        pos += 1;
        let value = zm.get(pos..pos + vlen).ok_or(corrupt("zipmap: truncated value"))?.to_vec();
        pos += vlen + free;
        out.push((key, value));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn ziplist_strings_and_every_int_width() {
        // "ab", 5 (immediate), 300 (int16), -2 (int8 is only used for values that need it).
        let mut zl = vec![0u8; 10];
        for entry in [
            &[0x00, 0x02, b'a', b'b'][..],
            &[0x04, 0xf6],
            &[0x02, 0xc0, 0x2c, 0x01],
            &[0x04, 0xfe, 0xfe],
            &[0x03, 0xf0, 0x00, 0x00, 0x80],
        ] {
            zl.extend_from_slice(entry);
        }
        zl.push(0xff);
        let total = zl.len() as u32;
        zl[..4].copy_from_slice(&total.to_le_bytes());
        let got = ziplist(&zl).unwrap();
        let want: Vec<Vec<u8>> = ["ab", "5", "300", "-2", "-8388608"].iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn intset_and_zipmap() {
        let is = [2, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xff, 7, 0];
        assert_eq!(intset(&is).unwrap(), vec![b"-1".to_vec(), b"7".to_vec()]);
        let zm = [1, 1, b'k', 2, 1, b'v', b'w', 0, 0xff];
        assert_eq!(zipmap(&zm).unwrap(), vec![(b"k".to_vec(), b"vw".to_vec())]);
    }
}
