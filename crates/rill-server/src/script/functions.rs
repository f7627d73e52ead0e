//! Functions: FUNCTION LOAD|DELETE|FLUSH|LIST|DUMP|RESTORE|STATS, FCALL and FCALL_RO.
//!
//! ```text
//!  engine (data):  libraries  name → code          changed by Effect::Library / LibraryDeleted /
//!                                                  LibrariesFlushed: logged, replicated, in
//!                                                  snapshots (RDB FUNCTION2) and DUMP payloads
//!  here (derived): a Lua VM of its own holding every library's functions, with their names,
//!                  flags and descriptions; rebuilt from the engine's libraries whenever their
//!                  version is not the one it was built from (a replay, a full sync, a rill
//!                  replica applying its primary's records)
//! ```
//!
//! FUNCTION LOAD runs the library's code in the VM (in the library API's environment, where
//! `redis.register_function` is all there is), checks what it registered, and only then
//! changes the engine and records the effect, so a replay or a replica only keeps code that
//! loaded. FCALL runs a function like EVAL runs a script (`super::execute`), the keys and
//! arguments as the function's two arguments.

use super::vm::{Registered, Vm};
use super::{execute, numkeys, prepare, ScriptFlags};
use crate::busy::BusyGate;
use crate::client::Action;
use crate::cmd::{reply, Call, CmdResult};
use bytes::Bytes;
use rill_engine::effect::Effect;
use rill_engine::functions::{parse_meta, parse_payload, valid_name, Libraries, BAD_NAME};
use rill_engine::CmdError;
use rill_resp::Reply;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One function of a library.
#[derive(Debug, Clone)]
struct FunctionInfo {
    /// As registered.
    name: String,
    description: Option<String>,
    flags: ScriptFlags,
    /// Its library's name.
    library: String,
}

/// One library as loaded in the VM.
#[derive(Debug, Clone)]
struct LibraryInfo {
    name: String,
    code: Bytes,
    /// Its functions' keys (their names in lower case), in the order they were registered.
    functions: Vec<String>,
}

/// The function VM and what it holds.
#[derive(Debug, Default)]
pub struct Functions {
    vm: Option<Vm>,
    /// The engine's libraries version the VM holds (`None`: not built yet).
    built_from: Option<u64>,
    libraries: BTreeMap<String, LibraryInfo>,
    functions: HashMap<String, FunctionInfo>,
    /// Each function's callback in the VM's registry, by the function's key.
    callbacks: HashMap<String, mlua::RegistryKey>,
    /// Runs since the last garbage collection step (FCALL).
    pub(super) gc_count: u32,
    /// The VM's memory limit as last set (`script-memory-limit`).
    pub(super) memory_limit: usize,
}

/// A library checked and loaded in the VM, not yet kept.
struct Staged {
    name: String,
    code: Bytes,
    defs: Vec<Registered>,
    callbacks: Vec<mlua::RegistryKey>,
}

impl Functions {
    /// Bytes the function VM holds (INFO `used_memory_vm_functions`).
    pub fn vm_memory(&self) -> usize {
        self.vm.as_ref().map_or(0, Vm::used_memory)
    }

    /// Libraries and functions loaded.
    pub fn counts(&self) -> (usize, usize) {
        (self.libraries.len(), self.functions.len())
    }

    /// Bytes of the libraries' code and names (INFO `used_memory_functions`).
    pub fn overhead(&self) -> usize {
        self.libraries.values().map(|l| l.code.len() + l.name.len() + 64).sum::<usize>()
            + self.functions.values().map(|f| f.name.len() * 2 + 96).sum::<usize>()
    }

    /// The VM, built from `libs` if it does not hold them.
    fn sync(&mut self, libs: &Libraries, gate: &Arc<BusyGate>) -> Result<&Vm, CmdError> {
        if self.built_from != Some(libs.version()) || self.vm.is_none() {
            self.rebuild(libs, gate)?;
        }
        self.vm.as_ref().ok_or_else(|| CmdError::full("ERR no Lua VM"))
    }

    /// Rebuild the VM if the engine's libraries changed since it was built (none loaded and
    /// none in the engine: nothing to build).
    pub fn follow(&mut self, libs: &Libraries, gate: &Arc<BusyGate>) {
        if self.built_from == Some(libs.version()) || (self.built_from.is_none() && libs.is_empty()) {
            return;
        }
        if let Err(e) = self.rebuild(libs, gate) {
            tracing::warn!("Function libraries not loaded: {}", e.text());
        }
    }

