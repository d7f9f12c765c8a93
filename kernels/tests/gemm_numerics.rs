//! The GEMM in the interpreter, both targets: exact against the host on a whole shape and
//! on a ragged one (M, N and K all off the tile grid), with fewer persistent CTAs than
//! tiles so every CTA walks several tiles through the pipeline.

use dsl_core::Target;
use kernels::gemm::{GemmShape, exact_operands, reference, run_interpreter};

fn check(target: Target, m: u32, n: u32, k: u32, ctas: u32) {
    let shape = GemmShape::new(m, n, k).unwrap();
    let (a, b) = exact_operands(shape, (m * 31 + n) as u64);
    let got =
        run_interpreter(target, shape, &a, &b, ctas).unwrap_or_else(|e| panic!("{target}: {e}"));
    let want = reference(shape, &a, &b);
    let bad = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count();
    assert_eq!(
        bad,
        0,
        "{target} {m}x{n}x{k}: {bad} of {} outputs differ",
        want.len()
    );
}

#[test]
fn gemm_is_exact_on_a_whole_shape() {
    for target in Target::ALL {
        check(target, 256, 512, 128, 3);
    }
}

#[test]
fn gemm_is_exact_on_a_ragged_shape() {
    for target in Target::ALL {
        check(target, 200, 264, 72, 2);
    }
}

#[test]
fn gemm_refuses_shapes_the_copy_engine_cannot_address() {
    let e = GemmShape::new(128, 128, 100).unwrap_err().to_string();
    assert!(e.contains("K must be a multiple of 8"), "{e}");
    let e = GemmShape::new(128, 127, 128).unwrap_err().to_string();
    assert!(e.contains("N must be even"), "{e}");
}
