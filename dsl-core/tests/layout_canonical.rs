//! Canonical MMA operand layouts: the constructors against the seed kernel's hand-written
//! address arithmetic, recognition and its errors, descriptor decoding against hand-worked
//! addresses, and the round trip layout -> descriptor bits -> layout the hardware reads.

use dsl_core::layout::{
    ComposedLayout, GmmaSmemDesc, Layout, LayoutErrorKind, Major, Swizzle, UmmaSmemDesc, canonical,
};

fn tile(swizzle: Swizzle, offset: i64, layout: &str) -> ComposedLayout {
    ComposedLayout::new(swizzle, offset, layout.parse::<Layout>().unwrap(), 2).unwrap()
}

// ---- The original CuTe-DSL decode kernel (the seed) writes its bf16 tiles by
// hand; the canonical constructors must give the same bytes.

/// Seed, fp8 dequant: KV [128, 512] K-major SW128, "8 k-blocks of 128 rows x 128 B; 16-byte
/// chunk c of row r stored at c ^ (r % 8)": kb * 16384 + (t/8) * 1024 + (t%8) * 128 +
/// ((d%64)/8 ^ t%8) * 16 + (d%8) * 2.
fn seed_kv_byte(t: i64, d: i64) -> i64 {
    (d / 64) * 16384
        + (t / 8) * 1024
        + (t % 8) * 128
        + (((d % 64) / 8) ^ (t % 8)) * 16
        + (d % 8) * 2
}

#[test]
fn kv_tile_matches_the_seed_layout() {
    let kv = canonical::k_major(Swizzle::B128, 128, 512, 2).unwrap();
    assert_eq!(
        kv.to_string(),
        "Sw<3,4,3> o smem_ptr[16b](+0) o ((8,16),(64,8)):((64,512),(1,8192))"
    );
    for t in 0..128 {
        for d in 0..512 {
            assert_eq!(
                kv.byte_offset_at(&[t, d]).unwrap(),
                seed_kv_byte(t, d),
                "({t}, {d})"
            );
        }
    }
}

#[test]
fn q_tile_matches_the_seed_layout() {
    // Seed, Q RoPE: addr = a_q + kb * KB_Q + (h // 8) * 1024 + (h % 8) * 128 + phys * 16 with
    // KB_Q = H * 128 and phys = ((d0 % 64) // 8) ^ (h % 8).
    for heads in [16, 32] {
        let q = canonical::k_major(Swizzle::B128, heads, 512, 2).unwrap();
        for h in 0..heads {
            for d in 0..512 {
                let phys = ((d % 64) / 8) ^ (h % 8);
                let want = (d / 64) * heads * 128
                    + (h / 8) * 1024
                    + (h % 8) * 128
                    + phys * 16
                    + (d % 8) * 2;
                assert_eq!(
                    q.byte_offset_at(&[h, d]).unwrap(),
                    want,
                    "H{heads} ({h}, {d})"
                );
            }
        }
    }
}

#[test]
fn p_tiles_match_the_seed_layout() {
    // Seed, P = hi | lo as one [128, 2H] MN-major B tile (N = 2H contiguous per token row).
    // H = 32: prow = (t//8)*1024 + (t%8)*128, 16-byte chunk c at (c ^ (t%8)) * 16 (SW128).
    let p = canonical::mn_major(Swizzle::B128, 64, 128, 2).unwrap();
    for t in 0..128 {
        for n in 0..64 {
            let want = (t / 8) * 1024 + (t % 8) * 128 + ((n / 8) ^ (t % 8)) * 16 + (n % 8) * 2;
            assert_eq!(
                p.byte_offset_at(&[n, t]).unwrap(),
                want,
                "H32 (n {n}, t {t})"
            );
        }
    }
    // H = 16: prow = (t//8)*512 + (t%8)*64, chunk c at (c ^ ((t%8)//2)) * 16 (SW64).
    let p = canonical::mn_major(Swizzle::B64, 32, 128, 2).unwrap();
    for t in 0..128 {
        for n in 0..32 {
            let want = (t / 8) * 512 + (t % 8) * 64 + ((n / 8) ^ ((t % 8) / 2)) * 16 + (n % 8) * 2;
            assert_eq!(
                p.byte_offset_at(&[n, t]).unwrap(),
                want,
                "H16 (n {n}, t {t})"
            );
        }
    }
}

