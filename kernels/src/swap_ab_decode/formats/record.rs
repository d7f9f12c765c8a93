//! V4.1 KV records (SPEC "Records"): one 512-dim latent row per slot.
//!
//! - fp8, 528 bytes: bytes 0..512 are the e4m3 codes of dims 0..511, bytes 512..528 are 16 ue8m0
//!   scales; scale `g` multiplies dims `32g..32g+31` by 2^(byte - 127).
//! - NVFP4, 288 bytes: byte `i` of 0..256 holds dim `2i` in its low nibble and dim `2i+1` in
//!   its high nibble (e2m1); bytes 256..288 are 32 e4m3 scales, scale `s` multiplying dims
//!   `16s..16s+15`.

use thiserror::Error;

use crate::swap_ab_decode::{ExtraRecord, HEAD_DIM};
use half::bf16;

use crate::formats::{self, e2m1, e4m3, mxfp8, ue8m0};

/// Dims sharing one ue8m0 scale in an fp8 record.
pub const FP8_SCALE_GROUP: usize = 32;
/// Dims sharing one e4m3 scale in an NVFP4 record.
pub const FP4_SCALE_GROUP: usize = 16;
const FP8_DATA: usize = HEAD_DIM;
const FP4_DATA: usize = HEAD_DIM / 2;

/// A record holds a value bf16 cannot represent exactly, so the kernel's bf16 operand would
/// differ from the record.
#[derive(Clone, Copy, Debug, PartialEq, Error)]
#[error(
    "dim {dim} decodes to {value:e}, which bf16 cannot hold exactly (NaN, or scaled outside \
     bf16's range); a cache writer keeps every scaled value inside bf16's exponent range"
)]
pub struct RecordRangeError {
    /// The first offending dim.
    pub dim: usize,
    /// Its decoded value.
    pub value: f32,
}

/// Encodes `row` the way a cache writer does, into `record` (`format.bytes()` long).
///
/// - fp8: per 32 dims, scale = amax / 448 rounded up to a power of two (ue8m0, the round-up
///   `cvt`), data = e4m3(x / scale) with round to nearest even and saturation. An all-zero
///   group gets scale 2^-127 and zero codes.
/// - NVFP4: per 16 dims, scale = e4m3(amax / 6) rounded to nearest even (what NVFP4 writers
///   such as TensorRT-LLM and vLLM do without a global scale), data = e2m1(x / scale) rounded
///   to nearest even. Rounding the scale to nearest can leave |x| / scale slightly above 6;
///   those values saturate to ±6, as in those writers. A group whose scale rounds to zero (all
///   zeros, or amax below e4m3's range) stores zero codes.
pub fn encode(format: ExtraRecord, row: &[f32; HEAD_DIM], record: &mut [u8]) {
    assert_eq!(
        record.len(),
        format.bytes(),
        "record buffer of the wrong size"
    );
    match format {
        ExtraRecord::Fp8 => encode_fp8(row, record),
        ExtraRecord::Nvfp4 => encode_nvfp4(row, record),
    }
}

fn encode_fp8(row: &[f32; HEAD_DIM], record: &mut [u8]) {
    let (data, scales) = record.split_at_mut(FP8_DATA);
    for (g, (values, codes)) in row
        .chunks_exact(FP8_SCALE_GROUP)
        .zip(data.chunks_exact_mut(FP8_SCALE_GROUP))
        .enumerate()
    {
        let amax = values.iter().fold(0f32, |m, x| m.max(x.abs()));
        let ex = ue8m0::encode_round_up(amax / e4m3::MAX);
        scales[g] = ex;
        for (code, &x) in codes.iter_mut().zip(values) {
            *code = mxfp8::encode_value(x, ex);
        }
    }
}

