//! COMMAND, COMMAND COUNT|INFO|DOCS|LIST|GETKEYS: all read the one command table.
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

fn key_spec(spec: &rill_engine::command::KeySpec) -> Reply {
    let begin = match spec.begin {
        BeginSearch::Index(i) => {
            map(vec![("type", bulk("index")), ("spec", map(vec![("index", Reply::Integer(i.into()))]))])
        }
        BeginSearch::Keyword { keyword, startfrom } => map(vec![
            ("type", bulk("keyword")),
            ("spec", map(vec![("keyword", bulk(keyword)), ("startfrom", Reply::Integer(startfrom.into()))])),
        ]),
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
    };
    map(vec![
        // Redis spells the access-type flags in upper case and the rest in lower case.
        (
            "flags",
            Reply::Set(
                spec.flags
                    .iter()
                    .map(|f| {
                        if matches!(*f, "RO" | "RW" | "OW" | "RM") {
                            simple(f)
                        } else {
                            simple(&f.to_ascii_lowercase())
                        }
                    })
                    .collect(),
            ),
        ),
        ("begin_search", begin),
        ("find_keys", find),
    ])
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
    let args: Vec<Bytes> = c.args.get(2..).unwrap_or(&[]).to_vec();
    let spec = match c.shared.table.resolve(&args) {
        Lookup::Found(s) => s,
        _ => return Err(CmdError::full("ERR Invalid command specified")),
    };
    if !spec.arity_ok(args.len()) {
        return Err(CmdError::full("ERR Invalid number of arguments specified for command"));
    }
    let idx = spec.key_indexes(&args);
    if idx.is_empty() {
        return Err(CmdError::full("ERR The command has no key arguments"));
    }
    reply(Reply::Array(idx.into_iter().filter_map(|i| args.get(i).cloned()).map(Reply::Bulk).collect()))
}
