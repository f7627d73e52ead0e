//! A consumer group's server-side policy (rill's `RILL.GROUP`, docs/spec/policies.md): read it,
//! set it from a [`WorkerConfig`], and the plain `key value` views the CLI prints.
//!
//! A group with a policy is served by the server: entries unacked for `ACKWAIT` are handed back
//! and served first to `>` reads, an attempt ended by `RILL.NACK` at `MAXDELIVER` deliveries is
//! dead-lettered by the server (reason `maxdeliver`), and `XNACK FATAL` dead-letters at once
//! (reason `fatal`). A worker on such a group needs no XAUTOCLAIM sweep and writes no dead
//! letters itself.
//!
//! | `WorkerConfig` field  | `RILL.GROUP SET` option | notes                                        |
//! |-----------------------|-------------------------|----------------------------------------------|
//! | `delivery_limit`      | `MAXDELIVER`            | attempts before a failed entry dead-letters  |
//! | `dead_letter_stream`  | `DEADLETTER`            | same key the client-side loop writes to      |
//! | `min_idle`            | `ACKWAIT` (ms)          | both mean "unacked this long: owner is dead" |
//! | `retry_backoff`       | `BACKOFF` (ms list)     | empty: `UNSET BACKOFF` (retry at once)       |
//! | `release_on_close`    | `RELEASEONCLOSE` (0/1)  | a killed worker's entries come back at once  |

use redis::Value;

use crate::config::WorkerConfig;
use crate::conn::Connection;
use crate::error::WorkerError;
use crate::reply::{as_array, as_int, as_string, map_pairs};

/// The options of a group's policy this toolkit acts on (`RILL.GROUP GET`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupPolicy {
    /// `MAXDELIVER`; 0 = off.
    pub max_deliver: u64,
    /// `DEADLETTER`: the key the server dead-letters to (its default when unset).
    pub dead_letter: String,
    /// `ACKWAIT` in milliseconds; 0 = off.
    pub ack_wait_ms: u64,
    /// `BACKOFF` in milliseconds; empty = none.
    pub backoff_ms: Vec<u64>,
}

impl GroupPolicy {
    /// True when the server acts on the group: a delivery limit or an ack deadline is set.
    /// (A DEADLETTER or BACKOFF alone changes nothing a worker would notice.)
    pub fn is_active(&self) -> bool {
        self.max_deliver > 0 || self.ack_wait_ms > 0
    }
}

/// One `option value` row of a `RILL.GROUP GET`/`INFO` reply, in the server's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyValue {
    Int(i64),
    Text(String),
    List(Vec<i64>),
}

impl std::fmt::Display for PolicyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyValue::Int(n) => write!(f, "{n}"),
            PolicyValue::Text(s) => write!(f, "{s}"),
            PolicyValue::List(items) => {
                let parts: Vec<String> = items.iter().map(i64::to_string).collect();
                write!(f, "{}", parts.join(","))
            }
        }
    }
}

fn rows(v: &Value, context: &'static str) -> Result<Vec<(String, PolicyValue)>, WorkerError> {
    let pairs = map_pairs(v);
    if pairs.is_empty() {
        return Err(WorkerError::reply(context, "not a map"));
    }
    let mut out = Vec::with_capacity(pairs.len());
    for (name, value) in pairs {
        let value = match value {
            Value::Int(n) => PolicyValue::Int(*n),
            Value::Array(items) => PolicyValue::List(
                items
                    .iter()
                    .map(|i| as_int(i).ok_or_else(|| WorkerError::reply(context, name.clone())))
                    .collect::<Result<_, _>>()?,
            ),
            other => PolicyValue::Text(as_string(other).ok_or_else(|| WorkerError::reply(context, name.clone()))?),
        };
        out.push((name, value));
    }
    Ok(out)
}

/// `RILL.GROUP GET key group`: every option, set or default, in the server's order.
pub async fn get_rows(
    conn: &mut Connection,
    stream: &str,
    group: &str,
) -> Result<Vec<(String, PolicyValue)>, WorkerError> {
    let v: Value = redis::cmd("RILL.GROUP")
        .arg("GET")
        .arg(stream)
        .arg(group)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("RILL.GROUP GET"))?;
    rows(&v, "RILL.GROUP GET")
}

/// `RILL.GROUP INFO key group`: the options and the policy's counters.
pub async fn info_rows(
    conn: &mut Connection,
    stream: &str,
    group: &str,
) -> Result<Vec<(String, PolicyValue)>, WorkerError> {
    let v: Value = redis::cmd("RILL.GROUP")
        .arg("INFO")
        .arg(stream)
        .arg(group)
        .query_async(conn)
        .await
        .map_err(WorkerError::redis("RILL.GROUP INFO"))?;
    rows(&v, "RILL.GROUP INFO")
}

