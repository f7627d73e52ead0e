//! `rill demo ticker`: the market-tick story.
//!
//! 1. A seeded market simulator writes 50 ticks (symbol, price, seq, ts) for 10 symbols.
//! 2. Consumer `pod-crash` reads all 50 and dies without acking.
//! 3. The pending summary shows 50 entries owned by `pod-crash`.
//! 4. Worker `pod-rescue` reclaims them once they have idled for min-idle (1 s); ticks with
//!    seq 3 are poison and fail until the delivery limit (3) moves them to
//!    `rill-demo:{ticks}:dlq`.
//! 5. Pending is 0; the dead letters are listed.
//!
//! Its keys are `rill-demo:{ticks}` and its dead-letter stream (see [`super::take_keys`]).

use std::time::Duration;

use redis::Value;
use rill_worker::reply::read_reply;
use rill_worker::{dlq, ops, CancellationToken, Entry, HandlerError, Target, Worker, WorkerConfig};

use super::{indent, take_keys, wait_until, DemoOptions, Rng};
use crate::commands::pending_text;
use crate::dead_letters::dlq_table;
use crate::output::Json;

pub(super) const STREAM: &str = "rill-demo:{ticks}";
pub(super) const DLQ: &str = "rill-demo:{ticks}:dlq";
pub(super) const GROUP: &str = "pricing";
pub(super) const SYMBOLS: [(&str, u64); 10] = [
    ("AAPL", 18_920),
    ("MSFT", 41_510),
    ("NVDA", 12_030),
    ("AMZN", 18_640),
    ("GOOG", 17_210),
    ("META", 50_480),
    ("TSLA", 24_870),
    ("AMD", 15_560),
    ("INTC", 3_110),
    ("ORCL", 12_790),
];
pub(super) const TICKS: usize = 50;
const MIN_IDLE: Duration = Duration::from_secs(1);
pub(super) const DELIVERY_LIMIT: u64 = 3;
pub(super) const POISON_SEQ: u64 = 3;

/// One simulated tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tick {
    pub symbol: &'static str,
    pub price_cents: u64,
    pub seq: u64,
    pub ts_ms: u64,
}

/// The seeded market: a random walk per symbol, sequence numbers per symbol.
pub fn simulate(seed: u64, n: usize) -> Vec<Tick> {
    let mut rng = Rng(seed);
    let mut prices: Vec<u64> = SYMBOLS.iter().map(|(_, p)| *p).collect();
    let mut seqs = [0u64; SYMBOLS.len()];
    let mut ticks = Vec::with_capacity(n);
    for i in 0..n {
        let k = rng.below(SYMBOLS.len() as u64) as usize;
        let (Some(price), Some(seq), Some((symbol, _))) = (prices.get_mut(k), seqs.get_mut(k), SYMBOLS.get(k)) else {
            continue;
        };
        // ±1 % in basis points.
        let move_bp = rng.below(201) as i64 - 100;
        let delta = (*price as i64 * move_bp) / 10_000;
        *price = (*price as i64 + delta).max(1) as u64;
        *seq += 1;
        ticks.push(Tick { symbol, price_cents: *price, seq: *seq, ts_ms: 1_767_225_600_000 + i as u64 * 250 });
    }
    ticks
}

