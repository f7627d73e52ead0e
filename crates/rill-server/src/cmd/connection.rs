#![allow(clippy::indexing_slicing)] // dispatch checks arity before any handler runs
//! Connection commands: PING, HELLO, AUTH, SELECT, RESET and the CLIENT family
//! (docs/spec/connection.md §3.1–3.4). Each is O(1) except CLIENT LIST/KILL (O(clients)).

use super::{ok, reply, syntax, Call, CmdResult};
use crate::blocking;
use crate::client::{Action, ReplyMode};
use crate::state::{ClientInfo, ClientType};
use bytes::Bytes;
use rill_engine::util::parse_i64;
use rill_engine::CmdError;
use rill_resp::{Protocol, Reply};

/// The version rill reports as `redis_version` and in HELLO: the Redis feature level it
/// targets, so clients' feature detection treats it like that Redis.
pub const REDIS_VERSION: &str = "8.10.1";

/// CLIENT HELP lines.
pub const CLIENT_HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    In OPTIN (OPTOUT) tracking mode, track (do not track) the keys the next command reads.",
    "GETREDIR",
    "    Return the ID invalidation messages are redirected to, 0 for none, -1 when not tracking.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "GETNAME",
    "    Return the name of the current connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are: ID, ADDR, LADDR, SKIPME (yes|no).",
    "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <id> [<id> ...]]",
    "    Return information about client connections.",
    "NO-EVICT (ON|OFF)",
    "    Protect the current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Do not touch last access time of keys read by this client.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Turn client-side caching's invalidation messages on or off for this connection.",
    "TRACKINGINFO",
    "    Describe this connection's tracking: flags, redirection and prefixes.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Hold the commands of other clients (ALL) or only the ones that write (WRITE) for <timeout> milliseconds.",
    "UNPAUSE",
    "    End a CLIENT PAUSE now.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
];

/// PING [message]
pub fn ping(c: &mut Call) -> CmdResult {
    if c.args.len() > 2 {
        return Err(CmdError::arity("ping"));
    }
    // A RESP2 client in subscribe mode reads every reply as a message: Redis answers it with
    // an array shaped like one, `pong` and the message (empty without one).
    if c.conn.subscribed && c.conn.proto == Protocol::Resp2 {
        let message = c.args.get(1).cloned().unwrap_or_default();
        return reply(Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"pong")), Reply::Bulk(message)]));
    }
    match c.args.get(1) {
        Some(m) => reply(Reply::Bulk(m.clone())),
        None => reply(Reply::simple("PONG")),
    }
}

