//! Rendering [`Reply`] values (and client requests) as RESP bytes.
//!
//! ```text
//! type          RESP3                        RESP2
//! simple        +OK\r\n                      same
//! error         -ERR msg\r\n                 same           (CR/LF in msg become spaces)
//! integer       :42\r\n                      same
//! bulk          $5\r\nhello\r\n              same
//! null          _\r\n                        $-1\r\n
//! null array    _\r\n                        *-1\r\n
//! array         *2\r\n<a><b>                 same
//! map           %1\r\n<k><v>                 *2\r\n<k><v>   (flat array of 2n)
//! set           ~2\r\n<a><b>                 *2\r\n<a><b>
//! double        ,3.14\r\n                    $4\r\n3.14\r\n
//! boolean       #t\r\n / #f\r\n              :1\r\n / :0\r\n
//! big number    (1234567890123456789012\r\n  $22\r\n1234...\r\n
//! verbatim      =9\r\ntxt:hello\r\n          $5\r\nhello\r\n (length counts the "txt:")
//! push          >2\r\n<a><b>                 *2\r\n<a><b>
//! attribute     |1\r\n<k><v><reply>          <reply>        (the annotation is dropped)
//! ```
//!
//! The degradations are the ones Redis applies, so a RESP2 client sees exactly what Redis would
//! send it. Numbers are written with a small stack formatter: no allocation per reply.
//!
//! ## Doubles
//!
//! Text of a double, as Redis 7.2 and later produce it (`d2string` with `fpconv_dtoa`), used for
//! both the RESP3 `,` frame and the RESP2 bulk string:
//! * `nan`, `inf`, `-inf`; `0` and `-0`;
//! * an integral value within ±2^62 prints as an integer: `1`, `-300`, `100000000000000000`;
//! * otherwise the shortest digits that read back as the same double, laid out in plain
//!   notation (`3.14`, `0.001`, `1234567.5`) or scientific notation (`1e-7`, `1.5e+20`,
//!   `1e+300`: explicit exponent sign, no zero padding) by the same rules as Redis' `fpconv`.
//!
//! Redis' Grisu2 very rarely picks a digit string one digit longer than the shortest; Rust's
//! formatter always finds the shortest, so such a value may differ in its last digit from Redis'
//! text while denoting the same double. Redis 7.0 and older used `%.17g` (`3.1400000000000001`).

use std::fmt::Write as _;

use bytes::{BufMut, Bytes, BytesMut};

use crate::output::{ReplyTarget, SHARED_PAYLOAD_MIN_BYTES};
use crate::reply::{Protocol, Reply};

/// The bytes of `reply` an [`OutputBuffer`](crate::OutputBuffer) would hold by reference
/// rather than copy (its large payloads), in either protocol.
pub fn referenced_bytes(reply: &Reply) -> usize {
    let payload = |data: &[u8]| if data.len() < SHARED_PAYLOAD_MIN_BYTES { 0 } else { data.len() };
    match reply {
        Reply::Bulk(data) | Reply::Raw(data) | Reply::Verbatim { text: data, .. } => payload(data),
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => items.iter().map(referenced_bytes).sum(),
        Reply::Map(pairs) => pairs.iter().map(|(k, v)| referenced_bytes(k) + referenced_bytes(v)).sum(),
        Reply::Attribute(pairs, inner) => {
            pairs.iter().map(|(k, v)| referenced_bytes(k) + referenced_bytes(v)).sum::<usize>()
                + referenced_bytes(inner)
        }
        Reply::Simple(_)
        | Reply::Error(_)
        | Reply::Integer(_)
        | Reply::Null
        | Reply::NullArray
        | Reply::Double(_)
        | Reply::Boolean(_)
        | Reply::BigNumber(_) => 0,
    }
}

