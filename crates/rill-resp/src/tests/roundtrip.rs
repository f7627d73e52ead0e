//! Property tests: request writer ↔ request parser, reply writer ↔ reply parser, and the
//! request parser's independence from how the bytes are split.

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;

use super::request::{parse_in_chunks, Outcome};
use crate::{parse_reply, write_reply, write_request, Limits, Protocol, Reply};

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..12),
        vec(prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'*'), Just(b'$'), Just(b'"'), any::<u8>()], 0..40),
        vec(any::<u8>(), 0..3000),
    ]
}

/// A request as a client would send it; never `POST`/`Host:` (those close the connection).
fn request() -> impl Strategy<Value = Vec<Vec<u8>>> {
    vec(arg(), 1..8).prop_filter("not an HTTP verb", |args| {
        !args[0].eq_ignore_ascii_case(b"post") && !args[0].eq_ignore_ascii_case(b"host:")
    })
}

fn as_bytes(args: &[Vec<u8>]) -> Vec<Bytes> {
    args.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

/// Quotes an argument for an inline request: every byte as `\xHH` inside double quotes.
fn inline_quoted(arg: &[u8]) -> Vec<u8> {
    let mut out = b"\"".to_vec();
    for byte in arg {
        out.extend_from_slice(format!("\\x{byte:02x}").as_bytes());
    }
    out.push(b'"');
    out
}

proptest! {
    #[test]
    fn written_requests_parse_back(
        requests in vec(request(), 1..6),
        chunks in vec(1usize..700, 0..40),
    ) {
        let mut wire = BytesMut::new();
        for args in &requests {
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            write_request(&mut wire, &refs);
        }
        let expected: Vec<Vec<Bytes>> = requests.iter().map(|r| as_bytes(r)).collect();
        let whole = parse_in_chunks(&wire, &[], &Limits::default());
        prop_assert_eq!(&whole, &Outcome { requests: expected, error: None, consumed: wire.len() });
        let split = parse_in_chunks(&wire, &chunks, &Limits::default());
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn quoted_inline_requests_parse_back(args in request(), crlf in any::<bool>()) {
        let mut line = Vec::new();
        for arg in &args {
            line.extend_from_slice(&inline_quoted(arg));
            line.push(b' ');
        }
        line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        let limits = Limits { max_inline_len: usize::MAX, ..Limits::default() };
        let parsed = parse_in_chunks(&line, &[], &limits);
        prop_assert_eq!(parsed, Outcome { requests: vec![as_bytes(&args)], error: None, consumed: line.len() });
    }

    /// What the parser makes of any bytes does not depend on how they are split: the same
    /// requests, the same error, the same bytes consumed. (The fuzz target checks the same.)
    #[test]
    fn splitting_never_changes_the_outcome(
        pieces in vec(protocol_piece(), 0..60),
        chunks in vec(1usize..8, 0..60),
        authenticated in any::<bool>(),
    ) {
        let input: Vec<u8> = pieces.concat();
        let limits = Limits { max_bulk_len: 20, max_inline_len: 12, authenticated };
        let whole = parse_in_chunks(&input, &[], &limits);
        let split = parse_in_chunks(&input, &chunks, &limits);
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn resp3_replies_parse_back(reply in reply_tree()) {
        let mut wire = BytesMut::new();
        write_reply(&mut wire, &reply, Protocol::Resp3);
        let (parsed, used) = parse_reply(&wire).unwrap().expect("complete");
        prop_assert_eq!(used, wire.len());
        let expected = as_resp3_reads(&reply);
        prop_assert!(same(&parsed, &expected), "{:?}\nread back as\n{:?}", expected, parsed);
    }

    #[test]
    fn resp2_replies_parse_back_degraded(reply in reply_tree()) {
        let mut wire = BytesMut::new();
        write_reply(&mut wire, &reply, Protocol::Resp2);
        let (parsed, used) = parse_reply(&wire).unwrap().expect("complete");
        prop_assert_eq!(used, wire.len());
        let expected = as_resp2_reads(&reply);
        prop_assert!(same(&parsed, &expected), "{:?}\nread back as\n{:?}", expected, parsed);
    }
}

/// Fragments that steer random input into the parser's interesting states.
const PIECES: &[&[u8]] = &[
    b"*",
    b"$",
    b"\r\n",
    b"\r",
    b"\n",
    b"1",
    b"3",
    b"-1",
    b"0",
    b"12",
    b"abc",
    b"\"",
    b"'",
    b" ",
    b"\\x4",
    b"\\",
    b"POST",
    b"*1\r\n$3\r\nabc\r\n",
];

fn protocol_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => (0..PIECES.len()).prop_map(|i| PIECES[i].to_vec()),
        1 => vec(any::<u8>(), 0..4),
    ]
}

fn text_without_line_breaks() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'), 0..16).prop_map(Bytes::from)
}

