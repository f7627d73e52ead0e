//! The restart fuzz of `tests/it/restart_fuzz.rs` for as long as asked: one seed after another
//! (alternating `appendfsync always` and `everysec`), each in a fresh directory, until the time
//! is up; then the seeds tried and every finding. Used by `bench/restart_fuzz.sh`.
//!
//! ```text
//! restart_fuzz [--minutes 60 | --count N] [--seed FIRST] [--rounds 8] [--steps 600]
//!              [--fsync always|everysec] [--keep DIR]
//! ```
//!
//! Exits 0 if no seed found anything, 1 otherwise. `--keep DIR` keeps the data directory of
//! each seed with a finding under DIR (its server log included).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

#[path = "../tests/restart_fuzz/mod.rs"]
mod restart_fuzz;

use restart_fuzz::{Fuzz, Params};
use rill_testkit::TempDir;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let minutes: u64 = opt("--minutes").map_or(60, |v| v.parse().expect("--minutes: a number"));
    let first: u64 = opt("--seed").map_or_else(
        || SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(1),
        |v| v.parse().expect("--seed: a number"),
    );
    let rounds: usize = opt("--rounds").map_or(8, |v| v.parse().expect("--rounds: a number"));
    let steps: usize = opt("--steps").map_or(600, |v| v.parse().expect("--steps: a number"));
    let keep = opt("--keep").map(std::path::PathBuf::from);
    let count: Option<u64> = opt("--count").map(|v| v.parse().expect("--count: a number"));
    let fixed_fsync = opt("--fsync");
    let deadline = Instant::now() + Duration::from_secs(minutes * 60);
    let started = Instant::now();
    let mut findings = Vec::new();
    let mut tried = 0u64;
    let mut seed = first;
    println!("restart fuzz: seeds from {first}, {rounds} rounds of {steps} steps each, for {minutes} min");
    while count.map_or(Instant::now() < deadline, |n| tried < n) {
        let fsync = match fixed_fsync.as_deref() {
            Some("always") => "always",
            Some("everysec") => "everysec",
            _ if seed.is_multiple_of(2) => "always",
            _ => "everysec",
        };
        let dir = TempDir::new("rill-restart-fuzz");
        let params = Params { seed, rounds, steps, fsync, cut_last_record: false };
        let t = Instant::now();
        match Fuzz::new(params, dir.path()).run() {
            Ok(stats) => println!("seed {seed} ({fsync}) ok in {:.1} s: {stats}", t.elapsed().as_secs_f64()),
            Err(finding) => {
                println!("seed {seed} ({fsync}) FINDING:\n{finding}");
                if let Some(keep) = &keep {
                    let dest = keep.join(format!("seed-{seed}"));
                    let _ = std::fs::create_dir_all(&dest);
                    let _ = copy_dir(dir.path(), &dest);
                    println!("  data directory kept in {}", dest.display());
                }
                findings.push((seed, finding.lines().next().unwrap_or_default().to_string()));
            }
        }
        tried += 1;
        seed += 1;
    }
    println!(
        "\nrestart fuzz: {tried} seeds ({first}..{}) in {:.0} min, {} with findings",
        seed.saturating_sub(1),
        started.elapsed().as_secs_f64() / 60.0,
        findings.len()
    );
    for (seed, first_line) in &findings {
        println!("  seed {seed}: {first_line}");
    }
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dest = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            std::fs::create_dir_all(&dest)?;
            copy_dir(&e.path(), &dest)?;
        } else {
            std::fs::copy(e.path(), dest)?;
        }
    }
    Ok(())
}
