//! The command layer: drives an [`Engine`] with a sequence of commands built from the input,
//! the way the server runs them (the table's arity check, `Engine::call`, the record the
//! journal would log), then checks what must hold whatever the commands were:
//!
//! - no handler panics, loops or allocates without bound (run with `-malloc_limit_mb`);
//! - replaying the logged records (encoded and decoded as the log stores them) into a second
//!   engine with another stream node size reaches the same keyspace, key by key: what a
//!   restart or a replica would rebuild is what the clients were told;
//! - every stream's internal structure validates (nodes, PEL, consumers, groups);
//! - every value dumps to a payload that restores to an equal value.
//!
//! Every engine command of the table (subcommands included) can be chosen; its arguments come
//! from small pools (a few keys, numbers, IDs, members, patterns), the keywords of the
//! command's own syntax line, or raw bytes of the input, so the commands meet each other's
//! keys. Input layout, per step: a time step, a command, an argument count, then one or two
//! bytes per argument.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rill_engine::command::{CommandSpec, CommandTable, Handler};
use rill_engine::effect::{decode_record, encode_record, Effect};
use rill_engine::rdb::{dump, restore, LoadContext};
use rill_engine::types::families;
use rill_engine::types::stream::NodeLimits;
use rill_engine::{CallCtx, Engine, EngineConfig, Value};
use std::sync::OnceLock;

const KEYS: &[&str] = &["a", "b", "c", "{t}d", "e"];
const NUMBERS: &[&str] =
    &["0", "1", "2", "3", "5", "10", "100", "-1", "-2", "1000", "1700000000000", "9223372036854775807"];
const IDS: &[&str] = &[
    "0",
    "0-0",
    "0-1",
    "1-0",
    "1-1",
    "1-2",
    "2-0",
    "3-5",
    "$",
    ">",
    "*",
    "+",
    "-",
    "(1-1",
    "1-*",
    "+inf",
    "-inf",
    "1700000000000-0",
    "1700000000005-1",
];
const WORDS: &[&str] = &["f", "g", "c0", "c1", "v", "x", "y", "z", "1.5", "", "p", "i0"];
const FLOATS: &[&str] = &["1.5", "-1.5", "0.1", "1e3", "inf", "-inf", "nan", "3.0e-5"];
const PATTERNS: &[&str] = &["*", "a*", "?", "[a-c]", "{t}*", "\\*"];
/// Steps in one input: enough for groups, reads, claims and trims to meet.
const MAX_STEPS: usize = 48;
/// The most bytes one reply may take (the server's output limit, small here).
const REPLY_BUDGET: u64 = 4 << 20;
/// A bit or byte offset above this would make one string of that size: legitimate (Redis allows
/// 512 MB) but slow to fuzz, so such a SETRANGE/SETBIT is skipped.
const MAX_OFFSET: i64 = 1 << 16;
const START_MS: i64 = 1_700_000_000_000;

/// One runnable command: the words naming it (`XGROUP CREATE`) and its spec.
struct Cmd {
    words: Vec<&'static str>,
    spec: &'static CommandSpec,
    keywords: Vec<String>,
}

struct Tables {
    table: CommandTable,
    commands: Vec<Cmd>,
}

fn keywords(syntax: &str) -> Vec<String> {
    let mut out: Vec<String> = syntax
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| {
            w.len() >= 2 && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-' || c == '_')
        })
        .map(str::to_string)
        .collect();
    for sym in ["~", "=", "*", "$", ">"] {
        if syntax.contains(sym) {
            out.push(sym.to_string());
        }
    }
    out.sort();
    out.dedup();
    out
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let families = families();
        let table = CommandTable::new(&families);
        let mut commands = Vec::new();
        for family in &families {
            for spec in family.iter() {
                let name = spec.name.to_ascii_uppercase().leak();
                // PFSELFTEST reads no input and adds ten million elements to two HLLs: nothing
                // for the fuzzer to find, and far past the time one input may take.
                if spec.name == "pfselftest" {
                    continue;
                }
                if spec.subcommands.is_empty() {
                    if matches!(spec.handler, Handler::Engine(_)) {
                        commands.push(Cmd { words: vec![name], spec, keywords: keywords(spec.syntax) });
                    }
                    continue;
                }
                for sub in spec.subcommands {
                    if !matches!(sub.handler, Handler::Engine(_)) {
                        continue;
                    }
                    let sub_name = sub.name.rsplit('|').next().unwrap_or(sub.name).to_ascii_uppercase().leak();
                    commands.push(Cmd { words: vec![name, sub_name], spec: sub, keywords: keywords(sub.syntax) });
                }
            }
        }
        Tables { table, commands }
    })
}

