//! Decoding the real descriptor bits the MMAs take, and the canonical shared-memory layouts
//! they select. A wrong field gives a different layout, hence a wrong answer, as on the
//! hardware.
//!
//! Sources: PTX ISA 9.1 §9.7.16.4.1 (Table 40, SM100 shared-memory descriptor), §9.7.16.4.2
//! (Table 42, instruction descriptor), §9.7.16.3 (leading/stride byte offsets and the
//! canonical layouts), §9.7.15.5.1.2 (the same layouts for wgmma, SM90 descriptor), and
//! CUTLASS `cute/arch/mma_sm100_desc.hpp`, `mma_sm90_desc.hpp`.

use std::fmt;

/// Which dimension of an operand is contiguous in 16-byte chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Major {
    K,
    /// M for A, N for B ("transposed").
    Mn,
}

/// The swizzle a descriptor selects: `Swizzle<b, 4, 3>` on the byte address, with b = 3, 2,
/// 1 for 128, 64, 32 bytes (16-byte chunk index XOR the 128-byte row index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Swizzle {
    None,
    B32,
    B64,
    B128,
    /// 128-byte swizzle with 32-byte atomicity (SM100 code 1).
    B128Base32,
}

impl Swizzle {
    /// Bytes of one swizzle row (16 for the unswizzled core matrices).
    fn row_bytes(self) -> u32 {
        match self {
            Swizzle::None => 16,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 | Swizzle::B128Base32 => 128,
        }
    }

    /// The XOR applied to an absolute shared-memory byte address (PTX "Swizzle<b,4,3>"
    /// column of the canonical-layout table): bits 4.. of the chunk index ^= bits 7.. of
    /// the 128-byte row index, `b` bits.
    pub(crate) fn apply(self, addr: u32) -> u32 {
        let mask = match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 3,
            Swizzle::B128 | Swizzle::B128Base32 => 7,
        };
        addr ^ (((addr >> 7) & mask) << 4)
    }

    fn name(self) -> &'static str {
        match self {
            Swizzle::None => "SWIZZLE_NONE",
            Swizzle::B32 => "SWIZZLE_32B",
            Swizzle::B64 => "SWIZZLE_64B",
            Swizzle::B128 => "SWIZZLE_128B",
            Swizzle::B128Base32 => "SWIZZLE_128B_BASE32B",
        }
    }
}

/// A decoded shared-memory matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SmemDesc {
    /// Shared::cta byte address of the matrix start.
    pub(crate) start: u32,
    /// Leading-dimension byte offset.
    pub(crate) lbo: u32,
    /// Stride-dimension byte offset.
    pub(crate) sbo: u32,
    pub(crate) swizzle: Swizzle,
}

impl fmt::Display for SmemDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "start {:#x}, LBO {} B, SBO {} B, {}",
            self.start,
            self.lbo,
            self.sbo,
            self.swizzle.name()
        )
    }
}

/// `(x >> 4) & 0x3fff` fields at `lo`, back to bytes.
fn field14(d: u64, lo: u32) -> u32 {
    (((d >> lo) & 0x3fff) << 4) as u32
}

/// The SM100 (tcgen05) shared-memory descriptor, PTX Table 40:
/// 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 46-48 fixed 0b001, 49-51 base offset,
/// 52 LBO mode, 53-60 zero, 61-63 layout (0 none, 1 128B with 32B atoms, 2 128B, 4 64B,
/// 6 32B; 3, 5, 7 invalid). Bits 14-15 and 30-31 are outside every field and must be 0.
pub(crate) fn decode_sm100(d: u64) -> Result<SmemDesc, String> {
    let reserved = d & (0x3 << 14 | 0x3 << 30 | 0xff << 53);
    if reserved != 0 {
        return Err(format!(
            "reserved bits {reserved:#x} are set (bits 14-15, 30-31 and 53-60 must be 0)"
        ));
    }
    let fixed = (d >> 46) & 7;
    if fixed != 1 {
        return Err(format!(
            "bits 46-48 must hold the fixed value 0b001 of an SM100 descriptor, got {fixed:#05b} \
             (an SM90 wgmma descriptor has 0 there)"
        ));
    }
    let swizzle = match d >> 61 {
        0 => Swizzle::None,
        1 => Swizzle::B128Base32,
        2 => Swizzle::B128,
        4 => Swizzle::B64,
        6 => Swizzle::B32,
        other => return Err(format!("layout type {other} at bits 61-63 is invalid")),
    };
    check_common(d, swizzle)?;
    if (d >> 52) & 1 != 0 {
        return Err(
            "bit 52 selects the absolute-address LBO mode, which exists only on sm_103a".into(),
        );
    }
    Ok(SmemDesc {
        start: field14(d, 0),
        lbo: field14(d, 16),
        sbo: field14(d, 32),
        swizzle,
    })
}

