//! `rill demo ticker --server-policies`: the market-tick story told by a rill server's group
//! policy instead of the client's reclaim loop.
//!
//! 1. The same seeded 50 ticks as `rill demo ticker`.
//! 2. The group gets a policy: `RILL.GROUP SET ... MAXDELIVER 3 ACKWAIT 1000`.
//! 3. `pod-crash` reads all 50 and dies without acking; pending shows 50 owned by it.
//! 4. `pod-rescue` is the plainest consumer there is: `XREADGROUP ... >`, handle, `XACK`, and
//!    `RILL.NACK` for a tick it cannot price. After ACKWAIT the server hands pod-crash's ticks
//!    back and serves them to `>` first; at the third delivery a failed poison tick is moved by
//!    the server to `rill-demo:{ticks}:dlq` (reason `maxdeliver`).
//! 5. The end state, the policy's counters, and the demo's own command tally: no XAUTOCLAIM,
//!    no XCLAIM and no XADD to the dead-letter stream came from this code.
//!
//! On a server without `RILL.GROUP` it refuses before touching anything.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::Value;
use rill_worker::policy::{self, PolicyValue};
use rill_worker::reply::read_reply;
use rill_worker::{dlq, ops, Connection, ServerFeatures, Target};

use super::ticker::{produce, DELIVERY_LIMIT, DLQ, GROUP, POISON_SEQ, STREAM, SYMBOLS, TICKS};
use super::{indent, take_keys, DemoOptions};
use crate::commands::pending_text;
use crate::dead_letters::dlq_table;
use crate::output::Json;
use crate::policies::policy_text;

const ACKWAIT: Duration = Duration::from_secs(1);

/// What pod-rescue's loop sent, counted by the loop itself.
#[derive(Debug, Default)]
struct Tally {
    reads: u64,
    acks: u64,
    nacks: u64,
}

/// Runs the story; returns its summary figures (the `--json` document).
pub async fn run(target: &Target, options: DemoOptions) -> Result<Json, Box<dyn std::error::Error>> {
    let seed = options.seed;
    let story = options.story();
    let mut conn = target.connect(None).await?;
    if !ServerFeatures::detect(&mut conn).await.policies {
        return Err("--server-policies needs a rill server (RILL.GROUP); this server has no group policies. \
                    Run `rill demo ticker` without it for the client-side loop, or drop --url to use an \
                    embedded rill-server"
            .into());
    }
    take_keys(&mut conn, &[STREAM, DLQ], options.force).await?;

    story.say(format_args!(
        "== 1. market simulator (seed {seed}): {TICKS} ticks for {} symbols -> {STREAM}",
        SYMBOLS.len()
    ));
    let (ticks, ids) = produce(&mut conn, seed).await?;
    let poison = ticks.iter().filter(|t| t.seq == POISON_SEQ).count();
    story.say(format_args!("   {} ticks; {poison} have seq {POISON_SEQ} (poison)\n", ids.len()));

    let ackwait_ms = ACKWAIT.as_millis().to_string();
    story.say(format_args!(
        "== 2. group {GROUP} gets a server policy: RILL.GROUP SET {STREAM} {GROUP} MAXDELIVER {DELIVERY_LIMIT} ACKWAIT {ackwait_ms}"
    ));
    let _: Value = redis::cmd("XGROUP").arg("CREATE").arg(STREAM).arg(GROUP).arg("0").query_async(&mut conn).await?;
    let settings = [("MAXDELIVER".to_owned(), DELIVERY_LIMIT.to_string()), ("ACKWAIT".to_owned(), ackwait_ms)];
    policy::set(&mut conn, STREAM, GROUP, &settings).await?;
    story.say(format_args!(
        "   an unacked delivery is handed back after {} ms and served first to `>` reads; a failed delivery \
         number {DELIVERY_LIMIT} moves a tick to {DLQ} (rill policy get '{STREAM}' {GROUP})\n",
        ACKWAIT.as_millis()
    ));

    story.say(format_args!("== 3. consumer pod-crash reads all {TICKS} ticks and dies before acking"));
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
    let report = ops::pending(&mut conn, STREAM, GROUP, 3).await?;
    let pending_after_crash = report.summary.count;
    story.say(format_args!("   pod-crash read {read} ticks ... and crashed"));
    story.say(format_args!("{}", indent(&pending_text(STREAM, GROUP, &report))));

    story.say(format_args!(
        "\n== 4. pod-rescue: XREADGROUP ... > , handle, XACK (RILL.NACK for a tick it cannot price); nothing else"
    ));
    let mut tally = Tally::default();
    let mut attempts: BTreeMap<String, u64> = BTreeMap::new();
    let mut handled = 0u64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let pending = ops::pending(&mut conn, STREAM, GROUP, 0).await?.summary.count;
        let dead = ops::length(&mut conn, DLQ).await?;
        if pending == 0 && dead == poison as u64 {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err("the demo did not finish within 60 s".into());
        }
        rescue_round(&mut conn, story, &mut tally, &mut attempts, &mut handled).await?;
    }
    story.say(format_args!(
        "   pod-rescue: handled {handled}; sent {} reads, {} XACKs, {} RILL.NACKs, 0 XAUTOCLAIM, 0 XCLAIM, 0 dead-letter XADDs\n",
        tally.reads, tally.acks, tally.nacks
    ));

    story.say(format_args!("== 5. the end state"));
    let report = ops::pending(&mut conn, STREAM, GROUP, 5).await?;
    story.say(format_args!("{}", indent(&pending_text(STREAM, GROUP, &report))));
    let letters = dlq::list(&mut conn, DLQ, "-", 100).await?;
    story.say(format_args!(
        "   dead letters in {DLQ}, written by the server (rill dlq list '{STREAM}'): {}",
        letters.len()
    ));
    story.say(format_args!("{}", indent(&dlq_table(&letters))));
    let info = policy::info_rows(&mut conn, STREAM, GROUP).await?;
    story.say(format_args!("   the policy's counters (rill policy info '{STREAM}' {GROUP}):"));
    let counters: Vec<(String, PolicyValue)> = info
        .iter()
        .filter(|(k, _)| {
            ["delivered", "redelivered", "acked", "handed-back", "nacked", "dead-lettered"].contains(&k.as_str())
        })
        .cloned()
        .collect();
    story.say(format_args!("{}", indent(&policy_text(STREAM, GROUP, &counters))));
    story.say(format_args!(
        "   no XAUTOCLAIM sweep and no client-side dead-lettering ran: the server handed back pod-crash's \
         ticks and moved the poison ones"
    ));
    let counter = |name: &str| match info.iter().find(|(k, _)| k == name).map(|(_, v)| v) {
        Some(PolicyValue::Int(n)) => Json::Int(*n),
        _ => Json::Null,
    };
    Ok(Json::obj([
        ("demo", Json::str("ticker")),
        ("server_policies", Json::Bool(true)),
        ("seed", Json::uint(seed)),
        ("stream", Json::str(STREAM)),
        ("group", Json::str(GROUP)),
        ("dead_letter_stream", Json::str(DLQ)),
        ("ticks", Json::uint(ids.len() as u64)),
        ("poison_ticks", Json::uint(poison as u64)),
        ("maxdeliver", Json::uint(DELIVERY_LIMIT)),
        ("ackwait_ms", Json::uint(u64::try_from(ACKWAIT.as_millis()).unwrap_or(u64::MAX))),
        ("crashed_consumer_read", Json::uint(read as u64)),
        ("pending_after_crash", Json::uint(pending_after_crash)),
        (
            "rescue",
            Json::obj([
                ("consumer", Json::str("pod-rescue")),
                ("handled", Json::uint(handled)),
                ("reads", Json::uint(tally.reads)),
                ("xack", Json::uint(tally.acks)),
                ("rill_nack", Json::uint(tally.nacks)),
                ("xautoclaim", Json::Int(0)),
                ("client_dead_letters", Json::Int(0)),
            ]),
        ),
        ("handed_back", counter("handed-back")),
        ("server_dead_lettered", counter("dead-lettered")),
        ("pending_at_end", Json::uint(report.summary.count)),
        ("dead_letters", Json::uint(letters.len() as u64)),
    ]))
}

