//! tcgen05 with `cta_group::1`: TMEM allocation, `kind::f16` MMA from shared-memory
//! descriptors, commit to an mbarrier, and `32x32b` loads from and stores to TMEM.
//!
//! Tensor memory is 128 lanes x 512 columns of 32-bit cells per CTA; an address is
//! `lane << 16 | column`. Warp `w` may only load and store lanes `32 * (w % 4) ..+ 32`.
//!
//! [`MmaF16Bf16Ss`] is the checked form of [`mma_f16`]: an MMA atom that derives its
//! instruction descriptor from its shape and checks every issue against the operand tiles.

use crate::arch::Accumulate;
use crate::arch::mbarrier::Mbarrier;
use crate::arch::memory::Smem;
use crate::arch::operand::{DescFormat, MnBlock, SmemOperand, check_a_and_b};
use crate::ir::verify::rules;
use crate::ir::{Op, Operand, SourceLoc, Tcgen05Op};
use crate::layout::{Major, UmmaAccumulator, UmmaInput, UmmaInstrDesc};
use crate::trace::val::emit_effect;
use crate::trace::{IntoVal, Val, trace_error, trace_error_at, with_builder};

/// Columns of tensor memory per CTA.
pub const TMEM_COLUMNS: u32 = 512;
/// Lanes of tensor memory per CTA.
pub const TMEM_LANES: u32 = 128;

/// A TMEM address: a base from `tcgen05.alloc` plus trace-time lane and column offsets.
#[derive(Clone, Copy, Debug)]
pub struct TmemAddr {
    base: Val<u32>,
    lane: u32,
    column: u32,
}

impl TmemAddr {
    /// The allocation's base address (lane 0, its first column), as read back from SMEM.
    pub fn from_base(base: Val<u32>) -> Self {
        TmemAddr {
            base,
            lane: 0,
            column: 0,
        }
    }

    /// `columns` further along the lane.
    pub fn column(self, columns: u32) -> Self {
        TmemAddr {
            column: self.column + columns,
            ..self
        }
    }

    /// Lanes `lane ..`: tcgen05.ld of a warp must start at its own quadrant, a multiple of 32.
    #[track_caller]
    pub fn lane(self, lane: u32) -> Self {
        if lane % 32 != 0 || lane >= TMEM_LANES {
            let past = if lane >= TMEM_LANES {
                format!(
                    "; lane {lane} is past the {TMEM_LANES} lanes of tensor memory: warp w \
                     reads quadrant w % 4, not w"
                )
            } else {
                String::new()
            };
            trace_error(format!(
                "TMEM lane offset {lane}: a warp accesses one 32-lane quadrant, so the lane \
                 offset must be 0, 32, 64 or 96 (warp w uses 32 * (w % 4)){past}"
            ));
        }
        TmemAddr { lane, ..self }
    }

    /// The lanes of warp `warp`'s quadrant (`32 * (warp % 4)`), decided at run time. The
    /// address must not have a lane offset already: the quadrant is the whole lane part.
    #[track_caller]
    pub fn warp_quadrant(self, warp: Val<u32>) -> Val<u32> {
        if self.lane != 0 {
            trace_error(format!(
                "TMEM address with lane offset {} given to `warp_quadrant`, which adds the \
                 warp's quadrant 32 * (w % 4) to it: warp w would read lanes 32 * (w % 4) + {} \
                 .., outside its quadrant; drop the `.lane(..)`",
                self.lane, self.lane
            ));
        }
        let offset = (self.lane << 16) + self.column;
        ((warp & 3u32) << 21) + self.base + offset
    }

    /// The address as one register.
    #[track_caller]
    pub fn value(self) -> Val<u32> {
        let offset = (self.lane << 16) + self.column;
        if offset == 0 {
            self.base
        } else {
            self.base + offset
        }
    }

    pub fn static_lane(self) -> u32 {
        self.lane
    }

    pub fn static_column(self) -> u32 {
        self.column
    }
}

#[track_caller]
fn check_ncols(ncols: u32) {
    if let Err(e) = rules::tmem_columns(ncols) {
        trace_error(e);
    }
}

