//! `RILL.METRICS`: the metrics snapshot over the Redis protocol (what `rill top` reads). A walk
//! with any COUNT meets every stream of every database exactly once when nothing changes, in
//! RESP2 (flat maps) and RESP3; bad cursors and options get clear errors.

use rill_testkit::{RawClient, Server, Value};

fn fields(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (k.as_str().unwrap().to_owned(), v.clone())).collect(),
        Value::Array(items) => items.chunks(2).map(|p| (p[0].as_str().unwrap().to_owned(), p[1].clone())).collect(),
        other => panic!("expected a map, got {other}"),
    }
}

fn get(v: &Value, key: &str) -> Value {
    fields(v).into_iter().find(|(k, _)| k == key).map(|(_, v)| v).unwrap_or_else(|| panic!("no {key} in {v}"))
}

fn walk(c: &mut RawClient, count: &str) -> Vec<(i64, String, i64)> {
    let mut cursor = "0".to_owned();
    let mut out = Vec::new();
    loop {
        let page = c.cmd_value(&["RILL.METRICS", "STREAMS", &cursor, "COUNT", count]);
        let parts = page.as_array().unwrap_or_else(|| panic!("{page}"));
        for row in parts[1].as_array().unwrap() {
            let Value::Int(db) = get(row, "db") else { panic!("{row}") };
            let Value::Int(len) = get(row, "length") else { panic!("{row}") };
            out.push((db, get(row, "stream").as_str().unwrap().to_owned(), len));
        }
        cursor = parts[0].as_str().unwrap().to_owned();
        if cursor == "0" {
            return out;
        }
    }
}

#[test]
fn a_walk_meets_every_stream_once_and_bad_input_is_refused() {
    let server = Server::rill();
    let mut c = RawClient::connect(server.port);
    let mut want = Vec::new();
    for db in [0, 2, 15] {
        c.cmd(&["SELECT", &db.to_string()]);
        for i in 0..40 {
            let key = format!("s{i:02}");
            for _ in 0..=(i % 3) {
                c.cmd(&["XADD", &key, "*", "f", "v"]);
            }
            c.cmd(&["SET", &format!("str{i}"), "x"]);
            want.push((db, key, i64::from(i % 3 + 1)));
        }
    }
    c.cmd(&["SELECT", "0"]);
    c.cmd(&["XGROUP", "CREATE", "s05", "g", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s05", ">"]);
    want.sort();
    for count in ["1", "7", "1000"] {
        let mut got = walk(&mut c, count);
        got.sort();
        assert_eq!(got, want, "COUNT {count}");
    }

    // The group's figures, with its consumers on request; RESP3 answers with maps.
    c.cmd(&["HELLO", "3"]);
    let page = c.cmd_value(&["RILL.METRICS", "STREAMS", "0", "COUNT", "1000", "CONSUMERS"]);
    let rows = page.as_array().unwrap()[1].as_array().unwrap().to_vec();
    let row = rows.iter().find(|r| get(r, "stream").as_str() == Some("s05") && get(r, "db") == Value::Int(0)).unwrap();
    let groups = get(row, "groups");
    let g = &groups.as_array().unwrap()[0];
    assert_eq!(get(g, "name").as_str(), Some("g"));
    assert_eq!(get(g, "pending"), Value::Int(1));
    assert_eq!(get(g, "lag"), Value::Int(2));
    let consumers = get(g, "consumer-list");
    let alice = &consumers.as_array().unwrap()[0];
    assert_eq!(get(alice, "name").as_str(), Some("alice"));
    assert_eq!(get(alice, "pending"), Value::Int(1));
    let server_fields = c.cmd_value(&["RILL.METRICS", "SERVER"]);
    assert_eq!(get(&server_fields, "role").as_str(), Some("primary"));
    assert_eq!(get(&server_fields, "keys"), Value::Int(240));

    for (args, err) in [
        (vec!["STREAMS", "abc"], "ERR invalid cursor"),
        (vec!["STREAMS", "-1"], "ERR invalid cursor"),
        (vec!["STREAMS", "0", "COUNT", "0"], "ERR syntax error"),
        (vec!["STREAMS", "0", "COUNT", "x"], "ERR value is not an integer or out of range"),
        (vec!["STREAMS", "0", "BOGUS"], "ERR syntax error"),
        (vec!["NOPE"], "ERR unknown subcommand 'NOPE'. Try RILL.METRICS HELP."),
    ] {
        let mut full = vec!["RILL.METRICS"];
        full.extend(args.iter().copied());
        match c.cmd_value(&full) {
            Value::Error(e) => assert_eq!(e, err, "{full:?}"),
            other => panic!("{full:?}: {other}"),
        }
    }
    let help = c.cmd_value(&["RILL.METRICS", "HELP"]);
    assert!(format!("{help}").contains("STREAMS <cursor>"), "{help}");
    // A cursor past the end is a finished walk, not an error.
    let page = c.cmd_value(&["RILL.METRICS", "STREAMS", "999999999999999"]);
    assert_eq!(page.as_array().unwrap()[0].as_str(), Some("0"));
}
