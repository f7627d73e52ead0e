//! `rill demo orders`: order workers that crash and restart, a poison order, and trimming
//! that never drops what the group still needs.
//!
//! 1. Workers w1, w2, w3 join group `fulfillment` on `rill-demo:{orders}` (delivery limit 4,
//!    min-idle 1 s). Their handler is idempotent: `SADD rill-demo:{orders}:fulfilled <order>`.
//! 2. The shop writes 300 orders in 3 waves with `XADD rill-demo:{orders} MAXLEN ~ 150 *`;
//!    order 42 has sku POISON. Before each wave the demo waits until the group has caught up, so the
//!    approximate cap only ever drops acked entries.
//! 3. During wave 1, w2 crashes and restarts under its own name: its pending history comes
//!    back first. During wave 2, w3 crashes for good; w4 reclaims its entries after 1 s.
//! 4. The poison order reaches the delivery limit and moves to `rill-demo:{orders}:dlq`.
//! 5. Every other order is fulfilled; pending is 0; every run's counts, the crashed ones' too;
//!    why `MAXLEN ~ 150` left more than 150 entries; a final `XTRIM MINID ~` at the group's
//!    safe point; the groups table.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use rill_worker::{
    dlq, ops, CancellationToken, Connection, Entry, HandlerError, Target, Worker, WorkerConfig, WorkerError,
    WorkerReport, WorkerStats,
};
use tokio::task::JoinHandle;

use super::{indent, take_keys, wait_until, DemoOptions, Rng, Story};
use crate::commands::groups_text;
use crate::dead_letters::dlq_table;
use crate::output::{Json, Table};

const STREAM: &str = "rill-demo:{orders}";
const DLQ: &str = "rill-demo:{orders}:dlq";
const FULFILLED: &str = "rill-demo:{orders}:fulfilled";
const GROUP: &str = "fulfillment";
const WAVES: usize = 3;
const WAVE: usize = 100;
const CAP: usize = 150;
const POISON_ORDER: usize = 42;
const DELIVERY_LIMIT: u64 = 4;
const CONCURRENCY: usize = 2;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Running {
    /// Order of start, to list the runs as they began.
    started: usize,
    name: String,
    token: CancellationToken,
    stats: Arc<WorkerStats>,
    join: JoinHandle<std::result::Result<WorkerReport, WorkerError>>,
}

/// One run of a worker that has ended.
struct Finished {
    started: usize,
    name: String,
    crashed: bool,
    /// For a crashed run, its counters when it died: an entry whose XACK had reached the server
    /// but whose reply had not come back is acked and counted by no run.
    report: WorkerReport,
}

/// The workers of the demo, running and ended.
struct Crew<'a> {
    target: &'a Target,
    store: Connection,
    story: Story,
    running: Vec<Running>,
    finished: Vec<Finished>,
    starts: usize,
}

