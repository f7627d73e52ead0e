//! Running a coordinated failover (`FAILOVER`) against the server: the state machine and its
//! state are `replication::failover`'s; here the pause, the link to the target and the
//! cron's checks act on the server state.

use crate::pause::{Actions, Purpose};
use crate::replication::failover::{Failover, Phase, Request};
use crate::state::{Shared, State};
use std::sync::Arc;

/// Start a failover (the command checked its arguments and this server's role): pause writes
/// until `tick` finds the target caught up.
pub fn start(st: &mut State, req: Request, now_ms: i64) {
    match &req.target {
        Some((host, port)) => tracing::info!("FAILOVER requested to {host}:{port}."),
        None => tracing::info!("FAILOVER requested to any replica."),
    }
    st.replication.failover = Failover {
        phase: Phase::WaitForSync,
        target: req.target,
        end_ms: req.timeout_ms.map(|t| now_ms.saturating_add(t)),
        force: req.force,
    };
    // The replicas say how far they are now rather than at their next second: the handover
    // (and the write pause) takes milliseconds, not up to a second as in Redis.
    st.request_replica_acks(now_ms);
    let expiry = st.pause.pause(Purpose::Failover, i64::MAX, Actions::WRITE_SET, now_ms);
    st.engine.pause_expiry(expiry);
}

/// The failover is over (done or given up): forget it and end its pause.
pub fn clear(st: &mut State, now_ms: i64) {
    st.replication.failover = Failover::default();
    let expiry = st.pause.unpause(Purpose::Failover, now_ms);
    st.engine.pause_expiry(expiry);
}

/// Give the failover up: a server already handing over becomes a primary again.
pub fn abort(st: &mut State, why: &str, now_ms: i64) {
    let f = &st.replication.failover;
    match (&f.phase, &f.target) {
        (Phase::None, _) => return,
        (_, Some((host, port))) => tracing::info!("FAILOVER to {host}:{port} aborted: {why}"),
        (_, None) => tracing::info!("FAILOVER to any replica aborted: {why}"),
    }
    if st.replication.failover.phase == Phase::InProgress {
        crate::replica::stop(st);
        st.config.set_replicaof(None);
    }
    clear(st, now_ms);
}

/// The replica at `host:port`, by what it announced (or its address) and its listening port.
pub fn find_replica<'a>(st: &'a State, host: &str, port: u16) -> Option<&'a crate::replication::primary::ReplicaLink> {
    st.replication.replicas.values().find(|l| l.ip.eq_ignore_ascii_case(host) && l.port == port)
}

/// From the cron: time the wait out, or hand over to a replica that acknowledged the whole
/// stream.
pub fn tick(shared: &Arc<Shared>, st: &mut State, now_ms: i64) {
    if st.replication.failover.phase != Phase::WaitForSync {
        return;
    }
    let f = st.replication.failover.clone();
    if f.end_ms.is_some_and(|end| end <= now_ms) {
        match (f.force, f.target) {
            (true, Some((host, port))) => {
                tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                hand_over(shared, st, host, port);
            }
            _ => abort(st, "Replica never caught up before timeout", now_ms),
        }
        return;
    }
    let offset = st.replication.offset();
    let caught_up = match &f.target {
        Some((host, port)) => {
            find_replica(st, host, *port).filter(|l| l.ack_offset == offset).map(|_| (host.clone(), *port))
        }
        None => st.replication.replicas.values().find(|l| l.ack_offset == offset).map(|l| (l.ip.clone(), l.port)),
    };
    if let Some((host, port)) = caught_up {
        tracing::info!("Failover target {host}:{port} is synced, failing over.");
        hand_over(shared, st, host, port);
    }
}

/// Become the replica of `host:port`, whose PSYNC will carry FAILOVER (`replica.rs`).
fn hand_over(shared: &Arc<Shared>, st: &mut State, host: String, port: u16) {
    st.replication.failover.target = Some((host.clone(), port));
    st.replication.failover.phase = Phase::InProgress;
    st.config.set_replicaof(Some((&host, port)));
    crate::replica::follow(shared, st, host, port);
}
