//! tcgen05.mma and wgmma in the interpreter against an f64 matrix product, for every
//! canonical shared-memory layout (K-major and MN-major; no swizzle, 32B, 64B, 128B), with
//! descriptor bits written here by hand from the PTX ISA tables; and proof that a wrong
//! descriptor field gives a wrong answer.
//!
//! The shared-memory images are built by this file in the "tile" form kernels use (row r of
//! a swizzled K-major tile is R bytes at r * R with 16-byte chunk c stored at chunk
//! `c ^ f(r)`, ptx-reference.md §5), not through the interpreter's descriptor walk.

use dsl_core::Target;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{load, load_vec, store, store_vec};
use dsl_core::arch::sm90::wgmma;
use dsl_core::arch::sm100::tcgen05::{self, TmemAddr};
use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
use dsl_core::arch::thread::{lane_id, thread_idx_x, warp_id};
use dsl_core::interp::FaultKind;
use dsl_core::interp::{
    Arg, InterpError, Launch, Memory, Options, RunStats, SnapshotData, SnapshotRequest,
    SnapshotWhat, StagePoint, run, run_with,
};
use dsl_core::ir::SourceLoc;
use dsl_core::trace::control::branch;
use dsl_core::trace::{KernelParam, Tensor, Val, smem_alloc, stage, threads, trace_kernel};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Major {
    K,
    Mn,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sw {
    None,
    B32,
    B64,
    B128,
}

impl Sw {
    const ALL: [Sw; 4] = [Sw::None, Sw::B32, Sw::B64, Sw::B128];

    fn row_bytes(self) -> u32 {
        match self {
            Sw::None => 16,
            Sw::B32 => 32,
            Sw::B64 => 64,
            Sw::B128 => 128,
        }
    }

    /// The chunk XOR of 128-byte-pattern row `r` (ptx-reference.md §5: SW128 chunk ^= r % 8
    /// for 128 B rows, SW64 chunk ^= (r >> 1) & 3 for 64 B rows, SW32 chunk ^= (r >> 2) & 1).
    fn xor(self, r: u32) -> u32 {
        match self {
            Sw::None => 0,
            Sw::B32 => (r >> 2) & 1,
            Sw::B64 => (r >> 1) & 3,
            Sw::B128 => r % 8,
        }
    }

    /// SM100 layout type, PTX Table 40 bits 61-63.
    fn sm100(self) -> u64 {
        match self {
            Sw::None => 0,
            Sw::B128 => 2,
            Sw::B64 => 4,
            Sw::B32 => 6,
        }
    }

    /// SM90 layout type, bits 62-63 (PTX §9.7.15.5.1.2.2).
    fn sm90(self) -> u64 {
        match self {
            Sw::None => 0,
            Sw::B128 => 1,
            Sw::B64 => 2,
            Sw::B32 => 3,
        }
    }
}

/// An operand tile of `rows` (M or N) x `k` bf16 in shared memory, at a 1024-aligned `base`
/// (bytes from the start of the image).
#[derive(Clone, Copy, Debug)]
struct Tile {
    major: Major,
    sw: Sw,
    rows: u32,
    k: u32,
    base: u32,
}

impl Tile {
    /// Byte offset of element (r, kk) in the image.
    fn place(&self, r: u32, kk: u32) -> u32 {
        let rb = self.sw.row_bytes();
        let e = rb / 2; // elements per swizzle row
        self.base
            + match (self.major, self.sw) {
                // Core matrices of 8 rows x 16 B; K-adjacent ones a whole M extent apart.
                (Major::K, Sw::None) => (kk / 8) * self.rows * 16 + r * 16 + (kk % 8) * 2,
                // Rows of R bytes; K beyond one row continues in the next atom column,
                // after all rows.
                (Major::K, sw) => {
                    let (col, ke) = (kk / e, kk % e);
                    col * self.rows * rb + r * rb + (((ke / 8) ^ sw.xor(r)) * 16) + (ke % 8) * 2
                }
                // Core matrices of 8 k-rows x 16 B (8 MN elements); MN-adjacent ones 128 B
                // apart, K groups of 8 a whole MN extent apart.
                (Major::Mn, Sw::None) => {
                    (kk / 8) * self.rows * 16 + (r / 8) * 128 + (kk % 8) * 16 + (r % 8) * 2
                }
                // Atoms of 8 k-rows x R bytes; MN atoms side by side, then K groups.
                (Major::Mn, sw) => {
                    let (col, me) = (r / e, r % e);
                    let (kg, kr) = (kk / 8, kk % 8);
                    let atoms = self.rows / e;
                    kg * atoms * 8 * rb
                        + col * 8 * rb
                        + kr * rb
                        + (((me / 8) ^ sw.xor(kr)) * 16)
                        + (me % 8) * 2
                }
            }
    }

    /// Bytes the tile spans (a swizzled K-major row is a full R bytes even when K uses
    /// less of it).
    fn bytes(&self) -> u32 {
        match (self.major, self.sw) {
            (Major::K, Sw::None) | (Major::Mn, _) => self.rows * self.k * 2,
            (Major::K, sw) => {
                let rb = sw.row_bytes();
                self.k.div_ceil(rb / 2) * self.rows * rb
            }
        }
    }

    /// (start offset, LBO, SBO) of K step `j` (16 elements), per the meaning PTX
    /// §9.7.16.3 gives LBO and SBO for each major-ness and swizzle.
    fn desc_fields(&self, j: u32) -> (u32, u32, u32) {
        let rb = self.sw.row_bytes();
        let e = rb / 2;
        let kk = 16 * j;
        match (self.major, self.sw) {
            // LBO: between K-adjacent core matrices; SBO: between 8-row groups.
            (Major::K, Sw::None) => (self.base + (kk / 8) * self.rows * 16, self.rows * 16, 128),
            // LBO unused ("assumed 1", 16 B); SBO: between 8-row groups (8 rows of R bytes).
            // A K step inside a row moves the start by 32 B.
            (Major::K, _) => (
                self.base + (kk / e) * self.rows * rb + (kk % e) * 2,
                16,
                8 * rb,
            ),
            // Interleaved MN-major: LBO between K groups of 8, SBO between MN core matrices.
            (Major::Mn, Sw::None) => (self.base + (kk / 8) * self.rows * 16, self.rows * 16, 128),
            // Swizzled MN-major: LBO between MN atom columns, SBO between K groups of 8.
            (Major::Mn, _) => {
                let sbo = (self.rows / e) * 8 * rb;
                (self.base + (kk / 8) * sbo, 8 * rb, sbo)
            }
        }
    }

    /// SM100 descriptor (Table 40) with a start relative to the image; the kernel adds the
    /// image's shared address >> 4.
    fn sm100(&self, j: u32) -> u64 {
        let (start, lbo, sbo) = self.desc_fields(j);
        (start as u64 >> 4)
            | ((lbo as u64 >> 4) << 16)
            | ((sbo as u64 >> 4) << 32)
            | (1 << 46)
            | (self.sw.sm100() << 61)
    }

    fn sm90(&self, j: u32) -> u64 {
        let (start, lbo, sbo) = self.desc_fields(j);
        (start as u64 >> 4)
            | ((lbo as u64 >> 4) << 16)
            | ((sbo as u64 >> 4) << 32)
            | (self.sw.sm90() << 62)
    }
}

/// The instruction descriptor for bf16 x bf16 -> f32 (PTX Table 42): D format F32 at bits
/// 4-5, A and B BF16 at 7-9 and 10-12, majors at 15/16, N >> 3 at 17-22, M >> 4 at 24-28.
fn idesc(m: u32, n: u32, a: Major, b: Major) -> u32 {
    (1 << 4)
        | (1 << 7)
        | (1 << 10)
        | ((a == Major::Mn) as u32) << 15
        | ((b == Major::Mn) as u32) << 16
        | (n >> 3) << 17
        | (m >> 4) << 24
}

/// A and B as 16-bit codes (bf16, or f16 when asked) with their exact values.
struct Problem {
    m: u32,
    n: u32,
    k: u32,
    a: Vec<(u16, f64)>,
    b: Vec<(u16, f64)>,
}

impl Problem {
    fn new(m: u32, n: u32, k: u32, seed: u32) -> Self {
        Self::with_format(m, n, k, seed, false)
    }

    fn with_format(m: u32, n: u32, k: u32, seed: u32, f16: bool) -> Self {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let v = ((x >> 8) % 2001) as f32 / 500.0 - 2.0;
            if f16 {
                let h = half::f16::from_f32(v);
                (h.to_bits(), h.to_f64())
            } else {
                let h = half::bf16::from_f32(v);
                (h.to_bits(), h.to_f64())
            }
        };
        let a = (0..m * k).map(|_| next()).collect();
        let b = (0..n * k).map(|_| next()).collect();
        Problem { m, n, k, a, b }
    }

    fn reference(&self) -> Vec<f64> {
        let (m, n, k) = (self.m as usize, self.n as usize, self.k as usize);
        let mut d = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                d[i * n + j] = (0..k)
                    .map(|kk| self.a[i * k + kk].1 * self.b[j * k + kk].1)
                    .sum();
            }
        }
        d
    }

    /// The shared-memory image holding A and B in the given layouts.
    fn image(&self, ta: &Tile, tb: &Tile) -> Vec<u8> {
        let len = (tb.base + tb.bytes()).max(ta.base + ta.bytes());
        let mut img = vec![0u8; len as usize];
        for (t, vals) in [(ta, &self.a), (tb, &self.b)] {
            for r in 0..t.rows {
                for kk in 0..t.k {
                    let at = t.place(r, kk) as usize;
                    let v = vals[(r * self.k + kk) as usize].0.to_le_bytes();
                    img[at..at + 2].copy_from_slice(&v);
                }
            }
        }
        img
    }
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 1e-5 * (w.abs() + 1.0),
            "{what}: element {i} is {g}, want {w}"
        );
    }
}

