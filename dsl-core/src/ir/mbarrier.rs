//! mbarrier: the shared-memory barrier objects that asynchronous work completes on.

use super::{Operand, Reg, Requirement, visit_operand};
use crate::target::Capability;

#[derive(Clone, Debug, PartialEq)]
pub enum MbarrierOp {
    /// `mbarrier.init.shared::cta.b64 [bar], count`.
    Init { bar: Operand, count: Operand },
    /// `mbarrier.arrive.shared::cta.b64 _, [bar]`.
    Arrive { bar: Operand },
    /// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], tx`.
    ArriveExpectTx { bar: Operand, tx_bytes: Operand },
    /// `mbarrier.expect_tx.shared::cta.b64 [bar], tx`: `tx_bytes` more bytes to wait for,
    /// without arriving.
    ExpectTx { bar: Operand, tx_bytes: Operand },
    /// `mbarrier.arrive.release.cluster.shared::cluster.b64 _, [bar]` on a `mapa` address.
    ArriveCluster { bar: Operand },
    /// Blocks until the phase with parity `parity` has completed (a `try_wait.parity` loop).
    WaitParity { bar: Operand, parity: Operand },
    /// [`MbarrierOp::WaitParity`] with acquire at cluster scope
    /// (`mbarrier.try_wait.parity.acquire.cluster`): what a peer CTA released with the
    /// phase (`st.async`'s stores) is visible after it.
    WaitParityCluster { bar: Operand, parity: Operand },
}

impl MbarrierOp {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            MbarrierOp::Init { bar, count } => {
                visit_operand(bar, f);
                visit_operand(count, f);
            }
            MbarrierOp::Arrive { bar } | MbarrierOp::ArriveCluster { bar } => visit_operand(bar, f),
            MbarrierOp::ArriveExpectTx { bar, tx_bytes }
            | MbarrierOp::ExpectTx { bar, tx_bytes } => {
                visit_operand(bar, f);
                visit_operand(tx_bytes, f);
            }
            MbarrierOp::WaitParity { bar, parity }
            | MbarrierOp::WaitParityCluster { bar, parity } => {
                visit_operand(bar, f);
                visit_operand(parity, f);
            }
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        match self {
            MbarrierOp::Init { .. } | MbarrierOp::Arrive { .. } => Requirement::all(7, 8),
            MbarrierOp::ArriveExpectTx { .. } | MbarrierOp::ExpectTx { .. } => {
                Requirement::with(Capability::MbarrierTx, 8, 0)
            }
            MbarrierOp::ArriveCluster { .. } => Requirement::with(Capability::Cluster, 8, 0),
            MbarrierOp::WaitParity { .. } => Requirement::all(7, 8),
            MbarrierOp::WaitParityCluster { .. } => Requirement::with(Capability::Cluster, 8, 0),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            MbarrierOp::Init { .. } => "mbarrier.init",
            MbarrierOp::Arrive { .. } => "mbarrier.arrive",
            MbarrierOp::ArriveExpectTx { .. } => "mbarrier.arrive.expect_tx",
            MbarrierOp::ExpectTx { .. } => "mbarrier.expect_tx",
            MbarrierOp::ArriveCluster { .. } => "mbarrier.arrive.release.cluster",
            MbarrierOp::WaitParity { .. } => "mbarrier.try_wait.parity",
            MbarrierOp::WaitParityCluster { .. } => "mbarrier.try_wait.parity.acquire.cluster",
        }
    }
}