/// The group's policy as [`GroupPolicy`].
pub async fn get(conn: &mut Connection, stream: &str, group: &str) -> Result<GroupPolicy, WorkerError> {
    let rows = get_rows(conn, stream, group).await?;
    let mut policy = GroupPolicy::default();
    for (name, value) in rows {
        match (name.as_str(), value) {
            ("maxdeliver", PolicyValue::Int(n)) => policy.max_deliver = u64::try_from(n).unwrap_or(0),
            ("ackwait", PolicyValue::Int(n)) => policy.ack_wait_ms = u64::try_from(n).unwrap_or(0),
            ("deadletter", PolicyValue::Text(s)) => policy.dead_letter = s,
            ("backoff", PolicyValue::List(items)) => {
                policy.backoff_ms = items.into_iter().map(|n| u64::try_from(n).unwrap_or(0)).collect()
            }
            _ => {}
        }
    }
    Ok(policy)
}

/// `RILL.GROUP SET key group option value ...` (all or nothing, checked by the server).
pub async fn set(
    conn: &mut Connection,
    stream: &str,
    group: &str,
    pairs: &[(String, String)],
) -> Result<(), WorkerError> {
    let mut cmd = redis::cmd("RILL.GROUP");
    cmd.arg("SET").arg(stream).arg(group);
    for (option, value) in pairs {
        cmd.arg(option).arg(value);
    }
    cmd.query_async::<Value>(conn).await.map_err(WorkerError::redis("RILL.GROUP SET"))?;
    Ok(())
}

/// `RILL.GROUP UNSET key group option ...`.
pub async fn unset(conn: &mut Connection, stream: &str, group: &str, options: &[String]) -> Result<(), WorkerError> {
    let mut cmd = redis::cmd("RILL.GROUP");
    cmd.arg("UNSET").arg(stream).arg(group).arg(options);
    cmd.query_async::<Value>(conn).await.map_err(WorkerError::redis("RILL.GROUP UNSET"))?;
    Ok(())
}

/// The `RILL.GROUP SET` pairs that express `config` (see the module's table).
pub fn pairs_from_config(config: &WorkerConfig) -> Vec<(String, String)> {
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1).to_string();
    let mut pairs = vec![
        ("MAXDELIVER".to_owned(), config.delivery_limit.to_string()),
        ("DEADLETTER".to_owned(), config.dead_letter_stream.clone()),
        ("ACKWAIT".to_owned(), ms(config.min_idle)),
        ("RELEASEONCLOSE".to_owned(), u8::from(config.release_on_close).to_string()),
    ];
    if !config.retry_backoff.is_empty() {
        let list: Vec<String> = config.retry_backoff.iter().map(|d| ms(*d)).collect();
        pairs.push(("BACKOFF".to_owned(), list.join(",")));
    }
    pairs
}

/// Sets the group's policy from `config`: SET of [`pairs_from_config`], and UNSET BACKOFF when
/// the config has none (so a backoff left by an earlier config does not linger).
pub async fn set_from_config(conn: &mut Connection, config: &WorkerConfig) -> Result<(), WorkerError> {
    set(conn, &config.stream, &config.group, &pairs_from_config(config)).await?;
    if config.retry_backoff.is_empty() {
        unset(conn, &config.stream, &config.group, &["BACKOFF".to_owned()]).await?;
    }
    Ok(())
}

/// True when `v` (a `COMMAND INFO` reply) names at least one command.
pub(crate) fn names_a_command(v: &Value) -> bool {
    as_array(v).is_some_and(|items| items.iter().any(|i| !matches!(i, Value::Nil)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn config_maps_to_options() {
        let config = WorkerConfig::new("{t}", "g", "c")
            .expect("valid")
            .with_delivery_limit(4)
            .with_min_idle(Duration::from_millis(1500))
            .with_retry_backoff(&[Duration::from_millis(10), Duration::from_secs(1)]);
        let pairs = pairs_from_config(&config);
        let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(text, ["MAXDELIVER=4", "DEADLETTER={t}:dlq", "ACKWAIT=1500", "RELEASEONCLOSE=0", "BACKOFF=10,1000"]);
    }

    #[test]
    fn get_reply_parses_in_both_protocols() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![
            b("maxdeliver"),
            Value::Int(3),
            b("deadletter"),
            b("{t}:dlq"),
            b("ackwait"),
            Value::Int(0),
            b("backoff"),
            Value::Array(vec![Value::Int(5), Value::Int(50)]),
        ]);
        let resp3 = Value::Map(vec![(b("maxdeliver"), Value::Int(0)), (b("ackwait"), Value::Int(200))]);
        let r2 = rows(&resp2, "t").expect("parses");
        assert_eq!(r2.get(3).map(|(k, v)| (k.as_str(), v.to_string())), Some(("backoff", "5,50".to_owned())));
        assert_eq!(rows(&resp3, "t").expect("parses").len(), 2);
        assert!(rows(&Value::Nil, "t").is_err());
    }
}
