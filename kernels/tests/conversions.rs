//! The conversions of the decode kernel (fp8 and NVFP4 records to bf16, f32 to e4m3 + ue8m0)
//! in one kernel, against the host formats module: bit-exact in the interpreter on both
//! targets and both paths (sm_100a's native `cvt` forms and the exact sequences sm_90a
//! uses), and on a GPU (sm_90a).

use std::sync::Arc;

use cudarc::driver::DevicePtr;
use dsl_core::Target;
use dsl_core::arch::cvt::{self, CvtPath};
use dsl_core::arch::memory::{load_u8, load_vec, store_u8, store_vec};
use dsl_core::arch::thread::{block_idx_x, lane_id, shfl_xor, thread_idx_x, warp_id};
use dsl_core::interp::{self, Arg, Launch, Memory};
use dsl_core::ir::Kernel;
use dsl_core::jit::{self, KernelArg, TensorArg};
use dsl_core::trace::{Tensor, Val, threads};
use dsl_macros::kernel;
use half::bf16;
use kernels::formats::mxfp8;
use kernels::swap_ab_decode::record::FP8_SCALE_GROUP;
use kernels::swap_ab_decode::{ExtraRecord, FP4_RECORD, FP8_RECORD, HEAD_DIM, record};

/// Per CTA r: warp 0 dequantises fp8 record r (lane l: dims 16l..16l+16) with two
/// multiplies a pair and with one (`out_fp8_one_multiply`), warp 1 NVFP4
/// record r (lane l < 16: dims 32l..32l+32), warps 2-3 quantise the 256 values of row r to
/// MXFP8 (8 threads a 32-value block).
#[kernel]
#[allow(clippy::too_many_arguments)]
fn conversions(
    #[comptime] path: CvtPath,
    fp8: Tensor<u8, 2>,
    fp4: Tensor<u8, 2>,
    values: Tensor<f32, 2>,
    out_fp8: Tensor<bf16, 2>,
    out_fp8_one_multiply: Tensor<bf16, 2>,
    out_fp4: Tensor<bf16, 2>,
    codes: Tensor<u8, 2>,
    scales: Tensor<u8, 2>,
) {
    threads(128, 1, 1);
    let r = block_idx_x();
    let tid = thread_idx_x();
    let warp = warp_id();
    let lane = lane_id();
    if warp == 0 {
        let rec = fp8.base() + r.mul_wide(FP8_RECORD as u32);
        let words = load_vec::<u32, 4, _>(rec + lane * 16);
        let e = load_u8(rec + 512 + lane / 2, None);
        let scale = cvt::ue8m0_to_bf16x2_with(e, path);
        let factor = cvt::ue8m0_times_2_pow_120(e);
        let row = r.mul_wide(2 * HEAD_DIM as u32) + (lane * 32).cast::<u64>();
        for half in 0..2 {
            let [a, b] = cvt::e4m3x4_to_bf16x4_scaled(words[2 * half], scale);
            let [c, d] = cvt::e4m3x4_to_bf16x4_scaled(words[2 * half + 1], scale);
            store_vec(
                out_fp8.base() + row + 16 * half as i64,
                [a, b, c, d].map(|x| x.bitcast::<u32>()),
            );
            let [a, b] = cvt::e4m3x4_to_bf16x4_by_ue8m0(words[2 * half], factor);
            let [c, d] = cvt::e4m3x4_to_bf16x4_by_ue8m0(words[2 * half + 1], factor);
            store_vec(
                out_fp8_one_multiply.base() + row + 16 * half as i64,
                [a, b, c, d].map(|x| x.bitcast::<u32>()),
            );
        }
    } else if warp == 1 {
        if lane < 16 {
            let rec = fp4.base() + r.mul_wide(FP4_RECORD as u32);
            let words = load_vec::<u32, 4, _>(rec + lane * 16);
            // The two scales as bytes 0 and 1 of a word, as the kernel's chunks hold them.
            let [low, high] = [256, 257].map(|at| load_u8(rec + at + lane * 2, None));
            let scale_pair = low | (high << 8);
            let scales =
                [0u32, 1].map(|b| cvt::e2m1_block_scale_with(scale_pair, Val::constant(b), path));
            let out = out_fp4.base() + r.mul_wide(2 * HEAD_DIM as u32) + lane * 64;
            for w in 0..4 {
                let dims =
                    cvt::e2m1x8_scaled(words[w], scales[w / 2]).map(|pair| pair.bitcast::<u32>());
                store_vec(out + 16 * w as i64, dims);
            }
        }
    } else {
        let i = tid - 64;
        let x = load_vec::<f32, 4, _>(values.base() + r.mul_wide(256 * 4) + i * 16);
        let mut amax = x[0].abs().max(x[1].abs()).max(x[2].abs().max(x[3].abs()));
        for shift in [4, 2, 1] {
            amax = amax.max(shfl_xor(amax, shift));
        }
        let ex = cvt::ue8m0_round_up_with(amax.max(1e-10f32) * (1.0f32 / 448.0), path);
        let inverse = ((254u32 - ex) << 23).bitcast::<f32>();
        let quantised = cvt::f32x4_to_e4m3x4(x.map(|v| v * inverse));
        dsl_core::arch::memory::store(codes.base() + r.mul_wide(256) + i * 4, quantised);
        let block = i / 8;
        store_u8(
            scales.base() + r.mul_wide(8) + block,
            ex,
            Some((i % 8) == 0),
        );
    }
}

