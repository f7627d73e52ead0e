//! The path a script's commands take between Lua and the server, in Lua's C API: the start of
//! a run (keys and arguments pushed onto Lua's stack), redis.call / redis.pcall /
//! redis.acl_check_cmd (arguments read off the stack, the reply built on it).
//!
//! mlua's safe API protects every Lua string it makes with a call of its own (two C closures
//! made and a `lua_pcall`, when the VM has a memory limit, as ours has), keeps every value it
//! hands to Rust in a slot of its reference thread (taken, then given back under the VM's
//! lock), and takes a callback's arguments that way: the Redis API's hot path, a few strings
//! per command, spent more in that than in the command. Here the same work is one protected
//! call per run and per command:
//!
//! ```text
//!  run:  lua_pcall(start) ─► push handler, f (registry), KEYS and ARGV filled;
//!        lua_pcall(f, handler) ─► the script
//!  redis.call(...) ─► api(): arguments read (no Lua call) ─► the run's host ─► HostOut
//!        ─► lua_pcall(push_out) builds the value ─► returned, or raised (lua_error)
//! ```
//!
//! Safety rests on two rules. A Lua error is a `longjmp`: it may only cross Rust frames that
//! own nothing with a destructor, so every call that can raise one (an allocation: a string, a
//! table) runs either inside a protected call whose Rust frames hold only references
//! ([`push_out`], the closure given to `exec_raw`), or in [`api`] after its owned values are
//! dropped ([`ffi::lua_error`]). A Rust panic must not unwind through Lua's C frames: the host
//! runs under `catch_unwind`, its payload is kept and resumed once the run is back in Rust.
#![allow(unsafe_code)]

use super::vm::Op;
use bytes::Bytes;
use mlua::{ffi, Function, Lua, RegistryKey};
use rill_resp::Reply;
use scoped_tls_hkt::scoped_thread_local;
use std::os::raw::{c_int, c_void};

/// What the host answered a call of the Redis API with.
#[derive(Debug)]
pub enum HostOut {
    /// A command's reply as the script's protocol gives it (an error reply: an error table
    /// marked as counted, `ignore_error_stats_update`). Already [`super::convert::lowered`].
    Reply(Reply, bool),
    /// An error table `{err=text}` of the API's own (not counted by a command).
    Fail(String),
    /// A boolean (redis.acl_check_cmd).
    Bool(bool),
    /// An error table `{err=text}` raised whatever the function (redis.pcall too).
    Raise(String),
}

impl HostOut {
    /// Whether the value is raised rather than returned: redis.pcall returns errors.
    fn raised(&self, op: Op) -> bool {
        match self {
            HostOut::Raise(_) => true,
            HostOut::Fail(_) | HostOut::Reply(Reply::Error(_), _) => op != Op::Pcall,
            _ => false,
        }
    }
}

/// The arguments of a call of the Redis API: the bytes of each, or the API's error text.
pub type Args = Result<Vec<Bytes>, &'static str>;

scoped_thread_local!(
    /// The host of the run in progress on this thread: what redis.call and kin call. Set by
    /// [`with_host`] for the run only; a run's Lua code runs on the thread that started it
    /// (the hook's hand-off moves the runtime's other tasks, not the script).
    static mut HOST: for<'a> &'a mut (dyn FnMut(Op, Args) -> HostOut + 'a)
);

thread_local! {
    /// A panic of the host, kept while Lua unwinds the script; resumed by [`with_host`].
    static PANIC: std::cell::Cell<Option<Box<dyn std::any::Any + Send>>> = const { std::cell::Cell::new(None) };
}

/// Run `f` with `host` answering the Redis API (a panic of the host resumed afterwards).
pub fn with_host<R>(host: &mut dyn FnMut(Op, Args) -> HostOut, f: impl FnOnce() -> R) -> R {
    let out = HOST.set(host, f);
    if let Some(payload) = PANIC.with(std::cell::Cell::take) {
        std::panic::resume_unwind(payload);
    }
    out
}

/// redis.call, redis.pcall and redis.acl_check_cmd: C closures, each with [`push_out`] as its
/// upvalue (so that calling it allocates nothing).
pub fn api_functions(lua: &Lua) -> mlua::Result<(Function, Function, Function)> {
    // SAFETY: runs protected (exec_raw); pushes three values, which it returns.
    unsafe {
        lua.exec_raw((), |l| {
            ffi::lua_pushcfunction(l, push_out);
            for f in [call as ffi::lua_CFunction, pcall, acl_check_cmd] {
                ffi::lua_pushvalue(l, -1);
                ffi::lua_pushcclosure(l, f, 1);
                ffi::lua_insert(l, -2);
            }
            ffi::lua_pop(l, 1);
        })
    }
}

/// A VM's runner, in its registry: [`start`] (a C function), the message handler, and the
/// `KEYS` and `ARGV` tables EVAL scripts get — reached by index with no allocation.
pub struct Runner {
    start: RegistryKey,
    handler: RegistryKey,
    keys: RegistryKey,
    argv: RegistryKey,
}

impl Runner {
    /// The runner of scripts and functions, with `handler` as the message handler of their
    /// protected calls.
    pub fn new(lua: &Lua, handler: &Function) -> mlua::Result<Runner> {
        // SAFETY: `start` keeps the contract of a Lua C function (below).
        let start = unsafe { lua.create_c_function(start) }?;
        Ok(Runner {
            start: lua.create_registry_value(start)?,
            handler: lua.create_registry_value(handler.clone())?,
            keys: lua.create_registry_value(lua.create_table()?)?,
            argv: lua.create_registry_value(lua.create_table()?)?,
        })
    }
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runner")
    }
}

