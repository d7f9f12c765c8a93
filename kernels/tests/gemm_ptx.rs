//! The GEMM kernel's PTX: it traces and assembles for both targets without spills or
//! degraded wgmma/setmaxnreg.

use dsl_core::Target;
use dsl_core::emit::ptx;
use kernels::gemm::gemm_bf16_tn;

#[test]
fn gemm_assembles_for_every_target() {
    for target in Target::ALL {
        let kernel = gemm_bf16_tn(target).unwrap_or_else(|e| panic!("{e}"));
        let module = ptx::emit(&kernel).unwrap();
        if std::env::var_os("KESTREL_DUMP_PTX").is_some() {
            std::fs::write(
                format!("/tmp/gemm_{}.ptx", target.short_name()),
                &module.text,
            )
            .unwrap();
        }
        match dsl_core::ptxas::assemble(&module) {
            Ok(report) => {
                eprintln!(
                    "{target}: {} registers, {} spill bytes",
                    report.registers, report.spill_stores
                );
                assert_eq!(
                    report.spill_stores + report.spill_loads,
                    0,
                    "{target}: spills"
                );
            }
            Err(dsl_core::ptxas::PtxasError::NotFound) => eprintln!("SKIPPED ptxas: not found"),
            Err(e) => panic!("{e}"),
        }
    }
}
