//! Per-client memory limits and stuck clients: a client that does not read (its requests run,
//! as in Redis), `client-output-buffer-limit`, `client-query-buffer-limit` (with a MULTI queue), CLIENT KILL
//! and `timeout` against a client whose write is stuck, and replies whose size is not bounded
//! by the data (`SRANDMEMBER key -N`). Memory is measured as the server's RSS from
//! /proc/PID/status.

use rill_testkit::{encode_command, escape, RawClient, ReferenceServer, Server, ServerKind};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One value the stuck clients ask for over and over.
const VALUE_BYTES: usize = 1_000_000;
/// GETs each stuck client pipelines: ~2 GB of replies it never reads.
const PIPELINED_GETS: usize = 2000;
/// What the server may grow by while clients hold ~2 GB each of unread replies.
const RSS_GROWTH_BOUND_MB: u64 = 150;

/// The server's resident memory in MiB.
pub(super) fn rss_mb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb / 1024
}

pub(super) fn text(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply).into_owned()
}

/// The CLIENT LIST line of client `id`, if listed.
pub(super) fn client_line(c: &mut RawClient, id: u64) -> Option<String> {
    let list = text(&c.cmd(&["CLIENT", "LIST"]));
    list.lines().find(|l| l.starts_with(&format!("id={id} "))).map(str::to_string)
}

/// A field of a CLIENT LIST line.
pub(super) fn field(line: &str, name: &str) -> u64 {
    let prefix = format!("{name}=");
    line.split(' ').find_map(|f| f.strip_prefix(prefix.as_str())).unwrap().parse().unwrap()
}

/// An INFO field.
pub(super) fn info(c: &mut RawClient, name: &str) -> String {
    let all = text(&c.cmd(&["INFO", "stats"]));
    all.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or("").trim().to_string()
}

/// Wait until `cond` holds, polling every 50 ms; false after `limit`.
pub(super) fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// A client that pipelines `PIPELINED_GETS` GETs of the big value and never reads; its id.
fn stuck_client(server: &Server) -> (RawClient, u64) {
    let mut c = server.connect();
    let id = text(&c.cmd(&["CLIENT", "ID"])).trim_start_matches(':').trim().parse().unwrap();
    let one = encode_command(&[b"GET", b"big"]);
    c.send(&one.repeat(PIPELINED_GETS)).unwrap();
    (c, id)
}

fn set_big_value(c: &mut RawClient) {
    let value = vec![b'v'; VALUE_BYTES];
    assert_eq!(c.request(&[b"SET", b"big", &value]).unwrap(), b"+OK\r\n");
}

/// Wait until client `id` has stopped running commands (all it sent ran).
fn wait_stuck(c: &mut RawClient, id: u64) {
    let mut last = u64::MAX;
    let settled = eventually(Duration::from_secs(20), || {
        let Some(line) = client_line(c, id) else {
            return false;
        };
        let cmds = field(&line, "tot-cmds");
        let same = cmds == last;
        last = cmds;
        std::thread::sleep(Duration::from_millis(300));
        same
    });
    assert!(settled, "client {id} never settled");
}

#[test]
fn a_client_that_does_not_read_is_closed_at_its_hard_limit() {
    let server = Server::rill_with(&["--client-output-buffer-limit", "normal 8mb 0 0"]);
    let mut admin = server.connect();
    set_big_value(&mut admin);
    let before = rss_mb(server.pid());
    let (mut victim, id) = stuck_client(&server);
    let gone = eventually(Duration::from_secs(20), || client_line(&mut admin, id).is_none());
    assert!(gone, "client over its hard limit still listed: {:?}", client_line(&mut admin, id));
    assert!(
        rss_mb(server.pid()) < before + RSS_GROWTH_BOUND_MB,
        "RSS grew from {before} MB to {} MB",
        rss_mb(server.pid())
    );
    // Others are served, the closing is counted and logged as Redis does.
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(info(&mut admin, "client_output_buffer_limit_disconnections"), "1");
    assert!(
        server.log().contains("scheduled to be closed ASAP for overcoming of output buffer limits."),
        "{}",
        server.log()
    );
    let (_, closed) = victim.read_until_close(Duration::from_secs(5));
    assert!(closed, "the victim's socket stays open");
}