/// Whether `given` equals `secret`, in a time that depends on neither's content: every byte
/// of `given` is compared (against `secret` repeated), with no exit at the first difference,
/// and a length difference only sets the result. The loop's length is the attacker's own
/// input length. Redis compares SHA-256 digests for the same purpose.
pub fn password_matches(secret: &[u8], given: &[u8]) -> bool {
    if secret.is_empty() {
        return given.is_empty();
    }
    let mut diff = u8::from(secret.len() != given.len());
    for (s, g) in secret.iter().cycle().zip(given) {
        diff |= s ^ g;
    }
    // Keep the optimiser from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// Failed authentications logged per second at most; the rest are counted in INFO only.
static AUTH_FAILURE_LOG: std::sync::Mutex<crate::ratelimit::LogLimiter> =
    std::sync::Mutex::new(crate::ratelimit::LogLimiter::new(3));

/// Record a failed authentication as Redis does: an ACL LOG entry (which counts
/// `acl_access_denied_auth`), and a log line (rate-limited). The password is never logged.
fn auth_failed(c: &mut Call, username: &[u8]) {
    super::acl::log_auth_failure(c.shared, c.st, c.conn.id, &c.args[0], username, c.now_ms);
    let allowed = AUTH_FAILURE_LOG.lock().unwrap_or_else(|p| p.into_inner()).allow(std::time::Instant::now());
    if let Some(suppressed) = allowed {
        let addr = c.st.clients.get(&c.conn.id).map(|ci| ci.addr.as_str()).unwrap_or("?");
        let user = String::from_utf8_lossy(username);
        let more = if suppressed > 0 { format!(" ({suppressed} more since the last report)") } else { String::new() };
        tracing::warn!("Failed authentication for user '{user}' from {addr} (id={}){more}", c.conn.id);
    }
}

/// Check credentials against the ACL users and, when they hold, run the connection as that
/// user. `username` None: the one-argument AUTH form (the default user).
fn authenticate(c: &mut Call, username: Option<&[u8]>, password: &[u8]) -> Result<(), CmdError> {
    if username.is_none() && c.shared.acl.default_user().nopass {
        return Err(CmdError::full("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
    }
    let name = username.unwrap_or(b"default");
    let generation = c.shared.acl.generation();
    match c.shared.acl.user(name) {
        Some(user) if user.password_ok(password) => {
            if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
                ci.user = user.name.clone();
            }
            c.conn.user = Some(user);
            c.conn.acl_gen = generation;
            c.conn.authenticated = true;
            Ok(())
        }
        _ => {
            auth_failed(c, name);
            Err(CmdError::full("WRONGPASS invalid username-password pair or user is disabled."))
        }
    }
}

/// AUTH [username] password
pub fn auth(c: &mut Call) -> CmdResult {
    // The user name and password never reach SLOWLOG or MONITOR.
    if c.args.len() <= 3 {
        c.conn.redacted.extend(1..c.args.len() as u32);
    }
    match c.args.len() {
        2 => authenticate(c, None, &c.args[1].clone())?,
        3 => {
            let (u, p) = (c.args[1].clone(), c.args[2].clone());
            authenticate(c, Some(&u), &p)?
        }
        _ => return Err(syntax()),
    }
    ok()
}

fn valid_name(b: &[u8]) -> bool {
    b.iter().all(|&ch| (b'!'..=b'~').contains(&ch))
}

const BAD_NAME: CmdError = CmdError::full("ERR Client names cannot contain spaces, newlines or special characters.");

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
pub fn hello(c: &mut Call) -> CmdResult {
    let mut proto = None;
    let mut i = 1;
    if let Some(v) = c.args.get(1) {
        let n = parse_i64(v)
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or(CmdError::full("ERR Protocol version is not an integer or out of range"))?;
        if n != 2 && n != 3 {
            return Err(CmdError::full("NOPROTO unsupported protocol version"));
        }
        proto = Some(if n == 3 { Protocol::Resp3 } else { Protocol::Resp2 });
        i = 2;
    }
    let mut creds = None;
    let mut name = None;
    while i < c.args.len() {
        let opt = &c.args[i];
        let more = c.args.len() - 1 - i;
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            c.conn.redacted.extend([i as u32 + 1, i as u32 + 2]);
            creds = Some((c.args[i + 1].clone(), c.args[i + 2].clone()));
            i += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            let n = c.args[i + 1].clone();
            if !valid_name(&n) {
                return Err(BAD_NAME);
            }
            name = Some(n);
            i += 2;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    if let Some((u, p)) = creds {
        authenticate(c, Some(&u), &p)?;
    }
    if !c.conn.authenticated {
        return Err(CmdError::full("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(n) = name {
        if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
            ci.name = n;
        }
    }
    if let Some(p) = proto {
        c.conn.proto = p;
        c.st.pubsub.set_resp3(c.conn.id, p == Protocol::Resp3);
        if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
            ci.resp = if p == Protocol::Resp3 { 3 } else { 2 };
        }
    }
    let b = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    reply(Reply::Map(vec![
        (b("server"), b("redis")),
        (b("version"), b(REDIS_VERSION)),
        (b("proto"), Reply::Integer(if c.conn.proto == Protocol::Resp3 { 3 } else { 2 })),
        (b("id"), Reply::Integer(c.conn.id as i64)),
        (b("mode"), b("standalone")),
        (b("role"), b("master")),
        (b("modules"), Reply::Array(vec![])),
    ]))
}

/// SELECT index
pub fn select(c: &mut Call) -> CmdResult {
    let n = parse_i64(c.arg(1)).ok_or(CmdError::NOT_INTEGER)?;
    if n < 0 || n as usize >= c.st.engine.db_count() {
        return Err(CmdError::full("ERR DB index is out of range"));
    }
    c.conn.db = n as usize;
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        ci.db = c.conn.db;
    }
    ok()
}

/// RESET: leave MULTI, drop WATCHes, leave every pub/sub subscription (without
/// confirmations), select db 0, RESP2, clear the name, replies on, and require AUTH again
/// when a password is set. Library name and version survive, as in Redis.
pub fn reset(c: &mut Call) -> CmdResult {
    c.conn.multi = None;
    set_monitor(c, false);
    c.st.engine.unwatch_all(c.conn.id);
    crate::tracking::disable(c.st, c.conn.id);
    super::pubsub::leave_all(c);
    c.conn.db = 0;
    c.conn.proto = Protocol::Resp2;
    c.conn.reply_mode = ReplyMode::On;
    // Back to the default user, authenticated only if it needs no password.
    c.conn.authenticated = c.shared.acl.default_open();
    c.conn.user = Some(crate::acl::unresolved_default());
    c.conn.acl_gen = u64::MAX;
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        ci.user = Bytes::from_static(b"default");
        ci.name = Bytes::new();
        ci.resp = 2;
        ci.multi = -1;
        ci.db = 0;
        ci.no_evict = false;
        ci.no_touch = false;
    }
    reply(Reply::simple("RESET"))
}

/// MONITOR: from now on this connection is shown every command clients run (`monitor.rs`).
/// Its own commands still run. Inside EXEC it is refused, as a client that must get one reply
/// per command cannot take a stream of them.
pub fn monitor(c: &mut Call) -> CmdResult {
    if c.in_exec {
        return Err(CmdError::full("ERR MONITOR isn't allowed for DENY BLOCKING client"));
    }
    if c.st.monitors.contains(c.conn.id) {
        // Already monitoring: nothing, not even a reply, as Redis.
        return Ok(Action::Nothing);
    }
    set_monitor(c, true);
    ok()
}

fn set_monitor(c: &mut Call, on: bool) {
    if on {
        c.st.monitors.add(c.conn.id);
    } else {
        c.st.monitors.remove(c.conn.id);
    }
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        ci.monitor = on;
    }
}

