//! Descriptor encodings, bit-exact, as tables of (how it is built, expected bits, expected
//! Debug). Each row cites where its encoding is stated or computed from.

use dsl_core::layout::{
    GmmaLayoutType, GmmaSmemDesc, LayoutErrorKind, LboMode, Major, Swizzle, UmmaAccumulator,
    UmmaInput, UmmaInstrDesc, UmmaLayoutType, UmmaSmemDesc, WgmmaAccumulator, WgmmaInput,
    WgmmaInstr, canonical,
};

fn umma_for(tile: dsl_core::layout::ComposedLayout) -> UmmaSmemDesc {
    UmmaSmemDesc::for_layout(&tile).unwrap_or_else(|e| panic!("{e}"))
}

fn gmma_for(tile: dsl_core::layout::ComposedLayout) -> GmmaSmemDesc {
    GmmaSmemDesc::for_layout(&tile).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn sm100_shared_memory_descriptor_table() {
    let rows: Vec<(UmmaSmemDesc, u64, &str)> = vec![
        // ptx-reference.md §4 worked example: bf16 K-major SW128 tile at 0x400, SBO 1024,
        // LBO enc 1.
        (
            umma_for(canonical::k_major(Swizzle::B128, 128, 64, 2).unwrap())
                .with_start_address(0x400)
                .unwrap(),
            0x4000404000010040,
            "UmmaSmemDesc { bits: 0x4000404000010040, start_address: 0x400, leading_byte_offset: \
             16, stride_byte_offset: 1024, version: 1, base_offset: 0, lbo_mode: Relative, \
             layout_type: SWIZZLE_128B }",
        ),
        // vLLM `_tcgen05.make_sdesc_128B_swizzle(0)` = (0 >> 4 << 16) | (1024 >> 4 << 32) |
        // (1 << 46) | (2 << 61), ORed with (0x400 >> 4) as the seed does for DESC_KMAJ.
        (
            UmmaSmemDesc::new(UmmaLayoutType::Swizzle128B)
                .with_start_address(0x400)
                .unwrap()
                .with_stride_byte_offset(1024)
                .unwrap(),
            0x4000404000000040,
            "UmmaSmemDesc { bits: 0x4000404000000040, start_address: 0x400, leading_byte_offset: \
             0, stride_byte_offset: 1024, version: 1, base_offset: 0, lbo_mode: Relative, \
             layout_type: SWIZZLE_128B }",
        ),
        // vLLM `make_sdesc_128B_swizzle(16384)`: the seed's DESC_KV_MN (KV^T, MN-major), here
        // derived from the transposed KV tile: LBO 16384 (0x400 << 16), SBO 1024.
        (
            umma_for(canonical::mn_major(Swizzle::B128, 512, 128, 2).unwrap()),
            0x4000404004000000,
            "UmmaSmemDesc { bits: 0x4000404004000000, start_address: 0x0, leading_byte_offset: \
             16384, stride_byte_offset: 1024, version: 1, base_offset: 0, lbo_mode: Relative, \
             layout_type: SWIZZLE_128B }",
        ),
        // The seed's P operand at H = 16 (`_make_sdesc_64B_swizzle(8 * P_ROW)`, SBO 512):
        // MN-major SW64 [32, 128]; layout type 4 << 61, SBO 32 << 32, LBO unused -> enc 1.
        (
            umma_for(canonical::mn_major(Swizzle::B64, 32, 128, 2).unwrap()),
            0x8000402000010000,
            "UmmaSmemDesc { bits: 0x8000402000010000, start_address: 0x0, leading_byte_offset: \
             16, stride_byte_offset: 512, version: 1, base_offset: 0, lbo_mode: Relative, \
             layout_type: SWIZZLE_64B }",
        ),
        // CUTLASS LayoutType::SWIZZLE_32B = 6 at bits 61-63; K-major SW32 bf16 rows of 32 B,
        // SBO = 8 rows = 256 (enc 16).
        (
            umma_for(canonical::k_major(Swizzle::B32, 64, 16, 2).unwrap()),
            0xC000401000010000,
            "UmmaSmemDesc { bits: 0xc000401000010000, start_address: 0x0, leading_byte_offset: \
             16, stride_byte_offset: 256, version: 1, base_offset: 0, lbo_mode: Relative, \
             layout_type: SWIZZLE_32B }",
        ),
        // CUTLASS make_umma_desc INTERLEAVE K-major ((8,m),(T,2)):((1T,SBO),(1,LBO)): core
        // matrices 128 B apart along MN (SBO enc 8), the K neighbour 64 * 16 = 1024 B away
        // (LBO enc 0x40).
        (
            umma_for(canonical::k_major(Swizzle::NONE, 64, 16, 2).unwrap()),
            0x0000400800400000,
            "UmmaSmemDesc { bits: 0x0000400800400000, start_address: 0x0, leading_byte_offset: \
             1024, stride_byte_offset: 128, version: 1, base_offset: 0, lbo_mode: Relative, \
             layout_type: SWIZZLE_NONE }",
        ),
        // CUTLASS UMMA::SmemDescriptor field positions, every field at an extreme: start and
        // LBO 0x3FFF0 (enc 0x3FFF), SBO 16, base offset 5 << 49, lbo mode 1 << 52,
        // SWIZZLE_128B_BASE32B = 1 << 61, fixed 1 << 46.
        (
            UmmaSmemDesc::new(UmmaLayoutType::Swizzle128BBase32B)
                .with_start_address(0x3FFF0)
                .unwrap()
                .with_leading_byte_offset(0x3FFF0)
                .unwrap()
                .with_stride_byte_offset(16)
                .unwrap()
                .with_base_offset(5)
                .unwrap()
                .with_lbo_mode(LboMode::Absolute),
            0x201A40013FFF3FFF,
            "UmmaSmemDesc { bits: 0x201a40013fff3fff, start_address: 0x3fff0, \
             leading_byte_offset: 262128, stride_byte_offset: 16, version: 1, base_offset: 5, \
             lbo_mode: Absolute, layout_type: SWIZZLE_128B_BASE32B }",
        ),
    ];
    for (desc, bits, debug) in rows {
        assert_eq!(desc.bits(), bits, "{desc:?}");
        assert_eq!(format!("{desc:?}"), debug);
        assert_eq!(UmmaSmemDesc::from_bits(bits).unwrap(), desc);
        assert_eq!(
            desc.bits_without_start_address()
                | canonical::matrix_descriptor_encode(desc.start_address()),
            bits
        );
    }
}

#[test]
fn sm90_shared_memory_descriptor_table() {
    let rows: Vec<(GmmaSmemDesc, u64, &str)> = vec![
        // ptx-reference.md §4 worked example, sm_90 form (run bit-exact on the H200).
        (
            gmma_for(canonical::k_major(Swizzle::B128, 64, 64, 2).unwrap())
                .with_start_address(0x400)
                .unwrap(),
            0x4000004000010040,
            "GmmaSmemDesc { bits: 0x4000004000010040, start_address: 0x400, leading_byte_offset: \
             16, stride_byte_offset: 1024, base_offset: 0, layout_type: B128 }",
        ),
        // ptx-reference.md §4 [RUN]: B MN-major SW128 with LBO 4096, SBO 1024
        // (m64n128k16, imm-trans-b = 1): the [128, 32] MN-major tile.
        (
            gmma_for(canonical::mn_major(Swizzle::B128, 128, 32, 2).unwrap()),
            0x4000004001000000,
            "GmmaSmemDesc { bits: 0x4000004001000000, start_address: 0x0, leading_byte_offset: \
             4096, stride_byte_offset: 1024, base_offset: 0, layout_type: B128 }",
        ),
        // PTX matrix-descriptor table: 64B swizzle = 2 at bits 62-63.
        (
            gmma_for(canonical::k_major(Swizzle::B64, 64, 32, 2).unwrap()),
            0x8000002000010000,
            "GmmaSmemDesc { bits: 0x8000002000010000, start_address: 0x0, leading_byte_offset: \
             16, stride_byte_offset: 512, base_offset: 0, layout_type: B64 }",
        ),
        // 32B swizzle = 3.
        (
            gmma_for(canonical::k_major(Swizzle::B32, 64, 16, 2).unwrap()),
            0xC000001000010000,
            "GmmaSmemDesc { bits: 0xc000001000010000, start_address: 0x0, leading_byte_offset: \
             16, stride_byte_offset: 256, base_offset: 0, layout_type: B32 }",
        ),
        // CUTLASS make_gmma_desc INTERLEAVE K-major, as for sm_100 without bit 46.
        (
            gmma_for(canonical::k_major(Swizzle::NONE, 64, 16, 2).unwrap()),
            0x0000000800400000,
            "GmmaSmemDesc { bits: 0x0000000800400000, start_address: 0x0, leading_byte_offset: \
             1024, stride_byte_offset: 128, base_offset: 0, layout_type: Interleave }",
        ),
        // CUTLASS GmmaDescriptor field positions at their extremes; base offset 7 << 49.
        (
            GmmaSmemDesc::new(GmmaLayoutType::B32)
                .with_start_address(0x3FFF0)
                .unwrap()
                .with_leading_byte_offset(0x3FFF0)
                .unwrap()
                .with_stride_byte_offset(0x3FFF0)
                .unwrap()
                .with_base_offset(7)
                .unwrap(),
            0xC00E3FFF3FFF3FFF,
            "GmmaSmemDesc { bits: 0xc00e3fff3fff3fff, start_address: 0x3fff0, \
             leading_byte_offset: 262128, stride_byte_offset: 262128, base_offset: 7, \
             layout_type: B32 }",
        ),
    ];
    for (desc, bits, debug) in rows {
        assert_eq!(desc.bits(), bits, "{desc:?}");
        assert_eq!(format!("{desc:?}"), debug);
        assert_eq!(GmmaSmemDesc::from_bits(bits).unwrap(), desc);
    }
}

#[test]
fn sm90_and_sm100_descriptors_differ_only_in_bit_46() {
    // ThunderKittens relies on this (ptx-reference.md §4): sm_90 code v at bits 62-63 is the
    // sm_100 code 2v at bits 61-63.
    for swizzle in [Swizzle::NONE, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
        let tile = canonical::k_major(swizzle, 128, 64, 2).unwrap();
        let (umma, gmma) = (umma_for(tile.clone()), gmma_for(tile));
        assert_eq!(umma.bits() ^ gmma.bits(), 1 << 46, "{swizzle}");
        assert_eq!(umma.layout_type().code(), 2 * gmma.layout_type().code());
    }
}

#[test]
fn descriptor_bits_with_reserved_or_invalid_codes_are_rejected() {
    let umma_rows = [
        // An sm_90 descriptor given to tcgen05.
        (
            0x4000004000010040,
            "bits 46-48 are 0b000, expected the fixed value 0b001",
        ),
        (0x6000404000010040, "layout type 3 (bits 61-63) is invalid"),
        (0xA000404000010040, "layout type 5 (bits 61-63) is invalid"),
        (0x4000404000014040, "unused bits 0x4000 are set"),
        (0x4020404000010040, "unused bits 0x20000000000000 are set"),
    ];
    for (bits, why) in umma_rows {
        let e = UmmaSmemDesc::from_bits(bits).unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::InvalidEncoding);
        assert!(e.message().contains(why), "{bits:#x}: {e}");
    }
    let gmma_rows = [
        // An sm_100 descriptor given to wgmma.
        (
            0x4000404000010040,
            "bit 46 is set, which marks the sm_100 (tcgen05) format",
        ),
        (0x4010004000010040, "unused bits 0x10000000000000 are set"),
        (0x4000004080010040, "unused bits 0x80000000 are set"),
    ];
    for (bits, why) in gmma_rows {
        let e = GmmaSmemDesc::from_bits(bits).unwrap_err();
        assert!(e.message().contains(why), "{bits:#x}: {e}");
    }
    let e = UmmaSmemDesc::new(UmmaLayoutType::Swizzle128B)
        .with_start_address(0x408)
        .unwrap_err();
    assert_eq!(
        e.message(),
        "descriptor start address 0x408: expected a multiple of 16 below 0x40000 (14 bits of \
         16-byte units)"
    );
    assert!(
        GmmaSmemDesc::new(GmmaLayoutType::B128)
            .with_stride_byte_offset(1 << 18)
            .is_err()
    );
    assert!(
        GmmaSmemDesc::new(GmmaLayoutType::B128)
            .with_base_offset(8)
            .is_err()
    );
}

