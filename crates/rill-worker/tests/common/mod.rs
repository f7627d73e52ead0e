//! Test support: servers and clusters on loopback ports, killed by pid on drop (also when a
//! test panics), in temporary directories removed on drop.
//!
//! * [`Server::redis`] — Debian's `/usr/bin/redis-server` (7.0.15: no XREADGROUP CLAIM, no
//!   XNACK, so the worker takes its XAUTOCLAIM path).
//! * [`Server::rill`] — this workspace's `target/debug/rill-server` (built by
//!   `cargo build --workspace` before the tests run, as `scripts/test` does).
//! * [`Cluster::start`] — three redis-server primaries joined with `redis-cli --cluster create`.
//!
//! Shared with rill-cli's tests through `#[path]`.

#![allow(dead_code)] // Each test binary uses a different subset.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A temporary directory removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `target/debug/rill-server` of this workspace.
pub fn rill_server_binary() -> PathBuf {
    let path = workspace_root().join("target/debug/rill-server");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build -p rill-server` (scripts/test builds the workspace first)",
        path.display()
    );
    path
}

pub fn redis_server_binary() -> PathBuf {
    let path = PathBuf::from("/usr/bin/redis-server");
    assert!(path.is_file(), "Debian's redis-server is missing: run scripts/install-deps.sh");
    path
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A free port; with `bus`, port + 10000 (the cluster bus) is free as well.
pub fn free_port(bus: bool) -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !bus {
            return port;
        }
        if port < 55_000 && port_is_free(port + 10_000) {
            return port;
        }
    }
}

/// Which server a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Redis,
    Rill,
}

/// A server process, killed (by pid) on drop.
#[derive(Debug)]
pub struct Server {
    pub kind: Kind,
    pub port: u16,
    child: Child,
    dir: TempDir,
}

impl Server {
    pub fn redis() -> Server {
        Server::start(Kind::Redis, &[])
    }

    pub fn rill() -> Server {
        Server::start(Kind::Rill, &[])
    }

    pub fn start(kind: Kind, extra: &[&str]) -> Server {
        let (binary, prefix) = match kind {
            Kind::Redis => (redis_server_binary(), "rill-worker-redis"),
            Kind::Rill => (rill_server_binary(), "rill-worker-rill"),
        };
        let mut last_error = String::new();
        for _ in 0..3 {
            let dir = TempDir::new(prefix);
            let port = free_port(extra.contains(&"--cluster-enabled"));
            let port_arg = port.to_string();
            let dir_arg = dir.path().to_str().unwrap().to_owned();
            let mut args =
                vec!["--port", &port_arg, "--bind", "127.0.0.1", "--dir", &dir_arg, "--save", "", "--appendonly", "no"];
            if kind == Kind::Redis {
                args.extend(["--daemonize", "no", "--logfile", "server.log"]);
            }
            args.extend_from_slice(extra);
            let log = std::fs::File::create(dir.path().join("stdout.log")).unwrap();
            let child = Command::new(&binary)
                .args(&args)
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            let mut server = Server { kind, port, child, dir };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("{} did not start: {last_error}", binary.display());
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited during startup: {status}"));
            }
            if redis_cli(self.port, &["PING"]).is_some_and(|out| out.trim() == "PONG") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("no PONG within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn target(&self) -> rill_worker::Target {
        rill_worker::Target::Single(self.url())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `redis-cli -p port args...`; `None` if it could not run or failed.
pub fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .arg("-h")
        .arg("127.0.0.1")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A 3-primary Redis Cluster of Debian redis-server processes; every node is killed on drop.
#[derive(Debug)]
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let mut last = String::new();
        for _ in 0..3 {
            let nodes: Vec<Server> = (0..3)
                .map(|_| {
                    Server::start(
                        Kind::Redis,
                        &[
                            "--cluster-enabled",
                            "yes",
                            "--cluster-config-file",
                            "nodes.conf",
                            "--cluster-node-timeout",
                            "5000",
                        ],
                    )
                })
                .collect();
            let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
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
