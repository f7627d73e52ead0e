//! Replaying the effects of any command sequence reaches the same keyspace, whatever the
//! commands decided from the clock, random numbers or block layout.

use crate::command::{CommandTable, Flags, Handler, Lookup};
use crate::effect::{decode_record, encode_record, Effect};
use crate::types::families;
use crate::{CallCtx, Engine, EngineConfig};
use bytes::Bytes;
use proptest::prelude::*;

/// Run `args` the way the server does and return the record it would log.
fn run_logged(engine: &mut Engine, table: &CommandTable, now: i64, args: &[String]) -> Vec<Effect> {
    let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.clone())).collect();
    let Lookup::Found(spec) = table.resolve(&args) else { return Vec::new() };
    if !spec.arity_ok(args.len()) {
        return Vec::new();
    }
    let Handler::Engine(h) = spec.handler else { return Vec::new() };
    let mut ctx = CallCtx::new(0, now, 1);
    ctx.recording = true;
    ctx.no_block = true;
    let outcome = engine.call(h, &mut ctx, &args);
    let mut out: Vec<Effect> = engine.take_expired().into_iter().map(|(db, k)| Effect::del(db, k)).collect();
    // Hash fields removed by expiry: one HDEL each, as the server logs them.
    for (db, key, fields) in engine.take_expired_fields() {
        out.extend(fields.into_iter().map(|f| Effect::command(db, vec![Bytes::from_static(b"HDEL"), key.clone(), f])));
    }
    if ctx.explicit {
        out.extend(ctx.effects.decode().unwrap());
    } else if outcome.changes > 0 && spec.flags.has(Flags::WRITE) {
        out.push(Effect::Command { db: 0, args });
    }
    out
}

fn replay(engine: &mut Engine, table: &CommandTable, time: i64, effects: &[Effect]) {
    for e in effects {
        match engine.apply_effect(table, time, e.clone()) {
            // A command that failed when it ran fails the same way on replay.
            Ok(()) | Err(crate::effect::ApplyError::Command(_)) => {}
            Err(other) => panic!("{other}: {e:?}"),
        }
    }
}