/// A registry slot holding a compiled script or function of a VM ([`slot`]); valid while its
/// key is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(ffi::lua_Integer);

/// The slot of `key`, a key of `lua`.
pub fn slot(lua: &Lua, key: &RegistryKey) -> Option<Slot> {
    lua.owns_registry_value(key).then(|| Slot(ffi::lua_Integer::from(key.id())))
}

/// The function in `slot`.
pub fn function(lua: &Lua, slot: Slot) -> mlua::Result<Function> {
    // SAFETY: the VM is locked; one slot is made sure of and the value popped at once.
    let value = lua.exec_raw_lua(|raw| unsafe {
        if ffi::lua_checkstack(raw.state(), 1) == 0 {
            return Err(mlua::Error::StackError);
        }
        ffi::lua_rawgeti(raw.state(), ffi::LUA_REGISTRYINDEX, slot.0);
        Ok(raw.pop_value())
    })?;
    match value {
        mlua::Value::Function(f) => Ok(f),
        _ => Err(mlua::Error::RuntimeError("no function in the slot".into())),
    }
}

/// What [`start`] does: registry indexes of the script's function and the handler; the
/// `KEYS` and `ARGV` tables (an EVAL script) or none (a function gets two new tables); the
/// keys and arguments.
struct Start<'a> {
    f: ffi::lua_Integer,
    handler: ffi::lua_Integer,
    tables: Option<[ffi::lua_Integer; 2]>,
    keys: &'a [Bytes],
    args: &'a [Bytes],
}

/// Run the compiled script or function in `f`: `Ok(value)`, or `Err(error table)` for what it
/// raised (the handler's table); an error when Lua itself failed (out of memory making the
/// keys and arguments).
///
/// An EVAL script gets the same two tables as `KEYS` and `ARGV` every run, emptied (and any
/// metatable a script gave them taken off) and filled: nothing of a run outlives it (the
/// globals are read-only), so no script sees another's, and a run makes no garbage for its
/// keys. A function gets new tables as its two arguments: a library may keep what its
/// functions were given.
pub fn run(
    lua: &Lua,
    runner: &Runner,
    f: Slot,
    function: bool,
    keys: &[Bytes],
    args: &[Bytes],
) -> mlua::Result<Result<mlua::Value, mlua::Value>> {
    let id = |k: &RegistryKey| ffi::lua_Integer::from(k.id());
    let tables = (!function).then(|| [id(&runner.keys), id(&runner.argv)]);
    let params = Start { f: f.0, handler: id(&runner.handler), tables, keys, args };
    let start_id = id(&runner.start);
    // SAFETY: the VM is locked (exec_raw_lua) and not in a callback, so its state is the main
    // state; three slots are made sure of, the stack is put back as it was. `lua_pcall`
    // protects the run; `params` outlives it.
    lua.exec_raw_lua(|raw| unsafe {
        let l = raw.state();
        let top = ffi::lua_gettop(l);
        if ffi::lua_checkstack(l, 3) == 0 {
            return Err(mlua::Error::StackError);
        }
        ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, start_id);
        ffi::lua_pushlightuserdata(l, std::ptr::from_ref(&params).cast_mut().cast::<c_void>());
        let rc = ffi::lua_pcall(l, 1, 2, 0);
        let out = if rc == 0 {
            let value = raw.pop_value();
            let ok = ffi::lua_toboolean(l, -1) != 0;
            Ok(if ok { Ok(value) } else { Err(value) })
        } else {
            let text = if ffi::lua_type(l, -1) == ffi::LUA_TSTRING {
                let mut len = 0;
                let p = ffi::lua_tolstring(l, -1, &mut len);
                String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len)).into_owned()
            } else {
                "unknown error".to_string()
            };
            Err(if rc == ffi::LUA_ERRMEM { mlua::Error::MemoryError(text) } else { mlua::Error::RuntimeError(text) })
        };
        ffi::lua_settop(l, top);
        out
    })
}

