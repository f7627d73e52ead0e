//! What the server can do beyond Redis 7: feature detection through `COMMAND`.
//!
//! * `XREADGROUP ... CLAIM min-idle` (Redis 8.4, rill): one read returns idle pending entries
//!   of any consumer before new ones, so no separate XAUTOCLAIM sweep is needed. Detected by
//!   the `CLAIM` token in `COMMAND DOCS XREADGROUP`.
//! * `XNACK` (Redis 8.8, rill): hands entries back to the group without acking them. Detected
//!   by `COMMAND INFO XNACK` naming the command (an unknown command is a nil element).
//! * `RILL.GROUP` (rill): server-side group policies ([`crate::policy`]). Detected by
//!   `COMMAND INFO RILL.GROUP` naming the command; Redis answers nil.
//! * `RILL.READGROUP` (rill): XREADGROUP whose entries carry their idle time and earlier
//!   deliveries, as CLAIM's do: a worker on a policy group needs no XPENDING to learn each
//!   entry's attempt. Detected as `RILL.GROUP` is.

use redis::Value;

use crate::conn::Connection;
use crate::reply::as_bytes;

/// Optional stream commands the server understands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerFeatures {
    /// `XREADGROUP ... CLAIM min-idle-time` is available.
    pub claim_on_read: bool,
    /// `XNACK key group SILENT|FAIL|FATAL IDS n id...` is available.
    pub xnack: bool,
    /// `RILL.GROUP`, `RILL.NACK`, `RILL.TOUCH` (group policies) are available.
    pub policies: bool,
    /// `RILL.READGROUP` (entries with their delivery figures) is available.
    pub readgroup_counts: bool,
}

impl ServerFeatures {
    /// Only what Redis 7 has: XAUTOCLAIM sweeps, no XNACK.
    pub const LEGACY: ServerFeatures =
        ServerFeatures { claim_on_read: false, xnack: false, policies: false, readgroup_counts: false };

    /// Asks the server. A server that refuses `COMMAND DOCS` (Redis < 7) has none of them.
    pub async fn detect(conn: &mut Connection) -> ServerFeatures {
        let xnack = names_command(conn, "XNACK").await;
        let policies = names_command(conn, "RILL.GROUP").await;
        let readgroup_counts = names_command(conn, "RILL.READGROUP").await;
        let claim_on_read = redis::cmd("COMMAND")
            .arg("DOCS")
            .arg("XREADGROUP")
            .query_async::<Value>(conn)
            .await
            .map(|v| contains_token(&v, b"CLAIM"))
            .unwrap_or(false);
        ServerFeatures { claim_on_read, xnack, policies, readgroup_counts }
    }
}

/// `COMMAND INFO <name>` names the command (an unknown one is a nil element).
async fn names_command(conn: &mut Connection, name: &str) -> bool {
    redis::cmd("COMMAND")
        .arg("INFO")
        .arg(name)
        .query_async::<Value>(conn)
        .await
        .is_ok_and(|v| crate::policy::names_a_command(&v))
}

/// True when some string anywhere in `v` equals `token` (ASCII case-insensitively).
fn contains_token(v: &Value, token: &[u8]) -> bool {
    if let Some(b) = as_bytes(v) {
        return b.eq_ignore_ascii_case(token);
    }
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().any(|i| contains_token(i, token)),
        Value::Map(pairs) => pairs.iter().any(|(k, v)| contains_token(k, token) || contains_token(v, token)),
        _ => false,
    }
}
