//! XREAD: read entries newer than given IDs from one or more streams, optionally blocking
//! until some arrive (spec §3.4, §7).
//!
//! ```text
//! XREAD [COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize] [BLOCK milliseconds]
//!       STREAMS key [key ...] id [id ...]
//! ```
//!
//! Blocking: when nothing can be served and the client may block, the handler fills
//! [`CallCtx::block`] and the server parks the client. The re-run arguments carry every `$`
//! and `+` already resolved to a concrete ID, so a woken client sees only entries added after
//! it blocked; a re-run keeps the original deadline ([`CallCtx::deadline_override`]). A key
//! that is missing or not a stream at re-run time serves nothing, so the client blocks again.

use super::args::{self, is};
use super::{cmd_range, reply, StreamId};
use crate::command::{BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use crate::util::parse_i64;
use crate::{BlockRequest, CallCtx, CmdError, Engine, WakeOn};
use bytes::Bytes;
use rill_resp::Reply;

/// `XREAD`.
pub(super) const XREAD: CommandSpec = CommandSpec {
    name: "xread",
    arity: -4,
    flags: Flags::READONLY.and(Flags::BLOCKING).and(Flags::MOVABLEKEYS),
    first_key: 0,
    last_key: 0,
    step: 0,
    acl: &["@read", "@stream", "@slow", "@blocking"],
    key_specs: &[KeySpec {
        flags: &["RO", "access"],
        begin: BeginSearch::Keyword { keyword: "STREAMS", startfrom: 1 },
        find: FindKeys::Range { lastkey: -1, keystep: 1, limit: 2 },
        notes: "",
    }],
    group: "stream",
    summary: "Reads the entries after given IDs from one or more streams, waiting for new ones \
              if asked to.",
    since: "5.0.0",
    complexity: "O(log B + M) per stream, B its blocks and M the entries returned; O(1) to \
                 block.",
    syntax: "[COUNT count:integer] [MAXCOUNT maxcount:integer] [MAXSIZE maxsize:integer] \
             [BLOCK milliseconds:integer] STREAMS (key:key ... id ...)",
    ..CommandSpec::of(Handler::Engine(xread))
};

/// `ERR timeout is not an integer or out of range`
pub(super) const TIMEOUT_NOT_INTEGER: CmdError = CmdError::full("ERR timeout is not an integer or out of range");
/// `ERR timeout is out of range`
pub(super) const TIMEOUT_OUT_OF_RANGE: CmdError = CmdError::full("ERR timeout is out of range");
/// MAXCOUNT/MAXSIZE errors: the spec marks their exact text unverified (8.10, docs only).
pub(super) const MAXCOUNT_NOT_POSITIVE: CmdError = CmdError::full("ERR MAXCOUNT must be a positive integer");
pub(super) const MAXCOUNT_BELOW_COUNT: CmdError = CmdError::full("ERR MAXCOUNT must be greater than or equal to COUNT");
pub(super) const MAXSIZE_NOT_POSITIVE: CmdError = CmdError::full("ERR MAXSIZE must be a positive integer");

/// The cumulative MAXCOUNT / MAXSIZE caps over one XREAD or XREADGROUP reply.
#[derive(Debug)]
pub(super) struct Budget {
    max_count: Option<u64>,
    max_size: Option<u64>,
    entries: u64,
    bytes: u64,
    /// Set once an entry was refused: later streams get nothing.
    spent: bool,
}

impl Budget {
    /// No entry taken yet.
    pub(super) fn new(max_count: Option<u64>, max_size: Option<u64>) -> Budget {
        Budget { max_count, max_size, entries: 0, bytes: 0, spent: false }
    }

    /// Whether one more entry of `size` bytes (RESP, as sent) fits; counts it if so.
    pub(super) fn take(&mut self, size: impl FnOnce() -> u64) -> bool {
        if self.spent || self.max_count.is_some_and(|max| self.entries >= max) {
            self.spent = true;
            return false;
        }
        if let Some(max) = self.max_size {
            let size = size();
            // The first entry of the reply always goes out.
            if self.entries > 0 && self.bytes.saturating_add(size) > max {
                self.spent = true;
                return false;
            }
            self.bytes = self.bytes.saturating_add(size);
        }
        self.entries += 1;
        true
    }
}

/// A validated XREAD, before the keys are looked at.
#[derive(Debug)]
struct XreadRequest {
    /// Per-stream cap; 0 = none.
    count: u64,
    /// Cap on entries over all streams.
    max_count: Option<u64>,
    /// Soft cap on reply bytes over all streams.
    max_size: Option<u64>,
    /// `BLOCK` in ms (0 = forever), if given.
    block_ms: Option<i64>,
    /// Index of the first key.
    streams_at: usize,
    /// Number of keys (and of IDs).
    streams: usize,
}

fn option_error(opt: &str) -> CmdError {
    CmdError::owned(format!("ERR The {opt} option is only supported by XREADGROUP. You called XREAD instead."))
}

fn parse(args: &[Bytes]) -> Result<XreadRequest, CmdError> {
    let argc = args.len();
    let mut req = XreadRequest { count: 0, max_count: None, max_size: None, block_ms: None, streams_at: 0, streams: 0 };
    let mut i = 1;
    while i < argc {
        let more = argc - 1 - i;
        let Some(opt) = args.get(i) else { break };
        let value = args.get(i + 1).map(|b| b.as_ref()).unwrap_or_default();
        if is(opt, "CLAIM") && more >= 1 {
            return Err(option_error("CLAIM"));
        } else if is(opt, "BLOCK") && more >= 1 {
            let ms = parse_i64(value).ok_or(TIMEOUT_NOT_INTEGER)?;
            if ms < 0 {
                return Err(CmdError::TIMEOUT_NEGATIVE);
            }
            req.block_ms = Some(ms);
            i += 1;
        } else if is(opt, "COUNT") && more >= 1 {
            let n = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
            req.count = u64::try_from(n).unwrap_or(0);
            i += 1;
        } else if is(opt, "MAXCOUNT") && more >= 1 {
            let n = parse_i64(value).ok_or(MAXCOUNT_NOT_POSITIVE)?;
            req.max_count = Some(u64::try_from(n).ok().filter(|n| *n > 0).ok_or(MAXCOUNT_NOT_POSITIVE)?);
            i += 1;
        } else if is(opt, "MAXSIZE") && more >= 1 {
            let n = parse_i64(value).ok_or(MAXSIZE_NOT_POSITIVE)?;
            req.max_size = Some(u64::try_from(n).ok().filter(|n| *n > 0).ok_or(MAXSIZE_NOT_POSITIVE)?);
            i += 1;
        } else if is(opt, "STREAMS") && more >= 1 {
            let rest = argc - (i + 1);
            if !rest.is_multiple_of(2) {
                return Err(CmdError::full(
                    "ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified.",
                ));
            }
            req.streams_at = i + 1;
            req.streams = rest / 2;
            break;
        } else if is(opt, "GROUP") && more >= 2 {
            return Err(option_error("GROUP"));
        } else if is(opt, "NOACK") {
            return Err(option_error("NOACK"));
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    if req.streams_at == 0 {
        return Err(CmdError::SYNTAX);
    }
    if let Some(max) = req.max_count {
        if req.count != 0 && max < req.count {
            return Err(MAXCOUNT_BELOW_COUNT);
        }
    }
    Ok(req)
}

fn xread(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let req = parse(args)?;
    // Redis turns BLOCK into a deadline while parsing, so an overflow fails even when data is
    // available.
    let deadline = match req.block_ms {
        Some(ms) if ms > 0 => Some(ctx.now_ms.checked_add(ms).ok_or(TIMEOUT_OUT_OF_RANGE)?),
        _ => None,
    };
    let keys = args.get(req.streams_at..req.streams_at + req.streams).unwrap_or_default();
    let id_args = args.get(req.streams_at + req.streams..).unwrap_or_default();

    // Type-check each key and resolve its ID (serve entries after it), in argument order. A
    // re-run is the whole command again, as in Redis: the server re-runs a parked XREAD only
    // when a key it waits on holds a stream (a key turned into another type leaves it parked),
    // and then any key that now holds another type is WRONGTYPE.
    let mut from = Vec::with_capacity(req.streams);
    for (key, id_arg) in keys.iter().zip(id_args) {
        let stream = args::read_stream(engine, ctx, key)?;
        let after = match id_arg.as_ref() {
            b"$" => stream.map_or(StreamId::MIN, |s| s.last_generated_id()),
            // `+`: just below the last live entry, so exactly that entry is served whatever
            // COUNT says; 0-0 when there is none, so a blocked `+` waits for the first entry.
            b"+" => stream.and_then(|s| s.last_live_id()).and_then(StreamId::prev).unwrap_or(StreamId::MIN),
            b">" => return Err(CmdError::full(
                "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
            )),
            other => args::strict_id(other)?,
        };
        from.push(after);
    }

    let served = serve(engine, ctx, &req, keys, &from)?;
    if !served.is_empty() {
        return Ok(render(served, ctx.resp3));
    }
    if req.block_ms.is_none() || ctx.no_block {
        return Ok(Reply::NullArray);
    }
    let deadline_ms = ctx.deadline_override.unwrap_or(deadline);
    let mut rerun = args.to_vec();
    for (slot, id) in rerun.iter_mut().skip(req.streams_at + req.streams).zip(&from) {
        if slot.as_ref() == b"$" || slot.as_ref() == b"+" {
            *slot = Bytes::from(id.to_string());
        }
    }
    let mut block_keys: Vec<Bytes> = Vec::with_capacity(keys.len());
    for key in keys {
        if !block_keys.contains(key) {
            block_keys.push(key.clone());
        }
    }
    ctx.block = Some(BlockRequest {
        keys: block_keys,
        wakes_on: WakeOn::Stream,
        deadline_ms,
        timeout_reply: Reply::NullArray,
        rerun_args: Some(rerun),
        wake_at_ms: None,
    });
    Ok(Reply::NullArray)
}

/// The entries each stream serves, in argument order, streams with nothing left out.
fn serve(
    engine: &mut Engine,
    ctx: &CallCtx,
    req: &XreadRequest,
    keys: &[Bytes],
    from: &[StreamId],
) -> Result<Vec<(Bytes, Reply)>, CmdError> {
    let mut out = Vec::new();
    let mut budget = Budget::new(req.max_count, req.max_size);
    for (key, after) in keys.iter().zip(from) {
        if budget.spent {
            break;
        }
        let Ok(Some(stream)) = args::read_stream(engine, ctx, key) else { continue };
        // Nothing to serve unless an entry may lie after the requested ID (none is above the
        // last generated ID); a stream whose later entries are all deleted serves nothing
        // below.
        if stream.last_generated_id() <= *after {
            continue;
        }
        let Some(start) = after.next() else { continue };
        // Straight from the blocks into a pre-encoded reply (see `cmd_range::forward`).
        let count = if req.count == 0 { usize::MAX } else { usize::try_from(req.count).unwrap_or(usize::MAX) };
        let mut entries = reply::EntriesBuilder::with_capacity(count);
        cmd_range::forward(stream, start, StreamId::MAX, count, &mut entries, |_, size| budget.take(|| size as u64));
        if entries.len() > 0 {
            out.push((key.clone(), entries.finish()));
        }
    }
    Ok(out)
}

/// RESP3: a map key → entries. RESP2: an array of `[key, entries]` pairs.
fn render(served: Vec<(Bytes, Reply)>, resp3: bool) -> Reply {
    if resp3 {
        Reply::Map(served.into_iter().map(|(k, e)| (Reply::Bulk(k), e)).collect())
    } else {
        Reply::Array(served.into_iter().map(|(k, e)| Reply::Array(vec![Reply::Bulk(k), e])).collect())
    }
}
