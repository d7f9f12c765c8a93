//! Accumulator fragments as layouts: which thread register or TMEM cell holds which element.
//!
//! - wgmma `m64nNk16` f32 accumulator: (thread, register) -> (row, col) of the 64 x N tile
//!   (PTX §9.7.15.5.1.1; CUTLASS `CLayout_64xN`; ptx-reference.md §10).
//! - tcgen05 accumulator in tensor memory, `cta_group::1`: (row, col) of D -> TMEM address
//!   (PTX §9.7.16.10.5; CUTLASS `mma_traits_sm100_frag.hpp`).
//! - `tcgen05.ld.32x32b.xN`: (thread, register) -> TMEM address (PTX §9.7.16.2.3.1.1).
//!
//! A TMEM address is `lane << 16 | column`, so as an offset a lane is [`TMEM_LANE`].

use super::algebra::Layout;
use super::int::{DynInt, Int, StaticOnly};
use super::int_tuple::IntTuple;
use super::{LayoutError, LayoutErrorKind, err};

/// The TMEM address step of one lane (lanes are bits 16-31 of a TMEM address).
pub const TMEM_LANE: i64 = 1 << 16;

/// A (thread, value) -> (row, col) map, kept as one layout per output coordinate so that a
/// runtime thread index yields plain strided arithmetic for each.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Fragment {
    rows: Layout,
    cols: Layout,
}

impl Fragment {
    /// (thread, value) -> row.
    pub fn rows(&self) -> &Layout {
        &self.rows
    }

    /// (thread, value) -> column.
    pub fn cols(&self) -> &Layout {
        &self.cols
    }

    pub fn threads(&self) -> i64 {
        self.rows.mode(0).map(|m| m.static_size()).unwrap_or(0)
    }

    pub fn values(&self) -> i64 {
        self.rows.mode(1).map(|m| m.static_size()).unwrap_or(0)
    }

    /// (row, col) of value `value` of a thread that may be a runtime index.
    pub fn coord<C: DynInt>(
        &self,
        thread: Int<C>,
        value: i64,
    ) -> Result<(Int<C>, Int<C>), LayoutError> {
        let coord = IntTuple::tuple([IntTuple::Leaf(thread), IntTuple::from(value)]);
        Ok((self.rows.offset(&coord)?, self.cols.offset(&coord)?))
    }

    /// (row, col) of value `value` of thread `thread`.
    pub fn coord_at(&self, thread: i64, value: i64) -> Result<(i64, i64), LayoutError> {
        let (row, col) = self.coord::<StaticOnly>(Int::Static(thread), value)?;
        Ok((row.value(), col.value()))
    }
}

fn check_wgmma_n(n: u32) -> Result<i64, LayoutError> {
    if !(8..=256).contains(&n) || n % 8 != 0 {
        return err(
            LayoutErrorKind::Unsupported,
            format!("wgmma m64nNk16 expects N to be a multiple of 8 from 8 to 256, got N = {n}"),
        );
    }
    Ok(i64::from(n))
}

/// The f32 accumulator of `wgmma.mma_async.m64nNk16` for the 128 threads of a warpgroup and
/// their N/2 registers. With `w = t / 32`, `l = t % 32`:
/// `row = 16 w + l / 4 + 8 ((i >> 1) & 1)`, `col = 8 (i >> 2) + 2 (l % 4) + (i & 1)`,
/// i.e. thread `((4,8,4))` and register `((2,2,N/8))` modes with
/// rows `:((0,1,16),(0,8,0))` and columns `:((2,0,0),(1,0,8))`.
pub fn wgmma_accumulator_f32(n: u32) -> Result<Fragment, LayoutError> {
    let groups = check_wgmma_n(n)? / 8;
    let shape = crate::int_tuple!((4, 8, 4), (2, 2, groups));
    Ok(Fragment {
        rows: Layout::new(shape.clone(), crate::int_tuple!((0, 1, 16), (0, 8, 0)))?,
        cols: Layout::new(shape, crate::int_tuple!((2, 0, 0), (1, 0, 8)))?,
    })
}

