//! The command table: every command is declared once as a [`CommandSpec`] — name, arity,
//! flags, key positions, ACL categories, documentation and handler. Dispatch, `COMMAND`,
//! `COMMAND INFO|DOCS|LIST|GETKEYS`, MULTI queueing and logging all read it.
//!
//! Documentation arguments are declared as a compact syntax string ([`CommandSpec::syntax`])
//! that [`docs`] turns into the argument tree `COMMAND DOCS` returns. The mini-language:
//!
//! ```text
//! name            an argument of type string, named `name`
//! name:type       an argument of another type (key, integer, double, pattern, unix-time)
//! TOKEN           a pure token (type pure-token, name = the token in lower case)
//! TOKEN name:type an argument introduced by a token (one argument whose `token` is TOKEN)
//! [ ... ]         optional
//! ( ... )         a block (several arguments that go together)
//! a | b | c       one of (a `oneof` argument)
//! x ...           x may repeat (flag `multiple`); `TOKEN x ...` repeats with the token once
//! ```

pub mod docs;
mod table;

pub use table::{CommandTable, Lookup};

use crate::{CallCtx, CmdError, Engine};
use bytes::Bytes;
use rill_resp::Reply;

/// A handler that runs inside the engine: `args[0]` is the command name as the client sent it.
pub type EngineHandler = fn(&mut Engine, &mut CallCtx, &[Bytes]) -> Result<Reply, CmdError>;

/// The handler of a command the server runs itself (CLIENT, HELLO, INFO, MULTI, ...). The
/// engine cannot name the server's types, so it holds the handler as an opaque value; the
/// server declares each as a value of its own handler type and downcasts it at dispatch (a
/// type check, one comparison). A spec cannot be built without a handler
/// ([`CommandSpec::of`]), so a declared command without one does not compile.
pub type ServerHandler = &'static (dyn std::any::Any + Send + Sync);

/// Who executes a command.
#[derive(Clone, Copy)]
pub enum Handler {
    /// A data command the engine runs.
    Engine(EngineHandler),
    /// A connection or server command the server runs itself.
    Server(ServerHandler),
    /// A container (`XGROUP`, `CLIENT`, ...) whose subcommands carry the handlers.
    Container,
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handler::Engine(_) => f.write_str("Engine"),
            Handler::Server(_) => f.write_str("Server"),
            Handler::Container => f.write_str("Container"),
        }
    }
}

/// Command flags, as `COMMAND INFO` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u64);

