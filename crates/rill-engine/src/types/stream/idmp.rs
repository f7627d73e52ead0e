//! Idempotent production (XADD `IDMP` / `IDMPAUTO`, XCFGSET; spec §3.1.1).
//!
//! Each stream keeps, per producer ID, a FIFO of idempotent IDs (IIDs) with the stream ID the
//! first XADD carrying them produced. A later XADD with the same producer and IID is a
//! duplicate: it appends nothing and replies the recorded ID.
//!
//! ```text
//! Idmp
//!   duration_secs, max_size          per stream; copied from the defaults at creation
//!   producers: BTreeMap<pid, Producer>
//!     Producer.order:  VecDeque<(iid, StreamId)>   oldest first: eviction and expiry pop here
//!     Producer.by_iid: HashMap<iid, StreamId>      the same pairs, for O(1) duplicate checks
//!   iids_added, iids_duplicates      lifetime counters (XINFO STREAM)
//! ```
//!
//! Expiry: Redis drops expired IIDs from a timer about once a second. The engine has no timer,
//! so every command that reads or writes this state first calls [`Idmp::expire`] with the
//! command's clock; a client cannot tell the difference except that an expired-but-not-yet
//! -reached IID may be counted by XINFO a little longer.

use super::StreamId;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Default `idmp-duration` of a new stream (`stream-idmp-duration`), seconds.
pub const DURATION_DEFAULT_SECS: u64 = 100;
/// Default `idmp-maxsize` of a new stream (`stream-idmp-maxsize`), IIDs per producer.
pub const MAX_SIZE_DEFAULT: u64 = 100;
/// `idmp-duration` range, seconds.
pub const DURATION_RANGE_SECS: std::ops::RangeInclusive<i64> = 1..=86_400;
/// `idmp-maxsize` range, IIDs per producer.
pub const MAX_SIZE_RANGE: std::ops::RangeInclusive<i64> = 1..=10_000;
/// Length of an IDMPAUTO IID: two 64-bit halves (sum and xor of the pair hashes).
pub const AUTO_IID_BYTES: usize = 16;

/// How long a producer registered by a failed append may stay without IIDs: Redis' expiry
/// timer, which removes such producers, runs about this often.
const EMPTY_PRODUCER_GRACE_MS: i64 = 1000;

/// One producer's IIDs. Invariant: `order` and `by_iid` hold the same pairs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Producer {
    order: VecDeque<(Bytes, StreamId)>,
    by_iid: HashMap<Bytes, StreamId>,
    /// When the producer was registered (ms): an empty one goes after the grace period.
    registered_ms: i64,
}

/// A stream's IDMP configuration, IID tables and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idmp {
    /// `idmp-duration`: IIDs whose stream ID is older than this many seconds expire.
    duration_secs: u64,
    /// `idmp-maxsize`: IIDs kept per producer; the oldest is evicted beyond it.
    max_size: u64,
    /// Producer ID → its IIDs, ordered by producer ID.
    producers: BTreeMap<Bytes, Producer>,
    /// `iids-added`: lifetime IIDs recorded.
    iids_added: u64,
    /// `iids-duplicates`: lifetime duplicate XADDs answered from a table.
    iids_duplicates: u64,
}

impl Default for Idmp {
    fn default() -> Self {
        Idmp {
            duration_secs: DURATION_DEFAULT_SECS,
            max_size: MAX_SIZE_DEFAULT,
            producers: BTreeMap::new(),
            iids_added: 0,
            iids_duplicates: 0,
        }
    }
}

impl Idmp {
    /// `idmp-duration`, seconds.
    pub fn duration_secs(&self) -> u64 {
        self.duration_secs
    }

    /// `idmp-maxsize`.
    pub fn max_size(&self) -> u64 {
        self.max_size
    }

    /// `pids-tracked`. O(1).
    pub fn pids_tracked(&self) -> u64 {
        self.producers.len() as u64
    }

    /// `iids-tracked`: IIDs over all producers. O(producers).
    pub fn iids_tracked(&self) -> u64 {
        self.producers.values().map(|p| p.order.len() as u64).sum()
    }

    /// `iids-added`.
    pub fn iids_added(&self) -> u64 {
        self.iids_added
    }

    /// `iids-duplicates`.
    pub fn iids_duplicates(&self) -> u64 {
        self.iids_duplicates
    }

    /// Every producer with its IIDs, oldest first (what a snapshot writer walks).
    pub fn producers(&self) -> impl Iterator<Item = (&Bytes, impl Iterator<Item = &(Bytes, StreamId)>)> {
        self.producers.iter().map(|(pid, p)| (pid, p.order.iter()))
    }