#[test]
fn not_canonical_layouts_get_no_descriptor() {
    let rows = dsl_core::layout::ComposedLayout::new(
        Swizzle::B128,
        0,
        "(64,128):(128,1)".parse().unwrap(),
        2,
    )
    .unwrap();
    let e = UmmaSmemDesc::for_layout(&rows).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::NotCanonical);
    assert!(
        e.message()
            .starts_with("not a canonical K-major SW128 layout: expected"),
        "{e}"
    );
    assert!(GmmaSmemDesc::for_layout(&rows).is_err());
}

#[test]
fn tcgen05_instruction_descriptor_table() {
    let bf16 = |m, n| UmmaInstrDesc::bf16(m, n).unwrap();
    let rows: Vec<(UmmaInstrDesc, u32, &str)> = vec![
        // ptx-reference.md §3 examples, both operands K-major.
        (
            bf16(128, 256),
            0x08400490,
            "UmmaInstrDesc { bits: 0x08400490, kind: f16, d_format: F32, a_format: Bf16, \
             b_format: Bf16, negate_a: false, negate_b: false, a_major: K, b_major: K, n: 256, \
             m: 128 }",
        ),
        (
            bf16(128, 128),
            0x08200490,
            "UmmaInstrDesc { bits: 0x08200490, kind: f16, d_format: F32, a_format: Bf16, \
             b_format: Bf16, negate_a: false, negate_b: false, a_major: K, b_major: K, n: 128, \
             m: 128 }",
        ),
        (
            bf16(64, 64),
            0x04100490,
            "UmmaInstrDesc { bits: 0x04100490, kind: f16, d_format: F32, a_format: Bf16, \
             b_format: Bf16, negate_a: false, negate_b: false, a_major: K, b_major: K, n: 64, \
             m: 64 }",
        ),
        // vLLM `make_bf16_idesc(128, 16)` = (1<<4)|(1<<7)|(1<<10)|(2<<17)|(8<<24): the seed's
        // IDESC_S at H = 16.
        (
            bf16(128, 16),
            0x08040490,
            "UmmaInstrDesc { bits: 0x08040490, kind: f16, d_format: F32, a_format: Bf16, \
             b_format: Bf16, negate_a: false, negate_b: false, a_major: K, b_major: K, n: 16, \
             m: 128 }",
        ),
        // vLLM `make_bf16_idesc(128, 64, transpose_A=True, transpose_B=True)`: the seed's
        // IDESC_O at H = 32, 0x490 | 1<<15 | 1<<16 | 8<<17 | 8<<24.
        (
            bf16(128, 64)
                .with_a_major(Major::MN)
                .with_b_major(Major::MN),
            0x08118490,
            "UmmaInstrDesc { bits: 0x08118490, kind: f16, d_format: F32, a_format: Bf16, \
             b_format: Bf16, negate_a: false, negate_b: false, a_major: MN, b_major: MN, n: 64, \
             m: 128 }",
        ),
        // vLLM `make_bf16_idesc(64, 8, negate_A=True, negate_B=True)`:
        // 0x490 | 1<<13 | 1<<14 | 1<<17 | 4<<24.
        (
            bf16(64, 8).with_negate_a(true).with_negate_b(true),
            0x04026490,
            "UmmaInstrDesc { bits: 0x04026490, kind: f16, d_format: F32, a_format: Bf16, \
             b_format: Bf16, negate_a: true, negate_b: true, a_major: K, b_major: K, n: 8, \
             m: 64 }",
        ),
        // CUTLASS make_instr_desc<half_t, half_t, half_t, 128, 256, K, K>: F16 formats and
        // c_format F16 are all 0, leaving N>>3 and M>>4.
        (
            UmmaInstrDesc::new(
                128,
                256,
                UmmaInput::F16,
                UmmaInput::F16,
                UmmaAccumulator::F16,
            )
            .unwrap(),
            0x08400000,
            "UmmaInstrDesc { bits: 0x08400000, kind: f16, d_format: F16, a_format: F16, \
             b_format: F16, negate_a: false, negate_b: false, a_major: K, b_major: K, n: 256, \
             m: 128 }",
        ),
    ];
    for (desc, bits, debug) in rows {
        assert_eq!(desc.bits(), bits, "{desc:?}");
        assert_eq!(format!("{desc:?}"), debug);
        assert_eq!(UmmaInstrDesc::from_bits(bits).unwrap(), desc);
    }
}

