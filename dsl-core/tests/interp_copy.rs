//! Asynchronous copies in the interpreter: TMA box loads (swizzled, ragged, 3-D, multicast)
//! and stores against a host model of the copy engine, 1-D bulk loads, cp.async with zero
//! fill, `st.async` into a cluster peer, a producer/consumer pipeline, and every misuse the
//! async proxy forbids.

mod common;

use common::{expect, when};
use dsl_core::Target;
use dsl_core::arch::cluster::cluster_sync;
use dsl_core::arch::copy::{
    bulk_commit_group, bulk_load, bulk_prefetch_l2, bulk_wait_group_read, cp_async,
    cp_async_commit, cp_async_wait, store_async,
};
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{Smem, load, load_vec, store, store_vec};
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{cluster_cta_rank, lane_id, thread_idx_x, warp_id};
use dsl_core::arch::tma::TensorMap;
use dsl_core::interp::{
    Arg, BufferId, FaultKind, InterpError, Launch, Memory, Options, run, run_with,
};
use dsl_core::ir::{Block, ElemTy, Kernel, MemOp, Op, SourceLoc, Stmt};
use dsl_core::tensor_map::{MapSwizzle, TensorMapDesc};
use dsl_core::trace::control::{branch, dyn_range, for_loop};
use dsl_core::trace::{
    KernelParam, Tensor, Val, cluster_dims, smem_alloc, stage, threads, trace_kernel,
};
use half::bf16;

/// `nthreads` threads copy `bytes` of shared memory at `tile` to `out`, word by word.
fn dump(tile: Smem, bytes: u32, nthreads: u32, out: Tensor<u32, 1>) {
    assert_eq!(bytes % (4 * nthreads), 0, "whole words per thread");
    let tid = thread_idx_x();
    for k in 0..bytes / 4 / nthreads {
        let i = tid + k * nthreads;
        let v: Val<u32> = load(tile + i * 4u32);
        store(out.base() + i.mul_wide(4), v);
    }
}

/// A host tensor of 16-bit elements, `dims` innermost first, rows padded to `pitch`
/// elements (TMA strides are multiples of 16 bytes): element `i` holds `i + 1`.
#[derive(Debug)]
struct Host {
    dims: Vec<u64>,
    /// Elements between consecutive indices of each dimension.
    pitch: Vec<u64>,
    data: Vec<u16>,
}

impl Host {
    fn new(dims: &[u64], inner_pitch: u64) -> Self {
        let mut pitch = vec![1, inner_pitch];
        for d in 2..dims.len() {
            pitch.push(pitch[d - 1] * dims[d - 1]);
        }
        pitch.truncate(dims.len());
        let len = pitch[dims.len() - 1] * dims[dims.len() - 1];
        Host {
            dims: dims.to_vec(),
            pitch,
            data: (0..len).map(|i| (i + 1) as u16).collect(),
        }
    }

    fn strides_bytes(&self) -> Vec<u64> {
        self.pitch[1..].iter().map(|p| p * 2).collect()
    }

    fn map(&self, mem: &Memory, buf: BufferId, box_dims: &[u32], sw: MapSwizzle) -> Arg {
        Arg::TensorMap(
            TensorMapDesc::tiled(
                ElemTy::Bf16,
                mem.address(buf),
                &self.dims,
                &self.strides_bytes(),
                box_dims,
                sw,
            )
            .unwrap(),
        )
    }

