//! Latency: per-command duration histograms (`latency-tracking`: INFO latencystats, LATENCY
//! HISTOGRAM) and the latency monitor's events (`latency-monitor-threshold`: LATENCY LATEST,
//! HISTORY, GRAPH, RESET, DOCTOR).
//!
//! A histogram counts durations in nanoseconds, from 1 ns to 1 s, in bins that keep two
//! significant decimal digits — the layout of the HDR histogram Redis keeps per command: 256
//! one-nanosecond bins below 256 ns, then per power of two 128 bins each twice as wide as the
//! power before. Reported values are a bin's highest value, so percentiles and the cumulative
//! steps of LATENCY HISTOGRAM (at 1024·2ᵏ ns, reported in whole microseconds: 1, 2, 4, 8, 16,
//! 33, 66, ...) are the figures Redis reports for the same durations. rill measures in whole
//! microseconds (`clock::Tick`), as Redis does, and records `µs × 1000`.
//!
//! An event of the monitor keeps its newest 160 samples, at most one per second (the largest
//! of that second), in milliseconds, with its all-time high.

use std::collections::BTreeMap;

/// Bins per power of two beyond the first 256 (two significant digits need 2 × 10² values
/// told apart: 256 bins, the upper half of each power being 128).
const HALF: u64 = 128;
/// The largest value kept: 1 s in ns (larger ones count as 1 s).
const MAX_NS: u64 = 1_000_000_000;
/// Bins: enough powers of two to reach `MAX_NS` (2³⁰ > 10⁹).
const BINS: usize = ((30 - 7 + 1) * HALF) as usize;

/// One command's durations.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BINS]>,
    total: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram").field("total", &self.total).finish_non_exhaustive()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: Box::new([0; BINS]), total: 0 }
    }
}

/// The power of two (above the first 256 values) `ns` falls in: 0 for values below 256.
fn bucket(ns: u64) -> u32 {
    // Bits needed for `ns` with at least the first 8: 8 → bucket 0, 9 → 1, ...
    (64 - (ns | 0xff).leading_zeros()) - 8
}

/// The bin of `ns` (1 ≤ ns ≤ MAX_NS).
fn index(ns: u64) -> usize {
    let b = bucket(ns);
    let sub = ns >> b; // 0..256 in bucket 0, 128..256 above
    (u64::from(b) * HALF + sub) as usize
}

/// The lowest value of bin `i`, and its width.
fn bin_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * HALF {
        (i, 1)
    } else {
        let b = i / HALF - 1;
        let sub = i % HALF + HALF;
        (sub << b, 1 << b)
    }
}

/// The highest value of the bin holding `ns`.
fn highest_equivalent(ns: u64) -> u64 {
    let (low, width) = bin_range(index(ns.clamp(1, MAX_NS)));
    low + width - 1
}

impl Histogram {
    /// Count one duration of `micros` microseconds.
    pub fn record_micros(&mut self, micros: u64) {
        let ns = micros.saturating_mul(1000).clamp(1, MAX_NS);
        if let Some(c) = self.counts.get_mut(index(ns)) {
            *c += 1;
            self.total += 1;
        }
    }

    /// Durations counted at or below `micros` µs (a bin straddling the bound counts when its
    /// lowest value is within it).
    pub fn count_at_or_below_micros(&self, micros: u64) -> u64 {
        let top = micros.saturating_mul(1000).clamp(1, MAX_NS);
        let last = index(top);
        self.counts.iter().take(last + 1).sum()
    }

    /// Durations counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The duration (ns, a bin's highest value) at or below which `percentile` % of the
    /// durations fall (0 with nothing counted).
    pub fn value_at_percentile(&self, percentile: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let p = percentile.min(100.0);
        let wanted = ((p / 100.0 * self.total as f64) + 0.5) as u64;
        let wanted = wanted.max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= wanted {
                let (low, width) = bin_range(i);
                return if percentile == 0.0 { low } else { low + width - 1 };
            }
        }
        0
    }

    /// LATENCY HISTOGRAM's steps: (microseconds, durations at or below them) at 1024·2ᵏ ns,
    /// only where the count grew, up to the step that holds every duration.
    pub fn steps(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let (mut seen, mut prev, mut i) = (0u64, 0u64, 0usize);
        let mut level = 1024u64;
        while prev < self.total && level <= 2 * MAX_NS {
            let top = highest_equivalent(level.min(MAX_NS));
            while i < BINS && bin_range(i).0 <= top {
                seen += self.counts.get(i).copied().unwrap_or(0);
                i += 1;
            }
            if seen > prev {
                out.push((top / 1000, seen));
                prev = seen;
            }
            level *= 2;
        }
        out
    }
}

/// How many samples an event keeps.
const SAMPLES: usize = 160;

/// One event's samples: (Unix seconds, milliseconds), oldest first.
#[derive(Debug, Default, Clone)]
pub struct Series {
    samples: std::collections::VecDeque<(i64, u64)>,
    /// The largest sample ever, ms.
    pub max: u64,
}

