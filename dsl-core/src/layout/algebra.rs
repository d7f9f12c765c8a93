//! [`Layout`]: a shape and a congruent stride, its evaluation at (partly runtime)
//! coordinates, and the CuTe algebra on static layouts: coalesce, composition, complement,
//! logical and zipped divide, tiling.

use std::fmt;
use std::str::FromStr;

use super::int::{Affine, DynInt, Int, StaticOnly};
use super::int_tuple::{IntTuple, Parser};
use super::{LayoutError, LayoutErrorKind, err};

/// A map from coordinates to offsets, `shape:stride`, e.g. `(128,512):(512,1)` (row-major
/// 128 x 512) or `((8,16),(64,8)):((64,512),(1,8192))`.
///
/// A coordinate is an [`IntTuple`] that follows the shape's nesting down to any depth: an
/// integer where the shape has a tuple is split over that tuple colexicographically (first
/// sub-mode fastest), so a single integer is a flat 1-D index into the whole layout.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Layout<D: DynInt = StaticOnly> {
    shape: IntTuple<D>,
    stride: IntTuple<D>,
}

impl<D: DynInt> Layout<D> {
    /// A layout from a shape and a stride of the same nesting; static extents must be
    /// positive.
    pub fn new(shape: IntTuple<D>, stride: IntTuple<D>) -> Result<Self, LayoutError> {
        if !shape.congruent(&stride) {
            return err(
                LayoutErrorKind::Incongruent,
                format!("layout shape {shape} and stride {stride} do not have the same nesting"),
            );
        }
        if let Some(bad) = shape
            .leaves()
            .iter()
            .find(|v| v.as_static().is_some_and(|s| s < 1))
        {
            return err(
                LayoutErrorKind::OutOfRange,
                format!("layout shape {shape} has the extent {bad}; extents must be at least 1"),
            );
        }
        Ok(Layout { shape, stride })
    }

    /// The compact column-major layout of `shape` (first mode fastest, CuTe's default).
    pub fn col_major(shape: IntTuple<D>) -> Self {
        let mut running = Int::Static(1);
        let stride = map_leaves(&shape, &mut |extent| {
            let stride = running.clone();
            running = running.clone() * extent.clone();
            stride
        });
        Layout { shape, stride }
    }

