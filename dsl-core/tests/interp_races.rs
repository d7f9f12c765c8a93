//! The interpreter's shared-memory race check: accesses of the same bytes by two warps, one
//! a write, are ordered only by what the hardware orders them with (a CTA barrier, a named
//! barrier the reader waits at, an mbarrier phase the reader waited for, the cluster
//! barrier), and a missing one is a fault that names both accesses.

mod common;

use common::{expect, when};
use dsl_core::Target;
use dsl_core::arch::cluster::cluster_sync;
use dsl_core::arch::copy::bulk_load;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::sync::{NamedBarrier, sync_threads};
use dsl_core::arch::thread::{cluster_cta_rank, lane_id, thread_idx_x, warp_id};
use dsl_core::interp::{Arg, FaultKind, InterpError, Launch, Memory, Options, run_with};
use dsl_core::ir::Kernel;
use dsl_core::trace::{
    KernelParam, SmemRegion, Tensor, Val, cluster_dims, smem_alloc, threads, trace_kernel,
};

fn run_checked(k: &Kernel, race_check: bool) -> Result<Vec<u32>, InterpError> {
    let mut mem = Memory::new();
    let words = 256;
    let src = mem.alloc_from("src", &(0..words as u32).collect::<Vec<_>>());
    let out = mem.alloc("out", words * 4);
    let args = [
        Arg::contiguous(src, &[words as i64]),
        Arg::contiguous(out, &[words as i64]),
    ];
    let opts = Options {
        race_check,
        ..Options::default()
    };
    run_with(k, &mut mem, &args, &Launch::grid([1, 1, 1]), &opts)?;
    Ok(mem.read::<u32>(out))
}

fn run_out(k: &Kernel) -> Result<Vec<u32>, InterpError> {
    run_checked(k, true)
}

/// A kernel of `warps` warps with a `src` and an `out` tensor of 256 words and a 1 KiB
/// shared buffer, zeroed behind a CTA barrier (so that a read the interpreter runs before
/// the write it races with reads a defined word, and the write reports the race).
fn kernel(warps: u32, body: impl FnOnce(SmemRegion, Tensor<u32, 1>, Tensor<u32, 1>)) -> Kernel {
    trace_kernel("races", Target::Sm90a, || {
        threads(32 * warps, 1, 1);
        let src = Tensor::<u32, 1>::declare("src");
        let out = Tensor::<u32, 1>::declare("out");
        let buf = smem_alloc("buf", 1024, 128);
        for i in 0..256 / (32 * warps) {
            let word = thread_idx_x() + i * 32 * warps;
            store(buf.addr() + word * 4u32, Val::<u32>::constant(0));
        }
        sync_threads();
        body(buf, src, out);
    })
    .unwrap()
}

/// Each warp's lane `l` writes word 32 w + l; after `sync`, each lane reads the word of
/// the same lane in warp `w ^ 1` and stores it to `out`.
fn exchange(warps: u32, sync: impl FnOnce()) -> Kernel {
    kernel(warps, |buf, _, out| {
        let tid = thread_idx_x();
        store(buf.addr() + tid * 4u32, tid + 100u32);
        sync();
        let v: Val<u32> = load(buf.addr() + (tid ^ 32u32) * 4u32);
        store(out.base() + tid.mul_wide(4), v);
    })
}

#[test]
fn a_hand_off_with_no_barrier_is_a_race_and_a_barrier_orders_it() {
    let e = run_out(&exchange(2, || {})).unwrap_err();
    expect(
        &e,
        FaultKind::SharedRace,
        &[
            "the store writes at shared 0x400",
            "warp 1 of block (0,0,0)",
            "read these bytes with the ld.shared at",
            "nothing orders the two accesses",
        ],
    );
    // Without the check the run completes: the interpreter's warp order happens to let
    // warp 1 read warp 0's words before warp 0 writes them, which the hardware may or may
    // not do.
    assert!(run_checked(&exchange(2, || {}), false).is_ok());
    let got = run_out(&exchange(2, sync_threads)).unwrap();
    assert_eq!(got[0], 132);
    assert_eq!(got[33], 101);
}

#[test]
fn a_named_barrier_orders_its_warps_and_no_others() {
    // Warps 0-1 exchange behind barrier 1 and warps 2-3 behind barrier 2: each pair is
    // ordered, and a read across the pairs is not.
    let pairs = |across: bool| {
        kernel(4, |buf, _, out| {
            let tid = thread_idx_x();
            store(buf.addr() + tid * 4u32, tid + 100u32);
            let pair = warp_id() / 2u32;
            when(pair.eq(0u32), || NamedBarrier::new(1, 64).sync());
            when(pair.eq(1u32), || NamedBarrier::new(2, 64).sync());
            let from = if across { tid ^ 64u32 } else { tid ^ 32u32 };
            let v: Val<u32> = load(buf.addr() + from * 4u32);
            store(out.base() + tid.mul_wide(4), v);
        })
    };
    let got = run_out(&pairs(false)).unwrap();
    assert_eq!(got[0], 132);
    assert_eq!(got[96], 164);
    expect(
        &run_out(&pairs(true)).unwrap_err(),
        FaultKind::SharedRace,
        &["wrote these bytes with the st.shared"],
    );
}