#[test]
fn seed_operands_give_the_seed_descriptor_fields_and_steps() {
    // S = KV . Q^T: A = KV K-major; seed steps `(s_kb * 16384 + s_ks * 32) // 16`.
    let kv =
        canonical::recognise(&canonical::k_major(Swizzle::B128, 128, 512, 2).unwrap()).unwrap();
    assert_eq!((kv.major(), kv.stride_byte_offset()), (Major::K, 1024));
    assert_eq!(kv.k_steps(), 32);
    for s_kb in 0..8 {
        for s_ks in 0..4 {
            let start = kv.k_step_start(4 * s_kb + s_ks).unwrap();
            assert_eq!(i64::from(start), s_kb * 16384 + s_ks * 32);
        }
    }
    // O = KV^T . P: A = KV^T, the MN-major view of the same bytes; seed DESC_KV_MN =
    // make_sdesc_128B_swizzle(16384) (LBO 16384, SBO 1024) and steps
    // `(o_mb * 2 * 16384 + o_ks * 2048) // 16` for M blocks of 128.
    let kv_t = canonical::k_major(Swizzle::B128, 128, 512, 2)
        .unwrap()
        .transposed()
        .unwrap();
    assert_eq!(
        kv_t,
        canonical::mn_major(Swizzle::B128, 512, 128, 2).unwrap()
    );
    let a = canonical::recognise(&kv_t).unwrap();
    assert_eq!(a.major(), Major::MN);
    assert_eq!(
        (a.leading_byte_offset(), a.stride_byte_offset()),
        (16384, 1024)
    );
    for o_mb in 0..4 {
        for o_ks in 0..8 {
            let start = a.block_start(128 * o_mb, 16 * o_ks).unwrap();
            assert_eq!(i64::from(start), o_mb * 2 * 16384 + o_ks * 2048);
        }
    }
    // B = P: seed steps `(o_ks * 16 * P_ROW) // 16` with P_ROW = 4H bytes.
    for (heads, swizzle, sbo) in [(32, Swizzle::B128, 1024), (16, Swizzle::B64, 512)] {
        let p = canonical::recognise(&canonical::mn_major(swizzle, 2 * heads, 128, 2).unwrap())
            .unwrap();
        assert_eq!((p.major(), p.stride_byte_offset()), (Major::MN, sbo));
        for o_ks in 0..8 {
            assert_eq!(
                i64::from(p.k_step_start(o_ks).unwrap()),
                o_ks * 16 * 4 * heads
            );
        }
    }
}

// ---- Recognition.

#[test]
fn recognition_accepts_any_nesting_of_the_same_function() {
    // (128,64):(64,1) with Sw<3,4,3> is ((8,16),64):((64,512),1): canonical K-major SW128.
    let plain = canonical::recognise(&tile(Swizzle::B128, 0, "(128,64):(64,1)")).unwrap();
    let nested = canonical::recognise(&tile(
        Swizzle::B128,
        0,
        "((8,2,8),(8,8,8)):((64,512,1024),(1,8,8192))",
    ))
    .unwrap();
    for op in [&plain, &nested] {
        assert_eq!(op.major(), Major::K);
        assert_eq!(op.swizzle(), Swizzle::B128);
        assert_eq!(
            (op.leading_byte_offset(), op.stride_byte_offset()),
            (16, 1024)
        );
    }
    assert_eq!(nested.k_step_start(5).unwrap(), 16384 + 32);
}