    /// The model of the copy engine: the box at `coords` written densely (out-of-bounds
    /// elements zero), then each 16-byte chunk moved by the swizzle, written out by hand
    /// (Sw<B,4,3>: bits 4.. of the offset ^= bits 7.., B bits) on offsets from a
    /// pattern-aligned base.
    fn box_image(&self, box_dims: &[u32], coords: &[i64], sw: MapSwizzle) -> Vec<u16> {
        let n: usize = box_dims.iter().map(|&b| b as usize).product();
        let bits = match sw {
            MapSwizzle::None => 0,
            MapSwizzle::B32 => 1,
            MapSwizzle::B64 => 2,
            MapSwizzle::B128 => 3,
        };
        let mut out = vec![0u16; n];
        for lin in 0..n {
            let mut rest = lin;
            let mut at = 0u64;
            let mut inside = true;
            for d in 0..box_dims.len() {
                let i = (rest % box_dims[d] as usize) as i64;
                rest /= box_dims[d] as usize;
                let g = coords[d] + i;
                inside &= g >= 0 && (g as u64) < self.dims[d];
                at += g.max(0) as u64 * self.pitch[d];
            }
            let o = lin * 2;
            let swizzled = o ^ (((o >> 7) & ((1 << bits) - 1)) << 4);
            out[swizzled / 2] = if inside { self.data[at as usize] } else { 0 };
        }
        out
    }
}

fn words_to_u16(w: &[u32]) -> Vec<u16> {
    w.iter()
        .flat_map(|&x| [x as u16, (x >> 16) as u16])
        .collect()
}

/// One TMA load of a rank-`R` box at runtime coordinates into a 1024-aligned tile,
/// awaited, then dumped to `out` by 128 threads.
fn tma_load_kernel<const R: usize>(name: &str, box_dims: [u32; R]) -> Kernel {
    trace_kernel(name, Target::Sm90a, || {
        threads(128, 1, 1);
        let map = TensorMap::<bf16, R>::declare("map").with_box(box_dims);
        let coords: [Val<i32>; R] = std::array::from_fn(|d| Val::<i32>::declare(&format!("c{d}")));
        let out = Tensor::<u32, 1>::declare("out");
        let bytes = map.box_bytes();
        let tile = smem_alloc("tile", bytes.next_multiple_of(1024), 1024);
        let bar = Mbarrier::at(smem_alloc("bar", 8, 8).addr());
        let tid = thread_idx_x();
        when(tid.eq(0u32), || {
            bar.init(1u32);
            init_fence();
        });
        sync_threads();
        when(tid.eq(0u32), || {
            map.prefetch();
            bar.arrive_expect_tx(bytes);
            map.load(tile.addr(), coords.map(Into::into), bar);
        });
        bar.wait(0u32);
        dump(tile.addr(), bytes, 128, out);
    })
    .unwrap()
}

fn run_tma_load(host: &Host, box_dims: &[u32], coords: &[i64], sw: MapSwizzle) -> Vec<u16> {
    let k = match box_dims.len() {
        2 => tma_load_kernel::<2>("tma2", box_dims.try_into().unwrap()),
        3 => tma_load_kernel::<3>("tma3", box_dims.try_into().unwrap()),
        r => panic!("rank {r}"),
    };
    let mut mem = Memory::new();
    let g = mem.alloc_from("g", &host.data);
    let bytes = box_dims.iter().product::<u32>() as usize * 2;
    let out = mem.alloc("out", bytes);
    let mut args = vec![host.map(&mem, g, box_dims, sw)];
    args.extend(coords.iter().map(|&c| Arg::S32(c as i32)));
    args.push(Arg::contiguous(out, &[bytes as i64 / 4]));
    run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
    words_to_u16(&mem.read::<u32>(out))
}

#[test]
fn a_2d_tma_load_swizzles_128b_exactly_as_the_host_model() {
    let host = Host::new(&[128, 16], 128);
    let (b, c) = ([64, 8], [32, 4]);
    let got = run_tma_load(&host, &b, &c, MapSwizzle::B128);
    assert_eq!(got, host.box_image(&b, &c, MapSwizzle::B128));
    // The model is not the identity: row 1 of the box starts at its chunk 1.
    assert_ne!(got, host.box_image(&b, &c, MapSwizzle::None));
    assert_eq!(got[64 + 8], host.data[5 * 128 + 32]);
}

