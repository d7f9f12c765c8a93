//! [`Tensor`]: an engine composed with a layout, and the algebra on it: indexing, slicing,
//! `local_tile`, `local_partition`.

use std::fmt;
use std::marker::PhantomData;

use super::compose::{compose, from_modes, gcd, modes, static_extent};
use super::engine::{Engine, Global, MemEngine, Regs, Shared, SplitOffset, TensorInt, Tmem};
use crate::arch::sm100::tcgen05::TmemAddr;
use crate::layout::{Affine, Int, IntTuple, Layout, LayoutError};
use crate::trace::{Element, Index, SmemTile, Val, trace_error};

/// A typed view of elements `E` in one memory: `engine` (where) composed with `layout`
/// (coordinate -> element offset), starting `offset` elements past the engine's base.
///
/// Slicing and partitioning move `offset` (a runtime part where a coordinate is a runtime
/// value) and replace `layout`; the engine never changes, so a swizzle keeps acting on the
/// whole offset from the aligned base.
pub struct Tensor<E, En: Engine> {
    pub(crate) engine: En,
    pub(crate) offset: Affine<En::Int>,
    pub(crate) layout: Layout<En::Int>,
    /// What the runtime part of `offset` is a multiple of, in elements (0: it has none).
    pub(crate) dyn_align: i64,
    /// The author's promise on every runtime stride (and a global base), in elements.
    pub(crate) stride_align: i64,
    pub(crate) _elem: PhantomData<fn() -> E>,
}

/// A new offset (added), layout and runtime-offset alignment for a view, or why not.
pub(crate) type Rebase<D> = Result<(Affine<D>, Layout<D>, i64), LayoutError>;

impl<E, En: Engine> Clone for Tensor<E, En> {
    fn clone(&self) -> Self {
        Tensor {
            engine: self.engine.clone(),
            offset: self.offset.clone(),
            layout: self.layout.clone(),
            dyn_align: self.dyn_align,
            stride_align: self.stride_align,
            _elem: PhantomData,
        }
    }
}

impl<E, En: Engine> fmt::Debug for Tensor<E, En> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} o (+{:?}) o {}",
            self.engine.describe(),
            self.offset.clone().into_int(),
            self.layout
        )
    }
}

/// A coordinate of a tensor: one [`Index`] for a rank-1 tensor, a tuple of them, or a
/// nested [`IntTuple`] of `Val<u32>`s and integers.
pub trait IntoCoord {
    fn coord(self) -> IntTuple<Val<u32>>;
}

impl<I: Index> IntoCoord for I {
    fn coord(self) -> IntTuple<Val<u32>> {
        IntTuple::Leaf(self.int())
    }
}

impl<A: Index, B: Index> IntoCoord for (A, B) {
    fn coord(self) -> IntTuple<Val<u32>> {
        IntTuple::tuple([self.0.int().into(), self.1.int().into()])
    }
}

impl<A: Index, B: Index, C: Index> IntoCoord for (A, B, C) {
    fn coord(self) -> IntTuple<Val<u32>> {
        IntTuple::tuple([
            self.0.int().into(),
            self.1.int().into(),
            self.2.int().into(),
        ])
    }
}

impl IntoCoord for IntTuple<Val<u32>> {
    fn coord(self) -> IntTuple<Val<u32>> {
        self
    }
}

/// Elements of an [`Affine`] offset: `a + b`.
fn add_affine<D: crate::layout::DynInt>(mut a: Affine<D>, b: Affine<D>) -> Affine<D> {
    if let Some(d) = b.dynamic {
        a.add_int(Int::Dynamic(d));
    }
    a.constant += b.constant;
    a
}

impl<E, En: Engine> Tensor<E, En> {
    pub(crate) fn from_parts(engine: En, offset: Affine<En::Int>, layout: Layout<En::Int>) -> Self {
        Tensor {
            engine,
            offset,
            layout,
            dyn_align: 0,
            stride_align: 1,
            _elem: PhantomData,
        }
    }

    pub fn layout(&self) -> &Layout<En::Int> {
        &self.layout
    }

