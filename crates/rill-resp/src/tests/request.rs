//! Raw-byte tests of the request parser.

use bytes::{Bytes, BytesMut};

use crate::{Limits, ProtocolError, RequestParser};

/// Everything one parser makes of `input`: the requests before the first error or the point
/// where it needs more bytes, the error if any, and how many bytes it took from the buffer
/// (into requests or into its own state).
#[derive(Debug, PartialEq)]
pub(super) struct Outcome {
    pub requests: Vec<Vec<Bytes>>,
    pub error: Option<ProtocolError>,
    pub consumed: usize,
}

/// Feeds `input` in chunks of the given sizes (the rest in one piece), parsing after each.
pub(super) fn parse_in_chunks(input: &[u8], chunk_sizes: &[usize], limits: &Limits) -> Outcome {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let mut rest = input;
    let mut sizes = chunk_sizes.iter();
    let mut fed = 0;
    while !rest.is_empty() {
        let size = sizes.next().copied().unwrap_or(rest.len()).clamp(1, rest.len());
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        fed += chunk.len();
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            match parser.parse(&mut buf, limits) {
                Ok(Some(args)) => requests.push(args),
                Ok(None) => break,
                Err(error) => return Outcome { requests, error: Some(error), consumed: fed - buf.len() },
            }
            assert!(buf.len() <= before);
        }
    }
    Outcome { requests, error: None, consumed: fed - buf.len() }
}

/// Parses `input` whole, then byte by byte, checks both agree and returns the outcome.
fn outcome(input: &[u8], limits: &Limits) -> Outcome {
    let whole = parse_in_chunks(input, &[], limits);
    let bytewise = parse_in_chunks(input, &vec![1; input.len()], limits);
    assert_eq!(whole, bytewise, "whole vs byte by byte for {:?}", String::from_utf8_lossy(input));
    whole
}

fn requests(input: &[u8]) -> Vec<Vec<Bytes>> {
    let result = outcome(input, &Limits::default());
    assert_eq!(result.error, None);
    result.requests
}

fn error(input: &[u8], limits: &Limits) -> ProtocolError {
    outcome(input, limits).error.expect("a protocol error")
}

fn args(list: &[&str]) -> Vec<Bytes> {
    list.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
}

fn unauthenticated() -> Limits {
    Limits { authenticated: false, ..Limits::default() }
}

fn small_lines() -> Limits {
    Limits { max_inline_len: 16, ..Limits::default() }
}

