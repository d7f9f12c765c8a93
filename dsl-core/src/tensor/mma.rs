//! Tiled MMA: an MMA atom repeated over a CTA tile, and the per-thread (or per-warpgroup)
//! views of A, B and C that issuing it needs, as CuTe's `TiledMMA` / `ThrMMA` give.
//!
//! - [`WgmmaTiled`] (sm_90a): `m64nNk16` over `warpgroups` consecutive warpgroups stacked
//!   along M, each repeated down the tile's M and across its N; A from shared memory (SS)
//!   or from registers (RS), B from shared memory, C in registers.
//! - [`Tcgen05Tiled`] (sm_100a): `tcgen05.mma` with A and B in shared memory (SS) and C in
//!   tensor memory, repeated across N.
//!
//! The C views come from the atoms' fragment layouts (`layout::fragment`) composed with the
//! C tensor's layout, so a store of the accumulator needs no index arithmetic of its own.

use std::ops::Range;

use half::bf16;

use super::atoms::TmemCopy;
use super::engine::{Engine, Regs, Shared, Tmem};
use super::view::Tensor;
use crate::arch::Accumulate;
use crate::arch::operand::{DescFormat, MnBlock, SmemOperand};
use crate::arch::sm90::wgmma::{self, Accumulator, MmaF16Bf16Rs, MmaF16Bf16Ss};
use crate::arch::sm100::tcgen05::{self, TmemAddr};
use crate::arch::thread::thread_idx_x;
use crate::ir::{SourceLoc, Ty};
use crate::layout::fragment;
use crate::layout::{ComposedLayout, Int, IntTuple, Layout, LayoutError, Major};
use crate::trace::{Bf16x2, Val, trace_error};

/// A (thread, value) layout from per-leaf (row, col) steps, into the column-major index
/// `row + rows * col` of a `rows`-row tile (the flat index a rank-2 tensor's layout takes).
pub(super) fn tv(thread: &[(i64, i64, i64)], values: &[(i64, i64, i64)], rows: i64) -> Layout {
    let mode = |leaves: &[(i64, i64, i64)]| {
        let shape = IntTuple::tuple(leaves.iter().map(|&(e, _, _)| IntTuple::from(e)));
        let stride = IntTuple::tuple(leaves.iter().map(|&(_, r, c)| IntTuple::from(r + rows * c)));
        Layout::new(shape, stride).expect("congruent by construction")
    };
    Layout::from_modes([mode(thread), mode(values)])
}

/// The (row, col) in the tile of value `value` (a flat index of the value mode) of thread
/// `thread`, under the thread-value layout of per-leaf (extent, row step, col step): the same
/// layout as [`tv`], read along each axis alone, for an epilogue's bounds checks.
#[track_caller]
fn tv_coord(
    thread_leaves: &[(i64, i64, i64)],
    value_leaves: &[(i64, i64, i64)],
    thread: Val<u32>,
    value: i64,
) -> (Val<u32>, Val<u32>) {
    let along = |axis: fn(&(i64, i64, i64)) -> i64| -> Val<u32> {
        let project = |leaves: &[(i64, i64, i64)]| -> Vec<(i64, i64, i64)> {
            leaves.iter().map(|l| (l.0, axis(l), 0)).collect()
        };
        let layout = tv(&project(thread_leaves), &project(value_leaves), 1);
        let result = (|| {
            let at_value = layout.mode(1)?.offset(&IntTuple::from(value))?.value() as u32;
            Ok::<_, LayoutError>(
                match layout
                    .mode(0)?
                    .offset(&IntTuple::Leaf(Int::Dynamic(thread)))?
                {
                    Int::Static(row) => Val::constant(row as u32 + at_value),
                    Int::Dynamic(row) => row + at_value,
                },
            )
        })();
        match result {
            Ok(v) => v,
            Err(e) => {
                trace_error(format!("the coordinate of C value {value}: {e}"));
                Val::constant(0u32)
            }
        }
    };
    (along(|l| l.1), along(|l| l.2))
}

