//! CONFIG SET port | bind | metrics-port at run time, on rill and on Redis 8.2.3 with the same
//! steps: a free port is listened on at once and the old one closed (clients connected before
//! keep their connection); a port in use, or an address the host does not have, refuses the
//! whole call with Redis' error and leaves the server where it was; INFO follows.

use rill_testkit::{free_port, RawClient, ReferenceServer, Server};
use std::net::TcpListener;

fn reachable(port: u16) -> bool {
    RawClient::try_connect(port).is_ok_and(|mut c| c.cmd(&["PING"]) == b"+PONG\r\n")
}

#[test]
fn the_port_and_bind_change_at_run_time_as_on_redis() {
    let rill = Server::rill();
    let redis = Server::reference(ReferenceServer::Redis8).expect("Redis 8.2.3: run scripts/install-deps.sh");
    for server in [&rill, &redis] {
        let label = server.label();
        let mut c = server.connect();
        let old = server.port;
        let new = free_port();
        assert_eq!(c.cmd(&["CONFIG", "SET", "port", &new.to_string()]), b"+OK\r\n", "{label}");
        assert!(reachable(new), "{label}: nothing on the new port");
        assert!(!reachable(old), "{label}: the old port still answers");
        // The connection that asked is kept.
        let info = String::from_utf8(c.cmd(&["INFO", "server"])).unwrap();
        assert!(info.contains(&format!("tcp_port:{new}\r\n")), "{label}: {info}");

        // A port in use: refused, with the other parameters of the call, and nothing moves.
        let taken = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let taken_port = taken.local_addr().unwrap().port().to_string();
        assert_eq!(
            String::from_utf8_lossy(&c.cmd(&["CONFIG", "SET", "maxmemory", "12345", "port", &taken_port])),
            "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.\r\n",
            "{label}"
        );
        assert_eq!(c.cmd(&["CONFIG", "GET", "maxmemory"]), b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n", "{label}");
        assert!(reachable(new), "{label}: the port was lost after a refused change");

        // An address the host does not have.
        assert_eq!(
            String::from_utf8_lossy(&c.cmd(&["CONFIG", "SET", "bind", "192.0.2.1"])),
            "-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.\r\n",
            "{label}"
        );
        assert!(reachable(new), "{label}");
        // Two addresses, one optional and missing here; then every address.
        assert_eq!(c.cmd(&["CONFIG", "SET", "bind", "127.0.0.1 -192.0.2.1"]), b"+OK\r\n", "{label}");
        assert!(reachable(new), "{label}");
        assert_eq!(c.cmd(&["CONFIG", "SET", "bind", "0.0.0.0"]), b"+OK\r\n", "{label}");
        assert!(reachable(new), "{label}");
        assert_eq!(c.cmd(&["CONFIG", "GET", "bind"]), b"*2\r\n$4\r\nbind\r\n$7\r\n0.0.0.0\r\n", "{label}");
        drop(taken);
        // Back where the test harness expects it, so the server is stopped as usual.
        assert_eq!(c.cmd(&["CONFIG", "SET", "bind", "127.0.0.1", "port", &old.to_string()]), b"+OK\r\n", "{label}");
        assert!(reachable(old), "{label}");
    }
}

/// rill's HTTP port follows the same rules: opened, moved and closed by CONFIG SET.
#[test]
fn the_metrics_port_opens_moves_and_closes() {
    let rill = Server::rill();
    let mut c = rill.connect();
    let http = free_port();
    let get = |port: u16| {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    assert!(get(http).is_empty());
    assert_eq!(c.cmd(&["CONFIG", "SET", "metrics-port", &http.to_string()]), b"+OK\r\n");
    assert!(get(http).starts_with("HTTP/1.1 200 OK"), "{}", get(http));
    let moved = free_port();
    assert_eq!(c.cmd(&["CONFIG", "SET", "metrics-port", &moved.to_string()]), b"+OK\r\n");
    assert!(get(http).is_empty());
    assert!(get(moved).contains("rill_build_info"));
    let taken = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    assert_eq!(
        String::from_utf8_lossy(&c.cmd(&["CONFIG", "SET", "metrics-port", &taken_port])),
        "-ERR CONFIG SET failed (possibly related to argument 'metrics-port') - Unable to listen on this port. Check server logs.\r\n"
    );
    assert!(get(moved).contains("rill_build_info"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "metrics-port", "0"]), b"+OK\r\n");
    assert!(get(moved).is_empty());
    assert!(reachable(rill.port));
}

/// `unixsocket`: clients connect through it as through the port (redis-benchmark -s, the Redis
/// test suite's psync2-reg), listed as `addr=<path>:0`; `unixsocketperm` sets its mode; a stale
/// socket file left at the path is replaced.
#[test]
fn clients_connect_through_the_unix_socket() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("rill-test-{}-{}.sock", std::process::id(), free_port()));
    let path_text = path.to_string_lossy().into_owned();
    // A stale file where the socket goes.
    std::fs::write(&path, b"stale").unwrap();
    let rill = Server::rill_with(&["--unixsocket", &path_text, "--unixsocketperm", "700"]);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
    let mut unix = std::os::unix::net::UnixStream::connect(&path).unwrap();
    unix.write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"\n\r\n") {
        let n = unix.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.starts_with("+PONG\r\n"), "{text}");
    assert!(text.contains(&format!(" addr={path_text}:0 ")), "{text}");
    let mut tcp = rill.connect();
    assert_eq!(
        tcp.cmd(&["CONFIG", "GET", "unixsocket"]),
        format!("*2\r\n$10\r\nunixsocket\r\n${}\r\n{path_text}\r\n", path_text.len()).into_bytes()
    );
    drop(rill);
    let _ = std::fs::remove_file(&path);
}