/// One `>` read of pod-rescue and the handling of what it returned.
async fn rescue_round(
    conn: &mut Connection,
    story: super::Story,
    tally: &mut Tally,
    attempts: &mut BTreeMap<String, u64>,
    handled: &mut u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let v: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(GROUP)
        .arg("pod-rescue")
        .arg("COUNT")
        .arg(10)
        .arg("BLOCK")
        .arg(250)
        .arg("STREAMS")
        .arg(STREAM)
        .arg(">")
        .query_async(conn)
        .await?;
    tally.reads += 1;
    for e in read_reply(&v, STREAM, "XREADGROUP")? {
        let Some(fields) = e.fields else { continue };
        let get = |name: &str| {
            fields
                .iter()
                .find(|(f, _)| f == name.as_bytes())
                .map_or_else(|| "?".to_owned(), |(_, v)| String::from_utf8_lossy(v).into_owned())
        };
        let (symbol, seq) = (get("symbol"), get("seq"));
        let attempt = attempts.entry(e.id.clone()).or_insert(0);
        *attempt += 1;
        if seq == POISON_SEQ.to_string() {
            let _: i64 =
                redis::cmd("RILL.NACK").arg(STREAM).arg(GROUP).arg("IDS").arg(1).arg(&e.id).query_async(conn).await?;
            tally.nacks += 1;
            // pod-crash's read was delivery 1.
            let delivery = *attempt + 1;
            let outcome = if delivery >= DELIVERY_LIMIT { "the server dead-letters it" } else { "handed back" };
            story.say(format_args!(
                "   pod-rescue  {}  {symbol:<5} seq {seq}: poison, RILL.NACK (delivery {delivery}): {outcome}",
                e.id
            ));
            continue;
        }
        let _: i64 = redis::cmd("XACK").arg(STREAM).arg(GROUP).arg(&e.id).query_async(conn).await?;
        tally.acks += 1;
        *handled += 1;
        story.say(format_args!("   pod-rescue  {}  {symbol:<5} seq {seq} @ {} handled, XACK", e.id, get("price")));
    }
    Ok(())
}
