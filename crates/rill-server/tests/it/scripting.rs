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

/// MULTI while a script runs past the threshold is answered at once, as Redis runs it between
/// the script's slices: the commands queued meanwhile are refused BUSY, which dooms the
/// transaction, and nothing of it runs.
#[test]
fn multi_during_a_busy_script_opens_a_doomed_transaction() {
    let dir = TempDir::new("script-busy-multi");
    let server = Proc::start(dir.path(), &[]);
    let mut admin = server.client();
    admin.cmd(&["CONFIG", "SET", "lua-time-limit", "10"]);
    admin.cmd(&["SET", "xx", "1"]);
    let mut runner = server.client();
    runner.send_command(&[b"EVAL", b"while true do end", b"0"]).unwrap();
    wait_until("BUSY", || text(admin.cmd(&["PING"])).starts_with("-BUSY"));
    let mut tx = server.client();
    tx.set_read_timeout(Duration::from_secs(2));
    assert_eq!(tx.cmd(&["MULTI"]), b"+OK\r\n", "answered while the script runs");
    assert_eq!(text(tx.cmd(&["MULTI"])), "-ERR MULTI calls can not be nested\r\n");
    assert!(text(tx.cmd(&["INCR", "xx"])).starts_with("-BUSY"));
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    runner.set_read_timeout(Duration::from_secs(10));
    assert!(text(runner.read_reply().unwrap()).contains("Script killed by user"));
    assert_eq!(tx.cmd(&["INCR", "xx"]), b"+QUEUED\r\n");
    assert_eq!(text(tx.cmd(&["EXEC"])), "-EXECABORT Transaction discarded because of previous errors.\r\n");
    assert_eq!(admin.cmd(&["GET", "xx"]), b"$1\r\n1\r\n", "none of the transaction ran");
    assert_eq!(tx.cmd(&["PING", "asdf"]), b"$4\r\nasdf\r\n", "the transaction is over");
    let stats = text(admin.cmd(&["INFO", "commandstats"]));
    assert!(stats.contains("cmdstat_multi:calls=2,"), "{stats}");
    let list = text(admin.cmd(&["CLIENT", "LIST"]));
    assert!(!list.contains("multi=0"), "{list}");
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

/// A library of one function `name` (flagged `no-writes`) that returns `value`.
fn library(lib: &str, name: &str, value: &str) -> String {
    format!(
        "#!lua name={lib}\nredis.register_function{{function_name='{name}', \
         callback=function() return '{value}' end, flags={{'no-writes'}}}}"
    )
}

/// FUNCTION LIST's library names, sorted.
fn library_names(c: &mut RawClient) -> Vec<String> {
    let list = text(c.cmd(&["FUNCTION", "LIST"]));
    let lines: Vec<&str> = list.split("\r\n").collect();
    // `library_name`, then the name's length line, then the name.
    let mut names: Vec<String> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| **l == "library_name")
        .filter_map(|(i, _)| lines.get(i + 2).map(|s| s.to_string()))
        .collect();
    names.sort();
    names
}

#[test]
fn functions_survive_a_restart_from_the_log_and_from_a_rewritten_base() {
    let dir = TempDir::new("functions-log");
    let server = Proc::start(dir.path(), &LOG);
    let port = server.port;
    let mut c = server.client();
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", &library("one", "f1", "first")]), b"$3\r\none\r\n");
    c.cmd(&["FUNCTION", "LOAD", &library("two", "f2", "second")]);
    c.cmd(&["FUNCTION", "LOAD", "REPLACE", &library("one", "f1", "first again")]);
    assert_eq!(c.cmd(&["FUNCTION", "DELETE", "two"]), b"+OK\r\n");
    // A function's writes are logged as the commands it ran, like a script's.
    c.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=w\nredis.register_function('w', function(k, a) return redis.call('set', k[1], a[1]) end)",
    ]);
    c.cmd(&["FCALL", "w", "1", "key", "value"]);
    drop(c);
    server.kill9();

    let server = Proc::start_on(dir.path(), port, &LOG);
    let mut c = server.client();
    assert_eq!(c.cmd(&["FCALL", "f1", "0"]), b"$11\r\nfirst again\r\n");
    assert_eq!(text(c.cmd(&["FCALL", "f2", "0"])), "-ERR Function not found\r\n");
    assert_eq!(c.cmd(&["GET", "key"]), b"$5\r\nvalue\r\n");
    assert_eq!(library_names(&mut c), ["one", "w"]);

    // Compacted: the libraries are in the new base (RDB FUNCTION2), a later load in the log.
    assert!(text(c.cmd(&["BGREWRITEAOF"])).starts_with('+'));
    wait_until("the rewrite", || text(c.cmd(&["INFO", "persistence"])).contains("aof_rewrite_in_progress:0"));
    c.cmd(&["FUNCTION", "LOAD", &library("three", "f3", "third")]);
    drop(c);
    server.kill9();

    let server = Proc::start_on(dir.path(), port, &LOG);
    let mut c = server.client();
    assert_eq!(library_names(&mut c), ["one", "three", "w"]);
    assert_eq!(c.cmd(&["FCALL_RO", "f3", "0"]), b"$5\r\nthird\r\n");
    let info = text(c.cmd(&["INFO", "memory"]));
    assert!(info.contains("number_of_libraries:3") && info.contains("number_of_functions:3"), "{info}");
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH"]), b"+OK\r\n");
    drop(c);
    server.kill9();
    let server = Proc::start_on(dir.path(), port, &LOG);
    let mut c = server.client();
    assert_eq!(c.cmd(&["FUNCTION", "LIST"]), b"*0\r\n");
}

