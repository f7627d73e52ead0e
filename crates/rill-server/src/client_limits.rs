//! Per-client memory limits: `client-output-buffer-limit` (per client class, hard and soft),
//! `client-query-buffer-limit`, the caps for clients that still have to AUTH, and the byte
//! budget a single reply may take.
//!
//! The one place that knows the classes and their rules: a client's class follows its type
//! (`ClientInfo::class`: subscribed clients are `pubsub`), for its replies and for what other
//! tasks push to it (`src/push.rs`) alike.
//!
//! Redis behaviours matched on purpose (networking.c, config.c):
//! - the limits apply to the output not yet written, not counting the first 16 KiB (Redis'
//!   per-client static reply buffer, which `closeClientOnOutputBufferLimitReached` ignores);
//! - hard: the client is closed as soon as its pending output reaches the limit; soft: when it
//!   has stayed at or above the limit for more than the given seconds;
//! - a client that still has to AUTH is closed when that output passes 1024 bytes, and when
//!   its query buffer (plus a MULTI queue) passes 1 MiB;
//! - the query buffer limit counts the queued MULTI commands' arguments too;
//! - `CONFIG SET client-output-buffer-limit` splits its value on single spaces, sets only the
//!   classes it names, all or nothing, and `slave` and `replica` name the same class.
//!
//! - a client whose output is not being read keeps having its requests run, its replies held
//!   until the socket takes them or a limit closes it (its class's output limit, or
//!   `maxmemory-clients` for a client that may be evicted); with neither, the output grows
//!   without bound, as in Redis. (rill once stopped running such a client's requests instead,
//!   which hung every client that writes a whole pipeline before reading a reply.)
//!
//! Pending output counts the large payloads the output references instead of copying them
//! (`rill_resp::OutputBuffer`: a `GET` of a 512 MB value holds the stored value, not a copy of
//! it) as if they were copied: a reference pins its value until written (after a DEL or an
//! overwrite, the client alone keeps it alive), so the limits and
//! CLIENT LIST (`omem`, `tot-mem`) see what Redis would see.

use std::sync::atomic::{AtomicU64, Ordering};

/// Pending output Redis does not count against the limits: its per-client static buffer.
pub const UNCOUNTED_OUTPUT_BYTES: u64 = 16 * 1024;
/// What one block of Redis' reply list counts against the limits: a 16 KiB chunk and its
/// 16-byte header are one 20 KiB allocation (jemalloc's size class), whose usable bytes less
/// the header are the block's size, and the limits count blocks by their size, not by what
/// they hold.
pub const REPLY_BLOCK_BYTES: u64 = 20 * 1024 - 16;

/// The output Redis' limits see for `pending` bytes not yet written, `referenced` of them
/// payloads held by reference: copied bytes past its 16 KiB static buffer fill reply blocks,
/// each counted whole ([`REPLY_BLOCK_BYTES`]); referenced payloads count their length (the
/// newest Redis counts its zero-copy references so). A `KEYS *` of 1000 100-byte names is
/// over a 100 000-byte limit so (5 blocks), as in Redis, though its reply is 111 KB.
pub fn limit_bytes(pending: u64, referenced: u64) -> u64 {
    let listed = pending.saturating_sub(referenced).saturating_sub(UNCOUNTED_OUTPUT_BYTES);
    listed.div_ceil(REPLY_BLOCK_BYTES) * REPLY_BLOCK_BYTES + referenced
}
/// Output limit of a client that still has to AUTH (Redis: `used_mem > 1024 && authRequired`).
pub const UNAUTHENTICATED_OUTPUT_BYTES: u64 = 1024;
/// Query buffer (plus MULTI queue) limit of a client that still has to AUTH.
pub const UNAUTHENTICATED_QUERY_BYTES: u64 = 1024 * 1024;
/// The default of `client-output-buffer-limit`, as Redis writes it for CONFIG GET.
pub const DEFAULT_OUTPUT_LIMITS: &str = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

