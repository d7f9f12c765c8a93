//! Runtime values: typed handles to virtual registers.
//!
//! A [`Val<T>`] is immutable: every operation makes a new register, and reassigning a Rust
//! variable rebinds it. Merges out of runtime branches and loops are the control-flow
//! builders' business ([`super::control`]), so `let y = x;` never aliases a later `x`.

use std::marker::PhantomData;
use std::ops;

use super::with_builder;
use crate::ir::{AluOp, BinaryOp, CmpOp, Op, Operand, Reg, Rounding, SourceLoc, Ty, UnaryOp};

/// A Rust type that names a register type.
pub trait Scalar: Copy + 'static {
    const TY: Ty;
}

/// A scalar type that can appear as an immediate.
pub trait Literal: Scalar {
    /// The immediate's bits, as the op's type reads them.
    fn bits(self) -> u64;
}

macro_rules! scalar {
    ($t:ty, $ty:expr, |$v:ident| $bits:expr) => {
        impl Scalar for $t {
            const TY: Ty = $ty;
        }
        impl Literal for $t {
            fn bits(self) -> u64 {
                let $v = self;
                $bits
            }
        }
    };
}

scalar!(u32, Ty::U32, |v| v as u64);
scalar!(i32, Ty::S32, |v| v as u32 as u64);
scalar!(u64, Ty::U64, |v| v);
scalar!(i64, Ty::S64, |v| v as u64);
scalar!(f32, Ty::F32, |v| v.to_bits() as u64);
scalar!(bool, Ty::Pred, |v| v as u64);

/// Two bf16 values in one 32-bit word (element 0 in the low half).
#[derive(Clone, Copy, Debug)]
pub struct Bf16x2;
/// Two f16 values in one 32-bit word (element 0 in the low half).
#[derive(Clone, Copy, Debug)]
pub struct F16x2;
/// Four e4m3 values in one 32-bit word (element 0 in the low byte).
#[derive(Clone, Copy, Debug)]
pub struct E4m3x4;
/// 16 raw bits (a pair of e4m3 or ue8m0 bytes, one f16 or bf16).
#[derive(Clone, Copy, Debug)]
pub struct B16;

impl Scalar for Bf16x2 {
    const TY: Ty = Ty::B32;
}
impl Scalar for F16x2 {
    const TY: Ty = Ty::B32;
}
impl Scalar for E4m3x4 {
    const TY: Ty = Ty::B32;
}
impl Scalar for B16 {
    const TY: Ty = Ty::B16;
}

/// A runtime value of type `T`: a register of the kernel being traced.
pub struct Val<T: Scalar> {
    reg: Reg,
    _ty: PhantomData<T>,
}

/// A runtime predicate.
pub type Pred = Val<bool>;

impl<T: Scalar> Clone for Val<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Scalar> Copy for Val<T> {}

impl<T: Scalar> std::fmt::Debug for Val<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Val<{:?}>(%{})", T::TY, self.reg.0)
    }
}

/// Something usable as an operand of type `T`: a [`Val<T>`] or a literal `T`.
pub trait IntoVal<T: Scalar> {
    fn operand(self) -> Operand;

    /// The value in a register (a literal is moved into a new one).
    #[track_caller]
    fn into_val(self) -> Val<T>
    where
        Self: Sized,
    {
        match self.operand() {
            Operand::Reg(r) => Val::from_reg(r),
            imm @ Operand::Imm(_) => {
                Val::from_reg(emit(T::TY, |dst| Op::Alu(AluOp::Mov { dst, src: imm })))
            }
        }
    }
}

impl<T: Scalar> IntoVal<T> for Val<T> {
    fn operand(self) -> Operand {
        Operand::Reg(self.reg)
    }
}

impl<T: Literal> IntoVal<T> for T {
    fn operand(self) -> Operand {
        Operand::Imm(self.bits())
    }
}