    /// The compact row-major layout of a flat shape (last mode fastest), e.g.
    /// `(128,512):(512,1)`.
    pub fn row_major(extents: &[Int<D>]) -> Self {
        let mut strides = vec![Int::Static(1); extents.len()];
        for i in (0..extents.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].clone() * extents[i + 1].clone();
        }
        Layout {
            shape: IntTuple::tuple(extents.iter().cloned().map(IntTuple::Leaf)),
            stride: IntTuple::tuple(strides.into_iter().map(IntTuple::Leaf)),
        }
    }

    pub fn shape(&self) -> &IntTuple<D> {
        &self.shape
    }

    pub fn stride(&self) -> &IntTuple<D> {
        &self.stride
    }

    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    pub fn depth(&self) -> usize {
        self.shape.depth()
    }

    /// The number of coordinates (product of the shape).
    pub fn size(&self) -> Int<D> {
        self.shape.product()
    }

    /// Top-level mode `i` as a layout of its own.
    pub fn mode(&self, i: usize) -> Result<Layout<D>, LayoutError> {
        match (self.shape.mode(i), self.stride.mode(i)) {
            (Some(shape), Some(stride)) => Ok(Layout {
                shape: shape.clone(),
                stride: stride.clone(),
            }),
            _ => err(
                LayoutErrorKind::OutOfRange,
                format!(
                    "layout {self} has rank {}, so it has no mode {i}",
                    self.rank()
                ),
            ),
        }
    }

    pub fn is_static(&self) -> bool {
        self.shape.is_static() && self.stride.is_static()
    }

    /// The same layout over [`StaticOnly`], for the algebra; fails on a runtime entry.
    pub fn to_static(&self) -> Result<Layout, LayoutError> {
        match (self.shape.to_static(), self.stride.to_static()) {
            (Ok(shape), Ok(stride)) => Ok(Layout { shape, stride }),
            (Err(e), _) | (_, Err(e)) => Err(e.context(format!("layout {self} is not static"))),
        }
    }

    /// The offset of `coord`, which may mix static integers and runtime values.
    ///
    /// Static parts fold at trace time; a runtime integer that indexes a nested mode is split
    /// with `div_const`/`rem_const` (the last sub-mode takes the quotient without a `%`), and
    /// sub-modes whose strides are all static 0 are skipped. Static coordinates are checked
    /// against their extents.
    pub fn offset<C: DynInt + From<D>>(&self, coord: &IntTuple<C>) -> Result<Int<C>, LayoutError> {
        Ok(self.offset_affine(coord, 1)?.into_int())
    }

    /// `scale * offset(coord)` as `runtime part + constant`, the form swizzles work on.
    pub(crate) fn offset_affine<C: DynInt + From<D>>(
        &self,
        coord: &IntTuple<C>,
        scale: i64,
    ) -> Result<Affine<C>, LayoutError> {
        let mut acc = Affine::zero();
        accumulate(&self.shape, &self.stride, coord, scale, &mut acc)
            .map_err(|e| e.context(format!("offset of {coord} in layout {self}")))?;
        Ok(acc)
    }

    /// The same layout over another dynamic type (a static layout as a tensor's layout).
    pub fn lift<C: DynInt + From<D>>(self) -> Layout<C> {
        Layout {
            shape: self.shape.lift(),
            stride: self.stride.lift(),
        }
    }

    /// The leaves as one flat tuple of modes, e.g. `((8,16),(64,8))` -> `(8,16,64,8)`.
    pub fn flatten(&self) -> Layout<D> {
        let shape = self.shape.leaves().into_iter().cloned().map(IntTuple::Leaf);
        let stride = self
            .stride
            .leaves()
            .into_iter()
            .cloned()
            .map(IntTuple::Leaf);
        Layout {
            shape: IntTuple::tuple(shape),
            stride: IntTuple::tuple(stride),
        }
    }
}

/// `f` applied to every leaf in depth-first order, keeping the nesting.
fn map_leaves<D: DynInt>(t: &IntTuple<D>, f: &mut impl FnMut(&Int<D>) -> Int<D>) -> IntTuple<D> {
    match t {
        IntTuple::Leaf(v) => IntTuple::Leaf(f(v)),
        IntTuple::Tuple(elements) => {
            IntTuple::Tuple(elements.iter().map(|e| map_leaves(e, f)).collect())
        }
    }
}

/// Adds `scale * layout(coord)` for the sub-layout `shape:stride` to `acc`.
fn accumulate<D: DynInt, C: DynInt + From<D>>(
    shape: &IntTuple<D>,
    stride: &IntTuple<D>,
    coord: &IntTuple<C>,
    scale: i64,
    acc: &mut Affine<C>,
) -> Result<(), LayoutError> {
    match coord {
        IntTuple::Tuple(coords) => match (shape, stride) {
            (IntTuple::Tuple(shapes), IntTuple::Tuple(strides)) if shapes.len() == coords.len() => {
                for ((s, d), c) in shapes.iter().zip(strides).zip(coords) {
                    accumulate(s, d, c, scale, acc)?;
                }
                Ok(())
            }
            _ => err(
                LayoutErrorKind::Incongruent,
                format!("the coordinate {coord} does not follow the nesting of the shape {shape}"),
            ),
        },
        IntTuple::Leaf(c) => accumulate_index(shape, stride, c.clone(), scale, acc),
    }
}

