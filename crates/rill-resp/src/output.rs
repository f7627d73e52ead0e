//! A connection's output: replies encoded, with large payloads held by reference.
//!
//! A bulk reply of a stored value needs no copy: values are [`Bytes`], reference-counted and
//! immutable, so the output can hold the value itself until the socket has taken it. Small
//! payloads are still copied (a copy of a few KiB costs less than the bookkeeping and the
//! extra iovec of a reference; see [`SHARED_PAYLOAD_MIN_BYTES`]), so the common reply stays
//! one contiguous buffer written with one `write(2)`.
//!
//! ```text
//!  encoded   *2\r\n$3\r\nfoo\r\n$536870912\r\n│\r\n+OK\r\n      (one BytesMut)
//!                                         ▲ at = 24
//!  payloads  (24, Bytes of 512 MiB)                          (the value, not a copy)
//!
//!  written   encoded[..24]  payload  encoded[24..]           (one writev)
//! ```
//!
//! Offsets are counted in the encoded stream from the first byte appended since the output
//! was last empty, so consuming the front never renumbers the payloads queued behind it.
//!
//! A payload referenced here pins its whole allocation until written (or until the value's
//! last other holder lets go), so [`OutputBuffer::len`] counts it as unwritten output and
//! [`OutputBuffer::held_bytes`] as memory: the server's output limits see it exactly as they
//! would see a copy.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};

/// Payloads at least this long are queued by reference, shorter ones copied. Measured by
/// encoding bulk replies of a stored value and writing them to a socket pair (release build,
/// best of 15 runs): with one reply per write, as a client that does not pipeline gets them,
/// the reference costs 10-15 % more up to 8 KiB (a `writev` of three slices instead of one
/// `write`) and 12-16 % less at 16 KiB; with 16 replies per write the crossover is near
/// 2 KiB and a reference saves about a third at 16 KiB. Above this the copy is what costs,
/// and it grows with the size while the reference's cost does not.
pub const SHARED_PAYLOAD_MIN_BYTES: usize = 16 * 1024;

/// Slices [`OutputBuffer::with_slices`] hands to one write at most: many referenced payloads'
/// worth, far below any system's `IOV_MAX` (1024 on Linux).
pub const WRITE_SLICES_MAX: usize = 64;

/// Where [`write_reply`](crate::write_reply) appends a reply: a plain [`BytesMut`] (payloads
/// copied) or an [`OutputBuffer`] (large payloads referenced).
pub trait ReplyTarget {
    /// The buffer encoded bytes are appended to.
    fn encoded(&mut self) -> &mut BytesMut;

    /// Append `data`, which is followed by a few bytes of framing: copied, or held by
    /// reference.
    fn payload(&mut self, data: &Bytes);
}

/// Framing written after a payload (`\r\n`): reserved with a copied payload, so that it does
/// not make the buffer grow again right after it.
const PAYLOAD_TRAILER_BYTES: usize = 2;

impl ReplyTarget for BytesMut {
    fn encoded(&mut self) -> &mut BytesMut {
        self
    }

    fn payload(&mut self, data: &Bytes) {
        self.reserve(data.len() + PAYLOAD_TRAILER_BYTES);
        self.extend_from_slice(data);
    }
}

/// Replies not yet written: encoded bytes, with large payloads referenced where they go.
#[derive(Debug, Default)]
pub struct OutputBuffer {
    /// Every encoded byte not yet consumed.
    encoded: BytesMut,
    /// The referenced payloads in order, each with its offset in the encoded stream: it goes
    /// after the encoded byte at `at - 1` (a partly written payload has been advanced).
    payloads: VecDeque<(usize, Bytes)>,
    /// Encoded bytes consumed since the output was last empty: where `encoded` starts in the
    /// stream the offsets count in.
    consumed: usize,
    /// Unwritten bytes of `payloads`.
    payload_bytes: usize,
}

