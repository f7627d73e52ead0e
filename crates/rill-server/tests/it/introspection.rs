//! COMMAND, COMMAND INFO and COMMAND DOCS have the shapes clients rely on (docs/spec/connection.md
//! §3.6): redis-cli asserts on the DOCS shape when it builds its hints, cluster clients read
//! key positions and flags from COMMAND. Checked on the server under test and, as a check of
//! the checker, on Redis 8.2.3.

use rill_testkit::{ReferenceServer, Server, Value};

const ARGUMENT_TYPES: &[&str] =
    &["string", "integer", "double", "key", "pattern", "unix-time", "pure-token", "oneof", "block"];

fn bulk(v: &Value, what: &str) -> String {
    match v {
        Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("{what}: expected a bulk string, got {other}"),
    }
}

/// Map entries: of a RESP3 map on a RESP3 connection, of a RESP2 flat array on a RESP2 one
/// (a server that answers RESP2 after HELLO 3 fails here).
fn entries<'a>(v: &'a Value, what: &str, resp3: bool) -> Vec<(&'a Value, &'a Value)> {
    match v {
        Value::Map(pairs) if resp3 => pairs.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(items) if !resp3 && items.len() % 2 == 0 => items.chunks(2).map(|kv| (&kv[0], &kv[1])).collect(),
        other => panic!("{what}: expected a {} map, got {other}", if resp3 { "RESP3" } else { "RESP2 (flat)" }),
    }
}

fn check_argument(arg: &Value, path: &str, resp3: bool) {
    let mut name = None;
    let mut ty = None;
    for (k, v) in entries(arg, path, resp3) {
        let key = bulk(k, path);
        match key.as_str() {
            "name" | "display_text" | "token" | "summary" | "since" | "deprecated_since" => {
                let s = bulk(v, &format!("{path}.{key}"));
                if key == "name" {
                    name = Some(s);
                }
            }
            "type" => ty = Some(bulk(v, &format!("{path}.type"))),
            "key_spec_index" => assert!(matches!(v, Value::Int(_)), "{path}.key_spec_index: {v}"),
            "flags" => match v {
                Value::Array(items) | Value::Set(items) => {
                    for f in items {
                        assert!(matches!(f, Value::Simple(_)), "{path}.flags: redis-cli needs simple strings, got {f}");
                    }
                }
                other => panic!("{path}.flags: {other}"),
            },
            "arguments" => match v {
                Value::Array(items) => {
                    for (i, a) in items.iter().enumerate() {
                        check_argument(a, &format!("{path}.arguments[{i}]"), resp3);
                    }
                }
                other => panic!("{path}.arguments: expected an array, got {other}"),
            },
            other => panic!("{path}: unexpected argument field {other:?}"),
        }
    }
    let name = name.unwrap_or_else(|| panic!("{path}: argument without a name"));
    let ty = ty.unwrap_or_else(|| panic!("{path} ({name}): argument without a type"));
    assert!(
        ARGUMENT_TYPES.contains(&ty.as_str()),
        "{path} ({name}): argument type {ty:?} is not one of {ARGUMENT_TYPES:?} (redis-cli warns on it)"
    );
}

fn check_doc(name: &str, doc: &Value, resp3: bool) {
    for (k, v) in entries(doc, name, resp3) {
        let key = bulk(k, name);
        let path = format!("{name}.{key}");
        match key.as_str() {
            "summary" | "since" | "group" | "complexity" | "module" | "deprecated_since" | "replaced_by" => {
                bulk(v, &path);
            }
            "doc_flags" => match v {
                Value::Array(items) | Value::Set(items) => {
                    assert!(items.iter().all(|f| matches!(f, Value::Simple(_))), "{path}: {v}")
                }
                other => panic!("{path}: {other}"),
            },
            "history" => assert!(matches!(v, Value::Array(_) | Value::Set(_)), "{path}: {v}"),
            "arguments" => match v {
                Value::Array(items) => {
                    for (i, a) in items.iter().enumerate() {
                        check_argument(a, &format!("{path}[{i}]"), resp3);
                    }
                }
                other => panic!("{path}: expected an array, got {other}"),
            },
            "subcommands" => {
                for (sub, subdoc) in entries(v, &path, resp3) {
                    check_doc(&bulk(sub, &path), subdoc, resp3);
                }
            }
            other => panic!("{path}: unexpected doc field {other:?}"),
        }
    }
}

