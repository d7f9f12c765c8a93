//! Thread identity, warp collectives, CTA barriers, memory fences and programmatic
//! dependent launch.

use super::{Operand, Reg, Requirement, visit_operand};
use crate::target::Capability;

/// A special register read with `mov.u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialReg {
    TidX,
    TidY,
    TidZ,
    NtidX,
    CtaidX,
    CtaidY,
    CtaidZ,
    NctaidX,
    NctaidY,
    NctaidZ,
    LaneId,
    /// `%cluster_ctarank`: the CTA's linear rank in its cluster.
    ClusterCtaRank,
    /// `%cluster_nctarank`: CTAs in the cluster.
    ClusterNctaRank,
}

impl SpecialReg {
    pub fn ptx(self) -> &'static str {
        match self {
            SpecialReg::TidX => "%tid.x",
            SpecialReg::TidY => "%tid.y",
            SpecialReg::TidZ => "%tid.z",
            SpecialReg::NtidX => "%ntid.x",
            SpecialReg::CtaidX => "%ctaid.x",
            SpecialReg::CtaidY => "%ctaid.y",
            SpecialReg::CtaidZ => "%ctaid.z",
            SpecialReg::NctaidX => "%nctaid.x",
            SpecialReg::NctaidY => "%nctaid.y",
            SpecialReg::NctaidZ => "%nctaid.z",
            SpecialReg::LaneId => "%laneid",
            SpecialReg::ClusterCtaRank => "%cluster_ctarank",
            SpecialReg::ClusterNctaRank => "%cluster_nctarank",
        }
    }
}

/// `shfl.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShflMode {
    /// Read from lane `laneid ^ b`.
    Bfly,
    /// Read from lane `b`.
    Idx,
    /// Read from lane `laneid - b` (own value when out of range).
    Up,
    /// Read from lane `laneid + b` (own value when out of range).
    Down,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceKind {
    /// `fence.proxy.async.shared::cta`: generic-proxy SMEM writes become visible to the
    /// async proxy (tcgen05, wgmma, TMA).
    ProxyAsyncSharedCta,
    /// `fence.acq_rel.cluster`.
    AcqRelCluster,
    /// `fence.acq_rel.gpu`: orders the thread's accesses for every thread of the grid.
    AcqRelGpu,
    /// `fence.mbarrier_init.release.cluster`: mbarrier inits become visible cluster-wide.
    MbarrierInit,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SyncOp {
    ReadSpecial {
        dst: Reg,
        reg: SpecialReg,
    },
    /// `bar.sync id;`: every thread of the CTA.
    BarSync {
        id: u32,
    },
    /// `bar.sync id, threads;` or `bar.arrive id, threads;`: a named barrier between a
    /// subset of the CTA (`threads`, a multiple of 32, counts both sides). `bar.arrive`
    /// does not wait.
    NamedBarrier {
        id: u32,
        threads: u32,
        wait: bool,
    },
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 regs;`: the warpgroup's register budget
    /// becomes `regs` per thread.
    SetMaxNreg {
        regs: u32,
        increase: bool,
    },
    /// `shfl.sync.mode.b32 dst, src, b, c, 0xffffffff` with the full warp participating.
    Shfl {
        mode: ShflMode,
        dst: Reg,
        src: Reg,
        b: Operand,
        /// The c operand: clamp in bits 4:0, segment mask in bits 12:8.
        c: u32,
    },
    /// `vote.sync.ballot.b32 dst, p, 0xffffffff`.
    Ballot {
        dst: Reg,
        pred: Reg,
    },
    /// `elect.sync _|dst, 0xffffffff`: true in exactly one active lane of the warp.
    Elect {
        dst: Reg,
    },
    Fence(FenceKind),
    /// `griddepcontrol.wait`: block until the prerequisite grids completed (PDL).
    GridDepWait,
    /// `griddepcontrol.launch_dependents`: allow the dependent grid to be scheduled.
    GridDepLaunchDependents,
}

impl SyncOp {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            SyncOp::ReadSpecial { dst, .. } | SyncOp::Elect { dst } => f(*dst, true),
            SyncOp::Shfl { dst, src, b, .. } => {
                f(*src, false);
                visit_operand(b, f);
                f(*dst, true);
            }
            SyncOp::Ballot { dst, pred } => {
                f(*pred, false);
                f(*dst, true);
            }
            SyncOp::BarSync { .. }
            | SyncOp::NamedBarrier { .. }
            | SyncOp::SetMaxNreg { .. }
            | SyncOp::Fence(_)
            | SyncOp::GridDepWait
            | SyncOp::GridDepLaunchDependents => {}
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        match self {
            SyncOp::ReadSpecial {
                reg: SpecialReg::ClusterCtaRank | SpecialReg::ClusterNctaRank,
                ..
            } => Requirement::with(Capability::Cluster, 7, 8),
            SyncOp::ReadSpecial { .. } | SyncOp::BarSync { .. } => Requirement::all(7, 0),
            SyncOp::NamedBarrier { .. } => Requirement::all(7, 0),
            SyncOp::SetMaxNreg { .. } => Requirement::with(Capability::Setmaxnreg, 8, 0),
            SyncOp::Shfl { .. } | SyncOp::Ballot { .. } => Requirement::all(7, 0),
            SyncOp::Elect { .. } => Requirement::with(Capability::ElectSync, 8, 0),
            SyncOp::Fence(FenceKind::AcqRelCluster) => Requirement::with(Capability::Cluster, 7, 8),
            SyncOp::Fence(FenceKind::MbarrierInit) => Requirement::with(Capability::Cluster, 8, 0),
            SyncOp::Fence(FenceKind::AcqRelGpu) => Requirement::all(7, 0),
            SyncOp::Fence(FenceKind::ProxyAsyncSharedCta) => {
                Requirement::with(Capability::AsyncProxy, 8, 0)
            }
            SyncOp::GridDepWait | SyncOp::GridDepLaunchDependents => {
                Requirement::with(Capability::GridDepControl, 7, 8)
            }
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            SyncOp::ReadSpecial { .. } => "mov (special register)",
            SyncOp::BarSync { .. } => "bar.sync",
            SyncOp::NamedBarrier { wait: true, .. } => "bar.sync (named)",
            SyncOp::NamedBarrier { wait: false, .. } => "bar.arrive",
            SyncOp::SetMaxNreg { increase: true, .. } => "setmaxnreg.inc",
            SyncOp::SetMaxNreg {
                increase: false, ..
            } => "setmaxnreg.dec",
            SyncOp::Shfl { .. } => "shfl.sync",
            SyncOp::Ballot { .. } => "vote.sync.ballot",
            SyncOp::Elect { .. } => "elect.sync",
            SyncOp::Fence(FenceKind::ProxyAsyncSharedCta) => "fence.proxy.async.shared::cta",
            SyncOp::Fence(FenceKind::AcqRelCluster) => "fence.acq_rel.cluster",
            SyncOp::Fence(FenceKind::AcqRelGpu) => "fence.acq_rel.gpu",
            SyncOp::Fence(FenceKind::MbarrierInit) => "fence.mbarrier_init.release.cluster",
            SyncOp::GridDepWait => "griddepcontrol.wait",
            SyncOp::GridDepLaunchDependents => "griddepcontrol.launch_dependents",
        }
    }
}
