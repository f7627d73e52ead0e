//! Stream IDs (`ms-seq`) and the four ways a command argument can spell one (spec §2.1).
//!
//! | function                 | accepts                                     | used by (later)          |
//! |--------------------------|---------------------------------------------|--------------------------|
//! | [`parse_strict`]         | `ms-seq`, `ms`                              | XDEL, XSETID, MINID, ... |
//! | [`parse_xadd_id`]        | strict, plus `*` and `ms-*`                 | XADD's ID                |
//! | [`parse_non_strict`]     | strict, plus `-` (0-0) and `+` (max)        | XGROUP SETID             |
//! | [`parse_interval_start`] / [`parse_interval_end`] | non-strict, plus `(id` exclusive | XRANGE, XPENDING, ... |
//!
//! `$` and `>` mean something different to each command that takes them, so callers match
//! them before calling in here; given to these parsers they are invalid IDs.
//!
//! Each numeric part follows Redis' two-step parse: first its strict integer syntax, and if
//! that fails, C `strtoull` (base 10). So leading zeros (`007`), a leading `+` and leading
//! whitespace are accepted; an empty part, trailing bytes and overflow are not. A part that
//! the strict syntax reads as negative (`5--1`) is rejected, but one only `strtoull` reads
//! (`5--0`, `5- -3`) is accepted and wraps modulo 2^64, as in Redis (checked against
//! redis-server 7.0.15). The argument is read as a C string: bytes from the first NUL on are
//! ignored (`"5\0zz"` is `5-0`).

use crate::util::parse_i64;
use crate::CmdError;
use std::fmt;

/// A stream entry ID: milliseconds and a sequence number, ordered by `ms` then `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// Milliseconds part (usually a Unix time in ms, but any `u64` is valid).
    pub ms: u64,
    /// Sequence number within the millisecond.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`: never stored; the initial `last-generated-id` of a new stream.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// `18446744073709551615-18446744073709551615`.
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    /// `ms-seq`.
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID in order (seq + 1, carrying into ms); `None` after [`StreamId::MAX`].
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId { ms: self.ms.checked_add(1)?, seq: 0 }),
        }
    }

    /// The previous ID in order; `None` before [`StreamId::MIN`].
    pub fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId { ms: self.ms.checked_sub(1)?, seq: u64::MAX }),
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// `ERR Invalid stream ID specified as stream command argument`
pub const INVALID_ID: CmdError = CmdError::full("ERR Invalid stream ID specified as stream command argument");
/// `ERR The ID specified in XADD must be greater than 0-0`
pub const XADD_ID_ZERO: CmdError = CmdError::full("ERR The ID specified in XADD must be greater than 0-0");
/// `ERR The ID specified in XADD is equal or smaller than the target stream top item`
pub const XADD_ID_TOO_SMALL: CmdError =
    CmdError::full("ERR The ID specified in XADD is equal or smaller than the target stream top item");
/// `ERR The stream has exhausted the last possible ID, unable to add more items`
pub const STREAM_EXHAUSTED: CmdError =
    CmdError::full("ERR The stream has exhausted the last possible ID, unable to add more items");
/// `ERR invalid start ID for the interval`
pub const INVALID_START: CmdError = CmdError::full("ERR invalid start ID for the interval");
/// `ERR invalid end ID for the interval`
pub const INVALID_END: CmdError = CmdError::full("ERR invalid end ID for the interval");

/// Longest ID argument Redis accepts, in bytes.
pub const ID_ARG_MAX_BYTES: usize = 127;

/// Missing seq of an incomplete ID used as a start / lower bound / explicit ID.
pub const SEQ_DEFAULT_START: u64 = 0;
/// Missing seq of an incomplete ID used as an end / upper bound.
pub const SEQ_DEFAULT_END: u64 = u64::MAX;

/// The ID argument of XADD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XaddId {
    /// `*`: ms from the clock, seq generated.
    Auto,
    /// `ms-*`: ms given, seq generated.
    AutoSeq(u64),
    /// `ms-seq` or `ms` (seq 0). Never 0-0.
    Explicit(StreamId),
}

