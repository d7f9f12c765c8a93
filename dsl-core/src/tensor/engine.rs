//! Engines: where a tensor's elements live, and the runtime integer type its offsets use.

use crate::arch::memory::{Address, Gmem, Smem};
use crate::arch::sm100::tcgen05::TmemAddr;
use crate::ir::{Reg, Ty};
use crate::layout::{
    Affine, DynInt, Int, IntTuple, Layout, LayoutError, LayoutErrorKind, StaticOnly, Swizzle,
};
use crate::trace::Val;

/// The runtime integer of a tensor's offsets: `Val<i64>` for global memory (strides are
/// 64-bit kernel parameters), `Val<u32>` for shared and tensor memory, none for registers.
pub trait TensorInt: DynInt {
    /// A runtime coordinate (a thread index, a tile index) in this type; `None` where
    /// offsets must be trace-time values (register fragments).
    fn from_u32(v: Val<u32>) -> Option<Self>;

    /// `layout(coord)` for a coordinate of 32-bit runtime values, or `None` where lifting
    /// the coordinate into this type first and splitting it there is the whole story.
    fn offset_of_u32(
        _layout: &Layout<Self>,
        _coord: &IntTuple<Val<u32>>,
    ) -> Option<Result<SplitOffset<Self>, LayoutError>> {
        None
    }
}

/// An element offset in three parts: `wide` in the engine's integer, `narrow` a 32-bit
/// value of at most `bound`, and a constant.
pub struct SplitOffset<D> {
    pub(crate) wide: Option<D>,
    pub(crate) narrow: Option<(Val<u32>, u64)>,
    pub(crate) constant: i64,
}

impl<D: TensorInt> SplitOffset<D> {
    /// The offset as one runtime part and a constant.
    #[track_caller]
    pub(crate) fn joined(self) -> Affine<D> {
        let mut at = Affine {
            dynamic: self.wide,
            constant: self.constant,
        };
        if let Some((n, _)) = self.narrow {
            at.add_int(Int::Dynamic(
                D::from_u32(n).expect("a runtime engine integer"),
            ));
        }
        at
    }
}

impl TensorInt for Val<u32> {
    fn from_u32(v: Val<u32>) -> Option<Self> {
        Some(v)
    }
}

impl TensorInt for Val<i64> {
    #[track_caller]
    fn from_u32(v: Val<u32>) -> Option<Self> {
        Some(v.cast::<i64>())
    }

    /// A 64-bit split of a thread or tile index costs a signed 64-bit div/rem pair per
    /// nested mode and holds register pairs, where the index was a 32-bit value to begin
    /// with. So the coordinate is split in 32 bits, and the parts of every static mode whose
    /// offsets fit 32 bits are summed there too; one widening then meets the runtime
    /// strides. A leaf index into a static nested mode goes through its coalesced form:
    /// neighbours one contiguous run apart need no split at all.
    #[track_caller]
    fn offset_of_u32(
        layout: &Layout<Self>,
        coord: &IntTuple<Val<u32>>,
    ) -> Option<Result<SplitOffset<Self>, LayoutError>> {
        let mut wide = Wide::new();
        Some(match wide.walk(layout.shape(), layout.stride(), coord) {
            Ok(()) => Ok(wide.finish()),
            // The 64-bit split reports the error with the whole layout for context.
            Err(_) => layout
                .offset_affine(&lift_u32(coord), 1)
                .map(|at| SplitOffset {
                    wide: at.dynamic,
                    narrow: None,
                    constant: at.constant,
                }),
        })
    }
}

/// `coord` with every runtime leaf widened to 64 bits.
#[track_caller]
fn lift_u32(coord: &IntTuple<Val<u32>>) -> IntTuple<Val<i64>> {
    match coord {
        IntTuple::Leaf(Int::Static(v)) => IntTuple::from(*v),
        IntTuple::Leaf(Int::Dynamic(v)) => IntTuple::Leaf(Int::Dynamic(v.cast::<i64>())),
        IntTuple::Tuple(parts) => IntTuple::Tuple(parts.iter().map(lift_u32).collect()),
    }
}

