//! Command-level tests: each stream command run through the command table the way the server
//! runs it (resolve, arity check, handler), with the spec's edge cases. Behaviour was
//! compared with redis-server 7.0.15 and 8.2.3 where those versions have the feature.

use crate::command::{CommandTable, Handler, Lookup};
use crate::{BlockRequest, CallCtx, Engine, EngineConfig, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// An engine, a command table and a clock.
pub(super) struct Harness {
    pub(super) engine: Engine,
    table: CommandTable,
    pub(super) now_ms: i64,
    pub(super) resp3: bool,
    pub(super) no_block: bool,
    pub(super) deadline_override: Option<Option<i64>>,
    /// What the last command asked for when it blocked.
    pub(super) blocked: Option<BlockRequest>,
}

impl Harness {
    pub(super) fn new() -> Harness {
        Harness {
            engine: Engine::new(EngineConfig::default()),
            table: CommandTable::new(&crate::types::families()),
            now_ms: 1_000_000,
            resp3: false,
            no_block: false,
            deadline_override: None,
            blocked: None,
        }
    }

    /// Run a command given as its arguments.
    pub(super) fn call(&mut self, args: Vec<Bytes>) -> Reply {
        let spec = match self.table.resolve(&args) {
            Lookup::Found(spec) => spec,
            Lookup::UnknownCommand => return Reply::error("ERR unknown command"),
            Lookup::UnknownSubcommand(_) => return Reply::error("ERR unknown subcommand"),
        };
        if !spec.arity_ok(args.len()) {
            return crate::CmdError::arity(spec.name).to_reply();
        }
        let Handler::Engine(handler) = spec.handler else {
            return Reply::error("ERR not an engine command");
        };
        let mut ctx = CallCtx::new(0, self.now_ms, 1);
        ctx.resp3 = self.resp3;
        ctx.no_block = self.no_block;
        ctx.deadline_override = self.deadline_override;
        let reply = handler(&mut self.engine, &mut ctx, &args).unwrap_or_else(|e| e.to_reply());
        self.blocked = ctx.block;
        reply
    }

    /// Run a command written as whitespace-separated words.
    pub(super) fn run(&mut self, line: &str) -> String {
        let args = line.split_whitespace().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
        show(&self.call(args))
    }

    pub(super) fn stream(&self, key: &str) -> &super::Stream {
        match self.engine.db(0).get_raw(key.as_bytes()).map(|e| &e.value) {
            Some(Value::Stream(s)) => s,
            _ => panic!("{key} is not a stream"),
        }
    }
}

/// A compact rendering for assertions: bulks as text, `:n`, `+s`, `-err`, `nil`, `nil*`,
/// arrays `[a b]`, maps `{k=v k=v}`.
pub(super) fn show(r: &Reply) -> String {
    match r {
        Reply::Simple(s) => format!("+{}", String::from_utf8_lossy(s)),
        Reply::Error(e) => format!("-{}", String::from_utf8_lossy(e)),
        Reply::Integer(n) => format!(":{n}"),
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Reply::Null => "nil".into(),
        Reply::NullArray => "nil*".into(),
        Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => {
            format!("[{}]", v.iter().map(show).collect::<Vec<_>>().join(" "))
        }
        Reply::Map(m) => {
            format!("{{{}}}", m.iter().map(|(k, v)| format!("{}={}", show(k), show(v))).collect::<Vec<_>>().join(" "))
        }
        Reply::Raw(_) => show(&super::reply::tree(r)),
        other => format!("{other:?}"),
    }
}

/// The value of field `name` in a rendered XINFO map.
pub(super) fn info_field(h: &mut Harness, line: &str, name: &str) -> String {
    let args = line.split_whitespace().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
    let Reply::Map(m) = h.call(args) else { panic!("not a map") };
    m.iter().find(|(k, _)| show(k) == name).map(|(_, v)| show(v)).unwrap_or_else(|| panic!("no field {name}"))
}

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value";
const INVALID_ID: &str = "-ERR Invalid stream ID specified as stream command argument";

// ---------------------------------------------------------------------------------------------
// Table
// ---------------------------------------------------------------------------------------------

#[test]
fn every_command_is_in_the_table_with_its_arity() {
    let h = Harness::new();
    for (name, arity) in [
        ("xadd", -5),
        ("xlen", 2),
        ("xrange", -4),
        ("xrevrange", -4),
        ("xread", -4),
        ("xdel", -3),
        ("xdelex", -5),
        ("xtrim", -4),
        ("xsetid", -3),
        ("xcfgset", -2),
        ("xinfo", -2),
        ("xinfo|stream", -3),
        ("xinfo|help", 2),
    ] {
        let spec = h.table.get_full(name.as_bytes()).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(spec.arity, arity, "{name}");
        assert_eq!(spec.group, "stream", "{name}");
        assert!(!spec.summary.is_empty() && !spec.complexity.is_empty(), "{name}");
    }
    let xread = h.table.get(b"xread").expect("xread");
    let args: Vec<Bytes> = ["XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0"]
        .iter()
        .map(|s| Bytes::copy_from_slice(s.as_bytes()))
        .collect();
    assert_eq!(xread.key_indexes(&args), vec![4, 5]);
    // Every syntax string parses into a docs tree with the key first.
    for spec in super::COMMANDS {
        let docs = crate::command::docs::parse_syntax(spec.syntax);
        if spec.first_key == 1 {
            assert_eq!(docs.first().map(|a| a.kind.as_str()), Some("key"), "{}", spec.name);
        }
    }
}

#[test]
fn arity_errors_name_the_full_command() {
    let mut h = Harness::new();
    assert_eq!(h.run("XADD s *"), "-ERR wrong number of arguments for 'xadd' command");
    assert_eq!(h.run("XINFO HELP extra"), "-ERR wrong number of arguments for 'xinfo|help' command");
    assert_eq!(h.run("XINFO STREAM"), "-ERR wrong number of arguments for 'xinfo|stream' command");
}

// ---------------------------------------------------------------------------------------------
// XADD
// ---------------------------------------------------------------------------------------------

#[test]
fn xadd_ids() {
    let mut h = Harness::new();
    assert_eq!(h.run("XADD s * a 1"), "1000000-0");
    assert_eq!(h.run("XADD s * a 2"), "1000000-1");
    h.now_ms = 999; // the clock went back: IDs still grow
    assert_eq!(h.run("XADD s * a 3"), "1000000-2");
    assert_eq!(
        h.run("XADD s 1000000-2 a 4"),
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item"
    );
    assert_eq!(h.run("XADD s 1000000-* a 4"), "1000000-3");
    assert_eq!(h.run("XADD s 2000000-* a 5"), "2000000-0");
    assert_eq!(h.run("XADD s 2000001 a 6"), "2000001-0");
    assert_eq!(h.run("XADD t 0-* a 1"), "0-1");
    assert_eq!(h.run("XADD s 5-x a 1"), INVALID_ID);
    assert_eq!(h.run("XLEN s"), ":6");
}

#[test]
fn xadd_zero_id_is_refused_before_the_key_is_touched() {
    let mut h = Harness::new();
    h.run("SET-NOTHING");
    assert_eq!(h.run("XADD s 0-0 a 1"), "-ERR The ID specified in XADD must be greater than 0-0");
    assert_eq!(h.run("XADD s 0 a 1"), "-ERR The ID specified in XADD must be greater than 0-0");
    assert!(h.engine.db(0).get_raw(b"s").is_none());
    // The field count check comes first.
    assert_eq!(h.run("XADD s 0-0 a"), "-ERR wrong number of arguments for 'xadd' command");
    // And wins over WRONGTYPE.
    h.engine.insert(0, Bytes::from_static(b"str"), Value::Str(Bytes::from_static(b"x")));
    assert_eq!(h.run("XADD str 0-0 a 1"), "-ERR The ID specified in XADD must be greater than 0-0");
    assert_eq!(h.run("XADD str * a 1"), WRONGTYPE);
}

#[test]
fn xadd_exhausted_and_overflowing_ids() {
    let mut h = Harness::new();
    h.run("XADD s 18446744073709551615-18446744073709551614 a 1");
    assert_eq!(h.run("XADD s * a 1"), "18446744073709551615-18446744073709551615");
    assert_eq!(h.run("XADD s * a 1"), "-ERR The stream has exhausted the last possible ID, unable to add more items");
    h.run("XADD t 1-18446744073709551615 a 1");
    assert_eq!(
        h.run("XADD t 1-* a 1"),
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item"
    );
}

#[test]
fn xadd_nomkstream_and_field_counts() {
    let mut h = Harness::new();
    assert_eq!(h.run("XADD s NOMKSTREAM * a 1"), "nil");
    assert!(h.engine.db(0).get_raw(b"s").is_none());
    h.run("XADD s 1-1 a 1");
    assert_eq!(h.run("XADD s NOMKSTREAM NOMKSTREAM 2-1 a 1"), "2-1");
    assert_eq!(h.run("XADD s * a 1 b"), "-ERR wrong number of arguments for 'xadd' command");
    // Options after the ID are fields.
    assert_eq!(h.run("XADD s 3-1 MAXLEN 1"), "3-1");
    assert_eq!(h.run("XRANGE s 3-1 3-1"), "[[3-1 [MAXLEN 1]]]");
    assert_eq!(h.run("XADD s MAXLEN 5"), "-ERR wrong number of arguments for 'xadd' command");
}

#[test]
fn xadd_option_errors() {
    let mut h = Harness::new();
    for (line, err) in [
        ("XADD s MAXLEN -1 * a 1", "-ERR The MAXLEN argument must be >= 0."),
        ("XADD s MAXLEN x * a 1", "-ERR value is not an integer or out of range"),
        (
            "XADD s MAXLEN 1 MINID 5 * a 1",
            "-ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
        ),
        (
            "XADD s MAXLEN 1 MAXLEN 2 * a 1",
            "-ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
        ),
        ("XADD s MINID x * a 1", INVALID_ID),
        ("XADD s LIMIT -1 * a 1", "-ERR The LIMIT argument must be >= 0."),
        ("XADD s LIMIT 10 * a 1", "-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"),
        ("XADD s LIMIT 0 * a 1", "-ERR syntax error, LIMIT cannot be used without the special ~ option"),
        ("XADD s MAXLEN 5 LIMIT 10 * a 1", "-ERR syntax error, LIMIT cannot be used without the special ~ option"),
        ("XADD s MAXLEN = 5 LIMIT 10 * a 1", "-ERR syntax error, LIMIT cannot be used without the special ~ option"),
        ("XADD s KEEPREF DELREF * a 1", INVALID_ID),
        ("XADD s IDMP p1 * a 1", INVALID_ID),
        ("XADD s IDMP p1 i1 1-1 a 1", "-ERR syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs"),
        ("XADD s IDMP p1 i1 5-* a 1", "-ERR syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs"),
        ("XADD s IDMPAUTO p1 1-1 a 1", "-ERR syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs"),
        ("XADD s IDMP p1 i1 IDMP p2 i2 * a 1", "-ERR syntax error, IDMP/IDMPAUTO specified multiple times"),
        ("XADD s IDMPAUTO p1 IDMP p2 i2 * a 1", "-ERR syntax error, IDMP/IDMPAUTO specified multiple times"),
    ] {
        assert_eq!(h.run(line), err, "{line}");
    }
    let empty = |parts: &[&str]| parts.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect();
    assert_eq!(
        show(&h.call(empty(&["XADD", "s", "IDMP", "", "i", "*", "a", "1"]))),
        "-ERR syntax error, IDMP requires a non-empty producer ID"
    );
    assert_eq!(
        show(&h.call(empty(&["XADD", "s", "IDMP", "p", "", "*", "a", "1"]))),
        "-ERR syntax error, IDMP requires a non-empty idempotent ID"
    );
    assert_eq!(
        show(&h.call(empty(&["XADD", "s", "IDMPAUTO", "", "*", "a", "1"]))),
        "-ERR syntax error, IDMPAUTO requires a non-empty producer ID"
    );
    assert!(h.engine.db(0).get_raw(b"s").is_none(), "no error created the key");
}

#[test]
fn xadd_trims_after_appending() {
    let mut h = Harness::new();
    for i in 1..=5 {
        h.run(&format!("XADD s {i}-0 a {i}"));
    }
    assert_eq!(h.run("XADD s MAXLEN 2 6-0 a 6"), "6-0");
    assert_eq!(h.run("XRANGE s - +"), "[[5-0 [a 5]] [6-0 [a 6]]]");
    assert_eq!(h.run("XADD s MAXLEN = 0 7-0 a 7"), "7-0");
    assert_eq!(h.run("XLEN s"), ":0");
    assert_eq!(h.run("XADD s MINID 9 8-0 a 8"), "8-0");
    assert_eq!(h.run("XLEN s"), ":0");
    assert_eq!(h.run("XADD s minid ~ 5 limit 0 delref 9-0 a 9"), "9-0");
    assert_eq!(h.run("XLEN s"), ":1");
}

#[test]
fn approximate_trimming_removes_whole_blocks_only() {
    let mut h = Harness::new();
    for i in 1..=1000 {
        h.run(&format!("XADD s {i}-0 xitem {i}"));
    }
    assert_eq!(h.run("XADD s MAXLEN ~ 555 1001-0 xitem 1001"), "1001-0");
    assert_eq!(h.run("XLEN s"), ":601");
    assert_eq!(h.run("XTRIM s MAXLEN ~ 555"), ":0");
    assert_eq!(h.run("XTRIM s MAXLEN 555"), ":46");
    let mut h = Harness::new();
    for i in 1..=1000 {
        h.run(&format!("XADD s {i}-0 xitem {i}"));
    }
    assert_eq!(h.run("XTRIM s MAXLEN ~ 555"), ":400");
    assert_eq!(h.run("XLEN s"), ":600");
    // LIMIT caps whole-block removal; LIMIT 0 removes as many blocks as the goal allows.
    assert_eq!(h.run("XTRIM s MAXLEN ~ 0 LIMIT 250"), ":200");
    assert_eq!(h.run("XTRIM s MAXLEN ~ 0 LIMIT 0"), ":400");
    // DELREF/ACKED trim entry by entry: `~` reaches the exact goal within the LIMIT.
    let mut h = Harness::new();
    for i in 1..=1000 {
        h.run(&format!("XADD s {i}-0 xitem {i}"));
    }
    assert_eq!(h.run("XTRIM s MAXLEN ~ 555 ACKED"), ":445");
    // Blocks now: 446..500 (55 live), 501..600, ...: the second would pass the LIMIT.
    assert_eq!(h.run("XTRIM s MINID ~ 700 LIMIT 100 DELREF"), ":55");
    assert!(h.stream("s").validate());
}

#[test]
fn xadd_default_limit_bounds_approximate_trimming() {
    let mut h = Harness::new();
    h.engine.config.stream_node_max_entries = 10;
    for i in 1..=5000 {
        h.run(&format!("XADD s {i}-0 a {i}"));
    }
    // Default LIMIT = 100 × 10 entries.
    assert_eq!(h.run("XTRIM s MAXLEN ~ 0"), ":1000");
    assert_eq!(h.run("XTRIM s MAXLEN 0"), ":4000");
}

// ---------------------------------------------------------------------------------------------
// IDMP
// ---------------------------------------------------------------------------------------------

#[test]
fn idmp_duplicates_reply_the_original_id() {
    let mut h = Harness::new();
    let first = h.run("XADD s IDMP p1 req-1 * f v");
    h.now_ms += 5;
    assert_eq!(h.run("XADD s IDMP p1 req-1 * f other"), first);
    assert_eq!(h.run("XLEN s"), ":1");
    // Another producer has its own namespace.
    assert_ne!(h.run("XADD s IDMP p2 req-1 * f v"), first);
    // Still a duplicate after the entry is deleted.
    h.run(&format!("XDEL s {first}"));
    assert_eq!(h.run("XADD s IDMP p1 req-1 * f v"), first);
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "pids-tracked"), ":2");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "iids-tracked"), ":2");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "iids-added"), ":2");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "iids-duplicates"), ":2");
    // NOMKSTREAM on a missing key records nothing.
    assert_eq!(h.run("XADD t NOMKSTREAM IDMP p1 x * f v"), "nil");
}

