//! Pub/Sub across connections: what one connection publishes reaches the subscribers of other
//! connections (channels, patterns, shard channels; RESP2 arrays and RESP3 pushes), a
//! subscriber that never reads is closed at its `client-output-buffer-limit pubsub` while the
//! others go on being served, and a client that goes away leaves nothing in the registry.
//! What one connection can check alone is in `tests/diff/pubsub.redis`, compared with Redis.

use super::client_limits::{eventually, info};
use rill_testkit::{RawClient, Server};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

fn text(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply).into_owned()
}

/// The encoded RESP2 or RESP3 frame of a message: `kind` (`*` or `>`) and bulk elements.
fn frame(kind: char, elements: &[&str]) -> Vec<u8> {
    let mut out = format!("{kind}{}\r\n", elements.len());
    for e in elements {
        out.push_str(&format!("${}\r\n{e}\r\n", e.len()));
    }
    out.into_bytes()
}

/// The CLIENT LIST lines of clients of `kind` (`normal`, `pubsub`, ...).
fn client_list(c: &mut RawClient, kind: &str) -> Vec<String> {
    let list = c.cmd_value(&["CLIENT", "LIST", "TYPE", kind]);
    text(list.as_bytes().unwrap()).lines().map(str::to_string).collect()
}

/// The CLIENT LIST line of client `id`.
fn client_list_id(c: &mut RawClient, id: &str) -> String {
    let list = c.cmd_value(&["CLIENT", "LIST", "ID", id]);
    text(list.as_bytes().unwrap()).trim_end().to_string()
}

/// An INFO field of any section.
fn info_field(c: &mut RawClient, section: &str, name: &str) -> String {
    let all = text(&c.cmd(&["INFO", section]));
    all.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or("").trim().to_string()
}

#[test]
fn publish_reaches_channel_and_pattern_subscribers_through_the_redis_crate() {
    let server = Server::subject();
    let client = redis::Client::open(server.url()).unwrap();
    let mut sub_con = client.get_connection().unwrap();
    let mut psub_con = client.get_connection().unwrap();
    let mut publisher = client.get_connection().unwrap();
    let mut sub = sub_con.as_pubsub();
    sub.subscribe("news").unwrap();
    let mut psub = psub_con.as_pubsub();
    psub.psubscribe("n?ws*").unwrap();
    for t in [&sub, &psub] {
        t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }

    let n: i64 = redis::cmd("PUBLISH").arg("news").arg("hello").query(&mut publisher).unwrap();
    assert_eq!(n, 2, "one channel subscriber and one pattern subscriber");
    let n: i64 = redis::cmd("PUBLISH").arg("nows.local").arg("x").query(&mut publisher).unwrap();
    assert_eq!(n, 1, "the pattern alone");
    let n: i64 = redis::cmd("PUBLISH").arg("sports").arg("y").query(&mut publisher).unwrap();
    assert_eq!(n, 0);

    let m = sub.get_message().unwrap();
    assert_eq!((m.get_channel_name(), m.get_payload::<String>().unwrap()), ("news", "hello".to_string()));
    let m = psub.get_message().unwrap();
    assert_eq!(m.get_pattern::<String>().unwrap(), "n?ws*");
    assert_eq!((m.get_channel_name(), m.get_payload::<String>().unwrap()), ("news", "hello".to_string()));
    let m = psub.get_message().unwrap();
    assert_eq!((m.get_channel_name(), m.get_payload::<String>().unwrap()), ("nows.local", "x".to_string()));

    let numsub: Vec<redis::Value> = redis::cmd("PUBSUB").arg("NUMSUB").arg("news").query(&mut publisher).unwrap();
    assert_eq!(numsub, vec![redis::Value::BulkString(b"news".to_vec()), redis::Value::Int(1)]);
    let numpat: i64 = redis::cmd("PUBSUB").arg("NUMPAT").query(&mut publisher).unwrap();
    assert_eq!(numpat, 1);
}