/// Adds `scale * layout(index)` where one integer indexes the whole sub-shape.
fn accumulate_index<D: DynInt, C: DynInt + From<D>>(
    shape: &IntTuple<D>,
    stride: &IntTuple<D>,
    index: Int<C>,
    scale: i64,
    acc: &mut Affine<C>,
) -> Result<(), LayoutError> {
    if let (Int::Static(i), Some(size)) = (&index, shape.static_product_if_known()) {
        if *i < 0 || *i >= size {
            return err(
                LayoutErrorKind::OutOfRange,
                format!("the index {i} is outside the mode {shape} of size {size}"),
            );
        }
    }
    match (shape, stride) {
        (IntTuple::Leaf(_), IntTuple::Leaf(d)) => {
            // Scale the stride first: a static stride folds to one constant multiplier.
            let step = d.clone().lift::<C>() * scale;
            acc.add_int(index * step);
            Ok(())
        }
        (IntTuple::Tuple(shapes), IntTuple::Tuple(strides)) => {
            // Sub-mode i gets (index / extent of modes before i) % extent of mode i; the
            // last one takes the quotient alone, like CuTe's idx2crd.
            let mut below = 1;
            for (i, (s, d)) in shapes.iter().zip(strides).enumerate() {
                let last = i + 1 == shapes.len();
                let all_zero = d.leaves().iter().all(|v| v.as_static() == Some(0));
                if !all_zero {
                    let quotient = index.clone().div_const(below);
                    let sub = if last {
                        quotient
                    } else {
                        quotient.rem_const(static_extent(s, &index)?)
                    };
                    accumulate_index(s, d, sub, scale, acc)?;
                }
                if !last {
                    below *= static_extent(s, &index)?;
                }
            }
            Ok(())
        }
        _ => unreachable!("Layout::new keeps shape and stride congruent"),
    }
}

/// The static size of `shape`, needed to split `index` across it.
fn static_extent<D: DynInt, C: DynInt>(
    shape: &IntTuple<D>,
    index: &Int<C>,
) -> Result<i64, LayoutError> {
    shape.static_product_if_known().ok_or_else(|| {
        LayoutError::new(
            LayoutErrorKind::NotStatic,
            format!(
                "splitting the index {index} across the runtime extent {shape} would need a \
                 runtime division; pass one coordinate per sub-mode instead"
            ),
        )
    })
}

/// The algebra, on static layouts.
impl Layout {
    /// A one-mode layout `n:stride`.
    pub fn strided(n: i64, stride: i64) -> Result<Layout, LayoutError> {
        Layout::new(IntTuple::from(n), IntTuple::from(stride))
    }

    /// A one-mode contiguous layout `n:1`.
    pub fn contiguous(n: i64) -> Result<Layout, LayoutError> {
        Layout::strided(n, 1)
    }

    /// A layout whose top-level modes are the given layouts.
    pub fn from_modes(modes: impl IntoIterator<Item = Layout>) -> Layout {
        let (shapes, strides): (Vec<_>, Vec<_>) =
            modes.into_iter().map(|m| (m.shape, m.stride)).unzip();
        Layout {
            shape: IntTuple::Tuple(shapes),
            stride: IntTuple::Tuple(strides),
        }
    }

    /// The number of coordinates.
    pub fn static_size(&self) -> i64 {
        self.shape.static_product()
    }

    /// One past the largest offset (for non-negative strides: the footprint).
    pub fn cosize(&self) -> i64 {
        let last: i64 = self
            .shape
            .leaves()
            .iter()
            .zip(self.stride.leaves())
            .map(|(s, d)| (s.value() - 1) * d.value())
            .sum();
        last + 1
    }

    /// `offset(coord)` with one static integer per top-level mode (each split over its
    /// mode's nesting).
    pub fn offset_at(&self, coord: &[i64]) -> Result<i64, LayoutError> {
        if coord.len() != self.rank() {
            return err(
                LayoutErrorKind::Incongruent,
                format!(
                    "layout {self} has {} modes, got the {}-coordinate {coord:?}",
                    self.rank(),
                    coord.len()
                ),
            );
        }
        let coord = match &self.shape {
            IntTuple::Leaf(_) => IntTuple::from(coord[0]),
            IntTuple::Tuple(_) => IntTuple::of(coord),
        };
        Ok(self.offset::<StaticOnly>(&coord)?.value())
    }

    /// `offset(index)` for a flat 1-D index over the whole layout.
    pub fn offset_of_index(&self, index: i64) -> Result<i64, LayoutError> {
        Ok(self.offset::<StaticOnly>(&IntTuple::from(index))?.value())
    }

