//! Programmatic dependent launch (sm_90+): overlap a kernel's prologue with its
//! predecessor's tail. Both ops are no-ops unless the launch sets programmatic stream
//! serialization.

use crate::ir::{Op, SyncOp};
use crate::trace::val::emit_effect;

/// `griddepcontrol.wait`: blocks until the prerequisite grids have completed and their
/// memory is visible. Place it before the first read of a predecessor's output.
#[track_caller]
pub fn grid_dependency_wait() {
    emit_effect(Op::Sync(SyncOp::GridDepWait));
}

/// `griddepcontrol.launch_dependents`: the dependent grid may start once every CTA has
/// executed this or exited.
#[track_caller]
pub fn launch_dependents() {
    emit_effect(Op::Sync(SyncOp::GridDepLaunchDependents));
}
