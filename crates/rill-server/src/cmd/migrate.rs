//! MIGRATE: move (or copy) keys to another Redis-protocol server, as Redis does it.
//!
//! ```text
//!  MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw | AUTH2 user pw] [KEYS k ...]
//!    options parsed (syntax errors first), then timeout and db (integers)
//!    each key read here (its DUMP payload and the time it has left); none: +NOKEY
//!    one write to the target, pipelined: [AUTH ...] [SELECT db] RESTORE key ttl payload [REPLACE] ...
//!    one reply line per command; each key the target answered OK is deleted here (unless
//!    COPY), and logged and replicated as DEL of exactly those keys
//! ```
//!
//! Like Redis, MIGRATE blocks the server while it talks to the target (for at most `timeout`
//! ms per read or write, 1000 when 0 or less): the keys must not change between their
//! serialisation and their deletion. The connection runs on a thread the runtime sets aside
//! for blocking work (`block_in_place`), so the other connections' tasks move to the other
//! workers, but they wait for the state lock as they wait for a long command. A MIGRATE to the
//! server itself therefore times out, as it does in Redis.
//!
//! Connections to targets are cached per `host:port` (at most 64, each closed after 10 s
//! unused, INFO `migrate_cached_sockets`), with the database last selected, so a second
//! MIGRATE to the same place sends no SELECT. A cached connection the target closed is
//! reopened once, unless the failure was a timeout. Errors, as Redis words them: `IOERR error or
//! timeout connecting to the client`, `IOERR error or timeout writing|reading to target
//! instance`, `ERR Target instance replied with error: <its error>`.

