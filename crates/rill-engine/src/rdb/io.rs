//! The RDB primitives every value is built from: lengths, strings and fixed-width numbers.
//!
//! ```text
//! length    00xxxxxx                          6-bit length
//!           01xxxxxx yyyyyyyy                 14-bit length, big-endian
//!           10000000 [4 bytes, big-endian]    32-bit length
//!           10000001 [8 bytes, big-endian]    64-bit length
//!           11xxxxxx                          not a length: a string in a special encoding
//! string    <length> <bytes>                  raw
//!           11000000 [1 byte]                 int8  \
//!           11000001 [2 bytes, little-endian] int16  } the string is the integer's decimal text
//!           11000010 [4 bytes, little-endian] int32 /
//!           11000011 <clen> <len> <clen bytes>  LZF-compressed, `len` bytes once inflated
//! ms time   [8 bytes, little-endian, signed]
//! stream ID [8 bytes ms, big-endian][8 bytes seq, big-endian]   (PEL entries, node keys)
//! ```

use super::{lzf, RdbError};
use crate::types::stream::StreamId;

const LEN_6BIT: u8 = 0;
const LEN_14BIT: u8 = 1;
const LEN_32BIT: u8 = 0x80;
const LEN_64BIT: u8 = 0x81;
const LEN_ENCODED: u8 = 3;

const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

/// Longest string the int encodings are tried on (Redis' limit: "-2147483648" is 11 bytes).
const INT_ENCODING_MAX_LEN: usize = 11;

/// A length or, for strings, the special encoding that replaces it.
enum Length {
    Plain(u64),
    Encoded(u8),
}

/// A cursor over a payload. Every read checks bounds and fails with [`RdbError`] on truncation.
///
/// Either over a slice that holds the whole payload, or over a payload that arrives in chunks
/// ([`Reader::streaming`]: a replica loading its primary's snapshot as it is sent): the reader
/// then holds only the bytes it has not read yet, pulling more chunks as a read needs them.
pub struct Reader<'a> {
    window: Window<'a>,
    pos: usize,
    /// Bytes dropped from the front of an owned window (so `pos` counts from there).
    dropped: usize,
    /// Where more bytes come from; none left when it answers `None`.
    source: Option<Source<'a>>,
    /// The payload's whole length, if known.
    total: Option<usize>,
}

/// A streaming reader's supply of chunks.
type Source<'a> = Box<dyn FnMut() -> Option<Vec<u8>> + 'a>;

enum Window<'a> {
    Slice(&'a [u8]),
    Owned(Vec<u8>),
}

impl std::fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("position", &self.position()).field("total", &self.total).finish()
    }
}

