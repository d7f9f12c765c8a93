//! The five basic kernels on a GPU (sm_90a), against their host references. Each test
//! prints a SKIPPED line and passes where there is no GPU (`KESTREL_REQUIRE_GPU=1` makes
//! that a failure, as the GPU bundle's runner does).

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use dsl_core::Target;
use dsl_core::jit::{self, JitError, KernelArg, Launch, TensorArg};
use kernels::basics::{cluster_exchange, divergent_loop, row_reduce, spin, split_sum};

fn addr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    s.device_ptr(stream).0
}

fn tensor_u32(s: &CudaSlice<u32>, stream: &CudaStream, n: usize) -> KernelArg {
    KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(addr(s, stream), [n as i64]))
}

fn tensor_f32(s: &CudaSlice<f32>, stream: &CudaStream, n: usize) -> KernelArg {
    KernelArg::Tensor(TensorArg::contiguous::<f32, 1>(addr(s, stream), [n as i64]))
}

/// Deterministic pseudo-random values.
fn values(n: usize, seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed;
    (0..n).map(move |_| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    })
}

#[test]
fn gpu_row_reduce() {
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let (rows, cols) = (37usize, 256usize);
    let x: Vec<f32> = values(rows * cols, 7)
        .map(|v| (v % 20001) as f32 / 1000.0 - 10.0)
        .collect();
    let x_dev = stream.clone_htod(&x).unwrap();
    let max_dev = stream.clone_htod(&vec![f32::NAN; rows]).unwrap();
    let sum_dev = stream.clone_htod(&vec![f32::NAN; rows]).unwrap();
    let k = dev
        .kernel("row_reduce", "cols256", Target::Sm90a, || {
            row_reduce::row_reduce(Target::Sm90a, cols as u32)
        })
        .unwrap();
    let args = [
        KernelArg::Tensor(TensorArg::contiguous::<f32, 2>(
            addr(&x_dev, stream),
            [rows as i64, cols as i64],
        )),
        tensor_f32(&max_dev, stream, rows),
        tensor_f32(&sum_dev, stream, rows),
        KernelArg::U32(rows as u32),
    ];
    let grid = (rows as u32).div_ceil(row_reduce::WARPS);
    // SAFETY: the buffers hold rows x cols and rows f32 and outlive the read-back.
    unsafe { k.launch(stream, Launch::new([grid, 1, 1]), &args) }.unwrap();
    let (max, sum) = (
        stream.clone_dtoh(&max_dev).unwrap(),
        stream.clone_dtoh(&sum_dev).unwrap(),
    );
    let (want_max, want_sum) = row_reduce::reference(&x, cols);
    for r in 0..rows {
        assert_eq!(max[r], want_max[r], "row {r} max");
        // ex2.approx is within 2 ulp; 256 terms of it summed in f32.
        let rel = ((sum[r] - want_sum[r]) / want_sum[r]).abs();
        assert!(
            rel < 1e-5,
            "row {r} sum {} vs {} (rel {rel})",
            sum[r],
            want_sum[r]
        );
    }
    eprintln!("gpu_row_reduce: {rows} rows x {cols} match the host reference");
}

#[test]
fn gpu_divergent_loop() {
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let n = 1000usize;
    let limit = 200u32;
    let start: Vec<u32> = values(n, 3).map(|v| (v % 100_000) as u32 + 1).collect();
    let start_dev = stream.clone_htod(&start).unwrap();
    let outs: Vec<CudaSlice<u32>> = (0..3)
        .map(|_| stream.clone_htod(&vec![u32::MAX; n]).unwrap())
        .collect();
    let k = dev
        .kernel("divergent_loop", "", Target::Sm90a, || {
            divergent_loop::divergent_loop(Target::Sm90a)
        })
        .unwrap();
    let args = [
        tensor_u32(&start_dev, stream, n),
        tensor_u32(&outs[0], stream, n),
        tensor_u32(&outs[1], stream, n),
        tensor_u32(&outs[2], stream, n),
        KernelArg::U32(n as u32),
        KernelArg::U32(limit),
    ];
    let grid = (n as u32).div_ceil(divergent_loop::THREADS);
    // SAFETY: every tensor holds n u32 and outlives the read-back.
    unsafe { k.launch(stream, Launch::new([grid, 1, 1]), &args) }.unwrap();
    let got: Vec<Vec<u32>> = outs.iter().map(|o| stream.clone_dtoh(o).unwrap()).collect();
    for i in 0..n {
        let (steps, peak, mix) = divergent_loop::reference(start[i], limit);
        assert_eq!(
            (got[0][i], got[1][i], got[2][i]),
            (steps, peak, mix),
            "thread {i}, start {}",
            start[i]
        );
    }
    eprintln!("gpu_divergent_loop: {n} divergent trajectories match the host reference");
}

