//! Memory accounting: a global allocator that wraps the system allocator and counts live
//! bytes, so INFO `used_memory` and the `maxmemory` check (`-OOM`, dispatch.rs) see what the process really holds.
//!
//! This is the only module with `unsafe`: implementing `GlobalAlloc` is an unsafe trait by
//! definition. Each method forwards to `System` with the caller's layout unchanged, so the
//! safety contract is exactly the one the caller already upholds; we only add counters.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// The counting allocator.
#[derive(Debug)]
pub struct Counting;

static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

fn added(n: usize) {
    let now = ALLOCATED.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
    if now > PEAK.load(Ordering::Relaxed) {
        PEAK.store(now, Ordering::Relaxed);
    }
}

// SAFETY: every call forwards to `System` with the same arguments; see the module doc.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            added(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) };
        ALLOCATED.fetch_sub(layout.size() as u64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            ALLOCATED.fetch_sub(layout.size() as u64, Ordering::Relaxed);
            added(new_size);
        }
        p
    }
}

/// Live heap bytes.
pub fn allocated_bytes() -> u64 {
    ALLOCATED.load(Ordering::Relaxed)
}

/// Heap bytes once start-up was done (INFO `used_memory_startup`).
static STARTUP: AtomicU64 = AtomicU64::new(0);

/// Record the heap as start-up left it (before the data is loaded).
pub fn mark_startup() {
    STARTUP.store(allocated_bytes(), Ordering::Relaxed);
}

/// When the cron last saw the peak grow, Unix seconds, and the peak it saw.
static PEAK_TIME: AtomicU64 = AtomicU64::new(0);
static PEAK_SEEN: AtomicU64 = AtomicU64::new(0);

/// Called by the cron: if the peak grew since the last call, it was reached about now (the
/// allocator itself reads no clock).
pub fn note_peak_time(now_secs: u64) {
    let peak = peak_bytes();
    if peak > PEAK_SEEN.swap(peak, Ordering::Relaxed) {
        PEAK_TIME.store(now_secs, Ordering::Relaxed);
    }
}

/// The most bytes allocated the cron has seen since memory was last given back.
static HELD_HIGH: AtomicU64 = AtomicU64::new(0);

/// The bytes allocated at the cron's previous look.
static LAST_SEEN: AtomicU64 = AtomicU64::new(0);

/// Called by the cron, without the state lock: when at least `min_freed` bytes were freed
/// since the most the cron saw allocated — or an eighth of that and the freeing has stopped
/// (nothing freed since its previous look: a trim made half-way through a bulk free would
/// otherwise keep the rest until as much again is freed) — ask the allocator to give its free
/// pages back to the system. glibc's malloc keeps freed memory in its arenas (10,000 closed
/// connections left their RSS behind); `malloc_trim` releases the free pages of every arena,
/// not only the top of the heap. Returns whether it asked. A no-op where the allocator is not
/// glibc's.
pub fn release_freed(min_freed: u64) -> bool {
    let now = allocated_bytes();
    let high = HELD_HIGH.fetch_max(now, Ordering::Relaxed).max(now);
    let last = LAST_SEEN.swap(now, Ordering::Relaxed);
    let freed = high - now;
    let settled = now >= last && freed >= min_freed / 8;
    if freed < min_freed && !settled {
        return false;
    }
    HELD_HIGH.store(now, Ordering::Relaxed);
    trim();
    true
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointer and only walks glibc's own arenas, under their
    // locks; it may be called at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

/// When `peak_bytes` was reached, Unix seconds, as the cron saw it (0: not yet).
pub fn peak_time_secs() -> u64 {
    PEAK_TIME.load(Ordering::Relaxed)
}

/// `used_memory_startup`.
pub fn startup_bytes() -> u64 {
    STARTUP.load(Ordering::Relaxed)
}

/// The machine's memory from /proc/meminfo (0 where unavailable).
pub fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Highest `allocated_bytes` seen.
pub fn peak_bytes() -> u64 {
    PEAK.load(Ordering::Relaxed)
}

/// Resident set size from /proc (0 where unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// (user, system) CPU seconds from /proc (0 where unavailable).
pub fn cpu_seconds() -> (f64, f64) {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else { return (0.0, 0.0) };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let Some(rest) = s.rsplit(')').next() else { return (0.0, 0.0) };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
}
