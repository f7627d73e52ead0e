//! LZF decompression, for strings Redis stored compressed (`rdbcompression yes`, strings over
//! 20 bytes). We never compress on output: an uncompressed string is always valid.
//!
//! The stream is a sequence of runs, each introduced by a control byte `c`:
//!
//! ```text
//! c < 0x20            literal run: the next c+1 bytes are copied as they are
//! c >> 5 in 1..=6     back-reference: length (c >> 5) + 2, offset ((c & 0x1f) << 8 | next) + 1
//! c >> 5 == 7         long back-reference: length next + 9, then the offset byte as above
//! ```
//!
//! An offset counts back from the end of the output so far; a reference may overlap the bytes
//! it produces (a run of repeats), so it is copied byte by byte.

/// Decompress `input` into exactly `expected_len` bytes; `None` if the input is malformed or
/// does not produce exactly that many bytes.
pub fn decompress(input: &[u8], expected_len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(expected_len);
    let mut i = 0usize;
    while i < input.len() {
        let ctrl = usize::from(*input.get(i)?);
        i += 1;
        if ctrl < 0x20 {
            let run = ctrl + 1;
            let literal = input.get(i..i.checked_add(run)?)?;
            if out.len() + run > expected_len {
                return None;
            }
            out.extend_from_slice(literal);
            i += run;
            continue;
        }
        let mut len = ctrl >> 5;
        if len == 7 {
            len += usize::from(*input.get(i)?);
            i += 1;
        }
        len += 2;
        let low = usize::from(*input.get(i)?);
        i += 1;
        let back = ((ctrl & 0x1f) << 8 | low) + 1;
        let start = out.len().checked_sub(back)?;
        if out.len() + len > expected_len {
            return None;
        }
        for k in 0..len {
            let b = *out.get(start + k)?;
            out.push(b);
        }
    }
    (out.len() == expected_len).then_some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::decompress;

    #[test]
    fn literals_and_overlapping_references() {
        // "abc" literal, then a reference of length 6 at offset 3: "abcabcabc".
        let input = [0x02, b'a', b'b', b'c', (4 << 5), 0x02];
        assert_eq!(decompress(&input, 9).as_deref(), Some(&b"abcabcabc"[..]));
        // Long reference: one literal 'x' then 20 copies of it (offset 1).
        let input = [0x00, b'x', 0xe0, 20 - 9 + 2 - 2, 0x00];
        assert_eq!(decompress(&input, 21), Some(vec![b'x'; 21]));
        assert_eq!(decompress(&input, 20), None, "length must match exactly");
        assert_eq!(decompress(&[0x20, 0x05], 3), None, "reference before any output");
        assert_eq!(decompress(&[0x05, b'a'], 6), None, "truncated literal");
    }
}
