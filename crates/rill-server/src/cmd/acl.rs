#![allow(clippy::indexing_slicing)] // dispatch checks arity before any handler runs
//! The ACL command (`ACL SETUSER|GETUSER|DELUSER|USERS|LIST|WHOAMI|CAT|LOG|GENPASS|DRYRUN|
//! SAVE|LOAD|HELP`) over the registry of `src/acl`, with Redis' replies and error texts; and
//! the ACL log's entries for denied commands and failed authentication.

use super::{ok, reply, Call, CmdResult};
use crate::acl::{self, Context, Denied, Origin, Reason, User, Users};
use crate::client::Action;
use crate::state::{Shared, State};
use bytes::Bytes;
use rill_engine::command::{CommandSpec, Lookup};
use rill_engine::util::parse_i64;
use rill_engine::CmdError;
use rill_resp::Reply;
use std::sync::Arc;

/// ACL HELP lines (our words).
pub const ACL_HELP: &[&str] = &[
    "CAT [<category>]",
    "    List the command categories, or the commands of one category.",
    "DELUSER <username> [<username> ...]",
    "    Remove users and close their connections.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Say whether a user could run a command, without running it.",
    "GETUSER <username>",
    "    Describe a user's flags, passwords and selectors.",
    "GENPASS [<bits>]",
    "    Return a random password of 256 bits (or <bits>) as hex.",
    "LIST",
    "    Describe every user as a config file line.",
    "LOAD",
    "    Replace the users with the ACL file's.",
    "LOG [<count> | RESET]",
    "    Show the newest denials and failed logins, or clear them.",
    "SAVE",
    "    Write the users to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create a user or change its rules.",
    "USERS",
    "    List the user names.",
    "WHOAMI",
    "    Return the user this connection runs as.",
];

fn bulk(b: impl Into<Bytes>) -> Reply {
    Reply::Bulk(b.into())
}