    fn rebuild(&mut self, libs: &Libraries, gate: &Arc<BusyGate>) -> Result<(), CmdError> {
        let vm = Vm::new(crate::cmd::connection::REDIS_VERSION, gate.clone())
            .map_err(|e| CmdError::owned(format!("ERR failed to create the Lua VM: {}", super::vm::error_text(&e))))?;
        if self.memory_limit > 0 {
            let _ = vm.lua().set_memory_limit(self.memory_limit);
        }
        self.vm = Some(vm);
        self.libraries.clear();
        self.functions.clear();
        self.callbacks.clear();
        for lib in libs.iter() {
            // Code the engine holds loaded once; it is loaded again without a time limit (as
            // Redis loads a snapshot's or a primary's).
            match self.stage(&lib.code, 0) {
                Ok(staged) => {
                    if let Err(e) = self.keep(staged, false) {
                        tracing::warn!("Function library '{}' not loaded: {e}", lib.name);
                    }
                }
                Err(e) => tracing::warn!("Function library '{}' not loaded: {}", lib.name, e.text()),
            }
        }
        self.built_from = Some(libs.version());
        let (l, f) = self.counts();
        gate.set_function_counts(l, f);
        Ok(())
    }

    /// Check a library's first line and run its code (FUNCTION LOAD's checks before the
    /// collision checks): Redis' error.
    fn stage(&mut self, code: &Bytes, timeout_ms: u64) -> Result<Staged, CmdError> {
        let meta = parse_meta(code).map_err(|e| CmdError::owned(format!("ERR {e}")))?;
        if !valid_name(meta.name.as_bytes()) {
            return Err(CmdError::owned(format!("ERR {BAD_NAME}")));
        }
        if !meta.engine.eq_ignore_ascii_case("lua") {
            return Err(CmdError::owned(format!("ERR Engine '{}' not found", meta.engine)));
        }
        self.stage_body(meta.name, meta.body_start, code, timeout_ms)
    }

    fn stage_body(
        &mut self,
        name: String,
        body_start: usize,
        code: &Bytes,
        timeout_ms: u64,
    ) -> Result<Staged, CmdError> {
        let vm = self.vm.as_ref().ok_or_else(|| CmdError::full("ERR no Lua VM"))?;
        let body = code.get(body_start..).unwrap_or_default();
        let registered = vm.load_library(body, timeout_ms).map_err(|e| CmdError::owned(format!("ERR {e}")))?;
        let (defs, callbacks): (Vec<Registered>, Vec<mlua::RegistryKey>) = registered.into_iter().unzip();
        if let Some(vm) = &self.vm {
            // A collection step per load: running a library leaves its chunk and what its
            // code made as garbage, and a server loading thousands of libraries (a restart,
            // a full sync) should hold about what they need.
            let _ = vm.lua().gc_step_kbytes(10);
        }
        if defs.is_empty() {
            return Err(CmdError::full("ERR No functions registered"));
        }
        Ok(Staged { name, code: code.clone(), defs, callbacks })
    }

    /// The first function of `staged` another library than the one it replaces (`replace`)
    /// already has.
    fn collision(&self, staged: &Staged, replace: bool) -> Option<String> {
        let mut seen = std::collections::HashSet::new();
        staged.defs.iter().find_map(|d| {
            let key = d.name.to_ascii_lowercase();
            // Two of its own names that differ only in case collide too.
            if !seen.insert(key.clone()) {
                return Some(d.name.clone());
            }
            let f = self.functions.get(&key)?;
            (!(replace && f.library == staged.name)).then(|| d.name.clone())
        })
    }

    /// Keep a staged library (replacing the one of its name when `replace`), after the checks.
    fn keep(&mut self, staged: Staged, replace: bool) -> Result<(), CmdError> {
        let key = staged.name.clone();
        if self.libraries.contains_key(&key) && !replace {
            return Err(CmdError::owned(format!("ERR Library '{}' already exists", staged.name)));
        }
        if let Some(name) = self.collision(&staged, true) {
            return Err(CmdError::owned(format!("ERR Function {name} already exists")));
        }
        self.unlink(&key);
        let mut names = Vec::with_capacity(staged.defs.len());
        for (d, callback) in staged.defs.into_iter().zip(staged.callbacks) {
            let fkey = d.name.to_ascii_lowercase();
            self.callbacks.insert(fkey.clone(), callback);
            self.functions.insert(
                fkey.clone(),
                FunctionInfo { name: d.name, description: d.description, flags: d.flags, library: key.clone() },
            );
            names.push(fkey);
        }
        self.libraries.insert(key, LibraryInfo { name: staged.name, code: staged.code, functions: names });
        Ok(())
    }

