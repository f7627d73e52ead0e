//! rill's own group commands (docs/spec/policies.md §2): `RILL.GROUP SET|UNSET|GET|INFO|HELP`,
//! `RILL.NACK` and `RILL.TOUCH`.
//!
//! ```text
//! RILL.GROUP SET key group option value [option value ...]   -> OK (all-or-nothing)
//! RILL.GROUP UNSET key group option [option ...]              -> OK
//! RILL.GROUP GET key group                                    -> map: every option
//! RILL.GROUP INFO key group                                   -> map: options + counters
//! RILL.NACK key group [DELAY ms] IDS numids id [id ...]       -> integer
//! RILL.TOUCH key group consumer IDS numids id [id ...]        -> integer
//! ```
//!
//! Options: MAXDELIVER, DEADLETTER, ACKWAIT, BACKOFF, ORDERBY, MAXACKPENDING,
//! MAXACKPENDINGCONSUMER, CONSUMERIDLE, GROUPIDLE (every option of the spec).

use super::args::{self, is};
use super::group::GroupEffect;
use super::policy::{default_dead_letter, Release, Settings, BACKOFF_MAX_VALUES, IDLE_MIN_MS};
use super::policy_act::{end_attempt, Ending};
use super::{reply, StreamId};
use crate::command::{key_at, CommandSpec, Flags, Handler};
use crate::util::parse_i64;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// `RILL.GROUP` (container).
pub(super) const RILL_GROUP: CommandSpec = CommandSpec {
    name: "rill.group",
    arity: -2,
    acl: &["@slow"],
    group: "stream",
    summary: "Sets, clears and describes a consumer group's policy (rill's own command).",
    since: "0.1.0",
    complexity: "Depends on the subcommand.",
    subcommands: &[RILL_GROUP_SET, RILL_GROUP_UNSET, RILL_GROUP_GET, RILL_GROUP_INFO, RILL_GROUP_HELP],
    ..CommandSpec::of(Handler::Container)
};

const RILL_GROUP_SET: CommandSpec = CommandSpec {
    name: "rill.group|set",
    arity: -6,
    flags: Flags::WRITE.and(Flags::DENYOOM),
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RW", "update"])],
    group: "stream",
    summary: "Sets options of a consumer group's policy; all of them or, on any bad one, none.",
    since: "0.1.0",
    complexity: "O(N) for N options (O(R log R) for the R released entries the first time).",
    syntax: "key:key group option-block@(option value ...)",
    ..CommandSpec::of(Handler::Engine(group_set))
};

const RILL_GROUP_UNSET: CommandSpec = CommandSpec {
    name: "rill.group|unset",
    arity: -5,
    flags: Flags::WRITE,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@write", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RW", "update"])],
    group: "stream",
    summary: "Returns options of a consumer group's policy to their defaults (off).",
    since: "0.1.0",
    complexity: "O(N) for N options.",
    syntax: "key:key group option ...",
    ..CommandSpec::of(Handler::Engine(group_unset))
};

const RILL_GROUP_GET: CommandSpec = CommandSpec {
    name: "rill.group|get",
    arity: 4,
    flags: Flags::READONLY,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    key_specs: &[key_at(2, &["RO", "access"])],
    group: "stream",
    summary: "Shows every option of a consumer group's policy, set or default.",
    since: "0.1.0",
    complexity: "O(1)",
    syntax: "key:key group",
    ..CommandSpec::of(Handler::Engine(group_get))
};

const RILL_GROUP_INFO: CommandSpec = CommandSpec {
    name: "rill.group|info",
    arity: 4,
    flags: Flags::READONLY,
    first_key: 2,
    last_key: 2,
    step: 1,
    acl: &["@read", "@stream", "@slow"],
    tips: &["nondeterministic_output"],
    key_specs: &[key_at(2, &["RO", "access"])],
    group: "stream",
    summary: "Shows a consumer group's policy with its counters.",
    since: "0.1.0",
    complexity: "O(D) for the D entries waiting out a delay.",
    syntax: "key:key group",
    ..CommandSpec::of(Handler::Engine(group_info))
};

const RILL_GROUP_HELP: CommandSpec = CommandSpec {
    name: "rill.group|help",
    arity: 2,
    flags: Flags::LOADING.and(Flags::STALE),
    acl: &["@stream", "@slow"],
    group: "stream",
    summary: "Lists the RILL.GROUP subcommands and options.",
    since: "0.1.0",
    complexity: "O(1)",
    ..CommandSpec::of(Handler::Engine(group_help))
};

