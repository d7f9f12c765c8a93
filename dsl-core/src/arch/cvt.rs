//! Conversions used by the decode kernel: bf16 packing, fp8 (e4m3) and fp4 (e2m1)
//! dequantisation with power-of-two or e4m3 scales, MXFP8 quantisation with ue8m0 scales.
//!
//! Each conversion with a native instruction on only some targets has two paths: the
//! native `cvt` and an exact sequence of integer and bf16x2 ops ([`CvtPath::Emulated`]).
//! The default picks the native one where the target has it; tests run both through the
//! interpreter and compare them.

use crate::Target;
use crate::ir::verify::rules;
use crate::ir::{AluOp, Bf16x2Arith, CvtOp, Op, Operand, Rounding, Ty};
use crate::target::Capability;
use crate::trace::val::{convert, emit};
use crate::trace::{Bf16x2, IntoVal, Val, current_target, trace_error};

/// Which implementation of a conversion to trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CvtPath {
    /// The target's own `cvt` instruction.
    Native,
    /// An exact instruction sequence available on every target.
    Emulated,
}

impl CvtPath {
    /// The native path where `target` has the native e2m1 and ue8m0 `cvt` forms, the
    /// emulated one elsewhere.
    pub fn default_for(target: Target) -> Self {
        if target.has(Capability::NativeE2m1Cvt) && target.has(Capability::Ue8m0Cvt) {
            CvtPath::Native
        } else {
            CvtPath::Emulated
        }
    }

    fn current() -> Self {
        Self::default_for(current_target())
    }
}

/// `prmt.b32`: byte permute of the 8 bytes {b, a} by the nibbles of `selector` (an
/// immediate, or a register whose bytes pick a table's).
#[track_caller]
fn prmt(a: Val<u32>, b: impl IntoVal<u32>, selector: impl IntoVal<u32>) -> Val<u32> {
    let (a, b, selector) = (Operand::Reg(a.reg()), b.operand(), selector.operand());
    Val::from_reg(emit(Ty::U32, |dst| {
        Op::Alu(AluOp::Prmt {
            dst,
            a,
            b,
            selector,
        })
    }))
}

#[track_caller]
fn bf16x2_op(op: Bf16x2Arith, a: Val<Bf16x2>, b: Val<Bf16x2>, c: Operand) -> Val<Bf16x2> {
    let (a, b) = (Operand::Reg(a.reg()), Operand::Reg(b.reg()));
    Val::from_reg(emit(Ty::B32, |dst| {
        Op::Cvt(CvtOp::Bf16x2 { op, dst, a, b, c })
    }))
}

/// `mul.rn.bf16x2`: elementwise product, round to nearest, subnormals kept.
#[track_caller]
pub fn bf16x2_mul(a: Val<Bf16x2>, b: Val<Bf16x2>) -> Val<Bf16x2> {
    bf16x2_op(Bf16x2Arith::Mul, a, b, Operand::Imm(0))
}

/// `fma.rn.bf16x2`: elementwise a * b + c.
#[track_caller]
pub fn bf16x2_fma(a: Val<Bf16x2>, b: Val<Bf16x2>, c: Val<Bf16x2>) -> Val<Bf16x2> {
    bf16x2_op(Bf16x2Arith::Fma, a, b, Operand::Reg(c.reg()))
}

/// A bf16x2 with both halves holding the bf16 bits `bits`.
#[track_caller]
pub fn bf16x2_splat_bits(bits: u16) -> Val<Bf16x2> {
    Val::<u32>::constant(((bits as u32) << 16) | bits as u32).bitcast()
}

/// `cvt.rn.bf16x2.f32`: (lo, hi) rounded to nearest even, lo in the low half.
#[track_caller]
pub fn f32x2_to_bf16x2(lo: Val<f32>, hi: Val<f32>) -> Val<Bf16x2> {
    let (lo, hi) = (Operand::Reg(lo.reg()), Operand::Reg(hi.reg()));
    Val::from_reg(emit(Ty::B32, |dst| {
        Op::Cvt(CvtOp::F32x2ToBf16x2 { dst, lo, hi })
    }))
}

