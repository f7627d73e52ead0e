//! Argument parsing and key access shared by the stream commands.
//!
//! XADD and XTRIM share one option scanner ([`parse_add_or_trim`]), as in Redis, so they accept
//! the same spellings and fail with the same errors.

use super::id::{self, StreamId, XaddId};
use super::{NodeLimits, RefStrategy, Stream, TrimGoal, TrimRecord};
use crate::effect::Effect;
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;

/// `ERR syntax error, MAXLEN and MINID options at the same time are not compatible`
const TRIM_BOTH: CmdError =
    CmdError::full("ERR syntax error, MAXLEN and MINID options at the same time are not compatible");
/// `ERR The MAXLEN argument must be >= 0.`
const MAXLEN_NEGATIVE: CmdError = CmdError::full("ERR The MAXLEN argument must be >= 0.");
/// `ERR The LIMIT argument must be >= 0.`
const LIMIT_NEGATIVE: CmdError = CmdError::full("ERR The LIMIT argument must be >= 0.");
/// `ERR syntax error, IDMP/IDMPAUTO specified multiple times`
const IDMP_TWICE: CmdError = CmdError::full("ERR syntax error, IDMP/IDMPAUTO specified multiple times");
/// `ERR syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs`
const IDMP_NEEDS_AUTO_ID: CmdError =
    CmdError::full("ERR syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs");
/// `ERR syntax error, LIMIT cannot be used without specifying a trimming strategy`
const LIMIT_WITHOUT_STRATEGY: CmdError =
    CmdError::full("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy");
/// `ERR syntax error, LIMIT cannot be used without the special ~ option`
const LIMIT_WITHOUT_APPROX: CmdError =
    CmdError::full("ERR syntax error, LIMIT cannot be used without the special ~ option");
/// `ERR syntax error, XTRIM must be called with a trimming strategy`
const XTRIM_WITHOUT_STRATEGY: CmdError =
    CmdError::full("ERR syntax error, XTRIM must be called with a trimming strategy");

/// Case-insensitive token match.
pub(super) fn is(arg: &[u8], token: &str) -> bool {
    arg.eq_ignore_ascii_case(token.as_bytes())
}

/// The node limits from the engine configuration (read on every call: CONFIG SET applies to
/// existing streams' next appends, as in Redis).
pub(super) fn node_limits(engine: &Engine) -> NodeLimits {
    NodeLimits::new(engine.config.stream_node_max_entries, engine.config.stream_node_max_bytes)
}

/// The stream at `key` for reading (lazy expiry first): `None` if missing, WRONGTYPE if the
/// key holds another type.
pub(super) fn read_stream<'e>(
    engine: &'e mut Engine,
    ctx: &CallCtx,
    key: &[u8],
) -> Result<Option<&'e Stream>, CmdError> {
    match engine.lookup(ctx.db, key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &entry.value {
            Value::Stream(s) => Ok(Some(s)),
            _ => Err(CmdError::WRONGTYPE),
        },
    }
}

/// The stream at `key` for writing (lazy expiry first): `None` if missing, WRONGTYPE if the
/// key holds another type.
pub(super) fn write_stream<'e>(
    engine: &'e mut Engine,
    ctx: &CallCtx,
    key: &[u8],
) -> Result<Option<&'e mut Stream>, CmdError> {
    match engine.lookup_mut(ctx.db, key, ctx.now_ms) {
        None => Ok(None),
        Some(entry) => match &mut entry.value {
            Value::Stream(s) => Ok(Some(s)),
            _ => Err(CmdError::WRONGTYPE),
        },
    }
}

/// `KEEPREF`, `DELREF` or `ACKED`.
pub(super) fn ref_strategy(arg: &[u8]) -> Option<RefStrategy> {
    if is(arg, "KEEPREF") {
        Some(RefStrategy::KeepRef)
    } else if is(arg, "DELREF") {
        Some(RefStrategy::DelRef)
    } else if is(arg, "ACKED") {
        Some(RefStrategy::Acked)
    } else {
        None
    }
}