/// `RILL.NACK`.
pub(super) const RILL_NACK: CommandSpec = CommandSpec {
    name: "rill.nack",
    arity: -6,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Hands pending entries back to their group as failed attempts, to be delivered \
              again after a delay (rill's own command).",
    since: "0.1.0",
    complexity: "O(N log n) for N IDs and a PEL of n entries.",
    syntax: "key:key group [DELAY ms:integer] ids@IDS (numids:integer id ...)",
    ..CommandSpec::of(Handler::Engine(rill_nack))
};

/// `RILL.TOUCH`.
pub(super) const RILL_TOUCH: CommandSpec = CommandSpec {
    name: "rill.touch",
    arity: -7,
    flags: Flags::WRITE.and(Flags::FAST),
    first_key: 1,
    last_key: 1,
    step: 1,
    acl: &["@write", "@stream", "@fast"],
    key_specs: &[key_at(1, &["RW", "update"])],
    group: "stream",
    summary: "Restarts the ack deadline of entries a consumer owns, without counting a delivery \
              (rill's own command).",
    since: "0.1.0",
    complexity: "O(N log n) for N IDs and a PEL of n entries.",
    syntax: "key:key group consumer ids@IDS (numids:integer id ...)",
    ..CommandSpec::of(Handler::Engine(rill_touch))
};

/// The option an argument names, upper case.
fn option_name(arg: &[u8]) -> Result<&'static str, CmdError> {
    const OPTIONS: [&str; 10] = [
        "MAXDELIVER",
        "DEADLETTER",
        "ACKWAIT",
        "BACKOFF",
        "ORDERBY",
        "MAXACKPENDING",
        "MAXACKPENDINGCONSUMER",
        "CONSUMERIDLE",
        "GROUPIDLE",
        "RELEASEONCLOSE",
    ];
    OPTIONS.into_iter().find(|name| is(arg, name)).ok_or(CmdError::SYNTAX)
}

/// CONSUMERIDLE / GROUPIDLE: 0 (off) or at least [`IDLE_MIN_MS`].
fn idle(value: &[u8], option: &str) -> Result<u64, CmdError> {
    parse_i64(value).and_then(|n| u64::try_from(n).ok()).filter(|n| *n == 0 || *n >= IDLE_MIN_MS).ok_or_else(|| {
        CmdError::owned(format!("ERR {option} must be 0 (off) or at least {IDLE_MIN_MS} (milliseconds)"))
    })
}

/// A switch: 0 (off) or 1 (on).
fn switch(value: &[u8], option: &str) -> Result<bool, CmdError> {
    match value {
        b"0" => Ok(false),
        b"1" => Ok(true),
        _ => Err(CmdError::owned(format!("ERR {option} must be 0 (off) or 1 (on)"))),
    }
}

/// A count or time: a non-negative integer.
fn non_negative(value: &[u8], option: &str, unit: &str) -> Result<u64, CmdError> {
    parse_i64(value)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| CmdError::owned(format!("ERR {option} must be 0 (off) or a positive integer{unit}")))
}

/// The stream at `key` with `group`, or Redis' errors (WRONGTYPE, NOGROUP).
fn check_group(engine: &mut Engine, ctx: &CallCtx, key: &Bytes, group: &Bytes) -> Result<(), CmdError> {
    args::group_stream(engine, ctx, key, group, || args::no_key_or_group(key, group)).map(|_| ())
}