/// (extent, row step, col step) of each leaf of mode `mode` of a fragment.
fn leaves(f: &fragment::Fragment, mode: usize) -> Vec<(i64, i64, i64)> {
    let (rows, cols) = (f.rows().mode(mode).unwrap(), f.cols().mode(mode).unwrap());
    let (r, c) = (rows.flatten(), cols.flatten());
    (0..r.rank())
        .map(|i| {
            let (rm, cm) = (r.mode(i).unwrap(), c.mode(i).unwrap());
            let step = |l: &Layout| l.stride().leaves()[0].value();
            (rm.static_size(), step(&rm), step(&cm))
        })
        .collect()
}

/// The per-thread view of `c` through the thread-value layout `tv`: thread `thread`'s
/// elements, shaped like `tv`'s value mode.
#[track_caller]
pub(super) fn partition_tv<E, En: Engine>(
    c: &Tensor<E, En>,
    tv: &Layout,
    thread: Val<u32>,
    what: &str,
) -> Tensor<E, En> {
    let result = (|| {
        let composed = c.compose_with(tv)?;
        let thread_mode = composed.mode(0)?;
        let offset = c.offset_in(&thread_mode, &IntTuple::Leaf(Int::Dynamic(thread)))?;
        Ok((offset, composed.mode(1)?, c.mode_align(&thread_mode)))
    })();
    c.rebased(what, result)
}

/// The accumulate flag of K-step `ks` of `steps`: `first` for the range's first step, add
/// for the rest.
fn first_step_scale(ks: i64, steps: &Range<i64>, first: Accumulate) -> Accumulate {
    if ks == steps.start {
        first
    } else {
        Accumulate::Static(true)
    }
}

/// A canonical operand tile for an MMA from a shared-memory tensor (its swizzle, offset
/// and layout, read back as a tile of its buffer). A runtime part of the offset (e.g. the
/// stage of a ring) moves the descriptor's start address at run time; it must be a multiple
/// of the swizzle period (and of 16 bytes), so the static tile the layout checks describe is
/// the one the MMA reads.
#[track_caller]
fn operand_of(t: &Tensor<bf16, Shared>, major: Major, format: DescFormat) -> SmemOperand {
    const ELEM_BYTES: i64 = 2;
    let tile = (|| {
        let layout = t.layout.to_static().map_err(|e| e.to_string())?;
        let composed = ComposedLayout::new(
            t.engine.swizzle,
            ELEM_BYTES * t.offset.constant,
            layout,
            ELEM_BYTES as u32,
        )
        .map_err(|e| e.to_string())?;
        let moved = match t.offset.dynamic {
            None => None,
            Some(elements) => {
                let step = ELEM_BYTES * t.dyn_align;
                let period = t.engine.swizzle.period().max(16);
                if step == 0 || step % period != 0 {
                    return Err(format!(
                        "the tensor {t:?} has a runtime offset in steps of {step} bytes, which \
                         may not keep its {period}-byte swizzle pattern; offset it only by \
                         whole tiles (e.g. `local_tile` of a ring by a runtime stage)"
                    ));
                }
                Some(elements >> (16 / ELEM_BYTES).trailing_zeros())
            }
        };
        Ok((composed, moved))
    })();
    match tile {
        Ok((layout, moved)) => {
            let operand = SmemOperand::new(&t.engine.tile.view(layout), major, format);
            match moved {
                Some(units) => operand.moved_by_16_byte_units(units),
                None => operand,
            }
        }
        Err(e) => {
            trace_error(format!("an MMA operand: {e}"));
            SmemOperand::new(&t.engine.tile, major, format)
        }
    }
}

/// `wgmma` over a CTA tile `[tile_m, tile_n]`: warpgroup `g` (threads `128 g ..`) takes
/// rows `64 g + 64 warpgroups r` for each repeat `r` below `tile_m`, and every N block of
/// the atom across `tile_n`.
#[derive(Clone, Copy, Debug)]
pub struct WgmmaTiled {
    n: u32,
    a: WgmmaA,
    b_major: Major,
    warpgroups: u32,
    tile_m: i64,
    tile_n: i64,
}

