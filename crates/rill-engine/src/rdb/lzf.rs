//! LZF, the compression of strings in RDB files (`rdbcompression yes`: strings over 20 bytes
//! are stored compressed when that saves at least 4 bytes, as Redis stores them).
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
//! it produces (a run of repeats), so it is copied a period at a time.
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
        // Copied a chunk at a time: a reference that overlaps what it produces (`back` below
        // `len`, a run of repeats) copies `back` bytes at a time, each chunk from bytes
        // already there.
        let mut k = 0;
        while k < len {
            let n = (len - k).min(back);
            out.extend_from_within(start + k..start + k + n);
            k += n;
        }
    }
    (out.len() == expected_len).then_some(out)
}

/// Strings this long or shorter are stored as they are (Redis' threshold).
pub const MIN_COMPRESS_LEN: usize = 21;
/// Back-references reach at most this far back (13 bits of offset).
const MAX_OFFSET: usize = 1 << 13;
/// The longest back-reference: 2 + 7 in the control byte + 255 in the next.
const MAX_MATCH: usize = 264;
/// The longest literal run (5 bits of length).
const MAX_LITERAL: usize = 32;
const HASH_BITS: u32 = 13;

/// An LZF compressor with its table of where each 3-byte sequence was seen last, reused from
/// string to string: positions are counted across every input it has compressed, so a
/// position from an earlier string is simply older than the current one's start and the
/// table is never cleared.
#[derive(Debug)]
pub struct Compressor {
    table: Vec<u64>,
    /// Where the current input starts in the running count of positions (plus one, so that
    /// 0 in the table means never seen).
    base: u64,
}

impl Default for Compressor {
    fn default() -> Compressor {
        Compressor { table: vec![0; 1 << HASH_BITS], base: 1 }
    }
}

impl Compressor {
    /// `input` compressed into at most `input.len() - 4` bytes, or `None` when it does not
    /// compress that well (it is then stored as it is, as Redis stores it).
    pub fn compress(&mut self, input: &[u8]) -> Option<Vec<u8>> {
        let n = input.len();
        let budget = n.checked_sub(4).filter(|b| *b > 0)?;
        let base = self.base;
        self.base = base.saturating_add(n as u64);
        let mut out = Vec::with_capacity(budget);
        let mut literal_from = 0;
        let mut i = 0;
        while let Some(three) = input.get(i..i + 3) {
            let slot = self.slot(three)?;
            let seen = std::mem::replace(slot, base + i as u64);
            let earlier = seen.checked_sub(base).map(|p| p as usize);
            let found = earlier.filter(|&r| i - r <= MAX_OFFSET && input.get(r..r + 3) == Some(three));
            let Some(r) = found else {
                i += 1;
                continue;
            };
            let longest = MAX_MATCH.min(n - i);
            let mut len = 3;
            while len < longest && input.get(r + len) == input.get(i + len) {
                len += 1;
            }
            literals(&mut out, input.get(literal_from..i)?, budget)?;
            let offset = i - r - 1;
            let code = len - 2;
            let high = (offset >> 8) as u8;
            if code < 7 {
                out.push((code as u8) << 5 | high);
            } else {
                out.push(7 << 5 | high);
                out.push((code - 7) as u8);
            }
            out.push(offset as u8);
            if out.len() > budget {
                return None;
            }
            // The positions inside the match are remembered too: later repeats find them.
            for j in i + 1..i + len {
                if let Some(three) = input.get(j..j + 3) {
                    *self.slot(three)? = base + j as u64;
                }
            }
            i += len;
            literal_from = i;
        }
        literals(&mut out, input.get(literal_from..)?, budget)?;
        (out.len() <= budget).then_some(out)
    }

    fn slot(&mut self, three: &[u8]) -> Option<&mut u64> {
        let v = three.iter().fold(0u32, |v, &b| v << 8 | u32::from(b));
        let h = v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS);
        self.table.get_mut(h as usize)
    }
}

/// `bytes` as literal runs of at most 32; `None` once the output passes `budget`.
fn literals(out: &mut Vec<u8>, bytes: &[u8], budget: usize) -> Option<()> {
    for run in bytes.chunks(MAX_LITERAL) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
        if out.len() > budget {
            return None;
        }
    }
    Some(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::{decompress, Compressor};

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

    #[test]
    fn what_it_compresses_decompresses_to_the_same_bytes() {
        let mut c = Compressor::default();
        let tick = b"symbol NVDA.OQ price 1187.2500 seq 1 ts 1700000000000 ".repeat(40);
        let packed = c.compress(&tick).unwrap();
        assert!(packed.len() < tick.len() / 10, "{} bytes for {}", packed.len(), tick.len());
        assert_eq!(decompress(&packed, tick.len()).unwrap(), tick);
        // Long runs: references of the greatest length, overlapping what they produce.
        let zeros = vec![0u8; 10_000];
        let packed = c.compress(&zeros).unwrap();
        assert_eq!(decompress(&packed, zeros.len()).unwrap(), zeros);
        // Repeats farther back than an offset reaches are not references.
        let mut far = (0..9000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect::<Vec<_>>();
        far.extend_from_within(0..100);
        let packed = c.compress(&far);
        assert!(packed.as_ref().is_none_or(|p| decompress(p, far.len()).unwrap() == far));
    }

    #[test]
    fn what_does_not_save_four_bytes_is_not_compressed() {
        let mut c = Compressor::default();
        let noise: Vec<u8> = (0..200u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        assert_eq!(c.compress(&noise), None);
        assert_eq!(c.compress(b"abcd"), None);
        assert_eq!(c.compress(b""), None);
        // A later input never refers to an earlier one's bytes.
        let a = b"0123456789abcdefghij0123456789abcdefghij".to_vec();
        let first = c.compress(&a).unwrap();
        let second = c.compress(&a).unwrap();
        assert_eq!(first, second);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_round_trip(input in proptest::collection::vec(proptest::prop_oneof![
            proptest::num::u8::ANY, proptest::strategy::Just(b'a'), proptest::strategy::Just(b'b')], 0..3000)) {
            let mut c = Compressor::default();
            if let Some(packed) = c.compress(&input) {
                proptest::prop_assert!(packed.len() + 4 <= input.len());
                proptest::prop_assert_eq!(decompress(&packed, input.len()), Some(input));
            }
        }
    }
}
