//! The worker's behaviour as scenarios, each run against several servers by `tests/worker.rs`
//! and `tests/cluster.rs`. A scenario takes a [`Target`] and a [`FeatureMode`], so the same
//! steps check Redis 7's XAUTOCLAIM path, rill's XREADGROUP CLAIM + XNACK path, and rill
//! forced onto the XAUTOCLAIM path.

#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Value;
use rill_worker::dlq;
use rill_worker::reply::{read_reply, Entry};
use rill_worker::{
    CancellationToken, Connection, FeatureMode, HandlerError, Target, Worker, WorkerConfig, WorkerError, WorkerReport,
    WorkerStats,
};
use tokio::task::JoinHandle;

pub async fn connect(target: &Target) -> Connection {
    target.connect(Some(Duration::from_secs(10))).await.unwrap()
}

/// XADDs `n` entries with fields `n=<i>` plus `extra(i)`; returns their IDs.
pub async fn produce(
    conn: &mut Connection,
    stream: &str,
    range: std::ops::Range<usize>,
    extra: impl Fn(usize) -> Vec<(&'static str, String)>,
) -> Vec<String> {
    let mut pipe = redis::pipe();
    for i in range {
        let cmd = pipe.cmd("XADD").arg(stream).arg("*").arg("n").arg(i);
        for (f, v) in extra(i) {
            cmd.arg(f).arg(v);
        }
    }
    pipe.query_async(conn).await.unwrap()
}

pub async fn create_group(conn: &mut Connection, stream: &str, group: &str) {
    let _: Value = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(group)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(conn)
        .await
        .unwrap();
}

/// A consumer that reads everything new and then "dies" without acking.
pub async fn read_and_die(conn: &mut Connection, stream: &str, group: &str, consumer: &str) -> usize {
    let v: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(group)
        .arg(consumer)
        .arg("COUNT")
        .arg(10_000)
        .arg("STREAMS")
        .arg(stream)
        .arg(">")
        .query_async(conn)
        .await
        .unwrap();
    read_reply(&v, stream, "test").unwrap().len()
}

pub async fn pending_count(conn: &mut Connection, stream: &str, group: &str) -> u64 {
    rill_worker::ops::pending(conn, stream, group, 0).await.unwrap().summary.count
}

pub async fn xlen(conn: &mut Connection, stream: &str) -> u64 {
    rill_worker::ops::length(conn, stream).await.unwrap()
}

/// Polls `check` every 50 ms for up to `secs` seconds.
pub async fn wait_for<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if check().await {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running worker and the means to stop it.
pub struct Running {
    pub token: CancellationToken,
    pub stats: Arc<WorkerStats>,
    pub join: JoinHandle<Result<WorkerReport, WorkerError>>,
}

impl Running {
    pub async fn stop(self) -> WorkerReport {
        self.token.cancel();
        self.join.await.unwrap().unwrap()
    }

    /// A crash: the task is dropped mid-flight with its connections and handler tasks.
    pub async fn kill(self) {
        self.join.abort();
        let _ = self.join.await;
    }
}

pub fn spawn<H: rill_worker::Handler>(target: &Target, config: WorkerConfig, handler: H) -> Running {
    let worker = Worker::new(target.clone(), config, handler).unwrap();
    let stats = worker.stats();
    let token = CancellationToken::new();
    let join = tokio::spawn(worker.run(token.clone()));
    Running { token, stats, join }
}

/// Fast timings for tests.
pub fn config(stream: &str, consumer: &str, mode: FeatureMode) -> WorkerConfig {
    WorkerConfig::new(stream, "g", consumer)
        .unwrap()
        .with_block(Duration::from_millis(200))
        // Far above a no-op handler even on a loaded 2-core CI machine, so live work is
        // never reclaimed (which would make "exactly once" assertions flaky).
        .with_min_idle(Duration::from_millis(500))
        .with_reclaim_interval(Duration::from_millis(100))
        .with_features(mode)
}

/// Handled IDs → times the handler saw each, and the entries themselves.
#[derive(Clone, Default)]
pub struct Seen(Arc<Mutex<BTreeMap<String, (u64, Entry)>>>);

impl Seen {
    pub fn record(&self, e: &Entry) {
        let mut map = self.0.lock().unwrap();
        map.entry(e.id.clone()).or_insert((0, e.clone())).0 += 1;
    }
    pub fn ids(&self) -> BTreeSet<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.0.lock().unwrap().iter().map(|(k, (n, _))| (k.clone(), *n)).collect()
    }
    pub fn entries(&self) -> Vec<Entry> {
        self.0.lock().unwrap().values().map(|(_, e)| e.clone()).collect()
    }
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

/// `pod-crash` reads 20 entries and dies; `pod-rescue` reclaims and handles each exactly once.
pub async fn crash_and_rescue(target: Target, mode: FeatureMode) {
    let stream = "{crash}";
    let mut conn = connect(&target).await;
    create_group(&mut conn, stream, "g").await;
    let ids: BTreeSet<String> = produce(&mut conn, stream, 0..20, |_| vec![]).await.into_iter().collect();
    assert_eq!(read_and_die(&mut conn, stream, "g", "pod-crash").await, 20);
    let report = rill_worker::ops::pending(&mut conn, stream, "g", 100).await.unwrap();
    assert_eq!(report.summary.consumers, vec![("pod-crash".to_owned(), 20)]);

    let seen = Seen::default();
    let s = seen.clone();
    let w = spawn(&target, config(stream, "pod-rescue", mode), move |e: Entry| {
        let s = s.clone();
        async move {
            s.record(&e);
            Ok(())
        }
    });
    wait_for(15, "pod-rescue to drain the PEL", || {
        let mut c = conn.clone();
        async move { pending_count(&mut c, stream, "g").await == 0 }
    })
    .await;
    let report = w.stop().await;
    assert_eq!(seen.ids(), ids);
    assert!(seen.counts().values().all(|&n| n == 1), "{:?}", seen.counts());
    assert!(seen.entries().iter().all(|e| e.deliveries == 2), "one read by pod-crash, one by pod-rescue");
    assert_eq!(report.handled, 20);
    assert_eq!(report.reclaimed, 20);
}

/// A worker restarted under the same name handles its own pending history first, without
/// waiting for min-idle.
pub async fn restart_drains_history(target: Target, mode: FeatureMode) {
    let stream = "{restart}";
    let mut conn = connect(&target).await;
    create_group(&mut conn, stream, "g").await;
    let ids: BTreeSet<String> = produce(&mut conn, stream, 0..10, |_| vec![]).await.into_iter().collect();
    assert_eq!(read_and_die(&mut conn, stream, "g", "w1").await, 10);

    let seen = Seen::default();
    let s = seen.clone();
    // min-idle far beyond the test: only the history read can bring these entries back.
    let cfg = config(stream, "w1", mode).with_min_idle(Duration::from_secs(3600));
    let w = spawn(&target, cfg, move |e: Entry| {
        let s = s.clone();
        async move {
            s.record(&e);
            Ok(())
        }
    });
    wait_for(10, "history to drain", || {
        let mut c = conn.clone();
        async move { pending_count(&mut c, stream, "g").await == 0 }
    })
    .await;
    let report = w.stop().await;
    assert_eq!(seen.ids(), ids);
    assert!(seen.entries().iter().all(|e| e.deliveries == 2));
    assert_eq!(report.handled, 10);
    assert_eq!(report.reclaimed, 0);
}

/// Entries with n % 10 == 3 always fail (retry); n == 17 is fatal (dead-letter now). Two
/// workers; each poison entry lands in the dead-letter stream exactly once, with every field
/// and its provenance, and the rest are handled exactly once.
pub async fn poison_to_dlq_exactly_once(target: Target, mode: FeatureMode) {
    let stream = "{poison}";
    let dlq_stream = "{poison}:dlq";
    let mut conn = connect(&target).await;
    let ids = produce(&mut conn, stream, 0..30, |i| vec![("sku", format!("sku-{i}"))]).await;
    let poison: BTreeSet<String> =
        ids.iter().enumerate().filter(|(i, _)| i % 10 == 3 || *i == 17).map(|(_, id)| id.clone()).collect();

    let seen = Seen::default();
    let handler = |seen: Seen| {
        move |e: Entry| {
            let seen = seen.clone();
            async move {
                let n: usize = e.get_str("n").unwrap().parse().unwrap();
                if n == 17 {
                    return Err(HandlerError::dead_letter("fatal: unknown sku"));
                }
                if n % 10 == 3 {
                    return Err(HandlerError::retry("poison"));
                }
                seen.record(&e);
                Ok(())
            }
        }
    };
    let w1 = spawn(&target, config(stream, "w1", mode).with_delivery_limit(3), handler(seen.clone()));
    let w2 = spawn(&target, config(stream, "w2", mode).with_delivery_limit(3), handler(seen.clone()));
    wait_for(20, "3 poison + 1 fatal dead letters and an empty PEL", || {
        let mut c = conn.clone();
        async move { xlen(&mut c, dlq_stream).await == 4 && pending_count(&mut c, stream, "g").await == 0 }
    })
    .await;
    // Let any duplicate show up before looking.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r1 = w1.stop().await;
    let r2 = w2.stop().await;
    assert_eq!(r1.dead_lettered + r2.dead_lettered, 4);
    assert_eq!(seen.len(), 26);
    assert!(seen.counts().values().all(|&n| n == 1));

    let letters = dlq::list(&mut conn, dlq_stream, "-", 100).await.unwrap();
    assert_eq!(letters.len(), 4);
    let sources: BTreeSet<String> = letters.iter().map(|l| l.source_id.clone()).collect();
    assert_eq!(sources, poison);
    for l in &letters {
        assert_eq!(l.source_stream, stream);
        assert_eq!(l.group, "g");
        let n: usize = String::from_utf8(l.fields[0].1.clone()).unwrap().parse().unwrap();
        assert_eq!(
            l.fields,
            vec![(b"n".to_vec(), n.to_string().into_bytes()), (b"sku".to_vec(), format!("sku-{n}").into_bytes())]
        );
        if n == 17 {
            assert_eq!(l.deliveries, 1);
            assert_eq!(l.reason, "fatal: unknown sku");
        } else {
            assert_eq!(l.deliveries, 3, "{l:?}");
            assert!(l.reason.contains("poison"), "{l:?}");
        }
    }
}

/// Graceful shutdowns at random moments lose nothing and handle nothing twice: in-flight
/// handlers finish and ack, unstarted entries go back to the group (XNACK SILENT) or stay in
/// the consumer's PEL for its restart.
pub async fn shutdown_without_loss(target: Target, mode: FeatureMode, seed: u64) {
    let stream = "{shutdown}";
    let mut conn = connect(&target).await;
    let mut ids: BTreeSet<String> = produce(&mut conn, stream, 0..300, |_| vec![]).await.into_iter().collect();
    let seen = Seen::default();
    let mut rng = Rng(seed);
    let handler = |seen: Seen, conn: Connection| {
        move |e: Entry| {
            let seen = seen.clone();
            let mut conn = conn.clone();
            async move {
                tokio::time::sleep(Duration::from_micros(500)).await;
                // The idempotent effect.
                let _: i64 = redis::cmd("HSETNX")
                    .arg("{shutdown}:effects")
                    .arg(&e.id)
                    .arg(1)
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| HandlerError::retry(e.to_string()))?;
                seen.record(&e);
                Ok(())
            }
        }
    };
    // min-idle far above a handler: nobody steals live work, so nothing can run twice.
    let cfg = |name: &str| {
        config(stream, name, mode).with_min_idle(Duration::from_secs(60)).with_concurrency(3).with_batch_size(8)
    };
    let names = ["a", "b"];
    let mut workers: Vec<Running> =
        names.iter().map(|n| spawn(&target, cfg(n), handler(seen.clone(), conn.clone()))).collect();
    let mut produced = 300;
    for kill in 0..5 {
        tokio::time::sleep(Duration::from_millis(30 + rng.below(150))).await;
        let more = produce(&mut conn, stream, produced..produced + 40, |_| vec![]).await;
        produced += 40;
        ids.extend(more);
        let victim = rng.below(2) as usize;
        let report = workers.swap_remove(victim).stop().await;
        eprintln!("kill {kill}: worker {} stopped: {report:?}", names[victim]);
        workers.insert(victim, spawn(&target, cfg(names[victim]), handler(seen.clone(), conn.clone())));
    }
    wait_for(20, "every entry handled", || {
        let seen = seen.clone();
        let want = ids.len();
        let mut c = conn.clone();
        async move { seen.len() == want && pending_count(&mut c, stream, "g").await == 0 }
    })
    .await;
    for w in workers {
        w.stop().await;
    }
    assert_eq!(seen.ids(), ids);
    let twice: Vec<_> = seen.counts().into_iter().filter(|(_, n)| *n != 1).collect();
    assert!(twice.is_empty(), "handled more than once: {twice:?}");
    let effects: u64 = redis::cmd("HLEN").arg("{shutdown}:effects").query_async(&mut conn).await.unwrap();
    assert_eq!(effects, ids.len() as u64);
}

/// Crashes (tasks dropped mid-flight) at random moments, replaced by workers with new names:
/// with reclaim and the idempotency guard, every entry's effect happens and the PEL empties.
pub async fn crashes_lose_nothing(target: Target, mode: FeatureMode, seed: u64) {
    let stream = "{crashes}";
    let mut conn = connect(&target).await;
    let ids: BTreeSet<String> = produce(&mut conn, stream, 0..300, |_| vec![]).await.into_iter().collect();
    let seen = Seen::default();
    let mut rng = Rng(seed);
    let handler = |seen: Seen, conn: Connection| {
        move |e: Entry| {
            let seen = seen.clone();
            let mut conn = conn.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _: i64 = redis::cmd("HSETNX")
                    .arg("{crashes}:effects")
                    .arg(&e.id)
                    .arg(1)
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| HandlerError::retry(e.to_string()))?;
                seen.record(&e);
                Ok(())
            }
        }
    };
    let cfg = |name: String| {
        config(stream, &name, mode)
            .with_min_idle(Duration::from_millis(400))
            .with_idempotency_ttl(Duration::from_secs(60))
            .with_batch_size(8)
    };
    let mut workers: Vec<Running> =
        (0..2).map(|i| spawn(&target, cfg(format!("w{i}")), handler(seen.clone(), conn.clone()))).collect();
    for kill in 0..5 {
        tokio::time::sleep(Duration::from_millis(20 + rng.below(100))).await;
        let victim = rng.below(2) as usize;
        workers.swap_remove(victim).kill().await;
        workers.insert(victim, spawn(&target, cfg(format!("w{}", 2 + kill)), handler(seen.clone(), conn.clone())));
    }
    wait_for(30, "every entry handled after crashes", || {
        let seen = seen.clone();
        let want = ids.len();
        let mut c = conn.clone();
        async move { seen.len() == want && pending_count(&mut c, stream, "g").await == 0 }
    })
    .await;
    for w in workers {
        w.stop().await;
    }
    assert_eq!(seen.ids(), ids);
    let effects: u64 = redis::cmd("HLEN").arg("{crashes}:effects").query_async(&mut conn).await.unwrap();
    assert_eq!(effects, ids.len() as u64);
}