impl Flags {
    /// May modify the keyspace.
    pub const WRITE: Flags = Flags(1);
    /// Never modifies the keyspace.
    pub const READONLY: Flags = Flags(1 << 1);
    /// May grow memory: refused when over maxmemory.
    pub const DENYOOM: Flags = Flags(1 << 2);
    /// Administrative.
    pub const ADMIN: Flags = Flags(1 << 3);
    /// Pub/sub related.
    pub const PUBSUB: Flags = Flags(1 << 4);
    /// Not allowed from scripts.
    pub const NOSCRIPT: Flags = Flags(1 << 5);
    /// May block the client.
    pub const BLOCKING: Flags = Flags(1 << 6);
    /// Allowed while loading the dataset.
    pub const LOADING: Flags = Flags(1 << 7);
    /// Allowed on a stale replica.
    pub const STALE: Flags = Flags(1 << 8);
    /// Not shown by MONITOR.
    pub const SKIP_MONITOR: Flags = Flags(1 << 9);
    /// Not recorded in the slow log.
    pub const SKIP_SLOWLOG: Flags = Flags(1 << 10);
    /// O(1) or O(log n) and never blocks.
    pub const FAST: Flags = Flags(1 << 11);
    /// Allowed before authentication.
    pub const NO_AUTH: Flags = Flags(1 << 12);
    /// Keys are optional.
    pub const NO_MANDATORY_KEYS: Flags = Flags(1 << 13);
    /// Not allowed inside MULTI.
    pub const NO_MULTI: Flags = Flags(1 << 14);
    /// Key positions depend on the arguments.
    pub const MOVABLEKEYS: Flags = Flags(1 << 15);
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: Flags = Flags(1 << 16);
    /// Allowed during async loading.
    pub const NO_ASYNC_LOADING: Flags = Flags(1 << 17);
    /// Runs only where its `enable-*-command` setting allows (DEBUG, MODULE LOAD/UNLOAD).
    pub const PROTECTED: Flags = Flags(1 << 18);
    /// Runs at once inside MULTI instead of being queued (MULTI, EXEC, DISCARD, WATCH, QUIT,
    /// RESET; Redis decides this by the command's name, rill by this flag).
    pub const TRANSACTION_CONTROL: Flags = Flags(1 << 19);
    /// Runs the queued transaction (EXEC): a rejection of it discards the transaction
    /// (`EXECABORT`), and the out-of-memory check covers the commands it would run.
    pub const EXEC: Flags = Flags(1 << 20);
    /// Refused with `-MISCONF` while the log is failing although it writes nothing (PING, so
    /// that a health check sees the failure, as in Redis).
    pub const REFUSED_ON_DISK_ERROR: Flags = Flags(1 << 21);
    /// Allowed to a RESP2 client while it is subscribed ((P|S)(UN)SUBSCRIBE, PING, QUIT,
    /// RESET; Redis decides this by the command's function, rill by this flag).
    pub const SUBSCRIBE_CONTEXT: Flags = Flags(1 << 22);
    /// Writes nothing but may send something to the replicas (PUBLISH, SPUBLISH): held by
    /// `CLIENT PAUSE WRITE` like a write. Redis' `may-replicate`, which COMMAND INFO leaves out.
    pub const MAY_REPLICATE: Flags = Flags(1 << 23);
    /// Runs a script (EVAL and its kin): a script that declares flags in its shebang has them
    /// replace WRITE, DENYOOM and STALE for dispatch's checks, as Redis does.
    pub const SCRIPT: Flags = Flags(1 << 24);
    /// Answered by the busy gate itself while a script runs past the threshold: stops the
    /// running EVAL script (SCRIPT KILL).
    pub const KILL_SCRIPT: Flags = Flags(1 << 25);
    /// The same for a running function (FUNCTION KILL).
    pub const KILL_FUNCTION: Flags = Flags(1 << 26);
    /// Answered by the busy gate itself while a script runs: what runs (FUNCTION STATS).
    pub const SCRIPT_STATS: Flags = Flags(1 << 27);
    /// Answered by the busy gate itself while a script runs past the threshold: with NOSAVE
    /// it ends the process there (SHUTDOWN NOSAVE), otherwise BUSY.
    pub const BUSY_SHUTDOWN: Flags = Flags(1 << 28);
    /// Answered by the busy gate itself while a script runs: authenticates the connection
    /// against the ACL users (AUTH), which need no state lock.
    pub const BUSY_AUTH: Flags = Flags(1 << 29);
    /// May delete keys anywhere in the database it finds expired (SCAN, RANDOMKEY): those
    /// deletions reach the replicas one by one, never inside `MULTI`/`EXEC`. Redis'
    /// `touches-arbitrary-keys`, which COMMAND INFO hides.
    pub const TOUCHES_ARBITRARY_KEYS: Flags = Flags(1 << 30);
    /// Reads as the consumer its `GROUP group consumer` arguments name, and may block for the
    /// group's entries (XREADGROUP, RILL.READGROUP): a group policy's idle expiry spares a
    /// consumer parked in one. rill's own; COMMAND INFO does not list it.
    pub const READS_AS_CONSUMER: Flags = Flags(1 << 31);
    /// Answered by the busy gate itself while a script runs past the threshold: opens the
    /// transaction (MULTI), which touches the connection only, as Redis runs it between a
    /// script's slices.
    pub const BUSY_MULTI: Flags = Flags(1 << 32);
    /// Runs a script it names by the SHA1 of its body (EVALSHA, EVALSHA_RO). rill's own.
    pub const SCRIPT_BY_SHA: Flags = Flags(1 << 33);
    /// Runs a function of a loaded library (FCALL, FCALL_RO). rill's own.
    pub const SCRIPT_FUNCTION: Flags = Flags(1 << 34);

