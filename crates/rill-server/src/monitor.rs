//! MONITOR: every command a client runs, shown to the connections that asked, as a status
//! line each (`+<secs>.<micros> [<db> <ip:port>] "arg" "arg" ...`), over push mode
//! (`push.rs`) so that a monitor that does not read is bounded by its output limits like any
//! client (its class stays `normal`, as in Redis).
//!
//! What is shown, as Redis shows it: a command once it ran (a refused one never: unknown,
//! wrong arity, NOAUTH, ...), with its arguments as the client sent them and the secret ones
//! (`Conn::redacted`) as `"(redacted)"`; a transaction's commands one by one as EXEC runs them,
//! then EXEC; a command that parks once, when it first runs (not again when served); never
//! commands flagged `admin` (CONFIG, DEBUG, CLIENT LIST, MONITOR itself, ...) or
//! `skip_monitor`.

use crate::state::State;
use bytes::Bytes;
use rill_engine::command::{CommandSpec, Flags};

/// The connections in monitor mode, in the order they asked.
#[derive(Debug, Default)]
pub struct Monitors {
    ids: Vec<u64>,
}

impl Monitors {
    /// Whether nobody monitors (the common case: one check per command).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// `id` starts monitoring (again: nothing changes).
    pub fn add(&mut self, id: u64) {
        if !self.ids.contains(&id) {
            self.ids.push(id);
        }
    }

    /// `id` stops (RESET, its connection closed).
    pub fn remove(&mut self, id: u64) {
        self.ids.retain(|&m| m != id);
    }

    /// Whether `id` monitors.
    pub fn contains(&self, id: u64) -> bool {
        self.ids.contains(&id)
    }
}

/// The line a monitor gets for `args`, run by `peer` in `db` at `now_us` (Unix µs).
pub fn line(now_us: i64, db: usize, peer: &str, args: &[Bytes], redacted: &[u32]) -> Bytes {
    let mut out = format!("+{}.{:06} [{db} {peer}]", now_us.div_euclid(1_000_000), now_us.rem_euclid(1_000_000));
    for (i, a) in args.iter().enumerate() {
        out.push(' ');
        if redacted.contains(&(i as u32)) {
            out.push_str("\"(redacted)\"");
        } else {
            out.push_str(&crate::config::rewrite::repr_bytes(a));
        }
    }
    out.push_str("\r\n");
    Bytes::from(out)
}

/// Show a command of `spec` that client `client` ran in `db` to every monitor.
pub fn feed(st: &mut State, spec: &CommandSpec, client: u64, db: usize, args: &[Bytes], redacted: &[u32]) {
    if st.monitors.is_empty() || spec.flags.has(Flags::ADMIN) || spec.flags.has(Flags::SKIP_MONITOR) {
        return;
    }
    send(st, client, db, args, redacted);
}

/// Show a script command (EVAL and kin, flagged skip-monitor so dispatch does not show it
/// after the commands it runs) before it runs, as Redis does.
pub fn feed_script(st: &mut State, client: u64, db: usize, args: &[Bytes], redacted: &[u32]) {
    if !st.monitors.is_empty() {
        send(st, client, db, args, redacted);
    }
}

fn send(st: &mut State, client: u64, db: usize, args: &[Bytes], redacted: &[u32]) {
    let peer = match st.clients.get(&client) {
        Some(c) => c.addr.clone(),
        None if client == st.scripts.client_id => "lua".to_string(),
        None => String::new(),
    };
    let now_us = crate::clock::now_us();
    let frame = line(now_us, db, &peer, args, redacted);
    let now_secs = now_us.div_euclid(1_000_000);
    for id in st.monitors.ids.clone() {
        crate::push::push_to(st, id, frame.clone(), now_secs);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn lines_quote_each_argument_and_redact() {
        let args: Vec<Bytes> =
            ["set", "k\"ey", "a b\r\n\x01"].iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect();
        let l = line(1_700_000_000_000_042, 3, "127.0.0.1:5000", &args, &[]);
        assert_eq!(&l[..], &b"+1700000000.000042 [3 127.0.0.1:5000] \"set\" \"k\\\"ey\" \"a b\\r\\n\\x01\"\r\n"[..]);
        let l = line(1_000_000, 0, "p", &args[..2], &[1]);
        assert_eq!(&l[..], &b"+1.000000 [0 p] \"set\" \"(redacted)\"\r\n"[..]);
    }

    #[test]
    fn add_is_idempotent() {
        let mut m = Monitors::default();
        m.add(1);
        m.add(1);
        m.add(2);
        m.remove(1);
        assert!(m.contains(2) && !m.contains(1) && !m.is_empty());
    }
}