#[test]
fn shard_channels_and_resp3_pushes_byte_for_byte() {
    let server = Server::subject();
    let mut resp3 = server.connect();
    let mut resp2 = server.connect();
    let mut publisher = server.connect();
    resp3.cmd(&["HELLO", "3"]);
    assert_eq!(resp3.cmd(&["SSUBSCRIBE", "orders"]), b">3\r\n$10\r\nssubscribe\r\n$6\r\norders\r\n:1\r\n");
    assert_eq!(resp3.cmd(&["SUBSCRIBE", "orders"]), b">3\r\n$9\r\nsubscribe\r\n$6\r\norders\r\n:1\r\n");
    let id_reply = resp2.cmd(&["CLIENT", "ID"]);
    let resp2_id = text(&id_reply).trim_start_matches(':').trim().to_string();
    let confirmation = resp2.cmd(&["SSUBSCRIBE", "orders"]);
    assert_eq!(confirmation, b"*3\r\n$10\r\nssubscribe\r\n$6\r\norders\r\n:1\r\n");

    assert_eq!(publisher.cmd(&["SPUBLISH", "orders", "o-1"]), b":2\r\n");
    assert_eq!(resp3.read_reply().unwrap(), frame('>', &["smessage", "orders", "o-1"]));
    let message = resp2.read_reply().unwrap();
    assert_eq!(message, frame('*', &["smessage", "orders", "o-1"]));
    // Messages count as the subscriber's output, though it sent nothing since.
    let line = client_list_id(&mut publisher, &resp2_id);
    let sent = id_reply.len() + confirmation.len() + message.len();
    assert!(line.contains(&format!(" tot-net-out={sent} ")), "{sent}: {line}");
    // A shard channel and a channel of the same name are different things.
    assert_eq!(publisher.cmd(&["PUBLISH", "orders", "o-2"]), b":1\r\n");
    assert_eq!(resp3.read_reply().unwrap(), frame('>', &["message", "orders", "o-2"]));

    // A RESP3 subscriber runs any command; the push of its own PUBLISH follows the reply.
    assert_eq!(resp3.cmd(&["PUBLISH", "orders", "self"]), b":1\r\n");
    assert_eq!(resp3.read_reply().unwrap(), frame('>', &["message", "orders", "self"]));
    assert_eq!(resp3.cmd(&["SET", "k", "v"]), b"+OK\r\n");

    let shard: Vec<u8> = publisher.cmd(&["PUBSUB", "SHARDNUMSUB", "orders"]);
    assert_eq!(shard, b"*2\r\n$6\r\norders\r\n:2\r\n");
    assert_eq!(publisher.cmd(&["PUBSUB", "SHARDCHANNELS", "ord*"]), b"*1\r\n$6\r\norders\r\n");
    assert_eq!(info_field(&mut publisher, "stats", "pubsubshard_channels"), "1");
    assert_eq!(info_field(&mut publisher, "stats", "pubsub_channels"), "1");
    assert_eq!(info_field(&mut publisher, "clients", "pubsub_clients"), "2");
}

#[test]
fn many_messages_arrive_whole_and_in_order_while_the_subscriber_also_sends_requests() {
    let server = Server::subject();
    let mut sub = server.connect();
    let mut publisher = server.connect();
    sub.cmd(&["HELLO", "3"]);
    sub.cmd(&["SUBSCRIBE", "seq"]);
    let big = "x".repeat(40_000);
    const MESSAGES: usize = 300;
    // Pipelined: the pushes are written by the subscriber's task while it reads nothing.
    let mut batch = Vec::new();
    for i in 0..MESSAGES {
        let payload = if i % 50 == 0 { format!("{i}:{big}") } else { i.to_string() };
        batch.extend(rill_testkit::encode_command(&[b"PUBLISH", b"seq", payload.as_bytes()]));
    }
    publisher.send(&batch).unwrap();
    for _ in 0..MESSAGES {
        assert_eq!(publisher.read_reply().unwrap(), b":1\r\n");
    }
    // A request of the subscriber's own in the middle of its messages: its reply comes after
    // every message published before it.
    sub.send(&rill_testkit::encode_command(&[b"PING", b"mark"])).unwrap();
    for i in 0..MESSAGES {
        let payload = if i % 50 == 0 { format!("{i}:{big}") } else { i.to_string() };
        let got = sub.read_reply().unwrap();
        assert_eq!(got, frame('>', &["message", "seq", &payload]), "message {i}");
    }
    assert_eq!(sub.read_reply().unwrap(), b"$4\r\nmark\r\n");
}

