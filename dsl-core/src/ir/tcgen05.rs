//! tcgen05 (sm_100a): tensor memory and the fifth-generation tensor core MMA, `cta_group::1`.

use super::{Operand, Reg, Requirement, visit_operand};
use crate::target::Capability;

#[derive(Clone, Debug, PartialEq)]
pub enum Tcgen05Op {
    /// `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst_smem], ncols`:
    /// warp-collective; writes the TMEM base address to shared memory.
    Alloc { dst_smem: Operand, ncols: u32 },
    /// `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned`.
    RelinquishAllocPermit,
    /// `tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, ncols`.
    Dealloc { taddr: Operand, ncols: u32 },
    /// `tcgen05.mma.cta_group::1.kind::f16 [d], a_desc, b_desc, idesc, accumulate`: issued by
    /// one thread, asynchronous until a `commit` arrives on an mbarrier.
    Mma {
        d_tmem: Operand,
        a_desc: Operand,
        b_desc: Operand,
        idesc: Operand,
        accumulate: Operand,
    },
    /// `tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [mbar]`: one
    /// arrive on `mbar` once this thread's earlier tcgen05 async ops complete.
    Commit { mbar: Operand },
    /// `tcgen05.ld.sync.aligned.32x32b.xN.b32 {dst..}, [taddr]`, N = `dst.len()`.
    Ld32x32b { dst: Vec<Reg>, taddr: Operand },
    /// `tcgen05.wait::ld.sync.aligned`.
    WaitLd,
    /// `tcgen05.st.sync.aligned.32x32b.xN.b32 [taddr], {src..}`, N = `src.len()`: thread t
    /// writes lane `lane(taddr) + t`, columns `col(taddr) ..+ N`.
    St32x32b { src: Vec<Reg>, taddr: Operand },
    /// `tcgen05.wait::st.sync.aligned`: this thread's TMEM stores have completed.
    WaitSt,
    /// `tcgen05.fence::before_thread_sync`.
    FenceBeforeThreadSync,
    /// `tcgen05.fence::after_thread_sync`.
    FenceAfterThreadSync,
}

impl Tcgen05Op {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            Tcgen05Op::Alloc { dst_smem, .. } => visit_operand(dst_smem, f),
            Tcgen05Op::Dealloc { taddr, .. } => visit_operand(taddr, f),
            Tcgen05Op::Mma {
                d_tmem,
                a_desc,
                b_desc,
                idesc,
                accumulate,
            } => {
                for o in [d_tmem, a_desc, b_desc, idesc, accumulate] {
                    visit_operand(o, f);
                }
            }
            Tcgen05Op::Commit { mbar } => visit_operand(mbar, f),
            Tcgen05Op::Ld32x32b { dst, taddr } => {
                visit_operand(taddr, f);
                for d in dst {
                    f(*d, true);
                }
            }
            Tcgen05Op::St32x32b { src, taddr } => {
                visit_operand(taddr, f);
                for s in src {
                    f(*s, false);
                }
            }
            Tcgen05Op::RelinquishAllocPermit
            | Tcgen05Op::WaitLd
            | Tcgen05Op::WaitSt
            | Tcgen05Op::FenceBeforeThreadSync
            | Tcgen05Op::FenceAfterThreadSync => {}
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        let cap = match self {
            Tcgen05Op::Alloc { .. }
            | Tcgen05Op::RelinquishAllocPermit
            | Tcgen05Op::Dealloc { .. }
            | Tcgen05Op::Ld32x32b { .. }
            | Tcgen05Op::WaitLd
            | Tcgen05Op::St32x32b { .. }
            | Tcgen05Op::WaitSt => Capability::Tmem,
            Tcgen05Op::Mma { .. }
            | Tcgen05Op::Commit { .. }
            | Tcgen05Op::FenceBeforeThreadSync
            | Tcgen05Op::FenceAfterThreadSync => Capability::Tcgen05,
        };
        Requirement::with(cap, 8, 6)
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Tcgen05Op::Alloc { .. } => "tcgen05.alloc",
            Tcgen05Op::RelinquishAllocPermit => "tcgen05.relinquish_alloc_permit",
            Tcgen05Op::Dealloc { .. } => "tcgen05.dealloc",
            Tcgen05Op::Mma { .. } => "tcgen05.mma",
            Tcgen05Op::Commit { .. } => "tcgen05.commit",
            Tcgen05Op::Ld32x32b { .. } => "tcgen05.ld.32x32b",
            Tcgen05Op::WaitLd => "tcgen05.wait::ld",
            Tcgen05Op::St32x32b { .. } => "tcgen05.st.32x32b",
            Tcgen05Op::WaitSt => "tcgen05.wait::st",
            Tcgen05Op::FenceBeforeThreadSync => "tcgen05.fence::before_thread_sync",
            Tcgen05Op::FenceAfterThreadSync => "tcgen05.fence::after_thread_sync",
        }
    }
}