/// Records one op whose single destination is a new register of type `ty`.
#[track_caller]
pub(crate) fn emit(ty: Ty, make: impl FnOnce(Reg) -> Op) -> Reg {
    emit_at(ty, SourceLoc::caller(), make)
}

/// [`emit`] at a location found earlier (a closure cannot be `#[track_caller]`).
pub(crate) fn emit_at(ty: Ty, loc: SourceLoc, make: impl FnOnce(Reg) -> Op) -> Reg {
    with_builder(|b| {
        let dst = b.new_reg(ty);
        b.push(make(dst), loc);
        dst
    })
}

/// Records a `cvt` from `src_ty` to a new register of `dst_ty`.
#[track_caller]
pub(crate) fn convert(dst_ty: Ty, src_ty: Ty, rounding: Rounding, src: Operand) -> Reg {
    emit(dst_ty, |dst| {
        Op::Alu(AluOp::Convert {
            dst_ty,
            src_ty,
            rounding,
            dst,
            src,
        })
    })
}

/// Records an op with no destination.
#[track_caller]
pub(crate) fn emit_effect(op: Op) {
    let loc = SourceLoc::caller();
    with_builder(|b| b.push(op, loc));
}

/// A binary op with a new destination register; an integer op with an identity immediate
/// (`x + 0`, `x * 1`, `x << 0`, ..) folds to `x` at trace time, and an unsigned division or
/// remainder by a power of two becomes a shift or a mask ([`strength_reduced`]).
#[track_caller]
pub(crate) fn binary(mut op: BinaryOp, ty: Ty, a: Operand, mut b: Operand) -> Reg {
    if let (Operand::Reg(x), Operand::Imm(imm)) = (a, b) {
        let identity = match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Or | BinaryOp::Xor => Some(0),
            BinaryOp::Shl | BinaryOp::Shr => Some(0),
            BinaryOp::Mul | BinaryOp::Div => Some(1),
            _ => None,
        };
        if !ty.is_float() && ty != Ty::Pred && identity == Some(imm) {
            return x;
        }
        if let Some((reduced, imm)) = strength_reduced(op, ty, imm) {
            (op, b) = (reduced, Operand::Imm(imm));
        }
    }
    emit(ty, |dst| Op::Alu(AluOp::Binary { op, ty, dst, a, b }))
}

/// `x / 2^k` as `x >> k` and `x % 2^k` as `x & (2^k - 1)` for unsigned `x`: ptxas (13.5)
/// assembles `div.u32 x, 2` as its division by a register (I2F, MUFU.RCP and seven integer
/// ops), not as a shift.
fn strength_reduced(op: BinaryOp, ty: Ty, imm: u64) -> Option<(BinaryOp, u64)> {
    if !matches!(ty, Ty::U32 | Ty::U64) || !imm.is_power_of_two() {
        return None;
    }
    match op {
        BinaryOp::Div => Some((BinaryOp::Shr, u64::from(imm.trailing_zeros()))),
        BinaryOp::Rem => Some((BinaryOp::And, imm - 1)),
        _ => None,
    }
}

impl<T: Scalar> Val<T> {
    pub(crate) fn from_reg(reg: Reg) -> Self {
        Val {
            reg,
            _ty: PhantomData,
        }
    }

    /// The register behind the value.
    pub fn reg(self) -> Reg {
        self.reg
    }

    /// Reinterprets the bits as another type of the same width. Integer types of one
    /// width share registers, so only a float <-> integer cast costs a `mov`.
    #[track_caller]
    pub fn bitcast<U: Scalar>(self) -> Val<U> {
        assert_eq!(
            T::TY.bits(),
            U::TY.bits(),
            "bitcast between types of different widths"
        );
        if T::TY.is_float() == U::TY.is_float() && T::TY != Ty::Pred {
            return Val::from_reg(self.reg);
        }
        Val::from_reg(emit(U::TY, |dst| {
            Op::Alu(AluOp::BitCast { dst, src: self.reg })
        }))
    }