#[test]
fn gpu_cluster_exchange_with_pdl() {
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let cluster = 4u32;
    let ctas = 8usize;
    let n = ctas * cluster_exchange::THREADS as usize;
    let input: Vec<u32> = values(n, 11).map(|v| v as u32).collect();
    let in_dev = stream.clone_htod(&input).unwrap();
    let out_dev = stream.clone_htod(&vec![0u32; n]).unwrap();
    let k = dev
        .kernel("cluster_exchange", "c4", Target::Sm90a, || {
            cluster_exchange::cluster_exchange(Target::Sm90a, cluster)
        })
        .unwrap();
    let args = [
        tensor_u32(&in_dev, stream, n),
        tensor_u32(&out_dev, stream, n),
    ];
    // Twice, back to back, the second a PDL dependent of the first.
    for launch in [
        Launch::new([ctas as u32, 1, 1]),
        Launch::new([ctas as u32, 1, 1]).with_pdl(),
    ] {
        // SAFETY: both tensors hold n u32 and outlive the read-back.
        unsafe { k.launch(stream, launch, &args) }.unwrap();
    }
    let got = stream.clone_dtoh(&out_dev).unwrap();
    assert_eq!(got, cluster_exchange::reference(&input, cluster));
    eprintln!("gpu_cluster_exchange_with_pdl: {ctas} CTAs in clusters of {cluster} match");
}

/// More CTAs than the GPU holds at once, so that the last to count itself in is not the
/// last launched; ten launches back to back, each finding the counter the last one reset.
#[test]
fn gpu_split_sum_is_finished_by_the_last_cta() {
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let (ctas, per_thread) = (1000usize, 4u32);
    let n = ctas * (split_sum::THREADS * per_thread) as usize;
    let x: Vec<f32> = values(n, 5)
        .map(|v| (v % 2001) as f32 / 256.0 - 4.0)
        .collect();
    let x_dev = stream.clone_htod(&x).unwrap();
    let partials = stream.clone_htod(&vec![f32::NAN; ctas]).unwrap();
    let count = stream.clone_htod(&[0u32]).unwrap();
    let sum = stream.clone_htod(&[f32::NAN]).unwrap();
    let k = dev
        .kernel("split_sum", "per_thread4", Target::Sm90a, || {
            split_sum::split_sum(Target::Sm90a, per_thread)
        })
        .unwrap();
    let args = [
        tensor_f32(&x_dev, stream, n),
        tensor_f32(&partials, stream, ctas),
        tensor_u32(&count, stream, 1),
        tensor_f32(&sum, stream, 1),
    ];
    let want = split_sum::reference(&x, ctas);
    for launch in 0..10 {
        // SAFETY: the tensors hold n, ctas, 1 and 1 values and outlive the read-back.
        unsafe { k.launch(stream, Launch::new([ctas as u32, 1, 1]), &args) }.unwrap();
        let got = stream.clone_dtoh(&sum).unwrap()[0];
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "launch {launch}: {got} vs {want}"
        );
        assert_eq!(stream.clone_dtoh(&count).unwrap(), [0], "launch {launch}");
    }
    eprintln!("gpu_split_sum: {ctas} CTAs, 10 launches, bitwise the host's sum");
}

#[test]
fn gpu_spin() {
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let out = stream.clone_htod(&[0u32]).unwrap();
    let k = dev
        .kernel("spin", "", Target::Sm90a, || spin::spin(Target::Sm90a))
        .unwrap();
    let steps = 100_000u32;
    let args = [tensor_u32(&out, stream, 1), KernelArg::U32(steps)];
    // SAFETY: `out` holds one u32 and outlives the read-back.
    unsafe { k.launch(stream, Launch::new([1, 1, 1]), &args) }.unwrap();
    assert_eq!(stream.clone_dtoh(&out).unwrap(), [spin::reference(steps)]);
    eprintln!("gpu_spin: {steps} steps match the host reference");
}

/// The dynamic shared memory starts on a 1024-byte boundary, as the 128-byte swizzled MMA
/// tiles and their descriptors assume.
#[test]
fn gpu_dynamic_smem_is_1024_aligned() {
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let out = stream.clone_htod(&[u32::MAX]).unwrap();
    let k = dev
        .kernel("smem_base", "", Target::Sm90a, || {
            dsl_core::trace::trace_kernel("smem_base", Target::Sm90a, || {
                use dsl_core::trace::KernelParam;
                dsl_core::trace::threads(32, 1, 1);
                let out = dsl_core::trace::Tensor::<u32, 1>::declare("out");
                let _buffer = dsl_core::trace::smem_alloc("buffer", 64 * 1024, 1024);
                dsl_core::arch::memory::store(out.base(), dsl_core::trace::smem_base());
            })
            .map_err(JitError::from)
        })
        .unwrap();
    // SAFETY: `out` holds one u32.
    unsafe {
        k.launch(
            stream,
            Launch::new([1, 1, 1]),
            &[tensor_u32(&out, stream, 1)],
        )
    }
    .unwrap();
    let base = stream.clone_dtoh(&out).unwrap()[0];
    assert_eq!(base % 1024, 0, "dynamic shared memory at {base:#x}");
    eprintln!("gpu_dynamic_smem_is_1024_aligned: base {base:#x}");
}
