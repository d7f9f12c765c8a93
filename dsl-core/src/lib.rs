//! The core of the kestrel DSL.

pub mod target;

pub use target::Target;
