//! The keyspace: numbered databases of keys with optional expiry, plus the bookkeeping that
//! other layers hang off writes — WATCH invalidation, keys made ready for blocked clients, and
//! the change counter INFO reports.
//!
//! Every write handler calls [`Engine::modified`] for each key it changed, naming the keyspace
//! event Redis fires for the change ([`KeyEvent`]). That single call is what invalidates WATCH
//! (as Redis' `signalModifiedKey`), counts the change and records the event (see `events`).
//! Handlers that add data a blocked client may want (list pushes, stream adds) also call
//! [`Engine::signal_ready`].

mod events;
mod evict;
mod expiry;
mod expiry_index;
mod hash_fields;
mod lazyfree;
pub(crate) mod packed;
mod scan;
mod set_members;
mod table;
#[cfg(test)]
mod tests;
mod watch;

use bytes::Bytes;

use rill_resp::Reply;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

pub use events::{EventClass, KeyEvent, KeyspaceEvent};
pub use evict::EvictionPolicy;
pub(crate) use scan::{scan_by_position, scan_position};
pub use watch::{Touch, WatchedKeys};

use crate::types::object::meta::Access;
use crate::types::object::{ObjectConfig, ObjectMeta};

pub use hash_fields::HashFields;
pub(crate) use lazyfree::Cause;
pub use lazyfree::{Garbage, LazyFree, LAZYFREE_THRESHOLD};

/// The hasher of the keyspace and of the members of hashes, sets and sorted sets: seeded at
/// random per process, and several times faster than the standard library's SipHash on short
/// keys.
pub type FastHash = foldhash::fast::RandomState;

/// A set's members, numbered as a hash's fields are (SPOP, SRANDMEMBER); ~18 bytes per member
/// more than a `HashSet`.
pub use set_members::SetMembers;

/// A value stored under a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string (also holds integers as their decimal text, as Redis does).
    Str(Bytes),
    /// A hash: field → value. A small hash, set or sorted set is one vector held right here
    /// (its table, past the small form's limits, is boxed), so that a `Value` stays 40 bytes
    /// (a string's `Bytes` and a tag) and a small collection costs one allocation: every key
    /// pays for the largest variant, and most keys are small.
    Hash(HashFields),
    /// A list, head at the front.
    List(VecDeque<Bytes>),
    /// A set of members (see `Hash`).
    Set(SetMembers),
    /// A stream (boxed: it is much larger than the other variants).
    Stream(Box<crate::types::stream::Stream>),
    /// A sorted set (see `Hash`).
    ZSet(crate::types::zset::ZSet),
}

// Every key pays for the largest variant (see `Value::Hash`).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Value>() == 40);

impl Value {
    /// The name `TYPE` reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::Stream(_) => "stream",
            Value::ZSet(_) => "zset",
        }
    }
}

/// A key's value and its absolute expiry time in Unix milliseconds, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The stored value.
    pub value: Value,
    /// Unix time in ms after which the key no longer exists; [`NO_EXPIRY`] for none. Eight
    /// bytes where an `Option<i64>` takes sixteen: every key pays for it. Read and set through
    /// [`Entry::expire_at_ms`] and [`Entry::set_expire_at_ms`].
    expire: i64,
    /// How Redis would encode the value, and when it was last accessed (OBJECT, MEMORY USAGE);
    /// never part of equality. See `types::object::meta`.
    pub meta: ObjectMeta,
}

/// [`Entry`]'s expiry when it has none: no time a key can be given is this one (a time this
/// far in the past deletes the key instead; [`Entry::set_expire_at_ms`] moves one up anyway).
const NO_EXPIRY: i64 = i64::MIN;

fn expiry_of(at_ms: Option<i64>) -> i64 {
    at_ms.map_or(NO_EXPIRY, |t| t.max(NO_EXPIRY + 1))
}

impl Entry {
    /// An entry with fresh metadata (a value loaded from a snapshot: its encoding is derived
    /// from its content, and it counts as accessed when the engine started).
    pub fn new(value: Value, expire_at_ms: Option<i64>) -> Entry {
        Entry { value, expire: expiry_of(expire_at_ms), meta: ObjectMeta::created(0) }
    }

    /// An entry with no expiry and the given metadata.
    fn with_meta(value: Value, meta: ObjectMeta) -> Entry {
        Entry { value, expire: NO_EXPIRY, meta }
    }

    /// Unix time in ms after which the key no longer exists. `None`: no expiry.
    pub fn expire_at_ms(&self) -> Option<i64> {
        (self.expire != NO_EXPIRY).then_some(self.expire)
    }

    /// Set (or with `None` remove) the expiry time; the one it had.
    pub fn set_expire_at_ms(&mut self, at_ms: Option<i64>) -> Option<i64> {
        let old = self.expire_at_ms();
        self.expire = expiry_of(at_ms);
        old
    }

    /// Whether the key is logically gone at `now_ms`.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        matches!(self.expire_at_ms(), Some(t) if t <= now_ms)
    }
}

// Every key pays for its entry: the value, eight bytes of expiry, sixteen of metadata
// (`types::object::meta`).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Entry>() == 64);

/// One numbered database.
///
/// The keys are numbered as well as hashed, so RANDOMKEY reads the key at a random position in
/// O(1); and they are kept in two runs, so it knows a key that cannot have expired without
/// looking at it, and can find one when most keys have expired:
///
/// ```text
///  position: 0 ──────── with an expiry ──────── E ──────────── no expiry ──────────── len
///            └─ keys[..E], E = expiring.len() ─┘ └─ keys[E..]: new keys are appended ─┘
/// ```
///
/// A new key has no expiry, so it is appended where it belongs. Everything else that adds or
/// removes a key or its expiry goes through the methods below, which keep both runs with O(1)
/// swaps.
#[derive(Debug, Default)]
pub struct Db {
    /// Every key, expired-but-not-yet-removed ones included. foldhash, randomly seeded per
    /// process: several times faster than SipHash on short keys and still seeded, so a client
    /// cannot precompute colliding key names. Invariant: the first `expiring.len()` keys have
    /// an expiry, the others have none.
    pub(crate) keys: table::KeyTable<Entry>,
    /// Keys with an expiry, ordered by time: active expiry pops from the front
    /// (`expiry_index.rs`). Invariant: `(t, h)` is here once for each key whose table hash is
    /// `h` and whose `expire_at_ms` is `Some(t)`.
    pub(crate) expiring: expiry_index::ExpiryIndex,
    /// Hashes with fields that expire, by the time registered for each (see
    /// `field_expiring`).
    pub(crate) field_deadline: HashMap<Bytes, i64>,
    /// The same hashes ordered by that time: active field expiry pops from the front.
    /// Invariant: `(t, k)` is here iff `field_deadline[k] == t`; every hash with an expiring
    /// field is here with a time no later than its earliest field's (a field's time removed
    /// or raised leaves the earlier one, which the expiry cycle corrects when it comes due).
    pub(crate) field_expiring: BTreeSet<(i64, Bytes)>,
}

impl Db {
    /// Number of keys, including expired ones not yet removed (as Redis' DBSIZE).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the database holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Number of keys with an expiry.
    pub fn expires_len(&self) -> usize {
        self.expiring.len()
    }

