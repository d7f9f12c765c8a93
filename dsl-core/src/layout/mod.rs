//! CuTe-style layouts and the MMA shared-memory descriptors derived from them.
//!
//! A [`Layout`] maps a (possibly nested) coordinate to an offset: `(shape):(stride)`, printed
//! the way CuTe prints it, e.g. `((8,16),(64,8)):((64,512),(1,8192))`. Shape and stride
//! entries are [`Int`]s: static (known at trace time) or dynamic (a runtime register); the
//! algebra (composition, complement, divide, coalesce) needs static layouts, evaluation does
//! not. Evaluating at a coordinate that mixes static integers and runtime values folds every
//! static part at trace time and calls the [`DynInt`] operations only for what is left.
//!
//! Units, fixed once for the whole module:
//! - a [`Layout`] of a shared-memory tile maps coordinates to **element** offsets;
//! - a [`Swizzle`] acts on **byte** offsets, as the hardware (TMA, tcgen05, wgmma) and
//!   CuTe's swizzled smem pointers do, so `Sw<3,4,3>` is 128-byte swizzling whatever the
//!   element size;
//! - a [`ComposedLayout`] is `swizzle ∘ (+offset bytes) ∘ (layout × element bytes)`: its
//!   byte offsets are relative to an address aligned to the swizzle pattern (1024 B for
//!   SW128), which is where the runtime tile base must sit.
//!
//! On top of that: [`canonical`] builds and recognises the PTX canonical operand layouts
//! (K-major / MN-major, SW128 / SW64 / SW32 / interleave), [`UmmaSmemDesc`] and
//! [`GmmaSmemDesc`] derive the sm_100 / sm_90 shared-memory descriptors from such a layout
//! and decode descriptor bits back into the layout the hardware reads, [`UmmaInstrDesc`] and
//! [`WgmmaInstr`] describe the MMA instructions, and [`fragment`] gives the accumulator
//! fragments (wgmma registers, TMEM lanes and columns) as layouts.
//!
//! ```
//! use dsl_core::layout::{canonical, Int, IntTuple, Major, Swizzle, UmmaSmemDesc};
//! # use dsl_core::layout::{DynInt, StaticOnly};
//! # /// Stands in for the DSL's register values.
//! # #[derive(Clone, Debug)] struct Reg(String);
//! # impl From<StaticOnly> for Reg { fn from(n: StaticOnly) -> Reg { match n {} } }
//! # impl DynInt for Reg {
//! #     fn add(self, o: Reg) -> Reg { Reg(format!("({} + {})", self.0, o.0)) }
//! #     fn mul(self, o: Reg) -> Reg { Reg(format!("({} * {})", self.0, o.0)) }
//! #     fn add_const(self, c: i64) -> Reg { Reg(format!("({} + {c})", self.0)) }
//! #     fn mul_const(self, c: i64) -> Reg { Reg(format!("({} * {c})", self.0)) }
//! #     fn div_const(self, c: i64) -> Reg { Reg(format!("({} / {c})", self.0)) }
//! #     fn rem_const(self, c: i64) -> Reg { Reg(format!("({} % {c})", self.0)) }
//! #     fn shr_const(self, b: u32) -> Reg { Reg(format!("({} >> {b})", self.0)) }
//! #     fn and_const(self, m: i64) -> Reg { Reg(format!("({} & {m})", self.0)) }
//! #     fn xor(self, o: Reg) -> Reg { Reg(format!("({} ^ {})", self.0, o.0)) }
//! # }
//! # let r = Reg("r".into());
//! // The seed's KV tile: bf16 [128, 512], K-major, 128-byte swizzle.
//! let kv = canonical::k_major(Swizzle::B128, 128, 512, 2)?;
//! assert_eq!(kv.to_string(), "Sw<3,4,3> o smem_ptr[16b](+0) o ((8,16),(64,8)):((64,512),(1,8192))");
//! // Byte offset of (r, 70) with r a runtime value: only r's arithmetic and the XOR remain.
//! let byte = kv.byte_offset(&IntTuple::tuple([Int::Dynamic(r).into(), IntTuple::from(70)]))?;
//! // The tcgen05 descriptor, derived from the layout; K-step 5 (k = 80) moves the start only.
//! let op = canonical::recognise(&kv)?;
//! let step5 = UmmaSmemDesc::for_operand(&op)?.with_start_address(op.k_step_start(5)?)?;
//! assert_eq!(step5.start_address(), 16384 + 32);
//! // Decoding the bits gives back the layout the hardware reads.
//! let hw = UmmaSmemDesc::from_bits(step5.bits())?.operand_layout(Major::K, 128, 16, 2)?;
//! assert_eq!(hw.byte_offset_at(&[3, 7])?, kv.byte_offset_at(&[3, 80 + 7])?);
//! # let _ = byte;
//! # Ok::<(), dsl_core::layout::LayoutError>(())
//! ```

mod algebra;
pub mod canonical;
mod composed;
pub mod fragment;
mod gmma_desc;
mod int;
mod int_tuple;
mod smem_desc;
mod swizzle;
mod umma_desc;

pub use algebra::Layout;
pub use canonical::{CanonicalOperand, Major};
pub use composed::ComposedLayout;
pub use gmma_desc::{
    GmmaFormat, GmmaLayoutType, GmmaSmemDesc, WgmmaAccumulator, WgmmaInput, WgmmaInstr,
};
pub(crate) use int::Affine;
pub use int::{DynInt, Int, StaticOnly};
pub use int_tuple::IntTuple;
pub use smem_desc::{DescFormat, SmemDesc};
pub use swizzle::Swizzle;
pub use umma_desc::{
    LboMode, UmmaAccumulator, UmmaFormat, UmmaInput, UmmaInstrDesc, UmmaLayoutType, UmmaSmemDesc,
};

use std::fmt;

/// What went wrong in a layout or descriptor operation; the message says what was expected
/// and what was got.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{message}")]
pub struct LayoutError {
    kind: LayoutErrorKind,
    message: String,
}

/// The class of a [`LayoutError`], for callers that react differently to each.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LayoutErrorKind {
    /// The operation needs trace-time values and got a runtime one.
    NotStatic,
    /// A coordinate or tuple does not have the structure of the shape it indexes.
    Incongruent,
    /// A static coordinate lies outside its mode.
    OutOfRange,
    /// An algebra operation needs one extent or stride to divide another.
    NotDivisible,
    /// A layout is not one of the PTX canonical MMA operand layouts.
    NotCanonical,
    /// An address or offset breaks an alignment rule.
    Misaligned,
    /// Descriptor bits hold a reserved or invalid code, or a value does not fit its field.
    InvalidEncoding,
    /// An MMA shape, type or mode the instruction does not support.
    Unsupported,
    /// Text that does not parse as a layout or int-tuple.
    Parse,
}

impl LayoutError {
    pub(crate) fn new(kind: LayoutErrorKind, message: impl Into<String>) -> Self {
        LayoutError {
            kind,
            message: message.into(),
        }
    }

    pub fn kind(&self) -> LayoutErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with `context` (which operation, on which layout) put in front.
    pub(crate) fn context(self, context: impl fmt::Display) -> Self {
        LayoutError {
            kind: self.kind,
            message: format!("{context}: {}", self.message),
        }
    }
}

pub(crate) fn err<T>(kind: LayoutErrorKind, message: impl Into<String>) -> Result<T, LayoutError> {
    Err(LayoutError::new(kind, message))
}
