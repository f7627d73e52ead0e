//! Incremental parser for client requests, with Redis' limits and error texts.
//!
//! A request is either *multibulk* (what every client library sends) or *inline* (what a person
//! types into `nc`/`telnet`). The first byte decides: `*` means multibulk, anything else inline.
//!
//! ```text
//! multibulk:  *<argc>\r\n  then argc times  $<len>\r\n<len bytes>\r\n
//!             *2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n          -> ["ECHO", "hi"]
//!             argc <= 0                                -> no request at all (skipped)
//!
//! inline:     <words separated by spaces/tabs>\n       (a \r before the \n is dropped)
//!             set k "a b\x41"                          -> ["set", "k", "a bA"]
//!             empty or blank line                      -> no request at all (skipped)
//! ```
//!
//! The parser is a small state machine ([`RequestParser`]) so that a request arriving in many
//! reads is never rescanned from its start: complete arguments are moved out of the buffer as
//! soon as they are whole, a bulk whose `$len` line is known waits for exactly `len + 2` bytes,
//! and the search for a line terminator resumes where the previous call stopped. Parsing is
//! therefore O(n) in the bytes received however they are split. A request that is already
//! whole in the buffer (the usual case with pipelining) takes a fast path that locates all its
//! arguments and cuts it out at once. Arguments are zero-copy slices of the read buffer
//! (`BytesMut::split_to(..).freeze()`); only inline arguments with quotes are copied, because
//! their escapes change the bytes. Inline splitting lives in `inline.rs`.
//!
//! Where Redis' behaviour is odd we match it and say so:
//! * The two bytes after a bulk's payload are skipped without checking that they are `\r\n`,
//!   and likewise the byte after the `\r` of a `*`/`$` line (Redis 7 does the same).
//! * Numbers follow Redis' strict integer syntax: no sign `+`, no leading zeros, no `-0`, at most
//!   20 characters, must fit in an `i64`.
//! * `POST` and `Host:` as a request's first word (any case, inline or multibulk) close the
//!   connection without reply: Redis treats them as a cross-protocol attack from a browser.
//!
//! Where Redis depends on how the bytes happened to be split by TCP we are deterministic: a line
//! (inline request, `*` or `$` line) is too big when more than [`Limits::max_inline_len`] bytes
//! precede its terminator, whether or not the terminator has arrived yet. Redis only checks when
//! the terminator has *not* arrived, so a slightly longer line that arrives in one read passes
//! there. Redis also stops at a NUL byte when looking for a line end (C strings); we do not.

use bytes::{Buf, Bytes, BytesMut};

use crate::inline::split_inline;
use crate::reply::Reply;

/// Redis' default `proto-max-bulk-len`: 512 MiB.
pub const DEFAULT_MAX_BULK_BYTES: usize = 512 * 1024 * 1024;
/// Redis' `PROTO_INLINE_MAX_SIZE`: longest inline request or `*`/`$` line, 64 KiB.
pub const DEFAULT_MAX_INLINE_BYTES: usize = 64 * 1024;
/// Before authentication Redis refuses multibulk requests with more arguments than this.
pub const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
/// Before authentication Redis refuses bulks longer than this many bytes.
pub const UNAUTHENTICATED_MAX_BULK_BYTES: i64 = 16 * 1024;
/// Redis keeps argc in a C `int`.
const MAX_MULTIBULK_ARGS: i64 = i32::MAX as i64;
/// A client can announce two billion arguments in 15 bytes; preallocate at most this many.
const ARGS_PREALLOCATION_CAP: usize = 1024;
/// [`RequestParser::bytes_wanted`] never asks for more than this beyond the bytes of the bulk
/// already received: a `$536870912` header alone must not make a server reserve 512 MiB.
pub const RESERVE_AHEAD_MAX_BYTES: usize = 64 * 1024;
/// Redis rejects number strings of 21 bytes or more before looking at them.
const MAX_NUMBER_CHARS: usize = 20;

