//! The Lua VM scripts run in: Lua 5.1 (mlua's vendored build), the libraries Redis loads, the
//! sandbox (`sandbox.lua`), the message handler that turns an error into Redis' error table,
//! and the run of one compiled script with the host function of that run.
//!
//! ```text
//!  Vm::new ─► libraries (base, table, string, math, os.clock; cjson, cmsgpack, bit, struct)
//!          ─► sandbox.lua: redis.*, read-only globals; returns (env, run)
//!  Vm::compile(body) ─► a function whose environment is `env` ("@user_script")
//!  Vm::call_eval(f, keys, args, host) ─► KEYS/ARGV (EVAL) or the function's arguments (FCALL),
//!        the host set for the run (`raw::with_host`); `raw::run` calls f protected with the
//!        message handler: Ok(value) | Err(error table)
//!  Vm::load_library(body) ─► the library API's environment, redis.register_function
//! ```
//!
//! The host function is the only way a script reaches the server: redis.call and redis.pcall
//! are C functions made once per VM (`raw.rs`, in Lua's C API: the hot path) that call the
//! host of the run in progress, which [`Vm::call_eval`] puts in a scoped thread-local for the
//! run (the host borrows the locked state, so it cannot be kept anywhere longer). As in Redis,
//! `return redis.call(...)` keeps the script's frame for the error's place. An error they
//! raise is Redis' error table itself; one raised by the other Rust functions travels as
//! [`Raised`], which the message handler turns into the table.

use crate::busy::BusyGate;
use mlua::{ChunkMode, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The chunk name of rill's own Lua code: frames from it are skipped when an error is placed.
const INTERNAL_SOURCE: &str = "=rill";

/// One Lua VM with its sandbox (a clone is another handle to the same VM).
#[derive(Clone)]
pub struct Vm {
    lua: Lua,
    /// The globals as scripts see them.
    env: Table,
    /// `run(f, handler)`: xpcall (a library's code, FUNCTION LOAD).
    run: Function,
    /// The message handler: any error to Redis' `{err=, source=, line=}` table.
    handler: Function,
    /// The protocol the running script's commands answer in (redis.setresp: 2 or 3).
    pub resp: Arc<std::sync::atomic::AtomicU8>,
    /// `set_loading(on)`: the environment reads the library API (FUNCTION LOAD) or the globals.
    set_loading: Function,
    /// What runs an EVAL script or a function (its keys and arguments put in place from Rust).
    runner: Arc<super::raw::Runner>,
    /// The busy gate its scripts' hook reports to.
    gate: Arc<BusyGate>,
    /// The VM's memory after its last collector step ([`Vm::gc_tick`]), or less.
    gc_floor: Arc<std::sync::atomic::AtomicUsize>,
}

/// A function a library's code registered (redis.register_function) while FUNCTION LOAD ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// Its name, as given.
    pub name: String,
    /// Its description, if given.
    pub description: Option<String>,
    /// Its flags.
    pub flags: super::ScriptFlags,
}

/// The functions registered by the library code FUNCTION LOAD is running (the VM's app data
/// while it runs): their descriptions and their callbacks, kept in the registry (one array
/// slot each, the least a kept Lua value costs).
struct Loading(Vec<(Registered, mlua::RegistryKey)>);

/// How long a library's code may run at FUNCTION LOAD (Redis' 500 ms).
pub const LOAD_TIMEOUT_MS: u64 = 500;

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm").field("used_memory", &self.lua.used_memory()).finish_non_exhaustive()
    }
}

/// The outcome of a run: the returned value, or the error table (or text) it raised.
pub type Outcome = Result<Value, Value>;