#[test]
fn a_ragged_box_is_zero_filled_on_every_side() {
    let host = Host::new(&[100, 13], 104);
    for c in [[64, 8], [-24, -3], [80, 10]] {
        let b = [64, 8];
        let want = host.box_image(&b, &c, MapSwizzle::B128);
        assert!(want.contains(&0), "coords {c:?} reach past the tensor");
        assert_eq!(run_tma_load(&host, &b, &c, MapSwizzle::B128), want, "{c:?}");
    }
}

#[test]
fn a_3d_box_with_the_32b_swizzle() {
    let host = Host::new(&[16, 6, 5], 16);
    let (b, c) = ([16, 4, 4], [0, 3, 3]);
    assert_eq!(
        run_tma_load(&host, &b, &c, MapSwizzle::B32),
        host.box_image(&b, &c, MapSwizzle::B32)
    );
}

/// Loads the box at (0, 0) of `src`, adds 1 to every element in shared memory, and stores
/// it at runtime coordinates of `dst`; `fence` places the proxy fence, `wait` the final
/// bulk wait.
fn store_kernel(name: &str, fence: bool, wait: bool) -> Kernel {
    trace_kernel(name, Target::Sm90a, || {
        threads(128, 1, 1);
        let src = TensorMap::<bf16, 2>::declare("src").with_box([64, 8]);
        let dst = TensorMap::<bf16, 2>::declare("dst").with_box([64, 8]);
        let (x, y) = (Val::<i32>::declare("x"), Val::<i32>::declare("y"));
        let tile = smem_alloc("tile", 1024, 1024);
        let bar = Mbarrier::at(smem_alloc("bar", 8, 8).addr());
        let tid = thread_idx_x();
        when(tid.eq(0u32), || {
            bar.init(1u32);
            init_fence();
        });
        sync_threads();
        when(tid.eq(0u32), || {
            bar.arrive_expect_tx(src.box_bytes());
            src.load(tile.addr(), [0.into(), 0.into()], bar);
        });
        bar.wait(0u32);
        let at = tile.addr() + tid * 8u32;
        let v: [Val<u32>; 2] = load_vec(at);
        store_vec(at, v.map(|w| w + 0x0001_0001u32));
        if fence {
            fence_proxy_async_shared();
        }
        sync_threads();
        stage("epilogue");
        when(tid.eq(0u32), || {
            dst.store(tile.addr(), [x.into(), y.into()]);
            bulk_commit_group();
            if wait {
                bulk_wait_group_read(0);
            }
        });
    })
    .unwrap()
}

fn run_store(k: &Kernel, x: i32, y: i32) -> Result<(Host, Vec<u16>), InterpError> {
    let host = Host::new(&[100, 13], 104);
    let mut mem = Memory::new();
    let g = mem.alloc_from("src", &host.data);
    let d = mem.alloc_from("dst", &vec![0xdeadu16; host.data.len()]);
    let b = [64, 8];
    let args = [
        host.map(&mem, g, &b, MapSwizzle::B128),
        host.map(&mem, d, &b, MapSwizzle::B128),
        Arg::S32(x),
        Arg::S32(y),
    ];
    run(k, &mut mem, &args, &Launch::grid([1, 1, 1]))?;
    Ok((host, mem.read::<u16>(d)))
}

#[test]
fn a_tma_store_round_trips_and_skips_out_of_bounds_elements() {
    let k = store_kernel("store", true, true);
    for (x, y) in [(0, 0), (70, 9), (-10, -2)] {
        let (host, got) = run_store(&k, x, y).unwrap();
        for row in 0..13i32 {
            for col in 0..100i32 {
                let (i, j) = (col - x, row - y);
                let want = if (0..64).contains(&i) && (0..8).contains(&j) {
                    host.data[(j * 104 + i) as usize] + 1
                } else {
                    0xdead
                };
                let at = (row * 104 + col) as usize;
                assert_eq!(got[at], want, "element ({col}, {row}) stored at ({x}, {y})");
            }
        }
        // The padding past each row is never written.
        assert!((0..13).all(|r| got[r * 104 + 100..r * 104 + 104] == [0xdead; 4]));
    }
}