impl<'a> Reader<'a> {
    /// Read from the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { window: Window::Slice(buf), pos: 0, dropped: 0, source: None, total: Some(buf.len()) }
    }

    /// Read a payload that arrives in chunks from `source` (`None`: no more), of `total`
    /// bytes if known.
    pub fn streaming(source: impl FnMut() -> Option<Vec<u8>> + 'a, total: Option<usize>) -> Reader<'a> {
        Reader { window: Window::Owned(Vec::new()), pos: 0, dropped: 0, source: Some(Box::new(source)), total }
    }

    fn window(&self) -> &[u8] {
        match &self.window {
            Window::Slice(b) => b,
            Window::Owned(v) => v,
        }
    }

    /// Make at least `n` unread bytes available, pulling chunks from the source; false if the
    /// payload ends first.
    fn fill(&mut self, n: usize) -> bool {
        loop {
            let have = self.window().len().saturating_sub(self.pos);
            if have >= n {
                return true;
            }
            let Some(source) = self.source.as_mut() else { return false };
            let Some(chunk) = source() else {
                self.source = None;
                return false;
            };
            if let Window::Owned(v) = &mut self.window {
                // What was read goes first, so the window holds only unread bytes (and the
                // one value being read).
                if self.pos > 0 {
                    v.drain(..self.pos);
                    self.dropped += self.pos;
                    self.pos = 0;
                }
                v.extend_from_slice(&chunk);
            }
        }
    }

    /// Bytes read so far from the start of the payload.
    pub fn position(&self) -> usize {
        self.dropped + self.pos
    }

    /// Bytes not yet read (for a streamed payload of unknown length: as many as may come).
    pub fn remaining(&self) -> usize {
        match self.total {
            Some(total) => total.saturating_sub(self.position()),
            None => usize::MAX,
        }
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&[u8], RdbError> {
        if !self.fill(n) {
            return Err(RdbError::Truncated);
        }
        // After `fill`: it may have moved the window.
        let end = self.pos.checked_add(n).ok_or(RdbError::Truncated)?;
        let start = self.pos;
        self.pos = end;
        self.window().get(start..end).ok_or(RdbError::Truncated)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, RdbError> {
        if !self.fill(1) {
            return Err(RdbError::Truncated);
        }
        let b = *self.window().get(self.pos).ok_or(RdbError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    fn length_or_encoding(&mut self) -> Result<Length, RdbError> {
        let first = self.u8()?;
        match first >> 6 {
            LEN_6BIT => Ok(Length::Plain(u64::from(first & 0x3f))),
            LEN_14BIT => Ok(Length::Plain(u64::from(first & 0x3f) << 8 | u64::from(self.u8()?))),
            LEN_ENCODED => Ok(Length::Encoded(first & 0x3f)),
            _ => match first {
                LEN_32BIT => Ok(Length::Plain(u64::from(u32::from_be_bytes(self.array()?)))),
                LEN_64BIT => Ok(Length::Plain(u64::from_be_bytes(self.array()?))),
                _ => Err(RdbError::Corrupt("unknown length encoding")),
            },
        }
    }

    /// A length.
    pub fn length(&mut self) -> Result<u64, RdbError> {
        match self.length_or_encoding()? {
            Length::Plain(n) => Ok(n),
            Length::Encoded(_) => Err(RdbError::Corrupt("encoded value where a length belongs")),
        }
    }

    /// A length used as a count of things still to read: each needs at least one byte, so a
    /// count above the bytes left is corrupt. Still, a count of n elements that are each
    /// larger in memory than on disk must not size an allocation by itself (a 512 MiB payload
    /// claiming 500 M hash pairs would reserve 24 GB): reserve [`preallocation`] of it and
    /// let the collection grow with the elements actually read.
    pub fn count(&mut self) -> Result<usize, RdbError> {
        let n = self.length()?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.remaining())
            .ok_or(RdbError::Corrupt("count larger than the payload"))
    }

    /// A string in any encoding.
    pub fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.length_or_encoding()? {
            Length::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| RdbError::Truncated)?;
                Ok(self.bytes(n)?.to_vec())
            }
            Length::Encoded(ENC_INT8) => Ok(i8::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Encoded(ENC_INT16) => Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Encoded(ENC_INT32) => Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Encoded(ENC_LZF) => {
                let compressed = usize::try_from(self.length()?).map_err(|_| RdbError::Truncated)?;
                let len = usize::try_from(self.length()?).map_err(|_| RdbError::Truncated)?;
                let input = self.bytes(compressed)?;
                // A claim no input of this size can meet is refused before any allocation;
                // `decompress` then grows its output only with what the input produces.
                if !lzf::plausible(compressed, len) {
                    return Err(RdbError::Corrupt("LZF length out of proportion"));
                }
                lzf::decompress(input, len).ok_or(RdbError::Corrupt("bad LZF data"))
            }
            Length::Encoded(_) => Err(RdbError::Corrupt("unknown string encoding")),
        }
    }

    /// A signed millisecond time (8 bytes, little-endian).
    pub fn millis(&mut self) -> Result<i64, RdbError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// A raw 16-byte stream ID.
    pub fn raw_id(&mut self) -> Result<StreamId, RdbError> {
        let raw: [u8; 16] = self.array()?;
        Ok(id_from_raw(&raw))
    }

    /// A stream ID written as two lengths (ms, seq).
    pub fn length_id(&mut self) -> Result<StreamId, RdbError> {
        let ms = self.length()?;
        let seq = self.length()?;
        Ok(StreamId::new(ms, seq))
    }
}

/// Most elements reserved up front for a collection whose count comes from the input.
const PREALLOCATION_MAX_ITEMS: usize = 1024;

/// The capacity to reserve for `count` elements announced by the input: the count, up to a
/// small fixed bound. Beyond it the collection grows with what is really read, so memory
/// stays proportional to the payload whatever its counts claim.
pub fn preallocation(count: usize) -> usize {
    count.min(PREALLOCATION_MAX_ITEMS)
}

/// The little-endian `u32` at the start of `b`.
pub fn le_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(..4)?.try_into().ok()?))
}

/// The big-endian `u32` at the start of `b`.
pub fn be_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

/// The little-endian `u16` at the start of `b`.
pub fn le_u16(b: &[u8]) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(..2)?.try_into().ok()?))
}