/// The two bf16 halves as f32 (exact): (low half, high half).
#[track_caller]
pub fn bf16x2_to_f32x2(w: Val<Bf16x2>) -> (Val<f32>, Val<f32>) {
    let bits = w.bitcast::<u32>();
    let lo = (bits << 16).bitcast::<f32>();
    let hi = (bits & 0xffff_0000u32).bitcast::<f32>();
    (lo, hi)
}

/// Four f32 to four e4m3 bytes (`cvt.rn.satfinite.e4m3x2.f32` twice): element i in byte i.
#[track_caller]
pub fn f32x4_to_e4m3x4(v: [Val<f32>; 4]) -> Val<u32> {
    let pair = |lo: Val<f32>, hi: Val<f32>| {
        let (lo, hi) = (Operand::Reg(lo.reg()), Operand::Reg(hi.reg()));
        emit(Ty::B16, |dst| Op::Cvt(CvtOp::F32x2ToE4m3x2 { dst, lo, hi }))
    };
    let lo = pair(v[0], v[1]);
    let hi = pair(v[2], v[3]);
    Val::from_reg(emit(Ty::U32, |dst| {
        Op::Alu(AluOp::Pack {
            dst,
            lo: Operand::Reg(lo),
            hi: Operand::Reg(hi),
        })
    }))
}

/// The ue8m0 scale byte of `x` rounded up to a power of two, saturating (the semantics of
/// `cvt.rp.satfinite.ue8m0x2.f32`): 2^(e-127) >= x; x <= 2^-127 (zero, negatives) gives 0,
/// +inf and values above 2^127 give 254, NaN gives 255.
#[track_caller]
pub fn ue8m0_round_up(x: Val<f32>) -> Val<u32> {
    ue8m0_round_up_with(x, CvtPath::current())
}

/// [`ue8m0_round_up`] on a chosen path.
#[track_caller]
pub fn ue8m0_round_up_with(x: Val<f32>, path: CvtPath) -> Val<u32> {
    match path {
        CvtPath::Native => {
            let x = Operand::Reg(x.reg());
            let pair = emit(Ty::B16, |dst| {
                Op::Cvt(CvtOp::F32x2ToUe8m0x2 { dst, lo: x, hi: x })
            });
            b16_to_u32(pair) & 0xffu32
        }
        CvtPath::Emulated => {
            let bits = x.bitcast::<u32>();
            let exp = (bits >> 23) & 0xffu32;
            let mant = bits & 0x7f_ffffu32;
            let negative = bits.bitcast::<i32>().lt(0i32);
            let is_nan = exp.eq(255u32) & mant.ne(0u32);
            // Normal x: 2^(exp-127) * (1 + m), rounded up to exp + (m != 0).
            let normal = exp + mant.ne(0u32).to_u32();
            // Subnormal x = m * 2^-149: above 2^-127 (m > 2^22) it rounds up to 2^-126.
            let subnormal = mant.gt(1u32 << 22).to_u32();
            let e = exp.eq(0u32).select(subnormal, normal).min(254u32);
            let e = negative.select(0u32, e);
            is_nan.select(255u32, e)
        }
    }
}

/// Zero-extends a b16 register (`cvt.u32.u16`).
#[track_caller]
fn b16_to_u32(h: crate::ir::Reg) -> Val<u32> {
    Val::from_reg(convert(
        Ty::U32,
        Ty::B16,
        Rounding::Nearest,
        Operand::Reg(h),
    ))
}

/// The low 16 bits of a word in a b16 register (`cvt.u16.u32`).
#[track_caller]
fn u32_to_b16(w: Val<u32>) -> crate::ir::Reg {
    convert(Ty::B16, Ty::U32, Rounding::Nearest, Operand::Reg(w.reg()))
}

/// 2^(e-127) as f32 for a ue8m0 byte `e` (e = 0 is the subnormal 2^-127, 255 is NaN).
#[track_caller]
pub fn ue8m0_to_f32(e: Val<u32>) -> Val<f32> {
    let normal = e << 23;
    let bits = e.eq(0u32).select(0x0040_0000u32, normal);
    e.eq(255u32).select(0x7fc0_0000u32, bits).bitcast()
}

