//! Scripts: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, with Lua 5.1 as Redis embeds it.
//!
//! ```text
//!  EVAL body n keys.. args..   (a server command, under the state lock, inside dispatch's unit)
//!    ─► cache: SHA1(body) → compiled function (+ the shebang's flags); EVAL adds, 500 kept LRU
//!    ─► prepare: the flags' checks (read-only script on *_RO, replica, MISCONF, OOM, stale)
//!    ─► Vm::call_eval: KEYS/ARGV, the host function for this run
//!         redis.call(..) ─► host ─► the script's checks ─► dispatch::call on the script's own
//!                                   connection (its own db, RESP2 unless setresp(3)), nothing
//!                                   blocks, the time is the script's start time
//!    ─► the returned value as the reply; an error as Redis words it ("... script: <sha>, on
//!       @user_script:<line>.")
//! ```
//!
//! A script runs alone: it holds the state lock for its whole run, so no other command sees
//! half of it. Its commands record their effects into the unit dispatch opened for the EVAL,
//! so the log, the replicas and MONITOR get the commands it ran (Redis 7's effect
//! replication), as one unit: a restart or a replica never runs the script again, and kill -9
//! leaves all of its writes or none.

pub mod convert;
pub mod functions;
pub mod libs;
pub mod raw;
pub mod vm;

use crate::client::{Action, Conn};
use crate::cmd::{reply, Call, CmdResult};
use crate::state::State;
use bytes::Bytes;
use mlua::{Lua, Value};
use rill_engine::command::{CommandSpec, Flags, Lookup};
use rill_engine::CmdError;
use rill_resp::{Protocol, Reply};
use std::collections::{BTreeMap, HashMap};

/// How many scripts EVAL may leave in the cache; the least recently used goes first (scripts
/// loaded with SCRIPT LOAD are never evicted).
const EVAL_CACHE_MAX: usize = 500;

/// The SHA1 of `bytes` in lower-case hex.
pub fn sha1_hex(bytes: &[u8]) -> String {
    use sha1::Digest as _;
    let digest = sha1::Sha1::digest(bytes);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(40);
    for b in digest {
        for nibble in [b >> 4, b & 15] {
            out.push(char::from(HEX.get(usize::from(nibble)).copied().unwrap_or(b'0')));
        }
    }
    out
}