/// A client that does not read has every request it sent run, as in Redis, its replies held
/// until it reads them; replies of a stored value share it (RSS stays put while each client
/// holds ~2 GB of replies), CLIENT LIST counts them, and the others are served meanwhile.
#[test]
fn clients_that_do_not_read_have_every_request_run_and_share_the_stored_value() {
    let server = Server::rill();
    let mut admin = server.connect();
    set_big_value(&mut admin);
    let before = rss_mb(server.pid());
    let stuck: Vec<(RawClient, u64)> = (0..3).map(|_| stuck_client(&server)).collect();
    for (_, id) in &stuck {
        wait_stuck(&mut admin, *id);
    }
    let after = rss_mb(server.pid());
    assert!(after < before + RSS_GROWTH_BOUND_MB, "RSS grew from {before} MB to {after} MB");
    for (_, id) in &stuck {
        let line = client_line(&mut admin, *id).unwrap();
        // CLIENT ID, then every GET.
        assert_eq!(field(&line, "tot-cmds"), PIPELINED_GETS as u64 + 1, "{line}");
        let pending = field(&line, "omem");
        assert!(pending > (PIPELINED_GETS as u64 / 2) * VALUE_BYTES as u64, "{line}");
        assert!(field(&line, "omem-shared") > 0, "{line}");
    }
    let started = Instant::now();
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// The same with a blocking command inside the pipeline: while it waits (here for its timeout),
/// the replies before it are written and the requests after it read, as Redis does.
#[test]
fn a_pipeline_with_a_blocking_command_written_whole_before_any_reply_is_read_gets_every_reply() {
    const BEFORE: usize = 300_000;
    const AFTER: usize = 600_000;
    let get = encode_command(&[b"GET", b"k"]);
    let mut pipeline = get.repeat(BEFORE);
    pipeline.extend(encode_command(&[b"BLPOP", b"nothing", b"1"]));
    pipeline.extend(get.repeat(AFTER));
    // BLPOP times out with a null array.
    let expected = (BEFORE + AFTER) * GET_REPLY.len() + b"*-1\r\n".len();
    write_whole_then_read(&pipeline, expected);
}

/// A client that writes its whole pipeline before it reads a reply (redis-py's pipelines do)
/// gets every reply, from rill as from Redis: the server keeps reading while replies wait. When
/// rill stopped reading such a client until it read, both waited for ever once the pipeline
/// and its replies outgrew the sockets' buffers.
#[test]
fn a_pipeline_written_whole_before_any_reply_is_read_gets_every_reply() {
    const GETS: usize = 1_000_000;
    write_whole_then_read(&encode_command(&[b"GET", b"k"]).repeat(GETS), GETS * GET_REPLY.len());
}

/// A client served while it blocks (BLPOP) gets a reply bigger than the socket takes, written
/// straight into its socket by the client that served it; it then writes a pipeline before it
/// reads anything. From rill as from Redis 8.2.3 it gets every reply: the reply's tail waits
/// while its requests are read. rill wrote the tail whole before reading again, and both
/// waited for ever.
#[test]
fn a_client_whose_served_blocking_reply_waits_is_still_read() {
    const VALUE_BYTES: usize = 20 << 20;
    const GETS: usize = 1_000_000;
    for server in &rill_and_redis() {
        let mut admin = server.connect();
        assert_eq!(admin.cmd(&["SET", "k", "0123456789"]), b"+OK\r\n");
        let mut reader = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        reader.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut writer = reader.try_clone().unwrap();
        writer.write_all(&encode_command(&[b"BLPOP", b"l", b"0"])).unwrap();
        super::common::wait_blocked(&mut admin, 1);
        let value = vec![b'v'; VALUE_BYTES];
        assert_eq!(admin.request(&[b"LPUSH", b"l", &value]).unwrap(), b":1\r\n");
        write_unread(writer, encode_command(&[b"GET", b"k"]).repeat(GETS), server);
        let head = format!("*2\r\n$1\r\nl\r\n${VALUE_BYTES}\r\n");
        let expected = head.len() + VALUE_BYTES + 2 + GETS * b"$10\r\n0123456789\r\n".len();
        let mut all = vec![0u8; expected];
        std::io::Read::read_exact(&mut reader, &mut all).unwrap();
        assert!(all.starts_with(head.as_bytes()), "{}", server.label());
        assert!(all.ends_with(b"$10\r\n0123456789\r\n"), "{}", server.label());
        assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    }
}

/// A subscriber that writes commands while the messages pushed to it wait for it to read, and
/// reads only once all are written, gets every message and every reply, from rill as from
/// Redis 8.2.3: the server keeps reading it while its pushes wait. rill stopped reading such a
/// client until its pushes were written, and both waited for ever.
#[test]
fn a_subscriber_that_writes_before_it_reads_gets_every_message_and_reply() {
    const MESSAGES: usize = 4000;
    const PINGS: usize = 1_000_000;
    let payload = vec![b'm'; 1000];
    let message = [&b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1000\r\n"[..], &payload, b"\r\n"].concat();
    let pong: &[u8] = b"*2\r\n$4\r\npong\r\n$0\r\n\r\n";
    for server in &rill_and_redis() {
        let mut admin = server.connect();
        let limits = admin.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 0 0"]);
        assert_eq!(limits, b"+OK\r\n");
        let mut reader = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        reader.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut writer = reader.try_clone().unwrap();
        writer.write_all(&encode_command(&[b"SUBSCRIBE", b"ch"])).unwrap();
        let subscribed = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
        let mut got = vec![0u8; subscribed.len()];
        std::io::Read::read_exact(&mut reader, &mut got).unwrap();
        assert_eq!(got, subscribed, "{}", server.label());
        // More than the sockets hold: the server's pushes wait for the subscriber to read.
        for _ in 0..MESSAGES {
            assert_eq!(admin.request(&[b"PUBLISH", b"ch", &payload]).unwrap(), b":1\r\n");
        }
        write_unread(writer, encode_command(&[b"PING"]).repeat(PINGS), server);
        let expected = [message.repeat(MESSAGES), pong.repeat(PINGS)].concat();
        let mut all = vec![0u8; expected.len()];
        std::io::Read::read_exact(&mut reader, &mut all).unwrap();
        assert!(all == expected, "{}: the messages and replies differ", server.label());
        assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    }
}

/// rill, and Redis 8.2.3 where it is installed: the servers a behaviour is compared on.
fn rill_and_redis() -> Vec<Server> {
    let mut servers = vec![Server::rill()];
    if let Some(redis) = Server::reference(ReferenceServer::Redis8) {
        servers.push(redis);
    }
    servers
}

/// Write `bytes` whole to `writer` from another thread before anything is read: fails if the
/// server stops reading them (it waits for the client to read its replies first).
fn write_unread(mut writer: TcpStream, bytes: Vec<u8>, server: &Server) {
    let (done, wrote) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(writer.write_all(&bytes).is_ok());
    });
    let label = server.label();
    assert_eq!(wrote.recv_timeout(Duration::from_secs(60)), Ok(true), "{label}: the server stopped reading");
}

