//! wgmma (sm_90a): warpgroup MMA with shared-memory operands and register accumulators.

use super::{Operand, Reg, Requirement, visit_operand};
use crate::target::Capability;

#[derive(Clone, Debug, PartialEq)]
pub enum WgmmaOp {
    /// `wgmma.fence.sync.aligned`.
    Fence,
    /// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {acc}, a_desc, b_desc,
    /// scale_d, 1, 1, trans_a, trans_b`: `acc` (n/2 f32 registers a thread) is read (when
    /// `scale_d` is true) and written in place, asynchronously until `wait_group`.
    MmaAsync {
        n: u32,
        acc: Vec<Reg>,
        a_desc: Operand,
        b_desc: Operand,
        scale_d: Operand,
        /// 0: A is K-major; 1: A is M-major.
        trans_a: u8,
        /// 0: B is K-major; 1: B is N-major.
        trans_b: u8,
    },
    /// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {acc}, {a0, a1, a2, a3},
    /// b_desc, scale_d, 1, 1, trans_b` (RS): like `MmaAsync` with A[64, 16] from four b32
    /// registers a thread, two bf16 each (the A fragment of ptx-reference.md §17). A in
    /// registers is always K-major, so there is no `trans_a`; `a` must not change until the
    /// group is waited for.
    MmaAsyncRs {
        n: u32,
        acc: Vec<Reg>,
        a: [Reg; 4],
        b_desc: Operand,
        scale_d: Operand,
        /// 0: B is K-major; 1: B is N-major.
        trans_b: u8,
    },
    /// `wgmma.commit_group.sync.aligned`.
    CommitGroup,
    /// `wgmma.wait_group.sync.aligned n`: at most `n` groups stay in flight.
    WaitGroup { n: u32 },
}

impl WgmmaOp {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            WgmmaOp::MmaAsync {
                acc,
                a_desc,
                b_desc,
                scale_d,
                ..
            } => {
                visit_operand(a_desc, f);
                visit_operand(b_desc, f);
                visit_operand(scale_d, f);
                for r in acc {
                    f(*r, false);
                }
                for r in acc {
                    f(*r, true);
                }
            }
            WgmmaOp::MmaAsyncRs {
                acc,
                a,
                b_desc,
                scale_d,
                ..
            } => {
                for r in a {
                    f(*r, false);
                }
                visit_operand(b_desc, f);
                visit_operand(scale_d, f);
                for r in acc {
                    f(*r, false);
                }
                for r in acc {
                    f(*r, true);
                }
            }
            WgmmaOp::Fence | WgmmaOp::CommitGroup | WgmmaOp::WaitGroup { .. } => {}
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        Requirement::with(Capability::Wgmma, 8, 0)
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            WgmmaOp::Fence => "wgmma.fence",
            WgmmaOp::MmaAsync { .. } | WgmmaOp::MmaAsyncRs { .. } => "wgmma.mma_async",
            WgmmaOp::CommitGroup => "wgmma.commit_group",
            WgmmaOp::WaitGroup { .. } => "wgmma.wait_group",
        }
    }
}
