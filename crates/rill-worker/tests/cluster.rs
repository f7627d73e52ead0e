//! The worker on a real Redis Cluster: three Debian redis-server primaries on loopback ports,
//! joined with `redis-cli --cluster create`, killed when the test ends. One cluster serves
//! every scenario (each uses its own hash tag, so they land on different nodes).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
mod scenarios;

use common::Cluster;
use rill_worker::{keys, FeatureMode, WorkerConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_runs_unchanged_on_a_cluster() {
    let cluster = Cluster::start();
    let target = cluster.target();

    // Derived keys share the stream's slot.
    for stream in ["{orders}", "orders", "{crash}", "{poison}"] {
        let dlq = keys::default_dead_letter_stream(stream).unwrap();
        assert_eq!(cluster.keyslot(stream), cluster.keyslot(&dlq), "{stream} vs {dlq}");
        let guard = WorkerConfig::new(stream, "g", "c").unwrap().guard_key("1-0").unwrap();
        assert_eq!(cluster.keyslot(stream), cluster.keyslot(&guard), "{stream} vs {guard}");
    }
    // The scenarios' streams are spread over more than one node.
    let slots: Vec<u16> = ["{crash}", "{poison}", "{replay}", "{crashes}"].iter().map(|k| cluster.keyslot(k)).collect();
    assert!(slots.iter().any(|s| *s != slots[0]));

    scenarios::crash_and_rescue(target.clone(), FeatureMode::Detect).await;
    scenarios::restart_drains_history(target.clone(), FeatureMode::Detect).await;
    scenarios::poison_to_dlq_exactly_once(target.clone(), FeatureMode::Detect).await;
    scenarios::replay_from_dlq(target.clone(), FeatureMode::Detect).await;
    scenarios::crashes_lose_nothing(target.clone(), FeatureMode::Detect, 5).await;
    scenarios::shutdown_without_loss(target, FeatureMode::Detect, 3).await;
}