const RECORDS: usize = 24;

struct Inputs {
    fp8: Vec<u8>,
    fp4: Vec<u8>,
    values: Vec<f32>,
}

/// Records encoded from rows of several magnitudes, plus rows that sweep every non-NaN e4m3
/// code and every e2m1 code under a range of scales; values for MXFP8 with zeros, tiny and
/// huge blocks.
fn inputs() -> Inputs {
    let mut fp8 = vec![0u8; RECORDS * FP8_RECORD];
    let mut fp4 = vec![0u8; RECORDS * FP4_RECORD];
    for r in 0..RECORDS {
        let magnitude = 2f32.powi(r as i32 - 12);
        let row: [f32; HEAD_DIM] = std::array::from_fn(|d| {
            ((d as f32 * 0.37 + r as f32).sin()) * magnitude * if d % 41 == 0 { 30.0 } else { 1.0 }
        });
        record::encode(
            ExtraRecord::Fp8,
            &row,
            &mut fp8[r * FP8_RECORD..(r + 1) * FP8_RECORD],
        );
        record::encode(
            ExtraRecord::Nvfp4,
            &row,
            &mut fp4[r * FP4_RECORD..(r + 1) * FP4_RECORD],
        );
    }
    // Every e4m3 code but the two NaNs, under scales 2^-20 .. 2^13 (record 0, 1).
    for r in 0..2 {
        let rec = &mut fp8[r * FP8_RECORD..(r + 1) * FP8_RECORD];
        for (d, b) in rec[..512].iter_mut().enumerate() {
            let code = (d % 256) as u8;
            *b = if code & 0x7f == 0x7f { 0 } else { code };
        }
        for (g, s) in rec[512..].iter_mut().enumerate() {
            *s = (107 + 2 * g + r) as u8;
        }
    }
    // Every e2m1 pair, under a sweep of e4m3 scales (record 2).
    let rec = &mut fp4[2 * FP4_RECORD..3 * FP4_RECORD];
    for (i, b) in rec[..256].iter_mut().enumerate() {
        *b = i as u8;
    }
    for (s, b) in rec[256..].iter_mut().enumerate() {
        *b = (s * 4 + 1) as u8 & 0x7e;
    }
    let values = (0..RECORDS * 256)
        .map(|i| {
            let block = i / 32;
            match block % 5 {
                0 => 0.0,
                1 => ((i as f32) * 0.11).cos() * 1e-8,
                2 => ((i as f32) * 0.7).sin() * 3e4,
                _ => ((i as f32) * 0.3).sin() * 2f32.powi((block % 17) as i32 - 8),
            }
        })
        .collect();
    Inputs { fp8, fp4, values }
}

