//! wgmma: `m64nNk16` bf16 x bf16 -> f32 with both operands in shared memory, accumulators
//! in registers (n/2 f32 a thread, distributed over the 128 threads of a warpgroup).

use crate::arch::Accumulate;
use crate::ir::{AluOp, Op, Operand, Reg, SourceLoc, Ty, WgmmaOp};
use crate::trace::val::emit_effect;
use crate::trace::{Carry, Val, trace_error, with_builder};

/// The f32 accumulator fragment of one `m64nNk16` MMA: registers updated in place by
/// [`mma_async`]. Read a copy with [`Accumulator::get`] only after [`wait_group`].
#[derive(Clone, Debug)]
pub struct Accumulator {
    n: u32,
    regs: Vec<Reg>,
}

impl Accumulator {
    /// A fragment for N = `n` columns (8..=256, a multiple of 8), zero-initialised.
    #[track_caller]
    pub fn zeros(n: u32) -> Self {
        if !(8..=256).contains(&n) || n % 8 != 0 {
            trace_error(format!(
                "wgmma m64nNk16 takes N from 8 to 256 in steps of 8, got {n}"
            ));
        }
        let loc = SourceLoc::caller();
        let regs = with_builder(|b| {
            (0..n / 2)
                .map(|_| {
                    let r = b.new_reg(Ty::F32);
                    b.push(
                        Op::Alu(AluOp::Mov {
                            dst: r,
                            src: Operand::Imm(0),
                        }),
                        loc,
                    );
                    r
                })
                .collect()
        });
        Accumulator { n, regs }
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    /// Registers a thread holds (n / 2).
    pub fn len(&self) -> usize {
        self.regs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.regs.is_empty()
    }

    /// A copy of register `i` (see the fragment layout in `layout::fragment`).
    #[track_caller]
    pub fn get(&self, i: usize) -> Val<f32> {
        let loc = SourceLoc::caller();
        let src = self.regs[i];
        Val::from_reg(with_builder(|b| {
            let dst = b.new_reg(Ty::F32);
            b.push(
                Op::Alu(AluOp::Mov {
                    dst,
                    src: Operand::Reg(src),
                }),
                loc,
            );
            dst
        }))
    }
}

impl Carry for Accumulator {
    fn regs(&self, out: &mut Vec<Reg>) {
        out.extend(&self.regs);
    }
    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
        Accumulator {
            n: self.n,
            regs: self
                .regs
                .iter()
                .map(|_| regs.next().expect("register"))
                .collect(),
        }
    }
    fn static_diff(&self, other: &Self) -> Option<String> {
        (self.n != other.n).then(|| format!("N {} became {}", self.n, other.n))
    }
}

/// `wgmma.fence`: before the first MMA that touches accumulator registers written by
/// ordinary instructions.
#[track_caller]
pub fn fence() {
    emit_effect(Op::Wgmma(WgmmaOp::Fence));
}

/// `wgmma.mma_async.m64nNk16.f32.bf16.bf16`: acc (+)= A[64, 16] * B[16, N] from shared
/// memory descriptors. `trans_a`/`trans_b`: 0 = K-major, 1 = MN-major. `scale_d` false
/// overwrites the accumulator.
#[track_caller]
pub fn mma_async(
    acc: &Accumulator,
    a_desc: Val<u64>,
    b_desc: Val<u64>,
    scale_d: impl Into<Accumulate>,
    trans_a: u8,
    trans_b: u8,
) {
    let scale_d = scale_d.into().operand();
    emit_effect(Op::Wgmma(WgmmaOp::MmaAsync {
        n: acc.n,
        acc: acc.regs.clone(),
        a_desc: Operand::Reg(a_desc.reg()),
        b_desc: Operand::Reg(b_desc.reg()),
        scale_d,
        trans_a,
        trans_b,
    }));
}

/// `wgmma.commit_group`.
#[track_caller]
pub fn commit_group() {
    emit_effect(Op::Wgmma(WgmmaOp::CommitGroup));
}

/// `wgmma.wait_group n`: at most `n` committed groups stay in flight.
#[track_caller]
pub fn wait_group(n: u32) {
    emit_effect(Op::Wgmma(WgmmaOp::WaitGroup { n }));
}
