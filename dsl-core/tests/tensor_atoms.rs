//! Copy atoms and register fragments in the interpreter: the ldmatrix/stmatrix atom over
//! swizzled shared tiles (each thread's registers against the ISA fragment, tiled over four
//! warps), its agreement with the wgmma RS A fragment, the tcgen05 ld/st atoms over a TMEM
//! accumulator, and a fragment carried around a runtime loop.

use dsl_core::Target;
use dsl_core::arch::memory::load;
use dsl_core::arch::sm90::wgmma::MmaF16Bf16Rs;
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::sync_threads;
use dsl_core::arch::thread::{thread_idx_x, warp_id};
use dsl_core::interp::{Arg, Launch, Memory, run};
use dsl_core::ir::{Kernel, SourceLoc};
use dsl_core::layout::{Layout, Major, Swizzle, canonical};
use dsl_core::tensor::{self, MatrixAtom, Tcgen05Tiled, TiledMatrix, TmemCopy, WgmmaTiled};
use dsl_core::trace::control::{branch, dyn_range, for_loop};
use dsl_core::trace::{KernelParam, Tensor, Val, smem_alloc, smem_tile, threads, trace_kernel};
use half::bf16;

const T: i64 = 64;

/// The bits of element (r, c) of the input tile.
fn f(r: i64, c: i64) -> u16 {
    (r * T + c + 1) as u16
}

/// The `[64, 64]` input, row-major or (for `.trans`) column-major.
fn input(col_major: bool) -> Vec<bf16> {
    let mut v = vec![bf16::ZERO; (T * T) as usize];
    for r in 0..T {
        for c in 0..T {
            let at = if col_major { r + T * c } else { r * T + c };
            v[at as usize] = bf16::from_bits(f(r, c));
        }
    }
    v
}

/// The input as a global tensor and a 128-byte-swizzled shared copy of it: K-major (rows
/// contiguous along columns) for plain ldmatrix, MN-major for `.trans`.
fn staged(
    trans: bool,
) -> (
    tensor::Tensor<bf16, tensor::Global>,
    tensor::Tensor<bf16, tensor::Shared>,
) {
    let a = Tensor::<bf16, 2>::declare("a");
    let (ga, layout) = if trans {
        (
            a.view([Some(1), None]).assume_aligned(8),
            canonical::mn_major(Swizzle::B128, T, T, 2).unwrap(),
        )
    } else {
        (
            a.view([None, Some(1)]).assume_aligned(8),
            canonical::k_major(Swizzle::B128, T, T, 2).unwrap(),
        )
    };
    let ga = ga.local_tile(&[T, T], (0, 0));
    let sa = smem_tile("a", layout).tensor::<bf16>();
    let (copier, v) = copier(trans);
    let tid = thread_idx_x();
    ga.local_partition(&copier, tid, Some(&v))
        .copy_to(&sa.local_partition(&copier, tid, Some(&v)));
    sync_threads();
    (ga, sa)
}

/// Stores thread `tid`'s registers at `out[tid * regs.len() ..]`.
fn dump(out: &Tensor<u32, 1>, regs: &[Val<u32>]) {
    let tid = thread_idx_x();
    for (j, &v) in regs.iter().enumerate() {
        let i = tid * regs.len() as u32 + j as u32;
        dsl_core::arch::memory::store(out.base() + i.mul_wide(4), v);
    }
}