/// 2^(e-127) as bf16 in both halves of a word (e = 0 is the subnormal 2^-127, 255 is NaN).
#[track_caller]
pub fn ue8m0_to_bf16x2(e: Val<u32>) -> Val<Bf16x2> {
    ue8m0_to_bf16x2_with(e, CvtPath::current())
}

/// [`ue8m0_to_bf16x2`] on a chosen path.
#[track_caller]
pub fn ue8m0_to_bf16x2_with(e: Val<u32>, path: CvtPath) -> Val<Bf16x2> {
    match path {
        CvtPath::Native => {
            let src = u32_to_b16(prmt(e, 0u32, 0x4400));
            Val::from_reg(emit(Ty::B32, |dst| {
                Op::Cvt(CvtOp::Ue8m0x2ToBf16x2 { dst, src })
            }))
        }
        CvtPath::Emulated => {
            let normal = e << 7;
            let bits = e.eq(0u32).select(0x0040u32, normal);
            let bits = e.eq(255u32).select(0x7fc0u32, bits);
            prmt(bits, 0u32, 0x1010).bitcast()
        }
    }
}

/// bf16 bits of 2^120: multiplies a bit-shifted e4m3 back to its value.
const BF16_TWO_POW_120: u16 = 0x7b80;

/// Four e4m3 bytes (element i in byte i) to bf16, exact: elements (0, 1) and (2, 3).
///
/// The e4m3 sign, exponent and mantissa bits moved to their bf16 places give the same value
/// times 2^-120 for normal and subnormal codes alike; one bf16 multiply by 2^120 restores it.
#[track_caller]
pub fn e4m3x4_to_bf16x4(word: Val<u32>) -> [Val<Bf16x2>; 2] {
    let two_pow_120 = bf16x2_splat_bits(BF16_TWO_POW_120);
    E4M3_PAIRS.map(|pair| bf16x2_mul(e4m3x2_shifted(word, pair), two_pow_120))
}

/// Four e4m3 bytes scaled by a bf16x2 `scale` (exact while the result stays in bf16's range).
#[track_caller]
pub fn e4m3x4_to_bf16x4_scaled(word: Val<u32>, scale: Val<Bf16x2>) -> [Val<Bf16x2>; 2] {
    e4m3x4_to_bf16x4(word).map(|pair| bf16x2_mul(pair, scale))
}

/// The largest ue8m0 byte whose scale times 2^120 bf16 holds (2^7 x 2^120 = 2^127): up to it
/// [`e4m3x4_to_bf16x4_by_ue8m0`] scales in one multiply a pair.
pub const UE8M0_ONE_MULTIPLY_MAX: u32 = 134;

/// The ue8m0 scale 2^(e-127) times 2^120, as bf16 in both halves: the factor of
/// [`e4m3x4_to_bf16x4_by_ue8m0`]. Exact for e <= [`UE8M0_ONE_MULTIPLY_MAX`] (e = 0 is the
/// subnormal scale 2^-127, as in [`ue8m0_to_bf16x2`]); +inf above, NaN's code included, so
/// that a larger scale shows as infinities and NaNs, never as wrong finite values.
#[track_caller]
pub fn ue8m0_times_2_pow_120(e: Val<u32>) -> Val<Bf16x2> {
    let biased = (e + 120u32).min(255u32);
    prmt(biased << 7, 0u32, 0x1010).bitcast()
}

