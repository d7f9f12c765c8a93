//! Filetests: small kernels in the IR's text form with their expected PTX and interpreter
//! results written out in the same file (`dsl-core/filetests/*.kir`).
//!
//! A file starts with directives, then the kernel, then the expectations:
//!
//! ```text
//! ; what the file checks
//! test compile target=sm_90a         ; one PTX expectation per line (target: the kernel's)
//! test interpret grid=1,1,1 cluster=2,1,1
//! arg x = [32] iota                  ; a tensor: extents, then iota | zeros | fill V | values V ...
//! arg n = 32                         ; a scalar
//! out y                              ; a tensor printed after the run
//!
//! kernel ...
//! }
//!
//! ; expect ptx sm_90a
//! ; ...
//! ; expect interpret
//! ; y[0] 0 1 2 ...
//! ```
//!
//! Everything from the first `; expect` line to the end is what the runner produces;
//! `KESTREL_BLESS=1` rewrites it.

pub mod diff;
pub mod format;
pub mod run;
