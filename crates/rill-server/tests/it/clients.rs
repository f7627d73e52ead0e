//! The `redis` crate (redis-rs 1.x), sync and async, RESP2 and RESP3, against the real binary.

use rill_testkit::{escape, Server};
use std::collections::HashMap;

fn url(server: &Server, resp3: bool) -> String {
    if resp3 {
        format!("{}?protocol=resp3", server.url())
    } else {
        server.url()
    }
}

fn sync_roundtrip(resp3: bool) {
    let server = Server::subject();
    let client = redis::Client::open(url(&server, resp3)).unwrap();
    let mut con = client.get_connection().unwrap();

    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let missing: Option<String> = redis::cmd("GET").arg("nope").query(&mut con).unwrap();
    assert_eq!(missing, None);

    let _: () = redis::cmd("HSET").arg("h").arg("a").arg(1).arg("b").arg(2).query(&mut con).unwrap();
    let all: HashMap<String, i64> = redis::cmd("HGETALL").arg("h").query(&mut con).unwrap();
    assert_eq!(all, HashMap::from([("a".to_owned(), 1), ("b".to_owned(), 2)]));

    // MULTI/EXEC through an atomic pipeline.
    let (n, s): (i64, String) = redis::pipe()
        .atomic()
        .cmd("INCRBY")
        .arg("n")
        .arg(41)
        .cmd("SET")
        .arg("s")
        .arg("x")
        .ignore()
        .cmd("INCR")
        .arg("n")
        .ignore()
        .cmd("GET")
        .arg("s")
        .query(&mut con)
        .unwrap();
    assert_eq!((n, s.as_str()), (41, "x"));

    // Errors keep their code.
    let err = redis::cmd("INCR").arg("h").query::<i64>(&mut con).unwrap_err();
    assert_eq!(err.code(), Some("WRONGTYPE"), "{err}");

    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    assert!(info.contains("redis_version:"), "{info}");
}

#[test]
fn sync_resp2() {
    sync_roundtrip(false);
}

#[test]
fn sync_resp3() {
    sync_roundtrip(true);
}

#[tokio::test]
async fn async_multiplexed_pipelining() {
    let server = Server::subject();
    for resp3 in [false, true] {
        let client = redis::Client::open(url(&server, resp3)).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.unwrap();
        // Many concurrent requests on one connection: replies must come back in order.
        let key = format!("counter{resp3}");
        let futures = (0..200).map(|_| {
            let mut con = con.clone();
            let key = key.clone();
            async move { redis::cmd("INCR").arg(&key).query_async::<i64>(&mut con).await.unwrap() }
        });
        let mut values: Vec<i64> = futures_join(futures).await;
        values.sort_unstable();
        assert_eq!(values, (1..=200).collect::<Vec<_>>());
        let total: i64 = redis::cmd("GET").arg(&key).query_async(&mut con).await.unwrap();
        assert_eq!(total, 200);
    }
}

