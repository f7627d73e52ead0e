//! HOTKEYS (Redis 8.6): which keys take the most command time and network bytes, tracked
//! between HOTKEYS START and STOP (or the end of its DURATION), read with GET, dropped with
//! RESET.
//!
//! Every command that names keys (as its key specs find them, the ones ACL reads) and is run
//! by a client, by EXEC or as a script call (`EVAL` itself counts with the keys it declares;
//! the calls inside a script do not count again) adds its time and its bytes, split evenly
//! between its keys, to each key's total. Its time is what dispatch measured for it; its bytes
//! are the request as RESP plus its reply as sent. With SAMPLE n a command is counted for its
//! keys with probability 1/n (the totals over all commands count every one).
//!
//! The per-key totals are kept by the Space-Saving algorithm with room for ten times the keys
//! asked for: exact while fewer distinct keys are seen, and past that a key new to the table
//! takes the place of the smallest total, inheriting it (an overestimate bounded by that
//! total), so a key that is truly among the heaviest is never lost.

use bytes::{Bytes, BytesMut};
use rill_engine::command::CommandSpec;
use rill_resp::{Protocol, Reply};
use std::collections::HashMap;

/// The top-K list's longest length (COUNT's bound).
pub const MAX_COUNT: i64 = 64;

/// The tracking session, if one was started and not reset.
#[derive(Debug, Default)]
pub struct HotKeys {
    session: Option<Session>,
}

#[derive(Debug)]
struct Session {
    active: bool,
    /// How many keys GET lists per metric.
    count: usize,
    sample_ratio: u32,
    start_ms: i64,
    /// The DURATION (ms), 0 for none; once stopped, how long it ran.
    duration_ms: i64,
    cpu_start: (f64, f64),
    cpu: Option<TopK>,
    net: Option<TopK>,
    /// Nanoseconds and bytes of every command with keys, sampled or not.
    all_nanos: u64,
    all_bytes: u64,
    /// Time spent adding to the key tables (INFO's `hotkeys-cmd-cpu-time`).
    update_nanos: u64,
    rng: u64,
}

/// Weights by key, Space-Saving (see the module doc).
#[derive(Debug)]
struct TopK {
    room: usize,
    weights: HashMap<Bytes, u64>,
    total: u64,
}

impl TopK {
    fn new(room: usize) -> TopK {
        TopK { room, weights: HashMap::with_capacity(room), total: 0 }
    }

    fn add(&mut self, key: &[u8], weight: u64) {
        self.total += weight;
        if let Some(w) = self.weights.get_mut(key) {
            *w += weight;
            return;
        }
        let mut start = 0;
        if self.weights.len() >= self.room {
            let Some((smallest, w)) = self.weights.iter().min_by_key(|(_, w)| **w).map(|(k, w)| (k.clone(), *w)) else {
                return;
            };
            self.weights.remove(&smallest);
            start = w;
        }
        self.weights.insert(Bytes::copy_from_slice(key), start + weight);
    }

    /// The `n` heaviest keys, heaviest first (ties by name), weights above zero.
    fn top(&self, n: usize) -> Vec<(&Bytes, u64)> {
        let mut v: Vec<(&Bytes, u64)> = self.weights.iter().filter(|(_, w)| **w > 0).map(|(k, w)| (k, *w)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        v.truncate(n);
        v
    }
}

/// What HOTKEYS START asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub cpu: bool,
    pub net: bool,
    pub count: usize,
    pub duration_ms: i64,
    pub sample_ratio: u32,
}

impl HotKeys {
    /// Whether a session is counting commands (its DURATION, if any, not yet over).
    pub fn active(&mut self, now_ms: i64) -> bool {
        self.expire(now_ms);
        self.session.as_ref().is_some_and(|s| s.active)
    }

    /// INFO's `# Hotkeys` fields, with a session: whether it counts, and the milliseconds spent
    /// keeping its key tables.
    pub fn summary(&self, now_ms: i64) -> Option<(bool, u64)> {
        let s = self.session.as_ref()?;
        let over = s.duration_ms > 0 && now_ms - s.start_ms >= s.duration_ms;
        Some((s.active && !over, s.update_nanos / 1_000_000))
    }

    /// End a session whose DURATION has passed.
    fn expire(&mut self, now_ms: i64) {
        if let Some(s) = self.session.as_mut().filter(|s| s.active && s.duration_ms > 0) {
            if now_ms - s.start_ms >= s.duration_ms {
                s.active = false;
            }
        }
    }

