//! sm_90a (wgmma / GMMA) descriptors: the 64-bit shared-memory matrix descriptor and the
//! operand modes of `wgmma.mma_async`.
//!
//! Bit layout: PTX ISA §9.7.15.5.1.2.2 (matrix descriptor format); CUTLASS
//! `cute/arch/mma_sm90_desc.hpp` (`GmmaDescriptor`). Operand rules: PTX §9.7.15.5.2.

use std::fmt;

use super::canonical::Major;
use super::smem_desc::{DescFormat, SmemDesc};
use super::swizzle::Swizzle;
use super::{LayoutError, LayoutErrorKind, err};

/// The swizzle field of an sm_90 shared-memory descriptor (bits 62-63). Code `v` here is
/// the bit pattern of the sm_100 code `2v` at bits 61-63.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum GmmaLayoutType {
    /// 0: no swizzle (8 x 16-byte core matrices), `Sw<0,4,3>`.
    Interleave,
    /// 1: 128-byte swizzle, `Sw<3,4,3>`.
    B128,
    /// 2: 64-byte swizzle, `Sw<2,4,3>`.
    B64,
    /// 3: 32-byte swizzle, `Sw<1,4,3>`.
    B32,
}

impl GmmaLayoutType {
    /// The 2-bit code of bits 62-63.
    pub fn code(self) -> u64 {
        match self {
            GmmaLayoutType::Interleave => 0,
            GmmaLayoutType::B128 => 1,
            GmmaLayoutType::B64 => 2,
            GmmaLayoutType::B32 => 3,
        }
    }

    /// Every 2-bit code is valid.
    pub fn from_code(code: u64) -> GmmaLayoutType {
        match code & 0b11 {
            0 => GmmaLayoutType::Interleave,
            1 => GmmaLayoutType::B128,
            2 => GmmaLayoutType::B64,
            _ => GmmaLayoutType::B32,
        }
    }

    pub fn from_swizzle(swizzle: Swizzle) -> Result<GmmaLayoutType, LayoutError> {
        match swizzle {
            s if s == Swizzle::B128 => Ok(GmmaLayoutType::B128),
            s if s == Swizzle::B64 => Ok(GmmaLayoutType::B64),
            s if s == Swizzle::B32 => Ok(GmmaLayoutType::B32),
            s if s.is_identity() => Ok(GmmaLayoutType::Interleave),
            other => err(
                LayoutErrorKind::Unsupported,
                format!("{other} has no sm_90 descriptor layout type"),
            ),
        }
    }

    pub fn swizzle(self) -> Swizzle {
        match self {
            GmmaLayoutType::Interleave => Swizzle::NONE,
            GmmaLayoutType::B128 => Swizzle::B128,
            GmmaLayoutType::B64 => Swizzle::B64,
            GmmaLayoutType::B32 => Swizzle::B32,
        }
    }
}

/// The sm_90 (wgmma) shared-memory matrix descriptor, a 64-bit value: the fields of
/// [`SmemDesc`] and
///
/// | bits  | field |
/// |-------|-------|
/// | 62-63 | layout type: see [`GmmaLayoutType`] |
///
/// All other bits are 0; in particular bit 46, which the sm_100 format sets.
pub type GmmaSmemDesc = SmemDesc<GmmaFormat>;

/// The sm_90 descriptor's own field: its layout type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct GmmaFormat {
    layout_type: GmmaLayoutType,
}

impl DescFormat for GmmaFormat {
    type LayoutType = GmmaLayoutType;
    const NAME: &'static str = "GmmaSmemDesc";

    fn with_layout(layout_type: GmmaLayoutType) -> Self {
        GmmaFormat { layout_type }
    }

    fn layout_type(&self) -> GmmaLayoutType {
        self.layout_type
    }

    fn set_layout_type(self, layout_type: GmmaLayoutType) -> Self {
        GmmaFormat { layout_type }
    }

    fn layout_type_of(swizzle: Swizzle) -> Result<GmmaLayoutType, LayoutError> {
        GmmaLayoutType::from_swizzle(swizzle)
    }

    fn bits(&self) -> u64 {
        self.layout_type.code() << 62
    }

