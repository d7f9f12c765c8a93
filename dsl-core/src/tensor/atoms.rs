//! Copy atoms: one instruction's thread-value layouts, composed with a tensor's layout to
//! give each thread its part of a tile and to issue the instruction over it (CuTe's
//! `Copy_Atom` tiled into a `TiledCopy`).
//!
//! - [`TiledMatrix`]: `ldmatrix` / `stmatrix` `.m8n8.xN{.trans}.b16` between a shared-memory
//!   bf16 tile `[rows, cols]` and per-thread register fragments, warps stacked along the
//!   rows. With `.x4` over `4 g` warps and a `[64 g m, K]` tile the fragment is the wgmma
//!   RS A fragment ([`crate::tensor::WgmmaThread::partition_a_regs`]), register for register.
//! - [`TmemCopy`]: `tcgen05.ld` / `tcgen05.st` `.32x32b.xN` between an f32 tile of tensor
//!   memory `[128, cols]` (rows are TMEM lanes) and per-thread f32 fragments.
//!
//! Every address comes from the tile's layout through the atom's layouts; nothing here
//! computes an index of its own.

use half::bf16;

use super::engine::{Engine, Regs, Shared, Tmem};
use super::mma::{partition_tv, tv};
use super::view::Tensor;
use crate::arch::matrix::{ldmatrix, stmatrix};
use crate::arch::sm100::tcgen05;
use crate::ir::verify::rules;
use crate::ir::{Reg, Ty};
use crate::layout::{IntTuple, Layout};
use crate::trace::{Val, trace_error};

/// Elements of one `ldmatrix` row: 8 b16, 16 bytes.
const ROW: i64 = 8;

/// `ldmatrix` / `stmatrix` `.m8n8.xN{.trans}.b16`: `matrices` 8x8 matrices a warp, as the
/// `[8, 8]` (x1), `[16, 8]` (x2) or `[16, 16]` (x4) block of a tile whose register `m`
/// is the block's rows `+ 8 (m % 2)`, columns `+ 8 (m / 2)`. Without `trans` a 16-byte
/// row of shared memory is a row of the tile; with it, a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixAtom {
    matrices: u32,
    trans: bool,
}

impl MatrixAtom {
    #[track_caller]
    pub fn new(matrices: u32, trans: bool) -> Self {
        if let Err(e) = rules::matrix_count("ldmatrix", matrices as usize) {
            trace_error(e);
        }
        MatrixAtom { matrices, trans }
    }

    pub fn x4(trans: bool) -> Self {
        MatrixAtom { matrices: 4, trans }
    }

    fn rows(&self) -> i64 {
        if self.matrices == 1 { 8 } else { 16 }
    }

    fn cols(&self) -> i64 {
        if self.matrices == 4 { 16 } else { 8 }
    }

    /// (extent, row step, col step) of the matrix index: bit 0 steps 8 rows, bit 1 8
    /// columns; lanes past the matrices give addresses the instruction ignores (step 0).
    fn blocks(&self) -> [(i64, i64, i64); 2] {
        match self.matrices {
            1 => [(2, 0, 0), (2, 0, 0)],
            2 => [(2, 8, 0), (2, 0, 0)],
            _ => [(2, 8, 0), (2, 0, 8)],
        }
    }
}

/// A [`MatrixAtom`] over a `[tile_rows, tile_cols]` tile: `warps` warps stacked along the
/// rows (warp w takes the atom's rows `w ..` of every `warps` blocks), the atom repeated
/// across the columns, then down the rows.
#[derive(Clone, Copy, Debug)]
pub struct TiledMatrix {
    atom: MatrixAtom,
    warps: u32,
    tile_rows: i64,
    tile_cols: i64,
}

impl TiledMatrix {
    /// A trace error unless the tile is a whole number of atoms for every warp.
    #[track_caller]
    pub fn new(atom: MatrixAtom, warps: u32, tile_rows: i64, tile_cols: i64) -> Self {
        let rows = atom.rows() * i64::from(warps);
        if warps == 0 || tile_rows % rows != 0 || tile_cols % atom.cols() != 0 {
            trace_error(format!(
                "ldmatrix/stmatrix .x{} over {warps} warp(s) covers tiles of a multiple of \
                 {rows} rows and {} columns, got [{tile_rows}, {tile_cols}]",
                atom.matrices,
                atom.cols()
            ));
        }
        TiledMatrix {
            atom,
            warps,
            tile_rows,
            tile_cols,
        }
    }

