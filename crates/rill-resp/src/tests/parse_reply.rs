//! Reading replies back.

use bytes::Bytes;

use crate::{parse_reply, Reply, MAX_REPLY_DEPTH};

fn parse_one(input: &[u8]) -> Reply {
    let (reply, used) = parse_reply(input).unwrap().expect("a complete reply");
    assert_eq!(used, input.len(), "whole input used");
    reply
}

#[test]
fn every_type() {
    assert_eq!(parse_one(b"+OK\r\n"), Reply::ok());
    assert_eq!(parse_one(b"-ERR x\r\n"), Reply::error("ERR x"));
    assert_eq!(parse_one(b":-7\r\n"), Reply::Integer(-7));
    assert_eq!(parse_one(b"$3\r\na\r\n\r\n"), Reply::bulk("a\r\n"));
    assert_eq!(parse_one(b"$-1\r\n"), Reply::Null);
    assert_eq!(parse_one(b"*-1\r\n"), Reply::NullArray);
    assert_eq!(parse_one(b"_\r\n"), Reply::Null);
    assert_eq!(parse_one(b"#t\r\n"), Reply::Boolean(true));
    assert_eq!(parse_one(b"#f\r\n"), Reply::Boolean(false));
    assert_eq!(parse_one(b",1e+19\r\n"), Reply::Double(1e19));
    assert_eq!(parse_one(b",-inf\r\n"), Reply::Double(f64::NEG_INFINITY));
    assert!(matches!(parse_one(b",nan\r\n"), Reply::Double(d) if d.is_nan()));
    assert_eq!(parse_one(b"(-123\r\n"), Reply::BigNumber(Bytes::from_static(b"-123")));
    assert_eq!(
        parse_one(b"=8\r\nmkd:# hi\r\n"),
        Reply::Verbatim { format: *b"mkd", text: Bytes::from_static(b"# hi") }
    );
    assert_eq!(parse_one(b"!8\r\nERR a\r\nb\r\n"), Reply::Error(Bytes::from_static(b"ERR a\r\nb")));
    assert_eq!(
        parse_one(b"*3\r\n:1\r\n~1\r\n+a\r\n>1\r\n_\r\n"),
        Reply::Array(vec![Reply::Integer(1), Reply::Set(vec![Reply::simple("a")]), Reply::Push(vec![Reply::Null])])
    );
    assert_eq!(parse_one(b"%1\r\n+k\r\n:2\r\n"), Reply::Map(vec![(Reply::simple("k"), Reply::Integer(2))]));
    assert_eq!(
        parse_one(b"|1\r\n+a\r\n+b\r\n:5\r\n"),
        Reply::Attribute(vec![(Reply::simple("a"), Reply::simple("b"))], Box::new(Reply::Integer(5)))
    );
}

#[test]
fn only_the_first_reply_is_taken() {
    assert_eq!(parse_reply(b"+A\r\n+B\r\n").unwrap(), Some((Reply::simple("A"), 4)));
}

#[test]
fn incomplete_replies_ask_for_more() {
    let full = b"*2\r\n$5\r\nhello\r\n%1\r\n+k\r\n|0\r\n,1.5\r\n";
    for end in 0..full.len() {
        assert_eq!(parse_reply(&full[..end]), Ok(None), "prefix of {end} bytes");
    }
    assert!(parse_reply(full).unwrap().is_some());
}

#[test]
fn malformed_replies_are_errors() {
    for bad in [
        &b"?1\r\n"[..],
        b"+a\rb\r\n",
        b":x\r\n",
        b"$2\r\nabc\r\n",
        b"$-2\r\n",
        b"*-2\r\n",
        b"%-1\r\n",
        b"#x\r\n",
        b",abc\r\n",
        b"=3\r\ntxt\r\n",
        b"_x\r\n",
        b"~-1\r\n",
    ] {
        assert!(parse_reply(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    let deep = b"*1\r\n".repeat(MAX_REPLY_DEPTH + 10);
    assert!(parse_reply(&deep).is_err());
    let mut fine = b"*1\r\n".repeat(100);
    fine.extend_from_slice(b":1\r\n");
    assert!(parse_reply(&fine).unwrap().is_some());
}

#[test]
fn huge_announced_counts_do_not_preallocate() {
    assert_eq!(parse_reply(b"*9223372036854775807\r\n:1\r\n"), Ok(None));
    assert_eq!(parse_reply(b"%4611686018427387903\r\n"), Ok(None));
    assert_eq!(parse_reply(b"$9223372036854775807\r\n"), Ok(None));
}