/// The input, read a byte at a time; zeros once it is used up.
struct Input<'a> {
    rest: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&b, rest)) => {
                self.rest = rest;
                b
            }
            None => 0,
        }
    }

    fn pick<'p>(&mut self, pool: &[&'p str]) -> &'p str {
        pool[usize::from(self.byte()) % pool.len()]
    }

    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.rest.len());
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        head
    }
}

fn argument(input: &mut Input, cmd: &Cmd) -> Bytes {
    let text: String = match input.byte() % 10 {
        0 | 1 => input.pick(KEYS).into(),
        2 => input.pick(NUMBERS).into(),
        3 => input.pick(IDS).into(),
        4 | 5 if !cmd.keywords.is_empty() => cmd.keywords[usize::from(input.byte()) % cmd.keywords.len()].clone(),
        6 => input.pick(FLOATS).into(),
        7 => input.pick(PATTERNS).into(),
        8 => {
            let n = usize::from(input.byte() % 12);
            return Bytes::copy_from_slice(input.bytes(n));
        }
        _ => input.pick(WORDS).into(),
    };
    Bytes::from(text)
}

/// Skipped: a huge offset is a legitimate but slow way to make a big string.
fn too_slow(cmd: &Cmd, args: &[Bytes]) -> bool {
    if !matches!(cmd.spec.name, "setrange" | "setbit") {
        return false;
    }
    let offset = args.get(2).and_then(|a| std::str::from_utf8(a).ok()).and_then(|s| s.parse::<i64>().ok());
    offset.is_some_and(|o| o > MAX_OFFSET)
}

/// Run one command as the server does and return the record the journal would log for it.
fn run(engine: &mut Engine, cmd: &Cmd, args: &[Bytes], db: usize, now_ms: i64) -> Vec<Effect> {
    let tables = tables();
    let rill_engine::command::Lookup::Found(spec) = tables.table.resolve(args) else {
        panic!("the table does not resolve {:?}", cmd.words);
    };
    if !spec.arity_ok(args.len()) {
        return Vec::new();
    }
    let Handler::Engine(handler) = spec.handler else { return Vec::new() };
    let mut ctx = CallCtx::new(db, now_ms, 1);
    ctx.recording = true;
    ctx.no_block = true;
    ctx.reply_budget_bytes = REPLY_BUDGET;
    let outcome = engine.call(handler, &mut ctx, args);
    if trace() {
        let shown: Vec<String> = args.iter().map(|a| format!("{:?}", String::from_utf8_lossy(a))).collect();
        eprintln!("db {db} t+{} {} -> {:?}", now_ms - START_MS, shown.join(" "), outcome.reply);
    }
    let mut record: Vec<Effect> = engine.take_expired().into_iter().map(|(db, key)| Effect::del(db, key)).collect();
    record.extend(ctx.effects.decode().expect("a command's own effects decode"));
    if !ctx.explicit && outcome.changes > 0 && spec.logged_when_changed() {
        record.push(Effect::command(db, args.to_vec()));
    }
    record
}

/// A key's value as the comparison sees it. Streams by the RDB form of their entries laid out
/// afresh (the replay runs under other node limits), taken through one DUMP and RESTORE at `now_ms`: what has expired but is only dropped lazily (IDMP
/// entries past their duration, which a read may or may not have swept yet) is gone from it.
fn view(engine: &Engine, db: usize, key: &[u8], now_ms: i64) -> Option<(Option<Value>, Vec<u8>, Option<i64>)> {
    engine.db(db).get_raw(key).map(|e| match &e.value {
        Value::Stream(s) => {
            let ctx = LoadContext { now_ms, ..load_context() };
            let relaid = Value::Stream(Box::new(s.relaid(NodeLimits::default())));
            let canonical = restore(&dump(&relaid, now_ms), &ctx).expect("a DUMP restores");
            (None, dump(&canonical, now_ms), e.expire_at_ms())
        }
        other => (Some(other.clone()), Vec::new(), e.expire_at_ms()),
    })
}