    /// Iterate over all keys (including logically expired ones; callers filter with `now`).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.keys.iter()
    }

    /// Raw lookup without expiry handling.
    pub fn get_raw(&self, key: &[u8]) -> Option<&Entry> {
        self.keys.get(key)
    }

    /// Take every key out (the database is left empty): a snapshot of a private engine moves
    /// its data instead of copying it.
    pub fn drain(&mut self) -> Vec<(Bytes, Entry)> {
        self.expiring.clear();
        self.field_deadline.clear();
        self.field_expiring.clear();
        self.keys.take_all()
    }

    /// Number of keys without an expiry: they hold the last `persistent_len()` positions.
    pub fn persistent_len(&self) -> usize {
        self.keys.len().saturating_sub(self.expiring.len())
    }

    /// The key at `position` (`0..len()`) and its entry; O(1).
    pub fn key_at(&self, position: usize) -> Option<(&[u8], &Entry)> {
        self.keys.get_index(position)
    }

    /// Whether a key that has not expired at `now_ms` exists: one without an expiry, or the
    /// latest expiry still ahead. O(log n).
    pub fn has_live_key(&self, now_ms: i64) -> bool {
        self.persistent_len() > 0 || self.expiring.last().is_some_and(|(t, _)| t > now_ms)
    }

    /// A live key with an expiry, drawn by time: the first to expire at or after an instant
    /// taken uniformly from `(now_ms, latest expiry]` by `draw`. O(log n). Not uniform over the
    /// keys (one after a long gap is likelier): a fallback for when live keys are too rare to
    /// find by position (see RANDOMKEY).
    pub fn live_expiring_key(&self, now_ms: i64, draw: u64) -> Option<&[u8]> {
        let (last, _) = self.expiring.last().filter(|(t, _)| *t > now_ms)?;
        // (now, last] holds last - now instants, at least 1.
        let span = last.abs_diff(now_ms);
        let at = now_ms.saturating_add_unsigned(1 + draw % span);
        let (t, hash) = self.expiring.first_from(at)?;
        self.key_of(t, hash)
    }

    /// The key the expiry index names by `(at_ms, hash)`: the one with that table hash whose
    /// expiry is `at_ms`.
    pub(crate) fn key_of(&self, at_ms: i64, hash: u64) -> Option<&[u8]> {
        self.keys.with_hash(hash).find(|(_, _, e)| e.expire_at_ms() == Some(at_ms)).map(|(_, k, _)| k)
    }

    /// Swap two positions; out-of-range positions (which the invariants rule out) leave the
    /// table as it is rather than panic.
    fn swap(&mut self, a: usize, b: usize) {
        if a < self.keys.len() && b < self.keys.len() {
            self.keys.swap_indices(a, b);
        }
    }

    /// Remove the key at `position`, keeping the runs: a key with an expiry is first swapped
    /// to the end of its run, whose slot the last key of the table then fills. O(1) besides
    /// the expiry index's O(log n).
    fn remove_at(&mut self, position: usize) -> Option<(table::CompactKey, Entry)> {
        let expiring = self.expiring.len();
        let mut at = position;
        if position < expiring {
            self.swap(position, expiring - 1);
            at = expiring - 1;
        }
        let hash = self.keys.hash_at(at)?;
        let (k, e) = self.keys.swap_remove_index(at)?;
        // A table at most an eighth full gives its room back, as Redis shrinks its tables.
        self.keys.shrink_if_sparse();
        self.unregister_fields(&k);
        if let Some(t) = e.expire_at_ms() {
            self.expiring.remove(t, hash);
        }
        Some((k, e))
    }

    /// Number of hashes with fields that expire (INFO keyspace `subexpiry`).
    pub fn subexpiry_len(&self) -> usize {
        self.field_deadline.len()
    }

    /// Forget the field-expiry registration of `key`, if any.
    fn unregister_fields(&mut self, key: &[u8]) {
        if self.field_deadline.is_empty() {
            return;
        }
        if let Some((k, t)) = self.field_deadline.remove_entry(key) {
            self.field_expiring.remove(&(t, k));
        }
    }

    /// Register `key` in the field-expiry index by its earliest field time now (none: not
    /// registered): after anything that may have given a field of a hash an earlier time, or
    /// stored a hash with times under the key.
    pub(crate) fn sync_field_expiry(&mut self, key: &[u8]) {
        let Some((k, e)) = self.keys.get_key_value(key) else {
            self.unregister_fields(key);
            return;
        };
        let want = match &e.value {
            Value::Hash(h) => h.min_ttl(),
            _ => None,
        };
        if want == self.field_deadline.get(key).copied() {
            return;
        }
        let k = Bytes::copy_from_slice(k);
        self.unregister_fields(key);
        if let Some(t) = want {
            self.field_deadline.insert(k.clone(), t);
            self.field_expiring.insert((t, k));
        }
    }

    /// Give the key at `position` the expiry `at_ms` (or none), moving it across the boundary
    /// of the runs when it gains or loses one. Returns its previous expiry and its position now.
    fn change_expiry(&mut self, position: usize, at_ms: Option<i64>) -> Option<(Option<i64>, usize)> {
        let boundary = self.expiring.len();
        let hash = self.keys.hash_at(position)?;
        let (_, e) = self.keys.get_index_mut(position)?;
        let old = e.set_expire_at_ms(at_ms);
        if let Some(t) = old {
            self.expiring.remove(t, hash);
        }
        if let Some(t) = at_ms {
            self.expiring.insert(t, hash);
        }
        let now_at = match (old.is_some(), at_ms.is_some()) {
            // The first slot of the second run becomes the first run's last.
            (false, true) => boundary,
            // The first run's last slot becomes the second run's first.
            (true, false) => boundary.saturating_sub(1),
            _ => position,
        };
        self.swap(position, now_at);
        Some((old, now_at))
    }

    /// Check the invariants of the two runs and the expiry index (tests).
    #[cfg(test)]
    pub(crate) fn check_runs(&self) {
        let expiring = self.expiring.len();
        for (i, (k, e)) in self.keys.iter().enumerate() {
            assert_eq!(e.expire_at_ms().is_some(), i < expiring, "key {k:?} at {i}, {expiring} with an expiry");
            if let Some(t) = e.expire_at_ms() {
                let hash = self.keys.hash_at(i).expect("in range");
                assert!(self.expiring.contains(t, hash), "{k:?} missing from the expiry index");
                assert_eq!(self.key_of(t, hash), Some(k), "the index names {k:?}");
            }
        }
        assert!(expiring <= self.keys.len());
    }
}

/// Settings the engine needs (the server owns the rest of the configuration).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Number of databases (`databases`, default 16).
    pub databases: usize,
    /// `stream-node-max-entries` (default 100).
    pub stream_node_max_entries: i64,
    /// `stream-node-max-bytes` (default 4096).
    pub stream_node_max_bytes: i64,
    /// `stream-idmp-duration` (default 100 s): IDMP duration of new streams.
    pub stream_idmp_duration_secs: u64,
    /// `stream-idmp-maxsize` (default 100): IDMP table size of new streams.
    pub stream_idmp_maxsize: u64,
    /// The encoding limits (`*-max-listpack-*`, `set-max-intset-entries`) and whether the
    /// `maxmemory-policy` is an LFU one, for OBJECT.
    pub object: ObjectConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            databases: 16,
            stream_node_max_entries: 100,
            stream_node_max_bytes: 4096,
            stream_idmp_duration_secs: 100,
            stream_idmp_maxsize: 100,
            object: ObjectConfig::default(),
        }
    }
}