/// Runs futures concurrently on the current task (no extra dependency for `join_all`).
async fn futures_join<F: std::future::Future<Output = i64> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<i64> {
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[test]
fn raw_client_sees_resp3_types() {
    let server = Server::subject();
    let mut c = server.connect();
    let hello = c.cmd_value(&["HELLO", "3"]);
    assert_eq!(hello.get("proto"), Some(&rill_testkit::Value::Int(3)), "{hello}");
    assert_eq!(hello.get("server"), Some(&rill_testkit::Value::Bulk(b"redis".to_vec())), "{hello}");
    assert_eq!(escape(&c.cmd(&["GET", "missing"])), escape(b"_\r\n"));
    assert_eq!(escape(&c.cmd(&["HSET", "h", "f", "v"])), escape(b":1\r\n"));
    assert_eq!(escape(&c.cmd(&["HGETALL", "h"])), escape(b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"));
    let info = c.cmd_value(&["INFO", "server"]);
    assert!(
        matches!(&info, rill_testkit::Value::Verbatim(f, body) if f == "txt" && body.starts_with(b"# Server\r\n")),
        "{info}"
    );
}

/// CLIENT KILL that selects the caller itself (SKIPME no, or its own address) answers it first
/// and then closes it, as Redis does; the others are closed at once. The same on Redis 8.2.3.
#[test]
fn client_kill_of_the_caller_answers_before_closing() {
    let rill = Server::rill();
    let redis =
        Server::reference(rill_testkit::ReferenceServer::Redis8).expect("Redis 8.2.3: run scripts/install-deps.sh");
    for server in [&rill, &redis] {
        let mut others: Vec<rill_testkit::RawClient> =
            (0..2).map(|_| rill_testkit::RawClient::connect(server.port)).collect();
        for o in &mut others {
            assert_eq!(o.cmd(&["PING"]), b"+PONG\r\n");
        }
        let mut me = rill_testkit::RawClient::connect(server.port);
        assert_eq!(me.cmd(&["CLIENT", "KILL", "SKIPME", "no"]), b":3\r\n", "port {}", server.port);
        let (rest, closed) = me.read_until_close(std::time::Duration::from_secs(5));
        assert!(rest.is_empty() && closed, "port {}: {rest:?}", server.port);
        for o in &mut others {
            let (_, closed) = o.read_until_close(std::time::Duration::from_secs(5));
            assert!(closed);
        }
        let mut me = rill_testkit::RawClient::connect(server.port);
        let addr = me.local_addr().unwrap().to_string();
        assert_eq!(me.cmd(&["CLIENT", "KILL", &addr]), b"+OK\r\n");
        let (rest, closed) = me.read_until_close(std::time::Duration::from_secs(5));
        assert!(rest.is_empty() && closed, "port {}: {rest:?}", server.port);
    }
}

fn client_field(line: &str, name: &str) -> u64 {
    let prefix = format!("{name}=");
    line.split(' ')
        .find_map(|f| f.trim().strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse()
        .unwrap()
}

fn client_line_of(c: &mut rill_testkit::RawClient, id: &str) -> String {
    let all = c.cmd_value(&["CLIENT", "LIST", "ID", id]);
    String::from_utf8(all.as_bytes().unwrap().to_vec()).unwrap()
}

/// The newest Redis' CLIENT LIST fields: `read-events` (reads from the socket), the pipeline
/// figures (commands per batch of input: one each when sent one at a time, all five when sent
/// together), and `omem-shared` / `omem-unshared` (of the output waiting, the part that
/// references the values it comes from: a large GET reply a client does not read; of that,
/// the part only the client still holds, its value deleted since).
#[test]
fn client_list_counts_reads_pipelines_and_shared_output() {
    let server = Server::rill();
    let mut admin = rill_testkit::RawClient::connect(server.port);
    let mut c = rill_testkit::RawClient::connect(server.port);
    let id = c.cmd_value(&["CLIENT", "ID"]);
    let id = match id {
        rill_testkit::Value::Int(n) => n.to_string(),
        other => panic!("{other}"),
    };
    let before = client_line_of(&mut admin, &id);
    for _ in 0..3 {
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
    let after = client_line_of(&mut admin, &id);
    let delta = |f: &str| client_field(&after, f) - client_field(&before, f);
    assert!(delta("read-events") >= 3, "{before}\n{after}");
    assert_eq!(delta("avg-pipeline-len-sum"), 3);
    assert_eq!(delta("avg-pipeline-len-cnt"), 3);
    // Five at once.
    c.send(b"*1\r\n$4\r\nPING\r\n".repeat(5).as_slice()).unwrap();
    for _ in 0..5 {
        assert_eq!(c.read_reply().unwrap(), b"+PONG\r\n");
    }
    let last = client_line_of(&mut admin, &id);
    assert_eq!(client_field(&last, "avg-pipeline-len-sum") - client_field(&after, "avg-pipeline-len-sum"), 5, "{last}");
    assert!(client_field(&last, "avg-pipeline-len-cnt") - client_field(&after, "avg-pipeline-len-cnt") >= 1);

    // Readers that do not read: replies of 1 MB values wait, referenced, not copied. While
    // the values are stored they are shared with them; once deleted, the client alone holds
    // them (`omem-unshared`), as in the newest Redis.
    const VALUES: usize = 20;
    let big = "x".repeat(1 << 20);
    let mut readers = Vec::new();
    for delete in [false, true] {
        // Values of their own: the other reader's replies would share them too.
        let key = |i: usize| format!("big:{delete}:{i}");
        for i in 0..VALUES {
            assert_eq!(admin.cmd(&["SET", &key(i), &big]), b"+OK\r\n");
        }
        let gets: Vec<u8> =
            (0..VALUES).flat_map(|i| rill_testkit::encode_command(&[b"GET", key(i).as_bytes()])).collect();
        let mut slow = rill_testkit::RawClient::connect(server.port);
        let slow_id = match slow.cmd_value(&["CLIENT", "ID"]) {
            rill_testkit::Value::Int(n) => n.to_string(),
            other => panic!("{other}"),
        };
        let mut pipeline = gets.clone();
        if delete {
            for i in 0..VALUES {
                pipeline.extend(rill_testkit::encode_command(&[b"DEL", key(i).as_bytes()]));
            }
        }
        slow.send(&pipeline).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let line = client_line_of(&mut admin, &slow_id);
            let (omem, shared, unshared) =
                (client_field(&line, "omem"), client_field(&line, "omem-shared"), client_field(&line, "omem-unshared"));
            assert!(shared <= omem && unshared <= shared, "{line}");
            // How much waits depends on what the kernel's buffers took; whatever it is, the
            // payloads are referenced, and only the framing is copied.
            let all_ran = client_field(&line, "tot-cmds") as usize == 1 + VALUES * (1 + usize::from(delete));
            if all_ran && shared > 0 && omem - shared < 1024 && unshared == if delete { shared } else { 0 } {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "delete {delete}: {line}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        readers.push(slow);
    }
}

/// A client whose last request was EXEC shows `cmd=exec` in CLIENT LIST, not the last queued
/// command, as Redis (Redis' `unit/type/list` waits for exactly that).
#[test]
fn client_list_shows_exec_after_a_transaction() {
    let server = Server::subject();
    let mut admin = server.connect();
    let mut tx = server.connect();
    let id = match tx.cmd_value(&["CLIENT", "ID"]) {
        rill_testkit::Value::Int(n) => n.to_string(),
        other => panic!("{other}"),
    };
    assert_eq!(tx.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(tx.cmd(&["GET", "k"]), b"+QUEUED\r\n");
    assert_eq!(tx.cmd(&["EXEC"]), b"*1\r\n$-1\r\n");
    let line = client_line_of(&mut admin, &id);
    assert!(line.contains(" cmd=exec "), "{line}");
}

/// CLIENT LIST names clients in the order they connected (by id), as Redis does, whatever
/// order the server keeps them in; CLIENT LIST ID in the order the ids are given (twice if
/// given twice), and TYPE and ID do not combine. The same on Redis 8.2.3.
#[test]
fn client_list_is_in_connection_order() {
    let rill = Server::rill();
    let redis =
        Server::reference(rill_testkit::ReferenceServer::Redis8).expect("Redis 8.2.3: run scripts/install-deps.sh");
    for server in [&rill, &redis] {
        let mut clients: Vec<rill_testkit::RawClient> =
            (0..40).map(|_| rill_testkit::RawClient::connect(server.port)).collect();
        for c in &mut clients {
            assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
        }
        // Some leave, so a table that reuses room would show the later ones early.
        for gone in clients.drain(5..25) {
            drop(gone);
        }
        let ids = |reply: &[u8]| -> Vec<u64> {
            String::from_utf8_lossy(reply)
                .split(['\n', ' '])
                .filter_map(|f| f.strip_prefix("id="))
                .map(|v| v.parse().unwrap())
                .collect()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let listed = loop {
            let listed = ids(&clients[0].cmd(&["CLIENT", "LIST"]));
            if listed.len() == clients.len() || std::time::Instant::now() > deadline {
                break listed;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(listed.len(), clients.len(), "port {}", server.port);
        assert!(listed.windows(2).all(|w| w[0] < w[1]), "port {}: {listed:?}", server.port);
        let mut wanted: Vec<String> = listed.iter().rev().take(10).map(|id| id.to_string()).collect();
        wanted.reverse();
        wanted.swap(0, 9);
        wanted.push(wanted[3].clone());
        wanted.push("999999".to_string());
        let mut args = vec!["CLIENT", "LIST", "ID"];
        args.extend(wanted.iter().map(String::as_str));
        let picked: Vec<String> = ids(&clients[0].cmd(&args)).iter().map(u64::to_string).collect();
        assert_eq!(picked, wanted[..11], "port {}", server.port);
        for bad in [&["CLIENT", "LIST", "TYPE", "normal", "ID", "1"][..], &["CLIENT", "LIST", "ID"]] {
            assert_eq!(clients[0].cmd(bad), b"-ERR syntax error\r\n", "port {}: {bad:?}", server.port);
        }
    }
}

/// A large reply in a transaction is this client's shared output while the transaction runs:
/// CLIENT LIST (`omem-shared`), INFO memory (`mem_clients_normal_shared`) and MEMORY STATS
/// (`clients.normal.shared`) of a later command in it count it, as the newest Redis does (its
/// replies are in the client's buffer as each command runs); once written, INFO shows none.
#[test]
fn a_transactions_large_replies_count_as_shared_output_while_it_runs() {
    let server = Server::rill();
    let mut c = rill_testkit::RawClient::connect(server.port);
    let size = 100_000;
    assert_eq!(c.cmd(&["SET", "bigkey", &"v".repeat(size)]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "refmem"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    for cmd in [&["GET", "bigkey"][..], &["CLIENT", "LIST"], &["INFO", "memory"], &["MEMORY", "STATS"]] {
        assert_eq!(c.cmd(cmd), b"+QUEUED\r\n");
    }
    let rill_testkit::Value::Array(replies) = c.cmd_value(&["EXEC"]) else { panic!("EXEC") };
    let text = |v: &rill_testkit::Value| match v {
        rill_testkit::Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("{other}"),
    };
    let list = text(&replies[1]);
    let line = list.lines().find(|l| l.contains(" name=refmem ")).unwrap();
    assert!(client_field(line, "omem-shared") >= size as u64, "{line}");
    assert_eq!(client_field(line, "omem-unshared"), 0, "{line}");
    let info = text(&replies[2]);
    let field = |name: &str| -> u64 {
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap().trim().parse().unwrap()
    };
    assert!(field("mem_clients_normal_shared") >= size as u64, "{info}");
    assert_eq!(field("mem_clients_normal_unshared"), 0, "{info}");
    let rill_testkit::Value::Array(stats) = &replies[3] else { panic!("MEMORY STATS") };
    let stat = |name: &str| {
        let at =
            stats.iter().position(|v| matches!(v, rill_testkit::Value::Bulk(b) if b.as_slice() == name.as_bytes()));
        match at.and_then(|i| stats.get(i + 1)) {
            Some(rill_testkit::Value::Int(n)) => *n,
            other => panic!("{name}: {other:?}"),
        }
    };
    assert!(stat("clients.normal.shared") >= size as i64);
    assert_eq!(stat("clients.normal.unshared"), 0);
    // Written: nothing shared any more.
    let info = String::from_utf8_lossy(&c.cmd(&["INFO", "memory"])).into_owned();
    assert!(info.contains("mem_clients_normal_shared:0\r\n"), "{info}");
}
