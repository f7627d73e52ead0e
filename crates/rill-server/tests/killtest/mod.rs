//! The kill test: load a server running with the append-only log on, `kill -9` it at a random
//! moment, restart it in the same directory, and check that everything it acknowledged is
//! still there (see `verify` for exactly what is checked).
//!
//! Shared by `tests/it/durability.rs` (small, in CI) and `examples/killtest.rs` (large, used by
//! `bench/durability.sh`). One run is a sequence of rounds in one data directory:
//!
//! ```text
//! start ──► round 0: XGROUP CREATE kt:0 ─ load ─ kill -9 ─ restart ─ verify kt:0 ─ probe
//!           round 1: XGROUP CREATE kt:1 ─ load ─ kill -9 ─ restart ─ verify kt:1 ─ probe
//!                                                           and kt:0 unchanged ...
//! ```
//!
//! so later rounds also replay a log that has already been recovered (and, on Redis, perhaps
//! rewritten) before. Everything random (kill moment, which deliveries get acknowledged)
//! comes from one seed, printed at the start; timing still varies from run to run.

#![allow(dead_code)] // The test and the example use different parts.

pub mod load;
pub mod process;
pub mod verify;

use load::{LoadParams, StreamId};
use process::{Fsync, ServerProcess, ServerSpec};
use rill_testkit::{RawClient, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use verify::{Failures, RoundLog, Stats};

/// A small seeded PRNG (xorshift64*), so the test needs no `rand`.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 of the seed: any seed (even 0) gives a good nonzero state.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// A seed from `RILL_KILLTEST_SEED` if set, else from the clock.
pub fn seed_from_env() -> u64 {
    std::env::var("RILL_KILLTEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1))
}

/// The shape of one kill-test run.
#[derive(Debug, Clone)]
pub struct Config {
    pub rounds: usize,
    /// Producer connections, each pipelining `window` XADDs.
    pub producers: u32,
    pub window: usize,
    /// Consumer connections in one group.
    pub consumers: usize,
    pub read_count: usize,
    /// Bytes of the `v` field of each entry.
    pub value_bytes: usize,
    /// Cap on acknowledged XADDs per second over all producers (0: none), so a fast server
    /// does not make rounds (and the log every later round replays) huge.
    pub max_rate: u64,
    /// Load always runs at least this long before the kill...
    pub warmup: Duration,
    /// ...plus a random part of this.
    pub kill_window: Duration,
    /// Under `everysec`: how long before the kill an acknowledged write may be and still be
    /// lost (Redis documents up to 2 s when fsync is slow). Zero under `always`.
    pub max_loss: Duration,
    pub seed: u64,
    /// Runs on the data directory between the kill and the restart. Only for the harness'
    /// own negative controls (cutting the log's tail must be reported as loss).
    pub tamper: Option<fn(&Path)>,
}

impl Config {
    /// CI size: a few seconds per round on a debug build.
    pub fn ci(rounds: usize, seed: u64) -> Config {
        Config {
            rounds,
            producers: 4,
            window: 32,
            consumers: 2,
            read_count: 50,
            value_bytes: 24,
            max_rate: 50_000,
            warmup: Duration::from_millis(500),
            kill_window: Duration::from_millis(2000),
            max_loss: Duration::from_secs(2),
            seed,
            tamper: None,
        }
    }

    /// Loss allowed under `fsync`.
    pub fn allowed_loss(&self, fsync: Fsync) -> Duration {
        match fsync {
            Fsync::Always => Duration::ZERO,
            Fsync::Everysec => self.max_loss,
        }
    }
}

/// What one round measured.
#[derive(Debug, Clone)]
pub struct RoundReport {
    pub round: usize,
    pub killed_after: Duration,
    pub restart: Duration,
    pub verify: Duration,
    pub stats: Stats,
}

impl RoundReport {
    pub fn line(&self) -> String {
        let s = &self.stats;
        format!(
            "round {:2}: killed after {:5.2}s | {} XADD acked, {} recovered, {} lost{} | {} delivered, {} XACKed, \
             PEL {} ({} from the cut read), {} group facts lost | restart {:.0} ms, verify {:.0} ms",
            self.round,
            self.killed_after.as_secs_f64(),
            s.acked_adds,
            s.recovered_entries,
            s.lost_adds,
            s.loss_span
                .map(|d| format!(" (oldest {:.0} ms before the kill)", d.as_secs_f64() * 1e3))
                .unwrap_or_default(),
            s.deliveries,
            s.acks,
            s.pel,
            s.unseen_deliveries,
            s.lost_group_facts,
            self.restart.as_secs_f64() * 1e3,
            self.verify.as_secs_f64() * 1e3,
        )
    }
}

/// A cheap fingerprint of a finished round's stream, checked again after every later restart.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Digest {
    len: i64,
    last_generated: StreamId,
    group_last_delivered: StreamId,
    pending: i64,
    first: Option<StreamId>,
    last: Option<StreamId>,
}

fn digest(conn: &mut RawClient, key: &str, group: &str) -> Result<Digest, String> {
    let (last_generated, group_last_delivered) = verify::stream_ids(conn, key, group)?;
    let int = |r: Result<Value, std::io::Error>| match r {
        Ok(Value::Int(n)) => Ok(n),
        other => Err(format!("{other:?}")),
    };
    let len = int(conn.call(&["XLEN", key]))?;
    let pending = match conn.call(&["XPENDING", key, group]) {
        Ok(Value::Array(a)) => match a.first() {
            Some(Value::Int(n)) => *n,
            _ => return Err(format!("XPENDING summary {a:?}")),
        },
        other => return Err(format!("XPENDING summary {other:?}")),
    };
    let edge = |conn: &mut RawClient, cmd: &str, a: &str, b: &str| -> Result<Option<StreamId>, String> {
        let r = conn.call(&[cmd, key, a, b, "COUNT", "1"]).map_err(|e| e.to_string())?;
        Ok(r.as_array()
            .and_then(|a| a.first())
            .and_then(Value::as_array)
            .and_then(|e| e.first())
            .and_then(Value::as_bytes)
            .and_then(StreamId::parse))
    };
    Ok(Digest {
        len,
        last_generated,
        group_last_delivered,
        pending,
        first: edge(conn, "XRANGE", "-", "+")?,
        last: edge(conn, "XREVRANGE", "+", "-")?,
    })
}

/// Runs `cfg.rounds` kill rounds against `spec` with data in `work/data` (created; the server
/// log goes to `work/data.log`). Prints a line per round. Returns the reports, or the first
/// failing round's findings.
pub fn run(spec: &ServerSpec, cfg: &Config, work: &Path) -> Result<Vec<RoundReport>, String> {
    let dir = work.join("data");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    println!(
        "kill test: {} | {} rounds | seed {} (RILL_KILLTEST_SEED={} to repeat) | dir {}",
        spec.label(),
        cfg.rounds,
        cfg.seed,
        cfg.seed,
        dir.display()
    );
    let (mut server, _) = spec.start(&dir, None)?;
    if spec.appendonly {
        // As Redis: `appendonly yes` shows as aof_enabled:1 (a server that ignores the option
        // fails here rather than with a puzzling loss after the first kill).
        let info = connect(&server)?.call(&["INFO", "persistence"]).map_err(|e| e.to_string())?;
        if !info.as_str().unwrap_or_default().lines().any(|l| l.trim_end() == "aof_enabled:1") {
            return Err(format!(
                "{}: started with appendonly yes, but INFO persistence does not say aof_enabled:1:\n{}",
                spec.label(),
                info.as_str().unwrap_or_default()
            ));
        }
    }
    let mut digests: Vec<(String, Digest)> = Vec::new();
    let mut reports = Vec::new();
    let allowed_loss = cfg.allowed_loss(spec.fsync);
    for round in 0..cfg.rounds {
        let mut rng = Rng::new(cfg.seed ^ (round as u64).wrapping_mul(0x100_0000_01b3));
        let key = format!("kt:{round}");
        let group = "g";
        let mut conn = connect(&server)?;
        match conn.call(&["XGROUP", "CREATE", &key, group, "$", "MKSTREAM"]) {
            Ok(Value::Simple(_)) => {}
            other => return Err(format!("XGROUP CREATE {key}: {other:?}")),
        }
        // Under everysec the previous round's probes and this XGROUP CREATE must be older
        // than the loss window at the kill, or they could legitimately be lost.
        let warmup = cfg.warmup.max(allowed_loss + Duration::from_millis(500));
        let kill_after = warmup + Duration::from_millis(rng.below(cfg.kill_window.as_millis() as u64 + 1));

        let (log, killed_after) = load_and_kill(&mut server, cfg, &key, group, kill_after, &mut rng)?;
        if let Some(tamper) = cfg.tamper {
            tamper(&dir);
        }
        let (restarted, restart) = spec.start(&dir, Some(server.port))?;
        server = restarted;

        let started = Instant::now();
        let mut conn = connect(&server)?;
        let mut f = Failures::default();
        for p in &log.producers {
            if let Some(e) = &p.failure {
                f.add("unexpected reply during load", format!("producer {}: {e}", p.producer));
            }
            check_ended_by_kill(&p.ended, log.killed_at, &format!("producer {}", p.producer), &mut f);
        }
        for c in &log.consumers {
            if let Some(e) = &c.failure {
                f.add("unexpected reply during load", format!("{}: {e}", c.name));
            }
            check_ended_by_kill(&c.ended, log.killed_at, &c.name, &mut f);
        }
        let mut bad = Vec::new();
        let rec = verify::read_back(&mut conn, &key, group, cfg.value_bytes, &mut bad).map_err(|e| {
            let acked: usize = log.producers.iter().map(|p| p.acked.len()).sum();
            format!(
                "{} round {round} (seed {}): reading back {key} after the restart: {e}\n\
                 ({acked} XADDs to it had been acknowledged before the kill)\nserver log tail:\n{}",
                spec.label(),
                cfg.seed,
                process::log_tail(&dir)
            )
        })?;
        for b in bad {
            f.add("entry with wrong fields", b);
        }
        let stats = verify::check(&log, &rec, allowed_loss, &mut f);
        for (k, d) in &digests {
            match digest(&mut conn, k, group) {
                Ok(now) if now == *d => {}
                Ok(now) => f.add("an earlier round's stream changed", format!("{k}: was {d:?}, now {now:?}")),
                Err(e) => f.add("an earlier round's stream changed", format!("{k}: {e}")),
            }
        }
        probe(&mut conn, &key, group, &rec, &mut f);
        let report = RoundReport { round, killed_after, restart, verify: started.elapsed(), stats };
        println!("{}", report.line());
        if !f.is_empty() {
            return Err(format!(
                "{} round {round} (seed {}): {}\n{}\nserver log tail:\n{}",
                spec.label(),
                cfg.seed,
                report.line(),
                f.report(),
                process::log_tail(&dir)
            ));
        }
        digests.push((key.clone(), digest(&mut conn, &key, group)?));
        reports.push(report);
    }
    drop(server);
    Ok(reports)
}

fn connect(server: &ServerProcess) -> Result<RawClient, String> {
    RawClient::try_connect_timeout(server.port, Duration::from_secs(60)).map_err(|e| format!("connect: {e}"))
}

/// Load threads may only lose their connection because of the kill.
fn check_ended_by_kill(ended: &Option<(String, Instant)>, killed_at: Instant, who: &str, f: &mut Failures) {
    if let Some((e, at)) = ended {
        if *at < killed_at {
            f.add("connection lost before the kill", format!("{who}: {e}"));
        }
    }
}

/// Starts the producers and consumers, kills the server after `kill_after`, collects logs.
fn load_and_kill(
    server: &mut ServerProcess,
    cfg: &Config,
    key: &str,
    group: &str,
    kill_after: Duration,
    rng: &mut Rng,
) -> Result<(RoundLog, Duration), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let params = LoadParams {
        port: server.port,
        key: key.to_owned(),
        group: group.to_owned(),
        window: cfg.window,
        read_count: cfg.read_count,
        value_bytes: cfg.value_bytes,
        rate_per_producer: cfg.max_rate / u64::from(cfg.producers.max(1)),
        stop: stop.clone(),
    };
    let started = Instant::now();
    let producers: Vec<_> = (0..cfg.producers)
        .map(|p| {
            let params = params.clone();
            std::thread::spawn(move || load::run_producer(params, p))
        })
        .collect();
    let consumers: Vec<_> = (0..cfg.consumers)
        .map(|c| {
            let params = params.clone();
            let rng = Rng::new(rng.next_u64());
            std::thread::spawn(move || load::run_consumer(params, format!("c{c}"), rng))
        })
        .collect();
    std::thread::sleep(kill_after);
    let killed_at = Instant::now();
    server.kill9();
    let killed_after = killed_at - started;
    // The threads end on their own (their connections fail); stop is a backstop.
    stop.store(true, Ordering::Relaxed);
    let producers = producers.into_iter().map(join).collect::<Result<Vec<_>, _>>()?;
    let consumers = consumers.into_iter().map(join).collect::<Result<Vec<_>, _>>()?;
    Ok((RoundLog { producers, consumers, killed_at, read_count: cfg.read_count }, killed_after))
}

