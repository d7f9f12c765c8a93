//! Back ends that turn the IR into text for an assembler.

pub mod ptx;
