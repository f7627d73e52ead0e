//! A parked client: waiting for a served reply, a timeout, or a re-run time.

use super::{durable, emit, instant_at_ms, Session};
use crate::blocking::{self, Outcome};
use crate::state::now_ms;
use rill_resp::{OutputBuffer, Reply};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A parked client: its channel and its timers.
#[derive(Debug)]
pub struct Park {
    /// Where the served reply (or the news that it was written directly) arrives.
    pub(in crate::conn) rx: oneshot::Receiver<Outcome>,
    /// When the command times out.
    pub(in crate::conn) deadline: Option<Instant>,
    /// When the command asked to be re-run without a signal (XREADGROUP CLAIM's oldest
    /// pending entry becoming claimable).
    pub(super) wake: Option<Instant>,
}

impl Park {
    /// The re-run time, if it comes before the deadline.
    pub(in crate::conn) fn wake_up(&self) -> Option<Instant> {
        match self.wake {
            Some(w) if self.deadline.is_none_or(|d| w < d) => Some(w),
            _ => None,
        }
    }
}

/// How a parked client was released.
#[derive(Debug)]
pub enum Released {
    /// Close the connection.
    Close,
    /// The reply was written by the connection that served it, except this tail, which the
    /// driver must write. Then run again.
    Written(OutputBuffer),
    /// The reply is in the output buffer: write it, then run again.
    Reply,
    /// The reply is in the output buffer: write it, then close the connection.
    Last,
}

impl Session {
    /// The parked client's channel delivered `r`.
    pub async fn released(&mut self, r: Result<Outcome, oneshot::error::RecvError>) -> Released {
        match r {
            Ok(Outcome::Written { rest, len }) => {
                self.net_out += len as u64;
                Released::Written(rest)
            }
            Ok(Outcome::Reply(reply, wait, then)) => {
                if let Some((log, offset)) = wait {
                    if !durable(&log, offset).await {
                        return Released::Close;
                    }
                }
                self.emit_parked_reply(&reply);
                for frame in then {
                    // Pushes: written whatever CLIENT REPLY says.
                    rill_resp::ReplyTarget::encoded(&mut self.out).extend_from_slice(&frame);
                    self.net_out += frame.len() as u64;
                    self.net_out_uncounted += frame.len() as u64;
                }
                Released::Reply
            }
            Ok(Outcome::Close(reply)) => {
                self.emit_parked_reply(&reply);
                Released::Last
            }
            // Unparked without a reply: killed.
            Err(_) => Released::Close,
        }
    }

    /// The parked command's deadline passed: true if its timeout reply is now in the output
    /// buffer, false if it had been served meanwhile (its reply is on the channel).
    pub fn park_timed_out(&mut self) -> bool {
        let mut st = self.shared.lock();
        let waiter = blocking::unpark(&mut st, self.conn.id);
        if let Some(w) = &waiter {
            blocking::ended(&mut st, w.spec, &w.args, self.conn.id, w.ran_micros, now_ms());
        }
        drop(st);
        match waiter {
            Some(w) => {
                self.emit_parked_reply(&w.request.timeout_reply);
                true
            }
            None => false,
        }
    }

    /// The parked command asked to be re-run now (XREADGROUP CLAIM).
    pub fn park_wake(&mut self, park: &mut Park) {
        let mut st = self.shared.lock();
        blocking::try_serve(&mut st, self.conn.id, now_ms());
        blocking::serve_ready(&mut st, now_ms());
        park.wake = st.blocked.wake_at(self.conn.id).map(instant_at_ms);
    }

    fn emit_parked_reply(&mut self, reply: &Reply) {
        let before = self.out.len();
        emit(&mut self.out, &mut self.conn, reply);
        let n = (self.out.len() - before) as u64;
        self.net_out += n;
        self.net_out_uncounted += n;
    }
}