#[derive(Clone, Copy, Debug)]
enum WgmmaA {
    Smem(MmaF16Bf16Ss),
    Regs(MmaF16Bf16Rs),
}

impl WgmmaTiled {
    /// A and B from shared memory: `atom` repeated over `[tile_m, tile_n]` by `warpgroups`
    /// warpgroups. `tile_m` must be a multiple of `64 warpgroups` and `tile_n` of the
    /// atom's N (a trace error otherwise).
    #[track_caller]
    pub fn ss(atom: MmaF16Bf16Ss, warpgroups: u32, tile_m: i64, tile_n: i64) -> Self {
        let b_major = atom.instr().map_or(Major::K, |i| i.b_major());
        Self::checked(
            atom.n(),
            WgmmaA::Smem(atom),
            b_major,
            warpgroups,
            tile_m,
            tile_n,
        )
    }

    /// A from registers (each thread's fragment of A, [`WgmmaThread::partition_a_regs`]),
    /// B from shared memory.
    #[track_caller]
    pub fn rs(
        atom: MmaF16Bf16Rs,
        b_major: Major,
        warpgroups: u32,
        tile_m: i64,
        tile_n: i64,
    ) -> Self {
        Self::checked(
            atom.n(),
            WgmmaA::Regs(atom),
            b_major,
            warpgroups,
            tile_m,
            tile_n,
        )
    }

    #[track_caller]
    fn checked(
        n: u32,
        a: WgmmaA,
        b_major: Major,
        warpgroups: u32,
        tile_m: i64,
        tile_n: i64,
    ) -> Self {
        let rows = 64 * i64::from(warpgroups);
        if warpgroups == 0 || tile_m % rows != 0 || tile_n % i64::from(n) != 0 {
            trace_error(format!(
                "a wgmma m64n{n}k16 tiling over {warpgroups} warpgroup(s) covers tiles of a \
                 multiple of {rows} rows and {n} columns, got [{tile_m}, {tile_n}]"
            ));
        }
        WgmmaTiled {
            n,
            a,
            b_major,
            warpgroups,
            tile_m,
            tile_n,
        }
    }

    fn m_reps(&self) -> i64 {
        (self.tile_m / (64 * i64::from(self.warpgroups))).max(1)
    }

    fn n_reps(&self) -> i64 {
        (self.tile_n / i64::from(self.n)).max(1)
    }

    /// Thread `thread`'s part (`0 .. 128 warpgroups`, e.g. `thread_idx_x()` less the
    /// producer's threads).
    pub fn thread(&self, thread: Val<u32>) -> WgmmaThread {
        WgmmaThread {
            tiled: *self,
            thread,
            warpgroup: None,
        }
    }