    /// The union of two flag sets.
    pub const fn and(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// Whether every flag of `other` is set.
    pub const fn has(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The flag names in `COMMAND INFO` order.
    pub fn names(self) -> Vec<&'static str> {
        // PROTECTED and rill's own dispatch flags (TRANSACTION_CONTROL, EXEC,
        // REFUSED_ON_DISK_ERROR, SUBSCRIBE_CONTEXT, SCRIPT, KILL_*) and MAY_REPLICATE are left out: COMMAND INFO lists Redis' flags only.
        const NAMES: [(Flags, &str); 18] = [
            (Flags::WRITE, "write"),
            (Flags::READONLY, "readonly"),
            (Flags::DENYOOM, "denyoom"),
            (Flags::ADMIN, "admin"),
            (Flags::PUBSUB, "pubsub"),
            (Flags::NOSCRIPT, "noscript"),
            (Flags::BLOCKING, "blocking"),
            (Flags::LOADING, "loading"),
            (Flags::STALE, "stale"),
            (Flags::SKIP_MONITOR, "skip_monitor"),
            (Flags::SKIP_SLOWLOG, "skip_slowlog"),
            (Flags::FAST, "fast"),
            (Flags::NO_AUTH, "no_auth"),
            (Flags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
            (Flags::NO_ASYNC_LOADING, "no_async_loading"),
            (Flags::NO_MULTI, "no_multi"),
            (Flags::MOVABLEKEYS, "movablekeys"),
            (Flags::ALLOW_BUSY, "allow_busy"),
        ];
        NAMES.iter().filter(|(f, _)| self.has(*f)).map(|(_, n)| *n).collect()
    }
}

/// Where a key-spec starts looking for keys.
#[derive(Debug, Clone, Copy)]
pub enum BeginSearch {
    /// At a fixed argument index.
    Index(i32),
    /// After the first (or, with negative `startfrom`, last) occurrence of a keyword.
    Keyword {
        /// The keyword, e.g. `STREAMS`.
        keyword: &'static str,
        /// Index to start searching from (negative counts from the end).
        startfrom: i32,
    },
    /// Nowhere Redis can say: the keys are found by the command's own code (SORT's STORE,
    /// which may come anywhere among its options). Such a spec finds no keys here.
    Unknown,
}

/// How a key-spec finds keys once it has begun.
#[derive(Debug, Clone, Copy)]
pub enum FindKeys {
    /// A range: last key index relative to the begin (−1 = last argument), step, and limit
    /// (0 = no limit; n > 1 = the keys are 1/n of the remaining arguments).
    Range {
        /// Relative index of the last key.
        lastkey: i32,
        /// Distance between keys.
        keystep: i32,
        /// See above.
        limit: i32,
    },
    /// A count argument followed by the keys.
    Keynum {
        /// Relative index of the count.
        keynumidx: i32,
        /// Relative index of the first key.
        firstkey: i32,
        /// Distance between keys.
        keystep: i32,
    },
    /// Unknown (with [`BeginSearch::Unknown`]).
    Unknown,
}

/// One key specification (`COMMAND INFO` element 9).
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    /// Key-spec flags: `RO`, `RW`, `OW`, `RM`, `ACCESS`, `UPDATE`, `INSERT`, `DELETE`, ...
    pub flags: &'static [&'static str],
    /// Where to start.
    pub begin: BeginSearch,
    /// How to find the keys.
    pub find: FindKeys,
    /// A note `COMMAND INFO` shows (Redis' `notes`); empty for none.
    pub notes: &'static str,
}

/// A key's flags for one call, from its arguments ([`CommandSpec::key_flags`]).
pub type KeyFlags = fn(&[Bytes]) -> &'static [&'static str];

/// A command's own key finder ([`CommandSpec::get_keys`]): (argument index, key-spec index)
/// for each key of a call.
pub type GetKeys = fn(&[Bytes]) -> Vec<(usize, usize)>;