impl OutputBuffer {
    /// An empty output whose encoded buffer has room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> OutputBuffer {
        OutputBuffer { encoded: BytesMut::with_capacity(capacity), ..OutputBuffer::default() }
    }

    /// Bytes not yet written, referenced payloads included.
    pub fn len(&self) -> usize {
        self.encoded.len() + self.payload_bytes
    }

    /// Whether everything was written.
    pub fn is_empty(&self) -> bool {
        self.encoded.is_empty() && self.payloads.is_empty()
    }

    /// Memory this output holds: the encoded buffer's capacity and the unwritten bytes of
    /// the payloads it references (each pins its value while it waits).
    pub fn held_bytes(&self) -> usize {
        self.encoded.capacity() + self.payload_bytes
    }

    /// Unwritten bytes of the referenced payloads: output shared with the values it comes
    /// from (CLIENT LIST `omem-shared`).
    pub fn referenced_bytes(&self) -> usize {
        self.payload_bytes
    }

    /// Of [`OutputBuffer::referenced_bytes`], those of payloads nothing else holds any more
    /// (their value was deleted or overwritten since): memory the output alone keeps alive
    /// (CLIENT LIST `omem-unshared`). A walk of the referenced payloads.
    pub fn solely_held_bytes(&self) -> usize {
        if self.payload_bytes == 0 {
            return 0;
        }
        self.payloads.iter().filter(|(_, p)| p.is_unique()).map(|(_, p)| p.len()).sum()
    }

    /// Capacity of the encoded buffer alone.
    pub fn encoded_capacity(&self) -> usize {
        self.encoded.capacity()
    }

    /// The encoding buffer, when everything was written and it has room: for the owner to
    /// keep elsewhere while the client is idle (an idle connection then holds no output
    /// buffer). The output is left with none; the next reply allocates one, or
    /// [`OutputBuffer::give_spare`] hands one back.
    pub fn take_spare(&mut self) -> Option<BytesMut> {
        if !self.is_empty() || self.encoded.capacity() == 0 {
            return None;
        }
        self.consumed = 0;
        Some(std::mem::take(&mut self.encoded))
    }

    /// Encode into `buf` (empty) from now on, if this output has no buffer of its own; `buf`
    /// comes back otherwise.
    pub fn give_spare(&mut self, buf: BytesMut) -> Option<BytesMut> {
        if self.encoded.capacity() > 0 || !buf.is_empty() {
            return Some(buf);
        }
        self.encoded = buf;
        None
    }

    /// The whole output as one slice, when it is one (no payload referenced).
    pub fn contiguous(&self) -> Option<&[u8]> {
        self.payloads.is_empty().then_some(&self.encoded[..])
    }

    /// Call `f` with the next bytes to write as slices, in order: one slice when nothing is
    /// referenced (the common case), at most [`WRITE_SLICES_MAX`]. `f` says how many bytes it
    /// wrote; consume them with [`Buf::advance`].
    pub fn with_slices<R>(&self, f: impl FnOnce(&[IoSlice<'_>]) -> R) -> R {
        if self.payloads.is_empty() {
            return f(&[IoSlice::new(&self.encoded)]);
        }
        let mut slices = [IoSlice::new(&[]); WRITE_SLICES_MAX];
        let n = self.chunks_vectored(&mut slices);
        f(slices.get(..n).unwrap_or_default())
    }

    /// Where the front payload starts, as an index into `encoded`.
    fn front_payload_at(&self) -> Option<usize> {
        self.payloads.front().map(|(at, _)| at - self.consumed)
    }
}

impl ReplyTarget for OutputBuffer {
    fn encoded(&mut self) -> &mut BytesMut {
        &mut self.encoded
    }

    fn payload(&mut self, data: &Bytes) {
        if data.is_empty() {
            return;
        }
        self.payloads.push_back((self.consumed + self.encoded.len(), data.clone()));
        self.payload_bytes += data.len();
    }
}

impl Buf for OutputBuffer {
    fn remaining(&self) -> usize {
        self.len()
    }

    fn chunk(&self) -> &[u8] {
        match (self.front_payload_at(), self.payloads.front()) {
            (Some(0), Some((_, payload))) => payload,
            (Some(at), _) => self.encoded.get(..at).unwrap_or_default(),
            _ => &self.encoded,
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut filled = 0;
        let mut push = |slice: &'a [u8]| {
            if slice.is_empty() {
                return true;
            }
            match dst.get_mut(filled) {
                Some(slot) => {
                    *slot = IoSlice::new(slice);
                    filled += 1;
                    true
                }
                None => false,
            }
        };
        let mut from = 0;
        for (at, payload) in &self.payloads {
            let at = at - self.consumed;
            if !push(self.encoded.get(from..at).unwrap_or_default()) || !push(payload) {
                return filled;
            }
            from = at;
        }
        push(self.encoded.get(from..).unwrap_or_default());
        filled
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let encoded_first = self.front_payload_at().unwrap_or(self.encoded.len());
            if encoded_first > 0 {
                let k = n.min(encoded_first);
                self.encoded.advance(k);
                self.consumed += k;
                n -= k;
                continue;
            }
            let Some((_, payload)) = self.payloads.front_mut() else {
                // Past the end: nothing left to consume.
                break;
            };
            let k = n.min(payload.len());
            payload.advance(k);
            self.payload_bytes -= k;
            n -= k;
            if payload.is_empty() {
                self.payloads.pop_front();
            }
        }
        if self.is_empty() {
            self.consumed = 0;
        }
    }
}