    /// Rejects set unused bits (bit 46 set means an sm_100 descriptor was given to wgmma).
    fn decode(bits: u64) -> Result<Self, LayoutError> {
        if bits >> 46 & 1 == 1 {
            return err(
                LayoutErrorKind::InvalidEncoding,
                format!(
                    "sm_90 shared-memory descriptor {bits:#018x}: bit 46 is set, which marks the \
                     sm_100 (tcgen05) format; wgmma descriptors keep bits 46-48 at 0"
                ),
            );
        }
        let unused = bits & (0b11 << 14 | 0b11 << 30 | 0b111 << 46 | 0x3FF << 52);
        if unused != 0 {
            return err(
                LayoutErrorKind::InvalidEncoding,
                format!(
                    "sm_90 shared-memory descriptor {bits:#018x}: unused bits {unused:#x} are set \
                     (bits 14-15, 30-31, 46-48 and 52-61 must be 0)"
                ),
            );
        }
        Ok(GmmaFormat {
            layout_type: GmmaLayoutType::from_code(bits >> 62),
        })
    }

    fn hardware_swizzle(&self) -> Result<Swizzle, LayoutError> {
        Ok(self.layout_type.swizzle())
    }

    fn fmt_rest(&self, base_offset: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            ", base_offset: {base_offset}, layout_type: {:?} }}",
            self.layout_type
        )
    }
}

/// The A/B type of a dense `wgmma.mma_async`, which fixes its K.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum WgmmaInput {
    F16,
    Bf16,
    Tf32,
    E4m3,
    E5m2,
}

impl WgmmaInput {
    /// K of one instruction: 32 bytes of each operand row.
    pub fn k(self) -> u32 {
        match self {
            WgmmaInput::F16 | WgmmaInput::Bf16 => 16,
            WgmmaInput::Tf32 => 8,
            WgmmaInput::E4m3 | WgmmaInput::E5m2 => 32,
        }
    }

    /// The PTX type suffix.
    pub fn ptx(self) -> &'static str {
        match self {
            WgmmaInput::F16 => "f16",
            WgmmaInput::Bf16 => "bf16",
            WgmmaInput::Tf32 => "tf32",
            WgmmaInput::E4m3 => "e4m3",
            WgmmaInput::E5m2 => "e5m2",
        }
    }

    fn is_16_bit(self) -> bool {
        matches!(self, WgmmaInput::F16 | WgmmaInput::Bf16)
    }
}

/// The accumulator type of `wgmma.mma_async`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum WgmmaAccumulator {
    F16,
    F32,
}

/// The shape and operand modes of one dense `wgmma.mma_async.sync.aligned.m64nNkK`:
/// `d, a_desc|{a regs}, b_desc, scale-d, imm-scale-a, imm-scale-b[, imm-trans-a][, imm-trans-b]`.
///
/// Rules (PTX §9.7.15.5.2): N is a multiple of 8 in 8..=256; an F16 accumulator only for
/// F16/E4M3/E5M2 inputs; the transpose immediates exist only for F16/BF16 and only for
/// operands read through a shared-memory descriptor (A from registers has no `imm-trans-a`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct WgmmaInstr {
    n: u32,
    input: WgmmaInput,
    accumulator: WgmmaAccumulator,
    a_in_registers: bool,
    a_major: Major,
    b_major: Major,
    negate_a: bool,
    negate_b: bool,
}

impl WgmmaInstr {
    /// `m64nNkK` with both operands K-major in shared memory, no negation.
    pub fn new(
        input: WgmmaInput,
        accumulator: WgmmaAccumulator,
        n: u32,
    ) -> Result<WgmmaInstr, LayoutError> {
        if !(8..=256).contains(&n) || n % 8 != 0 {
            return err(
                LayoutErrorKind::Unsupported,
                format!(
                    "wgmma.mma_async expects N to be a multiple of 8 from 8 to 256, got N = {n}"
                ),
            );
        }
        if accumulator == WgmmaAccumulator::F16
            && matches!(input, WgmmaInput::Bf16 | WgmmaInput::Tf32)
        {
            return err(
                LayoutErrorKind::Unsupported,
                format!(
                    "wgmma.mma_async with {} inputs accumulates in f32 only, got f16",
                    input.ptx()
                ),
            );
        }
        Ok(WgmmaInstr {
            n,
            input,
            accumulator,
            a_in_registers: false,
            a_major: Major::K,
            b_major: Major::K,
            negate_a: false,
            negate_b: false,
        })
    }

