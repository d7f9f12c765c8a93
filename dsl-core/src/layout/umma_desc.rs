//! sm_100a (tcgen05 / UMMA) descriptors: the 64-bit shared-memory matrix descriptor and the
//! 32-bit instruction descriptor of `tcgen05.mma.cta_group::1.kind::f16`.
//!
//! Bit layouts: PTX ISA §9.7.16.4.1 (Table 40) and §9.7.16.4.2 (Table 42); CUTLASS
//! `cute/arch/mma_sm100_desc.hpp` (`UMMA::SmemDescriptor`, `UMMA::InstrDescriptor`).

use std::fmt;

use super::canonical::Major;
use super::smem_desc::{DescFormat, SmemDesc};
use super::swizzle::Swizzle;
use super::{LayoutError, LayoutErrorKind, err};

/// The swizzle field of an sm_100 shared-memory descriptor (bits 61-63).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum UmmaLayoutType {
    /// 0: no swizzle (8 x 16-byte core matrices), `Sw<0,4,3>`.
    SwizzleNone,
    /// 1: 128-byte swizzle with 32-byte atomicity, `Sw<2,5,2>` (MN-major tf32 only).
    Swizzle128BBase32B,
    /// 2: 128-byte swizzle, `Sw<3,4,3>`.
    Swizzle128B,
    /// 4: 64-byte swizzle, `Sw<2,4,3>`.
    Swizzle64B,
    /// 6: 32-byte swizzle, `Sw<1,4,3>`.
    Swizzle32B,
}

impl UmmaLayoutType {
    /// The 3-bit code of bits 61-63.
    pub fn code(self) -> u64 {
        match self {
            UmmaLayoutType::SwizzleNone => 0,
            UmmaLayoutType::Swizzle128BBase32B => 1,
            UmmaLayoutType::Swizzle128B => 2,
            UmmaLayoutType::Swizzle64B => 4,
            UmmaLayoutType::Swizzle32B => 6,
        }
    }

    /// The layout type of a code; 3, 5 and 7 are invalid.
    pub fn from_code(code: u64) -> Result<UmmaLayoutType, LayoutError> {
        Ok(match code {
            0 => UmmaLayoutType::SwizzleNone,
            1 => UmmaLayoutType::Swizzle128BBase32B,
            2 => UmmaLayoutType::Swizzle128B,
            4 => UmmaLayoutType::Swizzle64B,
            6 => UmmaLayoutType::Swizzle32B,
            _ => {
                return err(
                    LayoutErrorKind::InvalidEncoding,
                    format!(
                        "sm_100 descriptor layout type {code} (bits 61-63) is invalid: expected 0 \
                         (none), 1 (128B_BASE32B), 2 (128B), 4 (64B) or 6 (32B)"
                    ),
                );
            }
        })
    }

    /// The layout type for an MMA swizzle (`Sw<3,4,3>` -> `SWIZZLE_128B`, ...).
    pub fn from_swizzle(swizzle: Swizzle) -> Result<UmmaLayoutType, LayoutError> {
        match swizzle {
            s if s == Swizzle::B128 => Ok(UmmaLayoutType::Swizzle128B),
            s if s == Swizzle::B64 => Ok(UmmaLayoutType::Swizzle64B),
            s if s == Swizzle::B32 => Ok(UmmaLayoutType::Swizzle32B),
            s if s.is_identity() => Ok(UmmaLayoutType::SwizzleNone),
            other => err(
                LayoutErrorKind::Unsupported,
                format!("{other} has no sm_100 descriptor layout type"),
            ),
        }
    }

    /// The swizzle the hardware applies; `SWIZZLE_128B_BASE32B` is not modelled.
    pub fn swizzle(self) -> Result<Swizzle, LayoutError> {
        match self {
            UmmaLayoutType::SwizzleNone => Ok(Swizzle::NONE),
            UmmaLayoutType::Swizzle128B => Ok(Swizzle::B128),
            UmmaLayoutType::Swizzle64B => Ok(Swizzle::B64),
            UmmaLayoutType::Swizzle32B => Ok(Swizzle::B32),
            UmmaLayoutType::Swizzle128BBase32B => err(
                LayoutErrorKind::Unsupported,
                "SWIZZLE_128B_BASE32B (MN-major tf32) operands are not modelled",
            ),
        }
    }

    /// The CUTLASS name, `SWIZZLE_128B`.
    pub fn name(self) -> &'static str {
        match self {
            UmmaLayoutType::SwizzleNone => "SWIZZLE_NONE",
            UmmaLayoutType::Swizzle128BBase32B => "SWIZZLE_128B_BASE32B",
            UmmaLayoutType::Swizzle128B => "SWIZZLE_128B",
            UmmaLayoutType::Swizzle64B => "SWIZZLE_64B",
            UmmaLayoutType::Swizzle32B => "SWIZZLE_32B",
        }
    }
}