/// How far `got` is from `want`: the largest absolute error.
fn max_err(got: &[f32], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| (*g as f64 - w).abs())
        .fold(0.0, f64::max)
}

/// Copies the image into shared memory (16 bytes per thread per step), then makes it visible
/// to the async proxy.
fn stage_image(img: Tensor<u8, 1>, smem: dsl_core::arch::memory::Smem, bytes: u32) {
    let tid = thread_idx_x();
    for c in 0..bytes.div_ceil(16 * 128) {
        let chunk = tid + c * 128;
        branch(
            chunk.lt(bytes / 16),
            (),
            &[],
            SourceLoc::caller(),
            |t, ()| {
                if t {
                    let v: [Val<u32>; 4] = load_vec(img.base() + (chunk * 16u32).cast::<u64>());
                    store_vec(smem + chunk * 16u32, v);
                }
                ((), ())
            },
        );
    }
    fence_proxy_async_shared();
    sync_threads();
}

/// Runs D[M, N] = A . B^T with tcgen05.mma (K / 16 steps) and returns D row-major.
fn tcgen05_mma(
    p: &Problem,
    ta: &Tile,
    tb: &Tile,
    descs: &[u64],
    id: u32,
) -> Result<Vec<f32>, InterpError> {
    tcgen05_mma_with(p, ta, tb, descs, id, &Options::default()).map(|(d, _)| d)
}