impl Vm {
    /// A new VM with the sandbox in place. `version` is what redis.REDIS_VERSION says; `gate`
    /// is the busy gate its scripts' hook reports to.
    pub fn new(version: &str, gate: Arc<BusyGate>) -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS, LuaOptions::default())?;
        install_hook(&lua, gate.clone(), false)?;
        crate::script::libs::open_all(&lua)?;
        let rust = lua.create_table()?;
        rust.set(
            "sha1hex",
            lua.create_function(|_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise_text("ERR wrong number of arguments"));
                }
                let text = match args.front() {
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    Some(Value::Integer(i)) => i.to_string().into_bytes(),
                    Some(Value::Number(n)) => lua_number_text(*n).into_bytes(),
                    _ => Vec::new(),
                };
                Ok(super::sha1_hex(&text))
            })?,
        )?;
        rust.set("log", lua.create_function(|_, args: MultiValue| log(&args))?)?;
        rust.set("register_function", lua.create_function(register_function)?)?;
        rust.set(
            "guards",
            lua.create_function(|lua, (readonly, setmetatable, rawset): (Table, Function, Function)| {
                let ro = readonly.clone();
                let guarded_setmetatable = lua.create_function(move |_, args: MultiValue| {
                    refuse_readonly(&ro, &args)?;
                    setmetatable.call::<MultiValue>(args)
                })?;
                let guarded_rawset = lua.create_function(move |_, args: MultiValue| {
                    refuse_readonly(&readonly, &args)?;
                    rawset.call::<MultiValue>(args)
                })?;
                Ok((guarded_setmetatable, guarded_rawset))
            })?,
        )?;
        rust.set("version", version)?;
        rust.set("version_num", version_num(version))?;
        let rand = Arc::new(Rand48::seeded(crate::clock::now_us() as u64));
        let r = rand.clone();
        rust.set("random", lua.create_function(move |_, args: MultiValue| r.random(&args))?)?;
        rust.set(
            "randomseed",
            lua.create_function(move |_, seed: Value| {
                rand.seed(lua_int(&seed).ok_or_else(|| bad_argument(1, "randomseed", "number expected"))?);
                Ok(())
            })?,
        )?;
        rust.set(
            "raised_text",
            lua.create_function(|_, e: Value| {
                Ok(match e {
                    Value::Error(e) => raised(&e).map(|r| r.err.clone()),
                    _ => None,
                })
            })?,
        )?;
        let (env, run, redis, readonly, set_loading): (Table, Function, Table, Table, Function) =
            lua.load(include_str!("sandbox.lua")).set_name(INTERNAL_SOURCE).set_mode(ChunkMode::Text).call(rust)?;
        // cjson's array metatable is reached through the registry, not the globals: made
        // read-only here.
        let libs: Table = lua.named_registry_value(super::libs::REGISTRY_KEY)?;
        if let Ok(mt) = libs.raw_get::<Table>("array_mt") {
            readonly.raw_set(mt, true)?;
        }
        let handler = lua.create_function(|lua, err: Value| error_table(lua, err))?;
        let resp = Arc::new(std::sync::atomic::AtomicU8::new(2));
        install_api(&lua, &redis, resp.clone())?;
        let runner = Arc::new(super::raw::Runner::new(&lua, &handler)?);
        let gc_floor = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        Ok(Vm { lua, env, run, handler, resp, set_loading, runner, gate, gc_floor })
    }

    /// The VM's handle (cheap to clone).
    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    /// Bytes the VM holds.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Compile a script body (text only) into a function running in the sandbox, kept in the
    /// registry (a slot of its own, not one of mlua's handles: those live on a stack of about
    /// 8000 slots, and a cache holds more scripts than that); the Lua error text when it does
    /// not compile.
    pub fn compile(&self, body: &[u8]) -> Result<mlua::RegistryKey, String> {
        let f = self.load_text(body, "@user_script")?;
        self.lua.create_registry_value(f).map_err(|e| error_text(&e))
    }

    /// `body` (text only, binary chunks refused) as a function in the sandbox's environment,
    /// its chunk named `name`; Lua's error text when it does not compile.
    fn load_text(&self, body: &[u8], name: &str) -> Result<Function, String> {
        self.lua
            .load(body)
            .set_name(name)
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => error_text(&other),
            })
    }

    /// A step of the garbage collector every 50 calls (Redis' rhythm: scripts made and run
    /// leave garbage that Lua's own pace would let grow), taken when the VM grew by
    /// [`GC_SLACK`] since the last one: a step marks everything the VM holds (~80 KB with
    /// rill's sandbox and libraries), so for a script that makes little garbage it was most of
    /// the script's cost.
    pub fn gc_tick(&self, count: &mut u32) {
        *count += 1;
        if *count < 50 {
            return;
        }
        *count = 0;
        let used = self.lua.used_memory();
        let floor = self.gc_floor.load(Ordering::Relaxed).min(used);
        self.gc_floor.store(floor, Ordering::Relaxed);
        if used < floor + GC_SLACK {
            return;
        }
        let _ = self.lua.gc_step_kbytes(50);
        self.gc_floor.store(self.lua.used_memory(), Ordering::Relaxed);
    }

    /// Run a library's code (after its first line) as FUNCTION LOAD does: in the library API's
    /// environment, for at most `timeout_ms` (0: no limit). The functions it registered, in
    /// order, each with its callback; Redis' error text when it does not compile or fails.
    pub fn load_library(&self, body: &[u8], timeout_ms: u64) -> Result<Vec<(Registered, mlua::RegistryKey)>, String> {
        let f = self.load_text(body, "@user_function").map_err(|e| format!("Error compiling function: {e}"))?;
        let fail = |e: mlua::Error| format!("Error registering functions: {}", error_text(&e));
        self.lua.set_app_data(Loading(Vec::new()));
        self.set_loading.call::<()>(true).map_err(fail)?;
        if timeout_ms > 0 {
            let started = std::time::Instant::now();
            self.lua
                .set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |lua, _| {
                    if started.elapsed().as_millis() as u64 > timeout_ms {
                        lua.set_hook(HookTriggers::EVERY_LINE, |_, _| Err(raise_text("ERR FUNCTION LOAD timeout")))?;
                        return Err(raise_text("ERR FUNCTION LOAD timeout"));
                    }
                    Ok(VmState::Continue)
                })
                .map_err(fail)?;
        } else {
            self.lua.remove_hook();
        }
        let out = self.run.call::<MultiValue>((f, &self.handler));
        let _ = self.set_loading.call::<()>(false);
        let registered = self.lua.remove_app_data::<Loading>().map(|l| l.0).unwrap_or_default();
        let _ = install_hook(&self.lua, self.gate.clone(), false);
        let mut out = out.map_err(fail)?.into_iter();
        if !matches!(out.next(), Some(Value::Boolean(true))) {
            let text = match out.next() {
                Some(Value::Table(t)) => t
                    .raw_get::<mlua::String>("err")
                    .map(|s| String::from_utf8_lossy(&s.as_bytes()).into_owned())
                    .unwrap_or_default(),
                Some(other) => describe(&self.lua, other),
                None => String::new(),
            };
            return Err(format!("Error registering functions: {text}"));
        }
        Ok(registered)
    }

    /// The slot of a registry key of this VM (a compiled script, a function a library
    /// registered).
    pub fn slot(&self, key: &mlua::RegistryKey) -> Option<super::raw::Slot> {
        super::raw::slot(&self.lua, key)
    }

    /// Run `f` with `KEYS` and `ARGV` set (EVAL's globals; a function, `function`, gets them
    /// as its two arguments instead) and redis.call / redis.pcall answered by `host(op, args)`
    /// for this run only: it returns a value and whether it is an error table (raised by
    /// redis.call).
    pub fn call_eval<H>(
        &self,
        f: super::raw::Slot,
        keys: &[bytes::Bytes],
        args: &[bytes::Bytes],
        function: bool,
        mut host: H,
    ) -> mlua::Result<Outcome>
    where
        H: FnMut(Op, super::raw::Args) -> super::raw::HostOut,
    {
        self.resp.store(2, Ordering::Release);
        super::raw::with_host(&mut host, || super::raw::run(&self.lua, &self.runner, f, function, keys, args))
    }
}