/// `tcgen05.alloc`: warp-collective; writes the TMEM base address to `dst` (shared).
#[track_caller]
pub fn alloc(dst: Smem, ncols: u32) {
    check_ncols(ncols);
    let dst_smem = Operand::Reg(dst.value().reg());
    emit_effect(Op::Tcgen05(Tcgen05Op::Alloc { dst_smem, ncols }));
}

/// `tcgen05.relinquish_alloc_permit`: lets other CTAs on the SM allocate.
#[track_caller]
pub fn relinquish_alloc_permit() {
    emit_effect(Op::Tcgen05(Tcgen05Op::RelinquishAllocPermit));
}

/// `tcgen05.dealloc`: by the warp that allocated.
#[track_caller]
pub fn dealloc(base: TmemAddr, ncols: u32) {
    check_ncols(ncols);
    let taddr = Operand::Reg(base.value().reg());
    emit_effect(Op::Tcgen05(Tcgen05Op::Dealloc { taddr, ncols }));
}

/// `tcgen05.mma.cta_group::1.kind::f16`: D (TMEM) = A * B (+ D when `accumulate`), from
/// shared-memory descriptors and an instruction descriptor. Issued by one thread.
#[track_caller]
pub fn mma_f16(
    d: TmemAddr,
    a_desc: Val<u64>,
    b_desc: Val<u64>,
    idesc: impl IntoVal<u32>,
    accumulate: impl Into<Accumulate>,
) {
    let d_tmem = Operand::Reg(d.value().reg());
    let accumulate = accumulate.into().operand();
    emit_effect(Op::Tcgen05(Tcgen05Op::Mma {
        d_tmem,
        a_desc: Operand::Reg(a_desc.reg()),
        b_desc: Operand::Reg(b_desc.reg()),
        idesc: idesc.operand(),
        accumulate,
    }));
}

/// `tcgen05.commit`: one arrive on `mbar` once this thread's earlier MMAs complete.
#[track_caller]
pub fn commit(mbar: Mbarrier) {
    let mbar = Operand::Reg(mbar.addr_reg().reg());
    emit_effect(Op::Tcgen05(Tcgen05Op::Commit { mbar }));
}

/// `tcgen05.ld.32x32b.xN`: thread t of the warp reads lane `lane + t`, columns
/// `column .. column + N` into N registers (N = `columns`, a power of two up to 128).
/// Asynchronous: call [`wait_ld`] before using the values.
#[track_caller]
pub fn ld_32x32b(taddr: Val<u32>, columns: usize) -> Vec<Val<u32>> {
    let loc = SourceLoc::caller();
    if let Err(e) = rules::tcgen05_ld_columns(columns) {
        trace_error(e);
    }
    let regs = with_builder(|b| {
        let dst: Vec<_> = (0..columns)
            .map(|_| b.new_reg(crate::ir::Ty::U32))
            .collect();
        b.push(
            Op::Tcgen05(Tcgen05Op::Ld32x32b {
                dst: dst.clone(),
                taddr: Operand::Reg(taddr.reg()),
            }),
            loc,
        );
        dst
    });
    regs.into_iter().map(Val::from_reg).collect()
}

/// `tcgen05.wait::ld`: this thread's TMEM loads have landed.
#[track_caller]
pub fn wait_ld() {
    emit_effect(Op::Tcgen05(Tcgen05Op::WaitLd));
}

/// `tcgen05.st.sync.aligned.32x32b.xN.b32`: this thread's `values` into lane `lane(taddr) +
/// lane id`, columns `col(taddr) ..+ N` (N = `values.len()`, the widths of
/// [`ld_32x32b`]); `taddr` is warp-uniform and starts at the warp's quadrant
/// ([`TmemAddr::warp_quadrant`]). Wait with [`wait_st`] before tensor memory is read.
#[track_caller]
pub fn st_32x32b(taddr: Val<u32>, values: &[Val<u32>]) {
    let loc = SourceLoc::caller();
    if let Err(e) = rules::tcgen05_st_columns(values.len()) {
        trace_error_at(e, loc);
    }
    let src = values.iter().map(|v| v.reg()).collect();
    with_builder(|b| {
        b.push(
            Op::Tcgen05(Tcgen05Op::St32x32b {
                src,
                taddr: Operand::Reg(taddr.reg()),
            }),
            loc,
        )
    });
}