    /// Start a session (the caller checked none is active), replacing a stopped one.
    pub fn start(&mut self, how: Start, now_ms: i64) {
        let room = how.count * 10;
        self.session = Some(Session {
            active: true,
            count: how.count,
            sample_ratio: how.sample_ratio,
            start_ms: now_ms,
            duration_ms: how.duration_ms,
            cpu_start: crate::alloc::cpu_seconds(),
            cpu: how.cpu.then(|| TopK::new(room)),
            net: how.net.then(|| TopK::new(room)),
            all_nanos: 0,
            all_bytes: 0,
            update_nanos: 0,
            rng: (now_ms as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        });
    }

    /// Stop the active session; false when none is active.
    pub fn stop(&mut self, now_ms: i64) -> bool {
        self.expire(now_ms);
        match self.session.as_mut().filter(|s| s.active) {
            Some(s) => {
                s.active = false;
                s.duration_ms = now_ms - s.start_ms;
                true
            }
            None => false,
        }
    }

    /// Drop a stopped session; false when one is active.
    pub fn reset(&mut self, now_ms: i64) -> bool {
        if self.active(now_ms) {
            return false;
        }
        self.session = None;
        true
    }

    /// Count one command: `spec` called with `args`, `nanos` long, answered with `reply`.
    pub fn record(&mut self, spec: &CommandSpec, args: &[Bytes], nanos: u64, reply: Option<&Reply>, proto: Protocol) {
        let Some(s) = self.session.as_mut().filter(|s| s.active) else { return };
        let keys = spec.key_indexes(args);
        if keys.is_empty() {
            return;
        }
        let mut bytes = request_bytes(args);
        if let Some(r) = reply {
            let mut out = BytesMut::new();
            rill_resp::write_reply(&mut out, r, proto);
            bytes += out.len() as u64;
        }
        s.all_nanos += nanos;
        s.all_bytes += bytes;
        if s.sample_ratio > 1 {
            // xorshift64: enough to pick one command in n.
            s.rng ^= s.rng << 13;
            s.rng ^= s.rng >> 7;
            s.rng ^= s.rng << 17;
            if s.rng % u64::from(s.sample_ratio) != 0 {
                return;
            }
        }
        let started = crate::clock::Tick::now();
        let n = keys.len() as u64;
        for i in keys {
            let Some(key) = args.get(i) else { continue };
            if let Some(t) = s.cpu.as_mut() {
                t.add(key, nanos / n);
            }
            if let Some(t) = s.net.as_mut() {
                t.add(key, bytes / n);
            }
        }
        s.update_nanos += crate::clock::Tick::now().nanos_since(started);
    }

    /// HOTKEYS GET's reply: an array holding one map (Redis' shape, which lets a cluster
    /// client merge the nodes' answers); nil without a session.
    pub fn report(&mut self, now_ms: i64) -> Reply {
        self.expire(now_ms);
        let Some(s) = self.session.as_ref() else { return Reply::Null };
        let text = |t: &str| Reply::Bulk(Bytes::copy_from_slice(t.as_bytes()));
        let int = |n: u64| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
        let duration = if s.active { now_ms - s.start_ms } else { s.duration_ms };
        let mut map = vec![
            (text("tracking-active"), Reply::Integer(i64::from(s.active))),
            (text("sample-ratio"), Reply::Integer(i64::from(s.sample_ratio))),
            // Not a cluster: every slot is this server's.
            (text("selected-slots"), Reply::Array(vec![Reply::Array(vec![Reply::Integer(0), Reply::Integer(16383)])])),
            (text("all-commands-all-slots-us"), int(s.all_nanos / 1000)),
            (text("net-bytes-all-commands-all-slots"), int(s.all_bytes)),
            (text("collection-start-time-unix-ms"), Reply::Integer(s.start_ms)),
            (text("collection-duration-ms"), Reply::Integer(duration)),
        ];
        if s.cpu.is_some() {
            let (user, sys) = crate::alloc::cpu_seconds();
            let ms = |now: f64, then: f64| Reply::Integer(((now - then).max(0.0) * 1000.0) as i64);
            map.push((text("total-cpu-time-user-ms"), ms(user, s.cpu_start.0)));
            map.push((text("total-cpu-time-sys-ms"), ms(sys, s.cpu_start.1)));
        }
        if let Some(net) = &s.net {
            map.push((text("total-net-bytes"), int(net.total)));
        }
        let list = |t: &TopK, scale: u64| {
            Reply::Array(
                t.top(s.count).into_iter().flat_map(|(k, w)| [Reply::Bulk(k.clone()), int(w / scale)]).collect(),
            )
        };
        if let Some(cpu) = &s.cpu {
            map.push((text("by-cpu-time-us"), list(cpu, 1000)));
        }
        if let Some(net) = &s.net {
            map.push((text("by-net-bytes"), list(net, 1)));
        }
        Reply::Array(vec![Reply::Map(map)])
    }
}

/// The bytes of a request as RESP: `*n`, then `$len` and the bytes of each argument.
fn request_bytes(args: &[Bytes]) -> u64 {
    let digits = |n: usize| n.checked_ilog10().map_or(1, |d| d as u64 + 1);
    let head = 3 + digits(args.len());
    head + args.iter().map(|a| 3 + digits(a.len()) + a.len() as u64 + 2).sum::<u64>()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn space_saving_keeps_the_heaviest_and_counts_exactly_within_its_room() {
        let mut t = TopK::new(3);
        for (k, w) in [("a", 5), ("b", 1), ("c", 2), ("a", 5)] {
            t.add(k.as_bytes(), w);
        }
        assert_eq!(t.top(2), vec![(&Bytes::from("a"), 10), (&Bytes::from("c"), 2)]);
        // A fourth key takes the smallest's place and inherits its weight.
        t.add(b"d", 1);
        assert_eq!(t.weights.get(&b"d"[..]), Some(&2));
        assert!(!t.weights.contains_key(&b"b"[..]));
        assert_eq!(t.total, 14);
    }

    #[test]
    fn a_request_counts_as_its_resp_bytes() {
        // *2\r\n$3\r\nGET\r\n$1\r\nk\r\n
        assert_eq!(request_bytes(&[Bytes::from("GET"), Bytes::from("k")]), 4 + 9 + 7);
    }
}