/// Growth of a VM's memory past which [`Vm::gc_tick`] steps the collector.
const GC_SLACK: usize = 16 * 1024;

/// Instructions between two looks at the clock (Redis' count hook).
const HOOK_EVERY: u32 = 100_000;

/// After how long a script's runtime thread is handed on, so that the other connections'
/// tasks it had queued run on another thread.
const HANDOFF_AFTER_MS: i64 = 10;

/// The script's hook: every [`HOOK_EVERY`] instructions it looks at the clock and the kill
/// flag. Past `busy-reply-threshold` it closes the busy gate (the other clients get BUSY);
/// killed (SCRIPT KILL) it raises Redis' error, then on every line, so that a pcall cannot
/// keep the script alive.
fn install_hook(lua: &Lua, gate: Arc<BusyGate>, every_line: bool) -> mlua::Result<()> {
    let triggers =
        if every_line { HookTriggers::EVERY_LINE } else { HookTriggers::new().every_nth_instruction(HOOK_EVERY) };
    lua.set_hook(triggers, move |lua, debug| {
        let Some(ran) = gate.script_ran_ms() else { return Ok(VmState::Continue) };
        gate.script_running();
        // rill's own runner, after the script's frames have returned: the error is raised
        // in the script, where the message handler places it.
        if every_line && debug.source().source.as_deref() == Some(INTERNAL_SOURCE) {
            return Ok(VmState::Continue);
        }
        if gate.script_killed() {
            if !every_line {
                tracing::info!("Lua script killed by user with SCRIPT KILL.");
                install_hook(lua, gate.clone(), true)?;
            }
            return Err(raise_text("ERR Script killed by user with SCRIPT KILL..."));
        }
        let threshold = gate.threshold_ms();
        if threshold > 0 && ran >= threshold && gate.script_past_threshold() {
            let kill = if gate.running_function() { "FUNCTION KILL" } else { "SCRIPT KILL" };
            tracing::warn!(
                "Slow script detected: still in execution after {ran} milliseconds. You can try killing the script using the {kill} command."
            );
        }
        if ran >= HANDOFF_AFTER_MS && gate.handoffs.fetch_add(1, Ordering::AcqRel) < 3 {
            hand_off_thread();
        }
        Ok(VmState::Continue)
    })
}

