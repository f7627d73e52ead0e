//! The slow log (`SLOWLOG GET|LEN|RESET`): the newest `slowlog-max-len` commands that ran for
//! at least `slowlog-log-slower-than` microseconds, newest first, each with an ID, the Unix
//! second it finished, its duration, its arguments (at most `slowlog-entry-max-argc`, each cut
//! to `slowlog-entry-max-string-len` bytes), the client's address and name — Redis' entry, six
//! fields in that order.
//!
//! What is logged is what the client sent, never a rewritten form (a served BLPOP is logged as
//! BLPOP, not as the LPOP the replicas get), with the arguments its command marked secret
//! (`Conn::redacted`: AUTH, HELLO AUTH, CONFIG SET of a password) replaced by `(redacted)`.
//! Commands flagged `skip_slowlog` (EXEC: its commands are logged one by one) never are; a
//! command that blocked is logged when it ends (`blocking.rs`), not when it parks.

use bytes::Bytes;
use std::collections::VecDeque;

/// What the `slowlog-*` directives say, read once per CONFIG SET (`HotConfig`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `slowlog-log-slower-than` in microseconds; negative: nothing is logged.
    pub slower_than: i64,
    /// `slowlog-max-len`: the entries kept; 0: nothing is logged.
    pub max_len: usize,
    /// `slowlog-entry-max-argc`: the arguments an entry keeps (the last one then says how many
    /// were left out).
    pub max_argc: usize,
    /// `slowlog-entry-max-string-len`: the bytes an argument keeps.
    pub max_string: usize,
}

impl Limits {
    /// Read from the configuration.
    pub fn from(config: &crate::config::Config) -> Limits {
        Limits {
            slower_than: config.get_i64("slowlog-log-slower-than"),
            max_len: usize::try_from(config.get_i64("slowlog-max-len")).unwrap_or(usize::MAX),
            max_argc: usize::try_from(config.get_i64("slowlog-entry-max-argc")).unwrap_or(32).max(2),
            max_string: usize::try_from(config.get_i64("slowlog-entry-max-string-len")).unwrap_or(128).max(1),
        }
    }

    /// Whether a command that ran `us` microseconds goes into the log.
    pub fn wants(&self, us: u64) -> bool {
        self.slower_than >= 0 && self.max_len > 0 && i64::try_from(us).unwrap_or(i64::MAX) >= self.slower_than
    }
}

/// One logged command.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its ID: entries are numbered from 0 since the server started (RESET does not restart).
    pub id: u64,
    /// When it finished, Unix seconds.
    pub unix_secs: i64,
    /// How long it ran, microseconds.
    pub micros: u64,
    /// Its arguments as kept (see the module doc).
    pub argv: Vec<Bytes>,
    /// The client's `ip:port`.
    pub peer: String,
    /// The client's name (empty: none).
    pub name: Bytes,
}

/// The log: newest entry first.
#[derive(Debug, Default)]
pub struct SlowLog {
    entries: VecDeque<Entry>,
    next_id: u64,
}

/// Running totals of what was logged (INFO stats `slowlog_commands_*`, INFO commandstats
/// `slowlog_*`): kept by CONFIG RESETSTAT's rules, not by SLOWLOG RESET's.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    /// Commands logged.
    pub count: u64,
    /// Their durations, microseconds.
    pub micros_sum: u64,
    /// The longest of them, microseconds.
    pub micros_max: u64,
}

impl Totals {
    fn add(&mut self, micros: u64) {
        self.count += 1;
        self.micros_sum += micros;
        self.micros_max = self.micros_max.max(micros);
    }
}

/// What replaces a secret argument.
const REDACTED: &[u8] = b"(redacted)";

impl SlowLog {
    /// The entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The newest `n` entries, newest first.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &Entry> {
        self.entries.iter().take(n)
    }

    /// Forget every entry (IDs keep counting).
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// Drop the oldest entries beyond `max_len`.
    pub fn trim(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }

    /// Log a command: `args` as the client sent them, `redacted` the positions of secret
    /// ones.
    pub fn push(&mut self, limits: &Limits, args: &[Bytes], redacted: &[u32], client: Client, micros: u64) {
        let kept = args.len().min(limits.max_argc);
        let mut argv = Vec::with_capacity(kept);
        for (i, a) in args.iter().take(kept).enumerate() {
            if kept < args.len() && i + 1 == kept {
                argv.push(Bytes::from(format!("... ({} more arguments)", args.len() - kept + 1)));
            } else if redacted.iter().any(|&r| r as usize == i) {
                argv.push(Bytes::from_static(REDACTED));
            } else if a.len() > limits.max_string {
                let mut cut = a.get(..limits.max_string).unwrap_or(a).to_vec();
                cut.extend_from_slice(format!("... ({} more bytes)", a.len() - limits.max_string).as_bytes());
                argv.push(Bytes::from(cut));
            } else {
                argv.push(a.clone());
            }
        }
        self.entries.push_front(Entry {
            id: self.next_id,
            unix_secs: client.now_ms.div_euclid(1000),
            micros,
            argv,
            peer: client.peer,
            name: client.name,
        });
        self.next_id += 1;
        self.trim(limits.max_len);
    }
}