    /// Rebuild the state a snapshot carries (RESTORE): configuration, counters and, per
    /// producer, its IIDs oldest first. A repeated IID keeps its first ID and producers left
    /// without IIDs are dropped; then IIDs already expired at `now_ms` go, as Redis skips
    /// them on load. Ranges are the caller's check. O(IIDs).
    pub fn restore(
        duration_secs: u64,
        max_size: u64,
        producers: Vec<(Bytes, Vec<(Bytes, StreamId)>)>,
        iids_added: u64,
        iids_duplicates: u64,
        now_ms: i64,
    ) -> Idmp {
        let mut idmp = Idmp { duration_secs, max_size, producers: BTreeMap::new(), iids_added, iids_duplicates };
        for (pid, iids) in producers {
            let producer =
                idmp.producers.entry(pid).or_insert_with(|| Producer { registered_ms: now_ms, ..Producer::default() });
            for (iid, id) in iids {
                // The first ID of a repeated IID stays (looked up, not searched for: a payload
                // repeating one IID a million times must not cost a million scans).
                if let std::collections::hash_map::Entry::Vacant(slot) = producer.by_iid.entry(iid.clone()) {
                    slot.insert(id);
                    producer.order.push_back((iid, id));
                }
            }
        }
        idmp.producers.retain(|_, p| !p.order.is_empty());
        idmp.expire(now_ms);
        idmp
    }

    /// Drop, per producer and oldest first, the IIDs whose stream ID's ms part is at or
    /// before `now_ms − duration`; drop producers left with none (one registered by a failed
    /// append only once [`EMPTY_PRODUCER_GRACE_MS`] has passed). O(expired + producers).
    pub fn expire(&mut self, now_ms: i64) {
        let cutoff =
            u64::try_from(now_ms).ok().and_then(|now| now.checked_sub(self.duration_secs.saturating_mul(1000)));
        self.producers.retain(|_, p| {
            let had_iids = !p.order.is_empty();
            while let (Some(cutoff), Some((iid, id))) = (cutoff, p.order.front()) {
                if id.ms > cutoff {
                    break;
                }
                p.by_iid.remove(iid);
                p.order.pop_front();
            }
            !p.order.is_empty() || (!had_iids && now_ms.saturating_sub(p.registered_ms) < EMPTY_PRODUCER_GRACE_MS)
        });
    }

    /// The ID recorded for (`pid`, `iid`), counting a duplicate when found. The producer is
    /// registered either way, as Redis does before it knows whether the append will succeed
    /// (so an append that then fails leaves an empty producer until expiry). O(1).
    pub fn check_duplicate(&mut self, pid: &Bytes, iid: &[u8], now_ms: i64) -> Option<StreamId> {
        let producer = self
            .producers
            .entry(pid.clone())
            .or_insert_with(|| Producer { registered_ms: now_ms, ..Producer::default() });
        let found = producer.by_iid.get(iid).copied();
        if found.is_some() {
            self.iids_duplicates = self.iids_duplicates.saturating_add(1);
        }
        found
    }

    /// The ID recorded for (`pid`, `iid`), without counting anything. O(1).
    pub fn recorded(&self, pid: &[u8], iid: &[u8]) -> Option<StreamId> {
        self.producers.get(pid)?.by_iid.get(iid).copied()
    }

    /// Record (`pid`, `iid`) → `id` after a successful append, evicting the producer's oldest
    /// IID beyond `idmp-maxsize`. O(1) amortised.
    pub fn record(&mut self, pid: &Bytes, iid: Bytes, id: StreamId) {
        let producer = self.producers.entry(pid.clone()).or_default();
        if producer.by_iid.insert(iid.clone(), id).is_none() {
            producer.order.push_back((iid, id));
        }
        while producer.order.len() as u64 > self.max_size {
            if let Some((old, _)) = producer.order.pop_front() {
                producer.by_iid.remove(&old);
            }
        }
        self.iids_added = self.iids_added.saturating_add(1);
    }

    /// XCFGSET: store the given values; if either differs from the current one, every
    /// producer's history is discarded (the counters stay). Ranges are the caller's check.
    pub fn configure(&mut self, duration_secs: Option<u64>, max_size: Option<u64>) {
        let mut changed = false;
        if let Some(d) = duration_secs.filter(|d| *d != self.duration_secs) {
            self.duration_secs = d;
            changed = true;
        }
        if let Some(m) = max_size.filter(|m| *m != self.max_size) {
            self.max_size = m;
            changed = true;
        }
        if changed {
            self.producers.clear();
        }
    }
}