/// Strict parse: `ms-seq`, or `ms` with `missing_seq` as the seq.
pub fn parse_strict(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    match parse_parts(arg, missing_seq, false)? {
        Parsed::Id(id) => Ok(id),
        Parsed::AutoSeq(_) => Err(INVALID_ID),
    }
}

/// XADD's ID: `*`, `ms-*`, `ms-seq` or `ms`. An explicit `0-0` (or `0`) is refused here,
/// before any key is looked up, as Redis does.
pub fn parse_xadd_id(arg: &[u8]) -> Result<XaddId, CmdError> {
    if c_string(arg) == b"*" {
        return Ok(XaddId::Auto);
    }
    match parse_parts(arg, SEQ_DEFAULT_START, true)? {
        Parsed::AutoSeq(ms) => Ok(XaddId::AutoSeq(ms)),
        Parsed::Id(StreamId::MIN) => Err(XADD_ID_ZERO),
        Parsed::Id(id) => Ok(XaddId::Explicit(id)),
    }
}

/// Non-strict parse: as [`parse_strict`], plus `-` for 0-0 and `+` for the maximum ID.
pub fn parse_non_strict(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    if arg.len() <= ID_ARG_MAX_BYTES {
        match c_string(arg) {
            b"-" => return Ok(StreamId::MIN),
            b"+" => return Ok(StreamId::MAX),
            _ => {}
        }
    }
    parse_strict(arg, missing_seq)
}

/// An interval bound as written: the ID (missing seq filled in) and whether it had `(`.
pub fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    match arg.split_first() {
        // After `(` only the strict form is allowed, so `(-` and `(+` are invalid. A lone `(`
        // falls through to the ordinary parse and is invalid there.
        Some((b'(', rest)) if !rest.is_empty() => Ok((parse_strict(rest, missing_seq)?, true)),
        _ => Ok((parse_non_strict(arg, missing_seq)?, false)),
    }
}

/// The start (lower, inclusive after resolution) bound of XRANGE-like commands: missing seq
/// is 0, `(id` means the ID after `id`.
pub fn parse_interval_start(arg: &[u8]) -> Result<StreamId, CmdError> {
    match parse_interval(arg, SEQ_DEFAULT_START)? {
        (id, false) => Ok(id),
        (id, true) => id.next().ok_or(INVALID_START),
    }
}

/// The end (upper, inclusive after resolution) bound: missing seq is 2^64−1, `(id` means the
/// ID before `id` (so `(5` excludes only `5-18446744073709551615`).
pub fn parse_interval_end(arg: &[u8]) -> Result<StreamId, CmdError> {
    match parse_interval(arg, SEQ_DEFAULT_END)? {
        (id, false) => Ok(id),
        (id, true) => id.prev().ok_or(INVALID_END),
    }
}

enum Parsed {
    Id(StreamId),
    AutoSeq(u64),
}

/// The bytes before the first NUL: Redis copies the argument into a C string.
fn c_string(arg: &[u8]) -> &[u8] {
    match arg.iter().position(|&b| b == 0) {
        Some(nul) => arg.get(..nul).unwrap_or_default(),
        None => arg,
    }
}

fn parse_parts(arg: &[u8], missing_seq: u64, allow_auto_seq: bool) -> Result<Parsed, CmdError> {
    if arg.len() > ID_ARG_MAX_BYTES {
        return Err(INVALID_ID);
    }
    let text = c_string(arg);
    let (ms_text, seq_text) = match text.iter().position(|&b| b == b'-') {
        Some(dash) => (text.get(..dash).unwrap_or_default(), text.get(dash + 1..)),
        None => (text, None),
    };
    let ms = parse_part(ms_text).ok_or(INVALID_ID)?;
    match seq_text {
        None => Ok(Parsed::Id(StreamId { ms, seq: missing_seq })),
        Some(b"*") if allow_auto_seq => Ok(Parsed::AutoSeq(ms)),
        Some(s) => Ok(Parsed::Id(StreamId { ms, seq: parse_part(s).ok_or(INVALID_ID)? })),
    }
}

