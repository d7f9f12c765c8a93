//! The narrow number formats of `ir::cvt`, modelled bit for bit: bf16, f16, e4m3, e2m1 and
//! ue8m0, and packed bf16x2 arithmetic. Written from the format definitions (PTX ISA 9.1
//! §5.2.5 alternate floating-point formats, §9.7.9.21 `cvt`), independent of the `half`
//! crate and of the `kernels` crate's own format code, so each can check the other.
//!
//! Packing: in every x2 conversion the IR's `lo` is the PTX operand `b` (low half) and
//! `hi` is `a` (high half).

/// bf16 NaN as the hardware writes it.
pub(crate) const BF16_NAN: u16 = 0x7fff;
/// f16 NaN as the hardware writes it.
pub(crate) const F16_NAN: u16 = 0x7fff;

/// 2^k for k in the normal f64 exponent range, built from its bits (exact).
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Rounds a finite or infinite f64 to a binary format with `mant` explicit mantissa bits
/// and exponent bias `bias` (max finite exponent `emax`), round to nearest even, subnormals
/// kept; returns (sign, magnitude bits) where magnitude overflow gives the infinity code
/// `((emax + bias + 1) << mant)`. The f64 must itself be the exact value or rounded to odd
/// with at least `mant + 2` more bits, so that this single rounding is correct.
fn round_to_format(x: f64, mant: u32, bias: i32, emax: i32) -> (bool, u64) {
    let sign = x.is_sign_negative();
    let a = x.abs();
    let inf_code = ((emax + bias + 1) as u64) << mant;
    if a.is_infinite() {
        return (sign, inf_code);
    }
    if a == 0.0 {
        return (sign, 0);
    }
    let emin = 1 - bias;
    // Exponent of the leading bit, clamped to the subnormal range's quantum.
    let e = (a.to_bits() >> 52) as i32 - 1023;
    let e = if e == -1023 {
        // f64 subnormal input: far below any target's range, rounds to zero or the
        // smallest subnormal; handle through the generic path with its true exponent.
        a.log2().floor() as i32
    } else {
        e
    };
    let e = e.max(emin);
    // Quantum 2^(e - mant): scale so the quantum is 1 (exact: a power-of-two scaling).
    let scaled = a * pow2(mant as i32 - e);
    let q = scaled.round_ties_even();
    let mut q = q as u64;
    let mut e = e;
    if q >= 2 << mant {
        // Rounded up into the next binade.
        q >>= 1;
        e += 1;
    }
    if e > emax {
        return (sign, inf_code);
    }
    if q < 1 << mant {
        // Subnormal (only possible at e == emin): exponent field 0.
        return (sign, q);
    }
    let field = (e + bias) as u64;
    (sign, field << mant | (q - (1 << mant)))
}

/// f32 -> bf16, round to nearest even (`cvt.rn.bf16x2.f32` per half); NaN -> canonical NaN.
pub(crate) fn f32_to_bf16(x: f32) -> u16 {
    f64_to_bf16(x as f64)
}

/// An f64 (exact, or rounded to odd with >= 10 bits to spare) -> bf16, RNE, NaN canonical.
pub(crate) fn f64_to_bf16(x: f64) -> u16 {
    if x.is_nan() {
        return BF16_NAN;
    }
    let (s, mag) = round_to_format(x, 7, 127, 127);
    (s as u16) << 15 | mag as u16
}

pub(crate) fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f16 bits -> f32, exact.
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = (h >> 10) & 0x1f;
    let m = (h & 0x3ff) as f32;
    let v = match e {
        0 => m * (2f32).powi(-24),
        31 if m == 0.0 => f32::INFINITY,
        31 => return f32::NAN,
        _ => (1.0 + m / 1024.0) * (2f32).powi(e as i32 - 15),
    };
    sign * v
}

/// f64 -> f16 bits, round to nearest even (one rounding), subnormals kept, NaN canonical.
pub(crate) fn f64_to_f16(x: f64) -> u16 {
    if x.is_nan() {
        return F16_NAN;
    }
    let (s, mag) = round_to_format(x, 10, 15, 15);
    (s as u16) << 15 | mag as u16
}

