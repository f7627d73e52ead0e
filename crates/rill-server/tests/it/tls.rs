//! TLS on its own port beside the plain one (`tls.rs`), driven by real TLS clients: redis-cli
//! `--tls` (OpenSSL) and redis-py `ssl=True` (Python's ssl module). Certificates are made for
//! each test by the `openssl` command: a CA, a server certificate for 127.0.0.1, a client
//! certificate, and a second CA whose certificates must be refused.

use rill_testkit::{free_port, skip, Server, TempDir};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A CA and the certificates it signed, in `dir`.
struct Pki {
    dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Pki {
    /// `ca.crt`, `server.crt`/`.key` (127.0.0.1, localhost), `client.crt`/`.key`, and
    /// `other.crt`/`.key` signed by another CA.
    fn new(dir: &Path) -> Option<Pki> {
        if Command::new("openssl").arg("version").output().is_err() {
            skip("no openssl command to make certificates (scripts/install-deps.sh installs it)");
            return None;
        }
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        std::fs::write(dir.join("client.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n").unwrap();
        for ca in ["ca", "otherca"] {
            openssl(
                dir,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    &format!("{ca}.key"),
                    "-out",
                    &format!("{ca}.crt"),
                    "-days",
                    "2",
                    "-subj",
                    &format!("/CN=rill test {ca}"),
                ],
            );
        }
        for (name, ca, ext) in
            [("server", "ca", "server.ext"), ("client", "ca", "client.ext"), ("other", "otherca", "client.ext")]
        {
            openssl(
                dir,
                &[
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                    "-subj",
                    &format!("/CN={name}"),
                ],
            );
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{name}.csr"),
                    "-CA",
                    &format!("{ca}.crt"),
                    "-CAkey",
                    &format!("{ca}.key"),
                    "-CAcreateserial",
                    "-out",
                    &format!("{name}.crt"),
                    "-days",
                    "2",
                    "-extfile",
                    ext,
                ],
            );
        }
        Some(Pki { dir: dir.to_path_buf() })
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).to_str().unwrap().to_owned()
    }
}

/// redis-cli over TLS: its output, or its error text.
fn tls_cli(port: u16, pki: &Pki, cert: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "--tls", "--cacert", &pki.path("ca.crt")]);
    if let Some(name) = cert {
        cmd.args(["--cert", &pki.path(&format!("{name}.crt")), "--key", &pki.path(&format!("{name}.key"))]);
    }
    let out = cmd.args(args).stdin(Stdio::null()).output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)).trim().to_owned()
}

fn start(pki: &Pki, extra: &[&str]) -> (Server, u16) {
    let tls_port = free_port();
    let (port, cert, key, ca) =
        (tls_port.to_string(), pki.path("server.crt"), pki.path("server.key"), pki.path("ca.crt"));
    let mut args =
        vec!["--tls-port", &port, "--tls-cert-file", &cert, "--tls-key-file", &key, "--tls-ca-cert-file", &ca];
    args.extend_from_slice(extra);
    (Server::rill_with(&args), tls_port)
}

#[test]
fn tls_clients_with_certificates_and_the_plain_port_beside() {
    let dir = TempDir::new("rill-test-tls");
    let Some(pki) = Pki::new(dir.path()) else { return };
    let (rill, tls) = start(&pki, &[]);
    // tls-auth-clients yes (the default): a client certificate of the CA is required.
    assert_eq!(tls_cli(tls, &pki, Some("client"), &["PING"]), "PONG");
    assert_eq!(tls_cli(tls, &pki, Some("client"), &["XADD", "s", "1-1", "f", "v"]), "1-1");
    assert!(tls_cli(tls, &pki, None, &["PING"]).contains("closed"), "no certificate: refused");
    assert!(tls_cli(tls, &pki, Some("other"), &["PING"]).contains("closed"), "another CA's certificate: refused");
    // The plain port serves the same data.
    assert_eq!(rill.connect().cmd(&["XLEN", "s"]), b":1\r\n");
    // optional: checked if sent.
    let mut c = rill.connect();
    assert_eq!(c.cmd(&["CONFIG", "SET", "tls-auth-clients", "optional"]), b"+OK\r\n");
    assert_eq!(tls_cli(tls, &pki, None, &["XLEN", "s"]), "1");
    assert!(tls_cli(tls, &pki, Some("other"), &["PING"]).contains("closed"));
    // A configuration that cannot load is refused, and the old one keeps serving.
    let refused = c.cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent.crt"]);
    assert_eq!(
        String::from_utf8_lossy(&refused),
        "-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs.\r\n"
    );
    assert_eq!(tls_cli(tls, &pki, Some("client"), &["PING"]), "PONG");
    // Python's ssl module (redis-py), when its venv is there; a big pipeline over TLS.
    let python = rill_testkit::workspace_root().join(".deps/venv/bin/python");
    if python.exists() {
        let script = format!(
            "import redis\nr = redis.Redis(host='127.0.0.1', port={tls}, ssl=True, ssl_ca_certs='{}', ssl_certfile='{}', ssl_keyfile='{}', socket_timeout=60)\nr.set('v', 'v' * 100)\np = r.pipeline(transaction=False)\nfor _ in range(300000): p.get('v')\nprint(r.ping(), r.xlen('s'), len(p.execute()))\n",
            pki.path("ca.crt"),
            pki.path("client.crt"),
            pki.path("client.key")
        );
        let out = Command::new(python).args(["-c", &script]).output().unwrap();
        // The pipeline is written whole before its replies are read (32 MB of them).
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "True 1 300000",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        skip("no .deps/venv (scripts/install-deps.sh makes it): redis-py over TLS not tried");
    }
}

