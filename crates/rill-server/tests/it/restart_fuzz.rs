//! The restart fuzz (`tests/restart_fuzz/mod.rs`) in CI: fixed seeds that stay as regressions,
//! one fresh seed per CI run (printed; `RILL_FUZZ_SEED` replays it), and the negative control
//! that shows the harness reports a lost record. `bench/restart_fuzz.sh` runs it for an hour.

use crate::restart_fuzz::{Fuzz, Params};
use rill_testkit::TempDir;

/// One run in a fresh directory; panics with the finding.
fn run(seed: u64, fsync: &'static str, rounds: usize, steps: usize) {
    let dir = TempDir::new("rill-restart-fuzz");
    let params = Params { seed, rounds, steps, fsync, cut_last_record: false };
    match Fuzz::new(params, dir.path()).run() {
        Ok(stats) => eprintln!("restart fuzz seed {seed} ({fsync}): {stats}"),
        Err(finding) => panic!("{finding}\nserver log:\n{}", tail(dir.path())),
    }
}

fn tail(dir: &std::path::Path) -> String {
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Seeds that found something once, and a spread of others; `RILL_FUZZ_SEED` replaces them.
#[test]
fn fixed_seeds_under_always() {
    if let Ok(seed) = std::env::var("RILL_FUZZ_SEED") {
        run(seed.parse().expect("RILL_FUZZ_SEED: a number"), "always", 6, 400);
        return;
    }
    for seed in [1, 2, 3] {
        run(seed, "always", 6, 400);
    }
}

#[test]
fn fixed_seeds_under_everysec() {
    if std::env::var("RILL_FUZZ_SEED").is_ok() {
        return;
    }
    for seed in [11, 12] {
        run(seed, "everysec", 6, 400);
    }
}

/// A seed never tried before, in CI and `scripts/test` (`rill_testkit::fresh_seed`: the run
/// prints it, `RILL_FUZZ_SEED` replays it, with the same `appendfsync`); counted as skipped in
/// a plain `cargo test`.
#[test]
fn a_fresh_seed() {
    let Some(seed) = rill_testkit::fresh_seed() else { return };
    run(seed, if seed.is_multiple_of(2) { "always" } else { "everysec" }, 6, 400);
}

/// The harness sees a loss: the log's last record cut off before the restart must be reported.
#[test]
fn the_harness_reports_a_lost_record() {
    let dir = TempDir::new("rill-restart-fuzz-control");
    let params = Params { seed: 5, rounds: 1, steps: 200, fsync: "always", cut_last_record: true };
    let finding = Fuzz::new(params, dir.path()).run().expect_err("a cut log tail must be reported");
    assert!(finding.contains("fuzz:last"), "{finding}");
}