/// Which value, on a signalled key, makes the server re-run a parked command (as Redis decides
/// whether to wake a blocked client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeOn {
    /// A list (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH): a key turned into another type leaves the
    /// client parked.
    List,
    /// A stream (XREAD).
    Stream,
    /// A sorted set (BZPOPMIN, BZPOPMAX, BZMPOP).
    ZSet,
    /// Any change: a stream, or the key gone or of another type (XREADGROUP, which then
    /// answers NOGROUP or WRONGTYPE).
    AnyChange,
}

impl WakeOn {
    /// Whether a key now holding a value of `type_name` (`TYPE`'s name; `None`: no key) wakes
    /// the client.
    pub fn wakes(self, type_name: Option<&str>) -> bool {
        match self {
            WakeOn::List => type_name == Some("list"),
            WakeOn::Stream => type_name == Some("stream"),
            WakeOn::ZSet => type_name == Some("zset"),
            WakeOn::AnyChange => true,
        }
    }
}

/// What a blocking command asks for when it cannot be served now. The server parks the client
/// on `keys` and re-runs the whole command when one of them is signalled ready and holds what
/// `wakes_on` says, or replies `timeout_reply` once the deadline passes.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockRequest {
    /// Keys (in the client's database) whose readiness wakes the client.
    pub keys: Vec<Bytes>,
    /// Which value on a signalled key wakes the client.
    pub wakes_on: WakeOn,
    /// Absolute deadline in Unix ms; `None` blocks forever (timeout 0).
    pub deadline_ms: Option<i64>,
    /// What the client gets when the deadline passes.
    pub timeout_reply: Reply,
    /// Arguments to re-run with instead of the original ones, when blocking resolved something
    /// that must not be resolved again (XREAD's `$` becomes the last ID at block time).
    pub rerun_args: Option<Vec<Bytes>>,
    /// Unix ms at which the command should be re-run even if no key was signalled (XREADGROUP
    /// CLAIM: when the oldest pending entry becomes idle enough to claim). A re-run that still
    /// finds nothing blocks again with its original deadline. `None`: only signals wake it.
    pub wake_at_ms: Option<i64>,
}

/// Per-call context: who runs the command, where, and when.
#[derive(Debug, Clone)]
pub struct CallCtx {
    /// Selected database index.
    pub db: usize,
    /// The current time, Unix ms. The only clock the engine sees.
    pub now_ms: i64,
    /// The calling client's id (WATCH bookkeeping).
    pub client_id: u64,
    /// Inside MULTI/EXEC (or a script): blocking commands must not block.
    pub no_block: bool,
    /// Called by a script: SORT of a set without an order sorts it ALPHA, as with STORE
    /// (Redis keeps a script's results the same wherever it runs).
    pub from_script: bool,
    /// Set by a blocking command that found nothing to serve and may block. When it is set,
    /// the handler's reply is ignored and the client is parked.
    pub block: Option<BlockRequest>,
    /// The deadline a re-run blocked command keeps (set by the server when it re-runs a parked
    /// command, so the handler does not compute a new one).
    pub deadline_override: Option<Option<i64>>,
    /// The client speaks RESP3. Only for the few replies whose *shape* (not just encoding)
    /// differs by protocol, e.g. XREAD: a map in RESP3, an array of `[key, entries]` pairs in
    /// RESP2. Everything else returns one [`Reply`] and lets the writer encode it.
    pub resp3: bool,
    /// Effects the handler emitted explicitly (see [`crate::effect`]). When `explicit` is
    /// set these are the command's whole record; otherwise a write command that changed the
    /// keyspace is logged as itself.
    pub effects: crate::effect::EffectBuf,
    /// The handler describes its changes in `effects` (even if it emitted none).
    pub explicit: bool,
    /// Effects are wanted (the log is on). When false, [`CallCtx::emit`] only marks the
    /// command as explicit, and handlers may skip building effects.
    pub recording: bool,
    /// The most bytes this command's reply may take (the client's output limit, or the
    /// server's safety bound). A handler whose reply is not bounded by the data it reads
    /// (`SRANDMEMBER key -N`) checks it with [`CallCtx::reserve_reply`] before building.
    pub reply_budget_bytes: u64,
    /// Set by [`CallCtx::reserve_reply`] when the reply would not fit: the server closes the
    /// client instead of replying, as Redis closes a client over its output limit.
    pub reply_too_big: bool,
    /// The caller may read any key: no ACL user, or one with a selector that allows the
    /// command and every key for reading (`allkeys`, `~*`, `%R~*`). SORT's BY and GET
    /// patterns name keys no key spec can declare, so they need it, as in Redis.
    pub all_keys_readable: bool,
    /// Log and replicate the command as itself even if it changed nothing (Redis'
    /// forceCommandPropagation): FLUSHDB and FLUSHALL on an empty keyspace still reach the
    /// log and the replicas, as in Redis.
    pub propagate: bool,
}

impl CallCtx {
    /// Record an explicit effect (and mark the command as describing its own changes).
    pub fn emit(&mut self, effect: crate::effect::Effect) {
        self.explicit = true;
        if self.recording {
            self.effects.push(&effect);
        }
    }

    /// Check that a reply of `elements` elements fits [`CallCtx::reply_budget_bytes`], each
    /// taking at least `min_encoded_bytes` on the wire plus one [`Reply`] while it is built;
    /// if not, mark the reply as too big and fail. O(1), so handlers call it before
    /// allocating anything for the reply.
    pub fn reserve_reply(&mut self, elements: u64, min_encoded_bytes: u64) -> Result<(), crate::CmdError> {
        let per_element = min_encoded_bytes.saturating_add(Self::REPLY_ELEMENT_BYTES);
        self.check_reply_bytes(elements.saturating_mul(per_element))
    }

    /// What one element of a reply takes while it is built, besides its bytes on the wire.
    pub const REPLY_ELEMENT_BYTES: u64 = std::mem::size_of::<Reply>() as u64;

    /// Check that a reply taking `bytes` in all (its elements' wire bytes plus
    /// [`CallCtx::REPLY_ELEMENT_BYTES`] each) fits [`CallCtx::reply_budget_bytes`]; if not,
    /// mark the reply as too big and fail. For a handler that knows its elements before it
    /// builds the reply.
    pub fn check_reply_bytes(&mut self, bytes: u64) -> Result<(), crate::CmdError> {
        if bytes > self.reply_budget_bytes {
            self.reply_too_big = true;
            return Err(crate::CmdError::full("ERR reply exceeds the client output buffer limit"));
        }
        Ok(())
    }

    /// Mark the command as describing its own changes, emitting nothing yet.
    pub fn explicit(&mut self) {
        self.explicit = true;
    }

    /// Record consumer-group effects on the stream at `key`.
    pub fn emit_group(
        &mut self,
        key: &Bytes,
        effects: impl IntoIterator<Item = crate::types::stream::group::GroupEffect>,
    ) {
        self.explicit = true;
        if !self.recording {
            return;
        }
        for effect in effects {
            self.effects.group(self.db, key, &effect);
        }
    }

