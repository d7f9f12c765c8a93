//! OCP FP8 E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinity; 0x7F and 0xFF
//! are NaN; the largest finite value is 0x7E = 448; subnormals are m * 2^-9.

/// Largest finite e4m3 value.
pub const MAX: f32 = 448.0;
/// The NaN code `cvt` produces.
pub const NAN: u8 = 0x7F;
/// Code of +448 (OR the sign bit 0x80 for -448).
pub const MAX_CODE: u8 = 0x7E;

const SIGN: u8 = 0x80;
const MANTISSA_BITS: u32 = 3;
const MIN_NORMAL_EXP: i32 = -6;

/// The exact value of an e4m3 code.
pub fn decode(code: u8) -> f32 {
    let magnitude = code & !SIGN;
    if magnitude == NAN {
        return f32::NAN;
    }
    let exp_field = i32::from(magnitude >> MANTISSA_BITS);
    let mantissa = f32::from(magnitude & 0x7);
    let value = if exp_field == 0 {
        mantissa * super::pow2(MIN_NORMAL_EXP - MANTISSA_BITS as i32) as f32
    } else {
        (1.0 + mantissa / 8.0) * super::pow2(exp_field - 7) as f32
    };
    if code & SIGN != 0 { -value } else { value }
}

/// `x` rounded to e4m3 exactly like one lane of `cvt.rn.satfinite.e4m3x2.f32`: round to nearest
/// even; any magnitude above 448 (infinity included) saturates to ±448, keeping the sign; NaN
/// gives the NaN code 0x7F; the sign of zero is kept (-0.0 and negative underflow give 0x80).
///
/// Source: PTX ISA 9.1 §9.7.9.21 (`cvt`, `.satfinite`: "if the input value is NaN, then the
/// result is NaN in the specified destination format. If the absolute value of input (ignoring
/// sign) is greater than MAX_NORM of the specified destination format, then the result is
/// sign-preserved MAX_NORM of the destination format"). Bit-exact with that instruction on an
/// sm_90 GPU for every f32 input, NaN of either sign included (which gives 0x7F).
pub fn encode(x: f32) -> u8 {
    if x.is_nan() {
        return NAN;
    }
    let sign = if x.is_sign_negative() { SIGN } else { 0 };
    let magnitude = f64::from(x.abs());
    if magnitude > f64::from(MAX) {
        return sign | MAX_CODE;
    }
    let code = super::round_magnitude_to_nearest_even(magnitude, MANTISSA_BITS, MIN_NORMAL_EXP);
    // (448, 464] rounds to 448 anyway; nothing at or below 448 rounds past it.
    sign | code.min(u32::from(MAX_CODE)) as u8
}

/// Two values packed like `cvt.rn.satfinite.e4m3x2.f32 d, a, b`: `a` in bits 15:8, `b` in 7:0.
pub fn encode_x2(a: f32, b: f32) -> u16 {
    u16::from(encode(a)) << 8 | u16::from(encode(b))
}

/// The two values of a packed pair, upper byte first (the inverse of [`encode_x2`]).
pub fn decode_x2(pair: u16) -> (f32, f32) {
    (decode((pair >> 8) as u8), decode(pair as u8))
}

/// True for the two NaN codes.
pub fn is_nan(code: u8) -> bool {
    code & !SIGN == NAN
}

/// How many adjacent codes, in value order, separate `a` from `b`; `None` when exactly one of
/// them is NaN (two NaN codes are 0 apart).
///
/// +0 (0x00) and -0 (0x80) are the same value and 0 steps apart; the smallest subnormals on
/// either side of zero (0x01 and 0x81) are 1 step from zero and 2 steps from each other.
pub fn code_steps(a: u8, b: u8) -> Option<u32> {
    match (is_nan(a), is_nan(b)) {
        (true, true) => Some(0),
        (false, false) => Some(rank(a).abs_diff(rank(b))),
        _ => None,
    }
}

