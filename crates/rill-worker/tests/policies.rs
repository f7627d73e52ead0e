//! The worker on groups with a server policy (rill's `RILL.GROUP`): it reads `>` only, lets
//! the server hand back a dead consumer's entries after ACKWAIT and dead-letter poison at
//! MAXDELIVER; on Redis 8.2.3 (no `RILL.GROUP`) the same config runs the client-side loop. And
//! the idempotency guard keys of `ticks` and `{ticks}` do not meet.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
mod scenarios;

use std::time::Duration;

use common::ServerTarget;
use redis::Value;
use rill_testkit::{ReferenceServer, Server};
use rill_worker::reply::Entry;
use rill_worker::{dlq, policy, FeatureMode, HandlerError, ServerFeatures, ServerPolicyMode};
use scenarios::{config, connect, create_group, pending_count, produce, spawn, wait_for, xlen, Seen};

/// A field of a dead letter's original entry, as text.
fn field(fields: &[(Vec<u8>, Vec<u8>)], name: &str) -> Option<String> {
    fields.iter().find(|(f, _)| f == name.as_bytes()).map(|(_, v)| String::from_utf8_lossy(v).into_owned())
}

/// Calls of command `name` clients made (`INFO commandstats`; 0 when it never ran).
async fn calls(conn: &mut rill_worker::Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await.unwrap();
    let prefix = format!("cmdstat_{name}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |rest| rest.split(',').next().unwrap().trim().parse().unwrap())
}

/// A worker with `crash_config` takes entries of its stream and hangs on them, and is killed
/// (its connections close); a rescuer with the same config under another consumer name (its
/// own history would return the entries at once, without the server's hand-back) then handles
/// every one of `total` entries. Returns what the rescuer saw and its report.
async fn crash_and_rescue(
    target: &rill_worker::Target,
    conn: &mut rill_worker::Connection,
    crash_config: rill_worker::WorkerConfig,
    total: usize,
) -> (Seen, rill_worker::WorkerReport) {
    let stream = crash_config.stream.clone();
    let crashed = spawn(target, crash_config.clone(), |_e: Entry| std::future::pending::<Result<(), HandlerError>>());
    let s = stream.clone();
    wait_for(10, "the crashing worker to hold entries", || {
        let mut c = conn.clone();
        let s = s.clone();
        async move { pending_count(&mut c, &s, "g").await > 0 }
    })
    .await;
    crashed.kill().await;
    let seen = Seen::default();
    let recorder = seen.clone();
    let mut rescue_config = crash_config.with_batch_size(16);
    rescue_config.consumer = "pod-rescue".to_owned();
    let rescue = spawn(target, rescue_config, move |e: Entry| {
        let s = recorder.clone();
        async move {
            s.record(&e);
            Ok(())
        }
    });
    wait_for(20, "every entry handled and acked", || {
        let mut c = conn.clone();
        let seen = seen.clone();
        let s = stream.clone();
        async move { seen.len() == total && pending_count(&mut c, &s, "g").await == 0 }
    })
    .await;
    (seen, rescue.stop().await)
}

#[tokio::test]
async fn rill_has_policies_redis_does_not() {
    let rill = Server::rill();
    let mut c = connect(&rill.target()).await;
    assert_eq!(
        ServerFeatures::detect(&mut c).await,
        ServerFeatures { claim_on_read: true, xnack: true, policies: true, readgroup_counts: true }
    );
    let Some(redis8) = Server::reference(ReferenceServer::Redis8) else { return };
    let mut c = connect(&redis8.target()).await;
    assert!(!ServerFeatures::detect(&mut c).await.policies);
}

/// (a) A worker on a group with `ACKWAIT 1500` hangs on its entries and is dropped; a second
/// worker handles every entry exactly once from `>` reads alone, after the server handed the
/// crashed worker's entries back. Its own `min_idle` is 200 ms: had it claimed (XREADGROUP
/// CLAIM, XAUTOCLAIM) it would have taken them long before the server's deadline, and the
/// policy would count no hand-back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_worker_entries_come_back_to_gt_reads_after_ackwait() {
    let server = Server::rill();
    let target = server.target();
    let stream = "{pcrash}";
    let mut conn = connect(&target).await;
    create_group(&mut conn, stream, "g").await;
    policy::set(&mut conn, stream, "g", &[("ACKWAIT".into(), "1500".into())]).await.unwrap();
    let ids: std::collections::BTreeSet<String> =
        produce(&mut conn, stream, 0..12, |_| vec![]).await.into_iter().collect();

    let slow =
        config(stream, "pod-crash", FeatureMode::Detect).with_min_idle(Duration::from_millis(200)).with_batch_size(4);
    let (seen, report) = crash_and_rescue(&target, &mut conn, slow, 12).await;
    assert_eq!(seen.ids(), ids);
    assert!(seen.counts().values().all(|&n| n == 1), "{:?}", seen.counts());
    let info = policy::info_rows(&mut conn, stream, "g").await.unwrap();
    let handed_back = info.iter().find(|(k, _)| k == "handed-back").map(|(_, v)| v.to_string()).unwrap();
    assert!(report.reclaimed >= 1, "entries the crashed worker held came back: {report:?}");
    assert_eq!(handed_back, report.reclaimed.to_string(), "each came back by the server's deadline, not by a claim");
    // Each entry carries its delivery count: 2 for a handed-back one, 1 for the rest.
    let again = seen.entries().iter().filter(|e| e.deliveries == 2).count();
    assert!(seen.entries().iter().all(|e| e.deliveries == 1 || e.deliveries == 2), "{:?}", seen.entries());
    assert_eq!(again.to_string(), handed_back, "{:?}", seen.entries());
    assert_eq!(calls(&mut conn, "xautoclaim").await, 0, "no XAUTOCLAIM ran");
    assert_eq!(calls(&mut conn, "xclaim").await, 0, "no XCLAIM ran");
}

