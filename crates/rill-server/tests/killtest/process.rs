//! The server under test as a child process: started redis-server style with the append-only
//! log on, killed with SIGKILL by its pid, restarted in the same directory.

use rill_testkit::{free_port, ChildGuard, RawClient, Value};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a (re)start may take until PING answers and `loading:0`. Generous: the bench
/// replays logs of millions of entries with a debug or contended binary.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// `appendfsync` policy under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// Every acknowledged write is on disk: nothing acknowledged may be lost.
    Always,
    /// At most about a second (Redis: up to two) of acknowledged writes may be lost.
    Everysec,
}

impl Fsync {
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::Everysec => "everysec",
        }
    }

    pub fn parse(s: &str) -> Option<Fsync> {
        match s {
            "always" => Some(Fsync::Always),
            "everysec" => Some(Fsync::Everysec),
            _ => None,
        }
    }
}

/// Which command line convention the binary follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Rill,
    Redis,
}

/// How to start the server under test.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub flavor: Flavor,
    pub binary: PathBuf,
    pub fsync: Fsync,
    /// `appendonly yes` normally; `false` only for the harness' own negative control.
    pub appendonly: bool,
    /// Appended after the standard arguments.
    pub extra: Vec<String>,
}

impl ServerSpec {
    pub fn label(&self) -> String {
        let name = self.binary.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!("{name} appendfsync {}", self.fsync.name())
    }

    fn args(&self, port: u16, dir: &Path) -> Vec<String> {
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir.to_string_lossy(),
            "--save",
            "",
            "--appendonly",
            if self.appendonly { "yes" } else { "no" },
            "--appendfsync",
            self.fsync.name(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if self.flavor == Flavor::Redis {
            for a in ["--daemonize", "no", "--logfile", ""] {
                args.push(a.to_owned());
            }
        }
        args.extend(self.extra.iter().cloned());
        args
    }

    /// Starts the server in `dir` on `port` (a free one if `None`) and waits until it is ready.
    /// Returns the process and how long it took to become ready. The server's output is
    /// appended to `server.log` next to `dir`, so it survives restarts.
    pub fn start(&self, dir: &Path, port: Option<u16>) -> Result<(ServerProcess, Duration), String> {
        let mut last = String::new();
        // The same port after a kill -9 is normally free at once; retry on another one if a
        // concurrent test grabbed it in between.
        let ports = [port.unwrap_or_else(free_port), free_port(), free_port()];
        for port in ports {
            let log_path = log_path(dir);
            let log = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(|e| format!("{}: {e}", log_path.display()))?;
            let log2 = log.try_clone().map_err(|e| e.to_string())?;
            let started = Instant::now();
            let child = Command::new(&self.binary)
                .args(self.args(port, dir))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log2)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
            let mut process = ServerProcess { child: ChildGuard::new(child), port };
            match process.wait_ready(READY_TIMEOUT) {
                Ok(()) => return Ok((process, started.elapsed())),
                Err(e) => {
                    last = format!("{e}; log tail:\n{}", log_tail(dir));
                    if process.is_running() {
                        break; // up but not ready: another port will not help
                    }
                }
            }
        }
        Err(format!("{} did not become ready: {last}", self.binary.display()))
    }
}

fn log_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".log");
    dir.with_file_name(name)
}

/// The last lines the server printed (for failure messages).
pub fn log_tail(dir: &Path) -> String {
    let text = std::fs::read_to_string(log_path(dir)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// A running server, SIGKILLed when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: ChildGuard,
    pub port: u16,
}

impl ServerProcess {
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn is_running(&mut self) -> bool {
        self.child.is_running()
    }

    /// `kill -9` this child (by its pid only) and reap it.
    pub fn kill9(&mut self) {
        self.child.kill9();
    }

    /// Polls until PING answers PONG and `INFO persistence` says `loading:0`.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait() {
                return Err(format!("exited during startup with {status}"));
            }
            let last = match ready_once(self.port) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() > deadline {
                return Err(format!("not ready within {timeout:?}: {last}"));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// One readiness probe: PING → PONG, then `INFO persistence` with `loading:0`. Redis answers
/// `-LOADING` to PING while it replays its log.
pub fn ready_once(port: u16) -> Result<(), String> {
    let mut conn = RawClient::try_connect_timeout(port, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    match conn.call(&["PING"]).map_err(|e| e.to_string())? {
        Value::Simple(s) if s == "PONG" => {}
        other => return Err(format!("PING: {other}")),
    }
    let info = conn.call(&["INFO", "persistence"]).map_err(|e| e.to_string())?;
    let text = info.as_str().unwrap_or_default();
    if text.lines().any(|l| l.trim_end() == "loading:0") {
        Ok(())
    } else {
        Err(format!("INFO persistence has no loading:0: {text:?}"))
    }
}
