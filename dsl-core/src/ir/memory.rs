//! Loads and stores: parameters, global, shared (CTA and cluster), the shared-memory base,
//! and the global atomic add that orders CTAs of a grid.

use super::{Operand, Reg, Requirement, visit_operand};
use crate::target::Capability;

/// State space of an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// Global memory through a 64-bit address (already converted with `cvta.to.global`).
    Global,
    /// This CTA's shared memory through a 32-bit `shared::cta` address.
    Shared,
    /// Any CTA's shared memory in the cluster through a 32-bit `shared::cluster` address
    /// (from `mapa`).
    SharedCluster,
}

/// Cache behaviour of a global load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheHint {
    Default,
    /// `.nc`: the read-only (non-coherent) path; the data must not change during the kernel.
    NonCoherent,
}

/// The width of one element of an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessTy {
    U8,
    U16,
    B32,
    B64,
}

impl AccessTy {
    pub fn bytes(self) -> u32 {
        match self {
            AccessTy::U8 => 1,
            AccessTy::U16 => 2,
            AccessTy::B32 => 4,
            AccessTy::B64 => 8,
        }
    }

    pub fn ptx(self) -> &'static str {
        match self {
            AccessTy::U8 => "u8",
            AccessTy::U16 => "u16",
            AccessTy::B32 => "b32",
            AccessTy::B64 => "b64",
        }
    }
}

/// Memory-model semantics of an atomic (PTX `.relaxed` or `.acq_rel`, both at `.gpu` scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomOrder {
    /// Atomic only: orders nothing else.
    Relaxed,
    /// Releases the thread's earlier accesses (and, through a barrier before it, its CTA's)
    /// and acquires those released by the atomics it reads from: the last of a grid's CTAs
    /// to count itself in sees every other CTA's stores.
    AcqRel,
}

impl AtomOrder {
    pub fn ptx(self) -> &'static str {
        match self {
            AtomOrder::Relaxed => "relaxed",
            AtomOrder::AcqRel => "acq_rel",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum MemOp {
    /// `ld.param`: `bytes`-wide field at byte `offset` of parameter `param`.
    LdParam { dst: Reg, param: u32, offset: u32 },
    /// `cvta.to.global.u64`: generic -> global address.
    CvtaGlobal { dst: Reg, src: Reg },
    /// `mov.u32 dst, smem`: the shared::cta address of the dynamic shared memory.
    SmemBase { dst: Reg },
    /// `cvta.param.u64 dst, param`: the generic address of a parameter, for the tensor-map
    /// operand of TMA copies (a `__grid_constant__` map stays in parameter space).
    ParamAddress { dst: Reg, param: u32 },
    /// A load of `dst.len()` (1, 2 or 4) consecutive elements from `[addr + offset]`. With a
    /// predicate, a false predicate performs no access and leaves `dst` unchanged.
    Ld {
        space: Space,
        ty: AccessTy,
        dst: Vec<Reg>,
        addr: Operand,
        offset: i32,
        cache: CacheHint,
        pred: Option<Reg>,
    },
    /// A store of `src.len()` (1, 2 or 4) consecutive elements.
    St {
        space: Space,
        ty: AccessTy,
        src: Vec<Operand>,
        addr: Operand,
        offset: i32,
        pred: Option<Reg>,
    },
    /// `ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 {dst..}, [addr]`, N = `dst.len()`
    /// (1, 2 or 4): warp-collective; lanes `8 m ..+ 8` give the 16-byte row addresses of
    /// matrix `m`, and register `m` of lane `t` receives row `t / 4`, elements `2 (t % 4)`
    /// and `+ 1` of it (of its transpose with `trans`), the first in the low half.
    LdMatrix {
        dst: Vec<Reg>,
        addr: Operand,
        trans: bool,
    },
    /// `stmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 [addr], {src..}`: the inverse of
    /// [`MemOp::LdMatrix`], with the same lanes, rows and fragment.
    StMatrix {
        src: Vec<Reg>,
        addr: Operand,
        trans: bool,
    },
    /// `atom.order.gpu.global.add.u32 dst, [addr + offset], src`: each active lane in turn
    /// adds `src` to the u32 at its address; `dst` gets the value it replaced.
    AtomAdd {
        dst: Reg,
        addr: Operand,
        offset: i32,
        src: Operand,
        order: AtomOrder,
    },
}

impl MemOp {
    pub(crate) fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            MemOp::LdParam { dst, .. }
            | MemOp::SmemBase { dst }
            | MemOp::ParamAddress { dst, .. } => f(*dst, true),
            MemOp::CvtaGlobal { dst, src } => {
                f(*src, false);
                f(*dst, true);
            }
            MemOp::Ld {
                dst, addr, pred, ..
            } => {
                visit_operand(addr, f);
                if let Some(p) = pred {
                    f(*p, false);
                    // A predicated load may leave its destination as it was.
                    for d in dst {
                        f(*d, false);
                    }
                }
                for d in dst {
                    f(*d, true);
                }
            }
            MemOp::St {
                src, addr, pred, ..
            } => {
                visit_operand(addr, f);
                for s in src {
                    visit_operand(s, f);
                }
                if let Some(p) = pred {
                    f(*p, false);
                }
            }
            MemOp::LdMatrix { dst, addr, .. } => {
                visit_operand(addr, f);
                for d in dst {
                    f(*d, true);
                }
            }
            MemOp::StMatrix { src, addr, .. } => {
                visit_operand(addr, f);
                for s in src {
                    f(*s, false);
                }
            }
            MemOp::AtomAdd { dst, addr, src, .. } => {
                visit_operand(addr, f);
                visit_operand(src, f);
                f(*dst, true);
            }
        }
    }

    pub(crate) fn requirement(&self) -> Requirement {
        match self {
            MemOp::Ld {
                space: Space::SharedCluster,
                ..
            }
            | MemOp::St {
                space: Space::SharedCluster,
                ..
            } => Requirement::with(Capability::Cluster, 7, 8),
            MemOp::ParamAddress { .. } => Requirement::all(7, 7),
            MemOp::LdMatrix { .. } => Requirement::with(Capability::MatrixLdSt, 6, 5),
            MemOp::StMatrix { .. } => Requirement::with(Capability::MatrixLdSt, 7, 8),
            _ => Requirement::all(7, 0),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            MemOp::LdParam { .. } => "ld.param",
            MemOp::CvtaGlobal { .. } => "cvta.to.global",
            MemOp::SmemBase { .. } => "mov (smem base)",
            MemOp::ParamAddress { .. } => "cvta.param",
            MemOp::Ld { space, .. } => match space {
                Space::Global => "ld.global",
                Space::Shared => "ld.shared",
                Space::SharedCluster => "ld.shared::cluster",
            },
            MemOp::LdMatrix { .. } => "ldmatrix",
            MemOp::StMatrix { .. } => "stmatrix",
            MemOp::AtomAdd { .. } => "atom.global.add",
            MemOp::St { space, .. } => match space {
                Space::Global => "st.global",
                Space::Shared => "st.shared",
                Space::SharedCluster => "st.shared::cluster",
            },
        }
    }
}
