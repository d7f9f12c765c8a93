//! The kernel IR: what a trace produces and what the PTX emitter and the CPU interpreter
//! consume. Nothing else crosses from the DSL to the back ends.
//!
//! # Rules
//! - A [`Kernel`] is one entry point: parameters, a typed register file, and a structured
//!   body of [`Stmt`]s. Control flow is structured: [`Stmt::If`] and [`Stmt::Loop`] only, so
//!   every thread that reaches a statement after an `If` or a `Loop` has reconverged.
//! - Registers are virtual and typed ([`Ty`]). The trace writes most registers once, in
//!   SSA style; the exceptions are explicit: a value merged out of an `If` is written by a
//!   `mov` at the end of each branch, a loop-carried value is written before the loop and at
//!   the end of the body, a predicated load first moves its default into its destination,
//!   and a wgmma accumulator is read and written in place by `wgmma.mma_async`.
//! - A register is used only where its first definition dominates the use (defined earlier
//!   in the same block or in an enclosing one). The tracer checks this as it records.
//! - Asynchronous operations and what completes them:
//!   `tcgen05.mma` -> `tcgen05.commit` -> an mbarrier phase, waited with
//!   `mbarrier.try_wait.parity`; `tcgen05.ld` -> `tcgen05.wait::ld`; `tcgen05.st` ->
//!   `tcgen05.wait::st`; `wgmma.mma_async` -> `wgmma.commit_group` -> `wgmma.wait_group`.
//!   Shared memory written by ordinary stores and read by tcgen05/wgmma needs
//!   `fence.proxy.async.shared::cta` and a barrier in between.
//! - Warp-collective ops (`shfl.sync`, `ldmatrix`, `stmatrix`, `tcgen05.ld`, `tcgen05.st`,
//!   `tcgen05.alloc`, `elect.sync`) are executed by every lane of the warp with the same
//!   control flow; `wgmma.*` by the 128
//!   threads of a warpgroup; `bar.sync`, `barrier.cluster.*` by every thread of the CTA /
//!   cluster (`.aligned`).
//! - Each op's meaning lives in one emitter arm (`emit::ptx`) and one interpreter arm
//!   (`interp`); both match exhaustively, so a new op fails to compile where unhandled.
//! - Each op's rules (operand types, shapes, immediates, the capabilities it needs) live in
//!   [`verify`], which both back ends run first.

pub mod alu;
pub mod cluster;
pub mod copy;
pub mod cvt;
pub mod mbarrier;
pub mod memory;
pub mod sync;
pub mod tcgen05;
pub mod text;
pub mod verify;
pub mod wgmma;

use std::fmt;

pub use alu::{AluOp, BinaryOp, CmpOp, Rounding, UnaryOp};
pub use cluster::{ArriveSemantics, ClusterOp};
pub use copy::{BulkWait, CopyOp};
pub use cvt::{Bf16x2Arith, CvtOp};
pub use mbarrier::MbarrierOp;
pub use memory::{AccessTy, AtomOrder, CacheHint, MemOp, Space};
pub use sync::{FenceKind, ShflMode, SpecialReg, SyncOp};
pub use tcgen05::Tcgen05Op;
pub use wgmma::WgmmaOp;

use crate::Target;
use crate::target::{Capabilities, Capability};

/// The type of a virtual register. Packed data (bf16x2, f16x2, e4m3x4, ...) lives in
/// untyped [`Ty::B32`] registers; the ops that read it say how they interpret it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Pred,
    B16,
    B32,
    U32,
    S32,
    U64,
    S64,
    F32,
}

impl Ty {
    /// Width in bits (a predicate counts as 1).
    pub fn bits(self) -> u32 {
        match self {
            Ty::Pred => 1,
            Ty::B16 => 16,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 => 32,
            Ty::U64 | Ty::S64 => 64,
        }
    }

    pub fn is_float(self) -> bool {
        self == Ty::F32
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Ty::S32 | Ty::S64)
    }

    /// The PTX type suffix (`u32`, `f32`, `pred`).
    pub fn ptx(self) -> &'static str {
        match self {
            Ty::Pred => "pred",
            Ty::B16 => "b16",
            Ty::B32 => "b32",
            Ty::U32 => "u32",
            Ty::S32 => "s32",
            Ty::U64 => "u64",
            Ty::S64 => "s64",
            Ty::F32 => "f32",
        }
    }
}