#[test]
fn the_certificate_is_reloaded_and_the_tls_port_moved_at_run_time() {
    let dir = TempDir::new("rill-test-tls-reload");
    let Some(pki) = Pki::new(dir.path()) else { return };
    let (rill, tls) = start(&pki, &["--tls-auth-clients", "no"]);
    let subject = |port: u16| {
        let out = Command::new("openssl")
            .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-CAfile", &pki.path("ca.crt")])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().find(|l| l.starts_with("subject=")).unwrap_or_default().to_owned()
    };
    assert!(subject(tls).contains("CN = server") || subject(tls).contains("CN=server"), "{}", subject(tls));
    // The client certificate (of the same CA) as the server's: new connections see it.
    let mut c = rill.connect();
    let (cert, key) = (pki.path("client.crt"), pki.path("client.key"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "tls-cert-file", &cert, "tls-key-file", &key]), b"+OK\r\n");
    assert!(subject(tls).contains("CN = client") || subject(tls).contains("CN=client"), "{}", subject(tls));
    // tls-port moves like port (with the server's certificate back).
    let (cert, key) = (pki.path("server.crt"), pki.path("server.key"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "tls-cert-file", &cert, "tls-key-file", &key]), b"+OK\r\n");
    let moved = free_port();
    assert_eq!(c.cmd(&["CONFIG", "SET", "tls-port", &moved.to_string()]), b"+OK\r\n");
    assert_eq!(tls_cli(moved, &pki, None, &["PING"]), "PONG");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "tls-port"]),
        format!("*2\r\n$8\r\ntls-port\r\n${}\r\n{moved}\r\n", moved.to_string().len()).as_bytes()
    );
}