    /// (extent, stride) of every leaf.
    pub(crate) fn modes(&self) -> Vec<(i64, i64)> {
        self.shape
            .leaves()
            .iter()
            .zip(self.stride.leaves())
            .map(|(s, d)| (s.value(), d.value()))
            .collect()
    }

    /// The same function with the fewest modes: size-1 modes dropped and neighbours
    /// `(s0,s1):(d0,s0*d0)` merged into `s0*s1:d0`. The result is flat (or one integer mode).
    pub fn coalesce(&self) -> Layout {
        let mut out: Vec<(i64, i64)> = Vec::new();
        for (s, d) in self.modes() {
            if s == 1 {
                continue;
            }
            match out.last_mut() {
                Some((s0, d0)) if d == *s0 * *d0 => *s0 *= s,
                _ => out.push((s, d)),
            }
        }
        layout_of_modes(&out)
    }

    /// `self ∘ other`: the layout `R` with `R(c) == self(other(c))` for every coordinate `c`
    /// of `other`, shaped like `other` (each of its integer modes may become a tuple).
    ///
    /// Follows CuTe's rule: `self` is coalesced, then each integer mode `n:r` of `other`
    /// skips `r` elements of `self` and takes `n`. That needs every extent crossed to divide
    /// or be divided by what is left of `r` and `n`; anything else is a `NotDivisible` error
    /// rather than a guess. The last mode of `self` extends without bound, as in CuTe.
    ///
    /// Composing mode by mode relies on the modes of `other` never adding up across a mode
    /// boundary of `self`. That holds when the modes of `other` with non-zero stride, sorted
    /// by stride, each start past the span of the ones before (as for a tiler and its
    /// complement); an `other` whose modes overlap or interleave is refused as `NotDivisible`.
    pub fn composition(&self, other: &Layout) -> Result<Layout, LayoutError> {
        let context = || format!("composition {self} o {other}");
        check_modes_do_not_interleave(other).map_err(|e| e.context(context()))?;
        let lhs = self.coalesce().modes();
        compose_with(&lhs, &other.shape, &other.stride).map_err(|e| e.context(context()))
    }

    /// The layout that fills the offsets `self` leaves out, up to `cotarget`: sorted by
    /// stride, the gaps between the modes, then what is needed to reach `cotarget`. Together
    /// `(self, complement)` covers `0..cotarget` (rounded up) once.
    pub fn complement(&self, cotarget: i64) -> Result<Layout, LayoutError> {
        let mut modes: Vec<(i64, i64)> = self
            .modes()
            .into_iter()
            .filter(|&(s, d)| s != 1 && d != 0)
            .collect();
        if let Some(&(_, d)) = modes.iter().find(|&&(_, d)| d < 0) {
            return err(
                LayoutErrorKind::NotDivisible,
                format!("complement of {self}: negative stride {d} is not supported"),
            );
        }
        modes.sort_by_key(|&(s, d)| (d, s));
        let mut out = Vec::new();
        let mut covered = 1;
        for (s, d) in modes {
            if d % covered != 0 {
                return err(
                    LayoutErrorKind::NotDivisible,
                    format!(
                        "complement of {self}: stride {d} is not a multiple of {covered}, the \
                         extent already covered, so the layout is not injective or leaves \
                         gaps that are not a layout"
                    ),
                );
            }
            out.push((d / covered, covered));
            covered = s * d;
        }
        out.push(((cotarget + covered - 1) / covered, covered));
        Ok(layout_of_modes(&out).coalesce())
    }

    /// `self ∘ (tiler, complement(tiler, size(self)))`: mode 0 is the first tile (shaped like
    /// `tiler`), mode 1 iterates over the tiles.
    pub fn logical_divide(&self, tiler: &Layout) -> Result<Layout, LayoutError> {
        let rest = tiler.complement(self.static_size())?;
        self.composition(&Layout::from_modes([tiler.clone(), rest]))
            .map_err(|e| e.context(format!("logical_divide {self} / {tiler}")))
    }

