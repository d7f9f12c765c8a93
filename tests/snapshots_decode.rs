//! The decode kernel's PTX for every snapshot key on both targets (`snapshot_keys`), one
//! reviewed file per key: `cargo insta review` blesses a change. `KESTREL_SNAPSHOT_KEY`
//! filters the keys by name (e.g. `h32_nk128_ne1024`). `tests/ptxas.rs` assembles them.

use dsl_core::Target;
use dsl_core::emit::ptx::emit;
use kernels::swap_ab_decode::{CompileKey, snapshot_keys, swap_ab_decode, variant_keys};

/// Shared memory a CTA may opt in to on sm_90 and sm_100 (227 KiB).
const MAX_SMEM_PER_CTA: u32 = 227 * 1024;

fn check_target(target: Target) {
    let filter = std::env::var("KESTREL_SNAPSHOT_KEY").unwrap_or_default();
    for key in snapshot_keys(target)
        .into_iter()
        .chain(variant_keys(target))
    {
        let name = key.to_string();
        if !name.contains(&filter) {
            continue;
        }
        let kernel = swap_ab_decode(target, &key).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            kernel.smem_bytes <= MAX_SMEM_PER_CTA,
            "{name}: {} bytes of shared memory, a CTA may take {MAX_SMEM_PER_CTA}",
            kernel.smem_bytes
        );
        let module = emit(&kernel).unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_snapshot!(format!("swap_ab_decode__{name}"), module.text);
    }
}

#[test]
fn decode_ptx_sm100a() {
    check_target(Target::Sm100a);
}

#[test]
fn decode_ptx_sm90a() {
    check_target(Target::Sm90a);
}

/// 64 and 128 heads run the same per-group kernel: only the grid's z differs.
#[test]
fn head_groups_share_one_kernel() {
    for target in Target::ALL {
        let key = |heads| CompileKey {
            heads,
            swa_width: 128,
            extra_width: 512,
            extra_record: kernels::swap_ab_decode::ExtraRecord::Fp8,
            swa_page: 64,
            extra_page: 64,
            target,
            schedule: kernels::swap_ab_decode::Schedule::SPLIT,
        };
        let ptx = |heads| {
            emit(&swap_ab_decode(target, &key(heads)).unwrap())
                .unwrap()
                .text
        };
        assert_eq!(ptx(64), ptx(128));
        assert_ne!(ptx(32), ptx(64), "a group offset reads %ctaid.z");
    }
}