    /// A context for database `db` at time `now_ms`.
    pub fn new(db: usize, now_ms: i64, client_id: u64) -> CallCtx {
        CallCtx {
            db,
            now_ms,
            client_id,
            no_block: false,
            from_script: false,
            block: None,
            deadline_override: None,
            resp3: false,
            effects: crate::effect::EffectBuf::default(),
            explicit: false,
            recording: false,
            reply_budget_bytes: u64::MAX,
            reply_too_big: false,
            all_keys_readable: true,
            propagate: false,
        }
    }
}

/// The whole keyspace and its write bookkeeping. Every field is private to the engine: the
/// server changes the keyspace only through commands and [`Engine::apply_effect`], and the
/// bookkeeping only through the methods below, which keep the invariants written on each field.
#[derive(Debug)]
pub struct Engine {
    /// The databases, `config.databases` of them (fixed at start-up).
    pub(crate) dbs: Vec<Db>,
    /// The function libraries (not in any database: FLUSHALL keeps them, as in Redis).
    libraries: crate::functions::Libraries,
    /// Engine settings. `databases` never changes after [`Engine::new`].
    pub(crate) config: EngineConfig,
    /// The `lazyfree-lazy-*` settings (`lazyfree.rs`).
    lazy: LazyFree,
    /// Values and databases deletions left to free in the background, until the server takes
    /// them ([`Engine::take_garbage`]).
    garbage: Vec<Garbage>,
    /// WATCH bookkeeping.
    pub(crate) watch: WatchedKeys,
    /// Keys some client is blocked on, with how many clients wait on each (never 0: a key
    /// nobody waits on is removed). Kept by [`Engine::block_on`] / [`Engine::unblock_from`];
    /// read by [`Engine::signal_ready`].
    pub(crate) blocking_keys: HashMap<(usize, Bytes), usize>,
    /// Keys signalled ready since the server last drained them, in signal order, no repeats
    /// (`ready_set` holds the same keys).
    ready_keys: Vec<(usize, Bytes)>,
    ready_set: HashSet<(usize, Bytes)>,
    /// Changes since start (`rdb_changes_since_last_save` is this minus its value at the last
    /// save). Only grows, by [`Engine::modified`] and [`Engine::count_changes`].
    dirty: u64,
    /// Changes made by the command running now ([`Engine::call`] resets and reads it): what
    /// says a command changed the keyspace.
    call_changes: u64,
    /// Keys removed by expiry (`expired_keys`).
    pub(crate) expired_keys: u64,
    /// Of those, the ones the active cycle removed (`expired_keys_active`).
    pub(crate) expired_keys_active: u64,
    /// Keys removed to free memory (`evicted_keys`).
    pub(crate) evicted_keys: u64,
    /// The eviction pool and the random policies' place (see `evict`).
    evict: evict::EvictState,
    /// Successful / failed key lookups (`keyspace_hits` / `keyspace_misses`).
    keyspace_hits: u64,
    /// See `keyspace_hits`.
    keyspace_misses: u64,
    /// Replaying the log or loading a snapshot: keys never expire (the log says when they
    /// went), and nothing is recorded in `expired_log`.
    pub(crate) loading: bool,
    /// A replica: keys are never expired here; the primary's deletions arrive in its stream.
    pub(crate) replica: bool,
    /// On a replica, the primary's stream is being applied: its commands see keys whose time
    /// has passed (they are the primary's to delete); other clients' lookups do not.
    applying_stream: bool,
    /// On a replica, a rill primary's record of a unit is being applied, at the primary's
    /// time: an expiry time already past at that time is what the primary deleted the key
    /// for (unlike a late `PEXPIREAT` of Redis' forms, which the primary's `DEL` follows).
    applying_record: bool,
    /// On a writable replica, a client's write command is running: it expires the keys whose
    /// time has passed as a primary does (Redis' replicas delete them for a write lookup).
    replica_client_write: bool,
    /// On a writable replica, the keys its own clients gave an expiry time, by database:
    /// these it expires itself (`expire_replica_written_keys`), as Redis' replicas do.
    replica_written_expiring: std::collections::BTreeSet<(usize, Bytes)>,
    /// DEBUG SET-ALLOW-ACCESS-EXPIRED: hash fields whose time has passed are seen and kept
    /// (lazy field expiry off; the active cycle still runs unless turned off too).
    allow_access_expired: bool,
    /// Expiry is paused before this time, Unix ms (CLIENT PAUSE, FAILOVER): a key whose time
    /// has passed is hidden but not deleted, as on a replica, so that nothing is written.
    expiry_paused_until: i64,
    /// Keys removed by lazy or active expiry since the server last drained them, in order:
    /// logged as `DEL` before the effects of the command that found them.
    pub(crate) expired_log: Vec<(usize, Bytes)>,
    /// Hash fields removed by lazy or active field expiry (or by an expiry time already past
    /// when set) since the server last drained them, in order: logged as `HDEL key field...`
    /// before the effects of the command that removed them.
    pub(crate) expired_fields_log: Vec<(usize, Bytes, Vec<Bytes>)>,
    /// Hash fields removed by expiry (`expired_subkeys`), and of those by the active cycle
    /// (`expired_subkeys_active`).
    pub(crate) expired_subkeys: u64,
    pub(crate) expired_subkeys_active: u64,
    /// State of the engine's pseudo-random generator (RANDOMKEY). Fixed seed: the engine has
    /// no entropy source of its own, and nothing random is ever logged.
    rng_state: u64,
    /// The latest time a lookup or the expiry cycle brought in (ms): the creation time of
    /// values stored without a lookup's time at hand.
    clock_ms: i64,
    /// The first such time after loading, in seconds (0 until one arrives): when keys loaded
    /// from a snapshot count as last accessed.
    first_clock_s: u32,
    /// A separate pseudo-random sequence for the LFU counter, so that reads under an LFU policy
    /// do not shift RANDOMKEY's.
    lfu_rng_state: u64,
    /// Elements random picks (SPOP, SRANDMEMBER, HRANDFIELD, RANDOMKEY) read by position since
    /// start: tests check that a pick reads one element per element it returns (RANDOMKEY: a
    /// bounded number), never the whole value. See `types::pick`.
    pub(crate) random_reads: u64,
    /// The keyspace events of the running command (see [`events`]).
    events: events::EventLog,
    /// When each group with a policy needs a look (`types::stream::policy_act`).
    pub(crate) policy_timer: crate::types::stream::policy_act::PolicyTimer,
    /// When each stream with MAXAGE needs a look (`types::stream::max_age`).
    pub(crate) max_age_index: crate::types::stream::max_age::AgeIndex,
    /// Which connections read as which consumers of RELEASEONCLOSE groups
    /// (`types::stream::policy_close`).
    pub(crate) policy_readers: crate::types::stream::policy_close::PolicyReaders,
}

/// What one command did, besides its reply.
#[derive(Debug)]
pub struct Outcome {
    /// The reply, or the error to reply.
    pub reply: Result<Reply, crate::CmdError>,
    /// Changes the command made to the keyspace (0: it changed nothing). A write command that
    /// changed something and emitted no explicit effects is logged as itself.
    pub changes: u64,
}

/// The counters INFO stats reports for the keyspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyspaceStats {
    /// `expired_keys`
    pub expired_keys: u64,
    /// `expired_keys_active`
    pub expired_keys_active: u64,
    /// `evicted_keys`
    pub evicted_keys: u64,
    /// `keyspace_hits`
    pub hits: u64,
    /// `keyspace_misses`
    pub misses: u64,
    /// `expired_subkeys`: hash fields removed by expiry.
    pub expired_subkeys: u64,
    /// `expired_subkeys_active`: of those, by the active cycle.
    pub expired_subkeys_active: u64,
}

