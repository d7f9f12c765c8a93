//! wgmma: `m64nNk16` bf16 x bf16 -> f32 with both operands in shared memory, accumulators
//! in registers (n/2 f32 a thread, distributed over the 128 threads of a warpgroup).
//!
//! [`MmaF16Bf16Ss`] is the checked form of [`mma_async`], the same atom as
//! `sm100::tcgen05::MmaF16Bf16Ss` for Hopper; [`MmaF16Bf16Rs`] (A from registers) is the
//! checked form of [`mma_async_rs`].

use crate::arch::Accumulate;
use crate::arch::operand::{DescFormat, MnBlock, OperandExpectation, SmemOperand, check_a_and_b};
use crate::ir::verify::rules;
use crate::ir::{AluOp, Op, Operand, Reg, SourceLoc, Ty, WgmmaOp};
use crate::layout::{Major, WgmmaAccumulator, WgmmaInput, WgmmaInstr};
use crate::trace::val::emit_effect;
use crate::trace::{Bf16x2, Carry, Val, trace_error, with_builder};

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
        if let Err(e) = rules::wgmma_n(n) {
            trace_error(e);
        }
        let loc = SourceLoc::caller();
        crate::pipeline::roles::count_fragment((n / 2) as usize, "wgmma accumulator", loc);
        let regs = zeroed_f32_registers((n / 2) as usize, loc);
        Accumulator { n, regs }
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    /// An accumulator over registers that already hold one (a slice of a larger register
    /// fragment, `tensor::mma`): `regs` are the n / 2 registers in fragment order.
    pub(crate) fn from_regs(n: u32, regs: Vec<Reg>) -> Self {
        debug_assert_eq!(regs.len() as u32, n / 2, "n / 2 accumulator registers");
        Accumulator { n, regs }
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

/// `count` new f32 registers, each set to 0 at `loc`: a fresh accumulator fragment.
pub(crate) fn zeroed_f32_registers(count: usize, loc: SourceLoc) -> Vec<Reg> {
    with_builder(|b| {
        (0..count)
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
    })
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

/// `wgmma.mma_async.m64nNk16.f32.bf16.bf16` with A from registers (RS):
/// `acc (+)= A[64, 16] . B[16, N]`, A as four bf16 pairs a thread (the A fragment of
/// ptx-reference.md §17: register j of lane l of warp w holds row `16 w + l / 4 + 8 (j & 1)`,
/// columns `2 (l % 4) + 8 (j >> 1) + {0, 1}`). `trans_b`: 0 = K-major, 1 = N-major. The A
/// registers must not be touched until a [`wait_group`] covers this MMA.
#[track_caller]
pub fn mma_async_rs(
    acc: &Accumulator,
    a: [Val<Bf16x2>; 4],
    b_desc: Val<u64>,
    scale_d: impl Into<Accumulate>,
    trans_b: u8,
) {
    let scale_d = scale_d.into().operand();
    emit_effect(Op::Wgmma(WgmmaOp::MmaAsyncRs {
        n: acc.n,
        acc: acc.regs.clone(),
        a: a.map(|v| v.reg()),
        b_desc: Operand::Reg(b_desc.reg()),
        scale_d,
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

/// `SM90_64xNx16_F32BF16BF16_SS`: `wgmma.mma_async.m64nNk16.f32.bf16.bf16` with A and B in
/// shared memory, as a checked atom: `acc[64, N] (+)= A[64, K] . B[N, K]^T`, 16 elements of K
/// per instruction (one K-step), issued by the 128 threads of a warpgroup.
///
/// Like `sm100::tcgen05::MmaF16Bf16Ss`: built once from N and the operands' major-ness (the
/// [`WgmmaInstr`] gives the transpose immediates), [`MmaF16Bf16Ss::mma`] checks each issue
/// (A is 64 rows and B N rows, or blocks of taller tiles via `SmemOperand::at_mn`; both
/// `DescFormat::Gmma` tiles of 16-bit elements with the instruction's major-ness; the
/// K-step exists; the accumulator has N columns) and reports a mismatch as a trace error at
/// the author's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaF16Bf16Ss {
    n: u32,
    a_major: Major,
    b_major: Major,
    /// Absent when the shape is not one of the instruction's (reported at construction).
    instr: Option<WgmmaInstr>,
}

impl MmaF16Bf16Ss {
    /// M of every wgmma.
    pub const M: u32 = 64;

    /// `m64nNk16` bf16 x bf16 -> f32 with A stored `a_major` and B `b_major`; N not a
    /// multiple of 8 in 8..=256 is a trace error here.
    #[track_caller]
    pub fn bf16(n: u32, a_major: Major, b_major: Major) -> Self {
        let instr = WgmmaInstr::new(WgmmaInput::Bf16, WgmmaAccumulator::F32, n)
            .and_then(|i| i.with_a_major(a_major))
            .and_then(|i| i.with_b_major(b_major));
        let instr = match instr {
            Ok(i) => Some(i),
            Err(e) => {
                trace_error(format!("MmaF16Bf16Ss m64n{n}k16: {e}"));
                None
            }
        };
        MmaF16Bf16Ss {
            n,
            a_major,
            b_major,
            instr,
        }
    }

    /// [`MmaF16Bf16Ss::bf16`] with the major-ness of `a` and `b`.
    #[track_caller]
    pub fn bf16_for(n: u32, a: &SmemOperand, b: &SmemOperand) -> Self {
        Self::bf16(n, a.major(), b.major())
    }

    pub fn m(&self) -> u32 {
        Self::M
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    /// K of one instruction (one K-step): 16 elements.
    pub fn k(&self) -> u32 {
        16
    }

    /// The instruction's shape and modes (absent when the shape was refused).
    pub fn instr(&self) -> Option<WgmmaInstr> {
        self.instr
    }

    /// Issues K-step `k_step` into `acc` (N columns): `acc (+)= A . B^T`; `scale_d` false
    /// overwrites the accumulator (the first K-step). Every thread of the warpgroup calls it;
    /// completion is observed through [`commit_group`] and [`wait_group`].
    #[track_caller]
    pub fn mma<'a>(
        &self,
        acc: &Accumulator,
        a: impl Into<MnBlock<'a>>,
        b: impl Into<MnBlock<'a>>,
        k_step: i64,
        scale_d: impl Into<Accumulate>,
    ) {
        let (a, b) = (a.into(), b.into());
        let name = format!("wgmma.mma_async m64n{}k16", self.n);
        let ab_ok = check_a_and_b(
            &name,
            DescFormat::Gmma,
            (&a, Self::M, self.a_major),
            (&b, self.n, self.b_major),
            k_step,
        );
        let acc_ok = acc.n() == self.n;
        if !acc_ok {
            trace_error(format!(
                "{name}: expects an accumulator of N = {} columns, got one of {} \
                 (`Accumulator::zeros({})`)",
                self.n,
                acc.n(),
                acc.n()
            ));
        }
        let Some(instr) = self.instr else { return };
        if ab_ok && acc_ok {
            mma_async(
                acc,
                a.desc(k_step),
                b.desc(k_step),
                scale_d,
                instr.imm_trans_a().unwrap_or(0) as u8,
                instr.imm_trans_b().unwrap_or(0) as u8,
            );
        }
    }
}

/// `SM90_64xNx16_F32BF16BF16_RS`: `wgmma.mma_async.m64nNk16.f32.bf16.bf16` with A from
/// registers and B in shared memory, as a checked atom: `acc[64, N] (+)= A[64, 16] .
/// B[N, 16]^T` for one K-step. A is a per-thread fragment (four bf16 pairs, see
/// [`mma_async_rs`]); [`MmaF16Bf16Rs::mma`] checks B as [`MmaF16Bf16Ss::mma`] does and the
/// accumulator's N, reporting a mismatch as a trace error at the author's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaF16Bf16Rs {
    n: u32,
    b_major: Major,
    /// Absent when the shape is not one of the instruction's (reported at construction).
    instr: Option<WgmmaInstr>,
}

impl MmaF16Bf16Rs {
    /// `m64nNk16` bf16 x bf16 -> f32 with A in registers (K-major by definition) and B
    /// stored `b_major`; N not a multiple of 8 in 8..=256 is a trace error here.
    #[track_caller]
    pub fn bf16(n: u32, b_major: Major) -> Self {
        let instr = WgmmaInstr::new(WgmmaInput::Bf16, WgmmaAccumulator::F32, n)
            .and_then(|i| i.with_a_in_registers())
            .and_then(|i| i.with_b_major(b_major));
        let instr = match instr {
            Ok(i) => Some(i),
            Err(e) => {
                trace_error(format!("MmaF16Bf16Rs m64n{n}k16: {e}"));
                None
            }
        };
        MmaF16Bf16Rs { n, b_major, instr }
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    /// Issues K-step `k_step` of B with the A fragment `a` of the same 16 columns of K:
    /// `acc (+)= A . B^T`. Every thread of the warpgroup calls it.
    #[track_caller]
    pub fn mma<'a>(
        &self,
        acc: &Accumulator,
        a: [Val<Bf16x2>; 4],
        b: impl Into<MnBlock<'a>>,
        k_step: i64,
        scale_d: impl Into<Accumulate>,
    ) {
        let b = b.into();
        let name = format!("wgmma.mma_async m64n{}k16 (A in registers)", self.n);
        let b_ok = b.check(
            &OperandExpectation {
                instr: &name,
                role: "B",
                dim: "N",
                rows: i64::from(self.n),
                major: self.b_major,
                format: DescFormat::Gmma,
            },
            k_step,
        );
        let acc_ok = acc.n() == self.n;
        if !acc_ok {
            trace_error(format!(
                "{name}: expects an accumulator of N = {} columns, got one of {}",
                self.n,
                acc.n()
            ));
        }
        let Some(instr) = self.instr else { return };
        if b_ok && acc_ok {
            let trans_b = instr.imm_trans_b().unwrap_or(0) as u8;
            mma_async_rs(acc, a, b.desc(k_step), scale_d, trans_b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Target;
    use crate::arch::thread::warp_id;
    use crate::ir::{Kernel, Op};
    use crate::layout::{Swizzle, canonical};
    use crate::trace::{TraceError, smem_tile, threads, trace_kernel};

    fn ops(k: &Kernel) -> Vec<Op> {
        let mut out = Vec::new();
        k.body.for_each_inst(&mut |i| out.push(i.op.clone()));
        out
    }

    fn operand(name: &str, major: Major, mn: i64, k: i64) -> SmemOperand {
        let layout = match major {
            Major::K => canonical::k_major(Swizzle::B128, mn, k, 2),
            Major::MN => canonical::mn_major(Swizzle::B128, mn, k, 2),
        };
        SmemOperand::new(&smem_tile(name, layout.unwrap()), major, DescFormat::Gmma)
    }

    fn trace(body: impl FnOnce()) -> Result<Kernel, TraceError> {
        trace_kernel("atom", Target::Sm90a, || {
            threads(256, 1, 1);
            body()
        })
    }

    /// The decode kernel's S = KV . Q^T on sm_90a: warpgroup g takes rows 64 g of the
    /// [128, 512] KV tile through a runtime offset.
    #[test]
    fn atom_issues_what_the_hand_path_issues() {
        let by_hand = trace(|| {
            let kv = operand("kv", Major::K, 128, 512);
            let q = operand("q", Major::K, 32, 512);
            let rows = (warp_id() >> 2) * kv.block_offset(64, 0);
            let acc = Accumulator::zeros(32);
            fence();
            for ks in 0..32 {
                let a = kv.block_plus(0, 16 * ks, rows);
                mma_async(&acc, a, q.k_step(ks), ks > 0, 0, 0);
            }
            commit_group();
        })
        .unwrap();
        let by_atom = trace(|| {
            let kv = operand("kv", Major::K, 128, 512);
            let q = operand("q", Major::K, 32, 512);
            let rows = (warp_id() >> 2) * kv.block_offset(64, 0);
            let acc = Accumulator::zeros(32);
            let atom = MmaF16Bf16Ss::bf16_for(32, &kv, &q);
            fence();
            for ks in 0..32 {
                atom.mma(&acc, kv.at_mn(0).plus(rows), &q, ks, ks > 0);
            }
            commit_group();
        })
        .unwrap();
        assert_eq!(ops(&by_atom), ops(&by_hand));
    }

    /// MN-major operands set the transpose immediates.
    #[test]
    fn mn_major_operands_transpose() {
        let k = trace(|| {
            let a = operand("kv_t", Major::MN, 512, 128);
            let b = operand("p", Major::MN, 64, 128);
            let acc = Accumulator::zeros(64);
            let atom = MmaF16Bf16Ss::bf16_for(64, &a, &b);
            atom.mma(&acc, a.at_mn(64), &b, 7, true);
        })
        .unwrap();
        let mut transposes = Vec::new();
        k.body.for_each_inst(&mut |i| {
            if let Op::Wgmma(WgmmaOp::MmaAsync {
                trans_a, trans_b, ..
            }) = &i.op
            {
                transposes.push((*trans_a, *trans_b));
            }
        });
        assert_eq!(transposes, [(1, 1)]);
    }

    #[test]
    fn mismatches_are_reported_at_the_call() {
        let mut line = 0;
        let e = trace(|| {
            let a = operand("kv", Major::K, 128, 512);
            let b = operand("q", Major::K, 16, 512);
            let acc = Accumulator::zeros(32);
            let atom = MmaF16Bf16Ss::bf16(16, Major::K, Major::K);
            line = line!() + 1;
            atom.mma(&acc, &a, &b, 32, true);
        })
        .unwrap_err();
        let messages: Vec<_> = e.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "wgmma.mma_async m64n16k16: expects A to be [M, K] = [64, K], got `kv` \
                 [128, 512]; for 64 rows of the taller tile use `.at_mn(first_row)`",
                "wgmma.mma_async m64n16k16: expects a K-step of A in 0..32 (`kv` [128, 512]: \
                 16 elements a step), got K-step 32",
                "wgmma.mma_async m64n16k16: expects a K-step of B in 0..32 (`q` [16, 512]: 16 \
                 elements a step), got K-step 32",
                "wgmma.mma_async m64n16k16: expects an accumulator of N = 16 columns, got one \
                 of 32 (`Accumulator::zeros(32)`)",
            ]
        );
        assert!(e.diagnostics.iter().all(|d| d.loc.line == line), "{e}");
    }
}
