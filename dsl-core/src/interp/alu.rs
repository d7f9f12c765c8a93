//! Scalar semantics of the integer, f32, comparison and plain-conversion ops, in the PTX
//! ISA's words (section numbers are of PTX ISA 9.1), and the per-lane helpers that apply
//! them over a warp's active lanes.
//!
//! Registers hold a value in their low `width` bits with the bits above zero; a predicate
//! is 0 or 1; an f32 is its IEEE bits.

use crate::ir::{CmpOp, Rounding};

/// Every lane of a warp.
pub(crate) const FULL: u32 = u32::MAX;
const M32: u64 = 0xffff_ffff;
/// The NaN NVIDIA GPUs return from single-precision arithmetic (PTX §9.7.3 says "an
/// unspecified NaN"; the hardware writes this canonical one and drops payloads).
pub(crate) const CANONICAL_NAN: u32 = 0x7fff_ffff;

/// Register `s`'s 32 lanes, copied out.
#[inline(always)]
pub(crate) fn lanes(r: &[u64], s: u32) -> [u64; 32] {
    let s = s as usize * 32;
    r[s..s + 32].try_into().expect("32 lanes")
}

#[inline(always)]
fn store(r: &mut [u64], d: u32, m: u32, out: &[u64; 32]) {
    let d = d as usize * 32;
    let dst = &mut r[d..d + 32];
    if m == FULL {
        dst.copy_from_slice(out);
    } else {
        for (l, v) in out.iter().enumerate() {
            if m >> l & 1 != 0 {
                dst[l] = *v;
            }
        }
    }
}

/// `d = f(a)` in the lanes of `m`. `f` must be total: it also runs on inactive lanes.
#[inline(always)]
pub(crate) fn map1(r: &mut [u64], m: u32, d: u32, a: u32, f: impl Fn(u64) -> u64) {
    let a = lanes(r, a);
    let mut out = [0; 32];
    for l in 0..32 {
        out[l] = f(a[l]);
    }
    store(r, d, m, &out);
}

/// `d = f(a, b)` in the lanes of `m`.
#[inline(always)]
pub(crate) fn map2(r: &mut [u64], m: u32, d: u32, a: u32, b: u32, f: impl Fn(u64, u64) -> u64) {
    let (a, b) = (lanes(r, a), lanes(r, b));
    let mut out = [0; 32];
    for l in 0..32 {
        out[l] = f(a[l], b[l]);
    }
    store(r, d, m, &out);
}

/// `d = f(a, b, c)` in the lanes of `m`.
#[inline(always)]
pub(crate) fn map3(
    r: &mut [u64],
    m: u32,
    d: u32,
    [a, b, c]: [u32; 3],
    f: impl Fn(u64, u64, u64) -> u64,
) {
    let (a, b, c) = (lanes(r, a), lanes(r, b), lanes(r, c));
    let mut out = [0; 32];
    for l in 0..32 {
        out[l] = f(a[l], b[l], c[l]);
    }
    store(r, d, m, &out);
}

/// Like [`map2`] for a partial function: only active lanes run; the first lane where `f`
/// fails is returned.
#[inline(always)]
fn try_map2(
    r: &mut [u64],
    m: u32,
    d: u32,
    a: u32,
    b: u32,
    f: impl Fn(u64, u64) -> Option<u64>,
) -> Result<(), usize> {
    let (a, b) = (lanes(r, a), lanes(r, b));
    let mut out = [0; 32];
    let mut mm = m;
    while mm != 0 {
        let l = mm.trailing_zeros() as usize;
        mm &= mm - 1;
        out[l] = f(a[l], b[l]).ok_or(l)?;
    }
    store(r, d, m, &out);
    Ok(())
}

#[inline(always)]
pub(crate) fn f32_of(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

/// An f32 result as register bits, NaN made canonical.
#[inline(always)]
pub(crate) fn f32_bits(x: f32) -> u64 {
    if x.is_nan() {
        CANONICAL_NAN as u64
    } else {
        x.to_bits() as u64
    }
}

#[inline(always)]
fn s32(v: u64) -> i64 {
    v as u32 as i32 as i64
}

/// Unary ops, specialised by type when the trace is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Un {
    Neg32,
    Neg64,
    /// `neg.f32` flips the sign bit (NaN included).
    NegF,
    /// `not.b16`/`.b32`/`.b64`: complement within `mask`.
    Not(u64),
    NotPred,
    Abs32,
    Abs64,
    /// `abs.f32` clears the sign bit.
    AbsF,
    Ex2,
    Rcp,
}