/// Appends `reply` to `out` as `proto` encodes it (see the module docs for the table). Into an
/// [`OutputBuffer`](crate::OutputBuffer), payloads of [`SHARED_PAYLOAD_MIN_BYTES`] or more
/// (bulk strings, verbatim text, raw replies) are referenced instead of copied; the bytes
/// written are the same.
pub fn write_reply<O: ReplyTarget + ?Sized>(out: &mut O, reply: &Reply, proto: Protocol) {
    let resp3 = proto == Protocol::Resp3;
    match reply {
        Reply::Simple(text) => write_line(out.encoded(), b'+', text),
        Reply::Error(text) => write_line(out.encoded(), b'-', text),
        Reply::Integer(n) => write_signed_header(out.encoded(), b':', *n),
        Reply::Bulk(data) => write_bulk_payload(out, data),
        Reply::Null if resp3 => out.encoded().extend_from_slice(b"_\r\n"),
        Reply::Null => out.encoded().extend_from_slice(b"$-1\r\n"),
        Reply::NullArray if resp3 => out.encoded().extend_from_slice(b"_\r\n"),
        Reply::NullArray => out.encoded().extend_from_slice(b"*-1\r\n"),
        Reply::Array(items) => write_aggregate(out, b'*', items, proto),
        Reply::Map(pairs) if resp3 => write_pairs(out, b'%', pairs, proto),
        Reply::Map(pairs) => {
            write_length_header(out.encoded(), b'*', pairs.len().saturating_mul(2));
            write_pair_items(out, pairs, proto);
        }
        Reply::Set(items) => write_aggregate(out, if resp3 { b'~' } else { b'*' }, items, proto),
        Reply::Double(value) => {
            let text = DoubleText::new(*value);
            let out = out.encoded();
            if resp3 {
                out.put_u8(b',');
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(b"\r\n");
            } else {
                write_bulk(out, text.as_bytes());
            }
        }
        Reply::Boolean(value) => out.encoded().extend_from_slice(match (resp3, value) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        }),
        Reply::BigNumber(digits) if resp3 => write_line(out.encoded(), b'(', digits),
        Reply::BigNumber(digits) => write_bulk(out.encoded(), digits),
        Reply::Verbatim { format, text } if resp3 => {
            let encoded = out.encoded();
            write_length_header(encoded, b'=', text.len().saturating_add(4));
            encoded.extend_from_slice(format);
            encoded.put_u8(b':');
            write_payload(out, text);
            out.encoded().extend_from_slice(b"\r\n");
        }
        Reply::Verbatim { text, .. } => write_bulk_payload(out, text),
        Reply::Push(items) => write_aggregate(out, if resp3 { b'>' } else { b'*' }, items, proto),
        Reply::Raw(bytes) => write_payload(out, bytes),
        Reply::Attribute(pairs, inner) => {
            if resp3 {
                write_pairs(out, b'|', pairs, proto);
            }
            write_reply(out, inner, proto);
        }
    }
}

/// Appends a request as clients send it: an array of bulk strings.
pub fn write_request(out: &mut BytesMut, args: &[&[u8]]) {
    write_length_header(out, b'*', args.len());
    for arg in args {
        write_bulk(out, arg);
    }
}

fn write_aggregate<O: ReplyTarget + ?Sized>(out: &mut O, marker: u8, items: &[Reply], proto: Protocol) {
    write_length_header(out.encoded(), marker, items.len());
    for item in items {
        write_reply(out, item, proto);
    }
}

fn write_pairs<O: ReplyTarget + ?Sized>(out: &mut O, marker: u8, pairs: &[(Reply, Reply)], proto: Protocol) {
    write_length_header(out.encoded(), marker, pairs.len());
    write_pair_items(out, pairs, proto);
}

fn write_pair_items<O: ReplyTarget + ?Sized>(out: &mut O, pairs: &[(Reply, Reply)], proto: Protocol) {
    for (key, value) in pairs {
        write_reply(out, key, proto);
        write_reply(out, value, proto);
    }
}

/// A bulk string of `data`, which the target may reference rather than copy when it is large.
fn write_bulk_payload<O: ReplyTarget + ?Sized>(out: &mut O, data: &Bytes) {
    if data.len() < SHARED_PAYLOAD_MIN_BYTES {
        write_bulk(out.encoded(), data);
        return;
    }
    write_length_header(out.encoded(), b'$', data.len());
    out.payload(data);
    out.encoded().extend_from_slice(b"\r\n");
}

