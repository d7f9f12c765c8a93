//! FP4 E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit in a nibble; values
//! ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no infinity and no NaN.

/// Largest e2m1 value.
pub const MAX: f32 = 6.0;

const SIGN: u8 = 0x8;
const MAX_CODE: u8 = 0x7;
const MANTISSA_BITS: u32 = 1;
const MIN_NORMAL_EXP: i32 = 0;
const MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// The value of the low nibble of `code` (the high nibble is ignored).
pub fn decode(code: u8) -> f32 {
    let value = MAGNITUDES[usize::from(code & MAX_CODE)];
    if code & SIGN != 0 { -value } else { value }
}

/// `x` rounded to an e2m1 nibble exactly like one lane of `cvt.rn.satfinite.e2m1x2.f32`: round
/// to nearest even; magnitudes above 6 (infinity included) saturate to ±6 keeping the sign;
/// NaN gives +6 (code 0x7) because e2m1 has no NaN; the sign of zero is kept.
///
/// Source: PTX ISA 9.1 §9.7.9.21 (`cvt`, `.satfinite`: "For .e2m1x2 ... destination formats
/// NaN results are converted to positive MAX_NORM").
pub fn encode(x: f32) -> u8 {
    if x.is_nan() {
        return MAX_CODE;
    }
    let sign = if x.is_sign_negative() { SIGN } else { 0 };
    let magnitude = f64::from(x.abs());
    if magnitude > f64::from(MAX) {
        return sign | MAX_CODE;
    }
    let code = super::round_magnitude_to_nearest_even(magnitude, MANTISSA_BITS, MIN_NORMAL_EXP);
    sign | code.min(u32::from(MAX_CODE)) as u8
}

/// Two values packed like `cvt.rn.satfinite.e2m1x2.f32 d, a, b`: `a` in bits 7:4, `b` in 3:0.
///
/// Records store element `2i` in the low nibble, so a record byte is `encode_x2(odd, even)`;
/// [`pack_pair`] says it the record's way.
pub fn encode_x2(a: f32, b: f32) -> u8 {
    encode(a) << 4 | encode(b)
}

/// A record byte holding elements `2i` (low nibble) and `2i + 1` (high nibble).
pub fn pack_pair(even: f32, odd: f32) -> u8 {
    encode_x2(odd, even)
}

/// The two elements of a record byte: `(element 2i, element 2i + 1)` = (low, high nibble).
pub fn unpack_pair(byte: u8) -> (f32, f32) {
    (decode(byte & 0xF), decode(byte >> 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_all_sixteen_codes() {
        let expected = [
            0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
        ];
        for (code, value) in (0..16u8).zip(expected) {
            assert_eq!(decode(code), value);
            assert_eq!(
                decode(code).is_sign_negative(),
                code >= 8,
                "sign of {code:#x}"
            );
            assert_eq!(encode(value), code, "round trip of {code:#x}");
        }
    }

    #[test]
    fn ties_round_to_the_even_code() {
        for (x, code) in [
            (0.25, 0x0),
            (0.75, 0x2),
            (1.25, 0x2),
            (1.75, 0x4),
            (2.5, 0x4),
            (3.5, 0x6),
            (5.0, 0x6),
            (-5.0, 0xE),
            (-0.25, 0x8),
        ] {
            assert_eq!(encode(x), code, "{x}");
        }
        assert_eq!(encode(f32::from_bits(0.25f32.to_bits() + 1)), 0x1);
        assert_eq!(encode(f32::from_bits(5.0f32.to_bits() + 1)), 0x7);
    }

    #[test]
    fn saturates_and_maps_nan_to_positive_max() {
        assert_eq!(encode(6.0), 0x7);
        assert_eq!(encode(6.5), 0x7);
        assert_eq!(encode(1e30), 0x7);
        assert_eq!(encode(f32::INFINITY), 0x7);
        assert_eq!(encode(-7.0), 0xF);
        assert_eq!(encode(f32::NEG_INFINITY), 0xF);
        assert_eq!(encode(f32::NAN), 0x7);
        assert_eq!(encode(-f32::NAN), 0x7);
    }

    #[test]
    fn tiny_values_keep_their_sign() {
        assert_eq!(encode(1e-30), 0x0);
        assert_eq!(encode(-1e-30), 0x8);
        assert_eq!(encode(-0.0), 0x8);
    }

    #[test]
    fn nibble_order_matches_ptx_and_records() {
        assert_eq!(encode_x2(1.0, -6.0), 0x2F);
        assert_eq!(pack_pair(1.0, -6.0), 0xF2);
        assert_eq!(unpack_pair(0xF2), (1.0, -6.0));
    }
}