/// Entries dead-lettered while a bug was live are replayed after the fix and handled.
pub async fn replay_from_dlq(target: Target, mode: FeatureMode) {
    let stream = "{replay}";
    let dlq_stream = "{replay}:dlq";
    let mut conn = connect(&target).await;
    produce(&mut conn, stream, 0..5, |i| vec![("payload", format!("p{i}"))]).await;
    let fixed = Arc::new(AtomicBool::new(false));
    let seen = Seen::default();
    let (f, s) = (Arc::clone(&fixed), seen.clone());
    let w = spawn(&target, config(stream, "w", mode), move |e: Entry| {
        let (f, s) = (Arc::clone(&f), s.clone());
        async move {
            if !f.load(Ordering::SeqCst) {
                return Err(HandlerError::dead_letter("bug 42"));
            }
            s.record(&e);
            Ok(())
        }
    });
    wait_for(10, "5 dead letters", || {
        let mut c = conn.clone();
        async move { xlen(&mut c, dlq_stream).await == 5 }
    })
    .await;
    fixed.store(true, Ordering::SeqCst);
    let letters = dlq::list(&mut conn, dlq_stream, "-", 100).await.unwrap();
    assert_eq!(letters.len(), 5);
    for l in &letters {
        assert_eq!(l.reason, "bug 42");
        dlq::replay(&mut conn, dlq_stream, l).await.unwrap();
    }
    assert_eq!(xlen(&mut conn, dlq_stream).await, 0);
    wait_for(10, "replayed entries handled", || {
        let s = seen.clone();
        async move { s.len() == 5 }
    })
    .await;
    w.stop().await;
    let mut payloads: Vec<String> = seen.entries().iter().map(|e| e.get_str("payload").unwrap().to_owned()).collect();
    payloads.sort();
    assert_eq!(payloads, ["p0", "p1", "p2", "p3", "p4"]);
    assert_eq!(xlen(&mut conn, stream).await, 10, "originals stay, replays are new entries");
}

