//! What a client may change or run, and what start-up refuses: protected parameters (no client
//! chooses where SAVE writes), `rename-command`, and security directives that rill does not
//! implement yet stopping start-up instead of being ignored. Replies are compared byte for
//! byte with Redis 8.2.3 started with the same options; without it (`RILL_SKIP_REFERENCE=1`,
//! counted as a skip) rill's own checks still run: SAVE never writes where a client says.

use rill_testkit::{escape, ChildGuard, Proc, ReferenceServer, Server, ServerKind, TempDir};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// rill and Redis 8.2.3 (`None` if it is missing and skipping is allowed), both started with
/// `extra`.
fn pair(extra: &[&str]) -> (Server, Option<Server>) {
    let redis = ReferenceServer::Redis8
        .require()
        .map(|binary| Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, extra));
    (Server::rill_with(extra), redis)
}

/// Send each command to both servers and compare the replies byte for byte (to rill alone
/// when there is no Redis); rill's replies.
fn same_replies(rill: &Server, redis: Option<&Server>, commands: &[&[&str]]) -> Vec<Vec<u8>> {
    let (mut a, mut b) = (rill.connect(), redis.map(Server::connect));
    let mut replies = Vec::new();
    for cmd in commands {
        let x = a.cmd(cmd);
        if let Some(b) = b.as_mut() {
            assert_eq!(escape(&x), escape(&b.cmd(cmd)), "{cmd:?}: rill vs redis 8.2.3");
        }
        replies.push(x);
    }
    replies
}

/// Whether `reply` is an error reply.
fn is_error(reply: &[u8]) -> bool {
    reply.starts_with(b"-")
}

#[test]
fn no_client_chooses_where_save_writes() {
    let (rill, redis) = pair(&[]);
    let target = TempDir::new("rill-test-target");
    let evil = target.path().join("authorized_keys");
    let target_s = target.path().to_str().unwrap();
    let evil_s = evil.to_str().unwrap();
    // The classic attack: point dir and dbfilename somewhere, write a value, SAVE.
    let replies = same_replies(
        &rill,
        redis.as_ref(),
        &[
            &["CONFIG", "SET", "dir", target_s],
            &["CONFIG", "SET", "dbfilename", evil_s],
            &["CONFIG", "SET", "dbfilename", "authorized_keys"],
            &["CONFIG", "SET", "dir", target_s, "dbfilename", "authorized_keys"],
            &["SET", "payload", "\n\nssh-ed25519 AAAA attacker\n\n"],
            &["SAVE"],
        ],
    );
    for (i, reply) in replies.iter().take(4).enumerate() {
        assert!(is_error(reply), "CONFIG SET #{i} of the attack was accepted: {}", escape(reply));
    }
    assert!(std::fs::read_dir(target.path()).unwrap().next().is_none(), "SAVE wrote into the attacker's folder");
    let mut c = rill.connect();
    assert_eq!(c.cmd(&["CONFIG", "GET", "dbfilename"]), b"*2\r\n$10\r\ndbfilename\r\n$8\r\ndump.rdb\r\n");
    assert!(rill.dir().join("dump.rdb").is_file(), "SAVE still writes in dir");
}