/// The same accumulator as one CuTe thread-value layout, (thread, register) ->
/// `row + 64 col` (column-major in the 64 x N tile): CUTLASS `CLayout_64xN`,
/// `((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`.
pub fn wgmma_accumulator_f32_tv(n: u32) -> Result<Layout, LayoutError> {
    let groups = check_wgmma_n(n)? / 8;
    Layout::new(
        crate::int_tuple!((4, 8, 4), (2, 2, groups)),
        crate::int_tuple!((128, 1, 16), (64, 8, 512)),
    )
}

/// Where a `cta_group::1` tcgen05 f32 accumulator D (`m x n`) lives in tensor memory:
/// (row, col) -> TMEM address offset from the allocation's column base.
/// M = 128: row m is lane m, column n is column n: `(128,N):(65536,1)`.
/// M = 64: row m is lane `32 (m / 16) + m % 16` (lanes 0-15 of each 32-lane quarter):
/// `((16,4),N):((65536,2097152),1)`.
pub fn tmem_accumulator(m: u32, n: u32) -> Result<Layout, LayoutError> {
    if !(8..=256).contains(&n) || n % 8 != 0 {
        return err(
            LayoutErrorKind::Unsupported,
            format!(
                "a tcgen05 cta_group::1 accumulator has N a multiple of 8 from 8 to 256, got N = {n}"
            ),
        );
    }
    let n = i64::from(n);
    match m {
        128 => Layout::new(crate::int_tuple!(128, n), crate::int_tuple!(TMEM_LANE, 1)),
        64 => Layout::new(
            crate::int_tuple!((16, 4), n),
            crate::int_tuple!((TMEM_LANE, { 32 * TMEM_LANE }), 1),
        ),
        _ => err(
            LayoutErrorKind::Unsupported,
            format!("a tcgen05 cta_group::1 accumulator has M = 64 or 128, got M = {m}"),
        ),
    }
}

/// What `tcgen05.ld.sync.aligned.32x32b.xN` reads: (thread, register j) -> TMEM address
/// offset from `column` base, for `threads` threads of a CTA (a multiple of 32). Thread t of
/// warp w reads lane `32 (w % 4) + t % 32` (a warp may only reach its quarter of the lanes),
/// register j holds column j: thread `(32,4,threads/128)` with strides `(65536,2097152,0)`.
pub fn tmem_load_32x32b(threads: u32, registers: u32) -> Result<Layout, LayoutError> {
    if threads == 0 || threads % 32 != 0 {
        return err(
            LayoutErrorKind::Unsupported,
            format!(
                "tcgen05.ld is warp-collective: expected a multiple of 32 threads, got {threads}"
            ),
        );
    }
    if !registers.is_power_of_two() || registers > 128 {
        return err(
            LayoutErrorKind::Unsupported,
            format!(
                "tcgen05.ld.32x32b.xN expects N = 1, 2, 4, ..., 128 registers, got {registers}"
            ),
        );
    }
    let warps = i64::from(threads / 32);
    let registers = i64::from(registers);
    let (thread_shape, thread_stride) = if warps <= 4 {
        (
            crate::int_tuple!(32, warps),
            crate::int_tuple!(TMEM_LANE, { 32 * TMEM_LANE }),
        )
    } else if warps % 4 == 0 {
        (
            crate::int_tuple!(32, 4, { warps / 4 }),
            crate::int_tuple!(TMEM_LANE, { 32 * TMEM_LANE }, 0),
        )
    } else {
        return err(
            LayoutErrorKind::Unsupported,
            format!("expected whole warpgroups beyond 4 warps, got {warps} warps"),
        );
    };
    Layout::new(
        IntTuple::tuple([thread_shape, IntTuple::from(registers)]),
        IntTuple::tuple([thread_stride, IntTuple::from(1)]),
    )
}