    /// Divides top-level mode `i` by `tilers[i]` and gathers the pieces as
    /// `((tile_0, tile_1, ..), (rest_0, rest_1, ..))`: mode 0 is one tile, mode 1 picks the
    /// tile. `tilers` needs one layout per top-level mode.
    pub fn zipped_divide(&self, tilers: &[Layout]) -> Result<Layout, LayoutError> {
        if tilers.len() != self.rank() {
            return err(
                LayoutErrorKind::Incongruent,
                format!(
                    "zipped_divide of {self} needs one tiler per mode ({}), got {}",
                    self.rank(),
                    tilers.len()
                ),
            );
        }
        let mut tiles = Vec::new();
        let mut rests = Vec::new();
        for (i, tiler) in tilers.iter().enumerate() {
            let divided = self.mode(i)?.logical_divide(tiler)?;
            tiles.push(divided.mode(0)?);
            rests.push(divided.mode(1)?);
        }
        Ok(Layout::from_modes([
            Layout::from_modes(tiles),
            Layout::from_modes(rests),
        ]))
    }

    /// Tile `tile_coord` of the tiling of `self` by contiguous blocks of `tile_shape`: the
    /// tile's layout (its own coordinates) and the offset of its first element. E.g. the
    /// k-blocks of a `[128, 512]` tile are `tile(&[128, 64], &[0, kb])` for `kb` in `0..8`.
    /// Each extent must divide the mode it tiles.
    pub fn tile(
        &self,
        tile_shape: &[i64],
        tile_coord: &[i64],
    ) -> Result<(Layout, i64), LayoutError> {
        let extents: Vec<i64> = (0..self.rank())
            .map(|i| self.mode(i).map(|m| m.static_size()))
            .collect::<Result<_, _>>()?;
        if tile_shape.len() != extents.len()
            || tile_shape
                .iter()
                .zip(&extents)
                .any(|(&t, &e)| t < 1 || e % t != 0)
        {
            return err(
                LayoutErrorKind::NotDivisible,
                format!(
                    "tile of {self}: the tile shape {tile_shape:?} must have one extent per mode, \
                     each dividing the mode's extent {extents:?}"
                ),
            );
        }
        let tilers: Vec<Layout> = tile_shape
            .iter()
            .map(|&t| Layout::contiguous(t))
            .collect::<Result<_, _>>()?;
        let divided = self.zipped_divide(&tilers)?;
        let offset = divided
            .mode(1)?
            .offset_at(tile_coord)
            .map_err(|e| e.context(format!("tile {tile_coord:?} of {self} by {tile_shape:?}")))?;
        Ok((divided.mode(0)?, offset))
    }

    /// The two modes of a rank-2 layout swapped: the `[K, MN]` view of an `[MN, K]` tile.
    pub fn transposed(&self) -> Result<Layout, LayoutError> {
        if self.rank() != 2 {
            return err(
                LayoutErrorKind::Incongruent,
                format!("transposed needs a rank-2 layout, got {self}"),
            );
        }
        Ok(Layout::from_modes([self.mode(1)?, self.mode(0)?]))
    }
}

/// Refuses a right-hand side whose non-broadcast modes, sorted by stride, overlap or
/// interleave (a stride below the span of the modes under it): only without that do the
/// modes' contributions add up without carries across the left-hand side's modes.
fn check_modes_do_not_interleave(layout: &Layout) -> Result<(), LayoutError> {
    let mut modes: Vec<(i64, i64)> = layout
        .modes()
        .into_iter()
        .filter(|&(s, d)| s > 1 && d != 0)
        .collect();
    modes.sort_by_key(|&(s, d)| (d, s));
    let mut span = 1;
    for (s, d) in modes {
        if d < span {
            return err(
                LayoutErrorKind::NotDivisible,
                format!(
                    "the right-hand layout {layout} has modes that overlap or interleave (stride \
                     {d} lies inside the span {span} of the smaller-stride modes), so composing \
                     mode by mode would not compose the functions"
                ),
            );
        }
        span = d * s;
    }
    Ok(())
}

