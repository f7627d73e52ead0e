//! Connections to one server or to a Redis Cluster, behind one type.
//!
//! The worker keeps two connections: one that spends most of its life in a blocking
//! `XREADGROUP ... BLOCK`, and one shared by the handlers for XACK, dead letters and claims.
//! A blocking command on a multiplexed connection holds up every request queued behind it, so
//! the two must not be the same. Both have no response timeout by default (the `redis` crate
//! gives up after 500 ms otherwise, shorter than any sensible BLOCK); the worker bounds its
//! reads itself.

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, Value};

use crate::error::WorkerError;

/// Where to connect: one server, or the seed nodes of a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A single server, e.g. `redis://127.0.0.1:6379`.
    Single(String),
    /// Seed nodes of a Redis Cluster; the slot map is discovered from them.
    Cluster(Vec<String>),
}

impl Target {
    /// Opens a connection. `response_timeout` of `None` waits for replies indefinitely.
    pub async fn connect(&self, response_timeout: Option<Duration>) -> Result<Connection, WorkerError> {
        match self {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str()).map_err(WorkerError::redis("open URL"))?;
                let config = AsyncConnectionConfig::new()
                    .set_response_timeout(response_timeout)
                    .set_connection_timeout(Some(Duration::from_secs(5)));
                let conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map_err(WorkerError::redis("connect"))?;
                Ok(Connection::Single(conn))
            }
            Target::Cluster(nodes) => {
                // The cluster client always wants a bound; a day stands in for "none".
                let timeout = response_timeout.unwrap_or(Duration::from_secs(86_400));
                let client = redis::cluster::ClusterClient::builder(nodes.iter().map(String::as_str))
                    .response_timeout(timeout)
                    .connection_timeout(Duration::from_secs(5))
                    .build()
                    .map_err(WorkerError::redis("open cluster URLs"))?;
                let conn = client.get_async_connection().await.map_err(WorkerError::redis("connect to cluster"))?;
                Ok(Connection::Cluster(conn))
            }
        }
    }

    /// True for a cluster target.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }
}

/// A connection to a single server or to a cluster; cheap to clone (clones share the socket).
#[derive(Clone)]
pub enum Connection {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Connection::Single(_) => f.write_str("Connection::Single"),
            Connection::Cluster(_) => f.write_str("Connection::Cluster"),
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}