/// A virtual register: an index into [`Kernel::regs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(pub u32);

impl Reg {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A source operand: a register or an immediate whose bits the op's type interprets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    Reg(Reg),
    Imm(u64),
}

impl Operand {
    pub fn reg(self) -> Option<Reg> {
        match self {
            Operand::Reg(r) => Some(r),
            Operand::Imm(_) => None,
        }
    }
}

impl From<Reg> for Operand {
    fn from(r: Reg) -> Self {
        Operand::Reg(r)
    }
}

/// Where in the kernel source an op was traced (the DSL call's `#[track_caller]` location).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceLoc {
    pub file: &'static str,
    pub line: u32,
    pub column: u32,
}

impl SourceLoc {
    #[track_caller]
    pub fn caller() -> Self {
        let l = std::panic::Location::caller();
        SourceLoc {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Index into [`Kernel::stages`]: the stage comment in force when an op was traced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StageId(pub u32);

/// One operation with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    pub op: Op,
    pub loc: SourceLoc,
    pub stage: Option<StageId>,
}

/// The closed set of operations, one enum per hardware family.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Alu(AluOp),
    Cvt(CvtOp),
    Mem(MemOp),
    Copy(CopyOp),
    Sync(SyncOp),
    Mbarrier(MbarrierOp),
    Cluster(ClusterOp),
    Tcgen05(Tcgen05Op),
    Wgmma(WgmmaOp),
}

impl Op {
    /// Registers this op writes.
    pub fn defs(&self) -> Vec<Reg> {
        let mut out = Vec::new();
        self.visit_regs(&mut |r, is_def| {
            if is_def {
                out.push(r)
            }
        });
        out
    }

    /// Calls `f(reg, is_def)` for every register operand: uses first, then definitions.
    pub fn visit_regs(&self, f: &mut dyn FnMut(Reg, bool)) {
        match self {
            Op::Alu(op) => op.visit_regs(f),
            Op::Cvt(op) => op.visit_regs(f),
            Op::Mem(op) => op.visit_regs(f),
            Op::Copy(op) => op.visit_regs(f),
            Op::Sync(op) => op.visit_regs(f),
            Op::Mbarrier(op) => op.visit_regs(f),
            Op::Cluster(op) => op.visit_regs(f),
            Op::Tcgen05(op) => op.visit_regs(f),
            Op::Wgmma(op) => op.visit_regs(f),
        }
    }

    /// The targets this op exists on, and the PTX ISA version it needs on each.
    pub fn requirement(&self) -> Requirement {
        match self {
            Op::Alu(op) => op.requirement(),
            Op::Cvt(op) => op.requirement(),
            Op::Mem(op) => op.requirement(),
            Op::Copy(op) => op.requirement(),
            Op::Sync(op) => op.requirement(),
            Op::Mbarrier(op) => op.requirement(),
            Op::Cluster(op) => op.requirement(),
            Op::Tcgen05(op) => op.requirement(),
            Op::Wgmma(op) => op.requirement(),
        }
    }

    /// The op's PTX mnemonic, for messages (`tcgen05.mma`).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Alu(op) => op.name(),
            Op::Cvt(op) => op.name(),
            Op::Mem(op) => op.name(),
            Op::Copy(op) => op.name(),
            Op::Sync(op) => op.name(),
            Op::Mbarrier(op) => op.name(),
            Op::Cluster(op) => op.name(),
            Op::Tcgen05(op) => op.name(),
            Op::Wgmma(op) => op.name(),
        }
    }
}

pub(crate) fn visit_operand(o: &Operand, f: &mut dyn FnMut(Reg, bool)) {
    if let Operand::Reg(r) = o {
        f(*r, false)
    }
}

/// Where an op exists: the capabilities it needs and the PTX ISA version it appears in. A
/// target runs the op when it has every capability ([`crate::Target::capabilities`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub needs: Capabilities,
    /// Minimum PTX ISA version (major, minor).
    pub ptx: (u32, u32),
}

