//! End-to-end throughput: a producer XADDs N entries (pipelined, 100 per round trip) while W
//! workers with a no-op handler read, handle and XACK them. Prints entries/s from the first
//! XADD to the last ack. Used by `bench/worker.sh`.
//!
//! ```text
//! cargo run --release -p rill-worker --example throughput -- redis://127.0.0.1:6379 [entries] [workers]
//! ```

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rill_worker::{CancellationToken, Entry, Target, Worker, WorkerConfig};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let entries: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200_000);
    let workers: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(4);
    let target = Target::Single(url);
    let stream = "{bench}";

    let mut conn = target.connect(None).await?;
    redis::cmd("DEL").arg(stream).arg("{bench}:dlq").query_async::<i64>(&mut conn).await?;
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg("g")
        .arg("$")
        .arg("MKSTREAM")
        .query_async::<()>(&mut conn)
        .await?;

    let token = CancellationToken::new();
    let mut stats = Vec::new();
    let mut joins = Vec::new();
    for i in 0..workers {
        let config = WorkerConfig::new(stream, "g", &format!("bench-{i}"))?
            .with_batch_size(100)
            .with_concurrency(64)
            .with_block(Duration::from_millis(100))
            .with_min_idle(Duration::from_secs(600));
        let worker = Worker::new(target.clone(), config, |_e: Entry| async { Ok(()) })?;
        stats.push(worker.stats());
        joins.push(tokio::spawn(worker.run(token.clone())));
    }
    // Let every worker connect and block before the clock starts.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let started = Instant::now();
    let producer = tokio::spawn(async move {
        let mut sent = 0u64;
        while sent < entries {
            let n = (entries - sent).min(100);
            let mut pipe = redis::pipe();
            for i in 0..n {
                pipe.cmd("XADD")
                    .arg(stream)
                    .arg("*")
                    .arg("n")
                    .arg(sent + i)
                    .arg("payload")
                    .arg("0123456789abcdef")
                    .ignore();
            }
            pipe.query_async::<()>(&mut conn).await?;
            sent += n;
        }
        Ok::<(), redis::RedisError>(())
    });
    let handled = || stats.iter().map(|s| s.handled.load(Ordering::Relaxed)).sum::<u64>();
    let deadline = Instant::now() + Duration::from_secs(600);
    while handled() < entries {
        if Instant::now() > deadline {
            return Err(format!("only {} of {entries} handled after 600 s", handled()).into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = started.elapsed();
    producer.await??;
    token.cancel();
    for j in joins {
        j.await??;
    }
    println!(
        "entries={entries} workers={workers} seconds={:.3} entries_per_sec={:.0}",
        elapsed.as_secs_f64(),
        entries as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}