#[test]
fn idmpauto_ignores_pair_order() {
    let mut h = Harness::new();
    let a = h.run("XADD s IDMPAUTO p * amount 100 currency USD");
    assert_eq!(h.run("XADD s IDMPAUTO p * currency USD amount 100"), a);
    assert_ne!(h.run("XADD s IDMPAUTO p * amount 200 currency USD"), a);
    assert_ne!(h.run("XADD s IDMPAUTO p * amount 100"), a);
    assert_eq!(h.run("XLEN s"), ":3");
}

#[test]
fn idmp_expiry_eviction_and_xcfgset() {
    let mut h = Harness::new();
    h.run("XADD s IDMP p init * f v");
    assert_eq!(h.run("XCFGSET s IDMP-DURATION 1 IDMP-MAXSIZE 3"), "+OK");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "iids-tracked"), ":0", "history cleared");
    let id1 = h.run("XADD s IDMP p r1 * f v");
    assert_eq!(h.run("XADD s IDMP p r1 * f v"), id1);
    h.now_ms += 2500;
    assert_ne!(h.run("XADD s IDMP p r1 * f v"), id1, "expired after the duration");
    for r in ["r2", "r3", "r4"] {
        h.run(&format!("XADD s IDMP p {r} * f v"));
    }
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "iids-tracked"), ":3", "maxsize evicts");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "idmp-maxsize"), ":3");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "idmp-duration"), ":1");
    assert_eq!(h.run("XCFGSET s IDMP-MAXSIZE 3"), "+OK");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "iids-tracked"), ":3", "same value keeps");
    for (line, err) in [
        ("XCFGSET nokey IDMP-MAXSIZE 3", "-ERR no such key"),
        ("XCFGSET s", "-ERR At least one parameter must be specified"),
        ("XCFGSET s IDMP-DURATION", "-ERR syntax error"),
        ("XCFGSET s FOO 1", "-ERR syntax error"),
        ("XCFGSET s IDMP-DURATION 0", "-ERR IDMP-DURATION must be between 1 and 86400 seconds"),
        ("XCFGSET s IDMP-DURATION 86401", "-ERR IDMP-DURATION must be between 1 and 86400 seconds"),
        ("XCFGSET s IDMP-MAXSIZE 10001", "-ERR IDMP-MAXSIZE must be between 1 and 10000 entries"),
        ("XCFGSET s IDMP-MAXSIZE x", "-ERR value is not an integer or out of range"),
        ("XCFGSET s IDMP-MAXSIZE 5 IDMP-MAXSIZE 6", "-ERR IDMP-MAXSIZE specified multiple times"),
        ("XCFGSET s IDMP-DURATION 5 IDMP-DURATION 6", "-ERR IDMP-DURATION specified multiple times"),
    ] {
        assert_eq!(h.run(line), err, "{line}");
    }
}