    /// The part of this CTA thread when the tiling's warpgroups are the CTA's warpgroups
    /// `first_warpgroup ..` (its thread `thread_idx_x() - 128 first_warpgroup`, e.g. a
    /// second team's). The warpgroup that picks the thread's rows of an A tile in shared
    /// memory comes from `%tid.x >> 7`, in a form ptxas sees is the same across a warp:
    /// ptxas 13.5 keeps `(%tid.x >> 7) & 1` (and `^ 2`) in uniform registers, but neither
    /// `(%tid.x - 256) >> 7` nor `(%tid.x >> 7) - 2`, and with those rebuilds the A
    /// descriptor of every MMA with a 64-bit IADD3 and an R2UR: about 100 instructions
    /// more a 16-MMA S tile of the streamed decode kernel's second team. Where the first
    /// warpgroup is a multiple of the tiling's power-of-two warpgroups,
    /// `(%tid.x >> 7) & (warpgroups - 1)` is the same number; elsewhere a subtraction.
    ///
    /// ```
    /// use dsl_core::Target;
    /// use dsl_core::arch::sm90::wgmma::MmaF16Bf16Ss;
    /// use dsl_core::layout::Major;
    /// use dsl_core::tensor::WgmmaTiled;
    /// use dsl_core::trace::{threads, trace_kernel};
    ///
    /// // A second team of two warpgroups (threads 256..512) takes a 128 x 64 tile.
    /// trace_kernel("second_team", Target::Sm90a, || {
    ///     threads(512, 1, 1);
    ///     let tiled = WgmmaTiled::ss(MmaF16Bf16Ss::bf16(64, Major::K, Major::K), 2, 128, 64);
    ///     let thr = tiled.thread_in_cta(2);
    ///     let _acc = thr.partition_fragment_c();
    /// })
    /// .unwrap();
    /// ```
    pub fn thread_in_cta(&self, first_warpgroup: u32) -> WgmmaThread {
        let tid = thread_idx_x();
        let cta_warpgroup = tid >> 7u32;
        let aligned = self.warpgroups.is_power_of_two() && first_warpgroup % self.warpgroups == 0;
        let warpgroup = if aligned {
            cta_warpgroup & (self.warpgroups - 1)
        } else {
            cta_warpgroup - first_warpgroup
        };
        WgmmaThread {
            tiled: *self,
            thread: tid - 128 * first_warpgroup,
            warpgroup: Some(warpgroup),
        }
    }

    /// The thread-value layout of C: thread `((4,8,4), warpgroups)`, values
    /// `((2,2,N/8), m_reps, n_reps)`, into the column-major index of the tile.
    fn tv_c(&self) -> Layout {
        let (thread, values) = self.tv_c_leaves();
        tv(&thread, &values, self.tile_m)
    }

    /// The leaves of [`WgmmaTiled::tv_c`] as (extent, row step, col step).
    #[allow(clippy::type_complexity)]
    fn tv_c_leaves(&self) -> (Vec<(i64, i64, i64)>, Vec<(i64, i64, i64)>) {
        let f = fragment::wgmma_accumulator_f32(self.n).expect("N checked by the atom");
        let wg_rows = 64 * i64::from(self.warpgroups);
        let mut thread = leaves(&f, 0);
        thread.push((i64::from(self.warpgroups), 64, 0));
        let mut values = leaves(&f, 1);
        values.push((self.m_reps(), wg_rows, 0));
        values.push((self.n_reps(), 0, i64::from(self.n)));
        (thread, values)
    }

    /// The thread-value layout of A in registers (ptx-reference.md §17): thread
    /// `(4,8,4,warpgroups)` (lane % 4, lane / 4, warp, warpgroup), values
    /// `(2,2,2,K/16,m_reps)` (the two bf16 of a register, register bit 0 (row + 8), bit 1
    /// (col + 8), the K-step, the M repeat).
    fn tv_a(&self, k: i64) -> Layout {
        let wg_rows = 64 * i64::from(self.warpgroups);
        let thread = [
            (4, 0, 2),
            (8, 1, 0),
            (4, 16, 0),
            (i64::from(self.warpgroups), 64, 0),
        ];
        let values = [
            (2, 0, 1),
            (2, 8, 0),
            (2, 0, 8),
            (k / 16, 0, 16),
            (self.m_reps(), wg_rows, 0),
        ];
        tv(&thread, &values, self.tile_m)
    }
}

/// One thread's part of a [`WgmmaTiled`].
#[derive(Clone, Copy, Debug)]
pub struct WgmmaThread {
    tiled: WgmmaTiled,
    thread: Val<u32>,
    /// `thread >> 7`, where [`WgmmaTiled::thread_in_cta`] computed it.
    warpgroup: Option<Val<u32>>,
}

/// A wgmma A operand: the tile in shared memory (each warpgroup's rows found by the MMA),
/// or this thread's fragment in registers.
#[derive(Clone, Debug)]
pub enum WgmmaOperandA {
    Smem(SmemOperand),
    /// This warpgroup's 64 rows of a tile at a runtime offset (a stage of a ring): the rows
    /// join the runtime move of the start address, once per tile instead of once per MMA.
    SmemOwnRows(SmemOperand),
    Regs(Tensor<bf16, Regs>),
}

