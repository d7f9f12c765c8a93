//! The dynamic shared memory, carved into named buffers at trace time.

use super::builder::EntryValue;
use super::val::Val;
use super::with_builder;
use crate::arch::memory::Smem;
use crate::ir::{MemOp, Op, SmemBuffer, SourceLoc, Ty};
use crate::layout::{ComposedLayout, Int, IntTuple};

/// A named buffer of the kernel's dynamic shared memory at a trace-time offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemRegion {
    pub name: String,
    /// Byte offset from the start of the dynamic shared memory.
    pub offset: u32,
    pub bytes: u32,
}

/// The shared::cta address of the start of the dynamic shared memory.
#[track_caller]
pub fn smem_base() -> Val<u32> {
    let loc = SourceLoc::caller();
    Val::from_reg(with_builder(|b| {
        b.entry_value(EntryValue::SmemBase, Ty::U32, loc, |_, dst| {
            vec![Op::Mem(MemOp::SmemBase { dst })]
        })
    }))
}

/// Reserves `bytes` bytes aligned to `align` (a power of two, at most 1024: the alignment
/// the dynamic shared memory itself is declared with).
#[track_caller]
pub fn smem_alloc(name: &str, bytes: u32, align: u32) -> SmemRegion {
    smem_alloc_with_layout(name, bytes, align, None)
}

/// Like [`smem_alloc`], recording the CuTe-printed layout the buffer holds (for the SMEM
/// map tools print).
#[track_caller]
pub fn smem_alloc_with_layout(
    name: &str,
    bytes: u32,
    align: u32,
    layout: Option<String>,
) -> SmemRegion {
    let loc = SourceLoc::caller();
    with_builder(|b| {
        if !align.is_power_of_two() || align > 1024 {
            b.error(
                format!(
                    "shared buffer `{name}`: alignment {align} must be a power of two of at most 1024"
                ),
                loc,
            );
        }
        let offset = b.smem_bytes.next_multiple_of(align.max(1));
        b.smem_bytes = offset + bytes;
        b.smem_buffers.push(SmemBuffer {
            name: name.to_string(),
            offset,
            bytes,
            align,
            layout,
        });
        SmemRegion {
            name: name.to_string(),
            offset,
            bytes,
        }
    })
}

/// The bytes of dynamic shared memory still free for a buffer aligned to `align`: what the
/// target allows a CTA, less every buffer allocated so far (a kernel that sizes its last
/// buffer by what is left).
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::trace::{smem_alloc, smem_bytes_free, threads, trace_kernel};
///
/// let kernel = trace_kernel("sized_by_what_is_left", Target::Sm90a, || {
///     threads(32, 1, 1);
///     smem_alloc("table", 1000, 16);
///     // The next 128-byte boundary after the table's 1000 bytes is 1024.
///     let left = smem_bytes_free(128);
///     assert_eq!(left, Target::Sm90a.max_smem_bytes() - 1024);
///     smem_alloc("rest", left, 128);
/// })
/// .unwrap();
/// assert_eq!(kernel.smem_bytes, Target::Sm90a.max_smem_bytes());
/// ```
pub fn smem_bytes_free(align: u32) -> u32 {
    with_builder(|b| {
        let offset = b.smem_bytes.next_multiple_of(align.max(1));
        b.target.max_smem_bytes().saturating_sub(offset)
    })
}

impl SmemRegion {
    /// The buffer's first byte.
    #[track_caller]
    pub fn addr(&self) -> Smem {
        Smem::new(smem_base(), self.offset as i64)
    }
}

/// A coordinate of a layout: a trace-time integer or a runtime `Val<u32>`.
pub trait Index: Copy {
    fn int(self) -> Int<Val<u32>>;
}

impl Index for Val<u32> {
    fn int(self) -> Int<Val<u32>> {
        Int::Dynamic(self)
    }
}

macro_rules! static_index {
    ($($t:ty),*) => {$(
        impl Index for $t {
            fn int(self) -> Int<Val<u32>> {
                Int::Static(self as i64)
            }
        }
    )*};
}
static_index!(i64, u32, usize, i32);

/// A shared-memory buffer holding a tile laid out by a [`ComposedLayout`] (swizzle included):
/// addresses of elements come from the layout, never from hand-written arithmetic.
#[derive(Clone, Debug)]
pub struct SmemTile {
    region: SmemRegion,
    layout: ComposedLayout,
}

/// Allocates a buffer for `layout` (its size, aligned to its swizzle period and at least
/// 16 bytes) and names it `name` in the shared-memory map.
#[track_caller]
pub fn smem_tile(name: &str, layout: ComposedLayout) -> SmemTile {
    let bytes = layout.end_bytes() as u32;
    let align = (layout.alignment() as u32).max(16);
    let region = smem_alloc_with_layout(name, bytes, align, Some(layout.to_string()));
    SmemTile { region, layout }
}

impl SmemTile {
    /// Another layout over the same bytes (a transposed operand view, a reuse of the buffer
    /// for other data); it must fit the buffer.
    #[track_caller]
    pub fn view(&self, layout: ComposedLayout) -> SmemTile {
        if layout.end_bytes() > self.region.bytes as i64 {
            crate::trace::trace_error(format!(
                "a view {layout} of shared buffer `{}` needs {} bytes, the buffer has {}",
                self.region.name,
                layout.end_bytes(),
                self.region.bytes
            ));
        }
        SmemTile {
            region: self.region.clone(),
            layout,
        }
    }

    pub fn layout(&self) -> &ComposedLayout {
        &self.layout
    }

    pub fn region(&self) -> &SmemRegion {
        &self.region
    }

    /// The tile's first byte.
    #[track_caller]
    pub fn base(&self) -> Smem {
        self.region.addr()
    }

    /// The constant byte distance from element `(r, c)` to element `(r + d_row, c + d_col)`
    /// ([`ComposedLayout::constant_displacement`]): a layout-derived way to step a runtime
    /// address by a trace-time amount without evaluating the layout again. A shift that the
    /// swizzle or the layout's modes do not preserve is a trace error.
    #[track_caller]
    pub fn displacement(&self, d_row: i64, d_col: i64) -> i64 {
        match self.layout.constant_displacement(&[d_row, d_col]) {
            Ok(d) => d,
            Err(e) => {
                crate::trace::trace_error(format!(
                    "shared buffer `{}`: no constant displacement for a step of ({d_row}, \
                     {d_col}): {e}",
                    self.region.name
                ));
                0
            }
        }
    }

    /// The address of element `(row, col)` of a rank-2 tile.
    #[track_caller]
    pub fn at(&self, row: impl Index, col: impl Index) -> Smem {
        self.at_coord(IntTuple::tuple([row.int().into(), col.int().into()]))
    }

    /// The address of element `i` of a rank-1 tile.
    #[track_caller]
    pub fn at1(&self, i: impl Index) -> Smem {
        self.at_coord(IntTuple::Leaf(i.int()))
    }

    #[track_caller]
    fn at_coord(&self, coord: IntTuple<Val<u32>>) -> Smem {
        match self.layout.byte_offset(&coord) {
            Ok(Int::Static(off)) => self.base() + off,
            Ok(Int::Dynamic(off)) => self.base() + off,
            Err(e) => {
                crate::trace::trace_error(format!(
                    "shared buffer `{}` ({}): {e}",
                    self.region.name, self.layout
                ));
                self.base()
            }
        }
    }
}