#[test]
fn idmp_failed_append_records_no_iid_but_registers_the_producer() {
    let mut h = Harness::new();
    h.run("XADD s 18446744073709551615-18446744073709551615 a 1");
    assert!(h.run("XADD s IDMP p i * a 1").starts_with("-ERR The stream has exhausted"));
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "pids-tracked"), ":1");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "iids-tracked"), ":0");
    // Redis' once-a-second expiry then drops the empty producer.
    h.now_ms += 1000;
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "pids-tracked"), ":0");
}

// ---------------------------------------------------------------------------------------------
// XLEN, XRANGE, XREVRANGE
// ---------------------------------------------------------------------------------------------

#[test]
fn ranges() {
    let mut h = Harness::new();
    for i in 1..=5 {
        h.run(&format!("XADD s {i}-0 f {i}"));
    }
    assert_eq!(h.run("XRANGE s - + COUNT 2"), "[[1-0 [f 1]] [2-0 [f 2]]]");
    assert_eq!(h.run("XRANGE s (1-0 (4 COUNT 5"), "[[2-0 [f 2]] [3-0 [f 3]] [4-0 [f 4]]]");
    assert_eq!(h.run("XRANGE s (1-0 (4-0"), "[[2-0 [f 2]] [3-0 [f 3]]]");
    assert_eq!(h.run("XREVRANGE s + - COUNT 2"), "[[5-0 [f 5]] [4-0 [f 4]]]");
    assert_eq!(h.run("XREVRANGE s (5 (3"), "[[5-0 [f 5]] [4-0 [f 4]]]");
    assert_eq!(h.run("XRANGE s 4 2"), "[]");
    assert_eq!(h.run("XRANGE s - + COUNT 0"), "nil*");
    assert_eq!(h.run("XRANGE s - + COUNT -3"), "nil*");
    assert_eq!(h.run("XRANGE s - + COUNT 1 COUNT 3"), "[[1-0 [f 1]] [2-0 [f 2]] [3-0 [f 3]]]");
    assert_eq!(h.run("XRANGE nokey - + COUNT 0"), "[]");
    assert_eq!(h.run("XRANGE s - + COUNT"), "-ERR syntax error");
    assert_eq!(h.run("XRANGE s - + LIMIT 1"), "-ERR syntax error");
    assert_eq!(h.run("XRANGE s - + COUNT x"), "-ERR value is not an integer or out of range");
    assert_eq!(h.run("XRANGE s (- +"), INVALID_ID);
    assert_eq!(h.run("XRANGE s - (+"), INVALID_ID);
    assert_eq!(
        h.run("XRANGE s (18446744073709551615-18446744073709551615 +"),
        "-ERR invalid start ID for the interval"
    );
    assert_eq!(h.run("XRANGE s - (0-0"), "-ERR invalid end ID for the interval");
    assert_eq!(h.run("XREVRANGE s (0-0 -"), "-ERR invalid end ID for the interval");
    assert_eq!(h.run("XLEN s"), ":5");
    assert_eq!(h.run("XLEN nokey"), ":0");
    h.engine.insert(0, Bytes::from_static(b"str"), Value::Str(Bytes::from_static(b"x")));
    assert_eq!(h.run("XLEN str"), WRONGTYPE);
    assert_eq!(h.run("XRANGE str - +"), WRONGTYPE);
    assert_eq!(h.run("XRANGE str x +"), INVALID_ID, "bounds are parsed before the key");
}

