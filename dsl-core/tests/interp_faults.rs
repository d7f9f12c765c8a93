//! Deliberately broken kernels: every memory, synchronisation and asynchrony error the
//! interpreter promises to catch, each with the op, stage, thread, CTA and address its
//! report must name.

mod common;

use common::{expect, when};
use dsl_core::Target;
use dsl_core::arch::cluster::{cluster_arrive, cluster_sync, cluster_wait};
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{
    AtomOrder, LoadOpts, Smem, atomic_add, load, load_vec, load_vec_if, store,
};
use dsl_core::arch::sm90::wgmma;
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{cluster_cta_rank, lane_id, shfl_xor, thread_idx_x, warp_id};
use dsl_core::interp::{Arg, FaultKind, InterpError, Launch, Memory, Options, run, run_with};
use dsl_core::ir::{Kernel, SourceLoc};
use dsl_core::trace::control::while_loop;
use dsl_core::trace::{
    KernelParam, Tensor, Val, cluster_dims, smem_alloc, stage, threads, trace_kernel,
};

fn kernel(name: &str, target: Target, body: impl FnOnce()) -> Kernel {
    trace_kernel(name, target, body).unwrap()
}

/// Runs `k` with one `len`-word u32 buffer and returns the error it must end with.
fn fails(k: &Kernel, len: usize, grid: [u32; 3]) -> InterpError {
    let mut mem = Memory::new();
    let buf = mem.alloc("data", len * 4);
    let args: Vec<Arg> = k
        .params
        .iter()
        .map(|_| Arg::contiguous(buf, &[len as i64]))
        .collect();
    match run(k, &mut mem, &args, &Launch::grid(grid)) {
        Ok(_) => panic!("kernel `{}` ran to the end", k.name),
        Err(e) => e,
    }
}