fn reply_tree() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        text_without_line_breaks().prop_map(Reply::Simple),
        text_without_line_breaks().prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        vec(any::<u8>(), 0..32).prop_map(|b| Reply::Bulk(Bytes::from(b))),
        Just(Reply::Null),
        Just(Reply::NullArray),
        any::<f64>().prop_map(Reply::Double),
        any::<bool>().prop_map(Reply::Boolean),
        "-?[1-9][0-9]{0,40}".prop_map(|d| Reply::BigNumber(Bytes::from(d))),
        (any::<[u8; 3]>(), vec(any::<u8>(), 0..32))
            .prop_map(|(format, text)| Reply::Verbatim { format, text: Bytes::from(text) }),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        let pairs = vec((inner.clone(), inner.clone()), 0..4);
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Reply::Array),
            vec(inner.clone(), 0..6).prop_map(Reply::Set),
            vec(inner.clone(), 0..6).prop_map(Reply::Push),
            pairs.clone().prop_map(Reply::Map),
            (pairs, inner).prop_map(|(p, r)| Reply::Attribute(p, Box::new(r))),
        ]
    })
}

/// What a RESP3 reader sees: both nulls are `_`.
fn as_resp3_reads(reply: &Reply) -> Reply {
    map_tree(reply, &|r| match r {
        Reply::NullArray => Some(Reply::Null),
        _ => None,
    })
}

/// What a RESP2 reader sees after the writer's degradations.
fn as_resp2_reads(reply: &Reply) -> Reply {
    match reply {
        Reply::Map(pairs) => {
            Reply::Array(pairs.iter().flat_map(|(k, v)| [as_resp2_reads(k), as_resp2_reads(v)]).collect())
        }
        Reply::Set(items) | Reply::Push(items) | Reply::Array(items) => {
            Reply::Array(items.iter().map(as_resp2_reads).collect())
        }
        Reply::Attribute(_, inner) => as_resp2_reads(inner),
        Reply::Double(d) => Reply::Bulk(Bytes::from(crate::double_text(*d))),
        Reply::Boolean(b) => Reply::Integer(i64::from(*b)),
        Reply::BigNumber(digits) => Reply::Bulk(digits.clone()),
        Reply::Verbatim { text, .. } => Reply::Bulk(text.clone()),
        other => other.clone(),
    }
}

/// Rebuilds `reply` bottom-up, replacing the nodes for which `f` returns a value.
fn map_tree(reply: &Reply, f: &dyn Fn(&Reply) -> Option<Reply>) -> Reply {
    if let Some(replaced) = f(reply) {
        return replaced;
    }
    let items = |v: &[Reply]| v.iter().map(|r| map_tree(r, f)).collect::<Vec<_>>();
    let pairs = |v: &[(Reply, Reply)]| v.iter().map(|(k, x)| (map_tree(k, f), map_tree(x, f))).collect::<Vec<_>>();
    match reply {
        Reply::Array(v) => Reply::Array(items(v)),
        Reply::Set(v) => Reply::Set(items(v)),
        Reply::Push(v) => Reply::Push(items(v)),
        Reply::Map(v) => Reply::Map(pairs(v)),
        Reply::Attribute(v, inner) => Reply::Attribute(pairs(v), Box::new(map_tree(inner, f))),
        other => other.clone(),
    }
}

/// Structural equality where doubles must be bit-identical (so `-0` stays `-0`) and any NaN
/// equals any NaN (RESP has one `nan`).
fn same(a: &Reply, b: &Reply) -> bool {
    let all = |x: &[Reply], y: &[Reply]| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q));
    let all_pairs = |x: &[(Reply, Reply)], y: &[(Reply, Reply)]| {
        x.len() == y.len() && x.iter().zip(y).all(|((k1, v1), (k2, v2))| same(k1, k2) && same(v1, v2))
    };
    match (a, b) {
        (Reply::Double(x), Reply::Double(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (Reply::Array(x), Reply::Array(y)) | (Reply::Set(x), Reply::Set(y)) | (Reply::Push(x), Reply::Push(y)) => {
            all(x, y)
        }
        (Reply::Map(x), Reply::Map(y)) => all_pairs(x, y),
        (Reply::Attribute(x, i), Reply::Attribute(y, j)) => all_pairs(x, y) && same(i, j),
        _ => a == b,
    }
}