/// A parsed trimming request (`MAXLEN | MINID [= | ~] threshold [LIMIT count]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TrimArgs {
    /// MAXLEN or MINID and its threshold.
    pub goal: TrimGoal,
    /// `~` was given.
    pub approx: bool,
    /// `LIMIT n` if given (only valid with `~`); `None` = the default.
    pub limit: Option<u64>,
}

/// XADD's idempotency option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum IdmpArg {
    /// `IDMPAUTO pid`: the IID is derived from the fields.
    Auto { pid: Bytes },
    /// `IDMP pid iid`.
    Explicit { pid: Bytes, iid: Bytes },
}

impl IdmpArg {
    /// The producer ID.
    pub fn pid(&self) -> &Bytes {
        match self {
            IdmpArg::Auto { pid } | IdmpArg::Explicit { pid, .. } => pid,
        }
    }
}

/// Everything before XADD's fields, or all of XTRIM's options.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct AddTrimArgs {
    /// The trimming request, if any.
    pub trim: Option<TrimArgs>,
    /// `KEEPREF | DELREF | ACKED` (default KEEPREF).
    pub strategy: RefStrategy,
    /// XADD `NOMKSTREAM`.
    pub no_mkstream: bool,
    /// XADD `IDMP` / `IDMPAUTO`.
    pub idmp: Option<IdmpArg>,
    /// XADD: the ID and the index of its argument (fields follow it). `None` with `id_pos`
    /// = argc when the options ran to the end.
    pub id: Option<XaddIdArg>,
    /// XADD: index of the ID argument (= argc if none was found).
    pub id_pos: usize,
}

/// XADD's ID as scanned: a valid form, or the explicit `0-0` whose error Redis reports only
/// after the field count check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum XaddIdArg {
    /// `*`, `ms-*`, `ms-seq`, `ms`.
    Valid(XaddId),
    /// `0-0` (or `0`).
    Zero,
}