#[test]
fn a_multicast_load_fills_both_ctas_of_a_cluster() {
    let k = trace_kernel("multicast", Target::Sm90a, || {
        threads(64, 1, 1);
        cluster_dims(2, 1, 1);
        let map = TensorMap::<bf16, 2>::declare("map").with_box([64, 8]);
        let out = Tensor::<u32, 1>::declare("out");
        let tile = smem_alloc("tile", 1024, 1024);
        let bar = Mbarrier::at(smem_alloc("bar", 8, 8).addr());
        let tid = thread_idx_x();
        let rank = cluster_cta_rank();
        when(tid.eq(0u32), || {
            bar.init(1u32);
            init_fence();
        });
        cluster_sync();
        // Rank 0 multicasts before rank 1 expects the bytes: rank 1's tx-count goes
        // negative first, and its phase completes only at its own arrive.
        when(tid.eq(0u32), || {
            when(rank.eq(0u32), || {
                map.load_multicast(tile.addr(), [8.into(), 2.into()], bar, 0b11)
            });
            bar.arrive_expect_tx(map.box_bytes());
        });
        bar.wait(0u32);
        let base = out.base() + (rank * 1024u32).cast::<u64>();
        for k in 0..4u32 {
            let i = tid + k * 64u32;
            let v: Val<u32> = load(tile.addr() + i * 4u32);
            store(base + i.mul_wide(4), v);
        }
        cluster_sync();
    })
    .unwrap();
    let host = Host::new(&[128, 16], 128);
    let mut mem = Memory::new();
    let g = mem.alloc_from("g", &host.data);
    let out = mem.alloc("out", 2048);
    let args = [
        host.map(&mem, g, &[64, 8], MapSwizzle::B128),
        Arg::contiguous(out, &[512]),
    ];
    run(&k, &mut mem, &args, &Launch::grid([2, 1, 1])).unwrap();
    let got = words_to_u16(&mem.read::<u32>(out));
    let want = host.box_image(&[64, 8], &[8, 2], MapSwizzle::B128);
    assert_eq!(got[..512], want[..]);
    assert_eq!(got[512..], want[..]);
}