struct Outputs {
    fp8: Vec<u16>,
    fp8_one_multiply: Vec<u16>,
    fp4: Vec<u16>,
    codes: Vec<u8>,
    scales: Vec<u8>,
}

fn check(got: &Outputs, inputs: &Inputs, what: &str) {
    for r in 0..RECORDS {
        let want8 = record::decode_bf16(
            ExtraRecord::Fp8,
            &inputs.fp8[r * FP8_RECORD..(r + 1) * FP8_RECORD],
        )
        .unwrap();
        let want4 = record::decode_bf16(
            ExtraRecord::Nvfp4,
            &inputs.fp4[r * FP4_RECORD..(r + 1) * FP4_RECORD],
        )
        .unwrap();
        let scales8 = &inputs.fp8[r * FP8_RECORD + HEAD_DIM..(r + 1) * FP8_RECORD];
        for d in 0..HEAD_DIM {
            assert_eq!(
                got.fp8[r * HEAD_DIM + d],
                want8[d].to_bits(),
                "{what}: fp8 record {r} dim {d}"
            );
            // One multiply is exact up to the scale byte 134 and infinite or NaN above it.
            let one_multiply = got.fp8_one_multiply[r * HEAD_DIM + d];
            let e = u32::from(scales8[d / FP8_SCALE_GROUP]);
            if e <= cvt::UE8M0_ONE_MULTIPLY_MAX {
                assert_eq!(
                    one_multiply,
                    want8[d].to_bits(),
                    "{what}: fp8 record {r} dim {d}, one multiply"
                );
            } else {
                assert!(
                    !bf16::from_bits(one_multiply).is_finite(),
                    "{what}: fp8 record {r} dim {d}, one multiply by scale byte {e}: got \
                     {one_multiply:#06x}, not infinite or NaN"
                );
            }
            assert_eq!(
                got.fp4[r * HEAD_DIM + d],
                want4[d].to_bits(),
                "{what}: NVFP4 record {r} dim {d}"
            );
        }
        for block in 0..8 {
            let at = r * 256 + block * 32;
            let values: [f32; 32] = inputs.values[at..at + 32].try_into().unwrap();
            let (ex, codes) = mxfp8::encode_block(&values);
            assert_eq!(
                got.scales[r * 8 + block],
                ex,
                "{what}: scale of row {r} block {block}"
            );
            assert_eq!(
                &got.codes[at..at + 32],
                &codes,
                "{what}: codes of row {r} block {block}"
            );
        }
    }
}

fn interpret(target: Target, path: CvtPath, inputs: &Inputs) -> Outputs {
    let kernel = conversions(target, path).unwrap_or_else(|e| panic!("{e}"));
    let mut mem = Memory::new();
    let fp8 = mem.alloc_from("fp8", &inputs.fp8);
    let fp4 = mem.alloc_from("fp4", &inputs.fp4);
    let values = mem.alloc_from("values", &inputs.values);
    let out8 = mem.alloc("out_fp8", RECORDS * HEAD_DIM * 2);
    let out8_one = mem.alloc("out_fp8_one_multiply", RECORDS * HEAD_DIM * 2);
    let out4 = mem.alloc("out_fp4", RECORDS * HEAD_DIM * 2);
    let codes = mem.alloc("codes", RECORDS * 256);
    let scales = mem.alloc("scales", RECORDS * 8);
    let n = RECORDS as i64;
    let args = [
        Arg::contiguous(fp8, &[n, FP8_RECORD as i64]),
        Arg::contiguous(fp4, &[n, FP4_RECORD as i64]),
        Arg::contiguous(values, &[n, 256]),
        Arg::contiguous(out8, &[n, HEAD_DIM as i64]),
        Arg::contiguous(out8_one, &[n, HEAD_DIM as i64]),
        Arg::contiguous(out4, &[n, HEAD_DIM as i64]),
        Arg::contiguous(codes, &[n, 256]),
        Arg::contiguous(scales, &[n, 8]),
    ];
    interp::run(
        &kernel,
        &mut mem,
        &args,
        &Launch::grid([RECORDS as u32, 1, 1]),
    )
    .unwrap();
    Outputs {
        fp8: mem.read(out8),
        fp8_one_multiply: mem.read(out8_one),
        fp4: mem.read(out4),
        codes: mem.read(codes),
        scales: mem.read(scales),
    }
}