/// A command's declaration.
#[derive(Debug)]
pub struct CommandSpec {
    /// Full lower-case name: `get`, or `xgroup|create` for a subcommand.
    pub name: &'static str,
    /// Redis arity: exact argument count including the name, or −n for "at least n".
    pub arity: i32,
    /// Flags.
    pub flags: Flags,
    /// Legacy key positions: first key, last key (−1 = last argument), step. 0,0,0: no keys.
    pub first_key: i32,
    /// See `first_key`.
    pub last_key: i32,
    /// See `first_key`.
    pub step: i32,
    /// ACL categories, with the `@`: `@write`, `@string`, `@fast`, ...
    pub acl: &'static [&'static str],
    /// Command tips (`nondeterministic_output`, `request_policy:all_shards`, ...).
    pub tips: &'static [&'static str],
    /// Key specifications.
    pub key_specs: &'static [KeySpec],
    /// Documentation group: `string`, `generic`, `connection`, `server`, `stream`, ...
    pub group: &'static str,
    /// One-line summary in our own words.
    pub summary: &'static str,
    /// The Redis version that introduced the command.
    pub since: &'static str,
    /// Time complexity in our implementation.
    pub complexity: &'static str,
    /// Argument syntax (see the module doc), without the command name.
    pub syntax: &'static str,
    /// Who runs it.
    pub handler: Handler,
    /// Subcommands of a container.
    pub subcommands: &'static [CommandSpec],
    /// Which arguments name pub/sub channels (what ACL channel rules check).
    pub channels: Channels,
    /// For a key spec flagged `VARIABLE_FLAGS`: this call's flags for the key, from its
    /// arguments, as Redis' key finders give them (SET is `OW update` alone, `RW access
    /// update` with GET); ACL reads the access from them, COMMAND GETKEYSANDFLAGS shows them.
    pub key_flags: Option<KeyFlags>,
    /// Redis' `getkeys_proc`, for a command whose key specs cannot find all its keys (SORT's
    /// STORE may come anywhere among its options): the keys of a call as (argument index,
    /// index of the key spec that describes it). When set, it replaces the specs' search.
    pub get_keys: Option<GetKeys>,
}

/// The arguments of a command that name pub/sub channels, and what the command does with
/// them: ACL's `&pattern` rules are checked against the ones published or subscribed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels {
    /// None.
    None,
    /// The first argument is a channel published to (PUBLISH, SPUBLISH).
    Publish,
    /// Every argument is a channel subscribed to (SUBSCRIBE, SSUBSCRIBE).
    Subscribe,
    /// Every argument is a pattern subscribed to (PSUBSCRIBE): allowed only when a rule is
    /// that very pattern.
    PatternSubscribe,
}

/// Read and write access a key argument needs, from its key spec's flags as ACL reads them:
/// `ACCESS` reads, `INSERT`, `DELETE` and `UPDATE` write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyAccess {
    /// The command reads the key's value.
    pub read: bool,
    /// The command changes the key.
    pub write: bool,
}

impl KeyAccess {
    /// From key-spec flags.
    pub fn of(flags: &[&str]) -> KeyAccess {
        KeyAccess {
            read: flags.contains(&"ACCESS"),
            write: flags.iter().any(|f| matches!(*f, "INSERT" | "DELETE" | "UPDATE")),
        }
    }
}

/// A command's keys as ACL reads them, worked out once per command
/// ([`CommandSpec::key_plan`]) so that the check of every call walks no key specs: the common
/// shapes (no keys; keys in a range of positions, all with one access) resolved, the rest
/// walked per call as [`CommandSpec::try_key_refs`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPlan {
    /// The command has no keys to check.
    NoKeys,
    /// Keys from `first` to `last` (counted from the end when negative) every `step`, each
    /// needing `access`; with `whole`, a call too short to reach `last` has no keys at all
    /// (a key spec with a fixed last key, which Redis then reads as having none).
    Range {
        /// The first key's index.
        first: i32,
        /// The last key's index, or from the end when negative.
        last: i32,
        /// The distance between keys (at least 1).
        step: i32,
        /// No keys unless the call reaches `last`.
        whole: bool,
        /// The access each key needs.
        access: KeyAccess,
    },
    /// Anything else: the key specs are walked per call.
    Walk,
}

