//! Where a role is in a pipeline: a stage index and the phase parity to wait for.

use crate::ir::Reg;
use crate::trace::{Carry, Val};

/// A stage index in `0..stages` and the parity of the mbarrier phase this role waits for
/// at that stage. Both are runtime values, carried by the loops that walk the pipeline.
#[derive(Clone, Copy, Debug)]
pub struct PipelineState {
    stages: u32,
    index: Val<u32>,
    phase: Val<u32>,
}

impl PipelineState {
    /// The producer's start: stage 0, phase 1 (a fresh mbarrier passes a wait for the
    /// parity of its "preceding" phase at once, and the buffers start empty).
    #[track_caller]
    pub fn producer_start(stages: u32) -> Self {
        PipelineState::at(stages, 0, 1)
    }

    /// A consumer's start: stage 0, phase 0 (wait for the first fill).
    #[track_caller]
    pub fn consumer_start(stages: u32) -> Self {
        PipelineState::at(stages, 0, 0)
    }

    #[track_caller]
    fn at(stages: u32, index: u32, phase: u32) -> Self {
        PipelineState {
            stages,
            index: Val::constant(index),
            phase: Val::constant(phase),
        }
    }

    pub fn stages(&self) -> u32 {
        self.stages
    }

    /// The current stage.
    pub fn index(&self) -> Val<u32> {
        self.index
    }

    /// The parity of the phase to wait for at the current stage.
    pub fn phase(&self) -> Val<u32> {
        self.phase
    }

    /// The next stage; the phase flips when the index wraps.
    #[track_caller]
    pub fn advance(self) -> Self {
        let next = self.index + 1;
        let wraps = next.eq(self.stages);
        PipelineState {
            stages: self.stages,
            index: wraps.select(0u32, next),
            phase: wraps.select(self.phase ^ 1, self.phase),
        }
    }
}

impl Carry for PipelineState {
    fn regs(&self, out: &mut Vec<Reg>) {
        out.push(self.index.reg());
        out.push(self.phase.reg());
    }

    fn rebuild(&self, regs: &mut dyn Iterator<Item = Reg>) -> Self {
        PipelineState {
            stages: self.stages,
            index: self.index.rebuild(regs),
            phase: self.phase.rebuild(regs),
        }
    }

    fn static_diff(&self, other: &Self) -> Option<String> {
        (self.stages != other.stages).then(|| {
            format!(
                "a {}-stage pipeline state became {}",
                self.stages, other.stages
            )
        })
    }
}