impl Crew<'_> {
    fn start(&mut self, name: &str) -> Result<()> {
        let config = WorkerConfig::new(STREAM, GROUP, name)?
            .with_min_idle(Duration::from_secs(1))
            .with_reclaim_interval(Duration::from_millis(250))
            .with_block(Duration::from_millis(250))
            .with_delivery_limit(DELIVERY_LIMIT)
            .with_batch_size(10)
            .with_concurrency(CONCURRENCY);
        let store = self.store.clone();
        let worker = Worker::new(self.target.clone(), config, move |e: Entry| {
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
        let stats = worker.stats();
        let token = CancellationToken::new();
        let join = tokio::spawn(worker.run(token.clone()));
        self.story.say(format_args!("   {name} started"));
        self.starts += 1;
        self.running.push(Running { started: self.starts, name: name.to_owned(), token, stats, join });
        Ok(())
    }

    /// Kills the running worker `name` as a crash would: no shutdown, no ack, no hand-back.
    async fn crash(&mut self, name: &str) {
        let Some(i) = self.running.iter().position(|w| w.name == name) else { return };
        let w = self.running.remove(i);
        w.join.abort();
        let _ = w.join.await;
        self.story.say(format_args!("   {name} CRASHED (process gone, its pending entries stay in the PEL)"));
        self.finished.push(Finished { started: w.started, name: w.name, crashed: true, report: w.stats.report() });
    }

    /// Stops the running workers gracefully; returns every run, in the order they started.
    async fn stop(mut self) -> Result<Vec<Finished>> {
        for w in std::mem::take(&mut self.running) {
            w.token.cancel();
            let report = w.join.await??;
            self.finished.push(Finished { started: w.started, name: w.name, crashed: false, report });
        }
        self.finished.sort_by_key(|f| f.started);
        Ok(self.finished)
    }
}

async fn caught_up(conn: &Connection, expect_dead: u64) -> bool {
    let mut c = conn.clone();
    let groups = ops::groups(&mut c, STREAM).await.unwrap_or_default();
    let dead = ops::length(&mut c, DLQ).await.unwrap_or(0);
    groups.iter().any(|g| g.name == GROUP && g.pending == 0 && g.lag.unwrap_or(1) == 0) && dead >= expect_dead
}

/// `stream-node-max-entries`, if the server tells (CONFIG may be renamed or refused).
async fn node_max_entries(conn: &mut Connection) -> Option<u64> {
    let reply: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("stream-node-max-entries").query_async(conn).await.ok()?;
    reply.get(1)?.parse().ok()
}

/// Why `MAXLEN ~ CAP` left `length` entries.
fn approximate_trim_note(length: u64, node_entries: Option<u64>) -> String {
    let nodes = match node_entries {
        Some(n) => format!("up to {n} entries each (stream-node-max-entries)"),
        None => "of up to stream-node-max-entries entries each".to_owned(),
    };
    format!(
        "MAXLEN ~ {CAP} left {length} entries, not {CAP}: approximate trimming removes whole nodes \
         only, {nodes}, and stops before a node whose removal would leave fewer than {CAP}"
    )
}

fn runs_table(runs: &[Finished]) -> String {
    let mut t = Table::new(["worker", "ended", "handled", "reclaimed", "failed", "dead-lettered"]);
    for f in runs {
        let r = &f.report;
        t.row(vec![
            f.name.clone(),
            if f.crashed { "CRASHED" } else { "stopped" }.to_owned(),
            r.handled.to_string(),
            r.reclaimed.to_string(),
            r.failed.to_string(),
            r.dead_lettered.to_string(),
        ]);
    }
    t.render()
}

fn run_json(f: &Finished) -> Json {
    Json::obj([
        ("name", Json::str(&f.name)),
        ("crashed", Json::Bool(f.crashed)),
        ("handled", Json::uint(f.report.handled)),
        ("reclaimed", Json::uint(f.report.reclaimed)),
        ("failed", Json::uint(f.report.failed)),
        ("dead_lettered", Json::uint(f.report.dead_lettered)),
    ])
}

/// Runs the story; returns its summary figures (the `--json` document).
pub async fn run(target: &Target, options: DemoOptions) -> Result<Json> {
    let story = options.story();
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

    story.say(format_args!(
        "== 1. workers join group {GROUP} on {STREAM} (delivery limit {DELIVERY_LIMIT}, min-idle 1s)"
    ));
    let mut crew = Crew { target, store: conn.clone(), story, running: Vec::new(), finished: Vec::new(), starts: 0 };
    for name in ["w1", "w2", "w3"] {
        crew.start(name)?;
    }
    story.say("");

    story.say(format_args!(
        "== 2. the shop writes {} orders in {WAVES} waves: XADD {STREAM} MAXLEN ~ {CAP} * ...",
        WAVES * WAVE
    ));
    let mut lengths = Vec::with_capacity(WAVES);
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
        lengths.push(len);
        story.say(format_args!("   wave {}: {WAVE} orders written; stream length now {len}", wave + 1));

        match wave {
            0 => {
                tokio::time::sleep(Duration::from_millis(20 + rng.below(30))).await;
                crew.crash("w2").await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                story.say("   w2 restarts under the same name: it reads its own pending history (ID 0) first");
                crew.start("w2")?;
            }
            1 => {
                tokio::time::sleep(Duration::from_millis(20 + rng.below(30))).await;
                crew.crash("w3").await;
                story.say("   w4 replaces w3 for good: w3's entries are reclaimed once idle for 1s");
                crew.start("w4")?;
            }
            _ => {}
        }
        let expect_dead = u64::from(wave * WAVE <= POISON_ORDER);
        let c = conn.clone();
        if !wait_until(Duration::from_secs(60), || caught_up(&c, expect_dead)).await {
            return Err("the workers did not catch up within 60 s".into());
        }
        story.say("   the group has caught up (pending 0, lag 0): the next MAXLEN ~ trim only drops acked orders");
    }
    story.say("");

    story.say("== 3. results");
    let runs = crew.stop().await?;
    story.say(indent(&runs_table(&runs)));
    let handled: u64 = runs.iter().map(|f| f.report.handled).sum();
    let dead_lettered: u64 = runs.iter().map(|f| f.report.dead_lettered).sum();
    story.say(format_args!(
        "   all {} runs: handled {handled}, dead-lettered {dead_lettered} (a crashed run's counts are as of its \
         death; an XACK whose reply it did not live to read is counted by no run)",
        runs.len()
    ));
    let fulfilled: u64 = redis::cmd("SCARD").arg(FULFILLED).query_async(&mut conn).await?;
    story.say(format_args!(
        "   fulfilled orders: {fulfilled} of {} (every order but the poison one; handlers are idempotent, \
         so a re-run after a crash changes nothing)",
        WAVES * WAVE - 1
    ));
    let letters = dlq::list(&mut conn, DLQ, "-", 10).await?;
    story.say(format_args!("   dead letters in {DLQ}:"));
    story.say(indent(&dlq_table(&letters)));

    let before = ops::length(&mut conn, STREAM).await?;
    let node_entries = node_max_entries(&mut conn).await;
    if before > CAP as u64 {
        story.say(format_args!("\n   {}", approximate_trim_note(before, node_entries)));
    }
    let safe = ops::safe_trim_id(&mut conn, STREAM).await?.unwrap_or_default();
    let trimmed = ops::trim_acked(&mut conn, STREAM).await?;
    let after = before.saturating_sub(trimmed);
    story.say(format_args!(
        "   XTRIM {STREAM} MINID ~ {safe} (the group's safe point): {before} -> {after} entries ({trimmed} \
         trimmed; whole nodes again, so the node holding the safe point stays)"
    ));
    let groups = ops::groups(&mut conn, STREAM).await?;
    let length = ops::length(&mut conn, STREAM).await?;
    story.say(indent(&groups_text(STREAM, length, &groups)));
    if fulfilled != (WAVES * WAVE - 1) as u64 || letters.len() != 1 {
        return Err("unexpected end state".into());
    }
    Ok(Json::obj([
        ("demo", Json::str("orders")),
        ("seed", Json::uint(options.seed)),
        ("stream", Json::str(STREAM)),
        ("group", Json::str(GROUP)),
        ("dead_letter_stream", Json::str(DLQ)),
        ("orders", Json::uint((WAVES * WAVE) as u64)),
        ("delivery_limit", Json::uint(DELIVERY_LIMIT)),
        ("maxlen_approx", Json::uint(CAP as u64)),
        ("node_max_entries", node_entries.map_or(Json::Null, Json::uint)),
        ("lengths_after_waves", Json::Array(lengths.into_iter().map(Json::uint).collect())),
        ("runs", Json::Array(runs.iter().map(run_json).collect())),
        ("handled", Json::uint(handled)),
        ("dead_lettered", Json::uint(dead_lettered)),
        ("fulfilled", Json::uint(fulfilled)),
        ("dead_letters", Json::uint(letters.len() as u64)),
        (
            "trim",
            Json::obj([
                ("safe_id", Json::str(safe)),
                ("before", Json::uint(before)),
                ("after", Json::uint(after)),
                ("trimmed", Json::uint(trimmed)),
            ]),
        ),
    ]))
}
