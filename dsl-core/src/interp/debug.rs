//! Debug hooks for kernel authors: a per-instruction trace of one thread, and snapshots of
//! a CTA's shared or tensor memory at stage boundaries. Both cost one predictable branch per
//! instruction when off.

use std::fmt;

use crate::ir::{Reg, SourceLoc, Ty};

/// Record every instruction one thread executes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRequest {
    /// `%ctaid` of the thread's CTA.
    pub block: [u32; 3],
    /// The thread's linear index in its CTA.
    pub thread: u32,
    /// Stop recording after this many entries.
    pub max_entries: usize,
}

/// One traced instruction: what ran and the values it wrote in the traced thread.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEntry {
    pub stage: Option<String>,
    pub op: &'static str,
    pub loc: SourceLoc,
    /// Destination registers with their types and new bits.
    pub values: Vec<(Reg, Ty, u64)>,
}

impl fmt::Display for TraceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = &self.stage {
            write!(f, "[{s}] ")?;
        }
        write!(f, "{} at {}", self.op, self.loc)?;
        for (r, ty, v) in &self.values {
            match ty {
                Ty::F32 => write!(f, " %{}={}", r.0, f32::from_bits(*v as u32))?,
                Ty::Pred => write!(f, " %{}={}", r.0, *v != 0)?,
                _ => write!(f, " %{}={v:#x}", r.0)?,
            }
        }
        Ok(())
    }
}

/// Which boundary of a stage a snapshot is taken at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StagePoint {
    /// When the first warp of the CTA enters the stage.
    Start,
    /// When the first warp of the CTA leaves it (reaches the next stage or exits).
    End,
}

/// What to copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotWhat {
    /// `bytes` bytes of dynamic shared memory from byte `offset`.
    Smem { offset: u32, bytes: u32 },
    /// Tensor-memory cells of lanes `lane..lane + lanes`, columns `col..col + cols`.
    Tmem {
        lane: u32,
        lanes: u32,
        col: u32,
        cols: u32,
    },
}

/// Copy part of a CTA's memory at a stage boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRequest {
    pub block: [u32; 3],
    /// The stage's title, as given to `trace::stage`.
    pub stage: String,
    pub at: StagePoint,
    pub what: SnapshotWhat,
}

/// The copied memory; `None` marks what was never written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotData {
    Smem(Vec<Option<u8>>),
    /// One row per lane.
    Tmem(Vec<Vec<Option<u32>>>),
}

/// A snapshot taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Index of its request in [`super::Options::snapshots`].
    pub request: usize,
    /// The warp whose arrival at the boundary took it.
    pub warp: u32,
    pub data: SnapshotData,
}
