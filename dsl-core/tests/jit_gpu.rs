//! Loading and launching traced kernels on a GPU: plain, cluster + PDL, above 48 KiB of
//! shared memory, a 16-CTA cluster, and replay from a captured CUDA graph. Each `gpu_*`
//! test prints a SKIPPED line and passes where no suitable GPU is present; the CPU test at
//! the end checks that every kernel used here assembles.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use dsl_core::Target;
use dsl_core::arch::copy::bulk_load;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{Gmem, LoadOpts, Smem, load, load_vec_if, store, store_if};
use dsl_core::arch::pdl::{grid_dependency_wait, launch_dependents};
use dsl_core::arch::sync::{NamedBarrier, sync_threads};
use dsl_core::arch::thread::{block_idx_x, cluster_cta_rank, thread_idx_x};
use dsl_core::interp::{self, Arg, Memory};
use dsl_core::ir::{Kernel, SourceLoc};
use dsl_core::jit::{self, JitError, KernelArg, Launch, TensorArg};
use dsl_core::trace::control::{branch, for_loop};
use dsl_core::trace::{
    KernelParam, Tensor, Val, cluster_dims, dyn_range, smem_alloc, threads, trace_kernel,
};

const THREADS: u32 = 128;

/// The graph test captures a stream while the harness runs other tests on other threads;
/// opening a device synchronises the context, which a capture in progress does not allow.
/// So the capture runs alone and the other GPU tests share.
static CAPTURE: RwLock<()> = RwLock::new(());

fn shared_gpu() -> RwLockReadGuard<'static, ()> {
    CAPTURE.read().unwrap_or_else(PoisonError::into_inner)
}

fn exclusive_gpu() -> RwLockWriteGuard<'static, ()> {
    CAPTURE.write().unwrap_or_else(PoisonError::into_inner)
}

/// This thread's element: `blockIdx.x * 128 + threadIdx.x`.
fn global_index() -> Val<u32> {
    block_idx_x() * THREADS + thread_idx_x()
}

/// The address of 4-byte element `i` of a tensor based at `base`.
fn element(base: Gmem, i: Val<u32>) -> Gmem {
    base + i.mul_wide(4).bitcast::<i64>()
}

/// `out[i] = inp[i] * 2 + n` for `i < len`.
fn scale(target: Target) -> Kernel {
    trace_kernel("scale", target, || {
        threads(THREADS, 1, 1);
        let out = Tensor::<f32, 1>::declare("out");
        let inp = Tensor::<f32, 1>::declare("inp");
        let len = Val::<u32>::declare("len");
        let n = Val::<f32>::declare("n");
        let i = global_index();
        let ok = i.lt(len);
        let [v] = load_vec_if::<f32, 1, _>(element(inp.base(), i), ok, 0.0f32, LoadOpts::default());
        store_if(element(out.base(), i), v * 2.0 + n, ok);
    })
    .unwrap()
}