/// A client class with its own output limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientClass {
    /// Every client that is not one of the others (MONITOR included, as in Redis).
    Normal,
    /// A replica (`slave` in CONFIG GET, `replica` or `slave` in CONFIG SET).
    Replica,
    /// A client subscribed to channels.
    Pubsub,
}

impl ClientClass {
    /// The classes in CONFIG GET order.
    const ALL: [ClientClass; 3] = [ClientClass::Normal, ClientClass::Replica, ClientClass::Pubsub];

    fn index(self) -> usize {
        match self {
            ClientClass::Normal => 0,
            ClientClass::Replica => 1,
            ClientClass::Pubsub => 2,
        }
    }

    /// The class a CONFIG SET value names (any case); `master` is not settable, as in Redis.
    fn by_name(name: &str) -> Option<ClientClass> {
        match name.to_ascii_lowercase().as_str() {
            "normal" => Some(ClientClass::Normal),
            "slave" | "replica" => Some(ClientClass::Replica),
            "pubsub" => Some(ClientClass::Pubsub),
            _ => None,
        }
    }

    fn config_name(self) -> &'static str {
        match self {
            ClientClass::Normal => "normal",
            ClientClass::Replica => "slave",
            ClientClass::Pubsub => "pubsub",
        }
    }
}

/// One class's limits. Zero bytes: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassLimit {
    /// Close at once at this much pending output.
    pub hard_bytes: u64,
    /// Close when pending output stays at or above this ...
    pub soft_bytes: u64,
    /// ... for more than this many seconds.
    pub soft_seconds: i64,
}

/// The limits of every class, parsed from the canonical `client-output-buffer-limit` text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits([ClassLimit; 3]);

impl OutputLimits {
    /// Parse the canonical text (as [`merge_config`] writes it). Unparsable parts keep zero.
    pub fn parse(canonical: &str) -> OutputLimits {
        let mut limits = [ClassLimit::default(); 3];
        let words: Vec<&str> = canonical.split(' ').collect();
        for group in words.chunks_exact(4) {
            let [class, hard, soft, secs] = group else {
                continue;
            };
            if let Some(class) = ClientClass::by_name(class) {
                if let Some(slot) = limits.get_mut(class.index()) {
                    *slot = ClassLimit {
                        hard_bytes: hard.parse().unwrap_or(0),
                        soft_bytes: soft.parse().unwrap_or(0),
                        soft_seconds: secs.parse().unwrap_or(0),
                    };
                }
            }
        }
        OutputLimits(limits)
    }

    /// The limits of `class`.
    pub fn of(&self, class: ClientClass) -> ClassLimit {
        self.0.get(class.index()).copied().unwrap_or_default()
    }
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits::parse(DEFAULT_OUTPUT_LIMITS)
    }
}

/// Redis' memory value reader for these limits (`memtoull`): digits, then nothing, `b`, `k`,
/// `kb`, `m`, `mb`, `g` or `gb` in any case; a leading `-` or anything else is an error.
/// Overflow wraps, as in Redis.
fn parse_memory_unsigned(s: &str) -> Option<u64> {
    let digits_end = s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(digits_end);
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits.len() >= 128 {
        return None;
    }
    // strtoull: no digits reads 0, too many saturates.
    let value = if digits.is_empty() { 0 } else { digits.parse::<u64>().unwrap_or(u64::MAX) };
    Some(value.wrapping_mul(mul))
}