/// A rill primary's libraries reach a Redis 8.2.3 replica and a rill replica: in the full
/// sync's snapshot (RDB FUNCTION2, read by Redis) and live (FUNCTION LOAD / DELETE / RESTORE
/// / FLUSH as Redis propagates them to Redis, rill's records to rill). And a Redis primary's
/// reach a rill replica, both ways too.
#[test]
fn functions_replicate_between_rill_and_redis_both_ways() {
    use rill_testkit::{ReferenceServer, Server, ServerKind};
    let Some(redis_bin) = ReferenceServer::Redis8.require() else { return };
    let dir = TempDir::new("functions-primary");
    let primary = Proc::start(dir.path(), &[]);
    let port = primary.port.to_string();
    let mut c = primary.client();
    // Long code: Redis compresses it in its snapshots; rill writes it plain, Redis reads both.
    let long = format!("{}\n{}", library("before", "early", "from the snapshot"), "-- padding ".repeat(200));
    c.cmd(&["FUNCTION", "LOAD", &long]);
    let redis =
        Server::start(ServerKind::Redis(ReferenceServer::Redis8), &redis_bin, &["--replicaof", "127.0.0.1", &port]);
    let replica_dir = TempDir::new("functions-replica");
    let rill_replica = Proc::start(replica_dir.path(), &["--replicaof", "127.0.0.1", &port]);
    let mut r = redis.connect();
    let mut rr = rill_replica.client();
    for (what, client) in [("Redis", &mut r), ("rill", &mut rr)] {
        wait_until(&format!("the {what} replica's full sync"), || {
            client.cmd(&["FCALL_RO", "early", "0"]) == b"$17\r\nfrom the snapshot\r\n"
        });
    }
    // Live: each change as its own command on Redis, as rill's records on rill.
    c.cmd(&["FUNCTION", "LOAD", &library("live", "later", "streamed")]);
    c.cmd(&["FUNCTION", "DELETE", "before"]);
    c.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=w\nredis.register_function('w', function(k, a) return redis.call('set', k[1], a[1]) end)",
    ]);
    c.cmd(&["FCALL", "w", "1", "key", "by function"]);
    let payload = c.cmd(&["FUNCTION", "DUMP"]);
    let payload = &payload[payload.iter().position(|&b| b == b'\n').unwrap_or(0) + 1..payload.len() - 2];
    c.cmd(&["FUNCTION", "FLUSH"]);
    c.send_command(&[b"FUNCTION", b"RESTORE", payload]).unwrap();
    assert_eq!(c.read_reply().unwrap(), b"+OK\r\n");
    assert_eq!(c.cmd(&["WAIT", "2", "5000"]), b":2\r\n");
    let want = (library_names(&mut c), c.cmd(&["GET", "key"]));
    assert_eq!(want.0, ["live", "w"]);
    for (what, client) in [("Redis", &mut r), ("rill", &mut rr)] {
        wait_until(&format!("the {what} replica to follow"), || {
            (library_names(client), client.cmd(&["GET", "key"])) == want
        });
        assert_eq!(client.cmd(&["FCALL_RO", "later", "0"]), b"$8\r\nstreamed\r\n", "{what}");
        assert!(text(client.cmd(&["FCALL", "w", "1", "key", "x"])).starts_with("-READONLY"), "{what}");
    }
    c.cmd(&["FUNCTION", "FLUSH"]);
    assert_eq!(c.cmd(&["WAIT", "2", "5000"]), b":2\r\n");
    for (what, client) in [("Redis", &mut r), ("rill", &mut rr)] {
        wait_until(&format!("the {what} replica's flush"), || client.cmd(&["FUNCTION", "LIST"]) == b"*0\r\n");
    }
    drop(rr);
    drop(rill_replica);

    // The other way: a Redis primary's libraries reach a rill replica.
    let mut rp = redis.connect();
    rp.cmd(&["REPLICAOF", "NO", "ONE"]);
    rp.cmd(&["FUNCTION", "LOAD", &long]);
    let from_redis_dir = TempDir::new("functions-from-redis");
    let rill_replica = Proc::start(from_redis_dir.path(), &["--replicaof", "127.0.0.1", &redis.port.to_string()]);
    let mut rr = rill_replica.client();
    wait_until("the full sync from Redis", || rr.cmd(&["FCALL_RO", "early", "0"]) == b"$17\r\nfrom the snapshot\r\n");
    rp.cmd(&["FUNCTION", "LOAD", &library("live", "later", "from redis")]);
    rp.cmd(&["FUNCTION", "DELETE", "before"]);
    wait_until("Redis' live FUNCTION LOAD and DELETE", || library_names(&mut rr) == ["live"]);
    assert_eq!(rr.cmd(&["FCALL_RO", "later", "0"]), b"$10\r\nfrom redis\r\n");
}

