//! Addresses and memory access: global (`ld.global`, `.nc`, vectors, predicated), shared
//! (`ld.shared`) and distributed shared memory (`ld.shared::cluster`), and the global atomic
//! add through which a grid's CTAs count themselves in.
//!
//! An address is a register plus a trace-time byte offset, printed as `[%rd4+528]`: offsets
//! known while tracing never cost an instruction.

use std::ops::Add;

pub use crate::ir::AtomOrder;
use crate::ir::{AccessTy, AluOp, CacheHint, MemOp, Op, Operand, Reg, SourceLoc, Space, Ty};
use crate::trace::val::{emit, emit_effect};
use crate::trace::{Carry, IntoVal, Pred, Scalar, Val, with_builder};

/// A register type that a load or store moves whole.
pub trait Word: Scalar {
    const ACCESS: AccessTy;
}
impl Word for u32 {
    const ACCESS: AccessTy = AccessTy::B32;
}
impl Word for i32 {
    const ACCESS: AccessTy = AccessTy::B32;
}
impl Word for f32 {
    const ACCESS: AccessTy = AccessTy::B32;
}
impl Word for u64 {
    const ACCESS: AccessTy = AccessTy::B64;
}
impl Word for i64 {
    const ACCESS: AccessTy = AccessTy::B64;
}

/// A byte address in some state space.
pub trait Address: Copy {
    const SPACE: Space;
    /// The register part and the trace-time offset.
    fn parts(self) -> (Operand, i64);
}

macro_rules! address_type {
    ($(#[$doc:meta])* $name:ident, $reg:ty, $space:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            base: Val<$reg>,
            offset: i64,
        }

        impl $name {
            pub fn new(base: Val<$reg>, offset: i64) -> Self {
                $name { base, offset }
            }

            /// The register part.
            pub fn base(self) -> Val<$reg> {
                self.base
            }

            /// The trace-time byte offset from the register part.
            pub fn offset(self) -> i64 {
                self.offset
            }

            /// The whole address in one register.
            #[track_caller]
            pub fn value(self) -> Val<$reg> {
                if self.offset == 0 {
                    self.base
                } else {
                    self.base + self.offset as $reg
                }
            }
        }

        impl Address for $name {
            const SPACE: Space = $space;
            fn parts(self) -> (Operand, i64) {
                (Operand::Reg(self.base.reg()), self.offset)
            }
        }

        impl Add<i64> for $name {
            type Output = $name;
            fn add(self, bytes: i64) -> $name {
                $name { base: self.base, offset: self.offset + bytes }
            }
        }

        impl Add<Val<$reg>> for $name {
            type Output = $name;
            #[track_caller]
            fn add(self, bytes: Val<$reg>) -> $name {
                $name { base: self.base + bytes, offset: self.offset }
            }
        }

        impl Carry for $name {
            fn regs(&self, out: &mut Vec<crate::ir::Reg>) {
                out.push(self.base.reg());
            }
            fn rebuild(&self, regs: &mut dyn Iterator<Item = crate::ir::Reg>) -> Self {
                $name { base: self.base.rebuild(regs), offset: self.offset }
            }
            fn static_diff(&self, other: &Self) -> Option<String> {
                (self.offset != other.offset).then(|| {
                    format!("its trace-time offset {} became {}", self.offset, other.offset)
                })
            }
        }
    };
}

address_type!(
    /// A global-memory byte address.
    Gmem, u64, Space::Global
);
address_type!(
    /// A shared::cta byte address (this CTA's shared memory).
    Smem, u32, Space::Shared
);
address_type!(
    /// A shared::cluster byte address (any CTA's shared memory in the cluster).
    Dsmem, u32, Space::SharedCluster
);

impl Add<Val<i64>> for Gmem {
    type Output = Gmem;
    #[track_caller]
    fn add(self, bytes: Val<i64>) -> Gmem {
        self + bytes.bitcast::<u64>()
    }
}

impl Add<Val<u32>> for Gmem {
    type Output = Gmem;
    #[track_caller]
    fn add(self, bytes: Val<u32>) -> Gmem {
        self + bytes.cast::<u64>()
    }
}

impl Add<Val<i32>> for Gmem {
    type Output = Gmem;
    #[track_caller]
    fn add(self, bytes: Val<i32>) -> Gmem {
        self + bytes.cast::<i64>()
    }
}

/// How a load is issued.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOpts {
    /// Use the read-only path (`ld.global.nc`); the data must not change during the kernel.
    pub nc: bool,
}