/// CLIENT SETNAME name
pub fn client_setname(c: &mut Call) -> CmdResult {
    let name = c.args.get(2).cloned().unwrap_or_default();
    if !valid_name(&name) {
        return Err(BAD_NAME);
    }
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        ci.name = name;
    }
    ok()
}

/// CLIENT GETNAME
pub fn client_getname(c: &mut Call) -> CmdResult {
    match c.st.clients.get(&c.conn.id) {
        Some(ci) if !ci.name.is_empty() => reply(Reply::Bulk(ci.name.clone())),
        _ => reply(Reply::Null),
    }
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value
pub fn client_setinfo(c: &mut Call) -> CmdResult {
    let attr = c.text(2);
    let value = c.args[3].clone();
    let is_name = attr.eq_ignore_ascii_case("lib-name");
    if !is_name && !attr.eq_ignore_ascii_case("lib-ver") {
        return Err(CmdError::owned(format!("ERR Unrecognized option '{attr}'")));
    }
    if !valid_name(&value) {
        return Err(CmdError::owned(format!("ERR {attr} cannot contain spaces, newlines or special characters.")));
    }
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        if is_name {
            ci.lib_name = value;
        } else {
            ci.lib_ver = value;
        }
    }
    ok()
}

/// One CLIENT LIST line (without the trailing newline), fields in Redis 8's order.
pub fn client_line(ci: &ClientInfo, now_ms: i64, watch: usize) -> String {
    let mut flags = String::new();
    if ci.monitor {
        flags.push('O');
    }
    match ci.kind {
        crate::state::ClientKind::Replica => flags.push('S'),
        crate::state::ClientKind::RdbChannel => flags.push_str("SC"),
        crate::state::ClientKind::Master => flags.push('M'),
        crate::state::ClientKind::Normal => {}
    }
    if ci.subs.total() > 0 {
        flags.push('P');
    }
    if ci.multi >= 0 {
        flags.push('x');
    }
    if ci.blocked {
        flags.push('b');
    }
    if ci.tracking.on {
        flags.push('t');
        if ci.tracking.broken {
            flags.push('R');
        }
        if ci.tracking.bcast {
            flags.push('B');
        }
    }
    if ci.no_evict {
        flags.push('e');
    }
    if ci.no_touch {
        flags.push('T');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let cmd = if ci.last_cmd.is_empty() { "NULL" } else { ci.last_cmd };
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let (obl, oll, omem) = ci.mem.output_fields();
    // Frames pushed to it and not yet taken by its task are output it holds too.
    let queued = ci.push.queued_bytes();
    // And the large payloads of an EXEC running now (its own CLIENT LIST sees them).
    let exec_shared = load(&ci.mem.exec_shared);
    let (oll, omem) = (oll.max(u64::from(queued > 0)), omem + queued + exec_shared);
    let events = if omem + obl > 0 { "rw" } else { "r" };
    // Of omem, the payloads referenced rather than copied (shared with their values), and of
    // those the ones only this client still holds (their keys deleted or overwritten).
    let shared = (load(&ci.mem.out_shared) + exec_shared).min(omem);
    let unshared = load(&ci.mem.out_unshared).min(shared);
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} watch={} qbuf={} qbuf-free={} argv-mem=0 multi-mem={} rbs=16384 rbp=0 obl={obl} oll={oll} omem={omem} omem-shared={shared} omem-unshared={} tot-mem={} events={events} cmd={} user={} redir={} resp={} lib-name={} lib-ver={} io-thread=0 tot-net-in={} tot-net-out={} tot-cmds={} read-events={} avg-pipeline-len-sum={} avg-pipeline-len-cnt={}",
        ci.id,
        ci.addr,
        ci.laddr,
        ci.fd,
        String::from_utf8_lossy(&ci.name),
        (now_ms - ci.created_ms).max(0) / 1000,
        (now_ms - ci.last_interaction_ms).max(0) / 1000,
        flags,
        ci.db,
        ci.subs.channels,
        ci.subs.patterns,
        ci.subs.shard,
        ci.multi,
        watch,
        load(&ci.mem.qbuf),
        load(&ci.mem.qbuf_free),
        load(&ci.mem.multi_mem),
        unshared,
        ci.mem.total() + queued,
        cmd,
        String::from_utf8_lossy(&ci.user),
        if ci.tracking.on { ci.tracking.redirect as i64 } else { -1 },
        ci.resp,
        String::from_utf8_lossy(&ci.lib_name),
        String::from_utf8_lossy(&ci.lib_ver),
        ci.net_in,
        ci.net_out,
        ci.tot_cmds,
        ci.read_events,
        ci.pipeline_len_sum,
        ci.pipeline_len_cnt,
    )
}