/// Two CTAs of a cluster each zero their inbox, then store 32 words into the other's with
/// `st.async` (thread t: 100 x rank + t), then copy their own inbox to `out`, after a
/// cluster-scope wait for the phase the words complete when `wait`.
fn store_async_kernel(wait: bool) -> Kernel {
    trace_kernel("store_async", Target::Sm90a, || {
        threads(32, 1, 1);
        cluster_dims(2, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let inbox = smem_alloc("inbox", 128, 16);
        let bar = Mbarrier::at(smem_alloc("bar", 8, 8).addr());
        let (tid, rank) = (thread_idx_x(), cluster_cta_rank());
        when(tid.eq(0u32), || {
            bar.init(1u32);
            bar.arrive_expect_tx(128u32);
            init_fence();
        });
        store(inbox.addr() + tid * 4u32, Val::<u32>::constant(0));
        cluster_sync();
        let word = rank * 100u32 + tid;
        store_async(inbox.addr() + tid * 4u32, rank ^ 1u32, [word], bar);
        if wait {
            bar.wait_cluster(0u32);
        }
        let v: Val<u32> = load(inbox.addr() + tid * 4u32);
        store(out.base() + (rank * 32u32 + tid).mul_wide(4), v);
        cluster_sync();
    })
    .unwrap()
}

#[test]
fn a_store_async_lands_in_the_peer_after_its_phase() {
    let mut mem = Memory::new();
    let out = mem.alloc("out", 256);
    let args = [Arg::contiguous(out, &[64])];
    run(
        &store_async_kernel(true),
        &mut mem,
        &args,
        &Launch::grid([2, 1, 1]),
    )
    .unwrap();
    let want: Vec<u32> = (0..32).map(|t| 100 + t).chain(0..32).collect();
    assert_eq!(mem.read::<u32>(out), want);

    // Without the wait, the race check sees a peer's st.async overwrite words this CTA
    // has read; without the race check, the read of words that have not landed faults.
    let no_wait = |race_check| {
        let mut mem = Memory::new();
        let out = mem.alloc("out", 256);
        let args = [Arg::contiguous(out, &[64])];
        let opts = Options {
            race_check,
            ..Options::default()
        };
        let launch = Launch::grid([2, 1, 1]);
        run_with(&store_async_kernel(false), &mut mem, &args, &launch, &opts).unwrap_err()
    };
    expect(
        &no_wait(true),
        FaultKind::SharedRace,
        &["the copy writes", "read these bytes with the ld.shared"],
    );
    expect(
        &no_wait(false),
        FaultKind::AsyncProxyRace,
        &[
            "`ld.shared`",
            "the st.async.shared::cluster issued at",
            "has not observed",
        ],
    );
}

#[test]
fn a_bulk_load_completes_on_expect_tx_and_an_arrive() {
    let k = trace_kernel("bulk", Target::Sm90a, || {
        threads(32, 1, 1);
        let src = Tensor::<u32, 1>::declare("src");
        let out = Tensor::<u32, 1>::declare("out");
        let tile = smem_alloc("tile", 512, 128);
        let bar = Mbarrier::at(smem_alloc("bar", 8, 8).addr());
        let tid = thread_idx_x();
        when(tid.eq(0u32), || {
            bar.init(1u32);
            init_fence();
            // The bytes before the arrival: the phase waits for both.
            bar.expect_tx(512u32);
            bulk_load(tile.addr(), src.base() + 64i64, 512u32, bar);
            bar.arrive();
        });
        bar.wait(0u32);
        dump(tile.addr(), 512, 32, out);
    })
    .unwrap();
    let mut mem = Memory::new();
    let src = mem.alloc_from("src", &(0..256u32).map(|i| i * 7).collect::<Vec<_>>());
    let out = mem.alloc("out", 512);
    let args = [Arg::contiguous(src, &[256]), Arg::contiguous(out, &[128])];
    run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
    assert_eq!(
        mem.read::<u32>(out),
        (16..144u32).map(|i| i * 7).collect::<Vec<_>>()
    );
}

/// Every thread prefetches `bytes` of `src` from byte `at`.
fn run_prefetch(at: u32, bytes: u32) -> Result<(), InterpError> {
    let k = trace_kernel("prefetch", Target::Sm90a, || {
        threads(32, 1, 1);
        let src = Tensor::<u32, 1>::declare("src");
        let at = Val::<u32>::declare("at");
        let bytes = Val::<u32>::declare("bytes");
        bulk_prefetch_l2(src.base() + at.cast::<u64>(), bytes);
    })
    .unwrap();
    let mut mem = Memory::new();
    let src = mem.alloc("src", 1024);
    let args = [Arg::contiguous(src, &[256]), Arg::U32(at), Arg::U32(bytes)];
    run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).map(|_| ())
}

#[test]
fn a_bulk_prefetch_is_checked_like_a_bulk_copy() {
    run_prefetch(512, 512).unwrap();
    let past_the_end = run_prefetch(528, 512).unwrap_err();
    expect(
        &past_the_end,
        FaultKind::OutOfBounds,
        &["bulk prefetch global read", "by thread 0 "],
    );
    let misaligned = run_prefetch(8, 16).unwrap_err();
    expect(
        &misaligned,
        FaultKind::Misaligned,
        &["bulk prefetch source"],
    );
    let ragged = run_prefetch(0, 24).unwrap_err();
    expect(
        &ragged,
        FaultKind::Misaligned,
        &["a bulk prefetch of 24 bytes: the size is a positive multiple of 16"],
    );
}