    fn col_reps(&self) -> i64 {
        (self.tile_cols / self.atom.cols()).max(1)
    }

    fn row_reps(&self) -> i64 {
        (self.tile_rows / (self.atom.rows() * i64::from(self.warps))).max(1)
    }

    /// The repeats: the atom across the columns, then the warps' blocks down the rows.
    fn repeats(&self) -> [(i64, i64, i64); 2] {
        let warp_rows = self.atom.rows() * i64::from(self.warps);
        [
            (self.col_reps(), 0, self.atom.cols()),
            (self.row_reps(), warp_rows, 0),
        ]
    }

    /// The registers' thread-value layout (the ISA fragment): thread `(4, 8, warps)` (lane
    /// % 4 steps 2 columns, lane / 4 a row), values `(2, matrix bits.., col_reps,
    /// row_reps)`, into the column-major index of the tile.
    fn tv_fragment(&self) -> Layout {
        let thread = [
            (4, 0, 2),
            (8, 1, 0),
            (i64::from(self.warps), self.atom.rows(), 0),
        ];
        let mut values = vec![(2, 0, 1)];
        let [bit0, bit1] = self.atom.blocks();
        values.extend([bit0, bit1].into_iter().filter(|b| b.1 + b.2 > 0));
        values.extend(self.repeats());
        tv(&thread, &values, self.tile_rows)
    }

    /// The row addresses' thread-value layout: thread `(8, 2, 2, warps)` (the row of a
    /// matrix, the matrix bits, the warp), values `(8, col_reps, row_reps)`: the 8
    /// consecutive elements of the row (along a column with `trans`), then the repeats.
    fn tv_rows(&self) -> Layout {
        let (along, across) = if self.atom.trans {
            ((ROW, 1, 0), (8, 0, 1))
        } else {
            ((ROW, 0, 1), (8, 1, 0))
        };
        let [bit0, bit1] = self.atom.blocks();
        let thread = [
            across,
            bit0,
            bit1,
            (i64::from(self.warps), self.atom.rows(), 0),
        ];
        let mut values = vec![along];
        values.extend(self.repeats());
        tv(&thread, &values, self.tile_rows)
    }

    pub fn thread(&self, thread: Val<u32>) -> MatrixThread {
        MatrixThread {
            tiled: *self,
            thread,
        }
    }
}

/// One thread's part of a [`TiledMatrix`] (`thread` in `0 .. 32 warps`).
#[derive(Clone, Copy, Debug)]
pub struct MatrixThread {
    tiled: TiledMatrix,
    thread: Val<u32>,
}

impl MatrixThread {
    /// This thread's elements of the tile (any memory) in the order of its registers:
    /// `(2, matrix bits.., col_reps, row_reps)`.
    #[track_caller]
    pub fn partition_fragment<E, En: Engine>(&self, t: &Tensor<E, En>) -> Tensor<E, En> {
        let tv = self.tiled.tv_fragment();
        partition_tv(t, &tv, self.thread, "ldmatrix partition_fragment")
    }

    /// The rows this thread addresses: `(8, col_reps, row_reps)`, each run of 8 one
    /// 16-byte row of shared memory.
    #[track_caller]
    pub fn partition_rows(&self, t: &Tensor<bf16, Shared>) -> Tensor<bf16, Shared> {
        let tv = self.tiled.tv_rows();
        partition_tv(t, &tv, self.thread, "ldmatrix partition_rows")
    }

    fn fragment_layout(&self) -> Layout {
        let shape = self
            .tiled
            .tv_fragment()
            .mode(1)
            .expect("value mode")
            .shape()
            .clone();
        Layout::col_major(shape)
    }

    /// The address of each instruction's row for this thread, in register order, or a
    /// trace error when the tile's rows are not 16-byte runs of shared memory.
    #[track_caller]
    fn row_addresses(&self, t: &Tensor<bf16, Shared>) -> Vec<crate::arch::memory::Smem> {
        let rows = self.partition_rows(t);
        if let Err(e) = check_rows(&rows) {
            trace_error(format!(
                "ldmatrix/stmatrix{} of the tile {t:?}: {e}",
                if self.tiled.atom.trans { ".trans" } else { "" }
            ));
            return Vec::new();
        }
        let steps = self.tiled.col_reps() * self.tiled.row_reps();
        (0..steps)
            .map(|i| rows.at(IntTuple::from(ROW * i)))
            .collect()
    }

