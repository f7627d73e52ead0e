//! A primary that becomes a replica unblocks its blocked clients: each client blocked in a
//! command (BLPOP, XREAD BLOCK, XREADGROUP BLOCK, WAIT, WAITAOF) gets `-UNBLOCKED ...` and its
//! connection closes, while a write held by CLIENT PAUSE is left alone. Compared byte for byte
//! with a real Redis 8.2.3 through `REPLICAOF host port`, `REPLICAOF NO ONE` and re-pointing a
//! replica; and through FAILOVER between two rill servers, where a blocked XREADGROUP left
//! parked on the old primary would be served by the new primary's stream and make the replica's
//! PEL differ from its primary's.

use crate::replica_link::{assert_equal, info_field, wait_caught_up};
use rill_testkit::{RawClient, ReferenceServer, Server, ServerKind};
use std::time::{Duration, Instant};

/// Send `args` on a connection of its own and check that it blocks: the server has taken the
/// command (CLIENT LIST shows it as the connection's command) and sent nothing. Waiting for the
/// server to take it, rather than for a fixed time, keeps a slow machine from reordering the
/// steps (a REPLICAOF taken before the command it should unblock).
fn block(server: &Server, args: &[&str]) -> RawClient {
    let mut c = server.connect();
    let id = String::from_utf8_lossy(&c.cmd(&["CLIENT", "ID"])).trim_start_matches(':').trim().to_string();
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send_command(&bytes).unwrap();
    taken(server, &id, args.first().copied().unwrap_or_default());
    c.set_read_timeout(Duration::from_millis(100));
    let r = c.read_reply().ok();
    c.set_read_timeout(Duration::from_secs(30));
    assert_eq!(r.map(|r| String::from_utf8_lossy(&r).into_owned()), None, "{args:?} blocks");
    c
}

