//! mbarrier: an 8-byte shared-memory barrier with a phase bit, that threads and async units
//! (tcgen05.commit, TMA) arrive on.

use crate::ir::{FenceKind, MbarrierOp, Op, SyncOp};
use crate::trace::IntoVal;
use crate::trace::val::emit_effect;

use super::memory::{Dsmem, Smem};

/// A handle on an mbarrier object in this CTA's shared memory.
#[derive(Clone, Copy, Debug)]
pub struct Mbarrier {
    addr: Smem,
    /// The address in one register, computed once where the handle is made.
    reg: crate::trace::Val<u32>,
}

impl Mbarrier {
    /// The mbarrier at `addr` (8-byte aligned). Make the handle where every use can see it
    /// (typically at the top of the kernel): its address register is computed here.
    #[track_caller]
    pub fn at(addr: Smem) -> Self {
        Mbarrier {
            addr,
            reg: addr.value(),
        }
    }

    pub fn addr(self) -> Smem {
        self.addr
    }

    /// The address in one register.
    pub fn addr_reg(self) -> crate::trace::Val<u32> {
        self.reg
    }

    fn operand(self) -> crate::ir::Operand {
        crate::ir::Operand::Reg(self.reg.reg())
    }

    /// `mbarrier.init`: `count` arrivals complete a phase. Run by one thread, then
    /// [`init_fence`] and a barrier before anyone uses it.
    #[track_caller]
    pub fn init(self, count: impl IntoVal<u32>) {
        let bar = self.operand();
        emit_effect(Op::Mbarrier(MbarrierOp::Init {
            bar,
            count: count.operand(),
        }));
    }

    /// `mbarrier.arrive`: one arrival.
    #[track_caller]
    pub fn arrive(self) {
        let bar = self.operand();
        emit_effect(Op::Mbarrier(MbarrierOp::Arrive { bar }));
    }

    /// `mbarrier.arrive.expect_tx`: one arrival, and `tx_bytes` more bytes to wait for.
    #[track_caller]
    pub fn arrive_expect_tx(self, tx_bytes: impl IntoVal<u32>) {
        let bar = self.operand();
        emit_effect(Op::Mbarrier(MbarrierOp::ArriveExpectTx {
            bar,
            tx_bytes: tx_bytes.operand(),
        }));
    }

    /// `mbarrier.expect_tx`: `tx_bytes` more bytes to wait for in the current phase, without
    /// arriving.
    #[track_caller]
    pub fn expect_tx(self, tx_bytes: impl IntoVal<u32>) {
        let bar = self.operand();
        emit_effect(Op::Mbarrier(MbarrierOp::ExpectTx {
            bar,
            tx_bytes: tx_bytes.operand(),
        }));
    }

    /// Blocks until the phase of parity `parity` (0 or 1) has completed.
    #[track_caller]
    pub fn wait(self, parity: impl IntoVal<u32>) {
        let bar = self.operand();
        emit_effect(Op::Mbarrier(MbarrierOp::WaitParity {
            bar,
            parity: parity.operand(),
        }));
    }

    /// [`Mbarrier::wait`] with acquire at cluster scope: after it, this thread sees what
    /// peer CTAs released with the phase (their [`store_async`](super::copy::store_async)
    /// values).
    #[track_caller]
    pub fn wait_cluster(self, parity: impl IntoVal<u32>) {
        let bar = self.operand();
        emit_effect(Op::Mbarrier(MbarrierOp::WaitParityCluster {
            bar,
            parity: parity.operand(),
        }));
    }

    /// `mbarrier.arrive.release.cluster` on the same barrier in cluster CTA `rank`.
    #[track_caller]
    pub fn arrive_in_cta(self, rank: impl IntoVal<u32>) {
        let remote: Dsmem = self.addr.in_cta(rank);
        let bar = crate::ir::Operand::Reg(remote.value().reg());
        emit_effect(Op::Mbarrier(MbarrierOp::ArriveCluster { bar }));
    }
}

/// `fence.mbarrier_init.release.cluster`: makes mbarrier inits visible to the cluster and
/// the async proxy. Run after the inits, before the barrier that publishes them.
#[track_caller]
pub fn init_fence() {
    emit_effect(Op::Sync(SyncOp::Fence(FenceKind::MbarrierInit)));
}