/// Limits applied while parsing requests of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk argument (`proto-max-bulk-len`); longer ones are
    /// `ERR Protocol error: invalid bulk length`. Default 512 MiB.
    pub max_bulk_len: usize,
    /// Longest inline request and longest `*<count>` / `$<len>` line. Default 64 KiB.
    pub max_inline_len: usize,
    /// `false` applies Redis' limits for connections that still have to `AUTH`: more than 10
    /// arguments or a bulk over 16384 bytes is an error. Set it to `true` when no password is
    /// required or after a successful `AUTH`/`HELLO ... AUTH`.
    pub authenticated: bool,
}

impl Default for Limits {
    /// Redis' defaults, for a server without a password (so already authenticated).
    fn default() -> Self {
        Limits { max_bulk_len: DEFAULT_MAX_BULK_BYTES, max_inline_len: DEFAULT_MAX_INLINE_BYTES, authenticated: true }
    }
}

/// A request that cannot be parsed. After any of these the server sends [`Self::reply`] (if
/// any) and closes the connection: the stream can no longer be trusted to be in sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// No `\r` within `max_inline_len` bytes of a `*<count>` line.
    TooBigMultibulkCount,
    /// The count is not an integer or is above 2147483647.
    InvalidMultibulkLength,
    /// More than 10 arguments before authentication.
    UnauthenticatedMultibulkLength,
    /// No `\r` within `max_inline_len` bytes of a `$<len>` line.
    TooBigBulkCount,
    /// A bulk header did not start with `$`; carries the byte found instead.
    ExpectedBulk {
        /// The first byte of the line that should have been `$<len>`.
        got: u8,
    },
    /// The bulk length is not an integer, negative, or above `max_bulk_len`.
    InvalidBulkLength,
    /// A bulk over 16384 bytes before authentication.
    UnauthenticatedBulkLength,
    /// An inline request with an unterminated quote, or a closing quote not followed by space.
    UnbalancedQuotes,
    /// No `\n` within `max_inline_len` bytes of an inline request.
    TooBigInlineRequest,
    /// A request starting with `POST` or `Host:`: an HTTP request aimed at us, most likely by a
    /// web page trying cross-protocol scripting. Close without a reply.
    CrossProtocolRequest,
}

impl ProtocolError {
    /// The error text to send before closing (without the leading `-`), e.g.
    /// `"ERR Protocol error: invalid bulk length"`; `None` means close without reply.
    ///
    /// For [`ProtocolError::ExpectedBulk`] with a byte outside ASCII the byte is shown as the
    /// Latin-1 character; [`Self::reply`] has the exact bytes Redis sends.
    pub fn reply_text(&self) -> Option<String> {
        let text = match self {
            ProtocolError::TooBigMultibulkCount => "too big mbulk count string",
            ProtocolError::InvalidMultibulkLength => "invalid multibulk length",
            ProtocolError::UnauthenticatedMultibulkLength => "unauthenticated multibulk length",
            ProtocolError::TooBigBulkCount => "too big bulk count string",
            ProtocolError::ExpectedBulk { got } => {
                return Some(format!("ERR Protocol error: expected '$', got '{}'", char::from(*got)))
            }
            ProtocolError::InvalidBulkLength => "invalid bulk length",
            ProtocolError::UnauthenticatedBulkLength => "unauthenticated bulk length",
            ProtocolError::UnbalancedQuotes => "unbalanced quotes in request",
            ProtocolError::TooBigInlineRequest => "too big inline request",
            ProtocolError::CrossProtocolRequest => return None,
        };
        Some(format!("ERR Protocol error: {text}"))
    }