fn verbatim(text: String) -> Reply {
    Reply::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

/// CLIENT INFO
pub fn client_info(c: &mut Call) -> CmdResult {
    let w = c.st.engine.watched_by(c.conn.id);
    let line = c.st.clients.get(&c.conn.id).map(|ci| client_line(ci, c.now_ms, w)).unwrap_or_default();
    reply(verbatim(line + "\n"))
}

/// CLIENT LIST [TYPE type | ID id ...]: one or the other, as Redis parses it. All clients in
/// the order they connected (by id), or the ones named by ID in the order named (an id named
/// twice is listed twice; one no client has, listed not at all).
pub fn client_list(c: &mut Call) -> CmdResult {
    let n = c.args.len();
    let mut of_type = None;
    let mut listed: Vec<&crate::state::ClientInfo> = Vec::new();
    if n == 4 && c.arg(2).eq_ignore_ascii_case(b"type") {
        of_type = Some(client_type(&c.text(3))?);
    } else if n > 3 && c.arg(2).eq_ignore_ascii_case(b"id") {
        let mut ids = Vec::with_capacity(n - 3);
        for i in 3..n {
            match parse_i64(c.arg(i)) {
                // An id no client can have (0, negative) is valid and matches nothing.
                Some(id) => ids.push(u64::try_from(id).unwrap_or(0)),
                None => return Err(CmdError::full("ERR Invalid client ID")),
            }
        }
        listed = ids.iter().filter_map(|id| c.st.clients.get(id)).collect();
    } else if n != 2 {
        return Err(syntax());
    }
    if n == 2 || of_type.is_some() {
        listed = c.st.clients.values().collect();
        listed.sort_unstable_by_key(|ci| ci.id);
    }
    let mut out = String::new();
    // A killed client is gone for CLIENT LIST at once, as in Redis, even if its task has not
    // yet run to remove it.
    for ci in listed.into_iter().filter(|ci| !ci.killed) {
        if of_type.is_some_and(|t| ci.client_type() != t) {
            continue;
        }
        let w = c.st.engine.watched_by(ci.id);
        out.push_str(&client_line(ci, c.now_ms, w));
        out.push('\n');
    }
    reply(verbatim(out))
}

/// A `TYPE` argument of CLIENT LIST / KILL.
fn client_type(name: &str) -> Result<ClientType, CmdError> {
    ClientType::by_name(name).ok_or_else(|| CmdError::owned(format!("ERR Unknown client type '{name}'")))
}

/// CLIENT KILL ip:port | CLIENT KILL [ID id] [ADDR ip:port] [LADDR ip:port] [USER u] [SKIPME yes|no] [MAXAGE s]
pub fn client_kill(c: &mut Call) -> CmdResult {
    if c.args.len() == 3 {
        let addr = c.text(2);
        let target = c.st.clients.values_mut().find(|ci| ci.addr == addr && !ci.killed);
        return match target {
            Some(ci) => {
                let id = ci.id;
                if id == c.conn.id {
                    // The caller itself: answered, then closed (as Redis closes it after the reply).
                    return Ok(Action::Close(Some(Reply::ok())));
                }
                kill(c, id);
                ok()
            }
            None => Err(CmdError::full("ERR No such client")),
        };
    }
    let (mut id, mut addr, mut laddr, mut user, mut skipme, mut maxage) = (None, None, None, None, true, None);
    let mut of_type = None;
    let mut i = 2;
    while i < c.args.len() {
        if i + 1 >= c.args.len() {
            return Err(syntax());
        }
        let opt = c.text(i).to_ascii_lowercase();
        let val = c.text(i + 1);
        match opt.as_str() {
            "id" => match parse_i64(val.as_bytes()) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return Err(CmdError::full("ERR client-id should be greater than 0")),
            },
            "addr" => addr = Some(val),
            "laddr" => laddr = Some(val),
            "user" => {
                if c.shared.acl.user(val.as_bytes()).is_none() {
                    return Err(CmdError::owned(format!("ERR No such user '{val}'")));
                }
                user = Some(val)
            }
            "maxage" => match parse_i64(val.as_bytes()) {
                Some(n) if n > 0 => maxage = Some(n),
                Some(_) => return Err(CmdError::full("ERR maxage should be greater than 0")),
                None => return Err(CmdError::full("ERR maxage is not an integer or out of range")),
            },
            "type" => of_type = Some(client_type(&val)?),
            "skipme" => match val.to_ascii_lowercase().as_str() {
                "yes" => skipme = true,
                "no" => skipme = false,
                _ => return Err(syntax()),
            },
            _ => return Err(syntax()),
        }
        i += 2;
    }
    let now = c.now_ms;
    let me = c.conn.id;
    let mut victims: Vec<u64> =
        c.st.clients
            .values()
            .filter(|ci| !ci.killed)
            .filter(|ci| id.is_none_or(|x| ci.id == x))
            .filter(|ci| of_type.is_none_or(|t| ci.client_type() == t))
            .filter(|ci| addr.as_ref().is_none_or(|a| &ci.addr == a))
            .filter(|ci| laddr.as_ref().is_none_or(|a| &ci.laddr == a))
            .filter(|ci| user.as_ref().is_none_or(|u| ci.user == u.as_bytes()))
            .filter(|ci| maxage.is_none_or(|m| (now - ci.created_ms) / 1000 >= m))
            .filter(|ci| !(skipme && ci.id == me))
            .map(|ci| ci.id)
            .collect();
    victims.sort_unstable();
    let count = Reply::Integer(victims.len() as i64);
    for v in victims.iter().filter(|v| **v != me) {
        kill(c, *v);
    }
    if victims.contains(&me) {
        // The caller among them: it gets the count, then its connection is closed.
        return Ok(Action::Close(Some(count)));
    }
    reply(count)
}

