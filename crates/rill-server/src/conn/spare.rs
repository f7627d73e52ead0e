//! Buffers of connections that wait for input. An idle connection holds no query buffer and no
//! output buffer (Redis, likewise, reads into a buffer shared by its clients): when it starts
//! to wait with both empty, the session hands them here, and takes one back when input
//! arrives or a reply is written. Kept per thread, a few dozen at most, so a client with one
//! request in flight reuses the same two buffers without going to the allocator, and 10,000
//! idle clients cost no buffer memory at all.

use bytes::BytesMut;
use std::cell::RefCell;

/// What a buffer taken from here can hold without growing.
pub(super) const BUFFER_BYTES: usize = 16 * 1024;
/// Buffers kept per thread; more are freed.
const KEPT_PER_THREAD: usize = 32;
/// A buffer that grew past this is freed rather than kept (a big pipeline or reply).
const KEEP_MAX_BYTES: usize = 4 * BUFFER_BYTES;

thread_local! {
    static SPARE: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for [`BUFFER_BYTES`].
pub(super) fn take() -> BytesMut {
    SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_else(|| BytesMut::with_capacity(BUFFER_BYTES))
}

/// Keep `buf` (empty) for the next [`take`] on this thread, or free it.
pub(super) fn put(mut buf: BytesMut) {
    buf.clear();
    if buf.capacity() < BUFFER_BYTES {
        // Reclaims the front already consumed when nothing else refers to the storage (the
        // requests parsed from it are gone); otherwise allocates anew.
        buf.reserve(BUFFER_BYTES);
    }
    if buf.capacity() > KEEP_MAX_BYTES {
        return;
    }
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < KEPT_PER_THREAD {
            s.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_put_back_is_taken_again_and_big_ones_are_freed() {
        let mut b = take();
        assert!(b.capacity() >= BUFFER_BYTES);
        b.extend_from_slice(b"PING\r\n");
        let at = b.as_ptr();
        drop(b.split_to(6).freeze());
        put(b);
        let again = take();
        assert!(again.is_empty() && again.capacity() >= BUFFER_BYTES);
        assert_eq!(again.as_ptr(), at, "the consumed front is reclaimed, not reallocated");
        put(BytesMut::with_capacity(KEEP_MAX_BYTES + 1));
        assert!(take().capacity() <= KEEP_MAX_BYTES);
    }
}