/// Called protected by [`run`] with its [`Start`] as a light userdata: the keys and arguments
/// put in place, then the script called protected with the message handler; returns whether
/// it ran to its end, and its first result or the handler's error table. Its frame holds
/// references only (a Lua error, out of memory, may cross it).
unsafe extern "C-unwind" fn start(l: *mut ffi::lua_State) -> c_int {
    let p = &*ffi::lua_touserdata(l, 1).cast::<Start<'_>>();
    ffi::lua_pop(l, 1);
    // The handler, the function, two tables, an item.
    ffi::luaL_checkstack(l, 5, c"too many arguments".as_ptr());
    ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, p.handler);
    ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, p.f);
    let nargs = if let Some([keys, argv]) = p.tables {
        // KEYS and ARGV in the globals (which have no __newindex).
        refill(l, keys, p.keys);
        ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"KEYS".as_ptr());
        refill(l, argv, p.args);
        ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"ARGV".as_ptr());
        0
    } else {
        // f(keys, argv), two new tables.
        for items in [p.keys, p.args] {
            ffi::lua_createtable(l, hint(items.len()), 0);
            fill(l, items);
        }
        2
    };
    let ok = ffi::lua_pcall(l, nargs, 1, 1) == 0;
    ffi::lua_pushboolean(l, c_int::from(ok));
    ffi::lua_insert(l, -2);
    2
}

/// Push the table in registry slot `id`, emptied, without a metatable, holding `items`.
unsafe fn refill(l: *mut ffi::lua_State, id: ffi::lua_Integer, items: &[Bytes]) {
    ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, id);
    ffi::lua_pushnil(l);
    ffi::lua_setmetatable(l, -2);
    // Every field set to nil while traversing (clearing fields is allowed during lua_next).
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        ffi::lua_pop(l, 1);
        ffi::lua_pushvalue(l, -1);
        ffi::lua_pushnil(l);
        ffi::lua_rawset(l, -4);
    }
    fill(l, items);
}

/// Set `items` at 1.. of the table on top of the stack.
unsafe fn fill(l: *mut ffi::lua_State, items: &[Bytes]) {
    for (i, b) in (1..).zip(items) {
        push_bytes(l, b);
        ffi::lua_rawseti(l, -2, i);
    }
}

unsafe extern "C-unwind" fn call(l: *mut ffi::lua_State) -> c_int {
    api(l, Op::Call)
}

unsafe extern "C-unwind" fn pcall(l: *mut ffi::lua_State) -> c_int {
    api(l, Op::Pcall)
}

unsafe extern "C-unwind" fn acl_check_cmd(l: *mut ffi::lua_State) -> c_int {
    api(l, Op::AclCheck)
}

/// A call of the Redis API: the host's answer pushed by the upvalue ([`push_out`]) under
/// `lua_pcall`, then returned or raised once nothing owned is left in this frame.
unsafe fn api(l: *mut ffi::lua_State, op: Op) -> c_int {
    let raise = {
        let out = answer(l, op);
        // Two slots: a C function has LUA_MINSTACK (20) on entry. Neither push allocates.
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_pushlightuserdata(l, std::ptr::from_ref(&out).cast_mut().cast::<c_void>());
        ffi::lua_pcall(l, 1, 1, 0) != 0 || out.raised(op)
    };
    if raise {
        ffi::lua_error(l);
    }
    1
}