fn tcgen05_mma_with(
    p: &Problem,
    ta: &Tile,
    tb: &Tile,
    descs: &[u64],
    id: u32,
    opts: &Options,
) -> Result<(Vec<f32>, RunStats), InterpError> {
    let img = p.image(ta, tb);
    let (m, n, steps) = (p.m, p.n, descs.len() as u32 / 2);
    let img_len = img.len() as u32;
    let kernel = trace_kernel("tc_mma", Target::Sm100a, || {
        threads(128, 1, 1);
        let image = Tensor::<u8, 1>::declare("image");
        let out = Tensor::<f32, 1>::declare("out");
        let desc = Tensor::<i64, 1>::declare("descs");
        let idesc = Val::<u32>::declare("idesc");
        let tile = smem_alloc("tile", img_len.next_multiple_of(1024), 1024);
        let bar = smem_alloc("bar", 8, 8);
        let slot = smem_alloc("tmem_slot", 4, 4);
        let mbar = Mbarrier::at(bar.addr());
        let tid = thread_idx_x();
        let warp = warp_id();
        stage_image(image, tile.addr(), img_len);
        branch(warp.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                tcgen05::alloc(slot.addr(), 128);
                tcgen05::relinquish_alloc_permit();
            }
            ((), ())
        });
        branch(tid.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                mbar.init(1u32);
                init_fence();
            }
            ((), ())
        });
        tcgen05::fence_before_thread_sync();
        sync_threads();
        tcgen05::fence_after_thread_sync();
        let base: Val<u32> = load(slot.addr());
        let d = TmemAddr::from_base(base);
        let start = (tile.addr().value() >> 4u32).cast::<u64>();
        stage("mma");
        branch(tid.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                for j in 0..steps {
                    let a: Val<u64> = load(desc.base() + (16 * j) as i64);
                    let b: Val<u64> = load(desc.base() + (16 * j + 8) as i64);
                    tcgen05::mma_f16(d, a + start, b + start, idesc, j > 0);
                }
                tcgen05::commit(mbar);
            }
            ((), ())
        });
        mbar.wait(0u32);
        tcgen05::fence_after_thread_sync();
        stage("epilogue");
        let lane = (warp & 3u32) * 32u32 + lane_id();
        for c0 in (0..n).step_by(32) {
            let v = tcgen05::ld_32x32b(d.column(c0).warp_quadrant(warp), 32);
            tcgen05::wait_ld();
            // An M = 64 result fills lanes 0-15 of each quadrant; the others hold nothing.
            let valid = if m == 64 {
                lane_id().lt(16u32)
            } else {
                Val::constant(true)
            };
            branch(valid, (), &[], SourceLoc::caller(), |t, ()| {
                if t {
                    for (c, x) in v.iter().enumerate() {
                        let at = (lane * n + c0 + c as u32).mul_wide(4);
                        store(out.base() + at, *x);
                    }
                }
                ((), ())
            });
        }
        tcgen05::fence_before_thread_sync();
        sync_threads();
        branch(warp.eq(0u32), (), &[], SourceLoc::caller(), |t, ()| {
            if t {
                tcgen05::fence_after_thread_sync();
                tcgen05::dealloc(d, 128);
            }
            ((), ())
        });
    })
    .unwrap();
    let mut mem = Memory::new();
    let image = mem.alloc_from("image", &img);
    let out = mem.alloc("out", 128 * n as usize * 4);
    let descs = mem.alloc_from("descs", descs);
    let args = [
        Arg::contiguous(image, &[img.len() as i64]),
        Arg::contiguous(out, &[128 * n as i64]),
        Arg::contiguous(descs, &[descs_len(&mem, descs)]),
        Arg::U32(id),
    ];
    let stats = run_with(&kernel, &mut mem, &args, &Launch::grid([1, 1, 1]), opts)?;
    let lanes = mem.read::<f32>(out);
    // D row m is TMEM lane m (M = 128) or lane 32 * (m / 16) + m % 16 (M = 64).
    let d = (0..m)
        .flat_map(|r| {
            let lane = if m == 128 { r } else { 32 * (r / 16) + r % 16 };
            lanes[(lane * n) as usize..((lane + 1) * n) as usize].to_vec()
        })
        .collect();
    Ok((d, stats))
}