/// Binary ops, specialised by type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bin {
    Add32,
    Add64,
    AddF,
    Sub32,
    Sub64,
    SubF,
    Mul32,
    Mul64,
    MulF,
    MulHiU32,
    MulHiS32,
    MulHiU64,
    MulHiS64,
    MulWideU32,
    MulWideS32,
    DivU32,
    DivS32,
    DivU64,
    DivS64,
    DivF,
    RemU32,
    RemS32,
    RemU64,
    RemS64,
    MinU32,
    MinS32,
    MinU64,
    MinS64,
    MinF,
    MaxU32,
    MaxS32,
    MaxU64,
    MaxS64,
    MaxF,
    /// Bitwise ops work on every width and on predicates (0/1) alike.
    And,
    Or,
    Xor,
    /// `shl` on a register of `bits` bits.
    Shl(u32),
    /// `shr.u` on a register of `bits` bits.
    ShrU(u32),
    ShrS32,
    ShrS64,
}

/// Three-operand arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tern {
    /// `fma.rn.f32`.
    FmaF,
    /// `mad.lo` on 32-bit integers.
    Mad32,
    Mad64,
}

/// The type a comparison or conversion reads its operands as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Num {
    U16,
    U32,
    S32,
    U64,
    S64,
    F32,
    Pred,
}

impl Num {
    pub(crate) fn of(ty: crate::ir::Ty) -> Num {
        use crate::ir::Ty;
        match ty {
            Ty::Pred => Num::Pred,
            Ty::B16 => Num::U16,
            Ty::B32 | Ty::U32 => Num::U32,
            Ty::S32 => Num::S32,
            Ty::U64 => Num::U64,
            Ty::S64 => Num::S64,
            Ty::F32 => Num::F32,
        }
    }

    fn is_64(self) -> bool {
        matches!(self, Num::U64 | Num::S64)
    }

    /// An integer register's value, sign- or zero-extended by its type.
    fn int_value(self, v: u64) -> i128 {
        match self {
            Num::U16 => (v & 0xffff) as i128,
            Num::U32 => (v & M32) as i128,
            Num::S32 => s32(v) as i128,
            Num::U64 => v as i128,
            Num::S64 => v as i64 as i128,
            Num::Pred => (v & 1) as i128,
            Num::F32 => unreachable!("not an integer type"),
        }
    }

    /// The low bits of `x` as a register of this integer type.
    fn wrap(self, x: i128) -> u64 {
        match self {
            Num::U16 => x as u64 & 0xffff,
            Num::U32 | Num::S32 => x as u64 & M32,
            Num::U64 | Num::S64 => x as u64,
            Num::Pred => x as u64 & 1,
            Num::F32 => unreachable!("not an integer type"),
        }
    }
}

/// `ex2.approx.ftz.f32` (PTX §9.7.3.21): 2^x, subnormal inputs and results flushed to
/// zero; ex2(-inf) = +0, ex2(±0) = 1. The hardware's exact bits are not public: this is
/// 2^x computed in f64 and rounded once to f32, within the documented 2-ulp bound.
pub(crate) fn ex2_approx_ftz(x: f32) -> f32 {
    let x = if x.is_subnormal() { 0.0 } else { x };
    let r = (x as f64).exp2() as f32;
    if r.is_subnormal() { 0.0 } else { r }
}

/// `fma.rn.f32`: a * b + c with a single rounding. The product of two f32 is exact in f64;
/// the sum is formed in f64 rounded to odd, which makes the final rounding to f32 a correct
/// single rounding (53 >= 24 + 2 bits). Infinities and NaNs come only from the inputs (f32
/// products cannot overflow f64), and an exact zero has its IEEE sign already.
pub(crate) fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    super::cvt::add_round_to_odd(a as f64 * b as f64, c as f64) as f32
}