    /// Remove the library `key` and its functions from the VM.
    fn unlink(&mut self, key: &str) -> Option<LibraryInfo> {
        let lib = self.libraries.remove(key)?;
        for f in &lib.functions {
            self.functions.remove(f);
            self.callbacks.remove(f);
        }
        Some(lib)
    }

    fn clear(&mut self) {
        let keys: Vec<String> = self.libraries.keys().cloned().collect();
        for k in keys {
            self.unlink(&k);
        }
    }

    /// The function `name` (any case): its flags, if it exists (dispatch's checks of FCALL).
    pub fn flags_of(&self, name: &[u8]) -> Option<ScriptFlags> {
        self.functions.get(&String::from_utf8_lossy(name).to_ascii_lowercase()).map(|f| f.flags)
    }

    /// Mark the VM as holding the engine's libraries as they are now (after a change made here
    /// and recorded in the engine).
    fn built(&mut self, libs: &Libraries) {
        self.built_from = Some(libs.version());
    }
}

/// The function gate counts for FUNCTION STATS while a function runs (the busy path answers
/// it without the state lock).
fn publish_counts(c: &Call) {
    let (libs, funcs) = c.st.scripts.functions.counts();
    c.shared.busy.set_function_counts(libs, funcs);
}

/// The VM holding the engine's libraries.
fn synced<'a>(c: &'a mut Call) -> Result<&'a mut Functions, CmdError> {
    let st = &mut *c.st;
    st.scripts.functions.sync(st.engine.libraries(), &c.shared.busy)?;
    Ok(&mut st.scripts.functions)
}

/// A change to the libraries: into the engine and the unit's effects.
fn record(c: &mut Call, effect: Effect) {
    let libs = c.st.engine.libraries_mut();
    let _ = match &effect {
        Effect::Library { code } => libs.set(code.clone()),
        Effect::LibraryDeleted { name } => {
            libs.remove(&String::from_utf8_lossy(name));
            Ok(())
        }
        _ => {
            libs.clear();
            Ok(())
        }
    };
    c.st.journal.push_effect(&effect);
    let st = &mut *c.st;
    st.scripts.functions.built(st.engine.libraries());
}

/// FUNCTION LOAD [REPLACE] code
pub fn function_load(c: &mut Call) -> CmdResult {
    let mut replace = false;
    let last = c.args.len() - 1;
    for a in c.args.get(2..last).unwrap_or_default() {
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
            continue;
        }
        return Err(CmdError::owned(format!("ERR Unknown option given: {}", String::from_utf8_lossy(a))));
    }
    let code = c.args.get(last).cloned().unwrap_or_default();
    // The primary's and the log's loads are not timed (Redis: a client it must obey).
    let timeout = if c.conn.is_master { 0 } else { super::vm::LOAD_TIMEOUT_MS };
    let meta = parse_meta(&code).map_err(|e| CmdError::owned(format!("ERR {e}")))?;
    if !valid_name(meta.name.as_bytes()) {
        return Err(CmdError::owned(format!("ERR {BAD_NAME}")));
    }
    if !meta.engine.eq_ignore_ascii_case("lua") {
        return Err(CmdError::owned(format!("ERR Engine '{}' not found", meta.engine)));
    }
    let f = synced(c)?;
    if f.libraries.contains_key(&meta.name) && !replace {
        return Err(CmdError::owned(format!("ERR Library '{}' already exists", meta.name)));
    }
    let staged = f.stage_body(meta.name.clone(), meta.body_start, &code, timeout)?;
    if let Some(name) = f.collision(&staged, true) {
        return Err(CmdError::owned(format!("ERR Function {name} already exists")));
    }
    f.keep(staged, true)?;
    record(c, Effect::Library { code });
    publish_counts(c);
    reply(Reply::Bulk(Bytes::from(meta.name)))
}

/// FUNCTION DELETE library-name
pub fn function_delete(c: &mut Call) -> CmdResult {
    let name = c.text(2);
    let f = synced(c)?;
    let Some(lib) = f.unlink(&name) else {
        return Err(CmdError::full("ERR Library not found"));
    };
    record(c, Effect::LibraryDeleted { name: Bytes::from(lib.name) });
    publish_counts(c);
    Ok(Action::Reply(Reply::ok()))
}