    #[track_caller]
    fn unary(self, op: UnaryOp) -> Self {
        let a = Operand::Reg(self.reg);
        Val::from_reg(emit(T::TY, |dst| {
            Op::Alu(AluOp::Unary {
                op,
                ty: T::TY,
                dst,
                a,
            })
        }))
    }
}

impl<T: Literal> Val<T> {
    /// A register holding the constant `v`.
    #[track_caller]
    pub fn constant(v: T) -> Self {
        v.into_val()
    }
}

/// Numeric types with arithmetic, comparisons, min and max.
pub trait Number: Literal {}
impl Number for u32 {}
impl Number for i32 {}
impl Number for u64 {}
impl Number for i64 {}
impl Number for f32 {}

/// Integer types with bitwise ops, shifts and remainder.
pub trait Integer: Number {}
impl Integer for u32 {}
impl Integer for i32 {}
impl Integer for u64 {}
impl Integer for i64 {}

impl<T: Number> Val<T> {
    #[track_caller]
    fn cmp(self, cmp: CmpOp, rhs: impl IntoVal<T>) -> Pred {
        let a = Operand::Reg(self.reg);
        let b = rhs.operand();
        Val::from_reg(emit(Ty::Pred, |dst| {
            Op::Alu(AluOp::Setp {
                cmp,
                ty: T::TY,
                dst,
                a,
                b,
            })
        }))
    }

    /// `self < rhs` (floats: false when either is NaN).
    #[track_caller]
    pub fn lt(self, rhs: impl IntoVal<T>) -> Pred {
        self.cmp(CmpOp::Lt, rhs)
    }
    #[track_caller]
    pub fn le(self, rhs: impl IntoVal<T>) -> Pred {
        self.cmp(CmpOp::Le, rhs)
    }
    #[track_caller]
    pub fn gt(self, rhs: impl IntoVal<T>) -> Pred {
        self.cmp(CmpOp::Gt, rhs)
    }
    #[track_caller]
    pub fn ge(self, rhs: impl IntoVal<T>) -> Pred {
        self.cmp(CmpOp::Ge, rhs)
    }
    #[track_caller]
    pub fn eq(self, rhs: impl IntoVal<T>) -> Pred {
        self.cmp(CmpOp::Eq, rhs)
    }
    /// `self != rhs` (floats: true when either is NaN, as in IEEE and Rust).
    #[track_caller]
    pub fn ne(self, rhs: impl IntoVal<T>) -> Pred {
        self.cmp(CmpOp::Ne, rhs)
    }

    /// The smaller value (floats: a NaN operand loses to a number).
    #[track_caller]
    pub fn min(self, rhs: impl IntoVal<T>) -> Self {
        Val::from_reg(binary(BinaryOp::Min, T::TY, self.reg.into(), rhs.operand()))
    }

    /// The larger value (floats: a NaN operand loses to a number).
    #[track_caller]
    pub fn max(self, rhs: impl IntoVal<T>) -> Self {
        Val::from_reg(binary(BinaryOp::Max, T::TY, self.reg.into(), rhs.operand()))
    }

    /// `self * b + c`: one rounding for floats (`fma.rn`), `mad.lo` for integers.
    #[track_caller]
    pub fn fma(self, b: impl IntoVal<T>, c: impl IntoVal<T>) -> Self {
        let (a, b, c) = (Operand::Reg(self.reg), b.operand(), c.operand());
        Val::from_reg(emit(T::TY, |dst| {
            Op::Alu(AluOp::Fma {
                ty: T::TY,
                dst,
                a,
                b,
                c,
            })
        }))
    }

    /// Converts to another numeric type: integers widen (sign- or zero-extending) or wrap
    /// when narrowing; integer -> float rounds to nearest; float -> integer truncates toward
    /// zero and saturates (NaN -> 0), like Rust's `as`.
    #[track_caller]
    pub fn cast<U: Number>(self) -> Val<U> {
        let rounding = if T::TY.is_float() && !U::TY.is_float() {
            Rounding::Zero
        } else {
            Rounding::Nearest
        };
        self.cast_rounded(rounding)
    }