/// `min.f32` (PTX §9.7.3.11, `min_num`): a NaN operand loses to a number, two NaNs give
/// NaN, and -0.0 < +0.0.
fn min_f32(x: f32, y: f32) -> f32 {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => f32::NAN,
        (true, false) => y,
        (false, true) => x,
        _ if x < y || (x == y && x.is_sign_negative()) => x,
        _ => y,
    }
}

/// `max.f32` (PTX §9.7.3.12), the mirror of [`min_f32`].
fn max_f32(x: f32, y: f32) -> f32 {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => f32::NAN,
        (true, false) => y,
        (false, true) => x,
        _ if x > y || (x == y && x.is_sign_positive()) => x,
        _ => y,
    }
}

pub(crate) fn unary(op: Un, r: &mut [u64], m: u32, d: u32, a: u32) {
    match op {
        Un::Neg32 => map1(r, m, d, a, |x| x.wrapping_neg() & M32),
        Un::Neg64 => map1(r, m, d, a, u64::wrapping_neg),
        Un::NegF => map1(r, m, d, a, |x| x ^ 0x8000_0000),
        Un::Not(mask) => map1(r, m, d, a, |x| !x & mask),
        Un::NotPred => map1(r, m, d, a, |x| x ^ 1),
        // abs.s32 of the most negative value is that value (two's complement wrap).
        Un::Abs32 => map1(r, m, d, a, |x| (s32(x).unsigned_abs() as i32 as u32) as u64),
        Un::Abs64 => map1(r, m, d, a, |x| (x as i64).wrapping_abs() as u64),
        Un::AbsF => map1(r, m, d, a, |x| x & 0x7fff_ffff),
        Un::Ex2 => map1(r, m, d, a, |x| f32_bits(ex2_approx_ftz(f32_of(x)))),
        // rcp.rn.f32: IEEE 1/x, round to nearest even, subnormals kept.
        Un::Rcp => map1(r, m, d, a, |x| f32_bits(1.0 / f32_of(x))),
    }
}