#[test]
fn function_stats_and_function_kill_while_a_function_runs() {
    let dir = TempDir::new("function-busy");
    let server = Proc::start(dir.path(), &[]);
    let mut admin = server.client();
    admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]);
    admin.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=spin\nredis.register_function('spin', function() local i = 0 while true do i = i + 1 end end)",
    ]);
    let mut runner = server.client();
    runner.send_command(&[b"FCALL", b"spin", b"0"]).unwrap();
    wait_until("BUSY", || text(admin.cmd(&["PING"])).starts_with("-BUSY"));
    assert_eq!(
        text(admin.cmd(&["PING"])),
        "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
    );
    let stats = text(admin.cmd(&["FUNCTION", "STATS"]));
    assert!(
        stats.starts_with("*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n0\r\n$11\r\nduration_ms\r\n:"),
        "{stats}"
    );
    assert!(stats.ends_with("$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"), "{stats}");
    assert!(text(admin.cmd(&["SCRIPT", "KILL"]))
        .starts_with("-BUSY Redis is busy running a script. You can only call FUNCTION KILL"));
    assert_eq!(admin.cmd(&["FUNCTION", "KILL"]), b"+OK\r\n");
    let killed = text(runner.read_reply().unwrap());
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2."),
        "{killed}"
    );
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(text(admin.cmd(&["FUNCTION", "KILL"])), "-NOTBUSY No scripts in execution right now.\r\n");
}

/// DEBUG RELOAD saves, empties and loads back keys and libraries; NOFLUSH fails on what is
/// there unless MERGE; a reload that changes the data (NOSAVE, NOFLUSH) is logged like any
/// write, so a restart finds what the reload left.
#[test]
fn debug_reload_round_trips_keys_and_libraries_and_logs_what_it_changes() {
    let dir = TempDir::new("debug-reload");
    let args = ["--appendonly", "yes", "--appendfsync", "always", "--enable-debug-command", "yes"];
    let server = Proc::start(dir.path(), &args);
    let port = server.port;
    let mut c = server.client();
    c.cmd(&["SET", "x", "1"]);
    c.cmd(&["SET", "ttl", "t", "EX", "1000"]);
    c.cmd(&["XADD", "s", "1-1", "f", "v"]);
    c.cmd(&["FUNCTION", "LOAD", &library("one", "f1", "first")]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "x"]), b"$1\r\n1\r\n");
    assert_eq!(c.cmd(&["FCALL", "f1", "0"]), b"$5\r\nfirst\r\n");
    let ttl = text(c.cmd(&["TTL", "ttl"]));
    assert!(ttl == ":1000\r\n" || ttl == ":999\r\n", "the TTL survives: {ttl}");
    // The snapshot now holds x, ttl, s and library one.
    assert_eq!(
        text(c.cmd(&["DEBUG", "RELOAD", "NOFLUSH"])),
        "-ERR Error trying to load the RDB dump, check server logs.\r\n"
    );
    assert_eq!(
        text(c.cmd(&["DEBUG", "RELOAD", "BAD"])),
        "-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n"
    );
    c.cmd(&["SET", "x", "changed"]);
    c.cmd(&["SET", "later", "kept"]);
    c.cmd(&["FUNCTION", "LOAD", &library("two", "f2", "second")]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]), b"+OK\r\n");
    let state =
        |c: &mut RawClient| (c.cmd(&["GET", "x"]), c.cmd(&["GET", "later"]), library_names(c), c.cmd(&["XLEN", "s"]));
    let want = (
        b"$1\r\n1\r\n".to_vec(),
        b"$4\r\nkept\r\n".to_vec(),
        vec!["one".to_string(), "two".to_string()],
        b":1\r\n".to_vec(),
    );
    assert_eq!(state(&mut c), want);
    drop(c);
    server.kill9();
    let server = Proc::start_on(dir.path(), port, &args);
    let mut c = server.client();
    assert_eq!(state(&mut c), want, "the reload's changes were logged");
    // NOSAVE alone: the old snapshot replaces everything, libraries included.
    assert_eq!(c.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["EXISTS", "later"]), b":0\r\n");
    assert_eq!(library_names(&mut c), ["one"]);
    drop(c);
    server.kill9();
    let server = Proc::start_on(dir.path(), port, &args);
    let mut c = server.client();
    assert_eq!(c.cmd(&["EXISTS", "later"]), b":0\r\n");
    assert_eq!(library_names(&mut c), ["one"]);
    assert_eq!(c.cmd(&["GET", "x"]), b"$1\r\n1\r\n");
}