/// The IID `IDMPAUTO` derives from an entry's field/value pairs, byte for byte the one Redis
/// derives, so that IIDs moved between the two (DUMP/RESTORE, a migration) keep matching the
/// messages they were made from. Each pair is hashed alone with XXH3-128 over the field bytes,
/// the field length (a 64-bit little-endian integer) and the value bytes; the pair hashes are
/// combined, independently of the pairs' order, by wrapping sums and xors of their two halves,
/// each sum then mixed with the other half's xor rotated left by one bit. The IID is the low
/// half then the high half, little-endian. Different names, values or pair counts give
/// different IIDs; the length keeps `("ab","c")` and `("a","bc")` apart.
pub fn auto_iid<F: super::Fields + ?Sized>(fields: &F) -> Bytes {
    let (mut sum_lo, mut sum_hi, mut xor_lo, mut xor_hi) = (0u64, 0u64, 0u64, 0u64);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for (f, v) in fields.pairs() {
        h.reset();
        h.update(f);
        h.update(&(f.len() as u64).to_le_bytes());
        h.update(v);
        let pair = h.digest128();
        // The halves of a 128-bit value.
        let (lo, hi) = (pair as u64, (pair >> 64) as u64);
        sum_lo = sum_lo.wrapping_add(lo);
        sum_hi = sum_hi.wrapping_add(hi);
        xor_lo ^= lo;
        xor_hi ^= hi;
    }
    let mut out = Vec::with_capacity(AUTO_IID_BYTES);
    out.extend_from_slice(&(sum_lo ^ xor_hi.rotate_left(1)).to_le_bytes());
    out.extend_from_slice(&(sum_hi ^ xor_lo.rotate_left(1)).to_le_bytes());
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn auto_iid_is_order_independent_but_content_sensitive() {
        let a = auto_iid(&[(b("x"), b("1")), (b("y"), b("2"))]);
        assert_eq!(a, auto_iid(&[(b("y"), b("2")), (b("x"), b("1"))]));
        assert_ne!(a, auto_iid(&[(b("x"), b("1")), (b("y"), b("3"))]));
        assert_ne!(auto_iid(&[(b("ab"), b("c"))]), auto_iid(&[(b("a"), b("bc"))]));
        let one = auto_iid(&[(b("x"), b("1"))]);
        assert_ne!(one, auto_iid(&[(b("x"), b("1")), (b("x"), b("1"))]));
        assert_ne!(
            auto_iid(&[(b("x"), b("1")), (b("x"), b("1"))]),
            auto_iid(&[(b("x"), b("1")), (b("x"), b("1")), (b("x"), b("1")), (b("x"), b("1"))])
        );
        assert_eq!(a.len(), AUTO_IID_BYTES);
    }

    /// IIDs read from the DUMP of a Redis 8.8 stream after `XADD key IDMPAUTO p * ...`: the
    /// derivation must match Redis's byte for byte (a RESTOREd IID must still catch a retry).
    #[test]
    fn auto_iid_matches_redis() {
        let hex = |iid: Bytes| iid.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(auto_iid(&[(b("f"), b("v"))])), "6e95729ee727f0814aedffba55730079");
        assert_eq!(hex(auto_iid(&[(b("field"), b(""))])), "9d0899c463e3e6243812ff469716786e");
        assert_eq!(hex(auto_iid(&[(b("f"), b("v")), (b("a"), b("12345"))])), "1fd53a7f28de3df572e21c546e2d9589");
    }

    #[test]
    fn eviction_expiry_and_reconfiguration() {
        let mut t = Idmp::default();
        t.configure(None, Some(2));
        let p = b("p");
        for (i, iid) in ["a", "b", "c"].iter().enumerate() {
            assert_eq!(t.check_duplicate(&p, iid.as_bytes(), 0), None);
            t.record(&p, b(iid), StreamId::new(1000 * (i as u64 + 1), 0));
        }
        assert_eq!((t.iids_tracked(), t.iids_added()), (2, 3));
        assert_eq!(t.check_duplicate(&p, b"a", 0), None);
        assert_eq!(t.check_duplicate(&p, b"c", 0), Some(StreamId::new(3000, 0)));
        assert_eq!(t.iids_duplicates(), 1);
        // duration 100 s: at 102 s the IID stamped 2 s goes, the one at 3 s stays.
        t.expire(102_000);
        assert_eq!(t.iids_tracked(), 1);
        t.expire(103_000);
        assert_eq!((t.pids_tracked(), t.iids_tracked()), (0, 0));
        t.record(&p, b("d"), StreamId::new(5, 0));
        t.configure(None, Some(2));
        assert_eq!(t.iids_tracked(), 1, "same value keeps history");
        t.configure(Some(10), None);
        assert_eq!((t.iids_tracked(), t.iids_added(), t.duration_secs()), (0, 4, 10));
    }
}