/// A binary op over the active lanes; `Err(lane)` is a division by zero in that lane.
pub(crate) fn binary(op: Bin, r: &mut [u64], m: u32, d: u32, a: u32, b: u32) -> Result<(), usize> {
    let f = |x: u64| f32_of(x);
    match op {
        Bin::Add32 => map2(r, m, d, a, b, |x, y| x.wrapping_add(y) & M32),
        Bin::Add64 => map2(r, m, d, a, b, u64::wrapping_add),
        Bin::AddF => map2(r, m, d, a, b, |x, y| f32_bits(f(x) + f(y))),
        Bin::Sub32 => map2(r, m, d, a, b, |x, y| x.wrapping_sub(y) & M32),
        Bin::Sub64 => map2(r, m, d, a, b, u64::wrapping_sub),
        Bin::SubF => map2(r, m, d, a, b, |x, y| f32_bits(f(x) - f(y))),
        Bin::Mul32 => map2(r, m, d, a, b, |x, y| x.wrapping_mul(y) & M32),
        Bin::Mul64 => map2(r, m, d, a, b, u64::wrapping_mul),
        Bin::MulF => map2(r, m, d, a, b, |x, y| f32_bits(f(x) * f(y))),
        Bin::MulHiU32 => map2(r, m, d, a, b, |x, y| ((x & M32) * (y & M32)) >> 32),
        Bin::MulHiS32 => map2(r, m, d, a, b, |x, y| ((s32(x) * s32(y)) >> 32) as u64 & M32),
        Bin::MulHiU64 => map2(r, m, d, a, b, |x, y| ((x as u128 * y as u128) >> 64) as u64),
        Bin::MulHiS64 => map2(r, m, d, a, b, |x, y| {
            ((x as i64 as i128 * y as i64 as i128) >> 64) as u64
        }),
        Bin::MulWideU32 => map2(r, m, d, a, b, |x, y| (x & M32) * (y & M32)),
        Bin::MulWideS32 => map2(r, m, d, a, b, |x, y| (s32(x) * s32(y)) as u64),
        // PTX §9.7.1.8/9: division by zero "yields an unspecified, machine-specific value":
        // a fault. The most negative value divided by -1 wraps.
        Bin::DivU32 => try_map2(r, m, d, a, b, |x, y| {
            ((x as u32).checked_div(y as u32)).map(u64::from)
        })?,
        Bin::DivS32 => try_map2(r, m, d, a, b, |x, y| {
            (y as u32 != 0).then(|| (x as u32 as i32).wrapping_div(y as u32 as i32) as u32 as u64)
        })?,
        Bin::DivU64 => try_map2(r, m, d, a, b, u64::checked_div)?,
        Bin::DivS64 => try_map2(r, m, d, a, b, |x, y| {
            (y != 0).then(|| (x as i64).wrapping_div(y as i64) as u64)
        })?,
        // div.rn.f32: IEEE division, round to nearest even.
        Bin::DivF => map2(r, m, d, a, b, |x, y| f32_bits(f(x) / f(y))),
        Bin::RemU32 => try_map2(r, m, d, a, b, |x, y| {
            ((x as u32).checked_rem(y as u32)).map(u64::from)
        })?,
        Bin::RemS32 => try_map2(r, m, d, a, b, |x, y| {
            (y as u32 != 0).then(|| (x as u32 as i32).wrapping_rem(y as u32 as i32) as u32 as u64)
        })?,
        Bin::RemU64 => try_map2(r, m, d, a, b, u64::checked_rem)?,
        Bin::RemS64 => try_map2(r, m, d, a, b, |x, y| {
            (y != 0).then(|| (x as i64).wrapping_rem(y as i64) as u64)
        })?,
        Bin::MinU32 | Bin::MinU64 => map2(r, m, d, a, b, u64::min),
        Bin::MaxU32 | Bin::MaxU64 => map2(r, m, d, a, b, u64::max),
        Bin::MinS32 => map2(r, m, d, a, b, |x, y| if s32(x) <= s32(y) { x } else { y }),
        Bin::MaxS32 => map2(r, m, d, a, b, |x, y| if s32(x) >= s32(y) { x } else { y }),
        Bin::MinS64 => map2(r, m, d, a, b, |x, y| (x as i64).min(y as i64) as u64),
        Bin::MaxS64 => map2(r, m, d, a, b, |x, y| (x as i64).max(y as i64) as u64),
        Bin::MinF => map2(r, m, d, a, b, |x, y| f32_bits(min_f32(f(x), f(y)))),
        Bin::MaxF => map2(r, m, d, a, b, |x, y| f32_bits(max_f32(f(x), f(y)))),
        Bin::And => map2(r, m, d, a, b, |x, y| x & y),
        Bin::Or => map2(r, m, d, a, b, |x, y| x | y),
        Bin::Xor => map2(r, m, d, a, b, |x, y| x ^ y),
        // PTX §9.7.8.7/8: shift amounts greater than the register width N are clamped to
        // N; the amount is an unsigned 32-bit value.
        Bin::Shl(bits) => {
            let mask = u64::MAX >> (64 - bits);
            map2(r, m, d, a, b, move |x, y| {
                let s = y as u32;
                if s >= bits { 0 } else { (x << s) & mask }
            })
        }
        Bin::ShrU(bits) => {
            let mask = u64::MAX >> (64 - bits);
            map2(r, m, d, a, b, move |x, y| {
                let s = y as u32;
                if s >= bits { 0 } else { (x & mask) >> s }
            })
        }
        Bin::ShrS32 => map2(r, m, d, a, b, |x, y| {
            ((x as u32 as i32) >> (y as u32).min(31)) as u32 as u64
        }),
        Bin::ShrS64 => map2(r, m, d, a, b, |x, y| {
            ((x as i64) >> (y as u32).min(63)) as u64
        }),
    }
    Ok(())
}

pub(crate) fn ternary(op: Tern, r: &mut [u64], m: u32, d: u32, abc: [u32; 3]) {
    match op {
        Tern::FmaF => map3(r, m, d, abc, |x, y, z| {
            f32_bits(fma_f32(f32_of(x), f32_of(y), f32_of(z)))
        }),
        Tern::Mad32 => map3(r, m, d, abc, |x, y, z| {
            x.wrapping_mul(y).wrapping_add(z) & M32
        }),
        Tern::Mad64 => map3(r, m, d, abc, |x, y, z| x.wrapping_mul(y).wrapping_add(z)),
    }
}

