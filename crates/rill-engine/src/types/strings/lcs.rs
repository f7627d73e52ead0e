//! `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`: the longest common
//! subsequence of two strings (a missing key is the empty string).
//!
//! The classic dynamic program: a table of `(len1 + 1) * (len2 + 1)` 32-bit lengths, where the
//! cell for `(i, j)` holds the length of the LCS of the first `i` bytes of one string and the
//! first `j` of the other; then one walk back from the last cell recovers the subsequence and
//! the matching ranges. O(len1 * len2) time and memory. The walk makes the same choices as
//! Redis (on a tie it steps back in the second string), so the subsequence and the ranges are
//! Redis' own, not merely *a* longest one.
//!
//! Replies: the subsequence (a bulk string); with LEN, its length; with IDX, a map (a flat
//! array in RESP2) `matches` → `[[[start1, end1], [start2, end2] (, len)], ...]` from the end
//! of the strings backwards, and `len` → the length. MINMATCHLEN leaves out shorter ranges
//! (a negative value counts as 0); WITHMATCHLEN adds each range's length.
//!
//! Redis behaviours we match on purpose:
//! - Both keys are looked up first: one of another type is `ERR The specified keys must contain
//!   string values` (not WRONGTYPE), before any option is read.
//! - Options in order: MINMATCHLEN's value must be an integer; anything unknown (or MINMATCHLEN
//!   without a value) is a syntax error; LEN with IDX is `ERR If you want both the length and
//!   indexes, please just use IDX.`
//! - Memory is bounded as Redis bounds it: a table of more than `proto-max-bulk-len` bytes
//!   (512 MiB, [`MAX_STRING_BYTES`]; two strings of 11 585 bytes each, 11 584 still pass) is
//!   refused with
//!   `ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len`, and a table
//!   that cannot be allocated with `ERR Insufficient memory, failed allocating transient memory
//!   for LCS`.