/// (a') `with_release_on_close(true)` under `ServerPolicyMode::Set`: the crashed worker's
/// entries come back as soon as its connections close, although `min_idle` (ACKWAIT) is a
/// minute: the rescuer handles every entry within seconds, each handed back by the close
/// (`released-on-close`), none by the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_worker_entries_come_back_at_once_with_release_on_close() {
    let server = Server::rill();
    let target = server.target();
    let stream = "{pclose}";
    let mut conn = connect(&target).await;
    create_group(&mut conn, stream, "g").await;
    let ids: std::collections::BTreeSet<String> =
        produce(&mut conn, stream, 0..12, |_| vec![]).await.into_iter().collect();
    let slow = config(stream, "pod-crash", FeatureMode::Detect)
        .with_min_idle(Duration::from_secs(60))
        .with_batch_size(4)
        .with_server_policy(ServerPolicyMode::Set)
        .with_release_on_close(true);
    let mut c = conn.clone();
    let started = std::time::Instant::now();
    let (seen, report) = crash_and_rescue(&target, &mut conn, slow, 12).await;
    assert!(started.elapsed() < Duration::from_secs(30), "not at the 60 s deadline: {:?}", started.elapsed());
    let rows = policy::get_rows(&mut c, stream, "g").await.unwrap();
    assert!(rows.iter().any(|(k, v)| k == "releaseonclose" && v.to_string() == "1"), "{rows:?}");
    assert_eq!(seen.ids(), ids);
    assert!(seen.counts().values().all(|&n| n == 1), "{:?}", seen.counts());
    let info = policy::info_rows(&mut conn, stream, "g").await.unwrap();
    let get = |name: &str| info.iter().find(|(k, _)| k == name).map(|(_, v)| v.to_string()).unwrap();
    assert!(report.reclaimed >= 1, "entries the crashed worker held came back: {report:?}");
    assert_eq!(get("released-on-close"), report.reclaimed.to_string(), "each came back by the close");
    assert_eq!(get("handed-back"), "0", "none by the deadline");
    let again = seen.entries().iter().filter(|e| e.deliveries == 2).count();
    assert_eq!(again.to_string(), get("released-on-close"), "{:?}", seen.entries());
}

