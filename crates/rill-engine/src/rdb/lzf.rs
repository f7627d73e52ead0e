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
//!
//! The inflated length comes from the payload, so it is never trusted with memory: the most
//! any input can produce is [`MAX_EXPANSION`] bytes per input byte (a long reference is 3
//! bytes for at most 264), a claim above that is refused before anything is allocated, and
//! the output grows with what the input really produces, through fallible reservations
//! (Redis answers a claim it cannot allocate with `Bad data format` too).

/// Most output bytes one input byte can stand for: a long back-reference (3 bytes) copies at
/// most 7 + 255 + 2 = 264 bytes.
pub const MAX_EXPANSION: usize = 264 / 3;
/// Output reserved before the first run: enough for most strings, small enough not to matter
/// when the claim is a lie.
const INITIAL_RESERVE_BYTES: usize = 4096;

/// Whether `input_len` bytes of LZF data could inflate to `len` bytes.
pub fn plausible(input_len: usize, len: usize) -> bool {
    len <= input_len.saturating_mul(MAX_EXPANSION)
}

/// Decompress `input` into exactly `expected_len` bytes; `None` if the input is malformed,
/// does not produce exactly that many bytes, or the memory for them cannot be had.
/// Allocates at most about twice what the input actually produces.
pub fn decompress(input: &[u8], expected_len: usize) -> Option<Vec<u8>> {
    if !plausible(input.len(), expected_len) {
        return None;
    }
    let mut out: Vec<u8> = Vec::new();
    out.try_reserve(expected_len.min(INITIAL_RESERVE_BYTES)).ok()?;
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
            out.try_reserve(run).ok()?;
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
        out.try_reserve(len).ok()?;
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

    #[test]
    fn the_densest_input_expands_by_max_expansion_and_no_more() {
        // One literal byte, then long references of the greatest length at offset 1.
        let refs = 100;
        let mut input = vec![0x00, b'z'];
        for _ in 0..refs {
            input.extend_from_slice(&[0xe0, 0xff, 0x00]);
        }
        let len = 1 + refs * 264;
        assert_eq!(decompress(&input, len), Some(vec![b'z'; len]));
        assert!(super::plausible(input.len(), len));
        assert!(!super::plausible(input.len(), input.len() * super::MAX_EXPANSION + 1));
    }

    #[test]
    fn a_lying_length_allocates_for_what_the_input_produces() {
        // 33 bytes of literals claiming all the expansion they could have: refused once the
        // input ends, with the output never reserved for the claim.
        let mut input = vec![31u8];
        input.extend_from_slice(&[b'q'; 32]);
        assert_eq!(decompress(&input, input.len() * super::MAX_EXPANSION), None);
        assert_eq!(decompress(&input, usize::MAX), None);
        assert_eq!(decompress(&input, 32), Some(vec![b'q'; 32]));
    }
}
