//! Thread-block clusters: the cluster-wide barrier (whole or split into arrive and wait).
//! Distributed shared memory addresses come from [`super::memory::Smem::in_cta`].

use crate::ir::{ArriveSemantics, ClusterOp, Op};
use crate::trace::val::emit_effect;

/// `barrier.cluster.arrive.release.aligned`: this thread's earlier writes become visible to
/// cluster threads after their matching wait.
#[track_caller]
pub fn cluster_arrive() {
    emit_effect(Op::Cluster(ClusterOp::Arrive {
        semantics: ArriveSemantics::Release,
    }));
}

/// `barrier.cluster.arrive.relaxed.aligned`: an arrival with no memory ordering.
#[track_caller]
pub fn cluster_arrive_relaxed() {
    emit_effect(Op::Cluster(ClusterOp::Arrive {
        semantics: ArriveSemantics::Relaxed,
    }));
}

/// `barrier.cluster.wait.aligned`: waits for every thread of the cluster to arrive.
#[track_caller]
pub fn cluster_wait() {
    emit_effect(Op::Cluster(ClusterOp::Wait));
}

/// Arrive then wait: a full cluster barrier.
#[track_caller]
pub fn cluster_sync() {
    cluster_arrive();
    cluster_wait();
}
