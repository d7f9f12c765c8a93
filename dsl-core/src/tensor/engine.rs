//! Engines: where a tensor's elements live, and the runtime integer type its offsets use.

use crate::arch::memory::{Address, Gmem, Smem};
use crate::arch::sm100::tcgen05::TmemAddr;
use crate::ir::{Reg, Ty};
use crate::layout::{Affine, DynInt, Int, StaticOnly, Swizzle};
use crate::trace::Val;

/// The runtime integer of a tensor's offsets: `Val<i64>` for global memory (strides are
/// 64-bit kernel parameters), `Val<u32>` for shared and tensor memory, none for registers.
pub trait TensorInt: DynInt {
    /// A runtime coordinate (a thread index, a tile index) in this type; `None` where
    /// offsets must be trace-time values (register fragments).
    fn from_u32(v: Val<u32>) -> Option<Self>;
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