use super::{str_slot, StrSlot, MAX_STRING_BYTES};
use crate::command::{BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::types::{arg, is_token};
use crate::util::int_arg;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`
pub const LCS: CommandSpec = CommandSpec {
    name: "lcs",
    arity: -3,
    flags: Flags::READONLY,
    first_key: 1,
    last_key: 2,
    step: 1,
    acl: &["@read", "@string", "@slow"],
    key_specs: &[KeySpec {
        flags: &["RO", "ACCESS"],
        begin: BeginSearch::Index(1),
        find: FindKeys::Range { lastkey: 1, keystep: 1, limit: 0 },
        notes: "",
    }],
    group: "string",
    summary: "Finds the longest common subsequence of two strings, or its length and where it matches.",
    since: "7.0.0",
    complexity: "O(N*M) in time and memory, N and M the lengths of the two strings.",
    syntax: "key1:key key2:key [LEN] [IDX] [MINMATCHLEN min-match-len:integer] [WITHMATCHLEN]",
    ..CommandSpec::of(Handler::Engine(lcs))
};

/// What LCS is asked to reply.
#[derive(Debug, Clone, Copy, Default)]
struct LcsOptions {
    len: bool,
    idx: bool,
    with_match_len: bool,
    /// Ranges shorter than this are left out of IDX's matches (0: none is).
    min_match_len: u64,
}

fn parse_options(args: &[Bytes]) -> Result<LcsOptions, CmdError> {
    let mut out = LcsOptions::default();
    let mut i = 3;
    while let Some(option) = args.get(i) {
        if is_token(option, "IDX") {
            out.idx = true;
        } else if is_token(option, "LEN") {
            out.len = true;
        } else if is_token(option, "WITHMATCHLEN") {
            out.with_match_len = true;
        } else if let (true, Some(value)) = (is_token(option, "MINMATCHLEN"), args.get(i + 1)) {
            out.min_match_len = u64::try_from(int_arg(value)?).unwrap_or(0);
            i += 1;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    if out.len && out.idx {
        return Err(CmdError::full("ERR If you want both the length and indexes, please just use IDX."));
    }
    Ok(out)
}

/// The string at `key` for LCS: empty when missing, an error for another type.
fn lcs_operand(engine: &mut Engine, ctx: &CallCtx, key: &[u8]) -> Option<Bytes> {
    match str_slot(engine, ctx, key) {
        StrSlot::Missing => Some(Bytes::new()),
        StrSlot::Str(s) => Some(s),
        StrSlot::OtherType => None,
    }
}

fn lcs(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    // Both keys are looked up (an access each) before either is judged, as in Redis.
    let a = lcs_operand(engine, ctx, arg(args, 1)?);
    let b = lcs_operand(engine, ctx, arg(args, 2)?);
    let (Some(a), Some(b)) = (a, b) else {
        return Err(CmdError::full("ERR The specified keys must contain string values"));
    };
    let options = parse_options(args)?;
    let table = Table::build(&a, &b)?;
    let total = table.at(a.len(), b.len());
    if options.len {
        return Ok(Reply::Integer(i64::from(total)));
    }
    let walk = walk_back(&table, &a, &b, options);
    if !options.idx {
        return Ok(Reply::Bulk(Bytes::from(walk.subsequence)));
    }
    let matches = walk
        .ranges
        .into_iter()
        .map(|r| {
            let pair = |start: usize, end: usize| Reply::Array(vec![int(start), int(end)]);
            let mut m = vec![pair(r.a_start, r.a_end), pair(r.b_start, r.b_end)];
            if options.with_match_len {
                m.push(int(r.a_end - r.a_start + 1));
            }
            Reply::Array(m)
        })
        .collect();
    Ok(Reply::Map(vec![
        (Reply::Bulk(Bytes::from_static(b"matches")), Reply::Array(matches)),
        (Reply::Bulk(Bytes::from_static(b"len")), Reply::Integer(i64::from(total))),
    ]))
}

fn int(n: usize) -> Reply {
    Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The LCS lengths of every pair of prefixes, row by row: row `i` (0..=len1) holds the cells
/// for the first `i` bytes of the first string against 0..=len2 bytes of the second.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Result<Table, CmdError> {
        // Redis keeps lengths in 32 bits and refuses strings that could overflow them.
        let limit = u32::MAX as usize - 1;
        if a.len() >= limit || b.len() >= limit {
            return Err(CmdError::full("ERR String too long for LCS"));
        }
        let width = b.len() + 1;
        let cells_len = (a.len() + 1).checked_mul(width);
        let bytes = cells_len.and_then(|n| n.checked_mul(std::mem::size_of::<u32>()));
        let (Some(cells_len), Some(bytes)) = (cells_len, bytes) else {
            return Err(CmdError::full("ERR Insufficient memory, failed allocating transient memory for LCS"));
        };
        if bytes > MAX_STRING_BYTES {
            return Err(CmdError::full("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"));
        }
        let mut cells = Vec::new();
        if cells.try_reserve_exact(cells_len).is_err() {
            return Err(CmdError::full("ERR Insufficient memory, failed allocating transient memory for LCS"));
        }
        cells.resize(cells_len, 0u32);
        let mut rows = cells.chunks_exact_mut(width);
        if let Some(mut previous) = rows.next() {
            for (&byte_a, row) in a.iter().zip(rows) {
                for (j, &byte_b) in b.iter().enumerate() {
                    let value = if byte_a == byte_b {
                        previous.get(j).copied().unwrap_or(0) + 1
                    } else {
                        let up = previous.get(j + 1).copied().unwrap_or(0);
                        let left = row.get(j).copied().unwrap_or(0);
                        up.max(left)
                    };
                    if let Some(cell) = row.get_mut(j + 1) {
                        *cell = value;
                    }
                }
                previous = row;
            }
        }
        Ok(Table { cells, width })
    }

    /// The LCS length of the first `i` bytes of one string and the first `j` of the other.
    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells.get(i * self.width + j).copied().unwrap_or(0)
    }
}

/// A run of consecutive matching bytes, inclusive indexes into both strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    a_start: usize,
    a_end: usize,
    b_start: usize,
    b_end: usize,
}

/// What the walk back found: the subsequence and (with IDX) its ranges, last first.
struct Walk {
    subsequence: Vec<u8>,
    ranges: Vec<Range>,
}

/// Walk back from the last cell: a byte both strings share at the current position is part of
/// the subsequence; otherwise step back in the first string if that keeps a strictly longer
/// LCS, else in the second (Redis' choice). Ranges grow backwards while matches are
/// consecutive in both strings and are closed at the first step that is not a match or when
/// either string's start is reached.
fn walk_back(table: &Table, a: &[u8], b: &[u8], options: LcsOptions) -> Walk {
    let total = table.at(a.len(), b.len()) as usize;
    let mut subsequence = vec![0u8; total];
    let mut ranges = Vec::new();
    let mut remaining = total;
    let (mut i, mut j) = (a.len(), b.len());
    let mut open: Option<Range> = None;
    while i > 0 && j > 0 {
        let mut close = false;
        let byte_a = a.get(i - 1).copied();
        if byte_a.is_some() && byte_a == b.get(j - 1).copied() {
            if let (Some(slot), Some(byte)) = (subsequence.get_mut(remaining.saturating_sub(1)), byte_a) {
                *slot = byte;
            }
            match open.as_mut() {
                None => open = Some(Range { a_start: i - 1, a_end: i - 1, b_start: j - 1, b_end: j - 1 }),
                Some(r) if r.a_start == i && r.b_start == j => {
                    r.a_start -= 1;
                    r.b_start -= 1;
                }
                Some(_) => close = true,
            }
            if open.is_some_and(|r| r.a_start == 0 || r.b_start == 0) {
                close = true;
            }
            remaining = remaining.saturating_sub(1);
            i -= 1;
            j -= 1;
        } else {
            if table.at(i - 1, j) > table.at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            close = open.is_some();
        }
        if close {
            if let Some(r) = open.take() {
                let len = (r.a_end - r.a_start + 1) as u64;
                if options.idx && len >= options.min_match_len {
                    ranges.push(r);
                }
            }
        }
    }
    Walk { subsequence, ranges }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use crate::types::testkit::*;
    use rill_resp::Reply;

    fn range(a: (i64, i64), b: (i64, i64), len: Option<i64>) -> Reply {
        let pair = |(x, y)| Reply::Array(vec![int(x), int(y)]);
        let mut r = vec![pair(a), pair(b)];
        r.extend(len.map(int));
        Reply::Array(r)
    }

    fn idx_reply(matches: Vec<Reply>, len: i64) -> Reply {
        Reply::Map(vec![(bulk("matches"), Reply::Array(matches)), (bulk("len"), int(len))])
    }

    #[test]
    fn subsequence_length_and_ranges() {
        let mut h = Harness::new();
        h.run(&["MSET", "key1", "ohmytext", "key2", "mynewtext"]);
        assert_eq!(h.run(&["LCS", "key1", "key2"]), bulk("mytext"));
        assert_eq!(h.run(&["LCS", "key1", "key2", "LEN"]), int(6));
        assert_eq!(
            h.run(&["LCS", "key1", "key2", "IDX"]),
            idx_reply(vec![range((4, 7), (5, 8), None), range((2, 3), (0, 1), None)], 6)
        );
        assert_eq!(
            h.run(&["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"]),
            idx_reply(vec![range((4, 7), (5, 8), Some(4))], 6)
        );
        assert_eq!(
            h.run(&["LCS", "key1", "key2", "idx", "minmatchlen", "-5", "withmatchlen"]),
            idx_reply(vec![range((4, 7), (5, 8), Some(4)), range((2, 3), (0, 1), Some(2))], 6)
        );
        // Missing keys are empty strings.
        assert_eq!(h.run(&["LCS", "key1", "nope"]), bulk(""));
        assert_eq!(h.run(&["LCS", "nope", "nope", "IDX"]), idx_reply(vec![], 0));
        assert_eq!(h.run(&["LCS", "key1", "key1", "LEN"]), int(8));
    }

    /// The walk's tie-breaking decides which of several longest subsequences comes back.
    #[test]
    fn ties_resolve_as_redis_does() {
        let mut h = Harness::new();
        h.run(&["MSET", "a", "ab", "b", "ba"]);
        // Both "a" and "b" are longest; Redis steps back in the second string on a tie.
        assert_eq!(h.run(&["LCS", "a", "b"]), bulk("b"));
        assert_eq!(h.run(&["LCS", "b", "a"]), bulk("a"));
        assert_eq!(h.run(&["LCS", "a", "b", "IDX"]), idx_reply(vec![range((1, 1), (0, 0), None)], 1));
    }

    #[test]
    fn errors_in_redis_order() {
        let mut h = Harness::new();
        h.run(&["SET", "s", "abc"]);
        h.run(&["RPUSH", "l", "x"]);
        let not_strings = err("ERR The specified keys must contain string values");
        assert_eq!(h.run(&["LCS", "s", "l", "BOGUS"]), not_strings);
        assert_eq!(h.run(&["LCS", "l", "nope"]), not_strings);
        assert_eq!(h.run(&["LCS", "s", "s", "BOGUS"]), err("ERR syntax error"));
        assert_eq!(h.run(&["LCS", "s", "s", "MINMATCHLEN"]), err("ERR syntax error"));
        assert_eq!(h.run(&["LCS", "s", "s", "MINMATCHLEN", "x"]), err("ERR value is not an integer or out of range"));
        assert_eq!(
            h.run(&["LCS", "s", "s", "LEN", "IDX"]),
            err("ERR If you want both the length and indexes, please just use IDX.")
        );
    }

    #[test]
    fn a_table_over_the_bulk_limit_is_refused() {
        let mut h = Harness::new();
        // Two strings of 11585 bytes: 11586² cells of 4 bytes, just over 512 MiB.
        h.run(&["SETRANGE", "big", "11584", "x"]);
        assert_eq!(
            h.run(&["LCS", "big", "big", "LEN"]),
            err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
        );
        // One side empty: a one-row table, however long the other.
        assert_eq!(h.run(&["LCS", "big", "nope", "LEN"]), int(0));
    }
}