/// (b) With `ServerPolicyMode::Set` and `delivery_limit 3`, a poison entry whose handler asks
/// for a retry reaches the server's dead-letter stream after exactly 3 attempts, written by the
/// server (`rill-reason maxdeliver`); a handler's DeadLetter goes there as `fatal`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_reaches_the_servers_dlq_after_maxdeliver_attempts() {
    let server = Server::rill();
    let target = server.target();
    let stream = "{ppoison}";
    let mut conn = connect(&target).await;
    create_group(&mut conn, stream, "g").await;
    let ids = produce(&mut conn, stream, 0..6, |i| match i {
        2 => vec![("poison", "retry".to_owned())],
        4 => vec![("poison", "fatal".to_owned())],
        _ => vec![],
    })
    .await;

    let seen = Seen::default();
    let s = seen.clone();
    let cfg = config(stream, "pod-1", FeatureMode::Detect)
        .with_server_policy(ServerPolicyMode::Set)
        .with_delivery_limit(3)
        .with_min_idle(Duration::from_secs(60));
    let w = spawn(&target, cfg, move |e: Entry| {
        let s = s.clone();
        async move {
            s.record(&e);
            match e.get_str("poison") {
                Some("retry") => Err(HandlerError::retry("cannot parse")),
                Some(_) => Err(HandlerError::dead_letter("never valid")),
                None => Ok(()),
            }
        }
    });
    wait_for(20, "both poison entries dead-lettered", || {
        let mut c = conn.clone();
        async move { xlen(&mut c, "{ppoison}:dlq").await == 2 && pending_count(&mut c, stream, "g").await == 0 }
    })
    .await;
    let report = w.stop().await;

    let set = policy::get(&mut conn, stream, "g").await.unwrap();
    assert_eq!((set.max_deliver, set.ack_wait_ms, set.dead_letter.as_str()), (3, 60_000, "{ppoison}:dlq"));
    assert_eq!(seen.counts()[&ids[2]], 3, "exactly MAXDELIVER attempts");
    assert_eq!(seen.counts()[&ids[4]], 1);
    let letters = dlq::list(&mut conn, "{ppoison}:dlq", "-", 10).await.unwrap();
    let by_source: std::collections::BTreeMap<String, (String, u64, Option<u64>)> =
        letters.iter().map(|l| (l.source_id.clone(), (l.reason.clone(), l.deliveries, l.first_delivery_ms))).collect();
    let (reason, deliveries, first) = &by_source[&ids[2]];
    assert_eq!((reason.as_str(), *deliveries), ("maxdeliver", 3));
    assert!(first.is_some(), "the server's eight provenance fields");
    assert_eq!(by_source[&ids[4]].0, "fatal");
    let retried = letters.iter().find(|l| l.source_id == ids[2]).unwrap();
    assert_eq!(field(&retried.fields, "n").as_deref(), Some("2"), "original fields kept");
    assert_eq!(report.handled, 4);
    assert_eq!(report.dead_lettered, 1, "only the FATAL hand-over is counted by the worker");
    assert_eq!(calls(&mut conn, "xadd").await, 6, "the producer's XADDs only: no client-side dead letter");
    assert_eq!(calls(&mut conn, "xautoclaim").await, 0, "no XAUTOCLAIM ran");
}

/// (c) On Redis 8.2.3, which has no `RILL.GROUP`, the same `Set` config runs the client-side
/// loop: poison is dead-lettered by the worker (its own reason text) after 3 attempts and a
/// crashed consumer's entries are reclaimed after min_idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_8_falls_back_to_the_client_loop() {
    let Some(server) = Server::reference(ReferenceServer::Redis8) else { return };
    let target = server.target();
    let stream = "{pfall}";
    let mut conn = connect(&target).await;
    create_group(&mut conn, stream, "g").await;
    let ids =
        produce(&mut conn, stream, 0..5, |i| if i == 1 { vec![("poison", "retry".to_owned())] } else { vec![] }).await;
    assert_eq!(scenarios::read_and_die(&mut conn, stream, "g", "pod-crash").await, 5);

    let seen = Seen::default();
    let s = seen.clone();
    let cfg = config(stream, "pod-rescue", FeatureMode::Detect)
        .with_server_policy(ServerPolicyMode::Set)
        .with_delivery_limit(3);
    let w = spawn(&target, cfg, move |e: Entry| {
        let s = s.clone();
        async move {
            s.record(&e);
            if e.get_str("poison").is_some() {
                return Err(HandlerError::retry("cannot parse"));
            }
            Ok(())
        }
    });
    wait_for(20, "the client loop to rescue and dead-letter", || {
        let mut c = conn.clone();
        async move { xlen(&mut c, "{pfall}:dlq").await == 1 && pending_count(&mut c, stream, "g").await == 0 }
    })
    .await;
    let report = w.stop().await;
    assert_eq!(report.handled, 4);
    assert_eq!(report.dead_lettered, 1, "the worker wrote the dead letter itself");
    let letters = dlq::list(&mut conn, "{pfall}:dlq", "-", 10).await.unwrap();
    assert_eq!(letters[0].source_id, ids[1]);
    assert!(letters[0].first_delivery_ms.is_none(), "the worker's six provenance fields");
    let reason = letters[0].reason.clone();
    assert!(reason.contains("delivery limit 3"), "client-side reason: {reason}");
    // One read by pod-crash, then the rescue's attempts up to the limit.
    assert!(seen.counts()[&ids[1]] >= 2);
}