/// Wait until `f` holds (10 s at most).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn replicas_follow_over_tls_from_rill_and_from_redis() {
    let dir = TempDir::new("rill-test-tls-repl");
    let Some(pki) = Pki::new(dir.path()) else { return };
    let (ca, ccert, ckey) = (pki.path("ca.crt"), pki.path("client.crt"), pki.path("client.key"));
    let replica_args = |port: u16| {
        vec![
            "--tls-replication".to_string(),
            "yes".into(),
            "--tls-cert-file".into(),
            ccert.clone(),
            "--tls-key-file".into(),
            ckey.clone(),
            "--tls-ca-cert-file".into(),
            ca.clone(),
            "--replicaof".into(),
            format!("127.0.0.1 {port}"),
        ]
    };
    // A rill primary's TLS port, a rill replica.
    let (primary, tls) = start(&pki, &[]);
    primary.connect().cmd(&["XADD", "s", "1-1", "f", "v"]);
    let args = replica_args(tls);
    let replica = Server::rill_with(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut r = replica.connect();
    eventually("the rill replica over TLS has the stream", || r.cmd(&["XLEN", "s"]) == b":1\r\n");
    primary.connect().cmd(&["XADD", "s", "2-1", "f", "v"]);
    eventually("the rill replica over TLS follows the stream", || r.cmd(&["XLEN", "s"]) == b":2\r\n");
    // Redis' own TLS primary (Debian's 7.0.15, built with TLS), a rill replica.
    let Some(redis) = rill_testkit::ReferenceServer::Redis7.require() else { return };
    let redis_tls = free_port();
    let (port, cert, key) = (redis_tls.to_string(), pki.path("server.crt"), pki.path("server.key"));
    let redis = Server::start(
        rill_testkit::ServerKind::Redis(rill_testkit::ReferenceServer::Redis7),
        &redis,
        &[
            "--tls-port",
            &port,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
    redis.connect().cmd(&["XADD", "t", "1-1", "f", "v"]);
    let args = replica_args(redis_tls);
    let replica = Server::rill_with(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut r = replica.connect();
    eventually("the rill replica of Redis over TLS has the stream", || r.cmd(&["XLEN", "t"]) == b":1\r\n");
    redis.connect().cmd(&["XADD", "t", "2-1", "f", "v"]);
    eventually("the rill replica of Redis over TLS follows", || r.cmd(&["XLEN", "t"]) == b":2\r\n");
}

#[test]
fn the_http_port_speaks_https_with_metrics_tls() {
    let dir = TempDir::new("rill-test-tls-http");
    let Some(pki) = Pki::new(dir.path()) else { return };
    let http = free_port();
    let (_rill, _tls) =
        start(&pki, &["--tls-auth-clients", "no", "--metrics-port", &http.to_string(), "--metrics-tls", "yes"]);
    let fetch = |scheme: &str| {
        let script = format!(
            "import ssl, urllib.request\nctx = ssl.create_default_context(cafile='{}')\ntry:\n    print(urllib.request.urlopen('{scheme}://127.0.0.1:{http}/metrics', context=ctx, timeout=5).read().decode().count('rill_'))\nexcept Exception as e:\n    print('error', type(e).__name__)\n",
            pki.path("ca.crt")
        );
        let out = Command::new("python3").args(["-c", &script]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let https = fetch("https");
    assert!(https.parse::<u32>().is_ok_and(|n| n > 0), "HTTPS /metrics: {https}");
    assert!(fetch("http").starts_with("error"), "plain HTTP is not served on an HTTPS port");
}

#[test]
fn a_client_certificate_can_name_the_acl_user() {
    let dir = TempDir::new("rill-test-tls-user");
    let Some(pki) = Pki::new(dir.path()) else { return };
    let (rill, tls) = start(&pki, &["--tls-auth-clients-user", "cn", "--requirepass", "root"]);
    let mut admin = rill.connect();
    assert_eq!(admin.cmd(&["AUTH", "root"]), b"+OK\r\n");
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "tls-auth-clients-user"]),
        b"*2\r\n$21\r\ntls-auth-clients-user\r\n$2\r\nCN\r\n"
    );
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "client", "on", ">unused", "~k*", "+get", "+acl|whoami"]), b"+OK\r\n");
    // CN=client: authenticated as `client` at the handshake, no AUTH.
    assert_eq!(tls_cli(tls, &pki, Some("client"), &["ACL", "WHOAMI"]), "client");
    assert_eq!(tls_cli(tls, &pki, Some("client"), &["GET", "k1"]), "");
    assert!(tls_cli(tls, &pki, Some("client"), &["SET", "k1", "v"]).contains("NOPERM"));
    // CN=server names no user: the default user, which needs its password.
    assert!(tls_cli(tls, &pki, Some("server"), &["GET", "k1"]).contains("NOAUTH"));
    let info = String::from_utf8_lossy(&admin.cmd(&["INFO", "stats"])).into_owned();
    assert!(info.contains("acl_access_denied_tls_cert:1\r\n"), "{info}");
    let log = String::from_utf8_lossy(&admin.cmd(&["ACL", "LOG", "1"])).into_owned();
    assert!(log.contains("tls-cert") && log.contains("server"), "{log}");
}

/// The `redis` crate with its rustls support: with a client certificate, without one where
/// `tls-auth-clients` allows it, refused where it does not; blocking and async connections.
#[test]
fn the_redis_crate_connects_over_tls() {
    use redis::{ClientTlsConfig, TlsCertificates};
    let dir = TempDir::new("rill-test-tls");
    let Some(pki) = Pki::new(dir.path()) else { return };
    let (rill, tls) = start(&pki, &[]);
    let read = |file: &str| std::fs::read(pki.path(file)).unwrap();
    let client = |with_cert: bool| {
        let client_tls =
            with_cert.then(|| ClientTlsConfig { client_cert: read("client.crt"), client_key: read("client.key") });
        redis::Client::build_with_tls(
            format!("rediss://127.0.0.1:{tls}"),
            TlsCertificates { client_tls, root_cert: Some(read("ca.crt")) },
        )
        .unwrap()
    };
    let mut con = client(true).get_connection().unwrap();
    let id: String = redis::cmd("XADD").arg("s").arg("1-1").arg("f").arg("v").query(&mut con).unwrap();
    assert_eq!(id, "1-1");
    let len: i64 = redis::cmd("XLEN").arg("s").query(&mut con).unwrap();
    assert_eq!(len, 1);
    // Without a certificate: refused while tls-auth-clients is yes.
    assert!(client(false).get_connection().and_then(|mut c| redis::cmd("PING").query::<String>(&mut c)).is_err());
    assert_eq!(rill.connect().cmd(&["CONFIG", "SET", "tls-auth-clients", "optional"]), b"+OK\r\n");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut con = client(false).get_multiplexed_async_connection().await.unwrap();
        let id: String = redis::cmd("XADD").arg("s").arg("2-1").arg("f").arg("v").query_async(&mut con).await.unwrap();
        assert_eq!(id, "2-1");
        let entries: Vec<(String, Vec<(String, String)>)> =
            redis::cmd("XRANGE").arg("s").arg("-").arg("+").query_async(&mut con).await.unwrap();
        assert_eq!(entries.len(), 2);
    });
}
