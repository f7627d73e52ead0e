//! The keyspace-event transcripts the engine's tests check rill against
//! (`rill-engine/src/types/events_transcripts.txt`), replayed against a live Redis 8.2.3: what
//! it publishes on `__keyevent@0__:*` for each command must be what the transcript says, so
//! the names and orders rill records stay Redis' own. (rill publishes no keyspace events yet;
//! when it does, the same check runs against it.)

use rill_testkit::{RawClient, ReferenceServer, Server, Value};

const TRANSCRIPTS: &str = include_str!("../../../rill-engine/src/types/events_transcripts.txt");

/// The events published for each command, until the marker published after it.
fn events_of(server: &Server, commands: &[&str]) -> Vec<Vec<String>> {
    let mut sub = RawClient::connect(server.port);
    sub.cmd_value(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    let mut c = RawClient::connect(server.port);
    let mut all = Vec::new();
    for cmd in commands {
        let args: Vec<&str> = cmd.split_whitespace().collect();
        let reply = c.cmd_value(&args);
        assert!(!matches!(reply, Value::Error(_)), "{cmd}: {reply:?}");
        c.cmd_value(&["PUBLISH", "__keyevent@0__:zz-end", "x"]);
        let mut got = Vec::new();
        loop {
            let Value::Array(m) = sub.read_value().unwrap() else { panic!("not a message") };
            let channel = m[2].as_str().unwrap().to_string();
            let event = channel.split_once(':').unwrap().1.to_string();
            if event == "zz-end" {
                break;
            }
            got.push(format!("{event}:{}", m[3].as_str().unwrap()));
        }
        all.push(got);
    }
    all
}

#[test]
fn transcripts_are_what_redis_8_publishes() {
    let Some(redis) = Server::reference(ReferenceServer::Redis8) else { return };
    RawClient::connect(redis.port).cmd_value(&["CONFIG", "SET", "notify-keyspace-events", "EAn"]);
    let mut sections = 0;
    for section in TRANSCRIPTS.split("\n## ").skip(1) {
        let lines: Vec<(&str, &str)> = section
            .lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| l.split_once("=>").map_or((l, ""), |(c, e)| (c.trim(), e.trim())))
            .collect();
        RawClient::connect(redis.port).cmd_value(&["FLUSHALL"]);
        let commands: Vec<&str> = lines.iter().map(|(c, _)| *c).collect();
        let got = events_of(&redis, &commands);
        for ((cmd, expected), got) in lines.iter().zip(got) {
            let expected: Vec<&str> = expected.split_whitespace().collect();
            assert_eq!(got, expected, "{cmd}");
        }
        sections += 1;
    }
    assert_eq!(sections, 6);
}
