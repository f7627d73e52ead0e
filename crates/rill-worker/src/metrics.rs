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

use crate::config::WorkerConfig;

pub const HANDLED: &str = "rill_worker_handled_total";
pub const FAILED: &str = "rill_worker_failed_total";
pub const RECLAIMED: &str = "rill_worker_reclaimed_total";
pub const DEAD_LETTERED: &str = "rill_worker_dead_lettered_total";
pub const HANDLER_SECONDS: &str = "rill_worker_handler_seconds";

fn labels(c: &WorkerConfig) -> [(&'static str, String); 2] {
    [("stream", c.stream.clone()), ("group", c.group.clone())]
}

pub(crate) fn handled(c: &WorkerConfig) {
    metrics::counter!(HANDLED, &labels(c)).increment(1);
}

pub(crate) fn failed(c: &WorkerConfig) {
    metrics::counter!(FAILED, &labels(c)).increment(1);
}

pub(crate) fn reclaimed(c: &WorkerConfig, n: u64) {
    metrics::counter!(RECLAIMED, &labels(c)).increment(n);
}

pub(crate) fn dead_lettered(c: &WorkerConfig) {
    metrics::counter!(DEAD_LETTERED, &labels(c)).increment(1);
}

pub(crate) fn handler_latency(c: &WorkerConfig, d: Duration) {
    metrics::histogram!(HANDLER_SECONDS, &labels(c)).record(d.as_secs_f64());
}