#[test]
fn cp_async_zero_fills_past_the_valid_bytes() {
    let k = trace_kernel("cp_async", Target::Sm90a, || {
        threads(32, 1, 1);
        let src = Tensor::<u8, 1>::declare("src");
        let valid = Val::<u32>::declare("valid");
        let out = Tensor::<u32, 1>::declare("out");
        let tile = smem_alloc("tile", 512, 128);
        let tid = thread_idx_x();
        // Thread t copies bytes [16 t, 16 t + 16), of which those below `valid` exist.
        let start = tid * 16u32;
        let n = valid.max(start).min(start + 16u32) - start;
        cp_async(
            tile.addr() + start,
            src.base() + start.cast::<u64>(),
            16,
            Some(n),
        );
        cp_async_commit();
        cp_async_wait(0);
        sync_threads();
        dump(tile.addr(), 512, 32, out);
    })
    .unwrap();
    let mut mem = Memory::new();
    let bytes: Vec<u8> = (0..512u32).map(|i| (i % 251 + 1) as u8).collect();
    let src = mem.alloc_from("src", &bytes);
    let out = mem.alloc("out", 512);
    let args = [
        Arg::contiguous(src, &[512]),
        Arg::U32(200),
        Arg::contiguous(out, &[128]),
    ];
    run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
    let got = mem.bytes(out);
    assert_eq!(got[..200], bytes[..200]);
    assert!(got[200..].iter().all(|&b| b == 0));
}

/// A TMA producer warp fills 3 stages guarded by full/empty mbarriers; 2 consumer warps
/// wait for each stage, copy it out and release it; `iters` boxes in a runtime loop.
#[test]
fn a_three_stage_tma_pipeline_runs_exactly() {
    let k = trace_kernel("pipeline", Target::Sm90a, || {
        threads(96, 1, 1);
        let map = TensorMap::<bf16, 2>::declare("map").with_box([64, 8]);
        let iters = Val::<u32>::declare("iters");
        let out = Tensor::<u32, 1>::declare("out");
        let stages = smem_alloc("stages", 3 * 1024, 1024);
        let bars = smem_alloc("bars", 48, 8);
        let full = |s: Val<u32>| Mbarrier::at(bars.addr() + s * 8u32);
        let empty = |s: Val<u32>| Mbarrier::at(bars.addr() + (s * 8u32 + 24u32));
        let tid = thread_idx_x();
        let loc = SourceLoc::caller();
        when(tid.eq(0u32), || {
            for s in 0..3u32 {
                full(Val::constant(s)).init(1u32);
                empty(Val::constant(s)).init(64u32);
            }
            init_fence();
        });
        sync_threads();
        branch(warp_id().eq(0u32), (), &[], loc, |producer, ()| {
            if producer {
                when(lane_id().eq(0u32), || {
                    for_loop(dyn_range(0u32, iters), (), &[], loc, |i, ()| {
                        let (s, phase) = (i % 3u32, (i / 3u32) & 1u32);
                        // The producer starts at phase 1: the stages begin empty.
                        empty(s).wait(phase ^ 1u32);
                        full(s).arrive_expect_tx(map.box_bytes());
                        map.load(
                            stages.addr() + s * 1024u32,
                            [0.into(), (i * 8u32).into()],
                            full(s),
                        );
                    });
                });
            } else {
                let c = tid - 32u32;
                for_loop(dyn_range(0u32, iters), (), &[], loc, |i, ()| {
                    let (s, phase) = (i % 3u32, (i / 3u32) & 1u32);
                    full(s).wait(phase);
                    let v: [Val<u32>; 4] = load_vec(stages.addr() + s * 1024u32 + c * 16u32);
                    store_vec(out.base() + (i * 1024u32 + c * 16u32).cast::<u64>(), v);
                    empty(s).arrive();
                });
            }
            ((), ())
        });
    })
    .unwrap();
    let iters = 8u32;
    let host = Host::new(&[64, 8 * iters as u64], 64);
    let mut mem = Memory::new();
    let g = mem.alloc_from("g", &host.data);
    let out = mem.alloc("out", 1024 * iters as usize);
    let args = [
        host.map(&mem, g, &[64, 8], MapSwizzle::B128),
        Arg::U32(iters),
        Arg::contiguous(out, &[256 * iters as i64]),
    ];
    run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
    let got = words_to_u16(&mem.read::<u32>(out));
    for i in 0..iters as usize {
        let want = host.box_image(&[64, 8], &[0, 8 * i as i64], MapSwizzle::B128);
        assert_eq!(got[i * 512..(i + 1) * 512], want[..], "iteration {i}");
    }
}

