//! Number formats of the V4.1 KV cache and the MXFP8 output, bit-exact on the host.
//!
//! One module per format family. Every encoder reproduces the rounding of the PTX `cvt`
//! instruction the kernel uses for it (PTX ISA 9.1, §9.7.9.21 `cvt`), so host-side encoders,
//! the CPU interpreter and the GPU agree byte for byte:
//!
//! | module | format | encoder matches |
//! | --- | --- | --- |
//! | [`e4m3`] | OCP FP8 E4M3FN (no inf, NaN 0x7F/0xFF, max 448) | `cvt.rn.satfinite.e4m3x2.f32` |
//! | [`e2m1`] | FP4 E2M1, ±{0, 0.5, 1, 1.5, 2, 3, 4, 6} | `cvt.rn.satfinite.e2m1x2.f32` |
//! | [`ue8m0`] | unsigned power of two 2^(e-127), NaN 0xFF | `cvt.rp.satfinite.ue8m0x2.f32` |
//! | [`bf16`] | bfloat16 (through the `half` crate) | `cvt.rn.bf16x2.f32` |
//! | [`mxfp8`] | 32-value blocks of e4m3 codes sharing one ue8m0 scale | the kernel's output cast |
//!
//! The `x2` helpers pack like the PTX instructions: the first operand goes to the upper half.

pub mod bf16;
pub mod e2m1;
pub mod e4m3;
pub mod mxfp8;
pub mod ue8m0;

/// 2^k for k in f64's normal exponent range, built from its bits (exact, and cheaper than
/// `powi`, which is a library call).
fn pow2(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Rounds a finite `magnitude >= 0` to the nearest value of a binary minifloat with
/// `mantissa_bits` explicit mantissa bits whose smallest normal exponent is `min_normal_exp`
/// (unbiased), ties to even, and returns its magnitude code (exponent field, then mantissa).
///
/// The code is not clamped: a value past the largest finite one yields a larger code, and
/// each format saturates it. One formula covers subnormals and normals because a subnormal
/// code is its mantissa over the smallest normal quantum, and a mantissa that rounds up to
/// the next binade carries into the exponent field on its own.
fn round_magnitude_to_nearest_even(magnitude: f64, mantissa_bits: u32, min_normal_exp: i32) -> u32 {
    debug_assert!(magnitude.is_finite() && magnitude >= 0.0);
    let exp = if magnitude == 0.0 {
        min_normal_exp
    } else {
        // Callers pass f32 values, which are all normal as f64: the exponent field is exact.
        (((magnitude.to_bits() >> 52) & 0x7FF) as i32 - 1023).max(min_normal_exp)
    };
    let quantum = pow2(exp - mantissa_bits as i32);
    // Division by a power of two is exact, so this is the only rounding step.
    let mantissa = (magnitude / quantum).round_ties_even() as u32;
    (((exp - min_normal_exp) as u32) << mantissa_bits) + mantissa
}
