//! Metrics published through the `metrics` facade; install any recorder (Prometheus, ...) to
//! collect them. Every series carries `stream` and `group` labels.
//!
//! | name                                 | kind      | counts                                    |
//! |--------------------------------------|-----------|-------------------------------------------|
//! | `rill_worker_handled_total`          | counter   | entries handled and acked                 |
//! | `rill_worker_failed_total`           | counter   | handler errors and panics, failed acks    |
//! | `rill_worker_reclaimed_total`        | counter   | entries taken over from idle consumers    |
//! | `rill_worker_dead_lettered_total`    | counter   | entries moved to the dead-letter stream   |
//! | `rill_worker_handler_seconds`        | histogram | handler run time                          |

use std::time::Duration;

use metrics::{Counter, Histogram};

use crate::config::WorkerConfig;

pub const HANDLED: &str = "rill_worker_handled_total";
pub const FAILED: &str = "rill_worker_failed_total";
pub const RECLAIMED: &str = "rill_worker_reclaimed_total";
pub const DEAD_LETTERED: &str = "rill_worker_dead_lettered_total";
pub const HANDLER_SECONDS: &str = "rill_worker_handler_seconds";

/// The series of one worker, registered once when it starts (a lookup and two label strings
/// per entry otherwise, on the hot path of every handled entry).
#[derive(Debug, Clone)]
pub(crate) struct Meters {
    handled: Counter,
    failed: Counter,
    reclaimed: Counter,
    dead_lettered: Counter,
    handler_seconds: Histogram,
}

impl Meters {
    pub(crate) fn new(c: &WorkerConfig) -> Meters {
        let labels = [("stream", c.stream.clone()), ("group", c.group.clone())];
        Meters {
            handled: metrics::counter!(HANDLED, &labels),
            failed: metrics::counter!(FAILED, &labels),
            reclaimed: metrics::counter!(RECLAIMED, &labels),
            dead_lettered: metrics::counter!(DEAD_LETTERED, &labels),
            handler_seconds: metrics::histogram!(HANDLER_SECONDS, &labels),
        }
    }

    pub(crate) fn handled(&self, n: u64) {
        self.handled.increment(n);
    }

    pub(crate) fn failed(&self, n: u64) {
        self.failed.increment(n);
    }

    pub(crate) fn reclaimed(&self, n: u64) {
        self.reclaimed.increment(n);
    }

    pub(crate) fn dead_lettered(&self) {
        self.dead_lettered.increment(1);
    }

    pub(crate) fn handler_latency(&self, d: Duration) {
        self.handler_seconds.record(d.as_secs_f64());
    }
}
