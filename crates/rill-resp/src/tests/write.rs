//! Exact bytes of every reply type in both protocols.

use bytes::{Bytes, BytesMut};

use crate::{double_text, write_reply, write_request, Protocol, Reply};

fn render(reply: &Reply, proto: Protocol) -> Vec<u8> {
    let mut out = BytesMut::new();
    write_reply(&mut out, reply, proto);
    out.to_vec()
}

/// Checks the RESP2 and RESP3 encodings of `reply`.
fn check(reply: Reply, resp2: &[u8], resp3: &[u8]) {
    assert_eq!(render(&reply, Protocol::Resp2), resp2, "RESP2 of {reply:?}");
    assert_eq!(render(&reply, Protocol::Resp3), resp3, "RESP3 of {reply:?}");
}

#[test]
fn scalars() {
    check(Reply::ok(), b"+OK\r\n", b"+OK\r\n");
    check(Reply::error("ERR bad"), b"-ERR bad\r\n", b"-ERR bad\r\n");
    check(Reply::Integer(0), b":0\r\n", b":0\r\n");
    check(Reply::Integer(-42), b":-42\r\n", b":-42\r\n");
    check(Reply::Integer(i64::MIN), b":-9223372036854775808\r\n", b":-9223372036854775808\r\n");
    check(Reply::Integer(i64::MAX), b":9223372036854775807\r\n", b":9223372036854775807\r\n");
    check(Reply::bulk("hello"), b"$5\r\nhello\r\n", b"$5\r\nhello\r\n");
    check(Reply::bulk(""), b"$0\r\n\r\n", b"$0\r\n\r\n");
    check(Reply::Null, b"$-1\r\n", b"_\r\n");
    check(Reply::NullArray, b"*-1\r\n", b"_\r\n");
    check(Reply::Boolean(true), b":1\r\n", b"#t\r\n");
    check(Reply::Boolean(false), b":0\r\n", b"#f\r\n");
    check(Reply::Double(3.25), b"$4\r\n3.25\r\n", b",3.25\r\n");
    check(Reply::Double(f64::NEG_INFINITY), b"$4\r\n-inf\r\n", b",-inf\r\n");
    check(
        Reply::BigNumber(Bytes::from_static(b"12345678901234567890")),
        b"$20\r\n12345678901234567890\r\n",
        b"(12345678901234567890\r\n",
    );
    check(
        Reply::Verbatim { format: *b"txt", text: Bytes::from_static(b"hello") },
        b"$5\r\nhello\r\n",
        b"=9\r\ntxt:hello\r\n",
    );
}

#[test]
fn line_breaks_in_simple_and_error_become_spaces() {
    check(Reply::error("ERR a\r\nb\nc"), b"-ERR a  b c\r\n", b"-ERR a  b c\r\n");
    check(Reply::simple("a\rb"), b"+a b\r\n", b"+a b\r\n");
}

#[test]
fn aggregates() {
    check(Reply::Array(vec![]), b"*0\r\n", b"*0\r\n");
    check(Reply::Array(vec![Reply::Integer(1), Reply::Null]), b"*2\r\n:1\r\n$-1\r\n", b"*2\r\n:1\r\n_\r\n");
    let map = Reply::Map(vec![(Reply::bulk("a"), Reply::Integer(1)), (Reply::bulk("b"), Reply::Boolean(true))]);
    check(map, b"*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:1\r\n", b"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n#t\r\n");
    check(Reply::Set(vec![Reply::bulk("x")]), b"*1\r\n$1\r\nx\r\n", b"~1\r\n$1\r\nx\r\n");
    check(Reply::Push(vec![Reply::bulk("message")]), b"*1\r\n$7\r\nmessage\r\n", b">1\r\n$7\r\nmessage\r\n");
    let attribute = Reply::Attribute(vec![(Reply::simple("ttl"), Reply::Integer(3))], Box::new(Reply::ok()));
    check(attribute, b"+OK\r\n", b"|1\r\n+ttl\r\n:3\r\n+OK\r\n");
    let nested = Reply::Array(vec![Reply::Map(vec![(Reply::simple("k"), Reply::Set(vec![]))])]);
    check(nested, b"*1\r\n*2\r\n+k\r\n*0\r\n", b"*1\r\n%1\r\n+k\r\n~0\r\n");
}

#[test]
fn requests_are_arrays_of_bulks() {
    let mut out = BytesMut::new();
    write_request(&mut out, &[b"SET", b"key", b""]);
    assert_eq!(&out[..], b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n");
}

#[test]
fn double_texts_follow_redis() {
    let cases: &[(f64, &str)] = &[
        (2.72, "2.72"),
        (1.0, "1"),
        (-300.0, "-300"),
        (0.0, "0"),
        (-0.0, "-0"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
        (f64::NAN, "nan"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (0.001, "0.001"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (1.2345e-5, "1.2345e-5"),
        (123.456, "123.456"),
        (1234.5678901234567, "1234.5678901234567"),
        (1e17, "100000000000000000"),
        (4611686018427387904.0, "4611686018427387904"),
        (1e19, "1e+19"),
        (1.5e20, "1.5e+20"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e300, "1e+300"),
        (5e-324, "5e-324"),
        (f64::MAX, "1.7976931348623157e+308"),
        (-1.25e-100, "-1.25e-100"),
    ];
    for &(value, text) in cases {
        assert_eq!(double_text(value), text, "{value:e}");
        if !value.is_nan() {
            let back: f64 = text.parse().unwrap();
            assert_eq!(back.to_bits(), value.to_bits(), "{text} reads back");
        }
    }
}

#[test]
fn raw_is_written_as_is_in_both_protocols() {
    let bytes: &[u8] = b"*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n";
    check(Reply::Raw(Bytes::from_static(bytes)), bytes, bytes);
    // Inside an aggregate it is one element like any other.
    check(
        Reply::Map(vec![(Reply::bulk("k"), Reply::Raw(Bytes::from_static(b"*0\r\n")))]),
        b"*2\r\n$1\r\nk\r\n*0\r\n",
        b"%1\r\n$1\r\nk\r\n*0\r\n",
    );
}