    /// Like [`Val::cast`] with the rounding of an inexact conversion chosen.
    #[track_caller]
    pub fn cast_rounded<U: Number>(self, rounding: Rounding) -> Val<U> {
        if T::TY == U::TY {
            return Val::from_reg(self.reg);
        }
        if !T::TY.is_float() && !U::TY.is_float() && T::TY.bits() == U::TY.bits() {
            return self.bitcast();
        }
        Val::from_reg(convert(U::TY, T::TY, rounding, Operand::Reg(self.reg)))
    }
}

impl Val<f32> {
    /// `ex2.approx.ftz.f32`: 2^self (at most 2 ulp off; subnormals flush to zero).
    #[track_caller]
    pub fn ex2(self) -> Self {
        self.unary(UnaryOp::Ex2Approx)
    }

    /// |self|.
    #[track_caller]
    pub fn abs(self) -> Self {
        self.unary(UnaryOp::Abs)
    }

    /// `rcp.rn.f32`: 1/self, correctly rounded.
    #[track_caller]
    pub fn rcp(self) -> Self {
        self.unary(UnaryOp::Rcp)
    }
}

impl Val<i32> {
    /// |self| (wrapping at i32::MIN).
    #[track_caller]
    pub fn abs(self) -> Self {
        self.unary(UnaryOp::Abs)
    }
}

impl<T: Integer> Val<T> {
    /// The high half of the full product.
    #[track_caller]
    pub fn mul_hi(self, rhs: impl IntoVal<T>) -> Self {
        Val::from_reg(binary(
            BinaryOp::MulHi,
            T::TY,
            self.reg.into(),
            rhs.operand(),
        ))
    }
}

impl Val<u32> {
    /// The full 64-bit product.
    #[track_caller]
    pub fn mul_wide(self, rhs: impl IntoVal<u32>) -> Val<u64> {
        let (a, b) = (Operand::Reg(self.reg), rhs.operand());
        Val::from_reg(emit(Ty::U64, |dst| {
            Op::Alu(AluOp::MulWide {
                ty: Ty::U32,
                dst,
                a,
                b,
            })
        }))
    }
}

impl Val<i32> {
    /// The full 64-bit product.
    #[track_caller]
    pub fn mul_wide(self, rhs: impl IntoVal<i32>) -> Val<i64> {
        let (a, b) = (Operand::Reg(self.reg), rhs.operand());
        Val::from_reg(emit(Ty::S64, |dst| {
            Op::Alu(AluOp::MulWide {
                ty: Ty::S32,
                dst,
                a,
                b,
            })
        }))
    }
}

impl Pred {
    /// `self ? a : b` (`selp`).
    #[track_caller]
    pub fn select<T: Scalar>(self, a: impl IntoVal<T>, b: impl IntoVal<T>) -> Val<T> {
        let (a, b, cond) = (a.operand(), b.operand(), self.reg);
        Val::from_reg(emit(T::TY, |dst| {
            Op::Alu(AluOp::Selp {
                ty: T::TY,
                dst,
                a,
                b,
                cond,
            })
        }))
    }

    /// 1 where true, 0 where false.
    #[track_caller]
    pub fn to_u32(self) -> Val<u32> {
        self.select(1u32, 0u32)
    }
}

