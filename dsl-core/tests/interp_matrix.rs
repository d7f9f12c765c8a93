//! `ldmatrix`, `stmatrix` and `tcgen05.st` in the interpreter: the element -> lane mapping
//! of the PTX ISA's fragment figures (ldmatrix: "thread t holds row t / 4, elements
//! 2 (t % 4) and + 1"; `.trans` the transpose), the per-lane row addresses, and the checks
//! on every access. Each kernel also assembles with ptxas for its target (when installed).

mod common;

use common::{expect, when};
use dsl_core::Target;
use dsl_core::arch::matrix::{ldmatrix, stmatrix};
use dsl_core::arch::memory::{Smem, load, store};
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::sync_threads;
use dsl_core::arch::thread::{lane_id, thread_idx_x, warp_id};
use dsl_core::interp::{Arg, FaultKind, InterpError, Launch, Memory, run};
use dsl_core::ir::Kernel;
use dsl_core::trace::{KernelParam, Tensor, Val, smem_alloc, threads, trace_kernel};

/// Row pitch of the matrices in shared memory: rows are 16 bytes, 16 apart, so a lane's
/// row address is its own and not the end of the previous row.
const PITCH: u32 = 32;

/// The b16 at row `r`, column `c` of matrix `m`.
fn value(m: u32, r: u32, c: u32) -> u16 {
    (0x1000 * (m + 1) + 0x10 * r + c) as u16
}

/// Shared memory of four 8x8 matrices, row `r` of matrix `m` at `(8 m + r) * PITCH`, filled
/// by 32 threads with [`value`] (the padding too, so every byte is written).
fn fill(tile: Smem) {
    let tid = thread_idx_x();
    for k in 0..(4 * 8 * PITCH / 4 / 32) {
        let word = tid + 32 * k;
        let (slot, j) = (word / (PITCH / 4), word % (PITCH / 4));
        let (m, r) = (slot / 8u32, slot % 8u32);
        // value(m, r, 2j) | value(m, r, 2j + 1) << 16, in the kernel.
        let lo = (m + 1u32) * 0x1000u32 + r * 0x10u32 + j * 2u32;
        store(tile + word * 4u32, lo + ((lo + 1u32) << 16u32));
    }
}

fn row_address(tile: Smem) -> Smem {
    let lane = lane_id();
    tile + (lane / 8u32 * 8u32 + lane % 8u32) * PITCH
}

