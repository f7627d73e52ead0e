//! A cheap monotonic tick counter for per-command timing (INFO commandstats `usec`).
//!
//! Reading the OS monotonic clock costs ~20 ns through the vDSO, a few percent of a pipelined
//! GET. On x86-64 the time-stamp counter is read directly (~7 ns) and converted to
//! microseconds with a rate measured once at start-up against the OS clock; elsewhere the OS
//! clock is used. Only durations are derived from it, never wall-clock time.
//!
//! `unsafe` appears only because `_rdtsc` is declared unsafe in `core::arch`: it reads a
//! register and has no memory-safety preconditions.
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Ticks per microsecond, measured once.
static TICKS_PER_US: OnceLock<f64> = OnceLock::new();

/// A point in time in ticks.
#[derive(Debug, Clone, Copy)]
pub struct Tick(u64);

#[cfg(target_arch = "x86_64")]
fn raw() -> u64 {
    // SAFETY: reads the time-stamp counter; no preconditions (see the module doc).
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn raw() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn ticks_per_us() -> f64 {
    *TICKS_PER_US.get_or_init(|| {
        let (t0, i0) = (raw(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (t1, i1) = (raw(), Instant::now());
        let us = i1.duration_since(i0).as_secs_f64() * 1e6;
        let rate = (t1.wrapping_sub(t0)) as f64 / us;
        if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            1000.0
        }
    })
}

/// What INFO's `monotonic_clock` says of the clock durations are measured with.
pub fn describe() -> String {
    if cfg!(target_arch = "x86_64") {
        format!("X86 TSC @ {} ticks/us", ticks_per_us() as u64)
    } else {
        "POSIX clock_gettime".to_string()
    }
}

/// Measure the tick rate now (at start-up) rather than on the first command.
pub fn calibrate() {
    let _ = ticks_per_us();
}

impl Tick {
    /// Now.
    pub fn now() -> Tick {
        Tick(raw())
    }

    /// The counter's value (never 0 in practice: it counts from the machine's start).
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The tick [`Tick::raw`] gave.
    pub fn from_raw(raw: u64) -> Tick {
        Tick(raw)
    }

    /// Microseconds from `earlier` to `self` (0 if the counter went backwards).
    pub fn micros_since(self, earlier: Tick) -> u64 {
        let d = self.0.saturating_sub(earlier.0);
        (d as f64 / ticks_per_us()) as u64
    }

    /// Nanoseconds from `earlier` to `self` (0 if the counter went backwards).
    pub fn nanos_since(self, earlier: Tick) -> u64 {
        let d = self.0.saturating_sub(earlier.0);
        (d as f64 * 1000.0 / ticks_per_us()) as u64
    }
}

/// The current time in Unix milliseconds: the only clock the engine sees.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The current time in Unix microseconds.
pub fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}
