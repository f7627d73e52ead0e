//! Scripts as units of effects and busy scripts: a script's writes are logged and replicated
//! as the commands it ran, all or none (kill -9 during a script leaves none of its writes; one
//! that finished survives whole), a replica gets the effects (it never runs the script), and
//! a script that runs past `busy-reply-threshold` gets other clients BUSY — old and newly
//! connected ones — until SCRIPT KILL stops it, which it refuses once the script wrote. The
//! replies of scripts are compared with Redis in tests/diff/scripting.redis.

use rill_testkit::{Proc, RawClient, TempDir};
use std::time::{Duration, Instant};

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).into_owned()
}

const LOG: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

#[test]
fn a_script_is_one_unit_in_the_log_all_or_nothing_across_kill_9() {
    let dir = TempDir::new("script-unit");
    let server = Proc::start(dir.path(), &LOG);
    let port = server.port;
    let mut c = server.client();
    let done = text(c.cmd(&[
        "EVAL",
        "redis.call('set', KEYS[1], ARGV[1]) redis.call('incrby', KEYS[2], 5) \
         return redis.call('xadd', KEYS[3], '*', 'f', 'v')",
        "3",
        "a",
        "n",
        "s",
        "one",
    ]));
    assert!(done.starts_with('$'), "{done}");
    let stream_id = done.lines().nth(1).unwrap_or_default().to_string();

    // A script that wrote and then never ends: unkillable, and its write never committed.
    c.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]);
    c.send_command(&[b"EVAL", b"redis.call('set', 'half', 'written') while true do end", b"0"]).unwrap();
    let mut other = server.client();
    wait_until("BUSY from another client", || text(other.cmd(&["PING"])).starts_with("-BUSY"));
    assert!(text(other.cmd(&["SCRIPT", "KILL"])).starts_with("-UNKILLABLE Sorry the script already executed write"));
    drop(other);
    drop(c);
    server.kill9();

    let server = Proc::start_on(dir.path(), port, &LOG);
    let mut c = server.client();
    assert_eq!(c.cmd(&["GET", "a"]), b"$3\r\none\r\n");
    assert_eq!(c.cmd(&["GET", "n"]), b"$1\r\n5\r\n");
    let range = text(c.cmd(&["XRANGE", "s", "-", "+"]));
    assert!(range.contains(&stream_id), "the ID the script's XADD made, replayed: {range}");
    assert_eq!(c.cmd(&["EXISTS", "half"]), b":0\r\n", "a script cut short leaves none of its writes");
}