fn descs_len(mem: &Memory, id: dsl_core::interp::BufferId) -> i64 {
    mem.len(id) as i64 / 8
}

fn tiles(p: &Problem, (am, asw): (Major, Sw), (bm, bsw): (Major, Sw)) -> (Tile, Tile) {
    let ta = Tile {
        major: am,
        sw: asw,
        rows: p.m,
        k: p.k,
        base: 0,
    };
    let tb = Tile {
        major: bm,
        sw: bsw,
        rows: p.n,
        k: p.k,
        base: ta.bytes().next_multiple_of(1024),
    };
    (ta, tb)
}

fn sm100_descs(ta: &Tile, tb: &Tile, steps: u32) -> Vec<u64> {
    (0..steps)
        .flat_map(|j| [ta.sm100(j), tb.sm100(j)])
        .collect()
}

#[test]
fn tcgen05_mma_matches_f64_for_every_canonical_layout() {
    let p = Problem::new(128, 64, 64, 7);
    let want = p.reference();
    for major in [
        (Major::K, Major::K),
        (Major::Mn, Major::K),
        (Major::K, Major::Mn),
        (Major::Mn, Major::Mn),
    ] {
        for sw in Sw::ALL {
            let (ta, tb) = tiles(&p, (major.0, sw), (major.1, sw));
            let got = tcgen05_mma(
                &p,
                &ta,
                &tb,
                &sm100_descs(&ta, &tb, 4),
                idesc(128, 64, major.0, major.1),
            )
            .unwrap_or_else(|e| panic!("{major:?} {sw:?}: {e}"));
            assert_close(
                &got,
                &want,
                &format!("tcgen05 A {:?} B {:?} {sw:?}", major.0, major.1),
            );
        }
    }
}