#[test]
fn bar_arrive_releases_but_does_not_acquire() {
    // Warp 0 writes and arrives; warp 1 syncs and reads (ordered). Then warp 1 writes a
    // second word that warp 0 reads after its arrival, which waited for nothing.
    let k = kernel(2, |buf, _, out| {
        let lane = lane_id();
        let ready = NamedBarrier::new(1, 64);
        when(warp_id().eq(0u32), || {
            store(buf.addr() + lane * 4u32, lane + 7u32);
            ready.arrive();
            let v: Val<u32> = load(buf.addr() + 128i64 + lane * 4u32);
            store(out.base() + lane.mul_wide(4), v);
        });
        when(warp_id().eq(1u32), || {
            store(buf.addr() + 128i64 + lane * 4u32, lane);
            ready.sync();
            let v: Val<u32> = load(buf.addr() + lane * 4u32);
            store(out.base() + (lane + 32u32).mul_wide(4), v);
        });
    });
    let e = run_out(&k).unwrap_err();
    expect(
        &e,
        FaultKind::SharedRace,
        &[
            "the load reads at shared 0x480",
            "warp 1 of block",
            "wrote these bytes",
        ],
    );
}

#[test]
fn an_mbarrier_phase_orders_the_arrivals_before_it_and_the_waits_after_it() {
    let handoff = |wait: bool| {
        kernel(2, |buf, _, out| {
            let lane = lane_id();
            let bar = Mbarrier::at(buf.addr() + 512i64);
            when(thread_idx_x().eq(0u32), || {
                bar.init(32u32);
                init_fence();
            });
            sync_threads();
            when(warp_id().eq(0u32), || {
                store(buf.addr() + lane * 4u32, lane + 5u32);
                bar.arrive();
            });
            when(warp_id().eq(1u32), || {
                if wait {
                    bar.wait(0u32);
                }
                let v: Val<u32> = load(buf.addr() + lane * 4u32);
                store(out.base() + lane.mul_wide(4), v);
            });
        })
    };
    assert_eq!(run_out(&handoff(true)).unwrap()[3], 8);
    expect(
        &run_out(&handoff(false)).unwrap_err(),
        FaultKind::SharedRace,
        &[
            "the load reads",
            "warp 0 of block",
            "wrote these bytes with the st.shared",
        ],
    );
}

#[test]
fn a_copy_over_bytes_another_warp_still_reads_is_a_race() {
    // Warp 0 reads the buffer; a lane of warp 1 then issues a bulk copy over it, behind a
    // CTA barrier or not. The copy's write is its issuer's, when it issues.
    let overwrite = |barrier: bool| {
        kernel(2, |buf, src, out| {
            let (tid, lane) = (thread_idx_x(), lane_id());
            let bar = Mbarrier::at(buf.addr() + 512i64);
            when(tid.eq(32u32), || {
                bar.init(1u32);
                init_fence();
            });
            sync_threads();
            when(warp_id().eq(0u32), || {
                let v: Val<u32> = load(buf.addr() + lane * 4u32);
                store(out.base() + lane.mul_wide(4), v);
            });
            if barrier {
                sync_threads();
            }
            when(tid.eq(32u32), || {
                bar.arrive_expect_tx(128u32);
                bulk_load(buf.addr(), src.base(), 128u32, bar);
            });
            bar.wait(0u32);
            let v: Val<u32> = load(buf.addr() + lane * 4u32);
            store(out.base() + (tid + 64u32).mul_wide(4), v);
        })
    };
    let got = run_out(&overwrite(true)).unwrap();
    assert_eq!(got[64 + 5], 5);
    expect(
        &run_out(&overwrite(false)).unwrap_err(),
        FaultKind::SharedRace,
        &[
            "the copy writes at shared 0x400",
            "warp 0 of block",
            "read these bytes",
        ],
    );
}

#[test]
fn a_store_into_a_peer_cta_is_ordered_by_the_cluster_barrier() {
    // Each CTA of a pair reads its own inbox, then stores into its peer's, behind a
    // cluster barrier or not.
    let pushed = |barrier: bool| {
        trace_kernel("races_cluster", Target::Sm90a, || {
            threads(32, 1, 1);
            cluster_dims(2, 1, 1);
            let out = Tensor::<u32, 1>::declare("out");
            let inbox = smem_alloc("inbox", 128, 16);
            let (lane, rank) = (lane_id(), cluster_cta_rank());
            store(inbox.addr() + lane * 4u32, Val::<u32>::constant(0));
            cluster_sync();
            let before: Val<u32> = load(inbox.addr() + lane * 4u32);
            if barrier {
                cluster_sync();
            }
            store(inbox.addr().in_cta(rank ^ 1u32) + lane * 4u32, rank + 1u32);
            cluster_sync();
            let after: Val<u32> = load(inbox.addr() + lane * 4u32);
            store(
                out.base() + (rank * 32u32 + lane).mul_wide(4),
                before + after,
            );
        })
        .unwrap()
    };
    let run_pair = |k: &Kernel| {
        let mut mem = Memory::new();
        let out = mem.alloc("out", 64 * 4);
        let args = [Arg::contiguous(out, &[64])];
        run_with(
            k,
            &mut mem,
            &args,
            &Launch::grid([2, 1, 1]),
            &Options::default(),
        )
        .map(|_| mem.read::<u32>(out))
    };
    let got = run_pair(&pushed(true)).unwrap();
    assert_eq!((got[0], got[32]), (2, 1));
    expect(
        &run_pair(&pushed(false)).unwrap_err(),
        FaultKind::SharedRace,
        &["of block (1,0,0)", "nothing orders the two accesses"],
    );
}