/// Four e4m3 bytes times the ue8m0 scale whose [`ue8m0_times_2_pow_120`] is `factor`, in one
/// multiply a pair: bit-identical to [`e4m3x4_to_bf16x4_scaled`] by that scale (both round
/// the same exact product once) for every scale up to [`UE8M0_ONE_MULTIPLY_MAX`].
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::arch::cvt::{e4m3x4_to_bf16x4_by_ue8m0, ue8m0_times_2_pow_120};
/// use dsl_core::arch::memory::{load, store_vec};
/// use dsl_core::interp::{Arg, Launch, Memory, run};
/// use dsl_core::trace::{KernelParam, Tensor, Val, threads, trace_kernel};
///
/// // Word 0 holds the e4m3 codes of 1, -1, 2^-9 and 448; words 2-3 get them times 2^3
/// // (ue8m0 byte 130) as two bf16 pairs.
/// let kernel = trace_kernel("dequant", Target::Sm90a, || {
///     threads(1, 1, 1);
///     let x = Tensor::<u32, 1>::declare("x");
///     let word: Val<u32> = load(x.base());
///     let factor = ue8m0_times_2_pow_120(Val::<u32>::constant(130));
///     let pairs = e4m3x4_to_bf16x4_by_ue8m0(word, factor);
///     store_vec(x.base() + 8, pairs.map(|pair| pair.bitcast::<u32>()));
/// })
/// .unwrap();
/// let mut mem = Memory::new();
/// let x = mem.alloc_from("x", &[0x7e01_b838u32, 0, 0, 0]);
/// run(&kernel, &mut mem, &[Arg::contiguous(x, &[4])], &Launch::grid([1, 1, 1])).unwrap();
/// // 8 and -8; 2^-6 and 3584.
/// assert_eq!(mem.read::<u32>(x)[2..], [0xc100_4100, 0x4560_3c80]);
/// ```
#[track_caller]
pub fn e4m3x4_to_bf16x4_by_ue8m0(word: Val<u32>, factor: Val<Bf16x2>) -> [Val<Bf16x2>; 2] {
    E4M3_WIDENED_PAIRS.map(|pair| bf16x2_mul(e4m3x2_widened(word, pair), factor))
}

/// The `prmt` selectors of the pairs of e4m3 bytes (0, 1) and (2, 3) of a word: byte 2k to
/// bits 15..8 and byte 2k+1 to bits 31..24, zeros elsewhere.
const E4M3_PAIRS: [u32; 2] = [0x1404, 0x3424];

/// A pair of e4m3 bytes of `word` placed by the `prmt` selector `pair` ([`E4M3_PAIRS`])
/// with their bits moved to bf16's places: each value times 2^-120.
#[track_caller]
fn e4m3x2_shifted(word: Val<u32>, pair: impl IntoVal<u32>) -> Val<Bf16x2> {
    let t = prmt(word, 0u32, pair);
    (((t >> 4) & 0x07f0_07f0u32) | (t & 0x8000_8000u32)).bitcast()
}

/// The `prmt` selectors of [`e4m3x2_widened`]: byte 2k to bits 7..0 and byte 2k+1 to bits
/// 23..16, each widened to 16 bits by its sign (selector nibbles 8 + byte).
const E4M3_WIDENED_PAIRS: [u32; 2] = [0x9180, 0xb3a2];

/// [`e4m3x2_shifted`] in one op less: shifted left by 4, a sign-widened byte has its
/// exponent and mantissa at bf16's bits 10..4 and a copy of its sign at bit 15, so one mask
/// finishes it. Only the one-multiply dequant takes it: with the two-multiply pass on it too,
/// ptxas spilled 144 bytes at the streamed schedule's 128-register cap (sm_90a, H=16 NE 512
/// fp8), and without it none.
#[track_caller]
fn e4m3x2_widened(word: Val<u32>, pair: u32) -> Val<Bf16x2> {
    let widened = prmt(word, 0u32, pair);
    ((widened << 4) & 0x87f0_87f0u32).bitcast()
}

/// The e4m3 scale of a block of e2m1 values, in both halves of a word, in the form
/// [`e2m1x8_scaled`] multiplies by on its path: the exact scale where the values come from
/// the native `cvt`; on the emulated path the scale's bits moved to bf16's places (the scale
/// times 2^-120, exact for normal and subnormal codes alike), so that it takes no multiply
/// by 2^120: the values it looks up are times 2^120 instead.
#[derive(Clone, Copy)]
pub struct E2m1BlockScale {
    splat: Val<Bf16x2>,
    path: CvtPath,
}