#[test]
fn tcgen05_mma_m64_and_mixed_layouts() {
    let p = Problem::new(64, 32, 32, 11);
    let (ta, tb) = tiles(&p, (Major::K, Sw::B128), (Major::Mn, Sw::B64));
    let got = tcgen05_mma(
        &p,
        &ta,
        &tb,
        &sm100_descs(&ta, &tb, 2),
        idesc(64, 32, Major::K, Major::Mn),
    )
    .unwrap();
    assert_close(
        &got,
        &p.reference(),
        "M = 64, A K-major SW128, B N-major SW64",
    );
    let p = Problem::new(128, 32, 16, 13);
    let (ta, tb) = tiles(&p, (Major::Mn, Sw::B32), (Major::K, Sw::None));
    let got = tcgen05_mma(
        &p,
        &ta,
        &tb,
        &sm100_descs(&ta, &tb, 1),
        idesc(128, 32, Major::Mn, Major::K),
    )
    .unwrap();
    assert_close(
        &got,
        &p.reference(),
        "A M-major SW32, B K-major interleaved",
    );
    // Negate A (bit 13) and B (bit 14) of the instruction descriptor.
    let id = idesc(128, 32, Major::Mn, Major::K);
    let descs = sm100_descs(&ta, &tb, 1);
    let negated: Vec<f64> = p.reference().iter().map(|v| -v).collect();
    let got = tcgen05_mma(&p, &ta, &tb, &descs, id | 1 << 13).unwrap();
    assert_close(&got, &negated, "-A . B^T");
    let got = tcgen05_mma(&p, &ta, &tb, &descs, id | 1 << 13 | 1 << 14).unwrap();
    assert_close(&got, &p.reference(), "-A . -B^T");
}

/// A change to the (A, B) descriptor pair.
type Edit = Box<dyn Fn(&mut [u64])>;

#[test]
fn a_wrong_descriptor_gives_a_wrong_answer() {
    // N = 128: B spans two 64-element atom columns, so its LBO matters.
    let p = Problem::new(128, 128, 64, 5);
    let want = p.reference();
    let (ta, tb) = tiles(&p, (Major::K, Sw::B128), (Major::Mn, Sw::B128));
    let id = idesc(128, 128, Major::K, Major::Mn);
    let good = sm100_descs(&ta, &tb, 4);
    assert_close(
        &tcgen05_mma(&p, &ta, &tb, &good, id).unwrap(),
        &want,
        "the right descriptors",
    );
    let variants: [(&str, Edit, u32); 6] = [
        ("A SBO 16 B too large", Box::new(|d| d[0] += 1 << 32), id),
        ("B SBO 16 B too small", Box::new(|d| d[1] -= 1 << 32), id),
        (
            "A with 64B instead of 128B swizzle",
            Box::new(|d| d[0] = d[0] & !(7 << 61) | 4 << 61),
            id,
        ),
        ("B LBO 16 B too large", Box::new(|d| d[1] += 1 << 16), id),
        ("A start 32 B off", Box::new(|d| d[0] += 2), id),
        (
            "A declared M-major",
            Box::new(|_| {}),
            idesc(128, 128, Major::Mn, Major::Mn),
        ),
    ];
    for (what, edit, id) in variants {
        let mut d = good.clone();
        edit(&mut d[..2]);
        // The image covers every byte these variants read, so each runs to the end with
        // wrong numbers, as the hardware would.
        let got = tcgen05_mma(&p, &ta, &tb, &d, id).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            max_err(&got, &want) > 0.1,
            "{what}: the result is still right"
        );
    }
}