/// Apply a `client-output-buffer-limit` value (`<class> <hard> <soft> <seconds>` groups) to
/// the current canonical text; the result is the new canonical text. Errors are Redis' words.
pub fn merge_config(current: &str, value: &str) -> Result<String, String> {
    let args: Vec<&str> = if value.is_empty() { Vec::new() } else { value.split(' ').collect() };
    if !args.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut limits = OutputLimits::parse(current);
    let mut staged = Vec::new();
    for group in args.chunks_exact(4) {
        let [class, hard, soft, secs] = group else {
            continue;
        };
        let Some(class) = ClientClass::by_name(class) else {
            return Err("Invalid client class specified in buffer limit configuration.".into());
        };
        // strtoll into an int, as Redis reads the seconds: truncated to 32 bits, then checked.
        let seconds = if secs.is_empty() { Some(0) } else { secs.parse::<i64>().ok().map(|v| i64::from(v as i32)) };
        match (parse_memory_unsigned(hard), parse_memory_unsigned(soft), seconds) {
            (Some(hard_bytes), Some(soft_bytes), Some(soft_seconds)) if soft_seconds >= 0 => {
                staged.push((class, ClassLimit { hard_bytes, soft_bytes, soft_seconds }));
            }
            _ => return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into()),
        }
    }
    for (class, limit) in staged {
        if let Some(slot) = limits.0.get_mut(class.index()) {
            *slot = limit;
        }
    }
    let groups: Vec<String> = ClientClass::ALL
        .iter()
        .map(|c| {
            let l = limits.of(*c);
            format!("{} {} {} {}", c.config_name(), l.hard_bytes, l.soft_bytes, l.soft_seconds)
        })
        .collect();
    Ok(groups.join(" "))
}

/// The smallest safety bound, whatever the machine: no ordinary reply comes near it.
const MIN_SAFETY_BYTES: u64 = 64 << 20;

/// The most bytes one reply may take before the client is closed instead of the reply being
/// built: the class's hard limit when set, otherwise a safety bound of an eighth of the
/// machine's memory (so that a few such clients at once cannot exhaust it; Redis has no such
/// bound and lets an `SRANDMEMBER key -N` grow until memory runs out). Not `maxmemory`: that
/// caps what the keyspace may grow to, and a small one must not turn every reply into a
/// disconnection (reads keep working over maxmemory, as in Redis).
pub fn reply_budget_bytes(limit: &ClassLimit, authenticated: bool) -> u64 {
    if !authenticated {
        return UNCOUNTED_OUTPUT_BYTES + UNAUTHENTICATED_OUTPUT_BYTES;
    }
    let safety = (physical_memory_bytes() / 8).max(MIN_SAFETY_BYTES);
    match limit.hard_bytes {
        0 => safety,
        hard => hard.saturating_add(UNCOUNTED_OUTPUT_BYTES).min(safety),
    }
}

/// Total memory of the machine (`MemTotal`), read once; 8 GiB if it cannot be read.
fn physical_memory_bytes() -> u64 {
    static TOTAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(8 << 30, |kb| kb * 1024)
    })
}

/// Per-connection state of the soft limit: since when (Unix seconds) the output has been at or
/// above it.
#[derive(Debug, Default)]
pub struct OutputGuard {
    soft_since_secs: Option<i64>,
}

impl OutputGuard {
    /// Whether a client with `pending` bytes of output not yet written, `referenced` of them
    /// payloads held by reference, has reached its limits (updating the soft-limit clock as
    /// Redis' `checkClientOutputBufferLimits` does), counted as Redis counts them
    /// ([`limit_bytes`]).
    pub fn over(
        &mut self,
        pending: u64,
        referenced: u64,
        limit: &ClassLimit,
        authenticated: bool,
        now_secs: i64,
    ) -> bool {
        self.over_counted(limit_bytes(pending, referenced), limit, authenticated, now_secs)
    }

    /// [`OutputGuard::over`] for `used` bytes counted against the limits already (what
    /// CLIENT LIST shows as `omem`: [`ClientMemory::counted`]).
    pub fn over_counted(&mut self, used: u64, limit: &ClassLimit, authenticated: bool, now_secs: i64) -> bool {
        if used == 0 {
            self.soft_since_secs = None;
            return false;
        }
        if used > UNAUTHENTICATED_OUTPUT_BYTES && !authenticated {
            return true;
        }
        if limit.hard_bytes > 0 && used >= limit.hard_bytes {
            return true;
        }
        if limit.soft_bytes > 0 && used >= limit.soft_bytes {
            match self.soft_since_secs {
                None => self.soft_since_secs = Some(now_secs),
                Some(since) => return now_secs - since > limit.soft_seconds,
            }
        } else {
            self.soft_since_secs = None;
        }
        false
    }

