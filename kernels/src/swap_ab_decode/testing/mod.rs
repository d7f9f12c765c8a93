//! The kernel's test harness (the `testing` feature): the f64 reference, the numerics
//! contract, the named and generated cases and the case files.

pub mod case_file;
pub mod cases;
pub mod numerics;
pub mod reference;