/// A full garbage collection with the memory limit lifted meanwhile (collecting allocates a
/// little, and a VM at its limit could not), then `limit` again (0: none).
pub fn collect(lua: &Lua, limit: usize) {
    let _ = lua.set_memory_limit(0);
    let _ = lua.gc_collect();
    let _ = lua.gc_collect();
    if limit > 0 {
        let _ = lua.set_memory_limit(limit);
    }
}

/// Put the count hook back after a killed script's line hook.
pub fn reset_hook(vm: &Vm, gate: Arc<BusyGate>) -> mlua::Result<()> {
    install_hook(&vm.lua, gate, false)
}

/// A long script must not hold a runtime worker thread (and the tasks queued on it): tokio's
/// `block_in_place` hands the worker's queue to a new thread while this one goes on with the
/// script. The hand-over happens once the new thread has picked the queue up; the short
/// sleep gives it the time to (tried up to three times per script).
fn hand_off_thread() {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        tokio::task::block_in_place(|| std::thread::sleep(std::time::Duration::from_millis(1)));
    }
}

/// The API functions that reach the server for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// redis.call
    Call,
    /// redis.pcall
    Pcall,
    /// redis.acl_check_cmd: whether the caller's ACL user may run the command (a boolean),
    /// or the error of a command that does not exist.
    AclCheck,
}

/// The functions of the `redis` table that Rust provides, made once per VM: call, pcall and
/// acl_check_cmd (through the run's host, `raw.rs`), setresp (it leaves the protocol in `resp` for the run
/// to read) and set_repl.
fn install_api(lua: &Lua, redis: &Table, resp: Arc<std::sync::atomic::AtomicU8>) -> mlua::Result<()> {
    let (call, pcall, acl_check_cmd) = super::raw::api_functions(lua)?;
    redis.raw_set("call", call)?;
    redis.raw_set("pcall", pcall)?;
    redis.raw_set(
        "setresp",
        lua.create_function(move |_, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_text("ERR redis.setresp() requires one argument."));
            }
            match args.front().and_then(lua_int) {
                Some(v @ (2 | 3)) => resp.store(v as u8, Ordering::Release),
                _ => return Err(raise_text("ERR RESP version must be 2 or 3.")),
            }
            Ok(())
        })?,
    )?;
    // Accepted: rill logs and replicates every write a script makes (its effects are the
    // unit's), so there is nothing to switch off; the flags are checked as Redis does.
    redis.raw_set(
        "set_repl",
        lua.create_function(|_, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise_text("ERR redis.set_repl() requires one argument."));
            }
            match args.front().and_then(lua_int) {
                Some(f) if f & !3 == 0 => Ok(()),
                _ => {
                    Err(raise_text("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."))
                }
            }
        })?,
    )?;
    // Whether the caller's user may run the command with these arguments (keys and channels
    // too), asked of the run's host like redis.call.
    redis.raw_set("acl_check_cmd", acl_check_cmd)?;
    Ok(())
}