/// `data` as it is, referenced by the target rather than copied when it is large.
fn write_payload<O: ReplyTarget + ?Sized>(out: &mut O, data: &Bytes) {
    if data.len() < SHARED_PAYLOAD_MIN_BYTES {
        out.encoded().extend_from_slice(data);
    } else {
        out.payload(data);
    }
}

fn write_bulk(out: &mut BytesMut, data: &[u8]) {
    // One reservation for header, payload and CRLF.
    out.reserve(data.len() + 25);
    write_length_header(out, b'$', data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// `<marker><text>\r\n`, with any CR or LF inside `text` replaced by a space (as Redis does
/// for error replies) so that a stray newline can never desynchronise the client.
fn write_line(out: &mut BytesMut, marker: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(marker);
    if memchr::memchr2(b'\r', b'\n', text).is_none() {
        out.extend_from_slice(text);
    } else {
        out.extend(text.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
    }
    out.extend_from_slice(b"\r\n");
}

/// `<marker><n>\r\n` for a length or count, into a reply buffer or a plain one.
fn write_length_header<B: BufMut>(out: &mut B, marker: u8, n: usize) {
    // Headers are written for every element of an aggregate: the common one- and two-digit
    // counts go out as one small copy.
    match n {
        0..=9 => out.put_slice(&[marker, b'0' + n as u8, b'\r', b'\n']),
        10..=99 => out.put_slice(&[marker, b'0' + (n / 10) as u8, b'0' + (n % 10) as u8, b'\r', b'\n']),
        _ => {
            let digits = DecimalText::unsigned(n as u64);
            out.put_u8(marker);
            out.put_slice(digits.as_bytes());
            out.put_slice(b"\r\n");
        }
    }
}

/// Appends a request as clients (and a primary to its replicas) send it, to a plain buffer:
/// an array of bulk strings, every length written without formatting machinery.
pub fn write_request_vec<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    write_length_header(out, b'*', args.len());
    for arg in args {
        let arg = arg.as_ref();
        write_length_header(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// [`write_request_vec`] for arguments given one by one.
pub fn write_request_iter<'a>(out: &mut Vec<u8>, args: impl ExactSizeIterator<Item = &'a [u8]>) {
    write_length_header(out, b'*', args.len());
    for arg in args {
        write_length_header(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

fn write_signed_header(out: &mut BytesMut, marker: u8, n: i64) {
    let digits = DecimalText::signed(n);
    out.reserve(digits.len + 3);
    out.put_u8(marker);
    out.extend_from_slice(digits.as_bytes());
    out.extend_from_slice(b"\r\n");
}

// ------------------------------------------------------------------------------------------
// Number text without allocation
// ------------------------------------------------------------------------------------------

/// Decimal text of an integer, right-aligned in a stack buffer.
struct DecimalText {
    /// Room for `u64::MAX` (20 digits) or `i64::MIN` (sign and 19 digits).
    bytes: [u8; 20],
    /// Number of bytes used, at the end of `bytes`.
    len: usize,
}

impl DecimalText {
    fn unsigned(mut n: u64) -> DecimalText {
        let mut text = DecimalText { bytes: [0; 20], len: 0 };
        loop {
            text.push_front(b'0' + (n % 10) as u8);
            n /= 10;
            if n == 0 {
                return text;
            }
        }
    }

    fn signed(n: i64) -> DecimalText {
        let mut text = DecimalText::unsigned(n.unsigned_abs());
        if n < 0 {
            text.push_front(b'-');
        }
        text
    }

    fn push_front(&mut self, byte: u8) {
        let index = self.bytes.len() - self.len - 1;
        if let Some(slot) = self.bytes.get_mut(index) {
            *slot = byte;
            self.len += 1;
        }
    }

    fn as_bytes(&self) -> &[u8] {
        self.bytes.get(self.bytes.len() - self.len..).unwrap_or_default()
    }
}

/// A small stack buffer that `write!` can target; extra text past its capacity is an error.
struct StackText<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    fn new() -> Self {
        StackText { bytes: [0; N], len: 0 }
    }

    fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    fn push(&mut self, text: &[u8]) {
        if let Some(slot) = self.bytes.get_mut(self.len..self.len + text.len()) {
            slot.copy_from_slice(text);
            self.len += text.len();
        }
    }

    fn push_zeros(&mut self, count: usize) {
        for _ in 0..count {
            self.push(b"0");
        }
    }
}

impl<const N: usize> std::fmt::Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Largest magnitude Redis prints as an integer: `LLONG_MAX / 2` rounded to a double (2^62).
const INTEGRAL_DOUBLE_LIMIT: f64 = 4_611_686_018_427_387_904.0;

/// The text of a double as Redis writes it (see the module docs).
struct DoubleText {
    /// Longest case: sign, 17 digits, point and up to 6 zeros after it, or an exponent; 40 is
    /// comfortably above every layout below.
    text: StackText<40>,
}

impl DoubleText {
    fn new(value: f64) -> DoubleText {
        let mut text = StackText::new();
        if value.is_nan() {
            text.push(b"nan");
        } else if value.is_infinite() {
            text.push(if value > 0.0 { b"inf" } else { b"-inf" });
        } else if value == 0.0 {
            text.push(if value.is_sign_negative() { b"-0" } else { b"0" });
        } else if value.fract() == 0.0 && value.abs() <= INTEGRAL_DOUBLE_LIMIT {
            // Exact: the value is integral and well inside i64.
            text.push(DecimalText::signed(value as i64).as_bytes());
        } else {
            write_shortest_layout(&mut text, value);
        }
        DoubleText { text }
    }

    fn as_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

/// Lays out the shortest round-trip digits of a finite, non-zero `value`.
fn write_shortest_layout(text: &mut StackText<40>, value: f64) {
    // Rust's `{:e}` prints the shortest round-trip digits as `d.ddde<exp>`.
    let mut scientific = StackText::<40>::new();
    if write!(scientific, "{:e}", value.abs()).is_err() {
        return;
    }
    let raw = scientific.as_bytes();
    let Some(e_at) = memchr::memchr(b'e', raw) else {
        return;
    };
    let mut digits = StackText::<24>::new();
    for &b in raw.get(..e_at).unwrap_or_default() {
        if b != b'.' {
            digits.push(&[b]);
        }
    }
    let exponent = std::str::from_utf8(raw.get(e_at + 1..).unwrap_or_default())
        .ok()
        .and_then(|e| e.parse::<i32>().ok())
        .unwrap_or(0);
    let digits = digits.as_bytes();
    let count = digits.len() as i32;
    // Exponent of the last digit: value = digits * 10^last.
    let last = exponent - (count - 1);
    let magnitude = exponent.abs();

    if value < 0.0 {
        text.push(b"-");
    }
    if last >= 0 && magnitude < count + 7 {
        text.push(digits);
        text.push_zeros(last as usize);
    } else if last < 0 && (last > -7 || magnitude < 4) {
        let integer_digits = count + last;
        if integer_digits <= 0 {
            text.push(b"0.");
            text.push_zeros((-integer_digits) as usize);
            text.push(digits);
        } else {
            let (integer, fraction) = digits.split_at(integer_digits as usize);
            text.push(integer);
            text.push(b".");
            text.push(fraction);
        }
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        text.push(first);
        if !rest.is_empty() {
            text.push(b".");
            text.push(rest);
        }
        text.push(if exponent < 0 { b"e-" } else { b"e+" });
        text.push(DecimalText::unsigned(u64::from(magnitude.unsigned_abs())).as_bytes());
    }
}

/// The text [`write_reply`] uses for a double (without the `,` or bulk framing).
pub fn double_text(value: f64) -> String {
    String::from_utf8_lossy(DoubleText::new(value).as_bytes()).into_owned()
}