/// `tcgen05.wait::st`: this thread's TMEM stores have completed.
#[track_caller]
pub fn wait_st() {
    emit_effect(Op::Tcgen05(Tcgen05Op::WaitSt));
}

/// `tcgen05.fence::before_thread_sync`: orders earlier tcgen05 ops before a thread sync.
#[track_caller]
pub fn fence_before_thread_sync() {
    emit_effect(Op::Tcgen05(Tcgen05Op::FenceBeforeThreadSync));
}

/// `tcgen05.fence::after_thread_sync`: orders later tcgen05 ops after a thread sync.
#[track_caller]
pub fn fence_after_thread_sync() {
    emit_effect(Op::Tcgen05(Tcgen05Op::FenceAfterThreadSync));
}

/// `SM100_MMA_F16BF16_SS`: `tcgen05.mma.cta_group::1.kind::f16` with A and B in shared memory
/// (`_SS`) and the accumulator D in tensor memory, as a checked atom:
/// `D[M, N] (+)= A[M, K] . B[N, K]^T`, K = 16 elements per instruction (one K-step).
///
/// Built once from the shape and the operands' major-ness, it holds the instruction
/// descriptor ([`UmmaInstrDesc`]); [`MmaF16Bf16Ss::mma`] issues one K-step after checking, at
/// trace time, that the operands are what the descriptor says: A's MN extent is M and B's is
/// N (or a block of that many rows, [`SmemOperand::at_mn`]), both are `DescFormat::Umma`
/// tiles of 16-bit elements with the descriptor's major-ness, the K-step exists in both, and
/// D's columns fit in tensor memory. A mismatch is a trace error at the author's call naming
/// both shapes; nothing is issued for it.
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::arch::operand::{DescFormat, SmemOperand};
/// use dsl_core::arch::sm100::tcgen05::{MmaF16Bf16Ss, TmemAddr};
/// use dsl_core::layout::{Major, Swizzle, canonical};
/// use dsl_core::trace::{Val, smem_tile, threads, trace_kernel};
///
/// let err = trace_kernel("shapes", Target::Sm100a, || {
///     threads(128, 1, 1);
///     let a = smem_tile("a", canonical::k_major(Swizzle::B128, 64, 64, 2).unwrap());
///     let b = smem_tile("b", canonical::k_major(Swizzle::B128, 16, 64, 2).unwrap());
///     let a = SmemOperand::new(&a, Major::K, DescFormat::Umma);
///     let b = SmemOperand::new(&b, Major::K, DescFormat::Umma);
///     let atom = MmaF16Bf16Ss::bf16(128, 16, Major::K, Major::K);
///     let d = TmemAddr::from_base(Val::constant(0));
///     atom.mma(d, &a, &b, 0, false);
/// })
/// .unwrap_err();
/// assert!(err.diagnostics[0].message.ends_with(
///     "tcgen05.mma m128n16k16: expects A to be [M, K] = [128, K], got `a` [64, 64]"
/// ));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaF16Bf16Ss {
    m: u32,
    n: u32,
    a_major: Major,
    b_major: Major,
    /// Absent when the shape is not one of the instruction's (reported at construction).
    desc: Option<UmmaInstrDesc>,
}

impl MmaF16Bf16Ss {
    /// An `m x n x 16` MMA of `input` x `input` -> `accumulator`, A stored `a_major` and B
    /// `b_major`. A shape the instruction lacks (M not 64 or 128, N not a multiple of 8 in
    /// 8..=256) is a trace error here.
    #[track_caller]
    pub fn new(
        m: u32,
        n: u32,
        input: UmmaInput,
        accumulator: UmmaAccumulator,
        a_major: Major,
        b_major: Major,
    ) -> Self {
        let desc = match UmmaInstrDesc::new(m, n, input, input, accumulator) {
            Ok(d) => Some(d.with_a_major(a_major).with_b_major(b_major)),
            Err(e) => {
                trace_error(format!("MmaF16Bf16Ss m{m}n{n}k16: {e}"));
                None
            }
        };
        MmaF16Bf16Ss {
            m,
            n,
            a_major,
            b_major,
            desc,
        }
    }