impl WgmmaThread {
    fn warpgroup(&self) -> Val<u32> {
        self.warpgroup.unwrap_or_else(|| self.thread >> 7u32)
    }

    /// This thread's elements of the C tile `[tile_m, tile_n]` (any memory), in the order
    /// of [`WgmmaThread::partition_fragment_c`]: `((2,2,N/8), m_reps, n_reps)`.
    #[track_caller]
    pub fn partition_c<E, En: Engine>(&self, c: &Tensor<E, En>) -> Tensor<E, En> {
        partition_tv(c, &self.tiled.tv_c(), self.thread, "wgmma partition_c")
    }

    /// The (row, col) within the C tile of this thread's value `value` (a flat index of
    /// [`WgmmaThread::partition_c`]), for the bounds checks of a tile on C's edge.
    #[track_caller]
    pub fn coord_c(&self, value: i64) -> (Val<u32>, Val<u32>) {
        let (thread, values) = self.tiled.tv_c_leaves();
        tv_coord(&thread, &values, self.thread, value)
    }

    /// The accumulator: `N/2 m_reps n_reps` f32 registers of this thread, zeroed, shaped
    /// like [`WgmmaThread::partition_c`].
    #[track_caller]
    pub fn partition_fragment_c(&self) -> Tensor<f32, Regs> {
        let t = &self.tiled;
        let count = i64::from(t.n / 2) * t.m_reps() * t.n_reps();
        let regs = wgmma::zeroed_f32_registers(count as usize, SourceLoc::caller());
        let shape = t.tv_c().mode(1).expect("value mode").shape().clone();
        Tensor::registers(regs, Ty::F32, Layout::col_major(shape))
    }

    /// A for an SS tiling: the `[tile_m, K]` tile in shared memory as a canonical wgmma
    /// operand (`major` as the atom was built). A tile at a runtime offset (a stage of a
    /// ring) with one M repeat gives this warpgroup's own 64 rows, so that [`Self::gemm`]
    /// moves no descriptor per MMA.
    #[track_caller]
    pub fn partition_a(&self, a: &Tensor<bf16, Shared>, major: Major) -> WgmmaOperandA {
        let k = a.static_extent(1).unwrap_or(0);
        if a.offset.dynamic.is_some() && self.tiled.m_reps() == 1 && k > 0 {
            let own_rows = a.local_tile(&[64, k], (self.warpgroup(), 0u32));
            return WgmmaOperandA::SmemOwnRows(operand_of(&own_rows, major, DescFormat::Gmma));
        }
        WgmmaOperandA::Smem(operand_of(a, major, DescFormat::Gmma))
    }

    /// This thread's elements of A `[tile_m, K]` (any memory) in the order of the RS A
    /// fragment, to [`Tensor::load`] into registers: `(2,2,2,K/16,m_reps)`.
    #[track_caller]
    pub fn partition_a_regs<En: Engine>(&self, a: &Tensor<bf16, En>) -> Tensor<bf16, En> {
        let k = a.static_extent(1).unwrap_or(0);
        partition_tv(
            a,
            &self.tiled.tv_a(k),
            self.thread,
            "wgmma partition_a_regs",
        )
    }

    /// B `[tile_n, K]` in shared memory as a canonical wgmma operand.
    #[track_caller]
    pub fn partition_b(&self, b: &Tensor<bf16, Shared>) -> SmemOperand {
        operand_of(b, self.tiled.b_major, DescFormat::Gmma)
    }

    /// Issues every K-step of the tile: `acc (+)= A . B^T` for each M and N repeat;
    /// `accumulate` applies to the first K-step (false starts from zero), later ones add.
    /// Wrap it in `wgmma::fence()` before and `commit_group` / `wait_group` after.
    #[track_caller]
    pub fn gemm(
        &self,
        acc: &Tensor<f32, Regs>,
        a: &WgmmaOperandA,
        b: &SmemOperand,
        accumulate: impl Into<Accumulate>,
    ) {
        let k_steps = b.shape().map_or(0, |(_, k)| k / 16);
        self.gemm_k_steps(acc, a, b, 0..k_steps, accumulate);
    }