    /// When (Unix seconds) the soft limit will have been exceeded long enough, if it is being
    /// exceeded now: a stuck client must be closed then even if nothing else happens.
    pub fn soft_deadline_secs(&self, limit: &ClassLimit) -> Option<i64> {
        self.soft_since_secs.map(|since| since + limit.soft_seconds + 1)
    }
}

/// DEBUG PAUSE-CRON: while set, idle query buffers are not shrunk (the part of Redis' cron
/// that rill's connections do themselves).
static CRON_PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether DEBUG PAUSE-CRON 1 is in effect.
pub fn cron_paused() -> bool {
    CRON_PAUSED.load(Ordering::Relaxed)
}

/// DEBUG PAUSE-CRON 0|1.
pub fn pause_cron(paused: bool) {
    CRON_PAUSED.store(paused, Ordering::Relaxed);
}

/// Off after DEBUG REPLYBUFFER RESIZING 0.
static REPLY_BUFFER_RESIZING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether a connection's reply buffer may change size on its own: given back when the
/// connection waits for input, dropped after a write when it grew past a few MiB (Redis
/// shrinks and grows its per-client reply buffer by its recent peak). Off, each keeps the size
/// it grew to, so a client's memory holds still for tests that compare clients' memory.
pub fn reply_buffer_resizing() -> bool {
    REPLY_BUFFER_RESIZING.load(Ordering::Relaxed)
}

/// DEBUG REPLYBUFFER RESIZING 0|1.
pub fn set_reply_buffer_resizing(on: bool) {
    REPLY_BUFFER_RESIZING.store(on, Ordering::Relaxed);
}

/// What CLIENT LIST reports of a connection's buffers, written by its task without the lock.
#[derive(Debug, Default)]
pub struct ClientMemory {
    /// Output bytes produced and not yet written to the socket, the payloads the output
    /// references included (each counts as if it were copied: it pins its value).
    pub out_pending: AtomicU64,
    /// Bytes of the same output already written.
    pub out_written: AtomicU64,
    /// Memory the output holds: its buffer's capacity and the referenced payloads' unwritten
    /// bytes.
    pub out_held: AtomicU64,
    /// Of `out_pending`, the bytes of payloads the output references (shared with the values
    /// they come from).
    pub out_shared: AtomicU64,
    /// Of `out_shared`, the payloads the output alone holds (their values were deleted or
    /// overwritten since), as of the last time the connection published its buffers.
    pub out_unshared: AtomicU64,
    /// The referenced payloads of the replies an EXEC running now has collected (they reach
    /// the output when it ends; Redis' are in the client's buffer as each command runs).
    pub exec_shared: AtomicU64,
    /// Unparsed input bytes.
    pub qbuf: AtomicU64,
    /// Free room in the input buffer (0 while the client holds no private buffer, as Redis
    /// reports a client that uses its shared one).
    pub qbuf_free: AtomicU64,
    /// Bytes of the arguments of the commands queued in MULTI.
    pub multi_mem: AtomicU64,
    /// What the server keeps for this client besides its buffers: its watched keys, its
    /// subscriptions (channels, patterns, shard channels) and its CLIENT TRACKING prefixes,
    /// at what an entry of each costs.
    /// Redis counts these in `tot-mem` and client eviction too.
    pub bookkeeping: AtomicU64,
}

