//! ACL users beyond what a differential script can show (`tests/diff/acl.redis` holds the
//! rules, texts and checks): users from `user` directives and from an ACL file (ACL LOAD /
//! SAVE, and Redis' texts for a bad file, compared with Redis 8.2.3 reading the same file),
//! the ACL log's entries, connections closed when their user goes, `requirepass` as the
//! default user's password, CONFIG REWRITE of users, and the busy path checking ACL first.

use rill_testkit::{escape, ReferenceServer, Server, ServerKind, TempDir, Value};
use std::time::{Duration, Instant};

fn rill_and_redis(extra: &[&str]) -> (Server, Option<Server>) {
    let redis = ReferenceServer::Redis8
        .require()
        .map(|binary| Server::start(ServerKind::Redis(ReferenceServer::Redis8), &binary, extra));
    (Server::rill_with(extra), redis)
}

fn text(v: &Value) -> String {
    match v {
        Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Simple(s) => s.clone(),
        Value::Error(e) => format!("-{e}"),
        Value::Int(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

#[test]
fn user_directives_make_users_at_start() {
    let rill = Server::rill_with(&[
        "--user", "alice", "on", ">pw", "~a*", "+get", "--user", "default", "on", ">root", "~*", "&*", "+@all",
    ]);
    let mut c = rill.connect();
    assert_eq!(escape(&c.cmd(&["GET", "x"])), escape(b"-NOAUTH Authentication required.\r\n"));
    assert_eq!(c.cmd(&["AUTH", "alice", "pw"]), b"+OK\r\n");
    // The server counts as started once PING answers, and with a password PING answers
    // -NOAUTH before -LOADING (as Redis orders them): wait out a start-up still loading.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut get = c.cmd(&["GET", "a1"]);
    while get.starts_with(b"-LOADING") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        get = c.cmd(&["GET", "a1"]);
    }
    assert_eq!(get, b"$-1\r\n");
    assert_eq!(escape(&c.cmd(&["GET", "b1"])), escape(b"-NOPERM No permissions to access a key\r\n"));
    assert_eq!(c.cmd(&["AUTH", "root"]), b"+OK\r\n");
    let list = c.cmd_value(&["ACL", "LIST"]);
    let Value::Array(lines) = list else { panic!("{list:?}") };
    let lines: Vec<String> = lines.iter().map(text).collect();
    let root = rill_server::acl::hash_password(b"root");
    let pw = rill_server::acl::hash_password(b"pw");
    assert_eq!(
        lines,
        vec![
            format!("user alice on sanitize-payload #{pw} ~a* resetchannels -@all +get"),
            format!("user default on sanitize-payload #{root} ~* &* +@all"),
        ]
    );
}

#[test]
fn an_acl_file_loads_saves_and_reports_errors_as_redis() {
    let dir = TempDir::new("rill-test-aclfile");
    let file = dir.path().join("users.acl");
    let good = "user alice on #".to_string()
        + &rill_server::acl::hash_password(b"pw")
        + " ~a* +get\nuser default on nopass ~* &* +@all\n";
    std::fs::write(&file, &good).unwrap();
    let f = file.to_str().unwrap();
    let (rill, redis) = rill_and_redis(&["--aclfile", f]);
    let same = |cmd: &[&str]| {
        let a = rill.connect().cmd(cmd);
        if let Some(r) = &redis {
            assert_eq!(escape(&a), escape(&r.connect().cmd(cmd)), "{cmd:?}");
        }
        a
    };
    same(&["ACL", "LIST"]);
    same(&["ACL", "SETUSER", "bob", "on", ">x", "%R~b*", "&ch", "+@read"]);
    assert_eq!(same(&["ACL", "SAVE"]), b"+OK\r\n");
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(
        saved.contains("user bob on sanitize-payload #") && saved.contains("%R~b* resetchannels &ch -@all +@read"),
        "{saved}"
    );
    // A bad file changes nothing and says why, line by line.
    std::fs::write(&file, "user carol on +nosuch\nuser dave on ~* ~x\nnot a user line\nuser carol on\n").unwrap();
    let err = same(&["ACL", "LOAD"]);
    assert!(err.starts_with(b"-ERR ") && err.windows(4).any(|w| w == b"WARN"), "{}", escape(&err));
    same(&["ACL", "USERS"]);
    // A good one replaces every user; connections of users that went are closed.
    let mut bob = rill.connect();
    assert_eq!(bob.cmd(&["AUTH", "bob", "x"]), b"+OK\r\n");
    std::fs::write(&file, &good).unwrap();
    assert_eq!(rill.connect().cmd(&["ACL", "LOAD"]), b"+OK\r\n");
    let (_, closed) = bob.read_until_close(Duration::from_secs(5));
    assert!(closed, "bob's connection is closed when bob is gone");
    if let Some(r) = &redis {
        assert_eq!(r.connect().cmd(&["ACL", "LOAD"]), b"+OK\r\n");
    }
    same(&["ACL", "LIST"]);
    // Users and an ACL file together stop start-up, as Redis.
    let err = super::security::refused_at_start(dir.path(), &["--aclfile", f, "--user", "x", "on"]);
    assert!(err.contains("please define either an ACL file or declare users"), "{err}");
}

#[test]
fn the_acl_log_records_denials_and_failed_logins() {
    let (rill, redis) = rill_and_redis(&[]);
    for server in std::iter::once(&rill).chain(redis.as_ref()) {
        let mut admin = server.connect();
        admin.cmd(&["ACL", "SETUSER", "u", "on", ">p", "~k*", "+get", "+publish"]);
        let mut u = server.connect();
        u.cmd(&["AUTH", "u", "wrong"]);
        u.cmd(&["AUTH", "u", "p"]);
        u.cmd(&["SET", "k1", "v"]);
        u.cmd(&["SET", "k1", "v"]);
        u.cmd(&["GET", "other"]);
        u.cmd(&["PUBLISH", "ch", "m"]);
        let log = admin.cmd_value(&["ACL", "LOG"]);
        let Value::Array(entries) = log else { panic!("{log:?}") };
        let summary: Vec<Vec<String>> = entries
            .iter()
            .map(|e| {
                let Value::Array(kv) = e else { panic!("{e:?}") };
                assert_eq!(kv.len(), 20, "ten fields: {e:?}");
                let field = |name: &str| {
                    let i = kv.iter().position(|x| text(x) == name).unwrap();
                    text(&kv[i + 1])
                };
                assert!(field("client-info").contains(" user="), "{e:?}");
                vec![field("count"), field("reason"), field("context"), field("object"), field("username")]
            })
            .collect();
        let s = |v: [&str; 5]| v.map(String::from).to_vec();
        assert_eq!(
            summary,
            vec![
                s(["1", "channel", "toplevel", "ch", "u"]),
                s(["1", "key", "toplevel", "other", "u"]),
                s(["2", "command", "toplevel", "set", "u"]),
                s(["1", "auth", "toplevel", "AUTH", "u"]),
            ],
            "{}",
            server.label()
        );
        let info = text(&admin.cmd_value(&["INFO", "stats"]));
        for line in [
            "acl_access_denied_auth:1",
            "acl_access_denied_cmd:2",
            "acl_access_denied_key:1",
            "acl_access_denied_channel:1",
        ] {
            assert!(info.contains(line), "{}: {line}", server.label());
        }
        assert_eq!(admin.cmd(&["ACL", "LOG", "RESET"]), b"+OK\r\n");
        assert_eq!(admin.cmd(&["ACL", "LOG"]), b"*0\r\n");
        admin.cmd(&["ACL", "DELUSER", "u"]);
    }
}

#[test]
fn deleted_users_lose_their_connections_and_requirepass_is_the_default_password() {
    let rill = Server::rill_with(&["--requirepass", "old"]);
    let mut admin = rill.connect();
    assert_eq!(admin.cmd(&["AUTH", "old"]), b"+OK\r\n");
    let hash = rill_server::acl::hash_password(b"old");
    let list = admin.cmd_value(&["ACL", "LIST"]);
    let Value::Array(lines) = list else { panic!("{list:?}") };
    assert_eq!(
        lines.iter().map(text).collect::<Vec<_>>(),
        vec![format!("user default on sanitize-payload #{hash} ~* &* +@all")]
    );
    assert_eq!(admin.cmd(&["CONFIG", "SET", "requirepass", "new"]), b"+OK\r\n");
    let mut c = rill.connect();
    assert!(c.cmd(&["AUTH", "old"]).starts_with(b"-WRONGPASS"));
    assert_eq!(c.cmd(&["AUTH", "new"]), b"+OK\r\n");
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "gone", "on", "nopass", "+@all", "~*"]), b"+OK\r\n");
    let mut victim = rill.connect();
    assert_eq!(victim.cmd(&["AUTH", "gone", "x"]), b"+OK\r\n");
    assert!(text(&admin.cmd_value(&["CLIENT", "LIST"])).contains("user=gone"));
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "gone"]), b":1\r\n");
    let (_, closed) = victim.read_until_close(Duration::from_secs(5));
    assert!(closed);
    assert_eq!(admin.cmd(&["CONFIG", "SET", "requirepass", ""]), b"+OK\r\n");
    assert_eq!(rill.connect().cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn config_rewrite_writes_the_users() {
    let dir = TempDir::new("rill-test-acl-rewrite");
    let conf = dir.path().join("rill.conf");
    std::fs::write(&conf, "user default on nopass ~* &* +@all\n").unwrap();
    let rill = Server::start_with_config(ServerKind::Rill, &rill_testkit::rill_server_binary(), Some(&conf), &[]);
    let mut c = rill.connect();
    assert_eq!(c.cmd(&["ACL", "SETUSER", "app", "on", ">s", "~app:*", "+@stream"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("user app on sanitize-payload #")
                && l.ends_with("~app:* resetchannels -@all +@stream")),
        "{text}"
    );
    assert!(text.contains("user default on nopass sanitize-payload ~* &* +@all"), "{text}");
}

#[test]
fn a_busy_script_does_not_let_a_user_past_acl() {
    let rill = Server::rill_with(&["--busy-reply-threshold", "50"]);
    let mut admin = rill.connect();
    admin.cmd(&["ACL", "SETUSER", "limited", "on", "nopass", "+get", "~*"]);
    let mut limited = rill.connect();
    assert_eq!(limited.cmd(&["AUTH", "limited", "x"]), b"+OK\r\n");
    let mut runner = rill.connect();
    runner.send_command(&[b"EVAL", b"while true do end", b"0"]).unwrap();
    let start = Instant::now();
    loop {
        let r = admin.cmd(&["PING"]);
        if r.starts_with(b"-BUSY") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the script never became busy");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        escape(&limited.cmd(&["SCRIPT", "KILL"])),
        escape(b"-NOPERM User limited has no permissions to run the 'script|kill' command\r\n")
    );
    assert!(limited.cmd(&["GET", "x"]).starts_with(b"-BUSY"));
    // AUTH is answered during the script, as Redis answers it: a new connection logs in.
    let mut late = rill.connect();
    assert_eq!(late.cmd(&["AUTH", "limited", "x"]), b"+OK\r\n", "AUTH during a busy script");
    assert_eq!(
        escape(&late.cmd(&["SCRIPT", "KILL"])),
        escape(b"-NOPERM User limited has no permissions to run the 'script|kill' command\r\n"),
        "the user AUTH chose is the one checked"
    );
    assert!(late.cmd(&["AUTH", "limited", "x", "y"]).starts_with(b"-ERR syntax error"));
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    assert!(runner.read_reply().unwrap().starts_with(b"-ERR"));
}