impl KeyPlan {
    /// Call `f` with each key argument of `args` (a call of `spec`, whose plan this is) and the
    /// access it needs, as [`CommandSpec::try_key_refs`]; the first error ends the walk.
    #[inline]
    pub fn try_keys<E>(
        self,
        spec: &CommandSpec,
        args: &[Bytes],
        mut f: impl FnMut(usize, KeyAccess) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            KeyPlan::NoKeys => Ok(()),
            KeyPlan::Range { first, last, step, whole, access } => {
                let argc = args.len() as i32;
                let last = if last < 0 { argc + last } else { last };
                if whole && last >= argc {
                    return Ok(());
                }
                let mut i = first;
                while i <= last && i < argc {
                    f(i as usize, access)?;
                    i += step;
                }
                Ok(())
            }
            KeyPlan::Walk => spec.try_key_refs(args, f),
        }
    }
}

impl CommandSpec {
    /// Whether `argc` arguments (name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = i64::from(self.arity);
        if a >= 0 {
            argc == a
        } else {
            argc >= -a
        }
    }

    /// Whether this is a container of subcommands.
    pub fn is_container(&self) -> bool {
        !self.subcommands.is_empty()
    }

    /// Whether a call that changed the keyspace is logged and replicated as itself: a write,
    /// or a read flagged `may-replicate` (PFCOUNT keeping its estimate in the value), as Redis
    /// propagates them. The server's journal and the fuzzers' model of it both ask here.
    pub fn logged_when_changed(&self) -> bool {
        self.flags.has(Flags::WRITE) || self.flags.has(Flags::MAY_REPLICATE)
    }

    /// The name a container's subcommand is matched by (`create` in `xgroup|create`).
    pub fn sub_name(&self) -> &'static str {
        self.name.rsplit('|').next().unwrap_or(self.name)
    }

    /// The key arguments of `args` (name at index 0) by the legacy positions and, for
    /// movable-key commands, by the key specs.
    pub fn key_indexes(&self, args: &[Bytes]) -> Vec<usize> {
        let argc = args.len() as i32;
        let mut out = Vec::new();
        if !self.flags.has(Flags::MOVABLEKEYS) {
            if self.first_key <= 0 {
                return out;
            }
            let last = if self.last_key < 0 { argc + self.last_key } else { self.last_key };
            let step = self.step.max(1);
            let mut i = self.first_key;
            while i <= last && i < argc {
                out.push(i as usize);
                i += step;
            }
            return out;
        }
        self.walk_key_specs(args, |i, _| out.push(i));
        out
    }

    /// The key arguments of `args` with the access each needs, by the key specs (Redis' keys
    /// for ACL: specs flagged `not_key`, such as shard channels, are left out). A command with
    /// legacy key positions but no specs needs read and write access to each.
    pub fn key_refs(&self, args: &[Bytes]) -> Vec<(usize, KeyAccess)> {
        let mut out = Vec::new();
        let _ = self.try_key_refs(args, |i, access| {
            out.push((i, access));
            Ok::<(), ()>(())
        });
        out
    }

    /// How ACL finds this command's keys ([`KeyPlan`]): no keys; one range of positions with
    /// one access (legacy positions without key specs, or a single key spec found at a fixed
    /// index and by a range); or a walk of the key specs per call.
    pub fn key_plan(&self) -> KeyPlan {
        if self.key_specs.is_empty() {
            if self.flags.has(Flags::MOVABLEKEYS) || self.first_key <= 0 {
                return KeyPlan::NoKeys;
            }
            let access = KeyAccess { read: true, write: true };
            return KeyPlan::Range {
                first: self.first_key,
                last: self.last_key,
                step: self.step.max(1),
                whole: false,
                access,
            };
        }
        let [spec] = self.key_specs else { return KeyPlan::Walk };
        if self.get_keys.is_some() || (self.key_flags.is_some() && spec.flags.contains(&"VARIABLE_FLAGS")) {
            return KeyPlan::Walk;
        }
        if spec.flags.contains(&"not_key") {
            return KeyPlan::NoKeys;
        }
        match (spec.begin, spec.find) {
            (BeginSearch::Index(first), FindKeys::Range { lastkey, keystep, limit }) if lastkey >= 0 || limit <= 1 => {
                KeyPlan::Range {
                    first,
                    last: if lastkey >= 0 { first + lastkey } else { lastkey },
                    step: keystep.max(1),
                    whole: lastkey >= 0,
                    access: KeyAccess::of(spec.flags),
                }
            }
            _ => KeyPlan::Walk,
        }
    }

    /// [`CommandSpec::key_refs`] without a vector: `f` gets each key argument in turn, and
    /// the first error it returns ends the walk (ACL's check of every command).
    pub fn try_key_refs<E>(
        &self,
        args: &[Bytes],
        mut f: impl FnMut(usize, KeyAccess) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.key_specs.is_empty() {
            let all = KeyAccess { read: true, write: true };
            if !self.flags.has(Flags::MOVABLEKEYS) {
                for i in self.key_indexes(args) {
                    f(i, all)?;
                }
            }
            return Ok(());
        }
        if !self.key_specs_fit(args) {
            // Redis reads such a call as a syntax error with no keys; its handler says so.
            return Ok(());
        }
        let mut result = Ok(());
        self.walk_key_specs(args, |i, spec| {
            if result.is_err() || spec.flags.contains(&"not_key") {
                return;
            }
            result = f(i, KeyAccess::of(self.call_key_flags(args, spec)));
        });
        result
    }

    /// The flags of a key `spec` found in this call: the spec's own, or for a spec flagged
    /// `VARIABLE_FLAGS` what [`CommandSpec::key_flags`] says of these arguments.
    fn call_key_flags(&self, args: &[Bytes], spec: &KeySpec) -> &'static [&'static str] {
        match self.key_flags {
            Some(g) if spec.flags.contains(&"VARIABLE_FLAGS") => g(args),
            _ => spec.flags,
        }
    }

    /// Whether the command has keys at all (Redis' `doesCommandHaveKeys`): its own key
    /// finder, a key spec not flagged `not_key`, or (without specs) legacy key positions.
    pub fn has_keys(&self) -> bool {
        self.get_keys.is_some()
            || self.key_specs.iter().any(|s| !s.flags.contains(&"not_key"))
            || (self.key_specs.is_empty() && (self.first_key > 0 || self.flags.has(Flags::MOVABLEKEYS)))
    }

    /// The keys of a call with each one's flags, as COMMAND GETKEYS(ANDFLAGS) lists them
    /// (specs flagged `not_key` left out); `None` when the arguments hold no valid key list
    /// (a key count past the end or no number: Redis' "Invalid arguments").
    pub fn keys_with_flags(&self, args: &[Bytes]) -> Option<Vec<(usize, &'static [&'static str])>> {
        if self.key_specs.is_empty() {
            return Some(self.key_indexes(args).into_iter().map(|i| (i, &[][..])).collect());
        }
        if !self.key_specs_fit(args) {
            return None;
        }
        let mut out = Vec::new();
        self.walk_key_specs(args, |i, spec| {
            if !spec.flags.contains(&"not_key") {
                out.push((i, self.call_key_flags(args, spec)));
            }
        });
        Some(out)
    }

    /// Whether every key spec's keys lie within `args`: a count that is no number, negative,
    /// or reaches past the last argument (`EVAL s 3 a b`) makes the call one Redis finds no
    /// keys in.
    fn key_specs_fit(&self, args: &[Bytes]) -> bool {
        if self.get_keys.is_some() {
            return true;
        }
        let argc = args.len() as i32;
        self.key_specs.iter().all(|spec| {
            let start = match spec.begin {
                BeginSearch::Index(i) => i,
                BeginSearch::Keyword { .. } | BeginSearch::Unknown => return true,
            };
            match spec.find {
                FindKeys::Keynum { keynumidx, firstkey, .. } => {
                    let n = args
                        .get((start + keynumidx) as usize)
                        .and_then(|b| std::str::from_utf8(b).ok())
                        .and_then(|s| s.parse::<i64>().ok());
                    match n {
                        Some(n) if n >= 0 => n == 0 || i64::from(start + firstkey) + n - 1 < i64::from(argc),
                        _ => false,
                    }
                }
                FindKeys::Range { lastkey, .. } => lastkey < 0 || start + lastkey < argc,
                FindKeys::Unknown => true,
            }
        })
    }

    /// Call `f` with each key argument's index and the spec that found it.
    fn walk_key_specs(&self, args: &[Bytes], mut f: impl FnMut(usize, &KeySpec)) {
        if let Some(get_keys) = self.get_keys {
            for (i, s) in get_keys(args) {
                if let Some(spec) = self.key_specs.get(s) {
                    f(i, spec);
                }
            }
            return;
        }
        let argc = args.len() as i32;
        for spec in self.key_specs {
            let start = match spec.begin {
                BeginSearch::Index(i) => i,
                BeginSearch::Keyword { keyword, startfrom } => {
                    let found = if startfrom >= 0 {
                        (startfrom.max(1)..argc).find(|&i| eq_ic(args, i, keyword))
                    } else {
                        (1..argc + startfrom + 1).rev().find(|&i| eq_ic(args, i, keyword))
                    };
                    match found {
                        Some(i) => i + 1,
                        None => continue,
                    }
                }
                BeginSearch::Unknown => continue,
            };
            match spec.find {
                FindKeys::Range { lastkey, keystep, limit } => {
                    let last = if lastkey >= 0 {
                        start + lastkey
                    } else if limit > 1 {
                        start + (argc - start) / limit - 1
                    } else {
                        argc + lastkey
                    };
                    let mut i = start;
                    while i <= last && i < argc {
                        f(i as usize, spec);
                        i += keystep.max(1);
                    }
                }
                FindKeys::Keynum { keynumidx, firstkey, keystep } => {
                    let n = args
                        .get((start + keynumidx) as usize)
                        .and_then(|b| std::str::from_utf8(b).ok())
                        .and_then(|s| s.parse::<i32>().ok())
                        .unwrap_or(0);
                    let mut i = start + firstkey;
                    for _ in 0..n.max(0) {
                        if i >= argc {
                            break;
                        }
                        f(i as usize, spec);
                        i += keystep.max(1);
                    }
                }
                FindKeys::Unknown => {}
            }
        }
    }
}