/// How bits 16-29 are read (bit 52).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum LboMode {
    /// 0: LBO is a byte offset relative to the start address.
    Relative,
    /// 1: LBO is an absolute address (48-byte K tiles, sm_103a only; not modelled).
    Absolute,
}

/// The sm_100 (tcgen05) shared-memory matrix descriptor, a 64-bit value: the fields of
/// [`SmemDesc`] and
///
/// | bits  | field |
/// |-------|-------|
/// | 46-48 | fixed 0b001 (CUTLASS `version_ = 1`) |
/// | 52    | LBO mode: 0 relative, 1 absolute |
/// | 53-60 | 0 |
/// | 61-63 | layout type: see [`UmmaLayoutType`] |
pub type UmmaSmemDesc = SmemDesc<UmmaFormat>;

/// The sm_100 descriptor's own fields: its LBO mode and layout type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct UmmaFormat {
    lbo_mode: LboMode,
    layout_type: UmmaLayoutType,
}

/// Bits 46-48 of every sm_100 descriptor.
const SM100_FIXED_BITS: u64 = 1 << 46;

impl DescFormat for UmmaFormat {
    type LayoutType = UmmaLayoutType;
    const NAME: &'static str = "UmmaSmemDesc";

    fn with_layout(layout_type: UmmaLayoutType) -> Self {
        UmmaFormat {
            lbo_mode: LboMode::Relative,
            layout_type,
        }
    }

    fn layout_type(&self) -> UmmaLayoutType {
        self.layout_type
    }

    fn set_layout_type(self, layout_type: UmmaLayoutType) -> Self {
        UmmaFormat {
            layout_type,
            ..self
        }
    }

    fn layout_type_of(swizzle: Swizzle) -> Result<UmmaLayoutType, LayoutError> {
        UmmaLayoutType::from_swizzle(swizzle)
    }

    fn bits(&self) -> u64 {
        SM100_FIXED_BITS
            | u64::from(self.lbo_mode == LboMode::Absolute) << 52
            | self.layout_type.code() << 61
    }

    /// Rejects set unused bits, a wrong fixed field (46-48 must be 0b001) and invalid
    /// layout types.
    fn decode(bits: u64) -> Result<Self, LayoutError> {
        let invalid = |what: String| {
            err(
                LayoutErrorKind::InvalidEncoding,
                format!("sm_100 shared-memory descriptor {bits:#018x}: {what}"),
            )
        };
        let unused = bits & (0b11 << 14 | 0b11 << 30 | 0xFF << 53);
        if unused != 0 {
            return invalid(format!(
                "unused bits {unused:#x} are set (bits 14-15, 30-31 and 53-60 must be 0)"
            ));
        }
        let fixed = bits >> 46 & 0b111;
        if fixed != 0b001 {
            return invalid(format!(
                "bits 46-48 are {fixed:#05b}, expected the fixed value 0b001 (a descriptor with \
                 them 0 is the sm_90 wgmma format)"
            ));
        }
        let layout_type = UmmaLayoutType::from_code(bits >> 61)
            .map_err(|e| e.context(format!("sm_100 shared-memory descriptor {bits:#018x}")))?;
        Ok(UmmaFormat {
            lbo_mode: if bits >> 52 & 1 == 1 {
                LboMode::Absolute
            } else {
                LboMode::Relative
            },
            layout_type,
        })
    }

    /// Absolute LBO mode and `SWIZZLE_128B_BASE32B` are not modelled.
    fn hardware_swizzle(&self) -> Result<Swizzle, LayoutError> {
        if self.lbo_mode == LboMode::Absolute {
            return err(
                LayoutErrorKind::Unsupported,
                "absolute LBO mode is not modelled",
            );
        }
        self.layout_type.swizzle()
    }

    fn fmt_rest(&self, base_offset: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            ", version: 1, base_offset: {base_offset}, lbo_mode: {:?}, layout_type: {} }}",
            self.lbo_mode,
            self.layout_type.name()
        )
    }
}

impl SmemDesc<UmmaFormat> {
    /// Bit 52.
    pub fn with_lbo_mode(self, lbo_mode: LboMode) -> UmmaSmemDesc {
        let format = UmmaFormat {
            lbo_mode,
            ..*self.format()
        };
        self.with_format(format)
    }