fn group_set(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, group) = key_group(args)?;
    check_group(engine, ctx, key, group)?;
    let pairs = args.get(4..).unwrap_or_default();
    if !pairs.len().is_multiple_of(2) {
        return Err(CmdError::SYNTAX);
    }
    let current = args::read_stream(engine, ctx, key)?
        .and_then(|s| s.group(group))
        .and_then(|g| g.policy())
        .map(|p| p.settings.clone())
        .unwrap_or_default();
    // Every pair is checked before anything changes.
    let mut settings = current;
    for pair in pairs.chunks_exact(2) {
        let [opt, value] = pair else { continue };
        match option_name(opt)? {
            "MAXDELIVER" => settings.max_deliver = non_negative(value, "MAXDELIVER", "")?,
            "ACKWAIT" => settings.ack_wait_ms = non_negative(value, "ACKWAIT", " (milliseconds)")?,
            "BACKOFF" => settings.backoff_ms = backoff(value)?,
            "MAXACKPENDING" => settings.max_ack_pending = non_negative(value, "MAXACKPENDING", "")?,
            "MAXACKPENDINGCONSUMER" => {
                settings.max_ack_pending_consumer = non_negative(value, "MAXACKPENDINGCONSUMER", "")?;
            }
            "CONSUMERIDLE" => settings.consumer_idle_ms = idle(value, "CONSUMERIDLE")?,
            "GROUPIDLE" => settings.group_idle_ms = idle(value, "GROUPIDLE")?,
            "RELEASEONCLOSE" => settings.release_on_close = switch(value, "RELEASEONCLOSE")?,
            // An empty field name turns ordering off, as UNSET does.
            "ORDERBY" => settings.order_by = (!value.is_empty()).then(|| crate::types::owned(value)),
            _ => {
                if value.is_empty() {
                    return Err(CmdError::full("ERR DEADLETTER must name a key"));
                }
                if value == key {
                    return Err(CmdError::full("ERR DEADLETTER may not name the stream itself"));
                }
                if engine.peek(ctx.db, value, ctx.now_ms).is_some_and(|e| !matches!(e.value, Value::Stream(_))) {
                    return Err(CmdError::full("ERR DEADLETTER names a key that holds a value other than a stream"));
                }
                settings.dead_letter = Some(crate::types::owned(value));
            }
        }
    }
    apply_settings(engine, ctx, key, group, settings);
    Ok(Reply::ok())
}

/// `ms[,ms...]`, 1 to [`BACKOFF_MAX_VALUES`] values.
fn backoff(value: &[u8]) -> Result<Vec<u64>, CmdError> {
    let bad = || {
        CmdError::owned(format!(
            "ERR BACKOFF must be 1 to {BACKOFF_MAX_VALUES} comma-separated non-negative integers (milliseconds)"
        ))
    };
    let delays = value
        .split(|b| *b == b',')
        .map(|part| parse_i64(part).and_then(|n| u64::try_from(n).ok()).ok_or_else(bad))
        .collect::<Result<Vec<u64>, CmdError>>()?;
    if delays.is_empty() || delays.len() > BACKOFF_MAX_VALUES {
        return Err(bad());
    }
    Ok(delays)
}

fn group_unset(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, group) = key_group(args)?;
    check_group(engine, ctx, key, group)?;
    let mut names = Vec::new();
    for opt in args.get(4..).unwrap_or_default() {
        names.push(option_name(opt)?);
    }
    let Some(mut settings) = args::read_stream(engine, ctx, key)?
        .and_then(|s| s.group(group))
        .and_then(|g| g.policy())
        .map(|p| p.settings.clone())
    else {
        // Nothing is set: every option is at its default already.
        return Ok(Reply::ok());
    };
    for name in names {
        match name {
            "MAXDELIVER" => settings.max_deliver = 0,
            "ACKWAIT" => settings.ack_wait_ms = 0,
            "BACKOFF" => settings.backoff_ms.clear(),
            "MAXACKPENDING" => settings.max_ack_pending = 0,
            "MAXACKPENDINGCONSUMER" => settings.max_ack_pending_consumer = 0,
            "ORDERBY" => settings.order_by = None,
            "CONSUMERIDLE" => settings.consumer_idle_ms = 0,
            "GROUPIDLE" => settings.group_idle_ms = 0,
            "RELEASEONCLOSE" => settings.release_on_close = false,
            _ => settings.dead_letter = None,
        }
    }
    apply_settings(engine, ctx, key, group, settings);
    Ok(Reply::ok())
}

/// Store `settings` as the group's policy (one effect), and arm its timer.
fn apply_settings(engine: &mut Engine, ctx: &mut CallCtx, key: &Bytes, group: &Bytes, settings: Settings) {
    let Ok(Some(stream)) = args::write_stream(engine, ctx, key) else { return };
    let effect = stream.apply_group(GroupEffect::PolicySet { group: group.clone(), settings, time_ms: ctx.now_ms });
    ctx.emit_group(key, [effect]);
    engine.count_changes(1);
    engine.watch.touch(ctx.db, key);
    // Released entries may have become the hand-back queue: `>` readers can be served.
    engine.signal_ready(ctx.db, key);
    engine.arm_policy(ctx.db, key, group);
}

fn key_group(args: &[Bytes]) -> Result<(&Bytes, &Bytes), CmdError> {
    match (args.get(2), args.get(3)) {
        (Some(k), Some(g)) => Ok((k, g)),
        _ => Err(CmdError::SYNTAX),
    }
}