macro_rules! binop_impls {
    ($trait:ident, $method:ident, $assign_trait:ident, $assign_method:ident, $op:expr, [$($t:ty),*]) => {$(
        impl ops::$trait<Val<$t>> for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $method(self, rhs: Val<$t>) -> Val<$t> {
                Val::from_reg(binary($op, <$t as Scalar>::TY, self.reg.into(), rhs.reg.into()))
            }
        }
        impl ops::$trait<$t> for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $method(self, rhs: $t) -> Val<$t> {
                Val::from_reg(binary($op, <$t as Scalar>::TY, self.reg.into(), rhs.operand()))
            }
        }
        impl ops::$trait<Val<$t>> for $t {
            type Output = Val<$t>;
            #[track_caller]
            fn $method(self, rhs: Val<$t>) -> Val<$t> {
                Val::from_reg(binary($op, <$t as Scalar>::TY, self.operand(), rhs.reg.into()))
            }
        }
        impl ops::$assign_trait<Val<$t>> for Val<$t> {
            #[track_caller]
            fn $assign_method(&mut self, rhs: Val<$t>) {
                *self = ops::$trait::$method(*self, rhs);
            }
        }
        impl ops::$assign_trait<$t> for Val<$t> {
            #[track_caller]
            fn $assign_method(&mut self, rhs: $t) {
                *self = ops::$trait::$method(*self, rhs);
            }
        }
    )*};
}

binop_impls!(
    Add,
    add,
    AddAssign,
    add_assign,
    BinaryOp::Add,
    [u32, i32, u64, i64, f32]
);
binop_impls!(
    Sub,
    sub,
    SubAssign,
    sub_assign,
    BinaryOp::Sub,
    [u32, i32, u64, i64, f32]
);
binop_impls!(
    Mul,
    mul,
    MulAssign,
    mul_assign,
    BinaryOp::Mul,
    [u32, i32, u64, i64, f32]
);
binop_impls!(
    Div,
    div,
    DivAssign,
    div_assign,
    BinaryOp::Div,
    [u32, i32, u64, i64, f32]
);
binop_impls!(
    Rem,
    rem,
    RemAssign,
    rem_assign,
    BinaryOp::Rem,
    [u32, i32, u64, i64]
);
binop_impls!(
    BitAnd,
    bitand,
    BitAndAssign,
    bitand_assign,
    BinaryOp::And,
    [u32, i32, u64, i64]
);
binop_impls!(
    BitOr,
    bitor,
    BitOrAssign,
    bitor_assign,
    BinaryOp::Or,
    [u32, i32, u64, i64]
);
binop_impls!(
    BitXor,
    bitxor,
    BitXorAssign,
    bitxor_assign,
    BinaryOp::Xor,
    [u32, i32, u64, i64]
);

/// Predicate logic; a plain `bool` operand folds at trace time.
macro_rules! pred_logic_impls {
    ($trait:ident, $method:ident, $assign_trait:ident, $assign_method:ident, $op:expr, |$p:ident, $b:ident| $fold:expr) => {
        impl ops::$trait<Pred> for Pred {
            type Output = Pred;
            #[track_caller]
            fn $method(self, rhs: Pred) -> Pred {
                Val::from_reg(binary($op, Ty::Pred, self.reg.into(), rhs.reg.into()))
            }
        }
        impl ops::$trait<bool> for Pred {
            type Output = Pred;
            #[track_caller]
            fn $method(self, rhs: bool) -> Pred {
                let ($p, $b) = (self, rhs);
                $fold
            }
        }
        impl ops::$trait<Pred> for bool {
            type Output = Pred;
            #[track_caller]
            fn $method(self, rhs: Pred) -> Pred {
                let ($p, $b) = (rhs, self);
                $fold
            }
        }
        impl ops::$assign_trait<Pred> for Pred {
            #[track_caller]
            fn $assign_method(&mut self, rhs: Pred) {
                *self = ops::$trait::$method(*self, rhs);
            }
        }
        impl ops::$assign_trait<bool> for Pred {
            #[track_caller]
            fn $assign_method(&mut self, rhs: bool) {
                *self = ops::$trait::$method(*self, rhs);
            }
        }
    };
}