/// A global offset built from 32-bit coordinates: `narrow` (summed in 32 bits, at most
/// `bound`) plus `wide` (64 bits).
struct Wide {
    narrow: Affine<Val<u32>>,
    bound: u64,
    wide: Affine<Val<i64>>,
}

impl Wide {
    fn new() -> Self {
        Wide {
            narrow: Affine::zero(),
            bound: 0,
            wide: Affine::zero(),
        }
    }

    fn add_wide(&mut self, at: Affine<Val<i64>>) {
        if let Some(d) = at.dynamic {
            self.wide.add_int(Int::Dynamic(d));
        }
        self.wide.constant += at.constant;
    }

    #[track_caller]
    fn walk(
        &mut self,
        shape: &IntTuple<Val<i64>>,
        stride: &IntTuple<Val<i64>>,
        coord: &IntTuple<Val<u32>>,
    ) -> Result<(), LayoutError> {
        let sub = || Layout::new(shape.clone(), stride.clone());
        if coord.is_static() {
            let at = sub()?.offset_affine(&lift_u32(coord), 1)?;
            self.add_wide(at);
            return Ok(());
        }
        if let Some((layout, span)) = narrow_layout(shape, stride) {
            let at = match coord {
                IntTuple::Leaf(_) => layout.coalesce().offset_affine(coord, 1)?,
                IntTuple::Tuple(_) => layout.offset_affine(coord, 1)?,
            };
            self.wide.constant += at.constant;
            if let Some(d) = at.dynamic {
                if self.bound + span <= u64::from(u32::MAX) {
                    self.bound += span;
                    self.narrow.add_int(Int::Dynamic(d));
                } else {
                    self.wide.add_int(Int::Dynamic(d.cast::<i64>()));
                }
            }
            return Ok(());
        }
        match (shape, stride, coord) {
            (IntTuple::Tuple(shapes), IntTuple::Tuple(strides), IntTuple::Tuple(coords))
                if shapes.len() == coords.len() =>
            {
                for ((s, d), c) in shapes.iter().zip(strides).zip(coords) {
                    self.walk(s, d, c)?;
                }
                Ok(())
            }
            (IntTuple::Leaf(_), IntTuple::Leaf(d), IntTuple::Leaf(Int::Dynamic(i))) => {
                self.wide.add_int(Int::Dynamic(i.cast::<i64>()) * d.clone());
                Ok(())
            }
            (IntTuple::Tuple(shapes), IntTuple::Tuple(strides), IntTuple::Leaf(index)) => {
                // Sub-mode i takes (index / extent of the modes before i) % its extent, the
                // last one the quotient alone (CuTe's idx2crd), as the layout algebra does.
                let mut below = 1;
                for (i, (s, d)) in shapes.iter().zip(strides).enumerate() {
                    let last = i + 1 == shapes.len();
                    let extent = s.static_product_if_known();
                    if !d.leaves().iter().all(|v| v.as_static() == Some(0)) {
                        let quotient = index.clone().div_const(below);
                        let part = match (last, extent) {
                            (true, _) => quotient,
                            (false, Some(e)) => quotient.rem_const(e),
                            (false, None) => return Err(not_static()),
                        };
                        self.walk(s, d, &IntTuple::Leaf(part))?;
                    }
                    if !last {
                        below *= extent.ok_or_else(not_static)?;
                    }
                }
                Ok(())
            }
            _ => Err(LayoutError::new(
                LayoutErrorKind::Incongruent,
                format!("the coordinate {coord} does not follow the nesting of the shape {shape}"),
            )),
        }
    }

    fn finish(self) -> SplitOffset<Val<i64>> {
        SplitOffset {
            wide: self.wide.dynamic,
            narrow: self.narrow.dynamic.map(|n| (n, self.bound)),
            constant: self.wide.constant + self.narrow.constant,
        }
    }
}

fn not_static() -> LayoutError {
    LayoutError::new(
        LayoutErrorKind::NotStatic,
        "a runtime index split across a runtime extent",
    )
}