    pub fn engine(&self) -> &En {
        &self.engine
    }

    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// The number of elements, when it is known at trace time.
    pub fn static_size(&self) -> Option<i64> {
        self.layout.shape().static_product_if_known()
    }

    /// The extent of top-level mode `i`, when it is known at trace time.
    pub fn static_extent(&self, i: usize) -> Option<i64> {
        self.layout.mode(i).ok().as_ref().and_then(static_extent)
    }

    /// The same tensor with `offset` added and `layout` in place of the old one; a layout
    /// error is a trace error at the author's call (the result is then the unchanged view).
    #[track_caller]
    pub(crate) fn rebased(&self, what: &str, result: Rebase<En::Int>) -> Self {
        match result {
            Ok((offset, layout, align)) => {
                let dyn_align = match (self.offset.dynamic.is_some(), offset.dynamic.is_some()) {
                    (_, false) => self.dyn_align,
                    (false, true) => align,
                    (true, true) => gcd(self.dyn_align, align),
                };
                Tensor {
                    engine: self.engine.clone(),
                    offset: add_affine(self.offset.clone(), offset),
                    layout,
                    dyn_align,
                    stride_align: self.stride_align,
                    _elem: PhantomData,
                }
            }
            Err(e) => {
                trace_error(format!("{what} of the tensor {self:?}: {e}"));
                self.clone()
            }
        }
    }

