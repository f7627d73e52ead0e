//! What rill keeps about a value besides the value itself: the representation Redis would use
//! for it (OBJECT ENCODING), and when it was last accessed (OBJECT IDLETIME, OBJECT FREQ).
//!
//! rill stores every value in one Rust representation (a `HashMap`, a `VecDeque`, ...), so the
//! encoding Redis reports is not a property of rill's data: it depends on the value's history
//! (Redis converts a hash to a hashtable when it outgrows its limits and never back). Each key
//! therefore carries an [`ObjectMeta`] that the write handlers keep up to date by the same
//! rules Redis applies (see `encoding.rs` and `quicklist.rs`), and that reads never touch.
//!
//! ```text
//!  ObjectMeta (16 bytes on 64-bit targets)
//!  +------------------------------+----------+-------------+-------------+------+
//!  | list: Option<Box<ListLayout>>| access_s | lfu_minutes | lfu_counter | form |
//!  |            8 bytes           |  u32     |    u16      |     u8      |  u8  |
//!  +------------------------------+----------+-------------+-------------+------+
//! ```
//!
//! * `form` — the encoding state of a string, hash or set ([`Form`]); `Natural` means "what
//!   Redis would build from this content", which is what a value loaded from a snapshot, a
//!   RESTORE payload or a plain SET has.
//! * `list` — a list's layout: its listpack size, or the node shapes of the quicklist Redis
//!   would hold (`None` until a list command first needs it).
//! * `access_s` — Unix seconds of the last access (Redis' LRU clock has the same one-second
//!   resolution); 0: not accessed since the snapshot it was loaded from.
//! * `lfu_counter`, `lfu_minutes` — Redis' logarithmic access counter and the minute it was
//!   last decremented, kept only while `maxmemory-policy` is an LFU policy.
//!
//! Two entries with equal values and expiry are equal whatever their metadata: it describes
//! how Redis would store and age the value, not the value.

use super::quicklist::ListLayout;

/// The counter a new key starts with under an LFU policy (Redis' `LFU_INIT_VAL`).
pub const LFU_INIT_VAL: u8 = 5;

/// The encoding state of a string, hash or set (lists use [`ObjectMeta`]'s layout).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Form {
    /// Whatever Redis would build from the current content (strings: `int`, `embstr` or `raw`
    /// by Redis' rules; collections: the compact encoding if the content fits its limits).
    #[default]
    Natural,
    /// A string Redis built without trying the integer form (INCRBYFLOAT's result): `embstr`
    /// if it fits, else `raw`, never `int`.
    StrPlain,
    /// A string Redis holds as `raw` for good: APPEND or SETRANGE wrote to it, or it did not fit
    /// an `embstr` when it gained an expiry or a longer key name.
    StrRaw,
    /// A hash or set in a listpack.
    Listpack,
    /// A hash in a listpack whose fields carry expiry times (`listpackex`): a listpack hash
    /// becomes one when a field first gets a time, and stays one.
    ListpackEx,
    /// A hash or set in a hash table (never converted back).
    Hashtable,
    /// A set of integers in an intset.
    Intset,
    /// A sorted set in a skiplist (converted back only when rebuilt whole).
    Skiplist,
}

/// The settings the encoding rules and the access clock read. Defaults are Redis'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectConfig {
    /// `list-max-listpack-size`: negative, a node size class (-2 = 8 KiB); positive, entries.
    pub list_max_listpack_size: i64,
    /// `hash-max-listpack-entries`.
    pub hash_max_listpack_entries: u64,
    /// `hash-max-listpack-value` (bytes).
    pub hash_max_listpack_value: u64,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: u64,
    /// `set-max-listpack-entries`.
    pub set_max_listpack_entries: u64,
    /// `set-max-listpack-value` (bytes).
    pub set_max_listpack_value: u64,
    /// `zset-max-listpack-entries`.
    pub zset_max_listpack_entries: u64,
    /// `zset-max-listpack-value` (bytes).
    pub zset_max_listpack_value: u64,
    /// `maxmemory-policy` is `allkeys-lfu` or `volatile-lfu`: accesses count in the LFU counter
    /// and OBJECT IDLETIME is refused, as in Redis.
    pub lfu: bool,
    /// `lfu-log-factor`: how much harder each increment of the LFU counter gets.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time`: minutes per decrement of an idle key's LFU counter (0: never).
    pub lfu_decay_time: u32,
    /// `hll-sparse-max-bytes`: the longest a sparse HyperLogLog grows before it turns dense.
    pub hll_sparse_max_bytes: usize,
}