fn command() -> impl Strategy<Value = Vec<String>> {
    let key = prop_oneof![Just("s"), Just("t")];
    let id = (0u64..40).prop_map(|n| format!("{}-{}", 1_700_000_000_000u64 + n / 4, n % 4));
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    prop_oneof![
        4 => (key.clone(), 0u8..3).prop_map(move |(k, f)| s(&["XADD", k, "*", "f", &f.to_string()])),
        1 => (key.clone(), 1u8..6).prop_map(move |(k, n)| s(&["XADD", k, "MAXLEN", "~", &n.to_string(), "*", "f", "v"])),
        1 => (key.clone(), 1u8..6).prop_map(move |(k, n)| s(&["XADD", k, "MAXLEN", &n.to_string(), "*", "f", "v"])),
        1 => (key.clone(), 0u8..6, prop_oneof![Just("KEEPREF"), Just("DELREF"), Just("ACKED")])
            .prop_map(move |(k, n, m)| s(&["XTRIM", k, "MAXLEN", "~", &n.to_string(), "LIMIT", "3", m])),
        1 => (key.clone(), 0u8..6, prop_oneof![Just("DELREF"), Just("ACKED")])
            .prop_map(move |(k, n, m)| s(&["XTRIM", k, "MAXLEN", &n.to_string(), m])),
        1 => (key.clone(), id.clone(), prop_oneof![Just("DELREF"), Just("ACKED")])
            .prop_map(move |(k, i, m)| s(&["XTRIM", k, "MINID", "~", &i, m])),
        1 => (key.clone(), 0u8..6, prop_oneof![Just("DELREF"), Just("ACKED")])
            .prop_map(move |(k, n, m)| s(&["XADD", k, m, "MAXLEN", "~", &n.to_string(), "*", "f", "v"])),
        1 => key.clone().prop_map(move |k| s(&["XGROUP", "CREATE", k, "g", "0", "MKSTREAM"])),
        1 => key.clone().prop_map(move |k| s(&["XGROUP", "CREATECONSUMER", k, "g", "c3"])),
        3 => (key.clone(), 0u8..3, 1u8..4).prop_map(move |(k, c, n)| s(&["XREADGROUP", "GROUP", "g", &format!("c{c}"), "COUNT", &n.to_string(), "STREAMS", k, ">"])),
        1 => (key.clone(), 0u8..3).prop_map(move |(k, c)| s(&["XREADGROUP", "GROUP", "g", &format!("c{c}"), "STREAMS", k, "0"])),
        1 => (key.clone(), 0u8..3).prop_map(move |(k, c)| s(&["XREADGROUP", "GROUP", "g", &format!("c{c}"), "CLAIM", "5", "COUNT", "2", "STREAMS", k, ">"])),
        2 => (key.clone(), id.clone()).prop_map(move |(k, i)| s(&["XACK", k, "g", &i])),
        1 => (key.clone(), 0u8..3, id.clone()).prop_map(move |(k, c, i)| s(&["XCLAIM", k, "g", &format!("c{c}"), "0", &i])),
        1 => (key.clone(), 0u8..3).prop_map(move |(k, c)| s(&["XAUTOCLAIM", k, "g", &format!("c{c}"), "3", "0", "COUNT", "3"])),
        1 => (key.clone(), id.clone()).prop_map(move |(k, i)| s(&["XNACK", k, "g", "FAIL", "IDS", "1", &i])),
        1 => (key.clone(), id.clone()).prop_map(move |(k, i)| s(&["XDEL", k, &i])),
        1 => (key.clone(), id.clone()).prop_map(move |(k, i)| s(&["XACKDEL", k, "g", "DELREF", "IDS", "1", &i])),
        1 => key.clone().prop_map(move |k| s(&["XADD", k, "IDMPAUTO", "p", "*", "f", "same"])),
        1 => (key.clone(), 0u8..3).prop_map(move |(k, i)| s(&["XADD", k, "IDMP", "p", &format!("i{i}"), "*", "f", "v"])),
        1 => key.clone().prop_map(move |k| s(&["XCFGSET", k, "IDMP-DURATION", "1", "IDMP-MAXSIZE", "2"])),
        1 => (0u8..4).prop_map(move |n| s(&["SET", "str", &n.to_string(), "PX", "7"])),
        1 => (0u8..4).prop_map(move |n| s(&["SADD", "set", &n.to_string(), "x", "y"])),
        1 => Just(s(&["SPOP", "set"])),
        1 => Just(s(&["GET", "str"])),
        1 => Just(s(&["EXPIRE", "set", "1"])),
        1 => key.prop_map(move |k| s(&["DEL", k])),
        // Hash field expiry with relative times, so that replay must get them as absolute ones
        // and the lazy removals as HDELs.
        1 => Just(s(&["HSET", "hx", "a", "1", "b", "2", "c", "3"])),
        2 => (1u8..8, prop_oneof![Just("a"), Just("b"), Just("c")], prop_oneof![Just(""), Just("NX"), Just("GT"), Just("LT")])
            .prop_map(move |(t, f, c)| {
                let mut v = s(&["HPEXPIRE", "hx", &t.to_string()]);
                v.extend(s(&[c]).into_iter().filter(|w| !w.is_empty()));
                v.extend(s(&["FIELDS", "1", f]));
                v
            }),
        1 => prop_oneof![Just("a"), Just("b"), Just("c")].prop_map(move |f| s(&["HGET", "hx", f])),
        1 => (0u8..6).prop_map(move |t| s(&["HGETEX", "hx", "PX", &t.to_string(), "FIELDS", "2", "a", "b"])),
        1 => Just(s(&["HGETEX", "hx", "PERSIST", "FIELDS", "2", "b", "c"])),
        1 => (0u8..6, prop_oneof![Just(""), Just("FNX"), Just("FXX")]).prop_map(move |(t, c)| {
            let mut v = s(&["HSETEX", "hx"]);
            v.extend(s(&[c]).into_iter().filter(|w| !w.is_empty()));
            v.extend(s(&["PX", &t.to_string(), "FIELDS", "1", "c", "9"]));
            v
        }),
        1 => Just(s(&["HPERSIST", "hx", "FIELDS", "1", "a"])),
        1 => Just(s(&["HRANDFIELD", "hx", "-2"])),
        1 => Just(s(&["HINCRBY", "hx", "a", "1"])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn replaying_effects_reaches_the_same_state(
        steps in proptest::collection::vec((command(), prop_oneof![4 => 0i64..4, 1 => 300i64..1500]), 1..60),
    ) {
        let table = CommandTable::new(&families());
        let mut live = Engine::new(EngineConfig { stream_node_max_entries: 3, ..EngineConfig::default() });
        let mut log: Vec<u8> = Vec::new();
        let mut now = 1_700_000_000_000i64;
        for (args, dt) in &steps {
            now += dt;
            let effects = run_logged(&mut live, &table, now, args);
            if !effects.is_empty() {
                let mut body = Vec::new();
                encode_record(&mut body, now, &effects);
                log.extend_from_slice(&(body.len() as u32).to_le_bytes());
                log.extend_from_slice(&body);
            }
        }
        // Replay from the encoded log into an engine with other block limits: effects must
        // not depend on layout.
        let mut copy = Engine::new(EngineConfig { stream_node_max_entries: 5, ..EngineConfig::default() });
        copy.set_loading(true);
        let mut rest = &log[..];
        while rest.len() >= 4 {
            let n = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let (time, effects) = decode_record(&rest[4..4 + n]).unwrap();
            replay(&mut copy, &table, time, &effects);
            rest = &rest[4 + n..];
        }
        for key in ["s", "t", "str", "set", "hx"] {
            let view = |e: &Engine| e.db(0).get_raw(key.as_bytes()).map(|e| match &e.value {
                // Streams: compared through the RDB form of their entries laid out afresh.
                crate::Value::Stream(s) => (None, relaid_dump(s, now), e.expire_at_ms()),
                other => (Some(other.clone()), Vec::new(), e.expire_at_ms()),
            });
            prop_assert!(view(&live) == view(&copy), "key {} differs after replay", key);
        }
    }
}

/// An effect on a database the engine lacks says so, whatever its kind (a stream effect
/// reported it as a stream error before, which replay skipped with a warning): replay tells
/// a log from a server with more databases by this error.
#[test]
fn every_kind_of_effect_on_a_missing_database_is_db_out_of_range() {
    use crate::effect::ApplyError;
    use crate::types::stream::group::GroupEffect;
    let table = CommandTable::new(&families());
    let mut engine = Engine::new(EngineConfig { databases: 4, ..EngineConfig::default() });
    let key = Bytes::from_static(b"s");
    let group = GroupEffect::GroupDestroyed { group: Bytes::from_static(b"g") };
    for db in [4usize, 1 << 40] {
        for e in [
            Effect::Command { db, args: vec![Bytes::from_static(b"SET"), key.clone(), key.clone()] },
            Effect::Command {
                db,
                args: vec![Bytes::from_static(b"XADD"), key.clone(), "1-1".into(), "f".into(), "v".into()],
            },
            Effect::Group { db, key: key.clone(), effect: group.clone() },
            Effect::TrimIds { db, key: key.clone(), ids: Vec::new(), delref: false },
        ] {
            assert_eq!(engine.apply_effect(&table, 0, e.clone()), Err(ApplyError::DbOutOfRange(db)), "{e:?}");
        }
    }
    assert_eq!(engine.total_keys(), 0);
}

/// A DELREF/ACKED trim with groups is recorded as an exact XTRIM that removes the same entries
/// on any node layout: ACKED as `MINID = <last removed + 1>` (Redis' `MAXLEN = <length left>`
/// stops early on a replica whose walk meets a node with referenced entries first), DELREF
/// approximate as Redis sends it (`MAXLEN = <length left>`, `MINID = <first left>`).
#[test]
fn delref_and_acked_trims_are_recorded_as_exact_xtrims() {
    let table = CommandTable::new(&families());
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let cases: &[(&[&str], &[&str])] = &[
        (&["XTRIM", "s", "MAXLEN", "~", "0", "ACKED"], &["XTRIM", "s", "MINID", "=", "4-1", "ACKED"]),
        (&["XTRIM", "s", "MAXLEN", "0", "ACKED"], &["XTRIM", "s", "MINID", "=", "4-1", "ACKED"]),
        (&["XTRIM", "s", "MINID", "9", "ACKED"], &["XTRIM", "s", "MINID", "=", "9-0", "ACKED"]),
        (&["XTRIM", "s", "MAXLEN", "~", "2", "DELREF"], &["XTRIM", "s", "MAXLEN", "=", "2", "DELREF"]),
        (&["XTRIM", "s", "MINID", "~", "5", "DELREF"], &["XTRIM", "s", "MINID", "=", "5-0", "DELREF"]),
        (&["XTRIM", "s", "MINID", "~", "9", "DELREF"], &["XTRIM", "s", "MAXLEN", "=", "0", "DELREF"]),
        (&["XTRIM", "s", "MAXLEN", "4", "DELREF"], &["XTRIM", "s", "MAXLEN", "=", "4", "DELREF"]),
    ];
    for (trim, want) in cases {
        // Entries 1..6 in nodes of three, all delivered to g, 3 and 4 acknowledged.
        let mut live = Engine::new(EngineConfig { stream_node_max_entries: 3, ..EngineConfig::default() });
        let mut log = Vec::new();
        let mut setup: Vec<Vec<String>> = (1..=6).map(|i| s(&["XADD", "s", &format!("{i}-0"), "f", "v"])).collect();
        setup.push(s(&["XGROUP", "CREATE", "s", "g", "0"]));
        setup.push(s(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]));
        setup.push(s(&["XACK", "s", "g", "3-0", "4-0"]));
        for args in &setup {
            log.push(run_logged(&mut live, &table, 1, args));
        }
        let effects = run_logged(&mut live, &table, 1, &s(trim));
        let want = Effect::Command { db: 0, args: want.iter().map(|w| Bytes::from(w.to_string())).collect() };
        assert_eq!(effects, vec![want], "{trim:?}");
        log.push(effects);
        let mut copy = Engine::new(EngineConfig { stream_node_max_entries: 2, ..EngineConfig::default() });
        for effects in &log {
            replay(&mut copy, &table, 1, effects);
        }
        let view = |e: &Engine| {
            e.db(0).get_raw(b"s").map(|e| match &e.value {
                crate::Value::Stream(s) => relaid_dump(s, 1),
                _ => Vec::new(),
            })
        };
        assert!(view(&live) == view(&copy), "{trim:?}: the replay on other nodes differs");
    }
}

/// A stream's DUMP with its entries laid out afresh: equal for streams that differ only in node
/// layout (the replays above run under other node limits).
fn relaid_dump(s: &crate::types::stream::Stream, now_ms: i64) -> Vec<u8> {
    let relaid = s.relaid(crate::types::stream::NodeLimits::default());
    crate::rdb::dump(&crate::Value::Stream(Box::new(relaid)), now_ms)
}