/// The host's answer to this call; Redis' error when no run is in progress (FUNCTION LOAD's
/// code), or when the host panicked (the panic kept for [`with_host`]).
unsafe fn answer(l: *mut ffi::lua_State, op: Op) -> HostOut {
    let args = arguments(l);
    if !HOST.is_set() {
        return HostOut::Raise(match op {
            Op::AclCheck => "ERR redis.acl_check_cmd runs only inside a script".into(),
            _ => "ERR redis.call and redis.pcall run only inside a script".into(),
        });
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| HOST.with(|host| host(op, args)))) {
        Ok(out) => out,
        Err(payload) => {
            PANIC.with(|p| p.set(Some(payload)));
            HostOut::Raise("ERR the server failed running a script's command".into())
        }
    }
}

/// The call's arguments as the command gets them: strings as they are, numbers as
/// [`super::convert::number_text`] writes them, copied into this thread's arena and cut
/// into the arguments, in the vector [`give_back`] returned last. Nothing here raises a Lua
/// error (no string is made: a number is read, not converted).
unsafe fn arguments(l: *mut ffi::lua_State) -> Args {
    let n = usize::try_from(ffi::lua_gettop(l)).unwrap_or(0);
    if n == 0 {
        return Err("Please specify at least one argument for this redis lib call");
    }
    ARENA.with(|arena| {
        let (mut buf, mut out) = arena.take();
        // Where each ends: on the stack for the usual few arguments.
        let (mut small, mut big) = ([0usize; 16], Vec::new());
        if n > small.len() {
            big.reserve(n);
        }
        let mut number = Vec::new();
        for (i, slot) in (1..=n as c_int).zip(0..) {
            match ffi::lua_type(l, i) {
                ffi::LUA_TSTRING => {
                    let mut len = 0;
                    let p = ffi::lua_tolstring(l, i, &mut len);
                    buf.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
                }
                ffi::LUA_TNUMBER => {
                    number.clear();
                    super::convert::number_text(ffi::lua_tonumber(l, i), &mut number);
                    buf.extend_from_slice(&number);
                }
                _ => {
                    buf.clear();
                    arena.set((buf, out));
                    return Err("Lua redis lib command arguments must be strings or integers");
                }
            }
            match small.get_mut(slot) {
                Some(end) if n <= 16 => *end = buf.len(),
                _ => big.push(buf.len()),
            }
        }
        let ends = if n <= small.len() { small.get(..n).unwrap_or_default() } else { &big[..] };
        let mut all = buf.split().freeze();
        if all.len() > ARENA_MAX {
            // Not kept for later calls: the next one makes an allocation of its own size.
            buf = bytes::BytesMut::new();
        }
        let mut start = 0;
        out.clear();
        out.reserve(n);
        for &end in ends {
            out.push(all.split_to(end - start));
            start = end;
        }
        arena.set((buf, Vec::new()));
        Ok(out)
    })
}

/// Arguments longer than this in all are not copied into an allocation the arena keeps.
const ARENA_MAX: usize = 64 * 1024;

thread_local! {
    /// The bytes of the arguments of the Redis API's calls on this thread (the allocation is
    /// used again once every argument cut from it is gone), and a vector to hold them.
    static ARENA: std::cell::Cell<(bytes::BytesMut, Vec<Bytes>)> = std::cell::Cell::default();
}

/// The arguments' vector of a call that has ended, emptied and kept for the next call.
pub fn give_back(mut args: Vec<Bytes>) {
    args.clear();
    ARENA.with(|arena| {
        let (buf, _) = arena.take();
        arena.set((buf, args));
    });
}

/// The upvalue of the API functions, called protected with the [`HostOut`] as a light
/// userdata: pushes its value. Its frames hold references only.
unsafe extern "C-unwind" fn push_out(l: *mut ffi::lua_State) -> c_int {
    let out = &*ffi::lua_touserdata(l, 1).cast::<HostOut>();
    ffi::lua_pop(l, 1);
    match out {
        HostOut::Reply(r, resp3) => push_reply(l, r, *resp3),
        HostOut::Fail(text) | HostOut::Raise(text) => push_error(l, text.as_bytes(), false),
        HostOut::Bool(b) => ffi::lua_pushboolean(l, c_int::from(*b)),
    }
    1
}

unsafe fn push_bytes(l: *mut ffi::lua_State, b: &[u8]) {
    ffi::lua_pushlstring(l, b.as_ptr().cast(), b.len());
}