#[test]
fn illegal_descriptor_fields_are_reported() {
    let p = Problem::new(128, 64, 16, 3);
    let (ta, tb) = tiles(&p, (Major::K, Sw::B128), (Major::K, Sw::B128));
    let good = sm100_descs(&ta, &tb, 1);
    let id = idesc(128, 64, Major::K, Major::K);
    let cases: [(&str, [u64; 2], u32, &str); 6] = [
        (
            "an SM90 descriptor",
            [good[0] & !(1 << 46), good[1]],
            id,
            "bits 46-48",
        ),
        ("layout 3", [good[0] | 3 << 61, good[1]], id, "layout type"),
        (
            "base offset",
            [good[0] | 1 << 49, good[1]],
            id,
            "base offset",
        ),
        (
            "M = 96",
            good.clone().try_into().unwrap(),
            (id & !(0x1f << 24)) | 6 << 24,
            "M = 96",
        ),
        (
            "N = 0",
            good.clone().try_into().unwrap(),
            id & !(0x3f << 17),
            "N = 0",
        ),
        (
            "F16 A with BF16 B",
            good.clone().try_into().unwrap(),
            id & !(1 << 7),
            "kind::f16 takes one input type",
        ),
    ];
    for (what, d, id, needle) in cases {
        let e = tcgen05_mma(&p, &ta, &tb, &d, id).unwrap_err();
        let f = e.fault().unwrap_or_else(|| panic!("{what}: {e}"));
        assert_eq!(f.kind, FaultKind::Descriptor, "{what}: {f}");
        assert!(f.message.contains(needle), "{what}: {f}");
        assert_eq!(f.site.op, "tcgen05.mma");
    }
}

/// Runs D[64, N] = A . B^T with wgmma (K / 16 steps), D row-major.
fn wgmma_mma(p: &Problem, ta: &Tile, tb: &Tile, trans: (u8, u8)) -> Result<Vec<f32>, InterpError> {
    let img = p.image(ta, tb);
    let (n, steps) = (p.n, p.k / 16);
    let img_len = img.len() as u32;
    let kernel = trace_kernel("wg_mma", Target::Sm90a, || {
        threads(128, 1, 1);
        let image = Tensor::<u8, 1>::declare("image");
        let out = Tensor::<f32, 1>::declare("out");
        let desc = Tensor::<i64, 1>::declare("descs");
        let tile = smem_alloc("tile", img_len.next_multiple_of(1024), 1024);
        stage_image(image, tile.addr(), img_len);
        let start = (tile.addr().value() >> 4u32).cast::<u64>();
        let acc = wgmma::Accumulator::zeros(n);
        wgmma::fence();
        for j in 0..steps {
            let a: Val<u64> = load(desc.base() + (16 * j) as i64);
            let b: Val<u64> = load(desc.base() + (16 * j + 8) as i64);
            wgmma::mma_async(&acc, a + start, b + start, j > 0, trans.0, trans.1);
        }
        wgmma::commit_group();
        wgmma::wait_group(0);
        let (w, l) = (warp_id(), lane_id());
        for i in 0..acc.len() as u32 {
            // The m64nN f32 fragment (ptx-reference.md §10).
            let row = w * 16u32 + l / 4u32 + 8 * ((i >> 1) & 1);
            let col = (l % 4u32) * 2u32 + 8 * (i >> 2) + (i & 1);
            store(
                out.base() + (row * n + col).mul_wide(4),
                acc.get(i as usize),
            );
        }
    })
    .unwrap();
    let descs: Vec<u64> = (0..steps).flat_map(|j| [ta.sm90(j), tb.sm90(j)]).collect();
    let mut mem = Memory::new();
    let image = mem.alloc_from("image", &img);
    let out = mem.alloc("out", 64 * n as usize * 4);
    let descs = mem.alloc_from("descs", &descs);
    let args = [
        Arg::contiguous(image, &[img.len() as i64]),
        Arg::contiguous(out, &[64 * n as i64]),
        Arg::contiguous(descs, &[descs_len(&mem, descs)]),
    ];
    run(&kernel, &mut mem, &args, &Launch::grid([1, 1, 1]))?;
    Ok(mem.read::<f32>(out))
}

#[test]
fn wgmma_matches_f64_for_every_canonical_layout() {
    let p = Problem::new(64, 64, 32, 9);
    let want = p.reference();
    for (am, bm) in [
        (Major::K, Major::K),
        (Major::Mn, Major::K),
        (Major::K, Major::Mn),
        (Major::Mn, Major::Mn),
    ] {
        for sw in Sw::ALL {
            let (ta, tb) = tiles(&p, (am, sw), (bm, sw));
            let trans = ((am == Major::Mn) as u8, (bm == Major::Mn) as u8);
            let got = wgmma_mma(&p, &ta, &tb, trans)
                .unwrap_or_else(|e| panic!("{am:?} {bm:?} {sw:?}: {e}"));
            assert_close(&got, &want, &format!("wgmma A {am:?} B {bm:?} {sw:?}"));
        }
    }
    // The wrong transpose flag reads the same bytes as another layout.
    let (ta, tb) = tiles(&p, (Major::K, Sw::B128), (Major::K, Sw::B128));
    let got = wgmma_mma(&p, &ta, &tb, (0, 1)).unwrap();
    assert!(max_err(&got, &want) > 0.1);
}

