use std::time::Duration;

use rill_worker::{Entry, HandlerError, Target, Worker, WorkerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = WorkerConfig::new("{orders}", "billing", "pod-1")? // dead letters: {orders}:dlq
        .with_min_idle(Duration::from_secs(30)) // reclaim entries of consumers idle this long
        .with_delivery_limit(5) // the 5th failed delivery goes to the dead-letter stream
        .with_concurrency(8);
    let target = Target::Single("redis://127.0.0.1:6379".into());
    let worker = Worker::new(target, config, |order: Entry| async move {
        let Some(amount) = order.get_str("amount") else {
            return Err(HandlerError::dead_letter("order without an amount")); // never retried
        };
        charge(amount).await.map_err(HandlerError::retry) // retried, then dead-lettered
    })?;
    let report = worker.run_until_signal().await?; // SIGTERM/Ctrl-C: finish in-flight, hand back the rest
    println!("handled {}, dead-lettered {}", report.handled, report.dead_lettered);
    Ok(())
}

async fn charge(_amount: &str) -> Result<(), String> {
    Ok(()) // must be idempotent: a crash before the XACK means a second delivery
}
