//! The reliable-consumer benchmark of issue 23 (group policies), used by `bench/policies.sh`.
//!
//! `run`: a producer XADDs at a fixed rate (1 % poison entries, whose handler always asks for a
//! retry) while 4 worker *processes* (this binary's `worker` subcommand, each one rill-worker
//! `Worker` with a no-op handler) read and ack; every `--kill-every` seconds one worker process
//! is killed with SIGKILL (its in-flight and queued entries stay in its PEL) and replaced by a
//! fresh process under a new consumer name (a new pod: it has no history to read). Modes:
//!
//! * `policy`: rill with `RILL.GROUP SET ... MAXDELIVER 5 ACKWAIT <ackwait> DEADLETTER` (set by
//!   the workers, `ServerPolicyMode::Set`): workers read `>` and ack, `RILL.NACK` the poison.
//! * `policy-close`: the same with `RELEASEONCLOSE 1`: a killed worker's entries are handed back
//!   when its connections close, not at ACKWAIT.
//! * `detect`: rill-worker's client-side loop as it runs on that server by default (Redis 8.4+:
//!   `XREADGROUP ... CLAIM <min-idle>` and `XNACK FAIL`; Redis 7: as `legacy`).
//! * `legacy`: `FeatureMode::Legacy`: an XAUTOCLAIM sweep every `--sweep` ms, no XNACK.
//!
//! Each worker appends one line per handler call (`id wallclock-us o|f`) to its own file with
//! one write(2), so the record survives the SIGKILL. Afterwards the producer stops, the group
//! drains (PEL empty, everything delivered), and the files, the kills (time, and the IDs the
//! killed consumer held: `XPENDING ... consumer` after a SIGSTOP froze it, right before the
//! SIGKILL) and the dead-letter
//! stream are checked: every produced entry handled at least once or dead-lettered, poison
//! entries in the dead-letter stream exactly once, duplicates counted, and for every entry a
//! killed worker held, the time from its death to the next handler call on that entry.
//!
//! `pel`: the cost of deadline hand-backs over a PEL of N delivered-but-unacked entries (rill:
//! the policy timer, then `>` reads; Redis: XAUTOCLAIM, and XREADGROUP CLAIM where it exists).
//!
//! ```text
//! reliable run URL --mode policy|policy-close|detect|legacy [--rate N] [--secs S] [--warmup S] [--kill-every S]
//!              [--workers N] [--ackwait MS] [--sweep MS] [--server-pid PID] [--dir DIR] [--drain S]
//! reliable pel URL --kind rill|redis [--entries N] [--ackwait MS] [--server-pid PID]
//! reliable worker URL CONSUMER MODE ACKWAIT_MS SWEEP_MS LOGFILE      (started by `run`)
//! ```
//!
//! Output: human-readable lines, and one `result key=value ...` line for the script.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Value;
use rill_worker::reply::{self, map_get, map_pairs};
use rill_worker::{
    CancellationToken, Connection, Entry, FeatureMode, HandlerError, ServerPolicyMode, Target, Worker, WorkerConfig,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const STREAM: &str = "{rel}";
const GROUP: &str = "g";
const DLQ: &str = "{rel}:dlq";
const MAX_DELIVER: u64 = 5;
/// One entry in this many is poison (1 %).
const POISON_EVERY: u64 = 100;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        return Err("usage: reliable run|pel|worker ...".into());
    };
    match cmd.as_str() {
        // One core per client process is all it gets (the script pins it): a single thread.
        "worker" => tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(worker(rest)),
        "run" => tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(run(rest)),
        "pel" => tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(pel(rest)),
        other => Err(format!("unknown subcommand {other}").into()),
    }
}

/// `--name value` options after the positional ones.
struct Opts(HashMap<String, String>);

impl Opts {
    fn parse(args: &[String]) -> Result<Opts> {
        let mut map = HashMap::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let name = a.strip_prefix("--").ok_or_else(|| format!("unexpected argument {a}"))?;
            let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            map.insert(name.to_owned(), value.clone());
        }
        Ok(Opts(map))
    }

    fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T> {
        match self.0.get(name) {
            Some(v) => v.parse().map_err(|_| format!("--{name}: not a number: {v}").into()),
            None => Ok(default),
        }
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `ms-seq` packed into one number (ms in the high bits), so IDs sort and hash cheaply.
fn id_key(id: &str) -> Option<u128> {
    let (ms, seq) = id.split_once('-')?;
    Some((u128::from(ms.parse::<u64>().ok()?) << 64) | u128::from(seq.parse::<u64>().ok()?))
}

/// utime + stime of a process (all its threads), in seconds.
fn proc_cpu(pid: u32, tick: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command name: field 3 (state) is index 0, utime (14) index 11, stime (15) 12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / tick)
}