#[test]
fn a_tmem_snapshot_shows_d_when_the_epilogue_starts() {
    let p = Problem::new(128, 32, 16, 21);
    let (ta, tb) = tiles(&p, (Major::K, Sw::B128), (Major::K, Sw::B128));
    let opts = Options {
        snapshots: vec![
            SnapshotRequest {
                block: [0, 0, 0],
                stage: "epilogue".into(),
                at: StagePoint::Start,
                what: SnapshotWhat::Tmem {
                    lane: 0,
                    lanes: 2,
                    col: 30,
                    cols: 4,
                },
            },
            SnapshotRequest {
                block: [0, 0, 0],
                stage: "mma".into(),
                at: StagePoint::Start,
                what: SnapshotWhat::Tmem {
                    lane: 0,
                    lanes: 1,
                    col: 0,
                    cols: 1,
                },
            },
        ],
        ..Options::default()
    };
    let id = idesc(128, 32, Major::K, Major::K);
    let (d, stats) = tcgen05_mma_with(&p, &ta, &tb, &sm100_descs(&ta, &tb, 1), id, &opts).unwrap();
    // Snapshots come in the order they were taken.
    let taken = |r: usize| {
        &stats
            .snapshots
            .iter()
            .find(|s| s.request == r)
            .unwrap()
            .data
    };
    let SnapshotData::Tmem(rows) = taken(0) else {
        panic!("{:?}", stats.snapshots);
    };
    for (lane, row) in rows.iter().enumerate() {
        // Columns 30 and 31 hold D; 32 and 33 lie outside N but inside the allocation.
        let want: Vec<Option<u32>> = (30..34)
            .map(|c| (c < 32).then(|| d[lane * 32 + c].to_bits()))
            .collect();
        assert_eq!(row, &want, "lane {lane}");
    }
    assert_eq!(taken(1), &SnapshotData::Tmem(vec![vec![None]]));
}

#[test]
fn tcgen05_mma_takes_f16_inputs_and_an_f16_accumulator() {
    let p = Problem::with_format(128, 32, 32, 17, true);
    let want = p.reference();
    let (ta, tb) = tiles(&p, (Major::K, Sw::B64), (Major::Mn, Sw::B32));
    let descs = sm100_descs(&ta, &tb, 2);
    // A and B format F16 (0) at bits 7-9 and 10-12 (Table 42).
    let f16_in = idesc(128, 32, Major::K, Major::Mn) & !(1 << 7 | 1 << 10);
    let got = tcgen05_mma(&p, &ta, &tb, &descs, f16_in).unwrap();
    assert_close(&got, &want, "F16 inputs, F32 accumulator");
    // D format F16 (0) at bits 4-5: each cell holds an f16 in its low half.
    let got = tcgen05_mma(&p, &ta, &tb, &descs, f16_in & !(1 << 4)).unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let bits = g.to_bits();
        assert_eq!(
            bits >> 16,
            0,
            "element {i}: the high half of an f16 cell is 0"
        );
        let h = half::f16::from_bits(bits as u16).to_f64();
        // Each of the two K steps rounds D to f16 (11 significant bits), and the partial
        // sums reach ~10.
        let tol = (w.abs() + 10.0) * 2f64.powi(-10);
        assert!((h - w).abs() <= tol, "element {i}: {h} vs {w}");
    }
    // An F16 accumulator with BF16 inputs does not exist (Table 39).
    let bf16_in = idesc(128, 32, Major::K, Major::Mn) & !(1 << 4);
    let e = tcgen05_mma(&p, &ta, &tb, &descs, bf16_in).unwrap_err();
    assert!(
        e.to_string()
            .contains("an F16 accumulator needs F16 inputs"),
        "{e}"
    );
}
