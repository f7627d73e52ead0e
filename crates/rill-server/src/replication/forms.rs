//! The replication stream in Redis' own forms: what a Redis replica is sent for each committed
//! journal unit, so that a real `redis-server` following rill reaches the state rill has
//! (docs/REPLICATION.md, "The stream in Redis' forms").
//!
//! Redis replicates effects, never a request that decided something: a delivery is an
//! `XCLAIM ... FORCE JUSTID` with its time and count, a moved group cursor `XGROUP SETID ...
//! ENTRIESREAD`, an expiry `DEL`. rill's effects ([`rill_engine::effect`]) are already those
//! facts, so the translation is per effect, with no look-up in the keyspace:
//!
//! | effect | Redis form |
//! |---|---|
//! | a command logged as itself (`XADD` with its made ID, `SREM` for SPOP, `DEL` for an expiry, ...) | the command |
//! | `Delivered` (a `>` read) | `XCLAIM key group consumer 0 id TIME t RETRYCOUNT 1 FORCE JUSTID LASTID id` (none for NOACK), then one `XGROUP SETID key group <last id> [ENTRIESREAD n]` after the run of deliveries |
//! | `Redelivered` (a history read), `Claimed` (XCLAIM, XAUTOCLAIM, CLAIM) | `XCLAIM key group owner 0 id TIME t RETRYCOUNT n FORCE JUSTID` |
//! | `LastIdRaised` (XCLAIM LASTID) | `XGROUP SETID key group id [ENTRIESREAD n]` (the group's entries-read, kept) |
//! | `ConsumerCreated` | `XGROUP CREATECONSUMER key group consumer` |
//! | `ConsumerSeen` | nothing: Redis does not replicate seen-time (a replica's is its own) |
//! | `Acked` (XACK, or a claim finding the entry deleted) | `XACK key group id` |
//! | `Nacked` (XNACK) | `XNACK key group FAIL IDS 1 id RETRYCOUNT n FORCE` |
//! | group created / destroyed / cursor set, consumer deleted | `XGROUP CREATE` / `DESTROY` / `SETID` / `DELCONSUMER` |
//! | `TrimIds` (an older rill's record of a DELREF / ACKED trim; live units hold an exact `XTRIM` instead) | `XDELEX key DELREF IDS n id ...`, or `XDEL key id ...` for KEEPREF |
//!
//! A unit of more than one command is wrapped in `MULTI` / `EXEC`, and `SELECT db` precedes a
//! command whose database is not the one the stream last selected (inside a transaction too:
//! `MULTI`, then `SELECT`, as Redis 7+ sends it), as Redis does.
//!
//! Times: `TIME t` is the primary's delivery time; a Redis replica whose clock is behind takes
//! its own now instead (Redis' rule for a TIME in the future). Consumer seen- and active-times
//! are the replica's, as between two Redis servers.

use bytes::Bytes;
use rill_engine::effect::Effect;
use rill_engine::types::stream::group::GroupEffect;
use rill_engine::types::stream::StreamId;

/// One command of the stream: its database and its arguments.
pub type Command = (usize, Vec<Bytes>);

/// An effect with no Redis form: a record from a log written before rill recorded what the
/// form needs. Live units never hold one; a replica sent from such a record must resync fully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untranslatable(pub &'static str);

impl std::fmt::Display for Untranslatable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Whether `rest` delivers an entry to `consumer` of `group` on `key` (an XCLAIM form).
fn claims_later(rest: &[Effect], db: usize, key: &Bytes, group: &Bytes, consumer: &Bytes) -> bool {
    rest.iter().any(|e| {
        matches!(e, Effect::Group { db: d, key: k, effect: GroupEffect::Delivered { group: g, consumer: c, noack: false, .. } }
            if *d == db && k == key && g == group && c == consumer)
    })
}

/// A command logged as itself, as Redis propagates it (the unit ran at `time_ms`):
/// - a relative or seconds expiry as an absolute one in ms — EXPIRE, PEXPIRE and EXPIREAT as
///   `PEXPIREAT key ms`, SET with EX/PX/EXAT, SETEX and PSETEX as `SET key value PXAT ms`,
///   GETEX as `PEXPIREAT` or `PERSIST` — so a replica that applies it late (after a
///   partial resync, from the backlog) keeps the primary's time; one already past as `DEL`;
/// - GETSET as `SET`, SET without its `GET`, GETDEL as `DEL` (what the reply needed, not the
///   write), HGETDEL as `HDEL`, BRPOPLPUSH as `RPOPLPUSH`, BLMOVE as `LMOVE`, a one-key BLPOP/BRPOP as
///   `LPOP`/`RPOP`, so a Redis replica counts the same calls in INFO commandstats.
/// - a deletion the server decided (an expiry time already past) as `UNLINK` rather than `DEL`
///   when `unlink` (`lazyfree-lazy-server-del yes`), as Redis.
fn command_form(args: &[Bytes], time_ms: i64, unlink: bool) -> Vec<Bytes> {
    if args.first().is_none_or(|name| as_recorded(name)) {
        return args.to_vec();
    }
    rewritten(args, time_ms, unlink).unwrap_or_else(|| args.to_vec())
}