/// A layout from flat (extent, stride) modes: one integer mode, a tuple, or `1:0` if empty.
fn layout_of_modes(modes: &[(i64, i64)]) -> Layout {
    match modes {
        [] => Layout {
            shape: IntTuple::from(1),
            stride: IntTuple::from(0),
        },
        [(s, d)] => Layout {
            shape: IntTuple::from(*s),
            stride: IntTuple::from(*d),
        },
        _ => Layout {
            shape: IntTuple::tuple(modes.iter().map(|&(s, _)| IntTuple::from(s))),
            stride: IntTuple::tuple(modes.iter().map(|&(_, d)| IntTuple::from(d))),
        },
    }
}

/// Composes the flat, coalesced layout `lhs` with `shape:stride`, mode by mode.
fn compose_with(
    lhs: &[(i64, i64)],
    shape: &IntTuple,
    stride: &IntTuple,
) -> Result<Layout, LayoutError> {
    match (shape, stride) {
        (IntTuple::Tuple(shapes), IntTuple::Tuple(strides)) => Ok(Layout::from_modes(
            shapes
                .iter()
                .zip(strides)
                .map(|(s, d)| compose_with(lhs, s, d))
                .collect::<Result<Vec<_>, _>>()?,
        )),
        _ => {
            let n = shape.leaf_value().expect("static leaf");
            let r = stride.leaf_value().expect("static leaf");
            Ok(layout_of_modes(&compose_mode(lhs, n, r)?))
        }
    }
}

/// The modes of `lhs ∘ (n:r)`: skip `r` elements of `lhs`, then take `n`.
fn compose_mode(lhs: &[(i64, i64)], n: i64, r: i64) -> Result<Vec<(i64, i64)>, LayoutError> {
    if r == 0 || n == 1 {
        return Ok(vec![(n, 0)]);
    }
    if r < 0 {
        return err(
            LayoutErrorKind::NotDivisible,
            format!("negative stride {r} in the right-hand layout is not supported"),
        );
    }
    let mut skip = r;
    let mut take = n;
    let mut out = Vec::new();
    for (i, &(s, d)) in lhs.iter().enumerate() {
        let last = i + 1 == lhs.len();
        // Skip phase: drop whole modes while `skip` covers them, then cut into the next.
        let (extent, step) = if skip == 1 {
            (s, d)
        } else if last {
            (i64::MAX, d * skip)
        } else if skip % s == 0 {
            skip /= s;
            continue;
        } else if s % skip == 0 {
            (s / skip, d * skip)
        } else {
            return err(
                LayoutErrorKind::NotDivisible,
                format!("the stride {r} cuts the extent {s} (neither divides the other)"),
            );
        };
        skip = 1;
        // Take phase: whole modes while they fit in `take`, then a part of one.
        if last {
            out.push((take, step));
            return Ok(out);
        }
        if take % extent == 0 {
            out.push((extent, step));
            take /= extent;
        } else if extent % take == 0 {
            out.push((take, step));
            take = 1;
        } else {
            return err(
                LayoutErrorKind::NotDivisible,
                format!("the extent {n} cuts the extent {extent} (neither divides the other)"),
            );
        }
        if take == 1 {
            return Ok(out);
        }
    }
    unreachable!("the last mode of a coalesced layout always completes the take")
}

impl<D: DynInt> fmt::Display for Layout<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.shape, self.stride)
    }
}

impl<D: DynInt> fmt::Debug for Layout<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Parses the printed form `shape:stride`, e.g. `((8,16),(64,8)):((64,512),(1,8192))`.
impl FromStr for Layout {
    type Err = LayoutError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut parser = Parser { text, pos: 0 };
        let shape = parser.int_tuple()?;
        if !parser.eat(':') {
            return parser.fail("`:` between shape and stride");
        }
        let stride = parser.int_tuple()?;
        parser.skip_spaces();
        if parser.pos != text.len() {
            return parser.fail("end of input");
        }
        Layout::new(shape, stride)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(text: &str) -> Layout {
        text.parse().unwrap()
    }