pred_logic_impls!(
    BitAnd,
    bitand,
    BitAndAssign,
    bitand_assign,
    BinaryOp::And,
    |p, b| if b { p } else { Pred::constant(false) }
);
pred_logic_impls!(
    BitOr,
    bitor,
    BitOrAssign,
    bitor_assign,
    BinaryOp::Or,
    |p, b| if b { Pred::constant(true) } else { p }
);
pred_logic_impls!(
    BitXor,
    bitxor,
    BitXorAssign,
    bitxor_assign,
    BinaryOp::Xor,
    |p, b| if b { !p } else { p }
);

macro_rules! shift_impls {
    ($trait:ident, $method:ident, $assign_trait:ident, $assign_method:ident, $op:expr, [$($t:ty),*]) => {$(
        impl ops::$trait<Val<u32>> for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $method(self, rhs: Val<u32>) -> Val<$t> {
                Val::from_reg(binary($op, <$t as Scalar>::TY, self.reg.into(), rhs.reg.into()))
            }
        }
        impl ops::$trait<u32> for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $method(self, rhs: u32) -> Val<$t> {
                Val::from_reg(binary($op, <$t as Scalar>::TY, self.reg.into(), rhs.operand()))
            }
        }
        impl ops::$assign_trait<u32> for Val<$t> {
            #[track_caller]
            fn $assign_method(&mut self, rhs: u32) {
                *self = ops::$trait::$method(*self, rhs);
            }
        }
    )*};
}

shift_impls!(
    Shl,
    shl,
    ShlAssign,
    shl_assign,
    BinaryOp::Shl,
    [u32, i32, u64, i64]
);
shift_impls!(
    Shr,
    shr,
    ShrAssign,
    shr_assign,
    BinaryOp::Shr,
    [u32, i32, u64, i64]
);

macro_rules! unary_impls {
    ($trait:ident, $method:ident, $op:expr, [$($t:ty),*]) => {$(
        impl ops::$trait for Val<$t> {
            type Output = Val<$t>;
            #[track_caller]
            fn $method(self) -> Val<$t> {
                self.unary($op)
            }
        }
    )*};
}

unary_impls!(Neg, neg, UnaryOp::Neg, [i32, i64, f32]);
unary_impls!(Not, not, UnaryOp::Not, [u32, i32, u64, i64, bool]);

/// Layout arithmetic on runtime 32-bit offsets (shared-memory addresses, TMEM columns,
/// thread-derived coordinates): each call is one instruction, and the layout code only calls
/// when a result is not known at trace time.
impl crate::layout::DynInt for Val<u32> {
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
        self + c as i32 as u32
    }
    #[track_caller]
    fn mul_const(self, c: i64) -> Self {
        let c = c as u32;
        if c.is_power_of_two() {
            self << c.trailing_zeros()
        } else {
            self * c
        }
    }
    #[track_caller]
    fn div_const(self, c: i64) -> Self {
        let c = c as u32;
        if c.is_power_of_two() {
            self >> c.trailing_zeros()
        } else {
            self / c
        }
    }
    #[track_caller]
    fn rem_const(self, c: i64) -> Self {
        let c = c as u32;
        if c.is_power_of_two() {
            self & (c - 1)
        } else {
            self % c
        }
    }
    #[track_caller]
    fn shr_const(self, bits: u32) -> Self {
        self >> bits
    }
    #[track_caller]
    fn and_const(self, mask: i64) -> Self {
        self & mask as u32
    }
    #[track_caller]
    fn xor(self, other: Self) -> Self {
        self ^ other
    }
}

impl From<crate::layout::StaticOnly> for Val<u32> {
    fn from(never: crate::layout::StaticOnly) -> Self {
        match never {}
    }
}

impl From<Val<u32>> for crate::layout::Int<Val<u32>> {
    fn from(v: Val<u32>) -> Self {
        crate::layout::Int::Dynamic(v)
    }
}

impl From<Val<u32>> for crate::layout::IntTuple<Val<u32>> {
    fn from(v: Val<u32>) -> Self {
        crate::layout::IntTuple::Leaf(crate::layout::Int::Dynamic(v))
    }
}