/// `out[i] = out[i] * 4 + %cluster_ctarank`, waiting for the previous grid first (PDL).
fn cluster_rank(target: Target, cluster: u32) -> Kernel {
    trace_kernel(&format!("cluster_rank_{cluster}"), target, || {
        threads(THREADS, 1, 1);
        cluster_dims(cluster, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        launch_dependents();
        grid_dependency_wait();
        let at = element(out.base(), global_index());
        let v: Val<u32> = load(at);
        store(at, v * 4 + cluster_cta_rank());
    })
    .unwrap()
}

/// `out[i] += inp[i]`, after the previous grid (PDL).
fn accumulate(target: Target) -> Kernel {
    trace_kernel("accumulate", target, || {
        threads(THREADS, 1, 1);
        let out = Tensor::<f32, 1>::declare("out");
        let inp = Tensor::<f32, 1>::declare("inp");
        grid_dependency_wait();
        let i = global_index();
        let a: Val<f32> = load(element(out.base(), i));
        let b: Val<f32> = load(element(inp.base(), i));
        store(element(out.base(), i), a + b);
    })
    .unwrap()
}

/// Bytes of shared memory `smem_exchange` uses: past the 48 KiB a kernel gets without
/// opting in.
const BIG_SMEM: u32 = 100 * 1024;

/// Each thread writes its index into the top of a 100 KiB shared buffer and reads back its
/// neighbour's (`tid ^ 1`).
fn smem_exchange(target: Target) -> Kernel {
    trace_kernel("smem_exchange", target, || {
        threads(THREADS, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let buf = smem_alloc("buf", BIG_SMEM, 16);
        let top = buf.addr() + i64::from(BIG_SMEM - THREADS * 4);
        let tid = thread_idx_x();
        store(top + tid * 4, tid);
        sync_threads();
        let other: Val<u32> = load(top + (tid ^ 1u32) * 4);
        store(element(out.base(), tid), other);
    })
    .unwrap()
}

/// How a two-team kernel's tiles reach shared memory.
#[derive(Clone, Copy, Debug)]
enum TileFill {
    /// Every thread of the team stores its word.
    Stores,
    /// One lane of the team issues a bulk copy that completes on the team's mbarrier.
    BulkCopy,
}

/// How the two teams of the two-team kernel keep pace.
#[derive(Clone, Copy, Debug)]
enum Pace {
    /// Both walk `rounds` tiles.
    Even,
    /// The second team walks one tile more, so it passes its named barrier more often.
    SecondTeamOneTileMore,
    /// Even, and the second team starts once the first has (the first `bar.arrive`s and
    /// goes on, the second `bar.sync`s on barrier 3, as the decode kernel staggers them).
    Staggered,
}

impl Pace {
    /// The tiles team `team` walks beyond `rounds`.
    fn extra_tiles(self, team: u32) -> u32 {
        match self {
            Pace::SecondTeamOneTileMore => team,
            Pace::Even | Pace::Staggered => 0,
        }
    }
}

/// Where the two-team kernel's teams run their tiles from.
#[derive(Clone, Copy, Debug)]
enum TeamCode {
    /// One loop for both, the team a run-time value.
    Shared,
    /// Each team its own copy of the loop, in one arm of a branch on the team, as the
    /// decode kernel traces its teams.
    PerTeam,
}

/// One way to run the two-team kernel.
#[derive(Clone, Copy, Debug)]
struct TwoTeams {
    fill: TileFill,
    pace: Pace,
    code: TeamCode,
    /// Warps a team: 2, or 8 as in the decode kernel.
    team_warps: u32,
    /// `griddepcontrol.launch_dependents` (SASS `PREEXIT`) between the CTA barrier and the
    /// merge, where the decode kernel has it.
    trigger_dependents: bool,
}

impl TwoTeams {
    const fn new(fill: TileFill, pace: Pace, code: TeamCode, team_warps: u32) -> TwoTeams {
        TwoTeams {
            fill,
            pace,
            code,
            team_warps,
            trigger_dependents: false,
        }
    }

    const fn triggering_dependents(self) -> TwoTeams {
        TwoTeams {
            trigger_dependents: true,
            ..self
        }
    }

    /// Threads a team, and words a tile.
    fn team_threads(self) -> u32 {
        32 * self.team_warps
    }

    fn threads(self) -> u32 {
        2 * self.team_threads()
    }

    /// The kernel's name, which racecheck's reports give.
    fn name(self) -> String {
        let TwoTeams {
            fill,
            pace,
            code,
            team_warps,
            trigger_dependents,
        } = self;
        let pdl = if trigger_dependents { "_pdl" } else { "" };
        format!("two_teams_{fill:?}_{pace:?}_{code:?}_{team_warps}warps{pdl}")
    }
}

/// The ways the two-team kernel runs: every pace with tiles by stores and by bulk copies in
/// teams of two warps sharing their code; then teams of 8 warps, each with its own code,
/// as the decode kernel's; then with the decode kernel's PDL trigger before the merge.
const TWO_TEAM_VARIANTS: [TwoTeams; 12] = [
    TwoTeams::new(TileFill::Stores, Pace::Even, TeamCode::Shared, 2),
    TwoTeams::new(
        TileFill::Stores,
        Pace::SecondTeamOneTileMore,
        TeamCode::Shared,
        2,
    ),
    TwoTeams::new(TileFill::Stores, Pace::Staggered, TeamCode::Shared, 2),
    TwoTeams::new(TileFill::BulkCopy, Pace::Even, TeamCode::Shared, 2),
    TwoTeams::new(
        TileFill::BulkCopy,
        Pace::SecondTeamOneTileMore,
        TeamCode::Shared,
        2,
    ),
    TwoTeams::new(TileFill::BulkCopy, Pace::Staggered, TeamCode::Shared, 2),
    TwoTeams::new(TileFill::Stores, Pace::Even, TeamCode::PerTeam, 8),
    TwoTeams::new(TileFill::BulkCopy, Pace::Even, TeamCode::PerTeam, 8),
    TwoTeams::new(
        TileFill::BulkCopy,
        Pace::SecondTeamOneTileMore,
        TeamCode::PerTeam,
        8,
    ),
    TwoTeams::new(TileFill::BulkCopy, Pace::Staggered, TeamCode::PerTeam, 8),
    TwoTeams::new(TileFill::Stores, Pace::Even, TeamCode::Shared, 2).triggering_dependents(),
    TwoTeams::new(TileFill::BulkCopy, Pace::Staggered, TeamCode::PerTeam, 8)
        .triggering_dependents(),
];

/// The synchronisation of the streamed decode kernel, cut down: two teams of N threads,
/// each walking its tiles of N words behind its own named barrier (a tile filled, then
/// read across the team's warps), each writing its partial sums over its tile; after the
/// CTA barrier every thread adds both partials. `out[t]` is the sum over every tile of
/// both teams of its word `N - 1 - t % N`, with tile r of team e at `src[(2 r + e) N..]`.
fn two_teams(way: TwoTeams) -> Kernel {
    trace_kernel(&way.name(), Target::Sm90a, || {
        let n = way.team_threads();
        threads(way.threads(), 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let src = Tensor::<u32, 1>::declare("src");
        let rounds = Val::<u32>::declare("rounds");
        let tiles = smem_alloc("tiles", 2 * n * 4, 128);
        let bars = smem_alloc("bars", 16, 8);
        let tid = thread_idx_x();
        let (team, t) = (tid / n, tid % n);
        branch(tid.lt(2u32), (), &[], SourceLoc::caller(), |first, ()| {
            if first {
                Mbarrier::at(bars.addr() + tid * 8u32).init(1u32);
                init_fence();
            }
            ((), ())
        });
        sync_threads();
        if let Pace::Staggered = way.pace {
            let stagger = NamedBarrier::new(3, way.threads());
            branch(team.eq(0u32), (), &[], SourceLoc::caller(), |first, ()| {
                if first {
                    stagger.arrive();
                } else {
                    stagger.sync();
                }
                ((), ())
            });
        }
        let shared = (&src, rounds, tiles.addr(), bars.addr());
        let sum = match way.code {
            TeamCode::Shared => {
                let team_sync = || {
                    for e in 0..2u32 {
                        branch(team.eq(e), (), &[], SourceLoc::caller(), |mine, ()| {
                            if mine {
                                NamedBarrier::new(1 + e, n).sync();
                            }
                            ((), ())
                        });
                    }
                };
                walk_tiles(way, team, t, shared, &team_sync)
            }
            TeamCode::PerTeam => {
                let (_, sum) = branch(team.eq(0u32), (), &[], SourceLoc::caller(), |first, ()| {
                    let e = if first { 0u32 } else { 1 };
                    let team_sync = || NamedBarrier::new(1 + e, n).sync();
                    ((), walk_tiles(way, Val::constant(e), t, shared, &team_sync))
                });
                sum
            }
        };
        store(tiles.addr() + tid * 4u32, sum);
        sync_threads();
        if way.trigger_dependents {
            launch_dependents();
        }
        let a: Val<u32> = load(tiles.addr() + t * 4u32);
        let b: Val<u32> = load(tiles.addr() + (t + n) * 4u32);
        store(element(out.base(), tid), a + b);
    })
    .unwrap()
}

/// Team `team`'s tiles (its thread `t`), each filled, read across the team and summed: the
/// sum of this thread's word over them. `shared` is the source, the rounds, and the shared
/// tiles' and mbarriers' addresses.
fn walk_tiles(
    way: TwoTeams,
    team: Val<u32>,
    t: Val<u32>,
    (src, rounds, tiles, bars): (&Tensor<u32, 1>, Val<u32>, Smem, Smem),
    team_sync: &dyn Fn(),
) -> Val<u32> {
    let n = way.team_threads();
    let tile = tiles + team * (n * 4);
    let bar = Mbarrier::at(bars + team * 8u32);
    for_loop(
        dyn_range(0u32, rounds + team * way.pace.extra_tiles(1)),
        Val::<u32>::constant(0),
        &["sum"],
        SourceLoc::caller(),
        |r, sum| {
            let first = (r * 2u32 + team) * n;
            match way.fill {
                TileFill::Stores => {
                    let v: Val<u32> = load(element(src.base(), first + t));
                    store(tile + t * 4u32, v);
                    team_sync();
                }
                TileFill::BulkCopy => {
                    branch(t.eq(0u32), (), &[], SourceLoc::caller(), |issuer, ()| {
                        if issuer {
                            bar.arrive_expect_tx(n * 4);
                            bulk_load(tile, element(src.base(), first), n * 4, bar);
                        }
                        ((), ())
                    });
                    bar.wait(r & 1u32);
                }
            }
            let v: Val<u32> = load(tile + (n - 1 - t) * 4u32);
            // Every read of this tile before the next round overwrites it.
            team_sync();
            sum + v
        },
    )
}

/// The device address of `s`, for a tensor argument. The read/write events cudarc records
/// around it are ordered on the slice's own stream, which is the one launched on here.
fn addr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    s.device_ptr(stream).0
}

#[test]
fn gpu_scale_kernel() {
    let _gpu = shared_gpu();
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let n = 300usize;
    let grid = (n as u32).div_ceil(THREADS);
    let padded = (grid * THREADS) as usize;
    let input: Vec<f32> = (0..padded).map(|i| i as f32).collect();
    let inp = stream.clone_htod(&input).unwrap();
    let out = stream.clone_htod(&vec![-1.0f32; padded]).unwrap();

    let k = dev
        .kernel("scale", "", Target::Sm90a, || {
            Ok::<_, JitError>(scale(Target::Sm90a))
        })
        .unwrap();
    let args = [
        KernelArg::Tensor(TensorArg::contiguous::<f32, 1>(
            addr(&out, stream),
            [n as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<f32, 1>(
            addr(&inp, stream),
            [n as i64],
        )),
        KernelArg::U32(n as u32),
        KernelArg::F32(0.5),
    ];
    // SAFETY: both buffers hold `padded` f32 and live until the read-back below.
    unsafe { k.launch(stream, Launch::new([grid, 1, 1]), &args) }.unwrap();
    let got = stream.clone_dtoh(&out).unwrap();
    for (i, &g) in got.iter().enumerate() {
        let want = if i < n { i as f32 * 2.0 + 0.5 } else { -1.0 };
        assert_eq!(g, want, "element {i}");
    }

    // The same key again: served from the cache, no second trace.
    let again = dev
        .kernel(
            "scale",
            "",
            Target::Sm90a,
            || -> Result<Kernel, JitError> { panic!("a cached kernel was traced again") },
        )
        .unwrap();
    assert!(Arc::ptr_eq(&k, &again));
}

#[test]
fn gpu_cache_loads_once_across_threads() {
    let _gpu = shared_gpu();
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let builds = AtomicUsize::new(0);
    let kernels: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    dev.kernel("scale", "threads", Target::Sm90a, || {
                        builds.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, JitError>(scale(Target::Sm90a))
                    })
                    .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    assert!(kernels.iter().all(|k| Arc::ptr_eq(k, &kernels[0])));
}

#[test]
fn gpu_refuses_a_kernel_for_another_target() {
    let _gpu = shared_gpu();
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let err = dev
        .kernel(
            "scale",
            "",
            Target::Sm100a,
            || -> Result<Kernel, JitError> { panic!("a kernel for another target was traced") },
        )
        .err()
        .expect("an sm_100a kernel was accepted by an sm_90 device");
    let msg = err.to_string();
    assert!(
        msg.contains("was built for sm_100a (Blackwell, compute capability 10.0)")
            && msg.contains("build it for sm_90a"),
        "{msg}"
    );
    // And through `load`, with a traced kernel.
    let msg = dev.load(&scale(Target::Sm100a)).err().unwrap().to_string();
    assert!(msg.contains("build it for sm_90a"), "{msg}");
}

#[test]
fn gpu_cluster_launch_with_pdl() {
    let _gpu = shared_gpu();
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let grid = 8u32;
    let len = (grid * THREADS) as usize;
    let out = stream.alloc_zeros::<u32>(len).unwrap();
    let k = dev.load(&cluster_rank(Target::Sm90a, 2)).unwrap();
    let args = [KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(
        addr(&out, stream),
        [len as i64],
    ))];
    // The second launch may start early (PDL); its griddepcontrol.wait still orders its
    // read after the first launch's write, so every element ends as rank * 4 + rank.
    // SAFETY: `out` holds `len` u32 and lives until the read-back.
    unsafe {
        k.launch(stream, Launch::new([grid, 1, 1]), &args).unwrap();
        k.launch(stream, Launch::new([grid, 1, 1]).with_pdl(), &args)
            .unwrap();
    }
    let got = stream.clone_dtoh(&out).unwrap();
    for (i, &g) in got.iter().enumerate() {
        let rank = (i as u32 / THREADS) % 2;
        assert_eq!(g, rank * 5, "element {i}");
    }

    // A grid the cluster does not divide is refused before the driver.
    let err = unsafe { k.launch(stream, Launch::new([3, 1, 1]), &args) }.unwrap_err();
    assert!(err.to_string().contains("does not divide"), "{err}");
}

#[test]
fn gpu_non_portable_cluster_of_16() {
    let _gpu = shared_gpu();
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let len = (16 * THREADS) as usize;
    let out = stream.alloc_zeros::<u32>(len).unwrap();
    let k = dev.load(&cluster_rank(Target::Sm90a, 16)).unwrap();
    let args = [KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(
        addr(&out, stream),
        [len as i64],
    ))];
    // SAFETY: `out` holds `len` u32 and lives until the read-back.
    unsafe { k.launch(stream, Launch::new([16, 1, 1]), &args) }.unwrap();
    let got = stream.clone_dtoh(&out).unwrap();
    for (i, &g) in got.iter().enumerate() {
        assert_eq!(g, i as u32 / THREADS, "element {i}");
    }
}

#[test]
fn gpu_dynamic_smem_above_48k() {
    let _gpu = shared_gpu();
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let out = stream.alloc_zeros::<u32>(THREADS as usize).unwrap();
    let k = dev.load(&smem_exchange(Target::Sm90a)).unwrap();
    assert!(k.info().smem_bytes > 48 * 1024);
    let args = [KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(
        addr(&out, stream),
        [i64::from(THREADS)],
    ))];
    // SAFETY: `out` holds 128 u32 and lives until the read-back.
    unsafe { k.launch(stream, Launch::new([1, 1, 1]), &args) }.unwrap();
    let got = stream.clone_dtoh(&out).unwrap();
    let want: Vec<u32> = (0..THREADS).map(|t| t ^ 1).collect();
    assert_eq!(got, want);
}

#[test]
fn gpu_graph_capture_and_replay() {
    let _gpu = exclusive_gpu();
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    // A stream of this test's own: capture takes in whatever is enqueued on the stream.
    let stream = dev.context().new_stream().unwrap();
    let len = (4 * THREADS) as usize;
    let input: Vec<f32> = (0..len).map(|i| i as f32).collect();
    let inp = stream.clone_htod(&input).unwrap();
    let out = stream.alloc_zeros::<f32>(len).unwrap();
    let k = dev.load(&accumulate(Target::Sm90a)).unwrap();
    // Addresses are taken before capture: cudarc's event bookkeeping must stay outside it.
    let args = [
        KernelArg::Tensor(TensorArg::contiguous::<f32, 1>(
            addr(&out, &stream),
            [len as i64],
        )),
        KernelArg::Tensor(TensorArg::contiguous::<f32, 1>(
            addr(&inp, &stream),
            [len as i64],
        )),
    ];
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    // SAFETY: both buffers hold `len` f32 and outlive every replay (read back below).
    let launched = unsafe {
        k.launch(&stream, Launch::new([4, 1, 1]), &args)
            .and_then(|()| k.launch(&stream, Launch::new([4, 1, 1]).with_pdl(), &args))
    };
    // End the capture even if a launch failed, so the stream is usable again.
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    launched.unwrap();
    let graph = graph.unwrap().expect("the capture recorded nothing");
    // Nothing ran during capture.
    assert_eq!(stream.clone_dtoh(&out).unwrap(), vec![0.0; len]);
    for _ in 0..3 {
        graph.launch().unwrap();
    }
    let got = stream.clone_dtoh(&out).unwrap();
    for (i, &g) in got.iter().enumerate() {
        assert_eq!(g, 6.0 * i as f32, "element {i}");
    }
}

/// `out[t]` of the two-team kernel over `input` (closed form).
fn two_teams_want(input: &[u32], way: TwoTeams) -> Vec<u32> {
    let n = way.team_threads() as usize;
    let tiles_of = |team: u32| (TWO_TEAM_ROUNDS + way.pace.extra_tiles(team)) as usize;
    (0..way.threads() as usize)
        .map(|tid| {
            let t = tid % n;
            (0..2)
                .flat_map(|team| (0..tiles_of(team)).map(move |r| 2 * r + team as usize))
                .map(|tile| input[tile * n + n - 1 - t])
                .sum()
        })
        .collect()
}

const TWO_TEAM_ROUNDS: u32 = 5;

/// Tiles for `TWO_TEAM_ROUNDS` rounds and one more, of the widest teams.
fn two_teams_input() -> Vec<u32> {
    let widest = TWO_TEAM_VARIANTS
        .map(TwoTeams::team_threads)
        .into_iter()
        .max();
    (0..(TWO_TEAM_ROUNDS + 1) * 2 * widest.unwrap_or(0))
        .map(|i| i * 7 + 3)
        .collect()
}

/// The interpreter's race check passes the two-team kernel every way (the GPU test below
/// runs it under compute-sanitizer).
#[test]
fn two_teams_are_race_free_in_the_interpreter() {
    let input = two_teams_input();
    for way in TWO_TEAM_VARIANTS {
        let mut mem = Memory::new();
        let src = mem.alloc_from("src", &input);
        let out = mem.alloc("out", way.threads() as usize * 4);
        let args = [
            Arg::contiguous(out, &[i64::from(way.threads())]),
            Arg::contiguous(src, &[input.len() as i64]),
            Arg::U32(TWO_TEAM_ROUNDS),
        ];
        interp::run(
            &two_teams(way),
            &mut mem,
            &args,
            &interp::Launch::grid([1, 1, 1]),
        )
        .unwrap_or_else(|e| panic!("{way:?}: {e}"));
        assert_eq!(mem.read::<u32>(out), two_teams_want(&input, way), "{way:?}");
    }
}

/// The cut-down two-team kernel, every way, against its closed form: under
/// `compute-sanitizer --tool racecheck` (whose reports name each way's kernel) it says
/// whether the tool orders a team's writes before the CTA barrier and the merge's reads
/// after it, as the streamed decode kernel needs: with and without bulk copies completing
/// on mbarriers, teams that pass their named barriers as often or not, staggered or not,
/// sharing their code or each with its own.
#[test]
fn gpu_two_teams_merge_behind_the_cta_barrier() {
    let _gpu = shared_gpu();
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let stream = dev.stream();
    let input = two_teams_input();
    let src = stream.clone_htod(&input).unwrap();
    for way in TWO_TEAM_VARIANTS {
        let out = stream.alloc_zeros::<u32>(way.threads() as usize).unwrap();
        let k = dev.load(&two_teams(way)).unwrap();
        let args = [
            KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(
                addr(&out, stream),
                [i64::from(way.threads())],
            )),
            KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(
                addr(&src, stream),
                [input.len() as i64],
            )),
            KernelArg::U32(TWO_TEAM_ROUNDS),
        ];
        // SAFETY: `out` holds a u32 a thread and `src` the input; both live until the
        // read-back.
        unsafe { k.launch(stream, Launch::new([1, 1, 1]), &args) }.unwrap();
        let got = stream.clone_dtoh(&out).unwrap();
        assert_eq!(got, two_teams_want(&input, way), "{way:?}");
    }
}

/// Runs here too: every kernel above prints and passes ptxas for sm_90a.
#[test]
fn kernels_used_here_assemble() {
    for k in [
        scale(Target::Sm90a),
        cluster_rank(Target::Sm90a, 2),
        cluster_rank(Target::Sm90a, 16),
        accumulate(Target::Sm90a),
        smem_exchange(Target::Sm90a),
    ]
    .into_iter()
    .chain(TWO_TEAM_VARIANTS.map(two_teams))
    {
        let m = dsl_core::emit::ptx::emit(&k).unwrap();
        if let Err(e) = dsl_core::ptxas::assemble(&m) {
            panic!("{e}\n{}", m.text);
        }
    }
}