fn run_kernel(k: &Kernel, a: &[bf16], outs: &[usize]) -> Vec<Vec<u32>> {
    let mut mem = Memory::new();
    let ab = mem.alloc_from("a", a);
    let mut args = vec![Arg::tensor(ab, &[T, T], &[T, 1])];
    let bufs: Vec<_> = outs
        .iter()
        .enumerate()
        .map(|(i, &words)| mem.alloc(&format!("out{i}"), words * 4))
        .collect();
    for (&b, &words) in bufs.iter().zip(outs) {
        args.push(Arg::contiguous(b, &[words as i64]));
    }
    run(k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
    bufs.iter().map(|&b| mem.read::<u32>(b)).collect()
}

/// Thread t's word j of an `.x4` fragment of the `[64, 64]` tile over 4 warps, from the
/// ISA figure: matrix m = j % 4 is rows `+ 8 (m % 2)`, columns `+ 8 (m / 2)` of block
/// `j / 4` along the columns; lane l holds row l / 4, columns 2 (l % 4) and + 1.
fn isa_word(t: i64, j: i64) -> u32 {
    let (w, l, m, cr) = (t / 32, t % 32, j % 4, j / 4);
    let row = 16 * w + 8 * (m % 2) + l / 4;
    let col = 16 * cr + 8 * (m / 2) + 2 * (l % 4);
    f(row, col) as u32 | (f(row, col + 1) as u32) << 16
}

const WORDS: usize = 16;

/// ptxas accepts `k` for its target with no C75xx report (when a ptxas is installed).
fn assembles(k: &Kernel) {
    let ptx = dsl_core::emit::ptx::emit(k).unwrap();
    match dsl_core::ptxas::assemble(&ptx) {
        Ok(_) => {}
        Err(dsl_core::ptxas::PtxasError::NotFound)
            if std::env::var_os("KESTREL_REQUIRE_PTXAS").is_none() =>
        {
            eprintln!("SKIPPED: no ptxas")
        }
        Err(e) => panic!("{e}"),
    }
}

/// The copier of [`staged`]: 128 threads, 8 consecutive elements each along the
/// contiguous mode.
fn copier(trans: bool) -> (Layout, [i64; 2]) {
    if trans {
        ("(8,16):(1,8)".parse().unwrap(), [8, 1])
    } else {
        ("(16,8):(8,1)".parse().unwrap(), [1, 8])
    }
}

fn ldmatrix_atom_kernel(trans: bool) -> Kernel {
    trace_kernel("ldmatrix_atom", Target::Sm90a, || {
        threads(128, 1, 1);
        let (_, sa) = staged(trans);
        let frag_out = Tensor::<u32, 1>::declare("frag");
        let back = Tensor::<bf16, 2>::declare("back");
        let tiled = TiledMatrix::new(MatrixAtom::x4(trans), 4, T, T);
        let thr = tiled.thread(thread_idx_x());
        let frag = thr.load(&sa);
        dump(&frag_out, &frag.words());
        // stmatrix into a tile of another swizzle, copied out to global memory.
        let (sb, gback) = if trans {
            (
                canonical::mn_major(Swizzle::B64, T, T, 2).unwrap(),
                back.view([Some(1), None]),
            )
        } else {
            (
                canonical::k_major(Swizzle::B64, T, T, 2).unwrap(),
                back.view([None, Some(1)]),
            )
        };
        let sb = smem_tile("b", sb).tensor::<bf16>();
        let gback = gback.assume_aligned(8).local_tile(&[T, T], (0, 0));
        thr.store(&frag, &sb);
        sync_threads();
        let (c, v) = copier(trans);
        let tid = thread_idx_x();
        sb.local_partition(&c, tid, Some(&v))
            .copy_to(&gback.local_partition(&c, tid, Some(&v)));
    })
    .unwrap()
}

#[test]
fn the_ldmatrix_atom_gives_every_thread_the_isa_fragment_and_stmatrix_inverts_it() {
    for trans in [false, true] {
        let k = ldmatrix_atom_kernel(trans);
        let a = input(trans);
        let mut mem = Memory::new();
        let ab = mem.alloc_from("a", &a);
        let frag = mem.alloc("frag", 128 * WORDS * 4);
        let back = mem.alloc("back", a.len() * 2);
        let strides = if trans { [1, T] } else { [T, 1] };
        let args = [
            Arg::tensor(ab, &[T, T], &strides),
            Arg::contiguous(frag, &[(128 * WORDS) as i64]),
            Arg::tensor(back, &[T, T], &strides),
        ];
        run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
        let got = mem.read::<u32>(frag);
        for t in 0..128 {
            for j in 0..WORDS as i64 {
                let at = (t * WORDS as i64 + j) as usize;
                assert_eq!(
                    got[at],
                    isa_word(t, j),
                    "trans {trans}: thread {t}, word {j}"
                );
            }
        }
        assert_eq!(
            mem.read::<bf16>(back),
            a,
            "trans {trans}: stmatrix round trip"
        );
        let ptx = dsl_core::emit::ptx::emit(&k).unwrap().text;
        let suffix = if trans { ".trans" } else { "" };
        for op in ["ldmatrix", "stmatrix"] {
            let form = format!("{op}.sync.aligned.m8n8.x4{suffix}.shared.b16");
            assert_eq!(ptx.matches(&form).count(), 4, "one {form} per 16 columns");
        }
        assembles(&k);
    }
}

/// The `.x4` atom over a warpgroup's `[64, K]` A tile gives the wgmma RS A fragment, register
/// for register.
#[test]
fn the_ldmatrix_atom_over_a_warpgroup_is_the_wgmma_rs_a_fragment() {
    let k = trace_kernel("wgmma_a", Target::Sm90a, || {
        threads(128, 1, 1);
        let (_, sa) = staged(false);
        let (by_atom, by_loads) = (
            Tensor::<u32, 1>::declare("atom"),
            Tensor::<u32, 1>::declare("loads"),
        );
        let tid = thread_idx_x();
        let frag = TiledMatrix::new(MatrixAtom::x4(false), 4, T, T)
            .thread(tid)
            .load(&sa);
        let rs = WgmmaTiled::rs(MmaF16Bf16Rs::bf16(64, Major::K), Major::K, 1, T, 64);
        let loaded = rs.thread(tid).partition_a_regs(&sa).load();
        dump(&by_atom, &frag.words());
        dump(&by_loads, &loaded.words());
    })
    .unwrap();
    let got = run_kernel(&k, &input(false), &[128 * WORDS, 128 * WORDS]);
    assert_eq!(got[0], got[1]);
}

#[test]
fn a_tile_whose_rows_are_not_16_contiguous_bytes_is_a_trace_error() {
    let e = trace_kernel("wrong_major", Target::Sm90a, || {
        threads(128, 1, 1);
        let sa =
            smem_tile("a", canonical::mn_major(Swizzle::B128, T, T, 2).unwrap()).tensor::<bf16>();
        TiledMatrix::new(MatrixAtom::x4(false), 4, T, T)
            .thread(thread_idx_x())
            .load(&sa);
    })
    .unwrap_err();
    let d = &e.diagnostics[0];
    assert!(
        d.message
            .contains("a row of the instruction is 8 consecutive elements"),
        "{e}"
    );
    assert!(d.loc.file.ends_with("tensor_atoms.rs"), "{e}");
    let e = trace_kernel("ragged", Target::Sm90a, || {
        threads(128, 1, 1);
        TiledMatrix::new(MatrixAtom::x4(false), 4, 48, 64);
    })
    .unwrap_err();
    assert_eq!(
        e.diagnostics[0].message,
        "ldmatrix/stmatrix .x4 over 4 warp(s) covers tiles of a multiple of 64 rows and 16 \
         columns, got [48, 64]"
    );
}

/// 128 threads write `1000 t + c` into a `[128, 32]` accumulator of tensor memory with the
/// tcgen05.st atom, read it back with the ld atom (through `Tcgen05Tiled::load_c`) and store
/// it through the atom's partition of a global tile.
#[test]
fn the_tmem_atoms_store_and_load_each_thread_row() {
    const N: i64 = 32;
    let k = trace_kernel("tmem_atoms", Target::Sm100a, || {
        threads(128, 1, 1);
        let c = Tensor::<f32, 2>::declare("c");
        let gc = c.view([None, Some(1)]).assume_aligned(4);
        let slot = smem_alloc("slot", 4, 4);
        let (tid, warp) = (thread_idx_x(), warp_id());
        branch(warp.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                tcgen05::alloc(slot.addr(), 32);
            }
            ((), ())
        });
        tcgen05::fence_before_thread_sync();
        sync_threads();
        tcgen05::fence_after_thread_sync();
        let base = TmemAddr::from_base(load::<u32, _>(slot.addr()));
        let tiled = Tcgen05Tiled::ss(
            tcgen05::MmaF16Bf16Ss::bf16(128, N as u32, Major::K, Major::K),
            Major::K,
            Major::K,
            N,
        );
        let d = tiled.partition_fragment_c(base);
        let row = tid.cast::<f32>() * 1000.0f32;
        let values: Vec<Val<f32>> = (0..N).map(|col| row + col as f32).collect();
        let frag = tensor::Tensor::from_values(&values, Layout::contiguous(N).unwrap());
        TmemCopy::x(8).store(&frag, &d, warp);
        let back = tiled.load_c(&d, warp);
        TmemCopy::widest(N)
            .partition(&gc.local_tile(&[128, N], (0, 0)), tid)
            .store(&back);
        tcgen05::fence_before_thread_sync();
        sync_threads();
        branch(warp.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                tcgen05::fence_after_thread_sync();
                tcgen05::dealloc(base, 32);
            }
            ((), ())
        });
    })
    .unwrap();
    let mut mem = Memory::new();
    let c = mem.alloc("c", (128 * N * 4) as usize);
    run(
        &k,
        &mut mem,
        &[Arg::tensor(c, &[128, N], &[N, 1])],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap();
    let got = mem.read::<f32>(c);
    for t in 0..128 {
        for col in 0..N {
            assert_eq!(got[(t * N + col) as usize], (1000 * t + col) as f32);
        }
    }
    let ptx = dsl_core::emit::ptx::emit(&k).unwrap().text;
    assert_eq!(
        ptx.matches("tcgen05.st.sync.aligned.32x32b.x8.b32").count(),
        4
    );
    assert_eq!(
        ptx.matches("tcgen05.ld.sync.aligned.32x32b.x32.b32")
            .count(),
        1
    );
    assembles(&k);
}