fn check_server(server: &Server) {
    for resp3 in [false, true] {
        let mut c = server.connect();
        if resp3 {
            let hello = c.cmd_value(&["HELLO", "3"]);
            assert!(matches!(hello, Value::Map(_)), "HELLO 3 is not a RESP3 map: {hello}");
            assert_eq!(hello.get("proto"), Some(&Value::Int(3)), "HELLO 3: {hello}");
        }
        let docs = c.cmd_value(&["COMMAND", "DOCS"]);
        let docs = entries(&docs, "COMMAND DOCS", resp3);
        assert!(docs.len() > 20, "COMMAND DOCS lists only {} commands", docs.len());
        for (name, doc) in &docs {
            check_doc(&bulk(name, "command name"), doc, resp3);
        }
        let names: Vec<String> = docs.iter().map(|(n, _)| bulk(n, "name")).collect();
        for needed in ["get", "set", "ping", "hello", "client", "multi", "exec", "info", "xadd"] {
            assert!(names.iter().any(|n| n == needed), "COMMAND DOCS lacks {needed}");
        }

        let Value::Int(count) = c.cmd_value(&["COMMAND", "COUNT"]) else { panic!("COMMAND COUNT") };
        let Value::Array(all) = c.cmd_value(&["COMMAND"]) else { panic!("COMMAND") };
        assert_eq!(all.len() as i64, count, "COMMAND COUNT vs COMMAND");
        for info in &all {
            let Value::Array(fields) = info else { panic!("command info {info}") };
            assert_eq!(fields.len(), 10, "command info has 10 fields: {info}");
            bulk(&fields[0], "command name");
            assert!(matches!(fields[1], Value::Int(_)), "arity: {info}");
            assert!(matches!(fields[3], Value::Int(_)), "first key: {info}");
            assert!(matches!(fields[4], Value::Int(_)), "last key: {info}");
            assert!(matches!(fields[5], Value::Int(_)), "step: {info}");
        }
        let info = c.cmd_value(&["COMMAND", "INFO", "get", "nosuchcommand", "XADD"]);
        let Value::Array(items) = &info else { panic!("COMMAND INFO: {info}") };
        assert_eq!(items.len(), 3, "{info}");
        assert_eq!(items[1], Value::Nil, "unknown command in COMMAND INFO: {info}");
        let Value::Array(get) = &items[0] else { panic!("{info}") };
        assert_eq!(get[0], Value::Bulk(b"get".to_vec()));
        assert_eq!(get[1], Value::Int(2));
        assert_eq!((&get[3], &get[4], &get[5]), (&Value::Int(1), &Value::Int(1), &Value::Int(1)));
    }
}

#[test]
fn command_docs_and_info_have_client_shapes() {
    check_server(&Server::subject());
}

#[test]
fn checker_accepts_redis_8() {
    if let Some(redis) = Server::reference(ReferenceServer::Redis8) {
        check_server(&redis);
    }
}

/// INFO replication of a primary without replicas: Redis 8.2.3's fields, in its order, with
/// its values (the two replication IDs aside: the first is random, the second all zeros).
#[test]
fn info_replication_has_redis_fields_in_order() {
    let Some(redis) = Server::reference(ReferenceServer::Redis8) else { return };
    let rill = Server::subject();
    let lines = |s: &Server| -> Vec<String> {
        let v = rill_testkit::RawClient::connect(s.port).cmd_value(&["INFO", "replication"]);
        let text = bulk(&v, "INFO replication");
        text.lines()
            .map(|l| match l.split_once(':') {
                Some(("master_replid", id)) => {
                    assert!(id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{l}");
                    "master_replid:<40 hex>".to_string()
                }
                _ => l.to_string(),
            })
            .collect()
    };
    assert_eq!(lines(&rill), lines(&redis));
}