/// FUNCTION FLUSH [ASYNC|SYNC]
pub fn function_flush(c: &mut Call) -> CmdResult {
    if c.args.len() > 3 {
        return Err(crate::cmd::subcommand_syntax(c));
    }
    let lazy = match c.args.get(2) {
        None => c.st.config.get("lazyfree-lazy-user-flush") == "yes",
        Some(a) if a.eq_ignore_ascii_case(b"async") => true,
        Some(a) if a.eq_ignore_ascii_case(b"sync") => false,
        Some(_) => return Err(CmdError::full("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")),
    };
    // A new VM: what the old one held is freed with it, on a thread of its own for ASYNC
    // (counted as Redis counts it: each library, and the VM).
    let f = &mut c.st.scripts.functions;
    let (gc_count, memory_limit) = (f.gc_count, f.memory_limit);
    let old = std::mem::replace(f, Functions { gc_count, memory_limit, ..Functions::default() });
    if lazy && old.vm.is_some() {
        let objects = old.libraries.len() as u64 + 1;
        c.st.lazyfree.free(Box::new(old), objects, None);
    } else {
        drop(old);
    }
    record(c, Effect::LibrariesFlushed);
    publish_counts(c);
    Ok(Action::Reply(Reply::ok()))
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
pub fn function_list(c: &mut Call) -> CmdResult {
    let (mut with_code, mut pattern) = (false, None);
    let mut i = 2;
    while let Some(a) = c.args.get(i) {
        if !with_code && a.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && a.eq_ignore_ascii_case(b"libraryname") {
            let Some(p) = c.args.get(i + 1) else {
                return Err(CmdError::full("ERR library name argument was not given"));
            };
            pattern = Some(p.clone());
            i += 1;
        } else {
            return Err(CmdError::owned(format!("ERR Unknown argument {}", String::from_utf8_lossy(a))));
        }
        i += 1;
    }
    let f = synced(c)?;
    let text = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let mut out = Vec::new();
    for lib in f.libraries.values() {
        if let Some(p) = &pattern {
            if !rill_engine::glob::glob_match(p, lib.name.as_bytes(), true) {
                continue;
            }
        }
        let functions = lib
            .functions
            .iter()
            .filter_map(|k| f.functions.get(k))
            .map(|fi| {
                Reply::Map(vec![
                    (text("name"), text(&fi.name)),
                    (text("description"), fi.description.as_deref().map_or(Reply::Null, text)),
                    (text("flags"), Reply::Set(fi.flags.names().map(Reply::simple).collect())),
                ])
            })
            .collect();
        let mut fields = vec![
            (text("library_name"), text(&lib.name)),
            (text("engine"), text("LUA")),
            (text("functions"), Reply::Array(functions)),
        ];
        if with_code {
            fields.push((text("library_code"), Reply::Bulk(lib.code.clone())));
        }
        out.push(Reply::Map(fields));
    }
    reply(Reply::Array(out))
}

/// FUNCTION STATS (under the lock nothing runs; while a function runs, the busy path answers).
pub fn function_stats(c: &mut Call) -> CmdResult {
    let (libs, funcs) = synced(c)?.counts();
    reply(stats_reply(None, libs, funcs))
}

/// FUNCTION STATS' reply: what runs (name, command, ms so far), and the counts.
pub fn stats_reply(running: Option<(String, Vec<Bytes>, i64)>, libs: usize, funcs: usize) -> Reply {
    let text = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let running = match running {
        None => Reply::Null,
        Some((name, args, ms)) => Reply::Map(vec![
            (text("name"), text(&name)),
            (text("command"), Reply::Array(args.into_iter().map(Reply::Bulk).collect())),
            (text("duration_ms"), Reply::Integer(ms)),
        ]),
    };
    Reply::Map(vec![
        (text("running_script"), running),
        (
            text("engines"),
            Reply::Map(vec![(
                text("LUA"),
                Reply::Map(vec![
                    (text("libraries_count"), Reply::Integer(libs as i64)),
                    (text("functions_count"), Reply::Integer(funcs as i64)),
                ]),
            )]),
        ),
    ])
}

/// FUNCTION DUMP
pub fn function_dump(c: &mut Call) -> CmdResult {
    reply(Reply::Bulk(Bytes::from(c.st.engine.libraries().dump_payload())))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]
pub fn function_restore(c: &mut Call) -> CmdResult {
    if c.args.len() > 4 {
        return Err(crate::cmd::subcommand_syntax(c));
    }
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy = match c.args.get(3) {
        None => Policy::Append,
        Some(p) if p.eq_ignore_ascii_case(b"append") => Policy::Append,
        Some(p) if p.eq_ignore_ascii_case(b"replace") => Policy::Replace,
        Some(p) if p.eq_ignore_ascii_case(b"flush") => Policy::Flush,
        Some(_) => {
            return Err(CmdError::full(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
    };
    let codes = parse_payload(c.arg(2)).map_err(|e| CmdError::owned(format!("ERR {e}")))?;
    let f = synced(c)?;
    // Each library loaded as by FUNCTION LOAD, into a set of its own first.
    let mut staged: Vec<Staged> = Vec::with_capacity(codes.len());
    for code in &codes {
        let s = f.stage(code, 0)?;
        if staged.iter().any(|o| o.name == s.name) {
            return Err(CmdError::owned(format!("ERR Library '{}' already exists", s.name)));
        }
        for d in &s.defs {
            if staged.iter().any(|o| o.defs.iter().any(|od| od.name.eq_ignore_ascii_case(&d.name))) {
                return Err(CmdError::owned(format!("ERR Function {} already exists", d.name)));
            }
        }
        staged.push(s);
    }
    if policy != Policy::Flush {
        // Joined to what is there: a library of the same name fails APPEND; REPLACE replaces
        // it, and then no function may collide with those left.
        let replaced: Vec<String> = staged.iter().map(|s| s.name.clone()).collect();
        for s in &staged {
            if policy == Policy::Append && f.libraries.contains_key(&s.name) {
                return Err(CmdError::owned(format!("ERR Library {} already exists", s.name)));
            }
        }
        for s in &staged {
            for d in &s.defs {
                if let Some(owner) = f.functions.get(&d.name.to_ascii_lowercase()) {
                    if !replaced.contains(&owner.library) {
                        return Err(CmdError::owned(format!("ERR Function {} already exists", d.name)));
                    }
                }
            }
        }
    } else {
        f.clear();
    }
    let mut effects = Vec::with_capacity(staged.len() + 1);
    if policy == Policy::Flush {
        effects.push(Effect::LibrariesFlushed);
    }
    let keys: Vec<String> = staged.iter().map(|s| s.name.clone()).collect();
    for k in &keys {
        f.unlink(k);
    }
    for s in staged {
        let code = s.code.clone();
        f.keep(s, true)?;
        effects.push(Effect::Library { code });
    }
    for e in effects {
        record(c, e);
    }
    publish_counts(c);
    Ok(Action::Reply(Reply::ok()))
}

/// FCALL function numkeys [key ...] [arg ...]
pub fn fcall(c: &mut Call) -> CmdResult {
    call_function(c, false)
}

/// FCALL_RO function numkeys [key ...] [arg ...]
pub fn fcall_ro(c: &mut Call) -> CmdResult {
    call_function(c, true)
}

fn call_function(c: &mut Call, read_only: bool) -> CmdResult {
    // MONITOR sees the call before the commands it runs (FCALL itself skips dispatch's feed).
    crate::monitor::feed_script(c.st, c.conn.id, c.conn.db, c.args, &c.conn.redacted);
    let key = String::from_utf8_lossy(c.arg(1)).to_ascii_lowercase();
    let info = synced(c)?.functions.get(&key).cloned().ok_or_else(|| CmdError::full("ERR Function not found"))?;
    let numkeys = numkeys(c, "ERR Bad number of keys provided")?;
    let run = prepare(c, info.flags, read_only)?;
    let Some(vm) = c.st.scripts.functions.vm.take() else {
        return Err(CmdError::full("ERR no Lua VM"));
    };
    let Some(func) = c.st.scripts.functions.callbacks.get(&key).and_then(|k| vm.slot(k)) else {
        c.st.scripts.functions.vm = Some(vm);
        return Err(CmdError::full("ERR Function not found"));
    };
    let (vm, result) = execute(c, vm, func, numkeys, run, Some(&info.name), "");
    c.st.scripts.functions.vm = Some(vm);
    result
}

/// FUNCTION HELP lines.
pub const FUNCTION_HELP: &[&str] = &[
    "DELETE <library-name>",
    "    Remove a library and its functions.",
    "DUMP",
    "    A payload holding every library, for FUNCTION RESTORE.",
    "FLUSH [ASYNC|SYNC]",
    "    Remove every library.",
    "KILL",
    "    Stop the function running now, if it has written nothing.",
    "LIST [LIBRARYNAME <pattern>] [WITHCODE]",
    "    The libraries (those whose name matches the pattern), their functions and flags, and",
    "    with WITHCODE their code.",
    "LOAD [REPLACE] <library-code>",
    "    Load a library (its first line: #!lua name=<library-name>); REPLACE replaces one of",
    "    that name.",
    "RESTORE <payload> [FLUSH|APPEND|REPLACE]",
    "    Load the libraries of a FUNCTION DUMP payload: after removing every library (FLUSH),",
    "    failing when one of the same name exists (APPEND, the default), or replacing it",
    "    (REPLACE). A function name held by another library fails it in every case.",
    "STATS",
    "    The function running now (name, command, milliseconds so far) and how many libraries",
    "    and functions there are.",
];