/// The reply to `GET k` in [`write_whole_then_read`].
const GET_REPLY: &str = concat!(
    "$100\r\n",
    "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",
    "\r\n"
);

/// Against rill and Redis 8.2.3: with `k` holding 100 bytes, write `pipeline` whole (from
/// another thread, failing if the server stops reading it), then read `expected` bytes of
/// replies, the first a `GET k`'s.
fn write_whole_then_read(pipeline: &[u8], expected: usize) {
    for server in &rill_and_redis() {
        let mut admin = server.connect();
        let value = vec![b'v'; 100];
        assert_eq!(admin.request(&[b"SET", b"k", &value]).unwrap(), b"+OK\r\n");
        let mut reader = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let writer = reader.try_clone().unwrap();
        write_unread(writer, pipeline.to_vec(), server);
        reader.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut got = 0;
        let mut buf = vec![0u8; 1 << 20];
        let mut first = Vec::new();
        while got < expected {
            let n = std::io::Read::read(&mut reader, &mut buf).unwrap();
            assert!(n > 0, "{}: closed after {got} of {expected} bytes", server.label());
            if first.len() < GET_REPLY.len() {
                first.extend_from_slice(&buf[..n.min(GET_REPLY.len() - first.len())]);
            }
            got += n;
        }
        assert_eq!(got, expected, "{}", server.label());
        assert_eq!(first, GET_REPLY.as_bytes(), "{}", server.label());
        assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn client_kill_frees_a_client_stuck_in_a_write() {
    let server = Server::rill();
    let mut admin = server.connect();
    set_big_value(&mut admin);
    let (mut victim, id) = stuck_client(&server);
    let (mut other, other_id) = stuck_client(&server);
    wait_stuck(&mut admin, id);
    wait_stuck(&mut admin, other_id);
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", &id.to_string()]), b":1\r\n");
    // Gone at once for CLIENT LIST, and its task really ends: the socket is closed.
    assert_eq!(client_line(&mut admin, id), None);
    let (_, closed) = victim.read_until_close(Duration::from_secs(5));
    assert!(closed, "the killed client's socket stays open");
    // The other filter forms reach a stuck client too.
    let line = client_line(&mut admin, other_id).unwrap();
    let addr = line.split(' ').find_map(|f| f.strip_prefix("addr=")).unwrap().to_string();
    assert_eq!(admin.cmd(&["CLIENT", "KILL", &addr]), b"+OK\r\n");
    let (_, closed) = other.read_until_close(Duration::from_secs(5));
    assert!(closed, "the client killed by address stays open");
    let ids = text(&admin.cmd(&["CLIENT", "LIST"]));
    assert_eq!(ids.lines().filter(|l| l.starts_with("id=")).count(), 1, "{ids}");
}

#[test]
fn timeout_closes_idle_clients_stuck_writing_or_in_multi_but_not_blocked_ones() {
    let server = Server::rill_with(&["--timeout", "1"]);
    let mut admin = server.connect();
    set_big_value(&mut admin);
    let (mut victim, id) = stuck_client(&server);
    let client_id = |c: &mut RawClient| -> u64 { text(&c.cmd(&["CLIENT", "ID"]))[1..].trim().parse().unwrap() };
    let mut in_multi = server.connect();
    let multi_id = client_id(&mut in_multi);
    assert_eq!(in_multi.cmd(&["MULTI"]), b"+OK\r\n");
    let mut blocked = server.connect();
    let blocked_id = client_id(&mut blocked);
    blocked.send_command(&[b"BLPOP", b"nothing", b"0"]).unwrap();
    let gone = eventually(Duration::from_secs(10), || {
        admin.cmd(&["PING"]);
        client_line(&mut admin, id).is_none() && client_line(&mut admin, multi_id).is_none()
    });
    assert!(gone, "{}", text(&admin.cmd(&["CLIENT", "LIST"])));
    let (_, closed) = victim.read_until_close(Duration::from_secs(5));
    assert!(closed, "the timed-out client's socket stays open");
    let line = client_line(&mut admin, blocked_id).unwrap_or_default();
    assert!(line.contains("flags=b"), "blocked client closed by timeout: {line}");
    assert_eq!(admin.cmd(&["LPUSH", "nothing", "x"]), b":1\r\n");
    assert_eq!(blocked.read_reply().unwrap(), b"*2\r\n$7\r\nnothing\r\n$1\r\nx\r\n");
}

/// MULTI, then `n` SETs of 1 MB without reading; whether the server closed the connection.
fn queue_big_transaction(server: &Server, n: usize) -> bool {
    let mut c = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let value = vec![b'x'; VALUE_BYTES];
    if c.write_all(&encode_command(&[b"MULTI"])).is_err() {
        return true;
    }
    for i in 0..n {
        let key = format!("k{i}");
        if c.write_all(&encode_command(&[b"SET", key.as_bytes(), &value])).is_err() {
            return true;
        }
    }
    let _ = c.set_read_timeout(Some(Duration::from_secs(3)));
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match std::io::Read::read(&mut c, &mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn a_multi_queue_counts_toward_the_query_buffer_limit() {
    let args = ["--client-query-buffer-limit", "16mb"];
    let mut servers = vec![Server::rill_with(&args)];
    if let Some(path) = ReferenceServer::Redis8.require() {
        servers.push(Server::start(ServerKind::Redis(ReferenceServer::Redis8), &path, &args));
    }
    for server in &servers {
        assert!(!queue_big_transaction(server, 10), "{}: 10 MB of MULTI queue dropped", server.label());
        assert!(queue_big_transaction(server, 30), "{}: 30 MB of MULTI queue kept", server.label());
        let mut c = server.connect();
        assert_eq!(info(&mut c, "client_query_buffer_limit_disconnections"), "1", "{}", server.label());
        if server.kind == ServerKind::Rill {
            assert!(
                server.log().contains("Closing client that reached max query buffer length: id="),
                "{}",
                server.log()
            );
        }
    }
}

#[test]
fn srandmember_with_a_huge_negative_count_is_refused_before_it_is_built() {
    let server = Server::rill_with(&["--client-output-buffer-limit", "normal 64mb 0 0"]);
    let mut c = server.connect();
    assert_eq!(c.cmd(&["SADD", "s", "a", "b", "c"]), b":3\r\n");
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), b":1\r\n");
    // A sane count is answered as Redis answers it.
    let reply = c.cmd(&["SRANDMEMBER", "s", "-1000"]);
    assert!(reply.starts_with(b"*1000\r\n$1\r\n"), "{}", escape(&reply[..20]));
    let before = rss_mb(server.pid());
    // 30 million picks: ~200 MB encoded, more as a reply tree. Over the limit: closed.
    for cmd in [&["SRANDMEMBER", "s", "-30000000"][..], &["HRANDFIELD", "h", "-30000000", "WITHVALUES"]] {
        let mut victim = server.connect();
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        victim.send_command(&args).unwrap();
        let (got, closed) = victim.read_until_close(Duration::from_secs(20));
        assert!(closed && got.is_empty(), "{cmd:?}: {} bytes, closed {closed}", got.len());
    }
    assert!(rss_mb(server.pid()) < before + RSS_GROWTH_BOUND_MB, "RSS {before} MB -> {} MB", rss_mb(server.pid()));
    assert_eq!(c.cmd(&["SCARD", "s"]), b":3\r\n");
    assert_eq!(info(&mut c, "client_output_buffer_limit_disconnections"), "2");
}

#[test]
fn config_client_output_buffer_limit_like_redis() {
    let Some(path) = ReferenceServer::Redis8.require() else {
        return;
    };
    let start = ["--client-output-buffer-limit", "pubsub 1mb 2kb 3"];
    let rill = Server::rill_with(&start);
    let redis = Server::start(ServerKind::Redis(ReferenceServer::Redis8), &path, &start);
    let sets: &[&str] = &[
        "normal 1gb 512mb 10",
        "replica 1 2 3 slave 4 5 6",
        "NORMAL 1K 2KB 0 pubsub 3m 4MB 5",
        "",
        "normal 1 2",
        "master 1 2 3",
        "normal -1 0 0",
        "normal 1x 0 0",
        "normal 0 0 -1",
        "normal 0 0 1.5",
        "normal  0 0 0",
        "normal 1b 0 99999999999",
        "bogus 1 2 3 normal 7 7 7",
    ];
    let mut a = rill.connect();
    let mut b = redis.connect();
    let get = ["CONFIG", "GET", "client-output-buffer-limit"];
    assert_eq!(text(&a.cmd(&get)), text(&b.cmd(&get)), "at start-up");
    for value in sets {
        let set = ["CONFIG", "SET", "client-output-buffer-limit", value];
        assert_eq!(text(&a.cmd(&set)), text(&b.cmd(&set)), "CONFIG SET {value:?}");
        assert_eq!(text(&a.cmd(&get)), text(&b.cmd(&get)), "after CONFIG SET {value:?}");
    }
    assert_eq!(
        text(&a.cmd(&["CONFIG", "GET", "client-output-*"])),
        text(&b.cmd(&["CONFIG", "GET", "client-output-*"]))
    );
}

#[test]
fn client_list_reports_the_query_buffer_and_the_multi_queue() {
    let server = Server::rill();
    let mut admin = server.connect();
    let mut c = server.connect();
    let id: u64 = text(&c.cmd(&["CLIENT", "ID"]))[1..].trim().parse().unwrap();
    // An idle client holds no buffer of its own, as Redis reports one using its shared buffer.
    let line = client_line(&mut admin, id).unwrap();
    assert!(line.contains(" qbuf=0 qbuf-free=0 "), "{line}");
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "key", "value"]), b"+QUEUED\r\n");
    c.send(b"*3\r\n$3\r\nSET\r\n$2\r\na").unwrap();
    let partial = eventually(Duration::from_secs(5), || {
        let line = client_line(&mut admin, id).unwrap();
        field(&line, "qbuf") > 0 && field(&line, "qbuf-free") > 0
    });
    assert!(partial, "{:?}", client_line(&mut admin, id));
    let line = client_line(&mut admin, id).unwrap();
    assert_eq!(field(&line, "multi-mem"), 11, "{line}");
    assert!(field(&line, "tot-mem") >= field(&line, "qbuf") + field(&line, "qbuf-free"), "{line}");
}