    /// `ldmatrix` of every block of the tile: this thread's fragment, two bf16 a register,
    /// shaped like [`MatrixThread::partition_fragment`].
    #[track_caller]
    pub fn load(&self, t: &Tensor<bf16, Shared>) -> Tensor<bf16, Regs> {
        let atom = self.tiled.atom;
        let mut regs: Vec<Reg> = Vec::new();
        for row in self.row_addresses(t) {
            let words = ldmatrix(row, atom.matrices as usize, atom.trans);
            regs.extend(words.iter().map(|v| v.reg()));
        }
        Tensor::registers(regs, Ty::U32, self.fragment_layout())
    }

    /// `stmatrix` of `src` (a fragment shaped like [`MatrixThread::load`]'s) into every
    /// block of the tile.
    #[track_caller]
    pub fn store(&self, src: &Tensor<bf16, Regs>, t: &Tensor<bf16, Shared>) {
        let layout = self.fragment_layout();
        if src.layout != layout || src.regs().len() as i64 * 2 != layout.cosize() {
            trace_error(format!(
                "stmatrix stores a fragment of layout {layout} in {} registers, got {src:?}",
                layout.cosize() / 2
            ));
            return;
        }
        let n = self.tiled.atom.matrices as usize;
        for (i, row) in self.row_addresses(t).into_iter().enumerate() {
            let words: Vec<Val<u32>> = src.regs()[n * i..n * (i + 1)]
                .iter()
                .map(|&r| Val::from_reg(r))
                .collect();
            stmatrix(row, &words, self.tiled.atom.trans);
        }
    }
}

/// A row view's runs: 8 elements of stride 1 from a 16-byte aligned offset, 16-byte steps
/// between runs, in memory that keeps 16 bytes contiguous.
fn check_rows(rows: &Tensor<bf16, Shared>) -> Result<(), String> {
    let flat = rows.layout.flatten();
    let leaf = |i: usize| {
        let m = flat.mode(i).expect("mode below rank");
        (
            m.shape().static_product_if_known().unwrap_or(0),
            m.stride().leaves()[0].as_static(),
        )
    };
    if leaf(0) != (ROW, Some(1)) {
        return Err(format!(
            "a row of the instruction is 8 consecutive elements, but the tile's layout makes \
             them {:?}: lay the tile out with the other mode contiguous or use the other \
             `trans`",
            flat.mode(0).expect("mode 0")
        ));
    }
    let aligned = (1..flat.rank())
        .all(|i| leaf(i).0 == 1 || leaf(i).1.is_some_and(|s| s % ROW == 0))
        && rows.offset.constant % ROW == 0
        && (rows.offset.dynamic.is_none() || rows.dyn_align % ROW == 0)
        && rows.engine.align % 16 == 0
        && (rows.engine.swizzle.is_identity() || 1 << rows.engine.swizzle.base() >= 16);
    if aligned {
        Ok(())
    } else {
        Err(
            "its rows do not start 16-byte aligned (every row of ldmatrix/stmatrix is 16 \
             aligned bytes): tile it at multiples of 8 elements"
                .into(),
        )
    }
}

/// Whether flat index i of `layout` is offset i (its leaves compact, in order).
fn consecutive<D: crate::layout::DynInt>(layout: &Layout<D>) -> bool {
    let flat = layout.flatten();
    let mut running = 1;
    for i in 0..flat.rank() {
        let m = flat.mode(i).expect("mode below rank");
        let Some(extent) = m.shape().static_product_if_known() else {
            return false;
        };
        if extent > 1 && m.stride().leaves()[0].as_static() != Some(running) {
            return false;
        }
        running *= extent;
    }
    true
}

/// `tcgen05.ld` / `tcgen05.st` `.32x32b.x{columns}` over an f32 tile of tensor memory
/// `[128, cols]` whose rows are TMEM lanes: thread t (warp `t / 32`) owns row t, all
/// columns, moved `columns` at a time; warp w's instructions address its quadrant's first
/// row, `32 (w % 4)`.
#[derive(Clone, Copy, Debug)]
pub struct TmemCopy {
    columns: u32,
}

impl TmemCopy {
    #[track_caller]
    pub fn x(columns: u32) -> Self {
        if let Err(e) = rules::tcgen05_ld_columns(columns as usize) {
            trace_error(e);
        }
        TmemCopy { columns }
    }