/// [`command_form`] of a command it changes (`None`: this one goes as it is).
fn rewritten(args: &[Bytes], time_ms: i64, unlink: bool) -> Option<Vec<Bytes>> {
    let name = args.first().map(|a| a.to_ascii_lowercase()).unwrap_or_default();
    let int = |i: usize| -> Option<i64> { std::str::from_utf8(args.get(i)?).ok()?.parse().ok() };
    let key = || args.get(1).cloned().unwrap_or_default();
    let del = || vec![b(if unlink { "UNLINK" } else { "DEL" }), key()];
    let at = |unit_ms: i64, relative: bool, raw: i64| -> Option<i64> {
        let ms = raw.checked_mul(unit_ms)?;
        if relative {
            ms.checked_add(time_ms)
        } else {
            Some(ms)
        }
    };
    let expire_form = |ms: i64| -> Vec<Bytes> {
        if ms <= time_ms {
            del()
        } else {
            let mut out = vec![b("PEXPIREAT"), key(), number_i64(ms)];
            out.extend(args.iter().skip(3).cloned());
            out
        }
    };
    let set_form = |value: Bytes, ms: i64| -> Vec<Bytes> {
        if ms <= time_ms {
            del()
        } else {
            vec![b("SET"), key(), value, b("PXAT"), number_i64(ms)]
        }
    };
    let absolute = match name.as_slice() {
        b"expire" => int(2).and_then(|t| at(1000, true, t)).map(expire_form),
        b"pexpire" => int(2).and_then(|t| at(1, true, t)).map(expire_form),
        b"expireat" => int(2).and_then(|t| at(1000, false, t)).map(expire_form),
        b"pexpireat" => int(2).and_then(|t| at(1, false, t)).map(expire_form),
        b"setex" => {
            int(2).and_then(|t| at(1000, true, t)).map(|ms| set_form(args.get(3).cloned().unwrap_or_default(), ms))
        }
        b"psetex" => {
            int(2).and_then(|t| at(1, true, t)).map(|ms| set_form(args.get(3).cloned().unwrap_or_default(), ms))
        }
        // DELEX logged only when it deleted (a condition that failed changed nothing).
        b"getdel" | b"delex" => Some(vec![b("DEL"), key()]),
        // HGETDEL key FIELDS n field... as HDEL key field... (every field named, as Redis).
        b"hgetdel" => Some([b("HDEL"), key()].into_iter().chain(args.iter().skip(4).cloned()).collect()),
        b"msetex" => msetex_form(args, time_ms),
        // A blocking list command that was served, as the command it then was.
        b"brpoplpush" if args.len() == 4 => Some(vec![b("RPOPLPUSH"), key(), args.get(2).cloned().unwrap_or_default()]),
        b"blmove" if args.len() == 6 => {
            Some(std::iter::once(b("LMOVE")).chain(args.iter().skip(1).take(4).cloned()).collect())
        }
        b"blpop" if args.len() == 3 => Some(vec![b("LPOP"), key()]),
        b"brpop" if args.len() == 3 => Some(vec![b("RPOP"), key()]),
        b"getset" => Some(std::iter::once(b("SET")).chain(args.iter().skip(1).cloned()).collect()),
        // An absolute TTL already past: the key REPLACE removed (nothing is logged when there
        // was none), as the deletion Redis sends.
        b"restore" if args.iter().skip(4).any(|a| a.eq_ignore_ascii_case(b"absttl")) => {
            int(2).filter(|t| *t > 0 && *t <= time_ms).map(|_| del())
        }
        // A relative TTL as an absolute one, marked ABSTTL.
        b"restore" => int(2).filter(|t| *t > 0).and_then(|t| at(1, true, t)).map(|ms| {
            let mut out = args.to_vec();
            if let Some(ttl) = out.get_mut(2) {
                *ttl = number_i64(ms);
            }
            out.push(b("ABSTTL"));
            out
        }),
        b"set" | b"getex" => {
            // The expiry option and its value, if any (SET's options start after the value;
            // IFEQ / IFNE / IFDEQ / IFDNE take a value that is not an option).
            let first = if name.as_slice() == b"set" { 3 } else { 2 };
            let mut skip_value = false;
            let option = (first..args.len()).find_map(|i| {
                if std::mem::take(&mut skip_value) {
                    return None;
                }
                let word = args.get(i)?.to_ascii_lowercase();
                let (unit, relative) = match word.as_slice() {
                    b"ex" => (1000, true),
                    b"px" => (1, true),
                    b"exat" => (1000, false),
                    b"pxat" => (1, false),
                    b"persist" => return Some(None),
                    b"ifeq" | b"ifne" | b"ifdeq" | b"ifdne" => {
                        skip_value = true;
                        return None;
                    }
                    _ => return None,
                };
                Some(int(i + 1).and_then(|t| at(unit, relative, t)).map(|ms| (ms, relative || unit != 1)))
            });
            match (name.as_slice(), option) {
                (b"getex", Some(Some((ms, _)))) => {
                    Some(if ms <= time_ms { del() } else { vec![b("PEXPIREAT"), key(), number_i64(ms)] })
                }
                (b"getex", Some(None)) => Some(vec![b("PERSIST"), key()]),
                // PXAT is already what a replica needs: Redis sends the command as the client
                // wrote it (its other options, GET among them, included).
                (b"set", Some(Some((ms, false)))) if ms > time_ms => Some(args.to_vec()),
                (b"set", Some(Some((ms, _)))) => Some(set_form(args.get(2).cloned().unwrap_or_default(), ms)),
                (b"set", _) => Some(
                    args.iter()
                        .enumerate()
                        .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"))
                        .map(|(_, a)| a.clone())
                        .collect(),
                ),
                _ => None,
            }
        }
        _ => None,
    };
    absolute
}