    /// The error reply to send before closing, byte-exact; `None` means close without reply.
    /// (The writer turns a CR or LF inside it into a space, as Redis does.)
    pub fn reply(&self) -> Option<Reply> {
        match self {
            ProtocolError::ExpectedBulk { got } => {
                let mut text = b"ERR Protocol error: expected '$', got '".to_vec();
                text.push(*got);
                text.push(b'\'');
                Some(Reply::Error(Bytes::from(text)))
            }
            other => other.reply_text().map(Reply::error),
        }
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reply_text() {
            Some(text) => f.write_str(&text),
            None => f.write_str("HTTP request on the Redis port (POST or Host:)"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Incremental request parser; one per connection.
///
/// Between calls the caller may only append to the buffer. After an error the connection must
/// be closed; the parser's state is then meaningless.
#[derive(Debug, Default)]
pub struct RequestParser {
    /// Arguments of the multibulk request being assembled, already cut out of the buffer.
    args: Vec<Bytes>,
    /// Bulks the current multibulk request still expects; 0 between requests.
    bulks_remaining: usize,
    /// Payload length of the next bulk once its `$<len>` line has been consumed.
    bulk_len: Option<usize>,
    /// How many bytes at the front of the buffer were already searched for the terminator of
    /// the line starting there, without finding it. Reset whenever bytes are consumed.
    line_scanned: usize,
}

impl RequestParser {
    /// A parser at the start of a connection.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the next complete request at the front of `buf`.
    ///
    /// Returns its arguments and removes its bytes from `buf`; `Ok(None)` when more bytes are
    /// needed. Requests that produce nothing (`*0`, `*-1`, blank inline lines) are consumed and
    /// skipped. Bytes of an incomplete request may be moved into the parser, never more than
    /// that request's own bytes.
    pub fn parse(&mut self, buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let mut args = Vec::new();
        Ok(self.parse_into(buf, limits, &mut args)?.then_some(args))
    }

    /// [`RequestParser::parse`] into a vector the caller reuses: on `Ok(true)` `args` holds
    /// the request (its old contents are replaced); on `Ok(false)` more bytes are needed.
    /// Saves an allocation per request on a pipelined connection.
    pub fn parse_into(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
        args: &mut Vec<Bytes>,
    ) -> Result<bool, ProtocolError> {
        loop {
            if self.bulks_remaining == 0 {
                match buf.first() {
                    None => return Ok(false),
                    Some(b'*') => {
                        args.clear();
                        if parse_whole_multibulk(buf, limits, args) {
                            // An earlier call may have searched part of this request's first
                            // line; that progress belongs to bytes that are now gone.
                            self.line_scanned = 0;
                            return checked_request(args).map(|()| true);
                        }
                        match self.read_multibulk_count(buf, limits)? {
                            None => return Ok(false),
                            Some(0) => continue,
                            Some(count) => {
                                self.bulks_remaining = count;
                                self.args = Vec::with_capacity(count.min(ARGS_PREALLOCATION_CAP));
                            }
                        }
                    }
                    Some(_) => match self.read_inline(buf, limits)? {
                        None => return Ok(false),
                        Some(inline) if inline.is_empty() => continue,
                        Some(inline) => {
                            *args = inline;
                            return checked_request(args).map(|()| true);
                        }
                    },
                }
            }
            while self.bulks_remaining > 0 {
                let len = match self.bulk_len {
                    Some(len) => len,
                    None => match self.read_bulk_len(buf, limits)? {
                        None => return Ok(false),
                        Some(len) => {
                            self.bulk_len = Some(len);
                            len
                        }
                    },
                };
                // The payload and the two bytes after it (normally \r\n; Redis does not check).
                if buf.len() < len.saturating_add(2) {
                    return Ok(false);
                }
                self.args.push(buf.split_to(len).freeze());
                buf.advance(2);
                self.bulk_len = None;
                self.bulks_remaining -= 1;
            }
            *args = std::mem::take(&mut self.args);
            return checked_request(args).map(|()| true);
        }
    }

    /// How many more bytes a server may reserve for the request in progress: the rest of a bulk
    /// whose length is known, else 0; but never more than the bytes already in `buf` plus
    /// [`RESERVE_AHEAD_MAX_BYTES`], because the length is only the client's word. Reserving
    /// this whenever the buffer fills doubles it as a big bulk arrives (few copies), while
    /// a header announcing 512 MiB and nothing after it costs 64 KiB.
    pub fn bytes_wanted(&self, buf: &BytesMut) -> usize {
        match self.bulk_len {
            Some(len) => {
                len.saturating_add(2).saturating_sub(buf.len()).min(buf.len().saturating_add(RESERVE_AHEAD_MAX_BYTES))
            }
            None => 0,
        }
    }

    /// The bytes still to come for the bulk in progress (its announced length, CRLF included,
    /// less what `buf` holds), or 0. This is the client's word, bounded only by the
    /// `max_bulk_len` the parser already enforced: a server that reserves it (Redis reads a
    /// big argument into a buffer of its own size) must do so fallibly.
    pub fn bulk_bytes_announced(&self, buf: &BytesMut) -> usize {
        self.bulk_len.map_or(0, |len| len.saturating_add(2).saturating_sub(buf.len()))
    }

    /// Finds the `terminator` of the line at the front of `buf`, resuming the search where the
    /// last call stopped. `Err(too_big)` once more than `max` bytes precede the terminator.
    fn find_line_end(
        &mut self,
        buf: &[u8],
        terminator: u8,
        max: usize,
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        let unsearched = buf.get(self.line_scanned..).unwrap_or_default();
        match memchr::memchr(terminator, unsearched) {
            Some(offset) => {
                let end = self.line_scanned + offset;
                if end > max {
                    return Err(too_big);
                }
                // Keep the position: the caller may still wait for the byte after `\r`.
                self.line_scanned = end;
                Ok(Some(end))
            }
            None => {
                self.line_scanned = buf.len();
                if buf.len() > max {
                    Err(too_big)
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// Reads a `*<count>\r\n` line. `Some(0)` stands for every count <= 0 (skip the request).
    fn read_multibulk_count(&mut self, buf: &mut BytesMut, limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        let Some(digits) = self.read_number_line(buf, limits.max_inline_len, ProtocolError::TooBigMultibulkCount)?
        else {
            return Ok(None);
        };
        let count = match parse_redis_integer(&digits) {
            Some(count) if count <= MAX_MULTIBULK_ARGS => count,
            _ => return Err(ProtocolError::InvalidMultibulkLength),
        };
        if count > UNAUTHENTICATED_MAX_ARGS && !limits.authenticated {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        let line_end = digits.end;
        self.consume_line(buf, line_end);
        Ok(Some(usize::try_from(count).unwrap_or(0)))
    }

    /// Reads a `$<len>\r\n` line and checks the length against the limits.
    fn read_bulk_len(&mut self, buf: &mut BytesMut, limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        let Some(digits) = self.read_number_line(buf, limits.max_inline_len, ProtocolError::TooBigBulkCount)? else {
            return Ok(None);
        };
        match buf.first() {
            Some(b'$') => {}
            Some(&got) => return Err(ProtocolError::ExpectedBulk { got }),
            None => return Ok(None),
        }
        let len = parse_redis_integer(&digits)
            .and_then(|len| usize::try_from(len).ok())
            .filter(|&len| len <= limits.max_bulk_len)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        if !limits.authenticated && len as u64 > UNAUTHENTICATED_MAX_BULK_BYTES as u64 {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        let line_end = digits.end;
        self.consume_line(buf, line_end);
        Ok(Some(len))
    }

    /// Finds a complete `<marker><number>\r<any byte>` line and returns the number's text
    /// (between the marker and the `\r`) as a view into `buf`.
    fn read_number_line<'a>(
        &mut self,
        buf: &'a BytesMut,
        max: usize,
        too_big: ProtocolError,
    ) -> Result<Option<NumberText<'a>>, ProtocolError> {
        let Some(cr) = self.find_line_end(buf, b'\r', max, too_big)? else {
            return Ok(None);
        };
        // Redis wants one byte after the \r before it looks at the line (and skips it unseen).
        if buf.len() < cr + 2 {
            return Ok(None);
        }
        Ok(Some(NumberText { text: buf.get(1..cr).unwrap_or_default(), end: cr + 2 }))
    }

    fn consume_line(&mut self, buf: &mut BytesMut, len: usize) {
        buf.advance(len);
        self.line_scanned = 0;
    }

    /// Reads one inline line and splits it into arguments (possibly none).
    fn read_inline(&mut self, buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let Some(newline) =
            self.find_line_end(buf, b'\n', limits.max_inline_len, ProtocolError::TooBigInlineRequest)?
        else {
            return Ok(None);
        };
        let line_len = match newline.checked_sub(1).and_then(|i| buf.get(i)) {
            Some(b'\r') => newline - 1,
            _ => newline,
        };
        let line = buf.split_to(line_len).freeze();
        self.consume_line(buf, newline + 1 - line_len);
        split_inline(&line).map(Some)
    }
}

/// Most requests a pipelining client sends are whole in the buffer, have few arguments and
/// short, plain numbers. For those, this finds every argument's place first and then cuts the
/// request out in one `split_to`, which is about twice as fast as the general state machine.
/// `false` (nothing consumed) for anything else: incomplete, unusual or wrong requests are
/// left to the state machine, which reports the errors.
const FAST_PATH_MAX_ARGS: usize = 16;

fn parse_whole_multibulk(buf: &mut BytesMut, limits: &Limits, args: &mut Vec<Bytes>) -> bool {
    let Some((count, spans)) = whole_multibulk_spans(buf, limits) else { return false };
    let request = buf.split_to(spans.end).freeze();
    args.extend(spans.spans.iter().take(count).map(|&(start, end)| request.slice(start..end)));
    true
}

/// Where the arguments of a whole request at the front of the buffer are, and where it ends.
struct Spans {
    spans: [(usize, usize); FAST_PATH_MAX_ARGS],
    end: usize,
}

fn whole_multibulk_spans(bytes: &[u8], limits: &Limits) -> Option<(usize, Spans)> {
    let max_line = limits.max_inline_len;
    let (count, mut pos) = plain_number_line(bytes, 1, max_line)?;
    if count == 0 || count > FAST_PATH_MAX_ARGS {
        return None;
    }
    if !limits.authenticated && count as i64 > UNAUTHENTICATED_MAX_ARGS {
        return None;
    }
    let mut spans = [(0usize, 0usize); FAST_PATH_MAX_ARGS];
    for span in spans.iter_mut().take(count) {
        if bytes.get(pos) != Some(&b'$') {
            return None;
        }
        let (len, start) = plain_number_line(bytes, pos + 1, max_line)?;
        if len > limits.max_bulk_len || (!limits.authenticated && len as u64 > UNAUTHENTICATED_MAX_BULK_BYTES as u64) {
            return None;
        }
        let end = start + len;
        // Like the state machine, skip the two bytes after the payload unseen.
        if bytes.len() < end + 2 {
            return None;
        }
        *span = (start, end);
        pos = end + 2;
    }
    Some((count, Spans { spans, end: pos }))
}

/// A number of at most 9 digits without sign or leading zero, starting at `pos` and followed
/// by `\r` and one more byte; returns it and the position after the line. The line (from the
/// marker before `pos`) must also respect `max_line` like any other, so that the fast path never
/// accepts what the state machine would refuse.
fn plain_number_line(bytes: &[u8], pos: usize, max_line: usize) -> Option<(usize, usize)> {
    const MAX_DIGITS: usize = 9;
    let mut value = 0usize;
    let mut at = pos;
    loop {
        match bytes.get(at) {
            Some(&digit @ b'0'..=b'9') if at - pos < MAX_DIGITS => {
                value = value * 10 + usize::from(digit - b'0');
                at += 1;
            }
            Some(b'\r') if at > pos && at + 1 < bytes.len() => break,
            _ => return None,
        }
    }
    // "0" alone is fine; a leading zero before other digits is an error the slow path reports.
    if bytes.get(pos) == Some(&b'0') && at - pos > 1 {
        return None;
    }
    if at - (pos - 1) > max_line {
        return None;
    }
    Some((value, at + 2))
}

/// The text of a `*`/`$` number and where its line ends in the buffer.
struct NumberText<'a> {
    text: &'a [u8],
    end: usize,
}

impl std::ops::Deref for NumberText<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.text
    }
}

/// Rejects the HTTP requests Redis treats as an attack; passes every other request through.
fn checked_request(args: &[Bytes]) -> Result<(), ProtocolError> {
    match args.first() {
        Some(first) if first.eq_ignore_ascii_case(b"post") || first.eq_ignore_ascii_case(b"host:") => {
            Err(ProtocolError::CrossProtocolRequest)
        }
        _ => Ok(()),
    }
}

/// Parses an integer with Redis' strict syntax: optional `-`, then `0` alone or a digit 1-9
/// followed by digits; at most 20 characters; must fit in an `i64`.
pub(crate) fn parse_redis_integer(text: &[u8]) -> Option<i64> {
    if text.is_empty() || text.len() > MAX_NUMBER_CHARS {
        return None;
    }
    if text == b"0" {
        return Some(0);
    }
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude.checked_mul(10)?.checked_add(u64::from(digit - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}