    /// [`WgmmaThread::gemm`] over K-steps `steps` only (16 elements of K each), e.g. the
    /// rows of a tile that only some CTAs fill: `accumulate` applies to the range's first
    /// step. Each M and N repeat takes the whole range before the next repeat.
    #[track_caller]
    pub fn gemm_k_steps(
        &self,
        acc: &Tensor<f32, Regs>,
        a: &WgmmaOperandA,
        b: &SmemOperand,
        steps: Range<i64>,
        accumulate: impl Into<Accumulate>,
    ) {
        let t = &self.tiled;
        let accumulate = accumulate.into();
        let k_steps = b.shape().map_or(0, |(_, k)| k / 16);
        let half = (t.n / 2) as usize;
        // Only a whole tile over several warpgroups picks this warpgroup's rows per MMA.
        let group =
            (matches!(a, WgmmaOperandA::Smem(_)) && t.warpgroups > 1).then(|| self.warpgroup());
        for nr in 0..t.n_reps() {
            for mr in 0..t.m_reps() {
                let first = (mr + t.m_reps() * nr) as usize * half;
                let frag = Accumulator::from_regs(t.n, acc.regs()[first..first + half].to_vec());
                let b_block = b.at_mn(i64::from(t.n) * nr);
                for ks in steps.clone() {
                    let scale = first_step_scale(ks, &steps, accumulate);
                    match (t.a, a) {
                        (WgmmaA::Smem(atom), WgmmaOperandA::Smem(a)) => {
                            let mn0 = 64 * i64::from(t.warpgroups) * mr;
                            let block = match group {
                                Some(group) => a.at_mn(mn0).plus(group * a.block_offset(64, 0)),
                                None => a.at_mn(mn0),
                            };
                            atom.mma(&frag, block, b_block, ks, scale);
                        }
                        (WgmmaA::Smem(atom), WgmmaOperandA::SmemOwnRows(a)) => {
                            atom.mma(&frag, a.at_mn(0), b_block, ks, scale);
                        }
                        (WgmmaA::Regs(atom), WgmmaOperandA::Regs(a)) => {
                            let word = (4 * (ks + k_steps * mr)) as usize;
                            let regs: [Val<Bf16x2>; 4] =
                                std::array::from_fn(|j| Val::from_reg(a.regs()[word + j]));
                            atom.mma(&frag, regs, b_block, ks, scale);
                        }
                        _ => {
                            trace_error(
                                "wgmma gemm: an A operand of the other kind than the tiling's \
                                 atom (SS takes `partition_a`, RS a loaded `partition_a_regs`)",
                            );
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// `tcgen05.mma` (`cta_group::1`) over a CTA tile `[tile_m, tile_n]`: the atom repeated
/// across N and down M, C in tensor memory. Tensor memory has one lane per row of an
/// M = 128 atom, so the M blocks of a taller tile lie one after the other along the
/// columns: block `r` of the tile takes columns `r tile_n ..`.
#[derive(Clone, Copy, Debug)]
pub struct Tcgen05Tiled {
    atom: tcgen05::MmaF16Bf16Ss,
    a_major: Major,
    b_major: Major,
    tile_m: i64,
    tile_n: i64,
}

impl Tcgen05Tiled {
    /// `atom` across `tile_n` columns (a multiple of its N, at most 512 TMEM columns).
    #[track_caller]
    pub fn ss(atom: tcgen05::MmaF16Bf16Ss, a_major: Major, b_major: Major, tile_n: i64) -> Self {
        Self::ss_tile(atom, a_major, b_major, i64::from(atom.m()), tile_n)
    }

    /// `atom` over `[tile_m, tile_n]`: `tile_m` a multiple of its M, `tile_n` of its N, and
    /// the `tile_m / M` blocks of `tile_n` columns within the 512 TMEM columns.
    #[track_caller]
    pub fn ss_tile(
        atom: tcgen05::MmaF16Bf16Ss,
        a_major: Major,
        b_major: Major,
        tile_m: i64,
        tile_n: i64,
    ) -> Self {
        let (m, n) = (i64::from(atom.m()), i64::from(atom.n()));
        let columns = tile_n * (tile_m / m).max(1);
        if tile_m % m != 0 || tile_n % n != 0 || columns > i64::from(tcgen05::TMEM_COLUMNS) {
            trace_error(format!(
                "a tcgen05.mma m{m}n{n} tiling covers a multiple of {m} rows and {n} columns, \
                 its row blocks side by side in at most {} columns, got [{tile_m}, {tile_n}] \
                 ({columns} columns)",
                tcgen05::TMEM_COLUMNS
            ));
        }
        Tcgen05Tiled {
            atom,
            a_major,
            b_major,
            tile_m,
            tile_n,
        }
    }

    fn m_reps(&self) -> i64 {
        (self.tile_m / i64::from(self.atom.m())).max(1)
    }

    fn n_reps(&self) -> i64 {
        (self.tile_n / i64::from(self.atom.n())).max(1)
    }

    /// The TMEM columns the accumulator takes: `tile_n` for each M block.
    pub fn columns(&self) -> u32 {
        (self.tile_n * self.m_reps()) as u32
    }

    /// The accumulator `[tile_m, tile_n]` in tensor memory from `base` (an allocation of at
    /// least [`Tcgen05Tiled::columns`] columns from there): (row, col) -> TMEM address.
    #[track_caller]
    pub fn partition_fragment_c(&self, base: TmemAddr) -> Tensor<f32, Tmem> {
        let n = i64::from(self.atom.n());
        let layout = fragment::tmem_accumulator(self.atom.m(), self.atom.n()).and_then(|atom| {
            let block_rows = atom.mode(0)?;
            let rows = if self.m_reps() == 1 {
                block_rows
            } else {
                Layout::new(
                    IntTuple::tuple([block_rows.shape().clone(), IntTuple::from(self.m_reps())]),
                    IntTuple::tuple([block_rows.stride().clone(), IntTuple::from(self.tile_n)]),
                )?
            };
            let cols = Layout::new(IntTuple::of(&[n, self.n_reps()]), IntTuple::of(&[1, n]))?;
            Ok(Layout::from_modes([rows, cols]))
        });
        match layout {
            Ok(l) => Tensor::tmem(base, l),
            Err(e) => {
                trace_error(format!("tcgen05 partition_fragment_c: {e}"));
                Tensor::tmem(base, Layout::contiguous(1).expect("1:1"))
            }
        }
    }

    pub fn partition_a(&self, a: &Tensor<bf16, Shared>) -> SmemOperand {
        operand_of(a, self.a_major, DescFormat::Umma)
    }

    pub fn partition_b(&self, b: &Tensor<bf16, Shared>) -> SmemOperand {
        operand_of(b, self.b_major, DescFormat::Umma)
    }

    /// Issues every K-step for every M and N repeat: `D (+)= A . B^T`; `accumulate` applies
    /// to the first K-step. Issue from one thread, then `tcgen05::commit`.
    #[track_caller]
    pub fn gemm(
        &self,
        d: &Tensor<f32, Tmem>,
        a: &SmemOperand,
        b: &SmemOperand,
        accumulate: impl Into<Accumulate>,
    ) {
        let k_steps = a.shape().map_or(0, |(_, k)| k / 16);
        self.gemm_k_steps(d, a, b, 0..k_steps, accumulate);
    }

    /// [`Tcgen05Tiled::gemm`] over K-steps `steps` only (16 elements of K each), e.g. the
    /// rows of a tile that only some CTAs fill: `accumulate` applies to the range's first
    /// step. Each M block (and N repeat within it) takes the whole range before the next.
    #[track_caller]
    pub fn gemm_k_steps(
        &self,
        d: &Tensor<f32, Tmem>,
        a: &SmemOperand,
        b: &SmemOperand,
        steps: Range<i64>,
        accumulate: impl Into<Accumulate>,
    ) {
        let accumulate = accumulate.into();
        let (m, n) = (i64::from(self.atom.m()), i64::from(self.atom.n()));
        for mr in 0..self.m_reps() {
            // A single block keeps the atom's check that A is exactly its M rows.
            let a_block: MnBlock<'_> = if self.m_reps() == 1 {
                a.into()
            } else {
                a.at_mn(m * mr)
            };
            for nr in 0..self.n_reps() {
                let dn = d.tmem_at((m * mr, n * nr));
                for ks in steps.clone() {
                    let scale = first_step_scale(ks, &steps, accumulate);
                    self.atom.mma(dn, a_block, b.at_mn(n * nr), ks, scale);
                }
            }
        }
    }

    /// The epilogue's threads (the CTA's first `tile_m / 32` warps, `thread` in
    /// 0..tile_m): thread t owns row t of C (M = 128: lane t % 128 of M block t / 128), all
    /// `tile_n` columns.
    fn tv_c(&self) -> Result<Layout, LayoutError> {
        if self.atom.m() != 128 {
            return Err(LayoutError::new(
                crate::layout::LayoutErrorKind::Unsupported,
                format!(
                    "the tcgen05 epilogue partition is for M = 128, got M = {}",
                    self.atom.m()
                ),
            ));
        }
        let (thread, values) = self.tv_c_leaves();
        Ok(tv(&thread, &values, self.tile_m))
    }

    #[allow(clippy::type_complexity)]
    fn tv_c_leaves(&self) -> ([(i64, i64, i64); 1], [(i64, i64, i64); 1]) {
        ([(self.tile_m, 1, 0)], [(self.tile_n, 0, 1)])
    }

    /// The (row, col) within the C tile of value `value` (a flat index of
    /// [`Tcgen05Tiled::partition_c`]) of thread `thread`, for the bounds checks of a tile on
    /// C's edge.
    #[track_caller]
    pub fn coord_c(&self, thread: Val<u32>, value: i64) -> (Val<u32>, Val<u32>) {
        let (threads, values) = self.tv_c_leaves();
        tv_coord(&threads, &values, thread, value)
    }

    /// Thread `thread`'s row of the C tile `[tile_m, tile_n]` (any memory), in the order of
    /// [`Tcgen05Tiled::load_c`].
    #[track_caller]
    pub fn partition_c<E, En: Engine>(&self, c: &Tensor<E, En>, thread: Val<u32>) -> Tensor<E, En> {
        match self.tv_c() {
            Ok(tv) => partition_tv(c, &tv, thread, "tcgen05 partition_c"),
            Err(e) => {
                trace_error(format!("tcgen05 partition_c: {e}"));
                c.clone()
            }
        }
    }

    /// Loads this warp's 32 lanes of `d`, the accumulator or a column tile of it
    /// ([`Tensor::local_tile`]), every column of `d`, into registers through the
    /// [`TmemCopy`] atom, as wide as the columns allow: thread t of warp w gets lane
    /// `32 (w % 4) + t % 32` of M block `w / 4` (the only one of a 128-row `d`). The whole
    /// accumulator's registers are shaped like [`Tcgen05Tiled::partition_c`].
    #[track_caller]
    pub fn load_c(&self, d: &Tensor<f32, Tmem>, warp: Val<u32>) -> Tensor<f32, Regs> {
        let rows = d.static_extent(0).unwrap_or(self.tile_m);
        let columns = d.static_extent(1).unwrap_or(self.tile_n);
        let block = if rows > 128 {
            d.local_tile(&[128, columns], (warp >> 2u32, 0u32))
        } else {
            d.clone()
        };
        TmemCopy::widest(columns).load(&block, warp)
    }
}