/// Redis' error table raised by a Rust function: Lua carries it as an error value of its own,
/// which the message handler (and the sandbox's pcall) turn back into the table (the text).
#[derive(Debug, Clone)]
pub struct Raised {
    /// The `err` text: a code, a space, the message.
    pub err: String,
    /// A command counted this error already.
    pub ignore_stats: bool,
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.err)
    }
}

impl std::error::Error for Raised {}

/// The [`Raised`] inside an error, through mlua's wrapping.
fn raised(e: &mlua::Error) -> Option<&Raised> {
    match e {
        mlua::Error::CallbackError { cause, .. } => raised(cause),
        other => other.downcast_ref::<Raised>(),
    }
}

/// The message handler: Redis' error table for any error value, with the place of the error
/// (the first frame that is neither a C function at the top nor rill's own Lua).
fn error_table(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let table = match err {
        Value::Table(t) => t,
        Value::Error(e) if raised(&e).is_some() => {
            let r = raised(&e).cloned().unwrap_or(Raised { err: String::new(), ignore_stats: false });
            let t = lua.create_table()?;
            t.raw_set("err", r.err)?;
            if r.ignore_stats {
                t.raw_set("ignore_error_stats_update", true)?;
            }
            t
        }
        other => {
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {}", describe(lua, other)))?;
            t
        }
    };
    // Level 0 is this handler, 1 the function that raised the error.
    let mut level = 1;
    if lua.inspect_stack(level, |d| d.source().what == "C").unwrap_or(false) {
        level += 1;
    }
    loop {
        let frame = lua.inspect_stack(level, |d| {
            let source = d.source().source.map(|s| s.into_owned()).unwrap_or_default();
            (source, d.current_line().map_or(-1, |n| n as i64))
        });
        match frame {
            Some((source, _)) if source == INTERNAL_SOURCE || source == "=(tail call)" => level += 1,
            Some((source, line)) => {
                table.raw_set("source", source)?;
                table.raw_set("line", line)?;
                break;
            }
            None => break,
        }
    }
    Ok(table)
}

/// An error value as text, as Lua's `tostring` would show it (an error raised by Rust code as
/// its message).
pub fn describe(lua: &Lua, v: Value) -> String {
    match v {
        Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        Value::Error(e) => error_text(&e),
        other => lua
            .globals()
            .raw_get::<Function>("tostring")
            .and_then(|f| f.call::<mlua::String>(other))
            .map(|s| String::from_utf8_lossy(&s.as_bytes()).into_owned())
            .unwrap_or_else(|_| "unknown error".to_string()),
    }
}

/// The message of an error raised from Rust (without mlua's wrapping).
pub fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::BadArgument { pos, name, cause, .. } => {
            format!("bad argument #{pos} to '{}' ({})", name.as_deref().unwrap_or("?"), error_text(cause))
        }
        other => other.to_string(),
    }
}

/// setmetatable/rawset on a read-only table: Redis' error, without a place of its own.
fn refuse_readonly(readonly: &Table, args: &MultiValue) -> mlua::Result<()> {
    if let Some(Value::Table(t)) = args.front() {
        if readonly.raw_get::<Option<bool>>(t.clone())?.unwrap_or(false) {
            return Err(mlua::Error::RuntimeError("Attempt to modify a readonly table".to_string()));
        }
    }
    Ok(())
}

/// redis.log(level, message ...): into the server's log at the matching level.
fn log(args: &MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(raise_text("ERR redis.log() requires two arguments or more."));
    }
    let Some(level) = args.front().and_then(lua_int) else {
        return Err(raise_text("ERR First argument must be a number (log level)."));
    };
    if !(0..=3).contains(&level) {
        return Err(raise_text("ERR Invalid log level."));
    }
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .filter_map(|v| match v {
            Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
            Value::Integer(i) => Some(i.to_string()),
            Value::Number(n) => Some(lua_number_text(*n)),
            _ => None,
        })
        .collect();
    let text = words.join(" ");
    match level {
        0 | 1 => tracing::debug!(target: "rill::script", "{text}"),
        2 => tracing::info!(target: "rill::script", "{text}"),
        _ => tracing::warn!(target: "rill::script", "{text}"),
    }
    Ok(())
}