#[test]
fn expired_keys_are_gone_for_every_command() {
    let mut h = Harness::new();
    h.run("XADD s 1-0 a 1");
    h.engine.set_expire(0, b"s", Some(h.now_ms + 10));
    h.now_ms += 10;
    assert_eq!(h.run("XLEN s"), ":0");
    assert_eq!(h.run("XADD s NOMKSTREAM 2-0 a 1"), "nil");
    assert_eq!(h.run("XINFO STREAM s"), "-ERR no such key");
}

// ---------------------------------------------------------------------------------------------
// XREAD
// ---------------------------------------------------------------------------------------------

#[test]
fn xread_serves_streams_in_argument_order() {
    let mut h = Harness::new();
    h.run("XADD a 1-0 f 1");
    h.run("XADD a 2-0 f 2");
    h.run("XADD b 3-0 f 3");
    assert_eq!(h.run("XREAD STREAMS a b nokey 0 0 0"), "[[a [[1-0 [f 1]] [2-0 [f 2]]]] [b [[3-0 [f 3]]]]]");
    assert_eq!(h.run("XREAD COUNT 1 STREAMS a b 0 0"), "[[a [[1-0 [f 1]]]] [b [[3-0 [f 3]]]]]");
    assert_eq!(h.run("XREAD STREAMS a a 1 1-0"), "[[a [[2-0 [f 2]]]] [a [[2-0 [f 2]]]]]");
    assert_eq!(h.run("XREAD STREAMS a b $ $"), "nil*");
    assert_eq!(h.run("XREAD COUNT 5 STREAMS a b + +"), "[[a [[2-0 [f 2]]]] [b [[3-0 [f 3]]]]]");
    assert_eq!(h.run("XREAD STREAMS a 18446744073709551615-18446744073709551615"), "nil*");
    h.resp3 = true;
    assert_eq!(h.run("XREAD STREAMS a b 1 0"), "{a=[[2-0 [f 2]]] b=[[3-0 [f 3]]]}");
}

#[test]
fn xread_plus_after_deleting_the_last_entry() {
    let mut h = Harness::new();
    h.run("XADD s 1-0 f 1");
    h.run("XADD s 2-0 f 2");
    h.run("XDEL s 2-0");
    assert_eq!(h.run("XREAD STREAMS s +"), "[[s [[1-0 [f 1]]]]]");
    h.run("XDEL s 1-0");
    assert_eq!(h.run("XREAD STREAMS s +"), "nil*");
}

