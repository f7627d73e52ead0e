//! Server processes: [`Server`] (a fresh temporary directory, persistence off, killed on drop)
//! and [`Proc`] (rill on a directory that outlives it, for kill -9 and restart tests).
//!
//! Both are started redis-server style on a free 127.0.0.1 port, with their stdout and stderr
//! in `server.log` of their directory, and are ready when PING is answered: `-LOADING`
//! while a log is replayed is not ready yet.

use crate::binaries::{rill_server_binary, selftest, ReferenceServer};
use crate::client::RawClient;
use crate::ports::{free_port, free_port_with_bus};
use crate::process::ChildGuard;
use crate::temp_dir::TempDir;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a [`Server`] may take to answer its first PING.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a [`Proc`] may take: it may replay a log first.
pub const RESTART_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts of [`Launch::start`], each on another port (a port found free can be taken by
/// another process before the server binds it).
const ATTEMPTS: usize = 3;

/// Which program a [`Server`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// The `rill-server` binary of this workspace.
    Rill,
    /// A reference Redis server.
    Redis(ReferenceServer),
}

impl ServerKind {
    pub fn label(self) -> &'static str {
        match self {
            ServerKind::Rill => "rill",
            ServerKind::Redis(r) => r.label(),
        }
    }
}

/// How to start a [`Server`]: the program and what to add to the standard command line.
///
/// The command line is `[WRAPPER...] BINARY [CONFIG] --port P --bind 127.0.0.1 --dir D
/// --save '' --appendonly no [rill without a config file, unless `server_defaults`:
/// --repl-diskless-sync-delay 0]
/// [redis only: --daemonize no --protected-mode yes --logfile ''] EXTRA...`, so a config file is overridden by the options after it, as with redis-server.
#[derive(Debug, Clone)]
pub struct Launch {
    kind: ServerKind,
    binary: PathBuf,
    wrapper: Vec<String>,
    config: Option<PathBuf>,
    extra: Vec<String>,
    cluster_bus: bool,
    test_defaults: bool,
}

impl Launch {
    /// `binary`, which follows `kind`'s command line convention.
    pub fn new(kind: ServerKind, binary: impl Into<PathBuf>) -> Launch {
        Launch {
            kind,
            binary: binary.into(),
            wrapper: Vec::new(),
            config: None,
            extra: Vec::new(),
            cluster_bus: false,
            test_defaults: true,
        }
    }

    /// This workspace's `rill-server` ([`rill_server_binary`]).
    pub fn rill() -> Launch {
        Launch::new(ServerKind::Rill, rill_server_binary())
    }

    /// A reference server; `None` if it is missing and `RILL_SKIP_REFERENCE=1` (panics if it
    /// is missing otherwise).
    pub fn reference(which: ReferenceServer) -> Option<Launch> {
        Some(Launch::new(ServerKind::Redis(which), which.require()?))
    }

    /// A config file, as the first argument.
    pub fn config(mut self, path: &Path) -> Launch {
        self.config = Some(path.to_path_buf());
        self
    }

    /// Arguments after the standard ones.
    pub fn args(mut self, extra: &[&str]) -> Launch {
        self.extra.extend(extra.iter().map(|a| a.to_string()));
        self
    }

    /// A program that runs the server (`prlimit --nofile=...`, `setpriv ...`). It must exec
    /// the server, so that the child's pid is the server's and kill on drop reaches it.
    pub fn wrapper(mut self, prefix: &[String]) -> Launch {
        self.wrapper.extend(prefix.iter().cloned());
        self
    }

    /// Leave out the test suite's own settings (`--repl-diskless-sync-delay 0` for rill), so
    /// that every parameter is at the server's default (a comparison of defaults with Redis).
    pub fn server_defaults(mut self) -> Launch {
        self.test_defaults = false;
        self
    }

    /// Pick a port whose cluster bus port (port + 10000) is free too.
    pub fn cluster_bus(mut self) -> Launch {
        self.cluster_bus = true;
        self
    }