    /// bf16 x bf16 -> f32, the form every kernel here uses.
    #[track_caller]
    pub fn bf16(m: u32, n: u32, a_major: Major, b_major: Major) -> Self {
        Self::new(
            m,
            n,
            UmmaInput::Bf16,
            UmmaAccumulator::F32,
            a_major,
            b_major,
        )
    }

    /// bf16 x bf16 -> f32 with the major-ness of `a` and `b` (K-major when an operand was
    /// not recognised: that operand's error is already reported).
    #[track_caller]
    pub fn bf16_for(m: u32, n: u32, a: &SmemOperand, b: &SmemOperand) -> Self {
        Self::bf16(m, n, a.major(), b.major())
    }

    pub fn m(&self) -> u32 {
        self.m
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    /// K of one instruction (one K-step): 16 elements.
    pub fn k(&self) -> u32 {
        16
    }

    /// The instruction descriptor (absent when the shape was refused).
    pub fn instr_desc(&self) -> Option<UmmaInstrDesc> {
        self.desc
    }

    /// `tcgen05.mma m128n16k16`, for messages.
    fn name(&self) -> String {
        format!("tcgen05.mma m{}n{}k16", self.m, self.n)
    }

    /// Issues K-step `k_step` (`K = 16 k_step ..+ 16`): `D (+)= A . B^T` with D at `d`. `a`
    /// and `b` are whole operand tiles of exactly M and N rows, or blocks of taller ones
    /// ([`SmemOperand::at_mn`]). `accumulate` false overwrites D (the first K-step). Issue
    /// from one thread; completion is observed through [`commit`].
    #[track_caller]
    pub fn mma<'a>(
        &self,
        d: TmemAddr,
        a: impl Into<MnBlock<'a>>,
        b: impl Into<MnBlock<'a>>,
        k_step: i64,
        accumulate: impl Into<Accumulate>,
    ) {
        let (a, b) = (a.into(), b.into());
        let name = self.name();
        let ab_ok = check_a_and_b(
            &name,
            DescFormat::Umma,
            (&a, self.m, self.a_major),
            (&b, self.n, self.b_major),
            k_step,
        );
        let columns = d.static_column() + self.n;
        let d_ok = columns <= TMEM_COLUMNS;
        if !d_ok {
            trace_error(format!(
                "{name}: expects D's {} f32 columns inside the {TMEM_COLUMNS} columns of tensor \
                 memory, got columns [{}, {columns})",
                self.n,
                d.static_column()
            ));
        }
        let Some(desc) = self.desc else { return };
        if ab_ok && d_ok {
            mma_f16(d, a.desc(k_step), b.desc(k_step), desc.bits(), accumulate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Target;
    use crate::ir::{Kernel, Op};
    use crate::layout::{Swizzle, canonical};
    use crate::trace::{Diagnostic, TraceError, smem_tile, stage, threads, trace_kernel};

    fn ops(k: &Kernel) -> Vec<Op> {
        let mut out = Vec::new();
        k.body.for_each_inst(&mut |i| out.push(i.op.clone()));
        out
    }

    fn operand(name: &str, major: Major, mn: i64, k: i64, format: DescFormat) -> SmemOperand {
        let layout = match major {
            Major::K => canonical::k_major(Swizzle::B128, mn, k, 2),
            Major::MN => canonical::mn_major(Swizzle::B128, mn, k, 2),
        };
        SmemOperand::new(&smem_tile(name, layout.unwrap()), major, format)
    }

    fn trace(body: impl FnOnce()) -> Result<Kernel, TraceError> {
        trace_kernel("atom", Target::Sm100a, || {
            threads(128, 1, 1);
            body()
        })
    }

    /// The only diagnostic of a failed trace.
    fn single(r: Result<Kernel, TraceError>) -> Diagnostic {
        let e = r.expect_err("the trace fails");
        assert_eq!(e.diagnostics.len(), 1, "{e}");
        e.diagnostics[0].clone()
    }

    /// The atom issues exactly what the hand-written descriptors and `mma_f16` issue.
    #[test]
    fn atom_issues_what_the_hand_path_issues() {
        let by_hand = trace(|| {
            let a = operand("a", Major::K, 128, 64, DescFormat::Umma);
            let b = operand("b", Major::K, 32, 64, DescFormat::Umma);
            let idesc = UmmaInstrDesc::bf16(128, 32).unwrap().bits();
            let d = TmemAddr::from_base(Val::constant(0)).column(64);
            for ks in 0..4 {
                mma_f16(d, a.k_step(ks), b.k_step(ks), idesc, ks > 0);
            }
        })
        .unwrap();
        let by_atom = trace(|| {
            let a = operand("a", Major::K, 128, 64, DescFormat::Umma);
            let b = operand("b", Major::K, 32, 64, DescFormat::Umma);
            let atom = MmaF16Bf16Ss::bf16_for(128, 32, &a, &b);
            let d = TmemAddr::from_base(Val::constant(0)).column(64);
            for ks in 0..4 {
                atom.mma(d, &a, &b, ks, ks > 0);
            }
        })
        .unwrap();
        assert_eq!(ops(&by_atom), ops(&by_hand));
    }

    /// The decode kernel's O = KV^T . P: A is a 128-row block of a [512, 128] MN-major tile.
    #[test]
    fn atom_blocks_of_a_taller_tile_match_block_descriptors() {
        let by_hand = trace(|| {
            let a = operand("kv_t", Major::MN, 512, 128, DescFormat::Umma);
            let b = operand("p", Major::MN, 64, 128, DescFormat::Umma);
            let idesc = UmmaInstrDesc::bf16(128, 64)
                .unwrap()
                .with_a_major(Major::MN)
                .with_b_major(Major::MN)
                .bits();
            let d = TmemAddr::from_base(Val::constant(0));
            for mb in 0..4 {
                for ks in 0..8 {
                    let a_desc = a.block(128 * mb, 16 * ks);
                    mma_f16(d, a_desc, b.k_step(ks), idesc, ks > 0);
                }
            }
        })
        .unwrap();
        let by_atom = trace(|| {
            let a = operand("kv_t", Major::MN, 512, 128, DescFormat::Umma);
            let b = operand("p", Major::MN, 64, 128, DescFormat::Umma);
            let atom = MmaF16Bf16Ss::bf16(128, 64, Major::MN, Major::MN);
            let d = TmemAddr::from_base(Val::constant(0));
            for mb in 0..4 {
                for ks in 0..8 {
                    atom.mma(d, a.at_mn(128 * mb), &b, ks, ks > 0);
                }
            }
        })
        .unwrap();
        assert_eq!(ops(&by_atom), ops(&by_hand));
    }

    #[test]
    fn a_rows_that_are_not_m_name_both_shapes_at_the_call() {
        let mut line = 0;
        let d = single(trace(|| {
            let a = operand("kv", Major::K, 64, 64, DescFormat::Umma);
            let b = operand("q", Major::K, 16, 64, DescFormat::Umma);
            let atom = MmaF16Bf16Ss::bf16(128, 16, Major::K, Major::K);
            stage("3: S = KV . Q^T");
            let d = TmemAddr::from_base(Val::constant(0));
            line = line!() + 1;
            atom.mma(d, &a, &b, 0, false);
        }));
        assert_eq!(
            d.message,
            "tcgen05.mma m128n16k16: expects A to be [M, K] = [128, K], got `kv` [64, 64]"
        );
        assert_eq!((d.loc.file, d.loc.line), (file!(), line));
        assert_eq!(d.stage.as_deref(), Some("3: S = KV . Q^T"));
    }

    #[test]
    fn b_rows_that_are_not_n_and_a_taller_a_suggest_at_mn() {
        let e = trace(|| {
            let a = operand("kv", Major::K, 256, 64, DescFormat::Umma);
            let b = operand("q", Major::K, 32, 64, DescFormat::Umma);
            let atom = MmaF16Bf16Ss::bf16(128, 16, Major::K, Major::K);
            atom.mma(TmemAddr::from_base(Val::constant(0)), &a, &b, 0, false);
        })
        .unwrap_err();
        let messages: Vec<_> = e.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "tcgen05.mma m128n16k16: expects A to be [M, K] = [128, K], got `kv` [256, 64]; \
                 for 128 rows of the taller tile use `.at_mn(first_row)`",
                "tcgen05.mma m128n16k16: expects B to be [N, K] = [16, K], got `q` [32, 64]; \
                 for 16 rows of the taller tile use `.at_mn(first_row)`",
            ]
        );
    }

    #[test]
    fn k_steps_blocks_majors_formats_and_columns_are_checked() {
        let mut line = 0;
        let e = trace(|| {
            let a = operand("kv_t", Major::MN, 512, 128, DescFormat::Umma);
            let b = operand("p", Major::K, 64, 128, DescFormat::Gmma);
            let atom = MmaF16Bf16Ss::bf16(128, 64, Major::MN, Major::MN);
            let d = TmemAddr::from_base(Val::constant(0)).column(480);
            line = line!() + 1;
            atom.mma(d, a.at_mn(448), &b, 8, true);
        })
        .unwrap_err();
        assert!(e.diagnostics.iter().all(|d| d.loc.line == line), "{e}");
        let messages: Vec<_> = e.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "tcgen05.mma m128n64k16: expects A rows [448, 576) (M = 128) inside `kv_t` \
                 [512, 128]",
                "tcgen05.mma m128n64k16: expects a K-step of A in 0..8 (`kv_t` [512, 128]: 16 \
                 elements a step), got K-step 8",
                "tcgen05.mma m128n64k16: expects B with a tcgen05 (UMMA) descriptor, got `p` \
                 [64, 128] with a wgmma (GMMA) descriptor (`SmemOperand::new(.., \
                 DescFormat::Umma)`)",
                "tcgen05.mma m128n64k16: expects B MN-major (as the instruction descriptor \
                 says), got `p` [64, 128] K-major",
                "tcgen05.mma m128n64k16: expects a K-step of B in 0..8 (`p` [64, 128]: 16 \
                 elements a step), got K-step 8",
                "tcgen05.mma m128n64k16: expects D's 64 f32 columns inside the 512 columns of \
                 tensor memory, got columns [480, 544)",
            ]
        );
    }

    #[test]
    fn an_instruction_shape_that_does_not_exist_is_refused_where_the_atom_is_made() {
        let mut line = 0;
        let d = single(trace(|| {
            line = line!() + 1;
            let _ = MmaF16Bf16Ss::bf16(96, 16, Major::K, Major::K);
        }));
        assert_eq!(
            d.message,
            "MmaF16Bf16Ss m96n16k16: tcgen05.mma.cta_group::1 kind::f16 expects M = 64 or 128, \
             got M = 96"
        );
        assert_eq!(d.loc.line, line);
    }

    #[test]
    fn lanes_outside_a_quadrant_are_refused() {
        let e = trace(|| {
            let t = TmemAddr::from_base(Val::constant(0));
            let _ = t.lane(40);
            let _ = t.lane(160);
            let _ = t.lane(32).warp_quadrant(Val::constant(1));
            let _ = t.lane(96);
        })
        .unwrap_err();
        let messages: Vec<_> = e.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "TMEM lane offset 40: a warp accesses one 32-lane quadrant, so the lane offset \
                 must be 0, 32, 64 or 96 (warp w uses 32 * (w % 4))",
                "TMEM lane offset 160: a warp accesses one 32-lane quadrant, so the lane offset \
                 must be 0, 32, 64 or 96 (warp w uses 32 * (w % 4)); lane 160 is past the 128 \
                 lanes of tensor memory: warp w reads quadrant w % 4, not w",
                "TMEM address with lane offset 32 given to `warp_quadrant`, which adds the \
                 warp's quadrant 32 * (w % 4) to it: warp w would read lanes 32 * (w % 4) + 32 \
                 .., outside its quadrant; drop the `.lane(..)`",
            ]
        );
    }
}