/// f32 -> f16 bits (exact for every value the callers pass: e4m3 and e2m1 values).
pub(crate) fn f32_to_f16(x: f32) -> u16 {
    f64_to_f16(x as f64)
}

/// OCP e4m3 (E4M3FN): bias 7, no infinities, NaN = S.1111.111, max finite 448.
pub(crate) fn e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = (b >> 3) & 0xf;
    let m = (b & 7) as f32;
    if e == 0xf && b & 7 == 7 {
        return f32::NAN;
    }
    let v = if e == 0 {
        m * (2f32).powi(-9)
    } else {
        (1.0 + m / 8.0) * (2f32).powi(e as i32 - 7)
    };
    sign * v
}

/// `cvt.rn.satfinite.e4m3x2.f32` per value: round to nearest even; `.satfinite` (PTX
/// §9.7.9.21): NaN -> NaN (0x7f), |x| > 448 (infinities included) -> sign-preserved 448.
pub(crate) fn f32_to_e4m3_satfinite(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7f;
    }
    let sign = (x.is_sign_negative() as u8) << 7;
    if x.abs() > 448.0 {
        return sign | 0x7e;
    }
    // Exponent field 15 is a normal binade up to 448 (only mantissa 7 is NaN); rounding a
    // value <= 448 never reaches 480, so emax = 8 with bias 7 is exact here.
    let (_, mag) = round_to_format(x as f64, 3, 7, 8);
    sign | mag as u8
}

/// e2m1 (OCP FP4): bias 1, values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
pub(crate) fn e2m1_to_f32(n: u8) -> f32 {
    const MAG: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let v = MAG[(n & 7) as usize];
    if n & 8 != 0 { -v } else { v }
}

/// `cvt.rp.satfinite.ue8m0x2.f32` per value: the biased exponent of the smallest power of
/// two >= |x|. ue8m0 has no zero and no sign: codes 0..=254 are 2^-127..2^127, 255 is NaN.
/// - NaN -> 255 (`.satfinite`: "if the input value is NaN, then the result is NaN").
/// - |x| above 2^127 (infinity included) -> 254: "the result is ... a positive MAX_NORM in
///   .ue8m0x2 for which the destination sign is not supported" (PTX §9.7.9.21 `.satfinite`).
/// - The sign is dropped: the magnitude is rounded (the same clause; CUDA 12.8's
///   `__nv_cvt_float_to_e8m0` host fallback in cuda_fp8.hpp, which models this instruction,
///   rounds `|x|` up).
/// - Zero and every |x| <= 2^-127 (subnormals included) -> 0, i.e. 2^-127: the smallest
///   code is the round-up of anything not above it.
pub(crate) fn f32_to_ue8m0_rp_satfinite(x: f32) -> u8 {
    if x.is_nan() {
        return 255;
    }
    let bits = x.to_bits() & 0x7fff_ffff;
    let exp = bits >> 23;
    let mant = bits & 0x7f_ffff;
    let e = if exp == 0 {
        // Subnormal m * 2^-149: above 2^-127 = 2^22 * 2^-149 it rounds up to 2^-126.
        (mant > 1 << 22) as u32
    } else if exp == 255 {
        254
    } else {
        exp + (mant != 0) as u32
    };
    e.min(254) as u8
}

/// `cvt.rn.bf16x2.ue8m0x2` per value: 2^(e-127) as bf16; e = 0 is the bf16 subnormal
/// 2^-127 (0x0040), e = 255 is NaN.
pub(crate) fn ue8m0_to_bf16(e: u8) -> u16 {
    match e {
        0 => 0x0040,
        255 => BF16_NAN,
        e => (e as u16) << 7,
    }
}

/// Rounds the exact f64 sum `p + c` to odd (TwoSum gives the error term), so that one more
/// rounding to a format of <= 51 bits is a correct single rounding of the exact sum.
pub(crate) fn add_round_to_odd(p: f64, c: f64) -> f64 {
    let s = p + c;
    if !s.is_finite() || s == 0.0 {
        return s;
    }
    let v = s - p;
    let err = (p - (s - v)) + (c - v);
    if err != 0.0 && s.to_bits() & 1 == 0 {
        let up = (err > 0.0) == (s > 0.0);
        f64::from_bits(if up { s.to_bits() + 1 } else { s.to_bits() - 1 })
    } else {
        s
    }
}