#[test]
fn xread_errors() {
    let mut h = Harness::new();
    h.engine.insert(0, Bytes::from_static(b"str"), Value::Str(Bytes::from_static(b"x")));
    for (line, err) in [
        (
            "XREAD STREAMS a b 0",
            "-ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified.",
        ),
        ("XREAD COUNT 1 a 0", "-ERR syntax error"),
        ("XREAD COUNT 1 BLOCK 0", "-ERR syntax error"),
        ("XREAD COUNT x STREAMS a 0", "-ERR value is not an integer or out of range"),
        ("XREAD BLOCK x STREAMS a 0", "-ERR timeout is not an integer or out of range"),
        ("XREAD BLOCK -1 STREAMS a 0", "-ERR timeout is negative"),
        ("XREAD BLOCK 9223372036854775807 STREAMS a 0", "-ERR timeout is out of range"),
        (
            "XREAD GROUP g c STREAMS a 0",
            "-ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
        ),
        ("XREAD NOACK STREAMS a 0", "-ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."),
        (
            "XREAD CLAIM 10 STREAMS a 0",
            "-ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.",
        ),
        (
            "XREAD STREAMS a >",
            "-ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
        ),
        ("XREAD STREAMS a x", INVALID_ID),
        ("XREAD STREAMS str a 0 0", WRONGTYPE),
        ("XREAD STREAMS a str x 0", INVALID_ID),
        ("XREAD MAXCOUNT 0 STREAMS a 0", "-ERR MAXCOUNT must be a positive integer"),
        ("XREAD COUNT 5 MAXCOUNT 2 STREAMS a 0", "-ERR MAXCOUNT must be greater than or equal to COUNT"),
        ("XREAD MAXSIZE -5 STREAMS a 0", "-ERR MAXSIZE must be a positive integer"),
    ] {
        assert_eq!(h.run(line), err, "{line}");
    }
}

#[test]
fn xread_maxcount_and_maxsize() {
    let mut h = Harness::new();
    for i in 1..=3 {
        h.run(&format!("XADD a {i}-0 f {i}"));
        h.run(&format!("XADD b {i}-0 f {i}"));
    }
    assert_eq!(
        h.run("XREAD MAXCOUNT 4 STREAMS a b 0 0"),
        "[[a [[1-0 [f 1]] [2-0 [f 2]] [3-0 [f 3]]]] [b [[1-0 [f 1]]]]]"
    );
    assert_eq!(h.run("XREAD COUNT 2 MAXCOUNT 3 STREAMS a b 0 0"), "[[a [[1-0 [f 1]] [2-0 [f 2]]]] [b [[1-0 [f 1]]]]]");
    // Each entry `*2 $3 1-0 *2 $1 f $1 1` is 31 bytes in RESP2; the first always goes out.
    assert_eq!(h.run("XREAD MAXSIZE 1 STREAMS a b 0 0"), "[[a [[1-0 [f 1]]]]]");
    assert_eq!(h.run("XREAD MAXSIZE 62 STREAMS a b 2 0"), "[[a [[3-0 [f 3]]]] [b [[1-0 [f 1]]]]]");
    assert_eq!(h.run("XREAD MAXSIZE 61 STREAMS a b 2 0"), "[[a [[3-0 [f 3]]]]]");
}

#[test]
fn xreadgroup_maxcount_and_maxsize() {
    let mut h = Harness::new();
    for i in 1..=3 {
        h.run(&format!("XADD a {i}-0 f {i}"));
        h.run(&format!("XADD b {i}-0 f {i}"));
    }
    h.run("XGROUP CREATE a g 0");
    h.run("XGROUP CREATE b g 0");
    // Streams fill in argument order; an entry left out is neither sent nor pending, and the
    // group's last-delivered-id stays before it.
    assert_eq!(
        h.run("XREADGROUP GROUP g c MAXCOUNT 4 STREAMS a b > >"),
        "[[a [[1-0 [f 1]] [2-0 [f 2]] [3-0 [f 3]]]] [b [[1-0 [f 1]]]]]"
    );
    assert_eq!(h.run("XPENDING b g"), "[:1 1-0 1-0 [[c 1]]]");
    assert!(h.run("XINFO GROUPS b").contains("last-delivered-id=1-0 entries-read=:1 lag=:2"));
    assert_eq!(h.run("XREADGROUP GROUP g c STREAMS b >"), "[[b [[2-0 [f 2]] [3-0 [f 3]]]]]");
    // MAXSIZE: each entry is 31 bytes in RESP2; the first of the reply always goes out.
    h.run("XGROUP SETID a g 0");
    h.run("XGROUP SETID b g 0");
    h.run("XACK a g 1-0 2-0 3-0");
    h.run("XACK b g 1-0 2-0 3-0");
    assert_eq!(h.run("XREADGROUP GROUP g c MAXSIZE 1 STREAMS a b > >"), "[[a [[1-0 [f 1]]]]]");
    assert_eq!(h.run("XREADGROUP GROUP g c MAXSIZE 62 STREAMS a b > >"), "[[a [[2-0 [f 2]] [3-0 [f 3]]]]]");
    assert_eq!(h.run("XREADGROUP GROUP g c MAXSIZE 61 COUNT 1 STREAMS b >"), "[[b [[1-0 [f 1]]]]]");
    assert_eq!(h.run("XPENDING a g"), "[:3 1-0 3-0 [[c 3]]]");
    assert_eq!(h.run("XPENDING b g"), "[:1 1-0 1-0 [[c 1]]]");
    // History reads honour the caps too, and only what was sent counts as re-delivered.
    h.now_ms += 7;
    assert_eq!(h.run("XREADGROUP GROUP g c MAXCOUNT 2 STREAMS a 0"), "[[a [[1-0 [f 1]] [2-0 [f 2]]]]]");
    assert_eq!(h.run("XPENDING a g - + 10"), "[[1-0 c :0 :2] [2-0 c :0 :2] [3-0 c :7 :1]]");
    assert_eq!(h.run("XREADGROUP GROUP g c MAXSIZE 40 STREAMS a 0"), "[[a [[1-0 [f 1]]]]]");
}