/// Time on a CPU and time runnable but waiting for one, summed over a process's threads, in
/// seconds (`/proc/<pid>/task/*/schedstat`, exact, unlike the tick-sampled CPU counters).
fn sched(pid: u32) -> (f64, f64) {
    let mut total = (0.0, 0.0);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return total };
    for t in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else { continue };
        let mut parts = text.split_whitespace().map(|x| x.parse::<f64>().unwrap_or(0.0));
        total.0 += parts.next().unwrap_or(0.0) / 1e9;
        total.1 += parts.next().unwrap_or(0.0) / 1e9;
    }
    total
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The entries `consumer` owns, each with its deadline (wall-clock us): its last delivery
/// (XPENDING's idle time) plus ACKWAIT / min-idle.
async fn owned_by(conn: &mut Connection, consumer: &str, ackwait: u64) -> Result<Vec<(u128, u64)>> {
    let asked_us = now_us();
    let v: Value = redis::cmd("XPENDING")
        .arg(STREAM)
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(1_000_000)
        .arg(consumer)
        .query_async(conn)
        .await?;
    let deadline = |idle_ms: i64| {
        let idle_us = u64::try_from(idle_ms.max(0)).unwrap_or(0) * 1000;
        asked_us.saturating_sub(idle_us) + ackwait * 1000
    };
    Ok(reply::pending_entries(&v)?.iter().filter_map(|p| Some((id_key(&p.id)?, deadline(p.idle_ms)))).collect())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied().unwrap_or(f64::NAN)
}

// ---------------------------------------------------------------------------------------------
// worker: one rill-worker Worker, logging every handler call.

