//! Scalar arithmetic, logic, comparison, selection and plain conversions.

use super::{Operand, Reg, Requirement, Ty, visit_operand};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// Arithmetic negation (`neg`).
    Neg,
    /// Bitwise complement; on predicates, logical not.
    Not,
    Abs,
    /// `ex2.approx.ftz.f32`: 2^x.
    Ex2Approx,
    /// `rcp.rn.f32`: 1/x, IEEE round to nearest.
    Rcp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    /// Low half of the product for integers, `mul.rn` for floats.
    Mul,
    /// High half of the integer product.
    MulHi,
    /// `div` (integer, truncating) or `div.rn.f32`.
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    /// Shift left; the amount is a u32.
    Shl,
    /// Shift right, arithmetic for signed types; the amount is a u32.
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Rounding of a conversion that can be inexact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// Round to nearest even (`.rn`, `.rni` for float to integer).
    Nearest,
    /// Toward zero (`.rz`, `.rzi`).
    Zero,
    /// Toward -inf (`.rm`, `.rmi`).
    Down,
    /// Toward +inf (`.rp`, `.rpi`).
    Up,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AluOp {
    /// `mov`: copies between registers of the same width (also how merges are written).
    Mov { dst: Reg, src: Operand },
    Unary {
        op: UnaryOp,
        ty: Ty,
        dst: Reg,
        a: Operand,
    },
    Binary {
        op: BinaryOp,
        ty: Ty,
        dst: Reg,
        a: Operand,
        b: Operand,
    },
    /// `mul.wide`: the full 64-bit product of two 32-bit integers of type `ty`.
    MulWide {
        ty: Ty,
        dst: Reg,
        a: Operand,
        b: Operand,
    },
    /// `fma.rn.f32` for floats, `mad.lo` for integers: a * b + c.
    Fma {
        ty: Ty,
        dst: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
    },
    /// `setp`: compare two values of type `ty` into a predicate.
    Setp {
        cmp: CmpOp,
        ty: Ty,
        dst: Reg,
        a: Operand,
        b: Operand,
    },
    /// `selp`: `dst = cond ? a : b`.
    Selp {
        ty: Ty,
        dst: Reg,
        a: Operand,
        b: Operand,
        cond: Reg,
    },
    /// `cvt`: integer widening/narrowing, integer <-> float.
    Convert {
        dst_ty: Ty,
        src_ty: Ty,
        rounding: Rounding,
        dst: Reg,
        src: Operand,
    },
    /// Reinterprets the bits of a register of the same width (`mov.b32`, `mov.b64`).
    BitCast { dst: Reg, src: Reg },
    /// `mov.b32 d, {lo, hi}` (two b16 halves) or `mov.b64 d, {lo, hi}` (two 32-bit halves).
    Pack { dst: Reg, lo: Operand, hi: Operand },
    /// `mov.b32 {lo, hi}, s` / `mov.b64 {lo, hi}, s`.
    Unpack { lo: Reg, hi: Reg, src: Reg },
    /// `prmt.b32 d, a, b, selector`: byte permute of the 8 bytes {b, a}.
    Prmt {
        dst: Reg,
        a: Operand,
        b: Operand,
        selector: Operand,
    },
}

impl AluOp {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            AluOp::Mov { dst, src } => {
                visit_operand(src, f);
                f(*dst, true);
            }
            AluOp::Unary { dst, a, .. } => {
                visit_operand(a, f);
                f(*dst, true);
            }
            AluOp::Binary { dst, a, b, .. }
            | AluOp::MulWide { dst, a, b, .. }
            | AluOp::Setp { dst, a, b, .. } => {
                visit_operand(a, f);
                visit_operand(b, f);
                f(*dst, true);
            }
            AluOp::Fma { dst, a, b, c, .. } => {
                visit_operand(a, f);
                visit_operand(b, f);
                visit_operand(c, f);
                f(*dst, true);
            }
            AluOp::Selp {
                dst, a, b, cond, ..
            } => {
                visit_operand(a, f);
                visit_operand(b, f);
                f(*cond, false);
                f(*dst, true);
            }
            AluOp::Convert { dst, src, .. } => {
                visit_operand(src, f);
                f(*dst, true);
            }
            AluOp::BitCast { dst, src } => {
                f(*src, false);
                f(*dst, true);
            }
            AluOp::Pack { dst, lo, hi } => {
                visit_operand(lo, f);
                visit_operand(hi, f);
                f(*dst, true);
            }
            AluOp::Unpack { lo, hi, src } => {
                f(*src, false);
                f(*lo, true);
                f(*hi, true);
            }
            AluOp::Prmt {
                dst,
                a,
                b,
                selector,
            } => {
                visit_operand(a, f);
                visit_operand(b, f);
                visit_operand(selector, f);
                f(*dst, true);
            }
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        Requirement::all(7, 0)
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            AluOp::Mov { .. } => "mov",
            AluOp::Unary { op, .. } => match op {
                UnaryOp::Neg => "neg",
                UnaryOp::Not => "not",
                UnaryOp::Abs => "abs",
                UnaryOp::Ex2Approx => "ex2.approx",
                UnaryOp::Rcp => "rcp",
            },
            AluOp::Binary { op, .. } => match op {
                BinaryOp::Add => "add",
                BinaryOp::Sub => "sub",
                BinaryOp::Mul => "mul",
                BinaryOp::MulHi => "mul.hi",
                BinaryOp::Div => "div",
                BinaryOp::Rem => "rem",
                BinaryOp::Min => "min",
                BinaryOp::Max => "max",
                BinaryOp::And => "and",
                BinaryOp::Or => "or",
                BinaryOp::Xor => "xor",
                BinaryOp::Shl => "shl",
                BinaryOp::Shr => "shr",
            },
            AluOp::MulWide { .. } => "mul.wide",
            AluOp::Fma { .. } => "fma",
            AluOp::Setp { .. } => "setp",
            AluOp::Selp { .. } => "selp",
            AluOp::Convert { .. } => "cvt",
            AluOp::BitCast { .. } => "mov (bit cast)",
            AluOp::Pack { .. } => "mov (pack)",
            AluOp::Unpack { .. } => "mov (unpack)",
            AluOp::Prmt { .. } => "prmt",
        }
    }
}