#[test]
fn a_resp3_subscriber_parked_in_blpop_gets_its_messages_then_its_reply() {
    let server = Server::subject();
    let mut sub = server.connect();
    let mut other = server.connect();
    sub.cmd(&["HELLO", "3"]);
    sub.cmd(&["SUBSCRIBE", "alerts"]);
    sub.send(&rill_testkit::encode_command(&[b"BLPOP", b"q", b"0"])).unwrap();
    super::common::wait_blocked(&mut other, 1);
    assert_eq!(other.cmd(&["PUBLISH", "alerts", "while-parked"]), b":1\r\n");
    assert_eq!(sub.read_reply().unwrap(), frame('>', &["message", "alerts", "while-parked"]));
    assert_eq!(other.cmd(&["RPUSH", "q", "job"]), b":1\r\n");
    assert_eq!(sub.read_reply().unwrap(), frame('*', &["q", "job"]));
    assert_eq!(other.cmd(&["PUBLISH", "alerts", "after"]), b":1\r\n");
    assert_eq!(sub.read_reply().unwrap(), frame('>', &["message", "alerts", "after"]));
}

#[test]
fn a_subscriber_that_never_reads_is_closed_at_the_pubsub_hard_limit_and_the_others_are_served() {
    let server = Server::rill_with(&["--client-output-buffer-limit", "pubsub 1mb 0 0"]);
    let mut admin = server.connect();
    // The stuck one: subscribes, reads the confirmation, and never reads again.
    let mut stuck = TcpStream::connect(server.addr()).unwrap();
    stuck.write_all(&rill_testkit::encode_command(&[b"SUBSCRIBE", b"firehose"])).unwrap();
    let mut stuck_id = 0;
    assert!(eventually(Duration::from_secs(10), || {
        let list = client_list(&mut admin, "pubsub");
        stuck_id = list.first().and_then(|l| l.strip_prefix("id=")?.split(' ').next()?.parse().ok()).unwrap_or(0);
        stuck_id > 0
    }));
    // A reader subscribed all along gets every message.
    let mut reader = server.connect();
    reader.cmd(&["SUBSCRIBE", "firehose"]);
    let mut publisher = server.connect();
    let payload = "p".repeat(64 * 1024);
    let mut published = 0;
    let mut delivered_to_stuck = 0;
    // 64 MB at most: the stuck client must be closed long before (1 MB limit, plus what the
    // socket buffers take).
    for _ in 0..1000 {
        let n = text(&publisher.cmd(&["PUBLISH", "firehose", &payload]));
        published += 1;
        delivered_to_stuck += usize::from(n == ":2\r\n");
        let got = reader.read_reply().unwrap();
        assert_eq!(got.len(), frame('*', &["message", "firehose", &payload]).len());
        if n == ":1\r\n" {
            break;
        }
    }
    assert!(published < 1000, "the stuck subscriber was never closed");
    assert!(delivered_to_stuck * payload.len() > 1 << 20, "closed before reaching its limit: {delivered_to_stuck}");
    assert_eq!(info(&mut admin, "client_output_buffer_limit_disconnections"), "1");
    let list = text(&admin.cmd(&["CLIENT", "LIST"]));
    assert!(!list.contains(&format!("id={stuck_id} ")), "{list}");
    // The registry no longer holds it; the server goes on serving the others.
    assert!(eventually(Duration::from_secs(10), || admin.cmd(&["PUBSUB", "NUMSUB", "firehose"])
        == b"*2\r\n$8\r\nfirehose\r\n:1\r\n"));
    assert_eq!(publisher.cmd(&["PUBLISH", "firehose", "after"]), b":1\r\n");
    assert_eq!(reader.read_reply().unwrap(), frame('*', &["message", "firehose", "after"]));
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    drop(stuck);
}

#[test]
fn a_subscriber_over_the_soft_limit_for_longer_than_its_seconds_is_closed() {
    let server = Server::rill_with(&["--client-output-buffer-limit", "pubsub 0 256kb 1"]);
    let mut admin = server.connect();
    let mut stuck = TcpStream::connect(server.addr()).unwrap();
    stuck.write_all(&rill_testkit::encode_command(&[b"SUBSCRIBE", b"slow"])).unwrap();
    assert!(eventually(Duration::from_secs(10), || admin.cmd(&["PUBSUB", "NUMSUB", "slow"])
        == b"*2\r\n$4\r\nslow\r\n:1\r\n"));
    let mut publisher = server.connect();
    let payload = "s".repeat(32 * 1024);
    // Fill past the soft limit (and the socket buffers), then keep it there.
    let closed = eventually(Duration::from_secs(20), || {
        let n = publisher.cmd(&["PUBLISH", "slow", &payload]);
        n == b":0\r\n"
    });
    assert!(closed, "still subscribed");
    assert_eq!(info(&mut admin, "client_output_buffer_limit_disconnections"), "1");
    drop(stuck);
}

