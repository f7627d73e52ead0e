//! The worker scenarios against Debian's redis-server 7.0.15 (XAUTOCLAIM path), rill-server
//! with feature detection (XREADGROUP CLAIM and XNACK), and rill-server forced onto the
//! XAUTOCLAIM path. Each test starts its own server on a free loopback port.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
mod scenarios;

use common::ServerTarget;
use rill_testkit::Server;
use rill_worker::{FeatureMode, ServerFeatures};

macro_rules! matrix {
    ($module:ident, $server:expr, $mode:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn crash_and_rescue() {
                let s: Server = $server;
                scenarios::crash_and_rescue(s.target(), $mode).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn restart_drains_history() {
                let s: Server = $server;
                scenarios::restart_drains_history(s.target(), $mode).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn poison_to_dlq_exactly_once() {
                let s: Server = $server;
                scenarios::poison_to_dlq_exactly_once(s.target(), $mode).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn shutdown_without_loss() {
                let s: Server = $server;
                scenarios::shutdown_without_loss(s.target(), $mode, 7).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn crashes_lose_nothing() {
                let s: Server = $server;
                scenarios::crashes_lose_nothing(s.target(), $mode, 11).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn replay_from_dlq() {
                let s: Server = $server;
                scenarios::replay_from_dlq(s.target(), $mode).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn recovers_from_nogroup() {
                let s: Server = $server;
                scenarios::recovers_from_nogroup(s.target(), $mode).await;
            }
        }
    };
}

matrix!(redis7, common::redis(), FeatureMode::Detect);
matrix!(rill, Server::rill(), FeatureMode::Detect);
matrix!(rill_legacy_path, Server::rill(), FeatureMode::Legacy);

#[tokio::test]
async fn features_are_detected() {
    let redis = common::redis();
    let rill = Server::rill();
    let mut c = scenarios::connect(&redis.target()).await;
    assert_eq!(ServerFeatures::detect(&mut c).await, ServerFeatures::LEGACY);
    let mut c = scenarios::connect(&rill.target()).await;
    assert_eq!(
        ServerFeatures::detect(&mut c).await,
        ServerFeatures { claim_on_read: true, xnack: true, policies: true, readgroup_counts: true }
    );
}