/// `shape:stride` as a static layout with non-negative strides, and the largest offset it
/// reaches, when that fits 32 bits.
fn narrow_layout(shape: &IntTuple<Val<i64>>, stride: &IntTuple<Val<i64>>) -> Option<(Layout, u64)> {
    let layout = Layout::new(shape.to_static().ok()?, stride.to_static().ok()?).ok()?;
    let mut span: u64 = 0;
    for (s, d) in layout.modes() {
        let step = u64::try_from(d).ok()?;
        span = span.checked_add(u64::try_from(s - 1).ok()?.checked_mul(step)?)?;
    }
    (span <= u64::from(u32::MAX)).then_some((layout, span))
}

impl TensorInt for StaticOnly {
    fn from_u32(_: Val<u32>) -> Option<Self> {
        None
    }
}

/// Layout arithmetic on 64-bit global-memory offsets: each call is one instruction.
impl DynInt for Val<i64> {
    #[track_caller]
    fn add(self, other: Self) -> Self {
        self + other
    }
    #[track_caller]
    fn mul(self, other: Self) -> Self {
        self * other
    }
    #[track_caller]
    fn add_const(self, c: i64) -> Self {
        self + c
    }
    #[track_caller]
    fn mul_const(self, c: i64) -> Self {
        if c > 0 && (c as u64).is_power_of_two() {
            self << c.trailing_zeros()
        } else {
            self * c
        }
    }
    #[track_caller]
    fn div_const(self, c: i64) -> Self {
        self / c
    }
    #[track_caller]
    fn rem_const(self, c: i64) -> Self {
        self % c
    }
    #[track_caller]
    fn shr_const(self, bits: u32) -> Self {
        self >> bits
    }
    #[track_caller]
    fn and_const(self, mask: i64) -> Self {
        self & mask
    }
    #[track_caller]
    fn xor(self, other: Self) -> Self {
        self ^ other
    }
}

impl From<StaticOnly> for Val<i64> {
    fn from(never: StaticOnly) -> Self {
        match never {}
    }
}

/// Where a tensor's elements live.
pub trait Engine: Clone + std::fmt::Debug {
    type Int: TensorInt;
    /// The memory, for messages: "global", "shared `a`", ...
    fn describe(&self) -> String;
}

/// An engine in an addressable memory (global or shared): element offsets become
/// addresses `arch::memory` loads and stores take.
pub trait MemEngine: Engine {
    type Addr: Address;
    /// The address of `dynamic + constant` elements of `elem_bytes` bytes past the base
    /// (the runtime and trace-time parts apart, so a swizzle can fold the latter).
    fn address(&self, dynamic: Option<Self::Int>, constant: i64, elem_bytes: i64) -> Self::Addr;
    /// [`address`](Self::address) of `dynamic + narrow + constant` elements, `narrow` a
    /// 32-bit part of at most `bound` elements.
    #[track_caller]
    fn address_split(
        &self,
        dynamic: Option<Self::Int>,
        narrow: Option<(Val<u32>, u64)>,
        constant: i64,
        elem_bytes: i64,
    ) -> Self::Addr {
        let mut at = Affine { dynamic, constant };
        if let Some((n, _)) = narrow {
            at.add_int(Int::Dynamic(
                Self::Int::from_u32(n).expect("a runtime engine integer"),
            ));
        }
        self.address(at.dynamic, at.constant, elem_bytes)
    }
    /// What the base address is known to be a multiple of, in bytes, given the author's
    /// promise on runtime strides and bases (`stride_align` elements).
    fn base_align_bytes(&self, stride_align: i64, elem_bytes: i64) -> i64;
    /// The largest access in bytes that stays contiguous in this memory (a swizzle moves
    /// 16-byte chunks apart).
    fn max_contiguous_bytes(&self) -> i64;
}

fn scaled<D: DynInt>(mut a: Affine<D>, c: i64) -> Affine<D> {
    a.dynamic = a.dynamic.map(|d| if c == 1 { d } else { d.mul_const(c) });
    a.constant *= c;
    a
}