/// Every option, set or default, as `(name, value)` pairs.
fn options(key: &[u8], settings: &Settings) -> Vec<(Reply, Reply)> {
    let ms = |n: u64| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    let dlq = settings.dead_letter.clone().unwrap_or_else(|| default_dead_letter(key));
    vec![
        (reply::name("maxdeliver"), ms(settings.max_deliver)),
        (reply::name("deadletter"), Reply::Bulk(dlq)),
        (reply::name("ackwait"), ms(settings.ack_wait_ms)),
        (reply::name("backoff"), Reply::Array(settings.backoff_ms.iter().map(|d| ms(*d)).collect())),
        (reply::name("orderby"), Reply::Bulk(settings.order_by.clone().unwrap_or_default())),
        (reply::name("maxackpending"), ms(settings.max_ack_pending)),
        (reply::name("maxackpendingconsumer"), ms(settings.max_ack_pending_consumer)),
        (reply::name("consumeridle"), ms(settings.consumer_idle_ms)),
        (reply::name("groupidle"), ms(settings.group_idle_ms)),
        (reply::name("releaseonclose"), Reply::Integer(i64::from(settings.release_on_close))),
    ]
}

fn group_get(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, group) = key_group(args)?;
    let stream = args::read_stream(engine, ctx, key)?.ok_or_else(|| args::no_key_or_group(key, group))?;
    let g = stream.group(group).ok_or_else(|| args::no_key_or_group(key, group))?;
    let settings = g.policy().map(|p| p.settings.clone()).unwrap_or_default();
    Ok(Reply::Map(options(key, &settings)))
}

fn group_info(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (key, group) = key_group(args)?;
    let now = ctx.now_ms;
    let stream = args::read_stream(engine, ctx, key)?.ok_or_else(|| args::no_key_or_group(key, group))?;
    let g = stream.group(group).ok_or_else(|| args::no_key_or_group(key, group))?;
    let settings = g.policy().map(|p| p.settings.clone()).unwrap_or_default();
    let counters = g.policy().map(|p| p.counters).unwrap_or_default();
    let delayed = g.policy().map_or(0, |p| p.delayed_count(now));
    let held_back = g.policy().map_or(0, |p| p.held_back.0);
    let deferred = g.policy().map_or(0, |p| p.order.deferred_count());
    let released = g.pel().nacked_count();
    let oldest = g.pel().owned_by_time().next().map_or(0, |(t, _)| (now - t).max(0));
    let mut map = options(key, &settings);
    let n = reply::count;
    map.extend([
        (reply::name("pending"), n(g.pel().len())),
        (reply::name("handed-back-queue"), n(released.saturating_sub(delayed))),
        (reply::name("delivered"), n(counters.delivered)),
        (reply::name("redelivered"), n(counters.redelivered)),
        (reply::name("acked"), n(counters.acked)),
        (reply::name("handed-back"), n(counters.handed_back)),
        (reply::name("nacked"), n(counters.nacked)),
        (reply::name("dead-lettered"), n(counters.dead_lettered)),
        (reply::name("dead-letter-failures"), n(counters.dead_letter_failures)),
        (reply::name("delayed"), n(delayed)),
        (reply::name("deferred"), n(deferred)),
        (reply::name("oldest-pending-ms"), Reply::Integer(oldest)),
        (reply::name("reads-held-back"), n(held_back)),
        (reply::name("consumers-expired"), n(counters.consumers_expired)),
        (reply::name("released-on-close"), n(counters.released_on_close)),
    ]);
    Ok(Reply::Map(map))
}

