//! Control flow and synchronisation in the interpreter: divergent branches and loops with
//! merged values, bar.sync hand-offs through shared memory, mbarrier phases, the cluster
//! barrier and distributed shared memory, and the debug hooks.

use dsl_core::Target;
use dsl_core::arch::cluster::{cluster_arrive, cluster_sync, cluster_wait};
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::sync::sync_threads;
use dsl_core::arch::thread::{cluster_cta_rank, cluster_size, lane_id, thread_idx_x, warp_id};
use dsl_core::interp::{
    Arg, Launch, Memory, Options, SnapshotData, SnapshotRequest, SnapshotWhat, StagePoint,
    TraceRequest, run, run_with,
};
use dsl_core::ir::SourceLoc;
use dsl_core::trace::control::{branch, for_loop};
use dsl_core::trace::{
    KernelParam, Tensor, Val, cluster_dims, dyn_range, smem_alloc, stage, threads, trace_kernel,
};

#[test]
fn divergent_branches_and_loops_merge_per_thread() {
    let k = trace_kernel("diverge", Target::Sm100a, || {
        threads(96, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let tid = thread_idx_x();
        let loc = SourceLoc::caller();
        let v = Val::<u32>::constant(0);
        let (v, ()) = branch((tid & 1u32).eq(0u32), v, &["v"], loc, |even, v| {
            if even {
                branch(tid.lt(40u32), v, &["v"], loc, |small, _| {
                    if small {
                        (tid * 10u32, ())
                    } else {
                        (Val::constant(7u32), ())
                    }
                })
            } else {
                (tid + 1000u32, ())
            }
        });
        // A loop whose trip count differs per lane: sum of 1..=tid % 5.
        let n = tid % 5u32;
        let s = for_loop(
            dyn_range(0u32, n),
            Val::<u32>::constant(0),
            &["s"],
            loc,
            |i, s| s + i + 1u32,
        );
        // A uniform branch (whole warps): warp 1 skips it.
        let (w, ()) = branch(
            warp_id().eq(1u32),
            Val::<u32>::constant(5),
            &["w"],
            loc,
            |t, w| {
                if t { (w + 1u32, ()) } else { (w, ()) }
            },
        );
        let at = out.base() + tid.mul_wide(12);
        store(at, v);
        store(at + 4, s);
        store(at + 8, w);
    })
    .unwrap();
    let mut mem = Memory::new();
    let out = mem.alloc("out", 96 * 12);
    let stats = run(
        &k,
        &mut mem,
        &[Arg::contiguous(out, &[96 * 3])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap();
    let got = mem.read::<u32>(out);
    for t in 0..96u32 {
        let v = if t % 2 == 0 {
            if t < 40 { t * 10 } else { 7 }
        } else {
            t + 1000
        };
        let n = t % 5;
        assert_eq!(got[3 * t as usize], v, "v of thread {t}");
        assert_eq!(got[3 * t as usize + 1], n * (n + 1) / 2, "s of thread {t}");
        assert_eq!(got[3 * t as usize + 2], if t / 32 == 1 { 6 } else { 5 });
    }
    assert!(stats.lane_instructions > stats.warp_instructions);
}

#[test]
fn bar_sync_hands_data_between_warps() {
    let k = trace_kernel("handoff", Target::Sm90a, || {
        threads(128, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let buf = smem_alloc("buf", 128 * 4, 16);
        let tid = thread_idx_x();
        store(buf.addr() + tid * 4u32, tid * 3u32);
        sync_threads();
        // Each thread reads what the mirrored thread (another warp) wrote.
        let v: Val<u32> = load(buf.addr() + (127u32 - tid) * 4u32);
        store(out.base() + tid.mul_wide(4), v);
    })
    .unwrap();
    let mut mem = Memory::new();
    let out = mem.alloc("out", 128 * 4);
    run(
        &k,
        &mut mem,
        &[Arg::contiguous(out, &[128])],
        &Launch::grid([2, 1, 1]),
    )
    .unwrap();
    let got = mem.read::<u32>(out);
    assert!((0..128).all(|t| got[t] == (127 - t as u32) * 3));
}

#[test]
fn mbarrier_phases_complete_on_count_and_flip_parity() {
    let k = trace_kernel("phases", Target::Sm100a, || {
        threads(64, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let bars = smem_alloc("bars", 16, 8);
        let data = smem_alloc("data", 8, 8);
        let full = Mbarrier::at(bars.addr());
        let tid = thread_idx_x();
        let loc = SourceLoc::caller();
        branch(tid.eq(0u32), (), &[], loc, |t, ()| {
            if t {
                full.init(2u32);
                init_fence();
            }
            ((), ())
        });
        sync_threads();
        // A fresh barrier: the phase "before" phase 0 (parity 1) counts as complete.
        full.wait(1u32);
        // Warp 0 produces: two arrivals (lanes 0 and 1) complete phase 0.
        branch(warp_id().eq(0u32), (), &[], loc, |t, ()| {
            if t {
                branch(lane_id().lt(2u32), (), &[], loc, |p, ()| {
                    if p {
                        branch(lane_id().eq(0u32), (), &[], loc, |w, ()| {
                            if w {
                                store(data.addr(), 42u32);
                            }
                            ((), ())
                        });
                        full.arrive();
                    }
                    ((), ())
                });
            }
            ((), ())
        });
        // Everyone waits for phase 0, then reads the data.
        full.wait(0u32);
        let v: Val<u32> = load(data.addr());
        // Phase 1: warp 1 produces with two arrivals of one lane; the barrier restarted
        // with its count, and waiting for parity 1 now blocks until they happen.
        sync_threads();
        branch(
            warp_id().eq(1u32) & lane_id().eq(0u32),
            (),
            &[],
            loc,
            |t, ()| {
                if t {
                    store(data.addr() + 4i64, v + 1u32);
                    full.arrive();
                    full.arrive();
                }
                ((), ())
            },
        );
        full.wait(1u32);
        let w: Val<u32> = load(data.addr() + 4i64);
        store(out.base() + tid.mul_wide(4), v * 100u32 + w);
    })
    .unwrap();
    let mut mem = Memory::new();
    let out = mem.alloc("out", 64 * 4);
    run(
        &k,
        &mut mem,
        &[Arg::contiguous(out, &[64])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap();
    assert!(mem.read::<u32>(out).iter().all(|&v| v == 42 * 100 + 43));
}

#[test]
fn cluster_exchanges_data_over_dsmem_and_remote_mbarriers() {
    let k = trace_kernel("dsmem", Target::Sm90a, || {
        threads(64, 1, 1);
        cluster_dims(4, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let mine = smem_alloc("mine", 64 * 4, 16);
        let bars = smem_alloc("bar", 8, 8);
        let bar = Mbarrier::at(bars.addr());
        let tid = thread_idx_x();
        let rank = cluster_cta_rank();
        let n = cluster_size();
        let loc = SourceLoc::caller();
        stage("1: publish");
        store(mine.addr() + tid * 4u32, rank * 1000u32 + tid);
        branch(tid.eq(0u32), (), &[], loc, |t, ()| {
            if t {
                // One arrival from each peer completes phase 0.
                bar.init(n);
                init_fence();
            }
            ((), ())
        });
        cluster_sync();
        stage("2: pull from the next rank");
        let peer = (rank + 1u32) % n;
        let v: Val<u32> = load(mine.addr().in_cta(peer) + tid * 4u32);
        // Thread 0 tells every rank "I have read you" on that rank's barrier.
        branch(tid.lt(n), (), &[], loc, |t, ()| {
            if t {
                bar.arrive_in_cta(tid);
            }
            ((), ())
        });
        bar.wait(0u32);
        // Split barrier: arrive, unrelated work, wait; nobody exits while a peer reads.
        cluster_arrive();
        let bx = dsl_core::arch::thread::block_idx_x();
        store(out.base() + (bx * 64u32 + tid).mul_wide(4), v);
        cluster_wait();
    })
    .unwrap();
    let mut mem = Memory::new();
    let out = mem.alloc("out", 8 * 64 * 4);
    run(
        &k,
        &mut mem,
        &[Arg::contiguous(out, &[8 * 64])],
        &Launch::grid([8, 1, 1]),
    )
    .unwrap();
    let got = mem.read::<u32>(out);
    for b in 0..8u32 {
        for t in 0..64u32 {
            let rank = b % 4;
            let peer = (rank + 1) % 4;
            assert_eq!(
                got[(b * 64 + t) as usize],
                peer * 1000 + t,
                "block {b} thread {t}"
            );
        }
    }
}

#[test]
fn trace_and_snapshots_show_one_thread_and_a_stage_boundary() {
    let k = trace_kernel("hooks", Target::Sm100a, || {
        threads(32, 1, 1);
        let out = Tensor::<f32, 1>::declare("out");
        let buf = smem_alloc("buf", 32 * 4, 16);
        let tid = thread_idx_x();
        stage("1: fill");
        let x = tid.cast::<f32>() * 0.5;
        store(buf.addr() + tid * 4u32, x);
        stage("2: copy out");
        let y: Val<f32> = load(buf.addr() + tid * 4u32);
        store(out.base() + tid.mul_wide(4), y + 1.0);
    })
    .unwrap();
    let mut mem = Memory::new();
    let out = mem.alloc("out", 32 * 4);
    let opts = Options {
        trace: Some(TraceRequest {
            block: [0, 0, 0],
            thread: 3,
            max_entries: 100,
        }),
        snapshots: vec![
            SnapshotRequest {
                block: [0, 0, 0],
                stage: "1: fill".into(),
                at: StagePoint::Start,
                what: SnapshotWhat::Smem {
                    offset: 8,
                    bytes: 8,
                },
            },
            SnapshotRequest {
                block: [0, 0, 0],
                stage: "1: fill".into(),
                at: StagePoint::End,
                what: SnapshotWhat::Smem {
                    offset: 12,
                    bytes: 4,
                },
            },
        ],
        ..Options::default()
    };
    let stats = run_with(
        &k,
        &mut mem,
        &[Arg::contiguous(out, &[32])],
        &Launch::grid([1, 1, 1]),
        &opts,
    )
    .unwrap();
    let text: Vec<String> = stats.trace.iter().map(|e| e.to_string()).collect();
    let mul = text
        .iter()
        .find(|t| t.starts_with("[1: fill] mul"))
        .unwrap_or_else(|| panic!("no traced mul in {text:#?}"));
    assert!(mul.ends_with("=1.5"), "thread 3 computes 3 * 0.5: {mul}");
    assert!(
        text.iter()
            .any(|t| t.starts_with("[2: copy out] add") && t.ends_with("=2.5"))
    );
    assert_eq!(stats.snapshots.len(), 2);
    assert_eq!(stats.snapshots[0].data, SnapshotData::Smem(vec![None; 8]));
    assert_eq!(
        stats.snapshots[1].data,
        SnapshotData::Smem(1.5f32.to_le_bytes().map(Some).to_vec())
    );
}

#[test]
fn a_cta_that_is_not_a_multiple_of_32_threads_has_a_partial_last_warp() {
    let k = trace_kernel("partial", Target::Sm100a, || {
        threads(48, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let tid = thread_idx_x();
        // warp_id() broadcasts lane 0 with shfl.sync; lanes 16-31 of warp 1 do not exist and
        // count as exited.
        let v = warp_id() * 100u32 + dsl_core::arch::thread::shfl_xor(tid, 1);
        sync_threads();
        store(out.base() + tid.mul_wide(4), v);
    })
    .unwrap();
    let mut mem = Memory::new();
    let out = mem.alloc("out", 48 * 4);
    run(
        &k,
        &mut mem,
        &[Arg::contiguous(out, &[48])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap();
    let got = mem.read::<u32>(out);
    assert!((0..48u32).all(|t| got[t as usize] == (t / 32) * 100 + (t ^ 1)));
}
