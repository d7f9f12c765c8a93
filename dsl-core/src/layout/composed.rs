//! [`ComposedLayout`]: a swizzled shared-memory tile, `swizzle ∘ (+offset) ∘ layout`.

use std::fmt;

use super::algebra::Layout;
use super::int::{DynInt, Int};
use super::int_tuple::IntTuple;
use super::swizzle::Swizzle;
use super::{LayoutError, LayoutErrorKind, err};

/// A tile of `elem_bytes`-sized elements in shared memory: coordinate -> element offset
/// (`layout`), scaled to bytes, plus a byte `offset`, then swizzled:
/// `byte(c) = swizzle(offset + elem_bytes * layout(c))`.
///
/// Byte offsets are relative to an address that is a multiple of [`Self::alignment`] (the
/// swizzle's period, 1024 B for SW128): the swizzle acts on the address bits, so the runtime
/// base of the tile must be aligned like that and the tile's own position within it is
/// `offset`. Printed CuTe-style: `Sw<3,4,3> o smem_ptr[16b](+0) o (8,64):(64,1)`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ComposedLayout {
    swizzle: Swizzle,
    offset: i64,
    layout: Layout,
    elem_bytes: u32,
}

impl ComposedLayout {
    /// `swizzle ∘ (+offset_bytes) ∘ layout` over elements of `elem_bytes` (1, 2, 4, 8 or
    /// 16). The offset and the strides must not be negative, so every byte offset is
    /// non-negative (swizzles are defined on those).
    pub fn new(
        swizzle: Swizzle,
        offset_bytes: i64,
        layout: Layout,
        elem_bytes: u32,
    ) -> Result<ComposedLayout, LayoutError> {
        if !matches!(elem_bytes, 1 | 2 | 4 | 8 | 16) {
            return err(
                LayoutErrorKind::Unsupported,
                format!("element size {elem_bytes} B: expected 1, 2, 4, 8 or 16 bytes"),
            );
        }
        let negative_stride = layout
            .stride()
            .leaves()
            .iter()
            .any(|d| d.as_static().is_some_and(|d| d < 0));
        if offset_bytes < 0 || negative_stride {
            return err(
                LayoutErrorKind::OutOfRange,
                format!(
                    "a shared-memory tile needs a non-negative offset and strides, got offset \
                     {offset_bytes} and layout {layout}"
                ),
            );
        }
        Ok(ComposedLayout {
            swizzle,
            offset: offset_bytes,
            layout,
            elem_bytes,
        })
    }

    /// An unswizzled, compact row-major tile of `extents` elements of `elem_bytes`, from
    /// byte 0: a shared buffer of plain words, as barriers' counts and reductions' partials
    /// use.
    ///
    /// ```
    /// use dsl_core::layout::ComposedLayout;
    ///
    /// let words = ComposedLayout::row_major(&[2, 5], 4).unwrap();
    /// assert_eq!(words.to_string(), "Sw<0,4,3> o smem_ptr[32b](+0) o (2,5):(5,1)");
    /// ```
    pub fn row_major(extents: &[i64], elem_bytes: u32) -> Result<ComposedLayout, LayoutError> {
        let extents: Vec<Int> = extents.iter().map(|&e| Int::Static(e)).collect();
        ComposedLayout::new(Swizzle::NONE, 0, Layout::row_major(&extents), elem_bytes)
    }

    pub fn swizzle(&self) -> Swizzle {
        self.swizzle
    }

    /// Where the tile starts, in bytes from the aligned base, before swizzling.
    pub fn offset_bytes(&self) -> i64 {
        self.offset
    }