/// What one watched key costs the server (its entry in the client's list and in the key's
/// list of watchers), the key's bytes aside.
pub const WATCHED_KEY_BYTES: u64 = 96;
/// What one subscription costs (its entry in the client's set and in the channel's set).
pub const SUBSCRIPTION_BYTES: u64 = 96;
/// What one BCAST prefix of CLIENT TRACKING costs (its entry in the client's set and in the
/// prefix table), the prefix's bytes aside.
pub const TRACKING_PREFIX_BYTES: u64 = 96;

impl ClientMemory {
    /// `obl`, `oll`, `omem`: what of the pending output Redis would hold in its static buffer,
    /// whether there is more (one list in rill), and the rest. Redis fills the static buffer
    /// with the first 16 KiB of a burst of output and sends it first, so once that much is
    /// written everything pending is `omem`.
    pub fn output_fields(&self) -> (u64, u64, u64) {
        let pending = self.out_pending.load(Ordering::Relaxed);
        let written = self.out_written.load(Ordering::Relaxed);
        let produced = pending.saturating_add(written);
        let obl = produced.min(UNCOUNTED_OUTPUT_BYTES).saturating_sub(written).min(pending);
        let rest = pending - obl;
        (obl, u64::from(rest > 0), rest)
    }

    /// The output counted against the client's limits, `queued` bytes of pushes included:
    /// CLIENT LIST's `omem`, what Redis counts (its reply list, not what its static buffer
    /// still holds). Once part of a burst is written, more of what is left counts than
    /// "all but the first 16 KiB".
    pub fn counted(&self, queued: u64) -> u64 {
        if self.out_pending.load(Ordering::Relaxed) == 0 {
            // The queued frames start a burst of their own: its first 16 KiB would be in
            // Redis' static buffer.
            return queued.saturating_sub(UNCOUNTED_OUTPUT_BYTES);
        }
        // Behind output still held, frames go to Redis' reply list whole.
        self.output_fields().2 + queued
    }

    /// `tot-mem`: the buffers this client holds.
    pub fn total(&self) -> u64 {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        load(&self.out_held)
            + load(&self.qbuf)
            + load(&self.qbuf_free)
            + load(&self.multi_mem)
            + load(&self.bookkeeping)
    }

    /// Store a value.
    pub fn set(field: &AtomicU64, value: usize) {
        field.store(value as u64, Ordering::Relaxed);
    }
}

/// Log a client closed for its output, in Redis' words; `scheduled`: closed while it was
/// producing output (Redis' asynchronous close), else by the timer (Redis' cron).
pub fn log_output_limit_close(client_line: &str, scheduled: bool) {
    if scheduled {
        tracing::warn!("Client {client_line} scheduled to be closed ASAP for overcoming of output buffer limits.");
    } else {
        tracing::warn!("Client {client_line} closed for overcoming of output buffer limits.");
    }
}

/// Log a client closed for its query buffer, in Redis' words, with the first 64 bytes of the
/// buffer quoted as Redis quotes them.
pub fn log_query_limit_close(client_line: &str, qbuf: &[u8]) {
    let head = qbuf.get(..qbuf.len().min(64)).unwrap_or_default();
    tracing::warn!(
        "Closing client that reached max query buffer length: {client_line} (qbuf initial bytes: {})",
        repr(head)
    );
}