#[test]
fn recognised_parameters_of_every_constructor() {
    // Hand-derived: K-major SBO = 8 rows of W bytes, LBO unused (16) or, without swizzle,
    // the K core-matrix step MN * 16; MN-major SBO = 8 K rows of W bytes, LBO = the MN atom
    // step K * W (unused within one atom column), or without swizzle LBO = 128 (8 K rows of
    // 16 B) and SBO = K * 16.
    for elem in [1u32, 2, 4] {
        for (swizzle, w) in [
            (Swizzle::NONE, 16),
            (Swizzle::B32, 32),
            (Swizzle::B64, 64),
            (Swizzle::B128, 128),
        ] {
            let (mn, k) = (128, 128 / i64::from(elem) * 2);
            let op =
                canonical::recognise(&canonical::k_major(swizzle, mn, k, elem).unwrap()).unwrap();
            let lbo = if w == 16 { mn as u32 * 16 } else { 16 };
            assert_eq!(
                (
                    op.major(),
                    op.leading_byte_offset(),
                    op.stride_byte_offset()
                ),
                (Major::K, lbo, 8 * w),
                "K-major {swizzle} {elem}B"
            );
            if elem == 4 {
                continue;
            }
            let op =
                canonical::recognise(&canonical::mn_major(swizzle, mn, k, elem).unwrap()).unwrap();
            // One atom column (MN = W / elem elements) leaves LBO unused.
            let single_atom = mn * i64::from(elem) <= i64::from(w);
            let (lbo, sbo) = match (w, single_atom) {
                (16, _) => (128, k as u32 * 16),
                (_, true) => (16, 8 * w),
                (_, false) => (k as u32 * w, 8 * w),
            };
            assert_eq!(
                (
                    op.major(),
                    op.leading_byte_offset(),
                    op.stride_byte_offset()
                ),
                (Major::MN, lbo, sbo),
                "MN-major {swizzle} {elem}B"
            );
        }
    }
}

#[test]
fn not_canonical_errors_name_the_expected_form_and_the_layout() {
    // 256-byte rows under a 128-byte swizzle.
    let e = canonical::recognise(&tile(Swizzle::B128, 0, "(128,128):(128,1)")).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::NotCanonical);
    assert_eq!(
        e.message(),
        "not a canonical K-major SW128 layout: expected Sw<3,4,3> o ((8,m),(64,k)):((64,SBO),(1,_)) \
         in 2-byte elements (LBO, SBO = byte offsets / 2; `_` = any step between MMA K-steps), \
         got Sw<3,4,3> o smem_ptr[16b](+0) o (128,128):(128,1): element (mn 1, k 0) is at linear \
         byte 256, the form (LBO unused, SBO 2048 B) puts it at 128"
    );
    // 64-byte rows declared with the 128-byte swizzle.
    let e = canonical::recognise(&tile(Swizzle::B128, 0, "((8,16),32):((32,256),1)")).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::NotCanonical);
    assert!(
        e.message().contains("not a canonical K-major SW128 layout"),
        "{e}"
    );
    // Neither mode contiguous.
    let e = canonical::recognise(&tile(Swizzle::B128, 0, "(64,64):(2,128)")).unwrap_err();
    assert!(
        e.message().contains("neither K (mode 1) nor MN (mode 0)"),
        "{e}"
    );
    assert!(
        e.message().contains("K-major Sw<3,4,3> o ((8,m),(64,k))"),
        "{e}"
    );
    // Not an MMA swizzle; not rank 2.
    let odd = ComposedLayout::new(
        Swizzle::new(3, 3, 3).unwrap(),
        0,
        "(64,64):(64,1)".parse().unwrap(),
        2,
    )
    .unwrap();
    let e = canonical::recognise(&odd).unwrap_err();
    assert!(
        e.message()
            .contains("Sw<3,3,3> is not an MMA operand swizzle"),
        "{e}"
    );
    let e = canonical::recognise(&tile(Swizzle::B128, 0, "(8,8,64):(64,512,1)")).unwrap_err();
    assert!(e.message().contains("rank 2, (MN, K)"), "{e}");
    // Asked for the other major-ness.
    let e = canonical::recognise_as(
        &canonical::k_major(Swizzle::B64, 64, 64, 2).unwrap(),
        Major::MN,
    )
    .unwrap_err();
    assert!(
        e.message()
            .starts_with("not a canonical MN-major SW64 layout"),
        "{e}"
    );
}