#[test]
fn xread_blocks_with_resolved_ids() {
    let mut h = Harness::new();
    h.run("XADD a 5-0 f 1");
    assert_eq!(h.run("XREAD BLOCK 100 STREAMS a b a $ + $"), "nil*");
    let req = h.blocked.take().expect("blocked");
    assert_eq!(req.keys, vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]);
    assert_eq!(req.deadline_ms, Some(h.now_ms + 100));
    assert_eq!(req.timeout_reply, Reply::NullArray);
    let rerun: Vec<String> =
        req.rerun_args.expect("rerun args").iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    assert_eq!(rerun.join(" "), "XREAD BLOCK 100 STREAMS a b a 5-0 0-0 5-0");

    // BLOCK 0 blocks forever; a re-run keeps the deadline it is given.
    h.run("XREAD BLOCK 0 STREAMS a $");
    assert_eq!(h.blocked.take().map(|b| b.deadline_ms), Some(None));
    h.deadline_override = Some(Some(42));
    h.run("XREAD BLOCK 100 STREAMS a 5-0");
    assert_eq!(h.blocked.take().map(|b| b.deadline_ms), Some(Some(42)));
    h.deadline_override = None;

    // Data after blocking is served by the re-run.
    h.run("XADD b 1-0 f 1");
    assert_eq!(h.run("XREAD BLOCK 100 STREAMS a b 5-0 0-0"), "[[b [[1-0 [f 1]]]]]");
    assert!(h.blocked.is_none());

    // Without BLOCK, or inside MULTI, nothing blocks.
    h.run("XREAD STREAMS a $");
    assert!(h.blocked.is_none());
    h.no_block = true;
    assert_eq!(h.run("XREAD BLOCK 100 STREAMS a $"), "nil*");
    assert!(h.blocked.is_none());
}

#[test]
fn xadd_signals_blocked_readers_and_watchers() {
    let mut h = Harness::new();
    h.engine.blocking_keys.insert((0, Bytes::from_static(b"s")), 1);
    h.run("XADD s 1-0 f 1");
    assert_eq!(h.engine.take_ready_keys(), vec![(0, Bytes::from_static(b"s"))]);
    // Deletes, trims and XSETID do not wake readers.
    h.run("XDEL s 1-0");
    h.run("XTRIM s MAXLEN 0");
    h.run("XSETID s 5-0");
    assert!(h.engine.take_ready_keys().is_empty());
    // A deleted key serves nothing: the re-run blocks again.
    h.engine.remove(0, b"s");
    h.run("XREAD BLOCK 10 STREAMS s 0-0");
    assert!(h.blocked.is_some());
}

// ---------------------------------------------------------------------------------------------
// XDEL, XDELEX
// ---------------------------------------------------------------------------------------------

#[test]
fn xdel_counts_and_bookkeeping() {
    let mut h = Harness::new();
    for i in 1..=3 {
        h.run(&format!("XADD s {i}-0 f {i}"));
    }
    assert_eq!(h.run("XDEL nokey bad-id"), ":0", "IDs not validated on a missing key");
    assert_eq!(h.run("XDEL s 2-0 bad"), INVALID_ID);
    assert_eq!(h.run("XLEN s"), ":3", "nothing deleted on a bad ID");
    assert_eq!(h.run("XDEL s 1-0 1-0 9-0"), ":1");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "recorded-first-entry-id"), "2-0");
    assert_eq!(h.run("XDEL s 3-0 2-0"), ":2");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "max-deleted-entry-id"), "3-0");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "recorded-first-entry-id"), "0-0");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "last-generated-id"), "3-0");
    assert_eq!(h.run("XLEN s"), ":0", "an empty stream stays");
}

#[test]
fn xdelex() {
    let mut h = Harness::new();
    for i in 1..=3 {
        h.run(&format!("XADD s {i}-0 f {i}"));
    }
    assert_eq!(h.run("XDELEX nokey IDS 2 x y"), "[:-1 :-1]");
    assert_eq!(h.run("XDELEX s IDS 3 1-0 9-0 1-0"), "[:1 :-1 :-1]");
    assert_eq!(h.run("XDELEX s ACKED IDS 1 2-0"), "[:1]");
    assert_eq!(h.run("XDELEX s IDS 1 3-0 DELREF"), "[:1]", "options may follow the IDs");
    for (line, err) in [
        ("XDELEX s KEEPREF ACKED IDS 1 1", "-ERR syntax error"),
        ("XDELEX s IDS 0 1-0", "-ERR Number of IDs must be a positive integer"),
        ("XDELEX s IDS x 1-0", "-ERR Number of IDs must be a positive integer"),
        ("XDELEX s IDS 3 1-0 2-0", "-ERR The `numids` parameter must match the number of arguments"),
        ("XDELEX s KEEPREF DELREF 1-0", "-ERR syntax error"),
        ("XDELEX s KEEPREF 1-0 2-0", "-ERR syntax error"),
        ("XDELEX s IDS 1 1-0 EXTRA", "-ERR syntax error"),
        ("XDELEX s IDS 1 bad", INVALID_ID),
    ] {
        assert_eq!(h.run(line), err, "{line}");
    }
    assert_eq!(h.run("XDELEX s DELREF ACKED"), "-ERR wrong number of arguments for 'xdelex' command");
    h.engine.insert(0, Bytes::from_static(b"str"), Value::Str(Bytes::from_static(b"x")));
    assert_eq!(h.run("XDELEX str IDS 0 x"), WRONGTYPE, "type before options");
}

// ---------------------------------------------------------------------------------------------
// XTRIM
// ---------------------------------------------------------------------------------------------