/// The group is destroyed under a running worker: it creates it again, says so, and goes on.
pub async fn recovers_from_nogroup(target: Target, mode: FeatureMode) {
    let stream = "{nogroup}";
    let mut conn = connect(&target).await;
    // The group starts at "$": create it before producing, as the worker would.
    let _: Value = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg("g")
        .arg("$")
        .arg("MKSTREAM")
        .query_async(&mut conn)
        .await
        .unwrap();
    let seen = Seen::default();
    let s = seen.clone();
    let w = spawn(&target, config(stream, "w", mode).with_group_start("$"), move |e: Entry| {
        let s = s.clone();
        async move {
            s.record(&e);
            Ok(())
        }
    });
    produce(&mut conn, stream, 0..3, |_| vec![]).await;
    wait_for(10, "first entries", || {
        let s = seen.clone();
        async move { s.len() == 3 }
    })
    .await;
    let destroyed: i64 = redis::cmd("XGROUP").arg("DESTROY").arg(stream).arg("g").query_async(&mut conn).await.unwrap();
    assert_eq!(destroyed, 1);
    wait_for(10, "the group to be recreated", || {
        let stats = Arc::clone(&w.stats);
        async move { stats.report().group_recreated >= 1 }
    })
    .await;
    produce(&mut conn, stream, 3..6, |_| vec![]).await;
    wait_for(10, "entries after recreation", || {
        let s = seen.clone();
        async move { s.len() == 6 }
    })
    .await;
    let report = w.stop().await;
    assert!(report.group_recreated >= 1);
}

/// A tiny deterministic generator (SplitMix64) for kill timings.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