/// The commands whose recorded form [`command_form`] (or [`commands_with`]) changes: every
/// other command effect goes to a Redis replica as it was recorded.
const REWRITTEN: [&[u8]; 19] = [
    b"expire",
    b"pexpire",
    b"expireat",
    b"pexpireat",
    b"setex",
    b"psetex",
    b"getdel",
    b"delex",
    b"hgetdel",
    b"msetex",
    b"brpoplpush",
    b"blmove",
    b"blpop",
    b"brpop",
    b"getset",
    b"restore",
    b"set",
    b"getex",
    b"rill.stream",
];

/// Whether a command effect named `name` goes to a Redis replica exactly as recorded (the
/// common case, XADD among them): then its form can be written straight from the record.
pub fn as_recorded(name: &[u8]) -> bool {
    !REWRITTEN.iter().any(|r| r.eq_ignore_ascii_case(name))
}

/// MSETEX as Redis propagates it: an EX / PX expiry as `PXAT` at the unit's time (EXAT,
/// PXAT and KEEPTTL travel as they are).
fn msetex_form(args: &[Bytes], time_ms: i64) -> Option<Vec<Bytes>> {
    let count: usize = std::str::from_utf8(args.get(1)?).ok()?.parse().ok()?;
    let opts_at = count.checked_mul(2)?.checked_add(2)?;
    let mut out = args.to_vec();
    let mut i = opts_at;
    while let Some(word) = args.get(i) {
        let unit = if word.eq_ignore_ascii_case(b"ex") {
            1000
        } else if word.eq_ignore_ascii_case(b"px") {
            1
        } else if word.eq_ignore_ascii_case(b"exat") || word.eq_ignore_ascii_case(b"pxat") {
            i += 2;
            continue;
        } else {
            i += 1;
            continue;
        };
        let raw: i64 = std::str::from_utf8(args.get(i + 1)?).ok()?.parse().ok()?;
        let at = raw.checked_mul(unit)?.checked_add(time_ms)?;
        *out.get_mut(i)? = b("PXAT");
        *out.get_mut(i + 1)? = number_i64(at);
        i += 2;
    }
    Some(out)
}

/// A signed number as a bulk.
fn number_i64(n: i64) -> Bytes {
    Bytes::from(n.to_string())
}

/// The commands a Redis replica runs for one unit's effects, in order (no SELECT, MULTI or
/// EXEC yet: [`Stream::encode`] adds them).
pub fn commands(effects: &[Effect], time_ms: i64) -> Result<Vec<Command>, Untranslatable> {
    commands_with(effects, time_ms, false)
}