fn group_help(_: &mut Engine, _: &mut CallCtx, _: &[Bytes]) -> Result<Reply, CmdError> {
    let lines = [
        "RILL.GROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "SET <key> <group> <option> <value> [<option> <value> ...]",
        "    Set policy options (all of them, or none if one is bad). Options:",
        "    MAXDELIVER <n>      dead-letter an entry whose n-th attempt fails (0: off)",
        "    DEADLETTER <key>    the dead-letter stream (default {<key>}:dlq)",
        "    ACKWAIT <ms>        hand an entry back when unacked this long (0: off)",
        "    BACKOFF <ms,...>    delays before a failed entry is delivered again",
        "    ORDERBY <field>     one entry in flight per value of this field (empty: off)",
        "    MAXACKPENDING <n>   cap on entries the group's consumers own (0: off)",
        "    MAXACKPENDINGCONSUMER <n>   the same cap per consumer (0: off)",
        "    CONSUMERIDLE <ms>   remove a consumer inactive this long, handing its entries back (0: off)",
        "    GROUPIDLE <ms>      destroy the group when inactive this long (0: off)",
        "    RELEASEONCLOSE <0|1>   hand a consumer's entries back when the last connection that read as it closes",
        "UNSET <key> <group> <option> [<option> ...]",
        "    Return options to their defaults.",
        "GET <key> <group>",
        "    Show every option.",
        "INFO <key> <group>",
        "    Show every option and the policy's counters.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Array(lines.iter().map(|l| Reply::simple(l)).collect()))
}

/// `IDS numids id [id ...]` at `at`, ending the arguments. XNACK's errors.
fn parse_ids(args: &[Bytes], at: usize) -> Result<Vec<StreamId>, CmdError> {
    match args.get(at) {
        Some(a) if is(a, "IDS") => {}
        _ => return Err(CmdError::SYNTAX),
    }
    let n = args
        .get(at + 1)
        .and_then(|a| parse_i64(a))
        .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
        .ok_or(CmdError::full("ERR numids must be a positive integer"))? as usize;
    let ids = args.get(at + 2..).unwrap_or_default();
    if ids.len() != n {
        return Err(CmdError::full("ERR number of IDs doesn't match numids"));
    }
    ids.iter().map(|a| args::strict_id(a)).collect()
}

fn rill_nack(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (Some(key), Some(group)) = (args.get(1), args.get(2)) else { return Err(CmdError::arity("rill.nack")) };
    let mut at = 3;
    let mut delay = None;
    if args.get(at).is_some_and(|a| is(a, "DELAY")) {
        let value = args.get(at + 1).ok_or(CmdError::SYNTAX)?;
        delay = Some(non_negative(value, "DELAY", " (milliseconds)")?);
        at += 2;
    }
    let ids = parse_ids(args, at)?;
    let stream = args::group_stream(engine, ctx, key, group, || args::no_key_or_group(key, group))?;
    let policy = stream.group(group).is_some_and(|g| g.policy().is_some());
    ctx.explicit();
    let mut acted = 0u64;
    if !policy {
        if delay.is_some_and(|d| d > 0) {
            return Err(CmdError::full("ERR DELAY needs a group with a policy (RILL.GROUP SET)"));
        }
        // XNACK FAIL: released with its count.
        let mut effects = Vec::new();
        for id in ids {
            let Some(count) = stream.group(group).and_then(|g| g.pel().get(id)).map(|p| p.delivery_count) else {
                continue;
            };
            effects.push(stream.apply_group(GroupEffect::Nacked { group: group.clone(), id, count }));
            acted += 1;
        }
        ctx.emit_group(key, effects);
        engine.count_changes(acted);
    } else {
        for id in ids {
            if end_attempt(engine, ctx, key, group, id, Ending::Failed(Release::Nack, delay), None) {
                acted += 1;
            }
        }
        engine.arm_policy(ctx.db, key, group);
    }
    if acted > 0 {
        engine.signal_ready(ctx.db, key);
    }
    Ok(Reply::Integer(i64::try_from(acted).unwrap_or(i64::MAX)))
}

fn rill_touch(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let (Some(key), Some(group), Some(consumer)) = (args.get(1), args.get(2), args.get(3)) else {
        return Err(CmdError::arity("rill.touch"));
    };
    let ids = parse_ids(args, 4)?;
    let now = ctx.now_ms;
    let stream = args::group_stream(engine, ctx, key, group, || args::no_key_or_group(key, group))?;
    ctx.explicit();
    let mut effects = Vec::new();
    for id in ids {
        let Some(g) = stream.group(group) else { break };
        let Some(p) = g.pel().get(id) else { continue };
        if p.owner.map(|o| o.as_ref()) != Some(consumer.as_ref()) {
            continue;
        }
        let count = p.delivery_count;
        effects.push(stream.apply_group(GroupEffect::Touched {
            group: group.clone(),
            consumer: consumer.clone(),
            id,
            time_ms: now,
            count,
        }));
    }
    let touched = effects.len() as u64;
    ctx.emit_group(key, effects);
    engine.count_changes(touched);
    Ok(Reply::Integer(i64::try_from(touched).unwrap_or(i64::MAX)))
}
