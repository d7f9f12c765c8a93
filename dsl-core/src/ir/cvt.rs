//! Conversions between f32 and the narrow formats of the KV cache and the MXFP8 output, and
//! packed bf16x2 arithmetic. Packed values live in b32 (or b16) registers; in a pair, `lo`
//! is the element in the low half.

use super::{Operand, Reg, Requirement, visit_operand};
use crate::target::Capability;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bf16x2Arith {
    /// `mul.rn.bf16x2`.
    Mul,
    /// `fma.rn.bf16x2` (a * b + c).
    Fma,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CvtOp {
    /// `cvt.rn.bf16x2.f32 dst, hi, lo` (b32 <- f32, f32).
    F32x2ToBf16x2 { dst: Reg, lo: Operand, hi: Operand },
    /// `cvt.rn.satfinite.e4m3x2.f32 dst, hi, lo` (b16 <- f32, f32).
    F32x2ToE4m3x2 { dst: Reg, lo: Operand, hi: Operand },
    /// `cvt.rn.f16x2.e4m3x2 dst, src` (b32 <- b16): exact.
    E4m3x2ToF16x2 { dst: Reg, src: Reg },
    /// `cvt.rn.f16x2.e2m1x2 dst, b` where `b` is byte `byte` of the b32 `src`: exact.
    E2m1x2ToF16x2 { dst: Reg, src: Reg, byte: u8 },
    /// `cvt.rp.satfinite.ue8m0x2.f32 dst, hi, lo` (b16 <- f32, f32): scale bytes rounded up.
    F32x2ToUe8m0x2 { dst: Reg, lo: Operand, hi: Operand },
    /// `cvt.rn.bf16x2.ue8m0x2 dst, src` (b32 <- b16): 2^(e-127) per half.
    Ue8m0x2ToBf16x2 { dst: Reg, src: Reg },
    /// `cvt.f32.f16 dst, src` (f32 <- b16): exact.
    F16ToF32 { dst: Reg, src: Reg },
    /// Packed bf16x2 arithmetic, round to nearest, subnormals kept.
    Bf16x2 {
        op: Bf16x2Arith,
        dst: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
    },
}

impl CvtOp {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            CvtOp::F32x2ToBf16x2 { dst, lo, hi }
            | CvtOp::F32x2ToE4m3x2 { dst, lo, hi }
            | CvtOp::F32x2ToUe8m0x2 { dst, lo, hi } => {
                visit_operand(lo, f);
                visit_operand(hi, f);
                f(*dst, true);
            }
            CvtOp::E4m3x2ToF16x2 { dst, src }
            | CvtOp::E2m1x2ToF16x2 { dst, src, .. }
            | CvtOp::Ue8m0x2ToBf16x2 { dst, src }
            | CvtOp::F16ToF32 { dst, src } => {
                f(*src, false);
                f(*dst, true);
            }
            CvtOp::Bf16x2 { dst, a, b, c, .. } => {
                visit_operand(a, f);
                visit_operand(b, f);
                visit_operand(c, f);
                f(*dst, true);
            }
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        match self {
            CvtOp::F32x2ToBf16x2 { .. } | CvtOp::F16ToF32 { .. } => Requirement::all(7, 0),
            CvtOp::F32x2ToE4m3x2 { .. } | CvtOp::E4m3x2ToF16x2 { .. } | CvtOp::Bf16x2 { .. } => {
                Requirement::all(7, 8)
            }
            CvtOp::E2m1x2ToF16x2 { .. } => Requirement::with(Capability::NativeE2m1Cvt, 8, 6),
            CvtOp::F32x2ToUe8m0x2 { .. } | CvtOp::Ue8m0x2ToBf16x2 { .. } => {
                Requirement::with(Capability::Ue8m0Cvt, 8, 6)
            }
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            CvtOp::F32x2ToBf16x2 { .. } => "cvt.rn.bf16x2.f32",
            CvtOp::F32x2ToE4m3x2 { .. } => "cvt.rn.satfinite.e4m3x2.f32",
            CvtOp::E4m3x2ToF16x2 { .. } => "cvt.rn.f16x2.e4m3x2",
            CvtOp::E2m1x2ToF16x2 { .. } => "cvt.rn.f16x2.e2m1x2",
            CvtOp::F32x2ToUe8m0x2 { .. } => "cvt.rp.satfinite.ue8m0x2.f32",
            CvtOp::Ue8m0x2ToBf16x2 { .. } => "cvt.rn.bf16x2.ue8m0x2",
            CvtOp::F16ToF32 { .. } => "cvt.f32.f16",
            CvtOp::Bf16x2 { op, .. } => match op {
                Bf16x2Arith::Mul => "mul.rn.bf16x2",
                Bf16x2Arith::Fma => "fma.rn.bf16x2",
            },
        }
    }
}
