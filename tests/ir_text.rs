//! The IR's text form round-trips every kernel the project traces: the basics, the GEMM on
//! both targets, and the decode kernel for every snapshot and variant key, both entry
//! points. A parsed kernel equals the traced one, prints the same text, passes
//! `ir::verify`, prints byte-identical PTX and compiles for the interpreter.

use dsl_core::Target;
use dsl_core::emit::ptx::emit;
use dsl_core::interp::Program;
use dsl_core::ir::Kernel;
use dsl_core::ir::text::{parse, print};
use dsl_core::ir::verify::verify;
use kernels::basics::{cluster_exchange, divergent_loop, row_reduce, spin, split_sum};
use kernels::gemm::gemm_bf16_tn;
use kernels::swap_ab_decode::{snapshot_keys, trace_entry, variant_keys};

fn round_trip(what: &str, kernel: &Kernel) {
    let text = print(kernel);
    let parsed = parse(&text).unwrap_or_else(|e| {
        let line = text.lines().nth(e.line as usize - 1).unwrap_or("");
        panic!("{what}: the printed text does not parse: {e}\n  {line}")
    });
    assert_eq!(print(&parsed), text, "{what}: print(parse(text)) differs");
    assert!(
        parsed == *kernel,
        "{what}: the parsed kernel differs from the traced one"
    );
    verify(&parsed).unwrap_or_else(|e| panic!("{what}: the parsed kernel fails verify: {e}"));
    assert_eq!(
        emit(&parsed).expect("emits").text,
        emit(kernel).expect("emits").text,
        "{what}: the parsed kernel prints other PTX"
    );
    Program::compile(&parsed)
        .unwrap_or_else(|e| panic!("{what}: the interpreter refuses the parsed kernel: {e}"));
}

#[test]
fn basics_and_gemm_round_trip() {
    for target in Target::ALL {
        for kernel in [
            row_reduce::row_reduce(target, 256).unwrap(),
            divergent_loop::divergent_loop(target).unwrap(),
            cluster_exchange::cluster_exchange(target, 4).unwrap(),
            spin::spin(target).unwrap(),
            split_sum::split_sum(target, 4).unwrap(),
            gemm_bf16_tn(target).unwrap(),
        ] {
            round_trip(&format!("{} for {target}", kernel.name), &kernel);
        }
    }
}

#[test]
fn decode_round_trips_for_every_key_and_entry_point() {
    for target in Target::ALL {
        for key in snapshot_keys(target)
            .into_iter()
            .chain(variant_keys(target))
        {
            for debug in [false, true] {
                let kernel = trace_entry(&key, debug).unwrap_or_else(|e| panic!("{key}: {e}"));
                round_trip(&format!("{} for {key}", kernel.name), &kernel);
            }
        }
    }
}