/// The SM90 (wgmma) descriptor, PTX §9.7.15.5.1.2.2 / CUTLASS `GmmaDescriptor`: the same
/// address fields, base offset at 49-51, a 2-bit layout at 62-63 (0 none, 1 128B, 2 64B,
/// 3 32B), everything else reserved (bit 46 included).
pub(crate) fn decode_sm90(d: u64) -> Result<SmemDesc, String> {
    let reserved = d & (0x3 << 14 | 0x3 << 30 | 0x7 << 46 | 0x3ff << 52);
    if reserved != 0 {
        let hint = if (d >> 46) & 1 != 0 {
            " (bit 46 is the SM100 descriptor's fixed bit: this looks like a tcgen05 descriptor)"
        } else {
            ""
        };
        return Err(format!(
            "reserved bits {reserved:#x} are set (bits 14-15, 30-31, 46-48 and 52-61 must be 0){hint}"
        ));
    }
    let swizzle = match d >> 62 {
        0 => Swizzle::None,
        1 => Swizzle::B128,
        2 => Swizzle::B64,
        _ => Swizzle::B32,
    };
    check_common(d, swizzle)?;
    Ok(SmemDesc {
        start: field14(d, 0),
        lbo: field14(d, 16),
        sbo: field14(d, 32),
        swizzle,
    })
}

fn check_common(d: u64, swizzle: Swizzle) -> Result<(), String> {
    let base = (d >> 49) & 7;
    if base != 0 {
        // The base offset tells the hardware where a swizzle pattern that does not start on
        // its natural boundary begins; how the hardware folds it into the address is not
        // documented precisely enough to model, so the interpreter refuses it rather than
        // guess.
        return Err(format!(
            "base offset {base} (bits 49-51) is not modelled: align every swizzle atom to its \
             pattern boundary ({} bytes) and leave the base offset 0",
            match swizzle {
                Swizzle::B64 => 512,
                Swizzle::B32 => 256,
                _ => 1024,
            }
        ));
    }
    Ok(())
}

impl SmemDesc {
    /// The shared::cta byte address of element (`mn`, `k`) of a 16-bit operand tile read
    /// through this descriptor with `major`-ness, swizzle applied to the absolute address.
    ///
    /// The canonical layouts (PTX §9.7.16.3.3, T = 8 elements of 16 bits = 16 bytes), in
    /// bytes:
    /// - K-major, none: `((8,m),(T,2k)):((16,SBO),(2,LBO))`.
    /// - K-major, swizzled with R-byte rows: `((8,m),(T,2k)):((R,SBO),(2,16))`.
    /// - MN-major, none: `((T,1,m),(8,k)):((2,-,SBO),(16,LBO))`.
    /// - MN-major, swizzled: `((T,R/16,m),(8,k)):((2,16,LBO),(R,SBO))`.
    pub(crate) fn addr(&self, major: Major, mn: u32, k: u32) -> u32 {
        let row = self.swizzle.row_bytes();
        let raw = match (major, self.swizzle) {
            (Major::K, Swizzle::None) => {
                (mn / 8) * self.sbo + (k / 8) * self.lbo + (mn % 8) * 16 + (k % 8) * 2
            }
            (Major::K, _) => (mn / 8) * self.sbo + (mn % 8) * row + (k / 8) * 16 + (k % 8) * 2,
            (Major::Mn, Swizzle::None) => {
                (mn / 8) * self.sbo + (k / 8) * self.lbo + (k % 8) * 16 + (mn % 8) * 2
            }
            (Major::Mn, _) => {
                let per_row = row / 2;
                (mn / per_row) * self.lbo
                    + ((mn % per_row) / 8) * 16
                    + (mn % 8) * 2
                    + (k % 8) * row
                    + (k / 8) * self.sbo
            }
        };
        self.swizzle.apply(self.start.wrapping_add(raw))
    }
}