#[test]
fn swizzle_patterns_must_start_on_their_boundary() {
    // A K-major SW128 tile 512 bytes into a pattern: base offset territory.
    let e = canonical::recognise(&tile(Swizzle::B128, 512, "(64,64):(64,1)")).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::Misaligned);
    assert!(
        e.message().contains("must start on a multiple of 1024"),
        "{e}"
    );
    // Whole patterns in are fine; so is a 32-byte K offset inside the first row.
    assert!(canonical::recognise(&tile(Swizzle::B128, 3072, "(64,64):(64,1)")).is_ok());
    // 8-row groups 1536 bytes apart would start mid-pattern.
    let e = canonical::recognise(&tile(Swizzle::B128, 0, "((8,4),64):((64,768),1)")).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::Misaligned);
    assert!(
        e.message()
            .contains("SBO is 1536 bytes; expected a multiple of 1024"),
        "{e}"
    );
    // MN-major steps start on pattern boundaries only.
    let e = canonical::recognise(&tile(Swizzle::B64, 256, "((32,1),(8,16)):((1,0),(32,256))"))
        .unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::Misaligned);
    // Without swizzle, 16-byte units.
    let e = canonical::recognise(&tile(Swizzle::NONE, 8, "((8,8),(8,2)):((8,64),(1,512))"))
        .unwrap_err();
    assert!(e.message().contains("16-byte units"), "{e}");
}

#[test]
fn block_starts_reject_blocks_that_do_not_share_lbo_and_sbo() {
    let op =
        canonical::recognise(&canonical::mn_major(Swizzle::B128, 256, 64, 2).unwrap()).unwrap();
    assert_eq!(op.block_start(128, 16).unwrap(), 2 * 8192 + 2048);
    let e = op.block_start(32, 0).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::OutOfRange);
    assert!(
        e.message()
            .contains("expected mn a multiple of 64 below 256"),
        "{e}"
    );
    assert!(op.block_start(0, 8).is_err());
    assert!(op.k_step_start(4).is_err());
}

// ---- Decoding descriptor bits into the layout the hardware reads.