#[test]
fn a_client_that_disconnects_leaves_nothing_in_the_registry() {
    let server = Server::subject();
    let mut admin = server.connect();
    {
        let mut sub = server.connect();
        sub.cmd(&["SUBSCRIBE", "a", "b"]);
        sub.read_reply().unwrap();
        sub.cmd(&["PSUBSCRIBE", "p*"]);
        sub.cmd(&["SSUBSCRIBE", "s"]);
        let list = client_list(&mut admin, "pubsub");
        assert_eq!(list.len(), 1, "{list:?}");
        assert!(list[0].contains(" flags=P ") && list[0].contains(" sub=2 psub=1 ssub=1 "), "{list:?}");
        assert_eq!(info_field(&mut admin, "stats", "pubsub_patterns"), "1");
    }
    assert!(eventually(Duration::from_secs(10), || info_field(&mut admin, "clients", "pubsub_clients") == "0"));
    assert_eq!(admin.cmd(&["PUBSUB", "NUMSUB", "a", "b"]), b"*4\r\n$1\r\na\r\n:0\r\n$1\r\nb\r\n:0\r\n");
    assert_eq!(admin.cmd(&["PUBSUB", "NUMPAT"]), b":0\r\n");
    assert_eq!(admin.cmd(&["PUBSUB", "SHARDNUMSUB", "s"]), b"*2\r\n$1\r\ns\r\n:0\r\n");
    assert_eq!(admin.cmd(&["PUBSUB", "CHANNELS"]), b"*0\r\n");
    assert_eq!(admin.cmd(&["PUBLISH", "a", "x"]), b":0\r\n");
    for (section, field) in
        [("stats", "pubsub_channels"), ("stats", "pubsub_patterns"), ("stats", "pubsubshard_channels")]
    {
        assert_eq!(info_field(&mut admin, section, field), "0", "{field}");
    }
}

#[test]
fn client_kill_and_list_filter_by_type() {
    let server = Server::subject();
    let mut admin = server.connect();
    let mut sub = server.connect();
    let mut normal = server.connect();
    // A connection is listed once the server has accepted it: a reply proves that it has.
    assert_eq!(normal.cmd(&["PING"]), b"+PONG\r\n");
    sub.cmd(&["PSUBSCRIBE", "x*"]);
    let pubsub_list = client_list(&mut admin, "pubsub");
    assert_eq!(pubsub_list.len(), 1, "{pubsub_list:?}");
    assert!(pubsub_list[0].contains(" flags=P ") && pubsub_list[0].contains("cmd=psubscribe"), "{pubsub_list:?}");
    let normal_list = client_list(&mut admin, "normal");
    assert_eq!(normal_list.len(), 2, "admin and normal: {normal_list:?}");
    assert!(normal_list.iter().all(|l| l.contains(" flags=N ")), "{normal_list:?}");
    for t in ["master", "replica", "slave"] {
        assert_eq!(admin.cmd(&["CLIENT", "LIST", "TYPE", t]), b"$0\r\n\r\n", "{t}");
        assert_eq!(admin.cmd(&["CLIENT", "KILL", "TYPE", t]), b":0\r\n", "{t}");
    }
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]), b":1\r\n");
    let (_, closed) = sub.read_until_close(Duration::from_secs(5));
    assert!(closed, "the subscriber is closed");
    // The normal clients are untouched; TYPE normal with SKIPME yes spares the caller.
    assert_eq!(normal.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]), b":1\r\n");
    let (_, closed) = normal.read_until_close(Duration::from_secs(5));
    assert!(closed, "the other normal client is closed");
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(text(&admin.cmd(&["CLIENT", "KILL", "TYPE", "nobody"])), "-ERR Unknown client type 'nobody'\r\n");
}