/// A table with one field, `name`, set to the value `push` pushes.
unsafe fn push_field(l: *mut ffi::lua_State, name: &std::ffi::CStr, push: impl FnOnce()) {
    ffi::lua_createtable(l, 0, 1);
    push();
    ffi::lua_setfield(l, -2, name.as_ptr());
}

/// `{err=text}` with the text as Redis keeps it (no leading `-`, no trailing line break), and
/// `ignore_error_stats_update=true` when a command counted it already.
unsafe fn push_error(l: *mut ffi::lua_State, text: &[u8], counted: bool) {
    let text = text.strip_prefix(b"-").unwrap_or(text);
    let end = text.iter().rposition(|&b| b != b'\r' && b != b'\n').map_or(0, |p| p + 1);
    ffi::lua_createtable(l, 0, 2);
    push_bytes(l, text.get(..end).unwrap_or(text));
    ffi::lua_setfield(l, -2, c"err".as_ptr());
    if counted {
        ffi::lua_pushboolean(l, 1);
        ffi::lua_setfield(l, -2, c"ignore_error_stats_update".as_ptr());
    }
}

/// A table size hint (Lua takes an int).
fn hint(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

/// A command's reply as the script sees it (the table in `convert`'s documentation). `r` is
/// lowered: the variants left are the ones the script's protocol gives a Lua form.
unsafe fn push_reply(l: *mut ffi::lua_State, r: &Reply, resp3: bool) {
    // A table, a key and a value, and a nested table's own: raises when the stack cannot grow.
    ffi::luaL_checkstack(l, 6, c"reply too deep".as_ptr());
    match r {
        Reply::Integer(n) => ffi::lua_pushnumber(l, *n as f64),
        Reply::Bulk(b) => push_bytes(l, b),
        Reply::Simple(s) => push_field(l, c"ok", || push_bytes(l, s)),
        Reply::Error(e) => push_error(l, e, true),
        Reply::Array(items) | Reply::Push(items) => push_array(l, items, resp3),
        Reply::Set(items) if !resp3 => push_array(l, items, resp3),
        Reply::Set(items) => push_field(l, c"set", || {
            ffi::lua_createtable(l, 0, hint(items.len()));
            for item in items {
                push_reply(l, item, resp3);
                ffi::lua_pushboolean(l, 1);
                ffi::lua_rawset(l, -3);
            }
        }),
        Reply::Map(pairs) if !resp3 => {
            ffi::lua_createtable(l, hint(pairs.len() * 2), 0);
            for (i, (k, v)) in (0..).zip(pairs) {
                push_reply(l, k, resp3);
                ffi::lua_rawseti(l, -2, 2 * i + 1);
                push_reply(l, v, resp3);
                ffi::lua_rawseti(l, -2, 2 * i + 2);
            }
        }
        Reply::Map(pairs) => push_field(l, c"map", || {
            ffi::lua_createtable(l, 0, hint(pairs.len()));
            for (k, v) in pairs {
                push_reply(l, k, resp3);
                push_reply(l, v, resp3);
                ffi::lua_rawset(l, -3);
            }
        }),
        Reply::Boolean(b) if resp3 => ffi::lua_pushboolean(l, c_int::from(*b)),
        Reply::Double(d) if resp3 => push_field(l, c"double", || ffi::lua_pushnumber(l, *d)),
        Reply::BigNumber(n) if resp3 => push_field(l, c"big_number", || push_bytes(l, n)),
        Reply::Verbatim { format, text } if resp3 => push_field(l, c"verbatim_string", || {
            ffi::lua_createtable(l, 0, 2);
            push_bytes(l, text);
            ffi::lua_setfield(l, -2, c"string".as_ptr());
            push_bytes(l, format);
            ffi::lua_setfield(l, -2, c"format".as_ptr());
        }),
        Reply::Attribute(_, inner) => push_reply(l, inner, resp3),
        // Null replies, and (not lowered) anything else.
        _ if resp3 => ffi::lua_pushnil(l),
        _ => ffi::lua_pushboolean(l, 0),
    }
}

unsafe fn push_array(l: *mut ffi::lua_State, items: &[Reply], resp3: bool) {
    ffi::lua_createtable(l, hint(items.len()), 0);
    for (i, item) in (1..).zip(items) {
        push_reply(l, item, resp3);
        ffi::lua_rawseti(l, -2, i);
    }
}