impl Requirement {
    /// Available on every target, from PTX `major.minor`.
    pub const fn all(major: u32, minor: u32) -> Self {
        Requirement {
            needs: Capabilities::NONE,
            ptx: (major, minor),
        }
    }

    /// Needs `cap`, from PTX `major.minor`.
    pub const fn with(cap: Capability, major: u32, minor: u32) -> Self {
        Requirement {
            needs: Capabilities::of(&[cap]),
            ptx: (major, minor),
        }
    }

    /// The same requirement, needing `cap` too.
    pub const fn and(self, cap: Capability) -> Self {
        Requirement {
            needs: self.needs.with(cap),
            ..self
        }
    }

    /// The capabilities it needs that `have` lacks (empty: the op exists there).
    pub const fn missing(&self, have: Capabilities) -> Capabilities {
        self.needs.minus(have)
    }

    pub const fn supports(&self, target: Target) -> bool {
        self.missing(target.capabilities()).is_empty()
    }
}

/// A structured statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Inst(Inst),
    /// Runs `then_body` in the threads where `cond` holds and `else_body` in the others.
    If {
        cond: Reg,
        then_body: Block,
        else_body: Block,
        loc: SourceLoc,
    },
    /// `loop { header; if !cond break; body }`, per thread.
    Loop {
        header: Block,
        cond: Reg,
        body: Block,
        loc: SourceLoc,
    },
    /// A stage comment (`// ---- 3: S = KV . Q^T`); later ops carry its [`StageId`].
    Stage(StageId),
    /// A free comment printed above the next op (shape notes, descriptor fields).
    Comment(String),
}

/// A sequence of statements.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
}

impl Block {
    /// Visits every instruction in execution-text order, nested blocks included.
    pub fn for_each_inst<'a>(&'a self, f: &mut dyn FnMut(&'a Inst)) {
        for stmt in &self.stmts {
            match stmt {
                Stmt::Inst(i) => f(i),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    then_body.for_each_inst(f);
                    else_body.for_each_inst(f);
                }
                Stmt::Loop { header, body, .. } => {
                    header.for_each_inst(f);
                    body.for_each_inst(f);
                }
                Stmt::Stage(_) | Stmt::Comment(_) => {}
            }
        }
    }
}

/// The element type of a tensor parameter, for host-side checks and the interpreter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemTy {
    U8,
    I32,
    I64,
    U32,
    F32,
    Bf16,
    E4m3,
}

impl ElemTy {
    pub fn bytes(self) -> usize {
        match self {
            ElemTy::U8 | ElemTy::E4m3 => 1,
            ElemTy::Bf16 => 2,
            ElemTy::I32 | ElemTy::U32 | ElemTy::F32 => 4,
            ElemTy::I64 => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ElemTy::U8 => "u8",
            ElemTy::I32 => "i32",
            ElemTy::I64 => "i64",
            ElemTy::U32 => "u32",
            ElemTy::F32 => "f32",
            ElemTy::Bf16 => "bf16",
            ElemTy::E4m3 => "e4m3",
        }
    }
}

/// How a kernel parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A 32- or 64-bit scalar by value.
    Scalar(Ty),
    /// A tensor: one `.param .align 8 .b8 name[8 + 16 * rank]` holding the device address,
    /// then `rank` i64 extents, then `rank` i64 strides in elements.
    Tensor { elem: ElemTy, rank: u8 },
    /// A TMA tensor map passed by value (`const __grid_constant__ CUtensorMap`):
    /// `.param .align 64 .b8 name[128]`, read only by the copy engine.
    TensorMap { elem: ElemTy, rank: u8 },
}

impl ParamKind {
    /// Bytes the parameter occupies in the parameter buffer.
    pub fn bytes(self) -> usize {
        match self {
            ParamKind::Scalar(ty) => (ty.bits() / 8) as usize,
            ParamKind::Tensor { rank, .. } => 8 + 16 * rank as usize,
            ParamKind::TensorMap { .. } => TENSOR_MAP_BYTES,
        }
    }

    pub fn align(self) -> usize {
        match self {
            ParamKind::Scalar(ty) => (ty.bits() / 8) as usize,
            ParamKind::Tensor { .. } => 8,
            ParamKind::TensorMap { .. } => TENSOR_MAP_ALIGN,
        }
    }
}