/// A register fragment is the state of a runtime loop: `acc += x` for `n` iterations.
#[test]
fn a_register_fragment_accumulates_around_a_runtime_loop() {
    let k = trace_kernel("carry", Target::Sm90a, || {
        threads(32, 1, 1);
        let (n, out) = (
            Tensor::<u32, 1>::declare("n"),
            Tensor::<f32, 2>::declare("out"),
        );
        let gout = out
            .view([None, Some(1)])
            .assume_aligned(4)
            .local_tile(&[32, 4], (0, 0));
        let trips: Val<u32> = load(n.base());
        let tid = thread_idx_x();
        let layout = Layout::contiguous(4).unwrap();
        let zero: Vec<Val<f32>> = (0..4).map(|_| Val::constant(0.0f32)).collect();
        let acc = tensor::Tensor::from_values(&zero, layout.clone());
        let acc = for_loop(
            dyn_range(0u32, trips),
            acc,
            &["acc"],
            SourceLoc::caller(),
            |i, acc| {
                let step = (i + tid).cast::<f32>();
                let next: Vec<Val<f32>> =
                    (0..4).map(|e| acc.get(e) + step * (e + 1) as f32).collect();
                tensor::Tensor::from_values(&next, layout.clone())
            },
        );
        let threads: Layout = "(32,1):(1,0)".parse().unwrap();
        gout.local_partition(&threads, tid, Some(&[1, 4]))
            .store(&acc);
    })
    .unwrap();
    let mut mem = Memory::new();
    let n = mem.alloc_from("n", &[5u32]);
    let out = mem.alloc("out", 32 * 4 * 4);
    run(
        &k,
        &mut mem,
        &[
            Arg::contiguous(n, &[1]),
            Arg::tensor(out, &[32, 4], &[4, 1]),
        ],
        &Launch::grid([1, 1, 1]),
    )
    .unwrap();
    let got = mem.read::<f32>(out);
    for t in 0..32 {
        let sum: i64 = (0..5).map(|i| i + t).sum();
        for e in 0..4 {
            assert_eq!(
                got[(t * 4 + e) as usize],
                (sum * (e + 1)) as f32,
                "thread {t}"
            );
        }
    }
}