#[test]
fn protected_configs_open_to_local_clients_but_never_take_a_path() {
    let (rill, redis) = pair(&["--enable-protected-configs", "local"]);
    let replies = same_replies(
        &rill,
        redis.as_ref(),
        &[
            &["CONFIG", "GET", "enable-protected-configs"],
            &["CONFIG", "SET", "dbfilename", "/tmp/x.rdb"],
            &["CONFIG", "SET", "dbfilename", "../x.rdb"],
            &["CONFIG", "SET", "dbfilename", "sub\\x.rdb"],
            &["CONFIG", "SET", "dbfilename", "other.rdb"],
            &["CONFIG", "GET", "dbfilename"],
        ],
    );
    assert!(is_error(&replies[1]) && is_error(&replies[2]), "a path was taken as dbfilename");
    assert_eq!(replies[5], b"*2\r\n$10\r\ndbfilename\r\n$9\r\nother.rdb\r\n");
    // From loopback, dir may move; SAVE then writes there under the plain name.
    let moved = TempDir::new("rill-test-moved");
    let mut c = rill.connect();
    assert_eq!(c.cmd(&["CONFIG", "SET", "dir", moved.path().to_str().unwrap()]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert!(moved.path().join("other.rdb").is_file());
}

#[test]
fn debug_and_module_are_refused_before_authentication() {
    // As Redis: the enable-*-command check comes right after arity, before NOAUTH.
    let (rill, redis) = pair(&["--requirepass", "pw"]);
    same_replies(
        &rill,
        redis.as_ref(),
        &[
            &["DEBUG", "LOG", "x"],
            &["MODULE", "LOAD", "/x.so"],
            &["MODULE", "LIST"],
            &["AUTH", "pw"],
            &["DEBUG", "SLEEP", "0"],
            &["MODULE", "UNLOAD", "x"],
        ],
    );
    let (rill, redis) = pair(&["--enable-module-command", "yes", "--enable-debug-command", "local"]);
    same_replies(
        &rill,
        redis.as_ref(),
        &[&["MODULE", "LOAD", "/nonexistent/x.so"], &["MODULE", "UNLOAD", "nosuchmodule"], &["DEBUG", "SLEEP", "0"]],
    );
}

#[test]
fn rename_command_hides_and_renames() {
    let opts = ["--rename-command", "CONFIG", "", "--rename-command", "flushall", "NUKE"];
    let (rill, redis) = pair(&opts);
    same_replies(
        &rill,
        redis.as_ref(),
        &[
            &["CONFIG", "GET", "port"],
            &["config", "set", "dir", "/tmp"],
            &["SET", "k", "v"],
            &["FLUSHALL"],
            &["nuke"],
            &["EXISTS", "k"],
            &["COMMAND", "INFO", "config", "flushall"],
            &["MULTI"],
            &["CONFIG", "GET", "port"],
            &["EXEC"],
        ],
    );
}

#[test]
fn renamed_commands_are_logged_under_their_own_names() {
    let dir = TempDir::new("rill-test-rename-log");
    let p = Proc::start(dir.path(), &["--appendonly", "yes", "--rename-command", "FLUSHALL", "nuke"]);
    let mut c = p.client();
    assert_eq!(c.cmd(&["SET", "a", "1"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["NUKE"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "b", "2"]), b"+OK\r\n");
    p.kill9();
    // Restarted without the rename, the log still replays the flush.
    let p = Proc::start(dir.path(), &["--appendonly", "yes"]);
    let mut c = p.client();
    assert_eq!(c.cmd(&["EXISTS", "a", "b"]), b":1\r\n", "log:\n{}", p.log());
    assert!(!p.log().contains("could not be replayed"), "{}", p.log());
    p.kill9();
}

/// Start rill with `extra` and expect it to exit non-zero within a few seconds; its stderr.
pub(crate) fn refused_at_start(dir: &Path, extra: &[&str]) -> String {
    let port = rill_testkit::free_port().to_string();
    let mut child = ChildGuard::spawn(
        Command::new(env!("CARGO_BIN_EXE_rill-server"))
            .args(["--port", &port, "--bind", "127.0.0.1", "--dir", dir.to_str().unwrap()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    // Dropping the guard kills it.
    let Some(status) = child.wait_exit(Duration::from_secs(15)) else {
        panic!("rill-server started with {extra:?}: it must refuse");
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.child_mut().stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{extra:?} exited with {status}");
    err
}

#[test]
fn security_directives_rill_lacks_stop_start_up() {
    let dir = TempDir::new("rill-test-refused");
    // (`unixsocket` is served since 2026-12-06: tests/it/ports.rs.)
    let err = refused_at_start(dir.path(), &["--loadmodule", "/x.so"]);
    assert!(
        err.contains("FATAL CONFIG FILE ERROR") && err.contains("'loadmodule' is not implemented by rill"),
        "loadmodule:\n{err}"
    );
    // A TLS port without a certificate that loads stops start-up, as Redis' "Failed to
    // configure TLS".
    let err =
        refused_at_start(dir.path(), &["--tls-port", "6380", "--tls-cert-file", "r.crt", "--tls-key-file", "r.key"]);
    assert!(err.contains("Failed to configure TLS"), "{err}");
    // rename-command errors are Redis' own.
    let err = refused_at_start(dir.path(), &["--rename-command", "NOSUCHCOMMAND", "x"]);
    assert!(err.contains("No such command in rename-command"), "{err}");
    let err = refused_at_start(dir.path(), &["--rename-command", "GET", "set"]);
    assert!(err.contains("Target command name already exists"), "{err}");
    let err = refused_at_start(dir.path(), &["--dbfilename", "/tmp/dump.rdb"]);
    assert!(err.contains("dbfilename can't be a path, just a filename"), "{err}");
}