impl Engine {
    /// An empty keyspace.
    pub fn new(config: EngineConfig) -> Engine {
        let dbs = (0..config.databases.max(1)).map(|_| Db::default()).collect();
        Engine {
            dbs,
            config,
            lazy: LazyFree::default(),
            garbage: Vec::new(),
            watch: WatchedKeys::default(),
            blocking_keys: HashMap::new(),
            ready_keys: Vec::new(),
            ready_set: HashSet::new(),
            dirty: 0,
            call_changes: 0,
            expired_keys: 0,
            expired_keys_active: 0,
            evicted_keys: 0,
            evict: Default::default(),
            keyspace_hits: 0,
            keyspace_misses: 0,
            loading: false,
            replica: false,
            applying_stream: false,
            applying_record: false,
            replica_client_write: false,
            replica_written_expiring: std::collections::BTreeSet::new(),
            expiry_paused_until: 0,
            allow_access_expired: false,
            expired_log: Vec::new(),
            expired_fields_log: Vec::new(),
            expired_subkeys: 0,
            expired_subkeys_active: 0,
            rng_state: 0x005E_ED0F_2111,
            clock_ms: 0,
            first_clock_s: 0,
            lfu_rng_state: 0x0000_1F0C_0DE5,
            random_reads: 0,
            events: events::EventLog::default(),
            policy_timer: Default::default(),
            max_age_index: Default::default(),
            policy_readers: Default::default(),
            libraries: Default::default(),
        }
    }

    /// The function libraries (FUNCTION LOAD).
    pub fn libraries(&self) -> &crate::functions::Libraries {
        &self.libraries
    }

    /// The function libraries, to change (counted as one change for the save points): a
    /// change must also be recorded as its effect (`Effect::Library` and kin), as the
    /// server's FUNCTION commands do.
    pub fn libraries_mut(&mut self) -> &mut crate::functions::Libraries {
        self.count_changes(1);
        &mut self.libraries
    }

    /// The database at `db`. Panics only on an index the server never hands out.
    #[allow(clippy::indexing_slicing)]
    pub fn db(&self, db: usize) -> &Db {
        &self.dbs[db]
    }

    #[allow(clippy::indexing_slicing)]
    pub(crate) fn db_mut(&mut self, db: usize) -> &mut Db {
        &mut self.dbs[db]
    }