#[test]
fn busy_scripts_answer_other_clients_busy_until_script_kill() {
    let dir = TempDir::new("script-busy");
    let server = Proc::start(dir.path(), &[]);
    let mut admin = server.client();
    assert_eq!(text(admin.cmd(&["SCRIPT", "KILL"])), "-NOTBUSY No scripts in execution right now.\r\n");
    admin.cmd(&["CONFIG", "SET", "lua-time-limit", "50"]);
    admin.cmd(&["SET", "k", "v"]);

    let mut runner = server.client();
    runner.send_command(&[b"EVAL", b"local i = 0 while true do i = i + 1 end", b"0"]).unwrap();
    // A client connected before the script and one that connects while it runs both get BUSY.
    wait_until("BUSY", || text(admin.cmd(&["GET", "k"])).starts_with("-BUSY"));
    let mut late = RawClient::connect(server.port);
    assert_eq!(
        text(late.cmd(&["PING"])),
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(late.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    runner.set_read_timeout(Duration::from_secs(10));
    let killed = text(runner.read_reply().unwrap());
    assert!(killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "), "{killed}");
    assert!(killed.contains("on @user_script:1."), "{killed}");
    assert_eq!(admin.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
    // The script's connection serves the next script; the VM's hook is back to normal.
    assert_eq!(runner.cmd(&["EVAL", "return 1 + 1", "0"]), b":2\r\n");
    let info = text(admin.cmd(&["INFO", "errorstats"]));
    assert!(info.contains("errorstat_BUSY:count="), "{info}");
    // A pcall cannot catch the kill: the script is stopped at its next line.
    runner.send_command(&[b"EVAL", b"while true do pcall(function() while true do end end) end", b"0"]).unwrap();
    wait_until("BUSY again", || text(admin.cmd(&["PING"])).starts_with("-BUSY"));
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    assert!(text(runner.read_reply().unwrap()).contains("Script killed by user"));
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn a_replica_applies_a_scripts_effects_without_running_it() {
    let dir = TempDir::new("script-primary");
    let primary = Proc::start(dir.path(), &[]);
    let port = primary.port.to_string();
    let replica_dir = TempDir::new("script-replica");
    let replica = Proc::start(replica_dir.path(), &["--replicaof", "127.0.0.1", &port]);
    let mut c = primary.client();
    c.cmd(&["SADD", "pool", "a", "b", "c", "d"]);
    // Random and time-dependent choices: the replica must get what the script did.
    let reply = text(c.cmd(&[
        "EVAL",
        "local m = redis.call('spop', KEYS[1]) redis.call('set', 'picked', m) \
         redis.call('xadd', 'log', '*', 'picked', m) redis.call('expire', 'picked', 100) \
         return m",
        "1",
        "pool",
    ]));
    assert!(reply.starts_with('$'), "{reply}");
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    let picture = |c: &mut RawClient| {
        (
            c.cmd(&["SMEMBERS", "pool"]).len(),
            c.cmd(&["GET", "picked"]),
            c.cmd(&["XRANGE", "log", "-", "+"]),
            text(c.cmd(&["PEXPIRETIME", "picked"])),
        )
    };
    let want = picture(&mut c);
    let mut r = replica.client();
    wait_until("the replica to hold the script's effects", || picture(&mut r) == want);
    // The replica's commandstats show the commands the script ran, never EVAL.
    let stats = text(r.cmd(&["INFO", "commandstats"]));
    assert!(!stats.contains("cmdstat_eval:"), "{stats}");
    assert!(stats.contains("cmdstat_srem:") || stats.contains("cmdstat_spop:"), "{stats}");
}

#[test]
fn a_script_past_script_memory_limit_fails_and_the_vm_serves_the_next_one() {
    let dir = TempDir::new("script-memory");
    let server = Proc::start(dir.path(), &["--script-memory-limit", "8mb"]);
    let mut c = server.client();
    let grow = "redis.call('set', 'before', 'kept') local t = {} \
                for i = 1, 1e7 do t[i] = string.rep('x', 100) .. i end return #t";
    let failed = text(c.cmd(&["EVAL", grow, "0"]));
    assert!(failed.starts_with("-ERR Error running script f_") && failed.contains("not enough memory"), "{failed}");
    // The write before the failure stays, as any failing script's does.
    assert_eq!(c.cmd(&["GET", "before"]), b"$4\r\nkept\r\n");
    assert_eq!(c.cmd(&["EVAL", "return #string.rep('y', 1000)", "0"]), b":1000\r\n");
    let info = text(c.cmd(&["INFO", "memory"]));
    let lua: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_lua:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX);
    assert!(lua < 4 * 1024 * 1024, "the failed script's garbage was collected: {lua}");
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}

/// The README's reclaim-and-dead-letter script (examples/scripts/reclaim-dead-letter.lua)
/// runs unchanged on rill and on Redis 8.2.3, with the same results.
#[test]
fn the_readme_reclaim_and_dead_letter_script_runs_the_same_on_redis() {
    use rill_testkit::{ReferenceServer, Server, ServerKind};
    let path = rill_testkit::workspace_root().join("examples/scripts/reclaim-dead-letter.lua");
    let script = std::fs::read_to_string(&path).unwrap();
    let mut servers = vec![Server::start(ServerKind::Rill, &rill_testkit::rill_server_binary(), &[])];
    if let Some(bin) = ReferenceServer::Redis8.require() {
        servers.push(Server::start(ServerKind::Redis(ReferenceServer::Redis8), &bin, &[]));
    }
    let mut results = Vec::new();
    for server in &servers {
        let mut c = RawClient::connect(server.port);
        for (id, n) in [("1-0", "1"), ("2-0", "2"), ("3-0", "3")] {
            c.cmd(&["XADD", "orders", id, "n", n]);
        }
        c.cmd(&["XGROUP", "CREATE", "orders", "billing", "0"]);
        c.cmd(&["XREADGROUP", "GROUP", "billing", "crashed", "STREAMS", "orders", ">"]);
        // 1-0 has failed five times, 3-0 was deleted meanwhile: both leave the PEL.
        c.cmd(&["XCLAIM", "orders", "billing", "crashed", "0", "1-0", "3-0", "RETRYCOUNT", "5"]);
        c.cmd(&["XDEL", "orders", "3-0"]);
        std::thread::sleep(Duration::from_millis(30));
        let ran = c.cmd(&["EVAL", &script, "2", "orders", "orders:dlq", "billing", "worker", "20", "5", "100"]);
        let letters = text(c.cmd(&["XRANGE", "orders:dlq", "-", "+"]));
        // The dead letter's own ID is the server's clock: compare what follows it.
        let lines: Vec<&str> = letters.split("\r\n").collect();
        assert_eq!(lines.get(..2), Some(&["*1", "*2"][..]), "one dead letter: {letters}");
        let fields = lines.get(4..).unwrap_or_default().join("\r\n");
        results.push((ran, fields, c.cmd(&["XPENDING", "orders", "billing"])));
    }
    assert_eq!(text(results[0].0.clone()), "*2\r\n:2\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nn\r\n$1\r\n2\r\n");
    assert!(results[0].1.contains("$9\r\nsource-id\r\n$3\r\n1-0\r\n$10\r\ndeliveries"), "{}", results[0].1);
    assert_eq!(results[0].2, b"*4\r\n:1\r\n$3\r\n2-0\r\n$3\r\n2-0\r\n*1\r\n*2\r\n$6\r\nworker\r\n$1\r\n1\r\n");
    if let Some(redis) = results.get(1) {
        assert_eq!(&results[0], redis, "rill and Redis 8.2.3 differ");
    }
}