#[track_caller]
fn offset_i32(offset: i64) -> i32 {
    i32::try_from(offset).unwrap_or_else(|_| {
        panic!("trace-time address offset {offset} does not fit an instruction's 32-bit offset")
    })
}

#[track_caller]
fn check_vector(n: usize) {
    if let Err(e) = crate::ir::verify::rules::vector_width(n) {
        crate::trace::trace_error(e);
    }
}

/// Loads `N` (1, 2 or 4) consecutive `T`s. With `pred`, threads where it is false access
/// nothing and get `default` instead.
#[track_caller]
pub fn load_with<T: Word, const N: usize, A: Address>(
    addr: A,
    opts: LoadOpts,
    pred: Option<(Pred, [Operand; N])>,
) -> [Val<T>; N] {
    check_vector(N);
    let cache = if opts.nc && A::SPACE == Space::Global {
        CacheHint::NonCoherent
    } else {
        CacheHint::Default
    };
    let regs = emit_load(
        addr,
        T::ACCESS,
        T::TY,
        N,
        cache,
        pred.map(|(p, d)| (p, d.to_vec())),
    );
    std::array::from_fn(|i| Val::from_reg(regs[i]))
}

/// The `ld` of every load: `n` registers of `reg_ty`, each first set to its default where a
/// predicate may skip the access.
#[track_caller]
fn emit_load<A: Address>(
    addr: A,
    access: AccessTy,
    reg_ty: Ty,
    n: usize,
    cache: CacheHint,
    pred: Option<(Pred, Vec<Operand>)>,
) -> Vec<Reg> {
    let loc = SourceLoc::caller();
    let (base, offset) = addr.parts();
    let offset = offset_i32(offset);
    with_builder(|b| {
        let dst: Vec<_> = (0..n).map(|_| b.new_reg(reg_ty)).collect();
        if let Some((_, defaults)) = &pred {
            for (d, v) in dst.iter().zip(defaults) {
                b.push(Op::Alu(AluOp::Mov { dst: *d, src: *v }), loc);
            }
        }
        b.push(
            Op::Mem(MemOp::Ld {
                space: A::SPACE,
                ty: access,
                dst: dst.clone(),
                addr: base,
                offset,
                cache,
                pred: pred.map(|(p, _)| p.reg()),
            }),
            loc,
        );
        dst
    })
}

/// Loads one `T`.
#[track_caller]
pub fn load<T: Word, A: Address>(addr: A) -> Val<T> {
    load_with::<T, 1, A>(addr, LoadOpts::default(), None)[0]
}

/// Loads `N` consecutive `T`s (a vector access: the address must be aligned to N * size).
#[track_caller]
pub fn load_vec<T: Word, const N: usize, A: Address>(addr: A) -> [Val<T>; N] {
    load_with::<T, N, A>(addr, LoadOpts::default(), None)
}

/// Loads `N` consecutive `T`s where `pred` holds; elsewhere no access is made and the
/// result is `default`.
#[track_caller]
pub fn load_vec_if<T: Word, const N: usize, A: Address>(
    addr: A,
    pred: Pred,
    default: impl IntoVal<T> + Copy,
    opts: LoadOpts,
) -> [Val<T>; N] {
    load_with::<T, N, A>(addr, opts, Some((pred, [default.operand(); N])))
}

/// Loads one byte, zero-extended; where `pred` is false, no access and 0.
#[track_caller]
pub fn load_u8<A: Address>(addr: A, pred: Option<Pred>) -> Val<u32> {
    let pred = pred.map(|p| (p, vec![Operand::Imm(0)]));
    Val::from_reg(emit_load(addr, AccessTy::U8, Ty::U32, 1, CacheHint::Default, pred)[0])
}

/// Stores `N` (1, 2 or 4) consecutive `T`s; with `pred`, only where it holds.
#[track_caller]
pub fn store_with<T: Word, const N: usize, A: Address>(
    addr: A,
    values: [Operand; N],
    pred: Option<Pred>,
) {
    check_vector(N);
    emit_store(addr, T::ACCESS, values.to_vec(), pred);
}

/// The `st` of every store.
#[track_caller]
fn emit_store<A: Address>(addr: A, access: AccessTy, src: Vec<Operand>, pred: Option<Pred>) {
    let (base, offset) = addr.parts();
    emit_effect(Op::Mem(MemOp::St {
        space: A::SPACE,
        ty: access,
        src,
        addr: base,
        offset: offset_i32(offset),
        pred: pred.map(|p| p.reg()),
    }));
}