impl Series {
    /// The samples kept, oldest first.
    pub fn samples(&self) -> impl Iterator<Item = &(i64, u64)> {
        self.samples.iter()
    }

    /// The newest sample.
    pub fn latest(&self) -> Option<(i64, u64)> {
        self.samples.back().copied()
    }
}

/// The latency monitor: events by name.
#[derive(Debug, Default)]
pub struct Monitor {
    events: BTreeMap<String, Series>,
}

impl Monitor {
    /// Record `ms` for `event` at `unix_secs` if `threshold_ms` (> 0) says so.
    pub fn sample_if_needed(&mut self, threshold_ms: u64, event: &str, ms: u64, unix_secs: i64) {
        if threshold_ms > 0 && ms >= threshold_ms {
            self.sample(event, ms, unix_secs);
        }
    }

    /// Record `ms` for `event` at `unix_secs`.
    pub fn sample(&mut self, event: &str, ms: u64, unix_secs: i64) {
        let s = self.events.entry(event.to_string()).or_default();
        s.max = s.max.max(ms);
        if let Some(last) = s.samples.back_mut() {
            if last.0 == unix_secs {
                last.1 = last.1.max(ms);
                return;
            }
        }
        if s.samples.len() == SAMPLES {
            s.samples.pop_front();
        }
        s.samples.push_back((unix_secs, ms));
    }

