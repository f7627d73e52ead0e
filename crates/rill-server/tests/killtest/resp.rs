//! A pipelining RESP2 client over a blocking `TcpStream`, just enough for the kill test.
//!
//! Kept apart from `tests/common` (which needs `CARGO_BIN_EXE_*` and so cannot be compiled into
//! the `killtest` example) and from `rill-resp` (a parser bug there must not hide a server bug).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A parsed RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
}

impl Reply {
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) => Some(b),
            Reply::Simple(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(items) => Some(items),
            _ => None,
        }
    }

    /// Looks up `key` in a flat key/value array (XINFO STREAM, XINFO GROUPS entries).
    pub fn field(&self, key: &str) -> Option<&Reply> {
        self.as_array()?
            .chunks(2)
            .find(|kv| kv.first().and_then(Reply::as_bytes) == Some(key.as_bytes()))
            .and_then(|kv| kv.get(1))
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Simple(s) => write!(f, "{s}"),
            Reply::Error(e) => write!(f, "(error) {e}"),
            Reply::Int(i) => write!(f, "(integer) {i}"),
            Reply::Bulk(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Reply::Nil => write!(f, "(nil)"),
            Reply::Array(items) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{item}")?;
                }
                write!(f, "]")
            }
        }
    }
}

/// Appends one command, as a RESP multibulk request, to `out`.
pub fn encode<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// One connection. Requests may be pipelined: [`Conn::send`] many, then [`Conn::read`] as many.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already parsed into replies.
    pos: usize,
}

impl Conn {
    pub fn connect(port: u16, read_timeout: Duration) -> io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(read_timeout))?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, buf: Vec::with_capacity(64 * 1024), pos: 0 })
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads the next reply.
    pub fn read(&mut self) -> io::Result<Reply> {
        loop {
            match parse(&self.buf, self.pos) {
                Ok(Some((reply, end))) => {
                    self.pos = end;
                    if self.pos == self.buf.len() {
                        self.buf.clear();
                        self.pos = 0;
                    }
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by the server"));
            }
            self.buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
    }

    /// Sends one command and reads its reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Reply> {
        let mut out = Vec::new();
        encode(&mut out, args);
        self.send(&out)?;
        self.read()
    }
}

/// Parses one reply starting at `pos`: the reply and the offset just past it, or `None` if
/// more bytes are needed.
fn parse(buf: &[u8], pos: usize) -> Result<Option<(Reply, usize)>, String> {
    let Some(rest) = buf.get(pos..) else {
        return Ok(None);
    };
    let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = std::str::from_utf8(rest.get(1..eol).unwrap_or_default())
        .map_err(|_| format!("non-UTF-8 header line at {pos}"))?;
    let next = pos + eol + 2;
    let int = || line.parse::<i64>().map_err(|_| format!("bad integer {line:?} at {pos}"));
    let reply = match rest.first() {
        Some(b'+') => (Reply::Simple(line.to_owned()), next),
        Some(b'-') => (Reply::Error(line.to_owned()), next),
        Some(b':') => (Reply::Int(int()?), next),
        Some(b'$') => {
            let Ok(len) = usize::try_from(int()?) else {
                return Ok(Some((Reply::Nil, next)));
            };
            let end = next + len;
            match buf.get(end..end + 2) {
                None => return Ok(None),
                Some(b"\r\n") => {}
                Some(_) => return Err(format!("bulk of length {len} not followed by CRLF")),
            }
            (Reply::Bulk(buf.get(next..end).unwrap_or_default().to_vec()), end + 2)
        }
        Some(b'*') => {
            let Ok(len) = usize::try_from(int()?) else {
                return Ok(Some((Reply::Nil, next)));
            };
            let mut items = Vec::with_capacity(len.min(4096));
            let mut at = next;
            for _ in 0..len {
                let Some((item, end)) = parse(buf, at)? else {
                    return Ok(None);
                };
                items.push(item);
                at = end;
            }
            (Reply::Array(items), at)
        }
        Some(other) => return Err(format!("unexpected reply type {:?} at {pos}", *other as char)),
        None => return Ok(None),
    };
    Ok(Some(reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pipelined_replies() {
        let buf = b"$3\r\n1-0\r\n*2\r\n:1\r\n$-1\r\n-ERR x\r\n*1\r\n$2\r\nab";
        let (a, at) = parse(buf, 0).unwrap().unwrap();
        assert_eq!(a, Reply::Bulk(b"1-0".to_vec()));
        let (b, at) = parse(buf, at).unwrap().unwrap();
        assert_eq!(b, Reply::Array(vec![Reply::Int(1), Reply::Nil]));
        let (c, at) = parse(buf, at).unwrap().unwrap();
        assert_eq!(c, Reply::Error("ERR x".into()));
        assert_eq!(parse(buf, at).unwrap(), None);
    }
}
