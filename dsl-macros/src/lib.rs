//! Procedural macros of the kestrel DSL.