/// Byte `byte % 4` (`byte` may be a run-time value) of `word` as the e4m3 scale of a block
/// of e2m1 values, for [`e2m1x8_scaled`].
#[track_caller]
pub fn e2m1_block_scale(word: Val<u32>, byte: Val<u32>) -> E2m1BlockScale {
    e2m1_block_scale_with(word, byte, CvtPath::current())
}

/// [`e2m1_block_scale`] on a chosen path; [`e2m1x8_scaled`] then takes the values on the
/// same path.
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::arch::cvt::{CvtPath, e2m1_block_scale_with, e2m1x8_scaled};
/// use dsl_core::arch::memory::{load, store_vec};
/// use dsl_core::interp::{Arg, Launch, Memory, run};
/// use dsl_core::trace::{KernelParam, Tensor, Val, threads, trace_kernel};
///
/// // The e2m1 codes of word 0 times the e4m3 scale 2 (byte 2 of word 1), on both paths
/// // (sm_100a has the native cvt): words 4-7 and 8-11.
/// let kernel = trace_kernel("fp4_paths", Target::Sm100a, || {
///     threads(1, 1, 1);
///     let x = Tensor::<u32, 1>::declare("x");
///     let word: Val<u32> = load(x.base());
///     let scales: Val<u32> = load(x.base() + 4);
///     for (path, at) in [(CvtPath::Emulated, 16), (CvtPath::Native, 32)] {
///         let scale = e2m1_block_scale_with(scales, Val::constant(2), path);
///         let pairs = e2m1x8_scaled(word, scale);
///         store_vec(x.base() + at, pairs.map(|pair| pair.bitcast::<u32>()));
///     }
/// })
/// .unwrap();
/// let mut mem = Memory::new();
/// let x = mem.alloc_from("x", &[0xf654_3219u32, 0x0040_0000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
/// run(&kernel, &mut mem, &[Arg::contiguous(x, &[12])], &Launch::grid([1, 1, 1])).unwrap();
/// let out = mem.read::<u32>(x);
/// // -1, 1; 2, 3; 4, 6; 8, -12.
/// assert_eq!(out[4..8], [0x3f80_bf80, 0x4040_4000, 0x40c0_4080, 0xc140_4100]);
/// assert_eq!(out[4..8], out[8..12]);
/// ```
#[track_caller]
pub fn e2m1_block_scale_with(word: Val<u32>, byte: Val<u32>, path: CvtPath) -> E2m1BlockScale {
    // Selector nibbles 4, byte, 4, byte: the byte at bits 15..8 and 31..24, zeros below.
    let moved = e4m3x2_shifted(word, (byte & 3u32) * 0x1010u32 + 0x0404u32);
    let splat = match path {
        CvtPath::Native => bf16x2_mul(moved, bf16x2_splat_bits(BF16_TWO_POW_120)),
        CvtPath::Emulated => moved,
    };
    E2m1BlockScale { splat, path }
}

/// The eight e2m1 values of `word` (element i in nibble i, low nibble first) as bf16,
/// exact: elements (0, 1), (2, 3), (4, 5) and (6, 7).
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::arch::cvt::e2m1x8_to_bf16x8;
/// use dsl_core::arch::memory::{load, store_vec};
/// use dsl_core::interp::{Arg, Launch, Memory, run};
/// use dsl_core::trace::{KernelParam, Tensor, Val, threads, trace_kernel};
///
/// // Word 0 holds the e2m1 codes of -0.5, 0.5, 1, 1.5, 2, 3, 4 and -6, low nibble first;
/// // words 4-7 get them as four bf16 pairs.
/// let kernel = trace_kernel("fp4", Target::Sm90a, || {
///     threads(1, 1, 1);
///     let x = Tensor::<u32, 1>::declare("x");
///     let word: Val<u32> = load(x.base());
///     let pairs = e2m1x8_to_bf16x8(word);
///     store_vec(x.base() + 16, pairs.map(|pair| pair.bitcast::<u32>()));
/// })
/// .unwrap();
/// let mut mem = Memory::new();
/// let x = mem.alloc_from("x", &[0xf654_3219u32, 0, 0, 0, 0, 0, 0, 0]);
/// run(&kernel, &mut mem, &[Arg::contiguous(x, &[8])], &Launch::grid([1, 1, 1])).unwrap();
/// assert_eq!(
///     mem.read::<u32>(x)[4..],
///     [0x3f00_bf00, 0x3fc0_3f80, 0x4040_4000, 0xc0c0_4080]
/// );
/// ```
#[track_caller]
pub fn e2m1x8_to_bf16x8(word: Val<u32>) -> [Val<Bf16x2>; 4] {
    e2m1x8_to_bf16x8_with(word, CvtPath::current())
}