async fn worker(args: &[String]) -> Result<()> {
    let [url, consumer, mode, ackwait, sweep, log] = args else {
        return Err("usage: reliable worker URL CONSUMER MODE ACKWAIT_MS SWEEP_MS LOGFILE".into());
    };
    let ackwait = Duration::from_millis(ackwait.parse()?);
    let sweep = Duration::from_millis(sweep.parse()?);
    let mut config = WorkerConfig::new(STREAM, GROUP, consumer)?
        .with_batch_size(100)
        .with_concurrency(64)
        .with_block(Duration::from_millis(100))
        .with_min_idle(ackwait)
        .with_reclaim_interval(sweep)
        .with_delivery_limit(MAX_DELIVER)
        .with_dead_letter_stream(DLQ)
        .with_group_start("$");
    config = match mode.as_str() {
        "policy" => config.with_server_policy(ServerPolicyMode::Set),
        "policy-close" => config.with_server_policy(ServerPolicyMode::Set).with_release_on_close(true),
        "detect" => config.with_server_policy(ServerPolicyMode::Off),
        "legacy" => config.with_server_policy(ServerPolicyMode::Off).with_features(FeatureMode::Legacy),
        other => return Err(format!("unknown mode {other}").into()),
    };
    let file = Arc::new(std::fs::OpenOptions::new().create(true).append(true).open(log)?);
    let handler = move |e: Entry| {
        let poison = e.get("poison") == Some(b"1".as_slice());
        // One write(2) per call: the line is in the page cache before the ack is sent, so a
        // SIGKILL loses no record.
        let line = format!("{} {} {}\n", e.id, now_us(), if poison { 'f' } else { 'o' });
        let written = (&*file).write_all(line.as_bytes());
        async move {
            if let Err(err) = written {
                eprintln!("log write failed: {err}");
            }
            if poison {
                Err(HandlerError::retry("poison entry"))
            } else {
                Ok(())
            }
        }
    };
    let worker = Worker::new(Target::Single(url.clone()), config, handler)?;
    worker.run_until_signal().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// run: producer, workers, kills, drain, checks.

struct Proc {
    consumer: String,
    child: tokio::process::Child,
    pid: u32,
    /// `sched` when the measured window began (or at spawn, inside it).
    base: (f64, f64),
}

struct Kill {
    at_us: u64,
    consumer: String,
    /// The IDs the killed consumer held, each with its deadline (wall-clock us): its last
    /// delivery (XPENDING's idle time) plus ACKWAIT / min-idle.
    held: Vec<(u128, u64)>,
}

struct Spawner {
    exe: std::path::PathBuf,
    url: String,
    mode: String,
    ackwait: u64,
    sweep: u64,
    dir: std::path::PathBuf,
}

impl Spawner {
    fn spawn(&self, consumer: String) -> Result<Proc> {
        let err = std::fs::File::create(self.dir.join(format!("{consumer}.err")))?;
        let child = tokio::process::Command::new(&self.exe)
            .arg("worker")
            .arg(&self.url)
            .arg(&consumer)
            .arg(&self.mode)
            .arg(self.ackwait.to_string())
            .arg(self.sweep.to_string())
            .arg(self.dir.join(format!("{consumer}.log")))
            .stdout(std::process::Stdio::null())
            .stderr(err)
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("worker exited at once")?;
        Ok(Proc { consumer, child, pid, base: (0.0, 0.0) })
    }
}

async fn connect(url: &str) -> Result<Connection> {
    Ok(Target::Single(url.to_owned()).connect(None).await?)
}

/// XADDs at `rate` per second until `stop`; returns (ID, poison) of every entry.
async fn produce(
    mut conn: Connection,
    rate: f64,
    sent: Arc<AtomicU64>,
    stop: CancellationToken,
) -> Result<Vec<(u128, bool)>> {
    let mut ids = Vec::new();
    let started = Instant::now();
    let mut seq = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let due = (started.elapsed().as_secs_f64() * rate) as u64;
        // A late tick catches up, in pipelines of at most 1000.
        let n = due.saturating_sub(seq).min(1000);
        if n == 0 {
            continue;
        }
        let mut pipe = redis::pipe();
        for i in seq..seq + n {
            let poison = i % POISON_EVERY == POISON_EVERY - 1;
            pipe.cmd("XADD")
                .arg(STREAM)
                .arg("*")
                .arg("seq")
                .arg(i)
                .arg("poison")
                .arg(u8::from(poison))
                .arg("payload")
                .arg("0123456789abcdef0123456789abcdef");
        }
        let replies: Vec<String> = pipe.query_async(&mut conn).await?;
        for (i, id) in (seq..seq + n).zip(replies) {
            ids.push((id_key(&id).ok_or("bad XADD reply")?, i % POISON_EVERY == POISON_EVERY - 1));
        }
        seq += n;
        sent.store(seq, Ordering::Relaxed);
    }
    Ok(ids)
}

/// The group's pending count and last-delivered ID (XINFO GROUPS).
async fn group_state(conn: &mut Connection) -> Result<(u64, Option<u128>)> {
    let v: Value = redis::cmd("XINFO").arg("GROUPS").arg(STREAM).query_async(conn).await?;
    let groups = match &v {
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    };
    for g in &groups {
        let pairs = map_pairs(g);
        let name = map_get(&pairs, "name").and_then(|v| redis::from_redis_value_ref::<String>(v).ok());
        if name.as_deref() == Some(GROUP) {
            let pending =
                map_get(&pairs, "pending").and_then(|v| redis::from_redis_value_ref::<u64>(v).ok()).unwrap_or(0);
            let last = map_get(&pairs, "last-delivered-id")
                .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
                .and_then(|s| id_key(&s));
            return Ok((pending, last));
        }
    }
    Err("group not found".into())
}

