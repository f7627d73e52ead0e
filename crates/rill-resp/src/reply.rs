//! Typed replies. Handlers build a [`Reply`]; only the writer knows the wire encoding.

use bytes::Bytes;

/// The protocol spoken on one connection. Starts at RESP2; only `HELLO` changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2: maps become flat arrays, sets arrays, doubles bulk strings, nulls `$-1`/`*-1`.
    #[default]
    Resp2,
    /// RESP3: every type has its own marker.
    Resp3,
}

/// One reply value. RESP3-only types degrade to their RESP2 shape when written on a RESP2
/// connection (see the table in `docs/spec/connection.md` §1.2).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text` — must not contain CR or LF.
    Simple(Bytes),
    /// `-CODE message` (stored without the leading `-`). CR/LF are replaced by spaces on write.
    Error(Bytes),
    /// `:n`
    Integer(i64),
    /// `$len\r\n...`
    Bulk(Bytes),
    /// Null bulk: RESP2 `$-1`, RESP3 `_`.
    Null,
    /// Null array: RESP2 `*-1`, RESP3 `_`.
    NullArray,
    /// `*n`
    Array(Vec<Reply>),
    /// RESP3 `%n`; RESP2 flat array of 2n.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~n`; RESP2 array.
    Set(Vec<Reply>),
    /// RESP3 `,x`; RESP2 bulk string.
    Double(f64),
    /// RESP3 `#t`/`#f`; RESP2 `:1`/`:0`.
    Boolean(bool),
    /// RESP3 `(digits`; RESP2 bulk string.
    BigNumber(Bytes),
    /// RESP3 `=len\r\nfmt:text`; RESP2 bulk string of `text`.
    Verbatim {
        /// Three-byte format, `txt` or `mkd`.
        format: [u8; 3],
        /// The payload without the format prefix.
        text: Bytes,
    },
    /// RESP3 `>n` out-of-band push; RESP2 array.
    Push(Vec<Reply>),
    /// RESP3 `|n` attribute followed by the reply it annotates; RESP2 writes only the reply.
    Attribute(Vec<(Reply, Reply)>, Box<Reply>),
    /// Bytes already encoded as one or more complete RESP values that read the same in RESP2
    /// and RESP3 (arrays, bulk strings, integers, simple strings), written as they are. For
    /// replies built in one pass, such as stream entry lists: no tree, no allocation per
    /// element. The producer guarantees the bytes are well-formed.
    Raw(Bytes),
}

impl Reply {
    /// `+OK`
    pub fn ok() -> Reply {
        Reply::Simple(Bytes::from_static(b"OK"))
    }

    /// A simple string from static text.
    pub fn simple(s: &'static str) -> Reply {
        Reply::Simple(Bytes::from_static(s.as_bytes()))
    }

    /// An error from its full text, e.g. `"ERR syntax error"`.
    pub fn error(s: impl Into<String>) -> Reply {
        Reply::Error(Bytes::from(s.into()))
    }

    /// A bulk string copied from a slice.
    pub fn bulk(b: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(b.as_ref()))
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}
