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

mod algebra;
mod composed;
mod int;
mod int_tuple;
mod swizzle;

pub use algebra::Layout;
pub use composed::ComposedLayout;
pub use int::{DynInt, Int, StaticOnly};
pub use int_tuple::IntTuple;
pub use swizzle::Swizzle;

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
