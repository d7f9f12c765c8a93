//! UE8M0: an unsigned 8-bit exponent, value 2^(e - 127) for e in 0..=254 (2^-127 to 2^127);
//! 0xFF is NaN; no zero, no infinity.

/// The NaN code.
pub const NAN: u8 = 0xFF;
/// Code of the largest value, 2^127.
pub const MAX_CODE: u8 = 0xFE;
/// Exponent bias: code 127 is 1.0.
pub const BIAS: i32 = 127;

/// 2^(code - 127) as f32 (code 0 is the f32 subnormal 2^-127), NaN for 0xFF.
pub fn decode(code: u8) -> f32 {
    if code == NAN {
        return f32::NAN;
    }
    // 2^-127 is the only value below f32's normal range and is still exact as a subnormal.
    super::pow2(i32::from(code) - BIAS) as f32
}

/// `x` rounded up to a power of two exactly like one lane of `cvt.rp.satfinite.ue8m0x2.f32`.
///
/// - The result is the smallest 2^k >= |x| with k in -127..=127: exact powers of two map to
///   themselves; anything just above 2^k goes to 2^(k+1).
/// - Zero and every subnormal up to 2^-127 give code 0 (2^-127); subnormals above 2^-127 give
///   code 1 (2^-126).
/// - Above 2^127 (infinity included) `.satfinite` saturates to 0xFE (2^127); NaN gives 0xFF.
/// - The sign is ignored (the format has none).
///
/// Sources: PTX ISA 9.1 §9.7.9.21 (`cvt`, `.rp` and `.satfinite`: NaN stays NaN, values above
/// MAX_NORM give "a positive MAX_NORM in .ue8m0x2"); the ISA leaves zero, subnormals and
/// negative inputs implicit. Zero and subnormals follow NVIDIA TransformerEngine's host
/// emulation of this instruction (`float_to_e8m0`, its path for GPUs without it), which is the
/// round-toward-+inf result. Ignoring the sign follows PyTorch's `_cvt_e8m0_rceil_aten`, whose
/// sm_100 test compares it with this instruction on negative inputs; the decode kernel only
/// converts amax / 448 >= 1e-10 / 448, so neither corner reaches it.
pub fn encode_round_up(x: f32) -> u8 {
    if x.is_nan() {
        return NAN;
    }
    let bits = x.abs().to_bits();
    let exp_field = bits >> 23;
    let mantissa = bits & 0x7F_FFFF;
    let code = if exp_field == 0 {
        // Subnormal f32: 2^-127 is mantissa 0x40_0000.
        if mantissa <= 0x40_0000 { 0 } else { 1 }
    } else if mantissa == 0 {
        exp_field
    } else {
        exp_field + 1
    };
    code.min(u32::from(MAX_CODE)) as u8
}

/// Two values packed like `cvt.rp.satfinite.ue8m0x2.f32 d, a, b`: `a` in bits 15:8, `b` in 7:0.
pub fn encode_round_up_x2(a: f32, b: f32) -> u16 {
    u16::from(encode_round_up(a)) << 8 | u16::from(encode_round_up(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pow2(k: i32) -> f32 {
        2f64.powi(k) as f32
    }

    #[test]
    fn decodes_every_code() {
        for code in 0..=254u8 {
            let value = decode(code);
            assert_eq!(
                f64::from(value),
                2f64.powi(i32::from(code) - 127),
                "code {code}"
            );
        }
        assert_eq!(decode(0).to_bits(), 0x0040_0000);
        assert_eq!(decode(127), 1.0);
        assert!(decode(NAN).is_nan());
    }

    #[test]
    fn every_code_survives_decode_then_encode() {
        for code in 0..=255u8 {
            assert_eq!(encode_round_up(decode(code)), code, "code {code}");
        }
    }

    #[test]
    fn rounds_up_at_and_around_each_power_of_two() {
        for k in -126..=126 {
            let at = pow2(k);
            let code = (k + BIAS) as u8;
            assert_eq!(encode_round_up(at), code, "2^{k}");
            // 2^k (1 + 2^-23): one ulp above goes up a binade.
            assert_eq!(
                encode_round_up(f32::from_bits(at.to_bits() + 1)),
                code + 1,
                "2^{k}+"
            );
            // 2^k (1 - 2^-24): one ulp below stays at 2^k.
            assert_eq!(
                encode_round_up(f32::from_bits(at.to_bits() - 1)),
                code,
                "2^{k}-"
            );
        }
        assert_eq!(encode_round_up(3.0), 129);
        assert_eq!(encode_round_up(0.75), 127);
    }

    #[test]
    fn zero_and_subnormals_round_up_to_the_smallest_codes() {
        assert_eq!(encode_round_up(0.0), 0);
        assert_eq!(encode_round_up(-0.0), 0);
        assert_eq!(encode_round_up(f32::from_bits(1)), 0);
        assert_eq!(encode_round_up(pow2(-127)), 0);
        assert_eq!(encode_round_up(f32::from_bits(0x40_0001)), 1);
        assert_eq!(encode_round_up(f32::from_bits(0x7F_FFFF)), 1);
        assert_eq!(encode_round_up(f32::MIN_POSITIVE), 1);
    }

    #[test]
    fn saturates_above_two_to_the_127() {
        assert_eq!(encode_round_up(pow2(127)), MAX_CODE);
        assert_eq!(
            encode_round_up(f32::from_bits(pow2(127).to_bits() + 1)),
            MAX_CODE
        );
        assert_eq!(encode_round_up(f32::MAX), MAX_CODE);
        assert_eq!(encode_round_up(f32::INFINITY), MAX_CODE);
        assert_eq!(encode_round_up(f32::NAN), NAN);
    }

    #[test]
    fn ignores_the_sign() {
        assert_eq!(encode_round_up(-3.0), encode_round_up(3.0));
        assert_eq!(encode_round_up(f32::NEG_INFINITY), MAX_CODE);
    }

    #[test]
    fn packs_the_first_operand_high() {
        assert_eq!(encode_round_up_x2(1.0, 3.0), 0x7F81);
    }
}