use super::{reply, syntax, Call, CmdResult};
use bytes::Bytes;
use rill_engine::util::parse_i64;
use rill_engine::CmdError;
use rill_resp::Reply;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The most cached connections (Redis' `MIGRATE_SOCKET_CACHE_ITEMS`).
const CACHE_ITEMS: usize = 64;
/// How long a cached connection may stay unused (Redis' `MIGRATE_SOCKET_CACHE_TTL`).
const CACHE_TTL_MS: i64 = 10_000;

/// A cached connection to a target.
#[derive(Debug)]
struct Cached {
    stream: TcpStream,
    /// The database last selected on it (-1: unknown, SELECT next time).
    last_db: i64,
    last_use_ms: i64,
    /// Bytes read past the last reply line.
    pending: Vec<u8>,
}

/// The cached connections (`State::migrate`).
#[derive(Debug, Default)]
pub struct Sockets {
    by_target: HashMap<String, Cached>,
}

impl Sockets {
    /// INFO `migrate_cached_sockets`.
    pub fn len(&self) -> usize {
        self.by_target.len()
    }

    /// Whether none is cached.
    pub fn is_empty(&self) -> bool {
        self.by_target.is_empty()
    }

    /// The cron: close the connections unused for 10 s.
    pub fn close_idle(&mut self, now_ms: i64) {
        self.by_target.retain(|_, c| now_ms - c.last_use_ms <= CACHE_TTL_MS);
    }
}

/// How a talk with the target failed.
#[derive(Debug)]
struct IoFailure {
    writing: bool,
    timed_out: bool,
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Run blocking I/O without starving the runtime: on a multi-thread runtime the worker hands
/// its other tasks over first.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// The parsed command.
struct Request {
    target: (String, u16),
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    auth: Option<(Option<Bytes>, Bytes)>,
    keys: Vec<Bytes>,
}

fn parse(c: &mut Call) -> Result<Request, CmdError> {
    let args = c.args;
    let at = |i: usize| args.get(i).cloned().unwrap_or_default();
    let (mut copy, mut replace, mut auth) = (false, false, None);
    let (mut first, mut count) = (3, 1);
    let mut j = 6;
    while j < args.len() {
        let opt = at(j);
        let more = args.len() - 1 - j;
        if opt.eq_ignore_ascii_case(b"copy") {
            copy = true;
        } else if opt.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if opt.eq_ignore_ascii_case(b"auth") {
            if more < 1 {
                return Err(syntax());
            }
            j += 1;
            c.conn.redacted.push(j as u32);
            auth = Some((None, at(j)));
        } else if opt.eq_ignore_ascii_case(b"auth2") {
            if more < 2 {
                return Err(syntax());
            }
            c.conn.redacted.extend([j as u32 + 1, j as u32 + 2]);
            auth = Some((Some(at(j + 1)), at(j + 2)));
            j += 2;
        } else if opt.eq_ignore_ascii_case(b"keys") {
            if !at(3).is_empty() {
                return Err(CmdError::full(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            first = j + 1;
            count = args.len() - j - 1;
            break;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    let timeout = parse_i64(&at(5)).ok_or(CmdError::NOT_INTEGER)?;
    let db = parse_i64(&at(4)).ok_or(CmdError::NOT_INTEGER)?;
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    // Redis reads the port with atoi: what is not a number connects to port 0, and fails.
    let port = std::str::from_utf8(&at(2)).ok().and_then(|p| p.trim().parse::<u16>().ok()).unwrap_or(0);
    let host = String::from_utf8_lossy(&at(1)).into_owned();
    let keys = args.iter().skip(first).take(count).cloned().collect();
    Ok(Request { target: (host, port), db, timeout, copy, replace, auth, keys })
}

fn put_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

fn put_command(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
    for p in parts {
        put_bulk(out, p);
    }
}

/// One reply line (without CR LF), reading more from the target as needed.
fn read_line(conn: &mut Cached) -> Result<Vec<u8>, IoFailure> {
    let fail = |timed_out| IoFailure { writing: false, timed_out };
    loop {
        if let Some(at) = conn.pending.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = conn.pending.drain(..=at).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(line);
        }
        let mut buf = [0u8; 4096];
        match conn.stream.read(&mut buf) {
            Ok(0) => return Err(fail(false)),
            Ok(n) => conn.pending.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(fail(is_timeout(&e))),
        }
    }
}

/// Why no connection to the target could be had.
enum NoSocket {
    /// The name does not resolve, or the connection was not made within the timeout:
    /// `IOERR error or timeout connecting to the client`.
    Unreachable,
    /// The target refused it (or another immediate failure): Redis' connect does not wait for
    /// the outcome, so it finds out when it writes, and says so.
    Refused,
}

/// The cached connection to `target`, opened (and the cache kept to its size) if needed.
fn socket<'a>(
    cache: &'a mut Sockets,
    target: &(String, u16),
    timeout: Duration,
    now_ms: i64,
) -> Result<&'a mut Cached, NoSocket> {
    let name = format!("{}:{}", target.0, target.1);
    if !cache.by_target.contains_key(&name) {
        if cache.by_target.len() >= CACHE_ITEMS {
            // Room for one more: one of the others goes, as Redis drops a random one.
            let victim = cache.by_target.keys().next().cloned();
            if let Some(v) = victim {
                cache.by_target.remove(&v);
            }
        }
        let addr = (target.0.as_str(), target.1)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or(NoSocket::Unreachable)?;
        let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
            if is_timeout(&e) {
                NoSocket::Unreachable
            } else {
                NoSocket::Refused
            }
        })?;
        let _ = stream.set_nodelay(true);
        cache.by_target.insert(name.clone(), Cached { stream, last_db: -1, last_use_ms: now_ms, pending: Vec::new() });
    }
    let conn = cache.by_target.get_mut(&name).ok_or(NoSocket::Unreachable)?;
    conn.last_use_ms = now_ms;
    let _ = conn.stream.set_read_timeout(Some(timeout));
    let _ = conn.stream.set_write_timeout(Some(timeout));
    Ok(conn)
}

/// What the target answered: AUTH's and SELECT's lines (if sent), then one per RESTORE read
/// before a failure.
struct Answers {
    auth: Option<Vec<u8>>,
    select: Option<Vec<u8>>,
    restores: Vec<Vec<u8>>,
    failure: Option<IoFailure>,
}

/// Send the whole pipeline and read the replies.
fn talk(conn: &mut Cached, out: &[u8], auth: bool, select: bool, restores: usize) -> Answers {
    let mut answers = Answers { auth: None, select: None, restores: Vec::new(), failure: None };
    if let Err(e) = conn.stream.write_all(out) {
        answers.failure = Some(IoFailure { writing: true, timed_out: is_timeout(&e) });
        return answers;
    }
    for (sent, is_auth) in [(auth, true), (select, false)] {
        if !sent {
            continue;
        }
        match read_line(conn) {
            Ok(line) if is_auth => answers.auth = Some(line),
            Ok(line) => answers.select = Some(line),
            Err(f) => {
                answers.failure = Some(f);
                return answers;
            }
        }
    }
    for _ in 0..restores {
        match read_line(conn) {
            Ok(line) => answers.restores.push(line),
            Err(f) => {
                answers.failure = Some(f);
                break;
            }
        }
    }
    answers
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password |
/// AUTH2 username password] [KEYS key ...]
pub fn migrate(c: &mut Call) -> CmdResult {
    let req = parse(c)?;
    let db = c.conn.db;
    let mut found: Vec<(Bytes, i64, Vec<u8>)> = Vec::new();
    for key in &req.keys {
        if let Some((ttl, payload)) = rill_engine::types::dump::migrate_payload(&mut c.st.engine, db, key, c.now_ms) {
            found.push((key.clone(), ttl, payload));
        }
    }
    if found.is_empty() {
        return reply(Reply::simple("NOKEY"));
    }
    let mut may_retry = true;
    loop {
        let now = c.now_ms;
        let conn = match socket(&mut c.st.migrate, &req.target, req.timeout, now) {
            Ok(conn) => conn,
            Err(NoSocket::Unreachable) => {
                return Err(CmdError::full("IOERR error or timeout connecting to the client"))
            }
            Err(NoSocket::Refused) => return Err(CmdError::full("IOERR error or timeout writing to target instance")),
        };
        let mut out = Vec::new();
        if let Some((user, password)) = &req.auth {
            match user {
                Some(u) => put_command(&mut out, &[b"AUTH", u, password]),
                None => put_command(&mut out, &[b"AUTH", password]),
            }
        }
        let select = conn.last_db != req.db;
        if select {
            put_command(&mut out, &[b"SELECT", req.db.to_string().as_bytes()]);
        }
        for (key, ttl, payload) in &found {
            let ttl = ttl.to_string();
            let mut parts: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
            if req.replace {
                parts.push(b"REPLACE");
            }
            put_command(&mut out, &parts);
        }
        let answers = blocking(|| talk(conn, &out, req.auth.is_some(), select, found.len()));
        let refused = |line: &Option<Vec<u8>>| line.as_ref().filter(|l| l.first() == Some(&b'-')).cloned();
        let early_error = refused(&answers.auth).or_else(|| refused(&answers.select));
        let mut target_error: Option<Vec<u8>> = None;
        let mut moved: Vec<Bytes> = Vec::new();
        for (line, (key, ..)) in answers.restores.iter().zip(&found) {
            let error = early_error.clone().or_else(|| (line.first() == Some(&b'-')).then(|| line.clone()));
            match error {
                Some(e) => {
                    target_error.get_or_insert(e);
                }
                None if !req.copy => moved.push(key.clone()),
                None => {}
            }
        }
        if target_error.is_some() {
            conn.last_db = -1;
        }
        if !moved.is_empty() {
            c.st.engine.clear_events();
            for key in &moved {
                rill_engine::types::dump::migrated_away(&mut c.st.engine, db, key);
            }
            // Logged and replicated as the DEL of the keys the target took, as Redis rewrites it.
            let mut del = vec![Bytes::from_static(b"DEL")];
            del.extend(moved.iter().cloned());
            c.st.journal.push_command(db, &del);
            crate::notify::publish_events(c.st, c.now_ms);
        }
        if let Some(f) = answers.failure.filter(|_| target_error.is_none()) {
            c.st.migrate.by_target.remove(&format!("{}:{}", req.target.0, req.target.1));
            // Retried once on a fresh connection, when nothing was answered and it was no
            // timeout (the target closed a cached connection).
            if may_retry && !f.timed_out && answers.restores.is_empty() && moved.is_empty() {
                may_retry = false;
                continue;
            }
            let what = if f.writing { "writing" } else { "reading" };
            return Err(CmdError::owned(format!("IOERR error or timeout {what} to target instance")));
        }
        if let Some(e) = target_error {
            let text = String::from_utf8_lossy(e.get(1..).unwrap_or_default()).into_owned();
            return Err(CmdError::owned(format!("ERR Target instance replied with error: {text}")));
        }
        if let Some(conn) = c.st.migrate.by_target.get_mut(&format!("{}:{}", req.target.0, req.target.1)) {
            conn.last_db = req.db;
        }
        return reply(Reply::ok());
    }
}

/// MIGRATE's keys, as Redis finds them: the key argument, or with the KEYS option every
/// argument after it (none when the key argument is not empty: a syntax error MIGRATE
/// reports). AUTH and AUTH2 take their arguments with them.
pub fn migrate_keys(args: &[Bytes]) -> Vec<(usize, usize)> {
    let mut i = 6;
    while let Some(word) = args.get(i) {
        if word.eq_ignore_ascii_case(b"keys") {
            if args.get(3).is_some_and(|k| !k.is_empty()) {
                return Vec::new();
            }
            // With the first spec's flags, as Redis reports them (not the second's INCOMPLETE).
            return (i + 1..args.len()).map(|k| (k, 0)).collect();
        }
        if word.eq_ignore_ascii_case(b"auth") {
            i += 1;
        } else if word.eq_ignore_ascii_case(b"auth2") {
            i += 2;
        }
        i += 1;
    }
    vec![(3, 0)]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn b(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn keys_are_the_key_argument_or_what_follows_keys() {
        assert_eq!(migrate_keys(&b(&["MIGRATE", "h", "1", "k", "0", "5"])), vec![(3, 0)]);
        assert_eq!(
            migrate_keys(&b(&["MIGRATE", "h", "1", "", "0", "5", "AUTH", "keys", "KEYS", "a", "b"])),
            vec![(9, 0), (10, 0)],
            "AUTH's password is not the keyword"
        );
        assert_eq!(migrate_keys(&b(&["MIGRATE", "h", "1", "k", "0", "5", "KEYS", "a"])), vec![]);
    }
}