/// The element type of an MMA operand or accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    F16,
    Bf16,
    F32,
}

/// A decoded `.kind::f16` instruction descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InstrDesc {
    pub(crate) d: Elem,
    pub(crate) a: Elem,
    pub(crate) b: Elem,
    pub(crate) negate_a: bool,
    pub(crate) negate_b: bool,
    pub(crate) a_major: Major,
    pub(crate) b_major: Major,
    pub(crate) m: u32,
    pub(crate) n: u32,
}

/// The `.kind::f16` instruction descriptor, PTX Table 42: 0-1 sparsity selector, 2 sparse,
/// 3 saturate, 4-5 D format (0 F16, 1 F32), 6 reserved, 7-9 A format (0 F16, 1 BF16),
/// 10-12 B format, 13/14 negate A/B, 15/16 A/B major (0 K, 1 MN), 17-22 N >> 3,
/// 23 reserved, 24-28 M >> 4, 29 reserved, 30-31 max shift (`.ws` only).
/// Shapes (Table 39, dense, cta_group::1): M 64 or 128, N 8..=256 in steps of 8.
pub(crate) fn decode_idesc(i: u32) -> Result<InstrDesc, String> {
    let bit = |b: u32| (i >> b) & 1 != 0;
    if i & 0b11 != 0 || bit(2) {
        return Err("sparsity (bits 0-2) is not supported by a dense tcgen05.mma".into());
    }
    if bit(3) {
        return Err("bit 3 (saturate) applies to integer kinds only; kind::f16 needs 0".into());
    }
    if bit(6) || bit(23) || bit(29) {
        return Err("reserved bits 6, 23 and 29 must be 0".into());
    }
    if i >> 30 != 0 {
        return Err("bits 30-31 (max shift) are for tcgen05.mma.ws only; must be 0".into());
    }
    let d = match (i >> 4) & 3 {
        0 => Elem::F16,
        1 => Elem::F32,
        other => {
            return Err(format!(
                "D format {other} (bits 4-5) is not F16 (0) or F32 (1)"
            ));
        }
    };
    let ab = |field: u32, name: &str| match field {
        0 => Ok(Elem::F16),
        1 => Ok(Elem::Bf16),
        other => Err(format!(
            "{name} format {other} is not F16 (0) or BF16 (1) for kind::f16"
        )),
    };
    let a = ab((i >> 7) & 7, "A (bits 7-9)")?;
    let b = ab((i >> 10) & 7, "B (bits 10-12)")?;
    if a != b {
        return Err(format!(
            "A is {a:?} but B is {b:?}: kind::f16 takes one input type"
        ));
    }
    if d == Elem::F16 && a != Elem::F16 {
        return Err("an F16 accumulator needs F16 inputs (Table 39)".into());
    }
    let n = ((i >> 17) & 0x3f) << 3;
    let m = ((i >> 24) & 0x1f) << 4;
    if m != 64 && m != 128 {
        return Err(format!(
            "M = {m} (bits 24-28 hold M >> 4): cta_group::1 takes M = 64 or 128"
        ));
    }
    if !(8..=256).contains(&n) {
        return Err(format!(
            "N = {n} (bits 17-22 hold N >> 3): cta_group::1 takes N = 8..=256 in steps of 8"
        ));
    }
    let major = |b: bool| if b { Major::Mn } else { Major::K };
    Ok(InstrDesc {
        d,
        a,
        b,
        negate_a: bit(13),
        negate_b: bit(14),
        a_major: major(bit(15)),
        b_major: major(bit(16)),
        m,
        n,
    })
}
