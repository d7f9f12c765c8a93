//! The core of the kestrel DSL.

pub mod layout;
pub mod target;

pub use target::Target;
