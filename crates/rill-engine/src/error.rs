//! Errors are data: one type with the Redis error code and its message, rendered in one place.

use bytes::Bytes;
use rill_resp::Reply;
use std::borrow::Cow;

/// A command error: the Redis code (`ERR`, `WRONGTYPE`, `NOGROUP`, ...) and the message that
/// follows it, spelled byte for byte as Redis spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError {
    /// The full error line without the leading `-`, e.g. `ERR syntax error`.
    text: Cow<'static, str>,
}

impl CmdError {
    /// An error from its full static text, code included: `CmdError::full("ERR syntax error")`.
    pub const fn full(text: &'static str) -> CmdError {
        CmdError { text: Cow::Borrowed(text) }
    }

    /// An error from owned full text, code included.
    pub fn owned(text: String) -> CmdError {
        CmdError { text: Cow::Owned(text) }
    }

    /// `ERR <message>`.
    pub fn err(message: impl AsRef<str>) -> CmdError {
        CmdError::owned(format!("ERR {}", message.as_ref()))
    }

    /// `ERR syntax error`
    pub const SYNTAX: CmdError = CmdError::full("ERR syntax error");
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`
    pub const WRONGTYPE: CmdError = CmdError::full("WRONGTYPE Operation against a key holding the wrong kind of value");
    /// `ERR value is not an integer or out of range`
    pub const NOT_INTEGER: CmdError = CmdError::full("ERR value is not an integer or out of range");
    /// `ERR value is not a valid float`
    pub const NOT_FLOAT: CmdError = CmdError::full("ERR value is not a valid float");
    /// `ERR no such key`
    pub const NO_SUCH_KEY: CmdError = CmdError::full("ERR no such key");
    /// `ERR timeout is not a float or out of range`
    pub const TIMEOUT_NOT_FLOAT: CmdError = CmdError::full("ERR timeout is not a float or out of range");
    /// `ERR timeout is negative`
    pub const TIMEOUT_NEGATIVE: CmdError = CmdError::full("ERR timeout is negative");

    /// `ERR wrong number of arguments for '<name>' command`
    pub fn arity(full_name: &str) -> CmdError {
        CmdError::owned(format!("ERR wrong number of arguments for '{full_name}' command"))
    }

    /// The full text, code included.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The code: the first word of the text.
    pub fn code(&self) -> &str {
        self.text.split(' ').next().unwrap_or("ERR")
    }

    /// The reply that carries this error. (An echoed argument cannot inject protocol: the
    /// reply writer, `rill_resp::write_reply`, turns CR and LF in any error line into spaces.)
    pub fn to_reply(&self) -> Reply {
        Reply::Error(Bytes::copy_from_slice(self.text.as_bytes()))
    }
}

impl std::fmt::Display for CmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for CmdError {}

impl From<CmdError> for Reply {
    fn from(e: CmdError) -> Reply {
        e.to_reply()
    }
}