/// Scan XADD's options up to its ID (`xadd`), or all of XTRIM's arguments, with Redis' rules
/// (spec §3.1 "Option parsing", §3.10): a keyword takes its value only when enough arguments
/// follow, else it is read as the ID (XADD) or is a syntax error (XTRIM).
pub(super) fn parse_add_or_trim(args: &[Bytes], xadd: bool) -> Result<AddTrimArgs, CmdError> {
    let argc = args.len();
    let mut out = AddTrimArgs { id_pos: argc, ..AddTrimArgs::default() };
    let mut strategy_given = false;
    let mut limit_given = false;
    let mut approx = false;
    let mut goal: Option<TrimGoal> = None;
    let mut limit: u64 = 0;
    let mut i = 2;
    while i < argc {
        let more = argc - 1 - i;
        let Some(opt) = args.get(i) else { break };
        let arg_at = |k: usize| args.get(k).map(|b| b.as_ref()).unwrap_or_default();
        if xadd && opt.as_ref() == b"*" {
            out.id = Some(XaddIdArg::Valid(XaddId::Auto));
            out.id_pos = i;
            break;
        } else if (is(opt, "MAXLEN") || is(opt, "MINID")) && more >= 1 {
            if goal.is_some() {
                return Err(TRIM_BOTH);
            }
            approx = false;
            if more >= 2 && arg_at(i + 1) == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && arg_at(i + 1) == b"=" {
                i += 1;
            }
            let value = arg_at(i + 1);
            goal = Some(if is(opt, "MAXLEN") {
                let n = parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
                TrimGoal::MaxLen(u64::try_from(n).map_err(|_| MAXLEN_NEGATIVE)?)
            } else {
                TrimGoal::MinId(id::parse_strict(value, id::SEQ_DEFAULT_START)?)
            });
            i += 1;
        } else if is(opt, "LIMIT") && more >= 1 {
            let n = parse_i64(arg_at(i + 1)).ok_or(CmdError::NOT_INTEGER)?;
            limit = u64::try_from(n).map_err(|_| LIMIT_NEGATIVE)?;
            limit_given = true;
            i += 1;
        } else if let Some(s) = ref_strategy(opt).filter(|_| !strategy_given) {
            out.strategy = s;
            strategy_given = true;
        } else if xadd && is(opt, "NOMKSTREAM") {
            out.no_mkstream = true;
        } else if xadd && is(opt, "IDMPAUTO") && more >= 1 {
            if out.idmp.is_some() {
                return Err(IDMP_TWICE);
            }
            let pid = args.get(i + 1).cloned().unwrap_or_default();
            if pid.is_empty() {
                return Err(CmdError::full("ERR syntax error, IDMPAUTO requires a non-empty producer ID"));
            }
            out.idmp = Some(IdmpArg::Auto { pid });
            i += 1;
        } else if xadd && is(opt, "IDMP") && more >= 2 {
            if out.idmp.is_some() {
                return Err(IDMP_TWICE);
            }
            let pid = args.get(i + 1).cloned().unwrap_or_default();
            let iid = args.get(i + 2).cloned().unwrap_or_default();
            if pid.is_empty() {
                return Err(CmdError::full("ERR syntax error, IDMP requires a non-empty producer ID"));
            }
            if iid.is_empty() {
                return Err(CmdError::full("ERR syntax error, IDMP requires a non-empty idempotent ID"));
            }
            out.idmp = Some(IdmpArg::Explicit { pid, iid });
            i += 2;
        } else if xadd {
            let parsed = match id::parse_xadd_id(opt) {
                Ok(id) => XaddIdArg::Valid(id),
                Err(e) if e == id::XADD_ID_ZERO => XaddIdArg::Zero,
                Err(e) => return Err(e),
            };
            if out.idmp.is_some() {
                return Err(IDMP_NEEDS_AUTO_ID);
            }
            out.id = Some(parsed);
            out.id_pos = i;
            break;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    if limit != 0 && goal.is_none() {
        return Err(LIMIT_WITHOUT_STRATEGY);
    }
    if !xadd && goal.is_none() {
        return Err(XTRIM_WITHOUT_STRATEGY);
    }
    if limit_given && !approx {
        return Err(LIMIT_WITHOUT_APPROX);
    }
    out.trim = goal.map(|goal| TrimArgs { goal, approx, limit: limit_given.then_some(limit) });
    Ok(out)
}

/// A strict ID argument (`ms-seq` or `ms` with seq 0).
pub(super) fn strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    id::parse_strict(arg, id::SEQ_DEFAULT_START)
}

/// Run a parsed trim (XTRIM, and XADD after its append) with the reference strategy.
/// Returns the number of entries removed.
pub(super) fn apply_trim(
    stream: &mut Stream,
    trim: TrimArgs,
    strategy: RefStrategy,
    limits: NodeLimits,
    ctx: &mut CallCtx,
    key: &Bytes,
) -> u64 {
    let record = stream.trim_with_record(trim.goal, trim.approx, trim.limit, strategy, limits);
    match record {
        TrimRecord::Nothing => 0,
        TrimRecord::Prefix(n) => {
            // Exact and layout-free: every live entry below the new first one, or all of them.
            let args: Vec<Bytes> = if stream.is_empty() {
                ["XTRIM", "", "MAXLEN", "=", "0"].iter().map(|s| Bytes::from_static(s.as_bytes())).collect()
            } else {
                let first = stream.first_id().to_string();
                vec![
                    Bytes::from_static(b"XTRIM"),
                    Bytes::new(),
                    Bytes::from_static(b"MINID"),
                    Bytes::from_static(b"="),
                    Bytes::from(first),
                ]
            };
            let mut args = args;
            if let Some(k) = args.get_mut(1) {
                *k = key.clone();
            }
            ctx.emit(Effect::Command { db: ctx.db, args });
            n
        }
        TrimRecord::Ids(ids) => {
            // DELREF/ACKED trimming with groups. Recorded, and so sent to replicas, as an exact
            // XTRIM whose replay on the same state removes exactly these entries: never the
            // removed IDs (an XDELEX/XDEL would raise a replica's max-deleted-entry-id, which
            // a trim does not move, and a later XSETID below it would fail there only).
            let (kind, threshold) = trim_form(stream, &trim, strategy, &ids);
            let strategy = match strategy {
                RefStrategy::KeepRef => "KEEPREF",
                RefStrategy::DelRef => "DELREF",
                RefStrategy::Acked => "ACKED",
            };
            let args = vec![
                Bytes::from_static(b"XTRIM"),
                key.clone(),
                Bytes::from_static(kind.as_bytes()),
                Bytes::from_static(b"="),
                Bytes::from(threshold),
                Bytes::from_static(strategy.as_bytes()),
            ];
            ctx.emit(Effect::Command { db: ctx.db, args });
            ids.len() as u64
        }
    }
}

/// The exact goal (`MAXLEN`/`MINID` and its threshold) that replays a DELREF/ACKED trim with
/// groups that removed `ids` (ascending) from the state before it, whatever the node layout.
///
/// * An exact trim is itself, as Redis sends it, except ACKED with MAXLEN (below).
/// * DELREF removes every entry it passes, so an approximate one removed a prefix: Redis'
///   form, `MAXLEN = <length left>` or `MINID = <first ID left>` (`MAXLEN = 0` when nothing
///   is left: Redis' `MINID = 0-0` then would remove nothing).
/// * ACKED passes over the entries a group still references and removes every other one up
///   to where it stopped: `MINID = <last removed ID + 1>` removes exactly those again
///   (`MAXLEN = 0` if that ID is the largest there is). Redis sends an approximate ACKED trim
///   as `MAXLEN = <length left>` / `MINID = <first ID left>`, which its replicas may apply
///   differently (the MINID form stops at a referenced entry the trim passed; the MAXLEN walk
///   stops after the node in which the smaller goal falls), and an exact `MAXLEN = n ACKED`
///   stops after such a node too, which depends on the node layout.
fn trim_form(stream: &Stream, trim: &TrimArgs, strategy: RefStrategy, ids: &[StreamId]) -> (&'static str, String) {
    let exact = |goal: &TrimGoal| match goal {
        TrimGoal::MaxLen(n) => ("MAXLEN", n.to_string()),
        TrimGoal::MinId(id) => ("MINID", id.to_string()),
    };
    match (strategy, trim.approx, &trim.goal) {
        (RefStrategy::Acked, false, goal @ TrimGoal::MinId(_)) => exact(goal),
        (RefStrategy::Acked, _, _) => match ids.last().and_then(|last| last.next()) {
            Some(after) => ("MINID", after.to_string()),
            None => ("MAXLEN", "0".to_string()),
        },
        (_, false, goal) => exact(goal),
        (_, true, _) if stream.is_empty() => ("MAXLEN", "0".to_string()),
        (_, true, TrimGoal::MaxLen(_)) => ("MAXLEN", stream.len().to_string()),
        (_, true, TrimGoal::MinId(_)) => ("MINID", stream.first_id().to_string()),
    }
}

/// Lossy text of an argument, for echoing it in an error.
pub(super) fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// `NOGROUP No such key '<key>' or consumer group '<group>'` (XPENDING, XCLAIM, XAUTOCLAIM,
/// XNACK).
pub(super) fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::owned(format!("NOGROUP No such key '{}' or consumer group '{}'", text(key), text(group)))
}

/// `NOGROUP No such consumer group '<group>' for key name '<key>'` (XGROUP, XINFO CONSUMERS).
pub(super) fn no_group_for_key(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::owned(format!("NOGROUP No such consumer group '{}' for key name '{}'", text(group), text(key)))
}

/// The stream at `key` holding `group`, for writing: WRONGTYPE for another type, `missing`
/// when the key or the group does not exist.
pub(super) fn group_stream<'e>(
    engine: &'e mut Engine,
    ctx: &CallCtx,
    key: &[u8],
    group: &[u8],
    missing: impl FnOnce() -> CmdError,
) -> Result<&'e mut Stream, CmdError> {
    match write_stream(engine, ctx, key)? {
        Some(s) if s.group(group).is_some() => Ok(s),
        _ => Err(missing()),
    }
}