pub(super) fn price(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// The simulator's ticks for `seed`, appended to [`STREAM`] in one pipeline; their IDs.
pub(super) async fn produce(
    conn: &mut rill_worker::Connection,
    seed: u64,
) -> redis::RedisResult<(Vec<Tick>, Vec<String>)> {
    let ticks = simulate(seed, TICKS);
    let mut pipe = redis::pipe();
    for t in &ticks {
        pipe.cmd("XADD")
            .arg(STREAM)
            .arg("*")
            .arg("symbol")
            .arg(t.symbol)
            .arg("price")
            .arg(price(t.price_cents))
            .arg("seq")
            .arg(t.seq)
            .arg("ts")
            .arg(t.ts_ms);
    }
    let ids: Vec<String> = pipe.query_async(conn).await?;
    Ok((ticks, ids))
}

/// Runs the story; returns its summary figures (the `--json` document).
pub async fn run(target: &Target, options: DemoOptions) -> Result<Json, Box<dyn std::error::Error>> {
    let seed = options.seed;
    let story = options.story();
    let mut conn = target.connect(None).await?;
    take_keys(&mut conn, &[STREAM, DLQ], options.force).await?;

    story.say(format_args!(
        "== 1. market simulator (seed {seed}): {TICKS} ticks for {} symbols -> {STREAM}",
        SYMBOLS.len()
    ));
    let (ticks, ids) = produce(&mut conn, seed).await?;
    for (id, t) in ids.iter().zip(&ticks).take(5) {
        story.say(format_args!("   {id}  {:<5} {:>8}  seq {}", t.symbol, price(t.price_cents), t.seq));
    }
    let poison = ticks.iter().filter(|t| t.seq == POISON_SEQ).count();
    story.say(format_args!("   ... {} more; {poison} ticks have seq {POISON_SEQ} (poison)\n", TICKS.saturating_sub(5)));

    story.say(format_args!(
        "== 2. consumer pod-crash joins group {GROUP}, reads all {TICKS} ticks, and dies before acking"
    ));
    let _: Value = redis::cmd("XGROUP").arg("CREATE").arg(STREAM).arg(GROUP).arg("0").query_async(&mut conn).await?;
    let v: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(GROUP)
        .arg("pod-crash")
        .arg("COUNT")
        .arg(TICKS)
        .arg("STREAMS")
        .arg(STREAM)
        .arg(">")
        .query_async(&mut conn)
        .await?;
    let read = read_reply(&v, STREAM, "XREADGROUP")?.len();
    story.say(format_args!("   pod-crash read {read} ticks ... and crashed\n"));

    story.say(format_args!("== 3. pending summary (rill pending {STREAM} {GROUP})"));
    let report = ops::pending(&mut conn, STREAM, GROUP, 5).await?;
    let pending_after_crash = report.summary.count;
    story.say(format_args!("{}", indent(&pending_text(STREAM, GROUP, &report))));

    story.say(format_args!(
        "== 4. pod-rescue starts: reclaims entries idle for {}s, delivery limit {DELIVERY_LIMIT}, ticks with seq {POISON_SEQ} fail",
        MIN_IDLE.as_secs()
    ));
    let config = WorkerConfig::new(STREAM, GROUP, "pod-rescue")?
        .with_min_idle(MIN_IDLE)
        .with_reclaim_interval(Duration::from_millis(250))
        .with_block(Duration::from_millis(250))
        .with_delivery_limit(DELIVERY_LIMIT)
        .with_concurrency(1)
        .with_batch_size(10);
    let worker = Worker::new(target.clone(), config, move |e: Entry| async move {
        let symbol = e.get_str("symbol").unwrap_or("?").to_owned();
        let seq = e.get_str("seq").unwrap_or("?").to_owned();
        if seq == POISON_SEQ.to_string() {
            story.say(format_args!(
                "   pod-rescue  {}  {symbol:<5} seq {seq}: poison, fails (delivery {})",
                e.id, e.deliveries
            ));
            return Err(HandlerError::retry(format!("cannot price {symbol} tick seq {seq}")));
        }
        story.say(format_args!(
            "   pod-rescue  {}  {symbol:<5} seq {seq} @ {} handled (delivery {})",
            e.id,
            e.get_str("price").unwrap_or("?"),
            e.deliveries
        ));
        Ok(())
    })?;
    let token = CancellationToken::new();
    let run = tokio::spawn(worker.run(token.clone()));
    let done = wait_until(Duration::from_secs(60), || {
        let mut c = conn.clone();
        async move {
            let pending = ops::pending(&mut c, STREAM, GROUP, 0).await.map(|r| r.summary.count).unwrap_or(1);
            let dead = ops::length(&mut c, DLQ).await.unwrap_or(0);
            pending == 0 && dead == poison as u64
        }
    })
    .await;
    token.cancel();
    let rescue = run.await??;
    if !done {
        return Err("the demo did not finish within 60 s".into());
    }
    story.say(format_args!(
        "   pod-rescue: handled {}, reclaimed {}, failed attempts {}, dead-lettered {}\n",
        rescue.handled, rescue.reclaimed, rescue.failed, rescue.dead_lettered
    ));

    story.say(format_args!("== 5. the end state"));
    let report = ops::pending(&mut conn, STREAM, GROUP, 5).await?;
    story.say(format_args!("{}", indent(&pending_text(STREAM, GROUP, &report))));
    let letters = dlq::list(&mut conn, DLQ, "-", 100).await?;
    story.say(format_args!("   dead letters in {DLQ} (rill dlq list '{STREAM}'): {}", letters.len()));
    story.say(format_args!("{}", indent(&dlq_table(&letters))));
    Ok(Json::obj([
        ("demo", Json::str("ticker")),
        ("seed", Json::uint(seed)),
        ("stream", Json::str(STREAM)),
        ("group", Json::str(GROUP)),
        ("dead_letter_stream", Json::str(DLQ)),
        ("ticks", Json::uint(ids.len() as u64)),
        ("poison_ticks", Json::uint(poison as u64)),
        ("delivery_limit", Json::uint(DELIVERY_LIMIT)),
        ("crashed_consumer_read", Json::uint(read as u64)),
        ("pending_after_crash", Json::uint(pending_after_crash)),
        (
            "rescue",
            Json::obj([
                ("consumer", Json::str("pod-rescue")),
                ("handled", Json::uint(rescue.handled)),
                ("reclaimed", Json::uint(rescue.reclaimed)),
                ("failed_attempts", Json::uint(rescue.failed)),
                ("dead_lettered", Json::uint(rescue.dead_lettered)),
            ]),
        ),
        ("pending_at_end", Json::uint(report.summary.count)),
        ("dead_letters", Json::uint(letters.len() as u64)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_market_is_seeded() {
        let a = simulate(42, 50);
        assert_eq!(a, simulate(42, 50));
        assert_ne!(a, simulate(7, 50));
        assert_eq!(a.len(), 50);
        assert!(a.iter().any(|t| t.seq == POISON_SEQ));
    }
}