/// Bytes of a tensor-map parameter (`CUtensorMap`).
pub const TENSOR_MAP_BYTES: usize = 128;
/// The alignment of a tensor-map parameter: `CUtensorMap` is 64-byte aligned.
pub const TENSOR_MAP_ALIGN: usize = 64;

/// A kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

/// Byte offsets of a tensor parameter's fields.
pub mod tensor_param {
    pub const PTR: u32 = 0;
    pub fn extent(dim: usize) -> u32 {
        8 + 8 * dim as u32
    }
    pub fn stride(rank: usize, dim: usize) -> u32 {
        8 + 8 * rank as u32 + 8 * dim as u32
    }

    /// Packs a tensor parameter into `out` (at least `8 + 16 * rank` bytes), little-endian,
    /// as the kernel reads it: the address, then the extents, then the strides.
    pub fn write(out: &mut [u8], ptr: u64, extents: &[i64], strides: &[i64]) {
        let rank = extents.len();
        let mut put = |offset: u32, bytes: [u8; 8]| {
            out[offset as usize..][..8].copy_from_slice(&bytes);
        };
        put(PTR, ptr.to_le_bytes());
        for d in 0..rank {
            put(extent(d), extents[d].to_le_bytes());
            put(stride(rank, d), strides[d].to_le_bytes());
        }
    }
}

/// How the kernel must be launched, as far as the kernel itself fixes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchBounds {
    /// `.reqntid`: the exact block shape.
    pub threads: [u32; 3],
    /// `.minnctapersm`.
    pub min_ctas_per_sm: Option<u32>,
    /// `.maxnreg`.
    pub max_regs: Option<u32>,
    /// `.reqnctapercluster` (and `.explicitcluster`) when the cluster shape is fixed.
    pub cluster: Option<[u32; 3]>,
}

/// Registers of an SM's register file (Hopper and Blackwell).
pub const REGISTER_FILE: u32 = 64 * 1024;

impl LaunchBounds {
    /// The register count per thread at kernel entry, when the kernel fixes it: `.maxnreg`,
    /// or what ptxas pins for `.reqntid` with `.minnctapersm` (the register file split
    /// between the CTAs, rounded down to 8, at most 255). `setmaxnreg` moves warpgroups
    /// away from it and is ignored by ptxas without it.
    pub fn entry_registers(&self) -> Option<u32> {
        let threads = self.threads.iter().product::<u32>().max(1);
        self.max_regs.or_else(|| {
            self.min_ctas_per_sm
                .map(|m| (REGISTER_FILE / (threads * m.max(1)) / 8 * 8).min(255))
        })
    }
}

/// One named buffer of the dynamic shared memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemBuffer {
    pub name: String,
    pub offset: u32,
    pub bytes: u32,
    pub align: u32,
    /// The layout it was declared with, CuTe-printed, when it has one.
    pub layout: Option<String>,
}

/// A traced kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub target: Target,
    pub params: Vec<Param>,
    pub regs: Vec<Ty>,
    pub body: Block,
    pub stages: Vec<String>,
    pub launch: LaunchBounds,
    /// Bytes of dynamic shared memory the kernel uses (the launch must pass at least this).
    pub smem_bytes: u32,
    pub smem_buffers: Vec<SmemBuffer>,
}

impl Kernel {
    pub fn reg_ty(&self, r: Reg) -> Ty {
        self.regs[r.index()]
    }

    /// Threads per CTA.
    pub fn threads_per_cta(&self) -> u32 {
        self.launch.threads.iter().product()
    }

    /// The PTX ISA version the module needs: the target's minimum or the highest any op asks.
    pub fn ptx_version(&self) -> (u32, u32) {
        let mut v = self.target.min_ptx_version();
        self.body
            .for_each_inst(&mut |i| v = v.max(i.op.requirement().ptx));
        v
    }

    /// Total count of instructions (static, nested blocks included).
    pub fn inst_count(&self) -> usize {
        let mut n = 0;
        self.body.for_each_inst(&mut |_| n += 1);
        n
    }
}