fn encode_nvfp4(row: &[f32; HEAD_DIM], record: &mut [u8]) {
    let (data, scales) = record.split_at_mut(FP4_DATA);
    for (s, (values, bytes)) in row
        .chunks_exact(FP4_SCALE_GROUP)
        .zip(data.chunks_exact_mut(FP4_SCALE_GROUP / 2))
        .enumerate()
    {
        let amax = values.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale_code = e4m3::encode(amax / e2m1::MAX);
        scales[s] = scale_code;
        let scale = e4m3::decode(scale_code);
        for (byte, pair) in bytes.iter_mut().zip(values.chunks_exact(2)) {
            *byte = if scale == 0.0 {
                0
            } else {
                e2m1::pack_pair(pair[0] / scale, pair[1] / scale)
            };
        }
    }
}

/// The 512 values a record stands for. Exact whenever the value fits f32 (e4m3 or e2m1 times a
/// power of two or an e4m3 scale has at most 5 significant bits); NaN codes and NaN scales
/// give NaN.
pub fn decode(format: ExtraRecord, record: &[u8]) -> [f32; HEAD_DIM] {
    assert_eq!(record.len(), format.bytes(), "record of the wrong size");
    let mut row = [0f32; HEAD_DIM];
    match format {
        ExtraRecord::Fp8 => {
            let (data, scales) = record.split_at(FP8_DATA);
            for (d, value) in row.iter_mut().enumerate() {
                *value = mxfp8::decode_value(data[d], scales[d / FP8_SCALE_GROUP]);
            }
        }
        ExtraRecord::Nvfp4 => {
            let (data, scales) = record.split_at(FP4_DATA);
            for (i, pair) in row.chunks_exact_mut(2).enumerate() {
                let scale = e4m3::decode(scales[2 * i / FP4_SCALE_GROUP]);
                let (even, odd) = e2m1::unpack_pair(data[i]);
                // e2m1 (2 significant bits) times e4m3 (4 bits) is exact in f32.
                pair[0] = even * scale;
                pair[1] = odd * scale;
            }
        }
    }
    row
}