/// Bytes quoted as Redis' `sdscatrepr` does.
fn repr(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            0x20..=0x7e => s.push(char::from(b)),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// A lower bound of the encoded size of `reply` (RESP2 and RESP3 differ by a few bytes per
/// element at most), stopping once it passes `cap`: a reply that cannot fit its budget is
/// refused before it is encoded.
pub fn reply_size_at_least(reply: &rill_resp::Reply, cap: u64) -> u64 {
    use rill_resp::Reply;
    fn walk(r: &Reply, total: &mut u64, cap: u64) {
        if *total > cap {
            return;
        }
        match r {
            Reply::Bulk(b) | Reply::Raw(b) | Reply::Simple(b) | Reply::Error(b) | Reply::BigNumber(b) => {
                *total += b.len() as u64 + 4;
            }
            Reply::Verbatim { text, .. } => *total += text.len() as u64 + 4,
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => {
                *total += 4;
                for x in v {
                    walk(x, total, cap);
                    if *total > cap {
                        return;
                    }
                }
            }
            Reply::Map(v) | Reply::Attribute(v, _) => {
                *total += 4;
                for (k, x) in v {
                    walk(k, total, cap);
                    walk(x, total, cap);
                    if *total > cap {
                        return;
                    }
                }
                if let Reply::Attribute(_, inner) = r {
                    walk(inner, total, cap);
                }
            }
            _ => *total += 3,
        }
    }
    let mut total = 0;
    walk(reply, &mut total, cap);
    total
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn config_values_like_redis() {
        let d = DEFAULT_OUTPUT_LIMITS;
        assert_eq!(
            merge_config(d, "normal 1mb 2k 3").unwrap(),
            "normal 1048576 2000 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        assert_eq!(
            merge_config(d, "replica 1 2 3 SLAVE 4 5 6").unwrap(),
            "normal 0 0 0 slave 4 5 6 pubsub 33554432 8388608 60"
        );
        assert_eq!(merge_config(d, "").unwrap(), d);
        assert_eq!(
            merge_config(d, "normal 1 2").unwrap_err(),
            "Wrong number of arguments in buffer limit configuration."
        );
        assert_eq!(
            merge_config(d, "master 1 2 3").unwrap_err(),
            "Invalid client class specified in buffer limit configuration."
        );
        for bad in ["normal -1 0 0", "normal 1x 0 0", "normal 0 0 -1", "normal 0 0 1.5"] {
            assert!(merge_config(d, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hard_and_soft_limits() {
        // Counted in reply blocks: one block past the static buffer is over 1000 bytes.
        let limit = ClassLimit { hard_bytes: 3 * REPLY_BLOCK_BYTES, soft_bytes: REPLY_BLOCK_BYTES, soft_seconds: 2 };
        let mut g = OutputGuard::default();
        let over = UNCOUNTED_OUTPUT_BYTES;
        assert!(!g.over(over, 0, &limit, true, 10));
        assert!(!g.over(over + 1, 0, &limit, true, 10));
        assert!(g.over(over + 2 * REPLY_BLOCK_BYTES + 1, 0, &limit, true, 10));
        assert!(!g.over(over + 100, 0, &limit, true, 10));
        assert!(!g.over(over + 100, 0, &limit, true, 12));
        assert!(g.over(over + 100, 0, &limit, true, 13));
        assert!(!g.over(over, 0, &limit, true, 14));
        // Referenced payloads count their length, from the first byte.
        let small = ClassLimit { hard_bytes: 100_000, soft_bytes: 0, soft_seconds: 0 };
        assert!(!g.over(99_999 + 20, 99_999, &small, true, 0));
        assert!(g.over(100_000 + 20, 100_000, &small, true, 0));
        assert!(g.over(over + 1025, 0, &ClassLimit::default(), false, 0));
    }

    #[test]
    fn redis_counts_its_reply_list_in_whole_blocks() {
        assert_eq!(limit_bytes(UNCOUNTED_OUTPUT_BYTES, 0), 0);
        assert_eq!(limit_bytes(UNCOUNTED_OUTPUT_BYTES + 1, 0), REPLY_BLOCK_BYTES);
        assert_eq!(limit_bytes(UNCOUNTED_OUTPUT_BYTES + REPLY_BLOCK_BYTES + 1, 0), 2 * REPLY_BLOCK_BYTES);
        // KEYS * of 1000 names of 103 bytes and 6 short ones: 111 KB, over 100 000 in 5 blocks.
        let keys = 4 + 1000 * (6 + 103 + 2) + 6 * 12;
        assert!(limit_bytes(keys, 0) > 100_000 && keys - UNCOUNTED_OUTPUT_BYTES < 100_000);
        assert_eq!(limit_bytes(100 + 1_000_000, 1_000_000), 1_000_000);
    }
}
