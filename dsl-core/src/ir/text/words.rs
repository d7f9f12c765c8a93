//! The keywords of the text form for the IR's small enums, one table per enum: the same
//! table prints and parses, and its printing `match` is exhaustive, so a new variant cannot
//! be forgotten by either side.

use crate::Target;
use crate::ir::{
    AccessTy, ArriveSemantics, AtomOrder, CmpOp, ElemTy, Rounding, ShflMode, Space, SpecialReg, Ty,
};

/// An enum with one keyword per variant.
pub(crate) trait Word: Sized + Copy {
    /// What the keyword names, for messages (`a register type`).
    const WHAT: &'static str;
    /// Every keyword, for messages.
    const WORDS: &'static [&'static str];
    fn word(self) -> &'static str;
    fn from_word(s: &str) -> Option<Self>;
}

macro_rules! words {
    ($ty:ty, $what:literal { $($v:path => $s:literal),* $(,)? }) => {
        impl Word for $ty {
            const WHAT: &'static str = $what;
            const WORDS: &'static [&'static str] = &[$($s),*];
            fn word(self) -> &'static str {
                match self {
                    $($v => $s),*
                }
            }
            fn from_word(s: &str) -> Option<Self> {
                match s {
                    $($s => Some($v),)*
                    _ => None,
                }
            }
        }
    };
}

words!(Ty, "a register type" {
    Ty::Pred => "pred",
    Ty::B16 => "b16",
    Ty::B32 => "b32",
    Ty::U32 => "u32",
    Ty::S32 => "s32",
    Ty::U64 => "u64",
    Ty::S64 => "s64",
    Ty::F32 => "f32",
});

words!(ElemTy, "an element type" {
    ElemTy::U8 => "u8",
    ElemTy::I32 => "i32",
    ElemTy::I64 => "i64",
    ElemTy::U32 => "u32",
    ElemTy::F32 => "f32",
    ElemTy::Bf16 => "bf16",
    ElemTy::E4m3 => "e4m3",
});

words!(Target, "a target" {
    Target::Sm90a => "sm_90a",
    Target::Sm100a => "sm_100a",
});

words!(Space, "a state space" {
    Space::Global => "global",
    Space::Shared => "shared",
    Space::SharedCluster => "shared::cluster",
});

words!(AccessTy, "an access width" {
    AccessTy::U8 => "u8",
    AccessTy::U16 => "u16",
    AccessTy::B32 => "b32",
    AccessTy::B64 => "b64",
});

words!(Rounding, "a rounding mode" {
    Rounding::Nearest => "rn",
    Rounding::Zero => "rz",
    Rounding::Down => "rm",
    Rounding::Up => "rp",
});

words!(CmpOp, "a comparison" {
    CmpOp::Eq => "eq",
    CmpOp::Ne => "ne",
    CmpOp::Lt => "lt",
    CmpOp::Le => "le",
    CmpOp::Gt => "gt",
    CmpOp::Ge => "ge",
});

words!(ShflMode, "a shuffle mode" {
    ShflMode::Bfly => "bfly",
    ShflMode::Idx => "idx",
    ShflMode::Up => "up",
    ShflMode::Down => "down",
});

words!(AtomOrder, "an atomic's ordering" {
    AtomOrder::Relaxed => "relaxed",
    AtomOrder::AcqRel => "acq_rel",
});

words!(ArriveSemantics, "a cluster-arrive ordering" {
    ArriveSemantics::Release => "release",
    ArriveSemantics::Relaxed => "relaxed",
});

words!(SpecialReg, "a special register" {
    SpecialReg::TidX => "tid.x",
    SpecialReg::TidY => "tid.y",
    SpecialReg::TidZ => "tid.z",
    SpecialReg::NtidX => "ntid.x",
    SpecialReg::CtaidX => "ctaid.x",
    SpecialReg::CtaidY => "ctaid.y",
    SpecialReg::CtaidZ => "ctaid.z",
    SpecialReg::NctaidX => "nctaid.x",
    SpecialReg::NctaidY => "nctaid.y",
    SpecialReg::NctaidZ => "nctaid.z",
    SpecialReg::LaneId => "laneid",
    SpecialReg::ClusterCtaRank => "cluster_ctarank",
    SpecialReg::ClusterNctaRank => "cluster_nctarank",
});
