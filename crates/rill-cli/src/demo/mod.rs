//! The demos, and the rill-server they start when no `--url` is given.
//!
//! A demo pointed at a server with `--url` shares it with whatever is there, so its keys are
//! its own (`rill-demo:{ticks}`, ...: a prefix no application uses by accident) and it refuses
//! to start when one of them exists, unless `--force` says they may be deleted. The keys stay
//! after the run, for `rill dlq list` and friends.

pub mod orders;
pub mod ticker;
pub mod ticker_policies;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::Value;
use rill_worker::Connection;

/// What every demo is told.
#[derive(Debug, Clone, Copy)]
pub struct DemoOptions {
    /// Seeds the demo's randomness.
    pub seed: u64,
    /// Delete the demo's keys if they exist, instead of refusing to run.
    pub force: bool,
    /// `--json`: no narration; the caller prints the summary the demo returns.
    pub json: bool,
}

impl DemoOptions {
    pub fn story(self) -> Story {
        Story { quiet: self.json }
    }
}

/// A demo's narration: printed, or dropped under `--json`, whose stdout is one JSON document
/// (the demo's summary figures).
#[derive(Debug, Clone, Copy)]
pub struct Story {
    quiet: bool,
}

impl Story {
    pub fn say(self, text: impl std::fmt::Display) {
        if !self.quiet {
            println!("{text}");
        }
    }
}

/// `text` indented by three spaces, to sit under a demo's step heading.
pub fn indent(text: &str) -> String {
    text.lines().map(|l| if l.is_empty() { String::new() } else { format!("   {l}") }).collect::<Vec<_>>().join("\n")
}

/// Makes the demo's `keys` free: refuses, changing nothing, when one exists and `force` is
/// off; deletes them (one `DEL` each) when it is on.
pub async fn take_keys(conn: &mut Connection, keys: &[&str], force: bool) -> Result<(), Box<dyn std::error::Error>> {
    let mut taken = Vec::new();
    for key in keys {
        let exists: i64 = redis::cmd("EXISTS").arg(*key).query_async(conn).await?;
        if exists > 0 {
            taken.push(*key);
        }
    }
    if taken.is_empty() {
        return Ok(());
    }
    if !force {
        let verb = if taken.len() == 1 { "exists" } else { "exist" };
        return Err(format!(
            "{} already {verb} on this server (this demo's keys are {}: left by an earlier run, or \
             not the demo's at all); nothing was changed. Pass --force to delete them and run, or \
             point --url at another server",
            taken.join(", "),
            keys.join(", ")
        )
        .into());
    }
    for key in taken {
        let _: Value = redis::cmd("DEL").arg(key).query_async(conn).await?;
    }
    Ok(())
}

/// A rill-server started for a demo on a free loopback port, killed (by pid) on drop.
#[derive(Debug)]
pub struct EmbeddedServer {
    child: Child,
    port: u16,
    dir: PathBuf,
    binary: PathBuf,
}

impl EmbeddedServer {
    /// Finds `rill-server` next to this executable (same cargo target dir or install prefix),
    /// else on PATH, and starts it in-memory (no snapshot, no log) in a scratch directory.
    pub fn start() -> Result<EmbeddedServer, String> {
        let binary = find_server().ok_or(
            "no rill-server next to this rill binary or on PATH; build it (cargo build -p rill-server) \
             or pass --url to use a running server",
        )?;
        let mut last = String::new();
        for attempt in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("no free port: {e}"))?
                .port();
            let dir = std::env::temp_dir().join(format!("rill-demo-{}-{attempt}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let child = Command::new(&binary)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            let mut server = EmbeddedServer { child, port, dir, binary: binary.clone() };
            if server.wait_ready() {
                return Ok(server);
            }
            last = format!("{} did not answer on port {port}", binary.display());
        }
        Err(last)
    }

    /// Whether the server came up and answers commands (within 10 s).
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            // Ready once it answers PING: a server still loading (even nothing) answers -LOADING.
            if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                let mut reply = [0u8; 64];
                if stream.write_all(b"PING\r\n").is_ok() {
                    if let Ok(n) = stream.read(&mut reply) {
                        if reply.get(..n).is_some_and(|r| r.starts_with(b"+PONG")) {
                            return true;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The line a demo's narration starts with.
    pub fn started(&self) -> String {
        format!(
            "# started {} on 127.0.0.1:{} (in memory; stopped when the demo ends)\n",
            self.binary.display(),
            self.port
        )
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn find_server() -> Option<PathBuf> {
    let name = format!("rill-server{}", std::env::consts::EXE_SUFFIX);
    if let Some(dir) = std::env::current_exe().ok().and_then(|p| p.parent().map(PathBuf::from)) {
        let beside = dir.join(&name);
        if beside.is_file() {
            return Some(beside);
        }
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(&name)).find(|p| p.is_file())
}

/// `a <= b` for `<ms>-<seq>` IDs.
pub fn id_le(a: &str, b: &str) -> bool {
    parse_id(a) <= parse_id(b)
}

fn parse_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// SplitMix64: the demos' seeded randomness.
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Polls `check` every 50 ms until it holds or `limit` passes; returns whether it held.
pub async fn wait_until<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