/// [`commands`], with the server's own deletions (an expiry time already past) as `UNLINK`
/// when `unlink` (`lazyfree-lazy-server-del yes`).
pub fn commands_with(effects: &[Effect], time_ms: i64, unlink: bool) -> Result<Vec<Command>, Untranslatable> {
    let mut out = Vec::with_capacity(effects.len());
    // The group cursor a run of deliveries leaves: sent once, after the run.
    let mut cursor: Option<Command> = None;
    for (at, effect) in effects.iter().enumerate() {
        if let Effect::Group { db, key, effect: GroupEffect::ConsumerCreated { group, consumer, .. } } = effect {
            if claims_later(effects.get(at + 1..).unwrap_or_default(), *db, key, group, consumer) {
                // The XCLAIM of its first delivery makes the consumer on the replica: Redis
                // propagates the creation only when no XCLAIM follows.
                continue;
            }
        }
        if let Effect::Group {
            db,
            key,
            effect: GroupEffect::Delivered { group, consumer, id, time_ms, entries_read, noack },
        } = effect
        {
            if cursor.as_ref().is_some_and(|(d, c)| *d != *db || c.get(2) != Some(key) || c.get(3) != Some(group)) {
                out.extend(cursor.take());
            }
            if !noack {
                out.push((*db, xclaim(key, group, consumer, *id, *time_ms, 1, Some(*id))));
            }
            cursor = Some((*db, xgroup_setid(key, group, *id, *entries_read)));
            continue;
        }
        out.extend(cursor.take());
        match effect {
            // rill's stream settings have no Redis form: a Redis replica gets the trims they
            // make (exact XTRIMs), not the setting.
            Effect::Command { args, .. } if args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"RILL.STREAM")) => {}
            Effect::Command { db, args } => out.push((*db, command_form(args, time_ms, unlink))),
            Effect::Group { db, key, effect } => {
                if let Some(args) = group_form(key, effect)? {
                    out.push((*db, args));
                }
            }
            Effect::TrimIds { db, key, ids, delref } => {
                let mut args = if *delref {
                    vec![b("XDELEX"), key.clone(), b("DELREF"), b("IDS"), number(ids.len() as u64)]
                } else {
                    vec![b("XDEL"), key.clone()]
                };
                args.extend(ids.iter().map(|id| id_arg(*id)));
                out.push((*db, args));
            }
            // Libraries: the commands that made them (FUNCTION RESTORE arrives as its loads).
            Effect::Library { code } => out.push((0, vec![b("FUNCTION"), b("LOAD"), b("REPLACE"), code.clone()])),
            Effect::LibraryDeleted { name } => out.push((0, vec![b("FUNCTION"), b("DELETE"), name.clone()])),
            Effect::LibrariesFlushed => out.push((0, vec![b("FUNCTION"), b("FLUSH"), b("SYNC")])),
        }
    }
    out.extend(cursor);
    Ok(out)
}

/// The Redis form of one group effect other than a delivery (`None`: it has none).
fn group_form(key: &Bytes, effect: &GroupEffect) -> Result<Option<Vec<Bytes>>, Untranslatable> {
    let k = key.clone();
    Ok(Some(match effect {
        GroupEffect::GroupCreated { group, last_id, entries_read } => {
            let mut args = vec![b("XGROUP"), b("CREATE"), k, group.clone(), id_arg(*last_id)];
            if let Some(n) = entries_read {
                args.extend([b("ENTRIESREAD"), number(*n)]);
            }
            args
        }
        GroupEffect::GroupDestroyed { group } => vec![b("XGROUP"), b("DESTROY"), k, group.clone()],
        GroupEffect::SetId { group, last_id, entries_read }
        | GroupEffect::LastIdRaised { group, last_id, entries_read } => {
            xgroup_setid(key, group, *last_id, *entries_read)
        }
        GroupEffect::ConsumerCreated { group, consumer, .. } => {
            vec![b("XGROUP"), b("CREATECONSUMER"), k, group.clone(), consumer.clone()]
        }
        GroupEffect::ConsumerSeen { .. } => return Ok(None),
        // An expiry's entries were handed back (XNACK forms) by the effects before it.
        GroupEffect::ConsumerDeleted { group, consumer } | GroupEffect::ConsumerExpired { group, consumer } => {
            vec![b("XGROUP"), b("DELCONSUMER"), k, group.clone(), consumer.clone()]
        }
        GroupEffect::Delivered { group, consumer, id, time_ms, .. } => {
            xclaim(key, group, consumer, *id, *time_ms, 1, None)
        }
        GroupEffect::Redelivered { group, consumer, id, time_ms, count } => {
            if consumer.is_empty() {
                return Err(Untranslatable("a history re-delivery logged without its owner"));
            }
            xclaim(key, group, consumer, *id, *time_ms, *count, None)
        }
        GroupEffect::Claimed { group, consumer, id, time_ms, count, .. } => {
            xclaim(key, group, consumer, *id, *time_ms, *count, None)
        }
        GroupEffect::Nacked { group, id, count } | GroupEffect::HandedBack { group, id, count, .. } => vec![
            b("XNACK"),
            k,
            group.clone(),
            b("FAIL"),
            b("IDS"),
            b("1"),
            id_arg(*id),
            b("RETRYCOUNT"),
            number(*count),
            b("FORCE"),
        ],
        GroupEffect::Acked { group, id } | GroupEffect::DeadLettered { group, id } => {
            vec![b("XACK"), k, group.clone(), id_arg(*id)]
        }
        GroupEffect::Touched { group, consumer, id, time_ms, count } => {
            xclaim(key, group, consumer, *id, *time_ms, *count, None)
        }
        // A policy is rill's own: a Redis replica has no place for it (spec §9).
        GroupEffect::PolicySet { .. } | GroupEffect::PolicyRestored { .. } => return Ok(None),
        // ORDERBY's deferral has no Redis form: a Redis replica's cursor stays before a
        // deferred entry until a later delivery's LASTID passes it, so a Redis replica promoted
        // meanwhile delivers it again rather than losing it.
        GroupEffect::Deferred { .. } | GroupEffect::DeferredDropped { .. } => return Ok(None),
    }))
}