/// Tell a connection to close.
fn kill(c: &mut Call, id: u64) {
    close_client(c.st, id);
}

/// Tell connection `id` to close (CLIENT KILL, an output limit passed while another task
/// pushed to it). A blocked victim is released first so its task wakes; a subscriber leaves
/// the pub/sub registry at once, so no PUBLISH counts it any more.
pub fn close_client(st: &mut crate::state::State, id: u64) {
    blocking::unpark(st, id);
    st.monitors.remove(id);
    st.pubsub.remove_client(id);
    if let Some(ci) = st.clients.get_mut(&id) {
        ci.kill_now();
        if let Some(socket) = &ci.link_socket {
            // The primary sees the link end now, as Redis closes it at once, not when the
            // link's task next runs: a `DEBUG SLEEP` after the kill in the same EXEC holds
            // the server (and may hold that task, woken on this thread), and the primary must
            // meanwhile count the replica gone (`repl-backlog-ttl`).
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// CLIENT NO-EVICT|NO-TOUCH ON|OFF
pub fn client_on_off(c: &mut Call, name: &str) -> CmdResult {
    let on = match c.text(2).to_ascii_lowercase().as_str() {
        "on" => true,
        "off" => false,
        _ => return Err(syntax()),
    };
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        if name == "client|no-evict" {
            ci.no_evict = on;
        } else {
            ci.no_touch = on;
        }
    }
    ok()
}

/// CLIENT REPLY ON|OFF|SKIP. OFF and SKIP themselves get no reply.
pub fn client_reply(c: &mut Call) -> CmdResult {
    match c.text(2).to_ascii_lowercase().as_str() {
        "on" => {
            c.conn.reply_mode = ReplyMode::On;
            ok()
        }
        "off" => {
            c.conn.reply_mode = ReplyMode::Off;
            ok()
        }
        "skip" => {
            if c.conn.reply_mode != ReplyMode::Off {
                c.conn.reply_mode = ReplyMode::SkipNext;
            }
            ok()
        }
        _ => Err(syntax()),
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL]: hold every command (ALL, the default) or the ones that
/// write or may replicate (WRITE) of normal clients for `timeout` ms; a pause still in effect
/// keeps the later end (`pause.rs`).
pub fn client_pause(c: &mut Call) -> CmdResult {
    use crate::pause::{Actions, Purpose};
    if c.args.len() > 4 {
        return Err(super::subcommand_syntax(c));
    }
    let mut actions = Actions::ALL_SET;
    if let Some(mode) = c.args.get(3) {
        if mode.eq_ignore_ascii_case(b"write") {
            actions = Actions::WRITE_SET;
        } else if !mode.eq_ignore_ascii_case(b"all") {
            return Err(CmdError::full("ERR CLIENT PAUSE mode must be WRITE or ALL"));
        }
    }
    let end = super::replication::timeout_ms(c.arg(2), c.now_ms)?.unwrap_or(0);
    // WRITE does not loosen an ALL pause still in effect (Redis keeps the stricter mode).
    if c.st.pause.of(Purpose::Client, c.now_ms).any(Actions::ALL) {
        actions = Actions::ALL_SET;
    }
    let expiry = c.st.pause.pause(Purpose::Client, end, actions, c.now_ms);
    c.st.engine.pause_expiry(expiry);
    ok()
}

/// CLIENT UNPAUSE: end CLIENT PAUSE's pause (not a failover's).
pub fn client_unpause(c: &mut Call) -> CmdResult {
    let expiry = c.st.pause.unpause(crate::pause::Purpose::Client, c.now_ms);
    c.st.engine.pause_expiry(expiry);
    ok()
}

/// CLIENT UNBLOCK client-id [TIMEOUT|ERROR]
pub fn client_unblock(c: &mut Call) -> CmdResult {
    let id = parse_i64(c.arg(2)).ok_or(CmdError::NOT_INTEGER)?;
    let as_error = match c.args.get(3) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"timeout") => false,
        Some(a) if a.eq_ignore_ascii_case(b"error") => true,
        Some(_) => return Err(CmdError::full("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
    };
    let Some(w) = (id > 0).then(|| blocking::unpark(c.st, id as u64)).flatten() else {
        return reply(Reply::Integer(0));
    };
    let r = if as_error {
        CmdError::full("UNBLOCKED client unblocked via CLIENT UNBLOCK").to_reply()
    } else {
        w.request.timeout_reply.clone()
    };
    if r.is_error() {
        // An error ends the command: a failed call of it too, as Redis counts it.
        c.st.stats.count_error(b"UNBLOCKED");
        c.st.stats.command(w.spec).failed += 1;
    }
    blocking::ended(c.st, w.spec, &w.args, id as u64, w.ran_micros, c.now_ms);
    c.st.blocked.handed_to_tasks += 1;
    let _ = w.tx.send(crate::blocking::Outcome::Reply(r, None, Vec::new()));
    Ok(Action::Reply(Reply::Integer(1)))
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]:
/// client-side caching (`tracking.rs`). Options are parsed first, in order, as Redis does
/// (a REDIRECT to a client that does not exist right now is refused).
pub fn client_tracking(c: &mut Call) -> CmdResult {
    let mut o = crate::tracking::Options::default();
    let mut j = 3;
    while j < c.args.len() {
        let opt = &c.args[j];
        let more = j + 1 < c.args.len();
        if opt.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if o.redirect != 0 {
                return Err(CmdError::full("ERR A client can only redirect to a single other client"));
            }
            let id = parse_i64(&c.args[j]).ok_or(CmdError::NOT_INTEGER)?;
            if id <= 0 || !c.st.clients.contains_key(&(id as u64)) {
                return Err(CmdError::full("ERR The client ID you want redirect to does not exist"));
            }
            o.redirect = id as u64;
        } else if opt.eq_ignore_ascii_case(b"bcast") {
            o.bcast = true;
        } else if opt.eq_ignore_ascii_case(b"optin") {
            o.optin = true;
        } else if opt.eq_ignore_ascii_case(b"optout") {
            o.optout = true;
        } else if opt.eq_ignore_ascii_case(b"noloop") {
            o.noloop = true;
        } else if opt.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            o.prefixes.push(c.args[j].clone());
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    let status = c.arg(2);
    if status.eq_ignore_ascii_case(b"on") {
        crate::tracking::enable(c.st, c.conn.id, o)?;
    } else if status.eq_ignore_ascii_case(b"off") {
        crate::tracking::disable(c.st, c.conn.id);
    } else {
        return Err(syntax());
    }
    ok()
}

/// CLIENT CACHING YES|NO
pub fn client_caching(c: &mut Call) -> CmdResult {
    if c.st.tracking.mode(c.conn.id).is_none() {
        // Checked before the argument, as Redis.
        crate::tracking::caching(c.st, c.conn.id, true)?;
    }
    let yes = match c.arg(2) {
        a if a.eq_ignore_ascii_case(b"yes") => true,
        a if a.eq_ignore_ascii_case(b"no") => false,
        _ => return Err(syntax()),
    };
    crate::tracking::caching(c.st, c.conn.id, yes)?;
    ok()
}

/// CLIENT GETREDIR: the client tracking messages go to, 0 for none, -1 when not tracking.
pub fn client_getredir(c: &mut Call) -> CmdResult {
    let id = c.st.tracking.mode(c.conn.id).map_or(-1, |m| m.redirect as i64);
    reply(Reply::Integer(id))
}

/// CLIENT TRACKINGINFO: `flags`, `redirect`, `prefixes`.
pub fn client_trackinginfo(c: &mut Call) -> CmdResult {
    let b = |s: &'static str| Reply::Bulk(Bytes::from_static(s.as_bytes()));
    let mode = c.st.tracking.mode(c.conn.id);
    let mut flags = vec![b(if mode.is_some() { "on" } else { "off" })];
    let mut prefixes = Vec::new();
    if let Some(m) = mode {
        let named = [
            (m.bcast, "bcast"),
            (m.optin, "optin"),
            (m.optin && m.caching, "caching-yes"),
            (m.optout, "optout"),
            (m.optout && m.caching, "caching-no"),
            (m.noloop, "noloop"),
            (m.broken_redirect, "broken_redirect"),
        ];
        flags.extend(named.into_iter().filter(|(on, _)| *on).map(|(_, name)| b(name)));
        prefixes = m.prefixes.iter().cloned().map(Reply::Bulk).collect();
    }
    reply(Reply::Map(vec![
        (b("flags"), Reply::Set(flags)),
        (b("redirect"), Reply::Integer(mode.map_or(-1, |m| m.redirect as i64))),
        (b("prefixes"), Reply::Array(prefixes)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::password_matches;

    #[test]
    fn password_comparison() {
        assert!(password_matches(b"s3cret", b"s3cret"));
        assert!(!password_matches(b"s3cret", b"s3creT"));
        assert!(!password_matches(b"s3cret", b"X3cret"));
        // Prefixes, extensions and repetitions of the secret are not the secret.
        assert!(!password_matches(b"s3cret", b"s3cre"));
        assert!(!password_matches(b"s3cret", b"s3crets"));
        assert!(!password_matches(b"ab", b"abab"));
        assert!(!password_matches(b"s3cret", b""));
        assert!(password_matches(b"", b""));
        assert!(!password_matches(b"", b"x"));
        // Every byte value, in every position.
        let secret: Vec<u8> = (0..=255).collect();
        for i in 0..secret.len() {
            let mut given = secret.clone();
            given[i] ^= 0x80;
            assert!(!password_matches(&secret, &given));
        }
        assert!(password_matches(&secret, &secret.clone()));
    }
}