    /// Coordinate -> element offset.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn elem_bytes(&self) -> u32 {
        self.elem_bytes
    }

    pub fn shape(&self) -> &IntTuple {
        self.layout.shape()
    }

    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// Number of elements.
    pub fn size(&self) -> i64 {
        self.layout.static_size()
    }

    /// The alignment the runtime base address must have: the swizzle period, and at least
    /// 16 bytes (MMA descriptors address shared memory in 16-byte units).
    pub fn alignment(&self) -> i64 {
        self.swizzle.period().max(16)
    }

    /// Bytes from the aligned base to the end of the tile (the swizzle permutes within
    /// patterns, so the footprint is that of the unswizzled layout rounded up to a pattern).
    pub fn end_bytes(&self) -> i64 {
        let end = self.offset + self.layout.cosize() * i64::from(self.elem_bytes);
        let period = self.swizzle.period();
        (end + period - 1) / period * period
    }

    /// The byte offset of `coord` (static integers and runtime values mixed).
    ///
    /// Everything static folds; a runtime coordinate costs its layout arithmetic (strides
    /// pre-scaled to bytes), one `add_const` for the static part inside a swizzle pattern,
    /// then `shr_const`, `and_const`, `xor` for the swizzle and one `add_const` for whole
    /// patterns (e.g. the k-block offset).
    pub fn byte_offset<C: DynInt>(&self, coord: &IntTuple<C>) -> Result<Int<C>, LayoutError> {
        let mut linear = self
            .layout
            .offset_affine(coord, i64::from(self.elem_bytes))
            .map_err(|e| e.context(self))?;
        linear.constant += self.offset;
        Ok(self.swizzle.apply_affine(linear))
    }

    /// The byte offset of a static coordinate, one integer per top-level mode.
    pub fn byte_offset_at(&self, coord: &[i64]) -> Result<i64, LayoutError> {
        Ok(self.swizzle.apply(self.linear_byte_offset_at(coord)?))
    }

    /// `offset + elem_bytes * layout(coord)`: the byte offset before the swizzle.
    pub fn linear_byte_offset_at(&self, coord: &[i64]) -> Result<i64, LayoutError> {
        let elements = self.layout.offset_at(coord).map_err(|e| e.context(self))?;
        Ok(self.offset + i64::from(self.elem_bytes) * elements)
    }

    /// The constant byte distance from element `c` to element `c + shift` for every `c`
    /// with both in the tile, when there is one. Exact sufficient conditions, checked on the
    /// layout's structure: in each mode the shift either steps only the outermost sub-mode
    /// (it is a multiple of the inner sub-modes' size) or the mode is compact (strides grow
    /// as the inner extents multiply), and the byte distance is a multiple of the swizzle's
    /// period, which the swizzle then leaves alone.
    pub fn constant_displacement(&self, shift: &[i64]) -> Result<i64, LayoutError> {
        if shift.len() != self.rank() {
            return err(
                LayoutErrorKind::Incongruent,
                format!(
                    "a shift of rank {} for the rank-{} layout {self}",
                    shift.len(),
                    self.rank()
                ),
            );
        }
        let mut elements = 0;
        for (i, &d) in shift.iter().enumerate() {
            let (extents, strides): (Vec<i64>, Vec<i64>) =
                self.layout.mode(i)?.modes().into_iter().unzip();
            let inner: i64 = extents[..extents.len() - 1].iter().product();
            let compact = (1..extents.len()).all(|j| strides[j] == strides[j - 1] * extents[j - 1]);
            elements += if d % inner == 0 {
                d / inner * strides[extents.len() - 1]
            } else if compact {
                d * strides[0]
            } else {
                return err(
                    LayoutErrorKind::NotDivisible,
                    format!(
                        "shifting mode {i} of {self} by {d} crosses its inner sub-modes (size \
                         {inner}), so the byte distance depends on the element"
                    ),
                );
            };
        }
        let bytes = elements * i64::from(self.elem_bytes);
        if bytes % self.swizzle.period() != 0 {
            return err(
                LayoutErrorKind::Misaligned,
                format!(
                    "a shift of {bytes} bytes in {self} is not a multiple of the swizzle period \
                     ({} bytes), so the swizzle changes with the element",
                    self.swizzle.period()
                ),
            );
        }
        Ok(bytes)
    }

    /// One tile of a tiling by contiguous blocks (see [`Layout::tile`]) as a composed layout
    /// of its own: same swizzle, offset moved to the tile's first element. The swizzle keeps
    /// acting on the full offset, so the tile reads exactly the parent's bytes.
    pub fn tile(
        &self,
        tile_shape: &[i64],
        tile_coord: &[i64],
    ) -> Result<ComposedLayout, LayoutError> {
        let (layout, elements) = self.layout.tile(tile_shape, tile_coord)?;
        ComposedLayout::new(
            self.swizzle,
            self.offset + i64::from(self.elem_bytes) * elements,
            layout,
            self.elem_bytes,
        )
    }

    /// The `[K, MN]` view of an `[MN, K]` tile (modes swapped, same bytes). An MN-major
    /// operand is the transposed view of a K-major tile.
    pub fn transposed(&self) -> Result<ComposedLayout, LayoutError> {
        ComposedLayout::new(
            self.swizzle,
            self.offset,
            self.layout.transposed()?,
            self.elem_bytes,
        )
    }
}

impl fmt::Display for ComposedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} o smem_ptr[{}b](+{}) o {}",
            self.swizzle,
            8 * self.elem_bytes,
            self.offset,
            self.layout
        )
    }
}

impl fmt::Debug for ComposedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod displacement_tests {
    use crate::layout::{Swizzle, canonical};

    /// The structural answer agrees with evaluating every element of the tile.
    #[test]
    fn constant_displacement_matches_brute_force() {
        let tiles = [
            canonical::k_major(Swizzle::B128, 128, 512, 2).unwrap(),
            canonical::k_major(Swizzle::B128, 32, 512, 2).unwrap(),
            canonical::mn_major(Swizzle::B64, 32, 128, 2).unwrap(),
        ];
        for tile in &tiles {
            let (rows, cols) = (
                tile.layout().mode(0).unwrap().static_size(),
                tile.layout().mode(1).unwrap().static_size(),
            );
            for shift in [[0, 64], [0, 128], [0, 8], [8, 0], [1, 0], [16, 64], [0, 1]] {
                if shift[0] >= rows || shift[1] >= cols {
                    continue;
                }
                let brute = (|| {
                    let mut found = None;
                    for r in 0..rows - shift[0] {
                        for c in 0..cols - shift[1] {
                            let d = tile.byte_offset_at(&[r + shift[0], c + shift[1]]).unwrap()
                                - tile.byte_offset_at(&[r, c]).unwrap();
                            match found {
                                None => found = Some(d),
                                Some(f) if f != d => return None,
                                Some(_) => {}
                            }
                        }
                    }
                    found
                })();
                // The structural check is sufficient, not necessary: it may refuse a shift the
                // brute force accepts, never accept one it refuses or give another distance.
                if let Ok(d) = tile.constant_displacement(&shift) {
                    assert_eq!(Some(d), brute, "{tile} shifted by {shift:?}");
                }
            }
            assert!(
                tile.constant_displacement(&[0, 64]).is_ok(),
                "{tile}: a k-block step"
            );
        }
    }
}