/// A number as Lua's `tostring` writes it (`%.14g`).
pub fn lua_number_text(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if n.fract() == 0.0 && n.abs() < 1e15 {
        return format!("{}", n as i64);
    }
    // %.14g: 14 significant digits, exponent form below 1e-4 or from 1e14.
    let exp = n.abs().log10().floor() as i32;
    if !(-4..14).contains(&exp) {
        let s = format!("{:.13e}", n);
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (13 - exp).max(0) as usize;
    let s = format!("{:.*}", decimals, n);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// redis.register_function(name, callback) or redis.register_function{function_name=,
/// callback=, description=, flags=}: only while FUNCTION LOAD runs a library's code.
fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if lua.app_data_ref::<Loading>().is_none() {
        return Err(raise_text("ERR redis.register_function can only be called on FUNCTION LOAD command"));
    }
    let (name, callback, description, flags) = match (args.len(), args.front(), args.get(1)) {
        (1, Some(first), _) => named_arguments(first)?,
        (2, Some(first), Some(second)) => {
            let name = lua_bytes(first)
                .ok_or_else(|| raise_text("ERR first argument to redis.register_function must be a string"))?;
            let Value::Function(callback) = second else {
                return Err(raise_text("ERR second argument to redis.register_function must be a function"));
            };
            (name, callback.clone(), None, 0)
        }
        _ => return Err(raise_text("ERR wrong number of arguments to redis.register_function")),
    };
    if !rill_engine::functions::valid_name(&name) {
        return Err(raise_text(&format!("ERR {}", rill_engine::functions::BAD_NAME)));
    }
    let name = String::from_utf8_lossy(&name).into_owned();
    // Within a library names compare with case (across libraries, without: FCALL's lookup).
    let key = lua.create_registry_value(callback)?;
    let Some(mut loading) = lua.app_data_mut::<Loading>() else {
        return Err(raise_text("ERR redis.register_function can only be called on FUNCTION LOAD command"));
    };
    if loading.0.iter().any(|(r, _)| r.name == name) {
        return Err(raise_text("ERR Function already exists in the library"));
    }
    let description = description.map(|d| String::from_utf8_lossy(&d).into_owned());
    loading.0.push((Registered { name, description, flags: super::ScriptFlags::from_bits(flags) }, key));
    Ok(())
}

/// A registration's name, callback, description and flags.
type Registration = (Vec<u8>, Function, Option<Vec<u8>>, u32);

/// redis.register_function's named arguments.
fn named_arguments(table: &Value) -> mlua::Result<Registration> {
    let Value::Table(t) = table else {
        return Err(raise_text("ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."));
    };
    let (mut name, mut callback, mut description, mut flags) = (None, None, None, 0);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, v) = pair?;
        let Some(key) = lua_bytes(&k) else {
            return Err(raise_text("ERR named argument key given to redis.register_function is not a string"));
        };
        if key.eq_ignore_ascii_case(b"function_name") {
            name = Some(lua_bytes(&v).ok_or_else(|| {
                raise_text("ERR function_name argument given to redis.register_function must be a string")
            })?);
        } else if key.eq_ignore_ascii_case(b"description") {
            description = Some(lua_bytes(&v).ok_or_else(|| {
                raise_text("ERR description argument given to redis.register_function must be a string")
            })?);
        } else if key.eq_ignore_ascii_case(b"callback") {
            let Value::Function(f) = v else {
                return Err(raise_text("ERR callback argument given to redis.register_function must be a function"));
            };
            callback = Some(f);
        } else if key.eq_ignore_ascii_case(b"flags") {
            let Value::Table(list) = v else {
                return Err(raise_text(
                    "ERR flags argument to redis.register_function must be a table representing function flags",
                ));
            };
            flags = 0;
            for j in 1.. {
                let item: Value = list.raw_get(j)?;
                if item == Value::Nil {
                    break;
                }
                let bit = lua_bytes(&item).and_then(|f| super::ScriptFlags::bit_of(&f));
                flags |= bit.ok_or_else(|| raise_text("ERR unknown flag given"))?;
            }
        } else {
            return Err(raise_text("ERR unknown argument given to redis.register_function"));
        }
    }
    let name = name.ok_or_else(|| raise_text("ERR redis.register_function must get a function name argument"))?;
    let callback = callback.ok_or_else(|| raise_text("ERR redis.register_function must get a callback argument"))?;
    Ok((name, callback, description, flags))
}

