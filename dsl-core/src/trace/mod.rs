//! Tracing: running a kernel's Rust body records the IR.
//!
//! Plain Rust values (integers, bools, the compile key, layouts) are compile-time constants
//! and fold away; DSL values ([`Val`], [`Pred`]) are registers and become instructions. A
//! trace runs on one thread at a time through a thread-local `Builder`; the `#[kernel]`
//! macro wraps the body in [`trace_kernel`].

pub(crate) mod builder;
pub mod control;
pub mod param;
pub mod smem;
pub mod val;

use std::fmt;

pub use builder::{current_target, trace_kernel};
pub(crate) use builder::{entry_special, entry_warp_id, with_builder};

pub use control::{Carry, Cond, DynRange, dyn_range};
pub use param::{E4m3, Element, GlobalPtr, KernelParam, Tensor};
pub use smem::{
    Index, SmemRegion, SmemTile, smem_alloc, smem_alloc_with_layout, smem_base, smem_bytes_free,
    smem_tile,
};
pub use val::{B16, Bf16x2, E4m3x4, F16x2, IntoVal, Literal, Number, Pred, Scalar, Val};

use crate::ir::SourceLoc;

/// One problem found while tracing, with where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub message: String,
    pub loc: SourceLoc,
    /// The stage comment in force, if any.
    pub stage: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.loc)?;
        if let Some(stage) = &self.stage {
            write!(f, " [stage {stage}]")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Why a kernel could not be traced: every problem found, in the order found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub kernel: String,
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tracing kernel `{}` failed with {} error(s):",
            self.kernel,
            self.diagnostics.len()
        )?;
        for d in &self.diagnostics {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for TraceError {}

/// Marks the start of a kernel stage: the emitter prints `// ---- {title}` and later ops
/// (and their errors) carry it.
#[track_caller]
pub fn stage(title: impl Into<String>) {
    let title = title.into();
    with_builder(|b| b.begin_stage(title));
}

/// A free comment printed in the PTX above the next instruction.
pub fn comment(text: impl Into<String>) {
    let text = text.into();
    with_builder(|b| b.comment(text));
}

/// Reports a trace-time error at the caller's location (tracing continues; the trace
/// fails at the end with every error found).
#[track_caller]
pub fn trace_error(message: impl Into<String>) {
    let loc = SourceLoc::caller();
    let message = message.into();
    with_builder(|b| b.error(message, loc));
}

/// Reports a trace-time error at `loc`: for code that found the caller's location earlier
/// (a closure cannot be `#[track_caller]`).
pub(crate) fn trace_error_at(message: impl Into<String>, loc: SourceLoc) {
    let message = message.into();
    with_builder(|b| b.error(message, loc));
}

/// The block shape (`.reqntid`). Every kernel declares it.
pub fn threads(x: u32, y: u32, z: u32) {
    with_builder(|b| b.launch.threads = [x, y, z]);
}

/// `.minnctapersm`: lets ptxas budget registers for this many resident CTAs per SM.
pub fn min_ctas_per_sm(n: u32) {
    with_builder(|b| b.launch.min_ctas_per_sm = Some(n));
}

/// `.maxnreg`: a register cap per thread.
pub fn max_regs(n: u32) {
    with_builder(|b| b.launch.max_regs = Some(n));
}

/// Fixes the cluster shape (`.reqnctapercluster`, `.explicitcluster`).
pub fn cluster_dims(x: u32, y: u32, z: u32) {
    with_builder(|b| b.launch.cluster = Some([x, y, z]));
}