    fn check_transpose(&self, operand: &str, major: Major) -> Result<(), LayoutError> {
        if major == Major::MN && !self.input.is_16_bit() {
            return err(
                LayoutErrorKind::Unsupported,
                format!(
                    "wgmma.mma_async {operand}: MN-major (imm-trans = 1) needs f16 or bf16 \
                     inputs, got {}; store the operand K-major",
                    self.input.ptx()
                ),
            );
        }
        Ok(())
    }

    /// `imm-trans-a`: how A (`[64, K]`) is stored. MN-major needs 16-bit inputs and A in
    /// shared memory.
    pub fn with_a_major(self, a_major: Major) -> Result<WgmmaInstr, LayoutError> {
        self.check_transpose("A", a_major)?;
        if a_major == Major::MN && self.a_in_registers {
            return err(
                LayoutErrorKind::Unsupported,
                "wgmma.mma_async A: MN-major needs A in shared memory; A from registers has no \
                 imm-trans-a",
            );
        }
        Ok(WgmmaInstr { a_major, ..self })
    }

    /// `imm-trans-b`: how B (`[N, K]`) is stored. MN-major needs 16-bit inputs.
    pub fn with_b_major(self, b_major: Major) -> Result<WgmmaInstr, LayoutError> {
        self.check_transpose("B", b_major)?;
        Ok(WgmmaInstr { b_major, ..self })
    }

    /// Take A from registers (the `{a0, a1, a2, a3}` form) instead of a descriptor; A is
    /// then K-major by definition.
    pub fn with_a_in_registers(self) -> Result<WgmmaInstr, LayoutError> {
        if self.a_major == Major::MN {
            return err(
                LayoutErrorKind::Unsupported,
                "wgmma.mma_async A: A from registers has no imm-trans-a, but A was set MN-major",
            );
        }
        Ok(WgmmaInstr {
            a_in_registers: true,
            ..self
        })
    }

    /// `imm-scale-a = -1`.
    pub fn with_negate_a(self, negate_a: bool) -> WgmmaInstr {
        WgmmaInstr { negate_a, ..self }
    }

    /// `imm-scale-b = -1`.
    pub fn with_negate_b(self, negate_b: bool) -> WgmmaInstr {
        WgmmaInstr { negate_b, ..self }
    }

    pub fn n(&self) -> u32 {
        self.n
    }

    pub fn k(&self) -> u32 {
        self.input.k()
    }

    pub fn input(&self) -> WgmmaInput {
        self.input
    }

    pub fn accumulator(&self) -> WgmmaAccumulator {
        self.accumulator
    }

    pub fn a_in_registers(&self) -> bool {
        self.a_in_registers
    }

    pub fn a_major(&self) -> Major {
        self.a_major
    }

    pub fn b_major(&self) -> Major {
        self.b_major
    }

    /// `m64n128k16`.
    pub fn shape(&self) -> String {
        format!("m64n{}k{}", self.n, self.k())
    }

    /// Accumulator registers per thread: N/2 `.f32`, or N/4 `.f16x2`.
    pub fn accumulator_registers(&self) -> u32 {
        match self.accumulator {
            WgmmaAccumulator::F32 => self.n / 2,
            WgmmaAccumulator::F16 => self.n / 4,
        }
    }

    /// `imm-scale-a`: 1, or -1 to negate A.
    pub fn imm_scale_a(&self) -> i32 {
        if self.negate_a { -1 } else { 1 }
    }

    /// `imm-scale-b`: 1, or -1 to negate B.
    pub fn imm_scale_b(&self) -> i32 {
        if self.negate_b { -1 } else { 1 }
    }

    /// `imm-trans-a`, present only for 16-bit inputs with A in shared memory.
    pub fn imm_trans_a(&self) -> Option<u32> {
        (self.input.is_16_bit() && !self.a_in_registers).then(|| self.a_major.transpose_bit())
    }

    /// `imm-trans-b`, present only for 16-bit inputs.
    pub fn imm_trans_b(&self) -> Option<u32> {
        self.input.is_16_bit().then(|| self.b_major.transpose_bit())
    }
}
