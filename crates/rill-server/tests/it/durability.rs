//! Kill-and-restart tests of the append-only log: a load generator pipelines XADD and
//! XREADGROUP/XACK against the server, `kill -9` ends it at a random moment, it restarts in
//! the same directory, and everything it acknowledged must still be there (`killtest/`).
//!
//! The same tests run against Redis 7.0.15 (`appendonly yes`), which must pass them too: a
//! failure there is a bug in the harness, not in rill. `bench/durability.sh` runs the same
//! harness with 20 larger rounds per policy.
//!
//! `RILL_KILLTEST_SEED=N` repeats a run's random choices (each run prints its seed).

use crate::killtest::process::{Flavor, Fsync, ServerSpec};
use crate::killtest::Config;
use rill_testkit::{ReferenceServer, Server, ServerKind, TempDir};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// CI rounds per policy: small, about 3 s of load each.
const ALWAYS_ROUNDS: usize = 3;
const EVERYSEC_ROUNDS: usize = 2;

fn spec(kind: ServerKind, binary: PathBuf, fsync: Fsync) -> ServerSpec {
    ServerSpec {
        flavor: match kind {
            ServerKind::Rill => Flavor::Rill,
            ServerKind::Redis(_) => Flavor::Redis,
        },
        binary,
        fsync,
        appendonly: true,
        extra: Vec::new(),
    }
}

fn run(spec: &ServerSpec, rounds: usize) {
    let work = TempDir::new("rill-killtest");
    let cfg = Config::ci(rounds, crate::killtest::seed_from_env());
    if let Err(e) = crate::killtest::run(spec, &cfg, work.path()) {
        panic!("{e}");
    }
}

fn redis7(fsync: Fsync) -> Option<ServerSpec> {
    let which = ReferenceServer::Redis7;
    let binary = which.require()?;
    Some(spec(ServerKind::Redis(which), binary, fsync))
}

#[test]
fn kill9_appendfsync_always_loses_nothing_acknowledged() {
    let (kind, binary) = Server::subject_binary();
    run(&spec(kind, binary, Fsync::Always), ALWAYS_ROUNDS);
}

#[test]
fn kill9_appendfsync_everysec_loses_at_most_the_last_seconds() {
    let (kind, binary) = Server::subject_binary();
    run(&spec(kind, binary, Fsync::Everysec), EVERYSEC_ROUNDS);
}

/// Harness self-check: Redis 7.0.15 with `appendfsync always` passes.
#[test]
fn redis7_kill9_appendfsync_always_passes_the_harness() {
    if let Some(spec) = redis7(Fsync::Always) {
        run(&spec, ALWAYS_ROUNDS);
    }
}

/// Harness self-check: Redis 7.0.15 with `appendfsync everysec` passes.
#[test]
fn redis7_kill9_appendfsync_everysec_passes_the_harness() {
    if let Some(spec) = redis7(Fsync::Everysec) {
        run(&spec, EVERYSEC_ROUNDS);
    }
}

/// Harness self-check the other way: with `appendonly no` everything is lost at the kill, and
/// the harness must say so.
#[test]
fn harness_detects_loss_on_redis7_without_a_log() {
    let Some(mut spec) = redis7(Fsync::Always) else {
        return;
    };
    spec.appendonly = false;
    let err = run_expecting_failure(&spec, None);
    assert!(err.contains("no such key"), "unexpected failure: {err}");
}

/// Harness self-check: cutting the tail off Redis' log after the kill (Redis then loads the
/// truncated log, `aof-load-truncated yes`) loses acknowledged writes, which must be reported.
#[test]
fn harness_detects_a_cut_log_tail_on_redis7() {
    let Some(spec) = redis7(Fsync::Always) else {
        return;
    };
    let err = run_expecting_failure(&spec, Some(cut_log_tail));
    assert!(err.contains("acknowledged XADD missing"), "unexpected failure: {err}");
}

fn run_expecting_failure(spec: &ServerSpec, tamper: Option<fn(&Path)>) -> String {
    let work = TempDir::new("rill-killtest-negative");
    let mut cfg = Config::ci(1, crate::killtest::seed_from_env());
    cfg.kill_window = Duration::from_millis(200);
    cfg.tamper = tamper;
    let err = crate::killtest::run(spec, &cfg, work.path()).expect_err("the harness missed a loss");
    println!("detected as expected: {err}");
    err
}

/// Truncates the largest `*.aof` file under `dir` to 90 % of its length.
fn cut_log_tail(dir: &Path) {
    fn walk(dir: &Path, out: &mut Vec<(u64, PathBuf)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "aof") {
                out.push((entry.metadata().unwrap().len(), path));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    let (len, path) = files.into_iter().max().expect("no *.aof file to cut");
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len * 9 / 10).unwrap();
}