/// The low bytes, then the high bytes, of the bf16 values of the e2m1 magnitudes 0, 0.5, 1,
/// 1.5, 2, 3, 4 and 6: each the 8-byte pool of a `prmt` that looks them up by magnitude.
const E2M1_BF16_LOW_BYTES: [u32; 2] = [0xc080_0000, 0xc080_4000];
const E2M1_BF16_HIGH_BYTES: [u32; 2] = [0x3f3f_3f00, 0x4040_4040];
/// The high bytes of the same magnitudes times 2^120 (exponents 120 up: the low bytes stay),
/// for [`e2m1x8_scaled`]'s emulated path.
const E2M1_BF16_HIGH_BYTES_TIMES_2_POW_120: [u32; 2] = [0x7b7b_7b00, 0x7c7c_7c7c];

/// `prmt` selectors that take the signs of elements (0..4) and (4..8) of a word to the
/// msb of bytes 0..4, from the word shifted left by 4 (bytes 0-3: the even elements' sign
/// bits at each byte's msb) and the word itself (bytes 4-7: the odd elements'), each byte
/// widened from its msb (nibbles 8 + byte).
const E2M1_SIGN_SELECTORS: [u32; 2] = [0xd9c8, 0xfbea];

/// [`e2m1x8_to_bf16x8`] on a chosen path.
///
/// The emulated path looks the values up instead of moving bits: a `prmt` whose selector
/// is four 3-bit magnitudes picks four bytes of a table, so two lookups give four values'
/// low and high bytes, a third gathers their signs, and two more interleave them into two
/// bf16 pairs: 15 integer ops for eight values, and no multiply (bits moved to bf16's
/// places give the value times 2^-126, which takes one).
#[track_caller]
pub fn e2m1x8_to_bf16x8_with(word: Val<u32>, path: CvtPath) -> [Val<Bf16x2>; 4] {
    match path {
        CvtPath::Native => std::array::from_fn(|byte| e2m1x2_native(word, byte as u8)),
        CvtPath::Emulated => e2m1x8_looked_up(word, E2M1_BF16_HIGH_BYTES),
    }
}

/// The eight e2m1 values of `word` times `scale`, each product rounded once to bf16: pairs
/// as [`e2m1x8_to_bf16x8`]'s. On the emulated path the values are looked up times 2^120 and
/// the scale is times 2^-120 ([`E2m1BlockScale`]): the same exact product, with the scale's
/// multiply by 2^120 saved.
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::arch::cvt::{e2m1_block_scale, e2m1x8_scaled};
/// use dsl_core::arch::memory::{load, store_vec};
/// use dsl_core::interp::{Arg, Launch, Memory, run};
/// use dsl_core::trace::{KernelParam, Tensor, Val, threads, trace_kernel};
///
/// // Word 0 holds the e2m1 codes of -0.5, 0.5, 1, 1.5, 2, 3, 4 and -6, low nibble first;
/// // byte 1 of word 1 the e4m3 scale 2^-9 (a subnormal code); words 4-7 get the values
/// // times it as four bf16 pairs.
/// let kernel = trace_kernel("fp4", Target::Sm90a, || {
///     threads(1, 1, 1);
///     let x = Tensor::<u32, 1>::declare("x");
///     let word: Val<u32> = load(x.base());
///     let scales: Val<u32> = load(x.base() + 4);
///     let scale = e2m1_block_scale(scales, Val::constant(1));
///     let pairs = e2m1x8_scaled(word, scale);
///     store_vec(x.base() + 16, pairs.map(|pair| pair.bitcast::<u32>()));
/// })
/// .unwrap();
/// let mut mem = Memory::new();
/// let x = mem.alloc_from("x", &[0xf654_3219u32, 0x0100, 0, 0, 0, 0, 0, 0]);
/// run(&kernel, &mut mem, &[Arg::contiguous(x, &[8])], &Launch::grid([1, 1, 1])).unwrap();
/// assert_eq!(
///     mem.read::<u32>(x)[4..],
///     [0x3a80_ba80, 0x3b40_3b00, 0x3bc0_3b80, 0xbc40_3c00]
/// );
/// ```
#[track_caller]
pub fn e2m1x8_scaled(word: Val<u32>, scale: E2m1BlockScale) -> [Val<Bf16x2>; 4] {
    let values = match scale.path {
        CvtPath::Native => e2m1x8_to_bf16x8_with(word, CvtPath::Native),
        CvtPath::Emulated => e2m1x8_looked_up(word, E2M1_BF16_HIGH_BYTES_TIMES_2_POW_120),
    };
    values.map(|pair| bf16x2_mul(pair, scale.splat))
}