/// A string or number as its bytes (Lua's `lua_isstring`); `None` for anything else.
fn lua_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(n) => Some(lua_number_text(*n).into_bytes()),
        _ => None,
    }
}

/// An error raised as Redis' error table with `text`.
fn raise_text(text: &str) -> mlua::Error {
    mlua::Error::external(Raised { err: text.to_string(), ignore_stats: false })
}

fn bad_argument(pos: usize, name: &str, why: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("bad argument #{pos} to '{name}' ({why})"))
}

/// A Lua number (or numeric string) as an integer, as `luaL_checkint` reads it.
fn lua_int(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(i) => Some(*i),
        Value::Number(n) => Some(*n as i64),
        Value::String(s) => std::str::from_utf8(&s.as_bytes()).ok()?.trim().parse::<f64>().ok().map(|n| n as i64),
        _ => None,
    }
}

/// `8.10.1` as Redis' number `0x080a01`.
fn version_num(version: &str) -> i64 {
    let mut n = 0i64;
    for part in version.split('.').take(3) {
        n = (n << 8) | part.parse::<i64>().unwrap_or(0);
    }
    n
}

/// `math.random` as Redis has it: a 48-bit linear congruential generator (the drand48
/// family) that gives the same sequence for the same seed on every platform.
#[derive(Debug)]
struct Rand48 {
    state: AtomicU64,
}

const RAND48_MASK: u64 = (1 << 48) - 1;
const RAND48_MAX: u64 = i32::MAX as u64;

impl Rand48 {
    fn seeded(seed: u64) -> Rand48 {
        let r = Rand48 { state: AtomicU64::new(0) };
        r.seed(seed as i64);
        r
    }

    fn seed(&self, seed: i64) {
        let low32 = (seed as i32) as u32 as u64;
        self.state.store(((low32 << 16) | 0x330e) & RAND48_MASK, Ordering::Relaxed);
    }

    /// The next 31-bit value.
    fn next(&self) -> u64 {
        let x = self.state.load(Ordering::Relaxed);
        let x = x.wrapping_mul(0x5_deec_e66d).wrapping_add(0xb) & RAND48_MASK;
        self.state.store(x, Ordering::Relaxed);
        x >> 17
    }

    fn random(&self, args: &MultiValue) -> mlua::Result<f64> {
        let r = (self.next() % RAND48_MAX) as f64 / RAND48_MAX as f64;
        let int = |i: usize| {
            args.get(i).and_then(lua_int).ok_or_else(|| bad_argument(i + 1, "random", "number expected, got no value"))
        };
        match args.len() {
            0 => Ok(r),
            1 => {
                let u = int(0)?;
                if u < 1 {
                    return Err(bad_argument(1, "random", "interval is empty"));
                }
                Ok((r * u as f64).floor() + 1.0)
            }
            2 => {
                let (l, u) = (int(0)?, int(1)?);
                if l > u {
                    return Err(bad_argument(2, "random", "interval is empty"));
                }
                Ok((r * (u - l + 1) as f64).floor() + l as f64)
            }
            _ => Err(mlua::Error::RuntimeError("wrong number of arguments".to_string())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_version_number_packs_three_parts() {
        assert_eq!(version_num("8.10.1"), 0x080a01);
        assert_eq!(version_num("7.0.15"), 0x07000f);
    }

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let a = Rand48::seeded(0);
        let b = Rand48::seeded(0);
        a.seed(42);
        b.seed(42);
        assert_eq!((a.next(), a.next()), (b.next(), b.next()));
    }
}