/// `XCLAIM key group consumer 0 id TIME t RETRYCOUNT n FORCE JUSTID [LASTID l]`: `id` is
/// pending for `consumer`, delivered at `t`, `n` times.
fn xclaim(
    key: &Bytes,
    group: &Bytes,
    consumer: &Bytes,
    id: StreamId,
    time_ms: i64,
    count: u64,
    last_id: Option<StreamId>,
) -> Vec<Bytes> {
    let mut args = vec![
        b("XCLAIM"),
        key.clone(),
        group.clone(),
        consumer.clone(),
        b("0"),
        id_arg(id),
        b("TIME"),
        Bytes::from(time_ms.to_string()),
        b("RETRYCOUNT"),
        number(count),
        b("FORCE"),
        b("JUSTID"),
    ];
    if let Some(l) = last_id {
        args.extend([b("LASTID"), id_arg(l)]);
    }
    args
}

/// `XGROUP SETID key group id [ENTRIESREAD n]` (without ENTRIESREAD a Redis group's
/// entries-read becomes unknown, which is what `None` means here).
fn xgroup_setid(key: &Bytes, group: &Bytes, id: StreamId, entries_read: Option<u64>) -> Vec<Bytes> {
    let mut args = vec![b("XGROUP"), b("SETID"), key.clone(), group.clone(), id_arg(id)];
    if let Some(n) = entries_read {
        args.extend([b("ENTRIESREAD"), number(n)]);
    }
    args
}

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn number(n: u64) -> Bytes {
    Bytes::from(n.to_string())
}

fn id_arg(id: StreamId) -> Bytes {
    Bytes::from(id.to_string())
}

/// The byte stream a replica reads: keeps the database it last selected, so that `SELECT`
/// is sent only when it changes.
#[derive(Debug, Default)]
pub struct Stream {
    /// The database the replica has selected (`None`: a new stream, nothing selected yet).
    selected: Option<usize>,
}

impl Stream {
    /// A stream to a replica that has selected nothing yet (Redis starts every new
    /// replication stream with a SELECT).
    pub fn new() -> Stream {
        Stream::default()
    }

    /// The database selected last, if any (Redis' `repl-stream-db`).
    pub fn selected(&self) -> Option<usize> {
        self.selected
    }

    /// Append the RESP of one unit's commands to `out`: a `SELECT` where the database
    /// changes, `MULTI` / `EXEC` around more than one command if `transaction`. Returns how
    /// many commands it wrote, those included.
    pub fn encode(&mut self, commands: &[Command], transaction: bool, out: &mut Vec<u8>) -> usize {
        if commands.is_empty() {
            return 0;
        }
        let wrap = transaction && commands.len() > 1;
        let mut written = commands.len() + 2 * usize::from(wrap);
        if wrap {
            // Redis sends MULTI with no SELECT of its own: the first command's SELECT, if
            // any, goes inside the transaction.
            encode_command(out, &[b("MULTI")]);
        }
        for (db, args) in commands {
            written += self.select(*db, out);
            encode_command(out, args);
        }
        if wrap {
            encode_command(out, &[b("EXEC")]);
        }
        written
    }

    /// [`Stream::encode`] for commands read in place from a unit's effects, each of which goes
    /// as it was recorded ([`as_recorded`]).
    pub fn encode_in_place(
        &mut self,
        commands: rill_engine::effect::CommandsInPlace<'_>,
        transaction: bool,
        out: &mut Vec<u8>,
    ) -> usize {
        let count = commands.remaining();
        if count == 0 {
            return 0;
        }
        let wrap = transaction && count > 1;
        let mut written = count + 2 * usize::from(wrap);
        if wrap {
            encode_command(out, &[b("MULTI")]);
        }
        for (db, args) in commands {
            written += self.select(db, out);
            rill_resp::write_request_iter(out, args);
        }
        if wrap {
            encode_command(out, &[b("EXEC")]);
        }
        written
    }

    /// `SELECT db` if the replica is elsewhere; how many commands that wrote (0 or 1).
    fn select(&mut self, db: usize, out: &mut Vec<u8>) -> usize {
        if self.selected == Some(db) {
            return 0;
        }
        encode_command(out, &[b("SELECT"), Bytes::from(db.to_string())]);
        self.selected = Some(db);
        1
    }
}