/// `mul.rn.bf16x2` per half: the product is exact in f64 (8-bit significands), rounded
/// once to bf16 (RNE, subnormals kept, NaN canonical).
pub(crate) fn bf16_mul(a: u16, b: u16) -> u16 {
    f64_to_bf16(bf16_to_f32(a) as f64 * bf16_to_f32(b) as f64)
}

/// `fma.rn.bf16x2` per half: a * b + c with a single rounding to bf16.
pub(crate) fn bf16_fma(a: u16, b: u16, c: u16) -> u16 {
    let p = bf16_to_f32(a) as f64 * bf16_to_f32(b) as f64;
    f64_to_bf16(add_round_to_odd(p, bf16_to_f32(c) as f64))
}

/// The packed op of a `CvtOp`, specialised when compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Packed {
    /// `cvt.rn.bf16x2.f32 d, hi, lo`.
    F32x2ToBf16x2,
    /// `cvt.rn.satfinite.e4m3x2.f32 d, hi, lo` (b16 result).
    F32x2ToE4m3x2,
    /// `cvt.rn.f16x2.e4m3x2 d, a`: byte 0 -> low half, byte 1 -> high half.
    E4m3x2ToF16x2,
    /// `cvt.rn.f16x2.e2m1x2` of byte `n` of a b32: low nibble -> low half.
    E2m1x2ToF16x2(u8),
    /// `cvt.rp.satfinite.ue8m0x2.f32 d, hi, lo` (b16 result).
    F32x2ToUe8m0x2,
    /// `cvt.rn.bf16x2.ue8m0x2 d, a`: byte 0 -> low half.
    Ue8m0x2ToBf16x2,
    /// `cvt.f32.f16`.
    F16ToF32,
    Bf16x2Mul,
    Bf16x2Fma,
}

/// One lane of a packed conversion: operands `(x, y, z)` are `(lo, hi, _)` for the
/// f32-pair forms, `(src, _, _)` for the unpacking forms and `(a, b, c)` for arithmetic.
pub(crate) fn packed(op: Packed, x: u64, y: u64, z: u64) -> u64 {
    let f = |v: u64| f32::from_bits(v as u32);
    let halves = |v: u64| (v as u16, (v >> 16) as u16);
    match op {
        Packed::F32x2ToBf16x2 => (f32_to_bf16(f(y)) as u64) << 16 | f32_to_bf16(f(x)) as u64,
        Packed::F32x2ToE4m3x2 => {
            (f32_to_e4m3_satfinite(f(y)) as u64) << 8 | f32_to_e4m3_satfinite(f(x)) as u64
        }
        Packed::E4m3x2ToF16x2 => {
            let lo = f32_to_f16(e4m3_to_f32(x as u8));
            let hi = f32_to_f16(e4m3_to_f32((x >> 8) as u8));
            (hi as u64) << 16 | lo as u64
        }
        Packed::E2m1x2ToF16x2(byte) => {
            let b = (x >> (8 * byte)) as u8;
            let lo = f32_to_f16(e2m1_to_f32(b & 0xf));
            let hi = f32_to_f16(e2m1_to_f32(b >> 4));
            (hi as u64) << 16 | lo as u64
        }
        Packed::F32x2ToUe8m0x2 => {
            (f32_to_ue8m0_rp_satfinite(f(y)) as u64) << 8 | f32_to_ue8m0_rp_satfinite(f(x)) as u64
        }
        Packed::Ue8m0x2ToBf16x2 => {
            (ue8m0_to_bf16((x >> 8) as u8) as u64) << 16 | ue8m0_to_bf16(x as u8) as u64
        }
        Packed::F16ToF32 => super::alu::f32_bits(f16_to_f32(x as u16)),
        Packed::Bf16x2Mul => {
            let ((al, ah), (bl, bh)) = (halves(x), halves(y));
            (bf16_mul(ah, bh) as u64) << 16 | bf16_mul(al, bl) as u64
        }
        Packed::Bf16x2Fma => {
            let ((al, ah), (bl, bh), (cl, ch)) = (halves(x), halves(y), halves(z));
            (bf16_fma(ah, bh, ch) as u64) << 16 | bf16_fma(al, bl, cl) as u64
        }
    }
}