    /// Every event, by name.
    pub fn events(&self) -> impl Iterator<Item = (&str, &Series)> {
        self.events.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// One event.
    pub fn event(&self, name: &[u8]) -> Option<(&str, &Series)> {
        let name = std::str::from_utf8(name).ok()?;
        self.events.get_key_value(name).map(|(k, v)| (k.as_str(), v))
    }

    /// Forget `name` (compared without case), or every event: how many were forgotten.
    pub fn reset(&mut self, name: Option<&[u8]>) -> usize {
        let before = self.events.len();
        match name {
            None => self.events.clear(),
            Some(n) => self.events.retain(|k, _| !k.as_bytes().eq_ignore_ascii_case(n)),
        }
        before - self.events.len()
    }

    /// Whether any event was recorded.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// LATENCY GRAPH's text: a header Redis' tools read (`<event> - high <n> ms, low <n> ms (all
/// time high <n> ms)`), a rule, then one column per sample (oldest left, at most 80), its
/// height a quarter of the range per row, and under it how long ago it was taken.
pub fn graph(event: &str, s: &Series, now_secs: i64) -> String {
    let samples: Vec<(i64, u64)> = s.samples().copied().collect();
    let skip = samples.len().saturating_sub(80);
    let shown = samples.get(skip..).unwrap_or(&[]);
    let high = shown.iter().map(|x| x.1).max().unwrap_or(0);
    let low = shown.iter().map(|x| x.1).min().unwrap_or(0);
    let mut out = format!("{event} - high {high} ms, low {low} ms (all time high {} ms)\n", s.max);
    out.push_str(&"-".repeat(80));
    out.push('\n');
    const ROWS: u64 = 4;
    for row in (1..=ROWS).rev() {
        let line: String = shown
            .iter()
            .map(|&(_, ms)| {
                // The column's height in rows (1..=ROWS): the lowest sample one row, the
                // highest all of them.
                let h = if high == low { ROWS } else { 1 + (ms - low) * (ROWS - 1) / (high - low) };
                if h >= row {
                    '#'
                } else {
                    ' '
                }
            })
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    // Labels, written downwards: "12s", "3m", "2h", "1d".
    let labels: Vec<Vec<char>> = shown
        .iter()
        .map(|&(t, _)| {
            let ago = (now_secs - t).max(0);
            let text = match ago {
                0..=59 => format!("{ago}s"),
                60..=3599 => format!("{}m", ago / 60),
                3600..=86_399 => format!("{}h", ago / 3600),
                _ => format!("{}d", ago / 86_400),
            };
            text.chars().collect()
        })
        .collect();
    let depth = labels.iter().map(Vec::len).max().unwrap_or(0);
    for d in 0..depth {
        let line: String = labels.iter().map(|l| l.get(d).copied().unwrap_or(' ')).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// LATENCY DOCTOR's report, in rill's words: per event its samples, average, spread and
/// worst, then what to look at for the kinds of events seen.
pub fn doctor(m: &Monitor, threshold_ms: u64) -> String {
    if m.is_empty() {
        return if threshold_ms == 0 {
            "The latency monitor is off (latency-monitor-threshold 0), so there is nothing to report. \
             Turn it on with CONFIG SET latency-monitor-threshold <milliseconds>.\n"
                .to_string()
        } else {
            format!("No event has taken {threshold_ms} ms or more since the monitor was last reset.\n")
        };
    }
    let mut out = String::from("Latency events recorded (newest 160 samples of each, in milliseconds):\n\n");
    let mut advice = Vec::new();
    for (i, (name, s)) in m.events().enumerate() {
        let n = s.samples.len() as u64;
        let sum: u64 = s.samples.iter().map(|x| x.1).sum();
        let avg = sum.checked_div(n).unwrap_or(0);
        let mean_dev = s.samples.iter().map(|x| x.1.abs_diff(avg)).sum::<u64>().checked_div(n).unwrap_or(0);
        let first = s.samples.front().map_or(0, |x| x.0);
        let last = s.samples.back().map_or(0, |x| x.0);
        out.push_str(&format!(
            "{}. {name}: {n} samples over {} s, average {avg} ms, mean deviation {mean_dev} ms, worst {} ms.\n",
            i + 1,
            (last - first).max(0),
            s.max
        ));
        let hint = match name {
            "command" => {
                Some("Slow commands: SLOWLOG GET names them; O(N) commands over large keys are the usual cause.")
            }
            "fast-command" => Some("O(1) commands were slow: the process was starved of CPU or swapped out."),
            n if n.starts_with("aof") => {
                Some("The log waited for the disk: a slower appendfsync or faster storage helps.")
            }
            "expire-cycle" => Some("Many keys expired at once: spread the expiry times."),
            _ => None,
        };
        if let Some(h) = hint {
            advice.push(h);
        }
    }
    if !advice.is_empty() {
        out.push_str("\nWhat to look at:\n");
        for a in advice {
            out.push_str("- ");
            out.push_str(a);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn bins_keep_two_digits() {
        // Exact below 256 ns, then widths doubling per power of two.
        assert_eq!(highest_equivalent(1), 1);
        assert_eq!(highest_equivalent(255), 255);
        assert_eq!(highest_equivalent(256), 257);
        assert_eq!(highest_equivalent(1000), 1003);
        assert_eq!(highest_equivalent(1024), 1031);
        assert_eq!(highest_equivalent(2000), 2007);
        assert_eq!(highest_equivalent(32768), 33023);
        for ns in [1u64, 7, 255, 256, 999, 1000, 4097, 123_456, 999_999_999, MAX_NS] {
            let (low, width) = bin_range(index(ns));
            assert!(low <= ns && ns < low + width, "{ns} in [{low}, {})", low + width);
        }
        assert!(index(MAX_NS) < BINS);
    }

    #[test]
    fn percentiles_as_redis_reports_them() {
        let mut h = Histogram::default();
        for _ in 0..99 {
            h.record_micros(1);
        }
        h.record_micros(3);
        assert_eq!(h.value_at_percentile(50.0), 1003);
        assert_eq!(h.value_at_percentile(99.0), 1003);
        assert_eq!(h.value_at_percentile(99.9), 3007);
        assert_eq!(h.value_at_percentile(100.0), 3007);
        assert_eq!(Histogram::default().value_at_percentile(50.0), 0);
        // Beyond a second counts as a second.
        h.record_micros(5_000_000);
        assert_eq!(h.value_at_percentile(100.0), highest_equivalent(MAX_NS));
    }

    #[test]
    fn steps_grow_in_powers_of_two() {
        let mut h = Histogram::default();
        h.record_micros(0);
        h.record_micros(1);
        h.record_micros(2);
        h.record_micros(33);
        h.record_micros(40);
        assert_eq!(h.steps(), [(1, 2), (2, 3), (33, 4), (66, 5)]);
        assert!(Histogram::default().steps().is_empty());
        let mut big = Histogram::default();
        big.record_micros(10_000_000);
        assert_eq!(big.steps().last().unwrap().1, 1);
    }

    #[test]
    fn monitor_keeps_the_largest_per_second_and_160_samples() {
        let mut m = Monitor::default();
        m.sample_if_needed(0, "command", 500, 1);
        assert!(m.is_empty(), "threshold 0: off");
        m.sample_if_needed(100, "command", 99, 1);
        assert!(m.is_empty());
        m.sample_if_needed(100, "command", 300, 1);
        m.sample_if_needed(100, "command", 200, 1);
        m.sample_if_needed(100, "command", 400, 2);
        let (_, s) = m.event(b"command").unwrap();
        assert_eq!(s.samples().copied().collect::<Vec<_>>(), [(1, 300), (2, 400)]);
        assert_eq!(s.max, 400);
        for t in 3..400 {
            m.sample("command", 1, t);
        }
        let (_, s) = m.event(b"command").unwrap();
        assert_eq!(s.samples().count(), SAMPLES);
        assert_eq!(s.max, 400);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert_eq!(m.reset(Some(b"nothing")), 0);
    }

    #[test]
    fn graph_header_and_doctor() {
        let mut m = Monitor::default();
        m.sample("command", 300, 100);
        m.sample("command", 500, 102);
        let (name, s) = m.event(b"command").unwrap();
        let g = graph(name, s, 110);
        assert!(g.starts_with("command - high 500 ms, low 300 ms (all time high 500 ms)\n"), "{g}");
        // Labels run downwards: "10s" and "8s" under the two columns.
        assert!(g.lines().any(|l| l == "18") && g.lines().any(|l| l == "0s"), "{g}");
        assert!(doctor(&m, 100).contains("command: 2 samples"));
        assert!(!doctor(&Monitor::default(), 0).is_empty());
    }
}