/// One numeric part: strict integer syntax (negative refused), else `strtoull`.
fn parse_part(s: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64(s) {
        return u64::try_from(v).ok();
    }
    strtoull(s)
}

/// C `strtoull(s, &end, 10)` accepted only if `s` is non-empty, fully consumed, and no
/// overflow: leading whitespace, an optional sign (`-` negates modulo 2^64), then digits.
fn strtoull(s: &[u8]) -> Option<u64> {
    let is_space = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = s.iter().position(|c| !is_space(c))?;
    let rest = s.get(start..)?;
    let (neg, digits) = match rest.split_first() {
        Some((b'-', d)) => (true, d),
        Some((b'+', d)) => (false, d),
        _ => (false, rest),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_TEXT: &[u8] = b"18446744073709551615-18446744073709551615";

    fn strict(s: &[u8]) -> Result<StreamId, CmdError> {
        parse_strict(s, SEQ_DEFAULT_START)
    }

    #[test]
    fn display_and_order() {
        assert_eq!(StreamId::new(5, 3).to_string(), "5-3");
        assert_eq!(StreamId::MAX.to_string().as_bytes(), MAX_TEXT);
        assert!(StreamId::new(1, u64::MAX) < StreamId::new(2, 0));
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
    }

    #[test]
    fn strict_forms() {
        assert_eq!(strict(b"5-3"), Ok(StreamId::new(5, 3)));
        assert_eq!(strict(b"5"), Ok(StreamId::new(5, 0)));
        assert_eq!(parse_strict(b"5", SEQ_DEFAULT_END), Ok(StreamId::new(5, u64::MAX)));
        assert_eq!(strict(MAX_TEXT), Ok(StreamId::MAX));
        assert_eq!(strict(b"0-0"), Ok(StreamId::MIN));
    }

    /// Each case was checked against redis-server 7.0.15 (XADD / XDEL).
    #[test]
    fn lenient_parts_like_redis() {
        let ok: &[(&[u8], StreamId)] = &[
            (b"007-01", StreamId::new(7, 1)),
            (b"+9", StreamId::new(9, 0)),
            (b"+9-+1", StreamId::new(9, 1)),
            (b" 5", StreamId::new(5, 0)),
            (b"\t5", StreamId::new(5, 0)),
            (b"\n5", StreamId::new(5, 0)),
            (b"\x0b5", StreamId::new(5, 0)),
            (b" +5", StreamId::new(5, 0)),
            (b"5- 3", StreamId::new(5, 3)),
            (b"5--0", StreamId::new(5, 0)),
            (b"5- -3", StreamId::new(5, u64::MAX - 2)),
            (b"5\0zz", StreamId::new(5, 0)),
            (b"5-3\0-zz", StreamId::new(5, 3)),
            (b"9223372036854775808-0", StreamId::new(1 << 63, 0)),
        ];
        for (text, id) in ok {
            assert_eq!(strict(text), Ok(*id), "{:?}", String::from_utf8_lossy(text));
        }
        let bad: &[&[u8]] = &[
            b"",
            b" ",
            b"-",
            b"+",
            b"-5",
            b" -5",
            b"5-",
            b"5--1",
            b"5-3-1",
            b"0x10",
            b"1.5",
            b"5 ",
            b"5-+",
            b"5-+ 3",
            b"+-5",
            b"++5",
            b"+ 5",
            b"(5",
            b"*",
            b"5-*",
            b"-0",
            b"\x005",
            b"18446744073709551616",
            b"18446744073709551615-18446744073709551616",
            b"99999999999999999999999",
            b"$",
            b">",
            b"5-1*",
        ];
        for text in bad {
            assert_eq!(strict(text), Err(INVALID_ID), "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn length_limit() {
        let mut ok = vec![b'0'; 126];
        ok.push(b'5');
        assert_eq!(ok.len(), 127);
        assert_eq!(strict(&ok), Ok(StreamId::new(5, 0)));
        ok.insert(0, b'0');
        assert_eq!(strict(&ok), Err(INVALID_ID));
    }

    #[test]
    fn xadd_forms() {
        assert_eq!(parse_xadd_id(b"*"), Ok(XaddId::Auto));
        assert_eq!(parse_xadd_id(b"0-*"), Ok(XaddId::AutoSeq(0)));
        assert_eq!(parse_xadd_id(b"007-*"), Ok(XaddId::AutoSeq(7)));
        assert_eq!(parse_xadd_id(b"+5-*"), Ok(XaddId::AutoSeq(5)));
        assert_eq!(parse_xadd_id(b"18446744073709551615-*"), Ok(XaddId::AutoSeq(u64::MAX)));
        assert_eq!(parse_xadd_id(b"5-3"), Ok(XaddId::Explicit(StreamId::new(5, 3))));
        assert_eq!(parse_xadd_id(MAX_TEXT), Ok(XaddId::Explicit(StreamId::MAX)));
        assert_eq!(parse_xadd_id(b"0-0"), Err(XADD_ID_ZERO));
        assert_eq!(parse_xadd_id(b"0"), Err(XADD_ID_ZERO));
        assert_eq!(parse_xadd_id(b"000-00"), Err(XADD_ID_ZERO));
        for bad in [&b"5-* "[..], b"*-5", b"5-1*", b"**", b"-*", b"5-**", b"+", b"-"] {
            assert_eq!(parse_xadd_id(bad), Err(INVALID_ID), "{:?}", String::from_utf8_lossy(bad));
        }
        // `ms-*` is an XADD form only.
        assert_eq!(strict(b"5-*"), Err(INVALID_ID));
    }

    #[test]
    fn non_strict_forms() {
        assert_eq!(parse_non_strict(b"-", 0), Ok(StreamId::MIN));
        assert_eq!(parse_non_strict(b"+", 0), Ok(StreamId::MAX));
        assert_eq!(parse_non_strict(b"7", u64::MAX), Ok(StreamId::new(7, u64::MAX)));
        assert_eq!(parse_non_strict(b"--", 0), Err(INVALID_ID));
        assert_eq!(parse_non_strict(b"+1-", 0), Err(INVALID_ID));
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval_start(b"-"), Ok(StreamId::MIN));
        assert_eq!(parse_interval_end(b"+"), Ok(StreamId::MAX));
        assert_eq!(parse_interval_start(b"5"), Ok(StreamId::new(5, 0)));
        assert_eq!(parse_interval_end(b"5"), Ok(StreamId::new(5, u64::MAX)));
        assert_eq!(parse_interval_start(b"(5-0"), Ok(StreamId::new(5, 1)));
        assert_eq!(parse_interval_start(b"(5-18446744073709551615"), Ok(StreamId::new(6, 0)));
        assert_eq!(parse_interval_end(b"(5"), Ok(StreamId::new(5, u64::MAX - 1)));
        assert_eq!(parse_interval_end(b"(5-0"), Ok(StreamId::new(4, u64::MAX)));
        assert_eq!(parse_interval_end(b"(0"), Ok(StreamId::new(0, u64::MAX - 1)));
        assert_eq!(parse_interval_start(b"(18446744073709551615"), Ok(StreamId::new(u64::MAX, 1)));
        let mut excl_max = b"(".to_vec();
        excl_max.extend_from_slice(MAX_TEXT);
        assert_eq!(parse_interval_start(&excl_max), Err(INVALID_START));
        assert_eq!(parse_interval_end(&excl_max), Ok(StreamId::new(u64::MAX, u64::MAX - 1)));
        assert_eq!(parse_interval_end(b"(0-0"), Err(INVALID_END));
        assert_eq!(parse_interval_start(b"(0-0"), Ok(StreamId::new(0, 1)));
        for bad in [&b"("[..], b"((5", b"(-", b"(+", b"( ", b"5-", b"*"] {
            assert_eq!(parse_interval_start(bad), Err(INVALID_ID), "{bad:?}");
            assert_eq!(parse_interval_end(bad), Err(INVALID_ID), "{bad:?}");
        }
        // The 127-byte limit applies to what follows `(`.
        let mut long = b"(".to_vec();
        long.extend_from_slice(&[b'0'; 126]);
        long.push(b'5');
        assert_eq!(parse_interval_start(&long), Ok(StreamId::new(5, 1)));
    }
}
