//! The console's client: its reads of a group's pending entries and a dead-letter stream and
//! every action it takes (XACK, XCLAIM, XNACK, XADD, XDEL) are commands run through dispatch
//! as a connection's would be, so they keep Redis' semantics and replies, pass the same
//! checks (pause, read-only replica, persistence errors), and are recorded, logged,
//! replicated, counted and shown to MONITOR like any client's: the console writes nothing the
//! journal does not see.

use crate::client::{Action, Conn};
use crate::state::{Shared, State};
use bytes::Bytes;
use rill_resp::Reply;

/// One console request's connection (authenticated: the HTTP side checked the password).
pub struct Client {
    conn: Conn,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("id", &self.conn.id).finish_non_exhaustive()
    }
}

impl Client {
    /// A connection on database `db`.
    pub fn new(shared: &Shared, db: usize) -> Client {
        let mut conn = Conn::new(shared.next_client_id(), true);
        conn.db = db;
        Client { conn }
    }

    /// Run one command as one unit under the held state lock; its reply, or an error reply
    /// when the command would have to wait (a pause, a blocking form).
    pub fn run(&mut self, shared: &Shared, st: &mut State, args: &[&[u8]]) -> Reply {
        let mut argv: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        match crate::dispatch::execute(shared, st, &mut self.conn, &mut argv, crate::clock::now_ms()) {
            // A flush's keys go on being freed in the background; its reply stands.
            Action::Reply(r) | Action::Close(Some(r)) | Action::AwaitFreed(_, r) => decode(r),
            Action::Held(_) => Reply::Error(Bytes::from_static(b"ERR the server is paused (CLIENT PAUSE): try again")),
            _ => Reply::Error(Bytes::from_static(b"ERR the console does not wait for a command")),
        }
    }
}

/// `r` with every pre-encoded part (`Reply::Raw`, as stream replies are built) read back
/// into values; a run of several values becomes an array of them.
pub fn decode(r: Reply) -> Reply {
    match r {
        Reply::Raw(bytes) => {
            let mut values = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                match rill_resp::parse_reply(bytes.get(at..).unwrap_or_default()) {
                    Ok(Some((v, used))) if used > 0 => {
                        values.push(v);
                        at += used;
                    }
                    _ => break,
                }
            }
            if values.len() == 1 {
                values.pop().unwrap_or(Reply::Null)
            } else {
                Reply::Array(values)
            }
        }
        Reply::Array(v) => Reply::Array(v.into_iter().map(decode).collect()),
        Reply::Set(v) => Reply::Set(v.into_iter().map(decode).collect()),
        Reply::Push(v) => Reply::Push(v.into_iter().map(decode).collect()),
        Reply::Map(m) => Reply::Map(m.into_iter().map(|(k, v)| (decode(k), decode(v))).collect()),
        Reply::Attribute(_, inner) => decode(*inner),
        other => other,
    }
}

/// A reply's text (bulk or simple), if it is one.
pub fn text(r: &Reply) -> Option<String> {
    match r {
        Reply::Bulk(b) | Reply::Simple(b) | Reply::Verbatim { text: b, .. } => {
            Some(String::from_utf8_lossy(b).into_owned())
        }
        _ => None,
    }
}

/// A reply's integer, if it is one.
pub fn int(r: &Reply) -> Option<i64> {
    match r {
        Reply::Integer(n) => Some(*n),
        Reply::Bulk(b) | Reply::Simple(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// An error reply's text.
pub fn error(r: &Reply) -> Option<String> {
    match r {
        Reply::Error(e) => Some(String::from_utf8_lossy(e).into_owned()),
        _ => None,
    }
}

/// A reply's items (arrays and sets; a map's keys and values in turn).
pub fn items(r: &Reply) -> Vec<Reply> {
    match r {
        Reply::Array(v) | Reply::Set(v) => v.clone(),
        Reply::Map(pairs) => pairs.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect(),
        _ => Vec::new(),
    }
}

/// Stream entries as XRANGE returns them: (ID, fields); a deleted payload has no fields.
pub fn entries(r: &Reply) -> Vec<(String, Vec<(Bytes, Bytes)>)> {
    items(r)
        .iter()
        .filter_map(|e| {
            let parts = items(e);
            let id = text(parts.first()?)?;
            let flat = parts.get(1).map(items).unwrap_or_default();
            let fields = flat
                .chunks(2)
                .filter_map(|p| match p {
                    [Reply::Bulk(f), Reply::Bulk(v)] => Some((f.clone(), v.clone())),
                    _ => None,
                })
                .collect();
            Some((id, fields))
        })
        .collect()
}