fn text(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

/// Log a denied command, key or channel: the object is the command's full name, or the
/// argument refused; the client info is the connection's CLIENT LIST line.
#[allow(clippy::too_many_arguments)] // the entry's parts
pub fn log_denied(
    shared: &Shared,
    st: &State,
    conn_id: u64,
    username: &Bytes,
    denied: Denied,
    spec: &CommandSpec,
    args: &[Bytes],
    origin: Origin,
    now_ms: i64,
) {
    log_denied_in(&shared.acl, st, conn_id, username, denied, spec, args, origin, now_ms);
}

/// [`log_denied`] with the registry itself (a parked command's re-run has no `Shared`).
#[allow(clippy::too_many_arguments)] // the entry's parts
pub fn log_denied_in(
    registry: &acl::Registry,
    st: &State,
    conn_id: u64,
    username: &Bytes,
    denied: Denied,
    spec: &CommandSpec,
    args: &[Bytes],
    origin: Origin,
    now_ms: i64,
) {
    let (reason, object) = denied.logged(spec, args);
    // The client's line names the command refused, as Redis' names the one being processed.
    let info = client_info(st, conn_id, now_ms);
    let info = match (info.find(" cmd="), info.find(" user=")) {
        (Some(a), Some(b)) if a < b => {
            format!("{} cmd={}{}", info.get(..a).unwrap_or_default(), origin.running, info.get(b..).unwrap_or_default())
        }
        _ => info,
    };
    registry.log.lock().unwrap_or_else(|p| p.into_inner()).add(
        reason,
        origin.context,
        object,
        username.clone(),
        info,
        now_ms,
    );
}

/// Log a failed AUTH / HELLO AUTH: the object is the command's name as sent.
pub fn log_auth_failure(shared: &Shared, st: &State, conn_id: u64, command: &Bytes, username: &[u8], now_ms: i64) {
    let info = client_info(st, conn_id, now_ms);
    shared.acl.log.lock().unwrap_or_else(|p| p.into_inner()).add(
        Reason::Auth,
        Context::Toplevel,
        command.clone(),
        Bytes::copy_from_slice(username),
        info,
        now_ms,
    );
}

fn client_info(st: &State, conn_id: u64, now_ms: i64) -> String {
    st.clients
        .get(&conn_id)
        .map(|ci| super::connection::client_line(ci, now_ms, st.engine.watched_by(conn_id)))
        .unwrap_or_default()
}

/// ACL SETUSER username [rule ...]
pub fn setuser(c: &mut Call) -> CmdResult {
    c.conn.redacted.extend(2..c.args.len() as u32);
    let name = c.args[2].clone();
    if acl::has_spaces(&name) {
        return Err(CmdError::full("ERR Usernames can't contain spaces or null characters"));
    }
    let all = c.shared.acl.all_channels_default();
    let cmds = &c.shared.acl.commands;
    let rules = &c.args[3..];
    let result = c.shared.acl.update(|users| {
        let mut u = users.by_name.get(&name).map(|u| (**u).clone()).unwrap_or_else(|| User::new(&name, all));
        u.set_all(cmds, rules, all)?;
        users.by_name.insert(name.clone(), Arc::new(u));
        Ok::<(), String>(())
    });
    result.map_err(|e| CmdError::owned(format!("ERR {e}")))?;
    if kill_revoked_subscribers(c) {
        return Ok(Action::Close(Some(Reply::ok())));
    }
    ok()
}

/// Close every subscriber whose user may no longer use one of its channels or patterns (as
/// Redis does when a user's channel rules shrink); whether the caller is one of them.
fn kill_revoked_subscribers(c: &mut Call) -> bool {
    use crate::pubsub::Kind;
    let users = c.shared.acl.snapshot();
    let subscribers: Vec<(u64, Bytes)> =
        c.st.clients
            .values()
            .filter(|ci| !ci.killed && ci.subs.total() > 0)
            .map(|ci| (ci.id, ci.user.clone()))
            .collect();
    let mut me = false;
    for (id, name) in subscribers {
        let Some(user) = users.by_name.get(&name) else { continue };
        if user.selectors.iter().any(|s| s.all_channels) {
            continue;
        }
        let revoked = [Kind::Channel, Kind::Shard, Kind::Pattern].into_iter().any(|kind| {
            c.st.pubsub.subscriptions(id, kind).iter().any(|ch| !user.channel_allowed(ch, kind == Kind::Pattern))
        });
        if revoked {
            if id == c.conn.id {
                me = true;
            } else {
                super::connection::close_client(c.st, id);
            }
        }
    }
    me
}

/// ACL GETUSER username
pub fn getuser(c: &mut Call) -> CmdResult {
    c.conn.redacted.push(2);
    let Some(u) = c.shared.acl.user(&c.args[2]) else { return reply(Reply::Null) };
    let selector = |s: &acl::Selector| {
        vec![
            (text("commands"), text(&s.describe_commands())),
            (text("keys"), bulk(s.describe_keys())),
            (text("channels"), bulk(s.describe_channels())),
        ]
    };
    let mut fields = vec![
        (text("flags"), Reply::Set(u.flag_names().into_iter().map(text).collect())),
        (text("passwords"), Reply::Array(u.passwords.iter().map(|p| text(p)).collect())),
    ];
    if let Some(root) = u.selectors.first() {
        fields.extend(selector(root));
    }
    fields
        .push((text("selectors"), Reply::Array(u.selectors.iter().skip(1).map(|s| Reply::Map(selector(s))).collect())));
    reply(Reply::Map(fields))
}

/// ACL DELUSER username [username ...]
pub fn deluser(c: &mut Call) -> CmdResult {
    c.conn.redacted.extend(2..c.args.len() as u32);
    if c.args[2..].iter().any(|n| &n[..] == b"default") {
        return Err(CmdError::full("ERR The 'default' user cannot be removed"));
    }
    let names: Vec<Bytes> = c.args[2..].to_vec();
    let deleted = c.shared.acl.update(|users| names.iter().filter(|n| users.by_name.remove(*n).is_some()).count());
    let me = close_clients_without_user(c);
    if me {
        return Ok(Action::Close(Some(Reply::Integer(deleted as i64))));
    }
    reply(Reply::Integer(deleted as i64))
}

/// Close every connection whose user no longer exists; whether the caller is one of them.
fn close_clients_without_user(c: &mut Call) -> bool {
    let users = c.shared.acl.snapshot();
    let gone: Vec<u64> =
        c.st.clients
            .values()
            .filter(|ci| !ci.killed && !users.by_name.contains_key(&ci.user))
            .map(|ci| ci.id)
            .collect();
    let mut me = false;
    for id in gone {
        if id == c.conn.id {
            me = true;
        } else {
            super::connection::close_client(c.st, id);
        }
    }
    me
}

/// ACL USERS / ACL LIST
pub fn users(c: &mut Call) -> CmdResult {
    if c.spec.name == "acl|users" {
        let names = c.shared.acl.snapshot().by_name.keys().map(|n| bulk(n.clone())).collect();
        return reply(Reply::Array(names));
    }
    reply(Reply::Array(c.shared.acl.lines().into_iter().map(bulk).collect()))
}

/// ACL WHOAMI
pub fn whoami(c: &mut Call) -> CmdResult {
    match &c.conn.user {
        Some(u) => reply(bulk(u.name.clone())),
        None => reply(Reply::Null),
    }
}

/// ACL CAT [category]
pub fn cat(c: &mut Call) -> CmdResult {
    if c.args.len() > 3 {
        return Err(super::subcommand_syntax(c));
    }
    let Some(name) = c.args.get(2) else {
        return reply(Reply::Array(acl::CATEGORIES.iter().map(|n| text(n)).collect()));
    };
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    if !acl::CATEGORIES.contains(&lower.as_str()) {
        let shown = String::from_utf8_lossy(&name[..name.len().min(128)]).into_owned();
        return Err(CmdError::owned(format!("ERR Unknown category '{shown}'")));
    }
    let tag = format!("@{lower}");
    let names =
        c.shared.acl.commands.all.iter().filter(|s| s.acl.contains(&tag.as_str())).map(|s| text(s.name)).collect();
    reply(Reply::Array(names))
}

/// ACL GENPASS [bits]
pub fn genpass(c: &mut Call) -> CmdResult {
    if c.args.len() > 3 {
        return Err(super::subcommand_syntax(c));
    }
    let bits = match c.args.get(2) {
        None => 256,
        Some(a) => parse_i64(a).ok_or(CmdError::full("ERR value is not an integer or out of range"))?,
    };
    if bits <= 0 || bits > 4096 {
        return Err(CmdError::full(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
        ));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut hex = crate::run::random_hex(chars.div_ceil(2));
    hex.truncate(chars);
    reply(text(&hex))
}

/// ACL LOG [count | RESET]
pub fn log(c: &mut Call) -> CmdResult {
    if c.args.len() > 3 {
        return Err(super::subcommand_syntax(c));
    }
    let mut count = 10usize;
    if let Some(a) = c.args.get(2) {
        if a.eq_ignore_ascii_case(b"reset") {
            c.shared.acl.log.lock().unwrap_or_else(|p| p.into_inner()).reset();
            return ok();
        }
        let n = parse_i64(a).ok_or(CmdError::full("ERR value is not an integer or out of range"))?;
        count = usize::try_from(n.max(0)).unwrap_or(0);
    }
    let log = c.shared.acl.log.lock().unwrap_or_else(|p| p.into_inner());
    reply(log.reply(count, c.now_ms))
}

/// ACL DRYRUN username command [arg ...]
pub fn dryrun(c: &mut Call) -> CmdResult {
    let Some(user) = c.shared.acl.user(&c.args[2]) else {
        return Err(CmdError::owned(format!("ERR User '{}' not found", String::from_utf8_lossy(&c.args[2]))));
    };
    let args = &c.args[3..];
    let spec = match c.shared.table.resolve(args) {
        Lookup::Found(s) => s,
        _ => return Err(CmdError::owned(format!("ERR Command '{}' not found", String::from_utf8_lossy(&args[0])))),
    };
    if !spec.arity_ok(args.len()) {
        return Err(CmdError::owned(format!("ERR wrong number of arguments for '{}' command", spec.name)));
    }
    match user.check(&c.shared.acl.commands, spec, args) {
        Ok(()) => ok(),
        Err(d) => reply(text(&acl::denied_text(d, &user, spec, args, true))),
    }
}

const NO_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL SAVE
pub fn save(c: &mut Call) -> CmdResult {
    let path = c.st.config.get("aclfile").to_string();
    if path.is_empty() {
        return Err(CmdError::full(NO_FILE));
    }
    let mut text = Vec::new();
    for line in c.shared.acl.lines() {
        text.extend_from_slice(&line);
        text.push(b'\n');
    }
    if let Err(e) = crate::config::replace_atomically(std::path::Path::new(&path), &text) {
        tracing::warn!("Writing ACL file for ACL SAVE: {e}");
        return Err(CmdError::full(
            "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
        ));
    }
    ok()
}

/// ACL LOAD
pub fn load(c: &mut Call) -> CmdResult {
    let path = c.st.config.get("aclfile").to_string();
    if path.is_empty() {
        return Err(CmdError::full(NO_FILE));
    }
    let users = load_file(&c.shared.acl, &path).map_err(|e| CmdError::owned(format!("ERR {e}")))?;
    c.shared.acl.replace(users);
    let me = close_clients_without_user(c);
    if kill_revoked_subscribers(c) || me {
        return Ok(Action::Close(Some(Reply::ok())));
    }
    ok()
}

/// The users of an ACL file (ACL LOAD, start-up), or Redis' error text.
pub fn load_file(registry: &acl::Registry, path: &str) -> Result<Users, String> {
    let raw = std::fs::read(path).map_err(|e| format!("Error loading ACLs, opening file '{path}': {e}"))?;
    let mut lines = Vec::new();
    for (i, line) in raw.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() || line.first() == Some(&b'#') {
            continue;
        }
        let words: Vec<Bytes> = line
            .split(|&b| b == b' ')
            .filter(|w| !w.is_empty())
            .map(|w| Bytes::copy_from_slice(w.trim_ascii()))
            .collect();
        lines.push((i + 1, words));
    }
    registry.users_from_lines(path, &lines).map_err(|e| {
        format!("{e}WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
    })
}