/// Global memory from a runtime base address.
#[derive(Clone, Debug)]
pub struct Global {
    pub(crate) base: Gmem,
}

impl Engine for Global {
    type Int = Val<i64>;
    fn describe(&self) -> String {
        "global memory".into()
    }
}

impl MemEngine for Global {
    type Addr = Gmem;
    #[track_caller]
    fn address(&self, dynamic: Option<Val<i64>>, constant: i64, elem_bytes: i64) -> Gmem {
        let bytes = scaled(Affine { dynamic, constant }, elem_bytes);
        let addr = match bytes.dynamic {
            Some(d) => self.base + d,
            None => self.base,
        };
        addr + bytes.constant
    }
    /// The 32-bit part is scaled to bytes in 32 bits where its bound allows and widened
    /// once, as a hand-written address adds a thread's byte offset to a row pointer.
    #[track_caller]
    fn address_split(
        &self,
        dynamic: Option<Val<i64>>,
        narrow: Option<(Val<u32>, u64)>,
        constant: i64,
        elem_bytes: i64,
    ) -> Gmem {
        let addr = self.address(dynamic, constant, elem_bytes);
        match narrow {
            None => addr,
            Some((n, bound)) if bound * (elem_bytes as u64) <= u64::from(u32::MAX) => {
                addr + n.mul_const(elem_bytes)
            }
            Some((n, _)) => addr + n.cast::<i64>().mul_const(elem_bytes),
        }
    }
    fn base_align_bytes(&self, stride_align: i64, elem_bytes: i64) -> i64 {
        stride_align * elem_bytes
    }
    fn max_contiguous_bytes(&self) -> i64 {
        16
    }
}

/// Shared memory: a buffer's aligned base, and the swizzle (on byte offsets) its tile is
/// stored with.
#[derive(Clone, Debug)]
pub struct Shared {
    /// The buffer, for MMA operands made from the tensor.
    pub(crate) tile: crate::trace::SmemTile,
    pub(crate) base: Smem,
    pub(crate) swizzle: Swizzle,
    pub(crate) align: i64,
    pub(crate) name: String,
}

impl Engine for Shared {
    type Int = Val<u32>;
    fn describe(&self) -> String {
        format!("shared buffer `{}` ({})", self.name, self.swizzle)
    }
}

impl MemEngine for Shared {
    type Addr = Smem;
    #[track_caller]
    fn address(&self, dynamic: Option<Val<u32>>, constant: i64, elem_bytes: i64) -> Smem {
        match self
            .swizzle
            .apply_affine(scaled(Affine { dynamic, constant }, elem_bytes))
        {
            Int::Static(off) => self.base + off,
            Int::Dynamic(off) => self.base + off,
        }
    }
    fn base_align_bytes(&self, _: i64, _: i64) -> i64 {
        self.align
    }
    fn max_contiguous_bytes(&self) -> i64 {
        if self.swizzle.is_identity() {
            16
        } else {
            1 << self.swizzle.base()
        }
    }
}

/// Tensor memory: offsets are TMEM address units (`lane << 16 | column`) from an
/// allocation's base.
#[derive(Clone, Debug)]
pub struct Tmem {
    pub(crate) base: TmemAddr,
}

impl Engine for Tmem {
    type Int = Val<u32>;
    fn describe(&self) -> String {
        "tensor memory".into()
    }
}

impl Tmem {
    #[track_caller]
    pub(crate) fn address(&self, offset: Affine<Val<u32>>) -> TmemAddr {
        let at = self.base.column(offset.constant as u32);
        match offset.dynamic {
            Some(d) => TmemAddr::from_base(at.value() + d),
            None => at,
        }
    }
}

/// Registers of the thread: element `i` of the fragment is in register `i / per_reg`
/// (`per_reg` elements of a 32-bit register, the first in the low bits).
#[derive(Clone, Debug)]
pub struct Regs {
    pub(crate) regs: Vec<Reg>,
    pub(crate) ty: Ty,
}

impl Engine for Regs {
    type Int = StaticOnly;
    fn describe(&self) -> String {
        "registers".into()
    }
}
