//! The kill test of `tests/it/durability.rs` at bench size, against any binary, plus the
//! readiness probe `bench/durability.sh` times restarts with.
//!
//! ```text
//! killtest run --bin PATH --fsync always|everysec [--rounds 20] [--seed N] [--work DIR]
//!              [--flavor rill|redis] [--producers 4] [--window 64] [--consumers 2]
//!              [--read-count 100] [--value-bytes 24] [--max-rate 100000] [--warmup-ms 1000]
//!              [--kill-window-ms 3000] [--max-loss-ms 2000] [-- EXTRA SERVER ARGS...]
//! killtest wait-ready --port P [--timeout-secs 120]
//! ```
//!
//! `run` exits 0 if every round passed, 1 otherwise (the findings on stderr). The flavor
//! (which command-line convention) defaults to `redis` when the binary's name contains
//! `redis`. `wait-ready` polls every millisecond until PING answers PONG and
//! `INFO persistence` says `loading:0`, then prints the milliseconds it waited.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

#[path = "../tests/killtest/mod.rs"]
mod killtest;

use killtest::process::{ready_once, Flavor, Fsync, ServerSpec};
use killtest::Config;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn usage() -> ExitCode {
    eprintln!("usage: killtest run --bin PATH --fsync always|everysec [options] [-- server args]");
    eprintln!("       killtest wait-ready --port P [--timeout-secs N]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("wait-ready") => wait_ready(&args[1..]),
        _ => usage(),
    }
}

fn wait_ready(args: &[String]) -> ExitCode {
    let mut port = None;
    let mut timeout = Duration::from_secs(120);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match (a.as_str(), it.next()) {
            ("--port", Some(v)) => port = v.parse::<u16>().ok(),
            ("--timeout-secs", Some(v)) => timeout = Duration::from_secs(v.parse().unwrap_or(120)),
            _ => return usage(),
        }
    }
    let Some(port) = port else { return usage() };
    let started = Instant::now();
    loop {
        match ready_once(port) {
            Ok(()) => {
                println!("{:.1}", started.elapsed().as_secs_f64() * 1e3);
                return ExitCode::SUCCESS;
            }
            Err(e) if started.elapsed() > timeout => {
                eprintln!("not ready after {timeout:?}: {e}");
                return ExitCode::FAILURE;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

fn run(args: &[String]) -> ExitCode {
    let mut cfg = Config::ci(20, killtest::seed_from_env());
    cfg.window = 64;
    cfg.read_count = 100;
    cfg.warmup = Duration::from_millis(1000);
    cfg.kill_window = Duration::from_millis(3000);
    let mut binary = None;
    let mut fsync = None;
    let mut flavor = None;
    let mut work = None;
    let mut extra = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            extra.extend(it.by_ref().cloned());
            break;
        }
        let Some(v) = it.next() else { return usage() };
        let num = || v.parse::<u64>().ok();
        let ok = match a.as_str() {
            "--bin" => {
                binary = Some(PathBuf::from(v));
                true
            }
            "--fsync" => {
                fsync = Fsync::parse(v);
                fsync.is_some()
            }
            "--flavor" => {
                flavor = match v.as_str() {
                    "rill" => Some(Flavor::Rill),
                    "redis" => Some(Flavor::Redis),
                    _ => None,
                };
                flavor.is_some()
            }
            "--work" => {
                work = Some(PathBuf::from(v));
                true
            }
            "--rounds" => num().map(|n| cfg.rounds = n as usize).is_some(),
            "--seed" => num().map(|n| cfg.seed = n).is_some(),
            "--producers" => num().map(|n| cfg.producers = n as u32).is_some(),
            "--window" => num().map(|n| cfg.window = n as usize).is_some(),
            "--consumers" => num().map(|n| cfg.consumers = n as usize).is_some(),
            "--read-count" => num().map(|n| cfg.read_count = n as usize).is_some(),
            "--value-bytes" => num().map(|n| cfg.value_bytes = n as usize).is_some(),
            "--max-rate" => num().map(|n| cfg.max_rate = n).is_some(),
            "--warmup-ms" => num().map(|n| cfg.warmup = Duration::from_millis(n)).is_some(),
            "--kill-window-ms" => num().map(|n| cfg.kill_window = Duration::from_millis(n)).is_some(),
            "--max-loss-ms" => num().map(|n| cfg.max_loss = Duration::from_millis(n)).is_some(),
            _ => false,
        };
        if !ok {
            eprintln!("bad option {a} {v}");
            return usage();
        }
    }
    let (Some(binary), Some(fsync)) = (binary, fsync) else {
        return usage();
    };
    let flavor = flavor.unwrap_or_else(|| {
        if binary.file_name().is_some_and(|n| n.to_string_lossy().contains("redis")) {
            Flavor::Redis
        } else {
            Flavor::Rill
        }
    });
    let spec = ServerSpec { flavor, binary, fsync, appendonly: true, extra };
    let temp = work.is_none();
    let work = work.unwrap_or_else(|| std::env::temp_dir().join(format!("rill-killtest-{}", std::process::id())));
    if std::fs::read_dir(&work).is_ok_and(|mut d| d.next().is_some()) {
        eprintln!("--work {} is not empty", work.display());
        return ExitCode::from(2);
    }
    let result = killtest::run(&spec, &cfg, &work);
    if temp {
        let _ = std::fs::remove_dir_all(&work);
    }
    match result {
        Ok(reports) => {
            let lost: usize = reports.iter().map(|r| r.stats.lost_adds).sum();
            let acked: usize = reports.iter().map(|r| r.stats.acked_adds).sum();
            let worst = reports
                .iter()
                .filter_map(|r| r.stats.loss_span)
                .max()
                .map(|d| format!(", oldest lost ack {:.0} ms before its kill", d.as_secs_f64() * 1e3))
                .unwrap_or_default();
            println!("PASS {}: {} rounds, {acked} XADDs acknowledged, {lost} lost{worst}", spec.label(), reports.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            let first = e.lines().next().unwrap_or_default();
            let first = first.strip_prefix(&format!("{}: ", spec.label())).unwrap_or(first);
            println!("FAIL {}: {first}", spec.label());
            ExitCode::FAILURE
        }
    }
}