    /// The widest `.xN` (up to 128) that divides `cols`.
    pub fn widest(cols: i64) -> Self {
        let columns = (0..=7)
            .rev()
            .map(|b| 1i64 << b)
            .find(|c| cols % c == 0)
            .unwrap_or(1);
        TmemCopy {
            columns: columns as u32,
        }
    }

    /// Thread `(32, 4)` (lane, warp of the quadrant) steps a row, values the `cols` columns.
    fn tv(cols: i64) -> Layout {
        tv(&[(32, 1, 0), (4, 32, 0)], &[(cols, 0, 1)], 128)
    }

    /// Thread `thread`'s row of a `[128, cols]` tile (any memory), in the order of
    /// [`TmemCopy::load`]'s registers.
    #[track_caller]
    pub fn partition<E, En: Engine>(&self, t: &Tensor<E, En>, thread: Val<u32>) -> Tensor<E, En> {
        let cols = t.static_extent(1).unwrap_or(0);
        partition_tv(t, &Self::tv(cols), thread, "tcgen05 copy partition")
    }

    /// The TMEM address of each instruction of warp `warp`: the row of its quadrant's first
    /// thread, every `columns`-th column; a trace error when the tile's rows are not one
    /// TMEM lane each or its columns not consecutive.
    #[track_caller]
    fn addresses(&self, t: &Tensor<f32, Tmem>, warp: Val<u32>) -> Vec<Val<u32>> {
        let cols = t.static_extent(1).unwrap_or(0);
        if cols % i64::from(self.columns) != 0 {
            trace_error(format!(
                "tcgen05 .32x32b.x{} copies of a tile of {cols} columns: use a width that \
                 divides it",
                self.columns
            ));
            return Vec::new();
        }
        let first = (warp & 3u32) << 5u32;
        let row = self.partition(t, first);
        let steps_ok = Self::tv(cols)
            .mode(0)
            .and_then(|threads| super::compose::compose(&t.layout, &threads))
            .map(|m| m.flatten().stride().leaves()[0].as_static() == Some(1 << 16));
        if steps_ok != Ok(true) || !consecutive(&row.layout) {
            trace_error(format!(
                "tcgen05 .32x32b copies need a tile whose rows are consecutive TMEM lanes and \
                 whose columns are consecutive TMEM columns, got {t:?}"
            ));
            return Vec::new();
        }
        (0..cols)
            .step_by(self.columns as usize)
            .map(|c| row.tmem_at(IntTuple::from(c)).value())
            .collect()
    }

    /// `tcgen05.ld` of this warp's 32 rows, then `tcgen05.wait::ld`: thread t's row, all
    /// columns, as f32 registers shaped like [`TmemCopy::partition`].
    #[track_caller]
    pub fn load(&self, t: &Tensor<f32, Tmem>, warp: Val<u32>) -> Tensor<f32, Regs> {
        let cols = t.static_extent(1).unwrap_or(0);
        let mut regs = Vec::new();
        for taddr in self.addresses(t, warp) {
            let words = tcgen05::ld_32x32b(taddr, self.columns as usize);
            regs.extend(words.iter().map(|v| v.reg()));
        }
        tcgen05::wait_ld();
        Tensor::registers(regs, Ty::U32, Layout::contiguous(cols.max(1)).expect("n:1"))
    }

    /// `tcgen05.st` of `src` (thread t's row, shaped like [`TmemCopy::load`]'s) into this
    /// warp's 32 rows, then `tcgen05.wait::st`.
    #[track_caller]
    pub fn store(&self, src: &Tensor<f32, Regs>, t: &Tensor<f32, Tmem>, warp: Val<u32>) {
        let cols = t.static_extent(1).unwrap_or(0);
        if src.regs().len() as i64 != cols {
            trace_error(format!(
                "tcgen05.st of a fragment of {} registers into rows of {cols} columns",
                src.regs().len()
            ));
            return;
        }
        let n = self.columns as usize;
        for (i, taddr) in self.addresses(t, warp).into_iter().enumerate() {
            let words: Vec<Val<u32>> = (0..n)
                .map(|j| Val::from_reg(src.words_of((n * i + j) as i64, 4)[0]))
                .collect();
            tcgen05::st_32x32b(taddr, &words);
        }
        tcgen05::wait_st();
    }
}