impl Default for ObjectConfig {
    fn default() -> Self {
        ObjectConfig {
            list_max_listpack_size: -2,
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            lfu: false,
            lfu_log_factor: LFU_LOG_FACTOR,
            lfu_decay_time: LFU_DECAY_MINUTES,
            hll_sparse_max_bytes: 3000,
        }
    }
}

impl ObjectConfig {
    /// The configuration directives this reads (the server pushes them in with [`Self::set`]).
    pub const DIRECTIVES: &'static [&'static str] = &[
        "list-max-listpack-size",
        "hash-max-listpack-entries",
        "hash-max-listpack-value",
        "set-max-intset-entries",
        "set-max-listpack-entries",
        "set-max-listpack-value",
        "zset-max-listpack-entries",
        "zset-max-listpack-value",
        "maxmemory-policy",
        "lfu-log-factor",
        "lfu-decay-time",
        "hll-sparse-max-bytes",
    ];

    /// Apply one directive: `maxmemory-policy` reads its `text`, the limits their `number`
    /// (already parsed, units included). Returns false, changing nothing, for a name it does
    /// not know.
    pub fn set(&mut self, name: &str, text: &str, number: i64) -> bool {
        let count = u64::try_from(number).unwrap_or(0);
        match name {
            "maxmemory-policy" => self.lfu = text.ends_with("-lfu"),
            "list-max-listpack-size" => self.list_max_listpack_size = number,
            "hash-max-listpack-entries" => self.hash_max_listpack_entries = count,
            "hash-max-listpack-value" => self.hash_max_listpack_value = count,
            "set-max-intset-entries" => self.set_max_intset_entries = count,
            "set-max-listpack-entries" => self.set_max_listpack_entries = count,
            "set-max-listpack-value" => self.set_max_listpack_value = count,
            "zset-max-listpack-entries" => self.zset_max_listpack_entries = count,
            "zset-max-listpack-value" => self.zset_max_listpack_value = count,
            "lfu-log-factor" => self.lfu_log_factor = u32::try_from(count).unwrap_or(u32::MAX),
            "lfu-decay-time" => self.lfu_decay_time = u32::try_from(count).unwrap_or(u32::MAX),
            "hll-sparse-max-bytes" => self.hll_sparse_max_bytes = usize::try_from(count).unwrap_or(usize::MAX),
            _ => return false,
        }
        true
    }
}

/// Per-key metadata; see the module doc.
#[derive(Debug, Clone, Default)]
pub struct ObjectMeta {
    pub(crate) list: Option<Box<ListLayout>>,
    access_s: u32,
    lfu_minutes: u16,
    lfu_counter: u8,
    pub(crate) form: Form,
}

impl PartialEq for ObjectMeta {
    /// Always equal: see the module doc.
    fn eq(&self, _: &ObjectMeta) -> bool {
        true
    }
}

/// Unix seconds as the 32-bit clock `access_s` holds (saturating: the clock is unsigned and
/// ends in 2106).
fn seconds(now_ms: i64) -> u32 {
    u32::try_from(now_ms.max(0) / 1000).unwrap_or(u32::MAX)
}

/// Redis' LFU clock: minutes, modulo 2^16.
fn minutes(now_ms: i64) -> u16 {
    ((now_ms.max(0) / 60_000) & 0xFFFF) as u16
}