fn eq_ic(args: &[Bytes], i: i32, word: &str) -> bool {
    args.get(i as usize).is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
}

impl CommandSpec {
    /// A spec run by `handler` with every other field at its default (no keys, no flags, no
    /// docs), the base of a struct update:
    /// `CommandSpec { name: "get", arity: 2, ..CommandSpec::of(Handler::Engine(get)) }`.
    /// There is no default without a handler, so every declared command has one.
    pub const fn of(handler: Handler) -> CommandSpec {
        CommandSpec {
            name: "",
            arity: 1,
            flags: Flags(0),
            first_key: 0,
            last_key: 0,
            step: 0,
            acl: &[],
            tips: &[],
            key_specs: &[],
            group: "generic",
            summary: "",
            since: "1.0.0",
            complexity: "O(1)",
            syntax: "",
            handler,
            subcommands: &[],
            channels: Channels::None,
            key_flags: None,
            get_keys: None,
        }
    }
}

/// A key spec for the common "one key at index `i`" case with the given flags.
pub const fn key_at(index: i32, flags: &'static [&'static str]) -> KeySpec {
    KeySpec {
        flags,
        begin: BeginSearch::Index(index),
        find: FindKeys::Range { lastkey: 0, keystep: 1, limit: 0 },
        notes: "",
    }
}

/// A key spec for "keys from index `i` to the last argument, every `step`".
pub const fn keys_from(index: i32, step: i32, flags: &'static [&'static str]) -> KeySpec {
    KeySpec {
        flags,
        begin: BeginSearch::Index(index),
        find: FindKeys::Range { lastkey: -1, keystep: step, limit: 0 },
        notes: "",
    }
}
