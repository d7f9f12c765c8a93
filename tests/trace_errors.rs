//! Trace-time errors point at the author's source. Each test is one real mistake in a small
//! kernel and asserts the whole diagnostic as `TraceError` prints it: this file and the line
//! and column of the offending DSL call, the stage in force, and the message. The guide
//! shows the same messages (`kestrel::guide::errors`).

use dsl_core::Target;
use dsl_core::arch::mbarrier::Mbarrier;
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::operand::{DescFormat, SmemOperand};
use dsl_core::arch::sm100::tcgen05::{self, MmaF16Bf16Ss, TmemAddr};
use dsl_core::arch::thread::{elect_one, lane_id, warp_id};
use dsl_core::layout::{ComposedLayout, Major, Swizzle, canonical};
use dsl_core::trace::{Tensor, TraceError, smem_alloc, smem_tile, stage, threads};
use dsl_macros::kernel;

/// `path:line:column` of `call` on the line of this file that ends with the comment
/// `// mistake: <tag>`.
fn site(tag: &str, call: &str) -> String {
    let source = include_str!("trace_errors.rs");
    let marker = format!("// mistake: {tag}");
    let mut lines = source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with(&marker));
    let (index, line) = lines.next().expect("the marked line");
    assert!(lines.next().is_none(), "one line is marked `{marker}`");
    let column = line.find(call).expect("the call on the marked line") + 1;
    format!("tests/trace_errors.rs:{}:{column}", index + 1)
}

/// Every diagnostic of a failed trace, as printed.
fn printed(result: Result<dsl_core::ir::Kernel, TraceError>) -> Vec<String> {
    let error = result.expect_err("the mistake is a trace error");
    error.diagnostics.iter().map(|d| d.to_string()).collect()
}

/// Eight warps read the scores back from tensor memory, warp `w` taking lanes `32 w ..`. A
/// warp can only reach lane quadrant `w % 4`: warps 4-7 ask for lanes past the 128 there are.
#[kernel]
fn scores_by_warp(s_out: Tensor<f32, 1>) {
    threads(256, 1, 1);
    let slot = smem_alloc("tmem_slot", 4, 4);
    let warp = warp_id();
    stage("4: S from tensor memory, one warp per 32 rows");
    let tmem = TmemAddr::from_base(load(slot.addr()));
    for w in 0..8u32 {
        if warp == w {
            let s = tcgen05::ld_32x32b(tmem.lane(32 * w).value(), 16); // mistake: quadrant
            tcgen05::wait_ld();
            let row = 32 * w + lane_id();
            for (c, v) in s.iter().enumerate() {
                let at = (row * 16 + c as u32).mul_wide(4);
                store(s_out.base() + at, v.bitcast::<f32>());
            }
        }
    }
}

#[test]
fn wrong_tmem_lane_quadrant() {
    let at = site("quadrant", "lane(");
    let stage = "4: S from tensor memory, one warp per 32 rows";
    let expected: Vec<String> = [128, 160, 192, 224]
        .iter()
        .map(|lane| {
            format!(
                "{at} [stage {stage}]: TMEM lane offset {lane}: a warp accesses one 32-lane \
                 quadrant, so the lane offset must be 0, 32, 64 or 96 (warp w uses 32 * (w % \
                 4)); lane {lane} is past the 128 lanes of tensor memory: warp w reads quadrant \
                 w % 4, not w"
            )
        })
        .collect();
    assert_eq!(printed(scores_by_warp(Target::Sm100a)), expected);
}

/// Q `[16, 512]` bf16 stored row-major under a 128-byte swizzle. The MMA's 128-byte-swizzled
/// K-major form has 128-byte rows (64 elements) and puts the rest of K in further 64-column
/// blocks after all rows, so no descriptor describes this tile.
#[kernel]
fn scores_from_row_major_q() {
    threads(128, 1, 1);
    stage("2: Q into shared memory");
    let kv = smem_tile(
        "kv",
        canonical::k_major(Swizzle::B128, 128, 512, 2).unwrap(),
    );
    let row_major = "(16,512):(512,1)".parse().unwrap();
    let q = smem_tile(
        "q",
        ComposedLayout::new(Swizzle::B128, 0, row_major, 2).unwrap(),
    );
    stage("3: S[128, H] = KV . Q^T");
    let _kv = SmemOperand::new(&kv, Major::K, DescFormat::Umma);
    let _q = SmemOperand::new(&q, Major::K, DescFormat::Umma); // mistake: swizzle
}

#[test]
fn swizzled_tile_that_is_not_a_canonical_operand() {
    let at = site("swizzle", "SmemOperand::new");
    assert_eq!(
        printed(scores_from_row_major_q(Target::Sm100a)),
        [format!(
            "{at} [stage 3: S[128, H] = KV . Q^T]: shared buffer `q` as an MMA operand: not a \
             canonical K-major SW128 layout: expected Sw<3,4,3> o ((8,m),(64,k)):((64,SBO),(1,_)) \
             in 2-byte elements (LBO, SBO = byte offsets / 2; `_` = any step between MMA \
             K-steps), got Sw<3,4,3> o smem_ptr[16b](+0) o (16,512):(512,1): element (mn 1, k \
             0) is at linear byte 1024, the form (LBO unused, SBO 8192 B) puts it at 128; \
             `canonical::k_major(Swizzle::B128, 16, 512, 2)` builds the canonical tile of this \
             shape: Sw<3,4,3> o smem_ptr[16b](+0) o ((8,2),(64,8)):((64,512),(1,1024))"
        )]
    );
}

/// A 64-row sliding-window KV tile given to the MMA set up for the 128-row compressed tile.
#[kernel]
fn scores_of_a_swa_tile() {
    threads(128, 1, 1);
    let kv = smem_tile("kv", canonical::k_major(Swizzle::B128, 64, 512, 2).unwrap());
    let q = smem_tile("q", canonical::k_major(Swizzle::B128, 16, 512, 2).unwrap());
    let slot = smem_alloc("tmem_slot", 4, 4);
    let s_done = Mbarrier::at(smem_alloc("s_done", 8, 8).addr());
    stage("3: S[128, H] = KV . Q^T");
    let kv = SmemOperand::new(&kv, Major::K, DescFormat::Umma);
    let q = SmemOperand::new(&q, Major::K, DescFormat::Umma);
    let atom = MmaF16Bf16Ss::bf16(128, 16, Major::K, Major::K);
    let d = TmemAddr::from_base(load(slot.addr()));
    if warp_id() == 0 {
        if elect_one() {
            for ks in 0..32 {
                atom.mma(d, &kv, &q, ks, ks > 0); // mistake: shape
            }
            tcgen05::commit(s_done);
        }
    }
}

#[test]
fn mma_shape_that_does_not_match_the_operands() {
    let at = site("shape", "mma(");
    // Reported once, not once per unrolled K-step.
    assert_eq!(
        printed(scores_of_a_swa_tile(Target::Sm100a)),
        [format!(
            "{at} [stage 3: S[128, H] = KV . Q^T]: tcgen05.mma m128n16k16: expects A to be [M, \
             K] = [128, K], got `kv` [64, 512]"
        )]
    );
}
