//! GPU benchmark of the decode kernel: for heads {16, 32}, NK 128, NE {512, 1024}, fp8 and
//! NVFP4 compressed records, s_q {1, 32, 128, 512}, the kernel's time (median of CUDA-event
//! timings of single launches, clocks left alone), the KV bytes it reads per second, and in
//! the same run the device's copy bandwidth, so every figure is also a ratio.
//!
//! Every token reads its own KV rows (slot ids are distinct across the batch, as in a batch
//! of different sequences), and small batches rotate over independent slot sets covering at
//! least 256 MiB of cache, so the L2 cache (60 MB on an H200) does not serve repeated
//! launches.
//!
//! `cargo run --release --example bench_decode -- [--out results.jsonl] [--quick]
//! [--only HEADS,NE,RECORD,S_Q]`; on the GPU machine through `scripts/bench-gpu.sh`, which
//! adds the PyTorch baseline. `--only 16,512,fp8,512` runs one configuration (e.g. under
//! `ncu`).

use std::io::Write;
use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use dsl_core::jit::{self, Device};
use half::bf16;
use kernels::swap_ab_decode::engine::DeviceProblem;
use kernels::swap_ab_decode::{
    CompileKey, DecodeProblem, DeviceTensor, ExtraRecord, OutputBuffers, OutputLayout, PagedCache,
    QueryBuffer, Schedule, SlotList, SwapAbDecode,
};

const NK: usize = 128;
const SWA_PAGE: usize = 64;
const EXTRA_PAGE: usize = 16;
const ROTATION_BYTES: usize = 256 << 20;

#[derive(Clone, Copy)]
struct Config {
    heads: usize,
    ne: usize,
    record: ExtraRecord,
    s_q: usize,
}

/// xorshift64*: reproducible bytes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A cache of `records` valid records with random data and sane scales.
fn cache(format: ExtraRecord, records: usize, page: usize, rng: &mut Rng) -> PagedCache {
    let blocks = records.div_ceil(page);
    let record = format.bytes();
    let mut c = PagedCache::new(format, blocks, page, page * record, 0).expect("cache geometry");
    for r in c.bytes.chunks_mut(record) {
        for word in r.chunks_mut(8) {
            // Random data without the e4m3 NaN codes (0x7f, 0xff): timing data.
            let bits = (rng.next() & 0x7e7e_7e7e_7e7e_7e7e).to_le_bytes();
            word.copy_from_slice(&bits[..word.len()]);
        }
        match format {
            ExtraRecord::Fp8 => r[512..]
                .iter_mut()
                .for_each(|s| *s = 118 + (rng.next() % 8) as u8),
            ExtraRecord::Nvfp4 => r[256..]
                .iter_mut()
                .for_each(|s| *s = 0x30 + (rng.next() % 8) as u8),
        }
    }
    c
}