fn ldmatrix_kernel(matrices: usize, trans: bool) -> Kernel {
    trace_kernel("ldmatrix", Target::Sm90a, || {
        threads(32, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let tile = smem_alloc("tile", 4 * 8 * PITCH, 128).addr();
        fill(tile);
        sync_threads();
        let regs = ldmatrix(row_address(tile), matrices, trans);
        for (m, v) in regs.iter().enumerate() {
            let i = thread_idx_x() * matrices as u32 + m as u32;
            store(out.base() + i.mul_wide(4), *v);
        }
    })
    .unwrap()
}

fn run_words(k: &Kernel, words: usize) -> Result<Vec<u32>, InterpError> {
    let mut mem = Memory::new();
    let out = mem.alloc("out", words * 4);
    run(
        k,
        &mut mem,
        &[Arg::contiguous(out, &[words as i64])],
        &Launch::grid([1, 1, 1]),
    )?;
    Ok(mem.read::<u32>(out))
}

/// The register of lane `t` for matrix `m` per the ISA figure.
fn fragment(m: u32, t: u32, trans: bool) -> u32 {
    let (row, col) = (t / 4, 2 * (t % 4));
    let at = |c: u32| {
        if trans {
            value(m, c, row)
        } else {
            value(m, row, c)
        }
    };
    at(col) as u32 | (at(col + 1) as u32) << 16
}

fn assembles(k: &Kernel) {
    let ptx = dsl_core::emit::ptx::emit(k).unwrap();
    match dsl_core::ptxas::assemble(&ptx) {
        Ok(_) => {}
        Err(dsl_core::ptxas::PtxasError::NotFound)
            if std::env::var_os("KESTREL_REQUIRE_PTXAS").is_none() =>
        {
            eprintln!("SKIPPED: no ptxas")
        }
        Err(e) => panic!("{e}\n{}", ptx.text),
    }
}

#[test]
fn ldmatrix_gives_each_lane_the_isa_fragment() {
    for matrices in [1, 2, 4] {
        for trans in [false, true] {
            let k = ldmatrix_kernel(matrices, trans);
            let got = run_words(&k, 32 * matrices).unwrap();
            for t in 0..32u32 {
                for m in 0..matrices as u32 {
                    assert_eq!(
                        got[(t * matrices as u32 + m) as usize],
                        fragment(m, t, trans),
                        "x{matrices} trans {trans}: lane {t}, register {m}"
                    );
                }
            }
            let ptx = dsl_core::emit::ptx::emit(&k).unwrap().text;
            let suffix = if trans { ".trans" } else { "" };
            assert!(
                ptx.contains(&format!(
                    "ldmatrix.sync.aligned.m8n8.x{matrices}{suffix}.shared.b16 {{"
                )),
                "{ptx}"
            );
            assembles(&k);
        }
    }
}

/// stmatrix of the figure's fragment writes the matrices back where they were.
fn stmatrix_kernel(matrices: usize, trans: bool) -> Kernel {
    trace_kernel("stmatrix", Target::Sm90a, || {
        threads(32, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let tile = smem_alloc("tile", 4 * 8 * PITCH, 128).addr();
        // The padding is written too, so the dump below reads only written bytes.
        fill(tile);
        sync_threads();
        let t = lane_id();
        let (row, col) = (t / 4u32, t % 4u32 * 2u32);
        let regs: Vec<Val<u32>> = (0..matrices as u32)
            .map(|m| {
                // The fragment of matrix m holding 0x8000 + value(m, ..): lane t, register m.
                let at = |c: Val<u32>| {
                    let (r, c) = if trans { (c, row) } else { (row, c) };
                    (r * 0x10u32 + c) + (0x1000 * (m + 1) + 0x8000)
                };
                at(col) + (at(col + 1u32) << 16u32)
            })
            .collect();
        stmatrix(row_address(tile), &regs, trans);
        sync_threads();
        for k in 0..(4 * 8 * PITCH / 4 / 32) {
            let word = thread_idx_x() + 32 * k;
            let v: Val<u32> = load(tile + word * 4u32);
            store(out.base() + word.mul_wide(4), v);
        }
    })
    .unwrap()
}

#[test]
fn stmatrix_writes_each_lane_fragment_where_the_isa_figure_puts_it() {
    for matrices in [1, 2, 4] {
        for trans in [false, true] {
            let k = stmatrix_kernel(matrices, trans);
            let words = (4 * 8 * PITCH / 4) as usize;
            let got = run_words(&k, words).unwrap();
            let halves: Vec<u16> = got
                .iter()
                .flat_map(|w| [*w as u16, (*w >> 16) as u16])
                .collect();
            for m in 0..4u32 {
                for r in 0..8u32 {
                    for c in 0..8u32 {
                        let at = ((8 * m + r) * PITCH / 2 + c) as usize;
                        let want = if m < matrices as u32 {
                            0x8000 + value(m, r, c)
                        } else {
                            value(m, r, c)
                        };
                        assert_eq!(
                            halves[at], want,
                            "x{matrices} trans {trans}: matrix {m} ({r}, {c})"
                        );
                    }
                }
            }
            assert!(
                dsl_core::emit::ptx::emit(&k)
                    .unwrap()
                    .text
                    .contains(&format!(
                        "stmatrix.sync.aligned.m8n8.x{matrices}{}.shared.b16 [",
                        if trans { ".trans" } else { "" }
                    ))
            );
            assembles(&k);
        }
    }
}

fn faulting(body: impl FnOnce(Smem)) -> InterpError {
    let k = trace_kernel("matrix_fault", Target::Sm90a, || {
        threads(32, 1, 1);
        let _out = Tensor::<u32, 1>::declare("out");
        let tile = smem_alloc("tile", 4 * 8 * PITCH, 128).addr();
        body(tile);
    })
    .unwrap();
    run_words(&k, 64).unwrap_err()
}

#[test]
fn matrix_rows_are_checked() {
    // A row address 8 bytes into a row.
    let e = faulting(|tile| {
        fill(tile);
        sync_threads();
        ldmatrix(row_address(tile) + 8, 1, false);
    });
    expect(
        &e,
        FaultKind::Misaligned,
        &["`ldmatrix`", "16-byte ldmatrix row"],
    );
    // Rows nothing wrote.
    let e = faulting(|tile| {
        ldmatrix(row_address(tile), 4, false);
    });
    expect(
        &e,
        FaultKind::Uninitialized,
        &["`ldmatrix`", "never written"],
    );
    // Past the end of shared memory.
    let e = faulting(|tile| {
        stmatrix(
            row_address(tile) + 4 * 8 * PITCH as i64,
            &[lane_id()],
            false,
        );
    });
    expect(
        &e,
        FaultKind::OutOfBounds,
        &["`stmatrix`", "outside the CTA's shared memory"],
    );
    // Half a warp.
    let e = faulting(|tile| {
        fill(tile);
        sync_threads();
        when(lane_id().lt(16u32), || {
            ldmatrix(row_address(tile), 1, false);
        });
    });
    expect(&e, FaultKind::Collective, &["ldmatrix.sync.aligned"]);
}

#[test]
fn ldmatrix_counts_are_trace_errors() {
    let e = trace_kernel("x3", Target::Sm90a, || {
        threads(32, 1, 1);
        let tile = smem_alloc("tile", 512, 128).addr();
        ldmatrix(tile, 3, false);
    })
    .unwrap_err();
    assert_eq!(
        e.diagnostics[0].message,
        "ldmatrix moves 1, 2 or 4 8x8 matrices (.x1, .x2, .x4), one b32 register each, not 3: \
         split it into such groups"
    );
    assert!(e.diagnostics[0].loc.file.ends_with("interp_matrix.rs"));
}

/// 128 threads store `value` into tensor memory with tcgen05.st (warp w into its quadrant),
/// load it back with tcgen05.ld and write it out: thread t, column c is `1000 t + c`.
fn tmem_round_trip(columns: usize, wait: bool) -> Kernel {
    trace_kernel("tmem_st", Target::Sm100a, || {
        threads(128, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let slot = smem_alloc("slot", 4, 4);
        when(warp_id().eq(0u32), || tcgen05::alloc(slot.addr(), 32));
        tcgen05::fence_before_thread_sync();
        sync_threads();
        tcgen05::fence_after_thread_sync();
        let t = TmemAddr::from_base(load::<u32, _>(slot.addr()));
        let tid = thread_idx_x();
        let values: Vec<Val<u32>> = (0..columns as u32).map(|c| tid * 1000u32 + c).collect();
        let at = t.column(4).warp_quadrant(warp_id());
        tcgen05::st_32x32b(at, &values);
        if wait {
            tcgen05::wait_st();
        }
        let back = tcgen05::ld_32x32b(at, columns);
        tcgen05::wait_ld();
        for (c, v) in back.iter().enumerate() {
            let i = tid * columns as u32 + c as u32;
            store(out.base() + i.mul_wide(4), *v);
        }
        tcgen05::fence_before_thread_sync();
        sync_threads();
        when(warp_id().eq(0u32), || tcgen05::dealloc(t, 32));
    })
    .unwrap()
}

#[test]
fn tcgen05_st_writes_the_lanes_of_the_warp_quadrant() {
    for columns in [1, 2, 4, 8, 16] {
        let k = tmem_round_trip(columns, true);
        let got = run_words(&k, 128 * columns).unwrap();
        for t in 0..128u32 {
            for c in 0..columns as u32 {
                assert_eq!(got[(t * columns as u32 + c) as usize], 1000 * t + c);
            }
        }
        let ptx = dsl_core::emit::ptx::emit(&k).unwrap().text;
        assert!(
            ptx.contains(&format!("tcgen05.st.sync.aligned.32x32b.x{columns}.b32 [")),
            "{ptx}"
        );
        assert!(ptx.contains("tcgen05.wait::st.sync.aligned;"));
        assembles(&k);
    }
}

#[test]
fn tcgen05_st_checks_its_width_wait_and_quadrant() {
    let e = run_words(&tmem_round_trip(4, false), 512).unwrap_err();
    expect(
        &e,
        FaultKind::Tmem,
        &["`tcgen05.ld.32x32b`", "tcgen05.st at", "tcgen05.wait::st"],
    );
    let e = trace_kernel("x3", Target::Sm100a, || {
        threads(32, 1, 1);
        tcgen05::st_32x32b(lane_id(), &[lane_id(), lane_id(), lane_id()]);
    })
    .unwrap_err();
    assert_eq!(
        e.diagnostics[0].message,
        "tcgen05.st.32x32b stores 1, 2, 4, ... or 128 columns, not 3"
    );
    let e = trace_kernel("on_hopper", Target::Sm90a, || {
        threads(32, 1, 1);
        tcgen05::wait_st();
    })
    .unwrap_err();
    assert!(
        e.diagnostics[0]
            .message
            .starts_with("`tcgen05.wait::st` is not available on sm_90a"),
        "{e}"
    );
}
