//! Headers that announce huge counts or lengths must not make the parsers allocate for them:
//! `*2147483647\r\n` is 15 bytes from any client. This binary's global allocator records the
//! largest single allocation, and each header is parsed with a fresh record.

// The allocator below is the only unsafe code: `GlobalAlloc` is an unsafe trait.
#![allow(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::BytesMut;
use rill_resp::{parse_reply, Limits, RequestParser};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest allocation since the last [`largest_since`] reset.
static LARGEST: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, recording the largest request.
struct Recording;

// SAFETY: every call is forwarded to `System` with the caller's arguments unchanged, so the
// caller's contract carries over; we only record sizes.
unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Recording = Recording;

/// Generous next to the fixed preallocation caps (1024 elements), tiny next to the claims.
const MAX_BYTES_FOR_A_HEADER: usize = 1 << 20;

/// The largest single allocation `f` makes.
fn largest_allocation(f: impl FnOnce()) -> usize {
    LARGEST.store(0, Ordering::Relaxed);
    f();
    LARGEST.load(Ordering::Relaxed)
}

// One test function: the record is global, and parallel tests would mix their allocations.
#[test]
fn huge_headers_do_not_preallocate() {
    let limits = Limits::default();
    for input in [
        &b"*2147483647\r\n"[..],
        b"*2147483647\r\n$3\r\nSET\r\n",
        b"*2\r\n$3\r\nSET\r\n$536870912\r\n",
        b"*1\r\n$536870912\r\nabc",
        b"*2147483647\r\n$536870912\r\n",
    ] {
        let used = largest_allocation(|| {
            let mut parser = RequestParser::new();
            let mut buf = BytesMut::from(input);
            assert_eq!(parser.parse(&mut buf, &limits), Ok(None), "{input:?}");
            assert!(parser.bytes_wanted(&buf) <= rill_resp::RESERVE_AHEAD_MAX_BYTES + buf.len());
        });
        assert!(used < MAX_BYTES_FOR_A_HEADER, "{input:?}: allocated {used} bytes");
    }
    for input in [
        &b"*2147483647\r\n"[..],
        b"*9223372036854775807\r\n:1\r\n",
        b"%4611686018427387903\r\n+a\r\n",
        b"~2147483647\r\n",
        b">2147483647\r\n",
        b"|2147483647\r\n",
        b"$536870912\r\n",
        b"*3\r\n*2147483647\r\n%2147483647\r\n",
    ] {
        let used = largest_allocation(|| {
            assert_eq!(parse_reply(input), Ok(None), "{input:?}");
        });
        assert!(used < MAX_BYTES_FOR_A_HEADER, "{input:?}: allocated {used} bytes");
    }
}