#[test]
fn a_big_argument_gets_a_buffer_of_its_announced_size() {
    // As Redis (unit/querybuf "fat argv"): a bulk of 32 KiB or more is read into a buffer of
    // its own size as soon as its header arrives; the reservation is fallible and only the
    // bytes that arrive are touched.
    let server = Server::rill();
    let mut admin = server.connect();
    let mut c = server.connect();
    let id: u64 = text(&c.cmd(&["CLIENT", "ID"]))[1..].trim().parse().unwrap();
    c.send(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1000000\r\n").unwrap();
    let sized = eventually(Duration::from_secs(5), || {
        let line = client_line(&mut admin, id).unwrap();
        field(&line, "qbuf") + field(&line, "qbuf-free") > 1_000_000
    });
    assert!(sized, "{:?}", client_line(&mut admin, id));
    c.send(&vec![b'x'; 1_000_000]).unwrap();
    c.send(b"\r\n").unwrap();
    assert_eq!(c.read_reply().unwrap(), b"+OK\r\n");
    assert_eq!(text(&c.cmd(&["STRLEN", "a"])), ":1000000\r\n");
}

/// Client eviction (`maxmemory-clients`): the client holding the most memory is closed once
/// all clients together pass the limit; the others, and one with CLIENT NO-EVICT on, stay.
#[test]
fn maxmemory_clients_evicts_the_biggest_client_first() {
    let rill = rill_testkit::Server::rill_with(&["--maxmemory-clients", "1mb", "--hz", "50"]);
    let mut admin = rill.connect();
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "maxmemory-clients"]),
        b"*2\r\n$17\r\nmaxmemory-clients\r\n$7\r\n1048576\r\n"
    );
    let mut small = rill.connect();
    assert_eq!(small.cmd(&["PING"]), b"+PONG\r\n");
    let mut protected = rill.connect();
    assert_eq!(protected.cmd(&["CLIENT", "NO-EVICT", "on"]), b"+OK\r\n");
    // Two clients grow their query buffers past the limit with an unfinished 4 MB argument.
    let partial = |c: &mut rill_testkit::RawClient| {
        c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4194304\r\n")?;
        c.send(&vec![b'x'; 2 << 20])
    };
    let mut big = rill.connect();
    partial(&mut protected).unwrap();
    // The big client may be closed while its own bytes still arrive (it is the biggest
    // evictable one as soon as they pass the limit), so its send may end in a broken pipe.
    let _ = partial(&mut big);
    let (_, closed) = big.read_until_close(std::time::Duration::from_secs(5));
    assert!(closed, "the biggest evictable client is closed");
    let info = String::from_utf8_lossy(&admin.cmd(&["INFO", "stats"])).into_owned();
    assert!(info.contains("evicted_clients:1\r\n"), "{info}");
    assert_eq!(small.cmd(&["PING"]), b"+PONG\r\n");
    // The protected one finishes its command.
    protected.send(&vec![b'x'; 2 << 20]).unwrap();
    protected.send(b"\r\n").unwrap();
    assert_eq!(protected.read_reply().unwrap(), b"+OK\r\n");
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory-clients", "10%"]), b"+OK\r\n");
    assert_eq!(admin.cmd(&["CONFIG", "GET", "maxmemory-clients"]), b"*2\r\n$17\r\nmaxmemory-clients\r\n$3\r\n10%\r\n");
    assert!(admin.cmd(&["CONFIG", "SET", "maxmemory-clients", "101%"]).starts_with(b"-ERR"));
}

