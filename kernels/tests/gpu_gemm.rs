//! The GEMM on a GPU: exact against the host on whole and ragged shapes, and bitwise
//! identical over repeated launches.

use std::sync::Arc;

use cudarc::driver::DevicePtr;
use dsl_core::Target;
use dsl_core::jit;
use half::bf16;
use kernels::gemm::{GemmGpu, GemmShape, exact_operands, reference};

fn run(gemm: &GemmGpu, dev: &jit::Device, shape: GemmShape, a: &[bf16], b: &[bf16]) -> Vec<bf16> {
    let stream = dev.stream();
    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
    let ad = stream.clone_htod(&bits(a)).unwrap();
    let bd = stream.clone_htod(&bits(b)).unwrap();
    let cd = stream
        .clone_htod(&vec![0x7fc0u16; shape.m as usize * shape.n as usize])
        .unwrap();
    {
        let (ap, _ga) = ad.device_ptr(stream);
        let (bp, _gb) = bd.device_ptr(stream);
        let (cp, _gc) = cd.device_ptr(stream);
        let call = gemm.bind(shape, ap, bp, cp).unwrap();
        // SAFETY: the buffers hold the shape's matrices and outlive the copy back.
        unsafe { gemm.launch(stream, &call) }.unwrap();
    }
    stream
        .clone_dtoh(&cd)
        .unwrap()
        .into_iter()
        .map(bf16::from_bits)
        .collect()
}

#[test]
fn gpu_gemm_is_exact_on_whole_and_ragged_shapes() {
    let Some(dev) = jit::test_device(Target::Sm90a).map(Arc::new) else {
        return;
    };
    let gemm = GemmGpu::load(Arc::clone(&dev)).unwrap();
    for (m, n, k) in [
        (1024, 1024, 512),
        (1000, 776, 520),
        (128, 2048, 1024),
        (300, 264, 72),
    ] {
        let shape = GemmShape::new(m, n, k).unwrap();
        let (a, b) = exact_operands(shape, m as u64 + n as u64);
        let got = run(&gemm, &dev, shape, &a, &b);
        let want = reference(shape, &a, &b);
        let bad = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| g.to_bits() != w.to_bits())
            .count();
        assert_eq!(
            bad,
            0,
            "{m}x{n}x{k}: {bad} of {} elements differ",
            want.len()
        );
        eprintln!("gpu_gemm: {m} x {n} x {k} exact");
    }
}

#[test]
fn gpu_gemm_is_bitwise_identical_over_launches() {
    let Some(dev) = jit::test_device(Target::Sm90a).map(Arc::new) else {
        return;
    };
    let gemm = GemmGpu::load(Arc::clone(&dev)).unwrap();
    let shape = GemmShape::new(512, 768, 1024).unwrap();
    let (mut a, b) = exact_operands(shape, 7);
    // Inexact values too: the summation order must be fixed, not merely exact.
    for (i, x) in a.iter_mut().enumerate() {
        *x = bf16::from_f32(x.to_f32() + (i % 7) as f32 * 0.0137);
    }
    let first = run(&gemm, &dev, shape, &a, &b);
    for _ in 0..2 {
        assert!(
            run(&gemm, &dev, shape, &a, &b)
                .iter()
                .zip(&first)
                .all(|(x, y)| x.to_bits() == y.to_bits())
        );
    }
}

#[test]
fn gpu_gemm_sm100a_numerics() {
    let Some(dev) = jit::test_device(Target::Sm100a).map(Arc::new) else {
        return;
    };
    let gemm = GemmGpu::load(Arc::clone(&dev)).unwrap();
    let shape = GemmShape::new(1000, 776, 520).unwrap();
    let (a, b) = exact_operands(shape, 3);
    assert_eq!(run(&gemm, &dev, shape, &a, &b), reference(shape, &a, &b));
}
