//! Raw-bytes robustness: malformed requests get Redis' exact error bytes (or a clean close),
//! and the server keeps serving its other connections meanwhile.
//!
//! Every case is sent to rill and to Redis 7.0.15 (Debian's, started here); the bytes each
//! sends back and whether it closed the connection must be the same. The expected bytes are
//! also written out below, so the cases still mean something with `RILL_SKIP_REFERENCE=1`, and
//! a change in Redis shows up as a failed sanity check rather than a silent pass.
//!
//! `RILL_DIFF_SELFTEST=1` runs a second Redis 7.0.15 in rill's place.

use rill_testkit::{escape, RawClient, ReferenceServer, Server};
use std::time::Duration;

/// How long a connection must stay silent to count as "open, nothing more to say".
const QUIET: Duration = Duration::from_millis(300);

struct Case {
    /// Bytes sent on a fresh connection.
    input: Vec<u8>,
    /// Close our write side after sending (a client that goes away mid-frame).
    hang_up: bool,
    /// What Redis answers, and whether it closes the connection afterwards.
    expected: &'static [u8],
    expect_closed: bool,
}

/// Sends the case on a fresh connection; returns everything received and whether it closed.
fn exchange(server: &Server, case: &Case) -> (Vec<u8>, bool) {
    let mut client = server.connect();
    // The server may close before it has read everything we send; that is fine.
    let _ = client.send(&case.input);
    if case.hang_up {
        client.shutdown_write();
    }
    client.read_until_close(QUIET)
}

fn show(reply: &(Vec<u8>, bool)) -> String {
    format!("\"{}\" ({})", escape(&reply.0), if reply.1 { "closed" } else { "still open" })
}

fn check(name: &str, case: Case) {
    let mut rill = Server::subject();
    let reference = Server::reference(ReferenceServer::Redis7);

    // A bystander connected before the bad input must keep being served. Only connection-level
    // commands here, so these tests don't depend on the data types.
    let mut bystander = rill.connect();
    expect(&mut bystander, &["CLIENT", "SETNAME", "bystander"], b"+OK\r\n", name);

    let expected = (case.expected.to_vec(), case.expect_closed);
    if let Some(reference) = &reference {
        let redis = exchange(reference, &case);
        assert!(
            redis == expected,
            "{name}: redis 7.0.15 sent {} but this test expects {}; update the case",
            show(&redis),
            show(&expected)
        );
    }
    let got = exchange(&rill, &case);
    assert!(got == expected, "{name}: {} answered {}, redis answers {}", rill.label(), show(&got), show(&expected));

    assert!(rill.is_running(), "{name}: server exited\n{}", rill.log());
    expect(&mut bystander, &["PING"], b"+PONG\r\n", name);
    expect(&mut bystander, &["CLIENT", "GETNAME"], b"$9\r\nbystander\r\n", name);
    let mut fresh: RawClient = rill.connect();
    expect(&mut fresh, &["PING"], b"+PONG\r\n", name);
}

fn expect(client: &mut RawClient, args: &[&str], expected: &[u8], case: &str) {
    let got = client.cmd(args);
    assert!(
        got == expected,
        "after case {case}: {args:?} answered \"{}\", expected \"{}\"",
        escape(&got),
        escape(expected)
    );
}

fn case(input: &[u8], expected: &'static [u8], expect_closed: bool) -> Case {
    Case { input: input.to_vec(), hang_up: false, expected, expect_closed }
}

#[test]
fn garbage_inline_bytes_are_an_unknown_command() {
    check(
        "garbage",
        case(
            b"\xff\xfe\x01junk\r\n",
            b"-ERR unknown command '\xff\xfe\x01junk', with args beginning with: \r\n",
            false,
        ),
    );
}