    #[test]
    fn prints_like_cute_and_parses_back() {
        for text in [
            "(128,512):(512,1)",
            "((8,16),(64,8)):((64,512),(1,8192))",
            "8:1",
            "(3):(2)",
        ] {
            assert_eq!(layout(text).to_string(), text);
        }
        assert_eq!(layout("(_8,_64):(_64,_1)").to_string(), "(8,64):(64,1)");
        let l = layout("((8,16),(64,8)):((64,512),(1,8192))");
        assert_eq!((l.rank(), l.depth(), l.static_size()), (2, 2, 65536));
        assert_eq!(l.cosize(), 7 * 64 + 15 * 512 + 63 + 7 * 8192 + 1);
    }

    #[test]
    fn constructors_build_compact_layouts() {
        let row: Layout = Layout::row_major(&[Int::Static(128), Int::Static(512)]);
        assert_eq!(row.to_string(), "(128,512):(512,1)");
        let col: Layout = Layout::col_major("((8,16),4)".parse().unwrap());
        assert_eq!(col.to_string(), "((8,16),4):((1,8),128)");
    }

    #[test]
    fn rejects_incongruent_or_empty_shapes() {
        let e = Layout::new("(8,16)".parse().unwrap(), "8".parse().unwrap()).unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::Incongruent);
        assert!(e.message().contains("(8,16) and stride 8"), "{e}");
        let e = "(0,4):(1,1)".parse::<Layout>().unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::OutOfRange);
    }

    #[test]
    fn offsets_of_nested_and_flat_coordinates() {
        // ((8,16),(64,8)):((64,512),(1,8192)), the bf16 K-major SW128 [128, 512] tile before
        // swizzling. Row 21 = (5, 2): 5*64 + 2*512 = 1344; column 70 = (6, 1): 6 + 8192.
        let l = layout("((8,16),(64,8)):((64,512),(1,8192))");
        assert_eq!(l.offset_at(&[21, 70]).unwrap(), 1344 + 8198);
        let nested: IntTuple = "((5,2),(6,1))".parse().unwrap();
        assert_eq!(l.offset(&nested).unwrap(), Int::Static(1344 + 8198));
        let half_nested: IntTuple = "(21,(6,1))".parse().unwrap();
        assert_eq!(l.offset(&half_nested).unwrap(), Int::Static(1344 + 8198));
        // Flat index 21 + 128 * 70 is the same element (colexicographic order).
        assert_eq!(l.offset_of_index(21 + 128 * 70).unwrap(), 1344 + 8198);

        let e = l.offset_at(&[128, 0]).unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::OutOfRange);
        assert!(
            e.message().contains("index 128 is outside the mode (8,16)"),
            "{e}"
        );
        let e = l.offset(&"(1,2,3)".parse().unwrap()).unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::Incongruent);
    }

    #[test]
    fn coalesce_hand_worked() {
        // CuTe docs: (2,(1,6)):(1,(6,2)) -> the 1 drops, 2:1 and 6:2 merge (2 == 2*1).
        assert_eq!(layout("(2,(1,6)):(1,(6,2))").coalesce().to_string(), "12:1");
        // (4,8):(8,1) cannot merge (1 != 4*8).
        assert_eq!(layout("(4,8):(8,1)").coalesce().to_string(), "(4,8):(8,1)");
        // The K-major tile: 64:1 then 8:8192 do not merge; rows (8,16):(64,512) do.
        assert_eq!(
            layout("((8,16),(64,8)):((64,512),(1,8192))")
                .coalesce()
                .to_string(),
            "(128,64,8):(64,1,8192)"
        );
        assert_eq!(layout("(1,1):(5,7)").coalesce().to_string(), "1:0");
    }

    #[test]
    fn composition_hand_worked() {
        // CuTe layout-algebra docs. (6,2):(8,2) o (4,3):(3,1):
        //  4:3 skips 3 of 6:8 -> 2:24, takes 2:24 then 2:2 -> (2,2):(24,2);
        //  3:1 takes 3 of 6:8 -> 3:8.
        let r = layout("(6,2):(8,2)")
            .composition(&layout("(4,3):(3,1)"))
            .unwrap();
        assert_eq!(r.to_string(), "((2,2),3):((24,2),8)");
        // 20:2 o (5,4):(4,1) = (5,4):(8,2) (one mode of A: strides multiply).
        let r = layout("20:2").composition(&layout("(5,4):(4,1)")).unwrap();
        assert_eq!(r.to_string(), "(5,4):(8,2)");
        // (10,2):(16,4) o (5,4):(1,5): 5:1 takes 5 of 10:16; 4:5 skips 5 of 10:16 -> 2:80,
        // takes it and 2:4 -> (5,(2,2)):(16,(80,4)).
        let r = layout("(10,2):(16,4)")
            .composition(&layout("(5,4):(1,5)"))
            .unwrap();
        assert_eq!(r.to_string(), "(5,(2,2)):(16,(80,4))");
    }

    #[test]
    fn composition_refuses_non_divisible_cases() {
        // (4,3):(1,8) does not coalesce; taking 3 elements cuts the extent 4 (neither divides
        // the other), so the result would not be a layout.
        let e = layout("(4,3):(1,8)")
            .composition(&layout("3:1"))
            .unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::NotDivisible);
        assert!(e.message().contains("composition (4,3):(1,8) o 3:1"), "{e}");
        // Stride 3 skipping into extent 4.
        let e = layout("(4,3):(1,8)")
            .composition(&layout("2:3"))
            .unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::NotDivisible);
    }

    #[test]
    fn complement_hand_worked() {
        // CuTe docs: complement(4:1, 24) = 6:4; complement(6:4, 24) = 4:1;
        // complement(4:2, 24) = (2,3):(1,8): the gap of stride 1 below 2, then 3 blocks of 8;
        // complement((2,4):(1,6), 24) = 3:2; complement((2,2):(1,6), 24) = (3,2):(2,12);
        // complement((4,6):(1,4), 24) = 1:0 (nothing left).
        for (a, cotarget, want) in [
            ("4:1", 24, "6:4"),
            ("6:4", 24, "4:1"),
            ("4:2", 24, "(2,3):(1,8)"),
            ("(2,4):(1,6)", 24, "3:2"),
            ("(2,2):(1,6)", 24, "(3,2):(2,12)"),
            ("(4,6):(1,4)", 24, "1:0"),
            ("64:1", 512, "8:64"),
        ] {
            assert_eq!(
                layout(a).complement(cotarget).unwrap().to_string(),
                want,
                "{a}"
            );
        }
        let e = layout("(2,2):(1,1)").complement(8).unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::NotDivisible);
    }

    #[test]
    fn logical_divide_hand_worked() {
        // CuTe docs: (4,2,3):(2,1,8) / 4:2. complement(4:2, 24) = (2,3):(1,8); composing:
        // 4:2 -> (2,2):(4,1), (2,3):(1,8) -> (2,3):(2,8).
        let r = layout("(4,2,3):(2,1,8)")
            .logical_divide(&layout("4:2"))
            .unwrap();
        assert_eq!(r.to_string(), "((2,2),(2,3)):((4,1),(2,8))");
        // CuTe unit test: 32:1 / 48:1 keeps one (overhanging) tile. CuTe prints the size-1
        // rest mode with stride 48; a size-1 mode's stride never matters, ours is 0.
        let r = layout("32:1").logical_divide(&layout("48:1")).unwrap();
        assert_eq!(r.to_string(), "(48,1):(1,0)");
    }

    #[test]
    fn k_blocks_of_a_k_major_tile() {
        // [128, 512] row-major split into 8 k-blocks of 64 columns:
        // zipped_divide gives ((128,64),(1,8)):((512,1),(0... )) and tile kb starts at 64 kb.
        let tile = layout("(128,512):(512,1)");
        let z = tile
            .zipped_divide(&[layout("128:1"), layout("64:1")])
            .unwrap();
        assert_eq!(z.to_string(), "((128,64),(1,8)):((512,1),(0,64))");
        for kb in 0..8 {
            let (block, offset) = tile.tile(&[128, 64], &[0, kb]).unwrap();
            assert_eq!(block.to_string(), "(128,64):(512,1)");
            assert_eq!(offset, 64 * kb);
        }
        let e = tile.tile(&[128, 48], &[0, 0]).unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::NotDivisible);
        let e = tile.tile(&[128, 64], &[0, 8]).unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::OutOfRange);
    }
}