/// (d) `ticks` and `{ticks}` have the same dead-letter stream but not the same idempotency
/// guard: an entry of `ticks` with ID 5-1 is handled even though `{ticks}` already handled 5-1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_keys_of_ticks_and_braced_ticks_do_not_meet() {
    let server = Server::rill();
    let target = server.target();
    let mut conn = connect(&target).await;
    for stream in ["{ticks}", "ticks"] {
        create_group(&mut conn, stream, "g").await;
        let _: Value =
            redis::cmd("XADD").arg(stream).arg("5-1").arg("n").arg(stream).query_async(&mut conn).await.unwrap();
    }
    let mut handled = Vec::new();
    for stream in ["{ticks}", "ticks"] {
        let seen = Seen::default();
        let s = seen.clone();
        let cfg = config(stream, "c", FeatureMode::Detect).with_idempotency_ttl(Duration::from_secs(60));
        let w = spawn(&target, cfg, move |e: Entry| {
            let s = s.clone();
            async move {
                s.record(&e);
                Ok(())
            }
        });
        wait_for(10, "the entry acked", || {
            let mut c = conn.clone();
            async move { pending_count(&mut c, stream, "g").await == 0 && xlen(&mut c, stream).await == 1 }
        })
        .await;
        // Let the worker settle before stopping (the wait may pass before its first read).
        wait_for(10, "the entry handled or skipped", || {
            let w = w.stats.clone();
            async move {
                let r = w.report();
                r.handled + r.duplicates == 1
            }
        })
        .await;
        let report = w.stop().await;
        handled.push((stream, report.handled, report.duplicates, seen.len()));
    }
    assert_eq!(handled, [("{ticks}", 1, 0, 1), ("ticks", 1, 0, 1)], "no entry acked unhandled");
}

/// A busy worker's acks go out in batches: 3000 entries handled by 64 handlers at a time take
/// far fewer XACKs than entries (one per entry before), every entry is acked, and the report
/// counts each once, after its XACK was answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_worker_acks_in_batches() {
    let rill = Server::rill();
    let target = rill.target();
    let stream = "{pbatch}";
    let mut conn = connect(&target).await;
    create_group(&mut conn, stream, "g").await;
    let total = 3000;
    produce(&mut conn, stream, 0..total, |_| vec![]).await;
    let before = calls(&mut conn, "xack").await;
    let cfg = config(stream, "pod-a", FeatureMode::Detect).with_batch_size(100).with_concurrency(64);
    let w = spawn(&target, cfg, |_e: Entry| async {
        tokio::task::yield_now().await;
        Ok::<(), HandlerError>(())
    });
    wait_for(20, "every entry acked", || {
        let mut c = conn.clone();
        async move { pending_count(&mut c, stream, "g").await == 0 && lag(&mut c, stream).await == 0 }
    })
    .await;
    let report = w.stop().await;
    assert_eq!(report.handled, total as u64);
    let xacks = calls(&mut conn, "xack").await - before;
    assert!(xacks > 0 && xacks <= total as u64 / 3, "{xacks} XACKs for {total} entries");
}

/// The group's lag (entries not yet delivered to it).
async fn lag(conn: &mut rill_worker::Connection, stream: &str) -> i64 {
    let groups = rill_worker::ops::groups(conn, stream).await.unwrap();
    groups[0].lag.unwrap()
}
