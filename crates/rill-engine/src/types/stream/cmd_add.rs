//! XADD: append an entry, optionally idempotently (IDMP/IDMPAUTO) and with trimming
//! (spec §3.1, §3.1.1, §6).
//!
//! ```text
//! XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [IDMPAUTO pid | IDMP pid iid]
//!      [MAXLEN | MINID [= | ~] threshold [LIMIT count]] <* | ms-* | ms-seq | ms> field value ...
//! ```
//!
//! Parse → execute → reply: [`parse`] validates every argument into [`XaddRequest`] before the
//! keyspace is touched; [`execute`] follows Redis' order (key lookup and creation, IDMP
//! duplicate check, ID resolution, append, IDMP record, trim, then WATCH and wake-ups).

use super::args::{self, AddTrimArgs, IdmpArg, XaddIdArg};
use super::{id, idmp, reply, FlatFields, Stream, StreamId, XaddId};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::effect::Effect;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `XADD`.
pub(super) const XADD: CommandSpec = CommandSpec {
    name: "xadd",
    arity: -5,
    flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Appends an entry to a stream, creating the stream if needed; can trim it and \
              drop repeats of an already-recorded message.",
    since: "5.0.0",
    complexity: "O(1) amortised per append (plus the fields' size); trimming adds O(blocks \
                 removed) and O(entries per block) for a partly trimmed block; IDMPAUTO adds \
                 O(size of the fields).",
    syntax: "key:key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] \
             [IDMPAUTO producer-id | IDMP (producer-id idempotent-id)] \
             [trim@((MAXLEN | MINID) [= | ~] threshold [LIMIT count:integer])] \
             id-selector@(auto-id | id) data@(field value) ...",
    ..CommandSpec::of(Handler::Engine(xadd))
};

/// A validated XADD, borrowing its key and fields from the request.
#[derive(Debug)]
struct XaddRequest<'a> {
    key: &'a Bytes,
    options: AddTrimArgs,
    id: XaddId,
    /// `f1 v1 f2 v2 ...`, an even number of arguments.
    fields: FlatFields<'a>,
}

fn parse(args: &[Bytes]) -> Result<XaddRequest<'_>, CmdError> {
    let options = args::parse_add_or_trim(args, true)?;
    let field_args = args.get(options.id_pos + 1..).unwrap_or_default();
    if field_args.len() < 2 || field_args.len() % 2 == 1 {
        return Err(CmdError::arity("xadd"));
    }
    // The explicit 0-0 error comes after the field count check and before the key lookup,
    // so it never creates the key.
    let id = match options.id {
        Some(XaddIdArg::Valid(id)) => id,
        Some(XaddIdArg::Zero) => return Err(id::XADD_ID_ZERO),
        None => return Err(CmdError::arity("xadd")),
    };
    let key = args.get(1).ok_or_else(|| CmdError::arity("xadd"))?;
    Ok(XaddRequest { key, options, id, fields: FlatFields(field_args) })
}

pub(super) fn xadd(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let req = parse(args)?;
    execute(engine, ctx, req, args)
}

/// What an XADD did, for the bookkeeping after the stream borrow ends.
enum Outcome {
    /// An IDMP duplicate: the recorded ID, nothing appended.
    Duplicate(StreamId),
    /// Appended: the reply, the new ID (formatted once, for the reply and the log),
    /// whether the trim that followed removed entries, and whether the stream has MAXAGE.
    Added(Reply, bool, bool),
}

