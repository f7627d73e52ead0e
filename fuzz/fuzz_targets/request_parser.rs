//! Feeds arbitrary bytes to `RequestParser`, whole and in pseudo-random chunks.
//!
//! Checks: no panic; each `parse` call only shrinks the buffer (it never takes bytes it was not
//! given); and the outcome (requests, error, bytes taken) does not depend on how the input was
//! split, which is what a TCP stream demands of the parser.
//!
//! The first input byte chooses the limits and seeds the chunk sizes; the rest is the stream.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use rill_resp::{Limits, ProtocolError, RequestParser};

#[derive(Debug, PartialEq)]
struct Outcome {
    requests: Vec<Vec<Bytes>>,
    error: Option<ProtocolError>,
    consumed: usize,
}

fn run(input: &[u8], limits: &Limits, mut next_chunk: impl FnMut() -> usize) -> Outcome {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let mut fed = 0;
    let mut rest = input;
    while !rest.is_empty() {
        let size = next_chunk().clamp(1, rest.len());
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        fed += chunk.len();
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            let result = parser.parse(&mut buf, limits);
            assert!(buf.len() <= before, "parse grew the buffer");
            match result {
                Ok(Some(args)) => {
                    assert!(!args.is_empty(), "empty requests are skipped, not returned");
                    requests.push(args);
                }
                Ok(None) => break,
                Err(error) => return Outcome { requests, error: Some(error), consumed: fed - buf.len() },
            }
        }
    }
    Outcome { requests, error: None, consumed: fed - buf.len() }
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_bulk_len: if control & 1 == 0 { 64 } else { rill_resp::DEFAULT_MAX_BULK_BYTES },
        max_inline_len: if control & 2 == 0 { 32 } else { rill_resp::DEFAULT_MAX_INLINE_BYTES },
        authenticated: control & 4 != 0,
    };
    let whole = run(input, &limits, || usize::MAX);
    assert!(whole.consumed <= input.len());

    // xorshift64 seeded from the control byte and the length: chunks of 1..=16 bytes.
    let mut state = (u64::from(control) << 32 | input.len() as u64) | 1;
    let chunked = run(input, &limits, || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 16 + 1) as usize
    });
    assert_eq!(whole, chunked);
});
