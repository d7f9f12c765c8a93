//! The op set, by hardware family. Each function checks its arguments at trace time and
//! records one or a few IR ops; ops a target lacks are trace errors naming op and target.

pub mod cluster;
pub mod copy;
pub mod cvt;
pub mod matrix;
pub mod mbarrier;
pub mod memory;
pub mod operand;
pub mod pdl;
pub mod sm100;
pub mod sm90;
pub mod sync;
pub mod thread;
pub mod tma;

use crate::ir::Operand;
use crate::trace::Pred;

/// Whether an MMA adds into D: a trace-time `bool` or a runtime predicate.
#[derive(Clone, Copy, Debug)]
pub enum Accumulate {
    Static(bool),
    Runtime(Pred),
}

impl Accumulate {
    pub(crate) fn operand(self) -> Operand {
        match self {
            Accumulate::Static(b) => Operand::Imm(b as u64),
            Accumulate::Runtime(p) => Operand::Reg(p.reg()),
        }
    }
}

impl From<bool> for Accumulate {
    fn from(b: bool) -> Self {
        Accumulate::Static(b)
    }
}

impl From<Pred> for Accumulate {
    fn from(p: Pred) -> Self {
        Accumulate::Runtime(p)
    }
}