/// A 16-byte big-endian stream ID.
pub fn id_from_raw(raw: &[u8; 16]) -> StreamId {
    let (ms, seq) = raw.split_at(8);
    let ms: [u8; 8] = ms.try_into().unwrap_or_default();
    let seq: [u8; 8] = seq.try_into().unwrap_or_default();
    StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
}

/// The 16-byte big-endian form of a stream ID.
pub fn id_to_raw(id: StreamId) -> [u8; 16] {
    let mut raw = [0u8; 16];
    let (ms, seq) = raw.split_at_mut(8);
    ms.copy_from_slice(&id.ms.to_be_bytes());
    seq.copy_from_slice(&id.seq.to_be_bytes());
    raw
}

/// Appends RDB primitives to a buffer.
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
    /// Strings over 20 bytes go LZF-compressed when that saves 4 bytes (`rdbcompression`).
    lzf: Option<Box<super::lzf::Compressor>>,
}

impl Writer {
    /// One byte.
    pub fn u8(&mut self, b: u8) {
        self.buf.push(b);
    }

    /// Raw bytes.
    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// A length in the shortest form.
    pub fn length(&mut self, n: u64) {
        if n < 1 << 6 {
            self.u8(n as u8);
        } else if n < 1 << 14 {
            self.u8((LEN_14BIT << 6) | (n >> 8) as u8);
            self.u8(n as u8);
        } else if let Ok(n32) = u32::try_from(n) {
            self.u8(LEN_32BIT);
            self.raw(&n32.to_be_bytes());
        } else {
            self.u8(LEN_64BIT);
            self.raw(&n.to_be_bytes());
        }
    }

    /// Compress the strings written from here on where that pays (`rdbcompression yes`).
    pub fn compress_strings(&mut self) {
        self.lzf.get_or_insert_with(Box::default);
    }

    /// A string with no integer encoding: LZF-compressed if compression is on and pays, as
    /// it is otherwise.
    pub fn raw_string(&mut self, s: &[u8]) {
        if s.len() >= super::lzf::MIN_COMPRESS_LEN {
            if let Some(packed) = self.lzf.as_mut().and_then(|c| c.compress(s)) {
                self.u8(LEN_ENCODED << 6 | ENC_LZF);
                self.length(packed.len() as u64);
                self.length(s.len() as u64);
                self.raw(&packed);
                return;
            }
        }
        self.length(s.len() as u64);
        self.raw(s);
    }

    /// A string, int-encoded when it is the canonical text of an integer that fits 32 bits
    /// (as Redis writes short numeric strings), raw otherwise.
    pub fn string(&mut self, s: &[u8]) {
        let int = (s.len() <= INT_ENCODING_MAX_LEN)
            .then(|| crate::util::parse_i64(s))
            .flatten()
            .filter(|v| v.to_string().as_bytes() == s);
        match int {
            Some(v) if i8::try_from(v).is_ok() => {
                self.u8(LEN_ENCODED << 6 | ENC_INT8);
                self.raw(&(v as i8).to_le_bytes());
            }
            Some(v) if i16::try_from(v).is_ok() => {
                self.u8(LEN_ENCODED << 6 | ENC_INT16);
                self.raw(&(v as i16).to_le_bytes());
            }
            Some(v) if i32::try_from(v).is_ok() => {
                self.u8(LEN_ENCODED << 6 | ENC_INT32);
                self.raw(&(v as i32).to_le_bytes());
            }
            _ => self.raw_string(s),
        }
    }

    /// A signed millisecond time.
    pub fn millis(&mut self, t: i64) {
        self.raw(&t.to_le_bytes());
    }

    /// A stream ID as two lengths.
    pub fn length_id(&mut self, id: StreamId) {
        self.length(id.ms);
        self.length(id.seq);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip_in_every_width() {
        for n in [0, 63, 64, 16383, 16384, u64::from(u32::MAX), u64::from(u32::MAX) + 1, u64::MAX] {
            let mut w = Writer::default();
            w.length(n);
            assert_eq!(Reader::new(&w.buf).length(), Ok(n));
        }
    }

    #[test]
    fn strings_pick_int_encodings_only_for_canonical_numbers() {
        for (s, first) in [
            (&b"12"[..], 0xc0u8),
            (b"-300", 0xc1),
            (b"2147483647", 0xc2),
            (b"2147483648", 10),
            (b"012", 3),
            (b"+1", 2),
            (b"-0", 2),
            (b"", 0),
        ] {
            let mut w = Writer::default();
            w.string(s);
            assert_eq!(w.buf.first().copied(), Some(first), "{:?}", String::from_utf8_lossy(s));
            assert_eq!(Reader::new(&w.buf).string().as_deref(), Ok(s));
        }
    }
}