/// Slot lists for `sets` independent batches of `s_q` tokens over distinct slots.
fn slots(width: usize, s_q: usize, set: usize, rng: &mut Rng) -> SlotList {
    let mut ids: Vec<i32> = (0..s_q * width)
        .map(|i| (set * s_q * width + i) as i32)
        .collect();
    // Shuffle within each token's row: rows of a token are not in slot order.
    for row in ids.chunks_mut(width.max(1)) {
        for i in (1..row.len()).rev() {
            row.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
    }
    SlotList {
        width,
        rows: s_q,
        row_stride: width,
        ids,
        lens: vec![width as i32; s_q],
    }
}

fn problem(cfg: Config, sets: usize, rng: &mut Rng) -> (DecodeProblem, Vec<(SlotList, SlotList)>) {
    let key = CompileKey {
        heads: cfg.heads,
        swa_width: NK,
        extra_width: cfg.ne,
        extra_record: cfg.record,
        swa_page: SWA_PAGE,
        extra_page: EXTRA_PAGE,
        target: dsl_core::Target::Sm90a,
        schedule: Schedule::Split,
    };
    let plain: Vec<bf16> = (0..cfg.s_q * cfg.heads * 512)
        .map(|_| bf16::from_f32((rng.next() % 2000) as f32 / 1000.0 - 1.0))
        .collect();
    let q = QueryBuffer::pack(&plain, cfg.s_q, cfg.heads, cfg.heads * 512, bf16::ZERO).expect("q");
    let lists: Vec<(SlotList, SlotList)> = (0..sets)
        .map(|set| {
            (
                slots(NK, cfg.s_q, set, rng),
                slots(cfg.ne, cfg.s_q, set, rng),
            )
        })
        .collect();
    let max_pos = 4096;
    let p = DecodeProblem {
        key,
        q,
        swa_cache: cache(ExtraRecord::Fp8, sets * cfg.s_q * NK, SWA_PAGE, rng),
        swa: lists[0].0.clone(),
        extra_cache: cache(cfg.record, sets * cfg.s_q * cfg.ne, EXTRA_PAGE, rng),
        extra: lists[0].1.clone(),
        positions: (0..cfg.s_q).map(|b| (b * 7 % max_pos) as i64).collect(),
        cos_sin: (0..max_pos * 64)
            .map(|i| ((i % 97) as f32 / 97.0).cos())
            .collect(),
        cos_sin_stride: 64,
        sink: vec![0.5; cfg.heads],
        softmax_scale: 1.0 / (576f32).sqrt(),
        out: OutputBuffers::filled(OutputLayout::row_major(cfg.s_q, cfg.heads / 8), 0, 0),
    };
    (p, lists)
}

fn kv_bytes(cfg: Config) -> usize {
    cfg.s_q * (NK * 528 + cfg.ne * cfg.record.bytes())
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// Device-to-device copy bandwidth (bytes read + written per second) of 2 GiB copies.
fn copy_bandwidth(stream: &Arc<CudaStream>) -> f64 {
    let n = 1usize << 31;
    let src: CudaSlice<u8> = stream.alloc_zeros(n).expect("alloc");
    let mut dst: CudaSlice<u8> = stream.alloc_zeros(n).expect("alloc");
    let mut times = Vec::new();
    for i in 0..12 {
        let start = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap();
        stream.memcpy_dtod(&src, &mut dst).unwrap();
        let end = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap();
        let ms = start.elapsed_ms(&end).unwrap();
        if i >= 2 {
            times.push(ms);
        }
    }
    2.0 * n as f64 / (median(times) as f64 * 1e-3)
}

/// The median time of `launch` over the rotating calls, in microseconds (CUDA events around
/// each launch, the first five left out).
fn time_launches(
    stream: &Arc<CudaStream>,
    calls: &[kernels::swap_ab_decode::DecodeArgs],
    quick: bool,
    s_q: usize,
    launch: impl Fn(&kernels::swap_ab_decode::DecodeArgs),
) -> f64 {
    let reps = if quick {
        5
    } else if s_q >= 128 {
        40
    } else {
        100
    };
    let mut times = Vec::new();
    for i in 0..reps + 5 {
        let start = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap();
        launch(&calls[i % calls.len()]);
        let end = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap();
        let ms = start.elapsed_ms(&end).unwrap();
        if i >= 5 {
            times.push(ms);
        }
    }
    median(times) as f64 * 1e3
}

fn upload_i32(stream: &Arc<CudaStream>, v: &[i32]) -> (CudaSlice<i32>, u64) {
    let s = stream.clone_htod(v).unwrap();
    let p = s.device_ptr(stream).0;
    (s, p)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let out_path = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1).cloned());
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    if !jit::gpu_available() {
        eprintln!("bench_decode needs an NVIDIA GPU with a CUDA driver; none was found");
        std::process::exit(2);
    }
    let device = Arc::new(Device::open(0).expect("open device 0"));
    let decode = SwapAbDecode::new(device.clone()).expect("a device with a kestrel target");
    let stream = device.stream().clone();
    let info = device.info();
    let copy = copy_bandwidth(&stream);
    println!(
        "device: {} (compute capability {}.{}), copy bandwidth {:.0} GB/s (read + write)",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        copy / 1e9
    );
    let mut out = out_path.map(|p| std::fs::File::create(p).expect("results file"));
    println!(
        "{:>5} {:>5} {:>6} {:>5} {:>8} {:>10} {:>10} {:>9} {:>8}",
        "heads", "NE", "extra", "s_q", "schedule", "median us", "KV MB", "KV GB/s", "of copy"
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for heads in [16, 32] {
        for ne in [512, 1024] {
            for record in [ExtraRecord::Fp8, ExtraRecord::Nvfp4] {
                for s_q in [1, 32, 128, 512] {
                    let record_name = record.short_name();
                    let name = format!("{heads},{ne},{record_name},{s_q}");
                    if only.as_ref().is_some_and(|o| *o != name) {
                        continue;
                    }
                    let cfg = Config {
                        heads,
                        ne,
                        record,
                        s_q,
                    };
                    let bytes = kv_bytes(cfg);
                    let sets = ROTATION_BYTES.div_ceil(bytes).clamp(1, 512);
                    let (problem, lists) = problem(cfg, sets, &mut rng);
                    let uploaded = DeviceProblem::upload(&problem, &stream).expect("upload");
                    let mut keep = Vec::new();
                    let mut calls = Vec::new();
                    for (swa, extra) in &lists {
                        let (a, pa) = upload_i32(&stream, &swa.ids);
                        let (b, pb) = upload_i32(&stream, &extra.ids);
                        keep.extend([a, b]);
                        let mut args = uploaded.args.clone();
                        args.swa_idx = DeviceTensor::contiguous::<i32>(pa, &[s_q, NK]);
                        args.extra_idx = DeviceTensor::contiguous::<i32>(pb, &[s_q, ne]);
                        calls.push(args);
                    }
                    let warm = calls[0].check(decode.target()).expect("valid call");
                    for schedule in [Schedule::Split, Schedule::Streamed] {
                        let key = warm.key.with_schedule(schedule);
                        if key.validate().is_err() {
                            continue;
                        }
                        decode.kernel(&key).expect("compile");
                        let us = time_launches(&stream, &calls, quick, s_q, |call| {
                            // SAFETY: every tensor addresses a live upload of its shape.
                            unsafe { decode.launch_with_schedule(&stream, call, schedule) }
                                .expect("launch");
                        });
                        let gbs = bytes as f64 / (us * 1e-6) / 1e9;
                        let schedule_name = schedule.short_name();
                        let dispatched = schedule == warm.key.schedule;
                        println!(
                            "{heads:>5} {ne:>5} {record_name:>6} {s_q:>5} {schedule_name:>8} {us:>10.1} {:>10.1} {gbs:>9.0} {:>7.1}%",
                            bytes as f64 / 1e6,
                            100.0 * gbs * 1e9 / copy
                        );
                        if let Some(f) = out.as_mut() {
                            writeln!(
                                f,
                                "{{\"heads\":{heads},\"nk\":{NK},\"ne\":{ne},\"record\":\"{record_name}\",\"s_q\":{s_q},\"schedule\":\"{schedule_name}\",\"dispatched\":{dispatched},\"kernel_us\":{us:.3},\"kv_bytes\":{bytes},\"copy_gbs\":{:.1},\"sets\":{}}}",
                                copy / 1e9,
                                calls.len()
                            )
                            .unwrap();
                        }
                    }
                }
            }
        }
    }
}
