//! Every op of the DSL, emitted: one kernel per target uses each op that target has, its
//! PTX must contain each op's spelling, and ptxas must accept the module (a missing ptxas is
//! a skip here, a failure under `KESTREL_REQUIRE_PTXAS=1`). Asking for an op a target lacks
//! is a trace error naming the op and the target.

use dsl_core::Target;
use dsl_core::arch::cluster::{cluster_arrive, cluster_arrive_relaxed, cluster_sync, cluster_wait};
use dsl_core::arch::cvt::{self, CvtPath};
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{
    LoadOpts, load, load_u8, load_vec, load_vec_if, store, store_if, store_u8, store_vec,
};
use dsl_core::arch::operand::{DescFormat, SmemOperand};
use dsl_core::arch::pdl::{grid_dependency_wait, launch_dependents};
use dsl_core::arch::sm90::wgmma;
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::{fence_acq_rel_cluster, fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{
    ballot, block_idx_x, block_idx_y, block_idx_z, cluster_cta_rank, cluster_size, elect_one,
    grid_dim_x, lane_id, shfl_down, shfl_idx, shfl_up, shfl_xor, thread_idx_x, warp_id,
};
use dsl_core::emit::ptx::emit;
use dsl_core::layout::{Major, Swizzle, UmmaInstrDesc, canonical};
use dsl_core::trace::{
    GlobalPtr, Tensor, Val, cluster_dims, current_target, max_regs, min_ctas_per_sm, smem_alloc,
    smem_tile, threads, trace_kernel,
};
use dsl_macros::kernel;

/// Every target-independent op, then the target's own MMA family.
#[kernel]
fn op_zoo(data: Tensor<u32, 1>, n: Val<u32>, scale: Val<f32>, flags: GlobalPtr<u8>) {
    let target = current_target();
    threads(128, 1, 1);
    min_ctas_per_sm(1);
    max_regs(128);
    cluster_dims(2, 1, 1);
    let tid = thread_idx_x();
    let at = data.base() + tid.mul_wide(16);
    grid_dependency_wait();

    // Integer and float arithmetic, comparisons, selection, conversions.
    let [a, b, c, d] = load_vec::<u32, 4, _>(at);
    let [e, f] = load_vec_if::<u32, 2, _>(at + 16, tid.lt(n), 7u32, LoadOpts { nc: true });
    let g: Val<u32> = load(at + 32);
    let byte = load_u8(at + 40, Some(tid.ge(1u32)));
    let mut x = (a + b - c) * d / (e | 1u32) % (f | 1u32);
    x = (x & g) ^ (x | byte) ^ !x;
    x = (x << 3u32) >> (tid & 7u32);
    x = x.min(n).max(3u32).mul_hi(g).fma(2u32, e);
    let wide = x.mul_wide(g) + tid.cast::<u64>();
    let signed = (x.bitcast::<i32>() - 5i32).abs() >> 1u32;
    let long = signed.cast::<i64>() * -3i64 + signed.mul_wide(7i32);
    let fx = x.cast::<f32>() * scale + 0.5;
    let fy = fx.fma(scale, -fx).max(-1.0f32).min(8.0f32).abs();
    let fz = (fy.ex2() + fy.rcp() / (fx + 1.0)) - (-fy);
    let fi = fz.cast::<i32>();
    let p = fz.lt(1.0f32) | fz.ne(fz) & fz.ge(0.0f32) ^ fz.eq(2.0f32);
    let q = p.select(fz, fy);
    let sel = (x.gt(n) & x.le(9u32)).select(x, g);

    // Narrow formats, both paths where a target has a native one.
    let bf = cvt::f32x2_to_bf16x2(fz, q);
    let (lo, hi) = cvt::bf16x2_to_f32x2(bf);
    let e4 = cvt::f32x4_to_e4m3x4([lo, hi, fz, q]);
    let deq = cvt::e4m3x4_to_bf16x4_scaled(
        e4,
        cvt::ue8m0_to_bf16x2_with(g & 0xffu32, CvtPath::Emulated),
    );
    let scale = cvt::e2m1_block_scale_with(e4, Val::constant(1), CvtPath::Emulated);
    let fp4 = cvt::bf16x2_fma(
        cvt::e2m1x8_to_bf16x8_with(e4, CvtPath::Emulated)[1],
        cvt::e2m1x8_scaled(e4, scale)[2],
        deq[0],
    );
    let ue = cvt::ue8m0_round_up_with(fz, CvtPath::Emulated)
        + cvt::ue8m0_to_f32(g & 0xffu32).bitcast::<u32>();
    let mut packed = fp4.bitcast::<u32>() ^ deq[1].bitcast::<u32>() ^ ue;
    if target == Target::Sm100a {
        let native = cvt::ue8m0_round_up_with(fz, CvtPath::Native)
            + cvt::ue8m0_to_bf16x2_with(g & 0xffu32, CvtPath::Native).bitcast::<u32>()
            + cvt::e2m1x8_to_bf16x8_with(e4, CvtPath::Native)[2].bitcast::<u32>();
        packed ^= native;
    }

    // Warp collectives and identities.
    let lane = lane_id();
    let w = warp_id();
    let shuffled =
        shfl_xor(packed, 1) + shfl_idx(packed, 3u32) + shfl_up(packed, 1) + shfl_down(packed, 2);
    let votes = ballot(p) + elect_one().to_u32();
    let ids =
        block_idx_x() + block_idx_y() + block_idx_z() + grid_dim_x() + cluster_size() + lane + w;

    // Shared memory, mbarriers, the cluster and distributed shared memory.
    let buf = smem_alloc("buf", 128 * 16, 16);
    let bar = Mbarrier::at(smem_alloc("bar", 16, 8).addr());
    let other = Mbarrier::at(bar.addr() + 8);
    if tid == 0 {
        bar.init(128u32);
        other.init(1u32);
        init_fence();
    }
    cluster_sync();
    let slot = buf.addr() + tid * 16;
    store_vec(slot, [shuffled, votes, ids, sel]);
    store_u8(slot + 3, byte, None);
    fence_proxy_async_shared();
    sync_threads();
    bar.arrive();
    bar.wait(0u32);
    if tid == 0 {
        other.arrive_expect_tx(0u32);
        other.arrive_in_cta(cluster_cta_rank() ^ 1u32);
    }
    fence_acq_rel_cluster();
    cluster_arrive();
    cluster_wait();
    let peer: Val<u32> = load(slot.in_cta(cluster_cta_rank() ^ 1u32));
    let [v0, v1] = load_vec::<u32, 2, _>(slot);

    // The target's MMA family.
    let tile = smem_tile(
        "tile",
        canonical::k_major(Swizzle::B128, 64, 64, 2).unwrap(),
    );
    store_vec(tile.at(tid / 2, (tid % 2) * 32), [v0, v1, v0, v1]);
    store_vec(tile.at(tid / 2, (tid % 2) * 32 + 8), [v0, v1, v0, v1]);
    store_vec(tile.at(tid / 2, (tid % 2) * 32 + 16), [v0, v1, v0, v1]);
    store_vec(tile.at(tid / 2, (tid % 2) * 32 + 24), [v0, v1, v0, v1]);
    fence_proxy_async_shared();
    sync_threads();
    let mma_out = match target {
        Target::Sm100a => {
            let tmem_slot = smem_alloc("tmem_slot", 4, 16).addr();
            let done = Mbarrier::at(smem_alloc("mma_done", 8, 8).addr());
            if tid == 0 {
                done.init(1u32);
            }
            if w == 0 {
                tcgen05::alloc(tmem_slot, 64);
                tcgen05::relinquish_alloc_permit();
            }
            tcgen05::fence_before_thread_sync();
            sync_threads();
            tcgen05::fence_after_thread_sync();
            let tmem = TmemAddr::from_base(load::<u32, _>(tmem_slot));
            let operand = SmemOperand::new(&tile, Major::K, DescFormat::Umma);
            let idesc = UmmaInstrDesc::bf16(64, 64).unwrap().bits();
            if w == 0 {
                if elect_one() {
                    for ks in 0..4 {
                        tcgen05::mma_f16(
                            tmem,
                            operand.k_step(ks),
                            operand.k_step(ks),
                            idesc,
                            ks > 0,
                        );
                    }
                    tcgen05::commit(done);
                }
            }
            done.wait(0u32);
            tcgen05::fence_after_thread_sync();
            let words = tcgen05::ld_32x32b(tmem.warp_quadrant(w), 4);
            tcgen05::wait_ld();
            tcgen05::fence_before_thread_sync();
            sync_threads();
            if w == 0 {
                tcgen05::fence_after_thread_sync();
                tcgen05::dealloc(tmem, 64);
            }
            words[0] + words[3]
        }
        Target::Sm90a => {
            let operand = SmemOperand::new(&tile, Major::K, DescFormat::Gmma);
            let acc = wgmma::Accumulator::zeros(64);
            wgmma::fence();
            for ks in 0..4 {
                wgmma::mma_async(&acc, operand.k_step(ks), operand.k_step(ks), ks > 0, 0, 0);
            }
            wgmma::commit_group();
            wgmma::wait_group(0);
            acc.get(0).bitcast::<u32>() + acc.get(31).bitcast::<u32>()
        }
    };

    launch_dependents();
    let result =
        peer + v1 + fi.bitcast::<u32>() + (wide.cast::<u32>() ^ long.cast::<u32>()) + mma_out;
    store_if(at, result, tid.lt(n));
    store(at + 4, q);
    cluster_arrive_relaxed();
    cluster_wait();
}

/// Each op's PTX spelling, and the targets that have it.
const SPELLINGS: &[(&str, &[Target])] = &[
    ("ld.param.u64", &Target::ALL),
    (".param .u64 flags", &Target::ALL),
    ("cvta.to.global.u64", &Target::ALL),
    ("ld.global.v4.b32", &Target::ALL),
    ("ld.global.nc.v2.b32", &Target::ALL),
    ("ld.global.u8", &Target::ALL),
    ("st.global.b32", &Target::ALL),
    ("st.shared.v4.b32", &Target::ALL),
    ("st.shared.u8", &Target::ALL),
    ("ld.shared.v2.b32", &Target::ALL),
    ("ld.shared::cluster.b32", &Target::ALL),
    ("mov.u32 %r", &Target::ALL),
    ("add.u32", &Target::ALL),
    ("sub.u32", &Target::ALL),
    ("mul.lo.u32", &Target::ALL),
    ("div.u32", &Target::ALL),
    ("rem.u32", &Target::ALL),
    ("mul.hi.u32", &Target::ALL),
    ("mul.wide.u32", &Target::ALL),
    ("mul.wide.s32", &Target::ALL),
    ("mad.lo.u32", &Target::ALL),
    ("min.u32", &Target::ALL),
    ("max.f32", &Target::ALL),
    ("abs.s32", &Target::ALL),
    ("abs.f32", &Target::ALL),
    ("neg.f32", &Target::ALL),
    ("not.b32", &Target::ALL),
    ("shl.b32", &Target::ALL),
    ("shr.u32", &Target::ALL),
    ("shr.s32", &Target::ALL),
    ("fma.rn.f32", &Target::ALL),
    ("mul.rn.f32", &Target::ALL),
    ("div.rn.f32", &Target::ALL),
    ("rcp.rn.f32", &Target::ALL),
    ("ex2.approx.ftz.f32", &Target::ALL),
    ("setp.neu.f32", &Target::ALL),
    ("setp.lt.u32", &Target::ALL),
    ("selp.b32", &Target::ALL),
    ("and.pred", &Target::ALL),
    ("or.pred", &Target::ALL),
    ("xor.pred", &Target::ALL),
    ("cvt.rn.f32.u32", &Target::ALL),
    ("cvt.rzi.s32.f32", &Target::ALL),
    ("cvt.u64.u32", &Target::ALL),
    ("cvt.s64.s32", &Target::ALL),
    ("cvt.u32.u64", &Target::ALL),
    ("prmt.b32", &Target::ALL),
    ("cvt.rn.bf16x2.f32", &Target::ALL),
    ("cvt.rn.satfinite.e4m3x2.f32", &Target::ALL),
    ("mul.rn.bf16x2", &Target::ALL),
    ("fma.rn.bf16x2", &Target::ALL),
    ("cvt.rp.satfinite.ue8m0x2.f32", &[Target::Sm100a]),
    ("cvt.rn.bf16x2.ue8m0x2", &[Target::Sm100a]),
    ("cvt.rn.f16x2.e2m1x2", &[Target::Sm100a]),
    ("cvt.f32.f16", &[Target::Sm100a]),
    ("shfl.sync.bfly.b32", &Target::ALL),
    ("shfl.sync.idx.b32", &Target::ALL),
    ("shfl.sync.up.b32", &Target::ALL),
    ("shfl.sync.down.b32", &Target::ALL),
    ("vote.sync.ballot.b32", &Target::ALL),
    ("elect.sync", &Target::ALL),
    ("bar.sync 0", &Target::ALL),
    ("fence.proxy.async.shared::cta", &Target::ALL),
    ("fence.acq_rel.cluster", &Target::ALL),
    ("fence.mbarrier_init.release.cluster", &Target::ALL),
    ("mbarrier.init.shared::cta.b64", &Target::ALL),
    ("mbarrier.arrive.shared::cta.b64", &Target::ALL),
    ("mbarrier.arrive.expect_tx.shared::cta.b64", &Target::ALL),
    (
        "mbarrier.arrive.release.cluster.shared::cluster.b64",
        &Target::ALL,
    ),
    ("mbarrier.try_wait.parity.shared::cta.b64", &Target::ALL),
    ("barrier.cluster.arrive.release.aligned", &Target::ALL),
    ("barrier.cluster.arrive.relaxed.aligned", &Target::ALL),
    ("barrier.cluster.wait.aligned", &Target::ALL),
    ("mapa.shared::cluster.u32", &Target::ALL),
    ("%cluster_ctarank", &Target::ALL),
    ("%cluster_nctarank", &Target::ALL),
    ("%laneid", &Target::ALL),
    ("%ctaid.z", &Target::ALL),
    ("%nctaid.x", &Target::ALL),
    ("griddepcontrol.wait", &Target::ALL),
    ("griddepcontrol.launch_dependents", &Target::ALL),
    (".minnctapersm 1", &Target::ALL),
    (".maxnreg 128", &Target::ALL),
    (".reqnctapercluster 2, 1, 1", &Target::ALL),
    (
        "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
        &[Target::Sm100a],
    ),
    ("tcgen05.relinquish_alloc_permit", &[Target::Sm100a]),
    ("tcgen05.mma.cta_group::1.kind::f16", &[Target::Sm100a]),
    (
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one",
        &[Target::Sm100a],
    ),
    ("tcgen05.ld.sync.aligned.32x32b.x4.b32", &[Target::Sm100a]),
    ("tcgen05.wait::ld.sync.aligned", &[Target::Sm100a]),
    ("tcgen05.fence::before_thread_sync", &[Target::Sm100a]),
    ("tcgen05.fence::after_thread_sync", &[Target::Sm100a]),
    (
        "tcgen05.dealloc.cta_group::1.sync.aligned.b32",
        &[Target::Sm100a],
    ),
    ("wgmma.fence.sync.aligned", &[Target::Sm90a]),
    (
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
        &[Target::Sm90a],
    ),
    ("wgmma.commit_group.sync.aligned", &[Target::Sm90a]),
    ("wgmma.wait_group.sync.aligned 0", &[Target::Sm90a]),
];

#[test]
fn every_op_is_emitted_and_assembles() {
    for target in Target::ALL {
        let module = emit(&op_zoo(target).unwrap_or_else(|e| panic!("{e}"))).unwrap();
        for (spelling, targets) in SPELLINGS {
            assert_eq!(
                module.text.contains(spelling),
                targets.contains(&target),
                "`{spelling}` on {target}:\n{}",
                module.text
            );
        }
        match dsl_core::ptxas::assemble(&module) {
            Ok(report) => eprintln!("op_zoo {target}: ptxas ok, {} registers", report.registers),
            Err(dsl_core::ptxas::PtxasError::NotFound)
                if std::env::var("KESTREL_REQUIRE_PTXAS").as_deref() != Ok("1") =>
            {
                eprintln!("SKIPPED ptxas on op_zoo: ptxas not found")
            }
            Err(e) => panic!("{e}\n{}", module.text),
        }
    }
}

fn trace_error(target: Target, body: impl FnOnce()) -> String {
    trace_kernel("wrong_target", target, || {
        threads(128, 1, 1);
        body();
    })
    .expect_err("the op must be refused")
    .to_string()
}

#[test]
fn an_op_the_target_lacks_is_an_error_naming_op_and_target() {
    let tmem = trace_error(Target::Sm90a, || {
        let slot = smem_alloc("slot", 4, 16).addr();
        tcgen05::alloc(slot, 32);
    });
    assert!(
        tmem.contains("`tcgen05.alloc` is not available on sm_90a: it needs sm_100a"),
        "{tmem}"
    );

    let wgmma_on_blackwell = trace_error(Target::Sm100a, wgmma::fence);
    assert!(
        wgmma_on_blackwell.contains("`wgmma.fence` is not available on sm_100a: it needs sm_90a"),
        "{wgmma_on_blackwell}"
    );

    let native_cvt = trace_error(Target::Sm90a, || {
        let x = Val::<f32>::constant(3.0);
        cvt::ue8m0_round_up_with(x, CvtPath::Native);
    });
    assert!(
        native_cvt.contains("`cvt.rp.satfinite.ue8m0x2.f32` is not available on sm_90a"),
        "{native_cvt}"
    );
    // The error points at the DSL call in this file.
    assert!(native_cvt.contains("tests/op_emission.rs:"), "{native_cvt}");
}
