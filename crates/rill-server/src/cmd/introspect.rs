//! COMMAND, COMMAND COUNT|INFO|DOCS|LIST|GETKEYS|GETKEYSANDFLAGS: all read the one command
//! table.
//! Cost: O(commands) for the full listings, O(1) per named command.

use super::{reply, syntax, Call, CmdResult};
use bytes::Bytes;
use rill_engine::command::{docs, BeginSearch, CommandSpec, FindKeys, Lookup};
use rill_engine::glob::glob_match;
use rill_engine::CmdError;
use rill_resp::Reply;

/// COMMAND HELP lines.
pub const COMMAND_HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all commands.",
    "COUNT",
    "    Return the total number of commands in this server.",
    "LIST",
    "    Return a list of all commands in this server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple commands.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple commands.",
    "GETKEYS <full-command>",
    "    Return the keys from a full command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full command.",
];

fn simple(s: &str) -> Reply {
    Reply::Simple(Bytes::copy_from_slice(s.as_bytes()))
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn map(pairs: Vec<(&str, Reply)>) -> Reply {
    Reply::Map(pairs.into_iter().map(|(k, v)| (bulk(k), v)).collect())
}

/// Key-spec flags as Redis writes them: the access type in upper case, the rest in lower case,
/// in Redis' order (RO, RW, OW, RM, access, update, insert, delete, not_key, incomplete,
/// variable_flags).
fn key_flags_reply(flags: &[&str]) -> Reply {
    const ORDER: [&str; 11] =
        ["RO", "RW", "OW", "RM", "ACCESS", "UPDATE", "INSERT", "DELETE", "NOT_KEY", "INCOMPLETE", "VARIABLE_FLAGS"];
    let mut sorted: Vec<&str> = flags.to_vec();
    sorted.sort_by_key(|f| ORDER.iter().position(|o| o.eq_ignore_ascii_case(f)).unwrap_or(ORDER.len()));
    Reply::Set(
        sorted
            .into_iter()
            .map(|f| if matches!(f, "RO" | "RW" | "OW" | "RM") { simple(f) } else { simple(&f.to_ascii_lowercase()) })
            .collect(),
    )
}

fn key_spec(spec: &rill_engine::command::KeySpec) -> Reply {
    let begin = match spec.begin {
        BeginSearch::Index(i) => {
            map(vec![("type", bulk("index")), ("spec", map(vec![("index", Reply::Integer(i.into()))]))])
        }
        BeginSearch::Keyword { keyword, startfrom } => map(vec![
            ("type", bulk("keyword")),
            ("spec", map(vec![("keyword", bulk(keyword)), ("startfrom", Reply::Integer(startfrom.into()))])),
        ]),
        BeginSearch::Unknown => map(vec![("type", bulk("unknown")), ("spec", map(vec![]))]),
    };
    let find = match spec.find {
        FindKeys::Range { lastkey, keystep, limit } => map(vec![
            ("type", bulk("range")),
            (
                "spec",
                map(vec![
                    ("lastkey", Reply::Integer(lastkey.into())),
                    ("keystep", Reply::Integer(keystep.into())),
                    ("limit", Reply::Integer(limit.into())),
                ]),
            ),
        ]),
        FindKeys::Keynum { keynumidx, firstkey, keystep } => map(vec![
            ("type", bulk("keynum")),
            (
                "spec",
                map(vec![
                    ("keynumidx", Reply::Integer(keynumidx.into())),
                    ("firstkey", Reply::Integer(firstkey.into())),
                    ("keystep", Reply::Integer(keystep.into())),
                ]),
            ),
        ]),
        FindKeys::Unknown => map(vec![("type", bulk("unknown")), ("spec", map(vec![]))]),
    };
    let mut fields = Vec::with_capacity(4);
    if !spec.notes.is_empty() {
        fields.push(("notes", bulk(spec.notes)));
    }
    fields.extend([("flags", key_flags_reply(spec.flags)), ("begin_search", begin), ("find_keys", find)]);
    map(fields)
}

/// The 10-element command info array.
pub fn command_info_reply(spec: &CommandSpec) -> Reply {
    Reply::Array(vec![
        bulk(spec.name),
        Reply::Integer(spec.arity.into()),
        Reply::Set(spec.flags.names().into_iter().map(simple).collect()),
        Reply::Integer(spec.first_key.into()),
        Reply::Integer(spec.last_key.into()),
        Reply::Integer(spec.step.into()),
        Reply::Set(spec.acl.iter().map(|a| simple(a)).collect()),
        Reply::Set(spec.tips.iter().map(|t| bulk(t)).collect()),
        Reply::Array(spec.key_specs.iter().map(key_spec).collect()),
        Reply::Array(spec.subcommands.iter().map(command_info_reply).collect()),
    ])
}

/// COMMAND
pub fn command(c: &mut Call) -> CmdResult {
    reply(Reply::Array(c.shared.table.all().iter().map(|s| command_info_reply(s)).collect()))
}

/// COMMAND INFO [name ...]
pub fn command_info(c: &mut Call) -> CmdResult {
    if c.args.len() == 2 {
        return command(c);
    }
    let out = c
        .args
        .iter()
        .skip(2)
        .map(|n| c.shared.table.get_full(n).map(command_info_reply).unwrap_or(Reply::Null))
        .collect();
    reply(Reply::Array(out))
}

/// COMMAND DOCS [name ...]
pub fn command_docs(c: &mut Call) -> CmdResult {
    let specs: Vec<&CommandSpec> = if c.args.len() == 2 {
        c.shared.table.all().to_vec()
    } else {
        c.args.iter().skip(2).filter_map(|n| c.shared.table.get_full(n)).collect()
    };
    reply(Reply::Map(specs.into_iter().map(|s| (bulk(s.name), docs::render_docs(s))).collect()))
}

/// COMMAND LIST [FILTERBY MODULE m | ACLCAT cat | PATTERN glob]
pub fn command_list(c: &mut Call) -> CmdResult {
    let mut names: Vec<&str> = Vec::new();
    for s in c.shared.table.all() {
        names.push(s.name);
        names.extend(s.subcommands.iter().map(|x| x.name));
    }
    match c.args.len() {
        2 => {}
        5 if c.arg(2).eq_ignore_ascii_case(b"filterby") => {
            let kind = c.text(3).to_ascii_lowercase();
            let val = c.arg(4).to_vec();
            match kind.as_str() {
                "module" => names.clear(),
                "aclcat" => {
                    let want = format!("@{}", String::from_utf8_lossy(&val).to_ascii_lowercase());
                    names.retain(|n| {
                        c.shared.table.get_full(n.as_bytes()).is_some_and(|s| s.acl.contains(&want.as_str()))
                    });
                }
                "pattern" => names.retain(|n| glob_match(&val, n.as_bytes(), true)),
                _ => return Err(syntax()),
            }
        }
        _ => return Err(syntax()),
    }
    reply(Reply::Array(names.into_iter().map(bulk).collect()))
}

/// COMMAND GETKEYS command arg ...
pub fn command_getkeys(c: &mut Call) -> CmdResult {
    getkeys(c, false)
}

/// COMMAND GETKEYSANDFLAGS command arg ...: each key with its flags for this call.
pub fn command_getkeysandflags(c: &mut Call) -> CmdResult {
    getkeys(c, true)
}

/// The keys of a full command, found as ACL and the dispatcher find them; Redis' errors for a
/// command without keys, a wrong argument count and arguments holding no valid key list (for
/// a command whose keys are optional, such as EVAL with 0 keys, an empty list instead).
fn getkeys(c: &mut Call, with_flags: bool) -> CmdResult {
    let args: &[Bytes] = c.args.get(2..).unwrap_or(&[]);
    let spec = match c.shared.table.resolve(args) {
        Lookup::Found(s) => s,
        _ => return Err(CmdError::full("ERR Invalid command specified")),
    };
    if !spec.has_keys() {
        return Err(CmdError::full("ERR The command has no key arguments"));
    }
    if !spec.arity_ok(args.len()) {
        return Err(CmdError::full("ERR Invalid number of arguments specified for command"));
    }
    let keys = spec.keys_with_flags(args).unwrap_or_default();
    if keys.is_empty() && !spec.flags.has(rill_engine::command::Flags::NO_MANDATORY_KEYS) {
        return Err(CmdError::full("ERR Invalid arguments specified for command"));
    }
    let item = |(i, flags): (usize, &[&str])| {
        let key = Reply::Bulk(args.get(i).cloned().unwrap_or_default());
        if with_flags {
            Reply::Array(vec![key, key_flags_reply(flags)])
        } else {
            key
        }
    };
    reply(Reply::Array(keys.into_iter().map(item).collect()))
}

/// MEMORY DOCTOR: the memory figures that point at a problem, each with what it likely
/// means, or that none does (our words; Redis' report has the same purpose and shape: one
/// text, verbatim in RESP3).
pub fn memory_doctor(c: &mut Call) -> CmdResult {
    use crate::alloc;
    let used = alloc::allocated_bytes();
    let rss = alloc::rss_bytes();
    let peak = alloc::peak_bytes().max(used);
    let mb = |b: u64| format!("{:.1} MB", b as f64 / (1024.0 * 1024.0));
    let mut findings = Vec::new();
    if used < 5 * 1024 * 1024 {
        findings.push(format!("This instance uses little memory ({}): there is too little to diagnose.", mb(used)));
    } else {
        if peak > used + used / 2 {
            findings.push(format!(
                "Peak memory ({}) is more than 150% of the memory in use now ({}): a large part was \
                 freed since (keys deleted or expired, clients gone), and the process may keep it \
                 (resident: {}).",
                mb(peak),
                mb(used),
                mb(rss)
            ));
        }
        if rss > used + used * 2 / 5 && rss - used > 10 * 1024 * 1024 {
            findings.push(format!(
                "The process holds {} more than it allocated ({} resident for {} in use): the \
                 allocator's free space is fragmented.",
                mb(rss - used),
                mb(rss),
                mb(used)
            ));
        }
        let (mut normal, mut replicas, mut n) = (0u64, 0u64, 0u64);
        for ci in c.st.clients.values() {
            let held = ci.mem.total() + ci.push.queued_bytes();
            match ci.kind {
                crate::state::ClientKind::Replica | crate::state::ClientKind::RdbChannel => replicas += held,
                _ => {
                    normal += held;
                    n += 1;
                }
            }
        }
        if n > 0 && normal / n > 200 * 1024 {
            findings.push(format!(
                "Clients hold {} of buffers, {} each on average: some read their replies slowly \
                 or run MONITOR; client-output-buffer-limit bounds them.",
                mb(normal),
                mb(normal / n)
            ));
        }
        if replicas > 10 * 1024 * 1024 {
            findings
                .push(format!("Replica links hold {} of buffers: a replica is slow or was resyncing.", mb(replicas)));
        }
        if findings.is_empty() {
            findings.push(format!(
                "No memory problem found: {} in use, {} resident, peak {}.",
                mb(used),
                mb(rss),
                mb(peak)
            ));
        }
    }
    let mut text = findings.join("\n\n");
    text.push('\n');
    reply(Reply::Verbatim { format: *b"txt", text: Bytes::from(text) })
}

/// Bytes one key takes in a database's index beside its name and value (rill's estimate for
/// MEMORY STATS' `overhead.hashtable.*`: hash, name and value handles, and table slack).
const INDEX_BYTES_PER_KEY: u64 = 48;

/// MEMORY STATS: Redis' fields in Redis' order, from rill's own figures (`info::memory_figures`).
pub fn memory_stats(c: &mut Call) -> CmdResult {
    let m = crate::info::memory_figures(c.st);
    let b = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let n = |v: u64| Reply::Integer(i64::try_from(v).unwrap_or(i64::MAX));
    let ratio = |a: u64, b: u64| Reply::Double(if b > 0 { a as f64 / b as f64 } else { 1.0 });
    let (lua, scripts) = (c.st.scripts.vm_memory() as u64, c.st.scripts.cache_memory() as u64);
    let f = &c.st.scripts.functions;
    let (fvm, fmem) = (f.vm_memory() as u64, f.overhead() as u64);
    let mut fields = vec![
        (b("peak.allocated"), n(m.peak)),
        (b("total.allocated"), n(m.used)),
        (b("startup.allocated"), n(m.startup)),
        (b("replication.backlog"), n(m.backlog)),
        (b("replica.fullsync.buffer"), n(0)),
        (b("clients.slaves"), n(m.clients_replicas)),
        (b("clients.normal"), n(m.clients_normal)),
        (b("clients.normal.shared"), n(m.clients_normal_shared)),
        (b("clients.normal.unshared"), n(m.clients_normal_unshared)),
        (b("cluster.links"), n(0)),
        (b("aof.buffer"), n(m.aof_buffer)),
        (b("lua.caches"), n(scripts)),
        (b("functions.caches"), n(fmem)),
        (b("script.VMs"), n(lua + fvm)),
    ];
    let (mut keys, mut index) = (0u64, 0u64);
    for (i, db) in c.st.engine.dbs().iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let (main, expires) = (db.len() as u64 * INDEX_BYTES_PER_KEY, db.expires_len() as u64 * INDEX_BYTES_PER_KEY);
        keys += db.len() as u64;
        index += main + expires;
        fields.push((
            b(&format!("db.{i}")),
            Reply::Map(vec![(b("overhead.hashtable.main"), n(main)), (b("overhead.hashtable.expires"), n(expires))]),
        ));
    }
    let overhead = m.overhead + index;
    let dataset = m.used.saturating_sub(overhead);
    fields.extend([
        (b("overhead.db.hashtable.lut"), n(index)),
        (b("overhead.db.hashtable.rehashing"), n(0)),
        (b("overhead.total"), n(overhead)),
        (b("db.dict.rehashing.count"), n(0)),
        (b("keys.count"), n(keys)),
        (b("keys.bytes-per-key"), n(m.used.saturating_sub(m.startup).checked_div(keys).unwrap_or(0))),
        (b("dataset.bytes"), n(dataset)),
        (
            b("dataset.percentage"),
            Reply::Double(100.0 * dataset as f64 / m.used.saturating_sub(m.startup).max(1) as f64),
        ),
        (b("peak.percentage"), Reply::Double(100.0 * m.used as f64 / m.peak.max(1) as f64)),
        (b("allocator.allocated"), n(m.used)),
        (b("allocator.active"), n(m.used)),
        (b("allocator.resident"), n(m.rss)),
        (b("allocator.muzzy"), n(0)),
        (b("allocator-fragmentation.ratio"), Reply::Double(1.0)),
        (b("allocator-fragmentation.bytes"), n(0)),
        (b("allocator-rss.ratio"), ratio(m.rss, m.used)),
        (b("allocator-rss.bytes"), n(m.rss.saturating_sub(m.used))),
        (b("rss-overhead.ratio"), Reply::Double(1.0)),
        (b("rss-overhead.bytes"), n(0)),
        (b("fragmentation"), ratio(m.rss, m.used)),
        (
            b("fragmentation.bytes"),
            Reply::Integer(i64::try_from(m.rss).unwrap_or(0) - i64::try_from(m.used).unwrap_or(0)),
        ),
    ]);
    reply(Reply::Map(fields))
}