    /// Starts the server and waits until it answers PING (`+PONG`, or `-NOAUTH` when it
    /// was given a password). Panics with the server's log if it does not start.
    pub fn start(&self) -> Server {
        let mut last_log = String::new();
        for _attempt in 0..ATTEMPTS {
            let port = if self.cluster_bus { free_port_with_bus() } else { free_port() };
            let dir = TempDir::new(match self.kind {
                ServerKind::Rill => "rill-test",
                ServerKind::Redis(_) => "rill-test-redis",
            });
            let mut args: Vec<String> = self.wrapper.clone();
            args.push(self.binary.to_string_lossy().into_owned());
            args.extend(self.config.iter().map(|c| c.to_string_lossy().into_owned()));
            args.extend(standard_args(port, dir.path()));
            args.extend(["--appendonly", "no"].map(String::from));
            if self.kind == ServerKind::Rill && self.config.is_none() && self.test_defaults {
                // A full sync at once, as Redis' own test suite configures its servers (a
                // diskless full sync otherwise waits `repl-diskless-sync-delay`, 5 s).
                args.extend(["--repl-diskless-sync-delay", "0"].map(String::from));
            }
            if matches!(self.kind, ServerKind::Redis(_)) {
                args.extend(["--daemonize", "no", "--protected-mode", "yes", "--logfile", ""].map(String::from));
            }
            args.extend(self.extra.iter().cloned());
            let log = create_log(&dir.path().join("server.log"), false);
            let child = spawn_logged(&args, dir.path(), log);
            let mut server = Server { kind: self.kind, port, child, dir };
            match wait_ready(&mut server.child, port, STARTUP_TIMEOUT, |r| {
                r == b"+PONG\r\n" || r.starts_with(b"-NOAUTH")
            }) {
                Ok(()) => return server,
                // Dropping the server kills it; the next attempt takes another port.
                Err(e) => last_log = format!("{e}\n--- server log ---\n{}", server.log()),
            }
        }
        panic!("{} did not start on 127.0.0.1: {last_log}", self.binary.display());
    }
}

/// `--port P --bind 127.0.0.1 --dir D --save ''`.
fn standard_args(port: u16, dir: &Path) -> Vec<String> {
    let (port, dir) = (port.to_string(), dir.to_string_lossy().into_owned());
    vec!["--port".into(), port, "--bind".into(), "127.0.0.1".into(), "--dir".into(), dir, "--save".into(), "".into()]
}

fn create_log(path: &Path, append: bool) -> File {
    let file = if append { File::options().create(true).append(true).open(path) } else { File::create(path) };
    file.unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()))
}

/// Spawns `args[0] args[1..]` in `dir` with stdin closed and stdout and stderr in `log`.
fn spawn_logged(args: &[String], dir: &Path, log: File) -> ChildGuard {
    let (program, rest) = args.split_first().unwrap_or_else(|| panic!("an empty command line"));
    let stderr = log.try_clone().unwrap_or_else(|e| panic!("cannot duplicate the log's descriptor: {e}"));
    ChildGuard::spawn(Command::new(program).args(rest).current_dir(dir).stdin(Stdio::null()).stdout(log).stderr(stderr))
}