    /// Look a key up for reading: removes it first if it has expired, and counts as an access
    /// (OBJECT IDLETIME / FREQ).
    pub fn lookup(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&Entry> {
        self.lookup_mut(db, key, now_ms).map(|e| &*e)
    }

    /// Look a key up for writing: removes it first if it has expired; an access.
    pub fn lookup_mut(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        let at = self.visible_index(db, key, now_ms)?;
        let access = self.access(now_ms);
        let (_, entry) = self.db_mut(db).keys.get_index_mut(at)?;
        entry.meta.touch(access);
        Some(entry)
    }

    /// Where `key` is in `db`, when a client may see it at `now_ms` ([`Engine::live_index`]):
    /// a key kept although its time passed is hidden from every client but the primary's
    /// stream on a replica (the primary deletes it), as Redis' replicas hide it, and while
    /// expiry is paused, on a primary too, until the pause ends.
    fn visible_index(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<usize> {
        let (at, expired) = self.live_index(db, key, now_ms)?;
        let hidden = expired && ((self.replica && !self.applying_stream) || now_ms < self.expiry_paused_until);
        (!hidden).then_some(at)
    }

    /// The entry at `key` as it is: no expiry check, not an access. For handlers adjusting the
    /// metadata of a value they just stored.
    pub fn entry_mut(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        self.db_mut(db).keys.get_mut(key)
    }

    /// Look a key up for a read command: as [`Engine::lookup`], and counts the outcome in
    /// `keyspace_hits` / `keyspace_misses` (Redis counts only read lookups there).
    pub fn lookup_read(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&Entry> {
        let at = self.visible_index(db, key, now_ms);
        self.count_read(at.is_some());
        let at = at?;
        let access = self.access(now_ms);
        let (_, entry) = self.db_mut(db).keys.get_index_mut(at)?;
        entry.meta.touch(access);
        Some(entry)
    }

    /// [`Engine::lookup_read`] that is not an access: EXISTS, OBJECT, MEMORY USAGE (Redis'
    /// `LOOKUP_NOTOUCH`).
    pub fn peek_read(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&Entry> {
        let at = self.visible_index(db, key, now_ms);
        self.count_read(at.is_some());
        self.db(db).keys.get_index(at?).map(|(_, e)| e)
    }

    /// [`Engine::lookup`] that is not an access: TYPE, TTL and friends.
    pub fn peek(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<&Entry> {
        let at = self.visible_index(db, key, now_ms)?;
        self.db(db).keys.get_index(at).map(|(_, e)| e)
    }

    /// Whether a write that sets expiry time `at_ms` deletes the key at once, the time being
    /// past at `now_ms`: not on a replica, which stores the time and leaves the deletion to its
    /// primary (Redis' replicas do so: a PEXPIREAT applied late must not delete a key the
    /// primary still has).
    /// A rill primary's record is applied at the primary's time, so there the time decides as
    /// on the primary.
    pub(crate) fn expired_on_write(&self, at_ms: i64, now_ms: i64) -> bool {
        at_ms <= now_ms && (!self.replica || self.applying_record)
    }

    /// Whether keys whose time has passed are kept at `now_ms` instead of deleted: while
    /// loading, on a replica, and while expiry is paused.
    pub(crate) fn keeps_expired(&self, now_ms: i64) -> bool {
        self.loading || (self.replica && !self.replica_client_write) || now_ms < self.expiry_paused_until
    }

    /// On a replica, a client's write command starts (true) or ended (false): see
    /// `replica_client_write`.
    pub fn set_replica_client_write(&mut self, writing: bool) {
        self.replica_client_write = writing;
    }

    /// How many keys a writable replica's clients gave an expiry time that it still tracks.
    pub fn replica_written_expiring(&self) -> usize {
        self.replica_written_expiring.len()
    }

    /// Pause expiry (lazy and active) until `until_ms`, Unix ms; 0 (or any past time) resumes
    /// it. What CLIENT PAUSE and FAILOVER do, so that a paused primary writes nothing.
    pub fn pause_expiry(&mut self, until_ms: i64) {
        self.expiry_paused_until = until_ms;
    }

    /// DEBUG SET-ALLOW-ACCESS-EXPIRED: let commands see hash fields whose time has passed.
    pub fn set_allow_access_expired(&mut self, allow: bool) {
        self.allow_access_expired = allow;
    }

    /// The time hash field expiry is judged at for a command running at `now_ms`: the
    /// beginning of time while expired fields are allowed to be seen.
    pub(crate) fn field_now(&self, now_ms: i64) -> i64 {
        if self.allow_access_expired {
            i64::MIN
        } else {
            now_ms
        }
    }

    /// The primary's stream is being applied (true) or not: see [`Engine::set_replica`].
    pub fn set_applying_stream(&mut self, applying: bool) {
        self.applying_stream = applying;
    }

    /// A rill primary's record of a unit is being applied (true) or not: the primary's stream
    /// at the primary's time, where an expiry time already past deleted the key there.
    pub fn set_applying_record(&mut self, applying: bool) {
        self.applying_stream = applying;
        self.applying_record = applying;
    }

    fn count_read(&mut self, found: bool) {
        if found {
            self.keyspace_hits += 1;
        } else {
            self.keyspace_misses += 1;
        }
    }

    /// An access at `now_ms`, with the random draw the LFU counter needs under an LFU policy.
    /// (A handler that looks the same key up twice counts two accesses where Redis' single
    /// lookup counts one: see `types::object`.)
    fn access(&mut self, now_ms: i64) -> Access {
        let draw = if self.config.object.lfu { Some((splitmix(&mut self.lfu_rng_state) >> 32) as u32) } else { None };
        Access::with(now_ms, draw, &self.config.object)
    }

    /// Note the time a command or the expiry cycle runs at (see `clock_ms`).
    pub(crate) fn observe_clock(&mut self, now_ms: i64) {
        self.clock_ms = now_ms;
        // Replay runs at the logged times; loaded keys count from when serving began.
        if self.first_clock_s == 0 && !self.loading {
            self.first_clock_s = u32::try_from(now_ms.max(0) / 1000).unwrap_or(u32::MAX);
        }
    }

    /// When keys loaded from a snapshot count as last accessed (Unix seconds; 0: no time yet).
    pub fn first_clock_s(&self) -> u32 {
        self.first_clock_s
    }

    /// Look a key up for writing, creating it with `make()` (no expiry) when it is missing or
    /// has expired. The caller checks the value's type; nothing is created when a live key of
    /// any type exists. Does not call [`Engine::modified`].
    pub fn lookup_or_insert(
        &mut self,
        db: usize,
        key: &Bytes,
        now_ms: i64,
        make: impl FnOnce() -> Value,
    ) -> &mut Entry {
        let found = self.live_index(db, key, now_ms).map(|(at, _)| at);
        let access = self.access(now_ms);
        let loading = self.loading;
        #[allow(clippy::indexing_slicing)]
        let (d, events) = (&mut self.dbs[db], &mut self.events);
        let at = match found {
            Some(at) => {
                if let Some((_, entry)) = d.keys.get_index_mut(at) {
                    entry.meta.touch(access);
                }
                at
            }
            // A new value starts with fresh counters, as a new Redis object does; it has no
            // expiry, so appending it keeps the runs. The key is copied: the argument may be
            // a slice of a network read buffer, which a stored slice would keep alive whole
            // (see `types`).
            None => {
                if !loading {
                    events.push(db, key, KeyEvent::New);
                }
                let entry = Entry::with_meta(make(), ObjectMeta::created(now_ms));
                d.keys.insert_full(key, entry).0
            }
        };
        // `at` was found or inserted just above: in range.
        d.keys.value_at_mut(at)
    }

    /// The next number of the engine's pseudo-random sequence (splitmix64).
    pub fn random_u64(&mut self) -> u64 {
        splitmix(&mut self.rng_state)
    }

    /// Whether a live key exists.
    pub fn exists(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        self.lookup(db, key, now_ms).is_some()
    }

    /// Store `value` under `key`, replacing any old value and dropping its expiry.
    /// Does not call [`Engine::modified`]; the handler does.
    pub fn insert(&mut self, db: usize, key: Bytes, value: Value) {
        self.store(db, &key, value);
    }

    /// [`Engine::insert`] with the key by reference: it is copied only if it is new (an
    /// overwrite keeps the stored key, as Redis' overwrite does).
    pub fn insert_copy(&mut self, db: usize, key: &[u8], value: Value) {
        self.store(db, key, value);
    }

    fn store(&mut self, db: usize, key: &[u8], value: Value) {
        if let Value::Stream(s) = &value {
            let groups = s.policy_groups();
            if !groups.is_empty() {
                let at = self.clock_ms;
                self.arm_policies_of(db, &Bytes::copy_from_slice(key), groups, at);
            }
            self.arm_max_age_of(db, key, s);
        }
        let meta = ObjectMeta::created(self.clock_ms);
        let loading = self.loading;
        let fields_expire = matches!(&value, Value::Hash(h) if h.ttl_count() > 0);
        let d = self.db_mut(db);
        let entry = Entry::with_meta(value, meta);
        let Some(at) = d.keys.get_index_of(key) else {
            if !loading {
                self.events.push(db, key, KeyEvent::New);
            }
            let d = self.db_mut(db);
            // No expiry: appending keeps the runs.
            d.keys.insert(key, entry);
            if fields_expire {
                d.sync_field_expiry(key);
            }
            return;
        };
        // The new value has no expiry: drop the old one's first (the key may change runs).
        let at = d.change_expiry(at, None).map_or(at, |(_, now_at)| now_at);
        let Some((_, slot)) = d.keys.get_index_mut(at) else { return };
        let old = std::mem::replace(slot, entry);
        if fields_expire || !d.field_deadline.is_empty() {
            d.sync_field_expiry(key);
        }
        if matches!(old.value, Value::Stream(_)) {
            // Clients blocked in XREADGROUP on it must learn it is gone (Redis signals a
            // deleted or overwritten key to them).
            self.signal_ready(db, key);
        }
        self.dispose_value(key, old.value);
    }

    /// Store `value` under `key` as Redis' `setKey` does (SET, MSET, GETSET, the set algebra's
    /// STORE forms): the old value replaced whole (its expiry dropped unless `keep_ttl`), with
    /// `overwritten` (and `type_changed`) recorded when there was one, before the caller's
    /// own event. The caller has expired an old key whose time passed (a write lookup).
    pub fn set_key(&mut self, db: usize, key: &[u8], value: Value, keep_ttl: bool) {
        let old_type = self.db(db).get_raw(key).map(|e| e.value.type_name());
        let new_type = value.type_name();
        self.record_overwrite(db, key, old_type, new_type);
        if keep_ttl {
            self.insert_keep_ttl(db, Bytes::copy_from_slice(key), value);
        } else {
            self.insert_copy(db, key, value);
        }
    }

    /// Store `value` under `key`, keeping the old key's expiry if there was one.
    pub fn insert_keep_ttl(&mut self, db: usize, key: Bytes, value: Value) {
        self.store_keep_ttl(db, &key, Some(&key), value);
    }

    /// [`Engine::insert_keep_ttl`] of a borrowed key: copied only when the key is new.
    pub fn insert_keep_ttl_ref(&mut self, db: usize, key: &[u8], value: Value) {
        self.store_keep_ttl(db, key, None, value);
    }

    fn store_keep_ttl(&mut self, db: usize, key: &[u8], owned: Option<&Bytes>, value: Value) {
        if let Value::Stream(s) = &value {
            let groups = s.policy_groups();
            if !groups.is_empty() {
                let at = self.clock_ms;
                let k = owned.cloned().unwrap_or_else(|| Bytes::copy_from_slice(key));
                self.arm_policies_of(db, &k, groups, at);
            }
            self.arm_max_age_of(db, key, s);
        }
        let meta = ObjectMeta::created(self.clock_ms);
        let fields_expire = matches!(&value, Value::Hash(h) if h.ttl_count() > 0);
        let d = self.db_mut(db);
        match d.keys.get_mut(key) {
            Some(e) => {
                let replaced_stream = matches!(e.value, Value::Stream(_));
                let old = std::mem::replace(&mut e.value, value);
                e.meta = meta;
                if fields_expire || !d.field_deadline.is_empty() {
                    d.sync_field_expiry(key);
                }
                if replaced_stream {
                    self.signal_ready(db, key);
                }
                self.dispose_value(key, old);
            }
            None => {
                d.keys.insert(key, Entry::with_meta(value, meta));
                if fields_expire {
                    d.sync_field_expiry(key);
                }
                if !self.loading {
                    self.events.push(db, key, KeyEvent::New);
                }
            }
        }
    }

    /// Remove a key (expired or not), returning its entry.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        let d = self.db_mut(db);
        let at = d.keys.get_index_of(key)?;
        d.remove_at(at).map(|(_, e)| e)
    }

    /// Set or clear the expiry of an existing key. Returns false when the key does not exist.
    pub fn set_expire(&mut self, db: usize, key: &[u8], at_ms: Option<i64>) -> bool {
        if self.replica && self.replica_client_write && at_ms.is_some() {
            self.replica_written_expiring.insert((db, Bytes::copy_from_slice(key)));
        }
        let d = self.db_mut(db);
        let Some(at) = d.keys.get_index_of(key) else { return false };
        let Some((old, at)) = d.change_expiry(at, at_ms) else { return false };
        if old.is_some() != at_ms.is_some() {
            if let Some((_, e)) = d.keys.get_index_mut(at) {
                // Redis reallocates a string with room for the expiry (or without it).
                crate::types::object::encoding::string_moved(e, key.len(), old.is_some(), key.len(), at_ms.is_some());
            }
        }
        true
    }

    /// Record that `key` in `db` was written: invalidates WATCHes on it and counts a change.
    /// `event` names the change as Redis' keyspace notification does; it is recorded for
    /// [`Engine::events`].
    pub fn modified(&mut self, db: usize, key: &[u8], event: KeyEvent) {
        self.watch.touch(db, key);
        self.events.push(db, key, event);
        self.count_changes(1);
    }

    /// [`Engine::modified`] without counting a change: the second key of a command Redis
    /// counts once (LMOVE's source, beside its destination), or a key an emptying removal
    /// deletes.
    pub fn modified_uncounted(&mut self, db: usize, key: &[u8], event: KeyEvent) {
        self.watch.touch(db, key);
        self.events.push(db, key, event);
    }

    /// A change of `key`'s value that is no change of what it holds (PFCOUNT keeping its
    /// estimate in the HLL): WATCH and client-side caching hear of it and it counts as a
    /// change, but no keyspace event names it, as in Redis.
    pub fn modified_quietly(&mut self, db: usize, key: &[u8]) {
        self.watch.touch(db, key);
        self.count_changes(1);
    }

    /// Count `n` changes that touch no WATCHed key as such (consumer-group state, a stream's
    /// settings): they still make the command one that changed the keyspace.
    pub fn count_changes(&mut self, n: u64) {
        self.dirty += n;
        self.call_changes += n;
    }

    /// Run one command: the handler, then what it changed ([`Outcome::changes`]).
    pub fn call(&mut self, handler: crate::command::EngineHandler, ctx: &mut CallCtx, args: &[Bytes]) -> Outcome {
        self.call_changes = 0;
        self.events.clear();
        let reply = handler(self, ctx, args);
        Outcome { reply, changes: std::mem::take(&mut self.call_changes) }
    }

    /// Changes since start: the server's `dirty` counter (INFO persistence derives
    /// `rdb_changes_since_last_save` from it).
    pub fn dirty(&self) -> u64 {
        self.dirty
    }

    /// The keyspace counters of INFO stats.
    pub fn stats(&self) -> KeyspaceStats {
        KeyspaceStats {
            expired_keys: self.expired_keys,
            expired_keys_active: self.expired_keys_active,
            hits: self.keyspace_hits,
            misses: self.keyspace_misses,
            expired_subkeys: self.expired_subkeys,
            expired_subkeys_active: self.expired_subkeys_active,
            evicted_keys: self.evicted_keys,
        }
    }

    /// CONFIG RESETSTAT: the keyspace counters back to 0 (`dirty` is not a statistic).
    pub fn reset_stats(&mut self) {
        self.expired_keys = 0;
        self.expired_keys_active = 0;
        self.expired_subkeys = 0;
        self.expired_subkeys_active = 0;
        self.evicted_keys = 0;
        self.keyspace_hits = 0;
        self.keyspace_misses = 0;
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Change settings at run time (CONFIG SET). `databases` is fixed at start-up and is kept.
    pub fn reconfigure(&mut self, change: impl FnOnce(&mut EngineConfig)) {
        let databases = self.config.databases;
        change(&mut self.config);
        self.config.databases = databases;
    }

    /// Every database, in index order.
    pub fn dbs(&self) -> &[Db] {
        &self.dbs
    }

    /// Take every key out of every database, in index order, leaving them empty: a snapshot
    /// of a private engine (a compaction's) moves its data instead of copying it. Nothing is
    /// touched or signalled: no client watches a private engine.
    pub fn drain_dbs(&mut self) -> Vec<Vec<(Bytes, Entry)>> {
        self.dbs.iter_mut().map(Db::drain).collect()
    }

    /// A replica or not: a replica never expires keys itself (lazily or actively), since its
    /// primary's deletions arrive in the stream it applies.
    pub fn set_replica(&mut self, replica: bool) {
        self.replica = replica;
        if !replica {
            self.replica_written_expiring.clear();
            // A promoted replica enforces MAXAGE from the state it applied.
            self.rearm_all_max_ages();
        }
    }

    /// Loading (a snapshot or the log) or not: while loading, keys never expire and no
    /// expiry is recorded.
    pub fn set_loading(&mut self, loading: bool) {
        self.loading = loading;
        if !loading {
            // Replayed appends did not arm MAXAGE's index: rebuild it from the loaded state.
            self.rearm_all_max_ages();
        }
    }

    /// Take the keys expiry removed since the last call, in order (each is logged as `DEL`).
    pub fn take_expired(&mut self) -> Vec<(usize, Bytes)> {
        std::mem::take(&mut self.expired_log)
    }

    /// Take the hash fields expiry removed since the last call, in order, by key (each is
    /// logged as `HDEL key field...`, after the keys of [`Engine::take_expired`]).
    pub fn take_expired_fields(&mut self) -> Vec<(usize, Bytes, Vec<Bytes>)> {
        std::mem::take(&mut self.expired_fields_log)
    }

    /// Whether expiry removed keys or hash fields since the last [`Engine::take_expired`] /
    /// [`Engine::take_expired_fields`].
    pub fn has_expired(&self) -> bool {
        !self.expired_log.is_empty() || !self.expired_fields_log.is_empty()
    }

    /// A client blocks on `key` in `db`: writes that ready it are signalled from now on.
    pub fn block_on(&mut self, db: usize, key: Bytes) {
        *self.blocking_keys.entry((db, key)).or_default() += 1;
    }

    /// A client blocked on `key` in `db` stopped waiting (served, timed out, gone).
    pub fn unblock_from(&mut self, db: usize, key: Bytes) {
        let k = (db, key);
        if let Some(n) = self.blocking_keys.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                self.blocking_keys.remove(&k);
            }
        }
    }

    /// WATCH `key` in `db` for `client` (whether it has already expired at `now_ms` is
    /// remembered: an expiry after WATCH breaks the transaction, one before does not).
    pub fn watch_key(&mut self, client: u64, db: usize, key: Bytes, now_ms: i64) {
        let expired = self.db(db).get_raw(&key).is_some_and(|e| e.is_expired(now_ms));
        self.watch.watch(client, db, key, expired);
    }

    /// Forget every WATCH of `client` (EXEC, DISCARD, UNWATCH, RESET, disconnect).
    pub fn unwatch_all(&mut self, client: u64) {
        self.watch.unwatch_all(client);
    }

    /// Whether a key `client` watches changed, or expired since WATCH, by `now_ms`: EXEC
    /// then runs nothing.
    pub fn watch_broken(&self, client: u64, now_ms: i64) -> bool {
        self.watch.is_dirty(client)
            || self.watch.keys_of(client).iter().any(|(db, key, expired_then)| {
                !expired_then && self.db(*db).get_raw(key).is_some_and(|e| e.is_expired(now_ms))
            })
    }

    /// Client-side caching is on (some client tracks, or keys are still tracked): the keys
    /// written and the flushes are recorded for [`Engine::take_tracking`] from now on.
    pub fn set_tracking(&mut self, on: bool) {
        self.watch.set_tracking(on);
    }

    /// Take what client-side caching must hear of since the last call (appended to `into`).
    pub fn take_tracking(&mut self, into: &mut Vec<Touch>) {
        self.watch.take_tracking(into);
    }

    /// Whether [`Engine::take_tracking`] has anything.
    pub fn has_tracking(&self) -> bool {
        self.watch.has_tracking()
    }

    /// Keys `client` watches (CLIENT LIST `watch=`).
    pub fn watched_by(&self, client: u64) -> usize {
        self.watch.keys_of(client).len()
    }

    /// Clients watching at least one key (INFO `watching_clients`).
    pub fn watching_clients(&self) -> usize {
        self.watch.watching_clients()
    }

    /// Keys watched by at least one client (INFO `total_watched_keys`).
    pub fn watched_key_count(&self) -> usize {
        self.watch.watched_key_count()
    }

    /// Record that `key` may now serve a blocked client (a list push, a stream add, a deleted
    /// stream that must wake group readers). Cheap when nobody is blocked on the key.
    pub fn signal_ready(&mut self, db: usize, key: &[u8]) {
        if self.blocking_keys.is_empty() {
            return;
        }
        let probe = (db, Bytes::copy_from_slice(key));
        if self.blocking_keys.contains_key(&probe) && self.ready_set.insert(probe.clone()) {
            self.ready_keys.push(probe);
        }
    }

    /// Take the keys signalled ready since the last call, in signal order.
    pub fn take_ready_keys(&mut self) -> Vec<(usize, Bytes)> {
        self.ready_set.clear();
        std::mem::take(&mut self.ready_keys)
    }

    /// Remove every key of one database (FLUSHDB), invalidating WATCHes on keys that existed;
    /// `lazy`: its keys are freed in the background (`lazyfree.rs`), `waited`: the caller
    /// waits for that.
    pub fn flush_db(&mut self, db: usize, lazy: bool, waited: bool) {
        self.empty_db(db, lazy, waited);
        self.watch.tracking_flush();
    }

    /// [`Engine::flush_db`] but for client-side caching, which hears of a flush once.
    fn empty_db(&mut self, db: usize, lazy: bool, waited: bool) {
        let d = std::mem::take(self.db_mut(db));
        self.watch.hold_tracking(true);
        for key in d.keys.keys() {
            self.watch.touch_gone(db, key);
        }
        self.watch.hold_tracking(false);
        // Blocked XREADGROUP clients on a flushed stream re-run and fail with NOGROUP.
        let blocked: Vec<Bytes> = self
            .blocking_keys
            .keys()
            .filter(|(d2, k)| *d2 == db && matches!(d.keys.get(k), Some(e) if matches!(e.value, Value::Stream(_))))
            .map(|(_, k)| k.clone())
            .collect();
        for k in blocked {
            self.signal_ready(db, &k);
        }
        self.count_changes(d.keys.len() as u64);
        self.dispose_db(d, lazy, waited);
    }

    /// Remove every key of every database (FLUSHALL); `lazy` and `waited` as
    /// [`Engine::flush_db`].
    pub fn flush_all(&mut self, lazy: bool, waited: bool) {
        for db in 0..self.dbs.len() {
            self.empty_db(db, lazy, waited);
        }
        self.watch.tracking_flush();
    }

    /// Replace every database with `other`'s (a replica's full sync, loaded into a private
    /// engine while this one went on serving): as FLUSHALL followed by the new keys, WATCHes
    /// on keys of either invalidated and readers blocked on a key the new data has signalled.
    /// O(keys) only for what is watched or blocked on.
    pub fn replace_all(&mut self, other: Engine) {
        self.flush_all(false, false);
        self.replica_written_expiring.clear();
        // A full sync's snapshot brings its libraries (none: no libraries), as in Redis. Set
        // through `replace_with`, so the version moves on from this engine's.
        let codes: Vec<Bytes> = other.libraries.iter().map(|l| l.code.clone()).collect();
        let _ = self.libraries.replace_with(codes);
        // Client-side caching heard of the flush: every key is invalid already.
        self.watch.hold_tracking(true);
        for (i, d) in other.dbs.into_iter().enumerate().take(self.dbs.len()) {
            for key in d.keys.keys() {
                self.watch.touch(i, key);
            }
            let ready: Vec<Bytes> = self
                .blocking_keys
                .keys()
                .filter(|(db, k)| *db == i && d.keys.get(k).is_some())
                .map(|(_, k)| k.clone())
                .collect();
            self.count_changes(d.keys.len() as u64);
            *self.db_mut(i) = d;
            for k in ready {
                self.signal_ready(i, &k);
            }
        }
        self.watch.hold_tracking(false);
        self.rearm_all_policies();
        self.rearm_all_max_ages();
    }

    /// Swap two databases (SWAPDB), invalidating WATCHes on keys of both.
    pub fn swap_db(&mut self, a: usize, b: usize, now_ms: i64) {
        // Only watched keys can be touched: O(watched keys), not O(keys).
        for (db, other) in [(a, b), (b, a)] {
            for k in self.watch.keys_in(db) {
                let existed = self.db(db).keys.get(&k).is_some();
                let now = self.db(other).keys.get(&k).map(|e| e.is_expired(now_ms));
                self.watch.touch_swapped(db, &k, existed, now);
            }
        }
        self.dbs.swap(a, b);
        self.rearm_all_policies();
        self.rearm_all_max_ages();
        // Clients blocked on keys of either database may now be served.
        let blocked: Vec<(usize, Bytes)> =
            self.blocking_keys.keys().filter(|(d, _)| *d == a || *d == b).cloned().collect();
        for (d, k) in blocked {
            self.signal_ready(d, &k);
        }
        self.count_changes(1);
    }

    /// Number of databases (`databases`).
    pub fn db_count(&self) -> usize {
        self.dbs.len()
    }

    /// Total keys over all databases.
    pub fn total_keys(&self) -> usize {
        self.dbs.iter().map(Db::len).sum()
    }
}

/// One step of splitmix64.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