#[test]
fn decoded_addresses_hand_worked() {
    // ptx-reference.md §4 worked example: bf16 K-major SW128 at 0x400, SBO 1024, LBO enc 1.
    // Element (9, 5): 0x400 + (9 % 8) * 128 + (9 / 8) * 1024 + 5 * 2 = 0x88A; bits 7-9 of
    // 0x88A are 1, so chunk 0 becomes chunk 1: 0x89A. Element (7, 15): 0x400 + 896 + 30 =
    // 0x79E, row 7, chunk 1 -> 6: 0x400 + 896 + 96 + 14 = 0x7EE.
    let sm100 = UmmaSmemDesc::from_bits(0x4000404000010040).unwrap();
    let sm90 = GmmaSmemDesc::from_bits(0x4000004000010040).unwrap();
    for hw in [
        sm100.operand_layout(Major::K, 64, 16, 2).unwrap(),
        sm90.operand_layout(Major::K, 64, 16, 2).unwrap(),
    ] {
        assert_eq!(
            hw.to_string(),
            "Sw<3,4,3> o smem_ptr[16b](+1024) o ((8,8),16):((64,512),1)"
        );
        assert_eq!(hw.byte_offset_at(&[0, 0]).unwrap(), 0x400);
        assert_eq!(hw.byte_offset_at(&[9, 5]).unwrap(), 0x89A);
        assert_eq!(hw.byte_offset_at(&[7, 15]).unwrap(), 0x7EE);
    }
    // Seed DESC_KV_MN = make_sdesc_128B_swizzle(16384) with the KV tile at 0: MN-major A.
    // Element (m 70, k 9): 16384 (atom column 1) + 1024 (K group 1) + 128 (K row 1) + 12
    // = 17548; row 1 of its pattern, chunk 0 -> 1: 17564, which is where the seed's dequant
    // stored KV[token 9][dim 70].
    let kv_mn = UmmaSmemDesc::from_bits(16384 >> 4 << 16 | 1024 >> 4 << 32 | 1 << 46 | 2 << 61)
        .unwrap()
        .operand_layout(Major::MN, 128, 16, 2)
        .unwrap();
    assert_eq!(kv_mn.byte_offset_at(&[70, 9]).unwrap(), 17564);
    assert_eq!(seed_kv_byte(9, 70), 17564);

    // Interleave (no swizzle) forms, CUTLASS make_umma_desc: K-major
    // ((8,m),(T,2k)):((T,SBO),(1,LBO)), MN-major ((T,1,m),(8,k)):((1,T,SBO),(T,LBO)), T = 8.
    // K-major, LBO 256, SBO 512, element (10, 9): 2*16 + 1*512 + 1*2 + 1*256 = 802.
    let k_inter = UmmaSmemDesc::from_bits(256 >> 4 << 16 | 512 >> 4 << 32 | 1 << 46).unwrap();
    let hw = k_inter.operand_layout(Major::K, 64, 16, 2).unwrap();
    assert_eq!(hw.byte_offset_at(&[10, 9]).unwrap(), 802);
    // MN-major, LBO 128 (K groups), SBO 1024 (MN chunks), element (10, 9):
    // 2*2 + 1*1024 + 1*16 + 1*128 = 1172.
    let mn_inter = GmmaSmemDesc::from_bits(128 >> 4 << 16 | 1024 >> 4 << 32).unwrap();
    let hw = mn_inter.operand_layout(Major::MN, 64, 16, 2).unwrap();
    assert_eq!(hw.byte_offset_at(&[10, 9]).unwrap(), 1172);
    // MN-major SW64 (atoms of 32 bf16), LBO 2048, SBO 512, element (40, 10):
    // 8*2 + 1*2048 + 2*64 + 1*512 = 2704 = 0xA90; bits 7-8 = 1 flip chunk 1 -> 0: 0xA80.
    let mn_sw64 = GmmaSmemDesc::from_bits(2048 >> 4 << 16 | 512 >> 4 << 32 | 2 << 62).unwrap();
    let hw = mn_sw64.operand_layout(Major::MN, 64, 16, 2).unwrap();
    assert_eq!(hw.byte_offset_at(&[40, 10]).unwrap(), 0xA80);
}

#[test]
fn decoding_refuses_what_is_not_modelled() {
    let base_offset = UmmaSmemDesc::from_bits(0x4000404000010040 | 3 << 49).unwrap();
    let e = base_offset.operand_layout(Major::K, 64, 16, 2).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::Unsupported);
    assert!(e.message().contains("base offset 3 is not modelled"), "{e}");
    let base32b = UmmaSmemDesc::from_bits(0x2000404000010040).unwrap();
    let e = base32b.operand_layout(Major::MN, 64, 8, 4).unwrap_err();
    assert!(e.message().contains("not modelled"), "{e}");
    let sw128 = UmmaSmemDesc::from_bits(0x4000404000010040).unwrap();
    let e = sw128.operand_layout(Major::K, 64, 128, 2).unwrap_err();
    assert!(e.message().contains("K must fit in one swizzle row"), "{e}");
}