/// A client's watched keys and subscriptions count in its memory (CLIENT LIST `tot-mem`) and
/// so in client eviction, as in Redis: a client that WATCHes or SUBSCRIBEs without end is
/// evicted once they pass `maxmemory-clients`, and the others keep working.
#[test]
fn watched_keys_and_subscriptions_count_in_client_memory() {
    let rill = rill_testkit::Server::rill_with(&["--maxmemory-clients", "200000", "--hz", "50"]);
    let mut admin = rill.connect();
    assert_eq!(admin.cmd(&["CLIENT", "NO-EVICT", "on"]), b"+OK\r\n");
    let tot_mem = |admin: &mut rill_testkit::RawClient, name: &str| -> u64 {
        let list = String::from_utf8_lossy(&admin.cmd(&["CLIENT", "LIST"])).into_owned();
        let line = list.lines().find(|l| l.contains(&format!(" name={name} "))).unwrap_or_default().to_string();
        line.split(' ').find_map(|f| f.strip_prefix("tot-mem=")).map_or(0, |v| v.parse().unwrap())
    };
    for (name, command) in [("watcher", "WATCH"), ("subscriber", "SUBSCRIBE"), ("psubscriber", "PSUBSCRIBE")] {
        let mut c = rill.connect();
        assert_eq!(c.cmd(&["CLIENT", "SETNAME", name]), b"+OK\r\n");
        let before = tot_mem(&mut admin, name);
        for j in 0..100 {
            c.cmd(&[command, &format!("key:{j}")]);
        }
        let with_100 = tot_mem(&mut admin, name);
        assert!(with_100 >= before + 100 * 64, "{name}: tot-mem {before} -> {with_100} with 100 entries");
        // Without end: closed by the eviction, not by anything else.
        let mut closed = false;
        for j in 100..200_000 {
            let key = format!("key:{j}");
            if c.send_command(&[command.as_bytes(), key.as_bytes()]).is_err() || c.read_reply().is_err() {
                closed = true;
                break;
            }
        }
        assert!(closed, "{name} was not evicted");
        assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    }
    let info = String::from_utf8_lossy(&admin.cmd(&["INFO", "stats"])).into_owned();
    assert!(info.contains("evicted_clients:3\r\n"), "{info}");
}

