//! Protected mode against a real peer that is not loopback. The test builds two network
//! namespaces of its own joined by a veth pair (10.231.0.1 for the server, 10.231.0.2 for the
//! client; the addresses exist only inside those namespaces, which are deleted afterwards),
//! runs the server in one and a client in the other, and compares what the client receives
//! with what Redis 8.2.3 sends in the same setup, byte for byte.
//!
//! The client is this test binary itself, started inside the client namespace with
//! `ip netns exec` to run the ignored [`netns_peer_helper`] (a process cannot enter a
//! namespace without `setns`, which would need `unsafe`).
//!
//! Creating namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN). Where `ip netns` is not
//! permitted the test is counted as skipped (`rill_testkit::skip`), except under `CI=true`,
//! where it fails.

use rill_testkit::{escape, ChildGuard, ReferenceServer, TempDir};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const SERVER_IP: &str = "10.231.0.1";
const CLIENT_IP: &str = "10.231.0.2";
/// Any port is free in a namespace of our own.
const PORT: u16 = 6379;

/// The two namespaces; deleted (with the veth pair inside them) on drop, also when a test fails.
pub(crate) struct Namespaces {
    pub(crate) server: String,
    pub(crate) client: String,
}

pub(crate) fn ip(args: &[&str]) -> Result<Output, String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Namespaces {
    fn create() -> Result<Namespaces, String> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let ns = Namespaces { server: format!("rill-pm-s-{pid}-{n}"), client: format!("rill-pm-c-{pid}-{n}") };
        ip(&["netns", "add", &ns.server])?;
        // From here on, drop deletes whatever was created.
        ip(&["netns", "add", &ns.client])?;
        let (s, c) = (ns.server.as_str(), ns.client.as_str());
        ip(&["-n", s, "link", "add", "rill0", "type", "veth", "peer", "name", "rill1", "netns", c])?;
        ip(&["-n", s, "addr", "add", &format!("{SERVER_IP}/24"), "dev", "rill0"])?;
        ip(&["-n", c, "addr", "add", &format!("{CLIENT_IP}/24"), "dev", "rill1"])?;
        for (name, dev) in [(s, "rill0"), (c, "rill1")] {
            ip(&["-n", name, "link", "set", "lo", "up"])?;
            ip(&["-n", name, "link", "set", dev, "up"])?;
        }
        Ok(ns)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in [&self.server, &self.client] {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// The namespaces, or `None` (the test counted as skipped) where they cannot be made outside
/// CI; under `CI=true` that fails the test.
pub(crate) fn namespaces() -> Option<Namespaces> {
    match Namespaces::create() {
        Ok(ns) => Some(ns),
        Err(e) => {
            rill_testkit::skip(&format!("cannot create network namespaces ({e}); they need root"));
            None
        }
    }
}

/// A server running inside the server namespace, killed (by pid) on drop. `ip netns exec`
/// execs the program, so the child's pid is the server's.
struct NsServer {
    _child: ChildGuard,
    dir: TempDir,
}

impl NsServer {
    fn start(ns: &Namespaces, binary: &Path, redis: bool, extra: &[&str]) -> NsServer {
        let dir = TempDir::new("rill-test-netns");
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let port = PORT.to_string();
        let bind = format!("{SERVER_IP} 127.0.0.1");
        let mut args = vec!["netns", "exec", &ns.server];
        args.push(binary.to_str().unwrap());
        args.extend(["--port", &port, "--bind", &bind, "--dir", dir.path().to_str().unwrap()]);
        args.extend(["--save", "", "--appendonly", "no"]);
        if redis {
            args.extend(["--daemonize", "no", "--logfile", ""]);
        }
        args.extend_from_slice(extra);
        let child = ChildGuard::spawn(
            Command::new("ip").args(&args).stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log),
        );
        NsServer { _child: child, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

/// What a peer received: the bytes, and whether the server closed the connection.
#[derive(Debug)]
struct Received {
    bytes: Vec<u8>,
    closed: bool,
}

/// Connect from inside namespace `ns` to `addr`, send `request`, and report what came back.
fn peer(ns: &str, addr: &str, request: &[u8]) -> Received {
    let out = TempDir::new("rill-test-netns-peer");
    let file = out.path().join("received");
    let run = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", &helper_test_name(), "--ignored", "--nocapture", "--test-threads=1"])
        .env("RILL_NETNS_PEER", addr)
        .env("RILL_NETNS_SEND", escape(request))
        .env("RILL_NETNS_OUT", &file)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "peer helper failed:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let bytes = std::fs::read(&file).unwrap();
    let closed = std::fs::read_to_string(file.with_extension("closed")).unwrap() == "yes";
    Received { bytes, closed }
}

/// The full name of [`netns_peer_helper`] in this test binary (`MODULE::netns_peer_helper`).
fn helper_test_name() -> String {
    // module_path!() starts with the crate's name, which test names leave out.
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    if module.is_empty() {
        "netns_peer_helper".to_string()
    } else {
        format!("{module}::netns_peer_helper")
    }
}

/// Undo [`escape`] for the few escapes a request needs (`\r`, `\n`).
fn unescape(s: &str) -> Vec<u8> {
    s.replace("\\r", "\r").replace("\\n", "\n").into_bytes()
}

/// Not a test: the client side of [`peer`], run in the client namespace. Connects to
/// `RILL_NETNS_PEER` (retrying while the server starts), sends `RILL_NETNS_SEND`, reads until
/// the server closes or is quiet for a second, and writes the bytes to `RILL_NETNS_OUT` and
/// whether the connection was closed to `RILL_NETNS_OUT.closed`.
#[test]
#[ignore = "helper started by the protected-mode tests inside a network namespace"]
fn netns_peer_helper() {
    let addr = std::env::var("RILL_NETNS_PEER").expect("run by the protected-mode tests only");
    let request = unescape(&std::env::var("RILL_NETNS_SEND").unwrap());
    let out = PathBuf::from(std::env::var("RILL_NETNS_OUT").unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut stream = loop {
        match TcpStream::connect(&addr) {
            Ok(s) => break s,
            Err(e) => {
                assert!(Instant::now() < deadline, "cannot connect to {addr}: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    stream.write_all(&request).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let closed = loop {
        match stream.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    std::fs::write(&out, &bytes).unwrap();
    std::fs::write(out.with_extension("closed"), if closed { "yes" } else { "no" }).unwrap();
}

fn field(info: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(info);
    text.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or_default().trim().to_string()
}

/// What a server does with the remote peer, and with a loopback peer after it.
struct Picture {
    remote: Received,
    rejected_connections: String,
    loopback_ping: Vec<u8>,
}

fn picture(ns: &Namespaces) -> Picture {
    let server_addr = format!("{SERVER_IP}:{PORT}");
    let loopback = format!("127.0.0.1:{PORT}");
    // Loopback first: it waits for the server to be up (and done loading: -LOADING until
    // then), and is let in.
    let deadline = Instant::now() + Duration::from_secs(20);
    let loopback_ping = loop {
        let reply = peer(&ns.server, &loopback, b"PING\r\n").bytes;
        if !reply.starts_with(b"-LOADING") || Instant::now() > deadline {
            break reply;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let remote = peer(&ns.client, &server_addr, b"");
    let info = peer(&ns.server, &loopback, b"INFO stats\r\n").bytes;
    Picture { remote, rejected_connections: field(&info, "rejected_connections"), loopback_ping }
}

#[test]
fn protected_mode_denies_a_remote_peer_without_a_password() {
    let Some(ns) = namespaces() else { return };
    let rill_bin = PathBuf::from(env!("CARGO_BIN_EXE_rill-server"));
    let rill = NsServer::start(&ns, &rill_bin, false, &[]);
    let ours = picture(&ns);
    assert_eq!(ours.loopback_ping, b"+PONG\r\n", "loopback is always let in\n{}", rill.log());
    assert!(
        ours.remote.bytes.starts_with(b"-DENIED Redis is running in protected mode"),
        "a remote peer got {}\n{}",
        escape(&ours.remote.bytes),
        rill.log()
    );
    assert!(ours.remote.closed, "the denied connection stays open");
    assert_eq!(ours.rejected_connections, "1");

    // Turning protected mode off at run time lets the same peer in.
    let reply = peer(&ns.server, &format!("127.0.0.1:{PORT}"), b"CONFIG SET protected-mode no\r\n");
    assert_eq!(reply.bytes, b"+OK\r\n");
    let served = peer(&ns.client, &format!("{SERVER_IP}:{PORT}"), b"PING\r\n");
    assert_eq!(escape(&served.bytes), "+PONG\\r\\n");
    drop(rill);

    if let Some(redis_bin) = ReferenceServer::Redis8.require() {
        let redis = NsServer::start(&ns, &redis_bin, true, &[]);
        let theirs = picture(&ns);
        assert_eq!(theirs.loopback_ping, b"+PONG\r\n", "{}", redis.log());
        assert_eq!(escape(&ours.remote.bytes), escape(&theirs.remote.bytes), "DENIED: rill vs redis 8.2.3");
        assert_eq!(ours.remote.closed, theirs.remote.closed);
        assert_eq!(ours.rejected_connections, theirs.rejected_connections, "rejected_connections");
    }
}

#[test]
fn a_password_or_protected_mode_no_lets_a_remote_peer_in() {
    let Some(ns) = namespaces() else { return };
    let rill_bin = PathBuf::from(env!("CARGO_BIN_EXE_rill-server"));
    let remote = format!("{SERVER_IP}:{PORT}");
    for (extra, want) in [
        (&["--requirepass", "pw"][..], &b"-NOAUTH Authentication required.\r\n"[..]),
        (&["--protected-mode", "no"][..], &b"+PONG\r\n"[..]),
    ] {
        let rill = NsServer::start(&ns, &rill_bin, false, extra);
        // Wait for the server through loopback, then try from the other namespace.
        let _ = peer(&ns.server, &format!("127.0.0.1:{PORT}"), b"PING\r\n");
        let got = peer(&ns.client, &remote, b"PING\r\n");
        assert_eq!(escape(&got.bytes), escape(want), "{extra:?}\n{}", rill.log());
        assert!(!got.closed, "{extra:?}: the connection was closed");
    }
}