    pub fn lbo_mode(&self) -> LboMode {
        self.format().lbo_mode
    }
}

/// The A/B element format of `kind::f16` (idesc bits 7-9 and 10-12).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum UmmaInput {
    /// 0
    F16,
    /// 1
    Bf16,
}

/// The accumulator (D) format (idesc bits 4-5).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum UmmaAccumulator {
    /// 0
    F16,
    /// 1
    F32,
}

/// The instruction descriptor of `tcgen05.mma.cta_group::1.kind::f16`, a 32-bit value:
///
/// | bits  | field |
/// |-------|-------|
/// | 0-1   | sparsity selector (0: dense) |
/// | 2     | sparse flag (0: dense) |
/// | 3     | saturate (integer kinds only; 0) |
/// | 4-5   | D format: 0 F16, 1 F32 |
/// | 6     | reserved |
/// | 7-9   | A format: 0 F16, 1 BF16 |
/// | 10-12 | B format: 0 F16, 1 BF16 |
/// | 13    | negate A |
/// | 14    | negate B |
/// | 15    | A major: 0 K, 1 M |
/// | 16    | B major: 0 K, 1 N |
/// | 17-22 | N >> 3 |
/// | 23    | reserved |
/// | 24-28 | M >> 4 |
/// | 29    | reserved |
/// | 30-31 | max shift (`.ws` only; 0) |
///
/// Dense `cta_group::1` shapes only: M in {64, 128}, N a multiple of 8 in 8..=256, K 16.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UmmaInstrDesc {
    accumulator: UmmaAccumulator,
    a_format: UmmaInput,
    b_format: UmmaInput,
    negate_a: bool,
    negate_b: bool,
    a_major: Major,
    b_major: Major,
    m: u32,
    n: u32,
}

impl UmmaInstrDesc {
    /// An `m x n` (x 16) MMA with the given formats, both operands K-major, no negation.
    pub fn new(
        m: u32,
        n: u32,
        a_format: UmmaInput,
        b_format: UmmaInput,
        accumulator: UmmaAccumulator,
    ) -> Result<UmmaInstrDesc, LayoutError> {
        check_umma_shape(m, n)?;
        Ok(UmmaInstrDesc {
            accumulator,
            a_format,
            b_format,
            negate_a: false,
            negate_b: false,
            a_major: Major::K,
            b_major: Major::K,
            m,
            n,
        })
    }

    /// bf16 x bf16 -> f32, both K-major (vLLM's `make_bf16_idesc(M, N)`).
    pub fn bf16(m: u32, n: u32) -> Result<UmmaInstrDesc, LayoutError> {
        UmmaInstrDesc::new(m, n, UmmaInput::Bf16, UmmaInput::Bf16, UmmaAccumulator::F32)
    }

    /// Bit 15: how A (`[M, K]`) is stored.
    pub fn with_a_major(self, a_major: Major) -> UmmaInstrDesc {
        UmmaInstrDesc { a_major, ..self }
    }

    /// Bit 16: how B (`[N, K]`) is stored.
    pub fn with_b_major(self, b_major: Major) -> UmmaInstrDesc {
        UmmaInstrDesc { b_major, ..self }
    }

    /// Bit 13: use -A.
    pub fn with_negate_a(self, negate_a: bool) -> UmmaInstrDesc {
        UmmaInstrDesc { negate_a, ..self }
    }

    /// Bit 14: use -B.
    pub fn with_negate_b(self, negate_b: bool) -> UmmaInstrDesc {
        UmmaInstrDesc { negate_b, ..self }
    }

