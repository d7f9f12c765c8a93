//! The TMA pipeline: stages filled by copies that complete on `full[s]` with expect-tx
//! bytes, emptied by the consumers' release on `empty[s]`.

use std::cell::Cell;

use super::PipelineState;
use crate::arch::mbarrier::{Mbarrier, init_fence};
use crate::arch::memory::Smem;
use crate::arch::sm100::tcgen05;
use crate::ir::SourceLoc;
use crate::trace::{smem_alloc, trace_error_at};

/// How consumers hand a stage back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Release {
    /// `consumer_arrivals` threads each arrive on `empty[s]` (CUTLASS `PipelineTmaAsync`).
    Arrive,
    /// One thread commits its tcgen05 MMAs to `empty[s]`, which arrives when they are done
    /// reading the stage (CUTLASS `PipelineTmaUmmaAsync`).
    Tcgen05Commit,
}

/// `stages` shared-memory stages, each filled by one or more TMA (or bulk) copies of
/// `tx_bytes` in all, released by the consumers. Make it at the top of the kernel (it
/// allocates its mbarriers and computes their addresses), [`TmaPipeline::init`] it from
/// one thread, then publish the inits with a barrier before any role uses it.
#[derive(Clone, Debug)]
pub struct TmaPipeline {
    name: String,
    stages: u32,
    tx_bytes: u32,
    consumer_arrivals: u32,
    release: Release,
    full: Smem,
    empty: Smem,
    initialised: Cell<bool>,
}

impl TmaPipeline {
    /// The TMA flavour: `consumer_arrivals` threads release each stage (for example one
    /// elected thread per consumer warp, after its MMAs on the stage have completed).
    #[track_caller]
    pub fn new(name: &str, stages: u32, tx_bytes: u32, consumer_arrivals: u32) -> Self {
        Self::make(name, stages, tx_bytes, consumer_arrivals, Release::Arrive)
    }

    /// The tcgen05 flavour: the MMA-issuing thread releases each stage with
    /// `tcgen05.commit`.
    #[track_caller]
    pub fn umma(name: &str, stages: u32, tx_bytes: u32) -> Self {
        Self::make(name, stages, tx_bytes, 1, Release::Tcgen05Commit)
    }

    #[track_caller]
    fn make(name: &str, stages: u32, tx_bytes: u32, arrivals: u32, release: Release) -> Self {
        let loc = SourceLoc::caller();
        if stages == 0 || tx_bytes == 0 || arrivals == 0 || tx_bytes >= 1 << 20 {
            trace_error_at(
                format!(
                    "pipeline `{name}`: {stages} stage(s) of {tx_bytes} bytes released by \
                     {arrivals} arrival(s); each must be positive and a stage below 1 MiB (the \
                     mbarrier's transaction range)"
                ),
                loc,
            );
        }
        let full = smem_alloc(&format!("{name}.full"), 8 * stages, 8).addr();
        let empty = smem_alloc(&format!("{name}.empty"), 8 * stages, 8).addr();
        TmaPipeline {
            name: name.to_string(),
            stages,
            tx_bytes,
            consumer_arrivals: arrivals,
            release,
            full: Smem::new(full.value(), 0),
            empty: Smem::new(empty.value(), 0),
            initialised: Cell::new(false),
        }
    }

    pub fn stages(&self) -> u32 {
        self.stages
    }

    /// Bytes each stage's copies complete on its `full` barrier.
    pub fn tx_bytes(&self) -> u32 {
        self.tx_bytes
    }

    /// Initialises every barrier (`full` for one producer arrival, `empty` for the
    /// consumers' releases) and fences the inits. One thread runs it.
    #[track_caller]
    pub fn init(&self) {
        for s in 0..self.stages as i64 {
            Mbarrier::at(self.full + 8 * s).init(1u32);
            Mbarrier::at(self.empty + 8 * s).init(self.consumer_arrivals);
        }
        init_fence();
        self.initialised.set(true);
    }

    /// A fresh state for the producer role.
    #[track_caller]
    pub fn producer_start(&self) -> PipelineState {
        PipelineState::producer_start(self.stages)
    }

    /// A fresh state for a consumer role.
    #[track_caller]
    pub fn consumer_start(&self) -> PipelineState {
        PipelineState::consumer_start(self.stages)
    }

    /// Producer: waits until stage `st` is empty, arms its `full` barrier for
    /// [`TmaPipeline::tx_bytes`] and returns it for the copies to complete on.
    #[track_caller]
    pub fn producer_acquire(&self, st: &PipelineState) -> Mbarrier {
        self.check(st, "producer_acquire");
        self.empty(st).wait(st.phase());
        let full = self.full(st);
        full.arrive_expect_tx(self.tx_bytes);
        full
    }

    /// Consumer: waits until stage `st` is full.
    #[track_caller]
    pub fn consumer_wait(&self, st: &PipelineState) {
        self.check(st, "consumer_wait");
        self.full(st).wait(st.phase());
    }

    /// Consumer: hands stage `st` back to the producer. In the TMA flavour every one of the
    /// `consumer_arrivals` threads calls it once its reads of the stage are complete (for
    /// wgmma: after a `wait_group` that covers them); in the tcgen05 flavour the thread
    /// that issued the stage's MMAs calls it right after issuing them.
    #[track_caller]
    pub fn consumer_release(&self, st: &PipelineState) {
        self.check(st, "consumer_release");
        match self.release {
            Release::Arrive => self.empty(st).arrive(),
            Release::Tcgen05Commit => tcgen05::commit(self.empty(st)),
        }
    }

    /// Producer, before it exits: waits until the consumers have released every stage, so
    /// no copy or release is still in flight on this CTA's barriers.
    #[track_caller]
    pub fn producer_tail(&self, st: PipelineState) {
        self.check(&st, "producer_tail");
        let mut st = st;
        for _ in 0..self.stages {
            self.empty(&st).wait(st.phase());
            st = st.advance();
        }
    }

    /// The `full` barrier of stage `st`.
    #[track_caller]
    pub fn full(&self, st: &PipelineState) -> Mbarrier {
        Mbarrier::at(self.full + st.index() * 8u32)
    }

    /// The `empty` barrier of stage `st`.
    #[track_caller]
    pub fn empty(&self, st: &PipelineState) -> Mbarrier {
        Mbarrier::at(self.empty + st.index() * 8u32)
    }

    /// Misuse visible at trace time: a state of another pipeline's depth, or a wait on
    /// barriers that were never initialised (a phase that is never armed hangs the GPU).
    #[track_caller]
    fn check(&self, st: &PipelineState, what: &str) {
        let loc = SourceLoc::caller();
        if !self.initialised.get() {
            trace_error_at(
                format!(
                    "pipeline `{}`: {what} before `init()`; its barriers would never complete a \
                     phase (call init from one thread, then a barrier, before the roles start)",
                    self.name
                ),
                loc,
            );
        }
        if st.stages() != self.stages {
            trace_error_at(
                format!(
                    "pipeline `{}` has {} stages, but {what} got a state of {} stages",
                    self.name,
                    self.stages,
                    st.stages()
                ),
                loc,
            );
        }
    }
}