#[test]
fn global_out_of_bounds_names_buffer_thread_and_address() {
    let k = kernel("oob", Target::Sm100a, || {
        threads(64, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        stage("3: gather");
        // Thread t reads word t + 8: the last 8 threads run past the 64-word buffer.
        let v: Val<u32> = load(x.base() + (thread_idx_x() + 8u32).mul_wide(4));
        store(x.base() + thread_idx_x().mul_wide(4), v);
    });
    let e = fails(&k, 64, [2, 1, 1]);
    expect(
        &e,
        FaultKind::OutOfBounds,
        &[
            "`ld.global`",
            "[stage `3: gather`]",
            "interp_faults.rs:",
            "thread 56 (tid (56,0,0), warp 1, lane 24)",
            "block (0,0,0)",
            "0 byte(s) after the end of buffer `data`",
        ],
    );
    let f = e.fault().unwrap();
    let mut mem = Memory::new();
    let data = mem.alloc("data", 256);
    assert_eq!(
        f.address,
        Some(mem.address(data) + 256),
        "the first byte past the end"
    );
}

#[test]
fn atomic_add_out_of_bounds_or_misaligned_is_caught() {
    // Lane t adds to word t + 1: lane 31 runs one word past the 32-word buffer.
    let past_the_end = kernel("atom_oob", Target::Sm90a, || {
        threads(32, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let at = x.base() + (thread_idx_x() + 1u32).mul_wide(4);
        atomic_add(at, 1u32, AtomOrder::AcqRel);
    });
    expect(
        &fails(&past_the_end, 32, [1, 1, 1]),
        FaultKind::OutOfBounds,
        &["`atom.global.add`", "lane 31", "atomic add of 4 byte(s)"],
    );
    let misaligned = kernel("atom_misaligned", Target::Sm90a, || {
        threads(32, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        atomic_add(x.base() + 2, 1u32, AtomOrder::Relaxed);
    });
    expect(
        &fails(&misaligned, 32, [1, 1, 1]),
        FaultKind::Misaligned,
        &["`atom.global.add`", "lane 0", "4-byte atomic"],
    );
}

#[test]
fn guard_gap_catches_a_stray_store_between_buffers() {
    let k = kernel("stray", Target::Sm90a, || {
        threads(32, 1, 1);
        let a = Tensor::<u32, 1>::declare("a");
        let _b = Tensor::<u32, 1>::declare("b");
        store(a.base() + 4096i64, 1u32);
    });
    let mut mem = Memory::new();
    let a = mem.alloc("a", 64);
    let b = mem.alloc("b", 64);
    let e = run(
        &k,
        &mut mem,
        &[Arg::contiguous(a, &[16]), Arg::contiguous(b, &[16])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap_err();
    expect(
        &e,
        FaultKind::OutOfBounds,
        &[
            "`st.global`",
            "after the end of buffer `a`",
            "before buffer `b`",
        ],
    );
}

#[test]
fn vectors_must_be_aligned_to_their_full_size() {
    let k = kernel("misaligned", Target::Sm100a, || {
        threads(32, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let v: [Val<u32>; 4] = load_vec(x.base() + 8i64);
        store(x.base(), v[0]);
    });
    expect(
        &fails(&k, 64, [1, 1, 1]),
        FaultKind::Misaligned,
        &["`ld.global`", "16-byte load", "not 16-byte aligned"],
    );
}

#[test]
fn predicated_off_loads_make_no_access() {
    let k = kernel("guarded", Target::Sm100a, || {
        threads(64, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let tid = thread_idx_x();
        let addr = x.base() + (tid * 1000u32).mul_wide(4);
        let [v] = load_vec_if::<u32, 1, _>(addr, tid.eq(0u32), 7u32, LoadOpts { nc: true });
        store(x.base() + tid.mul_wide(4), v);
    });
    let mut mem = Memory::new();
    let x = mem.alloc_from("x", &[5u32; 64]);
    run(
        &k,
        &mut mem,
        &[Arg::contiguous(x, &[64])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap();
    let got = mem.read::<u32>(x);
    assert_eq!(got[0], 5);
    assert!(got[1..].iter().all(|&v| v == 7));
}

#[test]
fn shared_memory_bounds_and_uninitialised_reads() {
    let k = kernel("smem_oob", Target::Sm100a, || {
        threads(32, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let buf = smem_alloc("buf", 128, 16);
        stage("1: stage");
        let v: Val<u32> = load(buf.addr() + 128i64);
        store(x.base(), v);
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::OutOfBounds,
        &[
            "`ld.shared`",
            "[stage `1: stage`]",
            "at 0x480 is outside the CTA's shared memory [0x400, 0x480)",
            "thread 0",
        ],
    );
    let k = kernel("smem_uninit", Target::Sm100a, || {
        threads(32, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let buf = smem_alloc("buf", 128, 16);
        let tid = thread_idx_x();
        // Only even threads write their word; odd ones read their neighbour's... and
        // thread 1 reads word 3, never written.
        when((tid & 1u32).eq(0u32), || {
            store(buf.addr() + tid * 4u32, tid)
        });
        sync_threads();
        let v: Val<u32> = load(buf.addr() + (tid | 1u32) * 4u32);
        store(x.base() + tid.mul_wide(4), v);
    });
    expect(
        &fails(&k, 32, [1, 1, 1]),
        FaultKind::Uninitialized,
        &["`ld.shared`", "byte 0x404", "never written", "thread 0"],
    );
}

#[test]
fn dsmem_out_of_bounds_and_bad_ranks() {
    let k = kernel("dsmem_oob", Target::Sm90a, || {
        threads(32, 1, 1);
        cluster_dims(2, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let buf = smem_alloc("buf", 128, 16);
        store(buf.addr() + thread_idx_x() * 4u32, 1u32);
        cluster_sync();
        let peer = (cluster_cta_rank() + 1u32) % 2u32;
        // One word past the peer's 128 bytes.
        let v: Val<u32> = load(buf.addr().in_cta(peer) + 128i64);
        store(x.base(), v);
        cluster_sync();
    });
    expect(
        &fails(&k, 8, [2, 1, 1]),
        FaultKind::OutOfBounds,
        &[
            "`ld.shared::cluster`",
            "outside block (0,0,0) (cluster rank 0)'s shared memory",
            "in block (1,0,0)",
        ],
    );
    let k = kernel("mapa_rank", Target::Sm90a, || {
        threads(32, 1, 1);
        cluster_dims(2, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let buf = smem_alloc("buf", 64, 16);
        let v: Val<u32> = load(buf.addr().in_cta(2u32));
        store(x.base(), v);
    });
    expect(
        &fails(&k, 8, [2, 1, 1]),
        FaultKind::OutOfBounds,
        &["`mapa.shared::cluster`", "to rank 2", "has 2 CTA(s)"],
    );
}

#[test]
fn division_by_zero_is_a_fault() {
    let k = kernel("div0", Target::Sm100a, || {
        threads(32, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let d: Val<u32> = load(x.base() + thread_idx_x().mul_wide(4));
        store(x.base(), 100u32 / d);
    });
    let mut mem = Memory::new();
    let mut vals = [1u32; 32];
    vals[9] = 0;
    let x = mem.alloc_from("x", &vals);
    let e = run(
        &k,
        &mut mem,
        &[Arg::contiguous(x, &[32])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap_err();
    expect(
        &e,
        FaultKind::DivideByZero,
        &["`div`", "thread 9", "division by zero"],
    );
}

#[test]
fn divergent_barriers_and_partial_collectives() {
    let k = kernel("divergent_bar", Target::Sm100a, || {
        threads(64, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        when(lane_id().lt(16u32), sync_threads);
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::DivergentBarrier,
        &["`bar.sync`", "lanes 0x0000ffff", "warp 0"],
    );
    let k = kernel("partial_shfl", Target::Sm100a, || {
        threads(32, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        when(lane_id().lt(8u32), || {
            let v = shfl_xor(lane_id(), 1);
            store(x.base(), v);
        });
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::Collective,
        &["`shfl.sync`", "all 32 lanes", "0x000000ff"],
    );
    let k = kernel("divergent_cluster", Target::Sm90a, || {
        threads(32, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        when(lane_id().lt(4u32), cluster_arrive);
        cluster_wait();
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::DivergentBarrier,
        &["barrier.cluster.arrive", "0x0000000f"],
    );
}

#[test]
fn an_mbarrier_that_never_completes_is_a_deadlock() {
    let k = kernel("stuck_mbar", Target::Sm100a, || {
        threads(64, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        let bars = smem_alloc("bars", 8, 8);
        let bar = Mbarrier::at(bars.addr());
        when(thread_idx_x().eq(0u32), || {
            bar.init(2u32);
            init_fence();
        });
        sync_threads();
        stage("4: wait for both producers");
        // One arrival of the two the phase needs.
        when(thread_idx_x().eq(0u32), || bar.arrive());
        bar.wait(0u32);
    });
    let e = fails(&k, 8, [1, 1, 1]);
    let d = e.deadlock().unwrap_or_else(|| panic!("{e}"));
    assert_eq!(d.blocked.len(), 2);
    let text = e.to_string();
    for n in [
        "deadlock in kernel `stuck_mbar`: 2 warp(s) are blocked",
        "block (0,0,0) (cluster rank 0) warp 0: `mbarrier.try_wait.parity` [stage `4: wait for both producers`]",
        "the phase of parity 0 of the mbarrier at shared 0x400",
        "1 of 2 arrivals pending",
        "warp 1:",
    ] {
        assert!(text.contains(n), "`{n}` missing from:\n{text}");
    }
    // A transaction count that nothing pays off never completes either.
    let k = kernel("stuck_tx", Target::Sm100a, || {
        threads(32, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        let bars = smem_alloc("bars", 8, 8);
        let bar = Mbarrier::at(bars.addr());
        when(thread_idx_x().eq(0u32), || {
            bar.init(1u32);
            bar.arrive_expect_tx(1024u32);
        });
        bar.wait(0u32);
    });
    let text = fails(&k, 8, [1, 1, 1]).to_string();
    assert!(text.contains("tx-count 1024"), "{text}");
}

#[test]
fn a_bar_sync_some_warps_never_reach_is_a_deadlock() {
    let k = kernel("stuck_bar", Target::Sm100a, || {
        threads(96, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        let bars = smem_alloc("bars", 8, 8);
        let bar = Mbarrier::at(bars.addr());
        when(thread_idx_x().eq(0u32), || {
            bar.init(1u32);
            init_fence();
        });
        sync_threads();
        // Warp 2 waits for an arrival warp 0 makes only after a bar.sync that needs warp 2.
        when(warp_id().eq(2u32), || bar.wait(0u32));
        sync_threads();
        when(thread_idx_x().eq(0u32), || bar.arrive());
    });
    let e = fails(&k, 8, [1, 1, 1]);
    let text = e.to_string();
    assert!(text.contains("warp 0: `bar.sync`"), "{text}");
    assert!(
        text.contains("barrier 0: 64 of 96 live threads of the CTA arrived"),
        "{text}"
    );
    assert!(
        text.contains("warp 2: `mbarrier.try_wait.parity`"),
        "{text}"
    );
}

#[test]
fn a_cluster_wait_with_a_missing_arrive_is_a_deadlock() {
    let k = kernel("stuck_cluster", Target::Sm90a, || {
        threads(64, 1, 1);
        cluster_dims(2, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        let skip = cluster_cta_rank().eq(1u32) & warp_id().eq(1u32);
        when(!skip, cluster_arrive);
        cluster_wait();
    });
    let e = fails(&k, 8, [2, 1, 1]);
    let text = e.to_string();
    assert!(text.contains("4 warp(s) are blocked"), "{text}");
    assert!(
        text.contains("96 of 128 live threads of the cluster arrived in phase 0"),
        "{text}"
    );
    assert!(
        text.contains("block (1,0,0) (cluster rank 1) warp 1: `barrier.cluster.wait`")
            && text.contains("this warp never arrived"),
        "{text}"
    );
}

#[test]
fn cluster_barrier_misuse() {
    let k = kernel("double_arrive", Target::Sm90a, || {
        threads(32, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        cluster_arrive();
        cluster_arrive();
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::ClusterBarrier,
        &["second barrier.cluster.arrive"],
    );
}

/// A one-warp tcgen05 kernel: allocate 32 columns, run `body(tmem base)`, free them.
fn tmem_kernel(name: &str, body: impl FnOnce(TmemAddr, Tensor<u32, 1>)) -> Kernel {
    kernel(name, Target::Sm100a, || {
        threads(128, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let slot = smem_alloc("slot", 4, 4);
        when(warp_id().eq(0u32), || tcgen05::alloc(slot.addr(), 32));
        tcgen05::fence_before_thread_sync();
        sync_threads();
        tcgen05::fence_after_thread_sync();
        let base: Val<u32> = load(slot.addr());
        let t = TmemAddr::from_base(base);
        stage("5: epilogue");
        body(t, x);
        sync_threads();
        when(warp_id().eq(0u32), || tcgen05::dealloc(t, 32));
    })
}

#[test]
fn tmem_quadrants_allocations_and_written_cells_are_checked() {
    // Warp 1 reads lanes 0-31, warp 0's quadrant.
    let k = tmem_kernel("quadrant", |t, x| {
        when(warp_id().eq(1u32), || {
            let v = tcgen05::ld_32x32b(t.value(), 1)[0];
            tcgen05::wait_ld();
            store(x.base(), v);
        });
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::Tmem,
        &[
            "`tcgen05.ld.32x32b`",
            "[stage `5: epilogue`]",
            "warp 1 may access TMEM lanes 32..63 only",
            "starts at lane 0",
        ],
    );
    // Columns 32.. are not allocated.
    let k = tmem_kernel("unallocated", |t, x| {
        let v = tcgen05::ld_32x32b(t.column(32).warp_quadrant(warp_id()), 1)[0];
        tcgen05::wait_ld();
        store(x.base(), v);
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::Tmem,
        &["column 32 is not in a live tcgen05.alloc allocation"],
    );
    // Nothing wrote the cells: loading is fine, using the value is not.
    let k = tmem_kernel("uninit", |t, x| {
        let v = tcgen05::ld_32x32b(t.warp_quadrant(warp_id()), 1)[0];
        tcgen05::wait_ld();
        store(x.base(), v);
    });
    // Warp 3 completes the barrier and runs on first: its lanes are 96..128.
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::Uninitialized,
        &[
            "`st.global`",
            "never-written tensor memory",
            "TMEM lane 96, column 0",
            "thread 96",
        ],
    );
    // Reading the registers before tcgen05.wait::ld.
    let k = tmem_kernel("no_wait", |t, x| {
        let v = tcgen05::ld_32x32b(t.warp_quadrant(warp_id()), 1)[0];
        store(x.base(), v + 1u32);
        tcgen05::wait_ld();
    });
    let e = fails(&k, 8, [1, 1, 1]);
    assert!(
        matches!(
            e.fault().map(|f| f.kind),
            Some(FaultKind::AsyncRegister | FaultKind::Uninitialized)
        ),
        "{e}"
    );
}

#[test]
fn tmem_leaks_and_multiple_mma_issuers_are_reported() {
    let k = kernel("leak", Target::Sm100a, || {
        threads(32, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        let slot = smem_alloc("slot", 4, 4);
        tcgen05::alloc(slot.addr(), 64);
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::Leak,
        &["exited holding 64 TMEM column(s) at column 0 allocated by warp 0"],
    );
    let k = tmem_kernel("many_issuers", |t, _| {
        let d: Val<u64> = Val::constant(0u64);
        when(warp_id().eq(0u32) & lane_id().lt(2u32), || {
            tcgen05::mma_f16(t, d, d, 0x0810_0490u32, false);
        });
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::MultipleIssuers,
        &["`tcgen05.mma`", "2 active lanes"],
    );
}

/// One MMA on a K-major SW128 tile written by `fill`: A [128 x 16] then B [16 x 16] (N = 16).
fn mma_kernel(name: &str, fill: impl FnOnce(Smem), after: impl FnOnce(Smem)) -> Kernel {
    kernel(name, Target::Sm100a, || {
        threads(128, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let tile = smem_alloc("tile", 128 * 128 + 16 * 128, 1024);
        let bar = smem_alloc("bar", 8, 8);
        let slot = smem_alloc("slot", 4, 4);
        let mbar = Mbarrier::at(bar.addr());
        let tid = thread_idx_x();
        stage("2: stage operands");
        fill(tile.addr());
        when(warp_id().eq(0u32), || tcgen05::alloc(slot.addr(), 32));
        when(tid.eq(0u32), || {
            mbar.init(1u32);
            init_fence();
        });
        tcgen05::fence_before_thread_sync();
        sync_threads();
        tcgen05::fence_after_thread_sync();
        let base: Val<u32> = load(slot.addr());
        let d = TmemAddr::from_base(base);
        stage("3: S = A . B^T");
        let start = (tile.addr().value() >> 4u32).cast::<u64>();
        let desc = 0x4000_4040_0001_0000u64; // SW128, SBO 1024, LBO 16, bit 46.
        when(tid.eq(0u32), || {
            tcgen05::mma_f16(
                d,
                start + desc,
                start + (desc + 1024),
                0x0804_0490u32,
                false,
            );
            tcgen05::commit(mbar);
        });
        after(tile.addr());
        mbar.wait(0u32);
        tcgen05::fence_after_thread_sync();
        let v = tcgen05::ld_32x32b(d.warp_quadrant(warp_id()), 1)[0];
        tcgen05::wait_ld();
        store(x.base() + tid.mul_wide(4), v);
        tcgen05::fence_before_thread_sync();
        sync_threads();
        when(warp_id().eq(0u32), || tcgen05::dealloc(d, 32));
    })
}

/// Every thread writes 144 bytes: the whole A and B tiles.
fn fill_all(tile: Smem) {
    let tid = thread_idx_x();
    for i in 0..9u32 {
        store(tile + (tid * 9u32 + i) * 16u32, 0x3f80_3f80u32);
        store(tile + ((tid * 9u32 + i) * 16u32 + 4u32), 0u32);
        store(tile + ((tid * 9u32 + i) * 16u32 + 8u32), 0u32);
        store(tile + ((tid * 9u32 + i) * 16u32 + 12u32), 0u32);
    }
}

#[test]
fn async_proxy_races_are_reported() {
    let fenced = mma_kernel(
        "fenced",
        |t| {
            fill_all(t);
            fence_proxy_async_shared();
        },
        |_| {},
    );
    let mut mem = Memory::new();
    let x = mem.alloc("x", 128 * 4);
    run(
        &fenced,
        &mut mem,
        &[Arg::contiguous(x, &[128])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap();
    // Missing fence.proxy.async between the stores and the MMA.
    let unfenced = mma_kernel("unfenced", fill_all, |_| {});
    expect(
        &fails(&unfenced, 128, [1, 1, 1]),
        FaultKind::AsyncProxyRace,
        &[
            "`tcgen05.mma`",
            "[stage `3: S = A . B^T`]",
            "operand A",
            "not followed by fence.proxy.async.shared::cta",
        ],
    );
    // The check can be turned off.
    let opts = Options {
        async_proxy_check: false,
        ..Options::default()
    };
    let mut mem = Memory::new();
    let x = mem.alloc("x", 128 * 4);
    run_with(
        &unfenced,
        &mut mem,
        &[Arg::contiguous(x, &[128])],
        &Launch::grid([1, 1, 1]),
        &opts,
    )
    .unwrap();
    // Overwriting an operand before the MMA's commit phase completed.
    let early = mma_kernel(
        "early_overwrite",
        |t| {
            fill_all(t);
            fence_proxy_async_shared();
        },
        |t| when(thread_idx_x().eq(64u32), || store(t + 16i64, 0u32)),
    );
    expect(
        &fails(&early, 128, [1, 1, 1]),
        FaultKind::AsyncProxyRace,
        &[
            "`st.shared`",
            "thread 64",
            "may still be reading",
            "tcgen05.mma",
        ],
    );
}

#[test]
fn arguments_and_launches_are_validated() {
    let k = kernel("args", Target::Sm100a, || {
        threads(32, 1, 1);
        let x = Tensor::<f32, 2>::declare("x");
        let n = Val::<u32>::declare("n");
        let _ = smem_alloc("s", 2048, 16);
        store(x.base(), n.cast::<f32>());
    });
    let mut mem = Memory::new();
    let b = mem.alloc("b", 64);
    let launch = Launch::grid([1, 1, 1]);
    let mut msg =
        |args: &[Arg], launch: &Launch| run(&k, &mut mem, args, launch).unwrap_err().to_string();
    let t = Arg::tensor(b, &[4, 4], &[4, 1]);
    assert!(msg(std::slice::from_ref(&t), &launch).contains("takes 2 parameter(s) (x, n), got 1"));
    assert!(
        msg(&[t.clone(), Arg::F32(1.0)], &launch)
            .contains("parameter #1 `n` is a u32 scalar, got a f32 argument")
    );
    assert!(
        msg(&[Arg::tensor(b, &[4], &[1]), Arg::U32(1)], &launch)
            .contains("rank-2 f32 tensor, got 1 extent(s)")
    );
    assert!(
        msg(&[Arg::tensor(b, &[5, 4], &[4, 1]), Arg::U32(1)], &launch)
            .contains("spans bytes [0, 80) of buffer `b`, which has 64 bytes")
    );
    assert!(
        msg(&[t.clone(), Arg::U32(1)], &launch.clone().smem(1024))
            .contains("1024 bytes of dynamic shared memory, but the kernel uses 2048")
    );
    assert!(
        msg(
            &[t.clone(), Arg::U32(1)],
            &Launch::grid([3, 1, 1]).cluster([2, 1, 1])
        )
        .contains("does not divide grid")
    );
}

#[test]
fn a_loop_that_never_ends_stops_at_the_instruction_budget() {
    let k = kernel("forever", Target::Sm100a, || {
        threads(32, 1, 1);
        let x = Tensor::<u32, 1>::declare("x");
        let n = while_loop(
            Val::<u32>::constant(0),
            &["n"],
            SourceLoc::caller(),
            |cond, n| {
                if cond {
                    (n, Some(Val::<u32>::constant(1).ne(0u32)))
                } else {
                    (n + 1u32, None)
                }
            },
        );
        store(x.base(), n);
    });
    let mut mem = Memory::new();
    let x = mem.alloc("x", 4);
    let opts = Options {
        max_warp_instructions: 10_000,
        ..Options::default()
    };
    let e = run_with(
        &k,
        &mut mem,
        &[Arg::contiguous(x, &[1])],
        &Launch::grid([1, 1, 1]),
        &opts,
    )
    .unwrap_err();
    expect(&e, FaultKind::Watchdog, &["10000 warp-instructions"]);
}

#[test]
fn mbarrier_misuse_is_reported() {
    let k = kernel("over_arrive", Target::Sm100a, || {
        threads(32, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        let bars = smem_alloc("bars", 8, 8);
        let bar = Mbarrier::at(bars.addr());
        when(thread_idx_x().eq(0u32), || {
            bar.init(1u32);
            bar.arrive_expect_tx(16u32);
            bar.arrive();
        });
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::Mbarrier,
        &["beyond its count 1", "tx-count 16"],
    );
    let k = kernel("uninit_mbar", Target::Sm100a, || {
        threads(32, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        let bars = smem_alloc("bars", 8, 8);
        Mbarrier::at(bars.addr()).wait(0u32);
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::Mbarrier,
        &["no initialised mbarrier at shared 0x400"],
    );
    let k = kernel("clobber", Target::Sm100a, || {
        threads(32, 1, 1);
        let _x = Tensor::<u32, 1>::declare("x");
        let bars = smem_alloc("bars", 8, 8);
        when(thread_idx_x().eq(0u32), || {
            Mbarrier::at(bars.addr()).init(1u32);
            store(bars.addr() + 4i64, 0u32);
        });
    });
    expect(
        &fails(&k, 8, [1, 1, 1]),
        FaultKind::Mbarrier,
        &["`st.shared`", "live mbarrier object at 0x400"],
    );
}

#[test]
fn wgmma_accumulators_read_before_wait_group_are_reported() {
    let k = kernel("early_acc", Target::Sm90a, || {
        threads(128, 1, 1);
        let x = Tensor::<f32, 1>::declare("x");
        let tile = smem_alloc("tile", 10 * 1024, 1024);
        let tid = thread_idx_x();
        for i in 0..5u32 {
            for w in 0..4u32 {
                store(tile.addr() + ((tid * 5u32 + i) * 16u32 + w * 4), 0u32);
            }
        }
        fence_proxy_async_shared();
        sync_threads();
        let start = (tile.addr().value() >> 4u32).cast::<u64>();
        // K-major SW128 (SM90 layout 1 at bits 62-63), SBO 1024; B after A's 8 KiB.
        let desc = 0x4000_0040_0001_0000u64;
        let acc = wgmma::Accumulator::zeros(8);
        wgmma::fence();
        wgmma::mma_async(&acc, start + desc, start + (desc + 512), false, 0, 0);
        wgmma::commit_group();
        store(x.base() + tid.mul_wide(4), acc.get(0));
        wgmma::wait_group(0);
    });
    expect(
        &fails(&k, 128, [1, 1, 1]),
        FaultKind::AsyncRegister,
        &[
            "`mov`",
            "wgmma.mma_async whose group was not yet waited for",
        ],
    );
}