/// Wait until client `id`'s command, as CLIENT LIST shows it, is `name`.
fn taken(server: &Server, id: &str, name: &str) {
    let mut admin = server.connect();
    let field = format!(" cmd={} ", name.to_ascii_lowercase());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list =
            String::from_utf8_lossy(admin.cmd_value(&["CLIENT", "LIST", "ID", id]).as_bytes().unwrap()).into_owned();
        if list.contains(&field) {
            return;
        }
        assert!(Instant::now() < deadline, "client {id} never took {name}: {list}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What a blocked client received, and whether its connection was then closed.
fn outcome(c: &mut RawClient) -> String {
    let (bytes, closed) = c.read_until_close(Duration::from_secs(10));
    format!("{:?} closed={closed}", String::from_utf8_lossy(&bytes))
}

/// The counters of `commands` in INFO commandstats (calls, rejected and failed calls; not the
/// times), and every line of INFO errorstats.
fn stats(c: &mut RawClient, commands: &[&str]) -> Vec<String> {
    let text = |c: &mut RawClient, section: &str| {
        String::from_utf8_lossy(c.cmd_value(&["INFO", section]).as_bytes().unwrap()).into_owned()
    };
    let mut out = Vec::new();
    let commandstats = text(c, "commandstats");
    for name in commands {
        let line = commandstats.lines().find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:")));
        let kept = line.map(|l| l.split(',').filter(|f| !f.starts_with("usec")).collect::<Vec<_>>().join(","));
        out.push(format!("{name}: {kept:?}"));
    }
    out.extend(text(c, "errorstats").lines().filter(|l| l.starts_with("errorstat_")).map(str::to_string));
    out.push(format!("blocked_clients:{:?}", info_field(c, "clients", "blocked_clients")));
    out
}

/// The steps, on a server of `kind`; what each blocked client and the admin connection saw.
fn demotion_steps(kind: ServerKind, binary: &std::path::Path) -> Vec<String> {
    let server = Server::start(kind, binary, &[]);
    let mut admin = server.connect();
    // The start-up wait may have met a `-LOADING` reply (counted in errorstats): the counters
    // compared below start from here.
    assert_eq!(admin.cmd(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    // Primaries that never answer: ports held by listeners of the test's own for its whole
    // run (a port merely found free could be taken by another test's server meanwhile, and the
    // replica would then sync from it).
    let silent: Vec<std::net::TcpListener> =
        (0..3).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let port = |i: usize| silent.get(i).unwrap().local_addr().unwrap().port().to_string();
    let (nowhere, elsewhere, further) = (port(0), port(1), port(2));
    let mut out = Vec::new();
    let step = |out: &mut Vec<String>, c: &mut RawClient, args: &[&str]| {
        out.push(format!("{} -> {:?}", args.join(" "), String::from_utf8_lossy(&c.cmd(args))));
    };
    step(&mut out, &mut admin, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);

    // A primary turned replica.
    let mut xreadgroup = block(&server, &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    let mut xread = block(&server, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    let mut blpop = block(&server, &["BLPOP", "l", "0"]);
    let mut wait = block(&server, &["WAIT", "1", "0"]);
    let mut waitaof = block(&server, &["WAITAOF", "0", "1", "0"]);
    // A write held by a pause is no blocked command: it runs once the pause ends.
    step(&mut out, &mut admin, &["CLIENT", "PAUSE", "60000", "WRITE"]);
    let mut held = block(&server, &["SET", "p", "1"]);
    step(&mut out, &mut admin, &["REPLICAOF", "127.0.0.1", &nowhere]);
    for (name, c) in [
        ("xreadgroup", &mut xreadgroup),
        ("xread", &mut xread),
        ("blpop", &mut blpop),
        ("wait", &mut wait),
        ("waitaof", &mut waitaof),
    ] {
        out.push(format!("{name}: {}", outcome(c)));
    }
    held.set_read_timeout(Duration::from_millis(300));
    out.push(format!(
        "held while paused: {:?}",
        held.read_reply().ok().map(|r| String::from_utf8_lossy(&r).into_owned())
    ));
    held.set_read_timeout(Duration::from_secs(30));
    step(&mut out, &mut admin, &["CLIENT", "UNPAUSE"]);
    out.push(format!("held after: {:?}", String::from_utf8_lossy(&held.read_reply().unwrap())));
    step(&mut out, &mut held, &["PING"]);
    out.extend(stats(&mut admin, &["xreadgroup", "xread", "blpop", "wait", "waitaof", "set"]));

    // A primary again, then a replica again.
    step(&mut out, &mut admin, &["REPLICAOF", "NO", "ONE"]);
    let mut xreadgroup = block(&server, &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    let mut blpop = block(&server, &["BLPOP", "l", "0"]);
    let mut writer = server.connect();
    step(&mut out, &mut writer, &["SET", "w", "1"]);
    let writer_id = String::from_utf8_lossy(&writer.cmd(&["CLIENT", "ID"])).trim_start_matches(':').trim().to_string();
    writer.send_command(&[b"WAIT", b"1", b"0"]).unwrap();
    taken(&server, &writer_id, "WAIT");
    step(&mut out, &mut admin, &["REPLICAOF", "127.0.0.1", &elsewhere]);
    for (name, c) in [("xreadgroup", &mut xreadgroup), ("blpop", &mut blpop), ("wait after a write", &mut writer)] {
        out.push(format!("{name}: {}", outcome(c)));
    }

    // A replica blocked in XREAD: the same primary again changes nothing; another one does.
    let mut xread = block(&server, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    step(&mut out, &mut admin, &["REPLICAOF", "127.0.0.1", &elsewhere]);
    xread.set_read_timeout(Duration::from_millis(300));
    out.push(format!(
        "xread, same primary: {:?}",
        xread.read_reply().ok().map(|r| String::from_utf8_lossy(&r).into_owned())
    ));
    step(&mut out, &mut admin, &["REPLICAOF", "127.0.0.1", &further]);
    out.push(format!("xread, another primary: {}", outcome(&mut xread)));
    out.extend(stats(&mut admin, &["xreadgroup", "xread", "blpop", "wait", "waitaof"]));
    step(&mut out, &mut admin, &["REPLICAOF", "NO", "ONE"]);
    out.into_iter()
        .map(|l| l.replace(&nowhere, "NOWHERE").replace(&elsewhere, "ELSEWHERE").replace(&further, "FURTHER"))
        .collect()
}

#[test]
fn becoming_a_replica_unblocks_blocked_clients_as_redis_does() {
    let (kind, binary) = Server::subject_binary();
    let ours = demotion_steps(kind, &binary);
    let unblocked = "\"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\\r\\n\" closed=true";
    assert!(ours.contains(&format!("xreadgroup: {unblocked}")), "{ours:#?}");
    assert!(ours.contains(&format!("xread, another primary: {unblocked}")), "{ours:#?}");
    // Each WAIT / WAITAOF is one call here. Redis counts a WAIT or WAITAOF ended by an error
    // twice (`unblockClientOnError` and `unblockClientWaitingReplicas` both count the call):
    // rill does not copy that; their failed calls and errors are compared.
    assert!(ours.contains(&"wait: Some(\"calls=2,rejected_calls=0,failed_calls=2\")".to_string()), "{ours:#?}");
    assert!(ours.contains(&"waitaof: Some(\"calls=1,rejected_calls=0,failed_calls=1\")".to_string()), "{ours:#?}");
    let Some(redis) = ReferenceServer::Redis8.require() else { return };
    let theirs = demotion_steps(ServerKind::Redis(ReferenceServer::Redis8), &redis);
    assert!(theirs.contains(&"wait: Some(\"calls=4,rejected_calls=0,failed_calls=2\")".to_string()), "{theirs:#?}");
    let without_wait_calls = |steps: Vec<String>| -> Vec<String> {
        steps.into_iter().map(|l| if l.starts_with("wait") { without_calls(&l) } else { l }).collect()
    };
    assert_eq!(without_wait_calls(ours), without_wait_calls(theirs));
}

/// A commandstats line without its `calls=N`.
fn without_calls(line: &str) -> String {
    match (line.find("calls="), line.find(",rejected_calls")) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &line[..a], &line[b + 1..]),
        _ => line.to_string(),
    }
}

#[test]
fn failover_unblocks_a_blocked_xreadgroup_on_the_old_primary() {
    let a_server = Server::rill();
    let b_server = Server::rill();
    let (mut a, mut b) = (a_server.connect(), b_server.connect());
    assert_eq!(a.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]), b"+OK\r\n");
    assert_eq!(b.cmd(&["REPLICAOF", "127.0.0.1", &a_server.port.to_string()]), b"+OK\r\n");
    wait_caught_up(&mut a, &mut b);
    let mut reader = block(&a_server, &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    assert_eq!(a.cmd(&["FAILOVER"]), b"+OK\r\n");
    assert_eq!(
        outcome(&mut reader),
        "\"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\\r\\n\" closed=true"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut b, "replication", "role").as_deref() != Some("master")
        || info_field(&mut a, "replication", "master_failover_state").as_deref() != Some("no-failover")
    {
        assert!(Instant::now() < deadline, "the failover did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The new primary's entry reaches the old one's group untouched: nobody reads it there.
    assert!(b.cmd(&["XADD", "s", "*", "f", "v"]).starts_with(b"$"));
    wait_caught_up(&mut b, &mut a);
    assert_eq!(a.cmd(&["XPENDING", "s", "g"]), b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n");
    assert_equal(&mut b, &mut a, "after the failover");
    let errors = String::from_utf8_lossy(a.cmd_value(&["INFO", "errorstats"]).as_bytes().unwrap()).into_owned();
    assert!(errors.contains("errorstat_UNBLOCKED:count=1"), "{errors}");
}

/// A client waiting in WAIT or WAITAOF is a blocked client, as Redis counts it: INFO
/// `blocked_clients` and CLIENT LIST's flag `b`; and a client released by `CLIENT UNBLOCK ...
/// ERROR` has a failed call of its command besides the `UNBLOCKED` error. Compared with Redis
/// 8.2.3.
#[test]
fn a_wait_is_a_blocked_client_and_an_unblock_error_a_failed_call_as_in_redis() {
    let Some(redis) = ReferenceServer::Redis8.require() else { return };
    let steps = |kind: ServerKind, binary: &std::path::Path| -> Vec<String> {
        let server = Server::start(kind, binary, &[]);
        let mut admin = server.connect();
        let mut out = Vec::new();
        let mut wait = block(&server, &["WAIT", "1", "0"]);
        let wait_id = wait_id_of(&mut admin, "wait");
        out.push(format!("blocked_clients:{:?}", info_field(&mut admin, "clients", "blocked_clients")));
        out.push(format!("flags of the waiting client: {}", flags_of(&mut admin, &wait_id)));
        let mut blpop = block(&server, &["BLPOP", "l", "0"]);
        out.push(format!("blocked_clients:{:?}", info_field(&mut admin, "clients", "blocked_clients")));
        let blpop_id = wait_id_of(&mut admin, "blpop");
        out.push(format!(
            "unblock: {:?}",
            String::from_utf8_lossy(&admin.cmd(&["CLIENT", "UNBLOCK", &blpop_id, "ERROR"]))
        ));
        out.push(format!("blpop got: {:?}", String::from_utf8_lossy(&blpop.read_reply().unwrap())));
        out.extend(stats(&mut admin, &["blpop"]));
        drop(wait.send(b""));
        out
    };
    let (kind, binary) = Server::subject_binary();
    let ours = steps(kind, &binary);
    let theirs = steps(ServerKind::Redis(ReferenceServer::Redis8), &redis);
    assert_eq!(ours, theirs);
}

/// The id of the client whose last command is `cmd` (CLIENT LIST).
fn wait_id_of(admin: &mut RawClient, cmd: &str) -> String {
    let list = String::from_utf8_lossy(admin.cmd_value(&["CLIENT", "LIST"]).as_bytes().unwrap()).into_owned();
    let line = list.lines().find(|l| l.contains(&format!(" cmd={cmd} "))).unwrap_or_else(|| panic!("{list}"));
    line.split(' ').find_map(|f| f.strip_prefix("id=")).unwrap().to_string()
}

/// CLIENT LIST's flags of client `id`.
fn flags_of(admin: &mut RawClient, id: &str) -> String {
    let list = String::from_utf8_lossy(admin.cmd_value(&["CLIENT", "LIST", "ID", id]).as_bytes().unwrap()).into_owned();
    list.split(' ').find_map(|f| f.strip_prefix("flags=")).unwrap_or_default().to_string()
}
