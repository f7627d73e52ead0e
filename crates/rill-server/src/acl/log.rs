//! The ACL log (`ACL LOG`): denied commands, keys, channels and failed authentications, the
//! newest first, a repeat within 60 s of an entry among the newest ten counted into it, at
//! most `acllog-max-len` entries; and the `acl_access_denied_*` counters of INFO.

use crate::state::AclStats;
use bytes::Bytes;
use rill_resp::Reply;
use std::collections::VecDeque;

/// Why an entry was logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A command the user may not run.
    Command,
    /// A key the user may not access.
    Key,
    /// A channel the user may not use.
    Channel,
    /// A failed AUTH or HELLO AUTH.
    Auth,
    /// A TLS client certificate naming no enabled user (`tls-auth-clients-user`).
    TlsCert,
}

/// Where the denied command came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Sent by the client.
    Toplevel,
    /// Queued in MULTI (or run by EXEC).
    Multi,
    /// Called by a script.
    Lua,
}

/// Where a denied command came from, and the top-level command running then (what the
/// entry's `client-info` shows as `cmd=`: `exec` for a queued command refused at EXEC,
/// `eval` for a script's call).
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    /// The context.
    pub context: Context,
    /// The top-level command's full name.
    pub running: &'static str,
}

/// One entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    count: u64,
    reason: Reason,
    context: Context,
    object: Bytes,
    username: Bytes,
    client_info: String,
    entry_id: u64,
    created_ms: i64,
    updated_ms: i64,
}

/// The log and the counters.
#[derive(Debug)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
    next_id: u64,
    /// `acllog-max-len`.
    pub max_len: usize,
    /// INFO's `acl_access_denied_*`.
    pub stats: AclStats,
}

impl Default for AclLog {
    fn default() -> AclLog {
        AclLog { entries: VecDeque::new(), next_id: 0, max_len: 128, stats: AclStats::default() }
    }
}

/// Two entries within this many ms of each other may be one.
const GROUPING_MS: i64 = 60_000;

impl AclLog {
    /// Count a denial and log it.
    #[allow(clippy::too_many_arguments)] // one per field of the entry
    pub fn add(
        &mut self,
        reason: Reason,
        context: Context,
        object: Bytes,
        username: Bytes,
        client_info: String,
        now_ms: i64,
    ) {
        match reason {
            Reason::Auth => self.stats.denied_auth += 1,
            Reason::Command => self.stats.denied_cmd += 1,
            Reason::Key => self.stats.denied_key += 1,
            Reason::Channel => self.stats.denied_channel += 1,
            Reason::TlsCert => self.stats.denied_tls_cert += 1,
        }
        if self.max_len == 0 {
            self.entries.clear();
            return;
        }
        let found = self.entries.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && (e.updated_ms - now_ms).abs() <= GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(i) = found {
            if let Some(mut e) = self.entries.remove(i) {
                e.client_info = client_info;
                e.updated_ms = now_ms;
                e.count += 1;
                self.entries.push_front(e);
            }
            return;
        }
        let entry_id = self.next_id;
        self.next_id += 1;
        self.entries.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            client_info,
            entry_id,
            created_ms: now_ms,
            updated_ms: now_ms,
        });
        self.trim();
    }

    /// Drop the oldest entries past `max_len`.
    pub fn trim(&mut self) {
        self.entries.truncate(self.max_len);
    }

    /// ACL LOG RESET.
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// ACL LOG [count]: the newest `count` entries, each a map of Redis' ten fields.
    pub fn reply(&self, count: usize, now_ms: i64) -> Reply {
        let b = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        let entries = self
            .entries
            .iter()
            .take(count)
            .map(|e| {
                let reason = match e.reason {
                    Reason::Command => "command",
                    Reason::Key => "key",
                    Reason::Channel => "channel",
                    Reason::Auth => "auth",
                    Reason::TlsCert => "tls-cert",
                };
                let context = match e.context {
                    Context::Toplevel => "toplevel",
                    Context::Multi => "multi",
                    Context::Lua => "lua",
                };
                Reply::Map(vec![
                    (b("count"), Reply::Integer(e.count as i64)),
                    (b("reason"), b(reason)),
                    (b("context"), b(context)),
                    (b("object"), Reply::Bulk(e.object.clone())),
                    (b("username"), Reply::Bulk(e.username.clone())),
                    (b("age-seconds"), Reply::Double((now_ms - e.updated_ms) as f64 / 1000.0)),
                    (b("client-info"), b(&e.client_info)),
                    (b("entry-id"), Reply::Integer(e.entry_id as i64)),
                    (b("timestamp-created"), Reply::Integer(e.created_ms)),
                    (b("timestamp-last-updated"), Reply::Integer(e.updated_ms)),
                ])
            })
            .collect();
        Reply::Array(entries)
    }
}