#[test]
fn xtrim() {
    let mut h = Harness::new();
    for i in 1..=10 {
        h.run(&format!("XADD s {i}-0 f {i}"));
    }
    assert_eq!(h.run("XTRIM nokey MAXLEN 0"), ":0");
    assert_eq!(h.run("XTRIM s MAXLEN 8"), ":2");
    assert_eq!(h.run("XTRIM s MINID 5"), ":2");
    assert_eq!(h.run("XTRIM s MINID = 6-0 KEEPREF"), ":1");
    assert_eq!(h.run("XRANGE s - + COUNT 1"), "[[6-0 [f 6]]]");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "max-deleted-entry-id"), "0-0", "trims are not deletes");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "entries-added"), ":10");
    for (line, err) in [
        ("XTRIM s FOO 1", "-ERR syntax error"),
        ("XTRIM s LIMIT 1 KEEPREF", "-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"),
        ("XTRIM s KEEPREF NOMKSTREAM", "-ERR syntax error"),
        ("XTRIM s KEEPREF ACKED", "-ERR syntax error"),
        ("XTRIM s MAXLEN 1 KEEPREF KEEPREF", "-ERR syntax error"),
        ("XTRIM s MAXLEN 1 *", "-ERR syntax error"),
        ("XTRIM s MAXLEN 1 IDMPAUTO p", "-ERR syntax error"),
        ("XTRIM s KEEPREF DELREF", "-ERR syntax error"),
        ("XTRIM s DELREF x", "-ERR syntax error"),
        ("XTRIM s ACKED x", "-ERR syntax error"),
        ("XTRIM s MAXLEN 1 LIMIT 5", "-ERR syntax error, LIMIT cannot be used without the special ~ option"),
        ("XTRIM s MAXLEN -1", "-ERR The MAXLEN argument must be >= 0."),
        ("XTRIM s MINID ~", INVALID_ID),
    ] {
        assert_eq!(h.run(line), err, "{line}");
    }
    assert_eq!(h.run("XTRIM s KEEPREF"), "-ERR wrong number of arguments for 'xtrim' command");
    assert_eq!(h.run("XTRIM s ACKED DELREF"), "-ERR syntax error");
    assert_eq!(h.run("XTRIM s KEEPREF x"), "-ERR syntax error");
    assert_eq!(h.run("XTRIM s DELREF KEEPREF"), "-ERR syntax error");
    assert_eq!(h.run("XTRIM s ACKED ACKED"), "-ERR syntax error");
    assert_eq!(h.run("XTRIM s MAXLEN 1 NOMKSTREAM"), "-ERR syntax error");
}

// ---------------------------------------------------------------------------------------------
// XSETID
// ---------------------------------------------------------------------------------------------

#[test]
fn xsetid() {
    let mut h = Harness::new();
    assert_eq!(h.run("XSETID s 1-1"), "-ERR no such key");
    h.run("XADD s 5-0 f 1");
    assert_eq!(h.run("XSETID s 10-0 ENTRIESADDED 7 MAXDELETEDID 3-0"), "+OK");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "last-generated-id"), "10-0");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "entries-added"), ":7");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "max-deleted-entry-id"), "3-0");
    assert_eq!(
        h.run("XADD s 9-0 f 1"),
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item"
    );
    for (line, err) in [
        ("XSETID s x", INVALID_ID),
        ("XSETID s 1-1 0", "-ERR syntax error"),
        ("XSETID s 1-1 0-0", "-ERR syntax error"),
        ("XSETID s 1-1 ENTRIESADDED -1 MAXDELETEDID 0-0", "-ERR entries_added must be positive"),
        ("XSETID s 1-1 ENTRIESADDED x", "-ERR value is not an integer or out of range"),
        (
            "XSETID s 1-0 MAXDELETEDID 2-0",
            "-ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
        ),
        ("XSETID s 4-0", "-ERR The ID specified in XSETID is smaller than the target stream top item"),
        ("XSETID s 2-0", "-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"),
        (
            "XSETID s 10-0 ENTRIESADDED 0",
            "-ERR The entries_added specified in XSETID is smaller than the target stream length",
        ),
        ("XSETID nokey x", INVALID_ID),
    ] {
        assert_eq!(h.run(line), err, "{line}");
    }
    // The last ID may go down to the top entry after the top was deleted... but not below it.
    h.run("XADD s 11-0 f 1");
    h.run("XDEL s 11-0");
    assert_eq!(h.run("XSETID s 5-0"), "-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id");
    assert_eq!(h.run("XSETID s 11-0 MAXDELETEDID 0-0"), "+OK");
}

// ---------------------------------------------------------------------------------------------
// XINFO
// ---------------------------------------------------------------------------------------------

#[test]
fn xinfo_stream_summary_and_full() {
    let mut h = Harness::new();
    assert_eq!(h.run("XINFO STREAM nokey"), "-ERR no such key");
    assert_eq!(h.run("XINFO STREAM nokey FOO"), "-ERR no such key");
    h.run("XADD s 1-0 a 1");
    h.run("XADD s 2-0 b 2");
    h.run("XADD s 3-0 c 3");
    assert_eq!(
        h.run("XINFO STREAM s"),
        "{length=:3 radix-tree-keys=:1 radix-tree-nodes=:2 last-generated-id=3-0 \
         max-deleted-entry-id=0-0 entries-added=:3 recorded-first-entry-id=1-0 \
         idmp-duration=:100 idmp-maxsize=:100 pids-tracked=:0 iids-tracked=:0 iids-added=:0 \
         iids-duplicates=:0 groups=:0 first-entry=[1-0 [a 1]] last-entry=[3-0 [c 3]]}"
    );
    assert_eq!(
        h.run("XINFO STREAM s FULL COUNT 2"),
        "{length=:3 radix-tree-keys=:1 radix-tree-nodes=:2 last-generated-id=3-0 \
         max-deleted-entry-id=0-0 entries-added=:3 recorded-first-entry-id=1-0 \
         idmp-duration=:100 idmp-maxsize=:100 pids-tracked=:0 iids-tracked=:0 iids-added=:0 \
         iids-duplicates=:0 entries=[[1-0 [a 1]] [2-0 [b 2]]] groups=[]}"
    );
    assert_eq!(info_field(&mut h, "XINFO STREAM s full count 0", "entries"), "[[1-0 [a 1]] [2-0 [b 2]] [3-0 [c 3]]]");
    assert_eq!(info_field(&mut h, "XINFO STREAM s FULL COUNT -1", "entries"), "[[1-0 [a 1]] [2-0 [b 2]] [3-0 [c 3]]]");
    h.run("XTRIM s MAXLEN 0");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "first-entry"), "nil");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "last-entry"), "nil");
    for line in [
        "XINFO STREAM s FOO",
        "XINFO STREAM s FULL COUNT",
        "XINFO STREAM s FULL LIMIT 1",
        "XINFO STREAM s COUNT 1 FULL",
    ] {
        assert_eq!(
            h.run(line),
            "-ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.",
            "{line}"
        );
    }
    assert_eq!(h.run("XINFO STREAM s FULL COUNT x"), "-ERR value is not an integer or out of range");
    h.engine.insert(0, Bytes::from_static(b"str"), Value::Str(Bytes::from_static(b"x")));
    assert_eq!(h.run("XINFO STREAM str"), WRONGTYPE);
    let help = h.run("XINFO HELP");
    assert!(help.starts_with("[+XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"), "{help}");
    assert!(help.ends_with("+HELP +    Print this help.]"), "{help}");
}