#[test]
fn non_numeric_multibulk_count() {
    check("*abc", case(b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n", true));
}

#[test]
fn multibulk_count_out_of_range() {
    check("*99999999999", case(b"*99999999999\r\n", b"-ERR Protocol error: invalid multibulk length\r\n", true));
}

#[test]
fn missing_dollar() {
    check("*1 then x", case(b"*1\r\nx\r\n", b"-ERR Protocol error: expected '$', got 'x'\r\n", true));
}

#[test]
fn unbalanced_inline_quote() {
    check("unbalanced quote", case(b"SET \"abc\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n", true));
}

#[test]
fn closing_quote_glued_to_text() {
    check("closing quote", case(b"SET \"a\"b c\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n", true));
}

#[test]
fn negative_and_zero_multibulk_counts_are_skipped() {
    check("*-5", case(b"*-5\r\n*0\r\n*1\r\n$4\r\nPING\r\n", b"+PONG\r\n", false));
}

#[test]
fn huge_bulk_length() {
    check("$999999999999", case(b"*1\r\n$999999999999\r\n", b"-ERR Protocol error: invalid bulk length\r\n", true));
}

#[test]
fn bulk_length_above_proto_max_bulk_len() {
    check("$536870913", case(b"*1\r\n$536870913\r\n", b"-ERR Protocol error: invalid bulk length\r\n", true));
}

#[test]
fn negative_bulk_length() {
    check("$-5", case(b"*1\r\n$-5\r\n", b"-ERR Protocol error: invalid bulk length\r\n", true));
}

#[test]
fn client_disconnects_mid_frame() {
    check(
        "mid-frame hang-up",
        Case { input: b"*2\r\n$3\r\nGET\r\n$5\r\nab".to_vec(), hang_up: true, expected: b"", expect_closed: true },
    );
}

#[test]
fn huge_inline_request() {
    // 64 KiB + 1 without a newline: the limit is crossed exactly when the last byte arrives,
    // so the server has read everything and closes cleanly (no RST eating the reply).
    let input = vec![b'A'; 64 * 1024 + 1];
    check(
        "huge inline",
        Case {
            input,
            hang_up: false,
            expected: b"-ERR Protocol error: too big inline request\r\n",
            expect_closed: true,
        },
    );
}

#[test]
fn huge_multibulk_count_line() {
    let mut input = b"*".to_vec();
    input.extend(std::iter::repeat_n(b'1', 64 * 1024));
    check(
        "huge *count line",
        Case {
            input,
            hang_up: false,
            expected: b"-ERR Protocol error: too big mbulk count string\r\n",
            expect_closed: true,
        },
    );
}

#[test]
fn huge_bulk_count_line() {
    let mut input = b"*1\r\n$".to_vec();
    input.extend(std::iter::repeat_n(b'1', 64 * 1024));
    check(
        "huge $count line",
        Case {
            input,
            hang_up: false,
            expected: b"-ERR Protocol error: too big bulk count string\r\n",
            expect_closed: true,
        },
    );
}

#[test]
fn empty_inline_lines_are_ignored() {
    check("empty lines", case(b"\r\n\n\r\nPING\r\n", b"+PONG\r\n", false));
}

#[test]
fn inline_commands_with_escapes() {
    check("inline escapes", case(b"ECHO \"a\\x41\\n\"\nPING\n", b"$3\r\naA\n\r\n+PONG\r\n", false));
}

#[test]
fn http_requests_are_dropped() {
    check("POST", case(b"POST / HTTP/1.1\r\n", b"", true));
    check("Host:", case(b"Host: example\r\n", b"", true));
}

#[test]
fn pipelined_requests_in_one_write() {
    // Multibulk and inline requests mixed in one write; replies in order.
    let mut input = Vec::new();
    let mut expected = Vec::new();
    for i in 0..100 {
        let arg = format!("m{i}");
        input.extend_from_slice(&rill_testkit::encode_command(&[b"ECHO", arg.as_bytes()]));
        input.extend_from_slice(b"PING\r\n");
        expected.extend_from_slice(format!("${}\r\n{arg}\r\n+PONG\r\n", arg.len()).as_bytes());
    }
    let expected: &'static [u8] = Box::leak(expected.into_boxed_slice());
    check("pipeline", case(&input, expected, false));
}
