//! A log rate limit: at most a few messages of one kind per second, however fast a client (or a
//! full descriptor table) makes the event repeat, with a count of what was left out.

use std::time::{Duration, Instant};

/// Lets at most `per_window` messages through in each one-second window and counts the rest.
#[derive(Debug)]
pub struct LogLimiter {
    per_window: u32,
    window_start: Option<Instant>,
    passed: u32,
    suppressed: u64,
}

/// The window [`LogLimiter`] counts in.
const WINDOW: Duration = Duration::from_secs(1);

impl LogLimiter {
    /// A limiter letting `per_window` messages through per second.
    pub const fn new(per_window: u32) -> LogLimiter {
        LogLimiter { per_window, window_start: None, passed: 0, suppressed: 0 }
    }

    /// `Some(n)` if a message may be logged at `now`, `n` being how many were suppressed since
    /// the last one that was; `None` if this one must be dropped (it is counted).
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        let fresh = self.window_start.is_none_or(|start| now.saturating_duration_since(start) >= WINDOW);
        if fresh {
            self.window_start = Some(now);
            self.passed = 0;
        }
        if self.passed < self.per_window {
            self.passed += 1;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_a_few_per_second_and_counts_the_rest() {
        let mut l = LogLimiter::new(3);
        let t0 = Instant::now();
        let passed: Vec<_> = (0..100).map(|i| l.allow(t0 + Duration::from_millis(i))).collect();
        assert_eq!(passed.iter().filter(|p| p.is_some()).count(), 3);
        assert_eq!(passed.first(), Some(&Some(0)));
        // The next window reports what the previous one dropped.
        assert_eq!(l.allow(t0 + Duration::from_millis(1000)), Some(97));
        assert_eq!(l.allow(t0 + Duration::from_millis(1001)), Some(0));
    }
}