/// The emulated e2m1 lookup of [`e2m1x8_to_bf16x8_with`], with `high_bytes` the pool of the
/// values' high bytes (their low bytes are the same at any even power of two).
#[track_caller]
fn e2m1x8_looked_up(word: Val<u32>, high_bytes: [u32; 2]) -> [Val<Bf16x2>; 4] {
    let magnitudes = word & 0x7777_7777u32;
    let even_signs = word << 4;
    let [low_half, high_half] = [(magnitudes, 0), (magnitudes >> 16, 1)].map(|(selector, half)| {
        let low = prmt_lookup(E2M1_BF16_LOW_BYTES, selector);
        let high = prmt_lookup(high_bytes, selector);
        let signs = prmt(even_signs, word, E2M1_SIGN_SELECTORS[half]);
        let high = high | (signs & 0x8080_8080u32);
        [prmt(low, high, 0x5140), prmt(low, high, 0x7362)]
    });
    [low_half[0], low_half[1], high_half[0], high_half[1]].map(|pair| pair.bitcast())
}

/// The e2m1 pair in byte `byte` of `word` by `cvt.rn.f16x2.e2m1x2`, then through f32 to
/// bf16 (all exact).
#[track_caller]
fn e2m1x2_native(word: Val<u32>, byte: u8) -> Val<Bf16x2> {
    if let Err(e) = rules::e2m1_byte(byte) {
        trace_error(e);
    }
    let src = word.reg();
    let halves = emit(Ty::B32, |dst| {
        Op::Cvt(CvtOp::E2m1x2ToF16x2 { dst, src, byte })
    });
    let (lo, hi) = split_b32(Val::from_reg(halves));
    let [lo, hi] = [lo, hi].map(|h| {
        Val::<f32>::from_reg(emit(Ty::F32, |dst| {
            Op::Cvt(CvtOp::F16ToF32 { dst, src: h })
        }))
    });
    f32x2_to_bf16x2(lo, hi)
}

/// Four bytes of the 8-byte `table` (bytes 0-3 in its first word), picked by the four
/// selector nibbles in bits 15..0 of `selector` (each 0..8).
#[track_caller]
fn prmt_lookup(table: [u32; 2], selector: Val<u32>) -> Val<u32> {
    prmt(Val::<u32>::constant(table[0]), table[1], selector)
}

/// The two b16 halves of a word (`mov.b32 {lo, hi}, w`).
#[track_caller]
fn split_b32(word: Val<u32>) -> (crate::ir::Reg, crate::ir::Reg) {
    let loc = crate::ir::SourceLoc::caller();
    crate::trace::with_builder(|b| {
        let lo = b.new_reg(Ty::B16);
        let hi = b.new_reg(Ty::B16);
        b.push(
            Op::Alu(AluOp::Unpack {
                lo,
                hi,
                src: word.reg(),
            }),
            loc,
        );
        (lo, hi)
    })
}