/// While a script runs past the threshold, SHUTDOWN answers BUSY and SHUTDOWN NOSAVE ends the
/// process: the script's writes were never committed, everything acknowledged before is kept.
#[test]
fn shutdown_nosave_ends_a_busy_script_keeping_what_was_acknowledged() {
    let dir = TempDir::new("busy-shutdown");
    let mut server = Proc::start(dir.path(), &LOG);
    let port = server.port;
    let mut c = server.client();
    c.cmd(&["SET", "before", "kept"]);
    c.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]);
    c.send_command(&[b"EVAL", b"redis.call('set', 'during', 'lost') while true do end", b"0"]).unwrap();
    let mut other = server.client();
    wait_until("BUSY", || text(other.cmd(&["PING"])).starts_with("-BUSY"));
    assert_eq!(
        text(other.cmd(&["SHUTDOWN"])),
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    other.send_command(&[b"SHUTDOWN", b"NOSAVE"]).unwrap();
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "the server exited: {status:?}");
    drop(server);
    let server = Proc::start_on(dir.path(), port, &LOG);
    let mut c = server.client();
    assert_eq!(c.cmd(&["GET", "before"]), b"$4\r\nkept\r\n");
    assert_eq!(c.cmd(&["EXISTS", "during"]), b":0\r\n");
}

/// A script and a function given 20,000 keys and arguments (far more than Lua's stack holds
/// at once) see them all, in order, as Redis 8.2.3's do.
#[test]
fn scripts_and_functions_take_twenty_thousand_keys_and_arguments_as_redis() {
    use rill_testkit::{ReferenceServer, Server, ServerKind};
    let mut servers = vec![Server::start(ServerKind::Rill, &rill_testkit::rill_server_binary(), &[])];
    if let Some(bin) = ReferenceServer::Redis8.require() {
        servers.push(Server::start(ServerKind::Redis(ReferenceServer::Redis8), &bin, &[]));
    }
    let names: Vec<String> = (0..20_000).map(|i| format!("k{i}")).collect();
    let mut replies = Vec::new();
    for server in &servers {
        let mut c = RawClient::connect(server.port);
        let call = |c: &mut RawClient, head: &[&str]| {
            let mut args: Vec<&str> = head.to_vec();
            args.extend(names.iter().map(String::as_str));
            args.extend(["a", "b", "c"]);
            text(c.cmd(&args))
        };
        let eval = call(&mut c, &["EVAL", "return {#KEYS, #ARGV, KEYS[1], KEYS[20000], ARGV[1], ARGV[3]}", "20000"]);
        let lib = "#!lua name=big\nredis.register_function('big', function(k, a) \
                   return {#k, #a, k[1], k[20000], a[1], a[3]} end)";
        assert_eq!(text(c.cmd(&["FUNCTION", "LOAD", lib])), "$3\r\nbig\r\n");
        let fcall = call(&mut c, &["FCALL", "big", "20000"]);
        // The keys as arguments, none as keys.
        let none = call(&mut c, &["EVAL", "return {#KEYS, #ARGV, ARGV[20000], ARGV[20003]}", "0"]);
        replies.push((eval, fcall, none));
    }
    let want = "*6\r\n:20000\r\n:3\r\n$2\r\nk0\r\n$6\r\nk19999\r\n$1\r\na\r\n$1\r\nc\r\n";
    assert_eq!(replies[0].0, want);
    assert_eq!(replies[0].1, want);
    assert_eq!(replies[0].2, "*4\r\n:0\r\n:20003\r\n$6\r\nk19999\r\n$1\r\nc\r\n");
    if let Some(redis) = replies.get(1) {
        assert_eq!(&replies[0], redis, "rill and Redis 8.2.3 differ");
    }
}
