//! The GEMM's PTX per target, as reviewed snapshots (`cargo insta review` blesses a
//! change). `tests/ptxas.rs` assembles them.

use dsl_core::Target;
use dsl_core::emit::ptx::emit;
use kernels::gemm::gemm_bf16_tn;

#[test]
fn gemm_ptx() {
    for target in Target::ALL {
        let module = emit(&gemm_bf16_tn(target).unwrap()).expect("emits");
        insta::assert_snapshot!(
            format!("gemm_bf16_tn__{}", target.short_name()),
            module.text
        );
    }
}