/// `RILL_FUZZ_TRACE=1` prints each command and its reply (to read a crash's input).
fn trace() -> bool {
    static T: OnceLock<bool> = OnceLock::new();
    *T.get_or_init(|| std::env::var_os("RILL_FUZZ_TRACE").is_some())
}

fn load_context() -> LoadContext {
    LoadContext {
        limits: Default::default(),
        idmp_duration_secs: 100,
        idmp_max_size: 100,
        now_ms: START_MS,
        rill_streams: false,
    }
}

fn check(data: &[u8]) {
    let tables = tables();
    let mut input = Input { rest: data };
    let mut live = Engine::new(EngineConfig { stream_node_max_entries: 3, ..EngineConfig::default() });
    let mut log: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut now = START_MS;
    for _ in 0..MAX_STEPS {
        if input.rest.is_empty() {
            break;
        }
        let step = input.byte();
        now += match step >> 6 {
            0 | 1 => i64::from(step & 3),
            2 => i64::from(step & 63) * 10,
            _ => i64::from(step & 63) * 1000,
        };
        let db = usize::from(step & 4 != 0 && step >> 6 == 3);
        let cmd =
            &tables.commands[usize::from(u16::from_le_bytes([input.byte(), input.byte()])) % tables.commands.len()];
        let min = usize::try_from(cmd.spec.arity.unsigned_abs()).unwrap_or(1).saturating_sub(1);
        let extra = if cmd.spec.arity < 0 { usize::from(input.byte() % 8) } else { 0 };
        let mut args: Vec<Bytes> = cmd.words.iter().map(|w| Bytes::from_static(w.as_bytes())).collect();
        while args.len() < 1 + min + extra {
            args.push(argument(&mut input, cmd));
        }
        if too_slow(cmd, &args) {
            continue;
        }
        let record = run(&mut live, cmd, &args, db, now);
        if !record.is_empty() {
            let mut body = Vec::new();
            encode_record(&mut body, now, &record);
            log.push((now, body));
        }
    }

    // Replay the log into an engine with another node size, as a restart or a replica would.
    let mut copy = Engine::new(EngineConfig { stream_node_max_entries: 5, ..EngineConfig::default() });
    copy.set_loading(true);
    for (time, body) in &log {
        let (decoded_time, effects) = decode_record(body).expect("a logged record decodes");
        assert_eq!(decoded_time, *time);
        for effect in effects {
            let shown = format!("{effect:?}");
            if let Err(e) = copy.apply_effect(&tables.table, decoded_time, effect) {
                panic!("replaying {shown} failed: {e}");
            }
        }
    }

    let ctx = LoadContext { now_ms: now, ..load_context() };
    for db in 0..live.dbs().len() {
        let mut keys: Vec<Bytes> = live.db(db).iter().map(|(k, _)| Bytes::copy_from_slice(k)).collect();
        keys.extend(copy.db(db).iter().map(|(k, _)| Bytes::copy_from_slice(k)));
        keys.sort();
        keys.dedup();
        for key in &keys {
            let (a, b) = (view(&live, db, key, now), view(&copy, db, key, now));
            assert!(a == b, "db {db} key {key:?} differs after replay:\n live {a:?}\n copy {b:?}");
            let Some(entry) = live.db(db).get_raw(key) else { continue };
            if let Value::Stream(s) = &entry.value {
                assert!(s.validate(), "stream {key:?} does not validate");
            }
            // One round may drop what Redis' own save and load drop (an IDMP producer whose
            // entries all expired is saved, then skipped by the load); from then on a DUMP
            // restores to a value that dumps the same.
            let first = dump(&entry.value, now);
            let back = restore(&first, &ctx).expect("a DUMP restores");
            let second = dump(&back, now);
            let again = restore(&second, &ctx).expect("a DUMP of a restored value restores");
            assert_eq!(dump(&again, now), second, "key {key:?}: DUMP and RESTORE differ");
        }
    }
}

fuzz_target!(|data: &[u8]| check(data));