#[test]
fn reading_a_tma_box_before_its_phase_completes_is_a_race() {
    let k = trace_kernel("early_read", Target::Sm90a, || {
        threads(32, 1, 1);
        let map = TensorMap::<bf16, 2>::declare("map").with_box([64, 8]);
        let out = Tensor::<u32, 1>::declare("out");
        let tile = smem_alloc("tile", 1024, 1024);
        let bar = Mbarrier::at(smem_alloc("bar", 8, 8).addr());
        when(thread_idx_x().eq(0u32), || {
            bar.init(1u32);
            init_fence();
            bar.arrive_expect_tx(map.box_bytes());
            map.load(tile.addr(), [0.into(), 0.into()], bar);
        });
        // No bar.wait(0) before the read.
        dump(tile.addr(), 1024, 32, out);
    })
    .unwrap();
    let host = Host::new(&[64, 8], 64);
    let mut mem = Memory::new();
    let g = mem.alloc_from("g", &host.data);
    let out = mem.alloc("out", 1024);
    let args = [
        host.map(&mem, g, &[64, 8], MapSwizzle::B128),
        Arg::contiguous(out, &[256]),
    ];
    let e = run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap_err();
    expect(
        &e,
        FaultKind::AsyncProxyRace,
        &[
            "`ld.shared`",
            "the load reads at shared 0x400",
            "the cp.async.bulk.tensor (load) issued at",
            "by thread 0 of block (0,0,0)",
            "completes on phase 0 of the mbarrier at shared 0x800",
            "has not observed",
            "by thread 0 ",
        ],
    );
}

#[test]
fn a_tma_load_over_operands_an_mma_still_reads_is_a_race() {
    let k = trace_kernel("tma_over_mma", Target::Sm100a, || {
        threads(128, 1, 1);
        let map = TensorMap::<bf16, 2>::declare("map").with_box([64, 8]);
        let x = Tensor::<u32, 1>::declare("x");
        let tile = smem_alloc("tile", 128 * 128 + 16 * 128, 1024);
        let bars = smem_alloc("bars", 16, 8);
        let slot = smem_alloc("slot", 4, 4);
        let (mbar, tbar) = (Mbarrier::at(bars.addr()), Mbarrier::at(bars.addr() + 8i64));
        let tid = thread_idx_x();
        for i in 0..9u32 {
            for w in 0..4u32 {
                let v = if w == 0 { 0x3f80_3f80u32 } else { 0 };
                store(tile.addr() + ((tid * 9u32 + i) * 16u32 + w * 4u32), v);
            }
        }
        fence_proxy_async_shared();
        when(warp_id().eq(0u32), || tcgen05::alloc(slot.addr(), 32));
        when(tid.eq(0u32), || {
            mbar.init(1u32);
            tbar.init(1u32);
            init_fence();
        });
        tcgen05::fence_before_thread_sync();
        sync_threads();
        tcgen05::fence_after_thread_sync();
        let base: Val<u32> = load(slot.addr());
        let d = TmemAddr::from_base(base);
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
            // The next stage's load lands on the operands before mbar's phase is waited.
            tbar.arrive_expect_tx(map.box_bytes());
            map.load(tile.addr(), [0.into(), 0.into()], tbar);
        });
        mbar.wait(0u32);
        tbar.wait(0u32);
        let v = tcgen05::ld_32x32b(d.warp_quadrant(warp_id()), 1)[0];
        tcgen05::wait_ld();
        store(x.base() + tid.mul_wide(4), v);
        tcgen05::fence_before_thread_sync();
        sync_threads();
        when(warp_id().eq(0u32), || tcgen05::dealloc(d, 32));
    })
    .unwrap();
    let host = Host::new(&[64, 8], 64);
    let mut mem = Memory::new();
    let g = mem.alloc_from("g", &host.data);
    let x = mem.alloc("x", 512);
    let args = [
        host.map(&mem, g, &[64, 8], MapSwizzle::B128),
        Arg::contiguous(x, &[128]),
    ];
    let e = run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap_err();
    expect(
        &e,
        FaultKind::AsyncProxyRace,
        &[
            "`cp.async.bulk.tensor (load)`",
            "overwrites shared memory at 0x400",
            "tcgen05.mma",
            "may still be reading: this thread has not waited for phase 0",
        ],
    );
}

