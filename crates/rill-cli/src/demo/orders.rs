//! `rill demo orders`: order workers that crash and restart, a poison order, and trimming
//! that never drops what the group still needs.
//!
//! 1. Workers w1, w2, w3 join group `fulfillment` on `rill-demo:{orders}` (delivery limit 4,
//!    min-idle 1 s). Their handler is idempotent: `SADD rill-demo:{orders}:fulfilled <order>`.
//! 2. The shop writes 300 orders in 3 waves with `XADD rill-demo:{orders} MAXLEN ~ 150 *`; order 42 has
//!    sku POISON. Before each wave the demo waits until the group has caught up, so the
//!    approximate cap only ever drops acked entries.
//! 3. During wave 1, w2 crashes and restarts under its own name: its pending history comes
//!    back first. During wave 2, w3 crashes for good; w4 reclaims its entries after 1 s.
//! 4. The poison order reaches the delivery limit and moves to `rill-demo:{orders}:dlq`.
//! 5. Every other order is fulfilled; pending is 0; a final `XTRIM MINID ~` at the group's
//!    safe point; the groups table.

use std::time::Duration;

use redis::Value;
use rill_worker::{
    dlq, ops, CancellationToken, Connection, Entry, HandlerError, Target, Worker, WorkerConfig, WorkerError,
    WorkerReport,
};
use tokio::task::JoinHandle;

use super::{take_keys, wait_until, DemoOptions, Rng};
use crate::commands::groups_text;
use crate::dead_letters::dlq_table;

const STREAM: &str = "rill-demo:{orders}";
const DLQ: &str = "rill-demo:{orders}:dlq";
const FULFILLED: &str = "rill-demo:{orders}:fulfilled";
const GROUP: &str = "fulfillment";
const WAVES: usize = 3;
const WAVE: usize = 100;
const CAP: usize = 150;
const POISON_ORDER: usize = 42;
const DELIVERY_LIMIT: u64 = 4;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Running {
    name: String,
    token: CancellationToken,
    join: JoinHandle<std::result::Result<WorkerReport, WorkerError>>,
}