#[test]
fn tcgen05_instruction_descriptor_rejections() {
    let e = UmmaInstrDesc::bf16(96, 64).unwrap_err();
    assert_eq!(e.kind(), LayoutErrorKind::Unsupported);
    assert_eq!(
        e.message(),
        "tcgen05.mma.cta_group::1 kind::f16 expects M = 64 or 128, got M = 96"
    );
    let e = UmmaInstrDesc::bf16(256, 64).unwrap_err();
    assert!(e.message().contains("M = 256 needs cta_group::2"), "{e}");
    for n in [0, 4, 12, 264] {
        let e = UmmaInstrDesc::bf16(128, n).unwrap_err();
        assert_eq!(
            e.message(),
            format!(
                "tcgen05.mma.cta_group::1 kind::f16 expects N to be a multiple of 8 from 8 to \
                 256, got N = {n}"
            )
        );
    }
    let rows = [
        (0x08400491, "select a sparse MMA"),
        (0x08400498, "saturate"),
        (0x084004D0, "reserved bits 0x40"),
        (0x08C00490, "reserved bits 0x800000"),
        (0x28400490, "reserved bits 0x20000000"),
        (0x48400490, "max shift"),
        (0x084004A0, "D format 2 (bits 4-5)"),
        (
            0x08400510,
            "A format 2 (bits 7-9): kind::f16 takes F16 (0) or BF16 (1)",
        ),
        (0x08400890, "B format 2 (bits 10-12)"),
        (0x06400490, "expects M = 64 or 128, got M = 96"),
        (0x08000490, "got N = 0"),
    ];
    for (bits, why) in rows {
        let e = UmmaInstrDesc::from_bits(bits).unwrap_err();
        assert_eq!(e.kind(), LayoutErrorKind::InvalidEncoding, "{bits:#x}");
        assert!(e.message().contains(why), "{bits:#x}: {e}");
    }
}