/// Stores one `T`.
#[track_caller]
pub fn store<T: Word, A: Address>(addr: A, value: impl IntoVal<T>) {
    store_with::<T, 1, A>(addr, [value.operand()], None)
}

/// Stores one `T` where `pred` holds.
#[track_caller]
pub fn store_if<T: Word, A: Address>(addr: A, value: impl IntoVal<T>, pred: Pred) {
    store_with::<T, 1, A>(addr, [value.operand()], Some(pred))
}

/// `atom.order.gpu.global.add.u32`: every thread adds its `value` to the u32 at its `addr`,
/// one after another, and gets the value it replaced. With [`AtomOrder::AcqRel`] the add is
/// a release and an acquire at GPU scope. The way a grid's CTAs hand partial results to the
/// last of them (`kernels::basics::split_sum`): every thread stores its part and fences
/// ([`fence_acq_rel_gpu`](crate::arch::sync::fence_acq_rel_gpu)), a CTA barrier, one
/// thread counts the CTA in, and the CTA whose count finds every other one in reads their
/// parts after a barrier and a fence of its own.
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::arch::memory::{AtomOrder, atomic_add, store};
/// use dsl_core::arch::thread::{block_idx_x, thread_idx_x};
/// use dsl_core::interp::{Arg, Launch, Memory, run};
/// use dsl_core::trace::{KernelParam, Tensor, Val, threads, trace_kernel};
///
/// // Four CTAs of 32 threads count themselves into word 0; each thread keeps what its
/// // add returned at word 1 + its index in the grid.
/// let kernel = trace_kernel("count", Target::Sm90a, || {
///     threads(32, 1, 1);
///     let x = Tensor::<u32, 1>::declare("x");
///     let before = atomic_add(x.base(), Val::<u32>::constant(1), AtomOrder::Relaxed);
///     let slot = block_idx_x() * 32u32 + thread_idx_x() + 1u32;
///     store(x.base() + slot * 4u32, before);
/// })
/// .unwrap();
/// let mut mem = Memory::new();
/// let x = mem.alloc_from("x", &[0u32; 129]);
/// run(&kernel, &mut mem, &[Arg::contiguous(x, &[129])], &Launch::grid([4, 1, 1])).unwrap();
/// let words = mem.read::<u32>(x);
/// assert_eq!(words[0], 128);
/// let mut seen = words[1..].to_vec();
/// seen.sort();
/// assert_eq!(seen, (0..128).collect::<Vec<u32>>());
/// ```
#[track_caller]
pub fn atomic_add(addr: Gmem, value: impl IntoVal<u32>, order: AtomOrder) -> Val<u32> {
    let (base, offset) = addr.parts();
    let src = value.operand();
    Val::from_reg(emit(Ty::U32, |dst| {
        Op::Mem(MemOp::AtomAdd {
            dst,
            addr: base,
            offset: offset_i32(offset),
            src,
            order,
        })
    }))
}

/// Stores `N` consecutive `T`s.
#[track_caller]
pub fn store_vec<T: Word, const N: usize, A: Address>(addr: A, values: [Val<T>; N]) {
    store_with::<T, N, A>(addr, values.map(|v| v.operand()), None)
}

/// Stores `N` consecutive `T`s where `pred` holds.
#[track_caller]
pub fn store_vec_if<T: Word, const N: usize, A: Address>(addr: A, values: [Val<T>; N], pred: Pred) {
    store_with::<T, N, A>(addr, values.map(|v| v.operand()), Some(pred))
}

/// Stores the low byte of `value`, where `pred` holds when given.
#[track_caller]
pub fn store_u8<A: Address>(addr: A, value: impl IntoVal<u32>, pred: Option<Pred>) {
    emit_store(addr, AccessTy::U8, vec![value.operand()], pred)
}

impl Smem {
    /// The same offset in the shared memory of cluster CTA `rank` (`mapa`).
    #[track_caller]
    pub fn in_cta(self, rank: impl IntoVal<u32>) -> Dsmem {
        // mapa moves a CTA's whole shared window, so the trace-time offset carries over.
        let addr = Operand::Reg(self.base.reg());
        let rank = rank.operand();
        let reg = emit(Ty::U32, |dst| {
            Op::Cluster(crate::ir::ClusterOp::Mapa { dst, addr, rank })
        });
        Dsmem::new(Val::from_reg(reg), self.offset)
    }
}