#[test]
fn reads_do_not_count_as_writes_and_writes_do() {
    let mut h = Harness::new();
    h.run("XADD s 1-0 a 1");
    let dirty = h.engine.dirty();
    h.run("XRANGE s - +");
    h.run("XREAD STREAMS s 0");
    h.run("XINFO STREAM s");
    h.run("XDEL s 9-0");
    h.run("XTRIM s MAXLEN 5");
    assert_eq!(h.engine.dirty(), dirty);
    h.run("XDEL s 1-0");
    assert_eq!(h.engine.dirty(), dirty + 1);
}

// ---------------------------------------------------------------------------------------------
// XIDMPRECORD
// ---------------------------------------------------------------------------------------------

#[test]
fn xidmprecord() {
    let mut h = Harness::new();
    h.now_ms = 1000; // recent enough that IDs 1-1 and 2-1 are not expired
    assert_eq!(h.run("XIDMPRECORD s p i 1-1"), "-ERR no such key");
    h.run("XADD s 1-1 f v");
    for (line, err) in [
        ("XIDMPRECORD s p i bad", INVALID_ID),
        ("XIDMPRECORD s p i 1-", INVALID_ID),
        ("XIDMPRECORD s p i 9-9", "-ERR No such message in stream"),
    ] {
        assert_eq!(h.run(line), err, "{line}");
    }
    let call = |h: &mut Harness, parts: &[&str]| {
        show(&h.call(parts.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()))
    };
    assert_eq!(call(&mut h, &["XIDMPRECORD", "s", "", "i", "bad"]), INVALID_ID, "ID first");
    assert_eq!(call(&mut h, &["XIDMPRECORD", "s", "", "i", "1-1"]), "-ERR producer ID must be non-empty");
    assert_eq!(call(&mut h, &["XIDMPRECORD", "s", "p", "", "1-1"]), "-ERR idempotent ID must be non-empty");
    assert_eq!(h.run("XIDMPRECORD s p i 1-1"), "+OK");
    assert_eq!(h.run("XIDMPRECORD s p i 1-1"), "+OK");
    h.run("XADD s 2-1 f v");
    assert_eq!(h.run("XIDMPRECORD s p i 2-1"), "-ERR IID already exists for this producer with a different stream ID");
    assert_eq!(h.run("XADD s IDMP p i * f v"), "1-1");
    assert_eq!(info_field(&mut h, "XINFO STREAM s", "iids-added"), ":1");
}

/// A re-run is the whole command again (the server only re-runs a parked XREAD when a key it
/// waits on holds a stream): a key that now holds another type is WRONGTYPE, as in Redis.
#[test]
fn xread_rerun_checks_every_key_again() {
    let mut h = Harness::new();
    h.run("XADD t 1-1 f v");
    h.engine.insert(0, Bytes::from_static(b"s"), Value::List(Default::default()));
    h.deadline_override = Some(Some(5));
    assert_eq!(h.run("XREAD BLOCK 10 STREAMS s t 0-0 0-0"), WRONGTYPE);
    assert!(h.blocked.take().is_none());
}

#[test]
fn xreadgroup_new_entries_reply_is_well_formed_in_both_protocols() {
    for resp3 in [false, true] {
        let mut h = Harness::new();
        h.resp3 = resp3;
        for i in 1..=12 {
            h.run(&format!("XADD s {i}-1 f v{i} n {i}"));
        }
        h.run("XADD s 13-1 other x");
        h.run("XGROUP CREATE s g 0");
        let Reply::Raw(_) = pick_entries(h.call(words("XREADGROUP GROUP g c COUNT 2 STREAMS s >")), resp3) else {
            panic!("entries are pre-encoded")
        };
        let expected_key = if resp3 { "{s=" } else { "[[s " };
        let got = h.run("XREADGROUP GROUP g c COUNT 10 STREAMS s >");
        assert!(got.starts_with(expected_key), "{got}");
        assert!(got.contains("[3-1 [f v3 n 3]]") && got.contains("[12-1 [f v12 n 12]]"), "{got}");
        assert_eq!(
            h.run("XREADGROUP GROUP g c STREAMS s >"),
            format!("{}[[13-1 [other x]]]{}", expected_key, if resp3 { "}" } else { "]]" })
        );
        assert_eq!(h.run("XREADGROUP GROUP g c STREAMS s >"), "nil*");
        assert_eq!(h.run("XPENDING s g"), "[:13 1-1 13-1 [[c 13]]]");
    }
}

fn words(line: &str) -> Vec<Bytes> {
    line.split_whitespace().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
}

/// The entries element of a one-stream XREAD/XREADGROUP reply.
fn pick_entries(r: Reply, resp3: bool) -> Reply {
    match (r, resp3) {
        (Reply::Map(mut m), true) => m.remove(0).1,
        (Reply::Array(mut a), false) => match a.remove(0) {
            Reply::Array(mut pair) => pair.remove(1),
            other => panic!("{other:?}"),
        },
        (other, _) => panic!("{other:?}"),
    }
}

#[test]
fn pending_records_do_not_share_the_request_buffer() {
    let mut h = Harness::new();
    h.run("XADD s 1-1 f v");
    h.run("XGROUP CREATE s g 0");
    // The consumer name as a slice of a larger buffer, as the server's parser hands it over.
    let request = Bytes::from_static(b"XREADGROUP GROUP g consumer-1 STREAMS s >");
    let consumer = request.slice(19..29);
    assert_eq!(&consumer[..], b"consumer-1");
    let args = vec![
        Bytes::from_static(b"XREADGROUP"),
        Bytes::from_static(b"GROUP"),
        Bytes::from_static(b"g"),
        consumer,
        Bytes::from_static(b"STREAMS"),
        Bytes::from_static(b"s"),
        Bytes::from_static(b">"),
    ];
    h.call(args);
    let g = h.stream("s").group(b"g").expect("group");
    let owner = g.pel().get(super::StreamId { ms: 1, seq: 1 }).and_then(|e| e.owner.cloned()).expect("pending");
    let (name, _) = g.consumers().get_key_value(&b"consumer-1"[..]).expect("consumer");
    assert!(std::ptr::eq(owner.as_ptr(), name.as_ptr()), "the record shares the consumer's name");
    assert!(!request.as_ptr_range().contains(&owner.as_ptr()), "not a slice of the request");
}