#[test]
fn wgmma_operand_modes() {
    // ptx-reference.md §10: m64nNk16 .f32.bf16.bf16 d, a_desc, b_desc, scale-d, 1, 1, tA, tB.
    let mma = WgmmaInstr::new(WgmmaInput::Bf16, WgmmaAccumulator::F32, 128)
        .unwrap()
        .with_b_major(Major::MN)
        .unwrap()
        .with_negate_a(true);
    assert_eq!(mma.shape(), "m64n128k16");
    assert_eq!(mma.accumulator_registers(), 64);
    assert_eq!((mma.imm_scale_a(), mma.imm_scale_b()), (-1, 1));
    assert_eq!((mma.imm_trans_a(), mma.imm_trans_b()), (Some(0), Some(1)));

    // A from registers: no imm-trans-a operand.
    let regs = WgmmaInstr::new(WgmmaInput::F16, WgmmaAccumulator::F16, 64)
        .unwrap()
        .with_a_in_registers()
        .unwrap();
    assert_eq!((regs.imm_trans_a(), regs.imm_trans_b()), (None, Some(0)));
    assert_eq!(regs.accumulator_registers(), 16);
    let e = regs.with_a_major(Major::MN).unwrap_err();
    assert!(
        e.message().contains("MN-major needs A in shared memory"),
        "{e}"
    );

    // 8-bit and tf32 types have no transpose operands and other K.
    let fp8 = WgmmaInstr::new(WgmmaInput::E4m3, WgmmaAccumulator::F32, 256).unwrap();
    assert_eq!(
        (fp8.shape().as_str(), fp8.imm_trans_b()),
        ("m64n256k32", None)
    );
    let e = fp8.with_b_major(Major::MN).unwrap_err();
    assert_eq!(
        e.message(),
        "wgmma.mma_async B: MN-major (imm-trans = 1) needs f16 or bf16 inputs, got e4m3; store \
         the operand K-major"
    );
    let tf32 = WgmmaInstr::new(WgmmaInput::Tf32, WgmmaAccumulator::F32, 8).unwrap();
    assert_eq!(tf32.shape(), "m64n8k8");

    let e = WgmmaInstr::new(WgmmaInput::Bf16, WgmmaAccumulator::F32, 260).unwrap_err();
    assert_eq!(
        e.message(),
        "wgmma.mma_async expects N to be a multiple of 8 from 8 to 256, got N = 260"
    );
    let e = WgmmaInstr::new(WgmmaInput::Bf16, WgmmaAccumulator::F16, 64).unwrap_err();
    assert!(
        e.message().contains("bf16 inputs accumulates in f32 only"),
        "{e}"
    );
}
