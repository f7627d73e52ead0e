//! The output buffer: the same bytes as a plain buffer, large payloads referenced rather than
//! copied, and partial writes of any size through any number of slices.

use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::{write_reply, OutputBuffer, Protocol, Reply, SHARED_PAYLOAD_MIN_BYTES};

/// A payload of `len` bytes of `byte`.
fn payload(byte: u8, len: usize) -> Bytes {
    Bytes::from(vec![byte; len])
}

/// Everything `out` holds, consumed through writes of at most `sizes[i]` bytes over at most
/// `slices[i]` slices each (cycling), checking the counters on the way.
fn drain(out: &mut OutputBuffer, sizes: &[usize], slices: &[usize]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut turn = 0;
    while !out.is_empty() {
        let max_slices = slices.get(turn % slices.len().max(1)).copied().unwrap_or(4).max(1);
        let max_bytes = sizes.get(turn % sizes.len().max(1)).copied().unwrap_or(usize::MAX).max(1);
        turn += 1;
        let before = out.len();
        assert_eq!(out.remaining(), before);
        let mut iov = vec![IoSlice::new(&[]); max_slices];
        let n = out.chunks_vectored(&mut iov);
        assert!(n > 0, "slices for {before} bytes");
        assert_eq!(&iov[0][..], out.chunk(), "the first slice is the chunk");
        let mut taken = 0;
        for slice in &iov[..n] {
            let k = slice.len().min(max_bytes - taken);
            got.extend_from_slice(&slice[..k]);
            taken += k;
            if taken == max_bytes {
                break;
            }
        }
        out.advance(taken);
        assert_eq!(out.len(), before - taken);
    }
    assert_eq!(out.held_bytes(), out.encoded_capacity(), "no payload held once written");
    got
}

fn render(reply: &Reply, proto: Protocol) -> Vec<u8> {
    let mut plain = BytesMut::new();
    write_reply(&mut plain, reply, proto);
    plain.to_vec()
}

#[test]
fn a_large_bulk_is_referenced_not_copied() {
    let value = payload(b'v', SHARED_PAYLOAD_MIN_BYTES);
    let mut out = OutputBuffer::with_capacity(64);
    write_reply(&mut out, &Reply::Bulk(value.clone()), Protocol::Resp2);
    write_reply(&mut out, &Reply::ok(), Protocol::Resp2);
    let mut iov = [IoSlice::new(&[]); 8];
    let n = out.chunks_vectored(&mut iov);
    assert_eq!(n, 3, "header, the value, then CRLF and +OK");
    assert_eq!(&iov[0][..], format!("${}\r\n", value.len()).as_bytes());
    assert_eq!(iov[1].as_ptr(), value.as_ptr(), "the value itself, not a copy");
    assert_eq!(&iov[2][..], b"\r\n+OK\r\n");
    assert_eq!(out.len(), value.len() + 8 + 7);
    assert!(out.held_bytes() >= value.len(), "a referenced payload counts as held");
    assert!(out.contiguous().is_none());
}

#[test]
fn a_small_bulk_is_copied_into_one_contiguous_buffer() {
    let value = payload(b'v', SHARED_PAYLOAD_MIN_BYTES - 1);
    let mut out = OutputBuffer::with_capacity(64);
    write_reply(&mut out, &Reply::Bulk(value.clone()), Protocol::Resp3);
    let whole = out.contiguous().map(<[u8]>::to_vec);
    assert_eq!(whole, Some(render(&Reply::Bulk(value), Protocol::Resp3)));
}

#[test]
fn the_output_is_reusable_after_it_was_written() {
    let mut out = OutputBuffer::with_capacity(16);
    for round in 0..3u8 {
        let value = payload(round, SHARED_PAYLOAD_MIN_BYTES + usize::from(round));
        let reply = Reply::Array(vec![Reply::Bulk(value.clone()), Reply::Integer(7), Reply::Bulk(value)]);
        write_reply(&mut out, &reply, Protocol::Resp2);
        assert_eq!(drain(&mut out, &[5000, 3], &[2, 1, 3]), render(&reply, Protocol::Resp2), "round {round}");
    }
}

fn large_payload() -> impl Strategy<Value = Bytes> {
    (any::<u8>(), SHARED_PAYLOAD_MIN_BYTES - 2..SHARED_PAYLOAD_MIN_BYTES + 3).prop_map(|(b, n)| payload(b, n))
}

fn reply_with_large_payloads() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        large_payload().prop_map(Reply::Bulk),
        large_payload().prop_map(Reply::Raw),
        (any::<[u8; 3]>(), large_payload()).prop_map(|(format, text)| Reply::Verbatim { format, text }),
        vec(any::<u8>(), 0..40).prop_map(|b| Reply::Bulk(Bytes::from(b))),
        any::<i64>().prop_map(Reply::Integer),
        any::<f64>().prop_map(Reply::Double),
        Just(Reply::Null),
        Just(Reply::ok()),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Reply::Array),
            vec((inner.clone(), inner.clone()), 0..3).prop_map(Reply::Map),
            vec(inner, 0..4).prop_map(Reply::Push),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the replies, the protocol and the way the writes cut them, the output sends
    /// exactly the bytes a plain buffer holds.
    #[test]
    fn the_output_sends_the_bytes_a_plain_buffer_holds(
        replies in vec(reply_with_large_payloads(), 1..5),
        resp3 in any::<bool>(),
        sizes in vec(prop_oneof![1usize..40, 1usize..40_000], 1..8),
        slices in vec(1usize..6, 1..4),
    ) {
        let proto = if resp3 { Protocol::Resp3 } else { Protocol::Resp2 };
        let mut out = OutputBuffer::with_capacity(32);
        let mut expected = Vec::new();
        for reply in &replies {
            write_reply(&mut out, reply, proto);
            expected.extend_from_slice(&render(reply, proto));
        }
        prop_assert_eq!(out.len(), expected.len());
        let got = drain(&mut out, &sizes, &slices);
        prop_assert!(got == expected, "{} bytes sent, {} expected", got.len(), expected.len());
    }
}
