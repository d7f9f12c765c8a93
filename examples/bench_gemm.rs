//! GPU benchmark of the GEMM (`C = A . B^T`, bf16 in, f32 accumulate, bf16 out) at M = N = K
//! in {2048, 4096, 8192} and the skinny 128 x 8192 x 8192, timed as serving runs kernels:
//! each timed launch is a CUDA-graph replay queued behind a short GPU spin, so the host's
//! launch cost is hidden; median and p10-p90 of the replays. Before timing, sampled outputs
//! are checked exactly against the host (the operands make every sum exact).
//!
//! `cargo run --release --example bench_gemm -- [--out results.jsonl] [--reps N]
//! [--shape M,N,K]` (one shape, e.g. under `ncu`); on the
//! GPU machine through `scripts/bench-gemm.sh`, which runs `torch.matmul` (cuBLAS) the
//! same way in the same run and prints the ratios.

use std::io::Write;
use std::sync::Arc;

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaStream, DevicePtr};
use dsl_core::jit::{self, Device, KernelArg, TensorArg};
use half::bf16;
use kernels::basics::spin::spin;
use kernels::gemm::{GemmGpu, GemmShape, exact_operands, reference_element};

const SHAPES: [(u32, u32, u32); 4] = [
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (128, 8192, 8192),
];

fn percentile(sorted: &[f32], p: f64) -> f32 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let mut out = None;
    let mut reps = 50usize;
    let mut only: Option<(u32, u32, u32)> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => {
                out = Some(std::fs::File::create(args.next().expect("--out FILE")).expect("create"))
            }
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).expect("--reps N"),
            "--shape" => {
                let v: Vec<u32> = args
                    .next()
                    .expect("--shape M,N,K")
                    .split(',')
                    .map(|x| x.parse().expect("--shape M,N,K"))
                    .collect();
                only = Some((v[0], v[1], v[2]));
            }
            "--help" => {
                println!("usage: bench_gemm [--out results.jsonl] [--reps N] [--shape M,N,K]");
                return;
            }
            other => {
                eprintln!("error: unknown argument `{other}` (see --help)");
                std::process::exit(2);
            }
        }
    }
    let dev = Arc::new(Device::open(0).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    }));
    let gemm = GemmGpu::load(Arc::clone(&dev)).expect("load the GEMM");
    let stream = Arc::clone(dev.stream());
    let spin_k = dev
        .load(&spin(gemm.target()).expect("trace spin"))
        .expect("load spin");
    let spin_out = stream.alloc_zeros::<u32>(1).unwrap();
    println!(
        "device: {} ({} SMs), target {}",
        dev.info().name,
        dev.info().sm_count,
        gemm.target()
    );
    println!(
        "{:>6} {:>6} {:>6} {:>10} {:>10} {:>10} {:>8}",
        "M", "N", "K", "median us", "p10 us", "p90 us", "TFLOP/s"
    );
    let shapes = only.map_or(SHAPES.to_vec(), |s| vec![s]);
    for (m, n, k) in shapes {
        let shape = GemmShape::new(m, n, k).unwrap();
        let (a, b) = exact_operands(shape, 11);
        let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
        let ad = stream.clone_htod(&bits(&a)).unwrap();
        let bd = stream.clone_htod(&bits(&b)).unwrap();
        let cd = stream.alloc_zeros::<u16>(m as usize * n as usize).unwrap();
        let (ap, bp, cp) = (
            ad.device_ptr(&stream).0,
            bd.device_ptr(&stream).0,
            cd.device_ptr(&stream).0,
        );
        let call = gemm.bind(shape, ap, bp, cp).expect("bind");
        // SAFETY: the three buffers hold the shape's matrices for the whole benchmark.
        unsafe { gemm.launch(&stream, &call) }.expect("launch");
        check_samples(&stream, shape, &a, &b, &cd);
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .unwrap();
        // SAFETY: as above.
        unsafe { gemm.launch(&stream, &call) }.expect("capture");
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .unwrap()
            .expect("captured");
        let spin_args = [
            KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(
                spin_out.device_ptr(&stream).0,
                [1],
            )),
            KernelArg::U32(20_000),
        ];
        let mut times = Vec::new();
        for i in 0..reps + 3 {
            // SAFETY: the spin kernel writes one u32 of `spin_out`.
            unsafe { spin_k.launch(&stream, jit::Launch::new([1, 1, 1]), &spin_args) }.unwrap();
            let start = stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .unwrap();
            graph.launch().unwrap();
            let end = stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .unwrap();
            let ms = start.elapsed_ms(&end).unwrap();
            if i >= 3 {
                times.push(ms);
            }
        }
        times.sort_by(f32::total_cmp);
        let (med, p10, p90) = (
            percentile(&times, 0.5),
            percentile(&times, 0.1),
            percentile(&times, 0.9),
        );
        let tflops = shape.flops() / (med as f64 * 1e-3) / 1e12;
        println!(
            "{m:>6} {n:>6} {k:>6} {:>10.1} {:>10.1} {:>10.1} {tflops:>8.1}",
            med * 1e3,
            p10 * 1e3,
            p90 * 1e3
        );
        if let Some(f) = out.as_mut() {
            writeln!(
                f,
                "{{\"m\":{m},\"n\":{n},\"k\":{k},\"median_us\":{:.2},\"p10_us\":{:.2},\"p90_us\":{:.2},\"tflops\":{tflops:.1}}}",
                med * 1e3,
                p10 * 1e3,
                p90 * 1e3
            )
            .unwrap();
        }
    }
}

/// 4096 sampled outputs (and the four corners) against the exact host value.
fn check_samples(
    stream: &Arc<CudaStream>,
    shape: GemmShape,
    a: &[bf16],
    b: &[bf16],
    c: &cudarc::driver::CudaSlice<u16>,
) {
    let got = stream.clone_dtoh(c).unwrap();
    let (m, n, k) = (shape.m as usize, shape.n as usize, shape.k);
    let mut bad = 0;
    let mut state = 0x1234_5678u64;
    let corners = [(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)];
    let samples = (0..4096).map(|_| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (((state >> 33) as usize) % m, ((state >> 13) as usize) % n)
    });
    for (i, j) in corners.into_iter().chain(samples) {
        if got[i * n + j] != reference_element(shape, a, b, i, j).to_bits() {
            bad += 1;
        }
    }
    assert_eq!(
        bad, 0,
        "{m}x{n}x{k}: {bad} sampled outputs differ from the host"
    );
}