#[test]
fn conversions_match_the_formats_module_in_the_interpreter() {
    let inputs = inputs();
    check(
        &interpret(Target::Sm100a, CvtPath::Native, &inputs),
        &inputs,
        "sm_100a native",
    );
    check(
        &interpret(Target::Sm100a, CvtPath::Emulated, &inputs),
        &inputs,
        "sm_100a emulated",
    );
    check(
        &interpret(Target::Sm90a, CvtPath::Emulated, &inputs),
        &inputs,
        "sm_90a",
    );
}

#[test]
fn gpu_conversions_match_the_formats_module() {
    let Some(dev) = jit::test_device(Target::Sm90a).map(Arc::new) else {
        return;
    };
    let inputs = inputs();
    let stream = dev.stream();
    let kernel: Kernel = conversions(Target::Sm90a, CvtPath::Emulated).unwrap();
    let loaded = dev.load(&kernel).unwrap();
    let up = |bytes: &[u8]| stream.clone_htod(bytes).unwrap();
    let fp8 = up(&inputs.fp8);
    let fp4 = up(&inputs.fp4);
    let values = stream.clone_htod(&inputs.values).unwrap();
    let out8 = stream.alloc_zeros::<u16>(RECORDS * HEAD_DIM).unwrap();
    let out8_one = stream.alloc_zeros::<u16>(RECORDS * HEAD_DIM).unwrap();
    let out4 = stream.alloc_zeros::<u16>(RECORDS * HEAD_DIM).unwrap();
    let codes = stream.alloc_zeros::<u8>(RECORDS * 256).unwrap();
    let scales = stream.alloc_zeros::<u8>(RECORDS * 8).unwrap();
    let n = RECORDS as i64;
    let args = [
        KernelArg::Tensor(TensorArg::contiguous::<u8, 2>(
            fp8.device_ptr(stream).0,
            [n, FP8_RECORD as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<u8, 2>(
            fp4.device_ptr(stream).0,
            [n, FP4_RECORD as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<f32, 2>(
            values.device_ptr(stream).0,
            [n, 256],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<bf16, 2>(
            out8.device_ptr(stream).0,
            [n, HEAD_DIM as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<bf16, 2>(
            out8_one.device_ptr(stream).0,
            [n, HEAD_DIM as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<bf16, 2>(
            out4.device_ptr(stream).0,
            [n, HEAD_DIM as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<u8, 2>(
            codes.device_ptr(stream).0,
            [n, 256],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<u8, 2>(
            scales.device_ptr(stream).0,
            [n, 8],
        )),
    ];
    // SAFETY: every tensor addresses a live buffer of its shape.
    unsafe { loaded.launch(stream, jit::Launch::new([RECORDS as u32, 1, 1]), &args) }.unwrap();
    let got = Outputs {
        fp8: stream.clone_dtoh(&out8).unwrap(),
        fp8_one_multiply: stream.clone_dtoh(&out8_one).unwrap(),
        fp4: stream.clone_dtoh(&out4).unwrap(),
        codes: stream.clone_dtoh(&codes).unwrap(),
        scales: stream.clone_dtoh(&scales).unwrap(),
    };
    check(&got, &inputs, "H200 sm_90a");
    eprintln!(
        "gpu_conversions_match_the_formats_module: {RECORDS} fp8 and NVFP4 records and {} MXFP8 blocks exact",
        RECORDS * 8
    );
}