#[test]
fn multibulk_request() {
    assert_eq!(requests(b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n"), vec![args(&["ECHO", "hi"])]);
}

#[test]
fn binary_and_empty_bulks() {
    let got = requests(b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$4\r\n\r\n\x00\xff\r\n");
    assert_eq!(got, vec![vec![Bytes::from_static(b"SET"), Bytes::new(), Bytes::from_static(b"\r\n\x00\xff")]]);
}

#[test]
fn pipelined_requests_mixing_both_forms() {
    let got = requests(b"*1\r\n$4\r\nPING\r\nECHO a\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nQUIT\n");
    assert_eq!(got, vec![args(&["PING"]), args(&["ECHO", "a"]), args(&["GET", "k"]), args(&["QUIT"])]);
}

#[test]
fn empty_multibulk_and_blank_lines_are_skipped() {
    let got = requests(b"*0\r\n*-1\r\n*-5\r\n\r\n\n  \t \r\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(got, vec![args(&["PING"])]);
    let only_skips = outcome(b"*0\r\n\r\n", &Limits::default());
    assert_eq!(only_skips, Outcome { requests: vec![], error: None, consumed: 6 });
}

#[test]
fn partial_request_waits_and_keeps_only_its_own_bytes() {
    let mut parser = RequestParser::new();
    let limits = Limits::default();
    let mut buf = BytesMut::from(&b"*2\r\n$4\r\nECHO\r\n$5\r\nhel"[..]);
    assert_eq!(parser.parse(&mut buf, &limits), Ok(None));
    // Header lines and the complete first argument were moved into the parser.
    assert_eq!(&buf[..], b"hel");
    assert_eq!(parser.bytes_wanted(&buf), 4);
    buf.extend_from_slice(b"lo\r\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(parser.parse(&mut buf, &limits), Ok(Some(args(&["ECHO", "hello"]))));
    assert_eq!(&buf[..], b"*1\r\n$4\r\nPING\r\n");
    assert_eq!(parser.parse(&mut buf, &limits), Ok(Some(args(&["PING"]))));
    assert_eq!(parser.parse(&mut buf, &limits), Ok(None));
    assert!(buf.is_empty());
}

#[test]
fn an_announced_bulk_length_is_not_a_reservation() {
    let mut parser = RequestParser::new();
    let limits = Limits::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$536870912\r\n"[..]);
    assert_eq!(parser.parse(&mut buf, &limits), Ok(None));
    assert!(buf.is_empty());
    // Nothing of the bulk yet: only the fixed amount ahead.
    assert_eq!(parser.bytes_wanted(&buf), crate::RESERVE_AHEAD_MAX_BYTES);
    // As the bulk arrives the hint grows with it (doubling the buffer), never to the claim.
    buf.extend_from_slice(&vec![b'x'; 1 << 20]);
    assert_eq!(parser.parse(&mut buf, &limits), Ok(None));
    assert_eq!(parser.bytes_wanted(&buf), (1 << 20) + crate::RESERVE_AHEAD_MAX_BYTES);
    // Near the end it is exactly what is left.
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::from(&b"*1\r\n$100000\r\n"[..]);
    assert_eq!(parser.parse(&mut buf, &limits), Ok(None));
    buf.extend_from_slice(&vec![b'y'; 99_000]);
    assert_eq!(parser.parse(&mut buf, &limits), Ok(None));
    assert_eq!(parser.bytes_wanted(&buf), 1002);
}

#[test]
fn big_bulk_in_small_pieces() {
    let payload = vec![b'x'; 1 << 20];
    let mut input = b"*2\r\n$3\r\nSET\r\n$1048576\r\n".to_vec();
    input.extend_from_slice(&payload);
    input.extend_from_slice(b"\r\n");
    let result = parse_in_chunks(&input, &vec![1000; input.len() / 1000 + 1], &Limits::default());
    assert_eq!(result.requests, vec![vec![Bytes::from_static(b"SET"), Bytes::from(payload)]]);
}

#[test]
fn bytes_after_bulk_payload_are_skipped_unchecked_like_redis() {
    assert_eq!(requests(b"*1\r\n$4\r\nPINGXY*1\r\n$4\r\nPING\r\n"), vec![args(&["PING"]), args(&["PING"])]);
}

#[test]
fn huge_count_does_not_preallocate() {
    let result = outcome(b"*2147483647\r\n$1\r\na\r\n", &Limits::default());
    assert_eq!(result, Outcome { requests: vec![], error: None, consumed: 20 });
}

#[test]
fn too_big_mbulk_count_string() {
    let mut input = b"*".to_vec();
    input.extend_from_slice(&[b'1'; 16]);
    // 17 bytes without \r: one more than the limit allows.
    assert_eq!(error(&input, &small_lines()), ProtocolError::TooBigMultibulkCount);
    // 16 bytes without \r: still waiting.
    assert_eq!(outcome(&input[..16], &small_lines()).error, None);
    // Default limit: 64 KiB.
    let long = vec![b'*'; 64 * 1024 + 1];
    assert_eq!(error(&long, &Limits::default()), ProtocolError::TooBigMultibulkCount);
    assert_eq!(outcome(&long[..64 * 1024], &Limits::default()).error, None);
}

#[test]
fn too_big_line_is_deterministic_even_when_terminated() {
    let mut input = b"*".to_vec();
    input.extend_from_slice(&[b'1'; 20]);
    input.extend_from_slice(b"\r\n");
    assert_eq!(error(&input, &small_lines()), ProtocolError::TooBigMultibulkCount);
}

#[test]
fn invalid_multibulk_length() {
    for bad in [
        &b"*abc\r\n"[..],
        b"*2147483648\r\n",
        b"*01\r\n",
        b"*+1\r\n",
        b"*\r\n",
        b"*-0\r\n",
        b"* 1\r\n",
        b"*1 \r\n",
        b"*99999999999999999999\r\n",
    ] {
        assert_eq!(error(bad, &Limits::default()), ProtocolError::InvalidMultibulkLength, "{bad:?}");
    }
    // Not judged before the line is complete.
    assert_eq!(outcome(b"*abc", &Limits::default()).error, None);
    assert_eq!(outcome(b"*abc\r", &Limits::default()).error, None);
}

#[test]
fn unauthenticated_multibulk_length() {
    assert_eq!(error(b"*11\r\n", &unauthenticated()), ProtocolError::UnauthenticatedMultibulkLength);
    assert_eq!(outcome(b"*10\r\n", &unauthenticated()).error, None);
    assert_eq!(outcome(b"*11\r\n", &Limits::default()).error, None);
    // Syntax is checked first.
    assert_eq!(error(b"*2147483648\r\n", &unauthenticated()), ProtocolError::InvalidMultibulkLength);
}

#[test]
fn too_big_bulk_count_string() {
    let mut input = b"*1\r\n$".to_vec();
    input.extend_from_slice(&[b'1'; 16]);
    assert_eq!(error(&input, &small_lines()), ProtocolError::TooBigBulkCount);
    assert_eq!(outcome(&input[..input.len() - 1], &small_lines()).error, None);
}

#[test]
fn expected_dollar() {
    let got = error(b"*1\r\n%4\r\nPING\r\n", &Limits::default());
    assert_eq!(got, ProtocolError::ExpectedBulk { got: b'%' });
    assert_eq!(got.reply_text().unwrap(), "ERR Protocol error: expected '$', got '%'");
    // A bare \r line: the writer turns the \r into a space, as Redis' reply shows.
    assert_eq!(error(b"*1\r\n\r\r\n", &Limits::default()), ProtocolError::ExpectedBulk { got: b'\r' });
}

#[test]
fn invalid_bulk_length() {
    for bad in [&b"*1\r\n$-1\r\n"[..], b"*1\r\n$-5\r\n", b"*1\r\n$abc\r\n", b"*1\r\n$\r\n", b"*1\r\n$04\r\n"] {
        assert_eq!(error(bad, &Limits::default()), ProtocolError::InvalidBulkLength, "{bad:?}");
    }
    let limits = Limits { max_bulk_len: 10, ..Limits::default() };
    assert_eq!(error(b"*1\r\n$11\r\n", &limits), ProtocolError::InvalidBulkLength);
    assert_eq!(outcome(b"*1\r\n$10\r\n", &limits).error, None);
}

#[test]
fn unauthenticated_bulk_length() {
    assert_eq!(error(b"*1\r\n$16385\r\n", &unauthenticated()), ProtocolError::UnauthenticatedBulkLength);
    assert_eq!(outcome(b"*1\r\n$16384\r\n", &unauthenticated()).error, None);
    assert_eq!(outcome(b"*1\r\n$16385\r\n", &Limits::default()).error, None);
}

#[test]
fn unbalanced_quotes() {
    for bad in [
        &b"SET k \"abc\r\n"[..],
        b"SET k 'abc\n",
        b"SET k \"a\"b\r\n",
        b"SET k 'a'b\r\n",
        b"ECHO \"a\\\"\r\n",
        b"ECHO \"\\\r\n",
    ] {
        assert_eq!(error(bad, &Limits::default()), ProtocolError::UnbalancedQuotes, "{bad:?}");
    }
}

#[test]
fn too_big_inline_request() {
    let line = vec![b'a'; 64 * 1024 + 1];
    assert_eq!(error(&line, &Limits::default()), ProtocolError::TooBigInlineRequest);
    assert_eq!(outcome(&line[..64 * 1024], &Limits::default()).error, None);
    let mut exact = vec![b'a'; 64 * 1024];
    exact.push(b'\n');
    assert_eq!(outcome(&exact, &Limits::default()).requests.len(), 1);
}

#[test]
fn http_requests_close_without_reply() {
    for attack in
        [&b"POST / HTTP/1.1\r\n"[..], b"Host: example.com\r\n", b"post /\n", b"HOST:\n", b"*1\r\n$4\r\nPOST\r\n"]
    {
        let got = error(attack, &Limits::default());
        assert_eq!(got, ProtocolError::CrossProtocolRequest);
        assert_eq!(got.reply_text(), None);
        assert_eq!(got.reply(), None);
    }
    assert_eq!(requests(b"POSTS x\r\nHost x\r\n"), vec![args(&["POSTS", "x"]), args(&["Host", "x"])]);
}

#[test]
fn error_texts_are_redis_texts() {
    let cases = [
        (ProtocolError::TooBigMultibulkCount, "ERR Protocol error: too big mbulk count string"),
        (ProtocolError::InvalidMultibulkLength, "ERR Protocol error: invalid multibulk length"),
        (ProtocolError::UnauthenticatedMultibulkLength, "ERR Protocol error: unauthenticated multibulk length"),
        (ProtocolError::TooBigBulkCount, "ERR Protocol error: too big bulk count string"),
        (ProtocolError::ExpectedBulk { got: b'x' }, "ERR Protocol error: expected '$', got 'x'"),
        (ProtocolError::InvalidBulkLength, "ERR Protocol error: invalid bulk length"),
        (ProtocolError::UnauthenticatedBulkLength, "ERR Protocol error: unauthenticated bulk length"),
        (ProtocolError::UnbalancedQuotes, "ERR Protocol error: unbalanced quotes in request"),
        (ProtocolError::TooBigInlineRequest, "ERR Protocol error: too big inline request"),
    ];
    for (error, text) in cases {
        assert_eq!(error.reply_text().as_deref(), Some(text));
        assert_eq!(error.reply(), Some(crate::Reply::error(text)));
        assert_eq!(error.to_string(), text);
    }
    let raw = ProtocolError::ExpectedBulk { got: 0xff }.reply().unwrap();
    assert_eq!(raw, crate::Reply::Error(Bytes::from_static(b"ERR Protocol error: expected '$', got '\xff'")));
}

#[test]
fn inline_line_endings() {
    assert_eq!(requests(b"PING\r\nPING\nPING\r\r\n"), vec![args(&["PING"]); 3]);
}

#[test]
fn inline_splitting_and_quotes() {
    let cases: &[(&[u8], &[&[u8]])] = &[
        (b"set  k\tv", &[b"set", b"k", b"v"]),
        (b"set k \"a b\\x41\\n\\r\\t\\b\\a\\\\\\\"\"", &[b"set", b"k", b"a bA\n\r\t\x08\x07\\\""]),
        (b"echo \"\\xZZ\\q\\x4\"", &[b"echo", b"xZZqx4"]),
        (b"echo 'it\\'s' 'a\\nb'", &[b"echo", b"it's", b"a\\nb"]),
        (b"echo a\"b c\" d", &[b"echo", b"ab c", b"d"]),
        (b"echo \"\" ''", &[b"echo", b"", b""]),
        (b"echo \"a\"\x0bx", &[b"echo", b"a", b"x"]),
        (b"echo a\x0bb\x0c", &[b"echo", b"a\x0bb\x0c"]),
        (b"echo \"\\x4a\\x4A\"", &[b"echo", b"JJ"]),
        (b"echo \xff\x00", &[b"echo", b"\xff\x00"]),
    ];
    for (line, expected) in cases {
        let mut input = line.to_vec();
        input.extend_from_slice(b"\r\n");
        let expected: Vec<Bytes> = expected.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        assert_eq!(requests(&input), vec![expected], "{:?}", String::from_utf8_lossy(line));
    }
}

#[test]
fn redis_integer_syntax() {
    use crate::request::parse_redis_integer as parse;
    assert_eq!(parse(b"0"), Some(0));
    assert_eq!(parse(b"-1"), Some(-1));
    assert_eq!(parse(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse(b"-9223372036854775808"), Some(i64::MIN));
    for bad in [
        &b""[..],
        b"-",
        b"-0",
        b"00",
        b"01",
        b"+1",
        b" 1",
        b"1 ",
        b"9223372036854775808",
        b"1a",
        b"000000000000000000001",
    ] {
        assert_eq!(parse(bad), None, "{bad:?}");
    }
}

#[test]
fn whole_requests_take_the_fast_path_with_the_same_limits() {
    let tiny = Limits { max_inline_len: 2, ..Limits::default() };
    assert_eq!(error(b"*1\r\n$10\r\n0123456789\r\n", &tiny), ProtocolError::TooBigBulkCount);
    let few_bytes = Limits { max_bulk_len: 2, ..Limits::default() };
    assert_eq!(error(b"*1\r\n$3\r\nabc\r\n", &few_bytes), ProtocolError::InvalidBulkLength);
    assert_eq!(
        error(b"*1\r\n$3\r\nabc\r\n", &Limits { authenticated: false, ..few_bytes }),
        ProtocolError::InvalidBulkLength
    );
    assert_eq!(error(b"*1\r\n$01\r\na\r\n", &Limits::default()), ProtocolError::InvalidBulkLength);
    let many: Vec<u8> = [&b"*17\r\n"[..], &b"$1\r\na\r\n".repeat(17)].concat();
    assert_eq!(requests(&many), vec![args(&["a"; 17])]);
}

/// Found by the fuzz target: the fast path consumed a request whose first line an earlier call
/// had half searched, and the stale search position made the parser skip into the next line.
#[test]
fn fast_path_after_a_partial_first_line() {
    let input = b"*1\r\n$1\r\na\r\nb\n";
    let whole = parse_in_chunks(input, &[], &Limits::default());
    assert_eq!(whole.requests, vec![args(&["a"]), args(&["b"])]);
    for first in 1..input.len() {
        assert_eq!(parse_in_chunks(input, &[first], &Limits::default()), whole, "split at {first}");
    }
}