/// The bf16 row the kernel dequantizes a record to: exact, or an error when a value falls
/// outside what bf16 holds exactly (NaN, beyond bf16's range, or below its subnormals' grid).
///
/// NVFP4 records always convert (every e2m1 x e4m3 product lies in [2^-10, 2688]); fp8 records
/// convert when each e4m3 x 2^(e - 127) stays inside bf16's exponent range, which cache writers
/// guarantee by deriving e from the row's own amax.
pub fn decode_bf16(
    format: ExtraRecord,
    record: &[u8],
) -> Result<[bf16; HEAD_DIM], RecordRangeError> {
    let row = decode(format, record);
    let mut out = [bf16::ZERO; HEAD_DIM];
    for (dim, (slot, &value)) in out.iter_mut().zip(&row).enumerate() {
        *slot = formats::bf16::exact(value).ok_or(RecordRangeError { dim, value })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swap_ab_decode::{FP4_RECORD, FP8_RECORD};

    fn ramp(scale: f32) -> [f32; HEAD_DIM] {
        std::array::from_fn(|d| {
            ((d as f32 * 0.731).sin() * scale) * if d % 97 == 0 { 9.0 } else { 1.0 }
        })
    }

    fn round_trip(format: ExtraRecord, row: &[f32; HEAD_DIM]) -> [f32; HEAD_DIM] {
        let mut record = vec![0u8; format.bytes()];
        encode(format, row, &mut record);
        decode(format, &record)
    }

    #[test]
    fn fp8_layout_is_data_then_scales() {
        let mut row = [0f32; HEAD_DIM];
        row[0] = 1.0; // group 0: amax 1 -> scale 2^-8 (448 * 2^-8 = 1.75 >= 1)
        row[33] = -448.0; // group 1: scale 2^0
        row[511] = 3.0; // group 15
        let mut record = vec![0u8; FP8_RECORD];
        encode(ExtraRecord::Fp8, &row, &mut record);
        assert_eq!(record[512], 127 - 8);
        assert_eq!(record[513], 127);
        assert_eq!(record[0], e4m3::encode(256.0));
        assert_eq!(record[33], e4m3::encode(-448.0));
        assert_eq!(record[1], 0);
        assert_eq!(record[527], ue8m0::encode_round_up(3.0 / 448.0));
        assert_eq!(decode(ExtraRecord::Fp8, &record), row);
    }

    #[test]
    fn nvfp4_layout_is_low_nibble_first_then_scales() {
        let mut row = [0f32; HEAD_DIM];
        row[0] = 6.0; // block 0: amax 6 -> scale 1.0
        row[1] = -0.5;
        row[16] = 12.0; // block 1: scale 2.0
        let mut record = vec![0u8; FP4_RECORD];
        encode(ExtraRecord::Nvfp4, &row, &mut record);
        assert_eq!(record[0], 0x97); // dim 0 = +6 (0x7) low, dim 1 = -0.5 (0x9) high
        assert_eq!(record[8], 0x07);
        assert_eq!(record[256], e4m3::encode(1.0));
        assert_eq!(record[257], e4m3::encode(2.0));
        assert_eq!(record[258], 0, "an all-zero block has a zero scale");
        assert_eq!(decode(ExtraRecord::Nvfp4, &record), row);
    }

    #[test]
    fn fp8_round_trip_error_is_within_e4m3_precision() {
        for scale in [1e-3, 1.0, 37.0, 3e4] {
            let row = ramp(scale);
            let back = round_trip(ExtraRecord::Fp8, &row);
            for g in 0..HEAD_DIM / FP8_SCALE_GROUP {
                let dims = g * 32..g * 32 + 32;
                let amax = row[dims.clone()].iter().fold(0f32, |m, x| m.max(x.abs()));
                for d in dims {
                    // Half an e4m3 ulp relative, or half the subnormal step of the group scale.
                    let tol = (row[d].abs() / 16.0).max(amax / 448.0 * 2.0 * 2f32.powi(-10));
                    assert!((back[d] - row[d]).abs() <= tol, "scale {scale} dim {d}");
                }
            }
        }
    }

    #[test]
    fn nvfp4_round_trip_error_is_within_e2m1_precision() {
        for scale in [0.05, 1.0, 300.0] {
            let row = ramp(scale);
            let back = round_trip(ExtraRecord::Nvfp4, &row);
            for s in 0..HEAD_DIM / FP4_SCALE_GROUP {
                let dims = s * 16..s * 16 + 16;
                let amax = row[dims.clone()].iter().fold(0f32, |m, x| m.max(x.abs()));
                for d in dims {
                    // e2m1 steps are at most a third of amax/6 * 6 = amax (between 4 and 6),
                    // plus the scale's own e4m3 rounding (1/16 relative).
                    assert!(
                        (back[d] - row[d]).abs() <= amax / 6.0 * 1.07 + 1e-6,
                        "dim {d}"
                    );
                }
            }
        }
    }

    #[test]
    fn bf16_decode_is_exact_or_refuses() {
        let row = ramp(5.0);
        for format in [ExtraRecord::Fp8, ExtraRecord::Nvfp4] {
            let mut record = vec![0u8; format.bytes()];
            encode(format, &row, &mut record);
            let exact = decode_bf16(format, &record).unwrap();
            let values = decode(format, &record);
            for d in 0..HEAD_DIM {
                assert_eq!(exact[d].to_f32(), values[d]);
            }
        }
        let mut record = vec![0u8; FP8_RECORD];
        encode(ExtraRecord::Fp8, &row, &mut record);
        record[512 + 3] = 254; // dims 96..128 scaled by 2^127: beyond bf16
        let err = decode_bf16(ExtraRecord::Fp8, &record).unwrap_err();
        assert_eq!(err.dim / 32, 3);
        record[512 + 3] = ue8m0::NAN;
        assert!(decode_bf16(ExtraRecord::Fp8, &record).is_err());
        record[512 + 3] = 0;
        record[96] = 0x01; // 2^-9 * 2^-127: below bf16's smallest subnormal, 2^-133
        assert_eq!(decode_bf16(ExtraRecord::Fp8, &record).unwrap_err().dim, 96);
    }

    #[test]
    fn every_nvfp4_product_fits_bf16() {
        for scale in 0..=0x7Eu8 {
            for code in 0..16u8 {
                let v = e2m1::decode(code) * e4m3::decode(scale);
                assert!(formats::bf16::exact(v).is_some(), "{code:#x} x {scale:#x}");
            }
        }
    }
}