/// Every (major, swizzle, element size) the canonical constructors build, at a few tile
/// sizes and a pattern-aligned offset.
fn every_canonical_tile() -> Vec<ComposedLayout> {
    let mut tiles = Vec::new();
    for elem in [1u32, 2, 4] {
        let mma_k = 32 / i64::from(elem);
        for swizzle in [Swizzle::NONE, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            let row = match swizzle.bits() {
                0 => 16,
                b => 16 << b,
            } / i64::from(elem);
            for (mn, k_units) in [(64, 1), (128, 2), (256, 3)] {
                let k = row.max(mma_k) * k_units;
                tiles.push(canonical::k_major(swizzle, mn, k, elem).unwrap());
                if elem != 4 {
                    let k = mma_k.max(8) * k_units * 2;
                    tiles.push(canonical::mn_major(swizzle, mn.max(row), k, elem).unwrap());
                }
            }
        }
    }
    tiles
        .into_iter()
        .flat_map(|t| {
            let shifted =
                ComposedLayout::new(t.swizzle(), 2048, t.layout().clone(), t.elem_bytes()).unwrap();
            [t, shifted]
        })
        .collect()
}

#[test]
fn layout_to_descriptor_bits_to_layout_reproduces_every_element() {
    let mut checked = 0;
    for tile in every_canonical_tile() {
        let op = canonical::recognise(&tile).unwrap_or_else(|e| panic!("{e}"));
        // MMA blocks of 64 rows (or one swizzle atom, if wider) at every block start.
        let row_elems = match tile.swizzle().bits() {
            0 => 16,
            b => 16 << b,
        } / i64::from(tile.elem_bytes());
        let rows = match op.major() {
            Major::K => 64,
            Major::MN => row_elems.max(64),
        };
        let mma_k = op.mma_k();
        for mn0 in (0..op.mn_extent()).step_by(rows as usize) {
            for ks in 0..op.k_steps() {
                let start = op.block_start(mn0, ks * mma_k).unwrap();
                let umma = UmmaSmemDesc::for_operand(&op)
                    .unwrap()
                    .with_start_address(start)
                    .unwrap();
                let gmma = GmmaSmemDesc::for_operand(&op)
                    .unwrap()
                    .with_start_address(start)
                    .unwrap();
                let elem = tile.elem_bytes();
                let read = [
                    UmmaSmemDesc::from_bits(umma.bits())
                        .unwrap()
                        .operand_layout(op.major(), rows, mma_k, elem)
                        .unwrap(),
                    GmmaSmemDesc::from_bits(gmma.bits())
                        .unwrap()
                        .operand_layout(op.major(), rows, mma_k, elem)
                        .unwrap(),
                ];
                for hw in &read {
                    for m in 0..rows {
                        for kk in 0..mma_k {
                            let want = tile.byte_offset_at(&[mn0 + m, ks * mma_k + kk]).unwrap();
                            let got = hw.byte_offset_at(&[m, kk]).unwrap();
                            assert_eq!(got, want, "{tile}: block ({mn0}, {ks}) via {hw}");
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 1_000_000, "only {checked} elements checked");
}

#[test]
fn for_layout_of_a_k_block_slice_starts_at_the_slice() {
    let kv = canonical::k_major(Swizzle::B128, 128, 512, 2).unwrap();
    let block = kv.tile(&[128, 64], &[0, 5]).unwrap();
    let desc = UmmaSmemDesc::for_layout(&block).unwrap();
    assert_eq!(desc.start_address(), 5 * 16384);
    assert_eq!(desc.stride_byte_offset(), 1024);
    // A 16-column slice inside the k-block: start 5 * 16384 + 2 * 32.
    let step = kv.tile(&[128, 16], &[0, 22]).unwrap();
    assert_eq!(
        UmmaSmemDesc::for_layout(&step).unwrap().start_address(),
        5 * 16384 + 64
    );
}
