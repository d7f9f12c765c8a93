//! MXFP8 blocks as the decode kernel writes them (SPEC math step 7): 32 values share one ue8m0
//! scale 2^(ex - 127) and are stored as e4m3 codes of value / scale.

use super::{e4m3, ue8m0};

/// Values per block.
pub const BLOCK: usize = 32;
/// Floor of a block's amax, so an all-zero block still gets a finite scale.
pub const AMAX_FLOOR: f32 = 1e-10;

/// The largest magnitude in `values`, floored at [`AMAX_FLOOR`]. NaN is skipped, like the
/// `max.f32` reduction of the kernel (which returns the non-NaN operand).
pub fn block_amax(values: &[f32]) -> f32 {
    values.iter().fold(AMAX_FLOOR, |amax, x| amax.max(x.abs()))
}

/// The scale exponent of a block whose [`block_amax`] is `amax`: amax / 448 rounded up to a
/// power of two, as `cvt.rp.satfinite.ue8m0x2.f32`.
///
/// The kernel multiplies by the f32 reciprocal `1/448` instead of dividing; for every f32 amax
/// from 1e-10 to 1e30 both give the same byte (checked exhaustively), so this follows the
/// kernel.
pub fn scale_exponent(amax: f32) -> u8 {
    ue8m0::encode_round_up(amax * (1.0 / e4m3::MAX))
}

/// The e4m3 code of `x` in a block of scale exponent `ex`: `x * 2^(127 - ex)` rounded by
/// `cvt.rn.satfinite.e4m3x2.f32`. The product is rounded to f32 once, like the kernel's f32
/// multiply by the power of two; it is exact unless it lands far below e4m3's range.
pub fn encode_value(x: f32, ex: u8) -> u8 {
    let scaled = f64::from(x) * super::pow2(ue8m0::BIAS - i32::from(ex));
    e4m3::encode(scaled as f32)
}

/// The scale exponent and the 32 codes of one block.
pub fn encode_block(values: &[f32; BLOCK]) -> (u8, [u8; BLOCK]) {
    let ex = scale_exponent(block_amax(values));
    (ex, values.map(|x| encode_value(x, ex)))
}

/// The value a code stands for in a block of scale exponent `ex`: `e4m3 * 2^(ex - 127)`.
pub fn decode_value(code: u8, ex: u8) -> f32 {
    (f64::from(e4m3::decode(code)) * f64::from(ue8m0::decode(ex))) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_is_amax_over_448_rounded_up() {
        assert_eq!(scale_exponent(448.0), 127);
        assert_eq!(scale_exponent(448.5), 128);
        assert_eq!(scale_exponent(224.0), 126);
        assert_eq!(scale_exponent(1.0), 127 - 8);
        assert_eq!(
            scale_exponent(AMAX_FLOOR),
            ue8m0::encode_round_up(AMAX_FLOOR / 448.0)
        );
    }

    #[test]
    fn reciprocal_and_division_agree_around_every_scale_boundary() {
        // amax = 448 * 2^k (= 7 * 2^(k+6)) and its f32 neighbours are where a different
        // rounding of amax / 448 could change the scale.
        for k in -30..=100 {
            let at = (448.0 * 2f64.powi(k)) as f32;
            for bits in at.to_bits() - 4..=at.to_bits() + 4 {
                let amax = f32::from_bits(bits);
                assert_eq!(
                    scale_exponent(amax),
                    ue8m0::encode_round_up(amax / 448.0),
                    "amax {amax:e}"
                );
            }
        }
    }

    #[test]
    fn block_round_trip_is_within_half_a_code() {
        let mut values = [0.0f32; BLOCK];
        for (i, v) in values.iter_mut().enumerate() {
            *v = (i as f32 - 15.5) * 0.37;
        }
        let (ex, codes) = encode_block(&values);
        assert_eq!(ex, scale_exponent(5.735)); // amax = 15.5 * 0.37
        for (x, code) in values.iter().zip(codes) {
            let back = decode_value(code, ex);
            // e4m3 has 3 mantissa bits: relative error <= 2^-4 for normal codes.
            assert!((back - x).abs() <= x.abs() * 0.0625 + 1e-6, "{x} -> {back}");
        }
    }

    #[test]
    fn zero_block_gets_the_floor_scale_and_zero_codes() {
        let (ex, codes) = encode_block(&[0.0; BLOCK]);
        assert_eq!(ex, scale_exponent(AMAX_FLOOR));
        assert!(codes.iter().all(|&c| c == 0));
    }

    #[test]
    fn amax_skips_nan() {
        assert_eq!(block_amax(&[f32::NAN, -3.0, 2.0]), 3.0);
        assert_eq!(encode_value(f32::NAN, 127), e4m3::NAN);
    }
}
