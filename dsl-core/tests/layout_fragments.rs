//! Accumulator fragments against the formulas of ptx-reference.md §2 and §10.

use dsl_core::layout::fragment::{self, TMEM_LANE};

#[test]
fn wgmma_f32_accumulator_matches_the_ptx_formula_and_covers_the_tile_once() {
    // ptx-reference.md §10 (CUTLASS CLayout_64xN, run bit-exact on the H200 for N = 16, 128):
    // row = 16 w + l / 4 + 8 ((i >> 1) & 1), col = 8 (i >> 2) + 2 (l % 4) + (i & 1).
    for n in [8, 16, 128, 256] {
        let frag = fragment::wgmma_accumulator_f32(n).unwrap();
        let tv = fragment::wgmma_accumulator_f32_tv(n).unwrap();
        assert_eq!((frag.threads(), frag.values()), (128, i64::from(n) / 2));
        let mut seen = vec![false; 64 * n as usize];
        for t in 0..128 {
            let (w, l) = (t / 32, t % 32);
            for i in 0..i64::from(n) / 2 {
                let row = 16 * w + l / 4 + 8 * ((i >> 1) & 1);
                let col = 8 * (i >> 2) + 2 * (l % 4) + (i & 1);
                assert_eq!(frag.coord_at(t, i).unwrap(), (row, col), "N{n} t{t} i{i}");
                assert_eq!(
                    tv.offset_at(&[t, i]).unwrap(),
                    row + 64 * col,
                    "N{n} t{t} i{i}"
                );
                let cell = (row + 64 * col) as usize;
                assert!(!seen[cell], "N{n}: ({row}, {col}) held twice");
                seen[cell] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }
    assert!(fragment::wgmma_accumulator_f32(12).is_err());
}

#[test]
fn tmem_accumulator_placement() {
    // ptx-reference.md §2, cta_group::1: M = 128, D[m][n] at lane m, column n; M = 64,
    // lane 32 (m / 16) + m % 16.
    let d128 = fragment::tmem_accumulator(128, 256).unwrap();
    let d64 = fragment::tmem_accumulator(64, 64).unwrap();
    for m in 0..128 {
        for n in [0, 1, 37, 255] {
            assert_eq!(d128.offset_at(&[m, n]).unwrap(), m * TMEM_LANE + n);
            if m < 64 && n < 64 {
                let lane = 32 * (m / 16) + m % 16;
                assert_eq!(d64.offset_at(&[m, n]).unwrap(), lane * TMEM_LANE + n);
            }
        }
    }
    let e = fragment::tmem_accumulator(256, 64).unwrap_err();
    assert!(e.message().contains("M = 64 or 128, got M = 256"), "{e}");
}

#[test]
fn tcgen05_ld_32x32b_reads_each_warps_lane_quarter() {
    // ptx-reference.md §2: thread t of warp w reads lane 32 (w % 4) + t, register j holds
    // column j.
    let ld = fragment::tmem_load_32x32b(512, 16).unwrap();
    for thread in 0..512 {
        let (w, t) = (thread / 32, thread % 32);
        for j in 0..16 {
            let want = (32 * (w % 4) + t) * TMEM_LANE + j;
            assert_eq!(
                ld.offset_at(&[thread, j]).unwrap(),
                want,
                "thread {thread} reg {j}"
            );
        }
    }
    // A warpgroup loading an M = 128 accumulator gets row T in thread T: the load and the
    // accumulator placement compose to the identity on rows.
    let ld = fragment::tmem_load_32x32b(128, 64).unwrap();
    let d = fragment::tmem_accumulator(128, 64).unwrap();
    for thread in 0..128 {
        for j in 0..64 {
            assert_eq!(
                ld.offset_at(&[thread, j]).unwrap(),
                d.offset_at(&[thread, j]).unwrap()
            );
        }
    }
    // M = 64: only threads with lane % 32 < 16 hold rows, 16 per warp.
    let d = fragment::tmem_accumulator(64, 64).unwrap();
    for m in 0..64 {
        let thread = 32 * (m / 16) + m % 16;
        assert_eq!(
            d.offset_at(&[m, 5]).unwrap(),
            ld.offset_at(&[thread, 5]).unwrap()
        );
    }
    assert!(fragment::tmem_load_32x32b(100, 4).is_err());
    assert!(fragment::tmem_load_32x32b(128, 3).is_err());
}