fn execute(engine: &mut Engine, ctx: &mut CallCtx, req: XaddRequest<'_>, args: &[Bytes]) -> Result<Reply, CmdError> {
    let limits = args::node_limits(engine);
    // One key lookup when the stream exists (every append but a stream's first).
    let outcome = match args::write_stream(engine, ctx, req.key)? {
        Some(stream) => append(stream, &req, ctx, limits)?,
        None => {
            if req.options.no_mkstream {
                return Ok(Reply::Null);
            }
            // Created before the append is attempted, so it stays even if the append fails.
            let mut stream = Box::<super::Stream>::default();
            // New streams take their IDMP defaults from `stream-idmp-duration` / `-maxsize`.
            stream
                .idmp
                .configure(Some(engine.config.stream_idmp_duration_secs), Some(engine.config.stream_idmp_maxsize));
            engine.insert(ctx.db, req.key.clone(), Value::Stream(stream));
            let Some(stream) = args::write_stream(engine, ctx, req.key)? else {
                return Ok(Reply::Null);
            };
            append(stream, &req, ctx, limits)?
        }
    };
    match outcome {
        Outcome::Duplicate(id) => {
            // Replayed as sent: the same state finds the same duplicate (and expires the same
            // IIDs at the record's time).
            ctx.emit(Effect::Command { db: ctx.db, args: args.to_vec() });
            Ok(reply::id(id))
        }
        Outcome::Added(reply, trimmed, max_age) => {
            // MAXAGE's lazy trim (policies spec §8), after the append and its own trim.
            let aged = max_age && super::max_age::trim_on_add(engine, ctx, req.key);
            engine.modified(ctx.db, req.key, KeyEvent::XAdd);
            if trimmed || aged {
                engine.record_event(ctx.db, req.key, KeyEvent::XTrim);
            }
            engine.signal_ready(ctx.db, req.key);
            Ok(reply)
        }
    }
}

fn append(
    stream: &mut Stream,
    req: &XaddRequest<'_>,
    ctx: &mut CallCtx,
    limits: super::NodeLimits,
) -> Result<Outcome, CmdError> {
    let now_ms = ctx.now_ms;
    let iid = match &req.options.idmp {
        None => None,
        Some(option) => {
            let iid = match option {
                IdmpArg::Auto { .. } => idmp::auto_iid(&req.fields),
                IdmpArg::Explicit { iid, .. } => iid.clone(),
            };
            stream.idmp.expire(now_ms);
            if let Some(original) = stream.idmp.check_duplicate(option.pid(), &iid, now_ms) {
                return Ok(Outcome::Duplicate(original));
            }
            Some((option.pid().clone(), iid))
        }
    };
    let clock = u64::try_from(now_ms).unwrap_or(0);
    let new_id = stream.resolve_xadd_id(req.id, clock)?;
    stream.append(new_id, &req.fields, limits)?;
    let mut id_buf = [0u8; reply::ID_MAX_TEXT_BYTES];
    let id_text = reply::id_text(new_id, &mut id_buf);
    // The effects: this append with its final ID, then its IDMP record (IDMPAUTO's IID
    // spelled out), then the trim.
    if ctx.recording {
        let fields = req.fields.0.iter().map(|a| &a[..]);
        let head: [&[u8]; 3] = [b"XADD", req.key, id_text];
        ctx.effects.command(ctx.db, ExactChain { head: head.into_iter(), tail: fields, len: 3 + req.fields.0.len() });
        if let Some((pid, iid)) = &iid {
            ctx.effects.command(ctx.db, [&b"XIDMPRECORD"[..], req.key, pid, iid, id_text].into_iter());
        }
    }
    ctx.explicit();
    if let Some((pid, iid)) = iid {
        stream.idmp.record(&pid, iid, new_id);
    }
    let trimmed = match req.options.trim {
        Some(trim) => args::apply_trim(stream, trim, req.options.strategy, limits, ctx, req.key) > 0,
        None => false,
    };
    Ok(Outcome::Added(Reply::Bulk(Bytes::copy_from_slice(id_text)), trimmed, stream.max_age().is_some()))
}

/// Two iterators chained, with the total length known (the effect encoder writes it first).
struct ExactChain<A, B> {
    head: A,
    tail: B,
    len: usize,
}

impl<'a, A: Iterator<Item = &'a [u8]>, B: Iterator<Item = &'a [u8]>> Iterator for ExactChain<A, B> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let item = self.head.next().or_else(|| self.tail.next());
        if item.is_some() {
            self.len = self.len.saturating_sub(1);
        }
        item
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }
}

impl<'a, A: Iterator<Item = &'a [u8]>, B: Iterator<Item = &'a [u8]>> ExactSizeIterator for ExactChain<A, B> {}
