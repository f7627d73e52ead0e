//! Test support beyond `rill-testkit` (servers killed by pid on drop, temporary directories,
//! free ports): the reference server, worker targets, and a cluster.
//!
//! * [`redis`] — Debian's `/usr/bin/redis-server` (7.0.15: no XREADGROUP CLAIM, no XNACK, so
//!   the worker takes its XAUTOCLAIM path). `rill_testkit::Server::rill` is this workspace's
//!   `target/debug/rill-server` (built by `cargo build --workspace` before the tests run, as
//!   `scripts/test` does).
//! * [`Cluster::start`] — three redis-server primaries joined with `redis-cli --cluster create`.

#![allow(dead_code)] // Each test binary uses a different subset.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use rill_testkit::{redis_cli, Launch, ReferenceServer, Server};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to start Debian's redis-server; panics if it is missing.
fn redis_launch() -> Launch {
    Launch::reference(ReferenceServer::Redis7)
        .expect("the worker's tests need Debian's redis-server: run scripts/install-deps.sh")
}

/// Debian's redis-server 7.0.15.
pub fn redis() -> Server {
    redis_launch().start()
}

/// A server as the worker's [`rill_worker::Target`].
pub trait ServerTarget {
    fn target(&self) -> rill_worker::Target;
}

impl ServerTarget for Server {
    fn target(&self) -> rill_worker::Target {
        rill_worker::Target::Single(self.url())
    }
}

/// A 3-primary Redis Cluster of Debian redis-server processes; every node is killed on drop.
#[derive(Debug)]
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let node = redis_launch().cluster_bus().args(&[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "5000",
        ]);
        let mut last = String::new();
        for _ in 0..3 {
            let nodes: Vec<Server> = (0..3).map(|_| node.start()).collect();
            let addrs: Vec<String> = nodes.iter().map(Server::addr).collect();
            let out = Command::new("redis-cli")
                .arg("--cluster")
                .arg("create")
                .args(&addrs)
                .args(["--cluster-replicas", "0", "--cluster-yes"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            if !out.status.success() {
                last = String::from_utf8_lossy(&out.stdout).into_owned();
                continue;
            }
            let cluster = Cluster { nodes };
            if cluster.wait_ok() {
                return cluster;
            }
            last = "cluster_state never became ok".into();
        }
        panic!("could not form a cluster: {last}");
    }

    fn wait_ok(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let all_ok = self
                .nodes
                .iter()
                .all(|n| redis_cli(n.port, &["CLUSTER", "INFO"]).is_some_and(|info| info.contains("cluster_state:ok")));
            if all_ok {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    pub fn target(&self) -> rill_worker::Target {
        rill_worker::Target::Cluster(self.nodes.iter().map(Server::url).collect())
    }

    /// CLUSTER KEYSLOT asked of the first node.
    pub fn keyslot(&self, key: &str) -> u16 {
        redis_cli(self.nodes[0].port, &["CLUSTER", "KEYSLOT", key]).unwrap().trim().parse().unwrap()
    }
}