fn start(target: &Target, name: &str, store: &Connection) -> Result<Running> {
    let config = WorkerConfig::new(STREAM, GROUP, name)?
        .with_min_idle(Duration::from_secs(1))
        .with_reclaim_interval(Duration::from_millis(250))
        .with_block(Duration::from_millis(250))
        .with_delivery_limit(DELIVERY_LIMIT)
        .with_batch_size(10)
        .with_concurrency(2);
    let store = store.clone();
    let worker = Worker::new(target.clone(), config, move |e: Entry| {
        let mut store = store.clone();
        async move {
            if e.get_str("sku") == Some("POISON") {
                return Err(HandlerError::retry("sku POISON is not in the catalogue"));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            let order = e.get_str("order").unwrap_or_default().to_owned();
            redis::cmd("SADD")
                .arg(FULFILLED)
                .arg(order)
                .query_async::<i64>(&mut store)
                .await
                .map_err(|err| HandlerError::retry(err.to_string()))?;
            Ok(())
        }
    })?;
    let token = CancellationToken::new();
    let join = tokio::spawn(worker.run(token.clone()));
    println!("   {name} started");
    Ok(Running { name: name.to_owned(), token, join })
}

async fn crash(w: Running) {
    w.join.abort();
    let _ = w.join.await;
    println!("   {} CRASHED (process gone, its pending entries stay in the PEL)", w.name);
}

async fn caught_up(conn: &Connection, expect_dead: u64) -> bool {
    let mut c = conn.clone();
    let groups = ops::groups(&mut c, STREAM).await.unwrap_or_default();
    let dead = ops::length(&mut c, DLQ).await.unwrap_or(0);
    groups.iter().any(|g| g.name == GROUP && g.pending == 0 && g.lag.unwrap_or(1) == 0) && dead >= expect_dead
}

pub async fn run(target: &Target, options: DemoOptions) -> Result<()> {
    let mut conn = target.connect(None).await?;
    take_keys(&mut conn, &[STREAM, DLQ, FULFILLED], options.force).await?;
    let _: Value = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(STREAM)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(&mut conn)
        .await?;
    let mut rng = Rng(options.seed);

    println!("== 1. workers join group {GROUP} on {STREAM} (delivery limit {DELIVERY_LIMIT}, min-idle 1s)");
    let mut workers = vec![start(target, "w1", &conn)?, start(target, "w2", &conn)?, start(target, "w3", &conn)?];
    println!();

    println!("== 2. the shop writes {} orders in {WAVES} waves: XADD {STREAM} MAXLEN ~ {CAP} * ...", WAVES * WAVE);
    for wave in 0..WAVES {
        let mut pipe = redis::pipe();
        for i in wave * WAVE..(wave + 1) * WAVE {
            let sku = if i == POISON_ORDER { "POISON".to_owned() } else { format!("SKU-{}", rng.below(40)) };
            pipe.cmd("XADD")
                .arg(STREAM)
                .arg("MAXLEN")
                .arg("~")
                .arg(CAP)
                .arg("*")
                .arg("order")
                .arg(format!("order-{i:04}"))
                .arg("sku")
                .arg(sku)
                .arg("qty")
                .arg(1 + rng.below(5))
                .arg("amount")
                .arg(format!("{}.{:02}", 5 + rng.below(200), rng.below(100)));
        }
        let _: Vec<String> = pipe.query_async(&mut conn).await?;
        let len = ops::length(&mut conn, STREAM).await?;
        println!("   wave {}: {WAVE} orders written; stream length now {len}", wave + 1);

        match wave {
            0 => {
                tokio::time::sleep(Duration::from_millis(20 + rng.below(30))).await;
                let i = workers.iter().position(|w| w.name == "w2").unwrap_or(0);
                crash(workers.remove(i)).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                println!("   w2 restarts under the same name: it reads its own pending history (ID 0) first");
                workers.push(start(target, "w2", &conn)?);
            }
            1 => {
                tokio::time::sleep(Duration::from_millis(20 + rng.below(30))).await;
                let i = workers.iter().position(|w| w.name == "w3").unwrap_or(0);
                crash(workers.remove(i)).await;
                println!("   w4 replaces w3 for good: w3's entries are reclaimed once idle for 1s");
                workers.push(start(target, "w4", &conn)?);
            }
            _ => {}
        }
        let expect_dead = u64::from(wave * WAVE <= POISON_ORDER);
        let c = conn.clone();
        if !wait_until(Duration::from_secs(60), || caught_up(&c, expect_dead)).await {
            return Err("the workers did not catch up within 60 s".into());
        }
        println!("   the group has caught up (pending 0, lag 0): the next MAXLEN ~ trim only drops acked orders");
    }
    println!();

    println!("== 3. results");
    let mut reports = Vec::new();
    for w in workers {
        w.token.cancel();
        reports.push((w.name, w.join.await??));
    }
    for (name, r) in &reports {
        println!(
            "   {name}: handled {:>3}, reclaimed {:>3}, dead-lettered {}",
            r.handled, r.reclaimed, r.dead_lettered
        );
    }
    let fulfilled: u64 = redis::cmd("SCARD").arg(FULFILLED).query_async(&mut conn).await?;
    println!(
        "   fulfilled orders: {fulfilled} of {} (every order but the poison one; handlers are idempotent, \
         so a re-run after a crash changes nothing)",
        WAVES * WAVE - 1
    );
    let letters = dlq::list(&mut conn, DLQ, "-", 10).await?;
    println!("   dead letters in {DLQ}:");
    println!("{}", indent(&dlq_table(&letters)));

    let before = ops::length(&mut conn, STREAM).await?;
    let safe = ops::safe_trim_id(&mut conn, STREAM).await?.unwrap_or_default();
    let trimmed = ops::trim_acked(&mut conn, STREAM).await?;
    println!(
        "\n   XTRIM {STREAM} MINID ~ {safe} (the group's safe point): {before} -> {} entries ({trimmed} trimmed)",
        before - trimmed
    );
    let groups = ops::groups(&mut conn, STREAM).await?;
    let length = ops::length(&mut conn, STREAM).await?;
    println!("{}", indent(&groups_text(STREAM, length, &groups)));
    if fulfilled != (WAVES * WAVE - 1) as u64 || letters.len() != 1 {
        return Err("unexpected end state".into());
    }
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines().map(|l| if l.is_empty() { String::new() } else { format!("   {l}") }).collect::<Vec<_>>().join("\n")
}