/// Polls PING on `port` until `ready` accepts the reply; an error if the process exits first
/// or `timeout` passes.
fn wait_ready(child: &mut ChildGuard, port: u16, timeout: Duration, ready: fn(&[u8]) -> bool) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait() {
            return Err(format!("exited during startup with {status}"));
        }
        if let Ok(mut client) = RawClient::try_connect(port) {
            if client.request(&[b"PING"]).is_ok_and(|reply| ready(&reply)) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("no PONG within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running server process in a temporary directory of its own; killed (by pid) and the
/// directory removed on drop.
#[derive(Debug)]
pub struct Server {
    pub kind: ServerKind,
    pub port: u16,
    child: ChildGuard,
    dir: TempDir,
}

impl Server {
    /// Starts this workspace's `rill-server`.
    pub fn rill() -> Server {
        Launch::rill().start()
    }

    /// Starts `rill-server` with extra arguments after the standard ones.
    pub fn rill_with(extra: &[&str]) -> Server {
        Launch::rill().args(extra).start()
    }

    /// The server under test: rill, or Redis 7.0.15 when `RILL_DIFF_SELFTEST=1` (to validate
    /// the tests themselves against the reference).
    pub fn subject() -> Server {
        let (kind, binary) = Server::subject_binary();
        Launch::new(kind, binary).start()
    }

    /// Starts a reference server; `None` if it is missing and `RILL_SKIP_REFERENCE=1`.
    pub fn reference(which: ReferenceServer) -> Option<Server> {
        Some(Launch::reference(which)?.start())
    }

    /// The program under test: rill, or Redis 7.0.15 when `RILL_DIFF_SELFTEST=1`.
    pub fn subject_binary() -> (ServerKind, PathBuf) {
        if selftest() {
            let which = ReferenceServer::Redis7;
            (ServerKind::Redis(which), which.require().expect("RILL_DIFF_SELFTEST=1 needs redis 7.0.15"))
        } else {
            (ServerKind::Rill, rill_server_binary())
        }
    }

    /// Starts `binary` (of `kind`'s convention) with `extra` after the standard arguments.
    pub fn start(kind: ServerKind, binary: &Path, extra: &[&str]) -> Server {
        Launch::new(kind, binary).args(extra).start()
    }

    /// Like [`Server::start`], with a config file as the first argument (the command-line
    /// options after it override it, as with redis-server).
    pub fn start_with_config(kind: ServerKind, binary: &Path, config: Option<&Path>, extra: &[&str]) -> Server {
        let launch = Launch::new(kind, binary).args(extra);
        match config {
            Some(config) => launch.config(config).start(),
            None => launch.start(),
        }
    }

    pub fn label(&self) -> &'static str {
        self.kind.label()
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// A new raw connection to this server.
    pub fn connect(&self) -> RawClient {
        RawClient::connect(self.port)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.is_running()
    }

    /// Waits up to `timeout` for the process to exit (after SHUTDOWN or a signal).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.child.wait_exit(timeout)
    }

    /// The server's captured stdout/stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

/// A rill-server process on a directory that outlives it, so it can be killed and started
/// again there. Its output is appended to `server.log` in that directory. Killed on drop.
#[derive(Debug)]
pub struct Proc {
    pub child: ChildGuard,
    pub port: u16,
    pub dir: PathBuf,
}

impl Proc {
    /// Starts rill in `dir` with `extra` after `--port P --bind 127.0.0.1 --dir DIR --save ''
    /// --repl-diskless-sync-delay 0` and waits until it answers PONG (its loading is over); panics with the log otherwise.
    pub fn start(dir: &Path, extra: &[&str]) -> Proc {
        Proc::try_start(dir, extra).unwrap_or_else(|log| panic!("rill-server did not start:\n{log}"))
    }

    /// Like [`Proc::start`]; `Err(log)` if the process exits before it answers.
    pub fn try_start(dir: &Path, extra: &[&str]) -> Result<Proc, String> {
        Proc::try_start_on(dir, free_port(), extra)
    }

    /// Like [`Proc::start`], on `port`: a server restarted where its replicas (or its
    /// primary's configuration) expect it. The port was this test's server's a moment ago;
    /// another process taking it meanwhile fails the start.
    pub fn start_on(dir: &Path, port: u16, extra: &[&str]) -> Proc {
        Proc::try_start_on(dir, port, extra).unwrap_or_else(|log| panic!("rill-server did not start:\n{log}"))
    }

    fn try_start_on(dir: &Path, port: u16, extra: &[&str]) -> Result<Proc, String> {
        let mut args = vec![rill_server_binary().to_string_lossy().into_owned()];
        args.extend(standard_args(port, dir));
        // A full sync at once, as for `Launch` (see `Launch::server_defaults`).
        args.extend(["--repl-diskless-sync-delay", "0"].map(String::from));
        args.extend(extra.iter().map(|a| a.to_string()));
        let child = spawn_logged(&args, dir, create_log(&dir.join("server.log"), true));
        let mut p = Proc { child, port, dir: dir.to_path_buf() };
        match wait_ready(&mut p.child, port, RESTART_TIMEOUT, |r| r == b"+PONG\r\n") {
            Ok(()) => Ok(p),
            Err(_) if !p.child.is_running() => Err(p.log()),
            Err(e) => panic!("{e}:\n{}", p.log()),
        }
    }

    pub fn client(&self) -> RawClient {
        RawClient::connect(self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Waits up to `timeout` for the process to exit (after SHUTDOWN or a signal).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.child.wait_exit(timeout)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// `kill -9`.
    pub fn kill9(mut self) {
        self.child.kill9();
    }
}
