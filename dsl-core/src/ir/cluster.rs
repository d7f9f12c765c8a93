//! Thread-block clusters: the cluster barrier and distributed shared memory addressing.

use super::{Operand, Reg, Requirement, visit_operand};
use crate::target::Capability;

/// Memory ordering of `barrier.cluster.arrive`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArriveSemantics {
    /// `.release` (the default): earlier writes are visible to threads after their wait.
    Release,
    /// `.relaxed`: no ordering; pair with an explicit fence when data is exchanged.
    Relaxed,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ClusterOp {
    /// `barrier.cluster.arrive{.release|.relaxed}.aligned`.
    Arrive { semantics: ArriveSemantics },
    /// `barrier.cluster.wait.aligned` (acquire).
    Wait,
    /// `mapa.shared::cluster.u32 dst, addr, rank`: this CTA's shared::cta address `addr` as
    /// the shared::cluster address of the same offset in CTA `rank`.
    Mapa {
        dst: Reg,
        addr: Operand,
        rank: Operand,
    },
}

impl ClusterOp {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            ClusterOp::Arrive { .. } | ClusterOp::Wait => {}
            ClusterOp::Mapa { dst, addr, rank } => {
                visit_operand(addr, f);
                visit_operand(rank, f);
                f(*dst, true);
            }
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        Requirement::with(Capability::Cluster, 8, 0)
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            ClusterOp::Arrive { .. } => "barrier.cluster.arrive",
            ClusterOp::Wait => "barrier.cluster.wait",
            ClusterOp::Mapa { .. } => "mapa.shared::cluster",
        }
    }
}
