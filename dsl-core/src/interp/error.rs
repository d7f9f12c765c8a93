//! What a run reports when it cannot finish: argument and launch mistakes before anything
//! runs, and faults and deadlocks found while running, each pinned to the op, its stage,
//! its source line, the CTA and the thread, like compute-sanitizer's reports.

use std::fmt;

use crate::ir::SourceLoc;

/// Why a kernel could not be run to the end.
#[derive(Debug, thiserror::Error)]
pub enum InterpError {
    /// The arguments do not match the kernel's parameters.
    #[error("invalid arguments for kernel `{kernel}`: {message}")]
    Args { kernel: String, message: String },
    /// The launch configuration does not fit the kernel.
    #[error("invalid launch of kernel `{kernel}`: {message}")]
    Launch { kernel: String, message: String },
    /// The kernel breaks IR rules (`ir::verify`), which the interpreter checks first.
    #[error(transparent)]
    Invalid(#[from] crate::ir::verify::VerifyError),
    /// An op the interpreter does not run yet.
    #[error("kernel `{kernel}` cannot be interpreted: {message} (at {loc})")]
    Compile {
        kernel: String,
        message: String,
        loc: SourceLoc,
    },
    /// An op did something the hardware forbids or leaves undefined.
    #[error("{0}")]
    Fault(Box<Fault>),
    /// No warp can make progress but some have not exited.
    #[error("{0}")]
    Deadlock(Box<Deadlock>),
}

impl InterpError {
    /// The fault, when this is one.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            InterpError::Fault(f) => Some(f),
            _ => None,
        }
    }

    /// The deadlock, when this is one.
    pub fn deadlock(&self) -> Option<&Deadlock> {
        match self {
            InterpError::Deadlock(d) => Some(d),
            _ => None,
        }
    }
}

/// The class of a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// An access outside every buffer, or outside the shared/tensor memory of its CTA.
    OutOfBounds,
    /// An access not aligned to its full size.
    Misaligned,
    /// A read of shared or tensor memory that nothing wrote.
    Uninitialized,
    /// Integer division or remainder by zero (PTX leaves the result unspecified).
    DivideByZero,
    /// A barrier reached by only part of a warp, or by a warp set that cannot complete it.
    DivergentBarrier,
    /// A warp-collective (`.sync.aligned`) op executed with some lanes inactive, or with
    /// operands that must be warp-uniform differing between lanes.
    Collective,
    /// An op issued by more than one thread where the hardware expects one.
    MultipleIssuers,
    /// A tensor-memory access outside the lanes the warp may touch or outside an allocation.
    Tmem,
    /// A descriptor or instruction descriptor with illegal or unsupported fields.
    Descriptor,
    /// mbarrier misuse: uninitialised, over-arrived, bad count, clobbered by a store.
    Mbarrier,
    /// Cluster barrier misuse (wait without arrive, double arrive).
    ClusterBarrier,
    /// A register written by an asynchronous op read before the op's wait.
    AsyncRegister,
    /// Shared memory written by threads and read by the async proxy without a proxy fence
    /// and a barrier in between, or overwritten while an MMA may still read it.
    AsyncProxyRace,
    /// Two accesses of the same shared-memory bytes by different warps, one a write, that
    /// no barrier, mbarrier or cluster barrier orders.
    SharedRace,
    /// A resource still held when its CTA exited (TMEM columns).
    Leak,
    /// The instruction budget ran out (a runtime loop that does not end).
    Watchdog,
    /// A valid PTX feature the interpreter does not model.
    Unsupported,
}

impl FaultKind {
    fn title(self) -> &'static str {
        match self {
            FaultKind::OutOfBounds => "out-of-bounds access",
            FaultKind::Misaligned => "misaligned access",
            FaultKind::Uninitialized => "read of uninitialised memory",
            FaultKind::DivideByZero => "integer division by zero",
            FaultKind::DivergentBarrier => "divergent barrier",
            FaultKind::Collective => "invalid warp-collective op",
            FaultKind::MultipleIssuers => "op issued by more than one thread",
            FaultKind::Tmem => "invalid tensor memory access",
            FaultKind::Descriptor => "invalid descriptor",
            FaultKind::Mbarrier => "invalid mbarrier use",
            FaultKind::ClusterBarrier => "invalid cluster barrier use",
            FaultKind::AsyncRegister => "register read before its asynchronous op completed",
            FaultKind::AsyncProxyRace => "async-proxy race on shared memory",
            FaultKind::SharedRace => "shared-memory race",
            FaultKind::Leak => "resource leak",
            FaultKind::Watchdog => "instruction budget exhausted",
            FaultKind::Unsupported => "unsupported feature",
        }
    }
}

/// A CTA of the launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtaId {
    /// `%ctaid`.
    pub block: [u32; 3],
    /// `%cluster_ctarank`.
    pub rank: u32,
}

impl fmt::Display for CtaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.block;
        write!(f, "block ({x},{y},{z}) (cluster rank {})", self.rank)
    }
}

/// Where an op ran: the op, its stage and source line, its CTA and warp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The op's PTX mnemonic.
    pub op: &'static str,
    /// The stage comment in force when the op was traced.
    pub stage: Option<String>,
    pub loc: SourceLoc,
    pub cta: CtaId,
    /// Warp index in the CTA.
    pub warp: u32,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.op)?;
        if let Some(stage) = &self.stage {
            write!(f, " [stage `{stage}`]")?;
        }
        write!(f, " at {}", self.loc)
    }
}

/// A fault: what went wrong, where, in which thread, at which address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub site: Site,
    /// The first offending thread (linear index in the CTA), when one thread is at fault.
    pub thread: Option<u32>,
    /// `%tid` of that thread.
    pub tid: Option<[u32; 3]>,
    /// The offending address in its state space, when there is one.
    pub address: Option<u64>,
    /// The details, in a sentence or two.
    pub message: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {}", self.kind.title(), self.message)?;
        write!(f, "    at {}", self.site)?;
        match (self.thread, self.tid) {
            (Some(t), Some([x, y, z])) => write!(
                f,
                "\n    by thread {t} (tid ({x},{y},{z}), warp {}, lane {}) in {}",
                self.site.warp,
                t % 32,
                self.site.cta
            )?,
            _ => write!(f, "\n    by warp {} in {}", self.site.warp, self.site.cta)?,
        }
        if let Some(a) = self.address {
            write!(f, "\n    address {a:#x}")?;
        }
        Ok(())
    }
}

/// One warp that cannot proceed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedWarp {
    pub site: Site,
    /// What it waits for, and the state of that object.
    pub waiting_for: String,
}

/// Every warp that is blocked when nothing can proceed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    pub kernel: String,
    pub blocked: Vec<BlockedWarp>,
    /// Warps that exited, per CTA, as "block (x,y,z): warps [..]" lines (they may be the
    /// missing arrivals).
    pub exited: Vec<String>,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "deadlock in kernel `{}`: {} warp(s) are blocked and none can proceed",
            self.kernel,
            self.blocked.len()
        )?;
        for b in &self.blocked {
            write!(
                f,
                "\n  {} warp {}: {} waits for {}",
                b.site.cta, b.site.warp, b.site, b.waiting_for
            )?;
        }
        for e in &self.exited {
            write!(f, "\n  exited: {e}")?;
        }
        Ok(())
    }
}