/// A command as a RESP array of bulk strings, as a client (and a primary) sends it.
pub fn encode_command(out: &mut Vec<u8>, args: &[Bytes]) {
    rill_resp::write_request_vec(out, args);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn line(args: &[Bytes]) -> String {
        args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")
    }

    fn group(db: usize, key: &str, effect: GroupEffect) -> Effect {
        Effect::Group { db, key: bulk(key), effect }
    }

    fn id(ms: u64) -> StreamId {
        StreamId { ms, seq: 0 }
    }

    #[test]
    fn every_command_not_named_rewritten_goes_as_it_was_recorded() {
        // The fast path writes a unit's forms straight from its record for the commands
        // `as_recorded` names; every command of the table `rewritten` would change must be
        // named there, whatever its arguments.
        let shapes: [&[&str]; 6] = [
            &[],
            &["k"],
            &["k", "10"],
            &["k", "10", "v"],
            &["k", "v", "PX", "5", "EX", "7", "GET", "PERSIST"],
            &["k", "k2", "LEFT", "RIGHT", "0"],
        ];
        for spec in crate::cmd::table().all() {
            let name = spec.name.as_bytes();
            if !as_recorded(name) {
                continue;
            }
            for shape in shapes {
                let args: Vec<Bytes> =
                    std::iter::once(Bytes::copy_from_slice(name)).chain(shape.iter().map(|a| bulk(a))).collect();
                assert_eq!(rewritten(&args, 1_000, true), None, "{}", line(&args));
            }
        }
        assert!(as_recorded(b"XADD") && as_recorded(b"xack") && !as_recorded(b"Set") && !as_recorded(b"RILL.STREAM"));
    }

    proptest::proptest! {
        /// The forms written straight from a unit's buffer are the bytes the decoded path
        /// writes: SELECTs where the database changes, MULTI/EXEC around a transaction of more
        /// than one command, arguments of any bytes.
        #[test]
        fn forms_written_in_place_are_the_decoded_forms(
            units in proptest::collection::vec(
                (
                    proptest::collection::vec(
                        (
                            0usize..3,
                            proptest::sample::select(vec!["XADD", "xack", "HSET", "DEL", "LPUSH", "XGROUP"]),
                            proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..12), 0..5),
                        ),
                        1..4,
                    ),
                    proptest::bool::ANY,
                ),
                1..6,
            )
        ) {
            let (mut decoded, mut in_place) = (Stream::new(), Stream::new());
            let (mut want, mut got) = (Vec::new(), Vec::new());
            for (commands, transaction) in units {
                let mut buf = rill_engine::effect::EffectBuf::default();
                for (db, name, args) in commands {
                    let args: Vec<Bytes> =
                        std::iter::once(bulk(name)).chain(args.into_iter().map(Bytes::from)).collect();
                    buf.push(&Effect::command(db, args));
                }
                let effects = buf.decode().unwrap();
                let n = decoded.encode(&commands_with(&effects, 0, false).unwrap(), transaction, &mut want);
                let read = buf.commands_in_place().unwrap();
                proptest::prop_assert!(read.clone().all(|(_, mut a)| a.next().is_some_and(as_recorded)));
                proptest::prop_assert_eq!(in_place.encode_in_place(read, transaction, &mut got), n);
                proptest::prop_assert_eq!(&got, &want);
            }
        }
    }

    #[test]
    fn a_consumer_made_by_a_read_with_no_claim_and_getset_travel_as_redis_sends_them() {
        let effects = vec![
            group(0, "s", GroupEffect::ConsumerCreated { group: bulk("g"), consumer: bulk("c"), time_ms: 77 }),
            Effect::command(0, ["GETSET", "k", "v"].map(bulk).to_vec()),
            Effect::command(0, ["SET", "k", "v", "GET", "PX", "5", "get"].map(bulk).to_vec()),
            Effect::command(0, ["SET", "k", "get"].map(bulk).to_vec()),
        ];
        let got: Vec<String> = commands(&effects, 0).unwrap().iter().map(|(_, a)| line(a)).collect();
        assert_eq!(got, ["XGROUP CREATECONSUMER s g c", "SET k v", "SET k v PXAT 5", "SET k get"]);
    }

    #[test]
    fn expiry_times_travel_absolute_and_one_already_past_as_a_del() {
        let cmd = |line: &str| Effect::command(0, line.split(' ').map(bulk).collect());
        let effects: Vec<Effect> = [
            "EXPIRE k 10 GT",
            "PEXPIRE k 1500",
            "EXPIREAT k 2",
            "PEXPIREAT k 1999",
            "EXPIRE k -1",
            "SETEX k 3 v",
            "PSETEX k 30 v",
            "SET k v EX 1 NX GET",
            "SET k v pxat 2500",
            "SET k v EXAT 1",
            "SET k v KEEPTTL",
            "GETEX k PX 100",
            "GETEX k PERSIST",
            "GETEX k EXAT 1",
            "GETDEL k",
            "RESTORE k 50 payload",
            "BRPOPLPUSH a b 0",
            "BLMOVE a b LEFT RIGHT 1.5",
            "BLPOP a 0",
            "BRPOP a 0",
            "BLPOP a b 0",
            "SET k v IFEQ ex PX 100",
            "SET k ex IFNE px",
            "DELEX k IFEQ v",
            "MSETEX 2 a 1 px 2 EX 3 NX",
            "MSETEX 1 a 1 EXAT 9 XX",
            "RESTORE k 0 payload REPLACE",
            "RESTORE k 9000 payload absttl",
            "RESTORE k 1500 payload REPLACE ABSTTL",
            "SET k v PXAT 9000 NX GET",
            "HGETDEL h FIELDS 3 a b c",
        ]
        .iter()
        .map(|l| cmd(l))
        .collect();
        let got: Vec<String> = commands(&effects, 2000).unwrap().iter().map(|(_, a)| line(a)).collect();
        assert_eq!(
            got,
            [
                "PEXPIREAT k 12000 GT",
                "PEXPIREAT k 3500",
                "DEL k",
                "DEL k",
                "DEL k",
                "SET k v PXAT 5000",
                "SET k v PXAT 2030",
                "SET k v PXAT 3000",
                "SET k v pxat 2500",
                "DEL k",
                "SET k v KEEPTTL",
                "PEXPIREAT k 2100",
                "PERSIST k",
                "DEL k",
                "DEL k",
                "RESTORE k 2050 payload ABSTTL",
                "RPOPLPUSH a b",
                "LMOVE a b LEFT RIGHT",
                "LPOP a",
                "RPOP a",
                "BLPOP a b 0",
                "SET k v PXAT 2100",
                "SET k ex IFNE px",
                "DEL k",
                "MSETEX 2 a 1 px 2 PXAT 5000 NX",
                "MSETEX 1 a 1 EXAT 9 XX",
                "RESTORE k 0 payload REPLACE",
                "RESTORE k 9000 payload absttl",
                "DEL k",
                "SET k v PXAT 9000 NX GET",
                "HDEL h a b c",
            ]
        );
    }

    #[test]
    fn a_read_of_new_entries_is_claims_then_one_cursor_move() {
        let delivered = |n: u64, noack: bool| GroupEffect::Delivered {
            group: bulk("g"),
            consumer: bulk("c"),
            id: id(n),
            time_ms: 77,
            entries_read: Some(n),
            noack,
        };
        let effects = vec![
            group(0, "s", GroupEffect::ConsumerCreated { group: bulk("g"), consumer: bulk("c"), time_ms: 77 }),
            group(0, "s", GroupEffect::ConsumerSeen { group: bulk("g"), consumer: bulk("c"), time_ms: 77 }),
            group(0, "s", delivered(5, false)),
            group(0, "s", delivered(6, false)),
            group(0, "t", delivered(9, true)),
        ];
        let got: Vec<String> = commands(&effects, 0).unwrap().iter().map(|(_, a)| line(a)).collect();
        assert_eq!(
            got,
            [
                // No CREATECONSUMER: the XCLAIM makes the consumer, as Redis propagates it.
                "XCLAIM s g c 0 5-0 TIME 77 RETRYCOUNT 1 FORCE JUSTID LASTID 5-0",
                "XCLAIM s g c 0 6-0 TIME 77 RETRYCOUNT 1 FORCE JUSTID LASTID 6-0",
                "XGROUP SETID s g 6-0 ENTRIESREAD 6",
                "XGROUP SETID t g 9-0 ENTRIESREAD 9",
            ]
        );
    }

    #[test]
    fn every_other_group_effect_has_its_form() {
        let g = || bulk("g");
        let cases: Vec<(GroupEffect, &str)> = vec![
            (GroupEffect::GroupCreated { group: g(), last_id: id(3), entries_read: None }, "XGROUP CREATE s g 3-0"),
            (GroupEffect::GroupDestroyed { group: g() }, "XGROUP DESTROY s g"),
            (
                GroupEffect::SetId { group: g(), last_id: id(4), entries_read: Some(2) },
                "XGROUP SETID s g 4-0 ENTRIESREAD 2",
            ),
            (
                GroupEffect::LastIdRaised { group: g(), last_id: id(8), entries_read: Some(3) },
                "XGROUP SETID s g 8-0 ENTRIESREAD 3",
            ),
            (GroupEffect::ConsumerDeleted { group: g(), consumer: bulk("c") }, "XGROUP DELCONSUMER s g c"),
            (
                GroupEffect::Redelivered { group: g(), consumer: bulk("c"), id: id(5), time_ms: 9, count: 4 },
                "XCLAIM s g c 0 5-0 TIME 9 RETRYCOUNT 4 FORCE JUSTID",
            ),
            (
                GroupEffect::Claimed { group: g(), consumer: bulk("d"), id: id(5), time_ms: 9, count: 2, active_ms: 9 },
                "XCLAIM s g d 0 5-0 TIME 9 RETRYCOUNT 2 FORCE JUSTID",
            ),
            (GroupEffect::Nacked { group: g(), id: id(5), count: 2 }, "XNACK s g FAIL IDS 1 5-0 RETRYCOUNT 2 FORCE"),
            (GroupEffect::Acked { group: g(), id: id(5) }, "XACK s g 5-0"),
            // A policy's actions in their closest Redis forms (policies spec §9).
            (
                GroupEffect::HandedBack {
                    group: g(),
                    id: id(5),
                    count: 3,
                    ready_at_ms: 70,
                    why: rill_engine::types::stream::policy::Release::Deadline,
                },
                "XNACK s g FAIL IDS 1 5-0 RETRYCOUNT 3 FORCE",
            ),
            (GroupEffect::DeadLettered { group: g(), id: id(5) }, "XACK s g 5-0"),
            (
                GroupEffect::Touched { group: g(), consumer: bulk("c"), id: id(5), time_ms: 11, count: 2 },
                "XCLAIM s g c 0 5-0 TIME 11 RETRYCOUNT 2 FORCE JUSTID",
            ),
        ];
        for (effect, want) in cases {
            let got = commands(&[group(0, "s", effect.clone())], 0).unwrap();
            assert_eq!(got.len(), 1, "{effect:?}");
            assert_eq!(line(&got[0].1), want);
        }
        let seen = GroupEffect::ConsumerSeen { group: g(), consumer: bulk("c"), time_ms: 1 };
        assert_eq!(commands(&[group(0, "s", seen)], 0).unwrap(), vec![]);
        let policy = GroupEffect::PolicySet { group: g(), settings: Default::default(), time_ms: 5 };
        assert_eq!(commands(&[group(0, "s", policy)], 0).unwrap(), vec![], "a policy is rill's own");
        let old = GroupEffect::Redelivered { group: g(), consumer: Bytes::new(), id: id(5), time_ms: 9, count: 4 };
        assert!(commands(&[group(0, "s", old)], 0).is_err(), "a record without the owner has no form");
    }

    #[test]
    fn trims_of_chosen_ids_are_deletions() {
        let trim =
            |delref| Effect::TrimIds { db: 0, key: bulk("s"), ids: vec![id(1), StreamId { ms: 4, seq: 2 }], delref };
        assert_eq!(line(&commands(&[trim(true)], 0).unwrap()[0].1), "XDELEX s DELREF IDS 2 1-0 4-2");
        assert_eq!(line(&commands(&[trim(false)], 0).unwrap()[0].1), "XDEL s 1-0 4-2");
    }

    #[test]
    fn select_only_on_change_and_multi_around_more_than_one() {
        let set = |db, k: &str| (db, vec![bulk("SET"), bulk(k), bulk("v")]);
        let mut s = Stream::new();
        let mut out = Vec::new();
        assert_eq!(s.encode(&[set(0, "a")], true, &mut out), 2);
        assert_eq!(s.encode(&[set(0, "b")], true, &mut out), 1);
        assert_eq!(s.encode(&[set(2, "c"), set(2, "d"), set(0, "e")], true, &mut out), 7);
        assert_eq!(s.encode(&[], true, &mut out), 0);
        // Apart (SCAN's deletions): no MULTI / EXEC, a SELECT still where needed.
        assert_eq!(s.encode(&[set(0, "f"), set(1, "g")], false, &mut out), 3);
        let text = String::from_utf8(out).unwrap();
        let words: Vec<&str> =
            text.split("\r\n").filter(|w| !w.is_empty() && !w.starts_with('*') && !w.starts_with('$')).collect();
        assert_eq!(
            words.join(" "),
            "SELECT 0 SET a v SET b v MULTI SELECT 2 SET c v SET d v SELECT 0 SET e v EXEC SET f v SELECT 1 SET g v"
        );
        assert!(text.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n"));
    }

    #[test]
    fn the_servers_own_deletions_unlink_with_lazyfree_lazy_server_del() {
        let effects: Vec<Effect> =
            ["SET k v PXAT 1", "EXPIRE k 0", "GETEX k PXAT 5", "RESTORE k 5 p ABSTTL", "DEL k", "GETDEL k"]
                .iter()
                .map(|l| Effect::command(0, l.split(' ').map(bulk).collect()))
                .collect();
        let lines = |unlink| -> Vec<String> {
            commands_with(&effects, 2000, unlink).unwrap().iter().map(|(_, a)| line(a)).collect()
        };
        assert_eq!(lines(true), ["UNLINK k", "UNLINK k", "UNLINK k", "UNLINK k", "DEL k", "DEL k"]);
        assert_eq!(lines(false), ["DEL k"; 6]);
    }
}
