//! bfloat16 through the `half` crate, whose `bf16::from_f32` rounds to nearest even like
//! `cvt.rn.bf16x2.f32` for every non-NaN input (overflow goes to infinity in both; checked
//! against that instruction on an sm_90 GPU for all non-NaN f32). NaN inputs are not
//! covered: `half` keeps a NaN's upper payload bits, and nothing here rounds a NaN.

pub use half::bf16;

/// `x` rounded to nearest even, like one lane of `cvt.rn.bf16x2.f32`.
pub fn round(x: f32) -> bf16 {
    bf16::from_f32(x)
}

/// `x` as bf16 when it is finite and bf16 holds it exactly; `None` otherwise.
pub fn exact(x: f32) -> Option<bf16> {
    let rounded = bf16::from_f32(x);
    (x.is_finite() && rounded.to_f32() == x).then_some(rounded)
}

/// Two values packed like `cvt.rn.bf16x2.f32 d, a, b`: `a` in bits 31:16, `b` in 15:0.
pub fn round_x2(a: f32, b: f32) -> u32 {
    u32::from(round(a).to_bits()) << 16 | u32::from(round(b).to_bits())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between 1.0 and 1 + 2^-7: ties to 1.0 (even mantissa).
        assert_eq!(round(1.0 + 2f32.powi(-8)).to_bits(), 0x3F80);
        // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to the even 1 + 2^-6.
        assert_eq!(round(1.0 + 3.0 * 2f32.powi(-8)).to_bits(), 0x3F82);
        assert_eq!(round(f32::from_bits(0x3F80_8001)).to_bits(), 0x3F81);
        assert_eq!(round(f32::MAX).to_bits(), 0x7F80);
        assert_eq!(round(-0.0).to_bits(), 0x8000);
    }

    #[test]
    fn exact_only_when_nothing_is_lost() {
        assert_eq!(exact(1.5).map(bf16::to_bits), Some(0x3FC0));
        assert_eq!(exact(1.0 + 2f32.powi(-8)), None);
        assert_eq!(exact(f32::INFINITY), None);
        assert_eq!(exact(f32::NAN), None);
        // The smallest bf16 subnormal is 2^-133; half of it is lost.
        assert!(exact(2f32.powi(-133)).is_some());
        assert_eq!(exact(2f32.powi(-134)), None);
    }

    #[test]
    fn packs_the_first_operand_high() {
        assert_eq!(round_x2(1.0, -2.0), 0x3F80_C000);
    }
}