/// The flags a script may declare in its shebang (`#!lua flags=no-writes,allow-oom`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// No shebang: Redis' old rules (each command checked as it runs).
    pub compat: bool,
    /// `no-writes`
    pub no_writes: bool,
    /// `allow-oom`
    pub allow_oom: bool,
    /// `allow-stale`
    pub allow_stale: bool,
    /// `no-cluster`
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`
    pub allow_cross_slot: bool,
}

impl ScriptFlags {
    /// The flags of a body and the length of its shebang line (kept out of the compiled code,
    /// its line break kept so line numbers stay), or Redis' error text.
    pub fn parse(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
        if !body.starts_with(b"#!") {
            return Ok((ScriptFlags { compat: true, ..Default::default() }, 0));
        }
        let Some(end) = body.iter().position(|&b| b == b'\n') else {
            return Err("Invalid script shebang".to_string());
        };
        let line = String::from_utf8_lossy(body.get(..end).unwrap_or_default()).into_owned();
        let parts: Vec<&str> = line.split_ascii_whitespace().collect();
        let Some(engine) = parts.first() else {
            return Err("Invalid engine in script shebang".to_string());
        };
        if *engine != "#!lua" {
            return Err(format!("Unexpected engine in script shebang: {engine}"));
        }
        let mut flags = ScriptFlags::default();
        for part in parts.iter().skip(1) {
            let Some(list) = part.strip_prefix("flags=") else {
                return Err(format!("Unknown lua shebang option: {part}"));
            };
            for flag in list.split(',') {
                match flag {
                    "no-writes" => flags.no_writes = true,
                    "allow-oom" => flags.allow_oom = true,
                    "allow-stale" => flags.allow_stale = true,
                    "no-cluster" => flags.no_cluster = true,
                    "allow-cross-slot-keys" => flags.allow_cross_slot = true,
                    "" if list.is_empty() => {}
                    other => return Err(format!("Unexpected flag in script shebang: {other}")),
                }
            }
        }
        Ok((flags, end))
    }

    /// The flags' names in Redis' order (FUNCTION LIST).
    pub const NAMES: [&'static str; 5] =
        ["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

    /// The bit of flag `name` (any case) in [`ScriptFlags::bits`].
    pub fn bit_of(name: &[u8]) -> Option<u32> {
        ScriptFlags::NAMES.iter().position(|n| n.as_bytes().eq_ignore_ascii_case(name)).map(|i| 1 << i)
    }

    /// The declared flags as bits, in [`ScriptFlags::NAMES`]' order.
    pub fn bits(self) -> u32 {
        [self.no_writes, self.allow_oom, self.allow_stale, self.no_cluster, self.allow_cross_slot]
            .iter()
            .enumerate()
            .fold(0, |acc, (i, on)| if *on { acc | 1 << i } else { acc })
    }

    /// A function's flags from their bits (a function always declares its flags).
    pub fn from_bits(bits: u32) -> ScriptFlags {
        let on = |i: u32| bits & (1 << i) != 0;
        ScriptFlags {
            compat: false,
            no_writes: on(0),
            allow_oom: on(1),
            allow_stale: on(2),
            no_cluster: on(3),
            allow_cross_slot: on(4),
        }
    }

    /// The names of the flags set, in Redis' order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        let bits = self.bits();
        ScriptFlags::NAMES.into_iter().enumerate().filter(move |(i, _)| bits & (1 << i) != 0).map(|(_, n)| n)
    }

    /// The command flags dispatch checks an EVAL of this script by: declared flags replace
    /// WRITE, DENYOOM and STALE (and MAY_REPLICATE); without a shebang, the command's own.
    pub fn command_flags(self, flags: Flags) -> Flags {
        if self.compat {
            return flags;
        }
        let cleared = flags.0 & !(Flags::STALE.0 | Flags::DENYOOM.0 | Flags::WRITE.0 | Flags::MAY_REPLICATE.0);
        let mut out = Flags(cleared);
        if !self.allow_oom && !self.no_writes {
            out = out.and(Flags::DENYOOM);
        }
        if !self.no_writes {
            out = out.and(Flags::WRITE);
        }
        if self.allow_stale {
            out = out.and(Flags::STALE);
        }
        out
    }
}

/// A cached script.
#[derive(Debug)]
struct Cached {
    body: Bytes,
    flags: ScriptFlags,
    /// Its compiled function, in the VM's registry (kept: dropping it frees the slot), and
    /// that registry slot.
    _key: mlua::RegistryKey,
    slot: raw::Slot,
    /// Its place in the eviction order (EVAL-made scripts only).
    lru: Option<u64>,
}

/// The scripting state: the VM, the script cache and the connection scripts run commands on.
#[derive(Debug)]
pub struct Scripts {
    vm: Option<vm::Vm>,
    cache: HashMap<String, Cached, foldhash::fast::RandomState>,
    /// The last EVAL body hashed and its SHA1 (dispatch's flag check and the run both need it;
    /// holding the body keeps its bytes from being reused, so the pointer comparison is sound).
    last_sha: std::cell::RefCell<Option<(Bytes, String)>>,
    /// EVAL-made scripts by last use.
    lru: BTreeMap<u64, String>,
    tick: u64,
    /// Bytes of the cached bodies and their names.
    body_bytes: usize,
    /// Scripts EVAL's cache pushed out (INFO `evicted_scripts`).
    pub evicted: u64,
    /// The connection scripts' commands run on (taken for a run).
    conn: Option<Box<Conn>>,
    /// Its client id (MONITOR shows its commands as `lua`).
    pub client_id: u64,
    /// Scripts made or run since the last garbage collection step.
    gc_count: u32,
    /// The VM's memory limit as last set (`script-memory-limit`).
    memory_limit: usize,
    /// The function libraries' VM (FUNCTION, FCALL).
    pub functions: functions::Functions,
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts::new()
    }
}

impl Scripts {
    /// An empty cache; the VM is made on first use.
    pub fn new() -> Scripts {
        Scripts {
            vm: None,
            cache: HashMap::default(),
            last_sha: std::cell::RefCell::new(None),
            lru: BTreeMap::new(),
            tick: 0,
            body_bytes: 0,
            evicted: 0,
            conn: None,
            client_id: u64::MAX,
            gc_count: 0,
            memory_limit: 0,
            functions: functions::Functions::default(),
        }
    }

    fn vm(&mut self, gate: &std::sync::Arc<crate::busy::BusyGate>) -> Result<&vm::Vm, CmdError> {
        if self.vm.is_none() {
            let made = vm::Vm::new(crate::cmd::connection::REDIS_VERSION, gate.clone())
                .map_err(|e| CmdError::owned(format!("ERR failed to create the Lua VM: {}", vm::error_text(&e))))?;
            self.vm = Some(made);
        }
        self.vm.as_ref().ok_or_else(|| CmdError::full("ERR no Lua VM"))
    }

    /// Bytes the Lua VM holds (INFO `used_memory_lua`).
    pub fn vm_memory(&self) -> usize {
        self.vm.as_ref().map_or(0, vm::Vm::used_memory)
    }

    /// Bytes the cache holds (INFO `used_memory_scripts_eval`).
    pub fn cache_memory(&self) -> usize {
        self.body_bytes + self.cache.len() * (std::mem::size_of::<Cached>() + 64)
    }

    /// Scripts in the cache.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Empty the cache and start a new VM (SCRIPT FLUSH).
    pub fn flush(&mut self) {
        let (evicted, client_id, conn) = (self.evicted, self.client_id, self.conn.take());
        let functions = std::mem::take(&mut self.functions);
        *self = Scripts::new();
        self.evicted = evicted;
        self.client_id = client_id;
        self.conn = conn;
        self.functions = functions;
    }

    /// The SHA1 of an EVAL body, computed once for dispatch's check and the run.
    fn body_sha(&self, body: &Bytes) -> String {
        let mut last = self.last_sha.borrow_mut();
        if let Some((b, sha)) = last.as_ref() {
            if b.as_ptr() == body.as_ptr() && b.len() == body.len() {
                return sha.clone();
            }
        }
        let sha = sha1_hex(body);
        *last = Some((body.clone(), sha.clone()));
        sha
    }

    /// The cached script `sha` (lower case), marked used: its flags and its function.
    fn lookup(&mut self, sha: &str) -> Option<(ScriptFlags, raw::Slot)> {
        self.tick += 1;
        let tick = self.tick;
        let c = self.cache.get_mut(sha)?;
        if let Some(old) = c.lru {
            // An EVAL-made script: to the young end of the eviction order.
            self.lru.remove(&old);
            self.lru.insert(tick, sha.to_string());
            c.lru = Some(tick);
        }
        Some((c.flags, c.slot))
    }

    /// Compile and cache `body` under `sha`; `from_eval`: evictable. Redis' error text when it
    /// does not compile.
    fn add(
        &mut self,
        gate: &std::sync::Arc<crate::busy::BusyGate>,
        sha: &str,
        body: &Bytes,
        from_eval: bool,
    ) -> Result<(ScriptFlags, raw::Slot), CmdError> {
        if let Some(c) = self.cache.get(sha) {
            return Ok((c.flags, c.slot));
        }
        let (flags, shebang) = ScriptFlags::parse(body).map_err(|e| CmdError::owned(format!("ERR {e}")))?;
        let code = body.get(shebang..).unwrap_or_default();
        let memory_limit = self.memory_limit;
        let vm = self.vm(gate)?;
        let compiled = vm.compile(code).or_else(|_| {
            // Out of memory, perhaps because of garbage: collect and try once more.
            vm::collect(vm.lua(), memory_limit);
            vm.compile(code)
        });
        let key = compiled.map_err(|e| CmdError::owned(format!("ERR Error compiling script (new function): {e}")))?;
        let slot = vm.slot(&key).ok_or_else(|| CmdError::full("ERR no Lua VM"))?;
        let lru = if from_eval {
            while self.lru.len() >= EVAL_CACHE_MAX {
                let Some((_, oldest)) = self.lru.pop_first() else { break };
                if let Some(gone) = self.cache.remove(&oldest) {
                    self.body_bytes -= gone.body.len() + oldest.len();
                }
                self.evicted += 1;
            }
            self.tick += 1;
            self.lru.insert(self.tick, sha.to_string());
            Some(self.tick)
        } else {
            None
        };
        if let Some(vm) = &self.vm {
            vm.gc_tick(&mut self.gc_count);
        }
        self.body_bytes += body.len() + sha.len();
        self.cache.insert(sha.to_string(), Cached { body: body.clone(), flags, _key: key, slot, lru });
        Ok((flags, slot))
    }

    /// A cached script's body.
    pub fn body(&self, sha: &str) -> Option<&Bytes> {
        self.cache.get(sha).map(|c| &c.body)
    }
}

/// An EVALSHA's SHA1 argument in lower case (`None`: not 40 bytes, so no script's name).
fn sha_name(arg: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    if arg.len() != 40 {
        return None;
    }
    match std::str::from_utf8(arg) {
        // The usual case, lower-case hex: the argument itself.
        Ok(s) if !s.bytes().any(|b| b.is_ascii_uppercase()) => Some(std::borrow::Cow::Borrowed(s)),
        _ => Some(std::borrow::Cow::Owned(String::from_utf8_lossy(arg).to_ascii_lowercase())),
    }
}

/// The flags dispatch checks a command flagged `SCRIPT` by (EVAL and kin): the shebang's,
/// when the script is known (cached, or the body of an EVAL).
pub fn command_flags(st: &State, spec: &CommandSpec, args: &[Bytes]) -> Flags {
    let Some(first) = args.get(1) else { return spec.flags };
    if spec.flags.has(Flags::SCRIPT_FUNCTION) {
        return st.scripts.functions.flags_of(first).map_or(spec.flags, |f| f.command_flags(spec.flags));
    }
    let by_sha = spec.flags.has(Flags::SCRIPT_BY_SHA);
    let sha = if by_sha {
        let Some(lower) = sha_name(first) else { return spec.flags };
        lower
    } else {
        std::borrow::Cow::Owned(st.scripts.body_sha(first))
    };
    let flags = match st.scripts.cache.get(&*sha) {
        Some(c) => c.flags,
        None if by_sha => return spec.flags,
        None => match ScriptFlags::parse(first) {
            Ok((f, _)) => f,
            Err(_) => return spec.flags,
        },
    };
    flags.command_flags(spec.flags)
}

/// EVAL script numkeys [key ...] [arg ...]
pub fn eval(c: &mut Call) -> CmdResult {
    run_script(c, false, false)
}

/// EVAL_RO script numkeys [key ...] [arg ...]
pub fn eval_ro(c: &mut Call) -> CmdResult {
    run_script(c, false, true)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
pub fn evalsha(c: &mut Call) -> CmdResult {
    run_script(c, true, false)
}

/// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
pub fn evalsha_ro(c: &mut Call) -> CmdResult {
    run_script(c, true, true)
}

const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

fn run_script(c: &mut Call, by_sha: bool, read_only: bool) -> CmdResult {
    // MONITOR sees the script before the commands it runs (EVAL itself skips dispatch's feed).
    crate::monitor::feed_script(c.st, c.conn.id, c.conn.db, c.args, &c.conn.redacted);
    // The request's own arguments (borrowed for the request, not from `c`).
    let args: &[Bytes] = c.args;
    let first = args.get(1).map_or(&[][..], |b| &b[..]);
    if by_sha && first.len() != 40 {
        return Err(CmdError::full(NOSCRIPT));
    }
    let numkeys = numkeys(c, "ERR value is not an integer or out of range")?;
    let sha = if by_sha {
        sha_name(first).unwrap_or_default()
    } else {
        std::borrow::Cow::Owned(c.st.scripts.body_sha(args.get(1).unwrap_or(&Bytes::new())))
    };
    let (flags, func) = match c.st.scripts.lookup(&sha) {
        Some(found) => found,
        None if by_sha => return Err(CmdError::full(NOSCRIPT)),
        None => c.st.scripts.add(&c.shared.busy, &sha, args.get(1).unwrap_or(&Bytes::new()), true)?,
    };
    let run = prepare(c, flags, read_only)?;
    // The VM is out of the state for the run (the commands the script calls borrow the state;
    // none of them reaches the VM: SCRIPT and FUNCTION are noscript). A script in the cache
    // was compiled by it, so it exists.
    let Some(vm) = c.st.scripts.vm.take() else {
        return Err(CmdError::full("ERR no Lua VM"));
    };
    let (vm, result) = execute(c, vm, func, numkeys, run, None, &sha);
    c.st.scripts.vm = Some(vm);
    result
}

/// The `numkeys` argument (third) of EVAL and FCALL, checked against the arguments.
fn numkeys(c: &Call, not_a_number: &'static str) -> Result<usize, CmdError> {
    let numkeys = std::str::from_utf8(c.arg(2))
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| CmdError::full(not_a_number))?;
    let rest = c.args.len() as i64 - 3;
    if numkeys > rest {
        return Err(CmdError::full("ERR Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::full("ERR Number of keys can't be negative"));
    }
    Ok(numkeys as usize)
}

/// Run `func` of `vm` (taken out of the state) with the keys and arguments after `numkeys`:
/// an EVAL script (`function` None, named `sha` in errors) or the function `function`.
/// Hands the VM back with the reply.
fn execute(
    c: &mut Call,
    vm: vm::Vm,
    func: raw::Slot,
    numkeys: usize,
    mut run: RunRules,
    function: Option<&str>,
    sha: &str,
) -> (vm::Vm, CmdResult) {
    let split = 3 + numkeys;
    // The request's own arguments (borrowed for the request, not from `c`, which the run
    // borrows for its commands).
    let args: &[Bytes] = c.args;
    let keys = args.get(3..split).unwrap_or_default();
    let argv = args.get(split..).unwrap_or_default();
    let gate = c.shared.busy.clone();
    let lua = vm.lua().clone();
    let (threshold, limit) = (c.st.hot.busy_reply_threshold_ms, c.st.hot.script_memory_limit);
    let memory_limit =
        if function.is_some() { &mut c.st.scripts.functions.memory_limit } else { &mut c.st.scripts.memory_limit };
    if *memory_limit != limit {
        let _ = lua.set_memory_limit(limit);
        *memory_limit = limit;
    }
    let mut conn = c.st.scripts.conn.take().unwrap_or_else(|| {
        let id = c.shared.next_client_id();
        let mut conn = Box::new(Conn::new(id, true));
        // Checked against the caller's user in `command`, not its own.
        conn.user = None;
        conn.script = true;
        conn
    });
    c.st.scripts.client_id = conn.id;
    conn.tracking_id = c.conn.tracking_id;
    conn.db = c.conn.db;
    conn.proto = Protocol::Resp2;
    conn.multi = None;
    let (outcome, killed) = {
        let _running = gate.start_script(function.is_some(), threshold);
        if let Some(name) = function {
            gate.describe_run(name, c.args);
        }
        let cell = std::cell::RefCell::new(Host { call: c, conn: &mut conn, run: &mut run, resp: &vm.resp });
        let outcome = vm.call_eval(func, keys, argv, function.is_some(), |op, args| match op {
            vm::Op::AclCheck => acl_check_cmd(&cell, args),
            _ => host(&cell, args),
        });
        (outcome, gate.script_killed())
    };
    if killed {
        // Its hook fires on every line now; the next script gets the count hook back.
        let _ = vm::reset_hook(&vm, gate.clone());
    }
    let resp3 = vm.resp.load(std::sync::atomic::Ordering::Acquire) == 3;
    // The commands a script ran count as its caller's (CLIENT LIST tot-cmds), as in Redis.
    c.conn.cmds_unpublished += std::mem::take(&mut conn.cmds_unpublished);
    conn.batch_cmds = 0;
    c.st.scripts.conn = Some(conn);
    let (gc_count, memory_limit) = if function.is_some() {
        (&mut c.st.scripts.functions.gc_count, c.st.scripts.functions.memory_limit)
    } else {
        (&mut c.st.scripts.gc_count, c.st.scripts.memory_limit)
    };
    if matches!(outcome, Ok(Ok(_))) {
        vm.gc_tick(gc_count);
    } else {
        // A failed script may have left much garbage (one that ran out of memory: up to
        // script-memory-limit): collected now, so the next script has room.
        vm::collect(&lua, memory_limit);
    }
    let name = function.unwrap_or(sha);
    let result = match outcome {
        Ok(Ok(value)) => {
            let (r, counted) = convert::to_reply(&value, resp3);
            c.conn.error_already_counted = counted == convert::Counted::Already;
            reply(r)
        }
        Ok(Err(err)) => {
            let (r, counted) = error_reply(&lua, err, name);
            c.conn.error_already_counted = counted == convert::Counted::Already;
            reply(r)
        }
        Err(e) => Err(CmdError::owned(format!(
            "ERR Error running script f_{name}, {:.100}",
            vm::error_text(&e).replace(['\r', '\n'], " ")
        ))),
    };
    (vm, result)
}

/// The reply for a raised error: its text, then where it happened (in the script `sha`, or
/// the function of that name).
fn error_reply(lua: &Lua, err: Value, sha: &str) -> (Reply, convert::Counted) {
    let Value::Table(t) = err else {
        let text = vm::describe(lua, err);
        return (
            Reply::Error(Bytes::from(format!("ERR Error running script f_{sha}, {text:.100}"))),
            convert::Counted::No,
        );
    };
    let text = |name: &str| match t.raw_get::<Value>(name) {
        Ok(Value::String(s)) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Ok(Value::Integer(n)) => Some(n.to_string()),
        Ok(Value::Number(n)) => Some(if n.fract() == 0.0 { (n as i64).to_string() } else { n.to_string() }),
        _ => None,
    };
    let mut msg = text("err").unwrap_or_else(|| "ERR unknown error".to_string());
    if let (Some(source), Some(line)) = (text("source"), text("line")) {
        msg.push_str(&format!(" script: {sha}, on {source}:{line}."));
    }
    let counted = match t.raw_get::<Value>("ignore_error_stats_update") {
        Ok(Value::Boolean(true)) => convert::Counted::Already,
        _ => convert::Counted::No,
    };
    (Reply::Error(Bytes::from(msg)), counted)
}

/// What a run may do, decided before it starts.
#[derive(Debug)]
struct RunRules {
    read_only: bool,
    allow_oom: bool,
    /// Over maxmemory when the script started.
    oom_at_start: bool,
    /// A write command ran.
    dirty: bool,
}

/// Redis' checks before a script runs, by its declared flags.
fn prepare(c: &mut Call, flags: ScriptFlags, ro_command: bool) -> Result<RunRules, CmdError> {
    let st = &*c.st;
    let replica = st.replication.master.is_some();
    let stale = st.replication.master.as_ref().is_some_and(|l| {
        l.state != crate::replication::LinkStatus::Connected && st.config.get("replica-serve-stale-data") == "no"
    });
    // Over maxmemory with nothing to evict when the command began (evictions ran then).
    let oom = st.hot.maxmemory > 0 && st.eviction.oom_at_command_start;
    if !flags.compat {
        if stale && !flags.allow_stale {
            return Err(CmdError::full("MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script."));
        }
        if !flags.no_writes {
            if replica && !c.conn.is_master && st.config.get("replica-read-only") != "no" {
                return Err(CmdError::full("READONLY Can not run script with write flag on readonly replica"));
            }
            if let Some(why) = st.journal.refusal() {
                return Err(CmdError::owned(format!("MISCONF Redis is configured to persist data to AOF, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts. AOF error: {why}")));
            }
            if ro_command {
                return Err(CmdError::full("ERR Can not execute a script with write flag using *_ro command."));
            }
            if !enough_replicas(st) {
                return Err(CmdError::full("NOREPLICAS Not enough good replicas to write."));
            }
        }
        if oom && !flags.allow_oom && !flags.no_writes {
            return Err(CmdError::full(
                "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'",
            ));
        }
    } else if stale {
        return Err(CmdError::full("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."));
    }
    Ok(RunRules {
        read_only: ro_command || (!flags.compat && flags.no_writes),
        allow_oom: !flags.compat && flags.allow_oom,
        oom_at_start: oom,
        dirty: false,
    })
}

fn enough_replicas(st: &State) -> bool {
    let min = st.hot.min_replicas_to_write;
    if min == 0 || st.hot.min_replicas_max_lag == 0 || st.replication.master.is_some() {
        return true;
    }
    st.replication.good_replicas(crate::clock::now_ms(), st.hot.min_replicas_max_lag) >= min
}

/// What the host function of one run holds.
struct Host<'c, 'a> {
    call: &'c mut Call<'a>,
    conn: &'c mut Conn,
    run: &'c mut RunRules,
    /// The protocol redis.setresp chose.
    resp: &'c std::sync::atomic::AtomicU8,
}

/// redis.call and redis.pcall: the reply, or the script API's error.
fn host(cell: &std::cell::RefCell<Host<'_, '_>>, args: raw::Args) -> raw::HostOut {
    let Ok(mut h) = cell.try_borrow_mut() else {
        return raw::HostOut::Raise("ERR recursive call of the Redis API".into());
    };
    match args {
        Ok(args) => command(&mut h, args),
        Err(text) => raw::HostOut::Fail(with_code(text)),
    }
}

/// redis.acl_check_cmd: whether the caller's user may run the command with these arguments;
/// a command that does not exist is an error.
fn acl_check_cmd(cell: &std::cell::RefCell<Host<'_, '_>>, args: raw::Args) -> raw::HostOut {
    let Ok(h) = cell.try_borrow() else {
        return raw::HostOut::Raise("ERR recursive call of the Redis API".into());
    };
    let argv = match args {
        Ok(a) => a,
        Err(text) => return raw::HostOut::Fail(with_code(text)),
    };
    let c = &*h.call;
    let spec = match c.shared.table.resolve(&argv) {
        Lookup::Found(s) if s.arity_ok(argv.len()) => s,
        Lookup::Found(_) => return raw::HostOut::Fail("ERR Wrong number of args for redis.acl_check_cmd()".into()),
        _ => return raw::HostOut::Fail("ERR Invalid command passed to redis.acl_check_cmd()".into()),
    };
    let allowed = match &c.conn.user {
        None => true,
        Some(u) => {
            // The caller's user as it is now (rules may have changed since it was looked up).
            let now = c.shared.acl.user(&u.name);
            now.is_some_and(|u| u.check(&c.shared.acl.commands, spec, &argv).is_ok())
        }
    };
    raw::HostOut::Bool(allowed)
}

fn with_code(text: &str) -> String {
    format!("ERR {text}")
}

/// redis.call / redis.pcall: the script's checks, then the command on the script's connection.
fn command(h: &mut Host<'_, '_>, mut args: Vec<Bytes>) -> raw::HostOut {
    h.conn.proto =
        if h.resp.load(std::sync::atomic::Ordering::Acquire) == 3 { Protocol::Resp3 } else { Protocol::Resp2 };
    let c = &mut *h.call;
    let spec = match c.shared.table.resolve(&args) {
        Lookup::Found(s) if s.arity_ok(args.len()) => s,
        Lookup::Found(s) => {
            return rejected(c.st, Some(s), "ERR Wrong number of args calling Redis command from script")
        }
        _ => return rejected(c.st, None, "ERR Unknown Redis command called from script"),
    };
    if let Some(refusal) = early_refusal(c.st, spec) {
        return rejected(c.st, Some(spec), &refusal);
    }
    // The caller's ACL user must allow the command (after the stale check, before the write
    // checks, as Redis orders them); a denial is logged in the `lua` context.
    if c.conn.user.as_ref().is_some_and(|u| !u.unrestricted()) {
        let outcome = crate::dispatch::acl_check(
            c.shared,
            c.st,
            c.conn,
            spec,
            &args,
            crate::acl::Origin { context: crate::acl::Context::Lua, running: c.spec.name },
            c.now_ms,
        );
        if let crate::dispatch::AclOutcome::Denied(text) = outcome {
            return rejected(c.st, Some(spec), &with_code(&format!("ACL failure in script: {text}")));
        }
    }
    if let Some(refusal) = refusal(c.st, h.conn, spec, h.run) {
        return rejected(c.st, Some(spec), &refusal);
    }
    if spec.flags.has(Flags::WRITE) {
        h.run.dirty = true;
        c.shared.busy.script_wrote();
    }
    let action = crate::dispatch::call(c.shared, c.st, h.conn, spec, &mut args, c.now_ms, true);
    raw::give_back(args);
    let reply = match action {
        // The common case, without the vector `inline_replies` fills.
        Action::Reply(r) => r,
        other => {
            let mut replies = Vec::with_capacity(1);
            crate::cmd::multi::inline_replies(c.st, other, &mut replies);
            replies.pop().unwrap_or(Reply::Null)
        }
    };
    let resp3 = h.conn.proto == Protocol::Resp3;
    raw::HostOut::Reply(convert::lowered(reply, resp3), resp3)
}

/// A call the script's checks refused: counted as a rejected call and an error, as Redis.
fn rejected(st: &mut State, spec: Option<&'static CommandSpec>, text: &str) -> raw::HostOut {
    if let Some(s) = spec {
        st.stats.command(s).rejected += 1;
    }
    st.stats.count_error(text.as_bytes());
    // Counted here: an error table marked like a command's.
    raw::HostOut::Reply(Reply::Error(Bytes::copy_from_slice(text.as_bytes())), false)
}

/// Why the script may not run `spec`, by the checks Redis runs before ACL (not from scripts, a
/// stale replica); `None`: it may.
fn early_refusal(st: &State, spec: &CommandSpec) -> Option<String> {
    if spec.flags.has(Flags::NOSCRIPT) {
        return Some(with_code("This Redis command is not allowed from script"));
    }
    if let Some(link) = &st.replication.master {
        let stale = link.state != crate::replication::LinkStatus::Connected;
        if stale && st.config.get("replica-serve-stale-data") == "no" && !spec.flags.has(Flags::STALE) {
            return Some(with_code("Can not execute the command on a stale replica"));
        }
    }
    None
}

/// The checks after ACL: writes (read-only scripts, replicas, the log, min-replicas) and
/// memory.
fn refusal(st: &State, conn: &Conn, spec: &CommandSpec, run: &RunRules) -> Option<String> {
    let writes = spec.flags.has(Flags::WRITE);
    if run.read_only && (writes || spec.flags.has(Flags::MAY_REPLICATE)) {
        return Some(with_code("Write commands are not allowed from read-only scripts."));
    }
    if writes && !run.dirty {
        if st.replication.master.is_some() && !conn.is_master && st.config.get("replica-read-only") != "no" {
            return Some("READONLY You can't write against a read only replica.".to_string());
        }
        if let Some(why) = st.journal.refusal() {
            return Some(format!("MISCONF Errors writing to the AOF file: {why}"));
        }
        if !enough_replicas(st) {
            return Some("NOREPLICAS Not enough good replicas to write.".to_string());
        }
    }
    if !run.allow_oom && !run.dirty && run.oom_at_start && spec.flags.has(Flags::DENYOOM) {
        return Some("OOM command not allowed when used memory > 'maxmemory'.".to_string());
    }
    None
}

/// SCRIPT LOAD script
pub fn script_load(c: &mut Call) -> CmdResult {
    let body = c.args.get(2).cloned().unwrap_or_default();
    let sha = sha1_hex(&body);
    c.st.scripts.add(&c.shared.busy, &sha, &body, false)?;
    reply(Reply::Bulk(Bytes::from(sha)))
}

/// SCRIPT EXISTS sha1 [sha1 ...]
pub fn script_exists(c: &mut Call) -> CmdResult {
    let found = c
        .args
        .iter()
        .skip(2)
        .map(|s| Reply::Integer(i64::from(c.st.scripts.cache.contains_key(&*String::from_utf8_lossy(s)))))
        .collect();
    reply(Reply::Array(found))
}

/// SCRIPT FLUSH [ASYNC|SYNC]
pub fn script_flush(c: &mut Call) -> CmdResult {
    match c.args.get(2) {
        Some(a) if c.args.len() == 3 && (a.eq_ignore_ascii_case(b"async") || a.eq_ignore_ascii_case(b"sync")) => {}
        None => {}
        Some(_) => return Err(CmdError::full("ERR SCRIPT FLUSH only support SYNC|ASYNC option")),
    }
    c.st.scripts.flush();
    Ok(Action::Reply(Reply::ok()))
}

/// SCRIPT KILL: nothing runs while this command can run (a script holds the lock it needs).
pub fn script_kill(_c: &mut Call) -> CmdResult {
    Err(CmdError::full("NOTBUSY No scripts in execution right now."))
}

/// SCRIPT DEBUG YES|SYNC|NO: only NO (rill has no Lua debugger).
pub fn script_debug(c: &mut Call) -> CmdResult {
    let mode = c.arg(2);
    if mode.eq_ignore_ascii_case(b"no") {
        return Ok(Action::Reply(Reply::ok()));
    }
    if mode.eq_ignore_ascii_case(b"yes") || mode.eq_ignore_ascii_case(b"sync") {
        return Err(CmdError::full("ERR rill has no Lua debugger: only SCRIPT DEBUG NO is supported"));
    }
    Err(CmdError::full("ERR Use SCRIPT DEBUG YES/SYNC/NO"))
}

/// SCRIPT HELP lines.
pub const SCRIPT_HELP: &[&str] = &[
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed (rill: NO only).",
    "EXISTS <sha1> [<sha1> ...]",
    "    Say, per SHA1, whether the script is in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Empty the script cache.",
    "KILL",
    "    Stop the script running now, if it wrote nothing.",
    "LOAD <script>",
    "    Put a script in the script cache without running it.",
];