    /// A runtime coordinate in the engine's integer type; a runtime one where offsets must
    /// be static is an error.
    pub(crate) fn lift_coord(
        &self,
        c: &IntTuple<Val<u32>>,
    ) -> Result<IntTuple<En::Int>, LayoutError> {
        Ok(match c {
            IntTuple::Leaf(Int::Static(v)) => IntTuple::from(*v),
            IntTuple::Leaf(Int::Dynamic(v)) => match En::Int::from_u32(*v) {
                Some(d) => IntTuple::Leaf(Int::Dynamic(d)),
                None => {
                    return Err(LayoutError::new(
                        crate::layout::LayoutErrorKind::NotStatic,
                        format!(
                            "{} are indexed by trace-time coordinates, got the runtime value {v:?}",
                            self.engine.describe()
                        ),
                    ));
                }
            },
            IntTuple::Tuple(elements) => IntTuple::Tuple(
                elements
                    .iter()
                    .map(|e| self.lift_coord(e))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// The offset of `coord` in `layout` (this tensor's layout or a mode of it), in the
    /// engine's integer.
    pub(crate) fn offset_in(
        &self,
        layout: &Layout<En::Int>,
        coord: &IntTuple<Val<u32>>,
    ) -> Result<Affine<En::Int>, LayoutError> {
        match En::Int::offset_of_u32(layout, coord) {
            Some(at) => at.map(SplitOffset::joined),
            None => layout.offset_affine(&self.lift_coord(coord)?, 1),
        }
    }

    /// What a runtime coordinate in `mode` moves the offset by a multiple of: the gcd of its
    /// strides (the author's promise for a runtime one).
    pub(crate) fn mode_align(&self, mode: &Layout<En::Int>) -> i64 {
        mode.stride()
            .leaves()
            .iter()
            .fold(0, |g, s| gcd(g, s.as_static().unwrap_or(self.stride_align)))
    }

    /// The element offset of `coord` from the engine's base, and what its runtime part is a
    /// multiple of (0: none).
    pub(crate) fn element_offset(
        &self,
        coord: &IntTuple<Val<u32>>,
    ) -> Result<(Affine<En::Int>, i64), LayoutError> {
        let at = self.offset_in(&self.layout, coord)?;
        let layout_align = if at.dynamic.is_some() {
            self.mode_align(&self.layout)
        } else {
            0
        };
        let align = match (self.offset.dynamic.is_some(), at.dynamic.is_some()) {
            (false, false) => 0,
            (true, false) => self.dyn_align,
            (false, true) => layout_align,
            (true, true) => gcd(self.dyn_align, layout_align),
        };
        Ok((add_affine(self.offset.clone(), at), align))
    }

    /// Fixes top-level mode `mode` at `coord` (CuTe's `tensor(_, k)`): the result has one
    /// mode fewer. E.g. the k-th `[M, 64]` block of a `[M, 64, K/64]` tiling.
    #[track_caller]
    pub fn slice(&self, mode: usize, coord: impl Index) -> Self {
        let coord = IntTuple::Leaf(coord.int());
        let result = (|| {
            let all = modes(&self.layout);
            let m = self.layout.mode(mode)?;
            let at = self.offset_in(&m, &coord)?;
            let align = self.mode_align(&m);
            let rest = all
                .into_iter()
                .enumerate()
                .filter(|&(i, _)| i != mode)
                .map(|(_, m)| m)
                .collect();
            Ok((at, from_modes(rest), align))
        })();
        self.rebased(&format!("slice of mode {mode}"), result)
    }

    /// The same tensor with its origin moved to `coord` (CuTe's `domain_offset`): element
    /// `c` of the result is element `coord + c` of this one. A runtime part of `coord` is
    /// computed once here, so indexing the result with trace-time coordinates (a thread's
    /// k-th piece) folds into the address.
    #[track_caller]
    pub fn domain_offset(&self, coord: impl IntoCoord) -> Self {
        let coord = coord.coord();
        let result = self
            .offset_in(&self.layout, &coord)
            .map(|at| (at, self.layout.clone(), self.mode_align(&self.layout)));
        self.rebased("domain_offset", result)
    }

    /// Tile `coord` of the tiling of this tensor by blocks of `tiler` (one static extent
    /// per top-level mode), as a tensor of the tile's shape: CuTe's `local_tile(t, tiler,
    /// coord)`. Tile coordinates may be runtime values (a CTA index). A static extent the
    /// tiler does not divide is a trace error; tiles of a runtime extent are not checked
    /// against it (the grid decides how many there are).
    #[track_caller]
    pub fn local_tile(&self, tiler: &[i64], coord: impl IntoCoord) -> Self {
        let coord = coord.coord();
        let result = (|| {
            let all = modes(&self.layout);
            check_rank(tiler.len(), all.len(), "tiler")?;
            let coords = split_coord(&coord, all.len())?;
            let mut offset = Affine::zero();
            let mut align = 0;
            let mut tiles = Vec::new();
            for ((m, &t), c) in all.iter().zip(tiler).zip(coords) {
                let count = tile_count(m, t)?;
                tiles.push(compose(m, &Layout::contiguous(t)?)?);
                let rest = compose(m, &Layout::strided(count, t)?)?;
                let at = self.offset_in(&rest, &c)?;
                if at.dynamic.is_some() {
                    align = gcd(align, self.mode_align(&rest));
                }
                offset = add_affine(offset, at);
            }
            Ok((offset, from_modes(tiles), align))
        })();
        self.rebased("local_tile", result)
    }

    /// The elements thread `thread` owns when the threads of `threads` are laid over this
    /// tensor: CuTe's `local_partition(t, threads, thread)`. `threads` is a static compact
    /// layout with one mode per tensor mode, e.g. `(16,8):(8,1)` for 128 threads, 8 along
    /// mode 1 fastest; thread coordinate `c` (with `threads(c) == thread`) owns elements
    /// `c + threads.shape * r`. With `vector`, each thread owns `vector[i]` consecutive
    /// elements of mode `i` per step instead of one (the unit a vectorised copy moves);
    /// the result then has modes `(vector[i], rest_i)`.
    #[track_caller]
    pub fn local_partition(
        &self,
        threads: &Layout,
        thread: impl Index,
        vector: Option<&[i64]>,
    ) -> Self {
        let thread = thread.int();
        let result = (|| {
            let all = modes(&self.layout);
            check_rank(threads.rank(), all.len(), "thread layout")?;
            let ones = vec![1; all.len()];
            let vector = vector.unwrap_or(&ones);
            check_rank(vector.len(), all.len(), "vector")?;
            let coords = thread_coords(threads, thread)?;
            let mut offset = Affine::zero();
            let mut align = 0;
            let mut parts = Vec::new();
            for (i, m) in all.iter().enumerate() {
                let (t, v) = (threads.mode(i)?.static_size(), vector[i]);
                let count = tile_count(m, t * v)?;
                let step = compose(m, &Layout::strided(t, v)?)?;
                let at = self.offset_in(&step, &IntTuple::Leaf(coords[i].clone()))?;
                if at.dynamic.is_some() {
                    align = gcd(align, self.mode_align(&step));
                }
                offset = add_affine(offset, at);
                let own = if v == 1 {
                    Layout::strided(count, t)?
                } else {
                    Layout::new(IntTuple::of(&[v, count]), IntTuple::of(&[1, t * v]))?
                };
                parts.push(compose(m, &own)?);
            }
            Ok((offset, from_modes(parts), align))
        })();
        self.rebased("local_partition", result)
    }

    /// The same tensor seen through `layout ∘ ...`: its elements reordered by a static
    /// layout over its flat index (e.g. a thread-value layout). Used by the MMA
    /// partitioning; the result's runtime offset is unchanged.
    pub(crate) fn compose_with(&self, tv: &Layout) -> Result<Layout<En::Int>, LayoutError> {
        compose(&self.layout, tv)
    }
}

fn check_rank(got: usize, want: usize, what: &str) -> Result<(), LayoutError> {
    if got != want {
        return Err(LayoutError::new(
            crate::layout::LayoutErrorKind::Incongruent,
            format!("a {what} of rank {got} for a tensor of rank {want}"),
        ));
    }
    Ok(())
}

/// How many blocks of `t` mode `m` holds (or an unbounded count for a runtime extent).
fn tile_count<D: crate::layout::DynInt>(m: &Layout<D>, t: i64) -> Result<i64, LayoutError> {
    match static_extent(m) {
        Some(e) if t >= 1 && e % t == 0 => Ok(e / t),
        Some(e) => Err(LayoutError::new(
            crate::layout::LayoutErrorKind::NotDivisible,
            format!("a block of {t} does not divide the mode {m} of extent {e}"),
        )),
        None => Ok(1 << 30),
    }
}

/// The top-level parts of a coordinate for `rank` modes.
fn split_coord(
    c: &IntTuple<Val<u32>>,
    rank: usize,
) -> Result<Vec<IntTuple<Val<u32>>>, LayoutError> {
    match c {
        IntTuple::Tuple(parts) if parts.len() == rank => Ok(parts.clone()),
        IntTuple::Leaf(_) if rank == 1 => Ok(vec![c.clone()]),
        _ => Err(LayoutError::new(
            crate::layout::LayoutErrorKind::Incongruent,
            format!("the coordinate {c} for a tensor of rank {rank}"),
        )),
    }
}

/// The coordinate `c` with `threads(c) == thread` for a compact static layout with one
/// leaf per mode (CuTe's `get_flat_coord`): mode i is `(thread / stride_i) % extent_i`,
/// with no `%` for the outermost (largest-stride) mode.
fn thread_coords(
    threads: &Layout,
    thread: Int<Val<u32>>,
) -> Result<Vec<Int<Val<u32>>>, LayoutError> {
    let flat = threads.flatten();
    if flat.rank() != threads.rank() {
        return Err(LayoutError::new(
            crate::layout::LayoutErrorKind::Unsupported,
            format!("a thread layout has one integer mode per tensor mode, got {threads}"),
        ));
    }
    let leaves: Vec<(i64, i64)> = (0..flat.rank())
        .map(|i| {
            let m = flat.mode(i).expect("mode below rank");
            (
                m.static_size(),
                m.offset_of_index(1.min(m.static_size() - 1)).unwrap_or(0),
            )
        })
        .collect();
    let mut order: Vec<usize> = (0..leaves.len()).filter(|&i| leaves[i].0 > 1).collect();
    order.sort_by_key(|&i| leaves[i].1);
    let mut expect = 1;
    for &i in &order {
        if leaves[i].1 != expect {
            return Err(LayoutError::new(
                crate::layout::LayoutErrorKind::NotDivisible,
                format!(
                    "the thread layout {threads} is not compact (a permutation of 0..{})",
                    threads.static_size()
                ),
            ));
        }
        expect *= leaves[i].0;
    }
    let outer = order.last().copied();
    Ok((0..leaves.len())
        .map(|i| {
            let (extent, stride) = leaves[i];
            if extent == 1 {
                Int::Static(0)
            } else if Some(i) == outer {
                thread.clone().div_const(stride)
            } else {
                thread.clone().div_const(stride).rem_const(extent)
            }
        })
        .collect())
}

impl<E, En: MemEngine> Tensor<E, En> {
    /// The address of the element at `coord`.
    #[track_caller]
    pub fn at(&self, coord: impl IntoCoord) -> En::Addr
    where
        E: Element,
    {
        let coord = coord.coord();
        let eb = E::ELEM.bytes() as i64;
        let split = match En::Int::offset_of_u32(&self.layout, &coord) {
            Some(split) => split,
            None => self.offset_in(&self.layout, &coord).map(|at| SplitOffset {
                wide: at.dynamic,
                narrow: None,
                constant: at.constant,
            }),
        };
        match split {
            Ok(at) => {
                // The view's own runtime offset (a domain_offset's) comes first, so every
                // element of one view shares that part of the address.
                let mut wide = Affine {
                    dynamic: self.offset.dynamic.clone(),
                    constant: 0,
                };
                if let Some(d) = at.wide {
                    wide.add_int(Int::Dynamic(d));
                }
                let constant = self.offset.constant + at.constant;
                self.engine
                    .address_split(wide.dynamic, at.narrow, constant, eb)
            }
            Err(e) => {
                trace_error(format!("element {coord} of the tensor {self:?}: {e}"));
                let o = self.offset.clone();
                self.engine.address(o.dynamic, o.constant, eb)
            }
        }
    }
}

impl<E: Element, const R: usize> crate::trace::Tensor<E, R> {
    /// This kernel parameter as a global [`Tensor`] over its runtime extents and strides
    /// (`static_strides[i]`, where given, replaces the runtime stride of mode i by a value
    /// the author knows, e.g. `Some(1)` for a contiguous mode: it folds, and lets accesses
    /// along it be vectorised). The host must pass a tensor with those strides.
    #[track_caller]
    pub fn view(&self, static_strides: [Option<i64>; R]) -> Tensor<E, Global> {
        let extents = (0..R).map(|i| IntTuple::Leaf(Int::Dynamic(self.extent(i))));
        let strides = (0..R).map(|i| match static_strides[i] {
            Some(s) => IntTuple::from(s),
            None => IntTuple::Leaf(Int::Dynamic(self.stride(i))),
        });
        let layout = Layout::new(IntTuple::tuple(extents), IntTuple::tuple(strides))
            .expect("extents and strides of one rank");
        Tensor::from_parts(Global { base: self.base() }, Affine::zero(), layout)
    }

    /// This kernel parameter as a global [`Tensor`] through `layout` (coordinate -> element
    /// offset from the parameter's base), for memory that is not one stride per dim, e.g.
    /// an interleaved one (`((16, C), H):((1, 16 H), 16)`). Its runtime extents and strides
    /// are built from the parameter's ([`extent`](Self::extent), [`stride`](Self::stride));
    /// the host must pass memory that `layout` describes.
    pub fn view_as(&self, layout: Layout<Val<i64>>) -> Tensor<E, Global> {
        self.view_as_elements(layout)
    }

    /// [`view_as`](Self::view_as) with the memory seen as elements of `F` (`layout` in `F`
    /// elements), e.g. the bytes of an i32 tensor whose words hold four byte fields.
    pub fn view_as_elements<F: Element>(&self, layout: Layout<Val<i64>>) -> Tensor<F, Global> {
        Tensor::from_parts(Global { base: self.base() }, Affine::zero(), layout)
    }
}

impl<E> Tensor<E, Global> {
    /// Promises that the base address and every runtime stride are multiples of `elements`
    /// elements (the host checks it), so that accesses along a contiguous mode may move up
    /// to that many elements at once.
    pub fn assume_aligned(mut self, elements: i64) -> Self {
        self.stride_align = elements.max(1);
        self
    }
}

impl SmemTile {
    /// The tile as a shared-memory [`Tensor`] of `E`: its layout and swizzle, from the
    /// buffer's aligned base. `E` must have the tile's element size.
    #[track_caller]
    pub fn tensor<E: Element>(&self) -> Tensor<E, Shared> {
        let l = self.layout();
        let eb = E::ELEM.bytes() as i64;
        if i64::from(l.elem_bytes()) != eb || l.offset_bytes() % eb != 0 {
            trace_error(format!(
                "shared buffer `{}` holds {}-byte elements, viewed as {}-byte {}",
                self.region().name,
                l.elem_bytes(),
                eb,
                E::ELEM.name()
            ));
        }
        let engine = Shared {
            tile: self.clone(),
            base: self.base(),
            swizzle: l.swizzle(),
            align: l.alignment(),
            name: self.region().name.clone(),
        };
        let offset = Affine {
            dynamic: None,
            constant: l.offset_bytes() / eb,
        };
        Tensor::from_parts(engine, offset, l.layout().clone().lift())
    }
}

impl Tensor<f32, Tmem> {
    /// f32 cells of tensor memory at `base` laid out by `layout` (coordinate -> TMEM address
    /// offset `lane << 16 | column`, e.g. `layout::fragment::tmem_accumulator`).
    pub fn tmem(base: TmemAddr, layout: Layout) -> Self {
        Tensor::from_parts(Tmem { base }, Affine::zero(), layout.lift())
    }

    /// The TMEM address of the cell at `coord`.
    #[track_caller]
    pub fn tmem_at(&self, coord: impl IntoCoord) -> TmemAddr {
        let coord = coord.coord();
        match self.element_offset(&coord) {
            Ok((offset, _)) => self.engine.address(offset),
            Err(e) => {
                trace_error(format!("cell {coord} of the tensor {self:?}: {e}"));
                self.engine.base
            }
        }
    }
}

impl<E> Tensor<E, Regs> {
    /// Registers holding a fragment of `layout`'s shape, element `i` (flat, colexicographic)
    /// at `regs[layout(i) / per_reg]`, counted against the current role's register budget.
    #[track_caller]
    pub(crate) fn registers(regs: Vec<crate::ir::Reg>, ty: crate::ir::Ty, layout: Layout) -> Self {
        let loc = crate::ir::SourceLoc::caller();
        crate::pipeline::roles::count_fragment(regs.len(), "register fragment", loc);
        Tensor::from_parts(Regs { regs, ty }, Affine::zero(), layout)
    }

    /// The registers, in fragment order.
    pub fn regs(&self) -> &[crate::ir::Reg] {
        &self.engine.regs
    }

    /// The registers as 32-bit words (two bf16 a word, the first in the low half), in
    /// fragment order: what a raw store or a shuffle moves.
    #[track_caller]
    pub fn words(&self) -> Vec<Val<u32>> {
        self.engine
            .regs
            .iter()
            .map(|&r| {
                if self.engine.ty == crate::ir::Ty::F32 {
                    Val::<f32>::from_reg(r).bitcast()
                } else {
                    Val::from_reg(r)
                }
            })
            .collect()
    }
}

impl Tensor<f32, Regs> {
    /// A fragment of `layout`'s shape holding `values`, element `i` (flat) in
    /// `values[layout(i)]`: what an elementwise update of a fragment (`acc.get(i) + x`)
    /// builds its result from.
    #[track_caller]
    pub fn from_values(values: &[Val<f32>], layout: Layout) -> Self {
        if layout.cosize() != values.len() as i64 {
            trace_error(format!(
                "a fragment of layout {layout} needs {} values, got {}",
                layout.cosize(),
                values.len()
            ));
        }
        let regs = values.iter().map(|v| v.reg()).collect();
        Tensor::registers(regs, crate::ir::Ty::F32, layout)
    }
}

/// A register fragment flows out of a runtime `if` and around a runtime loop as its
/// registers; its shape, layout and register class are trace-time facts that must not
/// change (an accumulator keeps its fragment layout from one iteration to the next).
impl<E> crate::trace::Carry for Tensor<E, Regs> {
    fn regs(&self, out: &mut Vec<crate::ir::Reg>) {
        out.extend_from_slice(&self.engine.regs);
    }

    fn rebuild(&self, regs: &mut dyn Iterator<Item = crate::ir::Reg>) -> Self {
        let mut t = self.clone();
        for r in &mut t.engine.regs {
            *r = regs.next().expect("one register per fragment register");
        }
        t
    }

    fn static_diff(&self, other: &Self) -> Option<String> {
        let (a, b) = (&self.engine, &other.engine);
        if a.regs.len() != b.regs.len() {
            Some(format!(
                "its {} registers became {}",
                a.regs.len(),
                b.regs.len()
            ))
        } else if a.ty != b.ty {
            Some(format!(
                "its {} registers became {} registers",
                a.ty.ptx(),
                b.ty.ptx()
            ))
        } else if self.layout != other.layout || self.offset.constant != other.offset.constant {
            Some(format!(
                "its layout {} became {}",
                self.layout, other.layout
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::Target;
    use crate::layout::{Layout, Swizzle, canonical};
    use crate::trace::{smem_tile, threads, trace_kernel};
    use half::bf16;

    /// Runs `body` inside a trace (tensor operations record instructions).
    fn traced(body: impl FnOnce()) {
        trace_kernel("tensor_algebra", Target::Sm90a, || {
            threads(128, 1, 1);
            body()
        })
        .unwrap();
    }

    /// Every byte offset a swizzled tile's tensor gives, by flat index, with static
    /// coordinates (so everything folds to the trace-time part of the address).
    fn offsets(t: &super::Tensor<bf16, super::Shared>) -> Vec<i64> {
        let size = t.static_size().unwrap();
        (0..size)
            .map(|i| t.at(crate::layout::IntTuple::from(i)).offset() - t.engine.base.offset())
            .collect()
    }

    #[test]
    fn swizzled_offsets_agree_with_the_composed_layout() {
        traced(|| {
            let layout = canonical::k_major(Swizzle::B128, 64, 128, 2).unwrap();
            let t = smem_tile("t", layout.clone()).tensor::<bf16>();
            for r in [0, 5, 17, 63] {
                for c in [0, 9, 64, 127] {
                    let got = t.at((r, c)).offset() - t.engine.base.offset();
                    assert_eq!(got, layout.byte_offset_at(&[r, c]).unwrap(), "({r}, {c})");
                    // Slicing a mode and indexing the rest is indexing.
                    let row = t.slice(0, r);
                    assert_eq!(row.at(c).offset(), t.at((r, c)).offset());
                }
            }
        });
    }

    /// Tiles, then thread partitions of each tile (with and without vectors), cover every
    /// element of the tensor exactly once.
    #[test]
    fn tiles_and_partitions_cover_every_element_once() {
        traced(|| {
            let layout = canonical::k_major(Swizzle::B128, 64, 128, 2).unwrap();
            let t = smem_tile("t", layout).tensor::<bf16>();
            let all: Vec<i64> = offsets(&t);
            for (threads, vector) in [
                ("(8,16):(16,1)", [1, 1]),
                ("(32,4):(1,32)", [1, 8]),
                ("(16,8):(8,1)", [2, 4]),
            ] {
                let threads: Layout = threads.parse().unwrap();
                let mut seen: HashMap<i64, u32> = HashMap::new();
                for tm in 0..2i64 {
                    for tk in 0..2i64 {
                        let tile = t.local_tile(&[32, 64], (tm, tk));
                        for thread in 0..128i64 {
                            let part = tile.local_partition(&threads, thread, Some(&vector));
                            for o in offsets(&part) {
                                *seen.entry(o).or_default() += 1;
                            }
                        }
                    }
                }
                assert_eq!(seen.len(), all.len(), "{threads}");
                assert!(seen.values().all(|&n| n == 1), "{threads}");
                assert!(all.iter().all(|o| seen.contains_key(o)), "{threads}");
            }
        });
    }

    /// A parameter seen through an interleaved layout addresses what the layout says, and
    /// a slice of it addresses the same bytes.
    #[test]
    fn a_parameter_through_a_layout_addresses_its_offsets() {
        traced(|| {
            let p = <crate::trace::Tensor<bf16, 2> as crate::trace::KernelParam>::declare("p");
            let layout: Layout = "(4,(16,8)):(16,(1,64))".parse().unwrap();
            let t = p.view_as(layout.clone().lift());
            let base = t.at((0, 0)).offset();
            for (h, d) in [(0, 0), (3, 15), (1, 16), (2, 127)] {
                let want = 2 * layout.offset_at(&[h, d]).unwrap();
                assert_eq!(t.at((h, d)).offset() - base, want, "({h}, {d})");
                assert_eq!(t.slice(0, h).at(d).offset() - base, want, "({h}, {d})");
            }
        });
    }

    /// Moving the origin and indexing from it is indexing the sum.
    #[test]
    fn a_domain_offset_indexes_from_its_new_origin() {
        traced(|| {
            let layout = canonical::k_major(Swizzle::B128, 64, 128, 2).unwrap();
            let t = smem_tile("t", layout).tensor::<bf16>();
            for (origin, at) in [((0, 0), (5, 9)), ((8, 64), (3, 17)), ((16, 8), (0, 0))] {
                let moved = t.domain_offset(origin);
                let sum = (origin.0 + at.0, origin.1 + at.1);
                assert_eq!(
                    moved.at(at).offset(),
                    t.at(sum).offset(),
                    "{origin:?} + {at:?}"
                );
            }
        });
    }

    /// A thread index into nested modes of a global tensor is split in 32 bits (shifts and
    /// masks), never with 64-bit div/rem.
    #[test]
    fn a_runtime_index_into_global_nested_modes_splits_in_32_bits() {
        use crate::layout::{Int, IntTuple};
        let kernel = trace_kernel("split", Target::Sm90a, || {
            threads(128, 1, 1);
            let p = <crate::trace::Tensor<u32, 2> as crate::trace::KernelParam>::declare("p");
            let layout = Layout::new(
                IntTuple::tuple([
                    IntTuple::tuple([4i64.into(), 8i64.into(), Int::Dynamic(p.extent(0)).into()]),
                    IntTuple::tuple([4i64.into(), 8i64.into()]),
                ]),
                IntTuple::tuple([
                    IntTuple::tuple([1i64.into(), 4i64.into(), Int::Dynamic(p.stride(0)).into()]),
                    IntTuple::tuple([32i64.into(), 128i64.into()]),
                ]),
            )
            .unwrap();
            let t = p.view_as(layout);
            let tid = crate::arch::thread::thread_idx_x();
            let v: crate::trace::Val<u32> = crate::arch::memory::load(t.at((tid, tid % 32)));
            crate::arch::memory::store(t.at((tid, 0)), v);
        })
        .unwrap();
        let ptx = crate::emit::ptx::emit(&kernel).unwrap().text;
        for op in ["div.s64", "rem.s64", "div.u64", "rem.u64"] {
            assert!(!ptx.contains(op), "{op} in\n{ptx}");
        }
    }

    #[test]
    fn a_tiler_that_does_not_divide_is_a_trace_error() {
        let e = trace_kernel("bad_tile", Target::Sm90a, || {
            threads(128, 1, 1);
            let t = smem_tile("t", canonical::k_major(Swizzle::B128, 64, 128, 2).unwrap())
                .tensor::<bf16>();
            let _ = t.local_tile(&[48, 64], (0, 0));
        })
        .unwrap_err();
        assert!(
            e.diagnostics[0]
                .message
                .contains("a block of 48 does not divide"),
            "{e}"
        );
    }
}
