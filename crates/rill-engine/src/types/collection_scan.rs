//! What SSCAN and HSCAN share: their options and the cursor walk over a set's members or a
//! hash's fields.
//!
//! A collection Redis would keep compact (an `intset` or `listpack`, as OBJECT ENCODING
//! reports it) is returned whole in one call with cursor 0, whatever the cursor sent, as Redis
//! does. A `hashtable` one is walked by fixed *scan positions* (a 64-bit hash of the member or
//! field name), exactly as SCAN walks the keyspace (`keyspace/scan.rs`): each call covers a
//! closed interval of positions and the next starts after it, so an element present for the
//! whole iteration is returned exactly once, and elements added or removed meanwhile may or
//! may not be.
//!
//! Cost: a call reads the whole collection twice, O(N log COUNT). COUNT is a hint, in Redis
//! too; so that a full iteration of a big collection stays O(N * 256) rather than O(N² /
//! COUNT), a call returns at least N / 256 elements.
//!
//! Redis behaviours we match on purpose:
//! - The cursor is checked first (`ERR invalid cursor`, read as SCAN reads it), then the key: a
//!   missing key replies `0` and an empty array without looking at the options, another type
//!   is WRONGTYPE; only then the options, in order.
//! - `COUNT` must be an integer (`ERR value is not an integer or out of range`) of at least 1
//!   (`ERR syntax error`); `MATCH *` is no filter; `NOVALUES` on anything but HSCAN is `ERR
//!   NOVALUES option can only be used in HSCAN`; `TYPE` and anything else is a syntax error;
//!   `COUNT` or `MATCH` without a value is a syntax error.
//! - MATCH filters after the walk, so a call may return nothing with a cursor that is not 0.

use crate::keyspace::{scan_by_position, scan_position};
use crate::types::keys::parse_cursor;
use crate::types::{arg, is_token};
use crate::util::int_arg;
use crate::CmdError;
use bytes::Bytes;

/// The smallest share of a hashtable collection one call returns (see the module doc).
const MIN_CALLS_PER_ITERATION: usize = 256;

/// Redis' default COUNT.
const DEFAULT_COUNT: usize = 10;

/// SSCAN/HSCAN's options, parsed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScanOptions<'a> {
    /// The glob, `None` for no filter (absent, or `*`).
    pub pattern: Option<&'a [u8]>,
    /// At least 1.
    pub count: usize,
    /// HSCAN NOVALUES: fields only.
    pub no_values: bool,
}

/// The cursor at argument 2.
pub(crate) fn cursor_arg(args: &[Bytes]) -> Result<u64, CmdError> {
    parse_cursor(arg(args, 2)?).ok_or(CmdError::full("ERR invalid cursor"))
}

/// The options after the cursor. `hash`: NOVALUES is allowed.
pub(crate) fn parse_options(args: &[Bytes], hash: bool) -> Result<ScanOptions<'_>, CmdError> {
    let mut out = ScanOptions { pattern: None, count: DEFAULT_COUNT, no_values: false };
    let mut i = 3;
    while let Some(option) = args.get(i) {
        let value = args.get(i + 1);
        match value {
            Some(value) if is_token(option, "COUNT") => {
                let n = int_arg(value)?;
                if n < 1 {
                    return Err(CmdError::SYNTAX);
                }
                out.count = usize::try_from(n).unwrap_or(usize::MAX);
                i += 2;
            }
            Some(value) if is_token(option, "MATCH") => {
                out.pattern = (value.as_ref() != b"*").then_some(value.as_ref());
                i += 2;
            }
            _ if is_token(option, "NOVALUES") => {
                if !hash {
                    return Err(CmdError::full("ERR NOVALUES option can only be used in HSCAN"));
                }
                out.no_values = true;
                i += 1;
            }
            _ => return Err(CmdError::SYNTAX),
        }
    }
    Ok(out)
}

/// One step over a hashtable collection of `len` items: the items to return (before MATCH)
/// and the next cursor.
pub(crate) fn step<T, I>(
    items: impl Fn() -> I,
    name: impl Fn(&T) -> &[u8],
    len: usize,
    cursor: u64,
    count: usize,
) -> (u64, Vec<T>)
where
    I: Iterator<Item = T>,
{
    let count = count.max(len / MIN_CALLS_PER_ITERATION);
    scan_by_position(items, |item| scan_position(name(item)), cursor, count)
}

/// The SSCAN/HSCAN reply: the cursor as a bulk string, then the elements.
pub(crate) fn reply(cursor: u64, elements: Vec<rill_resp::Reply>) -> rill_resp::Reply {
    use rill_resp::Reply;
    Reply::Array(vec![Reply::Bulk(Bytes::from(cursor.to_string())), Reply::Array(elements)])
}