    pub fn m(&self) -> u32 {
        self.m
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    /// K of one instruction: 16 for `kind::f16`.
    pub fn k(&self) -> u32 {
        16
    }

    pub fn accumulator(&self) -> UmmaAccumulator {
        self.accumulator
    }

    pub fn a_format(&self) -> UmmaInput {
        self.a_format
    }

    pub fn b_format(&self) -> UmmaInput {
        self.b_format
    }

    pub fn negate_a(&self) -> bool {
        self.negate_a
    }

    pub fn negate_b(&self) -> bool {
        self.negate_b
    }

    pub fn a_major(&self) -> Major {
        self.a_major
    }

    pub fn b_major(&self) -> Major {
        self.b_major
    }

    /// The 32-bit descriptor, passed to `tcgen05.mma` as a `.b32` register.
    pub fn bits(&self) -> u32 {
        let format = |f: UmmaInput| match f {
            UmmaInput::F16 => 0,
            UmmaInput::Bf16 => 1,
        };
        let accumulator = match self.accumulator {
            UmmaAccumulator::F16 => 0,
            UmmaAccumulator::F32 => 1,
        };
        accumulator << 4
            | format(self.a_format) << 7
            | format(self.b_format) << 10
            | u32::from(self.negate_a) << 13
            | u32::from(self.negate_b) << 14
            | self.a_major.transpose_bit() << 15
            | self.b_major.transpose_bit() << 16
            | (self.n >> 3) << 17
            | (self.m >> 4) << 24
    }

    /// Decodes descriptor bits; rejects sparse, saturating and `.ws` encodings, set reserved
    /// bits, formats outside `kind::f16` and shapes `cta_group::1` does not have.
    pub fn from_bits(bits: u32) -> Result<UmmaInstrDesc, LayoutError> {
        fn invalid<T>(bits: u32, what: String) -> Result<T, LayoutError> {
            err(
                LayoutErrorKind::InvalidEncoding,
                format!("tcgen05 kind::f16 instruction descriptor {bits:#010x}: {what}"),
            )
        }
        if bits & 0b111 != 0 {
            return invalid(
                bits,
                "bits 0-2 select a sparse MMA; only dense MMAs are supported".into(),
            );
        }
        if bits & 1 << 3 != 0 {
            return invalid(bits, "bit 3 (saturate) is for integer kinds only".into());
        }
        let reserved = bits & (1 << 6 | 1 << 23 | 1 << 29);
        if reserved != 0 {
            return invalid(
                bits,
                format!("reserved bits {reserved:#x} (6, 23, 29) are set"),
            );
        }
        if bits >> 30 != 0 {
            return invalid(
                bits,
                "bits 30-31 (max shift) are for tcgen05.mma.ws only".into(),
            );
        }
        let accumulator = match bits >> 4 & 0b11 {
            0 => UmmaAccumulator::F16,
            1 => UmmaAccumulator::F32,
            code => {
                return invalid(
                    bits,
                    format!(
                        "D format {code} (bits 4-5): kind::f16 accumulates in F16 (0) or F32 (1)"
                    ),
                );
            }
        };
        let format = |shift: u32, name: &str| match bits >> shift & 0b111 {
            0 => Ok(UmmaInput::F16),
            1 => Ok(UmmaInput::Bf16),
            code => invalid(
                bits,
                format!(
                    "{name} format {code} (bits {shift}-{}): kind::f16 takes F16 (0) or BF16 (1)",
                    shift + 2
                ),
            ),
        };
        let m = (bits >> 24 & 0x1F) << 4;
        let n = (bits >> 17 & 0x3F) << 3;
        check_umma_shape(m, n).map_err(|e| {
            LayoutError::new(
                LayoutErrorKind::InvalidEncoding,
                format!("instruction descriptor {bits:#010x}: {}", e.message()),
            )
        })?;
        Ok(UmmaInstrDesc {
            accumulator,
            a_format: format(7, "A")?,
            b_format: format(10, "B")?,
            negate_a: bits >> 13 & 1 == 1,
            negate_b: bits >> 14 & 1 == 1,
            a_major: Major::from_transpose_bit(bits >> 15 & 1),
            b_major: Major::from_transpose_bit(bits >> 16 & 1),
            m,
            n,
        })
    }
}

/// PTX §9.7.16.2.1 Table 39, dense `kind::f16`, `cta_group::1`.
fn check_umma_shape(m: u32, n: u32) -> Result<(), LayoutError> {
    if m != 64 && m != 128 {
        return err(
            LayoutErrorKind::Unsupported,
            format!(
                "tcgen05.mma.cta_group::1 kind::f16 expects M = 64 or 128, got M = {m}{}",
                if m == 256 {
                    " (M = 256 needs cta_group::2, which this project does not use)"
                } else {
                    ""
                }
            ),
        );
    }
    if !(8..=256).contains(&n) || n % 8 != 0 {
        return err(
            LayoutErrorKind::Unsupported,
            format!(
                "tcgen05.mma.cta_group::1 kind::f16 expects N to be a multiple of 8 from 8 to \
                 256, got N = {n}"
            ),
        );
    }
    Ok(())
}

impl fmt::Debug for UmmaInstrDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UmmaInstrDesc {{ bits: {:#010x}, kind: f16, d_format: {:?}, a_format: {:?}, \
             b_format: {:?}, negate_a: {}, negate_b: {}, a_major: {:?}, b_major: {:?}, n: {}, \
             m: {} }}",
            self.bits(),
            self.accumulator,
            self.a_format,
            self.b_format,
            self.negate_a,
            self.negate_b,
            self.a_major,
            self.b_major,
            self.n,
            self.m
        )
    }
}
