//! tcgen05 with `cta_group::1`: TMEM allocation, `kind::f16` MMA from shared-memory
//! descriptors, commit to an mbarrier, and `32x32b` loads from TMEM.
//!
//! Tensor memory is 128 lanes x 512 columns of 32-bit cells per CTA; an address is
//! `lane << 16 | column`. Warp `w` may only load lanes `32 * (w % 4) ..+ 32`.

use crate::arch::Accumulate;
use crate::arch::mbarrier::Mbarrier;
use crate::arch::memory::Smem;
use crate::ir::{Op, Operand, SourceLoc, Tcgen05Op};
use crate::trace::val::emit_effect;
use crate::trace::{IntoVal, Val, trace_error, with_builder};

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
        if lane % 32 != 0 || lane >= 128 {
            trace_error(format!(
                "TMEM lane offset {lane}: a warp accesses one 32-lane quadrant, so the lane \
                 offset must be 0, 32, 64 or 96 (warp w uses 32 * (w % 4))"
            ));
        }
        TmemAddr { lane, ..self }
    }

    /// The lanes of warp `warp`'s quadrant (`32 * (warp % 4)`), decided at run time.
    #[track_caller]
    pub fn warp_quadrant(self, warp: Val<u32>) -> Val<u32> {
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
    if !(32..=512).contains(&ncols) || !ncols.is_power_of_two() {
        trace_error(format!(
            "TMEM allocations are a power of two from 32 to 512 columns, got {ncols}"
        ));
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
    if !(columns.is_power_of_two() && columns <= 128) {
        trace_error(format!(
            "tcgen05.ld.32x32b loads 1, 2, 4, ... or 128 columns, not {columns}"
        ));
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
