//! EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (NX|XX|GT|LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME,
//! PERSIST. Each is O(log n) in the number of keys with an expiry (the expiry index).

use super::super::{arg, delete_key, is_token};
use crate::util::int_arg;
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// The conditions EXPIRE-family options put on the current TTL; XX combines with GT or LT
/// (each must hold), NX with neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct ExpireCondition {
    /// NX: only when the key has no TTL.
    no_ttl: bool,
    /// XX: only when the key has a TTL.
    has_ttl: bool,
    /// GT: only when the new time is later (no TTL counts as infinite).
    later: bool,
    /// LT: only when the new time is earlier (no TTL counts as infinite).
    earlier: bool,
}

impl ExpireCondition {
    /// Whether a key whose expiry is `current` may get `when`.
    fn allows(self, current: Option<i64>, when: i64) -> bool {
        !(self.no_ttl && current.is_some()
            || self.has_ttl && current.is_none()
            || self.later && current.is_none_or(|c| when <= c)
            || self.earlier && current.is_some_and(|c| when >= c))
    }
}

/// How an EXPIRE-family command reads its time argument.
#[derive(Debug, Clone, Copy)]
struct ExpireForm {
    /// The canonical command name, for the overflow error.
    name: &'static str,
    /// Seconds (true) or milliseconds.
    seconds: bool,
    /// A Unix time (true) or a time to live.
    absolute: bool,
}

fn parse_expire_condition(opts: &[Bytes]) -> Result<ExpireCondition, CmdError> {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in opts {
        if is_token(opt, "NX") {
            nx = true;
        } else if is_token(opt, "XX") {
            xx = true;
        } else if is_token(opt, "GT") {
            gt = true;
        } else if is_token(opt, "LT") {
            lt = true;
        } else {
            return Err(CmdError::owned(format!("ERR Unsupported option {}", String::from_utf8_lossy(opt))));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::full("ERR NX and XX, GT or LT options at the same time are not compatible"));
    }
    if gt && lt {
        return Err(CmdError::full("ERR GT and LT options at the same time are not compatible"));
    }
    Ok(ExpireCondition { no_ttl: nx, has_ttl: xx, later: gt, earlier: lt })
}

/// The absolute expiry time in ms, with Redis' overflow checks.
fn expire_time_ms(form: ExpireForm, raw: i64, now_ms: i64) -> Result<i64, CmdError> {
    let invalid = || CmdError::owned(format!("ERR invalid expire time in '{}' command", form.name));
    let mut when = raw;
    if form.seconds {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    if !form.absolute {
        when = when.checked_add(now_ms).ok_or_else(invalid)?;
    }
    Ok(when)
}

fn expire_generic(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes], form: ExpireForm) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let condition = parse_expire_condition(args.get(3..).unwrap_or(&[]))?;
    let when = expire_time_ms(form, int_arg(arg(args, 2)?)?, ctx.now_ms)?;
    let Some(entry) = engine.lookup(ctx.db, key, ctx.now_ms) else { return Ok(Reply::Integer(0)) };
    let current = entry.expire_at_ms();
    let allowed = condition.allows(current, when);
    if !allowed {
        return Ok(Reply::Integer(0));
    }
    if engine.expired_on_write(when, ctx.now_ms) {
        delete_key(engine, ctx.db, key);
    } else {
        engine.set_expire(ctx.db, key, Some(when));
        engine.modified(ctx.db, key, KeyEvent::Expire);
    }
    Ok(Reply::Integer(1))
}

pub(super) fn expire(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let form = ExpireForm { name: "expire", seconds: true, absolute: false };
    expire_generic(engine, ctx, args, form)
}

pub(super) fn pexpire(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let form = ExpireForm { name: "pexpire", seconds: false, absolute: false };
    expire_generic(engine, ctx, args, form)
}

pub(super) fn expireat(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let form = ExpireForm { name: "expireat", seconds: true, absolute: true };
    expire_generic(engine, ctx, args, form)
}

pub(super) fn pexpireat(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let form = ExpireForm { name: "pexpireat", seconds: false, absolute: true };
    expire_generic(engine, ctx, args, form)
}

// ---------------------------------------------------------------------------------------------
// TTL / PTTL / EXPIRETIME / PEXPIRETIME / PERSIST

/// Shared by the four TTL readers: `absolute` reports the Unix time instead of the time left;
/// `millis` reports ms instead of seconds rounded to the nearest one.
fn ttl_generic(
    engine: &mut Engine,
    ctx: &CallCtx,
    args: &[Bytes],
    absolute: bool,
    millis: bool,
) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    // Not an access: TTL leaves OBJECT IDLETIME alone, as in Redis.
    let Some(entry) = engine.peek_read(ctx.db, key, ctx.now_ms) else {
        return Ok(Reply::Integer(-2));
    };
    let Some(at) = entry.expire_at_ms() else { return Ok(Reply::Integer(-1)) };
    let ms = if absolute { at } else { at.saturating_sub(ctx.now_ms).max(0) };
    Ok(Reply::Integer(if millis { ms } else { ms.saturating_add(500) / 1000 }))
}

pub(super) fn ttl(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, false, false)
}

pub(super) fn pttl(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, false, true)
}

pub(super) fn expiretime(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, true, false)
}

pub(super) fn pexpiretime(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    ttl_generic(engine, ctx, args, true, true)
}

pub(super) fn persist(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let has_ttl = engine.lookup(ctx.db, key, ctx.now_ms).is_some_and(|e| e.expire_at_ms().is_some());
    if !has_ttl {
        return Ok(Reply::Integer(0));
    }
    engine.set_expire(ctx.db, key, None);
    engine.modified(ctx.db, key, KeyEvent::Persist);
    Ok(Reply::Integer(1))
}