/// What an access needs besides the entry: the time and, under an LFU policy, a random number
/// for the logarithmic increment and the counter's settings. Built before the entry is
/// borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Access {
    now_ms: i64,
    /// `Some(r)` under an LFU policy, `r` uniform in `0..=u32::MAX`.
    lfu_random: Option<u32>,
    /// `lfu-log-factor`.
    log_factor: u32,
    /// `lfu-decay-time`.
    decay_time: u32,
}

impl Access {
    /// An access at `now_ms` with the default counter settings; `lfu_random` is `Some` only
    /// under an LFU policy.
    pub fn new(now_ms: i64, lfu_random: Option<u32>) -> Access {
        Access { now_ms, lfu_random, log_factor: LFU_LOG_FACTOR, decay_time: LFU_DECAY_MINUTES }
    }

    /// An access under `config`'s `lfu-log-factor` and `lfu-decay-time`.
    pub fn with(now_ms: i64, lfu_random: Option<u32>, config: &ObjectConfig) -> Access {
        Access { now_ms, lfu_random, log_factor: config.lfu_log_factor, decay_time: config.lfu_decay_time }
    }
}

/// Redis' `lfu-log-factor` and `lfu-decay-time` defaults.
const LFU_LOG_FACTOR: u32 = 10;
const LFU_DECAY_MINUTES: u32 = 1;

impl ObjectMeta {
    /// Metadata for a value created at `now_ms` (the LFU counter starts at [`LFU_INIT_VAL`]).
    pub fn created(now_ms: i64) -> ObjectMeta {
        ObjectMeta {
            list: None,
            access_s: seconds(now_ms),
            lfu_minutes: minutes(now_ms),
            lfu_counter: LFU_INIT_VAL,
            form: Form::Natural,
        }
    }

    /// Record an access: the LRU clock always, the LFU counter under an LFU policy (decayed by
    /// the minutes since its last decrement, then incremented with probability
    /// 1 / ((counter - 5) * 10 + 1), as Redis does).
    pub fn touch(&mut self, access: Access) {
        self.access_s = seconds(access.now_ms);
        if let Some(r) = access.lfu_random {
            let counter = self.lfu_decayed(access.now_ms, access.decay_time);
            self.lfu_counter = log_increment(counter, r, access.log_factor);
            self.lfu_minutes = minutes(access.now_ms);
        }
    }

    /// Seconds since the last access (OBJECT IDLETIME); a key not accessed since it was loaded
    /// from a snapshot counts from `loaded_s`.
    pub fn idle_seconds(&self, now_ms: i64, loaded_s: u32) -> u64 {
        let since = if self.access_s == 0 { loaded_s } else { self.access_s };
        u64::from(seconds(now_ms).saturating_sub(since))
    }

    /// The LFU counter as OBJECT FREQ reports it: decayed to `now_ms` by one per `decay_time`
    /// minutes (`lfu-decay-time`; 0: no decay) but not stored. A key not accessed since it was
    /// loaded from a snapshot has its initial counter.
    pub fn lfu_decayed(&self, now_ms: i64, decay_time: u32) -> u8 {
        if self.access_s == 0 {
            return self.lfu_counter;
        }
        let now = minutes(now_ms);
        // The minute clock wraps at 2^16, as Redis'.
        let elapsed = if now >= self.lfu_minutes { now - self.lfu_minutes } else { u16::MAX - self.lfu_minutes + now };
        let periods = u32::from(elapsed).checked_div(decay_time).unwrap_or(0);
        self.lfu_counter.saturating_sub(u8::try_from(periods).unwrap_or(u8::MAX))
    }

    /// RESTORE ... IDLETIME: the key was last accessed `idle_s` seconds before `now_ms`.
    pub fn set_idle(&mut self, now_ms: i64, idle_s: i64) {
        let at = seconds(now_ms).saturating_sub(u32::try_from(idle_s.max(0)).unwrap_or(u32::MAX));
        // 0 means "not accessed since loaded"; an access at the epoch is one second later.
        self.access_s = at.max(1);
    }

    /// RESTORE ... FREQ: set the LFU counter (0..=255) as of `now_ms`.
    pub fn set_freq(&mut self, now_ms: i64, freq: u8) {
        self.lfu_counter = freq;
        self.lfu_minutes = minutes(now_ms);
    }