/// Position of a finite code on the number line: magnitude codes grow with the value, so the
/// signed magnitude code orders all finite codes, with both zeros at 0.
fn rank(code: u8) -> i32 {
    let magnitude = i32::from(code & !SIGN);
    if code & SIGN != 0 {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_hand_computed_codes() {
        let table: [(u8, f32); 12] = [
            (0x00, 0.0),
            (0x01, 2f32.powi(-9)),
            (0x07, 7.0 * 2f32.powi(-9)),
            (0x08, 2f32.powi(-6)),
            (0x38, 1.0),
            (0x39, 1.125),
            (0x3F, 1.875),
            (0x40, 2.0),
            (0x7E, 448.0),
            (0x7D, 416.0),
            (0xB8, -1.0),
            (0xFE, -448.0),
        ];
        for (code, value) in table {
            assert_eq!(decode(code), value, "code {code:#04x}");
        }
        assert!(decode(0x7F).is_nan() && decode(0xFF).is_nan());
        assert!(decode(0x80) == 0.0 && decode(0x80).is_sign_negative());
    }

    #[test]
    fn every_code_survives_decode_then_encode() {
        for code in 0..=255u8 {
            let back = encode(decode(code));
            if is_nan(code) {
                assert_eq!(back, NAN);
            } else {
                assert_eq!(back, code, "code {code:#04x}");
            }
        }
    }

    #[test]
    fn finite_codes_are_sorted_by_magnitude() {
        for code in 0..MAX_CODE {
            assert!(decode(code) < decode(code + 1), "code {code:#04x}");
        }
    }

    #[test]
    fn ties_round_to_the_even_mantissa() {
        // Midpoints between neighbouring codes: halfway between 1.0 (0x38) and 1.125 (0x39)
        // goes to 0x38; halfway between 1.125 and 1.25 (0x3A) goes to 0x3A.
        assert_eq!(encode(1.0625), 0x38);
        assert_eq!(encode(1.1875), 0x3A);
        // Subnormals: 0.5 * 2^-9 ties to 0, 1.5 * 2^-9 to 2 * 2^-9, 7.5 * 2^-9 to 2^-6 (0x08).
        assert_eq!(encode(0.5 * 2f32.powi(-9)), 0x00);
        assert_eq!(encode(1.5 * 2f32.powi(-9)), 0x02);
        assert_eq!(encode(7.5 * 2f32.powi(-9)), 0x08);
        // Binade boundary: halfway between 1.875 (0x3F) and 2.0 (0x40) goes to 0x40.
        assert_eq!(encode(1.9375), 0x40);
        // One f32 ulp off a tie decides it.
        assert_eq!(encode(f32::from_bits(1.0625f32.to_bits() + 1)), 0x39);
        assert_eq!(encode(f32::from_bits(1.1875f32.to_bits() - 1)), 0x39);
        assert_eq!(encode(-1.0625), 0xB8);
    }

    #[test]
    fn saturates_finite_and_infinite_values_keeping_the_sign() {
        for (x, code) in [
            (448.0, 0x7E),
            (463.9, 0x7E),
            (464.0, 0x7E),
            (480.0, 0x7E),
            (1e30, 0x7E),
            (f32::MAX, 0x7E),
            (f32::INFINITY, 0x7E),
            (-500.0, 0xFE),
            (f32::NEG_INFINITY, 0xFE),
        ] {
            assert_eq!(encode(x), code, "{x}");
        }
    }

    #[test]
    fn nan_and_zero_and_tiny_values() {
        assert_eq!(encode(f32::NAN), NAN);
        assert_eq!(encode(-f32::NAN), NAN);
        assert_eq!(encode(0.0), 0x00);
        assert_eq!(encode(-0.0), 0x80);
        assert_eq!(encode(f32::from_bits(1)), 0x00);
        assert_eq!(encode(-f32::from_bits(1)), 0x80);
        assert_eq!(encode(0.25 * 2f32.powi(-9)), 0x00);
        assert_eq!(encode(0.51 * 2f32.powi(-9)), 0x01);
    }

    #[test]
    fn encode_is_nearest_among_all_codes() {
        // Every f32 whose magnitude lies in e4m3's range, sampled densely: the chosen code is
        // never farther from x than any other finite code.
        let finite: Vec<(u8, f64)> = (0..=MAX_CODE).map(|c| (c, f64::from(decode(c)))).collect();
        let mut bits = 0u32;
        while bits < 0x43E0_0000 {
            let x = f32::from_bits(bits);
            let chosen = f64::from(decode(encode(x)));
            let best = finite
                .iter()
                .map(|&(_, v)| (v - f64::from(x)).abs())
                .fold(f64::INFINITY, f64::min);
            assert_eq!((chosen - f64::from(x)).abs(), best, "x = {x:e}");
            bits += 0x1F3;
        }
    }

    /// The f32 bit patterns at which `cvt.rn.satfinite.e4m3x2.f32` on an sm_90 GPU moves to the
    /// next code, for codes 0x01..=0x7E, observed over all 2^32 inputs. Negative inputs mirror
    /// them with the sign bit; +inf stays at 0x7E; every NaN (either sign) gives 0x7F.
    const HARDWARE_CODE_STARTS: [u32; 126] = [
        0x3A800001, 0x3B400000, 0x3BA00001, 0x3BE00000, 0x3C100001, 0x3C300000, 0x3C500001,
        0x3C700000, 0x3C880001, 0x3C980000, 0x3CA80001, 0x3CB80000, 0x3CC80001, 0x3CD80000,
        0x3CE80001, 0x3CF80000, 0x3D080001, 0x3D180000, 0x3D280001, 0x3D380000, 0x3D480001,
        0x3D580000, 0x3D680001, 0x3D780000, 0x3D880001, 0x3D980000, 0x3DA80001, 0x3DB80000,
        0x3DC80001, 0x3DD80000, 0x3DE80001, 0x3DF80000, 0x3E080001, 0x3E180000, 0x3E280001,
        0x3E380000, 0x3E480001, 0x3E580000, 0x3E680001, 0x3E780000, 0x3E880001, 0x3E980000,
        0x3EA80001, 0x3EB80000, 0x3EC80001, 0x3ED80000, 0x3EE80001, 0x3EF80000, 0x3F080001,
        0x3F180000, 0x3F280001, 0x3F380000, 0x3F480001, 0x3F580000, 0x3F680001, 0x3F780000,
        0x3F880001, 0x3F980000, 0x3FA80001, 0x3FB80000, 0x3FC80001, 0x3FD80000, 0x3FE80001,
        0x3FF80000, 0x40080001, 0x40180000, 0x40280001, 0x40380000, 0x40480001, 0x40580000,
        0x40680001, 0x40780000, 0x40880001, 0x40980000, 0x40A80001, 0x40B80000, 0x40C80001,
        0x40D80000, 0x40E80001, 0x40F80000, 0x41080001, 0x41180000, 0x41280001, 0x41380000,
        0x41480001, 0x41580000, 0x41680001, 0x41780000, 0x41880001, 0x41980000, 0x41A80001,
        0x41B80000, 0x41C80001, 0x41D80000, 0x41E80001, 0x41F80000, 0x42080001, 0x42180000,
        0x42280001, 0x42380000, 0x42480001, 0x42580000, 0x42680001, 0x42780000, 0x42880001,
        0x42980000, 0x42A80001, 0x42B80000, 0x42C80001, 0x42D80000, 0x42E80001, 0x42F80000,
        0x43080001, 0x43180000, 0x43280001, 0x43380000, 0x43480001, 0x43580000, 0x43680001,
        0x43780000, 0x43880001, 0x43980000, 0x43A80001, 0x43B80000, 0x43C80001, 0x43D80000,
    ];

    #[test]
    fn code_boundaries_match_the_gpu() {
        for (i, &bits) in HARDWARE_CODE_STARTS.iter().enumerate() {
            let code = i as u8 + 1;
            for sign in [0, 0x8000_0000u32] {
                let sign_code = if sign == 0 { 0 } else { 0x80 };
                assert_eq!(
                    encode(f32::from_bits(bits | sign)),
                    code | sign_code,
                    "{bits:#x}"
                );
                assert_eq!(
                    encode(f32::from_bits((bits - 1) | sign)),
                    (code - 1) | sign_code,
                    "{bits:#x}-1"
                );
            }
        }
        assert_eq!(encode(f32::from_bits(0x7F80_0000)), 0x7E);
        assert_eq!(encode(f32::from_bits(0xFF80_0000)), 0xFE);
        for nan in [
            0x7F80_0001,
            0x7FC0_0000,
            0x7FFF_FFFF,
            0xFF80_0001,
            0xFFFF_FFFF,
        ] {
            assert_eq!(encode(f32::from_bits(nan)), NAN, "{nan:#x}");
        }
    }

    #[test]
    fn packs_the_first_operand_high() {
        assert_eq!(encode_x2(1.0, -2.0), 0x38C0);
        assert_eq!(decode_x2(0x38C0), (1.0, -2.0));
    }

    #[test]
    fn code_steps_cross_zero_and_the_sign() {
        assert_eq!(code_steps(0x00, 0x80), Some(0));
        assert_eq!(code_steps(0x01, 0x00), Some(1));
        assert_eq!(code_steps(0x81, 0x00), Some(1));
        assert_eq!(code_steps(0x81, 0x80), Some(1));
        assert_eq!(code_steps(0x01, 0x81), Some(2));
        assert_eq!(code_steps(0x38, 0x39), Some(1));
        assert_eq!(code_steps(0x3F, 0x40), Some(1));
        assert_eq!(code_steps(0x7E, 0xFE), Some(252));
        assert_eq!(code_steps(0x7F, 0xFF), Some(0));
        assert_eq!(code_steps(0x7F, 0x7E), None);
    }
}