/// A subscriber that stopped reading, over its `pubsub` soft limit, is closed once the limit's
/// seconds run out even when nothing is published any more (before, only the next PUBLISH
/// looked at the limit again, and a quiet channel kept it forever), and not before: Redis'
/// obuf-limits test "soft limit is not enforced too early and is enforced when no traffic".
/// The same for a RESP3 subscriber blocked in BLPOP meanwhile (its task waits for the release,
/// not for input).
#[test]
fn a_subscriber_over_its_soft_limit_is_closed_after_the_publishing_stopped() {
    let rill = rill_testkit::Server::rill();
    let mut admin = rill.connect();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 100000 3"]), b"+OK\r\n");
    for (closed, blocked) in [(1, false), (2, true)] {
        let mut sub = rill.connect();
        let name = format!("quiet{closed}");
        sub.cmd(&["CLIENT", "SETNAME", &name]);
        if blocked {
            sub.cmd(&["HELLO", "3"]);
        }
        sub.cmd(&["SUBSCRIBE", "ch"]);
        if blocked {
            sub.send_command(&[b"BLPOP", b"l", b"0"]).unwrap();
            super::common::wait_blocked(&mut admin, 1);
        }
        let omem = |admin: &mut RawClient| -> Option<u64> {
            let list = String::from_utf8_lossy(&admin.cmd(&["CLIENT", "LIST"])).into_owned();
            let line = list.lines().find(|l| l.contains(&format!(" name={name} ")))?.to_string();
            line.split(' ').find_map(|f| f.strip_prefix("omem=")).map(|v| v.parse().unwrap())
        };
        let message = "x".repeat(1000);
        let mut published = 0;
        while omem(&mut admin).is_some_and(|m| m <= 100_000) {
            admin.cmd(&["PUBLISH", "ch", &message]);
            published += 1;
            assert!(published < 100_000, "the subscriber's output never grew");
        }
        let over = std::time::Instant::now();
        // Still there two seconds on (the limit is 3 s, counted in whole seconds).
        std::thread::sleep(std::time::Duration::from_secs(2));
        assert!(omem(&mut admin).is_some(), "closed before its soft limit ran out (blocked: {blocked})");
        while omem(&mut admin).is_some() {
            let waited = over.elapsed();
            assert!(
                waited < std::time::Duration::from_secs(8),
                "still connected {waited:?} after (blocked: {blocked})"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let info = String::from_utf8_lossy(&admin.cmd(&["INFO", "stats"])).into_owned();
        assert!(info.contains(&format!("client_output_buffer_limit_disconnections:{closed}\r\n")), "{info}");
    }
}

/// Client eviction at the moments Redis evicts (`unit/client-eviction`): a client whose unread
/// replies grow past `maxmemory-clients` as soon as they do, never listed above it; one grown
/// by what is pushed to it (tracking invalidations redirected to it) with the cron paused; one
/// holding many tracking prefixes; and the clients over a lowered `maxmemory-clients` during
/// the CONFIG SET itself, biggest first.
#[test]
fn clients_are_evicted_when_their_replies_pushes_or_a_lower_limit_say_so() {
    const LIMIT: u64 = 3_000_000;
    let rill = Server::rill_with(&["--maxmemory-clients", &LIMIT.to_string(), "--enable-debug-command", "yes"]);
    let mut admin = rill.connect();
    assert_eq!(admin.cmd(&["CLIENT", "NO-EVICT", "on"]), b"+OK\r\n");
    let evicted = |admin: &mut RawClient| -> u64 { info(admin, "evicted_clients").parse().unwrap() };
    let id_of = |c: &mut RawClient| -> u64 { text(&c.cmd(&["CLIENT", "ID"]))[1..].trim().parse().unwrap() };

    // Replies it does not read: GETs of a 200 KB value, one at a time.
    assert_eq!(admin.cmd(&["SETRANGE", "k", "200000", "v"]), b":200001\r\n");
    let mut reader = rill.connect();
    let id = id_of(&mut reader);
    let mut gone = false;
    for _ in 0..1000 {
        match client_line(&mut admin, id) {
            Some(line) => assert!(field(&line, "tot-mem") < LIMIT, "{line}"),
            None => {
                gone = true;
                break;
            }
        }
        if reader.send_command(&[b"GET", b"k"]).is_err() {
            gone = eventually(Duration::from_secs(5), || client_line(&mut admin, id).is_none());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(gone, "the client whose replies grew past the limit is still there");
    assert_eq!(evicted(&mut admin), 1);

    // Pushed to: invalidations of a 200 KB key name, redirected to a client that never reads.
    assert_eq!(admin.cmd(&["DEBUG", "PAUSE-CRON", "1"]), b"+OK\r\n");
    let mut redirected = rill.connect();
    let redirected_id = id_of(&mut redirected);
    redirected.send_command(&[b"SUBSCRIBE", b"__redis__:invalidate"]).unwrap();
    let mut tracker = rill.connect();
    let redirect = redirected_id.to_string();
    assert_eq!(tracker.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &redirect, "BCAST"]), b"+OK\r\n");
    let long_key = "k".repeat(200 * 1024);
    for _ in 0..100 {
        let Some(line) = client_line(&mut admin, redirected_id) else { break };
        assert!(field(&line, "tot-mem") < LIMIT, "{line}");
        tracker.cmd(&["INCR", &long_key]);
    }
    assert_eq!(client_line(&mut admin, redirected_id), None, "the redirected client was not evicted");
    assert_eq!(evicted(&mut admin), 2);
    assert_eq!(admin.cmd(&["DEBUG", "PAUSE-CRON", "0"]), b"+OK\r\n");

    // Tracking prefixes count in a client's memory.
    let mut prefixes = rill.connect();
    let prefixes_id = id_of(&mut prefixes);
    let before = field(&client_line(&mut admin, prefixes_id).unwrap(), "tot-mem");
    for j in 0..100 {
        let p = format!("p{j:09}");
        assert_eq!(prefixes.cmd(&["CLIENT", "TRACKING", "on", "PREFIX", &p, "BCAST"]), b"+OK\r\n");
    }
    let after = field(&client_line(&mut admin, prefixes_id).unwrap(), "tot-mem");
    assert!(after >= before + 100 * 64, "tot-mem {before} -> {after} with 100 prefixes");

    // A lower limit evicts during the CONFIG SET, biggest first: two clients holding an
    // unfinished 1 MB argument go, the small one stays.
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory-clients", "0"]), b"+OK\r\n");
    let mut big: Vec<(RawClient, u64)> = (0..2)
        .map(|_| {
            let mut c = rill.connect();
            let id = id_of(&mut c);
            c.send(b"*2\r\n$1048576\r\n").unwrap();
            c.send(&vec![b'v'; 1 << 20]).unwrap();
            (c, id)
        })
        .collect();
    for (_, id) in &big {
        let full = eventually(Duration::from_secs(10), || {
            client_line(&mut admin, *id).is_some_and(|l| field(&l, "qbuf") >= 1 << 20)
        });
        assert!(full, "{:?}", client_line(&mut admin, *id));
    }
    let small_id = id_of(&mut prefixes);
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory-clients", "1000000"]), b"+OK\r\n");
    for (c, id) in &mut big {
        assert_eq!(client_line(&mut admin, *id), None, "a big client is still listed after CONFIG SET");
        let (_, closed) = c.read_until_close(Duration::from_secs(5));
        assert!(closed);
    }
    assert!(client_line(&mut admin, small_id).is_some());
    assert_eq!(evicted(&mut admin), 4);
}
