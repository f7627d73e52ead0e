//! RESP on the test side: requests encoded, replies parsed into [`Value`], raw bytes printed.
//!
//! Deliberately tiny and independent of `rill-resp`, so a bug there cannot hide behind a
//! matching bug here. RESP2 and RESP3 replies are both understood; RESP3 aggregates keep their
//! kind, so a test can assert the exact type.

use std::fmt;

/// A parsed reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1`, `*-1` or `_`.
    Nil,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Push(Vec<Value>),
    Bool(bool),
    /// `,` — kept as its text so `inf`/`nan` compare exactly.
    Double(String),
    BigNumber(String),
    /// `=` — format (e.g. `txt`) and payload.
    Verbatim(String, Vec<u8>),
}

impl Value {
    /// The bytes of a bulk, verbatim or simple string.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(b) | Value::Verbatim(_, b) => Some(b),
            Value::Simple(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// [`Value::as_bytes`] when they are UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// The elements of an array (RESP2 `*`).
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// Looks up `key` in a RESP3 map or a RESP2 flat key/value array.
    pub fn get(&self, key: &str) -> Option<&Value> {
        let key = Some(key.as_bytes());
        match self {
            Value::Map(pairs) => pairs.iter().find(|(k, _)| k.as_bytes() == key).map(|(_, v)| v),
            Value::Array(items) => {
                items.chunks(2).find(|kv| kv.first().and_then(Value::as_bytes) == key).and_then(|kv| kv.get(1))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<'a>(f: &mut fmt::Formatter<'_>, items: impl Iterator<Item = &'a Value>) -> fmt::Result {
            write!(f, "[")?;
            for (i, item) in items.enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                write!(f, "{item}")?;
            }
            write!(f, "]")
        }
        match self {
            Value::Simple(s) => write!(f, "{s}"),
            Value::Error(e) => write!(f, "(error) {e}"),
            Value::Int(i) => write!(f, "(integer) {i}"),
            Value::Bulk(b) => write!(f, "\"{}\"", escape(b)),
            Value::Nil => write!(f, "(nil)"),
            Value::Bool(b) => write!(f, "({b})"),
            Value::Double(d) => write!(f, "(double) {d}"),
            Value::BigNumber(n) => write!(f, "(big number) {n}"),
            Value::Verbatim(format, b) => write!(f, "{format}:\"{}\"", escape(b)),
            Value::Array(items) | Value::Set(items) | Value::Push(items) => list(f, items.iter()),
            Value::Map(pairs) => {
                write!(f, "{{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_command_into(&mut out, args);
    out
}

/// Appends one command, as a RESP multibulk request, to `out` (for pipelines).
pub fn encode_command_into<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Printable form of raw protocol bytes: `\r\n` shown as such, other non-printables as `\xHH`.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

/// Length of the first complete frame in `buf`: `Ok(None)` if more bytes are needed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, String> {
    Ok(parse_frame(buf, 0)?.map(|(_, end)| end))
}

/// Parses exactly one frame; trailing bytes are an error.
pub fn parse_value(buf: &[u8]) -> Result<Value, String> {
    match parse_frame(buf, 0)? {
        Some((v, end)) if end == buf.len() => Ok(v),
        Some((_, end)) => Err(format!("{} trailing bytes after reply", buf.len() - end)),
        None => Err(format!("incomplete reply: {}", escape(buf))),
    }
}

/// Parses one frame starting at `pos`: the value and the offset just past it, or `Ok(None)`
/// if more bytes are needed.
pub fn parse_frame(buf: &[u8], pos: usize) -> Result<Option<(Value, usize)>, String> {
    let (Some(line_end), Some(&tag)) = (find_crlf(buf, pos), buf.get(pos)) else {
        return Ok(None);
    };
    let line = buf.get(pos + 1..line_end).unwrap_or_default();
    let line = std::str::from_utf8(line).map_err(|_| format!("non-UTF-8 header line at {pos}"))?;
    let next = line_end + 2;
    let int = |s: &str| s.parse::<i64>().map_err(|_| format!("bad length {s:?} after {:?}", tag as char));
    let value = match tag {
        b'+' => (Value::Simple(line.to_owned()), next),
        b'-' => (Value::Error(line.to_owned()), next),
        b':' => (Value::Int(int(line)?), next),
        b'_' => (Value::Nil, next),
        b'#' => (Value::Bool(line == "t"), next),
        b',' => (Value::Double(line.to_owned()), next),
        b'(' => (Value::BigNumber(line.to_owned()), next),
        b'$' | b'=' | b'!' => {
            let Ok(len) = usize::try_from(int(line)?) else {
                return Ok(Some((Value::Nil, next)));
            };
            let end = next + len;
            let (Some(payload), Some(crlf)) = (buf.get(next..end), buf.get(end..end + 2)) else {
                return Ok(None);
            };
            if crlf != b"\r\n" {
                return Err(format!("bulk of length {len} not followed by CRLF"));
            }
            let v = match tag {
                b'$' => Value::Bulk(payload.to_vec()),
                b'!' => Value::Error(String::from_utf8_lossy(payload).into_owned()),
                _ => {
                    let format = String::from_utf8_lossy(payload.get(..3).unwrap_or_default()).into_owned();
                    Value::Verbatim(format, payload.get(4..).unwrap_or_default().to_vec())
                }
            };
            (v, end + 2)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let Ok(len) = usize::try_from(int(line)?) else {
                return Ok(Some((Value::Nil, next)));
            };
            let count = if matches!(tag, b'%' | b'|') { len * 2 } else { len };
            let mut items = Vec::with_capacity(count.min(1024));
            let mut at = next;
            for _ in 0..count {
                let Some((v, end)) = parse_frame(buf, at)? else {
                    return Ok(None);
                };
                items.push(v);
                at = end;
            }
            match tag {
                b'*' => (Value::Array(items), at),
                b'~' => (Value::Set(items), at),
                b'>' => (Value::Push(items), at),
                b'%' => (Value::Map(pairs(items)), at),
                // An attribute precedes the real reply; skip it as clients do.
                _ => match parse_frame(buf, at)? {
                    Some((v, end)) => (v, end),
                    None => return Ok(None),
                },
            }
        }
        other => return Err(format!("unknown reply type byte {:?} at {pos}", other as char)),
    };
    Ok(Some(value))
}

fn pairs(items: Vec<Value>) -> Vec<(Value, Value)> {
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    out
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|i| from + i)
}

/// Splits a RESP3/RESP2 aggregate frame into its header line and the raw bytes of each
/// top-level element (a map yields key and value as separate elements). `None` for scalars.
pub fn split_aggregate(frame: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let tag = *frame.first()?;
    if !matches!(tag, b'*' | b'~' | b'%' | b'>') {
        return None;
    }
    let line_end = find_crlf(frame, 0)?;
    let len: usize = std::str::from_utf8(frame.get(1..line_end)?).ok()?.parse().ok()?;
    let count = if tag == b'%' { len * 2 } else { len };
    let mut at = line_end + 2;
    let mut elems = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let (_, end) = parse_frame(frame, at).ok()??;
        elems.push(frame.get(at..end)?.to_vec());
        at = end;
    }
    Some((frame.get(..line_end + 2)?.to_vec(), elems))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn parses_resp2_and_resp3() {
        assert_eq!(parse_value(b"+OK\r\n").unwrap(), Value::Simple("OK".into()));
        assert_eq!(parse_value(b"$-1\r\n").unwrap(), Value::Nil);
        assert_eq!(
            parse_value(b"*2\r\n$1\r\na\r\n:5\r\n").unwrap(),
            Value::Array(vec![Value::Bulk(b"a".to_vec()), Value::Int(5)])
        );
        let map = parse_value(b"%1\r\n+proto\r\n:3\r\n").unwrap();
        assert_eq!(map.get("proto"), Some(&Value::Int(3)));
        assert_eq!(frame_len(b"*2\r\n$1\r\na\r\n").unwrap(), None);
        assert_eq!(frame_len(b"=7\r\ntxt:abc\r\n+x").unwrap(), Some(13));
    }

    #[test]
    fn parses_pipelined_replies() {
        let buf = b"$3\r\n1-0\r\n*2\r\n:1\r\n$-1\r\n-ERR x\r\n*1\r\n$2\r\nab";
        let (a, at) = parse_frame(buf, 0).unwrap().unwrap();
        assert_eq!(a, Value::Bulk(b"1-0".to_vec()));
        let (b, at) = parse_frame(buf, at).unwrap().unwrap();
        assert_eq!(b, Value::Array(vec![Value::Int(1), Value::Nil]));
        let (c, at) = parse_frame(buf, at).unwrap().unwrap();
        assert_eq!(c, Value::Error("ERR x".into()));
        assert_eq!(parse_frame(buf, at).unwrap(), None);
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        assert!(parse_value(b"$3\r\nabcd\r\n").is_err());
        assert!(parse_value(b"?\r\n").is_err());
        assert!(parse_value(b":x\r\n").is_err());
        assert!(parse_value(b"+OK\r\n+OK\r\n").is_err());
        assert_eq!(frame_len(b"$5\r\nab").unwrap(), None);
        assert_eq!(frame_len(b"").unwrap(), None);
    }

    #[test]
    fn splits_an_aggregate_into_raw_elements() {
        let (head, elems) = split_aggregate(b"%1\r\n+a\r\n*1\r\n:1\r\n").unwrap();
        assert_eq!(head, b"%1\r\n");
        assert_eq!(elems, vec![b"+a\r\n".to_vec(), b"*1\r\n:1\r\n".to_vec()]);
        assert_eq!(split_aggregate(b"+OK\r\n"), None);
    }

    #[test]
    fn encodes_and_escapes() {
        assert_eq!(encode_command(&[b"SET", b"k", b""]), b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
        assert_eq!(escape(b"+OK\r\n\x00\\"), "+OK\\r\\n\\x00\\\\");
    }
}