/// `setp` (PTX §9.7.6.2): integer comparisons by signedness; float comparisons ordered
/// (false when either is NaN) except `ne`, which the emitter prints as `neu` (true when
/// either is NaN).
pub(crate) fn compare(cmp: CmpOp, ty: Num, x: u64, y: u64) -> bool {
    if ty == Num::F32 {
        let (x, y) = (f32_of(x), f32_of(y));
        return match cmp {
            CmpOp::Eq => x == y,
            CmpOp::Ne => x != y,
            CmpOp::Lt => x < y,
            CmpOp::Le => x <= y,
            CmpOp::Gt => x > y,
            CmpOp::Ge => x >= y,
        };
    }
    let (x, y) = (ty.int_value(x), ty.int_value(y));
    match cmp {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    }
}

/// The neighbour of a finite f32 toward +inf (`up`) or -inf.
fn step_f32(x: f32, up: bool) -> f32 {
    if x == 0.0 {
        let tiny = f32::from_bits(1);
        return if up { tiny } else { -tiny };
    }
    let b = x.to_bits();
    f32::from_bits(if (x > 0.0) == up { b + 1 } else { b - 1 })
}

/// `x` rounded to an integral value in the direction of `rnd`.
fn round_integral(x: f32, rnd: Rounding) -> f32 {
    match rnd {
        Rounding::Nearest => x.round_ties_even(),
        Rounding::Zero => x.trunc(),
        Rounding::Down => x.floor(),
        Rounding::Up => x.ceil(),
    }
}

/// `cvt` between integer and f32 types (PTX §9.7.9.21).
pub(crate) fn convert(from: Num, to: Num, rnd: Rounding, v: u64) -> u64 {
    match (from, to) {
        (Num::F32, Num::F32) => {
            // Same-size float-to-float with an integer rounding: round to an integral value.
            f32_bits(round_integral(f32_of(v), rnd))
        }
        (Num::F32, _) => {
            let x = f32_of(v);
            // "NaN input results in zero if the destination is not .s64/.u64, else
            // 1 << (BitWidth(dst) - 1)"; out-of-range values clamp (saturate by default).
            if x.is_nan() {
                return if to.is_64() { 1 << 63 } else { 0 };
            }
            let x = round_integral(x, rnd);
            match to {
                Num::U16 => x.clamp(0.0, 65535.0) as u64,
                Num::U32 => x as u32 as u64,
                Num::S32 => x as i32 as u32 as u64,
                Num::U64 => x as u64,
                Num::S64 => x as i64 as u64,
                Num::Pred | Num::F32 => unreachable!("checked when compiled"),
            }
        }
        (_, Num::F32) => {
            let n = from.int_value(v);
            // `as` rounds to nearest even; the directed modes step off it when it is on the
            // wrong side of the exact value.
            let near = n as f32;
            let exact = near as i128;
            let x = match rnd {
                Rounding::Nearest => near,
                Rounding::Zero if exact.abs() > n.abs() => step_f32(near, n < 0),
                Rounding::Down if exact > n => step_f32(near, false),
                Rounding::Up if exact < n => step_f32(near, true),
                _ => near,
            };
            x.to_bits() as u64
        }
        _ => to.wrap(from.int_value(v)),
    }
}

/// `prmt.b32` in the default mode (PTX §9.7.9.7): byte i of d is byte `c[4i+2:4i]` of
/// {b, a}, sign-replicated when `c[4i+3]` is set.
pub(crate) fn prmt(a: u32, b: u32, c: u32) -> u32 {
    let src = (b as u64) << 32 | a as u64;
    let mut d = 0u32;
    for i in 0..4 {
        let sel = (c >> (4 * i)) & 0xf;
        let byte = (src >> (8 * (sel & 7))) as u32 & 0xff;
        let byte = if sel & 8 != 0 {
            if byte & 0x80 != 0 { 0xff } else { 0 }
        } else {
            byte
        };
        d |= byte << (8 * i);
    }
    d
}