fn join<T>(handle: std::thread::JoinHandle<T>) -> Result<T, String> {
    handle.join().map_err(|_| "load thread panicked".to_owned())
}

/// After verification: the restarted server keeps generating IDs after the recovered ones,
/// and the group resumes right after its recovered last-delivered-id.
fn probe(conn: &mut RawClient, key: &str, group: &str, rec: &verify::Recovered, f: &mut Failures) {
    match conn.call(&["XADD", key, "*", "probe", "1"]) {
        Ok(Value::Bulk(id)) => match StreamId::parse(&id) {
            Some(id) if id > rec.last_generated => {}
            _ => f.add(
                "XADD after restart did not go past last-generated-id",
                format!("{} after {}", String::from_utf8_lossy(&id), rec.last_generated),
            ),
        },
        other => f.add("XADD after restart", format!("{other:?}")),
    }
    let expected = rec.entries.range(rec.group_last_delivered.next()..).next().map(|(id, _)| *id);
    match conn.call(&["XREADGROUP", "GROUP", group, "probe", "COUNT", "1", "STREAMS", key, ">"]) {
        Ok(reply) => {
            let got = reply
                .as_array()
                .and_then(|s| s.first())
                .and_then(Value::as_array)
                .and_then(|kv| kv.get(1))
                .and_then(Value::as_array)
                .and_then(|e| e.first())
                .and_then(Value::as_array)
                .and_then(|e| e.first())
                .and_then(Value::as_bytes)
                .and_then(StreamId::parse);
            // With no undelivered entry of ours left, the probe entry itself comes next.
            let resumed = match expected {
                Some(_) => got == expected,
                None => got.is_some_and(|g| g > rec.last_generated),
            };
            if !resumed {
                f.add(
                    "XREADGROUP > after restart did not resume after last-delivered-id",
                    format!("got {got:?}, expected {expected:?} (last-delivered-id {})", rec.group_last_delivered),
                );
            }
        }
        Err(e) => f.add("XREADGROUP after restart", e.to_string()),
    }
}