async fn run(args: &[String]) -> Result<()> {
    let Some((url, rest)) = args.split_first() else {
        return Err("usage: reliable run URL --mode MODE ...".into());
    };
    let o = Opts::parse(rest)?;
    let mode = o.text("mode").unwrap_or("policy").to_owned();
    let rate: f64 = o.num("rate", 80_000.0)?;
    let secs: f64 = o.num("secs", 30.0)?;
    let warmup: f64 = o.num("warmup", 2.0)?;
    let kill_every: f64 = o.num("kill-every", 3.0)?;
    let workers: usize = o.num("workers", 4)?;
    let ackwait: u64 = o.num("ackwait", 1000)?;
    let sweep: u64 = o.num("sweep", 5000)?;
    let drain: f64 = o.num("drain", 180.0)?;
    let server_pid: u32 = o.num("server-pid", 0)?;
    let dir = std::path::PathBuf::from(o.text("dir").ok_or("--dir is required")?);
    std::fs::create_dir_all(&dir)?;
    let tick = clock_ticks();
    let server_cpu = || if server_pid == 0 { f64::NAN } else { proc_cpu(server_pid, tick).unwrap_or(f64::NAN) };

    let mut conn = connect(url).await?;
    redis::cmd("DEL").arg(STREAM).arg(DLQ).query_async::<i64>(&mut conn).await?;
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(STREAM)
        .arg(GROUP)
        .arg("$")
        .arg("MKSTREAM")
        .query_async::<()>(&mut conn)
        .await?;

    let spawner = Spawner {
        exe: std::env::current_exe()?,
        url: url.clone(),
        mode: mode.clone(),
        ackwait,
        sweep,
        dir: dir.clone(),
    };
    let mut procs = Vec::new();
    for slot in 0..workers {
        procs.push(spawner.spawn(format!("w{slot}-0"))?);
    }
    // Let every worker connect, set the policy (mode policy) and block before the producer starts.
    tokio::time::sleep(Duration::from_millis(1000)).await;

    let sent = Arc::new(AtomicU64::new(0));
    let stop = CancellationToken::new();
    let producer = tokio::spawn(produce(connect(url).await?, rate, Arc::clone(&sent), stop.clone()));
    let t0 = Instant::now();
    let at = |s: f64| t0 + Duration::from_secs_f64(s);

    tokio::time::sleep_until(at(warmup).into()).await;
    let (w0_us, w0_sent, w0_cpu) = (now_us(), sent.load(Ordering::Relaxed), server_cpu());
    let server_sched = || if server_pid == 0 { (f64::NAN, f64::NAN) } else { sched(server_pid) };
    let w0_server_sched = server_sched();
    let w0_own_sched = sched(std::process::id());
    for p in &mut procs {
        p.base = sched(p.pid);
    }
    // Client processes' (run, wait) seconds within the window.
    let mut client_sched = (0.0, 0.0);
    let mut kills = Vec::new();
    let mut generation = 0usize;
    let mut k = 0usize;
    loop {
        let next = warmup + kill_every * (k as f64 + 0.5);
        if next >= warmup + secs {
            break;
        }
        tokio::time::sleep_until(at(next).into()).await;
        let slot = k % workers;
        k += 1;
        generation += usize::from(slot == 0);
        let Some(victim) = procs.get_mut(slot) else { break };
        let now = sched(victim.pid);
        client_sched.0 += now.0 - victim.base.0;
        client_sched.1 += now.1 - victim.base.1;
        // Freeze the victim first (SIGSTOP): its sockets stay open, so nothing it holds is
        // handed back yet (with RELEASEONCLOSE the server hands it back as soon as the socket
        // closes: asking after the kill would find nothing), and it reads and acks no more.
        // Let the server read what it had written (XACKs in flight), then see what it owns:
        // exactly what it dies with.
        let stopped = std::process::Command::new("kill").args(["-STOP", &victim.pid.to_string()]).status()?;
        if !stopped.success() {
            return Err(format!("kill -STOP {} failed", victim.pid).into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let held = owned_by(&mut conn, &victim.consumer, ackwait).await?;
        let at_us = now_us();
        victim.child.start_kill()?;
        victim.child.wait().await?;
        kills.push(Kill { at_us, consumer: victim.consumer.clone(), held });
        *victim = spawner.spawn(format!("w{slot}-{generation}"))?;
    }
    tokio::time::sleep_until(at(warmup + secs).into()).await;
    let (w1_us, w1_sent, w1_cpu) = (now_us(), sent.load(Ordering::Relaxed), server_cpu());
    let w1_server_sched = server_sched();
    for p in &procs {
        let now = sched(p.pid);
        client_sched.0 += now.0 - p.base.0;
        client_sched.1 += now.1 - p.base.1;
    }
    let own = sched(std::process::id());
    client_sched.0 += own.0 - w0_own_sched.0;
    client_sched.1 += own.1 - w0_own_sched.1;
    let (backlog_pending, _) = group_state(&mut conn).await?;
    stop.cancel();
    let ids = producer.await??;
    let produced = ids.len();
    let last = ids.last().map(|(id, _)| *id);

    // Drain: wait until every entry was delivered and nothing is pending.
    let drain_start = Instant::now();
    let mut drained = false;
    while drain_start.elapsed().as_secs_f64() < drain {
        let (pending, delivered) = group_state(&mut conn).await?;
        if pending == 0 && delivered == last {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drain_secs = drain_start.elapsed().as_secs_f64();
    let (final_pending, _) = group_state(&mut conn).await?;
    for p in &mut procs {
        p.child.start_kill()?;
        p.child.wait().await?;
    }

    let policy_info = if mode.starts_with("policy") {
        let v: Value = redis::cmd("RILL.GROUP").arg("INFO").arg(STREAM).arg(GROUP).query_async(&mut conn).await?;
        let pairs = map_pairs(&v);
        ["handed-back", "nacked", "dead-lettered", "redelivered"]
            .iter()
            .map(|n| {
                let x = map_get(&pairs, n).and_then(|v| redis::from_redis_value_ref::<i64>(v).ok()).unwrap_or(-1);
                format!("{n}={x}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        String::new()
    };

    // The dead-letter stream: source IDs.
    let mut dlq_ids: HashMap<u128, u32> = HashMap::new();
    let mut cursor = "-".to_owned();
    loop {
        let v: Value =
            redis::cmd("XRANGE").arg(DLQ).arg(&cursor).arg("+").arg("COUNT").arg(10_000).query_async(&mut conn).await?;
        let page = reply::entry_list(&v, "XRANGE")?;
        let Some(last_entry) = page.last() else { break };
        cursor = format!("({}", last_entry.id);
        for e in &page {
            let source = e
                .fields
                .iter()
                .flatten()
                .find(|(f, _)| f.as_slice() == b"rill-source-id")
                .and_then(|(_, v)| std::str::from_utf8(v).ok())
                .and_then(id_key);
            if let Some(id) = source {
                *dlq_ids.entry(id).or_default() += 1;
            }
        }
    }

    // The handler-call records.
    let held_set: HashSet<u128> = kills.iter().flat_map(|k| k.held.iter().map(|(id, _)| *id)).collect();
    let mut ok_runs: HashMap<u128, u32> = HashMap::with_capacity(produced);
    let mut fail_runs: HashMap<u128, u32> = HashMap::new();
    let mut times: HashMap<u128, Vec<u64>> = HashMap::new();
    let mut ok_in_window = 0u64;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        for line in std::fs::read_to_string(&path)?.lines() {
            let mut parts = line.split(' ');
            let (Some(id), Some(t), Some(kind)) = (parts.next(), parts.next(), parts.next()) else {
                continue; // a line cut by the kill (cannot happen with one write, but cheap to skip)
            };
            let (Some(id), Ok(t)) = (id_key(id), t.parse::<u64>()) else { continue };
            if kind == "o" {
                *ok_runs.entry(id).or_default() += 1;
                if (w0_us..w1_us).contains(&t) {
                    ok_in_window += 1;
                }
            } else {
                *fail_runs.entry(id).or_default() += 1;
            }
            if held_set.contains(&id) {
                times.entry(id).or_default().push(t);
            }
        }
    }

    // Checks.
    let mut poison = 0u64;
    let (mut poison_dlq, mut poison_missing, mut poison_dup_dlq) = (0u64, 0u64, 0u64);
    let (mut good_dlq, mut unhandled, mut dup_entries, mut dup_runs) = (0u64, 0u64, 0u64, 0u64);
    let mut poison_attempts = Vec::new();
    for &(id, is_poison) in &ids {
        let in_dlq = dlq_ids.get(&id).copied().unwrap_or(0);
        if is_poison {
            poison += 1;
            match in_dlq {
                0 => poison_missing += 1,
                1 => poison_dlq += 1,
                _ => {
                    poison_dlq += 1;
                    poison_dup_dlq += 1;
                }
            }
            poison_attempts.push(fail_runs.get(&id).copied().unwrap_or(0));
            continue;
        }
        let runs = ok_runs.get(&id).copied().unwrap_or(0);
        if in_dlq > 0 {
            good_dlq += 1;
        } else if runs == 0 {
            unhandled += 1;
        }
        if runs > 1 {
            dup_entries += 1;
            dup_runs += u64::from(runs - 1);
        }
    }
    let produced_set: HashSet<u128> = ids.iter().map(|(id, _)| *id).collect();
    let dlq_foreign = dlq_ids.keys().filter(|id| !produced_set.contains(id)).count();
    poison_attempts.sort_unstable();
    let attempts_max = poison_attempts.last().copied().unwrap_or(0);
    let attempts_min = poison_attempts.first().copied().unwrap_or(0);

    // Death -> next handler call of each good entry the killed worker held. (Poison entries it
    // held may have been waiting for their retry, which says nothing about the death: counted
    // apart.)
    let poison_set: HashSet<u128> = ids.iter().filter(|(_, p)| *p).map(|(id, _)| *id).collect();
    let mut lat_ms = Vec::new();
    // Next handler call minus the entry's deadline: how late the hand-back or claim came.
    let mut over_ms = Vec::new();
    let (mut held_total, mut held_poison, mut held_dlq_only, mut held_acked, mut held_never) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for kill in &kills {
        for (id, deadline) in &kill.held {
            if poison_set.contains(id) {
                held_poison += 1;
                continue;
            }
            held_total += 1;
            let ts = times.get(id).map(Vec::as_slice).unwrap_or_default();
            let next = ts.iter().filter(|&&t| t > kill.at_us).min().copied();
            match next {
                Some(t) => {
                    lat_ms.push((t - kill.at_us) as f64 / 1000.0);
                    over_ms.push((t as f64 - *deadline as f64) / 1000.0);
                }
                None if dlq_ids.contains_key(id) => held_dlq_only += 1,
                // Handled before the kill, its XACK still on the wire when XPENDING looked.
                None if ts.iter().any(|&t| t <= kill.at_us) => held_acked += 1,
                None => held_never += 1,
            }
        }
    }
    lat_ms.sort_by(f64::total_cmp);
    over_ms.sort_by(f64::total_cmp);

    let window = (w1_us - w0_us) as f64 / 1e6;
    let offered_eps = (w1_sent - w0_sent) as f64 / window;
    let handled_eps = ok_in_window as f64 / window;
    let cpu = w1_cpu - w0_cpu;
    let server_wait = (w1_server_sched.1 - w0_server_sched.1) / window;
    let (client_run, client_wait) = (client_sched.0 / window, client_sched.1 / window);
    let client_us = client_sched.0 / ok_in_window.max(1) as f64 * 1e6;
    let ok =
        drained && unhandled == 0 && poison_missing == 0 && poison_dup_dlq == 0 && dlq_foreign == 0 && held_never == 0;
    println!("mode {mode}: {workers} worker processes, {} kills (SIGKILL) in {window:.1} s", kills.len());
    println!(
        "  offered {offered_eps:.0} entries/s, handled {handled_eps:.0} entries/s (handler calls that returned Ok, \
         in the window); pending at window end {backlog_pending}"
    );
    println!(
        "  server CPU {:.1} us per handled entry ({:.0} % of a core; it waited {:.0} % of the time for its core); \
         client CPU {client_us:.1} us per handled entry (workers + producer: {:.0} % of a core, {:.0} % waiting)",
        cpu / ok_in_window.max(1) as f64 * 1e6,
        cpu / window * 100.0,
        server_wait * 100.0,
        client_run * 100.0,
        client_wait * 100.0
    );
    println!(
        "  death -> handled again: {} good entries held by killed workers; p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms \
         ({held_dlq_only} dead-lettered without another call, {held_acked} acked by a write in flight at the \
         kill, {held_never} never seen again; {held_poison} poison entries held, not counted)",
        held_total,
        percentile(&lat_ms, 50.0),
        percentile(&lat_ms, 99.0),
        lat_ms.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  after the deadline (last delivery + {ackwait} ms): p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        percentile(&over_ms, 50.0),
        percentile(&over_ms, 99.0),
        over_ms.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  checks: produced {produced}, poison {poison} ({poison_dlq} in the DLQ, {poison_missing} missing, \
         {poison_dup_dlq} twice; {attempts_min}..{attempts_max} handler calls each), good entries dead-lettered \
         {good_dlq}, unhandled {unhandled}, duplicates {dup_entries} entries ({dup_runs} extra calls), \
         foreign DLQ entries {dlq_foreign}; drained in {drain_secs:.1} s (pending now {final_pending}) {}",
        if ok { "OK" } else { "CHECK FAILED" }
    );
    if !policy_info.is_empty() {
        println!("  RILL.GROUP INFO: {policy_info}");
    }
    for k in &kills {
        println!("  kill {} at {} held {}", k.consumer, k.at_us, k.held.len());
    }
    println!(
        "result mode={mode} offered_eps={offered_eps:.0} handled_eps={handled_eps:.0} server_cpu_us={:.2} \
         server_busy={:.2} server_wait={server_wait:.2} client_cpu_us={client_us:.2} client_run={client_run:.2} \
         client_wait={client_wait:.2} kills={} held={held_total} never={held_never} lat_p50_ms={:.1} lat_p99_ms={:.1} \
         lat_max_ms={:.1} over_p50_ms={:.1} over_p99_ms={:.1} over_max_ms={:.1} produced={produced} poison={poison} poison_dlq={poison_dlq} good_dlq={good_dlq} \
         unhandled={unhandled} dup_entries={dup_entries} dup_runs={dup_runs} drain_s={drain_secs:.1} check={}",
        cpu / ok_in_window.max(1) as f64 * 1e6,
        cpu / window,
        kills.len(),
        percentile(&lat_ms, 50.0),
        percentile(&lat_ms, 99.0),
        lat_ms.last().copied().unwrap_or(f64::NAN),
        percentile(&over_ms, 50.0),
        percentile(&over_ms, 99.0),
        over_ms.last().copied().unwrap_or(f64::NAN),
        if ok { "ok" } else { "FAILED" }
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// pel: hand-backs over a large PEL.

async fn pel(args: &[String]) -> Result<()> {
    let Some((url, rest)) = args.split_first() else {
        return Err("usage: reliable pel URL --kind rill|redis ...".into());
    };
    let o = Opts::parse(rest)?;
    let kind = o.text("kind").unwrap_or("rill").to_owned();
    let n: u64 = o.num("entries", 1_000_000)?;
    let ackwait: u64 = o.num("ackwait", 1000)?;
    let server_pid: u32 = o.num("server-pid", 0)?;
    let tick = clock_ticks();
    let server_cpu = || if server_pid == 0 { f64::NAN } else { proc_cpu(server_pid, tick).unwrap_or(f64::NAN) };
    let key = "{pel}";
    let mut conn = connect(url).await?;

    // Fill: N entries, group g at 0, all delivered to c1 and never acked.
    redis::cmd("DEL").arg(key).query_async::<i64>(&mut conn).await?;
    let fill = Instant::now();
    let mut added = 0u64;
    while added < n {
        let m = (n - added).min(1000);
        let mut pipe = redis::pipe();
        for i in added..added + m {
            pipe.cmd("XADD")
                .arg(key)
                .arg(format!("{}-1", i + 1))
                .arg("symbol")
                .arg("NVDA.OQ")
                .arg("price")
                .arg("1187.2500")
                .arg("seq")
                .arg(i)
                .ignore();
        }
        pipe.query_async::<()>(&mut conn).await?;
        added += m;
    }
    redis::cmd("XGROUP").arg("CREATE").arg(key).arg(GROUP).arg("0").query_async::<()>(&mut conn).await?;
    let delivered = read_all(&conn, key, "c1", None, n).await?;
    let last_delivery = Instant::now();
    println!(
        "pel {kind}: {n} entries added and delivered to c1 in {:.1} s ({delivered} delivered)",
        fill.elapsed().as_secs_f64()
    );
    if delivered != n {
        return Err(format!("delivered {delivered} of {n}").into());
    }
    // Every delivery is now older than ACKWAIT: all N deadlines have passed.
    tokio::time::sleep_until((last_delivery + Duration::from_millis(ackwait + 200)).into()).await;

    let mut results = Vec::new();
    if kind == "rill" {
        // Setting ACKWAIT on the filled group arms its timer at the oldest deadline (past): the
        // timer hands back all N, at most 1000 per run, with no client involved.
        let (c0, t0) = (server_cpu(), Instant::now());
        redis::cmd("RILL.GROUP")
            .arg("SET")
            .arg(key)
            .arg(GROUP)
            .arg("ACKWAIT")
            .arg(ackwait)
            .query_async::<()>(&mut conn)
            .await?;
        let mut handed = 0i64;
        while handed < n as i64 {
            let v: Value = redis::cmd("RILL.GROUP").arg("INFO").arg(key).arg(GROUP).query_async(&mut conn).await?;
            let pairs = map_pairs(&v);
            handed =
                map_get(&pairs, "handed-back").and_then(|v| redis::from_redis_value_ref::<i64>(v).ok()).unwrap_or(0);
            if t0.elapsed() > Duration::from_secs(300) {
                return Err(format!("only {handed} handed back after 300 s").into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let (c1, t1) = (server_cpu(), Instant::now());
        results.push(("timer", n, t1 - t0, c1 - c0));
        // Then a `>` reader takes the hand-back queue. A long ACKWAIT first, so that entries it
        // has read are not handed back again while it reads the rest.
        redis::cmd("RILL.GROUP")
            .arg("SET")
            .arg(key)
            .arg(GROUP)
            .arg("ACKWAIT")
            .arg(3_600_000)
            .query_async::<()>(&mut conn)
            .await?;
        let t1 = Instant::now();
        let got = read_all(&conn, key, "c2", None, n).await?;
        let (c2, t2) = (server_cpu(), Instant::now());
        results.push(("read", got, t2 - t1, c2 - c1));
        results.push(("total", got, t2 - t0, c2 - c0));
    } else {
        let (c0, t0) = (server_cpu(), Instant::now());
        let mut cursor = "0-0".to_owned();
        let mut got = 0u64;
        loop {
            let v: Value = redis::cmd("XAUTOCLAIM")
                .arg(key)
                .arg(GROUP)
                .arg("c2")
                .arg(ackwait)
                .arg(&cursor)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await?;
            let (next, entries, _) = reply::autoclaim_reply(&v)?;
            got += entries.len() as u64;
            cursor = next;
            if cursor == "0-0" {
                break;
            }
        }
        let (c1, t1) = (server_cpu(), Instant::now());
        results.push(("xautoclaim", got, t1 - t0, c1 - c0));
        // XREADGROUP ... CLAIM (Redis 8.4+) over the same PEL once it is idle again.
        let v: Value = redis::cmd("COMMAND").arg("DOCS").arg("XREADGROUP").query_async(&mut conn).await?;
        if mentions(&v, b"CLAIM") {
            tokio::time::sleep(Duration::from_millis(ackwait + 200)).await;
            let (c2, t2) = (server_cpu(), Instant::now());
            let got = read_all(&conn, key, "c3", Some(ackwait), n).await?;
            let (c3, t3) = (server_cpu(), Instant::now());
            results.push(("claimread", got, t3 - t2, c3 - c2));
        }
    }
    for (what, count, wall, cpu) in results {
        let wall = wall.as_secs_f64();
        println!(
            "  {what:10} {count} entries in {wall:.3} s: {:.0} entries/s; server CPU {cpu:.2} s: {:.0} entries per \
             server-CPU-second",
            count as f64 / wall,
            count as f64 / cpu
        );
        println!(
            "result kind={kind} step={what} entries={count} secs={wall:.3} eps={:.0} cpu_s={cpu:.2} eps_cpu={:.0}",
            count as f64 / wall,
            count as f64 / cpu
        );
    }
    redis::cmd("DEL").arg(key).query_async::<i64>(&mut conn).await?;
    Ok(())
}

/// `XREADGROUP GROUP g <consumer> COUNT 1000 [CLAIM idle] STREAMS key >` until a read returns
/// nothing or `limit` entries came; returns how many came.
async fn read_all(conn: &Connection, key: &str, consumer: &str, claim: Option<u64>, limit: u64) -> Result<u64> {
    let mut conn = conn.clone();
    let mut got = 0u64;
    while got < limit {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP").arg(GROUP).arg(consumer).arg("COUNT").arg(1000);
        if let Some(idle) = claim {
            cmd.arg("CLAIM").arg(idle);
        }
        let v: Value = cmd.arg("STREAMS").arg(key).arg(">").query_async(&mut conn).await?;
        let k = reply::read_reply(&v, key, "XREADGROUP")?.len() as u64;
        if k == 0 {
            break;
        }
        got += k;
    }
    Ok(got)
}

/// Some string anywhere in `v` equals `token` (ASCII case-insensitively).
fn mentions(v: &Value, token: &[u8]) -> bool {
    match v {
        Value::BulkString(b) => b.eq_ignore_ascii_case(token),
        Value::SimpleString(s) => s.as_bytes().eq_ignore_ascii_case(token),
        Value::Array(items) | Value::Set(items) => items.iter().any(|i| mentions(i, token)),
        Value::Map(pairs) => pairs.iter().any(|(k, v)| mentions(k, token) || mentions(v, token)),
        _ => false,
    }
}