/// Who ran a logged command, and when it finished.
#[derive(Debug)]
pub struct Client {
    /// `ip:port`.
    pub peer: String,
    /// The connection's name.
    pub name: Bytes,
    /// Unix ms.
    pub now_ms: i64,
}

/// After a command of `spec` ran for `micros` on `client` (not one that parked: it is looked
/// at when it ends): log it if it was slow enough, and count it in the totals.
pub fn consider(
    st: &mut crate::state::State,
    spec: &'static rill_engine::command::CommandSpec,
    args: &[Bytes],
    redacted: &[u32],
    client: u64,
    micros: u64,
    now_ms: i64,
) {
    let limits = st.hot.slowlog;
    if !limits.wants(micros) || spec.flags.has(rill_engine::command::Flags::SKIP_SLOWLOG) {
        return;
    }
    let who = match st.clients.get(&client) {
        Some(c) => Client { peer: c.addr.clone(), name: c.name.clone(), now_ms },
        // The primary's stream on a replica, or a timer: Redis logs them with their own
        // client's (empty) address too.
        None => Client { peer: String::new(), name: Bytes::new(), now_ms },
    };
    st.slowlog.push(&limits, args, redacted, who, micros);
    st.stats.slowlog.add(micros);
    st.stats.command(spec).slowlog.add(micros);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits { slower_than: 0, max_len: 3, max_argc: 32, max_string: 128 }
    }

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    fn who() -> Client {
        Client { peer: "127.0.0.1:5000".into(), name: Bytes::from_static(b"n"), now_ms: 1_700_000_000_999 }
    }

    fn texts(e: &Entry) -> Vec<String> {
        e.argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect()
    }

    #[test]
    fn newest_first_bounded_ids_keep_counting() {
        let mut log = SlowLog::default();
        for i in 0..5 {
            log.push(&limits(), &args(&["ping", &i.to_string()]), &[], who(), 7);
        }
        assert_eq!(log.len(), 3);
        let ids: Vec<u64> = log.newest(10).map(|e| e.id).collect();
        assert_eq!(ids, [4, 3, 2]);
        let e = log.newest(1).next().unwrap();
        assert_eq!(
            (e.unix_secs, e.micros, e.peer.as_str(), &e.name[..]),
            (1_700_000_000, 7, "127.0.0.1:5000", &b"n"[..])
        );
        log.reset();
        log.push(&limits(), &args(&["ping"]), &[], who(), 1);
        assert_eq!(log.newest(1).next().unwrap().id, 5);
    }

    #[test]
    fn trims_arguments_and_strings_and_redacts() {
        let mut log = SlowLog::default();
        let l = Limits { max_argc: 5, max_string: 4, ..limits() };
        log.push(&l, &args(&["sadd", "s", "a", "b", "c", "d", "e", "f"]), &[], who(), 0);
        assert_eq!(texts(log.newest(1).next().unwrap()), ["sadd", "s", "a", "b", "... (4 more arguments)"]);
        log.push(&l, &args(&["set", "k", "abcdef"]), &[], who(), 0);
        assert_eq!(texts(log.newest(1).next().unwrap()), ["set", "k", "abcd... (2 more bytes)"]);
        log.push(&l, &args(&["auth", "user", "secretsecret"]), &[1, 2], who(), 0);
        assert_eq!(texts(log.newest(1).next().unwrap()), ["auth", "(redacted)", "(redacted)"]);
        // Exactly the limit: kept as is.
        log.push(&l, &args(&["sadd", "s", "a", "b", "c"]), &[], who(), 0);
        assert_eq!(texts(log.newest(1).next().unwrap()), ["sadd", "s", "a", "b", "c"]);
    }

    #[test]
    fn thresholds() {
        assert!(limits().wants(0));
        assert!(!Limits { slower_than: -1, ..limits() }.wants(1_000_000));
        assert!(!Limits { max_len: 0, ..limits() }.wants(1_000_000));
        assert!(!Limits { slower_than: 100, ..limits() }.wants(99));
        assert!(Limits { slower_than: 100, ..limits() }.wants(100));
    }
}