#[test]
fn a_tma_store_of_unfenced_stores_is_a_race() {
    let e = run_store(&store_kernel("unfenced", false, true), 0, 0).unwrap_err();
    expect(
        &e,
        FaultKind::AsyncProxyRace,
        &[
            "`cp.async.bulk.tensor (store)` [stage `epilogue`]",
            "the TMA store reads shared 0x400, written by thread 0 of block (0,0,0) (cluster \
             rank 0) with an ordinary store not followed by fence.proxy.async.shared::cta",
        ],
    );
}

#[test]
fn exiting_before_the_bulk_stores_are_read_is_a_leak() {
    let e = run_store(&store_kernel("no_wait", true, false), 0, 0).unwrap_err();
    expect(
        &e,
        FaultKind::Leak,
        &[
            "by thread 0 ",
            "1 bulk store group(s) not waited for",
            "cp.async.bulk.wait_group.read 0 before exit",
        ],
    );
}

fn retarget_param_address(b: &mut Block, to: u32) -> usize {
    let mut n = 0;
    for s in &mut b.stmts {
        match s {
            Stmt::Inst(i) => {
                if let Op::Mem(MemOp::ParamAddress { param, .. }) = &mut i.op {
                    *param = to;
                    n += 1;
                }
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => n += retarget_param_address(then_body, to) + retarget_param_address(else_body, to),
            Stmt::Loop { header, body, .. } => {
                n += retarget_param_address(header, to) + retarget_param_address(body, to)
            }
            Stmt::Stage(_) | Stmt::Comment(_) => {}
        }
    }
    n
}

#[test]
fn a_map_operand_that_is_not_a_tensor_map_is_refused_before_it_runs() {
    // The map operand names the `out` tensor parameter (#3): `ir::verify`, which the
    // interpreter runs first, refuses it at the op's line.
    let mut k = tma_load_kernel::<2>("not_a_map", [64, 8]);
    assert_eq!(retarget_param_address(&mut k.body, 3), 1);
    let host = Host::new(&[64, 8], 64);
    let mut mem = Memory::new();
    let g = mem.alloc_from("g", &host.data);
    let out = mem.alloc("out", 1024);
    let args = [
        host.map(&mem, g, &[64, 8], MapSwizzle::B128),
        Arg::S32(0),
        Arg::S32(0),
        Arg::contiguous(out, &[256]),
    ];
    let e = run(&k, &mut mem, &args, &Launch::grid([1, 1, 1]))
        .unwrap_err()
        .to_string();
    for needle in [
        "`cvta.param`: parameter `out` is not a tensor map",
        "`cp.async.bulk.tensor (load)`: the tensor map operand",
    ] {
        assert!(e.contains(needle), "`{needle}` missing from:\n{e}");
    }
}
