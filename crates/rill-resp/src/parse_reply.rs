//! Reading replies back into [`Reply`] values: for tests today, for a client later.
//!
//! Every RESP2 and RESP3 type that a server sends is understood:
//!
//! ```text
//! +text  -text  :int  $len\r\nbytes  *n  %n (pairs)  ~n  >n  |n (pairs, then the reply)
//! ,double  #t/#f  (bignum  =len\r\nfmt:text  !len\r\nerror-bytes  _
//! $-1 -> Reply::Null      *-1 -> Reply::NullArray      _ -> Reply::Null
//! ```
//!
//! Each line must end in `\r\n`. Streamed aggregates (`?`, `;`) are not supported: Redis never
//! sends them. The parser is not incremental: a caller that gets `Ok(None)` calls again with
//! more bytes and the frame is read from its start, which is fine for replies of test size.
//! Nesting deeper than [`MAX_REPLY_DEPTH`] is rejected so hostile input cannot exhaust the
//! stack.

use bytes::Bytes;

use crate::reply::Reply;

/// Deepest nesting of aggregates accepted.
pub const MAX_REPLY_DEPTH: usize = 512;
/// An aggregate can announce billions of elements in a few bytes; preallocate at most this many.
const ELEMENTS_PREALLOCATION_CAP: usize = 1024;

/// Parses one reply from the front of `buf`.
///
/// Returns the reply and the number of bytes it took, `Ok(None)` if `buf` holds only part of a
/// reply, or an error message for bytes that are not RESP.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    ReplyReader { buf }.reply(0, 0)
}

/// `Ok(None)` (incomplete) or a value with the position after it.
type Step<T> = Result<Option<(T, usize)>, String>;

/// Evaluates a [`Step`], returning early from the enclosing function when incomplete or wrong.
macro_rules! step {
    ($e:expr) => {
        match $e? {
            Some(found) => found,
            None => return Ok(None),
        }
    };
}

struct ReplyReader<'a> {
    buf: &'a [u8],
}

impl ReplyReader<'_> {
    fn reply(&self, pos: usize, depth: usize) -> Step<Reply> {
        if depth > MAX_REPLY_DEPTH {
            return Err(format!("replies nested deeper than {MAX_REPLY_DEPTH}"));
        }
        let Some(&marker) = self.buf.get(pos) else {
            return Ok(None);
        };
        let (line, next) = step!(self.line(pos + 1));
        let reply = match marker {
            b'+' => Reply::Simple(Bytes::copy_from_slice(line)),
            b'-' => Reply::Error(Bytes::copy_from_slice(line)),
            b':' => Reply::Integer(integer(line)?),
            b'(' => Reply::BigNumber(Bytes::copy_from_slice(line)),
            b'#' => match line {
                b"t" => Reply::Boolean(true),
                b"f" => Reply::Boolean(false),
                _ => return Err(format!("bad boolean {:?}", String::from_utf8_lossy(line))),
            },
            b',' => Reply::Double(double(line)?),
            b'_' if line.is_empty() => Reply::Null,
            b'_' => return Err("null with a payload".to_string()),
            b'$' | b'=' | b'!' => {
                let Some(len) = length(line)? else {
                    return if marker == b'$' {
                        Ok(Some((Reply::Null, next)))
                    } else {
                        Err("negative length".to_string())
                    };
                };
                let (payload, next) = step!(self.payload(next, len));
                return Ok(Some((blob(marker, payload)?, next)));
            }
            b'*' | b'~' | b'>' => {
                let Some(count) = length(line)? else {
                    return if marker == b'*' {
                        Ok(Some((Reply::NullArray, next)))
                    } else {
                        Err("negative length".to_string())
                    };
                };
                let (items, next) = step!(self.items(next, count, depth));
                let reply = match marker {
                    b'*' => Reply::Array(items),
                    b'~' => Reply::Set(items),
                    _ => Reply::Push(items),
                };
                return Ok(Some((reply, next)));
            }
            b'%' | b'|' => {
                let count = length(line)?.ok_or("negative length")?;
                let (pairs, next) = step!(self.pairs(next, count, depth));
                if marker == b'%' {
                    return Ok(Some((Reply::Map(pairs), next)));
                }
                let (inner, next) = step!(self.reply(next, depth + 1));
                return Ok(Some((Reply::Attribute(pairs, Box::new(inner)), next)));
            }
            other => return Err(format!("unknown reply type byte {other:#04x}")),
        };
        Ok(Some((reply, next)))
    }

    /// The bytes from `pos` up to the next `\r\n`, and the position after it.
    fn line(&self, pos: usize) -> Step<&[u8]> {
        let rest = self.buf.get(pos..).unwrap_or_default();
        let Some(cr) = memchr::memchr(b'\r', rest) else {
            return Ok(None);
        };
        match rest.get(cr + 1) {
            None => Ok(None),
            Some(b'\n') => Ok(Some((rest.get(..cr).unwrap_or_default(), pos + cr + 2))),
            Some(_) => Err("CR not followed by LF".to_string()),
        }
    }

    /// `len` bytes at `pos` followed by `\r\n`.
    fn payload(&self, pos: usize, len: usize) -> Step<&[u8]> {
        let end = pos.checked_add(len).ok_or("length overflows")?;
        let after = end.checked_add(2).ok_or("length overflows")?;
        let (Some(payload), Some(terminator)) = (self.buf.get(pos..end), self.buf.get(end..after)) else {
            return Ok(None);
        };
        if terminator != b"\r\n" {
            return Err("payload not followed by CRLF".to_string());
        }
        Ok(Some((payload, after)))
    }

    fn items(&self, mut pos: usize, count: usize, depth: usize) -> Step<Vec<Reply>> {
        let mut items = Vec::with_capacity(count.min(ELEMENTS_PREALLOCATION_CAP));
        for _ in 0..count {
            let (item, next) = step!(self.reply(pos, depth + 1));
            items.push(item);
            pos = next;
        }
        Ok(Some((items, pos)))
    }

    fn pairs(&self, mut pos: usize, count: usize, depth: usize) -> Step<Vec<(Reply, Reply)>> {
        let mut pairs = Vec::with_capacity(count.min(ELEMENTS_PREALLOCATION_CAP));
        for _ in 0..count {
            let (key, next) = step!(self.reply(pos, depth + 1));
            let (value, next) = step!(self.reply(next, depth + 1));
            pairs.push((key, value));
            pos = next;
        }
        Ok(Some((pairs, pos)))
    }
}

/// The reply for a length-prefixed payload: bulk, verbatim or blob error.
fn blob(marker: u8, payload: &[u8]) -> Result<Reply, String> {
    Ok(match marker {
        b'$' => Reply::Bulk(Bytes::copy_from_slice(payload)),
        b'!' => Reply::Error(Bytes::copy_from_slice(payload)),
        _ => match payload {
            [a, b, c, b':', text @ ..] => Reply::Verbatim { format: [*a, *b, *c], text: Bytes::copy_from_slice(text) },
            _ => return Err("verbatim string without a 3-byte format and ':'".to_string()),
        },
    })
}

fn integer(text: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("bad integer {:?}", String::from_utf8_lossy(text)))
}

/// A length or count; `None` for `-1` (null).
fn length(text: &[u8]) -> Result<Option<usize>, String> {
    match integer(text)? {
        -1 => Ok(None),
        n => usize::try_from(n).map(Some).map_err(|_| format!("bad length {n}")),
    }
}

fn double(text: &[u8]) -> Result<f64, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("bad double {:?}", String::from_utf8_lossy(text)))
}