    /// Forget the value's representation (a new value under the same key).
    pub fn reset_form(&mut self) {
        self.form = Form::Natural;
        self.list = None;
    }
}

/// Redis' logarithmic increment: `r` is a uniform random number in `0..=u32::MAX`, `factor`
/// the `lfu-log-factor`.
fn log_increment(counter: u8, r: u32, factor: u32) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = f64::from(counter.saturating_sub(LFU_INIT_VAL));
    let p = 1.0 / (base * f64::from(factor) + 1.0);
    // r / 2^32 is in [0, 1): at the initial value (p = 1) every access counts.
    if f64::from(r) / (f64::from(u32::MAX) + 1.0) < p {
        counter + 1
    } else {
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<ObjectMeta>(), 16);
    }

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays_per_minute() {
        let t0 = 1_700_000_000_000;
        let mut m = ObjectMeta::created(t0);
        assert_eq!(m.lfu_decayed(t0, 1), LFU_INIT_VAL);
        // At the initial value every access counts (p = 1), even with the largest draw.
        m.touch(Access::new(t0, Some(u32::MAX)));
        assert_eq!(m.lfu_decayed(t0, 1), 6);
        // At 6 the probability is 1/11: a draw above it leaves the counter, one below adds.
        m.touch(Access::new(t0, Some(u32::MAX / 10)));
        assert_eq!(m.lfu_decayed(t0, 1), 6);
        m.touch(Access::new(t0, Some(u32::MAX / 12)));
        assert_eq!(m.lfu_decayed(t0, 1), 7);
        // One minute later the counter has lost one; OBJECT FREQ does not store the decay.
        assert_eq!(m.lfu_decayed(t0 + 60_000, 1), 6);
        assert_eq!(m.lfu_decayed(t0 + 10 * 60_000, 1), 0);
        assert_eq!(m.lfu_decayed(t0, 1), 7);
        assert_eq!(log_increment(255, 0, 10), 255);
        // lfu-decay-time 0: no decay; 2: one per two minutes.
        assert_eq!(m.lfu_decayed(t0 + 10 * 60_000, 0), 7);
        assert_eq!(m.lfu_decayed(t0 + 4 * 60_000, 2), 5);
        // lfu-log-factor 0: every access counts.
        assert_eq!(log_increment(100, u32::MAX, 0), 101);
    }

    #[test]
    fn idle_time_counts_whole_seconds() {
        let t0 = 1_700_000_000_500;
        let mut m = ObjectMeta::created(t0);
        assert_eq!(m.idle_seconds(t0 + 499, 0), 0);
        assert_eq!(m.idle_seconds(t0 + 500, 0), 1);
        m.touch(Access::new(t0 + 3_000, None));
        assert_eq!(m.idle_seconds(t0 + 3_000, 0), 0);
        m.set_idle(t0, 1000);
        assert_eq!(m.idle_seconds(t0, 0), 1000);
        let loaded = ObjectMeta::created(0);
        assert_eq!(loaded.idle_seconds(t0, seconds(t0) - 7), 7);
        assert_eq!(loaded.lfu_decayed(t0, 1), LFU_INIT_VAL);
    }

    #[test]
    fn config_directives() {
        let mut c = ObjectConfig::default();
        assert!(c.set("hash-max-listpack-entries", "5", 5));
        assert!(c.set("list-max-listpack-size", "-3", -3));
        assert!(c.set("maxmemory-policy", "allkeys-lfu", 0));
        assert!(c.set("zset-max-listpack-entries", "1", 1));
        assert!(!c.set("stream-node-max-entries", "1", 1));
        assert_eq!((c.hash_max_listpack_entries, c.list_max_listpack_size, c.lfu), (5, -3, true));
        assert_eq!(c.zset_max_listpack_entries, 1);
        assert!(c.set("maxmemory-policy", "volatile-lru", 0));
        assert!(!c.lfu);
    }
}
